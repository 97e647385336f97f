"""Streams delivered in blocks cut where a test chooses, to check block-wise readers.

Input: a :class:`~cstrace.capture.Stream` and cut positions; output: a stream
with the same bytes and capture indices whose ``blocks()`` yields it in pieces
cut at those positions (as a lazy capture stream yields one piece per capture
block). A reader must give the same packets whatever the cuts.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import pairwise

import numpy as np

from cstrace.capture.stream import Stream
from cstrace.protocols.base import Packet

__all__ = ["SplitStream", "frame_cuts", "packet_fields", "random_cuts"]


class SplitStream(Stream):
    """A stream whose ``blocks()`` yields it cut at the given positions."""

    __slots__ = ("cuts",)

    def __init__(self, stream: Stream, cuts: Iterable[int]) -> None:
        super().__init__(stream.trace_id, stream.data, stream.run_pos, stream.run_idx)
        n = len(stream.data)
        self.cuts = sorted({c for c in cuts if 0 < c < n})

    def piece(self, start: int, end: int) -> Stream:
        """Bytes ``start`` to ``end`` as a stream of their own (runs and indices kept)."""
        rp = self._positions()
        ri = self.run_idx
        k = max(bisect_right(rp, start) - 1, 0)
        stop = bisect_left(rp, end, k + 1)
        pos = np.array(rp[k:stop], dtype=np.int64) - start
        idx = ri[k:stop].copy()
        idx[0] += start - rp[k]
        pos[0] = 0
        return Stream(self.trace_id, self.data[start:end], pos, idx)

    def blocks(self) -> Iterator[Stream]:
        """The pieces between consecutive cuts."""
        bounds = [0, *self.cuts, len(self.data)]
        for start, end in pairwise(bounds):
            yield self.piece(start, end)


def random_cuts(n: int, count: int, seed: int) -> list[int]:
    """``count`` random cut positions in a stream of ``n`` bytes."""
    rng = random.Random(seed)
    return [rng.randrange(1, n) for _ in range(count)] if n > 1 else []


def frame_cuts(stream: Stream) -> list[int]:
    """A cut at every run start (for a formatted capture: every frame's share)."""
    return [int(p) for p in stream.run_pos.tolist()]


def packet_fields(packets: Iterable[Packet]) -> list[str]:
    """Every packet as text holding its type and all its fields (to compare readers)."""
    return [repr(p) for p in packets]
