"""The generic trace element model: what every protocol decoder produces.

This follows the generic trace element reference (``seeds/000``): one small
slotted class per element type, each carrying ``offset``, the capture index of
the first byte of the packet that produced it (OpenCSD's ``Idx``). Fields that
the reference marks optional are ``None`` when absent (for example
``cycle_count``, the reference's ``has_cc -> cycle_count``).

Elements know nothing about text: ``cstrace.render`` turns them into listings.
Consumers dispatch with ``match``::

    match elem:
        case InstrRange(start=s, end=e):
            ...
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

from cstrace.errors import DiagCode, DiagKind, Severity

__all__ = [
    "AddrNacc",
    "AddrUnknown",
    "Custom",
    "CycleCount",
    "Diagnostic",
    "ElemType",
    "Element",
    "EoTrace",
    "Event",
    "EventType",
    "ExLevel",
    "ExceptionRet",
    "Exception_",
    "IRangeNoPath",
    "ITMPacketType",
    "ITMTrace",
    "InstrRange",
    "InstrSubtype",
    "InstrType",
    "Instrumentation",
    "Isa",
    "MemSpace",
    "MemTrans",
    "MemTransType",
    "NoSync",
    "PEContext",
    "PEContextInfo",
    "SWTrace",
    "SecLevel",
    "SyncMarker",
    "SyncMarkerType",
    "Timestamp",
    "TraceOn",
    "TraceOnReason",
    "Unknown",
    "UnsyncReason",
    "el_space",
]


class ElemType(IntEnum):
    """Element type numbers, in the order of OpenCSD's ``ocsd_gen_trc_elem_t``."""

    UNKNOWN = 0
    NO_SYNC = 1
    TRACE_ON = 2
    EO_TRACE = 3
    PE_CONTEXT = 4
    INSTR_RANGE = 5
    I_RANGE_NOPATH = 6
    ADDR_NACC = 7
    ADDR_UNKNOWN = 8
    EXCEPTION = 9
    EXCEPTION_RET = 10
    TIMESTAMP = 11
    CYCLE_COUNT = 12
    EVENT = 13
    SWTRACE = 14
    SYNC_MARKER = 15
    MEMTRANS = 16
    INSTRUMENTATION = 17
    ITMTRACE = 18
    CUSTOM = 19
    DIAGNOSTIC = 20
    """cstrace's own: a decoder diagnostic (:class:`Diagnostic`), not an OpenCSD element."""


class Isa(IntEnum):
    """Instruction set of executed instructions (``ocsd_isa``)."""

    A32 = 0
    T32 = 1
    A64 = 2
    TEE = 3
    JAZELLE = 4
    CUSTOM = 5
    UNKNOWN = 6


class InstrType(IntEnum):
    """Kind of the last instruction of a range (``ocsd_instr_type``)."""

    OTHER = 0
    BR = 1
    BR_INDIRECT = 2
    ISB = 3
    DSB_DMB = 4
    WFI_WFE = 5
    TSTART = 6


class InstrSubtype(IntEnum):
    """Sub-kind of the last instruction of a range (``ocsd_instr_subtype``)."""

    NONE = 0
    BR_LINK = 1
    V8_RET = 2
    V8_ERET = 3
    V7_IMPLIED_RET = 4


class TraceOnReason(IntEnum):
    """Why trace (re)started (``trace_on_reason_t``)."""

    NORMAL = 0
    OVERFLOW = 1
    EX_DEBUG = 2


class UnsyncReason(IntEnum):
    """Why the decoder is unsynchronised, or why trace ended (``unsync_info_t``)."""

    UNKNOWN = 0
    INIT_DECODER = 1
    RESET_DECODER = 2
    OVERFLOW = 3
    DISCARD = 4
    BAD_PACKET = 5
    EOT = 6


class SecLevel(IntEnum):
    """Security state of the PE (``ocsd_sec_level``)."""

    SECURE = 0
    NONSECURE = 1
    ROOT = 2
    REALM = 3


class ExLevel(IntEnum):
    """Exception level of the PE (``ocsd_ex_level``)."""

    UNKNOWN = -1
    EL0 = 0
    EL1 = 1
    EL2 = 2
    EL3 = 3


class EventType(IntEnum):
    """Kind of a hardware event (``trace_event_t.ev_type``)."""

    UNKNOWN = 0
    TRIGGER = 1
    NUMBERED = 2


class SyncMarkerType(IntEnum):
    """Kind of a synchronisation marker (``trace_sync_marker_t``)."""

    TS = 0


class MemTransType(IntEnum):
    """Transactional memory event (``trace_memtrans_t``)."""

    TRACE_INIT = 0
    START = 1
    COMMIT = 2
    FAIL = 3


class MemSpace(IntFlag):
    """Memory space of an access (``ocsd_mem_space_acc_t``): exception level and security."""

    NONE = 0x00
    EL1S = 0x01
    EL1N = 0x02
    EL2 = 0x04
    EL3 = 0x08
    EL2S = 0x10
    EL1R = 0x20
    EL2R = 0x40
    ROOT = 0x80
    S = 0x19
    N = 0x06
    R = 0x60
    ANY = 0xFF


_EL_SPACES = {
    SecLevel.SECURE: (MemSpace.EL1S, MemSpace.EL1S, MemSpace.EL2S, MemSpace.EL3),
    SecLevel.NONSECURE: (MemSpace.EL1N, MemSpace.EL1N, MemSpace.EL2, MemSpace.EL3),
    SecLevel.REALM: (MemSpace.EL1R, MemSpace.EL1R, MemSpace.EL2R, MemSpace.ROOT),
}


def el_space(el: int, security: SecLevel) -> MemSpace:
    """The memory space of exception level ``el`` (0 to 3; EL0 shares EL1's) in the
    ``security`` state: what code memory a PE in that state runs from (root: ``ROOT``)."""
    spaces = _EL_SPACES.get(security)
    return MemSpace.ROOT if spaces is None else spaces[el & 3]


class ITMPacketType(IntEnum):
    """Kind of an ITM element payload (``swt_itm_type``)."""

    SWIT = 0
    DWT = 1
    TS_SYNC = 2
    TS_DELAY = 3
    TS_PKT_DELAY = 4
    TS_PKT_TS_DELAY = 5
    TS_GLOBAL = 6


class PEContextInfo:
    """The PE context carried by a ``PE_CONTEXT`` element (``ocsd_pe_context``)."""

    __slots__ = (
        "bits64",
        "context_id",
        "ctxt_id_valid",
        "el_valid",
        "exception_level",
        "security_level",
        "vmid",
        "vmid_valid",
    )

    def __init__(
        self,
        security_level: SecLevel = SecLevel.SECURE,
        exception_level: ExLevel = ExLevel.UNKNOWN,
        context_id: int = 0,
        vmid: int = 0,
        bits64: bool = False,
        ctxt_id_valid: bool = False,
        vmid_valid: bool = False,
        el_valid: bool = False,
    ) -> None:
        self.security_level = security_level
        self.exception_level = exception_level
        self.context_id = context_id
        self.vmid = vmid
        self.bits64 = bits64
        self.ctxt_id_valid = ctxt_id_valid
        self.vmid_valid = vmid_valid
        self.el_valid = el_valid

    def copy(self) -> PEContextInfo:
        """Return an independent copy."""
        return PEContextInfo(
            self.security_level,
            self.exception_level,
            self.context_id,
            self.vmid,
            self.bits64,
            self.ctxt_id_valid,
            self.vmid_valid,
            self.el_valid,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PEContextInfo):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, s) for s in self.__slots__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__)
        return f"PEContextInfo({fields})"


class Element:
    """Base class of all generic trace elements."""

    __slots__ = ("offset",)
    TYPE: ElemType = ElemType.UNKNOWN

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def _fields(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for klass in type(self).__mro__:
            for name in getattr(klass, "__slots__", ()):
                out[name] = getattr(self, name)
        return out

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Element)
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._fields().items())
        return f"{type(self).__name__}({fields})"


class NoSync(Element):
    """Waiting for synchronisation: start of decode, or after overflow or a bad packet."""

    __slots__ = ("reason",)
    TYPE = ElemType.NO_SYNC
    __match_args__ = ("offset", "reason")

    def __init__(self, offset: int, reason: UnsyncReason = UnsyncReason.INIT_DECODER) -> None:
        self.offset = offset
        self.reason = reason


class EoTrace(Element):
    """End of the available trace for one trace ID."""

    __slots__ = ("reason",)
    TYPE = ElemType.EO_TRACE
    __match_args__ = ("offset", "reason")

    def __init__(self, offset: int, reason: UnsyncReason = UnsyncReason.EOT) -> None:
        self.offset = offset
        self.reason = reason


class Unknown(Element):
    """The decoder saw an invalid packet for the protocol being decoded."""

    __slots__ = ()
    TYPE = ElemType.UNKNOWN
    __match_args__ = ("offset",)


class TraceOn(Element):
    """Trace started, or restarted after a discontinuity."""

    __slots__ = ("cycle_count", "reason")
    TYPE = ElemType.TRACE_ON
    __match_args__ = ("offset", "reason")

    def __init__(
        self,
        offset: int,
        reason: TraceOnReason = TraceOnReason.NORMAL,
        cycle_count: int | None = None,
    ) -> None:
        self.offset = offset
        self.reason = reason
        self.cycle_count = cycle_count


class PEContext(Element):
    """The PE context changed (or its first value is known)."""

    __slots__ = ("context", "cycle_count", "isa")
    TYPE = ElemType.PE_CONTEXT
    __match_args__ = ("offset", "context", "isa")

    def __init__(
        self,
        offset: int,
        context: PEContextInfo,
        isa: Isa = Isa.UNKNOWN,
        cycle_count: int | None = None,
    ) -> None:
        self.offset = offset
        self.context = context
        self.isa = isa
        self.cycle_count = cycle_count


class InstrRange(Element):
    """A range of instructions of one ISA executed by the PE: ``[start, end)``."""

    __slots__ = (
        "cycle_count",
        "end",
        "isa",
        "last_cond",
        "last_exec",
        "last_size",
        "last_subtype",
        "last_type",
        "num_instr",
        "start",
    )
    TYPE = ElemType.INSTR_RANGE
    __match_args__ = ("offset", "start", "end", "num_instr")

    def __init__(
        self,
        offset: int,
        start: int,
        end: int,
        num_instr: int,
        isa: Isa,
        last_exec: bool,
        last_size: int,
        last_type: InstrType,
        last_subtype: InstrSubtype = InstrSubtype.NONE,
        last_cond: bool = False,
        cycle_count: int | None = None,
    ) -> None:
        self.offset = offset
        self.start = start
        self.end = end
        self.num_instr = num_instr
        self.isa = isa
        self.last_exec = last_exec
        self.last_size = last_size
        self.last_type = last_type
        self.last_subtype = last_subtype
        self.last_cond = last_cond
        self.cycle_count = cycle_count


class IRangeNoPath(Element):
    """``num_instr`` instructions executed from ``start``; the path is unknown; next is ``end``."""

    __slots__ = ("end", "isa", "num_instr", "start")
    TYPE = ElemType.I_RANGE_NOPATH
    __match_args__ = ("offset", "start", "end", "num_instr")

    def __init__(self, offset: int, start: int, end: int, num_instr: int, isa: Isa) -> None:
        self.offset = offset
        self.start = start
        self.end = end
        self.num_instr = num_instr
        self.isa = isa


class AddrNacc(Element):
    """Trace reached an address that no memory image covers."""

    __slots__ = ("address", "cycle_count", "mem_space")
    TYPE = ElemType.ADDR_NACC
    __match_args__ = ("offset", "address")

    def __init__(
        self,
        offset: int,
        address: int,
        mem_space: MemSpace = MemSpace.NONE,
        cycle_count: int | None = None,
    ) -> None:
        self.offset = offset
        self.address = address
        self.mem_space = mem_space
        self.cycle_count = cycle_count


class AddrUnknown(Element):
    """ETMv3: the decoder waits for an address before it can follow the program."""

    __slots__ = ("cycle_count",)
    TYPE = ElemType.ADDR_UNKNOWN
    __match_args__ = ("offset",)

    def __init__(self, offset: int, cycle_count: int | None = None) -> None:
        self.offset = offset
        self.cycle_count = cycle_count


class Exception_(Element):
    """An exception was taken; ``return_address`` is the preferred return address if known."""

    __slots__ = (
        "cycle_count",
        "data_marker",
        "m_tail_chain",
        "number",
        "ret_addr_br_tgt",
        "return_address",
    )
    TYPE = ElemType.EXCEPTION
    __match_args__ = ("offset", "number", "return_address")

    def __init__(
        self,
        offset: int,
        number: int,
        return_address: int | None = None,
        ret_addr_br_tgt: bool = False,
        m_tail_chain: bool = False,
        data_marker: bool = False,
        cycle_count: int | None = None,
    ) -> None:
        self.offset = offset
        self.number = number
        self.return_address = return_address
        self.ret_addr_br_tgt = ret_addr_br_tgt
        self.m_tail_chain = m_tail_chain
        self.data_marker = data_marker
        self.cycle_count = cycle_count


class ExceptionRet(Element):
    """Marks the preceding branch as an exception return."""

    __slots__ = ()
    TYPE = ElemType.EXCEPTION_RET
    __match_args__ = ("offset",)


class Timestamp(Element):
    """A timestamp; with ``cycle_count`` when the packet carried one."""

    __slots__ = ("cycle_count", "timestamp")
    TYPE = ElemType.TIMESTAMP
    __match_args__ = ("offset", "timestamp")

    def __init__(self, offset: int, timestamp: int, cycle_count: int | None = None) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.cycle_count = cycle_count


class CycleCount(Element):
    """Cycles since the previous cycle count."""

    __slots__ = ("cycle_count",)
    TYPE = ElemType.CYCLE_COUNT
    __match_args__ = ("offset", "cycle_count")

    def __init__(self, offset: int, cycle_count: int) -> None:
        self.offset = offset
        self.cycle_count = cycle_count


class Event(Element):
    """A hardware event: a trigger, or a bit field of numbered events."""

    __slots__ = ("event_type", "number")
    TYPE = ElemType.EVENT
    __match_args__ = ("offset", "event_type", "number")

    def __init__(self, offset: int, event_type: EventType, number: int = 0) -> None:
        self.offset = offset
        self.event_type = event_type
        self.number = number


class SWTrace(Element):
    """Software trace (STM): master, channel, payload, marker, trigger, timestamp..."""

    __slots__ = (
        "channel",
        "frequency",
        "global_err",
        "id_valid",
        "marker",
        "master",
        "master_err",
        "payload",
        "payload_bits",
        "timestamp",
        "trigger",
    )
    TYPE = ElemType.SWTRACE
    __match_args__ = ("offset", "master", "channel", "payload")

    def __init__(
        self,
        offset: int,
        master: int = 0,
        channel: int = 0,
        id_valid: bool = True,
        payload_bits: int = 0,
        payload: int = 0,
        marker: bool = False,
        trigger: bool = False,
        timestamp: int | None = None,
        frequency: bool = False,
        master_err: bool = False,
        global_err: bool = False,
    ) -> None:
        self.offset = offset
        self.master = master
        self.channel = channel
        self.id_valid = id_valid
        self.payload_bits = payload_bits
        self.payload = payload
        self.marker = marker
        self.trigger = trigger
        self.timestamp = timestamp
        self.frequency = frequency
        self.master_err = master_err
        self.global_err = global_err


class SyncMarker(Element):
    """Marks the stream position of an element that is output later."""

    __slots__ = ("marker_type", "value")
    TYPE = ElemType.SYNC_MARKER
    __match_args__ = ("offset", "marker_type", "value")

    def __init__(self, offset: int, marker_type: SyncMarkerType, value: int) -> None:
        self.offset = offset
        self.marker_type = marker_type
        self.value = value


class MemTrans(Element):
    """Transactional memory: trace started in a transaction, start, commit or failure."""

    __slots__ = ("trans",)
    TYPE = ElemType.MEMTRANS
    __match_args__ = ("offset", "trans")

    def __init__(self, offset: int, trans: MemTransType) -> None:
        self.offset = offset
        self.trans = trans


class Instrumentation(Element):
    """PE software instrumentation (``TRCIT``, FEAT_ITE): exception level and payload."""

    __slots__ = ("el", "value")
    TYPE = ElemType.INSTRUMENTATION
    __match_args__ = ("offset", "el", "value")

    def __init__(self, offset: int, el: int, value: int) -> None:
        self.offset = offset
        self.el = el
        self.value = value


class ITMTrace(Element):
    """ITM/DWT software and hardware source payloads and timestamps."""

    __slots__ = (
        "overflow",
        "payload_size",
        "pkt_type",
        "src_id",
        "timestamp",
        "ts_freq_change",
        "value",
    )
    TYPE = ElemType.ITMTRACE
    __match_args__ = ("offset", "pkt_type", "src_id", "value")

    def __init__(
        self,
        offset: int,
        pkt_type: ITMPacketType,
        src_id: int = 0,
        payload_size: int = 0,
        value: int = 0,
        overflow: bool = False,
        timestamp: int | None = None,
        ts_freq_change: bool = False,
    ) -> None:
        self.offset = offset
        self.pkt_type = pkt_type
        self.src_id = src_id
        self.payload_size = payload_size
        self.value = value
        self.overflow = overflow
        self.timestamp = timestamp
        self.ts_freq_change = ts_freq_change


class Custom(Element):
    """A protocol-specific element from a custom decoder."""

    __slots__ = ("data",)
    TYPE = ElemType.CUSTOM
    __match_args__ = ("offset", "data")

    def __init__(self, offset: int, data: object = None) -> None:
        self.offset = offset
        self.data = data


class Diagnostic(Element):
    """A decoder diagnostic: something in the trace the decoder could not handle.

    Carried in the element stream where the decoder met it: ``offset`` is the
    capture index of the packet being decoded, ``trace_id`` its source,
    ``code`` the class of the problem (numbered as the reference's errors),
    ``kind`` what exactly happened and ``detail`` a value that depends on
    ``kind`` (a packet type number, say). Decoding goes on after it (or the
    decoder stops, as the reference does, when ``kind`` says so). Text for a
    diagnostic is made by ``cstrace.render``.
    """

    __slots__ = ("code", "detail", "kind", "severity", "trace_id")
    TYPE = ElemType.DIAGNOSTIC
    __match_args__ = ("offset", "code", "kind")

    def __init__(
        self,
        offset: int,
        trace_id: int,
        code: DiagCode,
        kind: DiagKind,
        detail: int = 0,
        severity: Severity = Severity.ERROR,
    ) -> None:
        self.offset = offset
        self.trace_id = trace_id
        self.code = code
        self.kind = kind
        self.detail = detail
        self.severity = severity
