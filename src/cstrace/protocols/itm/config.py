"""ITM configuration: the trace source registers → :class:`ItmConfig`.

Input: the ITM's register values: its trace control register, named
``ITMTCR`` in snapshots and ``CONTROL_REGISTER`` in the snapshot format
(0.2 §4.2.4); output: the trace ID (bits [22:16]) and the local timestamp
prescaler (TSPrescale, bits [9:8], applied when SWOENA, bit 4, is set).
Whether packets before the first synchronisation packet are decoded is a
decode option (:attr:`~cstrace.protocols.base.DecodeOptions.decode_before_sync`),
which :func:`with_options` copies into the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cstrace.protocols.base import DecodeOptions, Registers, require

__all__ = ["ItmConfig", "from_registers", "with_options"]

_PRESCALE = (1, 4, 16, 64)


@dataclass(frozen=True)
class ItmConfig:
    """Static configuration of one ITM trace source."""

    itmtcr: int = 0
    """The ITM trace control register."""
    decode_before_sync: bool = False
    """Decode from the first unambiguous packet boundary instead of waiting for a
    synchronisation packet as the reference does (see :mod:`~cstrace.protocols.itm.boundary`)."""

    @property
    def trace_id(self) -> int:
        """CoreSight trace ID (``ITMTCR`` bits [22:16])."""
        return (self.itmtcr >> 16) & 0x7F

    @property
    def ts_prescale(self) -> int:
        """Local timestamp prescaler: 1, 4, 16 or 64 (1 unless SWOENA is set)."""
        if self.itmtcr & 0x10:
            return _PRESCALE[(self.itmtcr >> 8) & 3]
        return 1

    @classmethod
    def from_registers(cls, regs: Registers) -> ItmConfig:
        """The configuration of an ITM from its trace control register.

        Snapshots name it ``ITMTCR``; the snapshot format calls it ``CONTROL_REGISTER``.
        """
        if "ITMTCR" not in regs and "CONTROL_REGISTER" in regs:
            return cls(regs["CONTROL_REGISTER"])
        return cls(require(regs, "ITMTCR", "ITM"))

    @classmethod
    def from_trace_id(cls, trace_id: int) -> ItmConfig:
        """A configuration for a given trace ID (tests, synthetic captures)."""
        return cls((trace_id & 0x7F) << 16)


def from_registers(regs: Registers, core: str = "", version: str = "") -> ItmConfig:
    """The ITM configuration from register values: ITMTCR (or CONTROL_REGISTER) is required."""
    del core, version
    return ItmConfig.from_registers(regs)


def with_options(config: ItmConfig, options: DecodeOptions) -> ItmConfig:
    """``config`` with the decode options the reader uses (``decode_before_sync``)."""
    return replace(config, decode_before_sync=options.decode_before_sync)
