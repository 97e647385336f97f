"""Readable one-line-per-element text, and JSON Lines.

Input: generic elements with their trace ID; output: text lines. The text form is
the CLI's default::

         Idx   ID  ELEMENT          DETAILS
          21    1  INSTR_RANGE      0x50010-0x5001c  3 instr  A64  last: BR b+link taken
          17   20  SWTRACE          master 0x40 channel 0x0000  D32 0x00000100  marker  ts 0x1250

The JSON form has one object per element: ``idx``, ``id``, ``type`` and the
element's fields under their Python names (enums by name, absent optional fields
left out).

When the input says who ran (a perf.data recording), each line also gives the
CPU, process and thread (:class:`~cstrace.trace.ExecContext`): the text has
``CPU PID TID`` columns (``-`` when unknown) and the JSON ``cpu``, ``pid`` and
``tid`` keys (null when unknown)::

         Idx   ID  CPU     PID     TID  ELEMENT          DETAILS
          33   1e    7   17235   17235  INSTR_RANGE      0x582b2b1000-0x582b2b1008  2 instr ...
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import Enum
from typing import Any

from cstrace.analyses.swtext import TextMessage, quote_text
from cstrace.elements import (
    AddrNacc,
    AddrUnknown,
    Custom,
    CycleCount,
    Diagnostic,
    Element,
    EoTrace,
    Event,
    EventType,
    Exception_,
    InstrRange,
    InstrSubtype,
    InstrType,
    Instrumentation,
    IRangeNoPath,
    ITMPacketType,
    ITMTrace,
    MemTrans,
    NoSync,
    PEContext,
    PEContextInfo,
    SecLevel,
    SWTrace,
    SyncMarker,
    Timestamp,
    TraceOn,
)
from cstrace.errors import DiagKind
from cstrace.render.spaces import mem_space_name
from cstrace.trace import ExecContext, Inferred

__all__ = [
    "HEADER",
    "HEADER_CONTEXT",
    "element_details",
    "element_fields",
    "json_line",
    "message_json",
    "message_line",
    "text_line",
]

HEADER = f"{'Idx':>10} {'ID':>4}  {'ELEMENT':<16} DETAILS"
HEADER_CONTEXT = f"{'Idx':>10} {'ID':>4} {'CPU':>4} {'PID':>7} {'TID':>7}  {'ELEMENT':<16} DETAILS"
"""The header of the text when each line gives the CPU, process and thread."""

_ISA = ("A32", "T32", "A64", "TEE", "Jazelle", "custom", "?")
_TYPE = {
    InstrType.OTHER: "other",
    InstrType.BR: "BR",
    InstrType.BR_INDIRECT: "BR indirect",
    InstrType.ISB: "ISB",
    InstrType.DSB_DMB: "DSB/DMB",
    InstrType.WFI_WFE: "WFI/WFE",
    InstrType.TSTART: "TSTART",
}
_SUBTYPE = {
    InstrSubtype.NONE: "",
    InstrSubtype.BR_LINK: " link",
    InstrSubtype.V8_RET: " ret",
    InstrSubtype.V8_ERET: " eret",
    InstrSubtype.V7_IMPLIED_RET: " implied ret",
}
_SEC = {
    SecLevel.SECURE: "S",
    SecLevel.NONSECURE: "NS",
    SecLevel.ROOT: "Root",
    SecLevel.REALM: "Realm",
}


def _cc(cycle_count: int | None) -> str:
    return "" if cycle_count is None else f"  cc {cycle_count}"


def _context(c: PEContextInfo) -> str:
    parts = []
    if c.el_valid:
        parts.append(f"EL{int(c.exception_level)}")
    parts.append(_SEC.get(c.security_level, "?"))
    parts.append("64-bit" if c.bits64 else "32-bit")
    if c.vmid_valid:
        parts.append(f"vmid 0x{c.vmid:x}")
    if c.ctxt_id_valid:
        parts.append(f"ctxtid 0x{c.context_id:x}")
    return " ".join(parts)


def _instr_range(e: InstrRange) -> str:
    last = _TYPE.get(e.last_type, "?") + _SUBTYPE.get(e.last_subtype, "")
    taken = "taken" if e.last_exec else "not taken"
    if e.last_type == InstrType.OTHER:
        taken = "executed" if e.last_exec else "not executed"
    cond = " cond" if e.last_cond else ""
    return (
        f"0x{e.start:x}-0x{e.end:x}  {e.num_instr} instr  {_ISA[e.isa]}  "
        f"last: {last}{cond} {taken}{_cc(e.cycle_count)}"
    )


def _swtrace(e: SWTrace) -> str:
    if e.global_err:
        return "global error"
    who = f"master 0x{e.master:x} channel 0x{e.channel:04x}" if e.id_valid else "master ?"
    parts = [who]
    if e.payload_bits:
        digits = max(1, e.payload_bits // 4)
        parts.append(f"D{e.payload_bits} 0x{e.payload:0{digits}x}")
    if e.marker:
        parts.append("marker")
    if e.trigger:
        parts.append("trigger")
    if e.frequency:
        parts.append("frequency")
    if e.timestamp is not None:
        parts.append(f"ts 0x{e.timestamp:x}")
    if e.master_err:
        parts.append("master error")
    return "  ".join(parts)


def _itm(e: ITMTrace) -> str:
    over = "overflow  " if e.overflow else ""
    match e.pkt_type:
        case ITMPacketType.SWIT:
            text = f"stimulus port {e.src_id}  0x{e.value:0{max(2, 2 * e.payload_size)}x}"
        case ITMPacketType.DWT:
            text = f"DWT discriminator {e.src_id}  0x{e.value:x}"
        case ITMPacketType.TS_GLOBAL:
            text = f"global ts 0x{(e.timestamp or 0):x}"
        case _:
            name = e.pkt_type.name.lower().replace("_", " ")
            text = f"local ts delta 0x{e.value:x} ({name})"
            if e.timestamp is not None:
                text += f"  ts 0x{e.timestamp:x}"
    return over + text


def _nacc(e: AddrNacc) -> str:
    return f"0x{e.address:x}  no memory image ({mem_space_name(int(e.mem_space))})"


def _exception(e: Exception_) -> str:
    text = f"number 0x{e.number:02x}"
    if e.return_address is not None:
        text += f"  return 0x{e.return_address:x}"
        if e.ret_addr_br_tgt:
            text += " (also branch target)"
    if e.m_tail_chain:
        text += "  tail-chained"
    if e.data_marker:
        text += "  data marker"
    return text + _cc(e.cycle_count)


def _event(e: Event) -> str:
    if e.event_type == EventType.TRIGGER:
        return "trigger"
    if e.event_type == EventType.NUMBERED:
        return f"events 0b{e.number:04b}"
    return "unknown"


_DIAG_TEXT = {
    DiagKind.NO_CONFIG: "configuration not decoded (data trace): nothing decoded",
    DiagKind.COMMIT_SHORT: "commit of more elements than the speculation stack holds",
    DiagKind.CANCEL_SHORT: "cancel of more elements than the speculation stack holds",
    DiagKind.MISPREDICT_NO_ATOM: "mispredict with no atom to correct",
    DiagKind.RETURN_STACK_OVERFLOW: "return address taken from an empty return stack",
    DiagKind.EXCEPTION_NO_ADDRESS: "exception packet without its address",
    DiagKind.Q_NO_ADDRESS: "Q element without an address",
    DiagKind.BAD_PACKET: "reserved or unknown packet",
    DiagKind.UNSUPPORTED_ISA: "code in an instruction set the decoder cannot follow",
    DiagKind.BAD_SEQUENCE: "bad packet sequence",
    DiagKind.DATA_TRACE: "data trace packet, not decoded",
    DiagKind.UNSYNCED_START: "decoded before any synchronisation packet",
    DiagKind.UNSYNCED_AMBIGUOUS: "decoded before any synchronisation packet",
    DiagKind.SPEC_DEPTH_EXCEEDED: "speculation depth beyond the configured maximum (TRCIDR8)",
    DiagKind.SYNC_WAIT: "packets skipped while waiting for synchronisation",
}


def _diagnostic(e: Diagnostic) -> str:
    text = f"{e.severity.name.lower()}: {_DIAG_TEXT.get(e.kind, e.kind.name.lower())}"
    if e.kind in (DiagKind.BAD_PACKET, DiagKind.BAD_SEQUENCE, DiagKind.DATA_TRACE) and e.detail:
        text += f" (packet type {e.detail:#x})"
    elif e.kind == DiagKind.UNSYNCED_START:
        text += f"; packet boundaries certain from index {e.detail}"
    elif e.kind == DiagKind.UNSYNCED_AMBIGUOUS:
        text += "; packet boundaries uncertain until one"
    elif e.kind == DiagKind.SYNC_WAIT:
        text += f" ({e.detail} bytes)"
    elif e.kind == DiagKind.SPEC_DEPTH_EXCEEDED:
        text += f" (depth {e.detail})"
    return text


def _custom(e: Custom) -> str:
    data = e.data
    if isinstance(data, dict):
        return "  ".join(
            f"{k} 0x{v:x}" if isinstance(v, int) else f"{k} {v}"
            for k, v in data.items()
            if v is not None
        )
    return "" if data is None else str(data)


_DETAILS: dict[type, Callable[[Any], str]] = {
    InstrRange: _instr_range,
    IRangeNoPath: lambda e: (
        f"0x{e.start:x} .. next 0x{e.end:x}  {e.num_instr} instr  {_ISA[e.isa]}"
    ),
    AddrNacc: _nacc,
    PEContext: lambda e: f"{_ISA[e.isa]}  {_context(e.context)}{_cc(e.cycle_count)}",
    Exception_: _exception,
    TraceOn: lambda e: e.reason.name.lower().replace("_", " ") + _cc(e.cycle_count),
    Timestamp: lambda e: f"0x{e.timestamp:x}{_cc(e.cycle_count)}",
    CycleCount: lambda e: f"{e.cycle_count}",
    Event: _event,
    NoSync: lambda e: e.reason.name.lower().replace("_", " "),
    EoTrace: lambda e: e.reason.name.lower().replace("_", " "),
    SyncMarker: lambda e: f"timestamp marker 0x{e.value:x}",
    MemTrans: lambda e: e.trans.name.lower().replace("_", " "),
    Instrumentation: lambda e: f"EL{e.el}  0x{e.value:016x}",
    SWTrace: _swtrace,
    ITMTrace: _itm,
    AddrUnknown: lambda e: "waiting for an address" + _cc(e.cycle_count),
    Custom: _custom,
    Diagnostic: _diagnostic,
}


def element_details(elem: Element) -> str:
    """The readable details of one element (without index, ID and type)."""
    fn = _DETAILS.get(type(elem))
    return fn(elem) if fn is not None else ""


def _num(value: int | None, width: int) -> str:
    return f"{'-' if value is None else value:>{width}}"


def text_line(trace_id: int, elem: Element, context: ExecContext | None = None) -> str:
    """``   offset   id  TYPE  details`` for one element; with ``context``, its CPU, process
    and thread after the ID (see :data:`HEADER_CONTEXT`)."""
    if context is None:
        return (
            f"{elem.offset:>10} {trace_id:>4x}  {elem.TYPE.name:<16} "
            f"{element_details(elem)}".rstrip()
        )
    who = f"{_num(context.cpu, 4)} {_num(context.pid, 7)} {_num(context.tid, 7)}"
    return (
        f"{elem.offset:>10} {trace_id:>4x} {who}  {elem.TYPE.name:<16} "
        f"{element_details(elem)}".rstrip()
    )


def message_details(msg: TextMessage) -> str:
    """The readable details of a software-trace string: who wrote it, the text, how many
    bytes, and the last write's marker and timestamp."""
    last = msg.last
    if isinstance(last, SWTrace):
        parts = [f"master 0x{msg.master:x} channel 0x{msg.channel:04x}"]
    else:
        parts = [f"stimulus port {msg.channel}"]
    parts.append(f"text {quote_text(msg.text)}")
    parts.append(f"{len(msg.elements)} bytes")
    if isinstance(last, SWTrace) and last.marker:
        parts.append("marker")
    if last.timestamp is not None:
        parts.append(f"ts 0x{last.timestamp:x}")
    return "  ".join(parts)


def message_line(trace_id: int, msg: TextMessage, context: ExecContext | None = None) -> str:
    """The text line of a software-trace string, at the index of its first byte and with the
    element type of its writes (``SWTRACE`` or ``ITMTRACE``)."""
    name = msg.last.TYPE.name
    if context is None:
        return f"{msg.offset:>10} {trace_id:>4x}  {name:<16} {message_details(msg)}"
    who = f"{_num(context.cpu, 4)} {_num(context.pid, 7)} {_num(context.tid, 7)}"
    return f"{msg.offset:>10} {trace_id:>4x} {who}  {name:<16} {message_details(msg)}"


def message_json(
    trace_id: int,
    msg: TextMessage,
    buffer: str | None = None,
    context: ExecContext | None = None,
) -> str:
    """One JSON object for a software-trace string: the fields of its last write (which hold
    its marker and timestamp) with ``text``, the byte values (``payloads``) and each byte's
    capture index (``offsets``) in place of the one ``payload`` or ``value``; ``idx`` is the
    first byte's."""
    obj: dict[str, Any] = {"idx": msg.offset, "id": trace_id}
    if buffer is not None:
        obj["buffer"] = buffer
    if context is not None:
        obj["cpu"] = context.cpu
        obj["pid"] = context.pid
        obj["tid"] = context.tid
    obj["type"] = msg.last.TYPE.name
    for k, v in element_fields(msg.last).items():
        if k not in ("payload", "value"):
            obj[k] = _json_value(v)
    obj["text"] = msg.text
    obj["payloads"] = msg.payloads
    obj["offsets"] = msg.offsets
    return json.dumps(obj, separators=(",", ":"))


def element_fields(elem: Element) -> dict[str, Any]:
    """The fields of an element other than ``offset``, with optional ones left out when absent."""
    out: dict[str, Any] = {}
    for klass in reversed(type(elem).__mro__):
        for name in getattr(klass, "__slots__", ()):
            if name == "offset":
                continue
            value = getattr(elem, name)
            if value is None:
                continue
            out[name] = value
    return out


def _json_value(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, PEContextInfo):
        return {s: _json_value(getattr(value, s)) for s in PEContextInfo.__slots__}
    if isinstance(value, bytes):
        return value.hex()
    return value


def json_line(
    trace_id: int,
    elem: Element,
    buffer: str | None = None,
    context: ExecContext | None = None,
) -> str:
    """One JSON object for one element: ``idx``, ``id``, ``buffer``, ``type`` and its fields.

    ``buffer`` (the trace buffer's name) is left out when not given; with
    ``context``, ``cpu``, ``pid`` and ``tid`` follow it (null when unknown).
    """
    obj: dict[str, Any] = {"idx": elem.offset, "id": trace_id}
    if buffer is not None:
        obj["buffer"] = buffer
    if context is not None:
        obj["cpu"] = context.cpu
        obj["pid"] = context.pid
        obj["tid"] = context.tid
    obj["type"] = elem.TYPE.name
    for k, v in element_fields(elem).items():
        obj[k] = _json_value(v)
    return json.dumps(obj, separators=(",", ":"))


def inferred_line(inferred: Inferred) -> str:
    """The JSON-lines header object saying how a source's configuration was inferred.

    ``{"inferred": {"id": 16, "protocol": "ETM4.6", "core": "ARM-AA64",
    "settings": {...}, "confidence": 0.9, "evidence": "..."}}``
    """
    obj = {
        "inferred": {
            "id": inferred.trace_id,
            "protocol": inferred.protocol,
            "core": inferred.core,
            "settings": dict(inferred.settings),
            "confidence": inferred.confidence,
            "evidence": inferred.evidence,
            "label": inferred.label,
            "undecided": list(inferred.undecided),
            "same": list(inferred.same),
        }
    }
    return json.dumps(obj, separators=(",", ":"))
