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

Frames are unpacked with NumPy, a block of frames at a time: the eight ID/data
slots of a frame are handled as the bytes of one 64-bit word, so that IDs, ID
changes and byte owners come from whole-array word operations; the run layout of
each distinct frame layout (which slots are IDs, which change the ID, their flag
bits) is computed once as a small template.
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
    """How one frame layout distributes its 15 bytes into runs, in frame order.

    A run is a stretch of data bytes between two ID changes; each run records the
    frame position of its first byte, its index offset in the frame (OpenCSD's
    numbering) and its byte count.
    """

    __slots__ = ("run_first", "run_len", "run_off")

    def __init__(self, is_id: int, change: int, flags: int) -> None:
        self.run_first: list[int] = []
        self.run_off: list[int] = []
        self.run_len: list[int] = []
        run_start = 0
        count = 0
        run_open = False

        def put(pos: int) -> None:
            nonlocal count, run_open
            if not run_open:
                self.run_first.append(pos)
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
                        put(i + 1)  # still the previous ID's byte
                    if count > 0:
                        run_start = i
                        count = 0
                    run_open = False
            else:
                put(i)
            if not prev_and_change:
                put(i + 1)
        if not (is_id >> 7) & 1:
            put(14)  # an ID in byte 14 only sets the ID for the next frame


_MAX_RUNS = 8  # one run, plus one per ID change in slots 0..6


class _Templates:
    """The run layouts of every frame layout met so far, shared by all unpackers.

    A layout key holds the ID slots (8 bits), the changing ID slots 0..6 (7 bits)
    and the flag bits of those changing slots (7 bits). Layouts are pure functions
    of their key, so one table serves every pass over every capture. Key 0 (no ID
    byte: one run of 15 bytes) is template 0. At most 4^7 x 2 layouts exist (each
    of slots 0..6 is data, a repeated ID, a changed ID, or a changed ID with its
    flag; byte 14 is an ID or not), so 16-bit template numbers suffice.
    """

    KEY_BITS = 22

    def __init__(self) -> None:
        self.table: npt.NDArray[np.uint16] | None = None
        self.count = np.zeros(0, dtype=np.intp)
        # Per template, _MAX_RUNS entries each: first byte position, index offset, length.
        self.first = np.zeros(0, dtype=np.intp)
        self.off = np.zeros(0, dtype=np.int64)
        self.length = np.zeros(0, dtype=np.int64)
        self._add([0])

    def _add(self, keys: list[int]) -> None:
        layouts = [_Layout(k & 0xFF, (k >> 8) & 0x7F, (k >> 15) & 0x7F) for k in keys]
        pad = [0] * _MAX_RUNS

        def flat(get: str) -> list[int]:
            out: list[int] = []
            for lay in layouts:
                row: list[int] = getattr(lay, get)
                out += row + pad[len(row) :]
            return out

        self.count = np.concatenate((self.count, [len(lay.run_len) for lay in layouts]))
        self.first = np.concatenate((self.first, flat("run_first")))
        self.off = np.concatenate((self.off, flat("run_off")))
        self.length = np.concatenate((self.length, flat("run_len")))

    def ids(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.intp]:
        """Template numbers of frame layout ``keys``, making the missing templates."""
        if self.table is None:
            # Template numbers plus one, 0 for a key not met yet: zero-filled memory,
            # whose pages the system maps only when a key in them is met (8 MiB
            # filled with a "missing" value cost 2,048 page faults at every start).
            self.table = np.zeros(1 << self.KEY_BITS, dtype=np.uint16)
            self.table[0] = 1
        table = self.table
        tids = table[keys]
        missing = tids == 0
        if missing.any():
            # Sorted distinct keys (np.unique would import numpy.ma: 8 ms of start-up).
            got = np.sort(keys[missing])
            new = got[np.concatenate(([True], got[1:] != got[:-1]))].tolist()
            first = self.count.size
            table[new] = np.arange(first + 1, first + 1 + len(new))
            self._add(new)
            tids = table[keys]
        numbers = tids.astype(np.intp)
        numbers -= 1  # (the table holds template numbers plus one)
        return numbers


_TEMPLATES = _Templates()

# 64-bit word constants: a frame's eight ID/data slots (bytes 0, 2, ..., 14) are
# handled as the eight bytes of one word, slot k in byte k.
_U = np.uint64
_ONES = _U(0x0101010101010101)
_LOW7 = _U(0x7F7F7F7F7F7F7F7F)
_TOP = _U(0xFF << 56)
_NONE = 0xFF  # owner byte of ID bytes, the flag byte, and data before any ID


def _pack(bits: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Bit 0 of each byte (bit 8k) gathered into bit k."""
    return (bits * _U(0x0102040810204080)) >> _U(56)


def _spread(byte: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Bit k of a byte moved to bit 8k (bit 0 of byte k)."""
    x = (byte | (byte << _U(28))) & _U(0x0000000F0000000F)
    x = (x | (x << _U(14))) & _U(0x0003000300030003)
    return (x | (x << _U(7))) & _ONES


def _even_bytes(word: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Bytes 0, 2, 4, 6 of each word packed into bytes 0..3."""
    x = word & _U(0x00FF00FF00FF00FF)
    x = (x | (x >> _U(8))) & _U(0x0000FFFF0000FFFF)
    return (x | (x >> _U(16))) & _U(0xFFFFFFFF)


def _to_even(half: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Bytes 0..3 of each word moved to bytes 0, 2, 4, 6 (the inverse of _even_bytes)."""
    x = half & _U(0xFFFFFFFF)
    x = (x | (x << _U(16))) & _U(0x0000FFFF0000FFFF)
    return (x | (x << _U(8))) & _U(0x00FF00FF00FF00FF)


# Flag byte -> the 16-byte frame pattern with its bit k in bit 0 of byte 2k, each
# pattern one 16-byte item (complex128 is NumPy's cheapest 16-byte type to gather).
_FLAG_ROWS = (
    np.array([[(f >> (b // 2)) & 1 if b % 2 == 0 else 0 for b in range(16)] for f in range(256)])
    .astype(np.uint8)
    .view(np.complex128)
    .ravel()
)


def _joined(parts: list[npt.NDArray[np.uint8]]) -> bytes:
    """The byte arrays ``parts`` joined into one bytes object (one copy)."""
    return np.concatenate(parts).tobytes()


def _rows(table: npt.NDArray[np.uint8], rows: npt.NDArray[np.intp]) -> npt.NDArray[np.uint8]:
    """Rows of an n x 16 byte table, gathered as 16-byte items."""
    out: npt.NDArray[np.uint8] = table.view(np.complex128).ravel()[rows].view(np.uint8)
    return out


class _Unpacker:
    """Stateful frame unpacker: carries the current ID from one block to the next.

    Each frame's eight ID/data slots are one 64-bit word, so the ID in effect
    before and after every slot, the changes and the owner of every byte come
    from a handful of whole-array word operations; the run layout (OpenCSD's
    index numbering) comes from a template per frame layout.
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
        """With ``count_only``: frames fed (up to the one that stopped the capture, if any)."""
        self.id_bytes = 0
        """With ``count_only``: ID bytes in those frames."""
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

    def _first_fatal(
        self,
        is_id: npt.NDArray[np.uint64],
        change: npt.NDArray[np.uint64],
        slot_ids: npt.NDArray[np.uint64],
        flags: npt.NDArray[np.uint64],
    ) -> int | None:
        """The first (general) frame whose last data slot is empty for a decoded ID, if any.

        When byte 12 changes the ID with its flag bit set (byte 13 still belongs
        to the old ID) and byte 14 is an ID, the reference's deformatter hands the
        new ID an empty block; a decoder answers that with a fatal error and the
        reference stops the whole buffer there.
        """
        bit6 = _U(1 << 48)
        hit = ((is_id >> _U(8)) & is_id & change & bit6) != 0
        hit &= ((flags >> _U(6)) & _U(1)) != 0
        rows = np.flatnonzero(hit)
        if not rows.size:
            return None
        new = ((slot_ids[rows] >> _U(49)) & _U(0x7F)).astype(np.int64)
        found = rows[np.isin(new, list(self.stop_ids))]
        return int(found[0]) if found.size else None

    def feed(
        self, frames: npt.NDArray[np.uint8], sof: npt.NDArray[np.int64], check: bool = True
    ) -> None:
        """Unpack ``frames`` (n x 16), whose first bytes are at capture indices ``sof``."""
        n = frames.shape[0]
        if n == 0 or self.stopped_at is not None:
            return
        frames = np.ascontiguousarray(frames)
        words = frames.view("<u8")  # n x 2
        lo = words[:, 0]
        hi = words[:, 1]
        general = np.flatnonzero(((lo | hi) & _U(0x0001000100010001)) != 0)
        g = general.size
        start = _NONE if self.current_id == _NO_ID else self.current_id

        # The eight slots of each frame with ID bytes, as one word: which are IDs,
        # their values, and the ID in effect after each slot (forward filled).
        glo = lo[general]
        ghi = hi[general]
        slots = _even_bytes(glo) | (_even_bytes(ghi) << _U(32))
        is_id = slots & _ONES
        id_bytes = is_id * _U(0xFF)
        after = ((slots >> _U(1)) & _LOW7) & id_bytes
        known = id_bytes.copy()
        for shift in (8, 16, 32):
            after |= (after << _U(shift)) & ~known
            known |= known << _U(shift)
        last = after >> _U(56)  # every such frame has an ID, so slot 7 is known

        # The ID in effect at each frame start: the last ID of the latest frame with IDs.
        bounds = np.empty(g + 2, dtype=np.int64)
        bounds[0] = 0
        bounds[1:-1] = general + 1
        bounds[-1] = n
        cur_in = np.repeat(np.concatenate(([_U(start)], last)), np.diff(bounds))
        g_cur = cur_in[general]
        after |= (g_cur * _ONES) & ~known
        before = (after << _U(8)) | g_cur
        diff = after ^ before
        diff |= diff >> _U(4)
        diff |= diff >> _U(2)
        diff |= diff >> _U(1)
        change = diff & is_id
        g_flags = frames[general, 15].astype(np.uint64)

        if check and self.stop_ids and g:
            fatal = self._first_fatal(is_id, change, slots, g_flags)
            if fatal is not None:
                # Unpack up to and including that frame, then stop for good.
                row = int(general[fatal])
                self.feed(frames[: row + 1], sof[: row + 1], check=False)
                self.stopped_at = int(sof[row])
                return
        if g:
            self.current_id = int(last[-1])

        # Owner of every byte, as two words per frame: the ID at frame start for
        # frames without ID bytes; else per slot, the even byte belongs to the ID
        # before the slot (none if it is an ID byte) and the odd byte to the ID
        # after it, or to the one before when the slot changed the ID with its
        # flag bit set. Byte 15 is the flag byte.
        change7 = _pack(change) & _U(0x7F)
        flag_sel = g_flags & change7
        if self.counts is not None:
            self._count(n, general, cur_in, is_id, before, after, id_bytes, flag_sel)
            return
        owners = np.empty((n, 2), dtype=np.uint64)
        np.multiply(cur_in, _ONES, out=owners[:, 0])
        np.bitwise_or(owners[:, 0], _TOP, out=owners[:, 1])
        if g:
            owners[general] = _general_owners(before, after, id_bytes, flag_sel)
        own = owners.view(np.uint8).reshape(n, 16)

        # Data values: even data bytes take bit 0 from the flag byte (a table of the
        # 16-byte pattern of each flag byte, read as 16-byte items).
        values = _FLAG_ROWS[frames[:, 15]].view(np.uint8).reshape(n, 16)
        np.bitwise_or(values, frames, out=values)

        # Runs of every frame, in frame order, from the template of each layout.
        tmpl = np.zeros(n, dtype=np.intp)
        if g:
            keys = _pack(is_id) | (change7 << _U(8)) | (flag_sel << _U(15))
            tmpl[general] = _TEMPLATES.ids(keys)
        per_frame = _TEMPLATES.count[tmpl]
        if g and int(per_frame.max()) > 1:
            run_row = np.repeat(np.arange(n), per_frame)
            first_run = np.cumsum(per_frame) - per_frame
            entry = np.repeat(tmpl * _MAX_RUNS - first_run, per_frame)
            entry += np.arange(run_row.size)
            run_sof = np.repeat(sof, per_frame)
        else:
            run_row = np.arange(n)
            entry = tmpl * _MAX_RUNS
            run_sof = sof
        run_who = own.ravel()[run_row * 16 + _TEMPLATES.first[entry]]
        run_len = _TEMPLATES.length[entry]
        run_index = run_sof + _TEMPLATES.off[entry]

        if self.only is not None:
            wanted = [self.only]
        else:
            seen = np.bincount(run_who, minlength=256)[:128]
            wanted = np.flatnonzero(seen).tolist()
        own_flat = own.ravel()
        values_flat = values.ravel()
        for tid in wanted:
            mine = np.flatnonzero(run_who == tid)
            if mine.size == 0:
                continue
            rows = run_row[mine]
            if rows.size > 1:
                rows = rows[np.concatenate(([True], rows[1:] != rows[:-1]))]
            if 2 * rows.size < n:
                # Few frames hold this ID: select within those frames only.
                vals = np.compress(_rows(own, rows) == tid, _rows(values, rows))
            else:
                vals = values_flat[own_flat == tid]
            lengths = run_len[mine]
            base = self.length.get(tid, 0)
            positions = np.empty(lengths.size, dtype=np.int64)
            positions[0] = base
            np.cumsum(lengths[:-1], out=positions[1:])
            positions[1:] += base
            self.values.setdefault(tid, []).append(vals)
            self.run_pos.setdefault(tid, []).append(positions)
            self.run_idx.setdefault(tid, []).append(run_index[mine])
            self.length[tid] = base + vals.size

    def _count(
        self,
        n: int,
        general: npt.NDArray[np.intp],
        cur_in: npt.NDArray[np.uint64],
        is_id: npt.NDArray[np.uint64],
        before: npt.NDArray[np.uint64],
        after: npt.NDArray[np.uint64],
        id_bytes: npt.NDArray[np.uint64],
        flag_sel: npt.NDArray[np.uint64],
    ) -> None:
        """``count_only``: the bytes of ``n`` frames per owner, without unpacking them. A
        frame without ID bytes gives its 15 data bytes to the ID at its start and its flag
        byte to no one; the owners of the others' bytes are worked out as :meth:`feed` does."""
        counts = self.counts
        assert counts is not None
        self.frames += n
        plain = np.ones(n, dtype=bool)
        plain[general] = False
        counts += 15 * np.bincount(cur_in[plain].astype(np.intp), minlength=256)
        counts[_NONE] += n - general.size  # their flag bytes
        if general.size:
            self.id_bytes += int(np.unpackbits(_pack(is_id).astype(np.uint8)).sum())
            owners = _general_owners(before, after, id_bytes, flag_sel)
            counts += np.bincount(owners.view(np.uint8).ravel(), minlength=256)

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


def _general_owners(
    before: npt.NDArray[np.uint64],
    after: npt.NDArray[np.uint64],
    id_bytes: npt.NDArray[np.uint64],
    flag_sel: npt.NDArray[np.uint64],
) -> npt.NDArray[np.uint64]:
    """The owner of every byte of the frames with ID bytes, two words per frame: per slot,
    the even byte belongs to the ID before the slot (none if it is an ID byte) and the odd
    byte to the ID after it, or to the one before when the slot changed the ID with its
    flag bit set. Byte 15, the flag byte, to none."""
    keep = (_spread(flag_sel) * _U(0xFF)) & _U(0x00FFFFFFFFFFFFFF)
    even = before | id_bytes
    odd = (before & keep) | (after & ~keep) | _TOP
    out = np.empty((before.size, 2), dtype=np.uint64)
    out[:, 0] = _to_even(even) | (_to_even(odd) << _U(8))
    out[:, 1] = _to_even(even >> _U(32)) | (_to_even(odd >> _U(32)) << _U(8))
    return out


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
