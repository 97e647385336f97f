"""ETMv4 instruction trace: configuration, packet reader and program-flow decoder.

Input: an ETMv4 trace source (``ETM4`` source type) and the
bytes of its trace ID; output: :mod:`cstrace.protocols.etmv4.packets` and the
generic elements of :mod:`cstrace.elements`. ``PROTOCOL`` is the
:class:`~cstrace.protocols.base.ProtocolSpec` the pipeline uses. ETE
(:mod:`cstrace.protocols.ete`) shares the reader and decoder, switched by the
configuration's version.

Spec: Arm Embedded Trace Macrocell Architecture Specification ETMv4 (IHI0064).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.capture.stream import Stream
from cstrace.elements import Element, EoTrace, NoSync, UnsyncReason
from cstrace.protocols.base import (
    DecodeContext,
    LossCategory,
    Packet,
    ProtocolSpec,
    idle_period,
)
from cstrace.protocols.etmv4 import packets as _p
from cstrace.protocols.etmv4.config import Etmv4Config, from_registers
from cstrace.protocols.etmv4.cut import CUTS
from cstrace.protocols.etmv4.reader import iter_packets

__all__ = ["PROTOCOL", "Etmv4Config", "from_registers", "iter_packets"]


def _no_decoder(
    packets: Iterable[Packet], config: Etmv4Config, context: DecodeContext
) -> Iterator[Element]:
    """Stand-in while the program-flow decoder is not available: no sync, then end of trace."""
    del config
    last = 0
    first = True
    for pkt in packets:
        if first:
            reason = UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER
            yield NoSync(pkt.offset, reason)
            first = False
        last = pkt.offset
    if context.complete:
        yield EoTrace(last)


try:
    from cstrace.protocols.etmv4.decoder import iter_elements, iter_rows, iter_stream_rows
except ImportError:  # pragma: no cover - the decoder module is written separately
    iter_elements = _no_decoder
    iter_rows = None  # type: ignore[assignment]
    iter_stream_rows = None  # type: ignore[assignment]


def iter_row_packets(
    stream: Stream, config: Etmv4Config, complete: bool = True
) -> Iterator[Packet]:
    """The packets of ``stream`` with atom packets in a row grouped, for the element rows."""
    return iter_packets(stream, config, complete, group_atoms=True)


LOSS_PACKETS: tuple[tuple[type, LossCategory, str], ...] = (
    (_p.NotSync, "unsynced", ""),
    (_p.Async, "sync", ""),
    (_p.Overflow, "overflow", "OVERFLOW"),
    (_p.BadPacket, "bad_kind", ""),
    (_p.AtomRun, "grouped", ""),
)
"""The packets the loss report counts (ETE's too)."""

PROTOCOL = ProtocolSpec(
    name="etmv4",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    uses_memory=True,
    iter_rows=iter_rows,
    iter_row_packets=iter_row_packets if iter_rows is not None else None,
    iter_stream_rows=iter_stream_rows,
    idle_zeros=idle_period(12),
    cuts=CUTS,
    aliases=("etm4",),
    raw_source_type="ETM4",
    loss_packets=LOSS_PACKETS,
    overflow_packets=True,
    reference_decoder="DCD_ETMV4",
)
