"""STM configuration: the trace source registers of a snapshot → :class:`StmConfig`.

Input: the STM's register values (``STMTCSR``, snapshot format 0.2 §4.2.5:
the trace ID is in bits [22:16]); output: the configuration the STM reader and
decoder use. The STM packet stream is self-describing otherwise (the VERSION
packet selects the timestamp encoding). Whether packets before the first ASYNC
are decoded is a decode option
(:attr:`~cstrace.protocols.base.DecodeOptions.decode_before_sync`), which
:func:`with_options` copies into the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cstrace.protocols.base import DecodeOptions, Registers, require

__all__ = ["StmConfig", "from_registers", "with_options"]


@dataclass(frozen=True)
class StmConfig:
    """Static configuration of one STM trace source."""

    stmtcsr: int = 0
    """The STM trace control and status register."""
    decode_before_sync: bool = False
    """Decode from the first unambiguous packet boundary instead of waiting for an
    ASYNC packet as the reference does (see :mod:`~cstrace.protocols.stm.boundary`)."""

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


def with_options(config: StmConfig, options: DecodeOptions) -> StmConfig:
    """``config`` with the decode options the reader uses (``decode_before_sync``)."""
    return replace(config, decode_before_sync=options.decode_before_sync)
