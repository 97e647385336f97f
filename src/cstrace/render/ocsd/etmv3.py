"""ETMv3 packets → the text OpenCSD's packet printer writes after the raw bytes.

Input: a packet of :mod:`cstrace.protocols.etmv3.packets`; output: the text of
its listing line, such as ``P_HDR : Atom P-header.; WE; Cycles=1`` or
``BRANCH_ADDRESS : Branch address.; Addr=0xC035BEB6 ~[0x35BEB6]; ``.

The words (``NAME : description``) and the field layout are the reference
lister's, so that listings can be compared line by line.
"""

from __future__ import annotations

from cstrace.elements import Isa
from cstrace.protocols.base import Packet
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
from cstrace.render.ocsd.armv7 import EXCEPTION_NAMES, ISYNC_REASONS

__all__ = ["packet_text", "val_str"]

_ISA_TEXT = {
    Isa.A32: "ARM(32); ",
    Isa.T32: "Thumb2; ",
    Isa.A64: "AArch64; ",
    Isa.TEE: "ThumbEE; ",
    Isa.JAZELLE: "Jazelle; ",
}
# The reference's ARMv7-M names; its table runs two names together ("HardFault"
# and "Reserved"), which shifts the names after it by one.
_M_EXCEPTIONS = (
    "No Exception",
    "IRQ1",
    "IRQ2",
    "IRQ3",
    "IRQ4",
    "IRQ5",
    "IRQ6",
    "IRQ7",
    "IRQ0",
    "usage Fault",
    "NMI",
    "SVC",
    "DebugMonitor",
    "Mem Manage",
    "PendSV",
    "SysTick",
    "Reserved",
    "PE Reset",
    "Reserved",
    "HardFaultReserved",
    "BusFault",
    "Reserved",
    "Reserved",
    "Reserved",
)
_NAMES = {"RESERVED": "I_RESERVED", "": "I_RESERVED"}


def val_str(valid_bits: int, value: int, update_bits: int = 0, total_bits: int = 32) -> str:
    """An address as the reference prints it: unknown digits as ``?``, updated bits after ``~``."""
    chars = (total_bits + 3) // 4
    valid_chars = (valid_bits + 3) // 4
    text = "0x" + "?" * max(chars - valid_chars, 0) + f"{value & 0xFFFFFFFF:0{valid_chars}X}"
    if valid_bits < total_bits:
        text += f" ({valid_bits - 1}:0)"
    if update_bits:
        text += f" ~[0x{value & ((1 << update_bits) - 1):X}]"
    return text


_PHDR_TEXT: dict[tuple[int, int, int, int], str] = {}


def _phdr_text(p: PHeader) -> str:
    key = (p.fmt, p.count, p.atoms, p.cycles)
    text = _PHDR_TEXT.get(key)
    if text is None:
        text = _PHDR_TEXT[key] = f"P_HDR : Atom P-header.; {_atoms(p)}"
    return text


def _atoms(p: PHeader) -> str:
    bits = p.atoms
    if not p.cycles:
        return "".join("E" if (bits >> i) & 1 else "N" for i in range(p.count))
    if p.fmt == 1:
        text = "".join("WE" if (bits >> i) & 1 else "WN" for i in range(p.count))
    elif p.fmt == 2:
        text = "W" + "".join("E" if (bits >> i) & 1 else "N" for i in range(p.count))
    elif p.fmt == 3:
        text = "W" * p.cycles + (("E" if bits & 1 else "N") if p.count else "")
    else:
        text = ""
    return f"{text}; Cycles={p.cycles}"


def _exception(p: BranchAddress) -> str:
    n = p.exception or 0
    text = "Exception="
    if p.cm_type:
        text += _M_EXCEPTIONS[n] if n < 0x18 else f"IRQ{n - 0x10}"
        if p.resume:
            text += f"; Resume={p.resume}"
        if p.cancel:
            text += "; Cancel prev instr"
    else:
        text += EXCEPTION_NAMES[n & 0xF] + "; "
        if p.cancel:
            text += "; Cancel prev instr"
    return text


def _branch(p: BranchAddress) -> str:
    text = f"Addr={val_str(p.valid_bits, p.address, p.bits)}; "
    if p.isa_changed:
        text += "ISA=" + _ISA_TEXT.get(p.isa, "Unknown; ")
    if p.ctxt_updated:
        text += "NS; " if p.ns else "S; "
        if p.hyp:
            text += "Hyp; "
    if p.exception is not None:
        text += _exception(p)
    return text


def _isync(p: ISync) -> str:
    text = f"({ISYNC_REASONS[p.reason]}); "
    if not p.no_address:
        text += f"Addr=0x{p.address:08x}; "
    text += "NS; " if p.ns else "S; "
    text += "Hyp; " if p.hyp else " "
    if p.context_id is not None:
        text += f"CtxtID={p.context_id:x}; "
    if p.no_address:
        return text
    text += "ISA=" + _ISA_TEXT.get(p.isa, "Unknown; ")
    if p.cycle_count is not None:
        text += f"Cycles={p.cycle_count}; "
    return text


def _data_addr(address: int | None) -> str:
    # The reference stores data addresses over the instruction address and then
    # prints the (never set) data address field.
    return "" if address is None else f"; Addr={val_str(0, 0)}"


def packet_text(pkt: Packet) -> str:
    """The reference lister's text for one ETMv3 packet."""
    match pkt:
        case PHeader():
            return _phdr_text(pkt)
        case BranchAddress():
            return f"BRANCH_ADDRESS : Branch address.; {_branch(pkt)}"
        case ISync():
            if pkt.raw[:1] == b"\x70":
                name = "I_SYNC_CYCLE : Instruction Packet synchronisation with cycle count."
            else:
                name = "I_SYNC : Instruction Packet synchronisation."
            return f"{name}; {_isync(pkt)}"
        case NotSync():
            if pkt.reserved:
                return "I_RESERVED : Reserved Packet Header"
            return "NOTSYNC : Trace Stream not synchronised"
        case ASync():
            return "A_SYNC : Alignment Synchronisation."
        case CycleCount():
            return f"CYCLE_COUNT : Cycle Count.; Cycles={pkt.count}"
        case Timestamp():
            ts = pkt.timestamp
            return f"TIMESTAMP : Timestamp Value.; TS=0x{ts:x} ({ts}) "
        case ContextID():
            return f"CONTEXT_ID : Context ID change.; CtxtID=0x{pkt.context_id:x}"
        case VMID():
            return f"VMID : VMID change.; VMID=0x{pkt.vmid:x}"
        case Trigger():
            return "TRIGGER : Trace Trigger Event."
        case Ignore():
            return "IGNORE : Packet ignored."
        case ExceptionEntry():
            return "EXCEPTION_ENTRY : Exception entry data marker."
        case ExceptionExit():
            return "EXCEPTION_EXIT : Exception return."
        case StoreFailed():
            return "STORE_FAIL : Data Store Failed."
        case DataSuppressed():
            return "DATA_SUPPRESSED : Data trace suppressed."
        case OOOData():
            return (
                "OOO_DATA : Out of Order data value packet.; "
                f"Val=0x{pkt.value:x}; OO_Tag=0x{pkt.tag:x}"
            )
        case OOOPlaceholder():
            return (
                "OOO_ADDR_PLC : Out of Order data address placeholder."
                f"{_data_addr(pkt.address)}; OO_Tag=0x{pkt.tag:x}"
            )
        case ValueNotTraced():
            return f"VAL_NOT_TRACED : Data trace value not traced.{_data_addr(pkt.address)}"
        case NormalData():
            text = f"NORM_DATA : Data trace packet.{_data_addr(pkt.address)}"
            if pkt.value is not None:
                text += f"; Val=0x{pkt.value:x}"
            return text
        case BadSequence():
            name = _NAMES.get(pkt.header, pkt.header)
            return f"BAD_SEQUENCE : Invalid sequence for packet type.[{name}]"
        case BadTraceMode():
            name = _NAMES.get(pkt.header, pkt.header)
            return f"BAD_TRACEMODE : Invalid packet type for this trace mode.[{name}]"
        case Reserved():
            return "I_RESERVED : Reserved Packet Header"
    return "I_RESERVED : Reserved Packet Header"
