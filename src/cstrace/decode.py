"""The decode pipeline for a snapshot: buffers → streams → packets → elements.

Input: a :class:`~cstrace.snapshot.Snapshot` and the names of the buffers to
decode; output: one :class:`SourceRun` per trace source in each buffer, whose
``packets()`` and ``elements()`` are lazy iterators.

Trace IDs are independent once demultiplexed, so each source is decoded on its
own. A decoder that already ran on an earlier buffer of the same session is
*reset* rather than created (its first ``NO_SYNC`` says ``reset-decoder``), as
the reference decoder does when it decodes several buffers in one run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cstrace.capture import SINGLE_SOURCE_FORMATS, CaptureIssue, Demux, Stream, demux
from cstrace.capture.formatter import EMPTY_BLOCK_STOP, FRAME_SIZE
from cstrace.capture.lazy import LazyStream, find_empty_block_stop
from cstrace.elements import Element
from cstrace.errors import CstraceError
from cstrace.memory import MemoryMap
from cstrace.protocols import DecodeContext, DecodeOptions, Packet, ProtocolSpec, find_protocol
from cstrace.snapshot.model import Snapshot, TraceBuffer, TraceSource

__all__ = ["LAZY_FORMATS", "BufferDecode", "Session", "SourceRun"]

LAZY_FORMATS = frozenset(("coresight", "source_data"))
"""Buffer formats decoded block by block (memory flat in the size of the capture)."""


@dataclass
class SourceRun:
    """One trace source of one buffer, ready to decode."""

    buffer: TraceBuffer
    source: TraceSource
    protocol: ProtocolSpec
    config: Any
    trace_id: int
    packet_id: int
    """The ID the reference prints on packet lines: 0 for single-source (unformatted) data."""
    stream: Stream
    context: DecodeContext

    def packets(self) -> Iterator[Packet]:
        """The packets of this source's stream."""
        return self.protocol.iter_packets(self.stream, self.config, self.context.complete)

    def elements(self, packets: Iterable[Packet] | None = None) -> Iterator[Element]:
        """The generic elements decoded from ``packets`` (by default, from ``packets()``)."""
        if packets is None:
            packets = self.packets()
        # The decoders drive the code memory themselves (set_context, advance).
        return self.protocol.iter_elements(packets, self.config, self.context)


@dataclass
class BufferDecode:
    """A demultiplexed buffer and the sources to decode in it."""

    buffer: TraceBuffer
    demux: Demux
    runs: list[SourceRun]
    notices: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Problems with the capture itself (empty, truncated, bad framing), one line each."""


class Session:
    """Decodes buffers of one snapshot, keeping decoder history and memory images."""

    def __init__(self, snapshot: Snapshot, options: DecodeOptions | None = None) -> None:
        self.snapshot = snapshot
        self.options = options or DecodeOptions()
        self.notices: list[str] = []
        self._reported: set[str] = set()
        self._used_ids: set[int] = set()
        self._states: dict[int, dict[str, Any]] = {}
        self._memory: dict[str, MemoryMap] = {}

    def _notice_once(self, key: str, message: str, out: list[str]) -> None:
        if key not in self._reported:
            self._reported.add(key)
            out.append(message)
            self.notices.append(message)

    def memory_for(self, source: TraceSource) -> MemoryMap:
        """The memory images of the core a source traces (cached per core)."""
        key = source.core.name if source.core is not None else ""
        mm = self._memory.get(key)
        if mm is None:
            warnings: list[str] = []
            mm = MemoryMap.from_devices(
                self.snapshot, self.snapshot.memory_devices(source.core), warnings
            )
            self._memory[key] = mm
        return mm

    def _where(self, buffer: TraceBuffer, offset: int) -> str:
        """Name the file of ``buffer`` holding capture ``offset``, and the offset in it."""
        tree = self.snapshot.tree
        start = 0
        for f in buffer.files:
            size = tree.size(f)
            if offset < start + size or f == buffer.files[-1]:
                return f"{tree.display(f)}: offset {offset - start:#x}"
            start += size
        return f"{buffer.name}: offset {offset:#x}"  # pragma: no cover - no files

    def _lazy_demux(self, buffer: TraceBuffer, decoded: frozenset[int]) -> Demux:
        """Streams that read and demultiplex the buffer block by block when decoded."""
        size = self.snapshot.buffer_size(buffer)
        snapshot = self.snapshot

        def read() -> Iterator[bytes]:
            return snapshot.iter_buffer(buffer)

        issues: list[CaptureIssue] = []
        if buffer.format == "source_data":
            return Demux({0: LazyStream(None, read)}, issues, 0, True)
        if size % FRAME_SIZE:
            whole = size - size % FRAME_SIZE
            issues.append(
                CaptureIssue(
                    whole,
                    f"capture size {size} is not a multiple of {FRAME_SIZE}; "
                    f"{size % FRAME_SIZE} trailing bytes ignored",
                )
            )
        stop = find_empty_block_stop(read, decoded)
        if stop is not None:
            issues.append(CaptureIssue(stop, EMPTY_BLOCK_STOP, warning=True))
        streams: dict[int, Stream] = {
            tid: LazyStream(tid, read, stop_ids=decoded) for tid in decoded
        }
        return Demux(streams, issues, size // FRAME_SIZE, stop is None)

    def open_buffer(self, buffer: TraceBuffer) -> BufferDecode:
        """Demultiplex ``buffer`` and prepare a run for each source it holds.

        ETB/ETR memory (``coresight``) and single-source buffers are read lazily:
        each trace ID's stream is demultiplexed block by block while it is
        decoded, so memory does not grow with the size of the capture.
        """
        notices: list[str] = []
        errors: list[str] = []
        sources = self.snapshot.sources_for(buffer)
        single = buffer.format in SINGLE_SOURCE_FORMATS
        if single:
            sources = sources[:1]
        if not sources:
            notices.append(f"{buffer.name}: no trace source is associated with this buffer")
        configured: list[tuple[TraceSource, ProtocolSpec, Any, int]] = []
        for source in sources:
            proto = find_protocol(source.device.device_type)
            if proto is None:
                self._notice_once(
                    source.device.protocol,
                    f"{source.device.device_type or '?'} trace (source {source.device.name!r}) "
                    "is not decoded yet; skipped",
                    notices,
                )
                continue
            try:
                config = proto.configure(source, self.options)
            except CstraceError as exc:
                # As the reference does, a source that cannot be configured is skipped;
                # the other sources of the buffer are still decoded.
                errors.append(f"{exc} (source {source.device.name!r} not decoded)")
                continue
            configured.append((source, proto, config, int(config.trace_id)))

        # The trace IDs with a decoder: the reference stops at an empty block for one.
        decoded = frozenset(tid for _, _, _, tid in configured) if not single else frozenset()
        if buffer.format in LAZY_FORMATS:
            empty = self.snapshot.buffer_size(buffer) == 0
            result = self._lazy_demux(buffer, decoded)
        else:
            data = self.snapshot.read_buffer(buffer)
            empty = not data
            result = demux(data, buffer.format, stop_ids=decoded)
        if empty:
            errors.insert(0, f"{self._where(buffer, 0)}: trace buffer {buffer.name!r} is empty")
        for issue in result.issues:
            text = f"{self._where(buffer, issue.offset)}: {issue.message}"
            (notices if issue.warning else errors).append(text)

        runs: list[SourceRun] = []
        for source, proto, config, trace_id in configured:
            # No truth test on the stream: len() of a lazy stream would gather all its data.
            found = result.streams.get(0 if single else trace_id)
            stream = found if found is not None else Stream(None if single else trace_id, b"")
            memory = self.memory_for(source) if proto.uses_memory else None
            # A trace package adds program images and its event log to the dumps.
            code_memory = getattr(self.snapshot, "code_memory", None)
            if memory is not None and code_memory is not None:
                memory = code_memory(source, memory)
            context = DecodeContext(
                trace_id=trace_id,
                options=self.options,
                memory=memory,
                reset=trace_id in self._used_ids,
                complete=result.complete,
                state=self._states.setdefault(trace_id, {}),
            )
            self._used_ids.add(trace_id)
            runs.append(
                SourceRun(
                    buffer,
                    source,
                    proto,
                    config,
                    trace_id,
                    0 if single else trace_id,
                    stream,
                    context,
                )
            )
        self.notices.extend(n for n in notices if n not in self.notices)
        return BufferDecode(buffer, result, runs, notices, errors)
