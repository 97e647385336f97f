"""ITM configuration: the trace source registers of a snapshot → :class:`ItmConfig`.

Input: the ITM device of a snapshot: its trace control register, named
``ITMTCR`` in snapshots and ``CONTROL_REGISTER`` in the snapshot format
(0.2 §4.2.4); output: the trace ID (bits [22:16]) and the local timestamp
prescaler (TSPrescale, bits [9:8], applied when SWOENA, bit 4, is set).
"""

from __future__ import annotations

from dataclasses import dataclass

from cstrace.protocols.base import DecodeOptions
from cstrace.snapshot.model import TraceSource

__all__ = ["ItmConfig", "configure"]

_PRESCALE = (1, 4, 16, 64)


@dataclass(frozen=True)
class ItmConfig:
    """Static configuration of one ITM trace source."""

    itmtcr: int = 0
    """The ITM trace control register."""

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
    def from_trace_id(cls, trace_id: int) -> ItmConfig:
        """A configuration for a given trace ID (tests, synthetic captures)."""
        return cls((trace_id & 0x7F) << 16)


def configure(source: TraceSource, options: DecodeOptions) -> ItmConfig:
    """The ITM configuration of a snapshot trace source."""
    device = source.device
    if device.register("ITMTCR") is None and device.register("CONTROL_REGISTER") is not None:
        return ItmConfig(device.require("CONTROL_REGISTER"))
    return ItmConfig(device.require("ITMTCR"))
