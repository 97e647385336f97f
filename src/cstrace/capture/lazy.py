"""Streams demultiplexed block by block, so memory stays flat as captures grow.

Input: a function that yields a capture's bytes in blocks (read from the trace
buffer files as they are needed) and the capture format; output: a
:class:`LazyStream` per trace ID. Iterating ``stream.blocks()`` reads and
demultiplexes the capture one block (1 MiB of frames) at a time and yields this
trace ID's part of each block as a small :class:`Stream`, so a reader that
consumes blocks holds only one block in memory, whatever the size of the capture.

Each lazy stream makes its own pass over the capture. Demultiplexing is cheap
next to decoding, so decoding k trace IDs at the price of k passes keeps every
pass independent (and each trace ID could be decoded in its own process).

Readers that need the whole stream at once still work: reading ``data``,
``run_pos`` or ``run_idx`` of a lazy stream gathers its blocks (once) into one
stream, whose size is then that of the trace ID's data, not of the capture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cstrace.capture.formatter import FRAME_SIZE, _Unpacker
from cstrace.capture.stream import GatheredStream, Stream

__all__ = [
    "BLOCK_SIZE",
    "FrameBytes",
    "FrameScan",
    "LazyStream",
    "ReadBlocks",
    "count_frame_bytes",
    "find_empty_block_stop",
    "scan_frames",
]

BLOCK_SIZE = 1 << 20
"""Bytes read and demultiplexed at a time (a multiple of the 16-byte frame)."""

ReadBlocks = Callable[[], Iterator[bytes]]
"""Returns an iterator over the capture's bytes, in consecutive blocks of any size."""


def _aligned(read: ReadBlocks, unit: int, size: int) -> Iterator[tuple[int, bytes]]:
    """Re-cut the capture into blocks of ``size`` bytes (a multiple of ``unit``), with offsets."""
    pending = b""
    offset = 0
    for piece in read():
        pending += piece
        if len(pending) < size:
            continue
        cut = len(pending) - len(pending) % size
        for start in range(0, cut, size):
            yield offset, pending[start : start + size]
            offset += size
        pending = pending[cut:]
    whole = len(pending) - len(pending) % unit
    if whole:
        yield offset, pending[:whole]


@dataclass(frozen=True)
class FrameScan:
    """What one quick pass over a capture's frames found (:func:`scan_frames`)."""

    stop: int | None
    """The capture index of the first frame that stops the reference decoder, if any."""
    ids: frozenset[int]
    """The trace IDs that an ID byte names, up to that frame or the end: only these
    can have data (data before the first ID byte belongs to no ID)."""


def find_empty_block_stop(
    read: ReadBlocks, stop_ids: frozenset[int], block_size: int = BLOCK_SIZE
) -> int | None:
    """The capture index of the first frame that stops the reference decoder, if any
    (:attr:`FrameScan.stop`)."""
    return scan_frames(read, stop_ids, block_size).stop


def scan_frames(
    read: ReadBlocks, stop_ids: frozenset[int], block_size: int = BLOCK_SIZE
) -> FrameScan:
    """One pass over the frames of a capture: where the reference decoder stops, and
    which trace IDs can have data (nothing is read without ``stop_ids``).

    The reference stops at a frame whose byte 12 changes the ID to one of
    ``stop_ids`` with its flag bit set and whose byte 14 is an ID: it hands the
    new ID an empty data block there, which its decoders treat as fatal (see
    ``formatter._Unpacker``). This pass is the walk that demultiplexes, counting
    only. A trace ID no ID byte names needs no demultiplexing at all: its stream
    is empty.
    """
    if not stop_ids:
        return FrameScan(None, frozenset())
    unpacker = _Unpacker(stop_ids=stop_ids, count_only=True)
    for offset, data in _aligned(read, FRAME_SIZE, block_size - block_size % FRAME_SIZE):
        n = len(data) // FRAME_SIZE
        unpacker.feed_bytes(data, 0, n, offset + FRAME_SIZE * np.arange(n, dtype=np.int64))
        if unpacker.stopped_at is not None:
            break
    return FrameScan(unpacker.stopped_at, _ids(unpacker.named[:128].astype(bool)))


@dataclass(frozen=True)
class FrameBytes:
    """Where every byte of an ETB/ETR capture (aligned 16-byte frames) went
    (:func:`count_frame_bytes`): the parts add up to :attr:`size`."""

    size: int
    """The capture's bytes."""
    data: dict[int, int]
    """Data bytes per trace ID (reserved IDs included: 0x00 is the null ID of padding,
    0x70-0x7F are reserved)."""
    no_id: int
    """Data bytes before the first ID byte: they belong to no trace ID."""
    overhead: int
    """ID bytes and flag bytes: the frames' own."""
    stopped_at: int | None
    """The capture index of the frame where the reference stops, if one does."""
    after_stop: int
    """Bytes after that frame: not demultiplexed."""
    trailing: int
    """Bytes after the last whole frame."""


def count_frame_bytes(
    read: ReadBlocks,
    size: int,
    stop_ids: frozenset[int] = frozenset(),
    block_size: int = BLOCK_SIZE,
) -> FrameBytes:
    """Count, in one pass over the frames, the data bytes of every trace ID, the frames'
    own bytes and what comes after the reference's stop (see :class:`FrameBytes`)."""
    unpacker = _Unpacker(stop_ids=stop_ids, count_only=True)
    for offset, data in _aligned(read, FRAME_SIZE, block_size - block_size % FRAME_SIZE):
        n = len(data) // FRAME_SIZE
        unpacker.feed_bytes(data, 0, n, offset + FRAME_SIZE * np.arange(n, dtype=np.int64))
        if unpacker.stopped_at is not None:
            break
    counts = unpacker.counts
    assert counts is not None
    per_id = {int(t): int(counts[t]) for t in np.flatnonzero(counts[:128])}
    whole = size - size % FRAME_SIZE
    done = unpacker.frames * FRAME_SIZE
    overhead = unpacker.frames + unpacker.id_bytes
    return FrameBytes(
        size=size,
        data=per_id,
        no_id=int(counts[0xFF]) - overhead,
        overhead=overhead,
        stopped_at=unpacker.stopped_at,
        after_stop=whole - done,
        trailing=size - whole,
    )


def _ids(named: npt.NDArray[np.bool_]) -> frozenset[int]:
    return frozenset(int(i) for i in np.flatnonzero(named))


class LazyStream(GatheredStream):
    """The stream of one trace ID of an aligned-frame or single-source capture, read lazily."""

    __slots__ = ("_full", "_read", "_single", "block_size", "stop_ids")

    def __init__(
        self,
        trace_id: int | None,
        read: ReadBlocks,
        *,
        block_size: int = BLOCK_SIZE,
        stop_ids: frozenset[int] = frozenset(),
    ) -> None:
        # Deliberately not calling Stream.__init__: data and runs are gathered on demand.
        self.trace_id = trace_id
        self._read = read
        self._single = trace_id is None
        self.block_size = block_size - block_size % FRAME_SIZE
        self._full: Stream | None = None
        self.stop_ids = stop_ids

    def blocks(self) -> Iterator[Stream]:
        """This trace ID's data, one capture block at a time (each block a small stream)."""
        if self._full is not None:
            yield self._full
            return
        if self._single:
            for offset, data in _aligned(self._read, 1, self.block_size):
                yield Stream(None, data, base=offset)
            return
        unpacker = _Unpacker(only=self.trace_id, stop_ids=self.stop_ids)
        tid = self.trace_id
        assert tid is not None
        for offset, data in _aligned(self._read, FRAME_SIZE, self.block_size):
            n = len(data) // FRAME_SIZE
            unpacker.feed_bytes(data, 0, n, offset + FRAME_SIZE * np.arange(n, dtype=np.int64))
            piece = unpacker.take(tid)
            if piece is not None:
                yield piece
            if unpacker.stopped_at is not None:
                return

    def _gather(self) -> Stream:
        if self._full is None:
            parts = list(self.blocks())
            if not parts:
                self._full = Stream(self.trace_id, b"")
            elif len(parts) == 1:
                self._full = parts[0]
            else:
                base = 0
                pos: list[npt.NDArray[np.int64]] = []
                for p in parts:
                    pos.append(p.run_pos + base)
                    base += len(p.data)
                self._full = Stream(
                    self.trace_id,
                    b"".join(p.data for p in parts),
                    np.concatenate(pos),
                    np.concatenate([p.run_idx for p in parts]),
                )
        return self._full

    def __repr__(self) -> str:
        tid = "single" if self.trace_id is None else f"{self.trace_id:#x}"
        state = "gathered" if self._full is not None else "lazy"
        return f"LazyStream({tid}, {state})"
