"""ETMv3 packet reader: the bytes of one trace ID → ETMv3 packets.

Reader contract. ``iter_packets(stream, config, complete)`` yields the packets
of :mod:`cstrace.protocols.etmv3.packets` in stream order, each with the capture
index of its first byte and its raw bytes. Before the first A-sync the bytes
come out as ``NotSync`` packets; from then on, one packet per header. A packet
cut by the end of the data is still yielded, as the reference does, with the
bytes there are and the fields carried over from earlier packets (nothing when
``complete`` is False: the capture ended on a framing error). Bad trace never
raises: a reserved header, a data header while that data is not traced, or an
invalid cycle-accurate P-header becomes a one-byte packet and reading goes on
with the next byte; an A-sync with extra zeros gives one ``BadSequence`` packet
per extra zero. Any other exception is a bug. Each packet kind has a small
reader, ``read_<kind>(data, pos, end, index, state)``: it reads the packet whose
header is ``data[pos]`` from ``data[pos:end]`` and returns it (``len(packet.raw)``
is its size) after updating the running ``state``; it returns None when the
packet goes on past ``end`` (``state`` then keeps its values), and False for the
one packet that never ends (normal data with an address and no data bytes: the
reference reads the rest of the stream into it).

Input: a :class:`~cstrace.capture.stream.Stream` and an
:class:`~cstrace.protocols.etmv3.config.Etmv3Config`. The stream is consumed
block by block (``stream.blocks()``, through a
:class:`~cstrace.capture.window.BlockWindow`), so memory stays flat however long
the capture; the packets are the same wherever the capture layer cuts its blocks.

Headers are dispatched through a 256-entry table built from rows in the order
of ARM IHI 0014Q §7.2, Table 7.1 "Header encodings" (:data:`HEADER_ROWS`,
:func:`reader_table`).

The reader follows the reference packet processor (OpenCSD's ETMv3 packet
processor) byte for byte, including what it does with unusual input: before the
first A-sync, bytes are gathered into ``NotSync`` packets of at most 16 bytes,
cut at the end of each block of input (a formatter frame's run of bytes for the
ID, or 1024 bytes of an unformatted capture) and before any 0x00 that may start
an A-sync; runs of zeros longer than an A-sync are split off in front of it.
Fields the reference keeps from packet to packet (address, instruction set,
security state, context ID, timestamp, I-sync reason) are carried over.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from enum import IntEnum
from functools import partial
from typing import Any, Literal, TypeAlias

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow, IndexCursor
from cstrace.elements import Isa
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.decoder import Etmv3Decoder
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
from cstrace.protocols.kit import stream_rows, tapped
from cstrace.tally import PacketCount

__all__ = [
    "HEADER_KIND",
    "HEADER_ROWS",
    "Header",
    "ReaderState",
    "branch_fields",
    "build_header_table",
    "iter_packets",
    "iter_stream_rows",
    "phdr_fields",
    "read",
    "read_async",
    "read_bad_trace_mode",
    "read_branch",
    "read_context_id",
    "read_cycle_count",
    "read_data_suppressed",
    "read_exception_entry",
    "read_exception_exit",
    "read_ignore",
    "read_isync",
    "read_isync_cycle",
    "read_normal_data",
    "read_ooo_data",
    "read_ooo_placeholder",
    "read_pheader",
    "read_reserved",
    "read_store_failed",
    "read_timestamp",
    "read_trigger",
    "read_value_not_traced",
    "read_vmid",
    "reader_table",
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

# Two vocabularies remain, on purpose: ``Header`` names what a header byte
# announces (the table's kinds), while the ``header`` field of bad packets
# (``Reserved``, ``BadTraceMode``, ``BadSequence``) holds the reference's name of
# the packet type before them ("P_HDR", "BAD_TRACEMODE"...), which the listing
# prints and which is not always a header kind. The readers set that name
# (``ReaderState.last``) as a string constant: no table lookup per packet.


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


def _pheader_table(cycle_accurate: bool) -> tuple[tuple[int, int, int, int, bool] | None, ...]:
    """Per header byte: ``(format, atom count, atom bits, W cycles, valid)`` of a P-header, or None.

    ``format`` is 0 for an invalid P-header that keeps the previous packet's
    format, as the reference does (except b10000000, which sets format 1).
    """
    out: list[tuple[int, int, int, int, bool] | None] = []
    for h in range(256):
        if HEADER_KIND[h] is not Header.P_HEADER:
            out.append(None)
        elif (f := phdr_fields(h, cycle_accurate)) is not None:
            out.append((*f, True))
        else:
            out.append((1 if h == 0x80 else 0, 0, 0, 0, False))
    return tuple(out)


_PHEADERS = (_pheader_table(False), _pheader_table(True))
_RAW1: tuple[bytes, ...] = tuple(bytes([b]) for b in range(256))
_REASONS: tuple[ISyncReason, ...] = tuple(ISyncReason(r) for r in range(4))
_A32, _T32, _TEE, _JAZELLE = Isa.A32, Isa.T32, Isa.TEE, Isa.JAZELLE

# Branch packet address layout per instruction set (IHI 0014Q §7.3.3):
# alignment shift, and the address bits carried by a fifth address byte.
_ISA_INDEX = {Isa.T32: 1, Isa.TEE: 2, Isa.JAZELLE: 3}
_ADDR_SHIFT = (2, 1, 1, 0)
_BYTE5_MASK = (0x7, 0xF, 0xF, 0x1F)
_BYTE5_BITS = (3, 4, 4, 5)
_DATA_BYTES = (0, 1, 2, 4)
_BLOCK = 1024  # unformatted captures reach the packet reader in blocks of this size


class ReaderState:
    """What the reader keeps from one packet to the next, and the configuration its readers use.

    The running fields are those the reference packet processor carries over.
    """

    __slots__ = (
        "addr",
        "alt",
        "alt_isa",
        "alt_isa_bit",
        "async_index",
        "b_bits",
        "b_changed",
        "b_exc",
        "ctxid",
        "ctxt_bytes",
        "cut",
        "data_addr",
        "fmt",
        "hyp",
        "hyp_bits",
        "instr",
        "isa",
        "last",
        "ns",
        "pheaders",
        "reason",
        "timestamp",
        "ts_full",
        "ts_last_bits",
        "ts_last_mask",
        "ts_max",
        "v7m",
        "valid_bits",
        "vmid",
    )

    def __init__(self, config: Etmv3Config) -> None:
        self.alt = config.alt_branch
        """Branch addresses use the alternative encoding."""
        self.v7m = config.v7m
        self.ctxt_bytes = config.ctxtid_bytes
        self.instr = config.instr_trace
        self.data_addr = config.data_addr_trace
        self.hyp_bits = config.virt_ext
        self.alt_isa_bit = config.alt_isa_in_isync
        self.ts_max = 9 if config.ts_64bit else 7
        """Timestamp bytes at most; the last one carries 8 (or 6) bits."""
        self.ts_last_mask = 0xFF if config.ts_64bit else 0x3F
        self.ts_last_bits = 8 if config.ts_64bit else 6
        self.pheaders = _PHEADERS[config.cycle_accurate]
        self.addr = 0
        self.valid_bits = 0
        self.isa = Isa.UNKNOWN
        self.ns = False
        self.hyp = False
        self.alt_isa = 0
        self.ctxid = 0
        self.vmid = 0
        self.timestamp = 0
        self.ts_full = False
        """A timestamp packet gave every bit of the timestamp."""
        self.reason = ISyncReason.PERIODIC
        self.fmt = 0
        """Format of the last valid P-header."""
        self.last = ""
        """The reference's name of the last packet's type (see ``Reserved.header``)."""
        self.async_index = -1
        """Capture index for the rest of an A-sync after extra zeros, else -1."""
        self.b_bits = 0
        """The last branch address packet read: the address bits it gave."""
        self.b_changed = False
        """The last branch address packet read changed the instruction set."""
        self.b_exc: _Exception | None = None
        """The last branch address packet read: its exception information."""
        self.cut = 0
        """Why the reading loop stopped at a packet: 0 it did not, :data:`_GOES_ON`,
        :data:`_NEVER_ENDS`."""

    CUT_CONSTANTS = frozenset(
        (
            "alt",
            "v7m",
            "ctxt_bytes",
            "instr",
            "data_addr",
            "hyp_bits",
            "alt_isa_bit",
            "ts_max",
            "ts_last_mask",
            "ts_last_bits",
            "pheaders",
            "b_bits",
            "b_changed",
            "b_exc",
            "cut",
        )
    )
    """Attributes set from the configuration, or that hold the last packet read only:
    not state crossing a cut."""

    def cut_state(self) -> tuple[object, ...]:
        """What the reading of later packets depends on, as one comparable value (see
        :mod:`cstrace.split`); every attribute is here or in :data:`CUT_CONSTANTS`."""
        return (
            self.addr,
            self.valid_bits,
            self.isa,
            self.ns,
            self.hyp,
            self.alt_isa,
            self.ctxid,
            self.vmid,
            self.timestamp,
            self.ts_full,
            self.reason,
            self.fmt,
            self.last,
            self.async_index,
        )

    def settled(self, timestamps: bool) -> bool:
        """Whether a reader started at a synchronisation point has been given everything
        it keeps: a whole address (an I-sync), the format of a P-header, and a whole
        timestamp when ``timestamps`` are traced."""
        return self.valid_bits >= 32 and self.fmt != 0 and (not timestamps or self.ts_full)


# --- helpers -------------------------------------------------------------------------


class _Exception:
    """Exception information bytes of a branch packet."""

    __slots__ = ("cancel", "ctxt", "number", "resume")

    def __init__(self) -> None:
        self.number = 0
        self.cancel = False
        self.ctxt = False  # the bytes updated the security / Hyp / AltISA state
        self.resume = 0


def _exception_bytes(
    d: bytes, k: int, end: int, st: ReaderState, exc: _Exception
) -> tuple[int, bool]:
    """Read exception information bytes at ``d[k:end]``; return (next index, ok)."""
    v7m = st.v7m
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
    d: bytes, k: int, end: int, st: ReaderState
) -> tuple[int, int, _Exception | None, bool]:
    """Decode the address bytes of a branch packet (or an LSiP address) at ``d[k:end]``.

    Returns ``(value, bits, exception, ok)``: the address bits it carries, their
    number, the exception information if present, and False when the packet is
    malformed (then, as in the reference, the address is not updated, but
    exception and instruction-set side effects already made are kept).
    """
    alt = st.alt
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
                k, ok = _exception_bytes(d, k, end, st, exc)
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
            st.isa = _A32
            exc = _Exception()
            exc.number = (byte5 >> 3) & 7
            exc.cancel = bool(byte5 & 0x40)
        else:
            if byte5 & 0x40:
                exc = _Exception()
                k, ok = _exception_bytes(d, k, end, st, exc)
                if not ok:
                    return 0, 0, exc, False
            if byte5 & 0xB8 == 0x08:
                st.isa = _A32
            elif byte5 & 0xB0 == 0x10:
                st.isa = _TEE if st.alt_isa else _T32
            elif byte5 & 0xA0 == 0x20:
                st.isa = _JAZELLE
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


def _cycle_count(d: bytes, k: int, end: int) -> tuple[int, int]:
    """(value, index after) of a cycle count at ``d[k]``; index -1 if it goes on past ``end``.

    7 bits a byte, bit 7 set when another byte follows; the fifth byte, the last,
    carries 4 bits (IHI 0014Q §7.3.2).
    """
    value = shift = 0
    last = k + 4
    while k < end:
        b = d[k]
        if k == last:
            return value | (b & 0x0F) << shift, k + 1
        value |= (b & 0x7F) << shift
        k += 1
        if not b & 0x80:
            return value, k
        shift += 7
    return 0, -1


def _branch_end(d: bytes, p: int, end: int, alt: bool) -> int:
    """Index after the branch packet at ``d[p]`` whose header has bit 7 set; -1 if cut."""
    k = p + 1
    need_exc = False
    while k < end:
        b = d[k]
        k += 1
        if alt:
            if not b & 0x80:
                if not need_exc and b & 0xC0 == 0x40:
                    need_exc = True
                else:
                    return k
        elif k - p == 5:
            if b & 0xC0 == 0x40:
                need_exc = True
            else:
                return k
        elif not b & 0x80:
            return k
    return -1


# --- per-kind readers (IHI 0014Q chapter 7) ---------------------------------------------

Result: TypeAlias = Packet | Literal[False] | None
"""What a reader returns: the packet, None when it goes on past ``end``, False if it never ends."""


def read_pheader(d: bytes, p: int, end: int, index: int, st: ReaderState) -> Packet:
    """P-header (§7.3.1): a run of E/N atoms (and W cycles when cycle-accurate)."""
    h = d[p]
    ph = st.pheaders[h]
    if ph is None:  # not a P-header byte (the header table never sends one here)
        return read_reserved(d, p, end, index, st)
    fmt, count, atoms, cycles, valid = ph
    if fmt:
        st.fmt = fmt
    st.last = "P_HDR"
    return PHeader(index, _RAW1[h], st.fmt, count, atoms, cycles, valid, st.isa)


def read_branch(d: bytes, p: int, end: int, index: int, st: ReaderState) -> BranchAddress | None:
    """Branch address (§7.3.3): up to 5 address bytes, then exception information bytes."""
    q = branch_fields(d, p, end, st)
    if q < 0:
        return None
    return _branch_packet(d[p:q], index, st)


def branch_fields(d: bytes, p: int, end: int, st: ReaderState) -> int:
    """Read the branch address packet at ``d[p]`` into ``st`` (the address, and
    ``b_bits``, ``b_changed``, ``b_exc``: the bits it gave, whether it changed the
    instruction set, its exception information); the index after it, or -1 when it
    goes on past ``end``."""
    q = p + 1 if not d[p] & 0x80 else _branch_end(d, p, end, st.alt)
    if q < 0:
        return -1
    st.last = "BRANCH_ADDRESS"
    prev_isa = st.isa
    value, bits, exc, ok = _branch_bits(d, p, q, st)
    if ok:
        st.addr = _merge(st.addr, value, bits)
        if bits > st.valid_bits:
            st.valid_bits = bits
    else:
        bits = 0
    st.b_bits = bits
    st.b_changed = st.isa is not prev_isa
    st.b_exc = exc
    return q


def _branch_packet(raw: bytes, index: int, st: ReaderState) -> BranchAddress:
    """The branch address packet :func:`branch_fields` read, as an object."""
    exc = st.b_exc
    isa = st.isa
    if exc is None:
        return BranchAddress(index, raw, st.addr, st.b_bits, st.valid_bits, isa, st.b_changed)
    return BranchAddress(
        index, raw, st.addr, st.b_bits, st.valid_bits, isa, st.b_changed,
        exc.ctxt, st.ns, st.hyp, exc.number, exc.cancel, st.v7m, exc.resume,
    )  # fmt: skip


def _isync_end(d: bytes, p: int, k: int, end: int, st: ReaderState) -> int:
    """Index after the I-sync at ``d[p]`` whose fields start at ``d[k]``; -1 if cut."""
    cc_bytes = k - p - 1
    expected = cc_bytes + 6 + st.ctxt_bytes if st.instr else 2 + st.ctxt_bytes
    info_at = k + st.ctxt_bytes
    lsip = False
    while k < end:
        b = d[k]
        if k == info_at:
            lsip = bool(b & 0x80)
        k += 1
        if k - p >= expected and (not lsip or not b & 0x80):
            return k
    return -1


def _isync_address(d: bytes, k: int, q: int, st: ReaderState) -> None:
    """Address and ISA of the I-sync ending at ``q`` whose information byte is ``d[k]``."""
    info = d[k]
    a = _le(d, k + 1, 4)
    st.addr = a & ~1
    st.valid_bits = 32
    if info & 0x10:
        st.isa = _JAZELLE
    elif a & 1:
        st.isa = _TEE if st.alt_isa_bit and info & 4 else _T32
    else:
        st.isa = _A32
    if info & 0x80:
        # Load/store in progress: a second, compressed address follows; the
        # reference keeps it merged over the first one.
        value, bits, _exc, ok = _branch_bits(d, k + 5, q, st)
        if ok:
            st.addr = _merge(a & ~1, value, bits)


def _read_isync(
    d: bytes, p: int, k: int, end: int, index: int, st: ReaderState, cc: int | None, name: str
) -> ISync | BadSequence | None:
    """The I-sync at ``d[p]`` from its context ID at ``d[k]``, after any cycle count."""
    q = _isync_end(d, p, k, end, st)
    if q < 0:
        return None
    if k + st.ctxt_bytes >= q:
        # Only without instruction trace, with a cycle count and a context ID: the
        # reference sizes the packet without its cycle count, then finds too few
        # bytes for the context ID (a malformed packet) or reads the information
        # byte past the packet's end. Either way the packet is bad.
        st.last = "BAD_SEQUENCE"
        return BadSequence(index, d[p:q], name)
    ctxid = None
    if st.ctxt_bytes:
        ctxid = st.ctxid = _le(d, k, st.ctxt_bytes)
        k += st.ctxt_bytes
    info = d[k]
    st.reason = _REASONS[(info >> 5) & 3]
    st.ns = bool(info & 8)
    if st.hyp_bits:
        st.hyp = bool(info & 2)
    if st.instr:
        _isync_address(d, k, q, st)
    st.last = name
    return ISync(
        index, d[p:q], st.reason, st.addr, st.isa, st.ns, st.hyp, ctxid, cc,
        no_address=not st.instr,
    )  # fmt: skip


def read_isync(
    d: bytes, p: int, end: int, index: int, st: ReaderState
) -> ISync | BadSequence | None:
    """I-sync (§7.4.2): context ID, information byte, address, and an LSiP address if flagged."""
    return _read_isync(d, p, p + 1, end, index, st, None, "I_SYNC")


def read_isync_cycle(
    d: bytes, p: int, end: int, index: int, st: ReaderState
) -> ISync | BadSequence | None:
    """I-sync with cycle count (§7.4.2): a cycle count, then the fields of an I-sync."""
    cc, k = _cycle_count(d, p + 1, end)
    if k < 0:
        return None
    return _read_isync(d, p, k, end, index, st, cc, "I_SYNC_CYCLE")


def read_cycle_count(d: bytes, p: int, end: int, index: int, st: ReaderState) -> CycleCount | None:
    """Cycle count (§7.3.2): 1-5 bytes."""
    count, q = _cycle_count(d, p + 1, end)
    if q < 0:
        return None
    st.last = "CYCLE_COUNT"
    return CycleCount(index, d[p:q], count)


def read_timestamp(d: bytes, p: int, end: int, index: int, st: ReaderState) -> Timestamp | None:
    """Timestamp (ETMv3.5): 7 bits a byte (the last one 8, or 6 of a 48-bit timestamp)."""
    q = _cont_end(d, p + 1, end)
    if q > end:
        return None
    ts = bits = 0
    mask = 0x7F
    step = 7
    i = 0
    ts_max = st.ts_max
    while i < ts_max:
        b = d[p + 1 + i]
        ts |= (b & mask) << (7 * i)
        i += 1
        bits += step
        if not b & 0x80:
            break
        if i == ts_max - 1:
            mask = st.ts_last_mask
            step = st.ts_last_bits
    st.timestamp = _merge(st.timestamp, ts, bits)
    if bits >= 7 * (ts_max - 1) + st.ts_last_bits:
        st.ts_full = True
    st.last = "TIMESTAMP"
    return Timestamp(index, d[p:q], st.timestamp, bits)


def read_async(
    d: bytes, p: int, end: int, index: int, st: ReaderState
) -> ASync | BadSequence | None:
    """A-sync (§7.4.1): five 0x00 then 0x80.

    Each extra 0x00 is a one-byte BadSequence; another byte ends a BadSequence of
    the zeros before it (that byte is then read again as a header).
    """
    if st.async_index >= 0:
        index = st.async_index  # the rest of an A-sync after extra zeros
    k = p + 1
    while k < end:
        b = d[k]
        if b == 0:
            if k - p >= 5:  # six zeros: the first one is extra
                st.async_index = index + 1
                st.last = "BAD_SEQUENCE"
                return BadSequence(index, d[p : p + 1], "A_SYNC")
            k += 1
            continue
        st.async_index = -1
        if b == 0x80 and k - p == 5:
            st.last = "A_SYNC"
            return ASync(index, d[p : k + 1])
        st.last = "BAD_SEQUENCE"
        return BadSequence(index, d[p:k], "A_SYNC")
    return None


def read_context_id(d: bytes, p: int, end: int, index: int, st: ReaderState) -> ContextID | None:
    """Context ID: 1, 2 or 4 bytes as configured (one byte, ignored, when none is)."""
    q = p + 1 + (st.ctxt_bytes or 1)
    if q > end:
        return None
    if st.ctxt_bytes:
        st.ctxid = _le(d, p + 1, st.ctxt_bytes)
    st.last = "CONTEXT_ID"
    return ContextID(index, d[p:q], st.ctxid)


def read_vmid(d: bytes, p: int, end: int, index: int, st: ReaderState) -> VMID | None:
    """VMID (ETMv3.5): one byte."""
    if p + 2 > end:
        return None
    st.vmid = d[p + 1]
    st.last = "VMID"
    return VMID(index, d[p : p + 2], st.vmid)


def read_trigger(d: bytes, p: int, end: int, index: int, st: ReaderState) -> Trigger:
    """Trigger: the header alone."""
    st.last = "TRIGGER"
    return Trigger(index, _RAW1[d[p]])


def read_ignore(d: bytes, p: int, end: int, index: int, st: ReaderState) -> Ignore:
    """Ignore: the header alone."""
    st.last = "IGNORE"
    return Ignore(index, _RAW1[d[p]])


def read_exception_exit(d: bytes, p: int, end: int, index: int, st: ReaderState) -> ExceptionExit:
    """Exception exit (ARMv7-M): the header alone."""
    st.last = "EXCEPTION_EXIT"
    return ExceptionExit(index, _RAW1[d[p]])


def read_exception_entry(d: bytes, p: int, end: int, index: int, st: ReaderState) -> ExceptionEntry:
    """Exception entry (ARMv7-M): the header alone."""
    st.last = "EXCEPTION_ENTRY"
    return ExceptionEntry(index, _RAW1[d[p]])


def read_reserved(d: bytes, p: int, end: int, index: int, st: ReaderState) -> Reserved:
    """A reserved header: a one-byte packet naming the packet type before it."""
    pkt = Reserved(index, _RAW1[d[p]], st.last)
    st.last = "RESERVED"
    return pkt


# --- data trace packets (§7.5) -------------------------------------------------------


def read_bad_trace_mode(d: bytes, p: int, end: int, index: int, st: ReaderState) -> BadTraceMode:
    """A data trace header while that data is not traced: a one-byte packet."""
    pkt = BadTraceMode(index, _RAW1[d[p]], st.last)
    st.last = "BAD_TRACEMODE"
    return pkt


def _read_bad_placeholder(d: bytes, p: int, end: int, index: int, st: ReaderState) -> BadTraceMode:
    """An out-of-order placeholder while data is not traced (the reference names it first)."""
    st.last = "OOO_ADDR_PLC"
    return read_bad_trace_mode(d, p, end, index, st)


def read_ooo_data(d: bytes, p: int, end: int, index: int, st: ReaderState) -> OOOData | None:
    """Out-of-order data: a tag and a data value of 0, 1, 2 or 4 bytes."""
    h = d[p]
    size = _DATA_BYTES[(h >> 2) & 3]
    q = p + 1 + size
    if q > end:
        return None
    st.last = "OOO_DATA"
    return OOOData(index, d[p:q], _le(d, p + 1, size), (h >> 5) & 3)


def read_store_failed(d: bytes, p: int, end: int, index: int, st: ReaderState) -> StoreFailed:
    """Store failed: the header alone."""
    st.last = "STORE_FAIL"
    return StoreFailed(index, _RAW1[d[p]])


def read_data_suppressed(d: bytes, p: int, end: int, index: int, st: ReaderState) -> DataSuppressed:
    """Data suppressed: the header alone."""
    st.last = "DATA_SUPPRESSED"
    return DataSuppressed(index, _RAW1[d[p]])


def _data_address(d: bytes, p: int, end: int, st: ReaderState) -> tuple[int, int]:
    """(address byte, index after the address) of a data packet at ``d[p]``; index > end if cut.

    The reference reads one address byte only (its continuation test looks at
    the byte after masking bit 7 off), and stores it over the instruction address.
    """
    q = _cont_end(d, p + 1, end)
    if q > end:
        return 0, q
    a = d[p + 1] & 0x7F
    st.addr = _merge(st.addr, a, 7)
    if st.valid_bits < 7:
        st.valid_bits = 7
    return a, q


def read_ooo_placeholder(
    d: bytes, p: int, end: int, index: int, st: ReaderState
) -> OOOPlaceholder | None:
    """Out-of-order placeholder: a tag, and a data address when traced."""
    h = d[p]
    tag = (h >> 2) & 3
    if not (h & 0x20 and st.data_addr):
        pkt = OOOPlaceholder(index, _RAW1[h], tag)
    else:
        a, q = _data_address(d, p, end, st)
        if q > end:
            return None
        pkt = OOOPlaceholder(index, d[p:q], tag, a, 7)
    st.last = "OOO_ADDR_PLC"
    return pkt


def read_value_not_traced(
    d: bytes, p: int, end: int, index: int, st: ReaderState
) -> ValueNotTraced | None:
    """Value not traced: a data address when traced."""
    h = d[p]
    if not (h & 0x20 and st.data_addr):
        pkt = ValueNotTraced(index, _RAW1[h])
    else:
        a, q = _data_address(d, p, end, st)
        if q > end:
            return None
        pkt = ValueNotTraced(index, d[p:q], a, 7)
    st.last = "VAL_NOT_TRACED"
    return pkt


def read_normal_data(
    d: bytes, p: int, end: int, index: int, st: ReaderState
) -> NormalData | Literal[False] | None:
    """Normal data: a data address when traced, then a value of 0, 1, 2 or 4 bytes."""
    h = d[p]
    size = _DATA_BYTES[(h >> 2) & 3]
    if not (h & 0x20 and st.data_addr):
        q = p + 1 + size
        if q > end:
            return None
        st.last = "NORM_DATA"
        return NormalData(index, d[p:q], None, 0, _le(d, p + 1, size))
    if not size:
        return False  # the reference never completes this packet
    q = _cont_end(d, p + 1, end) + size
    if q > end:
        return None
    a, _q = _data_address(d, p, end, st)
    st.last = "NORM_DATA"
    return NormalData(index, d[p:q], a, 7, _le(d, p + 2, size))


Reader: TypeAlias = Callable[[bytes, int, int, int, ReaderState], Result]
"""``read_<kind>(data, pos, end, index, state)``: see the module's reader contract."""

_READ_KIND: dict[Header, Reader] = {
    Header.BRANCH_ADDRESS: read_branch,
    Header.A_SYNC: read_async,
    Header.CYCLE_COUNT: read_cycle_count,
    Header.I_SYNC: read_isync,
    Header.TRIGGER: read_trigger,
    Header.OOO_DATA: read_ooo_data,
    Header.STORE_FAILED: read_store_failed,
    Header.I_SYNC_CYCLE: read_isync_cycle,
    Header.OOO_PLACEHOLDER: read_ooo_placeholder,
    Header.VMID: read_vmid,
    Header.NORMAL_DATA: read_normal_data,
    Header.TIMESTAMP: read_timestamp,
    Header.DATA_SUPPRESSED: read_data_suppressed,
    Header.IGNORE: read_ignore,
    Header.VALUE_NOT_TRACED: read_value_not_traced,
    Header.CONTEXT_ID: read_context_id,
    Header.EXCEPTION_EXIT: read_exception_exit,
    Header.EXCEPTION_ENTRY: read_exception_entry,
    Header.P_HEADER: read_pheader,
    Header.RESERVED: read_reserved,
}


def reader_table(config: Etmv3Config) -> tuple[Reader, ...]:
    """The reader of every header byte for ``config`` (from :data:`HEADER_KIND`).

    Data trace headers read as one-byte ``BadTraceMode`` packets when the data
    they carry is not traced.
    """
    read = dict(_READ_KIND)
    if not config.data_value_trace:
        read[Header.OOO_DATA] = read[Header.STORE_FAILED] = read_bad_trace_mode
    if not config.data_trace:
        read[Header.OOO_PLACEHOLDER] = _read_bad_placeholder
        for kind in (Header.DATA_SUPPRESSED, Header.VALUE_NOT_TRACED, Header.NORMAL_DATA):
            read[kind] = read_bad_trace_mode
    return tuple(read[kind] for kind in HEADER_KIND)


# What the reference emits for a packet cut short by the end of the trace: the
# bytes there are, with the fields it kept from earlier packets.
_CUT: dict[Header, Callable[[bytes, int, ReaderState], Packet]] = {
    Header.BRANCH_ADDRESS: lambda raw, i, st: BranchAddress(
        i, raw, st.addr, 0, st.valid_bits, st.isa
    ),
    Header.A_SYNC: lambda raw, i, st: ASync(st.async_index if st.async_index >= 0 else i, raw),
    Header.CYCLE_COUNT: lambda raw, i, st: CycleCount(i, raw, 0),
    Header.I_SYNC: lambda raw, i, st: ISync(
        i, raw, st.reason, st.addr, st.isa, st.ns, st.hyp, complete=False
    ),
    Header.OOO_DATA: lambda raw, i, st: OOOData(i, raw, 0, 0),
    Header.OOO_PLACEHOLDER: lambda raw, i, st: OOOPlaceholder(i, raw, 0),
    Header.VMID: lambda raw, i, st: VMID(i, raw, st.vmid),
    Header.NORMAL_DATA: lambda raw, i, st: NormalData(i, raw),
    Header.TIMESTAMP: lambda raw, i, st: Timestamp(i, raw, st.timestamp, 0),
    Header.VALUE_NOT_TRACED: lambda raw, i, st: ValueNotTraced(i, raw),
    Header.CONTEXT_ID: lambda raw, i, st: ContextID(i, raw, st.ctxid),
}
_CUT[Header.I_SYNC_CYCLE] = _CUT[Header.I_SYNC]


# --- before the first A-sync (the reference's WAIT_SYNC state) --------------------------


def _block_end(win: BlockWindow, cur: IndexCursor, p: int, single: bool) -> int:
    """End of the reference's input block holding window position ``p``.

    The reference's packet processor is handed one formatter frame's run of
    bytes for the ID at a time, or 1024-byte reads of an unformatted capture.
    """
    n = len(win.data)
    if single:
        return min(p + _BLOCK - (win.run_idx[0] + p) % _BLOCK, n)
    cur.at(p)
    return min(cur.limit, n)


class _WaitSync:
    """The reference's search for the first A-sync, one call of its waitForSync at a time."""

    __slots__ = ("buf", "index", "reserved", "started", "synced")

    def __init__(self) -> None:
        self.buf = bytearray()
        """Bytes read and not sent yet."""
        self.started = False
        """Reading zeros that may start an A-sync."""
        self.index = 0
        """Capture index of ``buf[0]``."""
        self.reserved = True
        """The reference's packet type is still "no error" (its NotSync is listed as reserved)."""
        self.synced = False

    def read(self, d: bytes, p: int, end: int, index: int) -> tuple[Packet | None, int]:
        """Read ``d[p:end]`` until a packet is to be sent; (that packet or None, new position).

        ``index`` is the capture index of ``d[p]``.
        """
        buf = self.buf
        if not self.started:
            self.index = index
        send: Packet | None = None
        part = 0
        while send is None and p < end:
            c = d[p]
            p += 1
            if self.started:
                buf.append(c)
                if c == 0x80 and len(buf) >= 6:
                    if len(buf) > 6:
                        buf.pop()
                        p -= 1  # the 0x80 is read again once the extra zeros are out
                        part = len(buf) - 5
                        send = NotSync(self.index, bytes(buf[:part]), self.reserved)
                    else:
                        send = ASync(self.index, bytes(buf))
                        self.synced = True
                elif c != 0:
                    self.started = False
                elif len(buf) >= 13:
                    part = 8
                    send = NotSync(self.index, bytes(buf[:part]), self.reserved)
            elif c == 0:
                if not buf:
                    buf.append(c)
                    self.started = True
                else:
                    p -= 1
                    send = NotSync(self.index, bytes(buf), False)
                    self.reserved = False
            else:
                buf.append(c)
                if p == end or len(buf) == 16:
                    send = NotSync(self.index, bytes(buf), False)
                    self.reserved = False
        if send is not None:
            if part:
                del buf[:part]
                self.index += part
                self.reserved = False
            else:
                buf.clear()
        return send, p


def _unsynced(
    win: BlockWindow, ws: _WaitSync, single: bool, dec: Etmv3Decoder
) -> Generator[None, None, int]:
    """The packets up to the first A-sync (included), handed to ``dec`` as objects;
    returns the window position after it.

    Block by block, as the reference is handed them; the last block of a window
    may go on in the next capture block, so it is read with the next window.
    Returns -1 at the end of the stream.
    """
    p = 0
    while True:
        d = win.data
        n = len(d)
        cur = win.cursor()
        if win.final:
            limit = n
        elif single:  # the start of the last 1024-byte block
            limit = max(n - 1 - (win.run_idx[0] + n - 1) % _BLOCK, 0)
        else:  # the start of the last run
            limit = win.run_pos[-1]
        while p < limit:
            send, p = ws.read(d, p, _block_end(win, cur, p, single), cur.at(p))
            if send is not None:
                _give(dec, send)
                if dec.ready():
                    yield None
                if ws.synced:
                    return p
        if not win.advance(p):
            return -1
        p = 0


# --- the reading loop ------------------------------------------------------------------


def iter_packets(
    stream: Stream, config: Etmv3Config, complete: bool = True, state: ReaderState | None = None
) -> Iterator[Packet]:
    """Read the ETMv3 packets of one trace ID's stream (see the module's reader contract),
    with ``state`` as the reader's state after the first A-sync, if given.

    A tap on :func:`read`: the packets are made as objects instead of being decoded."""
    reader: Any = read if state is None else partial(read, state=state)
    return tapped(reader, Etmv3Decoder(config), stream, config, complete)


def iter_stream_rows(
    stream: Stream,
    config: Etmv3Config,
    context: DecodeContext,
    count: PacketCount | None = None,
    size: int = 65536,
) -> Iterator[list[Any]]:
    """The elements of one ETMv3 trace ID's stream, read and decoded in one loop, as lists
    of element rows that each hold one :class:`~cstrace.batch.ElementBatch` of about
    ``size`` rows (:func:`cstrace.protocols.kit.stream_rows`)."""
    dec = Etmv3Decoder(config, context, True, size)
    return stream_rows(read, dec, stream, config, context.complete, count)


def _give(dec: Etmv3Decoder, pkt: Packet) -> None:
    """A packet made as an object: to the tap, or to the decoder."""
    tap = dec.tap
    if tap is not None:
        tap.append(pkt)
    else:
        dec.packet(pkt)


def read(
    stream: Stream,
    config: Etmv3Config,
    complete: bool,
    dec: Etmv3Decoder,
    state: ReaderState | None = None,
) -> Iterator[None]:
    """Read one ETMv3 trace ID's bytes into the decoder ``dec``: P-headers and branch
    addresses are handed to its methods as fields, the other packets as objects
    (:meth:`~cstrace.protocols.etmv3.decoder.Etmv3Decoder.packet`); with a tap
    (``dec.tap``), every packet is made as an object and appended to it.

    The stream is read block by block through a
    :class:`~cstrace.capture.window.BlockWindow`. Yields (None) whenever the
    decoder has output to take. ``state``: the reader's state to use from the first
    A-sync on (a fresh one if None).
    """
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    ws = _WaitSync()
    p = yield from _unsynced(win, ws, stream.trace_id is None, dec)
    if p < 0:
        if ws.buf and complete:
            _give(dec, NotSync(ws.index, bytes(ws.buf), ws.reserved))
        return

    st = ReaderState(config) if state is None else state
    st.last = "A_SYNC"
    readers = reader_table(config)
    d = win.data
    n = len(d)
    cur = win.cursor(p)
    while True:
        while True:
            p = _run(dec, st, readers, d, p, n, cur)
            if dec.ready():
                yield None
            if st.cut or p >= n:
                break
        if st.cut == _NEVER_ENDS or (st.cut and win.final):
            # The packet is cut by the end of the trace (or never ends: then it
            # takes the rest of the stream).
            h = d[p]
            index = cur.at(p)
            rest = [d[p:]]
            while win.advance(len(win.data)):
                if complete:
                    rest.append(win.data)
            if complete:
                _give(dec, _CUT[HEADER_KIND[h]](b"".join(rest), index, st))
            return
        # The window is used up, or the packet at ``p`` goes on in the next block:
        # keep its bytes and read it again, whole, with the next window.
        if not win.advance(p):
            return
        d = win.data
        n = len(d)
        p = 0
        cur = win.cursor()


_GOES_ON = 1
"""``ReaderState.cut``: the packet goes on past the end of the window."""
_NEVER_ENDS = 2
"""``ReaderState.cut``: the packet never ends (it takes the rest of the stream)."""


def _run(
    dec: Etmv3Decoder,
    st: ReaderState,
    readers: tuple[Reader, ...],
    d: bytes,
    p: int,
    n: int,
    cur: IndexCursor,
) -> int:
    """Read packets from window position ``p`` into ``dec`` until the end of the window,
    a packet cut by it (``st.cut`` says so), or output to take. Returns the position
    reached (that of the cut packet, if any)."""
    st.cut = 0
    pheaders = st.pheaders
    tap = dec.tap
    while p < n:
        index = cur.base + p if p < cur.limit else cur.at(p)
        h = d[p]
        ph = pheaders[h]
        if ph is not None:  # P-header (as read_pheader), most of the packets
            fmt, count, atoms, cycles, valid = ph
            if fmt:
                st.fmt = fmt
            st.last = "P_HDR"
            if tap is not None:
                tap.append(PHeader(index, _RAW1[h], st.fmt, count, atoms, cycles, valid, st.isa))
            else:
                dec.pheader(index, st.fmt, count, atoms, cycles, st.isa)
            p += 1
        elif h & 1:  # branch address
            q = branch_fields(d, p, n, st)
            if q < 0:
                st.cut = _GOES_ON
                return p
            if tap is not None:
                tap.append(_branch_packet(d[p:q], index, st))
            else:
                exc = st.b_exc
                if exc is None:
                    dec.branch(index, q - p, st.addr, False, 0, False, False, False, False)
                else:
                    dec.branch(
                        index, q - p, st.addr, True, exc.number, exc.cancel, exc.ctxt,
                        st.ns, st.hyp,
                    )  # fmt: skip
            p = q
        else:
            pkt = readers[h](d, p, n, index, st)
            if not pkt:
                st.cut = _GOES_ON if pkt is None else _NEVER_ENDS
                return p
            p += len(pkt.raw)
            if tap is not None:
                tap.append(pkt)
            else:
                dec.packet(pkt)
        if dec.ready():
            return p
    return p
