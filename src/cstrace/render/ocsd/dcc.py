"""DCC software-trace packets → listing text (cstrace's own form).

Input: a packet of :mod:`cstrace.protocols.dcc`; output: e.g.
``TRACEPOINT; Number=0x000012`` or ``DEBUGMSG; ASCII; "hello"``.
"""

from __future__ import annotations

from cstrace.protocols.base import Packet
from cstrace.protocols.dcc import DebugMessage, MsgType, TracePoint, UnknownWord

__all__ = ["packet_text"]


def packet_text(pkt: Packet) -> str:
    """The listing text of one DCC packet."""
    match pkt:
        case TracePoint(number=n):
            return f"TRACEPOINT; Number=0x{n:06x}"
        case DebugMessage(mtype=MsgType.ASCII):
            return f"DEBUGMSG; ASCII; {pkt.text!r}"
        case DebugMessage(mtype=mt, items=items):
            digits = 2 * {1: 1, 2: 2, 4: 4}[int(mt)]
            return f"DEBUGMSG; {mt.name}; " + " ".join(f"0x{v:0{digits}x}" for v in items)
        case UnknownWord(reason=r):
            return f"UNKNOWN; {r}"
    return "?"
