"""Quality gates run as tests: ruff lint, ruff format and mypy --strict on src/."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


def _tool(name: str) -> str:
    exe = shutil.which(name, path=str(ROOT / ".venv" / "bin")) or shutil.which(name)
    if exe is None:
        bindir = str(__import__("pathlib").Path(sys.executable).parent)
        exe = shutil.which(name, path=bindir)
    if exe is None:
        pytest.fail(f"{name} is not installed: install the test extras (pip install -e '.[test]')")
    return exe


def test_ruff_check() -> None:
    r = _run(_tool("ruff"), "check", "src", "tests", "benchmarks")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format() -> None:
    r = _run(_tool("ruff"), "format", "--check", "src", "tests", "benchmarks")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict() -> None:
    r = _run(sys.executable, "-m", "mypy", "--strict", "src")
    assert r.returncode == 0, r.stdout + r.stderr
