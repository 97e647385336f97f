"""Preconditioning and demultiplexing of captured trace bytes.

Input: the raw bytes of one trace buffer and its format name; output: a
:class:`Demux` holding one :class:`Stream` per trace ID (or a single stream for
unformatted, single-source data) and any framing issues found.

Formats (the ``format`` key of a snapshot's ``trace.ini``):

``coresight``
    ETB/ETR memory: whole, aligned 16-byte formatter frames.
``dstream_coresight``
    DSTREAM capture: formatter frames separated by FSYNC patterns.
``tpiu``
    TPIU port capture: FSYNC patterns and HSYNC half-word padding.
``source_data``
    Unformatted data of a single trace source.
``etm_etb``, ``etm_cycles``, ``etm_cycles_text``, ``etm_port``
    Trace-port cycles of a classic ETM (ETMv1/ETMv2): see :mod:`cstrace.capture.etmport`.
``xscale_tb``, ``dcc_words``
    An XScale trace buffer dump and words received over an ARM7/9 debug
    communications channel (decoded by ``cstrace.protocols.xscale`` and ``.dcc``).
"""

from __future__ import annotations

from cstrace.capture.etmport import ETM_FORMATS, CycleStream
from cstrace.capture.formatter import FRAME_SIZE, CaptureIssue, Demux, demux_frames
from cstrace.capture.stream import Stream
from cstrace.errors import CaptureError

__all__ = [
    "FORMATS",
    "FRAME_SIZE",
    "SINGLE_SOURCE_FORMATS",
    "CaptureIssue",
    "Demux",
    "Stream",
    "demux",
    "demux_frames",
]

FORMATS = (
    "coresight",
    "dstream_coresight",
    "tpiu",
    "source_data",
    *ETM_FORMATS,
    "xscale_tb",
    "dcc_words",
)

SINGLE_SOURCE_FORMATS = frozenset(("source_data", *ETM_FORMATS, "xscale_tb", "dcc_words"))
"""Formats that hold the data of one trace source, without trace IDs."""


def demux(
    data: bytes | bytearray | memoryview, fmt: str, *, stop_ids: frozenset[int] = frozenset()
) -> Demux:
    """Split a capture in format ``fmt`` into per-trace-ID streams.

    ``stop_ids``: the trace IDs that have a decoder; a frame that hands one of them an
    empty block ends the capture there, as in the reference decoder.
    """
    match fmt:
        case "coresight":
            return demux_frames(data, stop_ids=stop_ids)
        case "dstream_coresight":
            return demux_frames(data, fsyncs=True, stop_ids=stop_ids)
        case "tpiu":
            return demux_frames(data, fsyncs=True, hsyncs=True, stop_ids=stop_ids)
        case "source_data":
            return Demux({0: Stream(None, bytes(data))})
        case "etm_etb" | "etm_cycles" | "etm_cycles_text" | "etm_port" | "xscale_tb" | "dcc_words":
            return Demux({0: CycleStream(fmt, bytes(data))})
        case _:
            raise CaptureError(
                f"unknown trace buffer format {fmt!r} (expected one of {', '.join(FORMATS)})"
            )
