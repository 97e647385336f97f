"""The benchmark against OpenCSD 1.8.0 (``benchmarks/bench_elements.py``) runs and prints its table.

A tiny run (one PTM stream of ``Snowball`` tiled twice, ITM
``itm_only_csformat`` tiled 600 times, one round) of the cstrace command
beside this Python against OpenCSD 1.8.0's ``trc_pkt_lister``; checks the
shape of the printed tables and the JSON results, that the tiled capture was
processed whole by the reference and that both decoders counted the same
elements. No timing is asserted. Skips when the 1.8.0 lister
(``$CSTRACE_OPENCSD`` or ``../shared/opencsd-1.8.0``) or the ``cstrace``
command is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_elements.py"


def _opencsd() -> Path:
    for c in (os.environ.get("CSTRACE_OPENCSD"), str(ROOT.parent / "shared" / "opencsd-1.8.0")):
        if c and (Path(c) / "trc_pkt_lister").is_file():
            return Path(c)
    pytest.skip("OpenCSD 1.8.0's trc_pkt_lister not found (CSTRACE_OPENCSD or ../shared)")


def _rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the body rows of the Markdown table under ``heading``."""
    lines = text.split(heading, 1)[1].split("\n\n", 2)[1].splitlines()
    assert lines[1].startswith("|---")
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_bench_prints_the_table(corpus: Path, tmp_path: Path) -> None:
    cstrace = Path(sys.executable).with_name("cstrace")
    if not cstrace.is_file():
        pytest.skip(f"no cstrace command beside {sys.executable}")
    result = tmp_path / "bench.json"
    args = ["--case", "PTM-1", "--case", "ITM", "--scale", "0.002", "--repeat", "1"]
    args += ["--corpus", str(corpus), "--opencsd", str(_opencsd()), "--json", str(result)]
    got = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--work", str(tmp_path / "work")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert got.returncode == 0, got.stderr
    out = got.stdout

    ratios = _rows(out, "## cstrace / OpenCSD 1.8.0")
    assert [(r[0], r[2]) for r in ratios] == [
        ("PTM-1", "elements"),
        ("PTM-1", "listing"),
        ("ITM", "elements"),
        ("ITM", "listing"),
    ]
    for r in ratios:
        assert len(r) == 11
        assert r[1].startswith(("Snowball x2 ", "itm_only_csformat x600 "))
        for cell in r[3:7]:  # min / median seconds
            low, mid = (float(x) for x in cell.split(" / "))
            assert 0 <= low <= mid
        assert float(r[7]) > 0 and float(r[8]) > 0
        assert r[9] == ("<= 0.5" if r[2] == "elements" else "<= 0.8")
        assert r[10] in ("met", "not met")

    jobs = _rows(out, "## --jobs 2 against --jobs 1")
    assert [(r[0], r[1]) for r in jobs] == [("PTM-1", "elements"), ("PTM-1", "listing")]
    for r in jobs:
        assert len(r) == 10
        assert float(r[6]) > 0
        assert r[7] == "yes"  # --jobs 2 wrote what --jobs 1 wrote
        assert r[8] == ">= 1.7"
        assert r[9] in ("met", "not met")

    checks = _rows(out, "## Checks")
    assert [r[0] for r in checks] == ["PTM-1", "ITM"]
    for r in checks:
        size = r[1]
        assert r[2] == f"{size} / {size}"  # the reference processed the whole tiled buffer
        assert r[3] == r[4]  # the same elements on both sides
        # The summary also counts cstrace's own diagnostics (a wait for synchronisation),
        # which no listing shows: never fewer.
        assert int(r[5]) >= int(r[4])
        assert int(r[3]) > 0
    assert "# OpenCSD library version: 1.8.0;" in out

    data = json.loads(result.read_text())
    assert data["repeat"] == 1
    assert [(c["case"], c["times"]) for c in data["results"]] == [("PTM-1", 2), ("ITM", 600)]
    for case in data["results"]:
        for m in case["measures"]:
            assert set(m["cstrace"]) == {"cpu_min", "cpu_median", "wall_min", "wall_median"}
            assert m["met"] == (m["ratio_cpu"] <= m["target"])


@pytest.mark.parametrize("block", [1, 7, 18, 19, 64, 1 << 20])
def test_element_lines_counted_across_blocks(tmp_path: Path, block: int) -> None:
    from benchmarks.bench_elements import _elements_in

    text = "".join(
        f"Idx:{i}; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(x)\nIdx:{i}; ID:10; [0x{i:02x} ];\tP\n"
        for i in range(50)
    )
    path = tmp_path / "listing.ppl"
    path.write_text(text + "OCSD_GEN_TRC_ELEM_OCSD_GEN_TRC_ELEM_")
    assert _elements_in(path, block) == 52
    assert _elements_in(tmp_path / "absent.ppl") is None
