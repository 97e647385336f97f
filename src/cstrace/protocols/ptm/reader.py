"""PTM packet reader: the bytes of one trace ID → PTM packets.

Reader contract (the protocol kit's, :mod:`cstrace.protocols.kit`).
``read(stream, config, complete, dec)`` cuts the stream into packets and hands
each to the decoder ``dec`` (a :class:`~cstrace.protocols.ptm.decoder.PtmDecoder`):
the common kinds as fields, to one method per packet kind; the rare ones as
packet objects (``dec.other``). Before the first A-sync the bytes come out as
``NotSync`` packets; from then on, one packet per header. A packet cut by the
end of the data is handed over as ``IncompleteEOT`` holding the bytes there
are (nothing when ``complete`` is False: the capture ended on a framing
error). Bad trace never raises: a malformed A-sync gives a ``BadSequence``
packet, a reserved header a ``Reserved`` packet, and reading goes on with the
next byte. Any other exception is a bug. Each packet kind has a small reader,
``read_<kind>(dec, data, pos, end, index, state)``: it reads the packet whose
header is ``data[pos]`` from ``data[pos:end]``, updates the running ``state``,
hands the packet's fields to ``dec`` and returns the position after it, or
returns -1, changing nothing, when the packet goes on past ``end``. Packet
objects are made only for a tap (:func:`iter_packets`: the listing,
``--format packets``): the decoder's methods then make them instead of
decoding.

Input: a demultiplexed :class:`~cstrace.capture.stream.Stream` and the
:class:`~cstrace.protocols.ptm.config.PtmConfig`. The stream is consumed block
by block (``stream.blocks()``, through a
:class:`~cstrace.capture.window.BlockWindow`), so memory stays flat however
long the capture; the packets are the same wherever the capture layer cuts its
blocks.

Packet formats are those of the Program Flow Trace Architecture Specification
(ARM IHI 0035B, §4.5 "PFT packet formats"). Headers are dispatched through a
256-entry table built from the rows of its Table 4.1 (:data:`READERS`).

Synchronisation follows the reference decoder (OpenCSD): until the first A-sync
the bytes are reported as ``NotSync`` packets, cut at most every 16 bytes and at
the end of each block of data the deformatter delivers (one frame's bytes for
one ID; 1024-byte reads of an unformatted capture). Once synchronised, the
reader never loses sync again.

Timestamps are read as natural binary numbers even when ETMCCER bit 28 says
they are Gray coded (PFTv1.0, or PFTv1.1 with the bit clear): the reference
listings do so, and cstrace matches them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any, NamedTuple, TypeAlias

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow, IndexCursor
from cstrace.protocols.base import DecodeContext, DecodeOptions, Packet
from cstrace.protocols.kit import stream_rows, tapped
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.decoder import PtmDecoder
from cstrace.protocols.ptm.packets import (
    BadSequence,
    Ignore,
    IncompleteEOT,
    NotSync,
    PtmPacketType,
    Reserved,
)
from cstrace.tally import PacketCount

__all__ = [
    "HEADER_ROWS",
    "HEADER_TABLE",
    "KINDS",
    "READERS",
    "HeaderRow",
    "ReaderState",
    "iter_packets",
    "iter_stream_rows",
    "pattern_bytes",
    "read",
    "read_async",
    "read_atom",
    "read_branch",
    "read_context_id",
    "read_exception_return",
    "read_ignore",
    "read_isync",
    "read_reserved",
    "read_timestamp",
    "read_trigger",
    "read_vmid",
    "read_waypoint_update",
]

# Packet kinds are named by PtmPacketType only: the table maps header bytes to
# those members, and the reading loop dispatches on functions, not on kinds.
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
_ATOM_BITS = bytes(b for b, _ in _ATOMS)
_ATOM_COUNT = bytes(c for _, c in _ATOMS)
_A32, _T32, _TEE, _JAZELLE = 0, 1, 3, 4  # the Isa numbers
_UNKNOWN_ISA = 6
_BLOCK = 1024  # the reference lister reads captures 1024 bytes at a time
_UNSYNC_MAX = 16  # unsynchronised bytes reported per NotSync packet at most
_ASYNC_PAD_LIMIT = 11  # extra 0x00 bytes dropped at a time while hunting an A-sync
_ASYNC_ZEROS = 5
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_ONE = 1  # (a 64-bit one when compiled: shifts of it do not overflow)

# Packet kind numbers (PtmPacketType), for the compiled loop.
_K_ASYNC = 2
_K_ISYNC = 3
_K_ATOM = 4
_K_BRANCH = 5
_K_WAYPOINT = 6
_K_TRIGGER = 7
_K_CONTEXT_ID = 8
_K_VMID = 9
_K_TIMESTAMP = 10
_K_EXCEPTION_RETURN = 11
_K_IGNORE = 12


class ReaderState:
    """What the reader keeps from one packet to the next, and the configuration its readers use.

    Addresses and timestamps come compressed (only the bits that changed), and
    the instruction set and security state carry over; OpenCSD keeps the same
    fields in its packet object.
    """

    __slots__ = (
        "address",
        "alt_isa_exc",
        "ca",
        "cc",
        "ctxt_bytes",
        "hyp",
        "isa",
        "ns",
        "timestamp",
        "ts_bits",
        "ts_full",
        "ts_last",
        "ts_last_bits",
        "ts_last_mask",
        "valid_bits",
    )

    def __init__(self, config: PtmConfig) -> None:
        self.ca = config.cycle_accurate
        """Cycle-accurate: atoms, branches, I-syncs and timestamps carry cycle counts."""
        self.ctxt_bytes = config.ctxt_id_bytes
        """Context ID bytes in I-sync and context ID packets."""
        ts64 = config.ts_64bit
        self.ts_last = 9 if ts64 else 7
        """Offset in a timestamp packet of its last possible timestamp byte."""
        self.ts_last_mask = 0xFF if ts64 else 0x3F
        self.ts_last_bits = 8 if ts64 else 6
        self.ts_full = 64 if ts64 else 48
        """Bits in a whole timestamp."""
        self.isa = _UNKNOWN_ISA
        """The instruction set (an Isa number)."""
        self.address = 0
        self.valid_bits = 0
        """Address bits known since synchronisation."""
        self.alt_isa_exc = 0
        """AltISA bit of the last exception information byte (Thumb vs ThumbEE)."""
        self.ns = False
        self.hyp = False
        self.timestamp = 0
        self.ts_bits = 0
        """Timestamp bits given since synchronisation (the most in one packet)."""
        self.cc = 0
        """The value of the last cycle count field read (passed on with its packet)."""

    CUT_CONSTANTS = frozenset(
        ("ca", "cc", "ctxt_bytes", "ts_last", "ts_last_mask", "ts_last_bits", "ts_full")
    )
    """Attributes set from the configuration, and ``cc`` (read by the packet it was read
    for only): not state crossing a cut."""

    def cut_state(self) -> tuple[object, ...]:
        """What the reading of later packets depends on, as one comparable value (see
        :mod:`cstrace.split`); every attribute is here or in :data:`CUT_CONSTANTS`."""
        return (
            self.isa,
            self.address,
            self.valid_bits,
            self.alt_isa_exc,
            self.ns,
            self.hyp,
            self.timestamp,
            self.ts_bits >= self.ts_full,
        )

    def settled(self, timestamps: bool) -> bool:
        """Whether a reader started at a synchronisation point has been given everything
        it keeps: a whole address (an I-sync), and a whole timestamp when ``timestamps``
        are traced."""
        return self.valid_bits >= 32 and (not timestamps or self.ts_bits >= self.ts_full)


# --- per-kind readers (§4.5) -----------------------------------------------------------


def _cycle_count(data: bytes, p: int, end: int, st: ReaderState) -> int:
    """The position after a cycle count field at ``data[p]`` (its value in ``st.cc``); -1
    if cut.

    4 bits in bits [5:2] of the first byte (bit 6: more), then 7 bits a byte (bit 7:
    more), 5 bytes at most (§4.5.4).
    """
    if p >= end:
        return -1
    b = data[p]
    value = (b >> 2) & 0xF
    p += 1
    if b & 0x40:
        shift = 4
        last = p + 4
        while True:
            if p >= end:
                return -1
            b = data[p]
            p += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80 or p == last:
                break
    st.cc = value
    return p


def _extract_address(data: bytes, pos: int, count: int, isa: int) -> int:
    """The address bits of ``count`` address bytes from ``pos`` for ``isa`` (the Isa
    number), and their number in the low byte: ``bits << 8 | number``."""
    b = data[pos]
    if isa == _JAZELLE:
        value = (b & 0x7E) >> 1
        bits = shift = 6
    else:
        value = b & 0x7E
        bits = shift = 7
    for i in range(1, count):
        b = data[pos + i]
        if i == 4:
            if isa == _JAZELLE:
                mask, nbits = 0x1F, 5
            elif isa == _A32:
                mask, nbits = 0x07, 3
            else:
                mask, nbits = 0x0F, 4
        elif i == count - 1:
            mask, nbits = 0x3F, 6
        else:
            mask, nbits = 0x7F, 7
        value |= (b & mask) << shift
        bits += nbits
        shift += 7
    if isa == _A32:
        return (value << 9) | (bits + 1)
    return (value << 8) | bits


def _address_isa(byte5: int) -> int:
    """The instruction set a fifth address byte gives (§4.5.3)."""
    if byte5 & 0x20:
        return _JAZELLE
    return _T32 if byte5 & 0x10 else _A32


def _thumb_or_thumbee(isa: int, alt_isa_exc: int) -> int:
    """Thumb and ThumbEE are told apart by the AltISA bit of exception information."""
    if isa == _TEE and not alt_isa_exc:
        return _T32
    if isa == _T32 and alt_isa_exc:
        return _TEE
    return isa


def read_async(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """A-sync (§4.5.1): five or more 0x00 then 0x80; BadSequence after 16 zeros or another byte."""
    zeros = 1
    p = pos + 1
    while p < end:
        b = data[p]
        p += 1
        if b:
            if b == 0x80 and zeros >= _ASYNC_ZEROS:
                if dec.tap is not None:
                    dec.raw = data[pos:p]
                dec.async_packet(index)
            else:
                dec.other(BadSequence(index, data[pos:p], T.A_SYNC))
            return p
        zeros += 1
        if zeros >= _ASYNC_PAD_LIMIT + _ASYNC_ZEROS:
            dec.other(BadSequence(index, data[pos:p], T.A_SYNC))
            return p
    return -1


def read_isync(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """I-sync (§4.5.2): address, information byte, cycle count if cycle-accurate, context ID."""
    p = pos + 6
    if p > end:
        return -1
    info = data[pos + 5]
    cc = -1
    if st.ca and info & 0x60:  # periodic I-syncs carry no cycle count
        p = _cycle_count(data, p, end, st)
        if p < 0:
            return -1
        cc = st.cc
    ctxt = -1
    n = st.ctxt_bytes
    if n:
        q = p + n
        if q > end:
            return -1
        ctxt = 0
        for i in range(n):
            b = data[p + i]
            ctxt |= b << (8 * i)
        p = q
    alt_isa = (info & 0x04) != 0
    a0 = data[pos + 1]
    isa = (_TEE if alt_isa else _T32) if a0 & 1 else _A32
    changed = isa != st.isa
    st.isa = isa
    b = data[pos + 2]
    address = (a0 & 0xFE) | (b << 8)
    b = data[pos + 3]
    address |= b << 16
    b = data[pos + 4]
    address |= b << 24
    st.address = address
    st.valid_bits = 32
    ns = (info & 0x08) != 0
    hyp = (info & 0x02) != 0
    st.ns = ns
    st.hyp = hyp
    if dec.tap is not None:
        dec.raw = data[pos:p]
    dec.isync(index, p - pos, address, isa, (info >> 5) & 3, ns, hyp, alt_isa, ctxt, cc, changed)
    return p


def read_atom(dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState) -> int:
    """Atom (§4.5.4): E/N atoms; cycle-accurate, one atom and a cycle count from the header on."""
    h = data[pos]
    if not st.ca:
        if dec.tap is not None:
            dec.raw = data[pos : pos + 1]
        dec.atom(index, 1, _ATOM_BITS[h], _ATOM_COUNT[h], -1)
        return pos + 1
    p = _cycle_count(data, pos, end, st)
    if p < 0:
        return -1
    if dec.tap is not None:
        dec.raw = data[pos:p]
    dec.atom(index, p - pos, 0 if h & 2 else 1, 1, st.cc)
    return p


def _address_end(data: bytes, first: int, end: int) -> int:
    """Position after the address bytes from ``data[first]``; -1 if cut.

    Bit 7 of each of the first four says another follows; a fifth is the last.
    """
    p = first
    last = first + 4
    while p < end:
        if p == last or not data[p] & 0x80:
            return p + 1
        p += 1
    return -1


def _set_address(st: ReaderState, data: bytes, first: int, count: int, isa: int) -> int:
    """Merge the address bits of ``count`` bytes at ``data[first]`` into ``st``; their number."""
    x = _extract_address(data, first, count, isa)
    nbits = x & 0xFF
    mask = (_ONE << nbits) - 1
    st.address = (st.address & ~mask & 0xFFFF_FFFF) | ((x >> 8) & mask)
    if nbits > st.valid_bits:
        st.valid_bits = nbits
    return nbits


def read_branch(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """Branch address (§4.5.3): 1-5 address bytes, 0-2 exception bytes, cycle count if CA."""
    p = _address_end(data, pos, end)
    if p < 0:
        return -1
    num_addr = p - pos
    last = data[p - 1]
    isa = _address_isa(last) if num_addr == 5 else st.isa
    alt = st.alt_isa_exc
    ns = st.ns
    hyp = st.hyp
    exception = -1
    if num_addr > 1 and last & 0x40:  # exception information follows
        if p >= end:
            return -1
        e = data[p]
        p += 1
        alt = 1 if e & 0x40 else 0
        ns = (e & 1) != 0
        exception = (e >> 1) & 0xF
        if e & 0x80:
            if p >= end:
                return -1
            e = data[p]
            p += 1
            hyp = (e & 0x20) != 0
            exception |= (e & 0x1F) << 4
    cc = -1
    if st.ca:
        p = _cycle_count(data, p, end, st)
        if p < 0:
            return -1
        cc = st.cc
    isa = _thumb_or_thumbee(isa, alt)
    changed = isa != st.isa
    nbits = _set_address(st, data, pos, num_addr, isa)
    st.isa = isa
    st.alt_isa_exc = alt
    st.ns = ns
    st.hyp = hyp
    if dec.tap is not None:
        dec.raw = data[pos:p]
    dec.branch(
        index, p - pos, st.address, isa, st.valid_bits, nbits, changed, exception, ns, hyp, cc
    )
    return p


def read_waypoint_update(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """Waypoint update (§4.5.5): 1-5 address bytes, then an AltISA byte after a fifth one."""
    p = _address_end(data, pos + 1, end)
    if p < 0:
        return -1
    num_addr = p - pos - 1
    isa = st.isa
    alt = st.alt_isa_exc
    if num_addr == 5:  # the fifth address byte gives the instruction set
        last = data[p - 1]
        isa = _address_isa(last)
        if last & 0x40:
            if p >= end:
                return -1
            alt = 1 if data[p] & 0x40 else 0
            p += 1
    isa = _thumb_or_thumbee(isa, alt)
    changed = isa != st.isa
    nbits = _set_address(st, data, pos + 1, num_addr, isa)
    st.isa = isa
    st.alt_isa_exc = alt
    if dec.tap is not None:
        dec.raw = data[pos:p]
    dec.waypoint_update(index, p - pos, st.address, isa, st.valid_bits, nbits, changed)
    return p


def read_context_id(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """Context ID (§4.5.6): the configured number of bytes, little-endian."""
    n = st.ctxt_bytes
    p = pos + 1 + n
    if p > end:
        return -1
    cid = 0
    for i in range(n):
        b = data[pos + 1 + i]
        cid |= b << (8 * i)
    if dec.tap is not None:
        dec.raw = data[pos:p]
    dec.context_id(index, p - pos, cid)
    return p


def read_vmid(dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState) -> int:
    """VMID (§4.5.7): one byte."""
    if pos + 2 > end:
        return -1
    if dec.tap is not None:
        dec.raw = data[pos : pos + 2]
    dec.vmid(index, 2, data[pos + 1])
    return pos + 2


def read_timestamp(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """Timestamp (§4.5.8): 7 bits a byte (the last byte 8, or 6 for 48 bits), cycle count if CA."""
    p = pos + 1
    last = pos + st.ts_last
    value = 0
    nbits = 0
    while True:
        if p >= end:
            return -1
        b = data[p]
        if p == last:
            value |= (b & st.ts_last_mask) << nbits
            nbits += st.ts_last_bits
            p += 1
            break
        value |= (b & 0x7F) << nbits
        nbits += 7
        p += 1
        if not b & 0x80:
            break
    cc = -1
    if st.ca:
        p = _cycle_count(data, p, end, st)
        if p < 0:
            return -1
        cc = st.cc
    # The reference (OpenCSD 1.3.3 to 1.8.0) merges the value as natural binary
    # whatever ETMCCER bit 28 says; so do we (see the module notes).
    mask = _MASK64 if nbits >= 64 else (_ONE << nbits) - 1
    st.timestamp = (st.timestamp & ~mask & _MASK64) | (value & mask)
    if nbits > st.ts_bits:
        st.ts_bits = nbits
    if dec.tap is not None:
        dec.raw = data[pos:p]
    dec.timestamp(index, p - pos, st.timestamp, nbits, cc)
    return p


def read_trigger(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """Trigger (§4.5.9): the header alone."""
    if dec.tap is not None:
        dec.raw = data[pos : pos + 1]
    dec.trigger(index)
    return pos + 1


def read_exception_return(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """Exception return (§4.5.10): the header alone."""
    if dec.tap is not None:
        dec.raw = data[pos : pos + 1]
    dec.exception_return(index)
    return pos + 1


def read_ignore(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """Ignore (§4.5.11): the header alone."""
    dec.other(Ignore(index, data[pos : pos + 1]))
    return pos + 1


def read_reserved(
    dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState
) -> int:
    """A reserved header: a one-byte packet, and reading goes on with the next byte."""
    dec.other(Reserved(index, data[pos : pos + 1]))
    return pos + 1


Reader: TypeAlias = Callable[[Any, bytes, int, int, int, ReaderState], int]
"""``read_<kind>(dec, data, pos, end, index, state)``: see the module's reader contract."""

_READ_KIND: dict[PtmPacketType, Reader] = {
    T.A_SYNC: read_async,
    T.I_SYNC: read_isync,
    T.ATOM: read_atom,
    T.BRANCH_ADDRESS: read_branch,
    T.WAYPOINT_UPDATE: read_waypoint_update,
    T.TRIGGER: read_trigger,
    T.CONTEXT_ID: read_context_id,
    T.VMID: read_vmid,
    T.TIMESTAMP: read_timestamp,
    T.EXCEPTION_RETURN: read_exception_return,
    T.IGNORE: read_ignore,
    T.RESERVED: read_reserved,
}

READERS: tuple[Reader, ...] = tuple(_READ_KIND[kind] for kind in HEADER_TABLE)
"""The reader of every header byte (from :data:`HEADER_TABLE`)."""

KINDS = bytes(int(k) for k in HEADER_TABLE)
"""The packet kind number of every header byte (for the reading loop)."""
_KINDS = KINDS  # (a C global when compiled)


def _read_one(dec: PtmDecoder, data: bytes, pos: int, end: int, index: int, st: ReaderState) -> int:
    """Read the packet whose header is ``data[pos]`` (see :data:`READERS`); -1 when cut."""
    kind = _KINDS[data[pos]]
    if kind == _K_ATOM:
        return read_atom(dec, data, pos, end, index, st)
    if kind == _K_BRANCH:
        return read_branch(dec, data, pos, end, index, st)
    if kind == _K_ISYNC:
        return read_isync(dec, data, pos, end, index, st)
    if kind == _K_TIMESTAMP:
        return read_timestamp(dec, data, pos, end, index, st)
    if kind == _K_WAYPOINT:
        return read_waypoint_update(dec, data, pos, end, index, st)
    if kind == _K_CONTEXT_ID:
        return read_context_id(dec, data, pos, end, index, st)
    if kind == _K_VMID:
        return read_vmid(dec, data, pos, end, index, st)
    if kind == _K_ASYNC:
        return read_async(dec, data, pos, end, index, st)
    if kind == _K_TRIGGER:
        return read_trigger(dec, data, pos, end, index, st)
    if kind == _K_EXCEPTION_RETURN:
        return read_exception_return(dec, data, pos, end, index, st)
    if kind == _K_IGNORE:
        return read_ignore(dec, data, pos, end, index, st)
    return read_reserved(dec, data, pos, end, index, st)


def _run(dec: PtmDecoder, data: bytes, pos: int, n: int, cur: IndexCursor, st: ReaderState) -> int:
    """Read packets from window position ``pos`` on into ``dec``; stop at the end of the
    window, at a packet cut by it, or when the decoder has output to take. Returns the
    position reached."""
    while pos < n:
        index = cur.base + pos if pos < cur.limit else cur.at(pos)
        e = _read_one(dec, data, pos, n, index, st)
        if e < 0:
            return pos  # the packet goes on in the next block
        pos = e
        if dec.ready():
            return pos
    return pos


# --- before the first A-sync -----------------------------------------------------------


def _ref_blocks(win: BlockWindow, first: int) -> Iterator[tuple[int, int, int, int]]:
    """(start, end, capture index, run) of the blocks the reference delivers one by one.

    From window position ``first``: one block per run of the window (a formatter
    frame's bytes for the ID), cut where a 1024-byte read of the capture ends;
    ``run`` is the number of the run in the whole stream.
    """
    n = len(win.data)
    cur = win.cursor(first)
    start = first
    while start < n:
        index = cur.at(start)
        end = min(cur.limit, n, start + _BLOCK - index % _BLOCK)
        yield start, end, index, win.first_run + cur.run
        start = end


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


def _hunt(win: BlockWindow, hunt: _Unsynced, dec: PtmDecoder) -> Generator[None, None, bool]:
    """Hand the NotSync packets before the first A-sync to ``dec``; True once ``hunt``
    found it (yields whenever the decoder has output to take).

    The hunt goes block by block (the reference's blocks, see ``_ref_blocks``). The
    last block of a window may go on in the next capture block: it is scanned
    with the next window, which also keeps the 1024 bytes before it (the
    reference's previous read, see ``_Unsynced._beyond``).
    """
    out: list[Packet] = []
    first = 0
    while True:
        data = win.data
        n = len(data)
        held = n
        for start, end, index, run in _ref_blocks(win, first):
            if end == n and not win.final:
                held = start
                break
            hunt.run = run
            found = hunt.feed(data, start, end, index, out)
            for pkt in out:
                dec.other(pkt)
            out.clear()
            if dec.ready():
                yield None
            if found:
                return True
        keep = max(held - _BLOCK, 0)
        if not win.advance(keep):
            return False
        first = held - keep


# --- the reading loop ------------------------------------------------------------------


def read(
    stream: Stream,
    config: PtmConfig,
    complete: bool,
    dec: PtmDecoder,
    state: ReaderState | None = None,
) -> Iterator[None]:
    """Read one PTM trace ID's bytes into the decoder ``dec`` (the module's reader
    contract); yields (None) whenever the decoder has output to take.

    The reader state is ``state`` when given (:mod:`.cut` compares it where it cuts
    a stream), else ``dec.reader`` when set, else a fresh one; it is kept in
    ``dec.reader``.
    """
    if state is not None:
        dec.reader = state
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    hunt = _Unsynced(stream)
    if not (yield from _hunt(win, hunt, dec)):
        if complete and hunt.pending:
            dec.other(IncompleteEOT(hunt.index, bytes(hunt.pending)))
        return
    if dec.tap is not None:
        dec.raw = hunt.async_raw
    dec.async_packet(hunt.index)
    if dec.ready():
        yield None
    st = dec.reader
    if st is None:
        st = dec.reader = ReaderState(config)
    data = win.data
    n = len(data)
    pos = hunt.resume
    while True:
        cur = win.cursor(pos)
        while True:
            pos = _run(dec, data, pos, n, cur, st)
            if not dec.ready():
                break
            yield None
        # The window is used up, or the packet at ``pos`` goes on in the next
        # block: keep its bytes and read it again, whole, with the next window.
        if not win.advance(pos):
            break
        data = win.data
        n = len(data)
        pos = 0
    if pos < n and complete:
        dec.other(IncompleteEOT(win.cursor(pos).at(pos), data[pos:]))


def iter_packets(
    stream: Stream, config: PtmConfig, complete: bool = True, state: ReaderState | None = None
) -> Iterator[Packet]:
    """Read the PTM packets of one trace ID's stream (see the module's reader contract):
    a tap on :func:`read` (the decoder's packet methods make packet objects instead of
    decoding them).

    ``state``, when given, is the reader state used (and updated) once synchronised:
    :mod:`cstrace.split` compares it where it cuts a stream.
    """
    dec = PtmDecoder(config, DecodeContext(config.trace_id, DecodeOptions()))
    dec.reader = state
    return tapped(read, dec, stream, config, complete)


def iter_stream_rows(
    stream: Stream,
    config: PtmConfig,
    context: DecodeContext,
    count: PacketCount | None = None,
    size: int = 65536,
) -> Iterator[list[Any]]:
    """The elements of one PTM trace ID's stream, read and decoded in one loop, as lists
    of element rows that each hold one :class:`~cstrace.batch.ElementBatch` of about
    ``size`` rows (:func:`cstrace.protocols.kit.stream_rows`)."""
    dec = PtmDecoder(config, context, True, size)
    return stream_rows(read, dec, stream, config, context.complete, count)
