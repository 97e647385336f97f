"""Profiles of the real simpleperf recordings in ``../shared/perfdata`` against simpleperf's own.

``perf_inject.data`` is what ``simpleperf inject --output autofdo`` printed for
both recordings. The recordings are opened by cstrace's perf.data reader, with
the traced binary found by build ID in the recordings' folder, through the API
and through ``cstrace profile``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import cstrace
from cstrace.analyses.profile import profile_trace
from cstrace.render.profiles import autofdo_lines, bolt_lines, profgen_lines

RECORDINGS = ("perf_etm.data", "perf_with_unformatted_trace.data")


def trace(path: Path) -> cstrace.Trace:
    """The recording at ``path``, its binary found in the recordings' folder."""
    return cstrace.open_trace(path, symdirs=[path.parent])


@pytest.mark.parametrize("name", RECORDINGS)
def test_autofdo_text_is_simpleperfs_for_the_real_recordings(perfdata: Path, name: str) -> None:
    profile = profile_trace(trace(perfdata / name))
    text = "\n".join(autofdo_lines(profile)) + "\n"
    assert text == (perfdata / "perf_inject.data").read_text()


def test_perf_view_of_the_real_recording(perfdata: Path) -> None:
    profile = profile_trace(trace(perfdata / "perf_etm.data"))
    bolt = list(bolt_lines(profile))
    # f1's loop: the tbnz at 0x106c taken 100 times, the b at 0x1080 back 100 times;
    # perf follows the ret at 0x1088 back into main (simpleperf writes it as ->0)
    assert {"B 106c 1074 100 0", "B 1080 105c 100 0", "B 1088 10a4 1 0"} <= set(bolt)
    assert "F 105c 1070 1" in bolt  # the last pass runs through the not-taken tbnz
    profgen = list(profgen_lines(profile))
    assert "80->5c:100" in profgen  # counted from the text page at 0x1000


@pytest.mark.parametrize("name", RECORDINGS)
def test_cstrace_profile_of_perf_data_prints_simpleperfs_lines(perfdata: Path, name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "profile", str(perfdata / name),
         "--format", "autofdo", "--symdir", str(perfdata)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    want = (perfdata / "perf_inject.data").read_text().splitlines()
    got = done.stdout.splitlines()
    assert [ln for ln in got if not ln.startswith("//")] == [
        ln for ln in want if not ln.startswith("//")
    ]
    assert "// build_id: 0x0c9a20bf9c009d0e4e8bbf9fad0300ae00000000" in got


def test_perf2bolt_takes_the_bolt_profile_of_the_real_recording(
    perfdata: Path, tmp_path: Path
) -> None:
    """The recording's binary is stripped: perf2bolt needs --allow-stripped, and finds its
    functions from the unwind tables; llvm-profgen and create_llvm_prof need symbols and
    DWARF, which this binary lacks (their judge tests use a program built here)."""
    import shutil

    tool = "/usr/lib/llvm-19/bin/perf2bolt"
    if not Path(tool).exists() and shutil.which("perf2bolt") is None:
        pytest.skip("perf2bolt not installed (Debian: bolt-19)")
    tool = tool if Path(tool).exists() else str(shutil.which("perf2bolt"))
    made = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "profile", str(perfdata / "perf_etm.data"),
         "--format", "bolt", "--symdir", str(perfdata), "-o", str(tmp_path / "p.txt")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = subprocess.run(
        [tool, str(perfdata / "etm_test_loop"), "-pa", "-p", str(tmp_path / "p.txt"),
         "-o", str(tmp_path / "out.fdata"), "--allow-stripped"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    log = done.stdout + done.stderr
    assert "BOLT-ERROR" not in log
    read = int(log.split("read ")[1].split(" aggregated")[0])
    assert read == len((tmp_path / "p.txt").read_text().splitlines()) > 10
    assert (tmp_path / "out.fdata").stat().st_size > 0
