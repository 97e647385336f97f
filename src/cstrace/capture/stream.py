"""One trace ID's bytes after demultiplexing, with the capture offset of every byte.

A :class:`Stream` holds the data bytes of one trace source in order, and the
``Idx`` of each byte in the original capture, stored compactly as runs: run
``k`` starts at stream position ``run_pos[k]`` and its first byte has capture
index ``run_idx[k]``; the following bytes of the run have consecutive indices.
This is the index OpenCSD reports for packets (the index of a packet's first
byte), including its convention for bytes that follow an ID byte inside a frame.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["GatheredStream", "Stream", "WrappedStream"]


class Stream:
    """The demultiplexed bytes of one trace ID (or of a single-source capture)."""

    __slots__ = ("_pos_list", "_pos_of", "data", "run_idx", "run_pos", "trace_id")

    def __init__(
        self,
        trace_id: int | None,
        data: bytes,
        run_pos: npt.NDArray[np.int64] | None = None,
        run_idx: npt.NDArray[np.int64] | None = None,
        base: int = 0,
    ) -> None:
        self.trace_id = trace_id
        self.data = data
        if run_pos is None or run_idx is None:
            run_pos = np.zeros(1, dtype=np.int64)
            run_idx = np.full(1, base, dtype=np.int64)
        self.run_pos = run_pos
        self.run_idx = run_idx
        # run_pos as a list (for bisect), made on first use, and the array it was made of.
        self._pos_list: list[int] = []
        self._pos_of: object = None

    def _positions(self) -> list[int]:
        if self._pos_of is not self.run_pos:
            self._pos_list = self.run_pos.tolist()
            self._pos_of = self.run_pos
        return self._pos_list

    def __len__(self) -> int:
        return len(self.data)

    def offset_at(self, pos: int) -> int:
        """Capture index (``Idx``) of the byte at stream position ``pos``."""
        positions = self._positions()
        k = bisect_right(positions, pos) - 1
        if k < 0:
            k = 0
        return int(self.run_idx[k]) + pos - positions[k]

    def offsets(self) -> npt.NDArray[np.int64]:
        """Capture index of every byte, as an array (costs 8 bytes per byte)."""
        n = len(self.data)
        out = np.arange(n, dtype=np.int64)
        if n == 0:
            return out
        starts = self.run_pos
        lengths = np.diff(np.append(starts, n))
        out += np.repeat(self.run_idx - starts, lengths)
        return out

    def blocks(self) -> Iterator[Stream]:
        """The stream in pieces as the capture layer delivers them (here: all at once).

        A :class:`~cstrace.capture.lazy.LazyStream` yields one piece per capture
        block instead, so that readers consuming blocks keep memory flat.
        """
        yield self

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """Yield ``(capture index, bytes)`` for each run of consecutive indices."""
        positions = self._positions()
        ends = [*positions[1:], len(self.data)]
        for start, end, idx in zip(positions, ends, self.run_idx.tolist(), strict=True):
            if end > start:
                yield idx, self.data[start:end]

    def pieces(self, size: int) -> Iterator[Stream]:
        """The stream as consecutive pieces of at most ``size`` bytes, each with the capture
        index of its bytes (a reader fed the pieces one by one reads the same packets).

        The runs of each piece are found by binary search (a formatted stream has a
        run per 15 bytes or so: a loop over them would cost more than the reader)."""
        data = self.data
        n = len(data)
        if n <= size:
            yield self
            return
        run_pos = np.asarray(self.run_pos, dtype=np.int64)
        run_idx = np.asarray(self.run_idx, dtype=np.int64)
        for start in range(0, n, size):
            end = min(n, start + size)
            k = int(np.searchsorted(run_pos, start, side="right")) - 1  # the run of ``start``
            j = int(np.searchsorted(run_pos, end, side="left"))  # the first run after the piece
            pos = run_pos[k:j] - start
            idx = run_idx[k:j].copy()
            pos[0] = 0
            idx[0] = int(run_idx[k]) + start - int(run_pos[k])
            yield Stream(self.trace_id, data[start:end], pos, idx)

    @classmethod
    def from_chunks(cls, trace_id: int | None, chunks: list[tuple[int, bytes]]) -> Stream:
        """Build a stream from ``(capture index, bytes)`` pieces (used by tests and encoders)."""
        pos: list[int] = []
        idx: list[int] = []
        parts: list[bytes] = []
        total = 0
        for index, data in chunks:
            if not data:
                continue
            if pos and idx[-1] + (total - pos[-1]) == index:
                pass  # continues the previous run
            else:
                pos.append(total)
                idx.append(index)
            parts.append(data)
            total += len(data)
        if not pos:
            pos, idx = [0], [0]
        return cls(
            trace_id,
            b"".join(parts),
            np.array(pos, dtype=np.int64),
            np.array(idx, dtype=np.int64),
        )

    def __repr__(self) -> str:
        tid = "single" if self.trace_id is None else f"{self.trace_id:#x}"
        return f"Stream({tid}, {len(self.data)} bytes, {len(self.run_pos)} runs)"


class GatheredStream(Stream):
    """A stream read block by block (:meth:`blocks`) whose whole bytes and runs are
    gathered only when asked for (:meth:`_gather`, which a subclass writes)."""

    __slots__ = ()

    def _gather(self) -> Stream:
        """The whole stream, as one :class:`Stream` (made once, on first use)."""
        raise NotImplementedError

    @property
    def data(self) -> bytes:
        """All of the stream's bytes (gathered on first use)."""
        return self._gather().data

    @data.setter
    def data(self, value: bytes) -> None:
        self._gather().data = value

    @property
    def run_pos(self) -> npt.NDArray[np.int64]:
        """Stream positions where runs of consecutive capture indices start."""
        return self._gather().run_pos

    @run_pos.setter
    def run_pos(self, value: npt.NDArray[np.int64]) -> None:
        self._gather().run_pos = value

    @property
    def run_idx(self) -> npt.NDArray[np.int64]:
        """Capture index of the first byte of each run."""
        return self._gather().run_idx

    @run_idx.setter
    def run_idx(self, value: npt.NDArray[np.int64]) -> None:
        self._gather().run_idx = value

    def __len__(self) -> int:
        return len(self._gather())

    def __bool__(self) -> bool:
        # A truth test must not gather the whole stream (len() would).
        return True

    def offsets(self) -> npt.NDArray[np.int64]:
        """Capture index of every byte."""
        return self._gather().offsets()

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """``(capture index, bytes)`` for each run of consecutive indices."""
        return self._gather().chunks()

    def offset_at(self, pos: int) -> int:
        """Capture index of the byte at stream position ``pos``."""
        return self._gather().offset_at(pos)


class WrappedStream(GatheredStream):
    """A stream that stands for another: everything is the inner stream's, attributes of
    its own class included. Subclasses watch what a reader takes (``blocks``, ``data``)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Stream) -> None:
        # Deliberately not calling Stream.__init__: everything comes from ``inner``.
        self.trace_id = inner.trace_id
        self._inner = inner

    def _gather(self) -> Stream:
        """The inner stream."""
        return self._inner

    def blocks(self) -> Iterator[Stream]:
        """The inner stream's blocks."""
        return self._inner.blocks()

    def __getattr__(self, name: str) -> Any:
        # What a stream class of its own adds (a trace-port capture's ``fmt``...).
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inner!r})"
