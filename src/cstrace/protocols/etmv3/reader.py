"""ETMv3 packet reader: the bytes of one trace ID → ETMv3 packets.

Input: a :class:`~cstrace.capture.stream.Stream` and an
:class:`~cstrace.protocols.etmv3.config.Etmv3Config`; output: the packets of
:mod:`cstrace.protocols.etmv3.packets`, in stream order. The stream is consumed
block by block (``stream.blocks()``, through a
:class:`~cstrace.capture.window.BlockWindow`), so memory stays flat however long
the capture; the packets are the same wherever the capture layer cuts its blocks.

Headers are dispatched through a 256-entry table built from rows in the order
of ARM IHI 0014Q §7.2, Table 7.1 "Header encodings" (:data:`HEADER_ROWS`).

The reader follows the reference packet processor (OpenCSD's ETMv3 packet
processor) byte for byte, including what it does with unusual input:

- before the first A-sync, bytes are gathered into ``NotSync`` packets of at
  most 16 bytes, cut at the end of each block of input (a formatter frame's run
  of bytes for the ID, or 1024 bytes of an unformatted capture) and before any
  0x00 that may start an A-sync; runs of zeros longer than an A-sync are split
  off in front of it;
- a bad header (reserved, a data header while data is not traced, an invalid
  cycle-accurate P-header) becomes a one-byte packet and reading goes on with
  the next byte; an A-sync with extra zeros gives one ``BadSequence`` packet per
  extra zero;
- fields the reference keeps from packet to packet (address, instruction set,
  security state, context ID, timestamp, I-sync reason) are carried over, and a
  packet cut short by the end of the trace is still emitted, with those
  carried-over values (unless the capture ended on a framing error).

Readers never raise on bad trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import IntEnum

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow
from cstrace.elements import Isa
from cstrace.protocols.base import Packet
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.packets import (
    VMID,
    ASync,
    BadSequence,
    BadTraceMode,
    BranchAddress,
    ContextID,
    CycleCount,
    DataSuppressed,
    ExceptionEntry,
    ExceptionExit,
    Ignore,
    ISync,
    ISyncReason,
    NormalData,
    NotSync,
    OOOData,
    OOOPlaceholder,
    PHeader,
    Reserved,
    StoreFailed,
    Timestamp,
    Trigger,
    ValueNotTraced,
)

__all__ = [
    "HEADER_KIND",
    "HEADER_ROWS",
    "Header",
    "build_header_table",
    "iter_packets",
    "phdr_fields",
]


class Header(IntEnum):
    """Packet kinds a header byte announces (IHI 0014Q Table 7.1)."""

    BRANCH_ADDRESS = 0
    A_SYNC = 1
    CYCLE_COUNT = 2
    I_SYNC = 3
    TRIGGER = 4
    OOO_DATA = 5
    STORE_FAILED = 6
    I_SYNC_CYCLE = 7
    OOO_PLACEHOLDER = 8
    VMID = 9
    NORMAL_DATA = 10
    TIMESTAMP = 11
    DATA_SUPPRESSED = 12
    IGNORE = 13
    VALUE_NOT_TRACED = 14
    CONTEXT_ID = 15
    EXCEPTION_EXIT = 16
    EXCEPTION_ENTRY = 17
    P_HEADER = 18
    RESERVED = 19


_T71 = "IHI 0014Q §7.2 Table 7.1"

HEADER_ROWS: tuple[tuple[str, Header, str], ...] = (
    # (bit pattern, msb first; '0'/'1' fixed, any other letter free), kind, spec)
    ("Cxxxxxx1", Header.BRANCH_ADDRESS, f"{_T71}; §7.3.3 Branch packets"),
    ("00000000", Header.A_SYNC, f"{_T71}; §7.4.1 A-sync"),
    ("00000100", Header.CYCLE_COUNT, f"{_T71}; §7.3.2 Cycle count packet"),
    ("00001000", Header.I_SYNC, f"{_T71}; §7.4.2 I-sync"),
    ("00001100", Header.TRIGGER, f"{_T71}; Trigger"),
    ("0010SS00", Header.OOO_DATA, f"{_T71}; Out-of-order data, tag 1"),
    ("0100SS00", Header.OOO_DATA, f"{_T71}; Out-of-order data, tag 2"),
    ("0110SS00", Header.OOO_DATA, f"{_T71}; Out-of-order data, tag 3"),
    ("01010000", Header.STORE_FAILED, f"{_T71}; Store failed"),
    ("01110000", Header.I_SYNC_CYCLE, f"{_T71}; §7.4.2 I-sync with cycle count"),
    ("01A10100", Header.OOO_PLACEHOLDER, f"{_T71}; Out-of-order placeholder, tag 1"),
    ("01A11T00", Header.OOO_PLACEHOLDER, f"{_T71}; Out-of-order placeholder, tags 2-3"),
    ("0001xx10", Header.RESERVED, f"{_T71}; Reserved b00x1xx10 (x=0)"),
    ("0011xx10", Header.RESERVED, f"{_T71}; Reserved b00x1xx10 (x=1)"),
    ("0001xx00", Header.RESERVED, f"{_T71}; Reserved b0001xx00"),
    ("00110x00", Header.RESERVED, f"{_T71}; Reserved b00110x00"),
    ("00111100", Header.VMID, f"{_T71}; VMID (ETMv3.5)"),
    ("00111000", Header.RESERVED, f"{_T71}; Reserved b0011x000 (x=1)"),
    ("00A0SS10", Header.NORMAL_DATA, f"{_T71}; Normal data"),
    ("0101xx10", Header.RESERVED, f"{_T71}; Reserved b0101xx10"),
    ("01000x10", Header.TIMESTAMP, f"{_T71}; Timestamp (ETMv3.5)"),
    ("01001x10", Header.RESERVED, f"{_T71}; Reserved b010x1x10 (x=0)"),
    ("01100010", Header.DATA_SUPPRESSED, f"{_T71}; Data suppressed"),
    ("01100110", Header.IGNORE, f"{_T71}; Ignore"),
    ("011A1010", Header.VALUE_NOT_TRACED, f"{_T71}; Value not traced"),
    ("01101110", Header.CONTEXT_ID, f"{_T71}; Context ID"),
    ("01110010", Header.RESERVED, f"{_T71}; Reserved b01110010"),
    ("01110110", Header.EXCEPTION_EXIT, f"{_T71}; Exception exit (ARMv7-M)"),
    ("01111110", Header.EXCEPTION_ENTRY, f"{_T71}; Exception entry (ARMv7-M)"),
    ("1xxxxxx0", Header.P_HEADER, f"{_T71}; §7.3.1 P-headers"),
)
"""The header encodings, in the order of the specification's table."""


def build_header_table(
    rows: tuple[tuple[str, Header, str], ...] = HEADER_ROWS,
) -> tuple[list[Header | None], list[int]]:
    """Expand ``rows`` into a 256-entry kind table; also count the rows matching each byte."""
    table: list[Header | None] = [None] * 256
    hits = [0] * 256
    for pattern, kind, _cite in rows:
        mask = value = 0
        for ch in pattern:
            mask <<= 1
            value <<= 1
            if ch in "01":
                mask |= 1
                value |= ch == "1"
        for b in range(256):
            if b & mask == value:
                table[b] = kind
                hits[b] += 1
    return table, hits


def _final_table() -> tuple[Header, ...]:
    table, _hits = build_header_table()
    return tuple(Header.RESERVED if k is None else k for k in table)


HEADER_KIND: tuple[Header, ...] = _final_table()
"""Packet kind of every header byte."""

# Names of the reference's packet types, used where a bad packet names the
# header it started as.
_NAMES = {
    Header.BRANCH_ADDRESS: "BRANCH_ADDRESS",
    Header.A_SYNC: "A_SYNC",
    Header.CYCLE_COUNT: "CYCLE_COUNT",
    Header.I_SYNC: "I_SYNC",
    Header.TRIGGER: "TRIGGER",
    Header.OOO_DATA: "OOO_DATA",
    Header.STORE_FAILED: "STORE_FAIL",
    Header.I_SYNC_CYCLE: "I_SYNC_CYCLE",
    Header.OOO_PLACEHOLDER: "OOO_ADDR_PLC",
    Header.VMID: "VMID",
    Header.NORMAL_DATA: "NORM_DATA",
    Header.TIMESTAMP: "TIMESTAMP",
    Header.DATA_SUPPRESSED: "DATA_SUPPRESSED",
    Header.IGNORE: "IGNORE",
    Header.VALUE_NOT_TRACED: "VAL_NOT_TRACED",
    Header.CONTEXT_ID: "CONTEXT_ID",
    Header.EXCEPTION_EXIT: "EXCEPTION_EXIT",
    Header.EXCEPTION_ENTRY: "EXCEPTION_ENTRY",
    Header.P_HEADER: "P_HDR",
    Header.RESERVED: "RESERVED",
}


def phdr_fields(header: int, cycle_accurate: bool) -> tuple[int, int, int, int] | None:
    """``(format, atom count, atom bits, W cycles)`` of a P-header, or None if invalid.

    IHI 0014Q §7.3.1: Table 7.2 (not cycle-accurate) and Table 7.3
    (cycle-accurate). Atom bits: 1 = E, oldest atom in bit 0.
    """
    if not cycle_accurate:
        if header & 3 == 0:  # format 1: b1NEEEE00
            e = (header >> 2) & 0xF
            n = (header >> 6) & 1
            return 1, e + n, (1 << e) - 1, 0
        # format 2: b1000FF10 (the reference accepts any b1xxxxx10)
        return 2, 2, (0 if header & 8 else 1) | (0 if header & 4 else 2), 0
    code = header & 0xA3
    if code == 0x80:  # format 1: b1NxEEE00 with a W per atom
        e = (header >> 2) & 7
        n = (header >> 6) & 1
        if e + n == 0:
            return None  # b10000000, deprecated
        return 1, e + n, (1 << e) - 1, e + n
    if code == 0x82:
        if header & 0x10:  # a single atom, no W
            return 4, 1, 0 if header & 4 else 1, 0
        return 2, 2, (0 if header & 8 else 1) | (0 if header & 4 else 2), 1
    if code == 0xA0:  # 1-8 W then an optional E
        e = (header >> 6) & 1
        return 3, e, e, ((header >> 2) & 7) + 1
    return None


# Per-header P-header fields for both modes: (valid, fmt, count, atoms, cycles).
_PHDR: tuple[tuple[tuple[bool, int, int, int, int], ...], ...] = tuple(
    tuple(
        (True, *f)
        if (f := phdr_fields(h, ca)) is not None
        else (False, 1 if h == 0x80 else 0, 0, 0, 0)
        for h in range(256)
    )
    for ca in (False, True)
)
_RAW1: tuple[bytes, ...] = tuple(bytes([b]) for b in range(256))

# Branch packet address layout per instruction set (IHI 0014Q §7.3.3):
# alignment shift, and the address bits carried by a fifth address byte.
_ISA_INDEX = {Isa.T32: 1, Isa.TEE: 2, Isa.JAZELLE: 3}
_ADDR_SHIFT = (2, 1, 1, 0)
_BYTE5_MASK = (0x7, 0xF, 0xF, 0x1F)
_BYTE5_BITS = (3, 4, 4, 5)
_BLOCK = 1024  # unformatted captures reach the packet reader in blocks of this size


class _State:
    """What the reference packet processor keeps from one packet to the next."""

    __slots__ = (
        "addr",
        "alt_isa",
        "ctxid",
        "fmt",
        "hyp",
        "isa",
        "last",
        "ns",
        "reason",
        "timestamp",
        "valid_bits",
        "vmid",
    )

    def __init__(self) -> None:
        self.addr = 0
        self.valid_bits = 0
        self.isa = Isa.UNKNOWN
        self.ns = False
        self.hyp = False
        self.alt_isa = 0
        self.ctxid = 0
        self.vmid = 0
        self.timestamp = 0
        self.reason = ISyncReason.PERIODIC
        self.fmt = 0
        self.last = ""


class _Exception:
    """Exception information bytes of a branch packet."""

    __slots__ = ("cancel", "ctxt", "number", "resume")

    def __init__(self) -> None:
        self.number = 0
        self.cancel = False
        self.ctxt = False  # the bytes updated the security / Hyp / AltISA state
        self.resume = 0


def _exception_bytes(
    d: bytes, k: int, end: int, st: _State, v7m: bool, exc: _Exception
) -> tuple[int, bool]:
    """Read exception information bytes at ``d[k:end]``; return (next index, ok)."""
    if k >= end:
        return k, False
    b = d[k]
    k += 1
    exc.ctxt = True
    st.ns = bool(b & 1)
    number = (b >> 1) & 0xF
    exc.cancel = bool(b & 0x20)
    st.alt_isa = 1 if b & 0x40 else 0
    resume = 0
    if b & 0x80:
        if k >= end:
            return k, False
        b = d[k]
        k += 1
        byte2 = False
        if b & 0x40:
            byte2 = True  # information byte 2 directly
        else:
            if v7m:
                number |= (b & 0x1F) << 4
            st.hyp = bool(b & 0x20)
            if b & 0x80:
                if k >= end:
                    return k, False
                b = d[k]
                k += 1
                byte2 = True
        if byte2:
            resume = b & 0xF
    exc.number = number & (0x1FF if v7m else 0xF)
    exc.resume = resume
    return k, True


def _branch_bits(
    d: bytes, k: int, end: int, st: _State, alt: bool, v7m: bool
) -> tuple[int, int, _Exception | None, bool]:
    """Decode the address bytes of a branch packet (or an LSiP address) at ``d[k:end]``.

    Returns ``(value, bits, exception, ok)``: the address bits it carries, their
    number, the exception information if present, and False when the packet is
    malformed (then, as in the reference, the address is not updated, but
    exception and instruction-set side effects already made are kept).
    """
    exc: _Exception | None = None
    cbit = True
    nbytes = 0
    bitcount = 0
    value = 0
    while cbit and nbytes < 4:
        if k >= end:
            return 0, 0, exc, False
        b = d[k]
        k += 1
        cbit = bool(b & 0x80)
        shift = bitcount
        if nbytes == 0:
            b = (b & 0x7E) >> 1
            bitcount += 6
        elif alt and not cbit:
            if b & 0x40:
                exc = _Exception()
                k, ok = _exception_bytes(d, k, end, st, v7m, exc)
                if not ok:
                    return 0, 0, exc, False
            b &= 0x3F
            bitcount += 6
        else:
            b &= 0x7F
            bitcount += 7
        value |= b << shift
        nbytes += 1
    byte5 = -1
    if cbit:
        if k >= end:
            return 0, 0, exc, False
        byte5 = d[k]
        k += 1
        if byte5 & 0x80:
            # Deprecated original encoding: ARM state, exception in bits 5:3.
            st.isa = Isa.A32
            exc = _Exception()
            exc.number = (byte5 >> 3) & 7
            exc.cancel = bool(byte5 & 0x40)
        else:
            if byte5 & 0x40:
                exc = _Exception()
                k, ok = _exception_bytes(d, k, end, st, v7m, exc)
                if not ok:
                    return 0, 0, exc, False
            if byte5 & 0xB8 == 0x08:
                st.isa = Isa.A32
            elif byte5 & 0xB0 == 0x10:
                st.isa = Isa.TEE if st.alt_isa else Isa.T32
            elif byte5 & 0xA0 == 0x20:
                st.isa = Isa.JAZELLE
            else:
                return 0, 0, exc, False
    idx = _ISA_INDEX.get(st.isa, 0)
    if byte5 >= 0:
        value |= (byte5 & _BYTE5_MASK[idx]) << bitcount
        bitcount += _BYTE5_BITS[idx]
    shift = _ADDR_SHIFT[idx]
    return value << shift, bitcount + shift, exc, True


def _merge(old: int, value: int, bits: int) -> int:
    mask = (1 << bits) - 1
    return (old & ~mask) | (value & mask)


def _cont_end(d: bytes, k: int, n: int) -> int:
    """Index after the first byte at or after ``k`` with bit 7 clear (``n + 1`` if none)."""
    while k < n:
        if not d[k] & 0x80:
            return k + 1
        k += 1
    return n + 1


def _le(d: bytes, k: int, count: int) -> int:
    return int.from_bytes(d[k : k + count], "little")


_DATA_BYTES = (0, 1, 2, 4)


def iter_packets(stream: Stream, config: Etmv3Config, complete: bool = True) -> Iterator[Packet]:
    """Read the ETMv3 packets of one trace ID's stream (never raises on bad data)."""
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    single = stream.trace_id is None
    offset = win.index_at

    st = _State()
    ca = config.cycle_accurate
    alt = config.alt_branch
    v7m = config.v7m
    ctxt_bytes = config.ctxtid_bytes
    instr = config.instr_trace
    data_val = config.data_value_trace
    data_addr = config.data_addr_trace
    data_any = config.data_trace
    hyp_bits = config.virt_ext
    alt_isa_bit = config.alt_isa_in_isync
    ts_max = 9 if config.ts_64bit else 7
    ts_last_mask = 0xFF if config.ts_64bit else 0x3F
    ts_last_bits = 8 if config.ts_64bit else 6
    phdr = _PHDR[1 if ca else 0]
    kinds = HEADER_KIND

    # ---- Waiting for the first A-sync (the reference's WAIT_SYNC state).
    # Block by block, as the reference is handed them; the last block of a window
    # may go on in the next capture block, so it is read with the next window.
    p = 0
    buf = bytearray()
    start_of_sync = False
    pkt_idx = 0
    reserved_type = True  # before any packet the reference's type is "no error"
    synced = False
    while True:
        d = win.data
        n = len(d)
        # Block ends: where the reference's packet processor is handed a new block.
        if single:
            first = win.run_idx[0]
            ends = [*range(_BLOCK - first % _BLOCK, n, _BLOCK), n]
        else:
            ends = [*win.run_pos[1:], n]
        limit = n if win.final else (ends[-2] if len(ends) > 1 else 0)
        block = 0
        while not synced and p < limit:
            block_end = ends[block]
            while block_end <= p:
                block += 1
                block_end = ends[block]
            # One call of the reference's waitForSync on d[p:block_end].
            if not start_of_sync:
                pkt_idx = offset(p)
            send: Packet | None = None
            part = 0
            while send is None and p < block_end:
                c = d[p]
                p += 1
                if start_of_sync:
                    buf.append(c)
                    if c == 0x80 and len(buf) >= 6:
                        if len(buf) > 6:
                            buf.pop()
                            p -= 1  # the 0x80 is read again once the extra zeros are out
                            part = len(buf) - 5
                            send = NotSync(pkt_idx, bytes(buf[:part]), reserved_type)
                        else:
                            send = ASync(pkt_idx, bytes(buf))
                            synced = True
                    elif c != 0:
                        start_of_sync = False
                    elif len(buf) >= 13:
                        part = 8
                        send = NotSync(pkt_idx, bytes(buf[:part]), reserved_type)
                elif c == 0:
                    if not buf:
                        buf.append(c)
                        start_of_sync = True
                    else:
                        p -= 1
                        send = NotSync(pkt_idx, bytes(buf), False)
                        reserved_type = False
                else:
                    buf.append(c)
                    if p == block_end or len(buf) == 16:
                        send = NotSync(pkt_idx, bytes(buf), False)
                        reserved_type = False
            if send is not None:
                yield send
                if part:
                    del buf[:part]
                    pkt_idx += part
                    reserved_type = False
                else:
                    buf.clear()
        if synced or not win.advance(p):
            break
        p = 0
    if not synced:
        if buf and complete:
            yield NotSync(pkt_idx, bytes(buf), reserved_type)
        return
    st.last = "A_SYNC"

    # ---- Synchronised: one packet per header.
    run_pos = win.run_pos
    run_idx = win.run_idx
    nruns = len(run_pos)
    carry_off = -1  # capture index of an A-sync cut by a block end (see A_SYNC)
    k_run = 0
    while k_run + 1 < nruns and run_pos[k_run + 1] <= p:
        k_run += 1
    base = run_idx[k_run] - run_pos[k_run]
    next_run = run_pos[k_run + 1] if k_run + 1 < nruns else n + 1
    while True:
        while p < n:
            if p >= next_run:
                while k_run + 1 < nruns and run_pos[k_run + 1] <= p:
                    k_run += 1
                base = run_idx[k_run] - run_pos[k_run]
                next_run = run_pos[k_run + 1] if k_run + 1 < nruns else n + 1
            off = base + p
            h = d[p]
            kind = kinds[h]

            if kind == Header.P_HEADER:
                valid, fmt, count, atoms, cycles = phdr[h]
                if valid or h == 0x80:
                    st.fmt = fmt
                yield PHeader(off, _RAW1[h], st.fmt, count, atoms, cycles, valid, st.isa)
                st.last = "P_HDR"
                p += 1
                continue

            if kind == Header.BRANCH_ADDRESS:
                if not h & 0x80:
                    end = p + 1
                else:
                    end = -1
                    k = p + 1
                    need_exc = False
                    while k < n:
                        b = d[k]
                        k += 1
                        size = k - p
                        if alt:
                            if not b & 0x80:
                                if not need_exc and b & 0xC0 == 0x40:
                                    need_exc = True
                                else:
                                    end = k
                                    break
                        elif size == 5:
                            if b & 0xC0 == 0x40:
                                need_exc = True
                            else:
                                end = k
                                break
                        elif not b & 0x80:
                            end = k
                            break
                st.last = "BRANCH_ADDRESS"
                if end < 0:
                    if not win.final:
                        break  # the packet goes on in the next block
                    if complete:
                        yield BranchAddress(off, d[p:], st.addr, 0, st.valid_bits, st.isa)
                    return
                prev_isa = st.isa
                value, bits, exc, ok = _branch_bits(d, p, end, st, alt, v7m)
                if ok:
                    st.addr = _merge(st.addr, value, bits)
                    if bits > st.valid_bits:
                        st.valid_bits = bits
                else:
                    bits = 0
                if exc is not None:
                    yield BranchAddress(
                        off,
                        d[p:end],
                        st.addr,
                        bits,
                        st.valid_bits,
                        st.isa,
                        st.isa != prev_isa,
                        exc.ctxt,
                        st.ns,
                        st.hyp,
                        exc.number,
                        exc.cancel,
                        v7m,
                        exc.resume,
                    )
                else:
                    yield BranchAddress(
                        off, d[p:end], st.addr, bits, st.valid_bits, st.isa, st.isa != prev_isa
                    )
                p = end
                continue

            if kind == Header.I_SYNC or kind == Header.I_SYNC_CYCLE:
                st.last = "I_SYNC" if kind == Header.I_SYNC else "I_SYNC_CYCLE"
                k = p + 1
                got_cc = False
                if kind == Header.I_SYNC_CYCLE:
                    while k < n:
                        b = d[k]
                        k += 1
                        if not b & 0x80 or k - p >= 6:
                            got_cc = True
                            break
                end = -1
                if kind == Header.I_SYNC or got_cc:
                    cc_bytes = k - p - 1
                    expected = cc_bytes + 6 + ctxt_bytes if instr else 2 + ctxt_bytes
                    info_at = p + 1 + cc_bytes + ctxt_bytes
                    lsip = False
                    while k < n:
                        b = d[k]
                        if k == info_at:
                            lsip = bool(b & 0x80)
                        k += 1
                        if k - p >= expected and (not lsip or not b & 0x80):
                            end = k
                            break
                if end < 0:
                    if not win.final:
                        break  # the packet goes on in the next block
                    if complete:
                        yield ISync(
                            off, d[p:], st.reason, st.addr, st.isa, st.ns, st.hyp, complete=False
                        )
                    return
                q = p + 1
                cycle_count = None
                if got_cc:
                    cycle_count = 0
                    shift = 0
                    mask = 0x7F
                    for i in range(5):
                        b = d[q]
                        q += 1
                        cycle_count |= (b & mask) << shift
                        shift += 7
                        if i == 3:
                            mask = 0x0F
                        if not b & 0x80:
                            break
                ctxid = None
                if ctxt_bytes:
                    ctxid = st.ctxid = _le(d, q, ctxt_bytes)
                    q += ctxt_bytes
                info = d[q]
                q += 1
                st.reason = ISyncReason((info >> 5) & 3)
                jazelle = info & 0x10
                alt_isa = (info >> 2) & 1 if alt_isa_bit else 0
                st.ns = bool(info & 8)
                if hyp_bits:
                    st.hyp = bool(info & 2)
                if instr:
                    a = _le(d, q, 4)
                    q += 4
                    thumb = a & 1
                    a &= ~1
                    st.addr = a
                    st.valid_bits = 32
                    if jazelle:
                        st.isa = Isa.JAZELLE
                    elif thumb:
                        st.isa = Isa.TEE if alt_isa else Isa.T32
                    else:
                        st.isa = Isa.A32
                    if info & 0x80:
                        # Load/store in progress: a second, compressed address follows;
                        # the reference keeps it merged over the first one.
                        value, bits, _exc, ok = _branch_bits(d, q, end, st, alt, v7m)
                        if ok:
                            st.addr = _merge(a, value, bits)
                yield ISync(
                    off,
                    d[p:end],
                    st.reason,
                    st.addr,
                    st.isa,
                    st.ns,
                    st.hyp,
                    ctxid,
                    cycle_count,
                    no_address=not instr,
                )
                p = end
                continue

            if kind == Header.CYCLE_COUNT:
                st.last = "CYCLE_COUNT"
                end = -1
                k = p + 1
                while k < n:
                    b = d[k]
                    k += 1
                    if not b & 0x80 or k - p >= 6:
                        end = k
                        break
                if end < 0:
                    if not win.final:
                        break  # the packet goes on in the next block
                    if complete:
                        yield CycleCount(off, d[p:], 0)
                    return
                count = 0
                shift = 0
                mask = 0x7F
                for i in range(p + 1, end):
                    count |= (d[i] & mask) << shift
                    shift += 7
                    if i - p == 4:
                        mask = 0x0F
                yield CycleCount(off, d[p:end], count)
                p = end
                continue

            if kind == Header.TIMESTAMP:
                st.last = "TIMESTAMP"
                end = _cont_end(d, p + 1, n)
                if end > n:
                    if not win.final:
                        break  # the packet goes on in the next block
                    if complete:
                        yield Timestamp(off, d[p:], st.timestamp, 0)
                    return
                ts = 0
                bits = 0
                mask = 0x7F
                step = 7
                i = 0
                while i < ts_max:
                    b = d[p + 1 + i]
                    ts |= (b & mask) << (7 * i)
                    i += 1
                    bits += step
                    if not b & 0x80:
                        break
                    if i == ts_max - 1:
                        mask = ts_last_mask
                        step = ts_last_bits
                st.timestamp = _merge(st.timestamp, ts, bits)
                yield Timestamp(off, d[p:end], st.timestamp, bits)
                p = end
                continue

            if kind == Header.A_SYNC:
                # Up to four more zeros then 0x80; each extra zero is a bad packet.
                if carry_off >= 0:
                    off = carry_off  # the rest of an A-sync cut by the previous block
                    carry_off = -1
                k = p + 1
                start = p
                done = False
                while k < n:
                    b = d[k]
                    size = k - start + 1
                    if b == 0:
                        if size > 5:
                            yield BadSequence(off, d[start : start + 1], "A_SYNC")
                            st.last = "BAD_SEQUENCE"
                            start += 1
                            off += 1
                        k += 1
                    elif b == 0x80 and size == 6:
                        yield ASync(off, d[start : k + 1])
                        st.last = "A_SYNC"
                        p = k + 1
                        done = True
                        break
                    else:
                        yield BadSequence(off, d[start:k], "A_SYNC")
                        st.last = "BAD_SEQUENCE"
                        p = k
                        done = True
                        break
                if not done:
                    if not win.final:
                        # read on from ``start`` with the next block (the extra zeros
                        # before it are already out), at the index reached here
                        p = start
                        carry_off = off
                        break
                    if complete:
                        yield ASync(off, d[start:])
                    return
                continue

            if kind == Header.CONTEXT_ID:
                st.last = "CONTEXT_ID"
                end = p + 1 + (ctxt_bytes or 1)
                if end > n:
                    if not win.final:
                        break  # the packet goes on in the next block
                    if complete:
                        yield ContextID(off, d[p:], st.ctxid)
                    return
                if ctxt_bytes:
                    st.ctxid = _le(d, p + 1, ctxt_bytes)
                yield ContextID(off, d[p:end], st.ctxid)
                p = end
                continue

            if kind == Header.VMID:
                st.last = "VMID"
                if p + 2 > n:
                    if not win.final:
                        break  # the packet goes on in the next block
                    if complete:
                        yield VMID(off, d[p:], st.vmid)
                    return
                st.vmid = d[p + 1]
                yield VMID(off, d[p : p + 2], st.vmid)
                p += 2
                continue

            if kind == Header.TRIGGER:
                st.last = "TRIGGER"
                yield Trigger(off, _RAW1[h])
                p += 1
                continue
            if kind == Header.IGNORE:
                st.last = "IGNORE"
                yield Ignore(off, _RAW1[h])
                p += 1
                continue
            if kind == Header.EXCEPTION_EXIT:
                st.last = "EXCEPTION_EXIT"
                yield ExceptionExit(off, _RAW1[h])
                p += 1
                continue
            if kind == Header.EXCEPTION_ENTRY:
                st.last = "EXCEPTION_ENTRY"
                yield ExceptionEntry(off, _RAW1[h])
                p += 1
                continue
            if kind == Header.RESERVED:
                yield Reserved(off, _RAW1[h], st.last)
                st.last = "RESERVED"
                p += 1
                continue

            # ---- Data trace packets (IHI 0014Q §7.5).
            if kind == Header.OOO_DATA:
                if not data_val:
                    yield BadTraceMode(off, _RAW1[h], st.last)
                    st.last = "BAD_TRACEMODE"
                    p += 1
                    continue
                st.last = "OOO_DATA"
                size = (h >> 2) & 3
                tag = (h >> 5) & 3
                end = p + 1 + _DATA_BYTES[size]
                if end > n:
                    if not win.final:
                        break  # the packet goes on in the next block
                    if complete:
                        yield OOOData(off, d[p:], 0, 0)
                    return
                yield OOOData(off, d[p:end], _le(d, p + 1, _DATA_BYTES[size]), tag)
                p = end
                continue
            if kind == Header.STORE_FAILED:
                if not data_val:
                    yield BadTraceMode(off, _RAW1[h], st.last)
                    st.last = "BAD_TRACEMODE"
                else:
                    yield StoreFailed(off, _RAW1[h])
                    st.last = "STORE_FAIL"
                p += 1
                continue
            if kind == Header.DATA_SUPPRESSED:
                if not data_any:
                    yield BadTraceMode(off, _RAW1[h], st.last)
                    st.last = "BAD_TRACEMODE"
                else:
                    yield DataSuppressed(off, _RAW1[h])
                    st.last = "DATA_SUPPRESSED"
                p += 1
                continue
            if kind == Header.OOO_PLACEHOLDER or kind == Header.VALUE_NOT_TRACED:
                placeholder = kind == Header.OOO_PLACEHOLDER
                if placeholder:
                    st.last = "OOO_ADDR_PLC"
                if not data_any:
                    yield BadTraceMode(off, _RAW1[h], st.last)
                    st.last = "BAD_TRACEMODE"
                    p += 1
                    continue
                st.last = "OOO_ADDR_PLC" if placeholder else "VAL_NOT_TRACED"
                tag = (h >> 2) & 3
                if not (h & 0x20 and data_addr):
                    if placeholder:
                        yield OOOPlaceholder(off, _RAW1[h], tag)
                    else:
                        yield ValueNotTraced(off, _RAW1[h])
                    p += 1
                    continue
                end = _cont_end(d, p + 1, n)
                if end > n:
                    if not win.final:
                        break  # the packet goes on in the next block
                    if complete:
                        if placeholder:
                            yield OOOPlaceholder(off, d[p:], 0)
                        else:
                            yield ValueNotTraced(off, d[p:])
                    return
                # The reference reads one address byte only (its continuation test
                # looks at the byte after masking bit 7 off), and stores it over the
                # instruction address.
                a = d[p + 1] & 0x7F
                st.addr = _merge(st.addr, a, 7)
                if st.valid_bits < 7:
                    st.valid_bits = 7
                if placeholder:
                    yield OOOPlaceholder(off, d[p:end], tag, a, 7)
                else:
                    yield ValueNotTraced(off, d[p:end], a, 7)
                p = end
                continue
            # kind == Header.NORMAL_DATA
            if not data_any:
                yield BadTraceMode(off, _RAW1[h], st.last)
                st.last = "BAD_TRACEMODE"
                p += 1
                continue
            st.last = "NORM_DATA"
            size = (h >> 2) & 3
            nbytes = _DATA_BYTES[size]
            expect_addr = bool(h & 0x20) and data_addr
            if not expect_addr:
                end = p + 1 + nbytes
            else:
                aend = _cont_end(d, p + 1, n)
                # With no data bytes the reference never completes the packet.
                end = aend + nbytes if nbytes else n + 1
            if end > n:
                if not win.final:
                    if nbytes or not expect_addr:
                        break  # the packet goes on in the next block
                    # never completed: the rest of the stream is this packet
                    rest = [d[p:]]
                    while win.advance(len(win.data)):
                        if complete:
                            rest.append(win.data)
                    if complete:
                        yield NormalData(off, b"".join(rest))
                    return
                if complete:
                    yield NormalData(off, d[p:])
                return
            if expect_addr:
                a = d[p + 1] & 0x7F
                st.addr = _merge(st.addr, a, 7)
                if st.valid_bits < 7:
                    st.valid_bits = 7
                yield NormalData(off, d[p:end], a, 7, _le(d, p + 2, nbytes))
            else:
                yield NormalData(off, d[p:end], None, 0, _le(d, p + 1, nbytes))
            p = end
        # The window is used up, or the packet at ``p`` goes on in the next block:
        # keep its bytes and read it again, whole, with the next window.
        if not win.advance(p):
            return
        d = win.data
        n = len(d)
        run_pos = win.run_pos
        run_idx = win.run_idx
        nruns = len(run_pos)
        p = k_run = 0
        base = run_idx[0] - run_pos[0]
        next_run = run_pos[1] if nruns > 1 else n + 1
