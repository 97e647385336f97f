"""Recordings cstrace has not seen: other metadata layouts, kernels with modules, AUX data lost.

Each recording is written with ``tests/perfgen.py`` (records one by one) and
put through ``cstrace info``, ``decode`` and ``profile``: what can be decoded
is, a missing piece is one clear message, the exit status says whether
anything was lost, and nothing prints a traceback. A cut recording (at a few
dozen offsets) gives a one-line error or partial results.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from cstrace.protocols.etmv4 import encoder as e4
from tests.perfgen import AUX_RAW, ETMV4_MAGIC, PerfWriter, cs_etm_info, etmv4_params
from tests.unit.test_perfdata import APP, BUILD_ID, LOAD, _text_offset, run_cli

KERNEL = 0xFFFF_8000_0801_0000
MODULE = 0xFFFF_8000_0100_0000
KERNEL_ID = bytes.fromhex("1eaa285996affce2d74d8e66dcea09a80c9941de")
MODULE_ID = bytes.fromhex("8bbaf5dc62a9b644b4d4e4539737e104e4a84541")
MODULE_PATH = "/lib/modules/6.1.0/kernel/drivers/misc/tracee.ko"


@dataclass
class Run:
    """What a command printed and its exit status (run in this process: an exception that
    escapes the command line's handling fails the test)."""

    returncode: int
    stdout: str
    stderr: str


def _cstrace(*args: str) -> Run:
    return Run(*run_cli(*args))


def _trace(*, kernel: bool) -> bytes:
    """ETMv4 trace of the app at LOAD + 0x1000 (thread 100), then into a module and the kernel."""
    out = (
        e4.a_sync()
        + e4.trace_info(0)
        + e4.trace_on()
        + e4.address_context(LOAD + 0x1000, el=0, sf=True, ns=True, context_id=100)
        + e4.atom("EE")
        + e4.address_long(LOAD + 0x1010)
        + e4.atom("E")
    )
    if kernel:
        out += e4.address_long(MODULE + 0x40) + e4.atom("E")
        out += e4.address_long(MODULE + 0x80) + e4.atom("E")
        out += e4.address_long(KERNEL + 0x100) + e4.atom("E")
    return out


def recording(
    *,
    version: int = 1,
    extra_block: tuple[int, int, list[int]] | None = None,
    kernel: bool = False,
    auxtrace: bool = True,
) -> bytes:
    """A CPU-wide recording of process 100 on CPU 0, raw (TRBE) AUX data."""
    w = PerfWriter()
    w.build_ids = [(-1, BUILD_ID, "/data/app")]
    blocks = [(ETMV4_MAGIC, 0, etmv4_params(0x10))]
    if extra_block is not None:
        blocks.append(extra_block)
    w.auxtrace_info(cs_etm_info(blocks, version=version))
    if kernel:
        w.build_ids += [(-1, KERNEL_ID, "[kernel.kallsyms]"), (-1, MODULE_ID, MODULE_PATH)]
        w.mmap2(-1, 0, KERNEL, 0x80_0000, KERNEL, "[kernel.kallsyms]_text", time=1)
        w.mmap2(-1, 0, MODULE, 0x4000, 0, MODULE_PATH, time=2)
    w.comm(100, 100, "app", exec_=True, time=10)
    w.mmap2(100, 100, LOAD + 0x1000, 0x1000, _text_offset(), "/data/app", time=12)
    w.itrace_start(100, 100, time=15)
    data = _trace(kernel=kernel)
    w.aux(0, len(data), AUX_RAW, pid=100, tid=100, time=20)
    if auxtrace:
        w.auxtrace(data + b"\0" * (-len(data) % 8), cpu=0)
    return w.build()


@pytest.fixture()
def symdir(tmp_path: Path) -> Path:
    d = tmp_path / "symbols"
    d.mkdir()
    (d / "app").write_bytes(APP)
    return d


def _run_all(path: Path, symdir: Path) -> dict[str, Run]:
    sym = ["--symdir", str(symdir)]
    return {
        "info": _cstrace("info", str(path), *sym),
        "decode": _cstrace("decode", str(path), *sym, "--no-summary"),
        "profile": _cstrace("profile", str(path), *sym, "--format", "autofdo"),
    }


def _no_traceback(runs: dict[str, Run]) -> None:
    for cmd, done in runs.items():
        assert "Traceback" not in done.stderr, (cmd, done.stderr)
        assert done.returncode in (0, 2), (cmd, done.returncode, done.stderr)


def test_metadata_version_0(tmp_path: Path, symdir: Path) -> None:
    path = tmp_path / "v0.data"
    path.write_bytes(recording(version=0))
    runs = _run_all(path, symdir)
    _no_traceback(runs)
    assert all(r.returncode == 0 for r in runs.values()), runs
    assert "header version 0" in runs["info"].stdout
    assert "CPU 0: ETMv4 (ETM4.2), trace ID 0x10 (metadata)" in runs["info"].stdout
    assert "   0     100     100  INSTR_RANGE      0x5500001000-0x550000100c" in (
        runs["decode"].stdout
    )
    assert "// /data/app" in runs["profile"].stdout


def test_an_unknown_trace_unit_is_skipped(tmp_path: Path, symdir: Path) -> None:
    path = tmp_path / "unknown.data"
    path.write_bytes(recording(extra_block=(0x6060606060606060, 1, [1, 2, 3, 4])))
    runs = _run_all(path, symdir)
    _no_traceback(runs)
    assert runs["decode"].returncode == 0 and "INSTR_RANGE" in runs["decode"].stdout
    warned = [x for x in runs["decode"].stderr.splitlines() if "0x6060606060606060" in x]
    assert len(warned) == 1 and "CPU 1" in warned[0] and "skipped" in warned[0]
    assert "skipped: CPU 1: unknown magic number" in runs["info"].stdout


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ([3, 8 << 32 | 1, 0], "header version 3 is not known"),
        ([0, 8 << 32 | 1, 0, 0x6060606060606060, 0, 1, 2], "unknown magic number"),
        ([1, 8 << 32 | 2, 0, ETMV4_MAGIC, 0, 7, 1], "goes past the end of the record"),
    ],
)
def test_metadata_that_cannot_be_read_is_one_line(
    tmp_path: Path, symdir: Path, words: list[int], message: str
) -> None:
    w = PerfWriter()
    w.auxtrace_info(words)
    w.aux(0, 8, AUX_RAW, time=20)
    w.auxtrace(bytes(8), cpu=0)
    path = tmp_path / "bad.data"
    path.write_bytes(w.build())
    runs = _run_all(path, symdir)
    _no_traceback(runs)
    for cmd, done in runs.items():
        assert done.returncode == 2, cmd
        errors = [x for x in done.stderr.splitlines() if x.startswith("cstrace: error:")]
        assert len(errors) == 1 and message in errors[0] and str(path) in errors[0], (cmd, errors)
        assert "offset 0x" in errors[0]


def test_a_kernel_recording_with_a_missing_module(tmp_path: Path, symdir: Path) -> None:
    path = tmp_path / "kernel.data"
    path.write_bytes(recording(kernel=True))
    runs = _run_all(path, symdir)
    _no_traceback(runs)
    info = runs["info"].stdout
    assert f"binary {MODULE_PATH}, build ID {MODULE_ID.hex()}: not found" in info
    assert f"binary [kernel.kallsyms], build ID {KERNEL_ID.hex()}: not found" in info
    decode = runs["decode"]
    assert decode.returncode == 0, decode.stderr
    # The app is decoded; the module and the kernel are named once each, with their counts.
    assert "   0     100     100  INSTR_RANGE      0x5500001000-0x550000100c" in decode.stdout
    missing = [x for x in decode.stderr.splitlines() if "not found" in x]
    assert len(missing) == 2, decode.stderr
    [module] = [x for x in missing if MODULE_PATH in x]
    assert MODULE_ID.hex() in module and "2 trace address(es) fell in it" in module
    [kernel] = [x for x in missing if "[kernel.kallsyms]" in x]
    assert KERNEL_ID.hex() in kernel and "1 trace address(es) fell in it" in kernel
    assert runs["profile"].returncode == 0 and "// /data/app" in runs["profile"].stdout


def test_aux_data_missing_from_the_file(tmp_path: Path, symdir: Path) -> None:
    path = tmp_path / "noaux.data"
    path.write_bytes(recording(auxtrace=False))
    runs = _run_all(path, symdir)
    _no_traceback(runs)
    assert "AUX" in runs["info"].stdout and "not in the file" in runs["info"].stdout
    for cmd in ("decode", "profile"):
        # simpleperf's inject succeeds on such a recording: an empty result, with warnings.
        done = runs[cmd]
        assert done.returncode == 0 and done.stdout == "", cmd
        warned = [x for x in done.stderr.splitlines() if x.startswith("cstrace: warning:")]
        assert warned and all(str(path) in x for x in warned), (cmd, done.stderr)
        assert any("not in the file" in x and "CPU 0" in x for x in warned), (cmd, done.stderr)
        assert "cstrace: error" not in done.stderr


def test_cut_recordings_give_an_error_or_what_there_is(tmp_path: Path, symdir: Path) -> None:
    good = recording(kernel=True)
    rng = random.Random(12)
    cuts = sorted({0, 8, 104, len(good) - 1, *rng.sample(range(len(good)), 36)})
    for n in cuts:
        path = tmp_path / f"cut{n}.data"
        path.write_bytes(good[:n])
        runs = _run_all(path, symdir)
        _no_traceback(runs)
        for cmd, done in runs.items():
            if done.returncode == 2:
                errors = [x for x in done.stderr.splitlines() if x.startswith("cstrace: error:")]
                assert errors, (n, cmd, done.stderr)
                if cmd == "info" or not done.stdout:
                    assert len(errors) == 1 and str(path) in errors[0], (n, cmd, errors)


@pytest.mark.parametrize("name", ["perf_etm.data", "perf_with_unformatted_trace.data"])
def test_cut_real_recordings(perfdata: Path, tmp_path: Path, name: str) -> None:
    """The real recordings cut at random offsets: info, decode and profile give located errors
    (one line when the file cannot be read at all) and what the part before the cut holds."""
    good = (perfdata / name).read_bytes()
    rng = random.Random(name)
    for n in sorted(rng.sample(range(len(good)), 24)):
        path = tmp_path / f"cut{n}.data"
        path.write_bytes(good[:n])
        runs = _run_all(path, perfdata)
        _no_traceback(runs)
        for cmd, done in runs.items():
            errors = [x for x in done.stderr.splitlines() if x.startswith("cstrace: error:")]
            if done.returncode == 2:
                assert errors and all(str(path) in x for x in errors), (n, cmd, done.stderr)
                assert all("offset 0x" in x for x in errors), (n, cmd, errors)
                if cmd == "info" or (not done.stdout and "records" not in done.stderr):
                    assert len(errors) == 1, (n, cmd, errors)
