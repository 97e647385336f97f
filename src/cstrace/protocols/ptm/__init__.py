"""PTM (Program Flow Trace, PFT 1.0/1.1): configuration, packet reader and decoder.

Input: a PTM trace source and the bytes of its trace ID; output:
PTM packets (:mod:`.packets`) and the generic elements of :mod:`cstrace.elements`.
Reference: ARM IHI 0035B, Program Flow Trace Architecture Specification.
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec, idle_period
from cstrace.protocols.ptm.config import PtmConfig, from_registers
from cstrace.protocols.ptm.decoder import iter_elements
from cstrace.protocols.ptm.reader import iter_packets

__all__ = ["PROTOCOL", "PtmConfig", "from_registers", "iter_elements", "iter_packets"]

PROTOCOL = ProtocolSpec(
    name="ptm",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    uses_memory=True,
    idle_zeros=idle_period(176),
)
