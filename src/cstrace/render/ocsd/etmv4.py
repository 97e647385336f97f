"""ETMv4 / ETE packet text in the reference lister's format.

Input: a packet of :mod:`cstrace.protocols.etmv4.packets`; output: the text
the OpenCSD ``trc_pkt_lister`` prints after the raw bytes, mnemonic first::

    I_ATOM_F1 : Atom format 1.; E
    I_ADDR_L_64IS0 : Address, Long, 64 bit, IS0.; Addr=0x00000000FFFEB448;

Mnemonics are the reference's (``I_`` and the packet kind's name), including
its spelling ``I_SCR_ADDR_L_32IS0`` for the 32-bit IS0 source address packet.
ETE differs only in the trace info text (see :mod:`cstrace.render.ocsd.ete`).
"""

from __future__ import annotations

from collections.abc import Callable

from cstrace.protocols.base import Packet
from cstrace.protocols.etmv4.packets import (
    Address,
    AddressContext,
    AddressMatch,
    Atom,
    BadPacket,
    Cancel,
    Commit,
    Context,
    CycleCount,
    Etmv4Packet,
    Exception_,
    Instrumentation,
    Mispredict,
    PacketType,
    Q,
    SourceAddress,
    SourceAddressMatch,
    Timestamp,
    TraceInfo,
)

__all__ = ["DESCRIPTIONS", "mnemonic", "packet_text", "packet_text_for"]

P = PacketType

DESCRIPTIONS: dict[PacketType, str] = {
    P.NOT_SYNC: "I Stream not synchronised",
    P.INCOMPLETE_EOT: "Incomplete packet at end of trace.",
    P.NO_ERR_TYPE: "No Error Type.",
    P.BAD_SEQUENCE: "Invalid Sequence in packet.",
    P.BAD_TRACEMODE: "Invalid Packet for trace mode.",
    P.RESERVED: "Reserved Packet Header",
    P.RESERVED_CFG: "Reserved header for current configuration.",
    P.EXTENSION: "Extension packet header.",
    P.TRACE_INFO: "Trace Info.",
    P.TIMESTAMP: "Timestamp.",
    P.TRACE_ON: "Trace On.",
    P.FUNC_RET: "V8M - function return.",
    P.EXCEPT: "Exception.",
    P.EXCEPT_RTN: "Exception Return.",
    P.ITE: "Instrumentation",
    P.TRANS_ST: "Transaction Start.",
    P.TRANS_COMMIT: "Transaction Commit.",
    P.CCNT_F1: "Cycle Count format 1.",
    P.CCNT_F2: "Cycle Count format 2.",
    P.CCNT_F3: "Cycle Count format 3.",
    P.NUM_DS_MKR: "Data Synchronisation Marker - Numbered.",
    P.UNNUM_DS_MKR: "Data Synchronisation Marker - Unnumbered.",
    P.COMMIT: "Commit",
    P.CANCEL_F1: "Cancel Format 1.",
    P.CANCEL_F1_MISPRED: "Cancel Format 1 + Mispredict.",
    P.MISPREDICT: "Mispredict.",
    P.CANCEL_F2: "Cancel Format 2.",
    P.CANCEL_F3: "Cancel Format 3.",
    P.COND_I_F2: "Conditional Instruction, format 2.",
    P.COND_FLUSH: "Conditional Flush.",
    P.COND_RES_F4: "Conditional Result, format 4.",
    P.COND_RES_F2: "Conditional Result, format 2.",
    P.COND_RES_F3: "Conditional Result, format 3.",
    P.COND_RES_F1: "Conditional Result, format 1.",
    P.COND_I_F1: "Conditional Instruction, format 1.",
    P.COND_I_F3: "Conditional Instruction, format 3.",
    P.IGNORE: "Ignore.",
    P.EVENT: "Trace Event.",
    P.CTXT: "Context Packet.",
    P.ADDR_CTXT_L_32IS0: "Address & Context, Long, 32 bit, IS0.",
    P.ADDR_CTXT_L_32IS1: "Address & Context, Long, 32 bit, IS1.",
    P.ADDR_CTXT_L_64IS0: "Address & Context, Long, 64 bit, IS0.",
    P.ADDR_CTXT_L_64IS1: "Address & Context, Long, 64 bit, IS1.",
    P.TS_MARKER: "Timestamp Marker",
    P.ADDR_MATCH: "Exact Address Match.",
    P.ADDR_S_IS0: "Address, Short, IS0.",
    P.ADDR_S_IS1: "Address, Short, IS1.",
    P.ADDR_L_32IS0: "Address, Long, 32 bit, IS0.",
    P.ADDR_L_32IS1: "Address, Long, 32 bit, IS1.",
    P.ADDR_L_64IS0: "Address, Long, 64 bit, IS0.",
    P.ADDR_L_64IS1: "Address, Long, 64 bit, IS1.",
    P.Q: "Q Packet.",
    P.SRC_ADDR_MATCH: "Exact Source Address Match.",
    P.SRC_ADDR_S_IS0: "Source Address, Short, IS0.",
    P.SRC_ADDR_S_IS1: "Source Address, Short, IS1.",
    P.SRC_ADDR_L_32IS0: "Source Address, Long, 32 bit, IS0.",
    P.SRC_ADDR_L_32IS1: "Source Address, Long, 32 bit, IS1.",
    P.SRC_ADDR_L_64IS0: "Source Address, Long, 64 bit, IS0.",
    P.SRC_ADDR_L_64IS1: "Source Address, Long, 64 bit, IS1.",
    P.ATOM_F6: "Atom format 6.",
    P.ATOM_F5: "Atom format 5.",
    P.ATOM_F2: "Atom format 2.",
    P.ATOM_F4: "Atom format 4.",
    P.ATOM_F1: "Atom format 1.",
    P.ATOM_F3: "Atom format 3.",
    P.ASYNC: "Alignment Synchronisation.",
    P.DISCARD: "Discard.",
    P.OVERFLOW: "Overflow.",
    P.PE_RESET: "PE Reset.",
    P.TRANS_FAIL: "Transaction Fail.",
}

# The reference's spelling, where it is not "I_" + the kind name.
_NAMES: dict[PacketType, str] = {P.SRC_ADDR_L_32IS0: "I_SCR_ADDR_L_32IS0"}


def mnemonic(kind: PacketType) -> str:
    """The reference's mnemonic of a packet kind, e.g. ``I_ATOM_F1``."""
    return _NAMES.get(kind, "I_" + kind.name)


_HEAD: dict[PacketType, str] = {k: f"{mnemonic(k)} : {v}" for k, v in DESCRIPTIONS.items()}

_AR_EXCEPTIONS = (
    "PE Reset", "Debug Halt", "Call", "Trap", "System Error", "Reserved", "Inst Debug",
    "Data Debug", "Reserved", "Reserved", "Alignment", "Inst Fault", "Data Fault", "Reserved",
    "IRQ", "FIQ",
)  # fmt: skip
_M_EXCEPTIONS = (
    "Reserved", "PE Reset", "NMI", "HardFault", "MemManage", "BusFault", "UsageFault",
    "Reserved", "Reserved", "Reserved", "Reserved", "SVC", "DebugMonitor", "Reserved",
    "PendSV", "SysTick", "IRQ0", "IRQ1", "IRQ2", "IRQ3", "IRQ4", "IRQ5", "IRQ6", "IRQ7",
    "DebugHalt", "LazyFP Push", "Lockup", "Reserved", "Reserved", "Reserved", "Reserved",
    "Reserved",
)  # fmt: skip


def _head(pkt: Etmv4Packet) -> str:
    return _HEAD.get(pkt.kind) or "I_UNKNOWN : Unknown Packet Header"


def _addr(value: int, pkt_bits: int = 0, limit: int = 0) -> str:
    """An address as the reference prints it: 64-bit hex, and the updated low bits if partial."""
    text = f"0x{value & 0xFFFFFFFFFFFFFFFF:016X}"
    if 0 < pkt_bits < limit:
        text += f" ~[0x{value & ((1 << pkt_bits) - 1):X}]"
    return text


def _atoms(bits: int, count: int) -> str:
    return "".join("E" if (bits >> i) & 1 else "N" for i in range(count))


def _ctxt(
    updated: bool, sf: bool, el: int, ns: bool, nse: bool, cid: int | None, vmid: int | None
) -> str:
    if not updated:
        return "Ctxt: Same"
    state = "AArch64," if sf else "AArch32, "
    if nse:
        sec = "Realm" if ns else "Root"
    else:
        sec = "NS" if ns else "S"
    text = f"Ctxt: {state}EL{el}, {sec}; "
    if cid is not None:
        text += f"CID=0x{cid:08x}; "
    if vmid is not None:
        text += f"VMID=0x{vmid:04x}; "
    return text


def _exception_info(pkt: Exception_) -> str:
    etype = pkt.exception_type
    if not pkt.m_type:
        text = f" {_AR_EXCEPTIONS[etype]};" if etype < 0x10 else " Reserved;"
    else:
        if etype < 0x20:
            text = f" {_M_EXCEPTIONS[etype]};"
        elif 0x208 <= etype <= 0x3EF:
            text = f" IRQ{etype - 0x200};"
        else:
            text = " Reserved;"
        if pkt.m_fault_pending:
            text += " Fault Pending;"
    if pkt.addr_interp == 1:
        text += " Ret Addr Follows;"
    elif pkt.addr_interp == 2:
        text += " Ret Addr Follows, Match Prev;"
    return text


def trace_info_text(pkt: TraceInfo, ete: bool) -> str:
    """The text of a trace info packet (ETE adds the transactional state)."""
    cc = int(pkt.cc_enabled)
    flags = f"CC.{cc}, TSTATE.{int(pkt.in_trans_state)}" if ete else f"CC.{cc}"
    text = f"{_head(pkt)}; INFO=0x{pkt.info:x} {{ {flags} }}"
    if pkt.cc_enabled:
        text += f"; CC_THRESHOLD=0x{pkt.cc_threshold or 0:x}"
    if pkt.initial:
        if pkt.spec_depth is not None:
            text += f"; INIT SPEC DEPTH={pkt.spec_depth}"
        text += "; Decoder Sync point TINFO"
    return text


def _t_atom(pkt: Atom) -> str:
    text = _ATOM_TEXT.get(pkt.raw)
    if text is None:
        text = f"{_head(pkt)}; {_atoms(pkt.bits, pkt.count)}"
        _ATOM_TEXT[pkt.raw] = text
    return text


_ATOM_TEXT: dict[bytes, str] = {}


def _t_address(pkt: Address | SourceAddress) -> str:
    if pkt.pkt_bits < 32:  # short forms
        return f"{_head(pkt)}; Addr={_addr(pkt.address, pkt.pkt_bits, 64)}"
    return f"{_head(pkt)}; Addr={_addr(pkt.address)}; "


def _t_match(pkt: AddressMatch | SourceAddressMatch) -> str:
    return f"{_head(pkt)}, [{pkt.index}]; Addr={_addr(pkt.address)}; "


def _t_addr_ctxt(pkt: AddressContext) -> str:
    ctxt = _ctxt(
        True,
        pkt.sf,
        pkt.el,
        pkt.ns,
        pkt.nse,
        pkt.context_id if pkt.cid_updated else None,
        pkt.vmid if pkt.vmid_updated else None,
    )
    return f"{_head(pkt)}; Addr={_addr(pkt.address)}; {ctxt}"


def _t_context(pkt: Context) -> str:
    ctxt = _ctxt(
        pkt.updated,
        pkt.sf,
        pkt.el,
        pkt.ns,
        pkt.nse,
        pkt.context_id if pkt.cid_updated else None,
        pkt.vmid if pkt.vmid_updated else None,
    )
    return f"{_head(pkt)}; {ctxt}"


def _t_timestamp(pkt: Timestamp) -> str:
    text = f"{_head(pkt)}; Updated val = 0x{pkt.timestamp:x}"
    if pkt.cycle_count is not None:
        text += f"; CC=0x{pkt.cycle_count:x}"
    return text


def _t_exception(pkt: Exception_) -> str:
    if pkt.kind != P.EXCEPT:
        return _head(pkt)
    return f"{_head(pkt)}; {_exception_info(pkt)}"


def _t_cycle_count(pkt: CycleCount) -> str:
    return f"{_head(pkt)}; Count=0x{pkt.count:x}"


def _t_commit(pkt: Commit) -> str:
    return f"{_head(pkt)}; Commit({pkt.count})"


def _t_cancel(pkt: Cancel) -> str:
    if pkt.kind == P.CANCEL_F1:
        return f"{_head(pkt)}; Cancel({pkt.count})"
    if pkt.kind == P.CANCEL_F1_MISPRED:
        return f"{_head(pkt)}; Cancel({pkt.count}), Mispredict"
    atoms = f"Atom: {_atoms(pkt.atom_bits, pkt.atom_count)}, " if pkt.atom_count else ""
    return f"{_head(pkt)}; {atoms}Cancel({pkt.count}), Mispredict"


def _t_mispredict(pkt: Mispredict) -> str:
    atoms = f"Atom: {_atoms(pkt.atom_bits, pkt.atom_count)}, " if pkt.atom_count else ""
    return f"{_head(pkt)}; {atoms}Mispredict"


def _t_q(pkt: Q) -> str:
    count = "Unknown" if pkt.count is None else str(pkt.count)
    text = f"{_head(pkt)}; Count({count})"
    if pkt.has_address:
        text += f"; Addr={_addr(pkt.address, pkt.pkt_bits, 64)}"
    return text


def _t_ite(pkt: Instrumentation) -> str:
    return f"{_head(pkt)}; EL{pkt.el}; Payload=0x{pkt.value:x}"


def _t_bad(pkt: BadPacket) -> str:
    if pkt.kind in (P.BAD_SEQUENCE, P.INCOMPLETE_EOT, P.RESERVED_CFG):
        return f"{_head(pkt)}[{mnemonic(pkt.err_kind)}]"
    return _head(pkt)


def _t_trace_info_etmv4(pkt: TraceInfo) -> str:
    return trace_info_text(pkt, False)


def _t_trace_info_ete(pkt: TraceInfo) -> str:
    return trace_info_text(pkt, True)


_Renderer = Callable[[Packet], str]

_BY_CLASS: dict[type, Callable[..., str]] = {
    Atom: _t_atom,
    Address: _t_address,
    SourceAddress: _t_address,
    AddressMatch: _t_match,
    SourceAddressMatch: _t_match,
    AddressContext: _t_addr_ctxt,
    Context: _t_context,
    Timestamp: _t_timestamp,
    Exception_: _t_exception,
    CycleCount: _t_cycle_count,
    Commit: _t_commit,
    Cancel: _t_cancel,
    Mispredict: _t_mispredict,
    Q: _t_q,
    Instrumentation: _t_ite,
    BadPacket: _t_bad,
    TraceInfo: _t_trace_info_etmv4,
}


def packet_text_for(ete: bool) -> _Renderer:
    """The packet text function for ETMv4 (``ete`` False) or ETE trace."""
    table = dict(_BY_CLASS)
    if ete:
        table[TraceInfo] = _t_trace_info_ete

    def text(pkt: Packet) -> str:
        fn = table.get(type(pkt))
        if fn is not None:
            return fn(pkt)
        if isinstance(pkt, Etmv4Packet):
            return _head(pkt)
        return "I_UNKNOWN : Unknown Packet Header"

    text.__doc__ = "The reference lister's text for an ETMv4/ETE packet."
    return text


packet_text = packet_text_for(False)
