"""The loss report on the corpus agrees with the reference decoder's listings.

For each corpus listing (the buffer it names, decoded as ``trc_pkt_lister``
does), the synchronisation, overflow, bad and cut packets the loss report
counts per trace ID must be the packet lines of those kinds in the reference's
listing, at the same offsets (every one: the report is asked to keep them all).
The reference lists them; it does not count them, so this checks the counting
against an independent source.

One known difference: in ``a55-test-tpiu`` the capture's framing stops inside
a second bad packet (offset 509), which cstrace's reader reports and the
reference's listing shows no line for.
"""

from __future__ import annotations

import lzma
import re
from collections import defaultdict
from pathlib import Path

import pytest

import cstrace
from cstrace.analyses import LossCounter
from tests.conftest import corpus_dir
from tests.golden.corpus import using_buffer
from tests.marks import corpus_params

KINDS = {
    "sync": ("I_ASYNC", "ASYNC", "A_SYNC", "ITM_ASYNC"),
    "overflow": ("I_OVERFLOW", "ITM_OVERFLOW"),
    "bad": ("I_RESERVED", "I_RESERVED_CFG", "I_BAD_SEQUENCE", "I_BAD_TRACEMODE", "BAD_SEQUENCE"),
    "truncated": ("I_INCOMPLETE_EOT", "INCOMPLETE_EOT"),
}
KIND_OF = {mnemonic: kind for kind, names in KINDS.items() for mnemonic in names}
KIND_OF["RESERVED"] = "bad"
PACKET_LINE = re.compile(r"Idx:(\d+); ID:([0-9a-f]+); \[[^\]]*\];\s*([A-Z_0-9]+)")
KNOWN = {("a55-test-tpiu", 0x1, "bad"): [509]}
"""Offsets cstrace reports that the reference's listing has no line for."""

_CORPUS = corpus_dir()
NAMES = (
    sorted(
        p.name.split(".ppl")[0]
        for p in (_CORPUS / "expected").glob("*.ppl.xz")
        if "@" not in p.name
    )
    if _CORPUS is not None
    else ["<corpus absent>"]
)


def reference(expected: Path) -> dict[int, dict[str, list[int]]]:
    """Offsets of the packet lines of each kind, per packet ID, in a reference listing."""
    out: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    text = lzma.decompress(expected.read_bytes()).decode("latin-1")
    for m in PACKET_LINE.finditer(text):
        kind = KIND_OF.get(m.group(3))
        if kind is not None:
            out[int(m.group(2), 16)][kind].append(int(m.group(1)))
    return out


@pytest.mark.parametrize("name", corpus_params(NAMES))
def test_loss_report_matches_the_reference_listing(corpus: Path, name: str) -> None:
    expected = corpus / "expected" / f"{name}.ppl.xz"
    want = reference(expected)
    trace = cstrace.open_trace(corpus / "snapshots" / name)
    counter = LossCounter(limit=1 << 30)
    packet_ids = {}
    for run in cstrace.Session(trace).open_buffer(trace.buffer(using_buffer(expected))).runs:
        packet_ids[run.source.name] = run.packet_id
        for _ in counter.watch(run).elements():
            pass
    report = counter.report()
    assert report.sources
    for loss in report.sources:
        pid = packet_ids[loss.source]
        got = {
            "sync": loss.syncs.offsets,
            # overflows told by elements (TRACE_ON) have no packet of their own
            "overflow": [o.offset for o in loss.overflows.first if o.what != "TRACE_ON"],
            "bad": loss.bad_packets.offsets,
            "truncated": loss.truncated.offsets,
        }
        for kind, offsets in got.items():
            extra = KNOWN.get((name, pid, kind), [])
            assert sorted(offsets) == sorted(want[pid][kind] + extra), (loss.source, kind)
        assert loss.stopped_at is None, loss.source
