"""ITM (Instrumentation Trace Macrocell) software and hardware source trace.

Input: one ITM trace ID's bytes; output: ITM packets
(:mod:`~cstrace.protocols.itm.packets`) and ``ITMTRACE`` elements. The
configuration comes from the ITM trace control register (``ITMTCR``, or
``CONTROL_REGISTER``): trace ID in bits [22:16], local timestamp prescaler.
:mod:`~cstrace.protocols.itm.encoder` writes ITM streams (tests, examples).
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec, idle_period
from cstrace.protocols.itm import packets as _p
from cstrace.protocols.itm.config import ItmConfig, from_registers, with_options
from cstrace.protocols.itm.decoder import iter_elements
from cstrace.protocols.itm.reader import iter_packets, iter_stream_rows

__all__ = [
    "PROTOCOL",
    "ItmConfig",
    "from_registers",
    "iter_elements",
    "iter_packets",
    "with_options",
]

PROTOCOL = ProtocolSpec(
    name="itm",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    iter_stream_rows=iter_stream_rows,
    with_options=with_options,
    idle_zeros=idle_period(8),
    software_trace=True,
    raw_source_type="ITM",
    loss_packets=(
        (_p.NotSync, "unsynced", ""),
        (_p.Unsynced, "unsynced", ""),
        (_p.Async, "sync", ""),
        (_p.Overflow, "overflow", "OVERFLOW"),
        (_p.Reserved, "bad", "RESERVED"),
        (_p.BadSequence, "bad", "BAD_SEQUENCE"),
        (_p.IncompleteEot, "truncated", "INCOMPLETE_EOT"),
    ),
    overflow_packets=True,
    reader_stops=(
        (_p.Reserved, "reserved header"),
        (_p.BadSequence, "bad packet sequence"),
    ),
)
