"""ETMv1 (ETMv1.0-1.3) trace-port decoding: configuration, cycle reader, decoder and encoder.

Input: an ETMv1 trace source of a snapshot (type ``ETM1.x``, register ETMCR) and
a trace-port capture (:mod:`cstrace.capture.etmport`); output: pipeline-status
packets (:mod:`.packets`) and the generic elements of :mod:`cstrace.elements`.
References: ARM IHI 0014Q chapter 5 "ETMv1 Signal Protocol", and the thesis
``seeds/004`` §8 (with its LPC3180 example). :mod:`.encoder` is the inverse: it
turns an executed instruction sequence into the cycles an ETMv1 would output.
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec
from cstrace.protocols.etmv1.config import ClassicEtmConfig, from_registers
from cstrace.protocols.etmv1.decoder import iter_elements
from cstrace.protocols.etmv1.reader import iter_packets

__all__ = ["PROTOCOL", "ClassicEtmConfig", "from_registers", "iter_elements", "iter_packets"]

PROTOCOL = ProtocolSpec(
    name="etmv1",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    uses_memory=True,
    option_registers=(("etmcr", "ETMCR"),),
)
