"""XScale trace buffer messages (thesis ``seeds/004`` §7.2, table 7.1).

Input: nothing (definitions). Output: the message kinds and the packet classes
of the XScale reader: :class:`Message` (one message byte, with the target
address for indirect branches) and :class:`FillEnd` (the end of one buffer
fill: checkpoint registers and the PC at debug entry).
"""

from __future__ import annotations

from enum import IntEnum

from cstrace.protocols.base import Packet

__all__ = ["FillEnd", "Message", "MsgKind"]


class MsgKind(IntEnum):
    """Kinds of trace message bytes (upper nibble; thesis table 7.1)."""

    EXCEPTION = 0
    """b0VVVCCCC: an exception branched to vector VVV<<2."""
    DIRECT = 8
    """b1000CCCC: a direct branch (B, BL) was taken."""
    INDIRECT = 9
    """b1001CCCC: an indirect branch; its target is in the four entries before."""
    DIRECT_CHKPT = 12
    """b1100CCCC: a direct branch whose target went to a checkpoint register."""
    INDIRECT_CHKPT = 13
    """b1101CCCC: a checkpointed indirect branch."""
    ROLLOVER = 15
    """b11111111: sixteen instructions without a control flow change."""
    RESERVED = 1
    """Any other byte."""


class Message(Packet):
    """One message byte: its kind, count (CCCC), vector, and indirect target if known."""

    __slots__ = ("count", "kind", "target", "vector")

    def __init__(
        self,
        offset: int,
        raw: bytes,
        kind: MsgKind,
        count: int,
        vector: int = 0,
        target: int | None = None,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
        self.count = count
        self.vector = vector
        self.target = target


class FillEnd(Packet):
    """The end of one buffer fill: checkpoint registers and the PC at debug entry."""

    __slots__ = ("chkpt0", "chkpt1", "last_pc", "num_checkpoints")

    def __init__(
        self, offset: int, raw: bytes, chkpt0: int, chkpt1: int, last_pc: int, num_checkpoints: int
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.chkpt0 = chkpt0
        self.chkpt1 = chkpt1
        self.last_pc = last_pc
        self.num_checkpoints = num_checkpoints
