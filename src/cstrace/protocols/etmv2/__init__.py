"""ETMv2 (ETMv2.x) trace-port decoding: cycle reader with FIFO packet framing, decoder, encoder.

Input: an ETMv2 trace source of a snapshot (type ``ETM2.x``, register ETMCR)
and a trace-port capture (:mod:`cstrace.capture.etmport`, 4-bit PIPESTAT);
output: cycles with the FIFO packets they placed (:mod:`.packets`) and the
generic elements of :mod:`cstrace.elements`. References: ARM IHI 0014Q chapter
6 and ``seeds/002`` (trace FIFO offsets). The configuration is that of ETMv1
(:mod:`cstrace.protocols.etmv1.config`).
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec
from cstrace.protocols.etmv1.config import ClassicEtmConfig, from_registers
from cstrace.protocols.etmv2.decoder import iter_elements
from cstrace.protocols.etmv2.reader import iter_packets

__all__ = ["PROTOCOL", "ClassicEtmConfig", "from_registers", "iter_elements", "iter_packets"]

PROTOCOL = ProtocolSpec(
    name="etmv2",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    uses_memory=True,
    option_registers=(("etmcr", "ETMCR"),),
)
