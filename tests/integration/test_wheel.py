"""Installed as users install it: a wheel built from the checkout runs compiled, quietly.

The wheel is built with ``pip wheel`` (and installed with ``pip install``), and the
checkout is also installed with a plain ``pip install .``, each into a fresh virtual
environment; the dependencies come from this test's own environment (a path file), so
nothing is downloaded but what pip's build needs. In each: ``cstrace --version`` says
compiled, and ``cstrace decode examples/etm_demo`` writes nothing on stderr but its
summary. Each build runs in its own copy of the checkout's tracked files (two builds in one
tree would share ``build/``, and the checkout stays as it was); the copy is given the
checkout's ``build/cstrace-ext-cache``, so the build reuses the objects of the install
that runs the tests when nothing changed, and otherwise compiles, which takes minutes:
the test is in the slow group.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

import cstrace
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _venv(where: Path) -> Path:
    """A fresh virtual environment whose dependencies are this environment's packages."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    target = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(target) / "deps-of-the-test-environment.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n"
    )
    return python


def _copy_of_checkout(where: Path) -> Path:
    """The checkout's tracked files (all but build products and caches without git),
    with the compiled-object cache of its earlier builds."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout.decode().split("\0")  # fmt: skip
        for name in filter(None, listed):
            source = ROOT / name
            if source.is_file():
                (where / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, where / name)
    else:
        shutil.copytree(
            ROOT, where,
            ignore=shutil.ignore_patterns(
                ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "*.so", "*.c"
            ),
        )  # fmt: skip
    cache = ROOT / "build" / "cstrace-ext-cache"
    if cache.is_dir():
        shutil.copytree(cache, where / "build" / "cstrace-ext-cache")
    return where


def _pip(python: Path, *args: str, cwd: Path = ROOT) -> None:
    r = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        cwd=cwd, capture_output=True, text=True, check=False, timeout=1800,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def _check_installed(python: Path, scratch: Path) -> None:
    """The installed cstrace, run outside the checkout: compiled, no warning."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CSTRACE_")}
    cstrace_cmd = python.parent / "cstrace"
    where = subprocess.run(
        [str(python), "-c", "import cstrace, cstrace.protocols.etmv4.decoder as d; "
         "print(cstrace.__file__); print(d.__file__)"],
        cwd=scratch, capture_output=True, text=True, check=True, env=env,
    ).stdout.split()  # fmt: skip
    assert "site-packages" in where[0], where  # the installed copy, not a checkout
    assert where[1].endswith(".so"), where
    version = subprocess.run(
        [str(cstrace_cmd), "--version"], cwd=scratch, capture_output=True, text=True, env=env
    )
    assert version.returncode == 0 and "(compiled)" in version.stdout, version
    decoded = subprocess.run(
        [str(cstrace_cmd), "decode", str(ROOT / "examples" / "etm_demo")],
        cwd=scratch, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert decoded.returncode == 0, decoded.stderr
    assert "INSTR_RANGE" in decoded.stdout
    err = decoded.stderr.splitlines()
    assert err and err[0] == "summary:", decoded.stderr
    assert all(line.startswith("  ") for line in err[1:]), decoded.stderr


def test_a_wheel_runs_compiled(tmp_path: Path) -> None:
    if not cstrace.compiled():
        pytest.skip("this environment runs pure Python: no compiler for the wheel either")
    wheels = tmp_path / "wheels"
    source = _copy_of_checkout(tmp_path / "checkout")
    _pip(Path(sys.executable), "wheel", "-q", "--no-deps", "-w", str(wheels), str(source))
    [wheel] = wheels.glob("cstrace-*.whl")
    python = _venv(tmp_path / "venv")
    _pip(python, "install", "-q", "--no-deps", str(wheel))
    _check_installed(python, tmp_path)


def test_pip_install_dot_runs_compiled(tmp_path: Path) -> None:
    if not cstrace.compiled():
        pytest.skip("this environment runs pure Python: no compiler for the install either")
    source = _copy_of_checkout(tmp_path / "checkout")
    python = _venv(tmp_path / "venv")
    _pip(python, "install", "-q", "--no-deps", ".", cwd=source)
    _check_installed(python, tmp_path)
    shutil.rmtree(tmp_path / "venv")
