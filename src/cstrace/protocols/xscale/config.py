"""XScale trace buffer configuration: what the decoder needs besides the buffer itself.

Input: the values of an ``XScale`` trace source (optional register ``START_PC``:
the address where tracing started, with bit 0 set for Thumb state, known when
the buffer was used in fill-once mode from a known point); output: an
:class:`XscaleConfig`. The checkpoint registers and the PC at debug entry of
each buffer fill travel with the capture (:mod:`cstrace.protocols.xscale.reader`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cstrace.protocols.base import Registers

__all__ = ["XscaleConfig", "from_registers"]


@dataclass(frozen=True)
class XscaleConfig:
    """The static configuration of one XScale trace buffer."""

    start_pc: int | None = None
    """Where tracing started (bit 0: Thumb), if known."""
    high_vectors: bool = False
    """Exception vectors at 0xFFFF0000 (CP15 control register V bit)."""

    @classmethod
    def from_registers(cls, regs: Registers) -> XscaleConfig:
        """The configuration from the optional values ``START_PC`` and ``HIGH_VECTORS``."""
        start = regs.get("START_PC")
        return cls(start, bool(regs.get("HIGH_VECTORS", 0)))

    @property
    def trace_id(self) -> int:
        """XScale trace has no trace ID: 0."""
        return 0


def from_registers(regs: Registers, core: str = "", version: str = "") -> XscaleConfig:
    """The XScale configuration from register values (see :meth:`XscaleConfig.from_registers`)."""
    del core, version
    return XscaleConfig.from_registers(regs)
