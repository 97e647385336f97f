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
EMPTY_BLOCK_STOP = (
    "this frame hands a decoded trace ID an empty data block, which the reference "
    "decoder treats as fatal: decoding of the buffer stops after this frame"
)
# Template owner codes: 0..7 = the ID byte in slot k, 8 = ID current at frame start,
# 9 = not a data byte.
_OWNER_IN = 8
_OWNER_NONE = 9
# Highest set bit of a byte (the last ID slot of a frame), -1 for 0.
_HIGHEST = np.array([b.bit_length() - 1 for b in range(256)], dtype=np.int8)


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


class _Layout:
    """How one frame layout distributes its 15 bytes: per position and per run."""

    __slots__ = ("owner", "run_len", "run_off", "run_owner")

    def __init__(self, is_id: int, change: int, flags: int) -> None:
        # Owner code per position (0..7: the ID in slot k; 8: the ID at frame start;
        # 9: not a data byte); runs in order: owner code, index offset, byte count.
        self.owner = [_OWNER_NONE] * 15
        self.run_owner: list[int] = []
        self.run_off: list[int] = []
        self.run_len: list[int] = []
        cur = _OWNER_IN
        run_start = 0
        count = 0
        run_open = False

        def put(pos: int, who: int) -> None:
            nonlocal count, run_open
            self.owner[pos] = who
            if not run_open:
                self.run_owner.append(who)
                self.run_off.append(run_start + count)
                self.run_len.append(0)
                run_open = True
            self.run_len[-1] += 1
            count += 1

        for i in range(0, 14, 2):
            s = i >> 1
            prev_and_change = False
            if (is_id >> s) & 1:
                if (change >> s) & 1:
                    prev_and_change = bool((flags >> s) & 1)
                    if prev_and_change:
                        put(i + 1, cur)
                    cur = s
                    if count > 0:
                        run_start = i
                        count = 0
                    run_open = False
            else:
                put(i, cur)
            if not prev_and_change:
                put(i + 1, cur)
        if not (is_id >> 7) & 1:
            put(14, cur)  # an ID in byte 14 only sets the ID for the next frame


_M16 = np.uint64(0x0001000100010001)
# Flag byte -> its 8 bits spread onto bytes 0,2,4,6 (low word) and 8,10,12,14 (high word).
_SPREAD_LO = np.array(
    [sum(((f >> k) & 1) << (16 * k) for k in range(4)) for f in range(256)], dtype=np.uint64
)
_SPREAD_HI = np.array(
    [sum(((f >> (k + 4)) & 1) << (16 * k) for k in range(4)) for f in range(256)], dtype=np.uint64
)
_SPREAD = np.stack((_SPREAD_LO, _SPREAD_HI), axis=1)  # 256 x 2 words
_MAX_RUNS = 8


def _id_bits(word: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Bit 0 of bytes 0, 2, 4, 6 of each little-endian word, packed into bits 0..3."""
    x = word & _M16
    x |= x >> np.uint64(15)
    x |= x >> np.uint64(30)
    x &= np.uint64(0xF)
    return x


class _Templates:
    """The run layouts of every frame layout met so far, shared by all unpackers.

    A layout key holds the ID slots (8 bits), the changing ID slots 0..6 (7 bits)
    and the flag bits of those changing slots (7 bits). Layouts are pure functions
    of their key, so one table serves every pass over every capture. At most 4^7 x 2
    layouts exist (each of slots 0..6 is data, a repeated ID, a changed ID, or a
    changed ID with its flag; byte 14 is an ID or not), so 16-bit numbers suffice.
    """

    KEY_BITS = 22
    MISSING = 0xFFFF

    def __init__(self) -> None:
        self.table: npt.NDArray[np.uint16] | None = None
        self.runs = np.zeros((0, 3, _MAX_RUNS), dtype=np.int8)

    def ids(self, keys: npt.NDArray[np.int32]) -> npt.NDArray[np.intp]:
        """Template numbers of frame layout ``keys``, making the missing templates."""
        if self.table is None:
            self.table = np.full(1 << self.KEY_BITS, self.MISSING, dtype=np.uint16)
        table = self.table
        tids = table[keys]
        missing = tids == self.MISSING
        if missing.any():
            first = self.runs.shape[0]
            layouts: list[_Layout] = []
            for key in np.unique(keys[missing]).tolist():
                table[key] = first + len(layouts)
                layouts.append(_Layout(key & 0xFF, (key >> 8) & 0x7F, (key >> 15) & 0x7F))

            def runs(get: str, fill: int) -> list[list[int]]:
                rows = []
                for lay in layouts:
                    row: list[int] = getattr(lay, get)
                    rows.append(row + [fill] * (_MAX_RUNS - len(row)))
                return rows

            new_runs = np.stack(
                (
                    np.array(runs("run_owner", _OWNER_NONE), dtype=np.int8),
                    np.array(runs("run_off", 0), dtype=np.int8),
                    np.array(runs("run_len", 0), dtype=np.int8),
                ),
                axis=1,
            )
            self.runs = np.concatenate((self.runs, new_runs))
            tids = table[keys]
        return tids.astype(np.intp)


_TEMPLATES = _Templates()


class _Unpacker:
    """Stateful frame unpacker: carries the current ID from one block to the next.

    Frames without ID bytes (most frames of real captures) take a fast path: all
    15 bytes belong to the ID current at the frame start, as one run. Frames with
    ID bytes are resolved slot by slot and through a per-layout template.
    """

    def __init__(self, only: int | None = None, stop_ids: frozenset[int] = frozenset()) -> None:
        self.only = only
        # IDs with a decoder: an empty block for one of them stops the capture (see
        # _first_fatal); stopped_at is then the capture index of that frame.
        self.stop_ids = stop_ids
        self.stopped_at: int | None = None
        self.current_id = _NO_ID
        # Per trace ID: data arrays, and run start positions/capture indices.
        self.values: dict[int, list[npt.NDArray[np.uint8]]] = {}
        self.run_pos: dict[int, list[npt.NDArray[np.int64]]] = {}
        self.run_idx: dict[int, list[npt.NDArray[np.int64]]] = {}
        self.length: dict[int, int] = {}

    def _template_ids(self, keys: npt.NDArray[np.int32]) -> npt.NDArray[np.intp]:
        return _TEMPLATES.ids(keys)

    def _first_fatal(
        self,
        general: npt.NDArray[np.intp],
        id_mask: npt.NDArray[np.uint8],
        g_is_id: npt.NDArray[np.bool_],
        g_val: npt.NDArray[np.int16],
        cur_in: npt.NDArray[np.int16],
        flags: npt.NDArray[np.uint8],
    ) -> int | None:
        """The first frame whose last data slot is empty for a decoded ID, if any.

        When byte 12 changes the ID with its flag bit set (byte 13 still belongs
        to the old ID) and byte 14 is an ID, the reference's deformatter hands the
        new ID an empty block; a decoder answers that with a fatal error and the
        reference stops the whole buffer there.
        """
        candidate = g_is_id[:, 6] & g_is_id[:, 7] & ((flags[general] >> 6) & 1).astype(bool)
        if not candidate.any():
            return None
        earlier = _HIGHEST[id_mask[general] & 0x3F].astype(np.intp)
        before = np.where(
            earlier >= 0, g_val[np.arange(general.size), np.maximum(earlier, 0)], cur_in[general]
        )
        hit = candidate & (g_val[:, 6] != before) & np.isin(g_val[:, 6], list(self.stop_ids))
        rows = np.flatnonzero(hit)
        return int(general[rows[0]]) if rows.size else None

    def feed(
        self, frames: npt.NDArray[np.uint8], sof: npt.NDArray[np.int64], check: bool = True
    ) -> None:
        """Unpack ``frames`` (n x 16), whose first bytes are at capture indices ``sof``."""
        n = frames.shape[0]
        if n == 0 or self.stopped_at is not None:
            return
        frames = np.ascontiguousarray(frames)
        words = frames.view("<u8")  # n x 2
        id_mask = (_id_bits(words[:, 0]) | (_id_bits(words[:, 1]) << np.uint64(4))).astype(np.uint8)
        general = np.flatnonzero(id_mask)
        g_frames = frames[general]
        g_slots = g_frames[:, 0:15:2]
        g_is_id = (g_slots & 1).astype(bool)
        g_val = (g_slots >> 1).astype(np.int16)

        # The ID current at each frame start: forward-fill the last ID of each frame.
        last_slot = _HIGHEST[id_mask[general]].astype(np.intp)
        last_id = g_val[np.arange(general.size), last_slot]
        has = np.full(n, -1, dtype=np.int64)
        has[general] = np.arange(general.size)
        np.maximum.accumulate(has, out=has)
        cur_in = np.full(n, self.current_id, dtype=np.int16)
        if n > 1 and general.size:
            prev = has[:-1]
            cur_in[1:] = np.where(prev >= 0, last_id[np.maximum(prev, 0)], self.current_id)
        if check and self.stop_ids and general.size:
            fatal = self._first_fatal(general, id_mask, g_is_id, g_val, cur_in, frames[:, 15])
            if fatal is not None:
                # Unpack up to and including that frame, then stop for good.
                self.feed(frames[: fatal + 1], sof[: fatal + 1], check=False)
                self.stopped_at = int(sof[fatal])
                return
        if general.size:
            self.current_id = int(last_id[-1])

        # Data values: even bytes take bit 0 from the flag byte.
        flags = frames[:, 15]
        vwords = words.copy()
        vwords |= _SPREAD[flags]
        values = vwords.view(np.uint8).reshape(n, 16)

        # Owner of each byte (-1: none) and runs (max 8 per frame, in frame order):
        # owner, index offset in the frame, length. Plain frames: one run of 15.
        cur_in8 = cur_in.astype(np.int8)
        owners = np.empty((n, 16), dtype=np.int8)
        owners[:, :15] = cur_in8[:, None]
        owners[:, 15] = _NO_ID
        run_owner = np.full((n, _MAX_RUNS), _NO_ID, dtype=np.int8)
        run_owner[:, 0] = cur_in8
        run_len = np.zeros((n, _MAX_RUNS), dtype=np.int8)
        run_len[:, 0] = 15
        run_off = np.zeros((n, _MAX_RUNS), dtype=np.int8)
        if general.size:
            # Slot by slot: the ID before and after each slot, and which slots change it.
            g = general.size
            before = np.empty((g, 8), dtype=np.int8)
            after = np.empty((g, 8), dtype=np.int8)
            change = np.empty((g, 8), dtype=bool)
            cur = cur_in[general].astype(np.int8)
            g_val8 = g_val.astype(np.int8)
            for k in range(8):
                idk = g_is_id[:, k]
                before[:, k] = cur
                change[:, k] = idk & (g_val8[:, k] != cur)
                cur = np.where(idk, g_val8[:, k], cur)
                after[:, k] = cur
            g_flags = flags[general]
            flag_bits = ((g_flags[:, None] >> np.arange(8, dtype=np.uint8)) & 1).astype(bool)
            # Even byte 2k: the ID before slot k (none if it is an ID byte). Odd byte
            # 2k+1: the ID after slot k, or the one before when slot k changed the ID
            # with its flag bit set.
            g_own = np.empty((g, 15), dtype=np.int8)
            g_own[:, 0:15:2] = np.where(g_is_id, np.int8(_NO_ID), before)
            keep_old = change[:, :7] & flag_bits[:, :7]
            g_own[:, 1:15:2] = np.where(keep_old, before[:, :7], after[:, :7])
            owners[general, :15] = g_own
            # Run layout (index offsets) from the per-layout template.
            change_mask = np.packbits(change, axis=1, bitorder="little")[:, 0].astype(np.int32)
            change_mask &= 0x7F
            flag_sel = g_flags.astype(np.int32) & change_mask
            keys = id_mask[general].astype(np.int32) | (change_mask << 8) | (flag_sel << 15)
            tids = self._template_ids(keys)
            id_table = np.empty((g, 10), dtype=np.int8)
            id_table[:, :8] = g_val8
            id_table[:, _OWNER_IN] = cur_in[general]
            id_table[:, _OWNER_NONE] = _NO_ID
            runs = _TEMPLATES.runs[tids]  # g x 3 x 8: owner code, index offset, length
            codes = runs[:, 0, :].astype(np.intp)
            run_owner[general] = np.take_along_axis(id_table, codes, axis=1)
            run_off[general] = runs[:, 1, :]
            run_len[general] = runs[:, 2, :]

        # All runs of the block in frame order, then each ID's share of them.
        run_at = np.flatnonzero(run_owner.ravel() >= 0)
        run_who = run_owner.ravel()[run_at]
        seen = np.bincount(run_who.view(np.uint8), minlength=256)[:128]
        run_rows = run_at >> 3
        run_lengths = run_len.ravel()[run_at].astype(np.int64)
        run_index = sof[run_rows] + run_off.ravel()[run_at]
        owners_flat = owners.ravel()
        values_flat = values.ravel()
        wanted = np.flatnonzero(seen).tolist()
        if self.only is not None:
            wanted = [self.only] if self.only in wanted else []
        for tid in wanted:
            mine = np.flatnonzero(run_who == tid)
            if mine.size == 0:
                continue
            lengths = run_lengths[mine]
            rows = run_rows[mine]
            if rows.size > 1:
                rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
            if 2 * rows.size < n:
                # Few frames hold this ID: select within those frames only.
                sel = np.take(owners, rows, axis=0).ravel() == tid
                vals = np.compress(sel, np.take(values, rows, axis=0).ravel())
            else:
                vals = np.compress(owners_flat == tid, values_flat)
            base = self.length.get(tid, 0)
            positions = np.empty(lengths.size, dtype=np.int64)
            positions[0] = base
            np.cumsum(lengths[:-1], out=positions[1:])
            positions[1:] += base
            self.values.setdefault(tid, []).append(vals)
            self.run_pos.setdefault(tid, []).append(positions)
            self.run_idx.setdefault(tid, []).append(run_index[mine])
            self.length[tid] = base + vals.size

    def take(self, tid: int) -> Stream | None:
        """The data of ``tid`` unpacked since the last ``take``, as a stream of its own."""
        values = self.values.pop(tid, None)
        if not values:
            return None
        run_pos = np.concatenate(self.run_pos.pop(tid))
        run_idx = np.concatenate(self.run_idx.pop(tid))
        run_pos -= run_pos[0]
        return Stream(tid, np.concatenate(values).tobytes(), run_pos, run_idx.astype(np.int64))

    def streams(self) -> dict[int, Stream]:
        """The streams of all trace IDs seen so far."""
        out: dict[int, Stream] = {}
        for tid in sorted(self.values):
            data = np.concatenate(self.values[tid]).tobytes()
            run_pos = np.concatenate(self.run_pos[tid]).astype(np.int64)
            run_idx = np.concatenate(self.run_idx[tid]).astype(np.int64)
            out[tid] = Stream(tid, data, run_pos, run_idx)
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
    if unpacker.stopped_at is not None:
        issues.append(CaptureIssue(unpacker.stopped_at, EMPTY_BLOCK_STOP, warning=True))
        complete = False
    return Demux(unpacker.streams(), issues, count, complete)
