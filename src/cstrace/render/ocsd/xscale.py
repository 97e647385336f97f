"""XScale trace buffer messages → listing text (cstrace's own form).

Input: a packet of :mod:`cstrace.protocols.xscale`; output: e.g.
``INDIRECT; Count=7; Target=0x000088e0`` or ``FILL END; CHKPT0=...``.
"""

from __future__ import annotations

from cstrace.protocols.base import Packet
from cstrace.protocols.xscale.packets import FillEnd, Message, MsgKind

__all__ = ["packet_text"]


def packet_text(pkt: Packet) -> str:
    """The listing text of one XScale packet."""
    match pkt:
        case Message(kind=MsgKind.EXCEPTION):
            return f"EXCEPTION; Vector=0x{pkt.vector:02x}; Count={pkt.count}"
        case Message(kind=MsgKind.ROLLOVER):
            return "ROLLOVER"
        case Message(kind=k, count=c, target=t):
            text = f"{k.name}; Count={c}"
            if k in (MsgKind.INDIRECT, MsgKind.INDIRECT_CHKPT):
                text += "; Target=" + ("?" if t is None else f"0x{t:08x}")
            return text
        case FillEnd():
            return (
                f"FILL END; CHKPT0=0x{pkt.chkpt0:08x}; CHKPT1=0x{pkt.chkpt1:08x}; "
                f"PC=0x{pkt.last_pc:08x}"
            )
    return "?"
