"""Analyses of a decode: what can be said about a trace beyond its elements.

Input: the runs of a :class:`~cstrace.decode.Session`; output: typed results
(dataclasses with a ``to_dict()`` for JSON). Nothing here prints: text is made
by :mod:`cstrace.render`.

- :mod:`cstrace.analyses.loss`: what the trace lost, per trace ID (bytes,
  packets and elements, synchronisation points, overflows, bad packets,
  resynchronisations, timestamps, code addresses no image covered).
"""

from __future__ import annotations

from cstrace.analyses.loss import (
    AddressRange,
    LossCounter,
    LossReport,
    NotDecoded,
    Occurrence,
    Occurrences,
    SourceLoss,
    loss_report,
)

__all__ = [
    "AddressRange",
    "LossCounter",
    "LossReport",
    "NotDecoded",
    "Occurrence",
    "Occurrences",
    "SourceLoss",
    "loss_report",
]
