"""ETMv4 / ETE packet reader: the bytes of one trace ID → :mod:`.packets`.

Input: a :class:`~cstrace.capture.Stream` (one trace ID's bytes and the
capture index of each) and an :class:`~.config.Etmv4Config`. Output: packets,
in stream order, each with the capture index of its first byte.

The reader contract, for :func:`iter_packets` and every ``read_<kind>``:

* ``read_<kind>(data, pos, end, off, st)`` reads the packet whose header is
  ``data[pos]``, using the bytes ``data[pos:end]`` only; ``off`` is the capture
  index of the header and ``st`` the :class:`ReaderState` carried from packet
  to packet (address history, context, timestamp, trace info; it updates it).
  It returns ``(packet, position after it)``; the packet's ``raw`` is exactly
  the bytes it read.
* It returns ``None`` for "need more data": the packet goes on past ``end``.
  Nothing is read and the state is unchanged; the caller reads the packet
  again, whole, once it has more bytes (or reports it cut by the end of trace).
* Bad trace is data, never an exception to the caller: a reader returns a
  :class:`~.packets.BadPacket`, or raises the module's internal
  ``_BadSequence`` which :func:`iter_packets` turns into
  ``BadPacket(BAD_SEQUENCE)``. :func:`iter_packets` never raises on trace
  content; any other exception is a bug.

Headers are dispatched through a 256-entry table of reader functions built from
:data:`HEADER_ROWS` (spec order, each row citing the packet's description: the
ETE chapter of the Arm ARM, D5.3, by packet name, or the ETMv4 specification
IHI0064 chapter 6 for packets ETE does not have). Rows that depend on the
configuration (ETE-only packets, conditional trace, data trace, Q elements,
versions) read as RESERVED / RESERVED_CFG when the configuration does not allow
them, as in the reference decoder. The hot kinds (atoms, addresses and exact
matches: ~97% of the packets of A-profile trace) are read by copies of their
readers inlined in the reader's loop (``_Scanner.scan``).

The loop hands what it reads to a :class:`PacketSink` (:func:`read_into`): the
hot kinds as fields (a run of atom headers, an address and its history entry),
every other packet as an object. :func:`iter_packets` gives the objects of the
plain sink, which makes packet objects of the hot kinds too; the ETMv4/ETE
decoder is a sink of its own, which takes the hot kinds without objects
(:func:`cstrace.protocols.etmv4.decoder.iter_stream_rows`).

The stream is consumed block by block (``stream.blocks()``, through a
:class:`~cstrace.capture.window.BlockWindow`), so memory stays flat however long
the capture: a packet cut by the end of a block is read again, whole, with the
next block, and the packets are the same wherever the blocks are cut.

Behaviour on imperfect trace matches the reference packet processor
(OpenCSD ``TrcPktProcEtmV4I``), so that packet boundaries, raw bytes and
indices agree with its listings:

* before the first alignment synchronisation, bytes are reported as
  ``NotSync`` pieces: a piece ends before each 0x00 byte (which may start an
  A-sync) or after 8 bytes (the next piece then carries the index just past
  that byte, even across a gap in capture indices); a run of more than eleven
  0x00 bytes sheds its first 0x00s as one-byte pieces (listed as I_ASYNC);
* a bad A-sync, a bad extension byte or an overrunning field gives a
  ``BadPacket(BAD_SEQUENCE)`` holding the bytes read so far; a reserved header
  a one-byte ``BadPacket(RESERVED)`` (``RESERVED_CFG`` when only this
  configuration forbids it); reading resumes at the next byte;
* a packet cut by the end of the stream becomes ``BadPacket(INCOMPLETE_EOT)``
  (not emitted when the capture is incomplete, ``complete=False``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any, NamedTuple, TypeAlias

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow, IndexCursor
from cstrace.protocols.etmv4.config import ArchVersion, Etmv4Config
from cstrace.protocols.etmv4.packets import (
    Address,
    AddressContext,
    AddressMatch,
    Async,
    Atom,
    AtomRun,
    BadPacket,
    Cancel,
    Commit,
    CondFlush,
    CondInstr,
    CondResult,
    Context,
    CycleCount,
    DataSyncMarker,
    Discard,
    Etmv4Packet,
    Event,
    Exception_,
    ExceptionReturn,
    FuncRet,
    Ignore,
    Instrumentation,
    Mispredict,
    NotSync,
    Overflow,
    PacketType,
    Q,
    SourceAddress,
    SourceAddressMatch,
    Timestamp,
    TimestampMarker,
    TraceInfo,
    TraceOn,
    TransCommit,
    TransStart,
)

__all__ = [
    "ATOMS",
    "ATOM_FIELDS",
    "HEADER_ROWS",
    "HeaderRow",
    "PacketSink",
    "Reader",
    "ReaderState",
    "atom_packet",
    "header_table",
    "iter_packets",
    "read_into",
    "read_packet",
    "row_bytes",
    "run_atoms",
]

P = PacketType

# One vocabulary: a header byte's kind is a PacketType and the way to read it is
# a reader function, both from HEADER_ROWS; there are no handler codes (the
# H_* integers this reader used to switch on). What is left as plain integers
# is not a packet kind: the C_* configuration conditions of the rows, and the
# trace info section bits (_TI_*). iter_packets tells its inlined kinds apart
# by _ATOM_FIELDS (atoms read the same in every configuration) and by the
# identity of the header's reader, which costs no more than comparing handler
# codes did. Readers take their packet's kind from the header table
# (st.kinds[header]) rather than naming PacketType.X: reading an enum member
# costs about 70 ns in Python 3.11.

Entry: TypeAlias = tuple[int, int, int]
"""An address history entry: (address, instruction set bit, bits the packet gave)."""

_MASK64 = (1 << 64) - 1
_RAW1 = tuple(bytes((b,)) for b in range(256))


class ReaderState:
    """The configuration a stream is read with, and what packets carry over to later ones.

    The reference packet processor resolves compressed fields against earlier
    packets; this is the state it keeps for that: the three-entry address
    history, the current context, the timestamp and what the last trace info
    said. The readers update it; :func:`iter_packets` makes one per stream.
    """

    __slots__ = (
        "a0",
        "a1",
        "a2",
        "b0",
        "b1",
        "b2",
        "cc_mask",
        "cc_thr",
        "cid",
        "cid_bytes",
        "commit_opt1",
        "ctx_valid",
        "el",
        "i0",
        "i1",
        "i2",
        "is_ete",
        "kinds",
        "m_type",
        "max_spec",
        "ns",
        "nse",
        "readers",
        "seen_trace_info",
        "sf",
        "ti_info",
        "ts",
        "ts_valid",
        "vmid",
        "vmid_bytes",
    )

    def __init__(self, config: Etmv4Config) -> None:
        self.readers, self.kinds = header_table(config)
        # from the configuration
        self.is_ete = config.major_version >= 5
        self.m_type = config.is_m_profile
        self.cc_mask = (1 << config.cc_size) - 1
        self.commit_opt1 = config.commit_opt1
        self.max_spec = config.max_spec_depth
        self.vmid_bytes = config.vmid_size // 8
        self.cid_bytes = config.cid_size // 8
        # from the packets read so far
        # The address history, newest first: entry k is (ak, ik, bk), the address, its
        # instruction set bit and the bits the packet gave (see hist). Plain integers,
        # C integers when compiled: an address packet allocates nothing for the history.
        self.a0 = self.a1 = self.a2 = 0
        self.i0 = self.i1 = self.i2 = 0
        self.b0 = self.b1 = self.b2 = 0
        self.ctx_valid = False
        self.el = 0
        self.sf = self.ns = self.nse = False
        self.cid = self.vmid = 0
        self.ts = 0
        self.ts_valid = False
        self.seen_trace_info = False
        self.ti_info = 0
        """INFO section of the last trace info that had one."""
        self.cc_thr = 0
        """Cycle count threshold of the last trace info (added to every cycle count)."""

    @property
    def hist(self) -> tuple[Entry, Entry, Entry]:
        """The address history, newest first, as three entries."""
        return (
            (self.a0, self.i0, self.b0),
            (self.a1, self.i1, self.b1),
            (self.a2, self.i2, self.b2),
        )

    @hist.setter
    def hist(self, entries: tuple[Entry, Entry, Entry]) -> None:
        (self.a0, self.i0, self.b0), (self.a1, self.i1, self.b1), (self.a2, self.i2, self.b2) = (
            entries
        )

    def cut_state(self) -> tuple[object, ...]:
        """What packets carry over to later ones, as one comparable value.

        Two readers of the same configuration whose cut states are equal read the
        same packets from the same bytes (:mod:`cstrace.split` compares a reader
        started at a synchronisation point with one that read the stream from its
        start). The rest of the slots come from the configuration.
        """
        return (
            self.hist,
            self.ctx_valid,
            self.el,
            self.sf,
            self.ns,
            self.nse,
            self.cid,
            self.vmid,
            self.ts,
            self.ts_valid,
            self.seen_trace_info,
            self.ti_info,
            self.cc_thr,
        )


Reader: TypeAlias = Callable[[bytes, int, int, int, ReaderState], "tuple[Etmv4Packet, int] | None"]
"""``read_<kind>(data, pos, end, off, st)``: see the module docstring."""


class _BadSequence(Exception):
    """A field ran past the packet's bytes (the reference's bad-sequence error).

    Raised by a reader once it knows where the packet ends; state it updated
    before reading the bad field stays updated, as in the reference.
    """

    def __init__(self, end: int) -> None:
        super().__init__(end)
        self.end = end
        """Position after the packet: its bytes go into the BadPacket."""


# -- fields ------------------------------------------------------------------------------


def _field_end(data: bytes, p: int, end: int) -> int:
    """Position after a continuation-coded field starting at ``p``; -1 if it runs past ``end``."""
    while p < end:
        if not data[p] & 0x80:
            return p + 1
        p += 1
    return -1


def _cont_field(data: bytes, pos: int, end: int, limit: int) -> tuple[int, int]:
    """A continuation-coded field at ``pos`` (at most ``limit`` bytes, 7 bits each).

    Returns (value, bytes used); raises :class:`_BadSequence` past ``end``,
    which is the end of the packet. The value keeps 32 bits, as the
    reference's field does.
    """
    value = 0
    i = 0
    while i < limit:
        if pos + i >= end:
            raise _BadSequence(end)
        b = data[pos + i]
        value |= (b & 0x7F) << (7 * i)
        i += 1
        if not b & 0x80:
            break
    return value & 0xFFFFFFFF, i


def _cond_result_field(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """A conditional-result F1 payload: (key, result, bytes used) (ETMv4 ch6)."""
    key = 0
    result = 0
    shift = 0
    i = 0
    while i < 6:
        if pos + i >= end:
            raise _BadSequence(end)
        b = data[pos + i]
        if i == 0:
            result = b & 0xF
            key = (b >> 4) & 0x7
            shift = 3
        else:
            key |= (b & 0x7F) << shift
            shift += 7
        i += 1
        if not b & 0x80:
            break
    return key & 0xFFFFFFFF, result, i


def _long_address(data: bytes, p: int, isa: int, wide: bool) -> int:
    """The address field of a long address packet at ``p`` (IS0: bits [8:2] and [15:9] first)."""
    if isa == 0:
        value = ((data[p] & 0x7F) << 2) | ((data[p + 1] & 0x7F) << 9)
    else:
        value = ((data[p] & 0x7F) << 1) | (data[p + 1] << 8)
    value |= (data[p + 2] << 16) | (data[p + 3] << 24)
    if wide:
        value |= int.from_bytes(data[p + 4 : p + 8], "little") << 32
    return value


def _short_address(data: bytes, p: int, isa: int) -> tuple[int, int]:
    """A short address field at ``p``: (value, bits given); one byte, or two if bit 7 is set.

    The first byte gives 7 bits, the second 8 more; IS0 addresses are shifted
    by 2, IS1 by 1.
    """
    c1 = data[p]
    shift = 2 - isa
    if c1 & 0x80:
        return ((c1 & 0x7F) << shift) | (data[p + 1] << (7 + shift)), 15 + shift
    return (c1 & 0x7F) << shift, 7 + shift


def _update_32(st: ReaderState, value: int) -> int:
    """The address after a 32-bit address field: the upper half is kept only in AArch64 (SF)."""
    if st.ctx_valid and st.sf:
        return (st.a0 & ~0xFFFFFFFF) | value
    return value


def _push(st: ReaderState, address: int, isa: int, bits: int) -> None:
    """Put a new address at the front of the history (the oldest entry drops out).

    Compiled, a C function (``reader.pxd``), which the scanner calls as such.
    """
    st.a2 = st.a1
    st.i2 = st.i1
    st.b2 = st.b1
    st.a1 = st.a0
    st.i1 = st.i0
    st.b1 = st.b0
    st.a0 = address
    st.i0 = isa
    st.b0 = bits


def _match(st: ReaderState, index: int) -> Entry:
    """An exact match: history entry ``index`` is copied to the front (``[e_idx, e0, e1]``).

    Compiled, a C function (``reader.pxd``), which the scanner calls as such.
    """
    if index == 0:
        address, isa, bits = st.a0, st.i0, st.b0
    elif index == 1:
        address, isa, bits = st.a1, st.i1, st.b1
    else:
        address, isa, bits = st.a2, st.i2, st.b2
    _push(st, address, isa, bits)
    return (address, isa, bits)


def _set_context(st: ReaderState, data: bytes, q: int, info: int, nv: int, nc: int) -> None:
    """Take a context from its info byte and the VMID / context ID bytes at ``q``."""
    st.ctx_valid = True
    st.el = info & 0x3
    st.sf = bool(info & 0x10)
    st.ns = bool(info & 0x20)
    st.nse = bool(info & 0x08)
    if nv:
        st.vmid = int.from_bytes(data[q : q + nv], "little")
        q += nv
    if nc:
        st.cid = int.from_bytes(data[q : q + nc], "little")


# -- readers: errors, single-byte packets -----------------------------------------------


def read_reserved(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """A reserved header: a one-byte ``BadPacket(RESERVED)``."""
    hdr = data[pos]
    return BadPacket(off, _RAW1[hdr], P.RESERVED, st.kinds[hdr]), pos + 1


def read_reserved_cfg(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """A header this configuration does not allow: a one-byte ``BadPacket(RESERVED_CFG)``."""
    hdr = data[pos]
    return BadPacket(off, _RAW1[hdr], P.RESERVED_CFG, st.kinds[hdr]), pos + 1


# Packets of one header byte and nothing else, by header.
_SIMPLE: dict[int, type[Etmv4Packet]] = {
    int(P.TRACE_ON): TraceOn,
    int(P.FUNC_RET): FuncRet,
    int(P.EXCEPT_RTN): ExceptionReturn,
    int(P.TRANS_ST): TransStart,
    int(P.TRANS_COMMIT): TransCommit,
    int(P.COND_FLUSH): CondFlush,
    int(P.IGNORE): Ignore,
    int(P.TS_MARKER): TimestampMarker,
}


def read_no_payload(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """A packet that is its header alone (by header, from ``_SIMPLE``).

    Trace on, function return, exception return, transaction start and commit,
    conditional flush, ignore, timestamp marker.
    """
    hdr = data[pos]
    return _SIMPLE[hdr](off, _RAW1[hdr]), pos + 1


def read_event(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Event (ETE D5.3): the header's low nibble is the mask of events."""
    hdr = data[pos]
    return Event(off, _RAW1[hdr], hdr & 0xF), pos + 1


def read_data_sync_marker(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Numbered / unnumbered data synchronisation marker (ETMv4 ch6): value in bits [2:0]."""
    hdr = data[pos]
    return DataSyncMarker(off, _RAW1[hdr], st.kinds[hdr], hdr & 0x7), pos + 1


# -- readers: synchronisation, trace info, timestamps ----------------------------------


def read_extension(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Header 0x00: A-sync (eleven 0x00 then 0x80), discard (0x03) or overflow (0x05)."""
    q = pos + 1
    if q >= end:
        return None
    c1 = data[q]
    q += 1
    if c1 == 0x03:
        return Discard(off, data[pos:q]), q
    if c1 == 0x05:
        return Overflow(off, data[pos:q]), q
    if c1 != 0x00:
        return BadPacket(off, data[pos:q], P.BAD_SEQUENCE, P.EXTENSION), q
    while q < end:
        c = data[q]
        q += 1
        if c == 0x80 and q - pos == 12:
            return Async(off, data[pos:q]), q
        if c != 0 or q - pos == 12:
            return BadPacket(off, data[pos:q], P.BAD_SEQUENCE, P.ASYNC), q
    return None


# Trace info sections, bits of the first control byte.
_TI_INFO, _TI_KEY, _TI_SPEC, _TI_CYCT, _TI_WNDW = 0x01, 0x02, 0x04, 0x08, 0x10


def _trace_info_end(data: bytes, pos: int, end: int) -> int:
    """Position after the trace info at ``pos``; -1 if it runs past ``end``.

    The control field (continuation-coded) then each section its first byte
    says is present, in order, each a continuation-coded field of any length.
    """
    q = _field_end(data, pos + 1, end)
    if q < 0:
        return -1
    present = data[pos + 1]
    for section in (_TI_INFO, _TI_KEY, _TI_SPEC, _TI_CYCT, _TI_WNDW):
        if present & section:
            q = _field_end(data, q, end)
            if q < 0:
                return -1
    return q


def read_trace_info(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Trace info (ETE D5.3): INFO, KEY, SPEC, CYCT and commit window sections.

    Fields are read 5 bytes at most, as the reference does; a section the
    packet lacks keeps None (INFO: the last value given).
    """
    after = _trace_info_end(data, pos, end)
    if after < 0:
        return None
    present = data[pos + 1]
    q = _field_end(data, pos + 1, after)
    key = spec = cyct = None
    if present & _TI_INFO and q < after:
        st.ti_info, used = _cont_field(data, q, after, 5)
        q += used
    if present & _TI_KEY and q < after:
        key, used = _cont_field(data, q, after, 5)
        q += used
    if present & _TI_SPEC and q < after:
        spec, used = _cont_field(data, q, after, 5)
        q += used
    if present & _TI_CYCT and q < after:
        cyct, used = _cont_field(data, q, after, 5)
        q += used
    if present & _TI_WNDW and q < after:
        _cont_field(data, q, after, 5)  # commit window: read, unused
    st.ts_valid = False
    st.cc_thr = 0 if cyct is None else cyct
    pkt = TraceInfo(off, data[pos:after], st.ti_info, key, spec, cyct, not st.seen_trace_info)
    st.seen_trace_info = True
    return pkt, after


def read_timestamp(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Timestamp (ETE D5.3): up to 9 bytes of changed low bits, then a cycle count if bit 0."""
    q = pos + 1
    while True:
        if q >= end:
            return None
        q += 1
        if q - pos == 10 or not data[q - 1] & 0x80:
            break
    ts_end = q
    has_cc = data[pos] & 0x1
    if has_cc:
        q = _field_end(data, q, end)
        if q < 0:
            return None
    nbytes = ts_end - pos - 1
    value = 0
    for i in range(nbytes):
        c = data[pos + 1 + i]
        value |= (c if i == 8 else c & 0x7F) << (7 * i)
    bits = nbytes * 7 if nbytes < 9 else 64
    if not st.ts_valid and st.seen_trace_info:
        bits = 64
    mask = (1 << bits) - 1
    st.ts = ((st.ts & ~mask) | (value & mask)) & _MASK64
    st.ts_valid = True
    cc: int | None = None
    if has_cc:
        cc, _ = _cont_field(data, ts_end, q, 3)
        cc &= st.cc_mask
    return Timestamp(off, data[pos:q], st.ts, bits, cc), q


# -- readers: exceptions, context -------------------------------------------------------


def read_exception(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Exception (ETMv4 ch6), or for ETE PE reset (type 0) / transaction failure (0x18).

    PE reset and transaction failure put address 0 (64-bit, IS0) in the history.
    """
    if pos + 1 >= end:
        return None
    c1 = data[pos + 1]
    etype = (c1 >> 1) & 0x1F
    # the reference reads a second type byte for these ETE types, continuation bit or not
    ete_reset = st.is_ete and etype in (0x0, 0x18)
    after = pos + (3 if c1 & 0x80 or ete_reset else 2)
    if after > end:
        return None
    interp = ((c1 & 0x40) >> 5) | (c1 & 0x1)
    fault = False
    if c1 & 0x80:
        c2 = data[pos + 2]
        etype |= (c2 & 0x1F) << 5
        fault = bool((c2 >> 5) & 0x1)
    kind = st.kinds[data[pos]]
    if st.is_ete and etype in (0x0, 0x18):
        _push(st, 0, 0, 64)
        kind = P.TRANS_FAIL if etype == 0x18 else P.PE_RESET
    return Exception_(off, data[pos:after], kind, etype, interp, fault, st.m_type), after


def read_context(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Context (ETE D5.3): 0x80 "context same", 0x81 an info byte then VMID and context ID."""
    if data[pos] == 0x80:
        st.ctx_valid = True
        pkt = Context(
            off, _RAW1[0x80], False, st.el, st.sf, st.ns, st.nse, st.cid, st.vmid, False, False
        )
        return pkt, pos + 1
    if pos + 1 >= end:
        return None
    info = data[pos + 1]
    nv = st.vmid_bytes if info & 0x40 else 0
    nc = st.cid_bytes if info & 0x80 else 0
    after = pos + 2 + (max(1, nv + nc) if info & 0xC0 else 0)
    if after > end:
        return None
    _set_context(st, data, pos + 2, info, nv, nc)
    pkt = Context(
        off, data[pos:after], True, st.el, st.sf, st.ns, st.nse, st.cid, st.vmid, nc > 0, nv > 0
    )
    return pkt, after


# -- readers: addresses -----------------------------------------------------------------

_AddressClass: TypeAlias = type[Address] | type[SourceAddress]

# Short address headers: (class, IS, shift of the first field).
_SHORT: dict[int, tuple[_AddressClass, int, int]] = {
    0x95: (Address, 0, 2),
    0x96: (Address, 1, 1),
    0xB4: (SourceAddress, 0, 2),
    0xB5: (SourceAddress, 1, 1),
}
# Long address headers: (class, IS, 64-bit).
_LONG: dict[int, tuple[_AddressClass, int, bool]] = {
    0x9A: (Address, 0, False),
    0x9B: (Address, 1, False),
    0x9D: (Address, 0, True),
    0x9E: (Address, 1, True),
    0xB6: (SourceAddress, 0, False),
    0xB7: (SourceAddress, 1, False),
    0xB8: (SourceAddress, 0, True),
    0xB9: (SourceAddress, 1, True),
}


def read_address_short(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Target / source address, short (ETE D5.3): the low bits of the newest history entry.

    (``_Scanner.scan`` has an inlined copy.)
    """
    hdr = data[pos]
    cls, isa, _ = _SHORT[hdr]
    if pos + 1 >= end:
        return None
    after = pos + (3 if data[pos + 1] & 0x80 else 2)
    if after > end:
        return None
    value, nbits = _short_address(data, pos + 1, isa)
    address = (st.a0 & ~((1 << nbits) - 1)) | value
    _push(st, address, isa, nbits)
    return cls(off, data[pos:after], st.kinds[hdr], address, isa, nbits), after


def read_address_long(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Target / source address, 32-bit or 64-bit (ETE D5.3).

    A 32-bit address keeps the upper half of the newest history entry only in
    an AArch64 context. (``_Scanner.scan`` has an inlined copy.)
    """
    hdr = data[pos]
    cls, isa, wide = _LONG[hdr]
    after = pos + (9 if wide else 5)
    if after > end:
        return None
    value = _long_address(data, pos + 1, isa, wide)
    address, bits = (value, 64) if wide else (_update_32(st, value), 32)
    _push(st, address, isa, bits)
    return cls(off, data[pos:after], st.kinds[hdr], address, isa, bits), after


def read_address_match(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Target / source address exact match (ETE D5.3): history entry ``header & 3``.

    (``_Scanner.scan`` has an inlined copy.)
    """
    hdr = data[pos]
    index = hdr & 0x3
    address, isa, bits = _match(st, index)
    cls = AddressMatch if hdr < 0xB0 else SourceAddressMatch
    return cls(off, _RAW1[hdr], index, address, isa, bits), pos + 1


# Address with context headers: (IS, 64-bit).
_ADDR_CTXT: dict[int, tuple[int, bool]] = {
    0x82: (0, False),
    0x83: (1, False),
    0x85: (0, True),
    0x86: (1, True),
}


def read_address_context(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Target address with context (ETE D5.3): a long address, then a context as 0x81's."""
    hdr = data[pos]
    isa, wide = _ADDR_CTXT[hdr]
    q = pos + (9 if wide else 5)
    if q >= end:
        return None
    info = data[q]
    nv = st.vmid_bytes if info & 0x40 else 0
    nc = st.cid_bytes if info & 0x80 else 0
    after = q + 1 + nv + nc
    if after > end:
        return None
    value = _long_address(data, pos + 1, isa, wide)
    address, bits = (value, 64) if wide else (_update_32(st, value), 32)
    _push(st, address, isa, bits)
    _set_context(st, data, q + 1, info, nv, nc)
    ctx = (st.el, st.sf, st.ns, st.nse, st.cid, st.vmid, nc > 0, nv > 0)
    return AddressContext(off, data[pos:after], st.kinds[hdr], address, isa, bits, *ctx), after


# Q types (the header's low nibble) that reach read_q: (IS, address bytes: 2 for a
# short address, 4 for a 32-bit one). Types 0-2 are exact matches; 0xF has no count.
_Q_TYPES: dict[int, tuple[int, int]] = {
    0x0: (0, 0),
    0x1: (0, 0),
    0x2: (0, 0),
    0x5: (0, 2),
    0x6: (1, 2),
    0xA: (0, 4),
    0xB: (1, 4),
    0xC: (0, 0),
    0xF: (0, 0),
}


def _q_end(data: bytes, pos: int, end: int, nab: int, counted: bool) -> int:
    """Position after a Q packet (address bytes, then the count field); -1 past ``end``."""
    q = pos + 1
    short = nab == 2
    while nab > 0:
        if q >= end:
            return -1
        c = data[q]
        q += 1
        # a short address may stop after its first byte
        nab -= 2 if short and nab == 2 and not c & 0x80 else 1
    return _field_end(data, q, end) if counted else q


def read_q(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Q (ETE D5.3): an instruction count, perhaps with the address of the next instruction.

    The address is an exact match, short or 32-bit field, read as the address
    packets' are; type 0xF has no count.
    """
    qtype = data[pos] & 0xF
    isa, nab = _Q_TYPES[qtype]
    after = _q_end(data, pos, end, nab, qtype != 0xF)
    if after < 0:
        return None
    match = qtype <= 2
    q = pos + 1
    if match:
        _match(st, qtype)
    elif nab == 2:
        size = 2 if data[q] & 0x80 else 1
        value, nbits = _short_address(data, q, isa)
        _push(st, (st.a0 & ~((1 << nbits) - 1)) | value, isa, nbits)
        q += size
    elif nab == 4:
        _push(st, _update_32(st, _long_address(data, q, isa, False)), isa, 32)
        q += 4
    count = None if qtype == 0xF else _cont_field(data, q, after, 5)[0]
    address = st.a0
    isa = st.i0
    bits = st.b0
    has_address = match or nab > 0
    index = qtype if match else 0
    pkt = Q(off, data[pos:after], qtype, count, has_address, match, index, address, isa, bits)
    return pkt, after


# -- readers: cycle counts, speculation ------------------------------------------------


def read_cycle_count_f1(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Cycle count format 1 (ETE D5.3): a commit field (unless COMMOPT 1), then a count.

    Header bit 0 set: the count is unknown and the packet has no count field.
    """
    hdr = data[pos]
    kind = st.kinds[hdr]
    has_count = not hdr & 0x1
    q = pos + 1
    if not st.commit_opt1:
        q = _field_end(data, q, end)
    if has_count and q >= 0:
        q = _field_end(data, q, end)
    if q < 0:
        return None
    p = pos + 1
    commit = None
    if not st.commit_opt1:
        commit, used = _cont_field(data, p, q, 5)
        p += used
    if has_count:
        count, _ = _cont_field(data, p, q, 3)
        return CycleCount(off, data[pos:q], kind, count + st.cc_thr, commit), q
    return CycleCount(off, data[pos:q], kind, 0, commit, True), q


def read_cycle_count_f2(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Cycle count format 2 (ETE D5.3): one byte, count in [3:0], commit in [7:4].

    Bit 0 of the header (F) chooses the commit form: clear, the field is the
    number of elements less one (1-16); set, it counts up from the maximum
    speculation depth less 15 (TRCIDR8.MAXSPEC - 15 + field), so that a deep
    speculation window can be committed by one packet. A form that comes out
    below zero (MAXSPEC under 15) commits nothing. Under TRCIDR0.COMMOPT == 1
    the packet commits nothing.
    """
    if pos + 1 >= end:
        return None
    hdr = data[pos]
    c1 = data[pos + 1]
    commit: int | None = None
    if not st.commit_opt1:
        base = (st.max_spec - 15) if hdr & 0x1 else 1
        commit = max(0, ((c1 >> 4) & 0xF) + base)
    count = st.cc_thr + (c1 & 0xF)
    return CycleCount(off, data[pos : pos + 2], st.kinds[hdr], count, commit), pos + 2


def read_cycle_count_f3(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Cycle count format 3 (ETE D5.3): count in header bits [1:0], commit in [3:2]."""
    hdr = data[pos]
    commit = None if st.commit_opt1 else ((hdr >> 2) & 0x3) + 1
    return CycleCount(off, _RAW1[hdr], st.kinds[hdr], st.cc_thr + (hdr & 0x3), commit), pos + 1


def read_commit(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Commit (ETE D5.3): a continuation-coded count of elements committed."""
    after = _field_end(data, pos + 1, end)
    if after < 0:
        return None
    value, _ = _cont_field(data, pos + 1, after, 5)
    return Commit(off, data[pos:after], value), after


def read_cancel_f1(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Cancel format 1, with or without mispredict (ETE D5.3): a continuation-coded count."""
    after = _field_end(data, pos + 1, end)
    if after < 0:
        return None
    value, _ = _cont_field(data, pos + 1, after, 5)
    return Cancel(off, data[pos:after], st.kinds[data[pos]], value), after


# Mispredict and cancel format 2: atoms given by the header's low two bits (bits, count).
_SPEC_ATOMS = ((0, 0), (1, 1), (3, 2), (0, 1))


def read_mispredict(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Mispredict (ETE D5.3): 0-2 atoms (header bits [1:0]) then a mispredict."""
    hdr = data[pos]
    bits, count = _SPEC_ATOMS[hdr & 0x3]
    return Mispredict(off, _RAW1[hdr], bits, count), pos + 1


def read_cancel_f2(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Cancel format 2 (ETE D5.3): 0-2 atoms (header bits [1:0]), then cancel 1 element."""
    hdr = data[pos]
    bits, count = _SPEC_ATOMS[hdr & 0x3]
    return Cancel(off, _RAW1[hdr], st.kinds[hdr], 1, bits, count), pos + 1


def read_cancel_f3(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Cancel format 3 (ETE D5.3): an atom if bit 0, then cancel 2-5 elements (bits [2:1])."""
    hdr = data[pos]
    atom = hdr & 0x1
    return Cancel(off, _RAW1[hdr], st.kinds[hdr], ((hdr >> 1) & 0x3) + 2, atom, atom), pos + 1


# -- readers: conditional trace (ETMv4 A/R) ---------------------------------------------


def read_cond_instr_f1(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Conditional instruction format 1 (ETMv4 ch6): a continuation-coded key."""
    after = _field_end(data, pos + 1, end)
    if after < 0:
        return None
    key, _ = _cont_field(data, pos + 1, after, 5)
    return CondInstr(off, data[pos:after], st.kinds[data[pos]], key), after


def read_cond_instr_f2(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Conditional instruction format 2 (ETMv4 ch6): 1 or 2 elements, from the header."""
    hdr = data[pos]
    sel = hdr & 0x3
    num = 2 if sel == 2 else 1
    return CondInstr(off, _RAW1[hdr], st.kinds[hdr], 0, num, sel != 1), pos + 1


def read_cond_instr_f3(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Conditional instruction format 3 (ETMv4 ch6): one byte, element count and final flag."""
    if pos + 1 >= end:
        return None
    c1 = data[pos + 1]
    num = ((c1 >> 1) & 0x3F) + (c1 & 0x1)
    pkt = CondInstr(off, data[pos : pos + 2], st.kinds[data[pos]], 0, num, False, bool(c1 & 0x1))
    return pkt, pos + 2


def read_cond_result_f1(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Conditional result format 1 (ETMv4 ch6): one or two (key, result) payloads."""
    hdr = data[pos]
    two = (hdr & 0xFC) != 0x6C
    after = _field_end(data, pos + 1, end)
    if two and after >= 0:
        after = _field_end(data, after, end)
    if after < 0:
        return None
    key0, res0, used = _cond_result_field(data, pos + 1, after)
    results = [(key0, res0, hdr & 0x1)]
    if two:
        key1, res1, _ = _cond_result_field(data, pos + 1 + used, after)
        results.append((key1, res1, (hdr >> 1) & 0x1))
    return CondResult(off, data[pos:after], st.kinds[hdr], results=tuple(results)), after


def read_cond_result_f2(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Conditional result format 2 (ETMv4 ch6): key increment (bit 2) and token (bits [1:0])."""
    hdr = data[pos]
    pkt = CondResult(
        off, _RAW1[hdr], st.kinds[hdr], key_incr=2 if hdr & 0x4 else 1, token=hdr & 0x3
    )
    return pkt, pos + 1


def read_cond_result_f3(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Conditional result format 3 (ETMv4 ch6): 12 bits of tokens, header bits [3:0] high."""
    if pos + 1 >= end:
        return None
    tokens = data[pos + 1] | ((data[pos] & 0xF) << 8)
    return CondResult(off, data[pos : pos + 2], st.kinds[data[pos]], tokens=tokens), pos + 2


def read_cond_result_f4(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Conditional result format 4 (ETMv4 ch6): a token in header bits [1:0]."""
    hdr = data[pos]
    return CondResult(off, _RAW1[hdr], st.kinds[hdr], token=hdr & 0x3), pos + 1


# -- readers: instrumentation, atoms ----------------------------------------------------


def read_instrumentation(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Instrumentation (ETE D5.3, FEAT_ITE): an EL byte then a 64-bit value."""
    after = pos + 10
    if after > end:
        return None
    value = int.from_bytes(data[pos + 2 : after], "little")
    return Instrumentation(off, data[pos:after], data[pos + 1], value), after


def read_atom(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """Atom formats 1-6 (ETE D5.3): the header is the packet; see :data:`ATOMS`.

    (The reader's loop, ``_Scanner.scan``, reads a run of atoms at once.)
    """
    fields = _ATOM_FIELDS[data[pos]]
    assert fields is not None
    raw, kind, bits, count = fields
    return Atom(off, raw, kind, bits, count), pos + 1


def atom_packet(offset: int, header: int) -> Atom:
    """The atom packet whose header byte is ``header``, at capture index ``offset``."""
    fields = _ATOM_FIELDS[header]
    if fields is None:
        raise ValueError(f"{header:#04x} is not the header of an atom packet")
    raw, kind, bits, count = fields
    return Atom(offset, raw, kind, bits, count)


def run_atoms(run: AtomRun) -> list[Atom]:
    """The atom packets an :class:`~cstrace.protocols.etmv4.packets.AtomRun` stands for."""
    return [atom_packet(run.offset + i, b) for i, b in enumerate(run.raw)]


def read_packet(
    data: bytes, pos: int, end: int, off: int, st: ReaderState
) -> tuple[Etmv4Packet, int] | None:
    """The packet at ``pos`` through the header table (no inlined kinds), as a reader.

    Raises ``_BadSequence`` as the readers do; :func:`iter_packets` is the
    fast way to read a stream.
    """
    return st.readers[data[pos]](data, pos, end, off, st)


# -- the header table -------------------------------------------------------------------

# Configuration conditions of header rows.
C_ALWAYS = 0
C_ETE = 1  # ETE (architecture major version 5 or later)
C_ETE_ITE = 2  # ETE with FEAT_ITE (ETE minor version 3 or later)
C_V8M_FUNC_RET = 3  # M profile, Armv8, ETMv4.2 or later
C_NOT_ETE = 4  # ETMv4 only (ETE: reserved for this configuration)
C_DATA_TRACE = 5  # data trace enabled
C_COND_TRACE = 6  # conditional instruction trace implemented and enabled
C_V43 = 7  # ETMv4.3 or later
C_V46 = 8  # ETMv4.6 / ETE 1.1 or later (version field >= 0x46)
C_Q = 9  # Q elements implemented (TRCIDR0.QSUPP != 0)
C_SRC_ADDR = 10  # ETE source address packets (version >= 0x50)


class HeaderRow(NamedTuple):
    """One row of the header table: a header bit pattern, its kind and its reader."""

    pattern: str
    """Eight characters, most significant bit first; ``x`` matches 0 and 1."""
    kind: PacketType
    reader: Reader
    condition: int
    """C_*: when the configuration fails it, the header reads as RESERVED/RESERVED_CFG."""
    section: str


# The header rows in header-byte order, as in the spec's packet summary tables.
# "ETE D5.3" names the packet's description in the Arm ARM (chapter D5, ETE
# protocol, D5.3 alphabetical list of packets); "ETMv4 ch6" the ETMv4
# architecture specification (IHI0064) chapter 6 for packets ETE does not have.
_R = HeaderRow
HEADER_ROWS: tuple[HeaderRow, ...] = (
    _R(
        "00000000",
        P.EXTENSION,
        read_extension,
        C_ALWAYS,
        "ETE D5.3 Alignment Synchronization / Discard / Overflow (extension header)",
    ),
    _R("00000001", P.TRACE_INFO, read_trace_info, C_ALWAYS, "ETE D5.3 Trace Info"),
    _R("0000001x", P.TIMESTAMP, read_timestamp, C_ALWAYS, "ETE D5.3 Timestamp"),
    _R("00000100", P.TRACE_ON, read_no_payload, C_ALWAYS, "ETE D5.3 Trace On"),
    _R("00000101", P.FUNC_RET, read_no_payload, C_V8M_FUNC_RET, "ETMv4 ch6 Function Return (v8-M)"),
    _R(
        "00000110",
        P.EXCEPT,
        read_exception,
        C_ALWAYS,
        "ETE D5.3 Exception / PE Reset / Transaction Failure; ETMv4 ch6 Exception",
    ),
    _R("00000111", P.EXCEPT_RTN, read_no_payload, C_NOT_ETE, "ETMv4 ch6 Exception Return"),
    _R("00001000", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("00001001", P.ITE, read_instrumentation, C_ETE_ITE, "ETE D5.3 Instrumentation"),
    _R("00001010", P.TRANS_ST, read_no_payload, C_ETE, "ETE D5.3 Transaction Start"),
    _R("00001011", P.TRANS_COMMIT, read_no_payload, C_ETE, "ETE D5.3 Transaction Commit"),
    _R("0000110x", P.CCNT_F2, read_cycle_count_f2, C_ALWAYS, "ETE D5.3 Cycle Count Format 2"),
    _R("0000111x", P.CCNT_F1, read_cycle_count_f1, C_ALWAYS, "ETE D5.3 Cycle Count Format 1"),
    _R("0001xxxx", P.CCNT_F3, read_cycle_count_f3, C_ALWAYS, "ETE D5.3 Cycle Count Format 3"),
    _R(
        "00100xxx",
        P.NUM_DS_MKR,
        read_data_sync_marker,
        C_DATA_TRACE,
        "ETMv4 ch6 Numbered Data Synchronization Marker",
    ),
    _R(
        "001010xx",
        P.UNNUM_DS_MKR,
        read_data_sync_marker,
        C_DATA_TRACE,
        "ETMv4 ch6 Unnumbered Data Synchronization Marker",
    ),
    _R(
        "00101100",
        P.UNNUM_DS_MKR,
        read_data_sync_marker,
        C_DATA_TRACE,
        "ETMv4 ch6 Unnumbered Data Synchronization Marker",
    ),
    _R("00101101", P.COMMIT, read_commit, C_ALWAYS, "ETE D5.3 Commit"),
    _R("00101110", P.CANCEL_F1, read_cancel_f1, C_ALWAYS, "ETE D5.3 Cancel Format 1"),
    _R(
        "00101111",
        P.CANCEL_F1_MISPRED,
        read_cancel_f1,
        C_ALWAYS,
        "ETE D5.3 Cancel Format 1 (with Mispredict)",
    ),
    _R("001100xx", P.MISPREDICT, read_mispredict, C_ALWAYS, "ETE D5.3 Mispredict"),
    _R("001101xx", P.CANCEL_F2, read_cancel_f2, C_ALWAYS, "ETE D5.3 Cancel Format 2"),
    _R("00111xxx", P.CANCEL_F3, read_cancel_f3, C_ALWAYS, "ETE D5.3 Cancel Format 3"),
    _R(
        "0100000x",
        P.COND_I_F2,
        read_cond_instr_f2,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Instruction Format 2",
    ),
    _R(
        "01000010",
        P.COND_I_F2,
        read_cond_instr_f2,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Instruction Format 2",
    ),
    _R("01000011", P.COND_FLUSH, read_no_payload, C_COND_TRACE, "ETMv4 ch6 Conditional Flush"),
    _R(
        "0100010x",
        P.COND_RES_F4,
        read_cond_result_f4,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 4",
    ),
    _R(
        "01000110",
        P.COND_RES_F4,
        read_cond_result_f4,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 4",
    ),
    _R("01000111", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "0100100x",
        P.COND_RES_F2,
        read_cond_result_f2,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 2",
    ),
    _R(
        "01001010",
        P.COND_RES_F2,
        read_cond_result_f2,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 2",
    ),
    _R("01001011", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "0100110x",
        P.COND_RES_F2,
        read_cond_result_f2,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 2",
    ),
    _R(
        "01001110",
        P.COND_RES_F2,
        read_cond_result_f2,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 2",
    ),
    _R("01001111", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "0101xxxx",
        P.COND_RES_F3,
        read_cond_result_f3,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 3",
    ),
    _R("01100xxx", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "011010xx",
        P.COND_RES_F1,
        read_cond_result_f1,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 1",
    ),
    _R(
        "01101100",
        P.COND_I_F1,
        read_cond_instr_f1,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Instruction Format 1",
    ),
    _R(
        "01101101",
        P.COND_I_F3,
        read_cond_instr_f3,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Instruction Format 3",
    ),
    _R(
        "0110111x",
        P.COND_RES_F1,
        read_cond_result_f1,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 1",
    ),
    _R("01110000", P.IGNORE, read_no_payload, C_V43, "ETE D5.3 Ignore (ETMv4.3+)"),
    _R("01110001", P.EVENT, read_event, C_ALWAYS, "ETE D5.3 Event"),
    _R("0111001x", P.EVENT, read_event, C_ALWAYS, "ETE D5.3 Event"),
    _R("011101xx", P.EVENT, read_event, C_ALWAYS, "ETE D5.3 Event"),
    _R("01111xxx", P.EVENT, read_event, C_ALWAYS, "ETE D5.3 Event"),
    _R("1000000x", P.CTXT, read_context, C_ALWAYS, "ETE D5.3 Context Same / Context"),
    _R(
        "10000010",
        P.ADDR_CTXT_L_32IS0,
        read_address_context,
        C_ALWAYS,
        "ETE D5.3 Target Address with Context 32-bit IS0",
    ),
    _R(
        "10000011",
        P.ADDR_CTXT_L_32IS1,
        read_address_context,
        C_ALWAYS,
        "ETE D5.3 Target Address with Context 32-bit IS1",
    ),
    _R("10000100", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "10000101",
        P.ADDR_CTXT_L_64IS0,
        read_address_context,
        C_ALWAYS,
        "ETE D5.3 Target Address with Context 64-bit IS0",
    ),
    _R(
        "10000110",
        P.ADDR_CTXT_L_64IS1,
        read_address_context,
        C_ALWAYS,
        "ETE D5.3 Target Address with Context 64-bit IS1",
    ),
    _R("10000111", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("10001000", P.TS_MARKER, read_no_payload, C_V46, "ETE D5.3 Timestamp Marker (ETE 1.1)"),
    _R("10001001", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("1000101x", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("100011xx", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "1001000x",
        P.ADDR_MATCH,
        read_address_match,
        C_ALWAYS,
        "ETE D5.3 Target Address Exact Match",
    ),
    _R(
        "10010010",
        P.ADDR_MATCH,
        read_address_match,
        C_ALWAYS,
        "ETE D5.3 Target Address Exact Match",
    ),
    _R("10010011", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("10010100", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("10010101", P.ADDR_S_IS0, read_address_short, C_ALWAYS, "ETE D5.3 Target Address Short IS0"),
    _R("10010110", P.ADDR_S_IS1, read_address_short, C_ALWAYS, "ETE D5.3 Target Address Short IS1"),
    _R("10010111", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("1001100x", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "10011010",
        P.ADDR_L_32IS0,
        read_address_long,
        C_ALWAYS,
        "ETE D5.3 Target Address 32-bit IS0",
    ),
    _R(
        "10011011",
        P.ADDR_L_32IS1,
        read_address_long,
        C_ALWAYS,
        "ETE D5.3 Target Address 32-bit IS1",
    ),
    _R("10011100", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "10011101",
        P.ADDR_L_64IS0,
        read_address_long,
        C_ALWAYS,
        "ETE D5.3 Target Address 64-bit IS0",
    ),
    _R(
        "10011110",
        P.ADDR_L_64IS1,
        read_address_long,
        C_ALWAYS,
        "ETE D5.3 Target Address 64-bit IS1",
    ),
    _R("10011111", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("1010000x", P.Q, read_q, C_Q, "ETE D5.3 Q with exact match address"),
    _R("10100010", P.Q, read_q, C_Q, "ETE D5.3 Q with exact match address"),
    _R("10100011", P.Q, read_reserved, C_ALWAYS, "reserved Q type"),
    _R("10100100", P.Q, read_reserved, C_ALWAYS, "reserved Q type"),
    _R("10100101", P.Q, read_q, C_Q, "ETE D5.3 Q with short address IS0"),
    _R("10100110", P.Q, read_q, C_Q, "ETE D5.3 Q with short address IS1"),
    _R("10100111", P.Q, read_reserved, C_ALWAYS, "reserved Q type"),
    _R("1010100x", P.Q, read_reserved, C_ALWAYS, "reserved Q type"),
    _R("1010101x", P.Q, read_q, C_Q, "ETE D5.3 Q with 32-bit address IS0 / IS1"),
    _R("10101100", P.Q, read_q, C_Q, "ETE D5.3 Q with count"),
    _R("10101101", P.Q, read_reserved, C_ALWAYS, "reserved Q type"),
    _R("10101110", P.Q, read_reserved, C_ALWAYS, "reserved Q type"),
    _R("10101111", P.Q, read_q, C_Q, "ETE D5.3 Q (no count)"),
    _R(
        "1011000x",
        P.SRC_ADDR_MATCH,
        read_address_match,
        C_SRC_ADDR,
        "ETE D5.3 Source Address Exact Match",
    ),
    _R(
        "10110010",
        P.SRC_ADDR_MATCH,
        read_address_match,
        C_SRC_ADDR,
        "ETE D5.3 Source Address Exact Match",
    ),
    _R("10110011", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R(
        "10110100",
        P.SRC_ADDR_S_IS0,
        read_address_short,
        C_SRC_ADDR,
        "ETE D5.3 Source Address Short IS0",
    ),
    _R(
        "10110101",
        P.SRC_ADDR_S_IS1,
        read_address_short,
        C_SRC_ADDR,
        "ETE D5.3 Source Address Short IS1",
    ),
    _R(
        "10110110",
        P.SRC_ADDR_L_32IS0,
        read_address_long,
        C_SRC_ADDR,
        "ETE D5.3 Source Address 32-bit IS0",
    ),
    _R(
        "10110111",
        P.SRC_ADDR_L_32IS1,
        read_address_long,
        C_SRC_ADDR,
        "ETE D5.3 Source Address 32-bit IS1",
    ),
    _R(
        "10111000",
        P.SRC_ADDR_L_64IS0,
        read_address_long,
        C_SRC_ADDR,
        "ETE D5.3 Source Address 64-bit IS0",
    ),
    _R(
        "10111001",
        P.SRC_ADDR_L_64IS1,
        read_address_long,
        C_SRC_ADDR,
        "ETE D5.3 Source Address 64-bit IS1",
    ),
    _R("1011101x", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("101111xx", P.RESERVED, read_reserved, C_ALWAYS, "reserved"),
    _R("1100xxxx", P.ATOM_F6, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("110100xx", P.ATOM_F6, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("11010100", P.ATOM_F6, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("11010101", P.ATOM_F5, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 5.2"),
    _R("1101011x", P.ATOM_F5, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 5.2"),
    _R("110110xx", P.ATOM_F2, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 2"),
    _R("110111xx", P.ATOM_F4, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 4"),
    _R("1110xxxx", P.ATOM_F6, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("111100xx", P.ATOM_F6, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("11110100", P.ATOM_F6, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("11110101", P.ATOM_F5, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 5.1"),
    _R("1111011x", P.ATOM_F1, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 1"),
    _R("11111xxx", P.ATOM_F3, read_atom, C_ALWAYS, "ETE D5.3 Atom Format 3"),
)


def _condition_holds(condition: int, config: Etmv4Config) -> bool:
    """Whether a header row's configuration condition holds."""
    if condition == C_ALWAYS:
        return True
    if condition == C_ETE:
        return config.major_version >= 5
    if condition == C_ETE_ITE:
        return config.major_version >= 5 and config.minor_version >= 3
    if condition == C_V8M_FUNC_RET:
        v8 = ArchVersion.V8 <= config.arch_version <= ArchVersion.AA64
        return config.is_m_profile and v8 and config.full_version >= 0x42
    if condition == C_NOT_ETE:
        return config.major_version < 5
    if condition == C_DATA_TRACE:
        return config.data_trace
    if condition == C_COND_TRACE:
        return config.cond_trace_valid
    if condition == C_V43:
        return config.full_version >= 0x43
    if condition == C_V46:
        return config.full_version >= 0x46
    if condition == C_Q:
        return config.has_q_elements
    if condition == C_SRC_ADDR:
        return config.full_version >= 0x50
    raise ValueError(f"unknown header condition {condition}")


# What a header becomes when its row's condition fails: (reader, kind or None to keep).
_FALLBACK: dict[int, tuple[Reader, PacketType | None]] = {
    C_ETE: (read_reserved, P.RESERVED),
    C_ETE_ITE: (read_reserved, P.RESERVED),
    C_V43: (read_reserved, P.RESERVED),
    C_V46: (read_reserved, P.RESERVED),
    C_SRC_ADDR: (read_reserved, P.RESERVED),
    C_V8M_FUNC_RET: (read_reserved, None),
    C_Q: (read_reserved, None),
    C_NOT_ETE: (read_reserved_cfg, None),
    C_DATA_TRACE: (read_reserved_cfg, None),
    C_COND_TRACE: (read_reserved_cfg, None),
}


def row_bytes(pattern: str) -> list[int]:
    """Every byte value a header pattern such as ``0000001x`` matches."""
    values = [0]
    for ch in pattern:
        if ch == "x":
            values = [v << 1 for v in values] + [(v << 1) | 1 for v in values]
        else:
            values = [(v << 1) | int(ch) for v in values]
    return sorted(values)


def header_table(config: Etmv4Config) -> tuple[tuple[Reader, ...], tuple[PacketType, ...]]:
    """The header table for a configuration: per byte value, its reader and packet kind."""
    readers: list[Reader] = [read_reserved] * 256
    kinds = [P.RESERVED] * 256
    for row in HEADER_ROWS:
        reader, kind = row.reader, row.kind
        if not _condition_holds(row.condition, config):
            reader, fallback = _FALLBACK[row.condition]
            kind = fallback if fallback is not None else kind
        for value in row_bytes(row.pattern):
            readers[value] = reader
            kinds[value] = kind
    return tuple(readers), tuple(kinds)


def _atom_table() -> tuple[tuple[PacketType, int, int] | None, ...]:
    """Per header byte, the (kind, E bits, count) of an atom packet (ETE D5.3 Atom formats)."""
    f4 = (0xE, 0x0, 0xA, 0x5)  # EEEN, NNNN, ENEN, NENE (bit 0 = oldest)
    f5 = {5: 0x1E, 1: 0x00, 2: 0x0A, 3: 0x15}  # EEEEN, NNNNN, NENEN, ENENE
    table: list[tuple[PacketType, int, int] | None] = [None] * 256
    for b in range(0xC0, 0x100):
        if 0xC0 <= b <= 0xD4 or 0xE0 <= b <= 0xF4:
            n = (b & 0x1F) + 3  # E atoms, then one E or N
            bits = (1 << n) - 1
            if not b & 0x20:
                bits |= 1 << n
            table[b] = (P.ATOM_F6, bits, n + 1)
        elif 0xD5 <= b <= 0xD7 or b == 0xF5:
            idx = ((b & 0x20) >> 3) | (b & 0x3)
            table[b] = (P.ATOM_F5, f5[idx], 5)
        elif 0xD8 <= b <= 0xDB:
            table[b] = (P.ATOM_F2, b & 0x3, 2)
        elif 0xDC <= b <= 0xDF:
            table[b] = (P.ATOM_F4, f4[b & 0x3], 4)
        elif 0xF6 <= b <= 0xF7:
            table[b] = (P.ATOM_F1, b & 0x1, 1)
        else:
            table[b] = (P.ATOM_F3, b & 0x7, 3)
    return tuple(table)


ATOMS = _atom_table()
# Per header byte: (raw bytes, kind, E bits, count) of its atom packet, None if not an atom.
_ATOM_FIELDS: tuple[tuple[bytes, PacketType, int, int] | None, ...] = tuple(
    None if a is None else (_RAW1[b], *a) for b, a in enumerate(ATOMS)
)
ATOM_FIELDS = _ATOM_FIELDS
"""Per header byte: ``(raw, kind, E bits, count)`` of its atom packet, None if not an atom."""


# -- the stream -------------------------------------------------------------------------


class PacketSink:
    """Where the reader's loop puts the packets it reads: this class makes packet objects.

    The reader's loop (:class:`_Scanner`) hands each packet to a sink by kind:
    a run of atom packets at consecutive capture indices to :meth:`atoms`, a
    target address (short or long) to :meth:`address`, a target address exact
    match to :meth:`match`, and every other packet, already an object, to
    :meth:`packet`. This sink turns the hot kinds into packet objects too and
    appends everything to :attr:`out`, in stream order: what
    :func:`iter_packets` gives. A consumer that takes the hot kinds as they
    are, without an object per packet, is a sink of its own: the ETMv4/ETE
    decoder's element rows (:func:`cstrace.protocols.etmv4.decoder.iter_stream_rows`).

    Compiled, the sink is an extension type and the loop calls its methods as
    C functions (``reader.pxd``); an overriding class must be one too.
    """

    __slots__ = ("group_atoms", "limit", "out")

    def __init__(self, group_atoms: bool = False) -> None:
        self.out: list[Any] = []
        """What the sink gave so far (packets here; a consumer's own items in a subclass)."""
        self.group_atoms = group_atoms
        """Give two or more atom packets in a row as one :class:`~.packets.AtomRun`."""
        self.limit = 4096
        """The reader's loop returns once :attr:`out` holds this many items (0: after
        every packet, atoms one at a time)."""

    def atoms(self, off: int, data: bytes, pos: int, end: int) -> None:
        """The atom packets whose headers are ``data[pos:end]``, the first at capture index
        ``off`` and the others at the indices after it."""
        fields = _ATOM_FIELDS[data[pos]]
        assert fields is not None
        out = self.out
        if self.group_atoms and end - pos > 1:
            rpkt = AtomRun.__new__(AtomRun)
            rpkt.offset = off
            rpkt.raw = data[pos:end]
            rpkt.kind = fields[1]
            out.append(rpkt)
            return
        # packets of the hot kinds are built without an __init__ call
        while True:
            pkt = Atom.__new__(Atom)
            pkt.offset = off
            pkt.raw, pkt.kind, pkt.bits, pkt.count = fields
            out.append(pkt)
            pos += 1
            if pos >= end:
                return
            off += 1
            fields = _ATOM_FIELDS[data[pos]]
            assert fields is not None

    def address(
        self,
        off: int,
        data: bytes,
        pos: int,
        end: int,
        kind: PacketType,
        address: int,
        isa: int,
        nbits: int,
    ) -> None:
        """A target address packet (short or long) in ``data[pos:end]``, at ``off``, giving
        ``address`` (``nbits`` of it from the packet) and instruction set ``isa``."""
        apkt = Address.__new__(Address)
        apkt.offset = off
        apkt.raw = data[pos:end]
        apkt.kind = kind
        apkt.address = address
        apkt.isa = isa
        apkt.pkt_bits = nbits
        self.out.append(apkt)

    def match(self, off: int, header: int, kind: PacketType, entry: Entry) -> None:
        """A target address exact match (one byte, ``header``) at ``off``: history ``entry``."""
        mpkt = AddressMatch.__new__(AddressMatch)
        mpkt.offset = off
        mpkt.raw = _RAW1[header]
        mpkt.kind = kind
        mpkt.index = header & 0x3
        mpkt.address, mpkt.isa, mpkt.pkt_bits = entry
        self.out.append(mpkt)

    def packet(self, pkt: Etmv4Packet) -> None:
        """Any other packet."""
        self.out.append(pkt)


class _Scanner:
    """The reader's loop over the packets of one run of capture indices (compiled: C locals).

    :meth:`scan` reads packets from ``pos`` while they start before ``stop``
    (the end of the current run of consecutive capture indices, or of the
    window) and gives them to a :class:`PacketSink`. Each header goes to its
    reader through the header table, except the hot kinds, read here by
    inlined copies of their readers (a test checks that they agree) and given
    to the sink as fields, not objects: atoms (three packets in four), short
    and long addresses and exact matches (most of the rest). Calling a reader
    costs about 60 ns more than running its copy here.
    """

    __slots__ = ("cut", "kinds", "readers", "single", "st")

    def __init__(self, st: ReaderState, single: bool) -> None:
        self.st = st
        self.readers = st.readers
        self.kinds = st.kinds
        self.single = single
        """One packet per call: for a caller that looks at ``st`` after each packet."""
        self.cut = False
        """Set when the packet at the returned position is cut by the end of the window."""

    def scan_window(self, data: bytes, pos: int, n: int, cur: IndexCursor, sink: PacketSink) -> int:
        """:meth:`scan` from ``pos``, run of capture indices after run (``cur`` gives them),
        until the end of the window, a packet cut by it (:attr:`cut`), or the sink's
        ``out`` holding ``sink.limit`` items (one packet only, :attr:`single`).
        Returns the position reached."""
        out = sink.out
        limit = sink.limit
        self.cut = False
        while pos < n:
            stop = cur.limit
            if pos >= stop:
                cur.at(pos)
                stop = cur.limit
            if stop > n:
                stop = n
            pos = self.scan(data, pos, stop, n, cur.base, sink)
            if self.cut or self.single or len(out) >= limit:
                break
        return pos

    def scan(self, data: bytes, pos: int, stop: int, n: int, base: int, sink: PacketSink) -> int:
        """Read the packets that start in ``[pos, stop)`` into ``sink``; the position after them.

        ``n`` is the size of the window, ``base`` the capture index of position
        0 in the current run. Returns early once the sink's ``out`` holds
        ``sink.limit`` items. Sets :attr:`cut` (and returns its position) when
        a packet runs past the end of the window.
        """
        st = self.st
        readers = self.readers
        kinds = self.kinds
        atom_fields = _ATOM_FIELDS
        short_fields = _SHORT
        long_fields = _LONG
        out = sink.out
        limit = sink.limit
        self.cut = False
        single = self.single or limit <= 0  # (a sink that takes one packet at a time)
        while pos < stop:
            off = base + pos
            hdr = data[pos]
            if atom_fields[hdr] is not None:
                # runs of atoms are most of the trace: the sink takes them together
                q = pos + 1
                if not single:
                    while q < stop and atom_fields[data[q]] is not None:
                        q += 1
                sink.atoms(off, data, pos, q)
                pos = q
            else:
                reader = readers[hdr]
                if reader is read_address_short:
                    cls, isa, shift = short_fields[hdr]
                    q = pos + 1
                    if q >= n:
                        self.cut = True
                        return pos
                    c1 = data[q]
                    # (C integers when compiled: 17 bits at most, and the 64 bits of
                    # the address the history gives)
                    low = (c1 & 0x7F) << shift
                    nbits = 7 + shift
                    q += 1
                    if c1 & 0x80:
                        if q >= n:
                            self.cut = True
                            return pos
                        low |= data[q] << nbits
                        nbits += 8
                        q += 1
                    mask = (1 << nbits) - 1
                    prior = st.a0
                    target = (prior & ~mask) | (low & mask)
                elif reader is read_address_long:
                    cls, isa, wide = long_fields[hdr]
                    q = pos + (9 if wide else 5)
                    if q > n:
                        self.cut = True
                        return pos
                    # _long_address, inlined: each byte goes to a 64-bit local first, so
                    # that compiled, the shifts are on 64-bit C integers, never a C int
                    b = data[pos + 1]
                    low = (b & 0x7F) << 2 if isa == 0 else (b & 0x7F) << 1
                    b = data[pos + 2]
                    low |= (b & 0x7F) << 9 if isa == 0 else b << 8
                    b = data[pos + 3]
                    low |= b << 16
                    b = data[pos + 4]
                    low |= b << 24
                    if wide:
                        for k in range(4, 8):
                            b = data[pos + 1 + k]
                            low |= b << (8 * k)
                        nbits = 64
                    else:
                        if st.ctx_valid and st.sf:
                            mask = 0xFFFFFFFF
                            prior = st.a0
                            low |= prior & ~mask
                        nbits = 32
                    target = low
                elif reader is read_address_match:
                    index = hdr & 0x3
                    entry = _match(st, index)
                    if hdr < 0xB0:
                        sink.match(off, hdr, kinds[hdr], entry)
                    else:
                        sink.packet(SourceAddressMatch(off, _RAW1[hdr], index, *entry))
                    q = pos + 1
                    cls = None
                else:
                    cls = None
                    try:
                        got = reader(data, pos, n, off, st)
                    except _BadSequence as bad:
                        raw = data[pos : bad.end]
                        got = (BadPacket(off, raw, P.BAD_SEQUENCE, kinds[hdr]), bad.end)
                    if got is None:
                        self.cut = True  # cut by the end of the window
                        return pos
                    sink.packet(got[0])
                    q = got[1]
                if cls is not None:
                    # a short or long address
                    _push(st, target, isa, nbits)
                    address = target
                    if cls is Address:
                        sink.address(off, data, pos, q, kinds[hdr], address, isa, nbits)
                    else:
                        sink.packet(cls(off, data[pos:q], kinds[hdr], address, isa, nbits))
                pos = q
            if single or len(out) >= limit:
                return pos
        return pos


def _unsynced(win: BlockWindow, complete: bool) -> Generator[Etmv4Packet, None, int]:
    """The packets before the first A-sync; returns the window position after it (-1: none).

    Pieces run on across block boundaries: the window keeps the current piece's
    bytes when it moves to the next block, so pieces do not depend on where the
    capture layer cut the stream.
    """
    data = win.data
    n = len(data)
    cur = win.cursor()
    pos = 0
    while True:
        if pos >= n:
            if not win.advance(n):
                return -1
            data = win.data
            n = len(data)
            cur = win.cursor()
            pos = 0
        bstart = pos
        pkt_idx = cur.at(pos)
        state = 0  # 0 not synchronised, 1 after a 0x00 byte, 2 inside an A-sync
        typ = P.NOT_SYNC
        finished = False
        while True:
            if pos >= n:
                if not win.advance(bstart):
                    break
                pos -= bstart
                bstart = 0
                data = win.data
                n = len(data)
                cur = win.cursor()
            b = data[pos]
            size = pos - bstart + 1
            last = pos == n - 1 and win.final
            if state == 0:
                if b == 0:
                    if size > 1:
                        if last:
                            pos += 1
                            break
                        yield NotSync(pkt_idx, data[bstart:pos])
                        bstart = pos
                    pkt_idx = cur.at(pos)
                    state = 1
                elif size >= 8:
                    if last:
                        pos += 1
                        break
                    yield NotSync(pkt_idx, data[bstart : pos + 1])
                    pkt_idx = cur.at(pos) + 1
                    bstart = pos + 1
            elif state == 1:
                if b == 0:
                    state = 2
                    typ = P.ASYNC
                else:
                    state = 0
            else:
                if b != 0:
                    if size != 12:
                        state = 0
                        typ = P.NOT_SYNC
                    else:
                        raw = data[bstart : pos + 1]
                        pos += 1
                        if b == 0x80:
                            yield Async(pkt_idx, raw)
                            return pos
                        yield BadPacket(pkt_idx, raw, P.BAD_SEQUENCE, P.ASYNC)
                        finished = True
                        break
                elif size == 12:
                    if last:
                        pos += 1
                        break
                    # the reference reports the extra leading 0x00 under the A-sync kind
                    yield NotSync(pkt_idx, data[bstart : bstart + 1], P.ASYNC)
                    bstart += 1
            pos += 1
        if not finished:
            # end of the stream inside unsynchronised bytes
            if complete and bstart < n:
                yield BadPacket(pkt_idx, data[bstart:n], P.INCOMPLETE_EOT, typ)
            return -1


def _cut_kind(data: bytes, pos: int, kinds: tuple[PacketType, ...]) -> PacketType:
    """The kind of the packet at ``pos`` that the end of the trace cut short.

    An extension packet whose second byte is 0x00 is an A-sync by then.
    """
    kind = kinds[data[pos]]
    if kind == P.EXTENSION and data[pos + 1 : pos + 2] == b"\x00":
        return P.ASYNC
    return kind


def read_into(
    stream: Stream,
    config: Etmv4Config,
    sink: PacketSink,
    complete: bool = True,
    state: ReaderState | None = None,
    single: bool | None = None,
) -> Iterator[None]:
    """Read the ETMv4/ETE packets of one trace ID's stream into ``sink`` (see the module
    docstring); yields after each run of packets given, when the caller may empty or
    replace the sink's ``out``.

    The stream is read block by block (``stream.blocks()``) through a
    :class:`~cstrace.capture.window.BlockWindow`: a packet cut by the end of a
    block is read again, whole, from the start of the next window, so packets do
    not depend on block boundaries and memory does not grow with the stream.
    The packets of the window are read run of consecutive capture indices after
    run (:class:`_Scanner`), until the sink's ``out`` holds ``sink.limit`` items.

    ``state``, when given, is the fresh :class:`ReaderState` the stream is read
    with (a caller that cuts the stream at synchronisation points compares it
    with another reader's, :mod:`cstrace.split`); by default one is made. With
    a state given, packets are read one at a time, so that the state is the one
    after the packet just given, unless ``single`` is False.
    """
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    unsynced = _unsynced(win, complete)
    while True:
        try:
            sink.packet(next(unsynced))
        except StopIteration as done:
            pos: int = done.value
            break
        yield
    if pos < 0:
        return
    st = ReaderState(config) if state is None else state
    # A caller that gave the state looks at it after each packet: read one at a time.
    scanner = _Scanner(st, state is not None if single is None else single)
    data = bytes(win.data)  # (a copy only if it is not bytes)
    n = len(data)
    # Capture indices come from the cursor: inside its current run they are
    # base + pos (the scanner moves it from run to run).
    cur = win.cursor(pos)
    while True:
        while pos < n:
            pos = scanner.scan_window(data, pos, n, cur, sink)
            yield
            if scanner.cut:
                break
        # The window is used up (pos == n), or the packet at ``pos`` is cut by its
        # end: keep that packet's bytes and read it again with the next block.
        if not win.advance(pos):
            if pos < n and complete:
                off = cur.at(pos)
                kind = _cut_kind(data, pos, st.kinds)
                sink.packet(BadPacket(off, data[pos:n], P.INCOMPLETE_EOT, kind))
                yield
            return
        data = bytes(win.data)
        n = len(data)
        pos = 0
        cur = win.cursor()


def iter_packets(
    stream: Stream,
    config: Etmv4Config,
    complete: bool = True,
    state: ReaderState | None = None,
    group_atoms: bool = False,
) -> Iterator[Etmv4Packet]:
    """Read the ETMv4/ETE packets of one trace ID's stream (see the module docstring).

    The packets are those :func:`read_into` gives a :class:`PacketSink`,
    one by one; ``state`` is as there.

    ``group_atoms``: two or more atom packets in a row (at consecutive capture
    indices) come as one :class:`~cstrace.protocols.etmv4.packets.AtomRun`,
    for a consumer that takes them together: half the packet objects of a
    typical trace.
    """
    sink = PacketSink(group_atoms)
    out = sink.out
    for _ in read_into(stream, config, sink, complete, state):
        if out:
            yield from out
            out.clear()
