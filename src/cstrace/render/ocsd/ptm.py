"""PTM packets → the packet text of the OpenCSD listing.

Input: a packet of :mod:`cstrace.protocols.ptm.packets`; output: the text the
reference lister prints after the raw bytes, for example
``ATOM : Atom packet; ENEEE; `` or
``BRANCH_ADDRESS : Branch address packet; Addr=0xC0052718 ~[0x52718]; Cycles=19; ``.
"""

from __future__ import annotations

from typing import Any

from cstrace.elements import Isa
from cstrace.protocols.base import Packet
from cstrace.protocols.ptm.packets import (
    VMID,
    Atom,
    BadSequence,
    BranchAddress,
    ContextID,
    ISync,
    PtmPacket,
    PtmPacketType,
    Timestamp,
    WaypointUpdate,
)
from cstrace.render.ocsd.armv7 import EXCEPTION_NAMES, ISYNC_REASONS

__all__ = ["packet_text"]

_NAMES: dict[PtmPacketType, str] = {
    PtmPacketType.NOTSYNC: "NOTSYNC : PTM Not Synchronised; ",
    PtmPacketType.INCOMPLETE_EOT: "INCOMPLETE_EOT : Incomplete packet flushed at end of trace; ",
    PtmPacketType.A_SYNC: "ASYNC : Alignment Synchronisation Packet; ",
    PtmPacketType.I_SYNC: "ISYNC : Instruction Synchronisation packet; ",
    PtmPacketType.ATOM: "ATOM : Atom packet; ",
    PtmPacketType.BRANCH_ADDRESS: "BRANCH_ADDRESS : Branch address packet; ",
    PtmPacketType.WAYPOINT_UPDATE: "WP_UPDATE : Waypoint update packet; ",
    PtmPacketType.TRIGGER: "TRIGGER : Trigger Event packet; ",
    PtmPacketType.CONTEXT_ID: "CTXTID : Context ID packet; ",
    PtmPacketType.VMID: "VMID : VM ID packet; ",
    PtmPacketType.TIMESTAMP: "TIMESTAMP : Timestamp packet; ",
    PtmPacketType.EXCEPTION_RETURN: "ERET : Exception return packet; ",
    PtmPacketType.IGNORE: "IGNORE : Ignore packet; ",
    PtmPacketType.BAD_SEQUENCE: "BAD_SEQUENCE : Invalid sequence in packet; ",
    PtmPacketType.RESERVED: "RESERVED : Reserved Packet Header; ",
}
_SHORT: dict[PtmPacketType, str] = {k: v.split(" : ", 1)[0] for k, v in _NAMES.items()}
_ISA_TEXT = {
    Isa.A32: "ARM(32)",
    Isa.T32: "Thumb2",
    Isa.A64: "AArch64",
    Isa.TEE: "ThumbEE",
    Isa.JAZELLE: "Jazelle",
}


def _isa(isa: Isa) -> str:
    return f"ISA={_ISA_TEXT.get(isa, 'Unknown')}; "


def _value(total_bits: int, valid_bits: int, value: int, update_bits: int) -> str:
    """A partly known value: ``0x????137E (12:0) ~[0x137E]`` (unknown digits as '?')."""
    hex_chars = (total_bits + 3) // 4
    valid_chars = (valid_bits + 3) // 4
    text = "0x" + "?" * (hex_chars - valid_chars) + f"{value:0{valid_chars}X}"
    if valid_bits < total_bits:
        text += f" ({valid_bits - 1}:0)"
    if update_bits:
        text += f" ~[0x{value & ((1 << update_bits) - 1):X}]"
    return text


def _cycles(cc: int | None) -> str:
    return "" if cc is None else f"Cycles={cc}; "


def _address(p: BranchAddress | WaypointUpdate) -> str:
    text = f"Addr={_value(32, p.valid_bits, p.address, p.pkt_bits)}; "
    if p.isa_changed:
        text += _isa(p.isa)
    return text


def packet_text(pkt: Packet) -> str:
    """The reference lister's text for one PTM packet."""
    t = type(pkt)
    p: Any = pkt
    if t is Atom:  # the most frequent kinds first
        text = "ATOM : Atom packet; "
        bits = p.bits
        cc = p.cycle_count
        if cc is not None:
            return f"{text}{'E' if bits & 1 else 'N'}; Cycles={cc}; "
        return text + "".join("E" if (bits >> i) & 1 else "N" for i in range(p.count)) + "; "
    if t is BranchAddress:
        text = "BRANCH_ADDRESS : Branch address packet; " + _address(p)
        if p.ns_updated:
            text += "NS; " if p.ns else "S; "
            text += "Hyp; " if p.hyp else ""
        exception = p.exception
        if exception is not None:
            name = EXCEPTION_NAMES[exception] if exception < 16 else "Unknown"
            text += f"Excep={name} [{exception:02x}]; "
        return text + _cycles(p.cycle_count)
    if t is ISync:
        text = (
            f"{_NAMES[PtmPacketType.I_SYNC]}({ISYNC_REASONS[p.reason]}); Addr=0x{p.address:08x}; "
        )
        text += "NS; " if p.ns else "S; "
        text += "Hyp; " if p.hyp else " "
        if p.context_id is not None:
            text += f"CtxtID={p.context_id:08x}; "
        return text + _isa(p.isa) + _cycles(p.cycle_count)
    if not isinstance(pkt, PtmPacket):
        return "UNKNOWN : Unknown packet type; "
    text = _NAMES[pkt.TYPE]
    if t is WaypointUpdate:
        return text + _address(p)
    if t is Timestamp:
        ts = p.timestamp
        return f"{text}TS={_value(64, 64, ts, p.update_bits)}({ts}); {_cycles(p.cycle_count)}"
    if t is ContextID:
        return f"{text}CtxtID=0x{p.context_id:08x}; "
    if t is VMID:
        return f"{text}VMID=0x{p.vmid:02x}; "
    if t is BadSequence:
        return f"{text}[{_SHORT.get(p.kind, 'UNKNOWN')}]; "
    return text
