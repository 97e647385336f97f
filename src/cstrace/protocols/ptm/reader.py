"""PTM packet reader: the bytes of one trace ID → PTM packets.

Input: a demultiplexed :class:`~cstrace.capture.stream.Stream` and the
:class:`~cstrace.protocols.ptm.config.PtmConfig`; output: the packets of
:mod:`cstrace.protocols.ptm.packets`, each with the capture index of its first
byte and its raw bytes. The stream is consumed block by block
(``stream.blocks()``, through a :class:`~cstrace.capture.window.BlockWindow`), so
memory stays flat however long the capture; the packets are the same wherever
the capture layer cuts its blocks.

Packet formats are those of the Program Flow Trace Architecture Specification
(ARM IHI 0035B, §4.5 "PFT packet formats"). Headers are dispatched through a
256-entry table built from the rows of its Table 4.1.

Synchronisation follows the reference decoder (OpenCSD): until the first A-sync
the bytes are reported as ``NotSync`` packets, cut at most every 16 bytes and at
the end of each block of data the deformatter delivers (one frame's bytes for
one ID; 1024-byte reads of an unformatted capture). Once synchronised, the
reader never loses sync again: a malformed A-sync becomes a ``BadSequence``
packet, a reserved header a ``Reserved`` packet, and reading goes on with the
next byte. A packet cut short by the end of the trace is an ``IncompleteEOT``.
Nothing here raises on bad trace.

Timestamps are read as natural binary numbers even when ETMCCER bit 28 says
they are Gray coded (PFTv1.0, or PFTv1.1 with the bit clear): the reference
listings do so, and cstrace matches them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import NamedTuple

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow
from cstrace.elements import Isa
from cstrace.protocols.base import Packet
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.packets import (
    VMID,
    ASync,
    Atom,
    BadSequence,
    BranchAddress,
    ContextID,
    ExceptionReturn,
    Ignore,
    IncompleteEOT,
    ISync,
    ISyncReason,
    NotSync,
    PtmPacketType,
    Reserved,
    Timestamp,
    Trigger,
    WaypointUpdate,
)

__all__ = [
    "HEADER_ROWS",
    "HEADER_TABLE",
    "HeaderRow",
    "iter_packets",
    "pattern_bytes",
]

T = PtmPacketType


class HeaderRow(NamedTuple):
    """One row of the header table: bit patterns (MSB first, ``x`` = any), kind, spec reference."""

    patterns: tuple[str, ...]
    kind: PtmPacketType
    spec: str


# IHI 0035B §4.5, Table 4.1 "Packet formats", in the table's order. Encodings the
# table does not list are reserved (the last row spells them out).
HEADER_ROWS: tuple[HeaderRow, ...] = (
    HeaderRow(("00000000",), T.A_SYNC, "§4.5 Table 4.1: A-sync b0000 0000"),
    HeaderRow(("00001000",), T.I_SYNC, "§4.5 Table 4.1, §4.5.2: I-sync b0000 1000"),
    HeaderRow(("1xxxxxx0",), T.ATOM, "§4.5 Table 4.1: Atom b1xxx xxx0"),
    HeaderRow(("xxxxxxx1",), T.BRANCH_ADDRESS, "§4.5 Table 4.1: Branch address bCxxx xxx1"),
    HeaderRow(("01110010",), T.WAYPOINT_UPDATE, "§4.5 Table 4.1: Waypoint update b0111 0010"),
    HeaderRow(("00001100",), T.TRIGGER, "§4.5 Table 4.1: Trigger b0000 1100"),
    HeaderRow(("01101110",), T.CONTEXT_ID, "§4.5 Table 4.1: Context ID b0110 1110"),
    HeaderRow(("00111100",), T.VMID, "§4.5 Table 4.1: VMID b0011 1100"),
    HeaderRow(("01000x10",), T.TIMESTAMP, "§4.5 Table 4.1: Timestamp b0100 0x10"),
    HeaderRow(("01110110",), T.EXCEPTION_RETURN, "§4.5 Table 4.1: Exception return b0111 0110"),
    HeaderRow(("01100110",), T.IGNORE, "§4.5 Table 4.1: Ignore b0110 0110"),
    HeaderRow(
        (
            "00xxxx10",
            "01xxxx00",
            "0x01xxx0",
            "0010xx00",
            "01xx1010",
            "00110x00",
            "00000100",
            "00111000",
            "01001110",
            "01100010",
            "01111110",
        ),
        T.RESERVED,
        "§4.5 Table 4.1: the b0xxx xxx0 encodings not listed are reserved",
    ),
)


def pattern_bytes(pattern: str) -> frozenset[int]:
    """The byte values matching an 8-character bit pattern such as ``1xxxxxx0``."""
    care = int(pattern.replace("0", "1").replace("x", "0"), 2)
    value = int(pattern.replace("x", "0"), 2)
    return frozenset(b for b in range(256) if b & care == value)


def _build_table() -> tuple[PtmPacketType, ...]:
    table: list[PtmPacketType | None] = [None] * 256
    for row in HEADER_ROWS:
        for pattern in row.patterns:
            for b in pattern_bytes(pattern):
                table[b] = row.kind
    return tuple(t if t is not None else T.RESERVED for t in table)


HEADER_TABLE: tuple[PtmPacketType, ...] = _build_table()
"""Packet kind of every header byte."""
_KINDS: tuple[int, ...] = tuple(int(k) for k in HEADER_TABLE)


def _atom_table() -> tuple[tuple[int, int], ...]:
    """(E/N bits, count) of every non-cycle-accurate atom header, as the reference reads them.

    Bit 0 of the E/N bits is the atom processed first; 1 is E (executed). Atom
    headers carry N bits (0 = E) from bit 1 up; the reference takes them in order
    from bit 1 and processes them last-taken first.
    """
    out: list[tuple[int, int]] = []
    for h in range(256):
        fmt = h & 0xF0
        if fmt == 0x80:
            count = 2 if h & 0x08 else 1
        elif fmt == 0x90:
            count = 3
        elif (h & 0xE0) == 0xA0:
            count = 4
        else:
            count = 5
        bits = 0
        mask = 0x2
        for _ in range(count):
            bits <<= 1
            if not h & mask:
                bits |= 1
            mask <<= 1
        out.append((bits, count))
    return tuple(out)


_ATOMS = _atom_table()
# Packet kinds as plain ints for the reading loop (enum attribute lookups are slow).
_K_ATOM = int(T.ATOM)
_K_BRANCH = int(T.BRANCH_ADDRESS)
_K_ISYNC = int(T.I_SYNC)
_K_TS = int(T.TIMESTAMP)
_K_ASYNC = int(T.A_SYNC)
_K_WP = int(T.WAYPOINT_UPDATE)
_K_CTXT = int(T.CONTEXT_ID)
_K_VMID = int(T.VMID)
_K_TRIGGER = int(T.TRIGGER)
_K_ERET = int(T.EXCEPTION_RETURN)
_K_IGNORE = int(T.IGNORE)
_ISA_BY_T = (Isa.A32, Isa.T32)
_BLOCK = 1024  # the reference lister reads captures 1024 bytes at a time
_UNSYNC_MAX = 16  # unsynchronised bytes reported per NotSync packet at most
_ASYNC_PAD_LIMIT = 11  # extra 0x00 bytes dropped at a time while hunting an A-sync
_ASYNC_ZEROS = 5


def _blocks(
    rp: list[int], ri: list[int], n: int, first: int
) -> Iterator[tuple[int, int, int, int]]:
    """(start, end, capture index, run) of the blocks the reference delivers one by one.

    Over a window's runs (``rp``/``ri``, ``n`` bytes), from position ``first``;
    ``run`` is the number of the run in the window.
    """
    k = max(bisect_right(rp, first) - 1, 0)
    start = first
    index = ri[k] + first - rp[k]
    nruns = len(rp)
    while k < nruns:
        end = rp[k + 1] if k + 1 < nruns else n
        while start < end:
            # a 1024-byte read boundary may fall inside a run (unformatted captures)
            cut = min(end, start + _BLOCK - (index % _BLOCK))
            yield start, cut, index, k
            index += cut - start
            start = cut
        k += 1
        if k < nruns:
            start = rp[k]
            index = ri[k]


class _Unsynced:
    """The reference's search for the first A-sync, block by block (bugs included).

    After :meth:`feed` returns True, ``async_raw`` holds the A-sync packet bytes,
    ``index`` its capture index and ``resume`` the stream position after it.
    """

    def __init__(self, stream: Stream) -> None:
        self.formatted = stream.trace_id is not None
        # optional: the deformatter's memory after a block (see ``_beyond``)
        self.frame_tail: Callable[[int, int], bytes] | None = getattr(stream, "frame_tail", None)
        self.run = 0
        self.wait_zeros = False
        self.pending = bytearray()
        self.zeros = 0
        self.index = 0
        self.resume = 0
        self.async_raw = b""

    def _beyond(self, data: bytes, start: int, end: int, skip: int, count: int) -> bytes:
        """``count`` bytes from ``skip`` bytes past the end of a block, as the reference reads them.

        The reference over-counts zeros carried from one block to the next and so
        reads past the block. What lies there is memory next to the block: for a
        formatter frame's data, what the deformatter left in its output slot (the
        stream's ``frame_tail`` when it offers one; else, for a full 15-byte block,
        the byte count as a 32-bit little-endian number then a 32-bit zero); for
        the last, short read of an unformatted capture, the previous read's bytes.
        Elsewhere it is unknown and left out.
        """
        if self.formatted:
            if self.frame_tail is not None:
                return self.frame_tail(self.run, skip + count)[skip:]
            if end - start == 15:
                return b"\x0f\x00\x00\x00\x00\x00\x00\x00"[skip : skip + count]
            return b""
        if end - start < _BLOCK:
            lo = end - _BLOCK + skip  # the previous read, at the same buffer offsets
            hi = min(lo + count, start)
            if lo >= 0 and hi > lo:
                return data[lo:hi]
        return b""

    def _find_async(self, data: bytes, pos: int, end: int) -> tuple[int, int]:
        """Read on from a 0x00: (result, new position). 0 A-sync, 1 not, 2 too many 0s, 3 more."""
        pending = self.pending
        while pos < end:
            b = data[pos]
            pos += 1
            pending.append(b)
            if b == 0:
                self.zeros += 1
                if self.zeros >= _ASYNC_PAD_LIMIT + _ASYNC_ZEROS:
                    return 2, pos
            else:
                if b == 0x80 and self.zeros >= _ASYNC_ZEROS:
                    return 0, pos
                return 1, pos
        return 3, pos

    def feed(self, data: bytes, start: int, end: int, index: int, out: list[Packet]) -> bool:
        """Scan one block; append NotSync packets to ``out``; True once an A-sync is found."""
        if not self.wait_zeros:
            self.index = index
        pos = start
        unsynced = 0
        scan_start = start
        on_entry = len(self.pending)
        scanning = True
        found = False
        while scanning:
            send = False
            if self.wait_zeros:
                res, pos = self._find_async(data, pos, end)
                if res == 0:
                    self.wait_zeros = False
                    send = found = True
                    scanning = False
                elif res == 2:
                    unsynced += _ASYNC_PAD_LIMIT
                    self.wait_zeros = False
                    del self.pending[:_ASYNC_PAD_LIMIT]
                elif res == 1:
                    unsynced += len(self.pending)
                    self.wait_zeros = False
                    self.pending.clear()
                else:
                    send = True
                    scanning = False
            else:
                b = data[pos]
                pos += 1
                if b == 0:
                    self.wait_zeros = True
                    self.pending.append(0)
                    self.zeros = 1
                else:
                    unsynced += 1
            if unsynced >= _UNSYNC_MAX:
                send = True
            if pos >= end:
                send = True
                scanning = False
            if send and unsynced > 0:
                if on_entry:
                    # zeros carried over from the previous block turned out not to be an A-sync
                    out.append(NotSync(self.index, bytes(on_entry), carried=True))
                    self.index += on_entry
                stop = scan_start + unsynced
                raw = data[scan_start : min(stop, end)]
                if stop > end:
                    skip = max(scan_start - end, 0)
                    raw += self._beyond(data, start, end, skip, stop - end - skip)
                out.append(NotSync(self.index, raw))
                scan_start += unsynced
                self.index += unsynced
                unsynced = 0
        if found:
            self.async_raw = bytes(self.pending)
            self.pending.clear()
            self.resume = pos
        return found


def _cycle_count(data: bytes, pos: int) -> int:
    """Cycle count field at ``pos``: 4 bits then 7 bits a byte, at most 5 bytes."""
    b = data[pos]
    value = (b >> 2) & 0xF
    more = b & 0x40
    shift = 4
    k = 1
    while more:
        b = data[pos + k]
        value |= (b & 0x7F) << shift
        shift += 7
        more = b & 0x80
        k += 1
        if k == 5:
            break
    return value


def _extract_address(data: bytes, pos: int, count: int, isa: Isa) -> tuple[int, int]:
    """(address bits, number of bits) of ``count`` address bytes from ``pos`` for ``isa``."""
    value = 0
    bits = 0
    shift = 0
    for i in range(count):
        b = data[pos + i]
        if i == 0:
            mask, nbits = 0x7E, 7
        elif i == 4:
            if isa == Isa.JAZELLE:
                mask, nbits = 0x1F, 5
            elif isa == Isa.A32:
                mask, nbits = 0x07, 3
            else:
                mask, nbits = 0x0F, 4
        elif i == count - 1:
            mask, nbits = 0x3F, 6
        else:
            mask, nbits = 0x7F, 7
        value |= (b & mask) << shift
        bits += nbits
        if i == 0:
            if isa == Isa.JAZELLE:
                value >>= 1
                shift = 6
                bits -= 1
            else:
                shift = 7
        else:
            shift += 7
    if isa == Isa.A32:
        value <<= 1
        bits += 1
    return value, bits


def iter_packets(stream: Stream, config: PtmConfig, complete: bool = True) -> Iterator[Packet]:
    """Read the PTM packets of one trace ID's stream."""
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    out: list[Packet] = []

    # --- before the first A-sync -------------------------------------------------
    # The hunt goes block by block (the reference's blocks, see ``_blocks``). The
    # last block of a window may go on in the next capture block: it is scanned
    # with the next window, which also keeps the 1024 bytes before it (the
    # reference's previous read, see ``_Unsynced._beyond``).
    hunt = _Unsynced(stream)
    synced = False
    first = 0
    while not synced:
        data = win.data
        n = len(data)
        held = n
        for start, end, index, run in _blocks(win.run_pos, win.run_idx, n, first):
            if end == n and not win.final:
                held = start
                break
            hunt.run = win.first_run + run
            synced = hunt.feed(data, start, end, index, out)
            yield from out
            out.clear()
            if synced:
                break
        if synced:
            break
        keep = max(held - _BLOCK, 0)
        if not win.advance(keep):
            break
        first = held - keep
    if not synced:
        if complete and hunt.pending:
            yield IncompleteEOT(hunt.index, bytes(hunt.pending))
        return
    yield ASync(hunt.index, hunt.async_raw)

    # --- synchronised ------------------------------------------------------------
    ca = config.cycle_accurate
    ctxt_bytes = config.ctxt_id_bytes
    ts_max = 10 if config.ts_64bit else 8
    ts_size = 64 if config.ts_64bit else 48
    table = _KINDS
    atoms = _ATOMS
    K_ATOM, K_BRANCH, K_ISYNC, K_TS, K_ASYNC = _K_ATOM, _K_BRANCH, _K_ISYNC, _K_TS, _K_ASYNC
    K_WP, K_CTXT, K_VMID, K_TRIGGER = _K_WP, _K_CTXT, _K_VMID, _K_TRIGGER
    K_ERET, K_IGNORE = _K_ERET, _K_IGNORE
    isa_unknown, isa_a32, isa_t32, isa_tee, isa_jaz = (
        Isa.UNKNOWN,
        Isa.A32,
        Isa.T32,
        Isa.TEE,
        Isa.JAZELLE,
    )

    # capture index of a stream position: walk the runs forward
    run_pos = win.run_pos
    run_idx = win.run_idx
    nruns = len(run_pos)
    k = 0
    base = run_idx[0] - run_pos[0]
    nxt = run_pos[1] if nruns > 1 else n + 1

    # running packet state (OpenCSD keeps it in its packet object)
    isa = Isa.UNKNOWN
    address = 0
    valid_bits = 0
    alt_isa_exc = 0
    ns = False
    hyp = False
    alt_isa = False
    context_id = 0
    timestamp = 0

    pos = hunt.resume
    while True:
        while pos < n:
            start = pos
            while start >= nxt:
                k += 1
                base = run_idx[k] - run_pos[k]
                nxt = run_pos[k + 1] if k + 1 < nruns else n + 1
            offset = base + start
            h = data[pos]
            kind = table[h]
            pos += 1

            if kind == K_ATOM:
                if not ca:
                    bits, count = atoms[h]
                    yield Atom(offset, data[start:pos], bits, count)
                    continue
                if h & 0x40:  # cycle count continues in up to 4 more bytes
                    done = False
                    while pos < n:
                        b = data[pos]
                        pos += 1
                        if not b & 0x80 or pos - start == 5:
                            done = True
                            break
                    if not done:
                        pos = start
                        break
                yield Atom(
                    offset,
                    data[start:pos],
                    0 if h & 2 else 1,
                    1,
                    _cycle_count(data, start) if h & 0x40 else (h >> 2) & 0xF,
                )
                continue

            if kind == K_BRANCH:
                num_addr = 1
                num_exc = 0
                cc_bytes = 0
                addr_isa = isa_unknown
                got_addr = got_exc = done = False
                if not h & 0x80:
                    got_addr = got_exc = True
                    done = not ca
                truncated = False
                while not done:
                    if pos >= n:
                        truncated = True
                        break
                    b = data[pos]
                    pos += 1
                    if not got_addr:
                        if pos - start - 1 < 4:
                            if not b & 0x80:
                                got_exc = not b & 0x40
                                got_addr = True
                                done = got_exc and not ca
                        else:
                            got_exc = not b & 0x40
                            got_addr = True
                            done = got_exc and not ca
                            if b & 0x20:
                                addr_isa = isa_jaz
                            elif (b & 0x30) == 0x10:
                                addr_isa = isa_t32
                            else:
                                addr_isa = isa_a32
                        num_addr += 1
                    elif not got_exc:
                        if num_exc == 0:
                            got_exc = not b & 0x80
                            alt_isa_exc = 1 if b & 0x40 else 0
                        else:
                            got_exc = True
                        num_exc += 1
                        done = got_exc and not ca
                    else:  # cycle count bytes
                        if cc_bytes == 0:
                            done = not b & 0x40
                        else:
                            done = not b & 0x80 or cc_bytes == 4
                        cc_bytes += 1
                if truncated:
                    pos = start
                    break
                if addr_isa == isa_unknown:
                    addr_isa = isa
                if addr_isa == isa_tee and not alt_isa_exc:
                    addr_isa = isa_t32
                elif addr_isa == isa_t32 and alt_isa_exc:
                    addr_isa = isa_tee
                changed = addr_isa != isa
                isa = addr_isa
                value, nbits = _extract_address(data, start, num_addr, isa)
                mask = (1 << nbits) - 1
                address = (address & ~mask) | (value & mask)
                if nbits > valid_bits:
                    valid_bits = nbits
                exception: int | None = None
                ns_updated = False
                if num_exc:
                    e1 = data[start + num_addr]
                    exception = (e1 >> 1) & 0xF
                    ns = bool(e1 & 1)
                    ns_updated = True
                    if num_exc > 1:
                        e2 = data[start + num_addr + 1]
                        hyp = bool((e2 >> 5) & 1)
                        exception |= (e2 & 0x1F) << 4
                cc = _cycle_count(data, start + num_addr + num_exc) if ca else None
                yield BranchAddress(
                    offset,
                    data[start:pos],
                    address,
                    isa,
                    valid_bits,
                    nbits,
                    changed,
                    exception,
                    ns,
                    hyp,
                    ns_updated,
                    cc,
                )
                continue

            if kind == K_ISYNC:
                need = 6 + ctxt_bytes
                need_cc = False
                got_cc = False
                cc_len = 0
                while pos - start < need and pos < n:
                    b = data[pos]
                    pos += 1
                    i = pos - start - 1
                    if i == 5:
                        need_cc = ca and ((b >> 5) & 3) != 0
                        if need_cc:
                            need += 1
                    elif i > 5 and need_cc and not got_cc:
                        if i == 6:
                            got_cc = not b & 0x40
                        else:
                            got_cc = not b & 0x80 or i == 10
                        cc_len += 1
                        if not got_cc:
                            need += 1
                if pos - start < need:
                    pos = start
                    break
                info = data[start + 5]
                reason = ISyncReason((info >> 5) & 3)
                ns = bool(info & 0x08)
                alt_isa = bool(info & 0x04)
                hyp = bool(info & 0x02)
                new_isa = (isa_tee if alt_isa else isa_t32) if data[start + 1] & 1 else isa_a32
                changed = new_isa != isa
                isa = new_isa
                address = (
                    (data[start + 1] & 0xFE)
                    | (data[start + 2] << 8)
                    | (data[start + 3] << 16)
                    | (data[start + 4] << 24)
                )
                valid_bits = 32
                cc = _cycle_count(data, start + 6) if need_cc else None
                ctxt: int | None = None
                if ctxt_bytes:
                    p = start + 6 + cc_len
                    context_id = int.from_bytes(data[p : p + ctxt_bytes], "little")
                    ctxt = context_id
                yield ISync(
                    offset,
                    data[start:pos],
                    address,
                    isa,
                    reason,
                    ns,
                    hyp,
                    alt_isa,
                    ctxt,
                    cc,
                    changed,
                )
                continue

            if kind == K_TS:
                got_ts = False
                cc_len = 0
                done = False
                while not done and pos < n:
                    b = data[pos]
                    pos += 1
                    if not got_ts:
                        if not b & 0x80 or pos - start == ts_max:
                            got_ts = True
                            done = not ca
                    else:
                        if not b & (0x40 if cc_len == 0 else 0x80):
                            done = True
                        cc_len += 1
                        if cc_len == 5:
                            done = True
                if not done:
                    pos = start
                    break
                value = 0
                nbits = 0
                shift = 0
                p = start + 1
                while True:
                    b = data[p]
                    p += 1
                    if ts_size == 64:
                        if p - start - 1 < 9:
                            more = b & 0x80
                            b &= 0x7F
                            nbits += 7
                        else:
                            more = 0
                            nbits += 8
                    else:
                        if p - start - 1 < 7:
                            more = b & 0x80
                            b &= 0x7F
                            nbits += 7
                        else:
                            more = 0
                            b &= 0x3F
                            nbits += 6
                    value |= b << shift
                    shift += 7
                    if not more:
                        break
                cc = _cycle_count(data, p) if ca else None
                # The reference (OpenCSD 1.3.3 to 1.8.0) merges the value as natural
                # binary whatever ETMCCER bit 28 says; so do we (see the module notes).
                mask = (1 << nbits) - 1
                timestamp = (timestamp & ~mask) | (value & mask)
                yield Timestamp(offset, data[start:pos], timestamp, nbits, cc)
                continue

            if kind == K_ASYNC:
                zeros = 1
                result = -1
                while pos < n:
                    b = data[pos]
                    pos += 1
                    if b == 0:
                        zeros += 1
                        if zeros >= _ASYNC_PAD_LIMIT + _ASYNC_ZEROS:
                            result = 1
                            break
                    else:
                        result = 0 if b == 0x80 and zeros >= _ASYNC_ZEROS else 1
                        break
                if result < 0:
                    pos = start
                    break
                if result == 0:
                    yield ASync(offset, data[start:pos])
                else:
                    yield BadSequence(offset, data[start:pos], T.A_SYNC)
                continue

            if kind == K_WP:
                num_addr = 0
                addr_isa = isa_unknown
                got_addr = got_exc = done = False
                while not done and pos < n:
                    b = data[pos]
                    pos += 1
                    if not got_addr:
                        if pos - start - 1 <= 4:
                            if not b & 0x80:
                                got_addr = got_exc = done = True
                        else:
                            got_exc = not b & 0x40
                            got_addr = True
                            done = got_exc
                            if b & 0x20:
                                addr_isa = isa_jaz
                            elif (b & 0x30) == 0x10:
                                addr_isa = isa_t32
                            else:
                                addr_isa = isa_a32
                        num_addr += 1
                    else:
                        alt_isa_exc = 1 if b & 0x40 else 0
                        got_exc = done = True
                if not done:
                    pos = start
                    break
                if addr_isa == isa_unknown:
                    addr_isa = isa
                if addr_isa == isa_tee and not alt_isa_exc:
                    addr_isa = isa_t32
                elif addr_isa == isa_t32 and alt_isa_exc:
                    addr_isa = isa_tee
                changed = addr_isa != isa
                isa = addr_isa
                value, nbits = _extract_address(data, start + 1, num_addr, isa)
                mask = (1 << nbits) - 1
                address = (address & ~mask) | (value & mask)
                if nbits > valid_bits:
                    valid_bits = nbits
                yield WaypointUpdate(
                    offset, data[start:pos], address, isa, valid_bits, nbits, changed
                )
                continue

            if kind == K_CTXT:
                if n - pos < ctxt_bytes:
                    pos = start
                    break
                context_id = int.from_bytes(data[pos : pos + ctxt_bytes], "little")
                pos += ctxt_bytes
                yield ContextID(offset, data[start:pos], context_id)
                continue

            if kind == K_VMID:
                if pos >= n:
                    pos = start
                    break
                pos += 1
                yield VMID(offset, data[start:pos], data[pos - 1])
                continue

            if kind == K_TRIGGER:
                yield Trigger(offset, data[start:pos])
            elif kind == K_ERET:
                yield ExceptionReturn(offset, data[start:pos])
            elif kind == K_IGNORE:
                yield Ignore(offset, data[start:pos])
            else:
                yield Reserved(offset, data[start:pos])

        # The window is used up, or the packet at ``pos`` goes on in the next
        # block: keep its bytes and read it again, whole, with the next window.
        if not win.advance(pos):
            break
        data = win.data
        n = len(data)
        run_pos = win.run_pos
        run_idx = win.run_idx
        nruns = len(run_pos)
        pos = k = 0
        base = run_idx[0] - run_pos[0]
        nxt = run_pos[1] if nruns > 1 else n + 1

    if pos < n and complete:
        while pos >= nxt:
            k += 1
            base = run_idx[k] - run_pos[k]
            nxt = run_pos[k + 1] if k + 1 < nruns else n + 1
        yield IncompleteEOT(base + pos, data[pos:])
