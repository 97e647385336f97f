"""STM configuration: the trace source registers of a snapshot → :class:`StmConfig`.

Input: the STM's register values (``STMTCSR``, snapshot format 0.2 §4.2.5:
the trace ID is in bits [22:16]); output: the configuration the STM reader and
decoder use. The STM packet stream is self-describing otherwise (the VERSION
packet selects the timestamp encoding).
"""

from __future__ import annotations

from dataclasses import dataclass

from cstrace.protocols.base import Registers, require

__all__ = ["StmConfig", "from_registers"]


@dataclass(frozen=True)
class StmConfig:
    """Static configuration of one STM trace source."""

    stmtcsr: int = 0
    """The STM trace control and status register."""

    @property
    def trace_id(self) -> int:
        """CoreSight trace ID (``STMTCSR`` bits [22:16])."""
        return (self.stmtcsr >> 16) & 0x7F

    @classmethod
    def from_registers(cls, regs: Registers) -> StmConfig:
        """The configuration of an STM from its trace control and status register."""
        return cls(require(regs, "STMTCSR", "STM"))

    @classmethod
    def from_trace_id(cls, trace_id: int) -> StmConfig:
        """A configuration for a given trace ID (tests, synthetic captures)."""
        return cls((trace_id & 0x7F) << 16)


def from_registers(regs: Registers, core: str = "", version: str = "") -> StmConfig:
    """The STM configuration from register values: STMTCSR is required."""
    del core, version
    return StmConfig.from_registers(regs)
