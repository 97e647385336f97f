"""ETMv3 (ETM architecture v3.0-v3.5) instruction trace: configuration, packets, decoder.

Input: the trace bytes of one ETMv3 trace source (ARM IHI 0014Q, "Embedded Trace
Macrocell Architecture Specification", chapter 7 "ETMv3 Signal Protocol") and
its registers; output: packets (:mod:`.packets`) and generic trace elements.
``PROTOCOL`` is what the decode pipeline uses.
"""

from __future__ import annotations

from typing import Any

from cstrace.capture.stream import Stream
from cstrace.protocols.base import ProtocolSpec
from cstrace.protocols.etmv3 import packets as _p
from cstrace.protocols.etmv3.config import Etmv3Config, from_registers
from cstrace.protocols.etmv3.cut import CUTS
from cstrace.protocols.etmv3.decoder import iter_elements
from cstrace.protocols.etmv3.reader import iter_packets, iter_stream_rows

__all__ = ["PROTOCOL", "Etmv3Config", "from_registers", "iter_elements", "iter_packets"]


def _idle_zeros(stream: Stream, config: Any) -> int:
    """Long runs of zeros may be shortened in formatted captures: unformatted ones are read
    in the reference's 1024-byte blocks, and the index of an end of trace inside such a
    run depends on its length."""
    return 16 if stream.trace_id is not None else 0


PROTOCOL = ProtocolSpec(
    name="etmv3",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    iter_stream_rows=iter_stream_rows,
    uses_memory=True,
    idle_zeros=_idle_zeros,
    aliases=("etm3",),
    raw_source_type="ETM3.5",
    loss_packets=(
        (_p.NotSync, "unsynced", ""),
        (_p.ASync, "sync", ""),
        (_p.Reserved, "bad", "RESERVED"),
        (_p.BadSequence, "bad", "BAD_SEQUENCE"),
        (_p.BadTraceMode, "bad", "BAD_TRACEMODE"),
    ),
    reference_decoder="DCD_ETMV3",
    cuts=CUTS,
)
