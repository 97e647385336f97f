"""ITM packet and element text in the reference lister's format.

Input: an ITM packet (:mod:`cstrace.protocols.itm.packets`) or an
:class:`~cstrace.elements.ITMTrace` element; output: the text
``trc_pkt_lister`` prints, e.g. ``ITM_SWIT: {src id: 0x03}  0xbb; 'Software
Stimulus write packet'`` and ``OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x3;
Data: 0xbb) )``.
"""

from __future__ import annotations

from cstrace.elements import ITMPacketType, ITMTrace
from cstrace.protocols.base import Packet
from cstrace.protocols.itm.packets import (
    BadSequence,
    Dwt,
    Extension,
    GlobalTs1,
    GlobalTs2,
    IncompleteEot,
    ItmPacket,
    ItmPktType,
    LocalTs,
    Swit,
)

__all__ = ["itm_element_text", "packet_text"]

_P = ItmPktType

_NAMES: dict[ItmPktType, tuple[str, str]] = {
    _P.NOTSYNC: ("ITM_NOTSYNC", "ITM data stream not synchronised"),
    _P.INCOMPLETE_EOT: ("ITM_INCOMPLETE_EOT", "Incomplete packet flushed at end of trace"),
    _P.ASYNC: ("ITM_ASYNC", "Alignment synchronisation packet"),
    _P.OVERFLOW: ("ITM_OVERFLOW", "ITM overflow packet"),
    _P.SWIT: ("ITM_SWIT", "Software Stimulus write packet"),
    _P.DWT: ("ITM_DWT", "DWT hardware stimulus write"),
    _P.TS_LOCAL: ("ITM_TS_LOCAL", "Local Timestamp"),
    _P.TS_GLOBAL_1: ("ITM_GTS_1", "Global Timestamp [25:0]"),
    _P.TS_GLOBAL_2: ("ITM_GTS_2", "Global Timestamp [{63|42}:26]"),
    _P.EXTENSION: ("ITM_EXTENSION", "Extension packet"),
    _P.BAD_SEQUENCE: ("ITM_BAD_SEQUENCE", "Invalid sequence in packet"),
    _P.RESERVED: ("ITM_RESERVED", "Reserved Packet Header"),
}
_UNKNOWN = ("ITM_UNKNOWN", "ERROR: unknown packet type")

_TC_TEXT = ("TS Sync", "TS Delayed", "TS Sync, Packet Delayed", "TS Delayed, Packet Delayed")
_EXCEPTION_FN = ("reserved", "entered", "exited", "returned to")
_ECNTR_FLAGS = ((0x01, "CPI"), (0x02, "EXC"), (0x04, "Sleep"), (0x08, "LSU"), (0x10, "Fold"))
_ECNTR_CYC = 0x20
_GTS1_BITS = (6, 13, 20, 25)


def _value(value: int, size: int) -> str:
    """A payload value padded to its size, as the reference prints it."""
    if size <= 4:
        return f"0x{value:0{size * 2}x}"
    return f"0x{(value >> 32) & 0xFF:02x}{value & 0xFFFF_FFFF:08x}"


def _dwt_text(src: int, value: int, size: int) -> str:
    if src == 0:
        flags = "".join(f" {name} " if value & bit else " --- " for bit, name in _ECNTR_FLAGS)
        flags += " CYC " if value & _ECNTR_CYC else " --- "
        return f"[Event Counter: 0x{value:02x}; Flags: {flags}] "
    if src == 1:
        fn = _EXCEPTION_FN[(value >> 12) & 3]
        return f"[Exception Num:  0x{value & 0x1FF:04x}({fn}) ]"
    if src == 2:
        return f"[PC Sample: {_value(value, size)}] "
    if 8 <= src <= 23:
        dt_type = (src >> 3) & 3
        write = src & 1
        comp = (src >> 1) & 3
        val = _value(value, size)
        if dt_type == 1:
            what = "Address=" if write else "PC Value="
            return f"[Data Trc: comp={comp}; {what}{val} ] "
        return f"[Data Trc: comp={comp}; Val {'write' if write else 'read'}: {val}] "
    return "[Reserved discriminator value] "


def packet_text(pkt: Packet) -> str:
    """The reference lister's text for an ITM packet."""
    assert isinstance(pkt, ItmPacket)
    name, desc = _NAMES.get(pkt.KIND, _UNKNOWN)
    text = name + ": "
    match pkt:
        case Swit(src_id=src, value=value, size=size):
            text += f"{{src id: 0x{src:02x}}}  {_value(value, size)}"
        case Dwt(src_id=src, value=value, size=size):
            text += f"{{desc: 0x{src:02x}}} " + _dwt_text(src, value, size)
        case LocalTs(tc=tc, value=value, size=size):
            text += f"{_value(value, size)} {{ {_TC_TEXT[tc & 3]} }}"
        case GlobalTs1(flags=flags, value=value, size=size):
            text += f"{{ TS bits [{_GTS1_BITS[size - 1]}:0]"
            if flags & 1:
                text += ", Clk change"
            if flags & 2:
                text += ", Clk wrap"
            text += "} " + _value(value, size)
        case GlobalTs2(value=value, size=size):
            size = min(size, 5)  # the reference's value size: 1-4 bytes, or 5 (40 bits)
            bits = "63" if size == 5 else "47"
            text += f"{{ TS bits [{bits}:26]}} " + _value(value, size)
        case Extension(hardware=hw, nbits=nbits, value=value):
            bitsize = nbits + 1
            if bitsize == 3 and not hw:
                text += f"{{stim port page}} 0x{value:02x}"
            else:
                width = bitsize // 4 + 1
                text += f"{{unknown extension type, {bitsize} bits }} 0x{value:0{width}x}"
        case BadSequence(orig=orig) | IncompleteEot(orig=orig):
            text += f"[Init type: {_NAMES.get(orig, _UNKNOWN)[0]}] "
        case _:
            pass
    return f"{text}; '{desc}'"


_LOCAL_TEXT = {
    ITMPacketType.TS_SYNC: "TS Sync",
    ITMPacketType.TS_DELAY: "TS Delay",
    ITMPacketType.TS_PKT_DELAY: "Packet Delay",
    ITMPacketType.TS_PKT_TS_DELAY: "TS and Packet Delay",
}


def itm_element_text(elem: ITMTrace) -> str:
    """The reference lister's text for an ITM trace element."""
    text = "ITM_OVERFLOW; " if elem.overflow else ""
    kind = elem.pkt_type
    width = elem.payload_size * 2
    if kind == ITMPacketType.SWIT:
        text += f"ITM_SWIT (ch: 0x{elem.src_id:x}; Data: 0x{elem.value:0{width}x}) "
    elif kind == ITMPacketType.DWT:
        text += f"ITM_DWT (desc: 0x{elem.src_id:x}; Data: 0x{elem.value:0{width}x}) "
    elif kind == ITMPacketType.TS_GLOBAL:
        text += f"ITM_TS_GLOBAL ( TS: 0x{elem.timestamp or 0:016x}) "
    elif kind in _LOCAL_TEXT:
        text += (
            f"ITM_TS_LOCAL ( TS delta: 0x{elem.value:08x}, {{ {_LOCAL_TEXT[kind]}}}; "
            f"TS cumulative: 0x{elem.timestamp or 0:016x}) "
        )
    return f"OCSD_GEN_TRC_ELEM_ITMTRACE({text})"
