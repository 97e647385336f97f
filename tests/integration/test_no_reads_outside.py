"""Nothing outside the folders the user named is looked at, checked with ``strace`` (issue 26).

Hostile inputs name files outside their folder (``..``, absolute paths, links
that lead out) where decoys wait: a snapshot's metadata, and a perf.data
recording decoded with ``--symfs`` and ``--buildid-dir``. The command runs
under ``strace -f``; no system call that takes a path may name a decoy, and
``/etc/passwd`` is never touched. Skipped when ``strace`` is not installed or
cannot trace here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.perfgen import ETMV4_MAGIC, PerfWriter, cs_etm_info, etmv4_params
from tests.unit.test_perfdata import APP, BUILD_ID, LOAD, _text_offset, program_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STRACE = shutil.which("strace")
pytestmark = pytest.mark.skipif(STRACE is None, reason="strace is not installed")

_PATH_CALLS = "open,openat,openat2,creat,stat,lstat,newfstatat,statx,access,faccessat,"
_PATH_CALLS += "faccessat2,readlink,readlinkat,execve,chdir"
_NOFOLLOW = frozenset(("lstat", "readlink", "readlinkat"))
_QUOTED = re.compile(r'^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((?:[^"]*?)"((?:[^"\\]|\\.)*)"')


def traced(tmp_path: Path, *argv: str) -> tuple[int, list[tuple[str, str, bool]]]:
    """Run ``cstrace ARGV`` under strace: its exit status and (system call, path, whether a
    link at the end of the path is followed) for each call."""
    log = tmp_path / "strace.log"
    env = {**os.environ, "HOME": str(tmp_path / "home"), "CSTRACE_PURE_WARNED": "1"}
    env.pop("PERF_BUILDID_DIR", None)
    cmd = [STRACE or "strace", "-f", "-qq", "-s", "4096", "-e", f"trace={_PATH_CALLS}"]
    cmd += ["-o", str(log), sys.executable, "-c", "from cstrace.cli import run; run()", *argv]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    if not log.exists() or "ptrace" in done.stderr:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[:200]}")
    assert "Traceback" not in done.stderr, done.stderr
    calls = []
    for line in log.read_text(errors="replace").splitlines():
        m = _QUOTED.match(line)
        if m:
            call = m.group(1)
            follows = "AT_SYMLINK_NOFOLLOW" not in line and call not in _NOFOLLOW
            calls.append((call, m.group(2), follows))
    return done.returncode, calls


def decoys(tmp_path: Path) -> Path:
    """A folder beside the inputs, with files the inputs name."""
    out = tmp_path / "outside"
    out.mkdir()
    for name in ("decoy.bin", "decoy.so", "app"):
        (out / name).write_bytes(APP)
    return out


def touched(calls: list[tuple[str, str, bool]], outside: Path) -> list[tuple[str, str]]:
    """The calls whose path leads to a decoy: as written, without its ``..``, or through a
    link (the kernel follows links the path string does not show; the last one only when
    the call follows it)."""
    bad = [str(outside), str(outside.resolve())]
    out = []
    for call, path, follows in calls:
        head, tail = os.path.split(path)
        real = os.path.realpath(path) if follows else os.path.join(os.path.realpath(head), tail)
        for form in (path, os.path.normpath(path), real):
            if any(form.startswith(b) for b in bad) or form == "/etc/passwd":
                out.append((call, path))
                break
    return out


def test_a_hostile_snapshot_looks_at_nothing_outside(tmp_path: Path) -> None:
    outside = decoys(tmp_path)
    snap = tmp_path / "snap"
    shutil.copytree(EXAMPLES / "etm_demo", snap)
    (snap / "out.bin").symlink_to(outside / "decoy.bin")
    cpu = (snap / "cpu_0.ini").read_text()
    cpu = cpu.replace("file=user.bin", "file=../outside/decoy.bin")
    cpu = cpu.replace("file=kernel.bin", "file=out.bin")
    (snap / "cpu_0.ini").write_text(cpu)
    for dump in ("../outside/decoy.bin", "/etc/passwd", "out.bin", "a/../../outside/decoy.bin"):
        (snap / "cpu_0.ini").write_text(cpu.replace("file=out.bin", f"file={dump}"))
        code, calls = traced(tmp_path, "decode", str(snap), "--format", "null")
        assert code in (0, 2)
        assert touched(calls, outside) == [], dump
        assert any(p.endswith("snap/snapshot.ini") for _, p, _ in calls)  # (strace saw reads)


def test_a_recording_names_nothing_outside_symfs_and_the_build_id_folder(tmp_path: Path) -> None:
    outside = decoys(tmp_path)
    sym = tmp_path / "sym"
    (sym / "lib").mkdir(parents=True)
    (sym / "lib" / "link.so").symlink_to(outside / "decoy.so")
    cache = tmp_path / "cache"
    cache.mkdir()
    names = [
        "/../outside/app",
        "/../../../../../etc/passwd",
        "/lib/link.so",
        "/lib/../../outside/decoy.so",
    ]
    w = PerfWriter()
    w.build_ids = [(-1, BUILD_ID, n) for n in names]
    w.auxtrace_info(
        cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10)), (ETMV4_MAGIC, 1, etmv4_params(0x12))])
    )
    w.comm(100, 100, "app", exec_=True, time=10, cpu=1)
    for k, name in enumerate(names):
        w.mmap2(100, 100, LOAD + k * 0x10000, 0x1000, _text_offset(), name, time=11 + k, cpu=1)
    w.itrace_start(100, 101, time=20, cpu=1)
    data = program_trace(101)
    w.aux(0, len(data), 0x100, pid=100, tid=101, time=21, cpu=1)
    w.auxtrace(data + b"\0" * 8, offset=0, idx=1, tid=-1, cpu=1)
    rec = tmp_path / "rec.data"
    rec.write_bytes(w.build())
    for argv in (
        ["decode", str(rec), "--format", "null", "--symfs", str(sym), "--buildid-dir", str(cache)],
        ["info", str(rec), "--symfs", str(sym), "--buildid-dir", str(cache)],
    ):
        code, calls = traced(tmp_path, *argv)
        assert code in (0, 2)
        assert touched(calls, outside) == []
        assert any(p.startswith(str(sym)) for _, p, _ in calls)  # the search looked in --symfs
