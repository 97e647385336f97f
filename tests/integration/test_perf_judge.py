"""Linux perf as a judge: ``perf script`` decodes the recordings, and cstrace must agree.

Debian's ``linux-perf`` decodes cs_etm AUX data with OpenCSD. For each
recording, the instruction sequence perf synthesises (``perf script
--itrace=i1i -F ip``: one sample per executed instruction) must be the
addresses of the instructions cstrace decodes, in the same order, and perf's
taken-branch samples (``--itrace=b -F ip,addr,flags``: from, to and the kind
of branch, trace starts and ends included) must be what
:class:`cstrace.analyses.profile.PerfBranches` makes of cstrace's elements.

The recordings: the two real ones of ``../shared/perfdata`` that perf can
decode (``perf_etm.data`` and ``perf_with_unformatted_trace.data``;
``perf_kernel.data`` needs the kernel's image, which is not given, and
``perf_with_missing_aux_data.data`` holds no trace), and recordings written by
``tests/perfdata_writer.py`` from corpus snapshots. simpleperf writes its
AUXTRACE index without the entry count perf 6.x reads first ("Failed to process
auxtrace index"): each real recording is given to perf as a copy, in
``tmp_path``, whose index is rewritten with the count (and to cstrace as it is).
The snapshots are written without ``PERF_SAMPLE_TIME`` and with the traced
thread in each AUXTRACE record (``timeless``): with times, perf decodes nothing
before a trace's first timestamp, and most corpus traces have none. They are
single-source ETE traces: perf decodes all the trace IDs of one AUX area in one
queue without times, so a multi-source buffer would interleave differently;
the ETMv4, PTM and ETMv3 snapshots either trace kernel addresses perf looks up
in the kernel's maps or do not decode the same in perf 6.1's OpenCSD 1.3.3.

perf runs hermetically: ``HOME``, ``PERF_BUILDID_DIR`` and ``XDG_*`` point at
empty folders of ``tmp_path``, ``PERF_CONFIG`` at an empty file, no debuginfod,
and the programs are given with ``--symfs``. Skipped when perf is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import cstrace
from cstrace.analyses.instructions import Executed, iter_executed
from cstrace.analyses.profile import PerfBranches
from cstrace.inputs import read_snapshot
from tests.perfdata_writer import write_perf_data

PERF = shutil.which("perf")
pytestmark = pytest.mark.skipif(
    PERF is None, reason="perf not installed (Debian: linux-perf): no judge for the decode"
)

REAL = ("perf_etm.data", "perf_with_unformatted_trace.data")
APP = "data/local/tmp/etm_test_loop"
# Single-source ETE snapshots perf decodes (the module docstring says why these).
SNAPSHOTS = (
    "s_9001",
    "ete-wfet",
    "ete_spec_1",
    "ete_spec_2",
    "ss_ib_el1ns",
    "tme_simple",
    "maxspec0_commopt1",
)
_BRANCH = re.compile(r"^\s*(.*?)\s+([0-9a-f]+) =>\s+([0-9a-f]+)\s*$")
_FEAT_AUXTRACE = 18


def perf_env(tmp_path: Path) -> dict[str, str]:
    """An environment in which perf reads nothing of the user's: empty home, build-ID cache
    and XDG folders, an empty configuration, no debuginfod."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "PERF_"))}
    home = tmp_path / "perf-home"
    for sub in ("", "buildid", "config", "cache", "data"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    (home / "perfconfig").write_text("")
    env.update(
        HOME=str(home),
        PERF_BUILDID_DIR=str(home / "buildid"),
        PERF_CONFIG=str(home / "perfconfig"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_DATA_HOME=str(home / "data"),
        DEBUGINFOD_URLS="",
    )
    return env


def with_counted_index(src: Path, dst: Path) -> Path:
    """A copy of ``src`` at ``dst`` whose AUXTRACE index (feature 18) starts with its entry
    count, as perf writes it: simpleperf writes the (offset, size) pairs alone. The new
    index goes at the end of the copy and the feature table points at it."""
    data = bytearray(src.read_bytes())
    data_offset, data_size = struct.unpack_from("<QQ", data, 40)
    bits = int.from_bytes(data[72:104], "little")
    present = [b for b in range(256) if bits >> b & 1]
    entry = data_offset + data_size + 16 * present.index(_FEAT_AUXTRACE)
    offset, size = struct.unpack_from("<QQ", data, entry)
    words = struct.unpack_from(f"<{size // 8}Q", data, offset)
    if len(words) % 2 == 0:  # no count yet
        index = struct.pack(f"<{1 + len(words)}Q", len(words) // 2, *words)
        struct.pack_into("<QQ", data, entry, len(data), len(index))
        data += index
    dst.write_bytes(bytes(data))
    return dst


def perf_script(recording: Path, symfs: Path, env: dict[str, str], *args: str) -> str:
    assert PERF is not None
    done = subprocess.run(
        [PERF, "script", "-i", str(recording), "--symfs", str(symfs), *args],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def perf_view(
    recording: Path, symfs: Path, env: dict[str, str]
) -> tuple[list[int], list[tuple[str, int, int]]]:
    """perf's instruction sequence and taken branches (flags words one space apart)."""
    instructions = [
        int(x, 16) for x in perf_script(recording, symfs, env, "--itrace=i1i", "-F", "ip").split()
    ]
    branches = []
    for line in perf_script(
        recording, symfs, env, "--itrace=b", "-F", "ip,addr,flags"
    ).splitlines():
        m = _BRANCH.match(line)
        if m:
            branches.append(
                (" ".join(m.group(1).split()), int(m.group(2), 16), int(m.group(3), 16))
            )
    return instructions, branches


def cstrace_view(recording: Path, symdir: Path) -> tuple[list[int], list[tuple[str, int, int]]]:
    """cstrace's instruction sequence and the branch samples perf would make of its decode."""
    trace = cstrace.open_trace(recording, symdirs=[symdir])
    instructions = [s.address for s in iter_executed(trace) if isinstance(s, Executed)]
    session = cstrace.Session(trace)
    per_source: dict[int, PerfBranches] = {}
    branches = []
    for buffer in trace.buffers:
        for run in session.open_buffer(buffer).runs:
            pid = buffer.context.pid if buffer.context is not None else None
            memory = session.memories.for_source(run.source, buffer.time, pid)
            read: Callable[[int, int], bytes] = lambda a, n, m=memory: bytes(m.read(a, n))  # noqa: E731
            sampler = per_source.setdefault(run.trace_id, PerfBranches(run.source.protocol))
            branches += [(b.name, b.ip, b.addr) for b in sampler.samples(run.elements(), read)]
    return instructions, branches


def agree(recording: Path, perf_copy: Path, symfs: Path, symdir: Path, env: dict[str, str]) -> None:
    p_instr, p_branches = perf_view(perf_copy, symfs, env)
    c_instr, c_branches = cstrace_view(recording, symdir)
    assert p_instr, "perf decoded nothing: the judge has nothing to say"
    assert len(c_instr) == len(p_instr) and c_instr == p_instr
    assert len(c_branches) == len(p_branches)
    for k, (c, p) in enumerate(zip(c_branches, p_branches, strict=True)):
        assert c == p, f"branch sample {k}: cstrace {c}, perf {p}"


@pytest.mark.parametrize("name", REAL)
def test_perf_agrees_on_the_real_recordings(perfdata: Path, tmp_path: Path, name: str) -> None:
    env = perf_env(tmp_path)
    symfs = tmp_path / "symfs"
    (symfs / APP).parent.mkdir(parents=True)
    shutil.copy(perfdata / "etm_test_loop", symfs / APP)
    copy = with_counted_index(perfdata / name, tmp_path / name)
    agree(perfdata / name, copy, symfs, perfdata, env)


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_perf_agrees_on_recordings_written_from_snapshots(
    corpus: Path, tmp_path: Path, name: str
) -> None:
    snap = corpus / "snapshots" / name
    trace = read_snapshot(snap)
    recording = tmp_path / f"{name}.data"
    write_perf_data(trace, recording, pid=1000, timeless=True)
    # The writer names each dump relative to the folder holding them all: perf's root.
    root = Path(os.path.commonpath([os.path.dirname(d.file.name) for d in trace.dumps]))
    agree(recording, recording, root, snap, perf_env(tmp_path))


@pytest.mark.parametrize("name", REAL)
def test_perf_script_text_is_perfs_own(perfdata: Path, tmp_path: Path, name: str) -> None:
    """``cstrace profile --format perf-script`` prints the samples of ``perf script
    --itrace=i100il -F ip,brstack`` character for character (after its MMAP2 lines)."""
    import subprocess as sp
    import sys

    env = perf_env(tmp_path)
    symfs = tmp_path / "symfs"
    (symfs / APP).parent.mkdir(parents=True)
    shutil.copy(perfdata / "etm_test_loop", symfs / APP)
    copy = with_counted_index(perfdata / name, tmp_path / name)
    theirs = perf_script(copy, symfs, env, "--itrace=i100il", "-F", "ip,brstack").splitlines()
    done = sp.run(
        [sys.executable, "-m", "cstrace.cli", "profile", str(perfdata / name), "--symdir",
         str(perfdata), "--format", "perf-script", "--period", "100"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    mmaps = [ln for ln in lines if ln.startswith(" PERF_RECORD_MMAP2 ")]
    assert any(ln.endswith(f" r-xp /{APP}") for ln in mmaps), mmaps
    ours = lines[len(mmaps) :]
    assert len(theirs) > 5 and ours == theirs
