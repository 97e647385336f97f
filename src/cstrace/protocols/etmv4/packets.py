"""ETMv4 and ETE instruction-trace packets: one small slotted class per packet kind.

Input: nothing (plain records); produced by :mod:`cstrace.protocols.etmv4.reader`
from the bytes of one trace ID, consumed by the ETMv4/ETE program-flow decoder
and by ``cstrace.render.ocsd.etmv4`` (the reference listing text).

Every packet has ``offset`` (capture index of its first byte), ``raw`` (its
bytes) and ``kind`` (a :class:`PacketType`, the reference decoder's packet
type; the listing mnemonic is ``"I_" + kind.name`` except for the reference's
typo ``I_SCR_ADDR_L_32IS0``). Classes group the formats of one spec packet
(``Atom`` covers formats 1-6, ``kind`` tells which).

Packets carry *resolved* values where the spec compresses against earlier
packets, as the reference packet processor does: address packets carry the
full address after merging the short/32-bit update into the previous address
(exact-match packets carry the address taken from the three-entry address
history), timestamp packets the full timestamp after merging the changed low
bits, context-bearing packets the full current context (with flags telling
what this packet updated), cycle-count packets the count with the trace-info
threshold already added. The decoder therefore keeps no packet-level history.

Spec references: Arm Embedded Trace Macrocell Architecture Specification
ETMv4.0-4.6 (IHI0064), chapter 6 "Descriptions of Trace Packets"; Arm ARM
chapter D5 "ETE Protocol Descriptions", D5.2 (summary list) and D5.3 (the
packets, alphabetically).
"""

from __future__ import annotations

from enum import IntEnum

from cstrace.protocols.packet import Packet

__all__ = [
    "Address",
    "AddressContext",
    "AddressMatch",
    "Async",
    "Atom",
    "AtomRun",
    "BadPacket",
    "Cancel",
    "Commit",
    "CondFlush",
    "CondInstr",
    "CondResult",
    "Context",
    "CycleCount",
    "DataSyncMarker",
    "Discard",
    "Etmv4Packet",
    "Event",
    "ExceptionReturn",
    "Exception_",
    "FuncRet",
    "Ignore",
    "Instrumentation",
    "Mispredict",
    "NotSync",
    "Overflow",
    "PacketType",
    "Q",
    "SourceAddress",
    "SourceAddressMatch",
    "Timestamp",
    "TimestampMarker",
    "TraceInfo",
    "TraceOn",
    "TransCommit",
    "TransStart",
]


class PacketType(IntEnum):
    """The packet kinds, numbered as the reference decoder numbers them.

    Values below 0x100 are the first header byte of the kind (the lowest one
    when several headers share a kind); 0x1xx are extension packets (0x00
    header); 0x2xx are decoder states; 0x3xx bad packets; 0x4xx ETE kinds
    that reuse the exception header.
    """

    # decoder states
    NOT_SYNC = 0x200
    INCOMPLETE_EOT = 0x201
    NO_ERR_TYPE = 0x202
    # bad packets
    BAD_SEQUENCE = 0x300
    BAD_TRACEMODE = 0x301
    RESERVED = 0x302
    RESERVED_CFG = 0x303
    # header byte kinds
    EXTENSION = 0x00
    TRACE_INFO = 0x01
    TIMESTAMP = 0x02
    TRACE_ON = 0x04
    FUNC_RET = 0x05
    EXCEPT = 0x06
    EXCEPT_RTN = 0x07
    ITE = 0x09
    TRANS_ST = 0x0A
    TRANS_COMMIT = 0x0B
    CCNT_F2 = 0x0C
    CCNT_F1 = 0x0E
    CCNT_F3 = 0x10
    NUM_DS_MKR = 0x20
    UNNUM_DS_MKR = 0x28
    COMMIT = 0x2D
    CANCEL_F1 = 0x2E
    CANCEL_F1_MISPRED = 0x2F
    MISPREDICT = 0x30
    CANCEL_F2 = 0x34
    CANCEL_F3 = 0x38
    COND_I_F2 = 0x40
    COND_FLUSH = 0x43
    COND_RES_F4 = 0x44
    COND_RES_F2 = 0x48
    COND_RES_F3 = 0x50
    COND_RES_F1 = 0x68
    COND_I_F1 = 0x6C
    COND_I_F3 = 0x6D
    IGNORE = 0x70
    EVENT = 0x71
    CTXT = 0x80
    ADDR_CTXT_L_32IS0 = 0x82
    ADDR_CTXT_L_32IS1 = 0x83
    ADDR_CTXT_L_64IS0 = 0x85
    ADDR_CTXT_L_64IS1 = 0x86
    TS_MARKER = 0x88
    ADDR_MATCH = 0x90
    ADDR_S_IS0 = 0x95
    ADDR_S_IS1 = 0x96
    ADDR_L_32IS0 = 0x9A
    ADDR_L_32IS1 = 0x9B
    ADDR_L_64IS0 = 0x9D
    ADDR_L_64IS1 = 0x9E
    Q = 0xA0
    SRC_ADDR_MATCH = 0xB0
    SRC_ADDR_S_IS0 = 0xB4
    SRC_ADDR_S_IS1 = 0xB5
    SRC_ADDR_L_32IS0 = 0xB6
    SRC_ADDR_L_32IS1 = 0xB7
    SRC_ADDR_L_64IS0 = 0xB8
    SRC_ADDR_L_64IS1 = 0xB9
    ATOM_F6 = 0xC0
    ATOM_F5 = 0xD5
    ATOM_F2 = 0xD8
    ATOM_F4 = 0xDC
    ATOM_F1 = 0xF6
    ATOM_F3 = 0xF8
    # extension packets (0x00 header, then this byte)
    ASYNC = 0x100
    DISCARD = 0x103
    OVERFLOW = 0x105
    # ETE kinds carried by the exception header
    PE_RESET = 0x400
    TRANS_FAIL = 0x401


class Etmv4Packet(Packet):
    """Base of every ETMv4/ETE packet: ``offset``, ``raw`` and ``kind``.

    Constructors take the kind from the class's ``KIND`` rather than naming the
    member again: reading ``PacketType.X`` costs about 70 ns in Python 3.11
    (members are class-level descriptors there), as much as the rest of a
    small constructor.
    """

    __slots__ = ("kind",)
    KIND = PacketType.NO_ERR_TYPE

    def __init__(self, offset: int, raw: bytes, kind: PacketType | None = None) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND if kind is None else kind


# -- synchronisation and stream state ------------------------------------------------


class NotSync(Etmv4Packet):
    """Bytes seen before the first alignment synchronisation (``I_NOT_SYNC``).

    The reader reports unsynchronised bytes in pieces as the reference does (at
    most 8 bytes each, split before each 0x00 byte); a stream may start with
    several of these. A 0x00 byte shed from a run of more than eleven 0x00
    bytes has ``kind`` ASYNC (the reference lists it as ``I_ASYNC``).
    """

    __slots__ = ()
    KIND = PacketType.NOT_SYNC


class Async(Etmv4Packet):
    """Alignment synchronisation: eleven 0x00 bytes then 0x80 (ETE D5.3.1)."""

    __slots__ = ()
    KIND = PacketType.ASYNC


class Discard(Etmv4Packet):
    """Discard: speculative elements not yet resolved are discarded (extension 0x03)."""

    __slots__ = ()
    KIND = PacketType.DISCARD


class Overflow(Etmv4Packet):
    """Overflow: the trace unit lost trace (extension 0x05)."""

    __slots__ = ()
    KIND = PacketType.OVERFLOW


class TraceInfo(Etmv4Packet):
    """Trace info: resets compression state; carries the INFO, KEY, SPEC and CYCT sections.

    ``info`` is the INFO section (0 when absent); ``p0_key``, ``spec_depth`` and
    ``cc_threshold`` are None when their section is absent. ``initial`` is True
    on the first trace info the reader has produced (the reference's "Decoder
    Sync point").
    """

    __slots__ = ("cc_threshold", "info", "initial", "p0_key", "spec_depth")
    KIND = PacketType.TRACE_INFO

    def __init__(
        self,
        offset: int,
        raw: bytes,
        info: int,
        p0_key: int | None,
        spec_depth: int | None,
        cc_threshold: int | None,
        initial: bool,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.info = info
        self.p0_key = p0_key
        self.spec_depth = spec_depth
        self.cc_threshold = cc_threshold
        self.initial = initial

    @property
    def cc_enabled(self) -> bool:
        """INFO.CC: cycle counting is enabled."""
        return bool(self.info & 0x1)

    @property
    def cond_enabled(self) -> int:
        """INFO.COND: conditional instruction tracing mode (ETMv4)."""
        return (self.info >> 1) & 0x7

    @property
    def p0_load(self) -> bool:
        """INFO.LOAD: tracing load instructions as P0 elements (ETMv4 data trace)."""
        return bool(self.info & 0x10)

    @property
    def p0_store(self) -> bool:
        """INFO.STORE: tracing store instructions as P0 elements (ETMv4 data trace)."""
        return bool(self.info & 0x20)

    @property
    def in_trans_state(self) -> bool:
        """INFO.TSTATE (ETE): trace starts while the PE is in Transactional state."""
        return bool(self.info & 0x40)


class TraceOn(Etmv4Packet):
    """Trace on: a discontinuity in the trace element stream."""

    __slots__ = ()
    KIND = PacketType.TRACE_ON


class FuncRet(Etmv4Packet):
    """Function return (ETMv4.2+ M-profile, Armv8-M)."""

    __slots__ = ()
    KIND = PacketType.FUNC_RET


class Timestamp(Etmv4Packet):
    """Timestamp, optionally with a cycle count.

    ``timestamp`` is the full value after merging the ``bits_changed`` low bits
    this packet carries; ``cycle_count`` is None when the packet has none.
    """

    __slots__ = ("bits_changed", "cycle_count", "timestamp")
    KIND = PacketType.TIMESTAMP

    def __init__(
        self,
        offset: int,
        raw: bytes,
        timestamp: int,
        bits_changed: int,
        cycle_count: int | None,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.timestamp = timestamp
        self.bits_changed = bits_changed
        self.cycle_count = cycle_count


class TimestampMarker(Etmv4Packet):
    """Timestamp marker (ETE 1.1, ETMv4.6): a timestamp element follows at this point."""

    __slots__ = ()
    KIND = PacketType.TS_MARKER


class Exception_(Etmv4Packet):
    """Exception: type, how to interpret the following address, M-profile extras.

    ``kind`` is ``EXCEPT``, or for ETE ``PE_RESET`` (type 0) or ``TRANS_FAIL``
    (type 0x18). ``addr_interp``: 0 no meaning, 1 the return address follows,
    2 it follows and equals the previous address. ``m_type`` is True for the
    M-profile exception numbering.
    """

    __slots__ = ("addr_interp", "exception_type", "m_fault_pending", "m_type")
    KIND = PacketType.EXCEPT

    def __init__(
        self,
        offset: int,
        raw: bytes,
        kind: PacketType,
        exception_type: int,
        addr_interp: int,
        m_fault_pending: bool,
        m_type: bool,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.exception_type = exception_type
        self.addr_interp = addr_interp
        self.m_fault_pending = m_fault_pending
        self.m_type = m_type


class ExceptionReturn(Etmv4Packet):
    """Exception return (ETMv4 only; reserved in ETE)."""

    __slots__ = ()
    KIND = PacketType.EXCEPT_RTN


# -- cycle counts and speculation ------------------------------------------------------


class CycleCount(Etmv4Packet):
    """Cycle count formats 1-3 (``kind`` CCNT_F1/F2/F3), possibly with a commit.

    ``count`` includes the trace-info cycle-count threshold (0 for format 1
    with an unknown count); ``count_unknown`` is True then. ``commit`` is the
    number of elements committed, None when the packet commits nothing
    (formats 1 and 3 under TRCIDR0.COMMOPT == 1).
    """

    __slots__ = ("commit", "count", "count_unknown")
    KIND = PacketType.CCNT_F1

    def __init__(
        self,
        offset: int,
        raw: bytes,
        kind: PacketType,
        count: int,
        commit: int | None,
        count_unknown: bool = False,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.count = count
        self.commit = commit
        self.count_unknown = count_unknown


class Commit(Etmv4Packet):
    """Commit: the oldest ``count`` speculative elements are committed."""

    __slots__ = ("count",)
    KIND = PacketType.COMMIT

    def __init__(self, offset: int, raw: bytes, count: int) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.count = count


class Cancel(Etmv4Packet):
    """Cancel formats 1-3: cancel the newest ``count`` speculative elements.

    Formats 2 and 3 first add ``atom_count`` atoms (``atom_bits``, bit 0
    oldest, 1 = E); ``mispredict`` is True for every kind but CANCEL_F1.
    """

    __slots__ = ("atom_bits", "atom_count", "count", "mispredict")
    KIND = PacketType.CANCEL_F1

    def __init__(
        self,
        offset: int,
        raw: bytes,
        kind: PacketType,
        count: int,
        atom_bits: int = 0,
        atom_count: int = 0,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.count = count
        self.atom_bits = atom_bits
        self.atom_count = atom_count
        self.mispredict = kind != self.KIND  # KIND is CANCEL_F1


class Mispredict(Etmv4Packet):
    """Mispredict: 0-2 atoms (``atom_bits``/``atom_count``) then a mispredict element."""

    __slots__ = ("atom_bits", "atom_count")
    KIND = PacketType.MISPREDICT

    def __init__(self, offset: int, raw: bytes, atom_bits: int, atom_count: int) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.atom_bits = atom_bits
        self.atom_count = atom_count


# -- conditional tracing (ETMv4 A/R only), data sync markers ---------------------------


class CondInstr(Etmv4Packet):
    """Conditional instruction formats 1-3 (ETMv4).

    F1: ``key``; F2: ``num_elements`` (1 or 2) and ``key_incr``; F3:
    ``num_elements`` and ``final``.
    """

    __slots__ = ("final", "key", "key_incr", "num_elements")
    KIND = PacketType.COND_I_F1

    def __init__(
        self,
        offset: int,
        raw: bytes,
        kind: PacketType,
        key: int = 0,
        num_elements: int = 1,
        key_incr: bool = False,
        final: bool = False,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.key = key
        self.num_elements = num_elements
        self.key_incr = key_incr
        self.final = final


class CondResult(Etmv4Packet):
    """Conditional result formats 1-4 (ETMv4).

    F1: ``results`` is a tuple of (key, result byte, CI flag) for one or two
    payloads; F2: ``key_incr`` and ``token``; F3: ``tokens`` (12 bits); F4:
    ``token``.
    """

    __slots__ = ("key_incr", "results", "token", "tokens")
    KIND = PacketType.COND_RES_F1

    def __init__(
        self,
        offset: int,
        raw: bytes,
        kind: PacketType,
        results: tuple[tuple[int, int, int], ...] = (),
        key_incr: int = 0,
        token: int = 0,
        tokens: int = 0,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.results = results
        self.key_incr = key_incr
        self.token = token
        self.tokens = tokens


class CondFlush(Etmv4Packet):
    """Conditional flush (ETMv4)."""

    __slots__ = ()
    KIND = PacketType.COND_FLUSH


class DataSyncMarker(Etmv4Packet):
    """Numbered or unnumbered data synchronisation marker (ETMv4 data trace)."""

    __slots__ = ("value",)
    KIND = PacketType.NUM_DS_MKR

    def __init__(self, offset: int, raw: bytes, kind: PacketType, value: int) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.value = value


# -- events, ignore, instrumentation, transactional memory ----------------------------


class Ignore(Etmv4Packet):
    """Ignore (ETMv4.3+, ETE): padding with no meaning."""

    __slots__ = ()
    KIND = PacketType.IGNORE


class Event(Etmv4Packet):
    """Event: ``events`` is the 4-bit mask of the events that occurred (bit n = event n)."""

    __slots__ = ("events",)
    KIND = PacketType.EVENT

    def __init__(self, offset: int, raw: bytes, events: int) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.events = events


class Instrumentation(Etmv4Packet):
    """Instrumentation (ETE FEAT_ITE): exception level ``el`` and 64-bit ``value``."""

    __slots__ = ("el", "value")
    KIND = PacketType.ITE

    def __init__(self, offset: int, raw: bytes, el: int, value: int) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.el = el
        self.value = value


class TransStart(Etmv4Packet):
    """Transaction start (ETE, FEAT_TME)."""

    __slots__ = ()
    KIND = PacketType.TRANS_ST


class TransCommit(Etmv4Packet):
    """Transaction commit (ETE, FEAT_TME)."""

    __slots__ = ()
    KIND = PacketType.TRANS_COMMIT


# -- context and addresses ------------------------------------------------------------


class Context(Etmv4Packet):
    """Context: the PE context after this packet.

    ``updated`` is False for the "context same" form (header 0x80); the other
    fields then hold the context already known. ``cid_updated`` /
    ``vmid_updated`` tell whether this packet carried a context ID / VMID.
    ``valid`` is False until some packet has given a context.
    """

    __slots__ = (
        "cid_updated",
        "context_id",
        "el",
        "ns",
        "nse",
        "sf",
        "updated",
        "valid",
        "vmid",
        "vmid_updated",
    )
    KIND = PacketType.CTXT

    def __init__(
        self,
        offset: int,
        raw: bytes,
        updated: bool,
        el: int,
        sf: bool,
        ns: bool,
        nse: bool,
        context_id: int,
        vmid: int,
        cid_updated: bool,
        vmid_updated: bool,
        valid: bool = True,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.updated = updated
        self.el = el
        self.sf = sf
        self.ns = ns
        self.nse = nse
        self.context_id = context_id
        self.vmid = vmid
        self.cid_updated = cid_updated
        self.vmid_updated = vmid_updated
        self.valid = valid


class Address(Etmv4Packet):
    """Target address, short or long (``kind`` ADDR_S_IS0 ... ADDR_L_64IS1).

    ``address`` is the full address after the update; ``isa`` the instruction
    set bit (0 = IS0: A64/A32, 1 = IS1: T32); ``pkt_bits`` how many low bits
    this packet carried (9/17 or 8/16 for short forms, 32 or 64 for long).
    """

    __slots__ = ("address", "isa", "pkt_bits")
    KIND = PacketType.ADDR_L_64IS0

    def __init__(
        self, offset: int, raw: bytes, kind: PacketType, address: int, isa: int, pkt_bits: int
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.address = address
        self.isa = isa
        self.pkt_bits = pkt_bits


class AddressMatch(Etmv4Packet):
    """Target address exact match: the address is entry ``index`` (0-2) of the address history."""

    __slots__ = ("address", "index", "isa", "pkt_bits")
    KIND = PacketType.ADDR_MATCH

    def __init__(
        self, offset: int, raw: bytes, index: int, address: int, isa: int, pkt_bits: int
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.index = index
        self.address = address
        self.isa = isa
        self.pkt_bits = pkt_bits


class AddressContext(Etmv4Packet):
    """Target address with context (``kind`` ADDR_CTXT_L_32IS0 ... ADDR_CTXT_L_64IS1).

    Address fields as :class:`Address`; context fields as :class:`Context`
    (``updated`` is always True).
    """

    __slots__ = (
        "address",
        "cid_updated",
        "context_id",
        "el",
        "isa",
        "ns",
        "nse",
        "pkt_bits",
        "sf",
        "vmid",
        "vmid_updated",
    )
    KIND = PacketType.ADDR_CTXT_L_64IS0

    def __init__(
        self,
        offset: int,
        raw: bytes,
        kind: PacketType,
        address: int,
        isa: int,
        pkt_bits: int,
        el: int,
        sf: bool,
        ns: bool,
        nse: bool,
        context_id: int,
        vmid: int,
        cid_updated: bool,
        vmid_updated: bool,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.address = address
        self.isa = isa
        self.pkt_bits = pkt_bits
        self.el = el
        self.sf = sf
        self.ns = ns
        self.nse = nse
        self.context_id = context_id
        self.vmid = vmid
        self.cid_updated = cid_updated
        self.vmid_updated = vmid_updated

    @property
    def updated(self) -> bool:
        """Always True: this packet always carries a context."""
        return True


class SourceAddress(Etmv4Packet):
    """ETE source address, short or long (``kind`` SRC_ADDR_S_IS0 ... SRC_ADDR_L_64IS1).

    The address of a taken P0 instruction. Fields as :class:`Address`; source
    and target addresses share one address history.
    """

    __slots__ = ("address", "isa", "pkt_bits")
    KIND = PacketType.SRC_ADDR_L_64IS0

    def __init__(
        self, offset: int, raw: bytes, kind: PacketType, address: int, isa: int, pkt_bits: int
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.address = address
        self.isa = isa
        self.pkt_bits = pkt_bits


class SourceAddressMatch(Etmv4Packet):
    """ETE source address exact match (entry ``index`` of the address history)."""

    __slots__ = ("address", "index", "isa", "pkt_bits")
    KIND = PacketType.SRC_ADDR_MATCH

    def __init__(
        self, offset: int, raw: bytes, index: int, address: int, isa: int, pkt_bits: int
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.index = index
        self.address = address
        self.isa = isa
        self.pkt_bits = pkt_bits


class Q(Etmv4Packet):
    """Q: ``count`` instructions executed (None: count unknown, Q type 0xF).

    ``qtype`` is the header's low nibble. When the packet gives the address of
    the next instruction (``has_address``), ``address``/``isa``/``pkt_bits``
    hold it (from the history when ``addr_match``, ``match_index`` 0-2).
    """

    __slots__ = (
        "addr_match",
        "address",
        "count",
        "has_address",
        "isa",
        "match_index",
        "pkt_bits",
        "qtype",
    )
    KIND = PacketType.Q

    def __init__(
        self,
        offset: int,
        raw: bytes,
        qtype: int,
        count: int | None,
        has_address: bool,
        addr_match: bool,
        match_index: int,
        address: int,
        isa: int,
        pkt_bits: int,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = self.KIND
        self.qtype = qtype
        self.count = count
        self.has_address = has_address
        self.addr_match = addr_match
        self.match_index = match_index
        self.address = address
        self.isa = isa
        self.pkt_bits = pkt_bits


# -- atoms -----------------------------------------------------------------------------


class Atom(Etmv4Packet):
    """Atom formats 1-6 (``kind`` ATOM_F1 ... ATOM_F6).

    ``count`` atoms; ``bits`` holds them oldest first from bit 0 (1 = E, taken;
    0 = N, not taken).
    """

    __slots__ = ("bits", "count")
    KIND = PacketType.ATOM_F1

    def __init__(self, offset: int, raw: bytes, kind: PacketType, bits: int, count: int) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.bits = bits
        self.count = count


class AtomRun(Etmv4Packet):
    """Two or more atom packets that follow each other in the stream, read as one.

    Only a reader asked to group atoms gives these (``iter_packets(...,
    group_atoms=True)``: the element-rows path, where no one looks at the
    packets one by one): ``raw`` holds one header byte per atom packet, the
    first at ``offset``, the others at the capture indices after it. ``kind`` is
    that of the first. It stands for ``len(raw)`` :class:`Atom` packets
    (:func:`cstrace.protocols.etmv4.reader.run_atoms` gives them).
    """

    __slots__ = ()
    KIND = PacketType.ATOM_F1


# -- errors ----------------------------------------------------------------------------


class BadPacket(Etmv4Packet):
    """A packet the reader could not accept.

    ``kind`` is BAD_SEQUENCE (invalid bytes inside a packet), RESERVED (a
    reserved header), RESERVED_CFG (a header invalid in this configuration) or
    INCOMPLETE_EOT (the trace ended inside a packet); ``err_kind`` is the kind
    the packet would have had (the header's kind, or NOT_SYNC).
    """

    __slots__ = ("err_kind",)
    KIND = PacketType.BAD_SEQUENCE

    def __init__(self, offset: int, raw: bytes, kind: PacketType, err_kind: PacketType) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.err_kind = err_kind
