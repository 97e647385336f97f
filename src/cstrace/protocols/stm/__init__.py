"""STM (System Trace Macrocell) software trace: STPv2 packets and SWTRACE elements.

Input: one STM trace ID's bytes; output: STM packets
(:mod:`~cstrace.protocols.stm.packets`) and ``SWTRACE`` elements. The
configuration comes from the ``STMTCSR`` register (trace ID in bits [22:16]).
:mod:`~cstrace.protocols.stm.encoder` writes STM streams (tests, examples).
"""

from __future__ import annotations

from typing import Any

from cstrace.capture.stream import Stream
from cstrace.protocols.base import ProtocolSpec
from cstrace.protocols.stm import packets as _p
from cstrace.protocols.stm.config import StmConfig, from_registers, with_options
from cstrace.protocols.stm.decoder import iter_elements
from cstrace.protocols.stm.reader import iter_packets, iter_stream_rows

__all__ = [
    "PROTOCOL",
    "StmConfig",
    "from_registers",
    "iter_elements",
    "iter_packets",
    "with_options",
]


def _idle_zeros(stream: Stream, config: Any) -> int:
    """Long runs of zeros (NULL packets) may be shortened when packets before the first
    ASYNC are decoded; the reference's search for it (``--before-sync wait``) reports
    where it began from the blocks it was handed, which the runs' length changes."""
    return 1 if getattr(config, "decode_before_sync", False) else 0


PROTOCOL = ProtocolSpec(
    name="stm",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    iter_stream_rows=iter_stream_rows,
    with_options=with_options,
    idle_zeros=_idle_zeros,
    software_trace=True,
    raw_source_type="STM",
    loss_packets=(
        (_p.NotSync, "unsynced", ""),
        (_p.Unsynced, "unsynced", ""),
        (_p.Async, "sync", ""),
        (_p.MErr, "overflow", "MERR"),
        (_p.GErr, "overflow", "GERR"),
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
