"""ETE (Embedded Trace Extension, Armv9) instruction trace.

Input: an ETE trace source (``ETE`` source type, registers as
ETMv4 plus ``TRCDEVARCH``) and the bytes of its trace ID; output: ETMv4/ETE
packets (:mod:`cstrace.protocols.etmv4.packets`) and generic elements.

ETE is ETMv4 with extensions (Arm ARM chapter D5): the ETMv4 reader and
decoder handle both, switched by the configuration's major version (5 for
ETE), so this package only provides the ETE configuration.
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec, idle_period
from cstrace.protocols.etmv4 import PROTOCOL as _ETMV4
from cstrace.protocols.etmv4.config import Etmv4Config, ete_from_registers
from cstrace.protocols.etmv4.reader import iter_packets

__all__ = ["PROTOCOL", "Etmv4Config", "ete_from_registers", "iter_packets"]

PROTOCOL = ProtocolSpec(
    name="ete",
    from_registers=ete_from_registers,
    iter_packets=iter_packets,
    iter_elements=_ETMV4.iter_elements,
    uses_memory=True,
    iter_rows=_ETMV4.iter_rows,
    iter_row_packets=_ETMV4.iter_row_packets,
    iter_stream_rows=_ETMV4.iter_stream_rows,
    idle_zeros=idle_period(12),
    cuts=_ETMV4.cuts,
    raw_source_type="ETE",
    loss_packets=_ETMV4.loss_packets,
    overflow_packets=True,
    reference_decoder="DCD_ETMV4",
)
