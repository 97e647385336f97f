"""The short API: open a trace and iterate its elements."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def _etm_demo_raw() -> cstrace.Snapshot:
    demo = ROOT / "examples" / "etm_demo"
    return cstrace.open_trace(
        demo / "etb_0.bin",
        memory=[f"{demo / 'user.bin'}@0x400000", f"{demo / 'kernel.bin'}@0xffffffc000080400"],
        cores=["Cortex-A53"],
        settings=[
            "0x10:cyclecount=0",
            "0x10:context_id=32",
            "0x10:vmid=0",
            "0x10:timestamp_bits=64",
            "0x10:return_stack=0",
            "0x10:conditional=none",
            "0x10:commit_opt=0",
        ],
    )


def test_raw_capture_decodes_like_its_snapshot() -> None:
    snapshot = list(cstrace.iter_elements(ROOT / "examples" / "etm_demo"))
    raw = list(cstrace.iter_elements(_etm_demo_raw()))
    for tid in (0x10, 0x20):
        want = [repr(e) for t, e in snapshot if t == tid]
        assert want and [repr(e) for t, e in raw if t == tid] == want


def test_raw_capture_options() -> None:
    # Leaving a source out decodes the others; a missing setting names what is missing.
    demo = ROOT / "examples" / "etm_demo"
    only_stm = list(
        cstrace.iter_elements(cstrace.open_trace(demo / "etb_0.bin", protocols=["0x10=none"]))
    )
    assert only_stm and {tid for tid, _ in only_stm} == {0x20}
    # Settings nobody gave are inferred from the trace, and the trace says how.
    trace = cstrace.open_trace(demo / "etb_0.bin")
    assert [i.trace_id for i in trace.inferred] == [0x10]
    assert "cyclecount" in trace.inferred[0].settings
    # Options that describe a raw capture do not apply to a snapshot.
    with pytest.raises(cstrace.SnapshotError, match="raw capture"):
        cstrace.open_trace(demo, protocols=["stm"])
