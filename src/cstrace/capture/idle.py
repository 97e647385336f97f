"""Long runs of idle bytes (0x00) taken out of a stream, so that they cost what finding them costs.

Input: a :class:`~cstrace.capture.stream.Stream` (one trace ID's bytes, with their
capture indices) and a period; output: an :class:`IdleSkipped` stream that gives
the same blocks, except that of every run of at least :data:`IDLE_MIN` zero bytes
only the first and the last :data:`IDLE_KEEP` bytes are left, and a few more so
that what is taken out is a multiple of the period (the capture indices of what
follows are unchanged: the run just has a gap). :attr:`IdleSkipped.skipped` says
how many bytes were taken out. Runs are followed across blocks (one block is
looked ahead), so a run as long as the capture costs what scanning it costs.

A buffer that was never filled, the tail of a trace buffer after a flush, an
unused TRBE or ETR area: these read as long runs of zeros, and every protocol
reader handles such a run byte by byte (an A-sync being assembled, one-byte
unsynchronised pieces, NULL nibbles), at Python speed. The middle of a long run
makes no element: what a reader and decoder make of a run depends on its first
and last bytes and on its length modulo the size of the pieces the reader cuts
zeros into (an ETMv4 bad A-sync every 12 bytes, a PTM pad of 11, unsynchronised
pieces of 8 or 16): the period a protocol gives (``ProtocolSpec.idle_zeros``).
So the element path (rows, elements, batches) reads the stream through this
filter, while a listing of the packets reads every byte, as the reference prints
them. ``tests/unit/test_idle.py`` checks, per protocol, that the elements are
the same with and without the filter.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

from cstrace.capture.stream import Stream, WrappedStream

__all__ = ["IDLE_KEEP", "IDLE_MIN", "IdleSkipped"]

IDLE_KEEP = 64
"""Zero bytes kept at each end of a long run."""

IDLE_MIN = 4096
"""The shortest run of zero bytes whose middle is taken out."""

_ZEROS = bytes(1 << 16)
_SEED = _ZEROS[:256]
"""Every run of at least IDLE_MIN zeros holds this: what a search looks for first (a
substring search skips through ordinary trace at memory speed)."""


def _all_zero(data: bytes, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` is all zeros (at most 64 KiB: one memory comparison)."""
    return data[start:end] == _ZEROS[: end - start]


def zero_end(data: bytes, pos: int) -> int:
    """The first position at or after ``pos`` whose byte is not zero (``len(data)`` if none)."""
    n = len(data)
    step = 64
    while pos < n:
        end = min(n, pos + step)
        if _all_zero(data, pos, end):
            pos = end
            step = min(2 * step, len(_ZEROS))
            continue
        while end - pos > 16:
            mid = (pos + end) // 2
            if _all_zero(data, pos, mid):
                pos = mid
            else:
                end = mid
        while not data[pos]:
            pos += 1
        return pos
    return n


def zero_start(data: bytes, end: int) -> int:
    """The first position of the run of zeros that ends at ``end`` (``end`` if none)."""
    step = 64
    while end > 0:
        start = max(0, end - step)
        if _all_zero(data, start, end):
            end = start
            step = min(2 * step, len(_ZEROS))
            continue
        while end - start > 16:
            mid = (start + end) // 2
            if _all_zero(data, mid, end):
                end = mid
            else:
                start = mid
        while data[end - 1] == 0:
            end -= 1
        return end
    return 0


def _runs(data: bytes, pos: int) -> Iterator[tuple[int, int]]:
    """The runs of at least IDLE_MIN zeros in ``data`` from ``pos`` on, as (start, end)."""
    while True:
        hit = data.find(_SEED, pos)
        if hit < 0:
            return
        start = zero_start(data, hit) if hit > pos else hit
        start = max(start, pos)
        end = zero_end(data, hit + len(_SEED))
        if end - start >= IDLE_MIN:
            yield start, end
        pos = end


def _kept(block: Stream, cuts: list[tuple[int, int]]) -> Stream:
    """``block`` without the stream positions ``[start, end)`` of ``cuts`` (in order)."""
    data = block.data
    n = len(data)
    positions = block.run_pos.tolist()
    indices = block.run_idx.tolist()
    ends = [*positions[1:], n]
    keep: list[tuple[int, int]] = []
    at = 0
    for start, end in cuts:
        keep.append((at, start))
        at = end
    keep.append((at, n))
    chunks: list[tuple[int, bytes]] = []
    for a, b in keep:
        k = max(0, bisect_right(positions, a) - 1)
        while k < len(positions) and positions[k] < b:
            s = max(a, positions[k])
            e = min(b, ends[k])
            if e > s:
                chunks.append((indices[k] + s - positions[k], data[s:e]))
            k += 1
    return Stream.from_chunks(block.trace_id, chunks)


class IdleSkipped(WrappedStream):
    """A stream whose long runs of zeros have their middle taken out, in multiples of
    ``period`` bytes."""

    __slots__ = ("period", "skipped")

    def __init__(self, inner: Stream, period: int = 1) -> None:
        super().__init__(inner)
        self.period = max(1, period)
        self.skipped = 0
        """Bytes taken out so far (of the blocks given)."""

    def blocks(self) -> Iterator[Stream]:
        """The inner stream's blocks, long runs of zeros shortened."""
        before = 0  # zeros of a run that goes on from the blocks already given
        pending: Stream | None = None
        for block in self._inner.blocks():
            if not len(block.data):
                continue
            if pending is not None:
                yield self._shorten(pending, before, block.data[0] == 0)
                before = _run_at_end(pending.data, before)
            pending = block
        if pending is not None:
            yield self._shorten(pending, before, False)

    def _shorten(self, block: Stream, before: int, goes_on: bool) -> Stream:
        """``block`` with its long runs shortened; ``before`` zeros of a run end just before
        it, and the run at its end goes on in the next block when ``goes_on``."""
        data = block.data
        n = len(data)
        period = self.period
        cuts: list[tuple[int, int]] = []

        def cut(start: int, end: int, head: int, tail: int) -> None:
            drop = (end - start - head - tail) // period * period
            if drop > 0:
                cuts.append((start + head, start + head + drop))

        lead = zero_end(data, 0)
        pos = 0
        if before and lead:
            # a run that began in an earlier block: its head is kept there already
            run = before + lead
            if lead == n and goes_on:
                if run >= IDLE_MIN:
                    cut(0, n, max(0, IDLE_KEEP - before), 0)
            elif run >= IDLE_MIN:
                cut(0, lead, max(0, IDLE_KEEP - before), IDLE_KEEP)
            pos = lead
        for start, end in _runs(data, pos):
            cut(start, end, IDLE_KEEP, 0 if end == n and goes_on else IDLE_KEEP)
        if not cuts:
            return block
        self.skipped += sum(e - s for s, e in cuts)
        return _kept(block, cuts)


def _run_at_end(data: bytes, before: int) -> int:
    """Zeros at the end of ``data`` (with the ``before`` zeros of a run going on into it,
    when it is nothing but zeros)."""
    start = zero_start(data, len(data))
    return len(data) - start + (before if start == 0 else 0)
