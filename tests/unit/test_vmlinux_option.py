"""``--vmlinux FILE``: the kernel image of a recording, whatever its file name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cstrace.cli import main
from cstrace.inputs.symbols import ImageSearch, SymbolPaths, read_build_id
from tests.conftest import perfdata_dir


def _an_elf(tmp_path: Path) -> tuple[Path, bytes]:
    found = perfdata_dir()
    if found is None:
        pytest.skip("perf.data test recordings not found: set CSTRACE_PERFDATA")
    kernel = tmp_path / "vmlinux-6.1.0-test"
    shutil.copyfile(found / "etm_test_loop", kernel)  # any ELF with a build ID will do
    build_id = read_build_id(kernel)
    assert build_id
    return kernel, build_id


def test_the_kernel_is_taken_from_vmlinux_when_its_build_id_matches(tmp_path: Path) -> None:
    kernel, build_id = _an_elf(tmp_path)
    search = ImageSearch(SymbolPaths(vmlinux=str(kernel)))
    got = search.find("vmlinux", build_id)
    assert got is not None and got.path == kernel and got.how == "--vmlinux"
    assert search.find("vmlinux", None) is not None  # a recording without build IDs
    # Another kernel's build ID: not taken, and remembered as a mismatch.
    assert search.find("vmlinux", bytes(20)) is None
    assert [p for p, _ in search.mismatches["vmlinux"]] == [kernel]
    # Only the kernel is looked for there.
    assert search.find("libc.so", build_id) is None


def test_the_option_is_on_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["decode", "--help"])
    assert "--vmlinux FILE" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    assert "--vmlinux FILE" in capsys.readouterr().out
