"""ETMv2 packets → listing text (cstrace's own form: OpenCSD has no ETMv2 decoder).

Input: a :class:`~cstrace.protocols.etmv2.packets.Cycle2`; output: the text
after the raw bytes, e.g. ``DE; TRACEPKT=0x8d; placed: BranchAddr(8d80808010)``.
"""

from __future__ import annotations

from cstrace.protocols.base import Packet
from cstrace.protocols.etmv2.packets import V2Status

__all__ = ["packet_text"]


def packet_text(pkt: Packet) -> str:
    """The listing text of one ETMv2 cycle."""
    status = V2Status(getattr(pkt, "status", 7) & 0xF).name
    if getattr(pkt, "trigger", False):
        status = f"TR({status})"
    parts = [status, f"TRACEPKT=0x{getattr(pkt, 'tracepkt', 0):04x}"]
    tfo = getattr(pkt, "tfo", None)
    if tfo is not None:
        parts.append(f"TFO={tfo}")
    group = getattr(pkt, "group", None)
    if group:
        parts.append("placed: " + ", ".join(repr(p) for p in group))
    return "; ".join(parts)
