"""XScale trace buffer decoding: configuration, reader, decoder and encoder.

Input: an XScale trace source (type ``XScale``) and ``xscale_tb`` buffer dumps;
output: trace messages (:mod:`.packets`) and the generic elements of
:mod:`cstrace.elements`. Reference: the thesis ``seeds/004`` chapter 7 (the
XScale trace buffer, its message format and OpenOCD's analysis).
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec
from cstrace.protocols.xscale.config import XscaleConfig, from_registers
from cstrace.protocols.xscale.decoder import iter_elements
from cstrace.protocols.xscale.reader import iter_packets

__all__ = ["PROTOCOL", "XscaleConfig", "from_registers", "iter_elements", "iter_packets"]

PROTOCOL = ProtocolSpec(
    name="xscale",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    uses_memory=True,
    option_registers=(("start_pc", "START_PC"),),
)
