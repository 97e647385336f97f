"""PTM (Program Flow Trace, PFT 1.0/1.1): configuration, packet reader and decoder.

Input: a PTM trace source and the bytes of its trace ID; output:
PTM packets (:mod:`.packets`) and the generic elements of :mod:`cstrace.elements`.
Reference: ARM IHI 0035B, Program Flow Trace Architecture Specification.
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec, idle_period
from cstrace.protocols.ptm import packets as _p
from cstrace.protocols.ptm.config import PtmConfig, from_registers
from cstrace.protocols.ptm.cut import CUTS
from cstrace.protocols.ptm.decoder import iter_elements, iter_rows
from cstrace.protocols.ptm.reader import iter_packets, iter_stream_rows

__all__ = ["PROTOCOL", "PtmConfig", "from_registers", "iter_elements", "iter_packets"]

PROTOCOL = ProtocolSpec(
    name="ptm",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    iter_rows=iter_rows,
    iter_stream_rows=iter_stream_rows,
    uses_memory=True,
    idle_zeros=idle_period(176),
    cuts=CUTS,
    aliases=("pft",),
    raw_source_type="PTM1.1",
    loss_packets=(
        (_p.NotSync, "unsynced", ""),
        (_p.ASync, "sync", ""),
        (_p.Reserved, "bad", "RESERVED"),
        (_p.BadSequence, "bad", "BAD_SEQUENCE"),
        (_p.IncompleteEOT, "truncated", "INCOMPLETE_EOT"),
    ),
    reference_decoder="DCD_PTM",
)
