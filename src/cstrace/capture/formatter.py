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

Frames are unpacked with NumPy: each frame's layout (which slots are IDs, which
IDs change, the flag bits) is reduced to a small template, computed once per
distinct layout, and applied to all frames with that layout at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cstrace.capture.stream import Stream

__all__ = ["FRAME_SIZE", "CaptureIssue", "Demux", "demux_frames"]

FRAME_SIZE = 16
_BLOCK_FRAMES = 1 << 16
_NO_ID = -1
# Template owner codes: 0..7 = the ID byte in slot k, 8 = ID current at frame start,
# 9 = not a data byte.
_OWNER_IN = 8
_OWNER_NONE = 9


@dataclass(frozen=True)
class CaptureIssue:
    """Something wrong with the capture framing, at a byte offset."""

    offset: int
    message: str


@dataclass
class Demux:
    """The result of demultiplexing: streams per trace ID and any framing issues."""

    streams: dict[int, Stream]
    issues: list[CaptureIssue] = field(default_factory=list)
    frames: int = 0
    complete: bool = True
    """False when a fatal framing error stopped demultiplexing before the end."""


def _template(is_id: int, change: int, flags: int) -> tuple[list[int], list[int]]:
    """Owner code and index offset of frame positions 0..14, simulating the formatter."""
    owner = [_OWNER_NONE] * 15
    offset = [0] * 15
    cur = _OWNER_IN
    start = 0
    count = 0
    for i in range(0, 14, 2):
        s = i >> 1
        prev_and_change = False
        if (is_id >> s) & 1:
            if (change >> s) & 1:
                prev_and_change = bool((flags >> s) & 1)
                if prev_and_change:
                    owner[i + 1] = cur
                    offset[i + 1] = start + count
                    count += 1
                cur = s
                if count > 0:
                    start = i
                    count = 0
        else:
            owner[i] = cur
            offset[i] = start + count
            count += 1
        if not prev_and_change:
            owner[i + 1] = cur
            offset[i + 1] = start + count
            count += 1
    if (is_id >> 7) & 1:
        pass  # an ID in byte 14 only sets the ID for the next frame
    else:
        owner[14] = cur
        offset[14] = start + count
    return owner, offset


class _Unpacker:
    """Stateful frame unpacker: carries the current ID from one block to the next."""

    def __init__(self) -> None:
        self.current_id = _NO_ID
        self.templates: dict[int, int] = {}
        self.t_owner: list[list[int]] = []
        self.t_offset: list[list[int]] = []
        self.parts: dict[int, list[tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]]] = {}
        # Value-bit patterns: data value = byte | flag bit for even positions.
        self._even = np.arange(0, 15, 2)

    def _template_ids(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        uniq, inverse = np.unique(keys, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int64)
        for n, key in enumerate(uniq.tolist()):
            tid = self.templates.get(key)
            if tid is None:
                owner, offset = _template(key & 0xFF, (key >> 8) & 0xFF, (key >> 16) & 0xFF)
                tid = len(self.t_owner)
                self.templates[key] = tid
                self.t_owner.append(owner)
                self.t_offset.append(offset)
            ids[n] = tid
        return ids[inverse.reshape(-1)]

    def feed(self, frames: npt.NDArray[np.uint8], sof: npt.NDArray[np.int64]) -> None:
        """Unpack ``frames`` (n x 16), whose first bytes are at capture indices ``sof``."""
        n = frames.shape[0]
        if n == 0:
            return
        slots = frames[:, 0:15:2]  # n x 8: positions 0,2,...,14
        is_id = (slots & 1).astype(bool)
        idval = (slots >> 1).astype(np.int64)
        flat_is_id = is_id.ravel()
        positions = np.where(flat_is_id, np.arange(n * 8), -1)
        np.maximum.accumulate(positions, out=positions)
        flat_val = idval.ravel()
        cur_after = np.where(positions >= 0, flat_val[np.maximum(positions, 0)], self.current_id)
        prev_before = np.empty_like(cur_after)
        prev_before[0] = self.current_id
        prev_before[1:] = cur_after[:-1]
        change = flat_is_id & (flat_val != prev_before)
        cur_in = prev_before.reshape(n, 8)[:, 0]
        self.current_id = int(cur_after[-1])

        weights = (1 << np.arange(8)).astype(np.int64)
        id_mask = (is_id.astype(np.int64) * weights).sum(axis=1)
        change_mask = (change.reshape(n, 8).astype(np.int64) * weights).sum(axis=1)
        flags = frames[:, 15].astype(np.int64)
        keys = id_mask | (change_mask << 8) | (flags << 16)
        tids = self._template_ids(keys)

        t_owner = np.array(self.t_owner, dtype=np.int64)[tids]  # n x 15
        t_offset = np.array(self.t_offset, dtype=np.int64)[tids]
        id_table = np.empty((n, 10), dtype=np.int64)
        id_table[:, :8] = idval
        id_table[:, _OWNER_IN] = cur_in
        id_table[:, _OWNER_NONE] = _NO_ID
        owners = np.take_along_axis(id_table, t_owner, axis=1)

        values = frames[:, :15].copy()
        flag_bits = ((frames[:, 15:16] >> np.arange(8, dtype=np.uint8)) & 1).astype(np.uint8)
        values[:, 0:15:2] |= flag_bits
        idx = sof[:, None] + t_offset

        keep = owners.ravel() >= 0
        owners_k = owners.ravel()[keep]
        values_k = values.ravel()[keep]
        idx_k = idx.ravel()[keep]
        if owners_k.size == 0:
            return
        order = np.argsort(owners_k, kind="stable")
        owners_s = owners_k[order]
        bounds = np.flatnonzero(np.diff(owners_s)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [owners_s.size]))
        values_s = values_k[order]
        idx_s = idx_k[order]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            tid = int(owners_s[a])
            self.parts.setdefault(tid, []).append((values_s[a:b], idx_s[a:b]))

    def streams(self) -> dict[int, Stream]:
        out: dict[int, Stream] = {}
        for tid, parts in sorted(self.parts.items()):
            data = np.concatenate([p[0] for p in parts])
            idx = np.concatenate([p[1] for p in parts])
            if idx.size:
                brk = np.flatnonzero(np.diff(idx) != 1) + 1
                run_pos = np.concatenate(([0], brk)).astype(np.int64)
            else:
                run_pos = np.zeros(1, dtype=np.int64)
            run_idx = idx[run_pos] if idx.size else np.zeros(1, dtype=np.int64)
            out[tid] = Stream(tid, data.tobytes(), run_pos, run_idx.astype(np.int64))
        return out


def _fsync_frames(
    data: bytes, hsyncs: bool, issues: list[CaptureIssue]
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], bool]:
    """Strip FSYNC (and HSYNC) patterns of a TPIU/DSTREAM capture.

    Returns the frames, the capture index of each frame's first byte, and whether
    the whole capture was framed. As in the reference decoder, an FSYNC (or an
    unexpected HSYNC) inside a frame is a fatal framing error: framing stops there.
    """
    fsync = b"\xff\xff\xff\x7f"
    n = len(data)
    pos = data.find(fsync)
    empty = np.zeros((0, FRAME_SIZE), dtype=np.uint8), np.zeros(0, dtype=np.int64)
    if pos < 0:
        issues.append(CaptureIssue(0, "no frame synchronisation (FSYNC) found in the capture"))
        return *empty, False
    if pos > 0:
        issues.append(CaptureIssue(0, f"{pos} bytes before the first FSYNC were skipped"))
    frames = bytearray()
    sofs: list[int] = []
    complete = True
    while pos < n:
        while data.startswith(fsync, pos):
            pos += 4
        if pos >= n:
            break
        frame = bytearray()
        sof = pos
        error = ""
        while len(frame) < FRAME_SIZE and pos < n:
            if len(frame) % 4 == 0 and data.startswith(fsync, pos):
                error = "FSYNC inside a frame"
                break
            pair = data[pos : pos + 2]
            if pair == b"\xff\x7f":
                if hsyncs:
                    pos += 2
                    continue
                error = "HSYNC inside a frame of a capture without HSYNCs"
                break
            frame += pair
            pos += 2
        if error:
            issues.append(CaptureIssue(pos, f"{error}: framing stopped here"))
            complete = False
            break
        if len(frame) < FRAME_SIZE:
            if frame:
                issues.append(CaptureIssue(sof, f"incomplete final frame ({len(frame)} bytes)"))
            break
        frames += frame
        sofs.append(sof)
    arr = np.frombuffer(bytes(frames), dtype=np.uint8).reshape(-1, FRAME_SIZE)
    return arr, np.array(sofs, dtype=np.int64), complete


def demux_frames(
    data: bytes | bytearray | memoryview,
    *,
    fsyncs: bool = False,
    hsyncs: bool = False,
    base: int = 0,
) -> Demux:
    """Demultiplex a formatted capture into one stream per trace ID.

    ``fsyncs``: the capture holds FSYNC patterns (TPIU/DSTREAM) and is not frame
    aligned; ``hsyncs``: it also holds HSYNC half-word padding. Without either,
    the capture is a memory buffer of whole, aligned frames (ETB/ETR).
    """
    buf = bytes(data)
    issues: list[CaptureIssue] = []
    unpacker = _Unpacker()
    if fsyncs or hsyncs:
        frames, sof, complete = _fsync_frames(buf, hsyncs, issues)
        sof = sof + base
        for start in range(0, frames.shape[0], _BLOCK_FRAMES):
            unpacker.feed(frames[start : start + _BLOCK_FRAMES], sof[start : start + _BLOCK_FRAMES])
        count = frames.shape[0]
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
        arr = np.frombuffer(buf, dtype=np.uint8, count=whole * FRAME_SIZE).reshape(-1, FRAME_SIZE)
        for start in range(0, whole, _BLOCK_FRAMES):
            block = arr[start : start + _BLOCK_FRAMES]
            sof = base + FRAME_SIZE * np.arange(start, start + block.shape[0], dtype=np.int64)
            unpacker.feed(block, sof)
        count = whole
        complete = True
    return Demux(unpacker.streams(), issues, count, complete)
