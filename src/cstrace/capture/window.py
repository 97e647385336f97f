"""A packet reader's view of a stream delivered in blocks.

Input: a :class:`~cstrace.capture.stream.Stream`, whose ``blocks()`` yields the
trace ID's data one capture block at a time (a
:class:`~cstrace.capture.lazy.LazyStream` reads and demultiplexes the capture
1 MiB at a time; a plain stream yields itself once). Output: a
:class:`BlockWindow`, the bytes a reader works on now: the bytes it kept from
earlier blocks (a packet cut by a block boundary) followed by the next block,
with the run information (``run_pos``/``run_idx`` as Python lists) of exactly
those bytes.

A reader loops over ``window.data`` with locals, as it would over a whole
stream, and calls :meth:`BlockWindow.advance` only at the end of the window,
keeping the bytes of an unfinished packet. ``window.final`` says whether more
blocks follow, so end-of-trace handling happens only at the true end. Memory is
then one or two blocks, however long the capture.

Runs are kept as the blocks give them, except that a block whose first byte
continues the kept bytes' last run (consecutive capture indices) extends that
run: a run is then the same whether or not the capture layer cut it. (Formatter
runs never cross a frame and lazy blocks are whole frames, so this only joins
the pieces of an unformatted capture, or of a stream cut at arbitrary places.)
Readers that emulate the reference's input blocks from the runs (PTM, ETMv3)
rely on this.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

from cstrace.capture.stream import Stream

__all__ = ["BlockWindow", "IndexCursor"]


class BlockWindow:
    """The bytes of a stream a reader sees now: kept bytes, then the next block."""

    __slots__ = (
        "_blocks",
        "_next",
        "_peeked",
        "data",
        "first_run",
        "run_idx",
        "run_pos",
        "start",
    )

    def __init__(self, stream: Stream) -> None:
        self._blocks: Iterator[Stream] = iter(stream.blocks())
        self.data = b""
        """The window's bytes."""
        self.run_pos: list[int] = [0]
        """Window positions where runs of consecutive capture indices start."""
        self.run_idx: list[int] = [0]
        """Capture index of the first byte of each run."""
        self.start = 0
        """Stream position of ``data[0]``."""
        self.first_run = 0
        """Number (in the whole stream, from 0) of the run holding ``data[0]``."""
        self._next: Stream | None = None
        self._peeked = False

    def _pull(self) -> Stream | None:
        for block in self._blocks:
            if block.data:
                return block
        return None

    @property
    def final(self) -> bool:
        """True when no block follows the window's bytes.

        Asking reads the next block ahead; a reader that only needs more bytes
        at the end of the window need not ask, and then holds one block at a time.
        """
        if not self._peeked:
            self._next = self._pull()
            self._peeked = True
        return self._next is None

    def advance(self, keep: int) -> bool:
        """Drop ``data[:keep]`` and append the next block; False (unchanged) when none is left."""
        block = self._next if self._peeked else self._pull()
        if block is None:
            self._next = None
            self._peeked = True
            return False
        data = self.data
        rp = self.run_pos
        ri = self.run_idx
        bpos: list[int] = block.run_pos.tolist()
        bidx: list[int] = block.run_idx.tolist()
        n = len(data)
        if keep >= n:
            nruns = len(rp) if n else 0
            self.first_run += nruns
            self.data = block.data
            self.run_pos = bpos
            self.run_idx = bidx
        else:
            k = max(bisect_right(rp, keep) - 1, 0)  # the run holding data[keep]
            pos = [0]
            idx = [ri[k] + keep - rp[k]]
            for j in range(k + 1, len(rp)):
                pos.append(rp[j] - keep)
                idx.append(ri[j])
            shift = n - keep
            if idx[-1] + shift - pos[-1] == bidx[0]:
                # the block goes on with the kept bytes' last run: one run, as if never cut
                bpos = bpos[1:]
                bidx = bidx[1:]
            pos.extend(p + shift for p in bpos)
            idx.extend(bidx)
            self.first_run += k
            self.data = data[keep:] + block.data
            self.run_pos = pos
            self.run_idx = idx
        self.start += min(keep, n)
        self._next = None
        self._peeked = False
        return True

    def index_at(self, pos: int) -> int:
        """Capture index of the byte at window position ``pos``."""
        rp = self.run_pos
        k = max(bisect_right(rp, pos) - 1, 0)
        return self.run_idx[k] + pos - rp[k]

    def cursor(self, pos: int = 0) -> IndexCursor:
        """An :class:`IndexCursor` over the window's current bytes, placed at ``pos``."""
        return IndexCursor(self.run_pos, self.run_idx, len(self.data), pos)


class IndexCursor:
    """Capture indices (OpenCSD's ``Idx``) of window positions asked for in increasing order.

    This is the one place where readers turn a position in the bytes they
    read into the capture index of that byte. Inside one run of consecutive
    capture indices the index is ``base + pos``; ``limit`` is the first
    position past that run. A hot loop may inline the common case::

        idx = cur.base + p if p < cur.limit else cur.at(p)

    and :meth:`at` moves to the run holding ``p`` otherwise. Positions may not
    go backwards past the current run (:meth:`at` then searches from the start).
    """

    __slots__ = ("_end", "_idx", "_k", "_pos", "base", "limit")

    def __init__(self, run_pos: list[int], run_idx: list[int], end: int, pos: int = 0) -> None:
        self._pos = run_pos
        self._idx = run_idx
        self._end = end
        self._k = 0
        self.base = run_idx[0] - run_pos[0] if run_pos else 0
        """Capture index minus position, inside the current run."""
        self.limit = run_pos[1] if len(run_pos) > 1 else end + 1
        """First position after the current run."""
        if pos:
            self.at(pos)

    def at(self, p: int) -> int:
        """The capture index of the byte at position ``p``."""
        if p >= self.limit:
            # Most often p is in the next run (a reader moving on by a packet),
            # and not its last: go there without a search.
            k = self._k + 1
            rp = self._pos
            if k + 1 >= len(rp):
                return self._find(p)
            nxt = rp[k + 1]
            if p < nxt:
                self._k = k
                self.limit = nxt
                base = self.base = self._idx[k] - rp[k]
                return base + p
        elif p >= self._pos[self._k]:
            return self.base + p
        return self._find(p)

    def _find(self, p: int) -> int:
        """:meth:`at` for a position outside the current and the next run."""
        rp = self._pos
        n = len(rp)
        # The last run starting at or before p (the first run for a p before it).
        k = max(bisect_right(rp, p, self._k if p >= rp[self._k] else 0) - 1, 0)
        self._k = k
        self.base = self._idx[k] - rp[k]
        self.limit = rp[k + 1] if k + 1 < n else self._end + 1
        return self.base + p

    @property
    def run(self) -> int:
        """Number of the current run in the window (0 for the first)."""
        return self._k
