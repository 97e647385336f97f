"""Generic elements → the text OpenCSD's element printer writes after ``Idx:..; ID:..;``.

The reference prints ``OCSD_GEN_TRC_ELEM_<TYPE>(<fields>)``; the field text of each
type is reproduced here character for character, since the corpus compares element
lines exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cstrace.elements import (
    AddrNacc,
    AddrUnknown,
    Custom,
    CycleCount,
    Element,
    EoTrace,
    Event,
    EventType,
    Exception_,
    ExceptionRet,
    ExLevel,
    InstrRange,
    InstrSubtype,
    Instrumentation,
    IRangeNoPath,
    ITMTrace,
    MemTrans,
    NoSync,
    PEContext,
    SecLevel,
    SWTrace,
    SyncMarker,
    Timestamp,
    TraceOn,
    Unknown,
)
from cstrace.render.spaces import mem_space_name

__all__ = ["element_text", "mem_space_name"]

ISA_NAMES = ("A32", "T32", "A64", "TEE", "Jaz", "Cst", "Unk")
INSTR_TYPE_NAMES = ("--- ", "BR  ", "iBR ", "ISB ", "DSB.DMB", "WFI.WFE", "TSTART")
INSTR_SUBTYPE_NAMES = ("--- ", "b+link ", "A64:ret ", "A64:eret ", "V7:impl ret")
TRACE_ON_NAMES = ("begin or filter", "overflow", "debug restart")
UNSYNC_NAMES = (
    "undefined",
    "init-decoder",
    "reset-decoder",
    "overflow",
    "discard",
    "bad-packet",
    "end-of-trace",
)
MEMTRANS_NAMES = ("Init", "Start", "Commit", "Fail")
SEC_NAMES = {
    SecLevel.SECURE: "S; ",
    SecLevel.NONSECURE: "N; ",
    SecLevel.ROOT: "Root; ",
    SecLevel.REALM: "Realm; ",
}


def _cc(cycle_count: int | None) -> str:
    return "" if cycle_count is None else f" [CC={cycle_count}]; "


def _range_head(e: InstrRange) -> str:
    """An ``INSTR_RANGE``'s text but its cycle count and closing parenthesis."""
    text = (
        f"OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x{e.start:x}:[0x{e.end:x}] "
        f"num_i({e.num_instr}) last_sz({e.last_size}) (ISA={ISA_NAMES[e.isa]}) "
        f"{'E ' if e.last_exec else 'N '}{INSTR_TYPE_NAMES[e.last_type]}"
    )
    if e.last_subtype != InstrSubtype.NONE:
        text += INSTR_SUBTYPE_NAMES[e.last_subtype]
    if e.last_cond:
        text += " <cond>"
    return text


_RANGE_TEXT: dict[tuple[object, ...], str] = {}


def _instr_range_cached(e: InstrRange) -> str:
    """An ``INSTR_RANGE``'s text, all but the cycle count remembered: trace revisits the
    same few thousand ranges."""
    key = (e.start, e.end, e.last_exec, e.num_instr, e.isa, e.last_type, e.last_subtype,
           e.last_cond, e.last_size)  # fmt: skip
    text = _RANGE_TEXT.get(key)
    if text is None:
        if len(_RANGE_TEXT) >= 1 << 16:
            _RANGE_TEXT.clear()
        text = _RANGE_TEXT[key] = _range_head(e)
    cc = e.cycle_count
    if cc is None:
        return text + ")"
    return f"{text} [CC={cc}]; )"


def _pe_context(e: PEContext) -> str:
    c = e.context
    text = f"(ISA={ISA_NAMES[e.isa]}) "
    if c.el_valid and c.exception_level > ExLevel.UNKNOWN:
        text += f"EL{int(c.exception_level)}"
    text += SEC_NAMES.get(c.security_level, "")
    text += "64-bit; " if c.bits64 else "32-bit; "
    if c.vmid_valid:
        text += f"VMID=0x{c.vmid:x}; "
    if c.ctxt_id_valid:
        text += f"CTXTID=0x{c.context_id:x}; "
    return f"OCSD_GEN_TRC_ELEM_PE_CONTEXT({text}{_cc(e.cycle_count)})"


def _exception(e: Exception_) -> str:
    text = ""
    if e.return_address is not None:
        text = f"pref ret addr:0x{e.return_address:x}"
        if e.ret_addr_br_tgt:
            text += " [addr also prev br tgt]"
        text += "; "
    text += f"excep num (0x{e.number:02x}) "
    return f"OCSD_GEN_TRC_ELEM_EXCEPTION({text}{_cc(e.cycle_count)})"


def _swtrace(e: SWTrace) -> str:
    if e.global_err:
        return "OCSD_GEN_TRC_ELEM_SWTRACE({Global Error.})"
    if e.id_valid:
        text = f" (Ma:0x{e.master:02x}; Ch:0x{e.channel:02x}) "
    else:
        text = "(Ma:0x??; Ch:0x??) "
    bits = e.payload_bits
    if bits > 0:
        width = {4: 1, 8: 2, 16: 4, 32: 8, 64: 16}.get(bits)
        if width is None:
            text += "0x{Data Error : unsupported bit width.}; "
        else:
            text += f"0x{e.payload & ((1 << bits) - 1):0{width}x}; "
    if e.marker:
        text += "+Mrk "
    if e.trigger:
        text += "Trig "
    if e.timestamp is not None:
        text += f" [ TS=0x{e.timestamp:012x}]; "
    if e.frequency:
        text += "Freq"
    if e.master_err:
        text += "{Master Error.}"
    return f"OCSD_GEN_TRC_ELEM_SWTRACE({text})"


def _itm(e: ITMTrace) -> str:
    # The ITM element text lives with the rest of the ITM rendering, imported the first
    # time an ITM element is printed; it then takes this function's place in the table.
    import importlib

    render: Callable[[Any], str] = importlib.import_module(
        "cstrace.render.ocsd.itm"
    ).itm_element_text
    _RENDERERS[ITMTrace] = render
    return render(e)


def _addr_nacc(e: AddrNacc) -> str:
    space = int(e.mem_space)
    return (
        f"OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x{e.address:x}; "
        f"Memspace [0x{space:x}:{mem_space_name(space)}] {_cc(e.cycle_count)})"
    )


def _nopath(e: IRangeNoPath) -> str:
    return (
        f"OCSD_GEN_TRC_ELEM_I_RANGE_NOPATH(first 0x{e.start:x}:[next 0x{e.end:x}] "
        f"num_i({e.num_instr}) )"
    )


def _trace_on(e: TraceOn) -> str:
    return f"OCSD_GEN_TRC_ELEM_TRACE_ON( [{TRACE_ON_NAMES[e.reason]}]{_cc(e.cycle_count)})"


def _timestamp(e: Timestamp) -> str:
    return f"OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x{e.timestamp:012x}]; {_cc(e.cycle_count)})"


def _cycle_count(e: CycleCount) -> str:
    return f"OCSD_GEN_TRC_ELEM_CYCLE_COUNT({_cc(e.cycle_count)})"


def _event(e: Event) -> str:
    if e.event_type == EventType.TRIGGER:
        return "OCSD_GEN_TRC_ELEM_EVENT( Trigger; )"
    if e.event_type == EventType.NUMBERED:
        return f"OCSD_GEN_TRC_ELEM_EVENT( Numbered:{e.number}; )"
    return "OCSD_GEN_TRC_ELEM_EVENT()"


def _no_sync(e: NoSync) -> str:
    return f"OCSD_GEN_TRC_ELEM_NO_SYNC( [{UNSYNC_NAMES[e.reason]}])"


def _eo_trace(e: EoTrace) -> str:
    return f"OCSD_GEN_TRC_ELEM_EO_TRACE( [{UNSYNC_NAMES[e.reason]}])"


def _sync_marker(e: SyncMarker) -> str:
    return f"OCSD_GEN_TRC_ELEM_SYNC_MARKER( [Timestamp marker(0x{e.value:08x})])"


def _memtrans(e: MemTrans) -> str:
    return f"OCSD_GEN_TRC_ELEM_MEMTRANS({MEMTRANS_NAMES[e.trans]})"


def _instrumentation(e: Instrumentation) -> str:
    return f"OCSD_GEN_TRC_ELEM_INSTRUMENTATION(EL{e.el}; 0x{e.value:016x})"


def _addr_unknown(e: AddrUnknown) -> str:
    return f"OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN({_cc(e.cycle_count)})"


def _exception_ret(e: ExceptionRet) -> str:
    return "OCSD_GEN_TRC_ELEM_EXCEPTION_RET()"


def _unknown(e: Unknown) -> str:
    return "OCSD_GEN_TRC_ELEM_UNKNOWN()"


def _custom(e: Custom) -> str:
    return "OCSD_GEN_TRC_ELEM_CUSTOM()"


_RENDERERS: dict[type, Callable[[Any], str]] = {
    InstrRange: _instr_range_cached,
    AddrNacc: _addr_nacc,
    IRangeNoPath: _nopath,
    PEContext: _pe_context,
    Exception_: _exception,
    ExceptionRet: _exception_ret,
    TraceOn: _trace_on,
    Timestamp: _timestamp,
    CycleCount: _cycle_count,
    Event: _event,
    NoSync: _no_sync,
    EoTrace: _eo_trace,
    SyncMarker: _sync_marker,
    MemTrans: _memtrans,
    Instrumentation: _instrumentation,
    SWTrace: _swtrace,
    ITMTrace: _itm,
    AddrUnknown: _addr_unknown,
    Unknown: _unknown,
    Custom: _custom,
}


def element_text(elem: Element) -> str:
    """Return the reference printer's text for one element."""
    return _RENDERERS[type(elem)](elem)
