"""ETMv1 packets: one pipeline-status message per trace-port cycle.

Input: nothing (definitions). Output: :class:`PipeStat`, the packet of the ETMv1
reader. In ETMv1 the trace packets on TRACEPKT carry no headers: which bytes
belong to which instruction follows from the PIPESTAT sequence, TRACESYNC, the
address packet offsets and the code image, so the reader's packets are the
cycles themselves and the decoder assembles the address and data packets
(ARM IHI 0014Q chapter 5; thesis ``seeds/004`` §8.5).
"""

from __future__ import annotations

from enum import IntEnum

from cstrace.protocols.base import Packet

__all__ = ["PipeStat", "V1Status"]


class V1Status(IntEnum):
    """ETMv1 PIPESTAT encodings (IHI 0014Q table 5.1)."""

    IE = 0
    """Instruction executed."""
    ID = 1
    """Instruction executed, data packets placed in the FIFO."""
    IN = 2
    """Instruction not executed (condition code failed)."""
    WT = 3
    """Wait: no instruction this cycle."""
    BE = 4
    """Branch executed: a branch address follows."""
    BD = 5
    """Branch executed with data."""
    TR = 6
    """Trigger: the real status is on TRACEPKT[2:0]."""
    TD = 7
    """Trace disabled, or nothing on TRACEPKT."""


class PipeStat(Packet):
    """One trace-port cycle (or a run of ``count`` TD cycles).

    ``status`` is the real pipeline status (for a trigger cycle, the one carried
    on TRACEPKT[2:0], with ``trigger`` set); ``tracepkt`` and ``sync`` are the
    TRACEPKT and TRACESYNC signals of the cycle. ``offset`` is the cycle number
    in the capture.
    """

    __slots__ = ("count", "status", "sync", "tracepkt", "trigger")

    def __init__(
        self,
        offset: int,
        raw: bytes,
        status: int,
        tracepkt: int,
        sync: bool = False,
        trigger: bool = False,
        count: int = 1,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.status = status
        self.tracepkt = tracepkt
        self.sync = sync
        self.trigger = trigger
        self.count = count
