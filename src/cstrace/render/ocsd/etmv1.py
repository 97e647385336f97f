"""ETMv1 packets → listing text (cstrace's own form: OpenCSD has no ETMv1 decoder).

Input: a :class:`~cstrace.protocols.etmv1.packets.PipeStat`; output: the text
after the raw bytes, e.g. ``BE; TRACEPKT=0x8ffc; TRACESYNC`` or ``TD x71``.
"""

from __future__ import annotations

from cstrace.protocols.base import Packet
from cstrace.protocols.etmv1.packets import V1Status

__all__ = ["packet_text"]


def packet_text(pkt: Packet) -> str:
    """The listing text of one ETMv1 pipeline-status packet."""
    status = getattr(pkt, "status", 7)
    name = V1Status(status & 7).name
    parts = [name if getattr(pkt, "count", 1) == 1 else f"{name} x{pkt.count}"]  # type: ignore[attr-defined]
    if getattr(pkt, "trigger", False):
        parts[0] = f"TR({parts[0]})"
    parts.append(f"TRACEPKT=0x{getattr(pkt, 'tracepkt', 0):04x}")
    if getattr(pkt, "sync", False):
        parts.append("TRACESYNC")
    return "; ".join(parts)
