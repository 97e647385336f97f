"""The benchmarks' element-only reference (``benchmarks/ocsd_elements.c``) decodes as the lister.

Built with gcc against OpenCSD's C API (``libopencsd-dev``), from a spec that
``bench_elements.py`` writes from a snapshot; judged by ``trc_pkt_lister
-decode_only``: the same number of generic elements for each snapshot.
Skips when gcc, the headers or the lister are missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from benchmarks.bench_elements import build_harness, harness_spec


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("trc_pkt_lister") is None:
        pytest.skip("trc_pkt_lister not installed (libopencsd-bin)")
    built, why = build_harness(tmp_path_factory.mktemp("harness"))
    if built is None:
        pytest.skip(f"element-only harness not built: {why}")
    return built


@pytest.mark.parametrize("name", ["TC2", "Snowball", "stm_only", "juno_r1_1"])
def test_harness_counts_the_listers_elements(
    corpus: Path, harness: Path, tmp_path: Path, name: str
) -> None:
    snapshot = corpus / "snapshots" / name
    spec, _ = harness_spec(snapshot, tmp_path)
    got = subprocess.run([str(harness), str(spec)], capture_output=True, text=True, check=True)
    count = int(got.stdout.split()[-1])
    listing = subprocess.run(
        [
            "trc_pkt_lister",
            "-ss_dir",
            str(snapshot),
            "-decode_only",
            "-no_time_print",
            "-logstdout",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert count > 1000
    assert count == listing.count("OCSD_GEN_TRC_ELEM")
