"""Compiled or pure Python (cstrace._native): CSTRACE_PURE, compiled() and the import hook."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import cstrace
from cstrace import _native

_PROBE = """
import json, sys, warnings
warnings.simplefilter("error")  # the pure-Python warning must not fire when asked for
import cstrace
import cstrace.protocols.etmv4.decoder as dec
import cstrace.isa.blocks as blocks
print(json.dumps([cstrace.compiled(), dec.__file__, blocks.__file__, cstrace.compiled_modules()]))
"""


def _probe(pure: bool) -> tuple[bool, str, str, dict[str, bool]]:
    env = dict(os.environ)
    env.pop("CSTRACE_PURE", None)
    if pure:
        env["CSTRACE_PURE"] = "1"
    r = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, check=False
    )
    assert r.returncode == 0, r.stderr
    mode, dec, blocks, mods = json.loads(r.stdout)
    return mode, dec, blocks, mods


def _built() -> bool:
    return all(_native._extension(name) is not None for name in _native.HOT_MODULES)


def test_pure_requested_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, pure in (("1", True), ("yes", True), ("0", False), ("", False)):
        monkeypatch.setenv("CSTRACE_PURE", value)
        assert _native.pure_requested() is pure
    monkeypatch.delenv("CSTRACE_PURE")
    assert _native.pure_requested() is False


def test_hot_modules_have_sources() -> None:
    for name in _native.HOT_MODULES:
        assert _native._source(name).is_file(), name


def test_cstrace_pure_imports_every_hot_module_from_its_source() -> None:
    mode, dec, blocks, mods = _probe(pure=True)
    assert mode is False
    assert dec.endswith("decoder.py") and blocks.endswith("blocks.py")
    assert set(mods) == set(_native.HOT_MODULES) and not any(mods.values())


def test_compiled_mode_imports_the_extensions() -> None:
    if not _built():
        pytest.skip("the hot modules are not compiled here (no Cython or C compiler at install)")
    mode, dec, blocks, mods = _probe(pure=False)
    if not mode:
        pytest.skip("an extension is older than its source: rebuild (pip install -e .)")
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    assert dec.endswith(suffixes) and blocks.endswith(suffixes)
    assert all(mods.values())


def test_compiled_in_this_process_matches_the_imported_files() -> None:
    import cstrace.protocols.etmv4.decoder as dec

    assert cstrace.compiled() is (not str(dec.__file__).endswith(".py"))


def _fresh_state(monkeypatch: pytest.MonkeyPatch, extension: bool) -> None:
    """Forget this process's choice and pretend the extensions are (not) installed."""
    monkeypatch.setattr(_native, "_choice", {})
    monkeypatch.setattr(_native, "_installed", False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.delenv("CSTRACE_PURE", raising=False)
    monkeypatch.delenv(_native._WARNED, raising=False)
    if not extension:
        monkeypatch.setattr(_native, "_extension", lambda name: None)


def test_missing_extensions_warn_once_per_process_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_state(monkeypatch, extension=False)
    with pytest.warns(RuntimeWarning, match="runs in pure Python .*not compiled"):
        _native.install()
    assert not any(_native._use_extension(name) for name in _native.HOT_MODULES)
    assert os.environ.get(_native._WARNED) == "1"
    # a child process (same environment, fresh state) stays quiet
    monkeypatch.setattr(_native, "_installed", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _native.install()


def test_cstrace_pure_never_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_state(monkeypatch, extension=False)
    monkeypatch.setenv("CSTRACE_PURE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _native.install()
    assert not any(_native._use_extension(name) for name in _native.HOT_MODULES)
    assert _native._WARNED not in os.environ


def _one_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stamp: object) -> Path:
    """A package of one hot module ``mod`` with an extension and, if given, a build stamp."""
    _fresh_state(monkeypatch, extension=True)
    src = tmp_path / "mod.py"
    ext = tmp_path / "mod.so"
    src.write_text("X = 1\n")
    ext.write_bytes(b"")
    if stamp is not None:
        (tmp_path / _native.STAMP).write_text(json.dumps(stamp))
    monkeypatch.setattr(_native, "_ROOT", tmp_path)
    monkeypatch.setattr(_native, "_stamps", None)
    monkeypatch.setattr(_native, "HOT_MODULES", ("cstrace.mod",))
    return src


def test_an_extension_older_than_its_source_is_used_when_the_stamp_matches(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # pip writes the extension first and the .py after it: file times do not decide
    src = tmp_path / "mod.py"
    src.write_text("X = 1\n")
    digest = _native.source_digest(src)
    _one_module(monkeypatch, tmp_path, {"modules": {"cstrace.mod": digest}})
    os.utime(tmp_path / "mod.so", (1000, 1000))
    os.utime(src, (2000, 2000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _native.install()
    assert _native._use_extension("cstrace.mod")


def test_an_edited_source_is_not_run_from_its_old_extension(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    src = tmp_path / "mod.py"
    src.write_text("X = 1\n")
    digest = _native.source_digest(src)
    _one_module(monkeypatch, tmp_path, {"modules": {"cstrace.mod": digest}})
    src.write_text("X = 2\n")  # edited after the build (an editable install)
    os.utime(tmp_path / "mod.so", (3000, 3000))  # even with a newer extension
    with pytest.warns(RuntimeWarning, match="built from another version of its source"):
        _native.install()
    assert not _native._use_extension("cstrace.mod")


def test_a_pxd_edit_also_makes_the_extension_stale(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    src = tmp_path / "mod.py"
    src.write_text("X = 1\n")
    (tmp_path / "mod.pxd").write_text("cdef int x\n")
    digest = _native.source_digest(src)
    _one_module(monkeypatch, tmp_path, {"modules": {"cstrace.mod": digest}})
    (tmp_path / "mod.pxd").write_text("cdef long x\n")
    with pytest.warns(RuntimeWarning, match="another version"):
        _native.install()
    assert not _native._use_extension("cstrace.mod")


@pytest.mark.parametrize("stamp", [None, "not json {", {"modules": {}}, ["x"]])
def test_an_extension_without_a_usable_stamp_is_not_trusted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stamp: object
) -> None:
    if stamp == "not json {":
        _one_module(monkeypatch, tmp_path, None)
        (tmp_path / _native.STAMP).write_text("not json {")
    else:
        _one_module(monkeypatch, tmp_path, stamp)
    with pytest.warns(RuntimeWarning, match="runs in pure Python"):
        _native.install()
    assert not _native._use_extension("cstrace.mod")


def test_the_installed_stamp_matches_every_installed_source() -> None:
    """The build that made this installation's extensions recorded their sources' digests."""
    if not _built():
        pytest.skip("the hot modules are not compiled here (no Cython or C compiler at install)")
    recorded = _native._recorded()
    stale = [
        n
        for n in _native.HOT_MODULES
        if recorded.get(n) != _native.source_digest(_native._source(n))
    ]
    if stale:
        pytest.skip(f"sources edited since the build (rebuild: pip install -e .): {stale[:3]}")
    assert cstrace.compiled()
