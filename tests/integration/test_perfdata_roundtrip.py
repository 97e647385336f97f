"""A corpus snapshot written as perf.data by the test writer decodes back to its elements.

The writer (``tests/perfdata_writer.py``) turns a snapshot into a CPU-wide
cs_etm recording; ``perf report -D`` must read it without complaint, and
cstrace's perf.data reader must decode it to the snapshot's own elements,
trace ID by trace ID. The snapshot's memory dumps are written as the kernel's
mappings (pid -1), which every traced context sees, as a snapshot's dumps are;
as a user process's they would only be found in that process.

Trace IDs that put no byte in the buffer are not decoded from a recording (perf
does the same: a source is found by its data), and a cs_etm recording holds
no STM or ITM; so the IDs the recording decodes are compared, and they must be
all the snapshot's program-flow IDs that have data. (Snapshots whose dumps
overlap in different memory spaces, such as ``ete_ip``, cannot be written as one
process's maps: perf.data has no memory spaces.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from cstrace.inputs import read_snapshot
from tests.conftest import corpus_dir
from tests.perfdata_writer import write_perf_data

KERNEL_PID = 0xFFFFFFFF
LINE = re.compile(r"^Idx:(\d+); ID:([0-9a-f]+); (OCSD_GEN_TRC_ELEM_.*)$")


def _elements(stdout: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            out[m.group(2)].append(f"{m.group(1)};{m.group(3)}")
    return out


def _cstrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cstrace.cli", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("name", ["Snowball", "s_9001", "juno_r1_1", "TC2", "q_elem"])
def test_snapshot_written_as_perf_data_decodes_back(tmp_path: Path, name: str) -> None:
    corpus = corpus_dir()
    if corpus is None:
        pytest.skip(
            "reference corpus not found: set CSTRACE_CORPUS or place it at ../shared/corpus"
        )
    snap = corpus / "snapshots" / name
    recording = tmp_path / "rec.data"
    trace = read_snapshot(snap)
    write_perf_data(trace, recording, pid=KERNEL_PID)
    # cs_etm recordings carry the program-flow sources only (no STM or ITM).
    flow = {
        f"{r[k] & 0x7F:x}"
        for r in (s.registers for s in trace.sources)
        for k in ("TRCTRACEIDR", "ETMTRACEIDR")
        if k in r
    }
    perf = shutil.which("perf")
    if perf is not None:
        env = dict(os.environ, HOME=str(tmp_path))
        dumped = subprocess.run(
            [perf, "report", "-D", "-i", str(recording), "--force"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if dumped.returncode == 0:
            assert not dumped.stderr.strip(), dumped.stderr
            assert "PERF_RECORD_AUXTRACE_INFO" in dumped.stdout
    back = _cstrace(
        "decode", str(recording), "--format", "ocsd", "--no-summary", "--symdir", str(snap)
    )
    assert back.returncode == 0, back.stderr
    want = _cstrace("decode", str(snap), "--format", "ocsd", "--no-summary")
    got, expected = _elements(back.stdout), _elements(want.stdout)
    with_data = {
        t for t, lines in expected.items() if t in flow and any("EO_TRACE" not in x for x in lines)
    }
    assert with_data <= set(got), (sorted(with_data), sorted(got))
    for tid in got:
        assert got[tid] == expected[tid], f"trace ID {tid}"
