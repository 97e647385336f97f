"""CoreSight formatter frames → one :class:`~cstrace.capture.stream.Stream` per trace ID.

Input: a capture of 16-byte formatter frames (CoreSight Architecture
Specification, "Trace Formatter"): bytes 0..14 are ID or data bytes, byte 15 the
auxiliary flag byte. An even byte with bit 0 set is a new trace ID (bits 7..1);
with bit 0 clear it is data whose bit 0 comes from the flag byte. Odd bytes are
always data. When an ID byte changes the ID and its flag bit is set, the data
byte that follows still belongs to the previous ID. Byte 14 can only be an ID
(no data follows it in the frame) or data.

Capture indices follow OpenCSD: the data of one ID inside one frame forms a run
whose index is the frame start, or the position of the ID byte that started it,
and whose bytes are numbered consecutively from there.

Frames are walked one byte at a time by a small state machine
(:mod:`cstrace.capture.walk`, compiled with the other hot modules); NumPy finds
the frames of a TPIU capture (FSYNC and HSYNC patterns) and holds the results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cstrace.capture.stream import Stream
from cstrace.capture.walk import ID_BYTES, NONE, walk

__all__ = ["FRAME_SIZE", "CaptureIssue", "Demux", "demux_frames"]

FRAME_SIZE = 16
_BLOCK_FRAMES = 1 << 16
EMPTY_BLOCK_STOP = (
    "this frame hands a decoded trace ID an empty data block, which the reference "
    "decoder treats as fatal: decoding of the buffer stops after this frame"
)


@dataclass(frozen=True)
class CaptureIssue:
    """Something about the capture framing worth telling, at a byte offset.

    ``warning`` marks what is not a fault of the capture (such as where the reference
    decoder would stop); the rest are errors in the capture.
    """

    offset: int
    message: str
    warning: bool = False


@dataclass
class Demux:
    """The result of demultiplexing: streams per trace ID and any framing issues."""

    streams: dict[int, Stream]
    issues: list[CaptureIssue] = field(default_factory=list)
    frames: int = 0
    complete: bool = True
    """False when a fatal framing error stopped demultiplexing before the end."""


_NONE = NONE
_ID_BYTES = ID_BYTES


class _Unpacker:
    """Stateful frame unpacker: carries the current ID from one block to the next.

    The frames are walked one byte at a time (:func:`~cstrace.capture.walk.walk`,
    compiled): the
    rules are a small state machine on bytes, which whole-array operations only
    express through many passes over the data.

    The reference stops a capture at a frame whose byte 12 changes the ID with
    its flag bit set (so byte 13 still belongs to the old ID) and whose byte 14
    is an ID: its deformatter hands the new ID an empty data block there, which a
    decoder of that ID (one of ``stop_ids``) treats as fatal.
    """

    def __init__(
        self,
        only: int | None = None,
        stop_ids: frozenset[int] = frozenset(),
        *,
        count_only: bool = False,
    ) -> None:
        self.only = only
        self.counts: npt.NDArray[np.int64] | None = (
            np.zeros(256, dtype=np.int64) if count_only else None
        )
        """With ``count_only``: bytes per owner (trace IDs 0..127; 0xFF for ID bytes, flag
        bytes and data before any ID), and nothing unpacked."""
        self.frames = 0
        """Frames fed (up to the one that stopped the capture, if any)."""
        self.id_bytes = 0
        """With ``count_only``: ID bytes in those frames."""
        self.named = np.zeros(256, dtype=np.uint8)
        """Per trace ID: 1 when an ID byte of the frames fed names it."""
        self.stop_ids = stop_ids
        self._stops = np.zeros(256, dtype=np.uint8)
        self._stops[list(stop_ids)] = 1
        self.stopped_at: int | None = None
        """The capture index of the frame that stopped the capture, if one did."""
        self.current_id = _NONE
        # Per trace ID: data arrays, and run start positions/capture indices.
        self.values: dict[int, list[npt.NDArray[np.uint8]]] = {}
        self.run_pos: dict[int, list[npt.NDArray[np.int64]]] = {}
        self.run_idx: dict[int, list[npt.NDArray[np.int64]]] = {}
        self.length: dict[int, int] = {}

    def _pass(
        self,
        data: bytes,
        first: int,
        n: int,
        sof: npt.NDArray[np.int64],
        keep: npt.NDArray[np.uint8],
        wpos: npt.NDArray[np.int64],
        values: npt.NDArray[np.uint8],
        rpos: npt.NDArray[np.int64],
        runs: int,
    ) -> tuple[int, bool, int, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """One :func:`~cstrace.capture.walk.walk` from the current ID; returns the
        frames walked, whether the capture stops after them, the ID after them, and
        the run arrays (``runs`` long)."""
        run_pos = np.empty(runs, dtype=np.int64)
        run_idx = np.empty(runs, dtype=np.int64)
        out = walk(
            data, first, n, sof, self.current_id, keep, self._stops, self.named,
            wpos, wpos.copy(), values, rpos, run_pos, run_idx,
        )  # fmt: skip
        return out >> 9, bool(out & 0x100), out & 0xFF, run_pos, run_idx

    def feed_bytes(self, data: bytes, first: int, n: int, sof: npt.NDArray[np.int64]) -> None:
        """Unpack the ``n`` frames of ``data`` from byte ``first``; frame k's first byte
        is at capture index ``sof[k]``."""
        if n == 0 or self.stopped_at is not None:
            return
        if len(data) < first + 16 * n or sof.size < n:
            raise ValueError("frame data or indices shorter than the frames to walk")
        sof = np.ascontiguousarray(sof, dtype=np.int64)
        none = np.zeros(256, dtype=np.uint8)
        empty = np.zeros(0, dtype=np.uint8)
        if self.counts is not None:
            wpos = np.zeros(256, dtype=np.int64)
            rpos = np.zeros(256, dtype=np.int64)
            done, stop, cur, _, _ = self._pass(data, first, n, sof, none, wpos, empty, rpos, 0)
            ids = int(wpos[_ID_BYTES])
            wpos[_ID_BYTES] = 0
            wpos[_NONE] += ids
            self.counts += wpos
            self.id_bytes += ids
        elif self.only is not None:
            keep = none.copy()
            keep[self.only] = 1
            values = np.empty(15 * n, dtype=np.uint8)
            wpos = np.zeros(256, dtype=np.int64)
            rpos = np.zeros(256, dtype=np.int64)
            done, stop, cur, run_pos, run_idx = self._pass(
                data, first, n, sof, keep, wpos, values, rpos, 8 * n
            )
            got = int(rpos[self.only])
            if got:
                self._add(self.only, values[: wpos[self.only]], run_pos[:got], run_idx[:got])
        else:
            # Count first, so that every trace ID's bytes and runs go to a part of
            # one array of the right size.
            wpos = np.zeros(256, dtype=np.int64)
            rpos = np.zeros(256, dtype=np.int64)
            done, _, _, _, _ = self._pass(data, first, n, sof, none, wpos, empty, rpos, 0)
            keep = none.copy()
            keep[:128] = wpos[:128] > 0
            sizes = np.where(keep == 1, wpos, 0)
            nruns = np.where(keep == 1, rpos, 0)
            wbase = np.cumsum(sizes) - sizes
            rbase = np.cumsum(nruns) - nruns
            values = np.empty(int(sizes.sum()), dtype=np.uint8)
            wpos = wbase.copy()
            rpos = rbase.copy()
            done, stop, cur, run_pos, run_idx = self._pass(
                data, first, done, sof, keep, wpos, values, rpos, int(nruns.sum())
            )
            for tid in np.flatnonzero(keep).tolist():
                w, r = int(wbase[tid]), int(rbase[tid])
                self._add(
                    tid,
                    values[w : w + int(sizes[tid])],
                    run_pos[r : r + int(nruns[tid])],
                    run_idx[r : r + int(nruns[tid])],
                )
        self.current_id = cur
        self.frames += done
        if stop:
            self.stopped_at = int(sof[done - 1])

    def _add(
        self,
        tid: int,
        vals: npt.NDArray[np.uint8],
        positions: npt.NDArray[np.int64],
        indices: npt.NDArray[np.int64],
    ) -> None:
        base = self.length.get(tid, 0)
        if base:
            positions = positions + base
        self.values.setdefault(tid, []).append(vals)
        self.run_pos.setdefault(tid, []).append(positions)
        self.run_idx.setdefault(tid, []).append(indices)
        self.length[tid] = base + vals.size

    def take(self, tid: int) -> Stream | None:
        """The data of ``tid`` unpacked since the last ``take``, as a stream of its own."""
        values = self.values.pop(tid, None)
        if not values:
            return None
        run_pos = np.concatenate(self.run_pos.pop(tid))
        run_idx = np.concatenate(self.run_idx.pop(tid))
        run_pos -= run_pos[0]
        return Stream(tid, _joined(values), run_pos, run_idx)

    def streams(self) -> dict[int, Stream]:
        """The streams of all trace IDs seen so far."""
        out: dict[int, Stream] = {}
        for tid in sorted(self.values):
            run_pos = np.concatenate(self.run_pos[tid])
            run_idx = np.concatenate(self.run_idx[tid])
            out[tid] = Stream(tid, _joined(self.values[tid]), run_pos, run_idx)
        return out


def _joined(parts: list[npt.NDArray[np.uint8]]) -> bytes:
    """The byte arrays ``parts`` joined into one bytes object (one copy)."""
    if len(parts) == 1:
        return parts[0].tobytes()
    return np.concatenate(parts).tobytes()


_FSYNC = b"\xff\xff\xff\x7f"


class _Framing:
    """Sequential FSYNC/HSYNC framing from a frame boundary (the exact rules).

    Used for the stretches of a capture that the vectorised path does not take:
    those with HSYNCs inside frames, partial frames or misplaced FSYNCs.
    """

    def __init__(self, data: bytes, hsyncs: bool, issues: list[CaptureIssue]) -> None:
        self.data = data
        self.hsyncs = hsyncs
        self.issues = issues
        self.complete = True

    def run(
        self, pos: int, resume: npt.NDArray[np.int64], frames: bytearray, sofs: list[int]
    ) -> tuple[int, int | None]:
        """Frame from ``pos`` until the end, an error, or a position in ``resume``.

        ``resume`` holds the (ascending) segment starts. Returns the position reached
        and, when it is a segment start, that segment's number (to go on with);
        ``None`` when framing is over.
        """
        data = self.data
        n = len(data)
        first = True
        while pos < n:
            while data.startswith(_FSYNC, pos):
                pos += 4
            if not first:
                k = int(np.searchsorted(resume, pos))
                if k < resume.size and int(resume[k]) == pos:
                    return pos, k
            first = False
            if pos >= n:
                break
            frame = bytearray()
            sof = pos
            error = ""
            while len(frame) < FRAME_SIZE and pos < n:
                if len(frame) % 4 == 0 and data.startswith(_FSYNC, pos):
                    error = "FSYNC inside a frame"
                    break
                pair = data[pos : pos + 2]
                if pair == b"\xff\x7f":
                    if self.hsyncs:
                        pos += 2
                        continue
                    error = "HSYNC inside a frame of a capture without HSYNCs"
                    break
                frame += pair
                pos += 2
            if error:
                self.issues.append(CaptureIssue(pos, f"{error}: framing stopped here"))
                self.complete = False
                return pos, None
            if len(frame) < FRAME_SIZE:
                if frame:
                    self.issues.append(
                        CaptureIssue(sof, f"incomplete final frame ({len(frame)} bytes)")
                    )
                return pos, None
            frames += frame
            sofs.append(sof)
        return pos, None


def _fsync_frames(
    data: bytes, hsyncs: bool, issues: list[CaptureIssue]
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], bool]:
    """Strip FSYNC (and HSYNC) patterns of a TPIU/DSTREAM capture.

    Returns the frames, the capture index of each frame's first byte, and whether
    the whole capture was framed. As in the reference decoder, an FSYNC (or an
    unexpected HSYNC) inside a frame is a fatal framing error: framing stops there.

    Every FSYNC of the capture is found at once; the stretches between runs of
    FSYNCs that hold whole frames and no HSYNC are taken as they are, in bulk, and
    only the others go through the sequential rules.
    """
    a = np.frombuffer(data, dtype=np.uint8)
    n = a.size
    sevens = np.flatnonzero(a[1:] == 0x7F)  # HSYNC (FF 7F) candidates, by first byte
    hsync = sevens[a[sevens] == 0xFF]
    tail = hsync >= 2  # the HSYNC pattern that ends an FSYNC
    tail[tail] = (a[hsync[tail] - 1] == 0xFF) & (a[hsync[tail] - 2] == 0xFF)
    fs = hsync[tail] - 2
    hsync = hsync[~tail]
    empty = np.zeros((0, FRAME_SIZE), dtype=np.uint8), np.zeros(0, dtype=np.int64)
    if fs.size == 0:
        issues.append(CaptureIssue(0, "no frame synchronisation (FSYNC) found in the capture"))
        return *empty, False
    if fs[0] > 0:
        issues.append(CaptureIssue(0, f"{int(fs[0])} bytes before the first FSYNC were skipped"))

    # Runs of consecutive FSYNCs, and the segments between them: segment k runs
    # from the end of FSYNC run k to the start of run k+1 (or the end of the data).
    new_run = np.concatenate(([True], np.diff(fs) != 4))
    run_start = fs[new_run]
    run_end = np.concatenate((fs[np.flatnonzero(new_run)[1:] - 1], fs[-1:])) + 4
    seg_start = run_end
    seg_end = np.append(run_start[1:], n)
    length = seg_end - seg_start
    # Segments with an HSYNC pair inside, at a pair position (the parity of its start).
    clean = (length & (FRAME_SIZE - 1)) == 0
    seg_of = np.searchsorted(seg_start, hsync, side="right") - 1
    found = seg_of >= 0
    seg_of, at = seg_of[found], hsync[found]
    inside = (at <= seg_end[seg_of] - 2) & ((at - seg_start[seg_of]) % 2 == 0)
    clean[seg_of[inside]] = False

    windows = np.lib.stride_tricks.sliding_window_view(
        a if n >= FRAME_SIZE else np.zeros(FRAME_SIZE, dtype=np.uint8), FRAME_SIZE
    )
    pieces: list[npt.NDArray[np.uint8]] = []
    sof_pieces: list[npt.NDArray[np.int64]] = []
    framing = _Framing(data, hsyncs, issues)
    dirty = np.flatnonzero(~clean)
    k: int | None = 0
    segs = seg_start.size
    while k is not None and k < segs:
        later = dirty[np.searchsorted(dirty, k) :]
        stop = int(later[0]) if later.size else segs
        if stop > k:
            # Segments k .. stop-1: whole frames only, read as 16-byte windows.
            counts = length[k:stop] // FRAME_SIZE
            first = np.repeat(seg_start[k:stop] - FRAME_SIZE * (np.cumsum(counts) - counts), counts)
            first += FRAME_SIZE * np.arange(first.size, dtype=np.int64)
            pieces.append(windows[first])
            sof_pieces.append(first)
        if stop >= segs:
            break
        frames = bytearray()
        sofs: list[int] = []
        _, k = framing.run(int(seg_start[stop]), seg_start, frames, sofs)
        if frames:
            pieces.append(np.frombuffer(bytes(frames), dtype=np.uint8).reshape(-1, FRAME_SIZE))
            sof_pieces.append(np.array(sofs, dtype=np.int64))
    if not pieces:
        return *empty, framing.complete
    if len(pieces) == 1:
        return pieces[0], sof_pieces[0], framing.complete
    return np.concatenate(pieces), np.concatenate(sof_pieces), framing.complete


def demux_frames(
    data: bytes | bytearray | memoryview,
    *,
    fsyncs: bool = False,
    hsyncs: bool = False,
    base: int = 0,
    stop_ids: frozenset[int] = frozenset(),
) -> Demux:
    """Demultiplex a formatted capture into one stream per trace ID.

    ``fsyncs``: the capture holds FSYNC patterns (TPIU/DSTREAM) and is not frame
    aligned; ``hsyncs``: it also holds HSYNC half-word padding. Without either,
    the capture is a memory buffer of whole, aligned frames (ETB/ETR).
    """
    buf = bytes(data)
    issues: list[CaptureIssue] = []
    unpacker = _Unpacker(stop_ids=stop_ids)
    if fsyncs or hsyncs:
        frames, sof, complete = _fsync_frames(buf, hsyncs, issues)
        sof = sof + base
        count = frames.shape[0]
        flat = frames.tobytes()
        for start in range(0, count, _BLOCK_FRAMES):
            n = min(_BLOCK_FRAMES, count - start)
            unpacker.feed_bytes(flat, FRAME_SIZE * start, n, sof[start : start + n])
    else:
        whole = len(buf) // FRAME_SIZE
        if len(buf) % FRAME_SIZE:
            issues.append(
                CaptureIssue(
                    whole * FRAME_SIZE,
                    f"capture size {len(buf)} is not a multiple of {FRAME_SIZE}; "
                    f"{len(buf) % FRAME_SIZE} trailing bytes ignored",
                )
            )
        for start in range(0, whole, _BLOCK_FRAMES):
            n = min(_BLOCK_FRAMES, whole - start)
            sof = base + FRAME_SIZE * np.arange(start, start + n, dtype=np.int64)
            unpacker.feed_bytes(buf, FRAME_SIZE * start, n, sof)
        count = whole
        complete = True
    if unpacker.stopped_at is not None:
        issues.append(CaptureIssue(unpacker.stopped_at, EMPTY_BLOCK_STOP, warning=True))
        complete = False
    return Demux(unpacker.streams(), issues, count, complete)
