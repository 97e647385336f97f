"""``perf record --kcore`` recordings: a folder with ``data`` and ``kcore_dir/kcore``.

A corpus snapshot with a kernel dump is written as perf.data by the test writer
(its dumps as kernel mappings, pid -1), into a folder laid out as ``perf record
--kcore`` leaves it: ``data``, and ``kcore_dir/`` with ``kcore`` (an ELF core
file written here whose ``PT_LOAD`` segments hold the dumps' bytes at their
kernel addresses), ``kallsyms`` and ``modules``. No ``--symdir`` is given: the
kernel's code can only come from the kcore copy. The folder (and the data file
with ``--kcore``) must decode to the snapshot's own elements; without the
kcore, the kernel's code is missing and named.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cstrace.inputs import is_perf_data, read_snapshot
from cstrace.trace import Trace
from tests.conftest import corpus_dir
from tests.integration.elfgen import (
    EM_AARCH64,
    PF_R,
    PF_X,
    PT_LOAD,
    ElfSpec,
    Section,
    Segment,
    write_elf,
)
from tests.integration.test_perfdata_roundtrip import KERNEL_PID, _elements
from tests.perfdata_writer import write_perf_data

ET_CORE = 4
SNAPSHOT = "juno_r1_1"  # an AArch64 kernel traced at 0xffffffc000081000


def _cstrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cstrace.cli", *args], capture_output=True, text=True, check=False
    )


def kcore_of(trace: Trace) -> bytes:
    """An ELF core file with one PT_LOAD segment per distinct memory dump of ``trace``."""
    sections: list[Section] = []
    seen: set[tuple[str, int, int]] = set()
    for d in trace.dumps:
        data = d.file.read(d.offset, d.length)
        key = (d.file.name, d.offset, d.address)
        if key in seen or not data:
            continue
        seen.add(key)
        sections.append(Section(f"load{len(sections)}", 1, 6, d.address, data, 8))
    spec = ElfSpec(
        e_type=ET_CORE,
        machine=EM_AARCH64,
        bits=64,
        sections=sections,
        segments=[Segment(PT_LOAD, PF_R | PF_X, s.name) for s in sections],
    )
    return write_elf(spec)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Trace]:
    corpus = corpus_dir()
    if corpus is None:
        pytest.skip(
            "reference corpus not found: set CSTRACE_CORPUS or place it at ../shared/corpus"
        )
    snap = corpus / "snapshots" / SNAPSHOT
    trace = read_snapshot(snap)
    folder = tmp_path_factory.mktemp("kcore") / "perf.data"
    (folder / "kcore_dir").mkdir(parents=True)
    write_perf_data(trace, folder / "data", pid=KERNEL_PID)
    (folder / "kcore_dir" / "kcore").write_bytes(kcore_of(trace))
    first = min(d.address for d in trace.dumps)
    (folder / "kcore_dir" / "kallsyms").write_text(
        f"{first:016x} T _text\n{first + 0x40:016x} T do_something\n"
    )
    (folder / "kcore_dir" / "modules").write_text("")
    return snap, folder, trace


def test_the_folder_is_a_recording(recorded: tuple[Path, Path, Trace]) -> None:
    _snap, folder, _trace = recorded
    assert is_perf_data(folder) and is_perf_data(folder / "data")
    assert not is_perf_data(folder / "kcore_dir")


def test_the_kernel_code_comes_from_kcore(recorded: tuple[Path, Path, Trace]) -> None:
    snap, folder, _trace = recorded
    want = _elements(_cstrace("decode", str(snap), "--format", "ocsd", "--no-summary").stdout)
    back = _cstrace("decode", str(folder), "--format", "ocsd", "--no-summary")
    assert back.returncode == 0, back.stderr
    assert "not found" not in back.stderr, back.stderr
    got = _elements(back.stdout)
    assert got and any("INSTR_RANGE" in x for lines in got.values() for x in lines)
    for tid in got:
        assert got[tid] == want[tid], f"trace ID {tid}"
    # The data file with --kcore FILE decodes the same.
    named = _cstrace(
        "decode",
        str(folder / "data"),
        "--kcore",
        str(folder / "kcore_dir" / "kcore"),
        "--format",
        "ocsd",
        "--no-summary",
    )
    assert named.returncode == 0 and _elements(named.stdout) == got


def test_without_kcore_the_kernel_is_missing(recorded: tuple[Path, Path, Trace]) -> None:
    _snap, folder, _trace = recorded
    alone = _cstrace("decode", str(folder / "data"), "--no-summary")
    assert alone.returncode == 0 and "Traceback" not in alone.stderr
    assert "INSTR_RANGE" not in alone.stdout
    missing = [x for x in alone.stderr.splitlines() if "not found" in x]
    assert len(missing) == 1 and "kernel_dump.bin" in missing[0], alone.stderr


def test_info_names_the_kcore(recorded: tuple[Path, Path, Trace]) -> None:
    _snap, folder, trace = recorded
    done = _cstrace("info", str(folder), "--no-decode")
    assert done.returncode == 0, done.stderr
    kcore = folder / "kcore_dir" / "kcore"
    segments = len({(d.file.name, d.offset, d.address) for d in trace.dumps})
    assert f"kernel code (kcore): {kcore}: {segments} segment(s)" in done.stdout
    assert "kallsyms with 2 symbol(s)" in done.stdout
    assert f"binary kernel_dump.bin, build ID unknown: found (kcore): {kcore}" in done.stdout


def test_a_bad_kcore_is_one_located_error(
    recorded: tuple[Path, Path, Trace], tmp_path: Path
) -> None:
    _snap, folder, _trace = recorded
    good = (folder / "kcore_dir" / "kcore").read_bytes()
    cases = {
        "text": b"not an elf file at all\n",
        "cut": good[:200],
        "exec": good[:16] + (2).to_bytes(2, "little") + good[18:],
    }
    for name, blob in cases.items():
        bad = tmp_path / f"kcore.{name}"
        bad.write_bytes(blob)
        for cmd in ("decode", "info", "profile"):
            extra = ["--format", "autofdo"] if cmd == "profile" else []
            done = _cstrace(cmd, str(folder / "data"), "--kcore", str(bad), *extra)
            assert done.returncode == 2, (name, cmd, done.stderr)
            assert "Traceback" not in done.stderr
            errors = [x for x in done.stderr.splitlines() if "error" in x]
            assert len(errors) == 1 and str(bad) in errors[0] and "kcore" in errors[0], (
                name,
                cmd,
                done.stderr,
            )


def test_a_package_of_the_folder_keeps_the_kernel_code(
    recorded: tuple[Path, Path, Trace], tmp_path: Path
) -> None:
    _snap, folder, _trace = recorded
    out = tmp_path / "rec.zip"
    made = _cstrace("package", str(folder), str(out))
    assert made.returncode == 0, made.stderr
    direct = _cstrace("decode", str(folder), "--format", "ocsd", "--no-summary")
    packaged = _cstrace("decode", str(out), "--format", "ocsd", "--no-summary")
    assert packaged.returncode == 0, packaged.stderr
    assert packaged.stdout == direct.stdout and "INSTR_RANGE" in packaged.stdout
