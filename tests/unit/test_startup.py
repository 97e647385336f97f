"""Process start: what ``import cstrace``, ``import cstrace.cli`` and a small decode load.

Every ``cstrace`` command pays for its imports before it does anything. The
packages that gather an API (``cstrace``, ``cstrace.analyses``,
``cstrace.inputs``, ``cstrace.inputs.perfdata``) import their names on first
use (:mod:`cstrace._lazy`), and ``cstrace.cli`` imports what each command needs
inside the command. These tests run fresh interpreters and look at
``sys.modules``: they assert which modules are *not* loaded, never how long
anything took. They also check that the lazy API is the same API: every public
name resolves to the object its module defines, ``dir()`` lists it, and the
names type checkers see agree with the names loaded at run time.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import cstrace

SRC = Path(cstrace.__file__).resolve().parent

THIRD_PARTY = ("numpy", "elftools", "capstone", "duckdb", "pyarrow", "rich", "dask", "perfetto")
"""Libraries no command needs just to start (``--help``, ``--version``, argument errors)."""

NOT_AT_IMPORT = (
    *THIRD_PARTY,
    "cstrace.analyses",
    "cstrace.api",
    "cstrace.batch",
    "cstrace.capture",
    "cstrace.decode",
    "cstrace.execution",
    "cstrace.fleet",
    "cstrace.inputs",
    "cstrace.isa",
    "cstrace.memory",
    "cstrace.parallel",
    "cstrace.parquet",
    "cstrace.protocols",
    "cstrace.render",
    "cstrace.trace",
    "cstrace.viewer",
)
"""Modules (and everything under them) that ``import cstrace`` and ``import cstrace.cli`` leave
out."""

NOT_FOR_A_SNAPSHOT_DECODE = (
    "elftools",
    "capstone",
    "duckdb",
    "pyarrow",
    "rich",
    "dask",
    "perfetto",
    "cstrace.analyses.calls",
    "cstrace.analyses.coverage",
    "cstrace.analyses.instructions",
    "cstrace.analyses.profile",
    "cstrace.analyses.query",
    "cstrace.analyses.symbols",
    "cstrace.analyses.timeline",
    "cstrace.batch",
    "cstrace.inputs.detect",
    "cstrace.inputs.infer",
    "cstrace.inputs.package_write",
    "cstrace.inputs.perfdata.adapter",
    "cstrace.inputs.perfdata.records",
    "cstrace.inputs.zipfiles",
    "cstrace.memory.binaries",
    "cstrace.memory.clock",
    "cstrace.memory.elf",
    "cstrace.memory.events",
    "cstrace.memory.locate",
    "cstrace.memory.spaces",
    "cstrace.fleet",
    "cstrace.parquet",
    "cstrace.protocols.ptm",
    "cstrace.render.ocsd",
    "cstrace.render.text",
    "cstrace.viewer",
    "zipfile",
)
"""What ``cstrace decode SNAPSHOT --format null --jobs 1`` (an ETMv4 snapshot folder of
memory dumps: no ELF image, no event log) has no use for; with ``--no-summary``,
``cstrace.render`` neither."""

LAZY_PACKAGES = ("cstrace", "cstrace.analyses", "cstrace.inputs", "cstrace.inputs.perfdata")

BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _run(code: str, env: dict[str, str] | None = None) -> Any:
    """The JSON value that ``code``, run in a fresh interpreter, prints on its last line."""
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def _loaded(modules: object, names: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are one of ``names`` or under one of them."""
    assert isinstance(modules, list)
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize("module", ["cstrace", "cstrace.cli"])
def test_import_loads_no_heavy_module(module: str) -> None:
    modules = _run(f"import {module}, sys, json; print(json.dumps(sorted(sys.modules)))")
    assert _loaded(modules, NOT_AT_IMPORT) == []
    # The probe sees what it should: the package and its import hook are there.
    assert isinstance(modules, list)
    assert {module, "cstrace._native"} <= set(modules)


def test_help_and_version_start_without_numpy() -> None:
    code = """
import json, sys
from cstrace.cli import main
for argv in (["--version"], ["--help"], ["decode", "--help"]):
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""
    assert _loaded(_run(code), NOT_AT_IMPORT) == []


@pytest.mark.parametrize("summary", [False, True])
def test_a_snapshot_decode_loads_only_what_it_uses(corpus: Path, summary: bool) -> None:
    snapshot = corpus / "snapshots" / "bugfix-exact-match"
    if not snapshot.is_dir():
        pytest.skip(f"{snapshot} not found in the corpus")
    flags = ["--format", "null", "--jobs", "1"] + ([] if summary else ["--no-summary"])
    code = f"""
import json, sys
from cstrace.cli import main
status = main(["decode", {str(snapshot)!r}, *{flags!r}])
print(json.dumps([status, sorted(sys.modules)]))
"""
    status, modules = _run(code)
    assert status == 0
    unused = NOT_FOR_A_SNAPSHOT_DECODE + (() if summary else ("cstrace.render",))
    assert _loaded(modules, unused) == []
    # The summary is printed with its own renderer only.
    assert ("cstrace.render.loss" in modules) == summary
    # It did decode: the decoder and NumPy were loaded on the way.
    assert _loaded(modules, ("numpy", "cstrace.decode", "cstrace.protocols.etmv4.decoder"))


def test_the_cli_asks_for_one_blas_thread_unless_told_otherwise() -> None:
    env = {k: v for k, v in os.environ.items() if k not in BLAS_VARIABLES}
    env["OMP_NUM_THREADS"] = "3"  # the user's own setting
    code = f"""
import json, os, sys
import cstrace.cli
untouched = [os.environ.get(n) for n in {BLAS_VARIABLES!r}]
numpy_before = "numpy" in sys.modules
try:
    cstrace.cli.main(["--version"])
except SystemExit:
    pass
print(json.dumps([untouched, numpy_before, [os.environ.get(n) for n in {BLAS_VARIABLES!r}]]))
"""
    untouched, numpy_before, after = _run(code, env)
    # Importing the module changes nothing (a library leaves its host's environment alone) ...
    assert untouched == [None, "3", None]
    # ... and NumPy is not loaded before main() sets the variables, so OpenBLAS reads them.
    assert numpy_before is False
    assert after == ["1", "3", "1"]


def _type_checking_imports(package: str) -> dict[str, str]:
    """Name -> module of the imports under ``if TYPE_CHECKING:`` in ``package``'s ``__init__``."""
    path = SRC.parent.joinpath(*package.split("."), "__init__.py")
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name):
            if node.test.id != "TYPE_CHECKING":
                continue
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    for alias in imp.names:
                        found[alias.asname or alias.name] = imp.module
    return found


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_type_checkers_see_the_names_loaded_at_run_time(package: str) -> None:
    module = importlib.import_module(package)
    lazy: dict[str, tuple[str, ...]] = module._LAZY_FROM
    seen = _type_checking_imports(package)
    runtime = {name: mod for mod, names in lazy.items() for name in names}
    assert runtime, f"{package} loads nothing lazily"
    for name, mod in runtime.items():
        assert seen.get(name) == mod, f"{package}.{name}: TYPE_CHECKING has {seen.get(name)}"
    public = set(module.__all__)
    assert {n for n in seen if n in public} == set(runtime)
    assert set(runtime) <= public


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_resolves_and_is_listed(package: str) -> None:
    module: ModuleType = importlib.import_module(package)
    listed = dir(module)
    for name in module.__all__:
        assert name in listed, name
        value = getattr(module, name)
        assert value is not None, name
    for mod, names in module._LAZY_FROM.items():
        defining = importlib.import_module(mod)
        for name in names:
            assert getattr(module, name) is getattr(defining, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_a_fresh_import_gives_the_whole_api() -> None:
    code = """
import json
import cstrace
listed = set(dir(cstrace))
namespace = {}
exec("from cstrace import *", namespace)
print(json.dumps([
    sorted(set(cstrace.__all__) - listed),
    sorted(set(cstrace.__all__) - set(namespace)),
    cstrace.Session.__module__,
    cstrace.decode.__name__,
    cstrace.analyses.Symbols.__module__,
]))
"""
    missing_dir, missing_star, session, submodule, symbols = _run(code)
    assert missing_dir == []
    assert missing_star == []
    assert session == "cstrace.decode"
    # A submodule is an attribute of its package after `import cstrace` alone, as before.
    assert submodule == "cstrace.decode"
    assert symbols == "cstrace.analyses.symbols"


def test_one_busy_trace_id_starts_no_pool(corpus: Path) -> None:
    # bugfix-exact-match configures six ETMv4 sources; the frames name one trace ID
    # only: by default (--jobs as many as CPUs) the decode stays in this process.
    snapshot = corpus / "snapshots" / "bugfix-exact-match"
    if not snapshot.is_dir():
        pytest.skip(f"{snapshot} not found in the corpus")
    code = f"""
import json, sys
from cstrace.cli import main
status = main(["decode", {str(snapshot)!r}, "--format", "null", "--jobs", "2"])
print(json.dumps([status, sorted(sys.modules)]))
"""
    status, modules = _run(code)
    assert status == 0
    assert _loaded(modules, ("cstrace.parallel", "multiprocessing")) == []
