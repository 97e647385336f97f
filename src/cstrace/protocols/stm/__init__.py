"""STM (System Trace Macrocell) software trace: STPv2 packets and SWTRACE elements.

Input: one STM trace ID's bytes; output: STM packets
(:mod:`~cstrace.protocols.stm.packets`) and ``SWTRACE`` elements. The
configuration comes from the ``STMTCSR`` register (trace ID in bits [22:16]).
:mod:`~cstrace.protocols.stm.encoder` writes STM streams (tests, examples).
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec
from cstrace.protocols.stm.config import StmConfig, from_registers, with_options
from cstrace.protocols.stm.decoder import iter_elements
from cstrace.protocols.stm.reader import iter_packets

__all__ = [
    "PROTOCOL",
    "StmConfig",
    "from_registers",
    "iter_elements",
    "iter_packets",
    "with_options",
]

PROTOCOL = ProtocolSpec(
    name="stm",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    with_options=with_options,
)
