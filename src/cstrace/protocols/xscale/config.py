"""XScale trace buffer configuration: what the decoder needs besides the buffer itself.

Input: a trace source device of type ``XScale`` (optional register ``START_PC``:
the address where tracing started, with bit 0 set for Thumb state, known when
the buffer was used in fill-once mode from a known point); output: an
:class:`XscaleConfig`. The checkpoint registers and the PC at debug entry of
each buffer fill travel with the capture (:mod:`cstrace.protocols.xscale.reader`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cstrace.protocols.base import DecodeOptions
from cstrace.snapshot.model import TraceSource

__all__ = ["XscaleConfig", "configure"]


@dataclass(frozen=True)
class XscaleConfig:
    """The static configuration of one XScale trace buffer."""

    start_pc: int | None = None
    """Where tracing started (bit 0: Thumb), if known."""
    high_vectors: bool = False
    """Exception vectors at 0xFFFF0000 (CP15 control register V bit)."""

    @property
    def trace_id(self) -> int:
        """XScale trace has no trace ID: 0."""
        return 0


def configure(source: TraceSource, options: DecodeOptions) -> XscaleConfig:
    """The configuration of an XScale trace source from its registers (or options)."""
    dev = source.device
    start = options.extra.get("start_pc", dev.reg("START_PC"))
    hv = options.extra.get("high_vectors", dev.reg("HIGH_VECTORS", 0))
    return XscaleConfig(None if start is None else int(start), bool(hv))
