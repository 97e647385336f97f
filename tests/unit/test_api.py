"""The short API: open a trace and iterate its elements."""

from __future__ import annotations

from pathlib import Path

import cstrace
from tests.conftest import ROOT


def test_iter_elements_on_the_example() -> None:
    pairs = list(cstrace.iter_elements(ROOT / "examples" / "etm_demo"))
    ids = {tid for tid, _ in pairs}
    assert ids == {0x10, 0x20}
    ranges = [e for tid, e in pairs if isinstance(e, cstrace.InstrRange)]
    assert ranges and all(r.end > r.start for r in ranges)
    assert sum(isinstance(e, cstrace.EoTrace) for _, e in pairs) == 2


def test_open_trace_and_buffers_argument(tmp_path: Path) -> None:
    snap = cstrace.open_trace(ROOT / "examples" / "stm_demo")
    names = [b.name for b in snap.buffers]
    out = list(cstrace.iter_elements(snap, names))
    assert out and all(tid == 0x20 for tid, _ in out)
    payloads = [e.payload for _, e in out if isinstance(e, cstrace.SWTrace) and e.channel == 1]
    assert bytes(payloads) == b"boot ok\n"
