"""STM packet text in the reference lister's format.

Input: an STM packet (:mod:`cstrace.protocols.stm.packets`); output: the text
``trc_pkt_lister`` prints after the raw bytes, e.g.
``D32M:32 bit data + marker; Data=0x10000000`` or
``FLAGTS:Flag packet + timestamp; TS=0x00000003AEB284C9 ~[0x3AEB284C9]``.
"""

from __future__ import annotations

from cstrace.protocols.base import Packet
from cstrace.protocols.stm.packets import (
    C8,
    C16,
    M8,
    BadSequence,
    Data,
    Flag,
    Freq,
    IncompleteEot,
    Null,
    StmPacket,
    StmPktType,
    Trig,
    Version,
)

__all__ = ["packet_text"]

_P = StmPktType

_NAMES: dict[StmPktType, tuple[str, str]] = {
    _P.RESERVED: ("RESERVED", "Reserved Packet Header"),
    _P.NOTSYNC: ("NOTSYNC", "STM not synchronised"),
    _P.INCOMPLETE_EOT: ("INCOMPLETE_EOT", "Incomplete packet flushed at end of trace"),
    _P.NO_ERR_TYPE: ("NO_ERR_TYPE", "Error type not set"),
    _P.BAD_SEQUENCE: ("BAD_SEQUENCE", "Invalid sequence in packet"),
    _P.ASYNC: ("ASYNC", "Alignment synchronisation packet"),
    _P.VERSION: ("VERSION", "Version packet"),
    _P.FREQ: ("FREQ", "Frequency packet"),
    _P.NULL: ("NULL", "Null packet"),
    _P.TRIG: ("TRIG", "Trigger packet"),
    _P.GERR: ("GERR", "Global Error"),
    _P.MERR: ("MERR", "Master Error"),
    _P.M8: ("M8", "Set current master"),
    _P.C8: ("C8", "Set current channel"),
    _P.C16: ("C16", "Set current channel"),
    _P.FLAG: ("FLAG", "Flag packet"),
    _P.D4: ("D4", "4 bit data"),
    _P.D8: ("D8", "8 bit data"),
    _P.D16: ("D16", "16 bit data"),
    _P.D32: ("D32", "32 bit data"),
    _P.D64: ("D64", "64 bit data"),
}

# Packet types whose name takes the M (marker) and TS (timestamp) suffixes.
_SUFFIXED = {_P.TRIG, _P.FLAG, _P.D4, _P.D8, _P.D16, _P.D32, _P.D64}


def _make_name(kind: StmPktType, marker: bool, stamped: bool) -> tuple[str, str]:
    name, desc = _NAMES.get(kind, ("UNKNOWN", "ERROR: unknown packet type"))
    if kind in _SUFFIXED:
        if marker:
            name += "M"
            desc += " + marker"
        if stamped:
            name += "TS"
            desc += " + timestamp"
    return name, desc


_NAME_CACHE = {
    (kind, marker, stamped): _make_name(kind, marker, stamped)
    for kind in StmPktType
    for marker in (False, True)
    for stamped in (False, True)
}


def _name(kind: StmPktType, marker: bool, stamped: bool) -> tuple[str, str]:
    """Name and description of a packet type, with the M and TS suffixes where they apply."""
    return _NAME_CACHE[kind, marker, stamped]


def _ts_text(ts: int, bits: int | None) -> str:
    text = f"; TS=0x{ts:016X}"
    if bits:
        text += f" ~[0x{ts & ((1 << bits) - 1):X}]"
    return text


_DATA_KIND = {4: _P.D4, 8: _P.D8, 16: _P.D16, 32: _P.D32, 64: _P.D64}
# Data packets: (bits, marker, timestamp) -> (text up to the value, value format).
_DATA_TEXT = {
    (bits, marker, stamped): (
        "{}:{}; Data=0x".format(*_name(kind, marker, stamped)),
        f"0{bits // 4}x",
    )
    for bits, kind in _DATA_KIND.items()
    for marker in (False, True)
    for stamped in (False, True)
}


def packet_text(pkt: Packet) -> str:
    """The reference lister's text for an STM packet."""
    if type(pkt) is Data:  # most packets: a shortcut
        ts = pkt.timestamp
        head, fmt = _DATA_TEXT[pkt.bits, pkt.marker, ts is not None]
        text = head + format(pkt.value, fmt)
        return text if ts is None else text + _ts_text(ts, pkt.ts_bits)
    assert isinstance(pkt, StmPacket)
    match pkt:
        case Flag(timestamp=ts, ts_bits=tb) | Null(timestamp=ts, ts_bits=tb):
            name, desc = _name(pkt.KIND, False, ts is not None)
            return f"{name}:{desc}" + (_ts_text(ts, tb) if ts is not None else "")
        case Trig(value=value, timestamp=ts, ts_bits=tb):
            name, desc = _name(pkt.KIND, False, ts is not None)
            text = f"{name}:{desc}; TrigData=0x{value:02x}"
            return text + (_ts_text(ts, tb) if ts is not None else "")
        case Version(version=v):
            return f"VERSION:Version packet; Ver={v}"
        case Freq(value=value):
            return f"FREQ:Frequency packet; Freq={value}Hz"
        case M8(master=m):
            return f"M8:Set current master; Master=0x{m:02x}"
        case C8(channel=c) | C16(channel=c):
            name, desc = _NAMES[pkt.KIND]
            return f"{name}:{desc}; Chan=0x{c:04x}"
        case BadSequence(orig=orig, marker=marker) | IncompleteEot(orig=orig, marker=marker):
            name, desc = _NAMES[pkt.KIND]
            return f"{name}:{desc}[{_name(orig, marker, False)[0]}]"
        case _:
            name, desc = _NAMES[pkt.KIND]
            return f"{name}:{desc}"
