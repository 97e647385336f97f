"""The decode session: a :class:`~cstrace.trace.Trace` → streams → packets → elements.

Input: a :class:`~cstrace.trace.Trace` (from any input adapter) and the names
of the buffers to decode; output: one :class:`SourceRun` per trace source in
each buffer, whose ``packets()``, ``elements()`` and ``batches()`` are lazy.

Each source's protocol is configured from its registers (``from_registers``);
its decoder reads code through the source's code memory
(:class:`~cstrace.memory.build.CodeMemories`). Trace IDs are independent once
demultiplexed, so each source is decoded on its own. A decoder that already
ran on an earlier buffer of the same session is *reset* rather than created
(its first ``NO_SYNC`` says ``reset-decoder``), as the reference decoder does
when it decodes several buffers in one run.

Problems are data: :attr:`BufferDecode.issues` (and :attr:`Session.issues`)
hold :class:`~cstrace.errors.Issue` records; decoders put
:class:`~cstrace.elements.Diagnostic` elements in their element stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from cstrace.capture import SINGLE_SOURCE_FORMATS, CaptureIssue, Demux, Stream, demux
from cstrace.capture.formatter import EMPTY_BLOCK_STOP, FRAME_SIZE
from cstrace.capture.idle import IdleSkipped
from cstrace.capture.lazy import FrameBytes, LazyStream, count_frame_bytes, scan_frames
from cstrace.elements import Element
from cstrace.errors import CstraceError, Issue, IssueKind, Severity
from cstrace.memory.build import CodeMemories
from cstrace.protocols import DecodeContext, DecodeOptions, Packet, ProtocolSpec, get_protocol
from cstrace.trace import Buffer, Source, Trace

if TYPE_CHECKING:
    from cstrace.batch import ElementBatch
    from cstrace.memory.locate import ImageLocator

__all__ = ["LAZY_FORMATS", "BufferDecode", "RunWatch", "Session", "SourceRun", "watching"]

LAZY_FORMATS = frozenset(("coresight", "source_data"))
"""Buffer formats decoded block by block (memory flat in the size of the capture)."""


def element_lists(elements: Iterable[Element], size: int = 4096) -> Iterator[list[Any]]:
    """``elements`` in lists of ``size`` (element rows of element objects only)."""
    acc: list[Any] = []
    for elem in elements:
        acc.append(elem)
        if len(acc) == size:
            yield acc
            acc = []
    if acc:
        yield acc


@dataclass
class SourceRun:
    """One trace source of one buffer, ready to decode."""

    buffer: Buffer
    source: Source
    protocol: ProtocolSpec
    config: Any
    trace_id: int
    packet_id: int
    """The ID the reference prints on packet lines: 0 for single-source (unformatted) data."""
    stream: Stream
    context: DecodeContext

    def packets(self) -> Iterator[Packet]:
        """The packets of this source's stream (every byte, as a listing shows them)."""
        return self.protocol.iter_packets(self.stream, self.config, self.context.complete)

    def elements(self, packets: Iterable[Packet] | None = None) -> Iterator[Element]:
        """The generic elements decoded from ``packets`` (by default, from
        :meth:`row_packets`)."""
        if packets is None:
            packets = self.row_packets()
        # The decoder drives its code memory (set_context, advance): nothing watches here.
        return self.protocol.iter_elements(packets, self.config, self.context)

    def row_stream(self) -> Stream:
        """The stream as the element path reads it: long runs of idle zero bytes
        shortened where the protocol allows it (``ProtocolSpec.idle_zeros``,
        :mod:`cstrace.capture.idle`: the same elements, at memory speed)."""
        idle = self.protocol.idle_zeros
        period = idle(self.stream, self.config) if idle is not None else 0
        return IdleSkipped(self.stream, period) if period else self.stream

    def row_packets(self) -> Iterator[Packet]:
        """The packets as :meth:`rows` and :meth:`elements` read them by default: those
        of :meth:`row_stream`, and a protocol may group some (ETMv4/ETE: atom packets in
        a row, as one :class:`~cstrace.protocols.etmv4.packets.AtomRun`)."""
        read = self.protocol.iter_row_packets or self.protocol.iter_packets
        return read(self.row_stream(), self.config, self.context.complete)

    def rows(self, packets: Iterable[Packet] | None = None) -> Iterator[list[Any]]:
        """The elements as lists of element rows (:mod:`cstrace.rows`), in order.

        From the decoder's own rows when its protocol makes them (no object per
        ``INSTR_RANGE``), else its element objects in lists. (Not through
        :meth:`elements`: a subclass that watches both sees each element once.)
        Without ``packets``, a protocol that reads and decodes a stream in one loop
        (``ProtocolSpec.iter_stream_rows``) does so.
        """
        if packets is None:
            fused = self.protocol.iter_stream_rows
            if fused is not None:
                return fused(self.row_stream(), self.config, self.context, None)
            packets = self.row_packets()
        make = self.protocol.iter_rows
        if make is None:
            return element_lists(self.protocol.iter_elements(packets, self.config, self.context))
        return make(packets, self.config, self.context)

    def batches(self, size: int = 65536) -> Iterator[ElementBatch]:
        """The elements as columnar batches of at most ``size`` rows (:mod:`cstrace.batch`)."""
        from cstrace.batch import batches_from_rows  # (NumPy columns: not every decode needs them)

        return batches_from_rows(self.rows(), self.trace_id, size)

    def run_fields(self) -> dict[str, Any]:
        """This run's own fields by name (those of :class:`SourceRun`, not of a subclass):
        what a wrapper that watches the run is made of, ``Wrapper(**run.run_fields(), ...)``."""
        return {f.name: getattr(self, f.name) for f in fields(SourceRun)}


@dataclass
class BufferDecode:
    """A demultiplexed buffer and the sources to decode in it."""

    buffer: Buffer
    demux: Demux
    runs: list[SourceRun]
    issues: list[Issue] = field(default_factory=list)
    """Problems with the buffer and its sources: errors first, then warnings."""
    decoded_ids: frozenset[int] = frozenset()
    """The trace IDs with a decoder (where the reference's stop depends on them)."""

    def capture_bytes(self) -> FrameBytes | None:
        """Where every byte of a formatted capture went: each trace ID's data (those
        without a source too), the frames' own bytes, what follows the reference's stop
        (:class:`~cstrace.capture.lazy.FrameBytes`; one more pass over an ETB/ETR
        capture). None for a single-source capture: all its bytes are the source's."""
        buffer = self.buffer
        if buffer.format in SINGLE_SOURCE_FORMATS:
            return None
        size = buffer.size()
        if buffer.format in LAZY_FORMATS:
            return count_frame_bytes(buffer.blocks, size, self.decoded_ids)
        # (TPIU, DSTREAM: demultiplexed at once, every trace ID's stream is at hand)
        data = {tid: len(s) for tid, s in self.demux.streams.items() if len(s)}
        return FrameBytes(size, data, 0, size - sum(data.values()), None, 0, 0)

    @property
    def errors(self) -> list[Issue]:
        """The errors among :attr:`issues` (the capture or a source cannot be decoded)."""
        return [i for i in self.issues if i.is_error]

    @property
    def warnings(self) -> list[Issue]:
        """The warnings among :attr:`issues`."""
        return [i for i in self.issues if not i.is_error]


def _merge(regs: dict[str, int], extra: dict[str, int] | None) -> dict[str, int]:
    return {**regs, **extra} if extra else regs


RunWatch = Callable[[SourceRun], SourceRun]
"""Something that follows a run as it is decoded: takes a run, gives the run to decode."""

_WATCHERS: ContextVar[tuple[RunWatch, ...]] = ContextVar("cstrace_run_watchers", default=())


@contextmanager
def watching(watch: RunWatch) -> Iterator[None]:
    """Within the block, every run a :class:`Session` opens is passed through ``watch``.

    For code that decodes through analyses it does not control: the command line
    counts what the trace lost (``LossCounter.watch``) while ``cstrace coverage``,
    ``timeline`` or ``query`` decode, and reports it after them.
    """
    token = _WATCHERS.set((*_WATCHERS.get(), watch))
    try:
        yield
    finally:
        _WATCHERS.reset(token)


class Session:
    """Decodes buffers of one trace, keeping decoder history and code memory."""

    def __init__(self, trace: Trace, options: DecodeOptions | None = None) -> None:
        self.trace = trace
        self.options = options or DecodeOptions()
        self.issues: list[Issue] = []
        """Every issue met so far (each reported once), in order."""
        self._reported: set[str] = set()
        self._used_ids: set[int] = set()
        self._states: dict[int, dict[str, Any]] = {}
        self.memories = CodeMemories(trace)
        """The code memory of each core, built when first needed."""
        self._memory_issues = 0

    def _issue_once(self, key: str, issue: Issue, out: list[Issue]) -> None:
        if key not in self._reported:
            self._reported.add(key)
            out.append(issue)
            self.issues.append(issue)

    def locator(self) -> ImageLocator:
        """Which image, and where in its file, an address of a process is (at a log time).

        Built once from the trace's event log and images
        (:class:`~cstrace.memory.locate.ImageLocator`); it shares the images the
        decoders read.
        """
        return self.memories.locator()

    def new_issues(self) -> list[Issue]:
        """Issues of code memory met since the last call (images missing, build IDs...)."""
        got = self.memories.issues[self._memory_issues :]
        self._memory_issues = len(self.memories.issues)
        self.issues.extend(got)
        return got

    def _at(self, buffer: Buffer, offset: int, message: str, severity: Severity) -> Issue:
        name, inner = buffer.where(offset)
        kind = IssueKind.CAPTURE if severity == Severity.ERROR else IssueKind.CAPTURE_STOP
        return Issue(severity, kind, message, name, offset=inner)

    def _lazy_demux(self, buffer: Buffer, decoded: frozenset[int]) -> Demux:
        """Streams that read and demultiplex the buffer block by block when decoded."""
        size = buffer.size()

        def read() -> Iterator[bytes]:
            return buffer.blocks()

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
        scan = scan_frames(read, decoded)
        stop = scan.stop
        if stop is not None:
            issues.append(CaptureIssue(stop, EMPTY_BLOCK_STOP, warning=True))
        # A trace ID that no ID byte names has no data: nothing to demultiplex for it.
        streams: dict[int, Stream] = {
            tid: LazyStream(tid, read, stop_ids=decoded) if tid in scan.ids else Stream(tid, b"")
            for tid in decoded
        }
        return Demux(streams, issues, size // FRAME_SIZE, stop is None)

    def _configure(
        self, buffer: Buffer, sources: list[Source], errors: list[Issue], notices: list[Issue]
    ) -> list[tuple[Source, ProtocolSpec, Any, int]]:
        configured: list[tuple[Source, ProtocolSpec, Any, int]] = []
        for source in sources:
            proto = get_protocol(source.protocol) if source.protocol else None
            if proto is None:
                text = (
                    f"{source.source_type or '?'} trace (source {source.name!r}) "
                    "is not decoded yet; skipped"
                )
                issue = Issue(Severity.WARNING, IssueKind.NOT_DECODED, text)
                self._issue_once(source.source_type.split(".")[0].upper(), issue, notices)
                continue
            regs = _merge(dict(source.registers), self.options.overrides.get(proto.name))
            try:
                config = proto.from_registers(regs, source.core, source.version)
            except CstraceError as exc:
                # As the reference does, a source that cannot be configured is skipped;
                # the other sources of the buffer are still decoded.
                errors.append(
                    Issue(
                        Severity.ERROR,
                        IssueKind.SOURCE_CONFIG,
                        f"{exc.message} (source {source.name!r} not decoded)",
                        exc.path or source.origin.path or None,
                        exc.line,
                    )
                )
                continue
            if proto.with_options is not None:
                config = proto.with_options(config, self.options)
            configured.append((source, proto, config, int(config.trace_id)))
        return configured

    def run_ids(self, buffer: Buffer) -> list[int]:
        """The trace IDs of the runs :meth:`open_buffer` would make for ``buffer``, in order.

        Configures the buffer's sources only: nothing is read, demultiplexed or
        built. Issues met on the way are not kept (ask a throwaway session: the
        first notice of a protocol not decoded is reported once per session).
        """
        sources = self.trace.sources_for(buffer)
        if buffer.format in SINGLE_SOURCE_FORMATS:
            sources = sources[:1]
        return [tid for _, _, _, tid in self._configure(buffer, sources, [], [])]

    def ids_with_data(self, buffer: Buffer) -> frozenset[int] | None:
        """The trace IDs of :meth:`run_ids` that can have data in ``buffer`` (an ID byte
        of its frames names them, before any frame that stops the decode), when one
        quick pass over an ETB/ETR capture tells; None for the other formats."""
        if buffer.format != "coresight":
            return None
        configured = frozenset(self.run_ids(buffer))

        def read() -> Iterator[bytes]:
            return buffer.blocks()

        return configured & scan_frames(read, configured).ids

    def runs(
        self, buffers: Sequence[str] | None = None, issues: list[Issue] | None = None
    ) -> Iterator[SourceRun]:
        """The runs of the trace's buffers (every one, or those named, in order), each
        buffer opened when it is reached.

        With ``issues``, each buffer's issues are added to it when it is opened, and
        those code memory met while a run was decoded once the caller is done with it.
        """
        names = list(buffers) if buffers is not None else [b.name for b in self.trace.buffers]
        for name in names:
            decoded = self.open_buffer(self.trace.buffer(name))
            if issues is not None:
                issues.extend(decoded.issues)
            for run in decoded.runs:
                yield run
                if issues is not None:
                    issues.extend(self.new_issues())

    def open_buffer(self, buffer: Buffer) -> BufferDecode:
        """Demultiplex ``buffer`` and prepare a run for each source it holds.

        ETB/ETR memory (``coresight``) and single-source buffers are read lazily:
        each trace ID's stream is demultiplexed block by block while it is
        decoded, so memory does not grow with the size of the capture.
        """
        notices: list[Issue] = []
        errors: list[Issue] = []
        sources = self.trace.sources_for(buffer)
        single = buffer.format in SINGLE_SOURCE_FORMATS
        if single:
            sources = sources[:1]
        if not sources:
            notices.append(
                Issue(
                    Severity.WARNING,
                    IssueKind.NO_SOURCE,
                    f"{buffer.name}: no trace source is associated with this buffer",
                )
            )
        configured = self._configure(buffer, sources, errors, notices)

        # The trace IDs with a decoder: the reference stops at an empty block for one.
        decoded = frozenset(tid for _, _, _, tid in configured) if not single else frozenset()
        if buffer.format in LAZY_FORMATS:
            empty = buffer.size() == 0
            result = self._lazy_demux(buffer, decoded)
        else:
            data = buffer.read()
            empty = not data
            result = demux(data, buffer.format, stop_ids=decoded)
        if empty:
            errors.insert(
                0,
                self._at(buffer, 0, f"trace buffer {buffer.name!r} is empty", Severity.ERROR),
            )
        for ci in result.issues:
            sev = Severity.WARNING if ci.warning else Severity.ERROR
            (notices if ci.warning else errors).append(self._at(buffer, ci.offset, ci.message, sev))

        runs: list[SourceRun] = []
        for source, proto, config, trace_id in configured:
            # No truth test on the stream: len() of a lazy stream would gather all its data.
            found = result.streams.get(0 if single else trace_id)
            stream = found if found is not None else Stream(None if single else trace_id, b"")
            who = buffer.context.pid if buffer.context is not None else None
            memory = (
                self.memories.for_source(source, buffer.time, who) if proto.uses_memory else None
            )
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
        for watch in _WATCHERS.get():
            runs = [watch(run) for run in runs]
        issues = errors + notices
        self.issues.extend(i for i in issues if i not in self.issues)
        return BufferDecode(buffer, result, runs, issues, decoded)
