"""Build script: compiles cstrace's hot modules with Cython when it can.

The hot modules (``cstrace._native.HOT_MODULES``) are plain Python; Cython
compiles each, in its pure-Python mode, to an extension module installed
beside the ``.py`` (a ``.pxd`` beside it adds C types). The build writes a
stamp, ``cstrace/_compiled.json``, with the digest of the source each
extension was made from: at run time ``cstrace._native`` uses the extensions
only while their sources still have those digests (file times play no part,
so a wheel or ``pip install .`` runs compiled). Every extension is optional:
without Cython, without a C compiler, with ``CSTRACE_BUILD_PURE=1`` or when a
compilation fails, the package installs as pure Python and says so when
imported (see docs/performance.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def _load_native() -> ModuleType:
    """cstrace/_native.py, loaded from its file (cstrace is not importable yet; loaded under
    another name, it installs no import hook)."""
    path = HERE / "src" / "cstrace" / "_native.py"
    spec = importlib.util.spec_from_file_location("_cstrace_native_for_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NATIVE = _load_native()
HOT_MODULES: tuple[str, ...] = NATIVE.HOT_MODULES


def _source_of(name: str) -> Path:
    """The ``.py`` of hot module ``name`` in the source tree."""
    return HERE.joinpath("src", *name.split(".")).with_suffix(".py")


class OptionalBuildExt(build_ext):
    """build_ext that never fails the installation (a failed extension is left out), says
    what it does, and writes the build stamp of the extensions it made."""

    def run(self) -> None:
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1  # the modules compile independently
        if self.extensions:
            print(
                f"cstrace: building {len(self.extensions)} hot modules with Cython and the C "
                f"compiler ({self.parallel} at a time: minutes, unless an earlier build in this "
                "checkout left them; CSTRACE_BUILD_PURE=1 skips this and installs pure Python)",
                file=sys.stderr,
                flush=True,
            )
        _drop_orphans(Path(self.build_lib), HOT_MODULES)
        start = time.monotonic()
        try:
            super().run()
        except Exception as exc:  # no compiler, say
            print(f"cstrace: compiled modules not built ({exc}); pure Python", file=sys.stderr)
        self._write_stamp(time.monotonic() - start)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        if self.compiler.compiler_type == "unix":
            # No debugging information: a third of the compile time, no effect on speed.
            ext.extra_compile_args = [*ext.extra_compile_args, "-g0"]
        out = Path(self.get_ext_fullpath(ext.name))
        cached = self._cached(ext)
        if cached is not None and cached.is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cached, out)
            self.reused += 1
            return
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"cstrace: {ext.name} not compiled ({exc}); pure Python", file=sys.stderr)
            return
        if cached is not None and out.is_file():
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                for old in cached.parent.glob(f"{ext.name}-*"):
                    old.unlink()
                shutil.copyfile(out, cached)
            except OSError as exc:  # only a slower next build
                print(f"cstrace: {ext.name} not kept for the next build ({exc})", file=sys.stderr)

    reused = 0

    def _cached(self, ext) -> Path | None:  # type: ignore[no-untyped-def]
        """Where this checkout keeps the build of ``ext`` from the same C source, compiler
        and flags (``build/cstrace-ext-cache``): a second install (the README's test
        command after the first one, a wheel after an editable install) then copies it
        instead of compiling again. None when the C source is not at hand."""
        sources = [Path(src) for src in ext.sources]
        if not sources or not all(src.is_file() for src in sources):
            return None
        h = hashlib.sha256()
        for src in sources:
            h.update(src.read_bytes())
        compiler = getattr(self.compiler, "compiler_so", None) or [self.compiler.compiler_type]
        for part in (*compiler, *ext.extra_compile_args, *ext.extra_link_args, sys.version):
            h.update(str(part).encode() + b"\0")
        suffix = Path(self.get_ext_filename(ext.name)).name.split(".", 1)[1]
        return HERE / "build" / "cstrace-ext-cache" / f"{ext.name}-{h.hexdigest()[:24]}.{suffix}"

    def _write_stamp(self, seconds: float) -> None:
        """Record, beside cstrace/__init__.py in the build's output, the source digest of
        every extension that was built (cstrace._native compares them at run time)."""
        built = {}
        package_dir = None
        for ext in self.extensions:
            out = Path(self.get_ext_fullpath(ext.name))
            package_dir = out.parents[len(ext.name.split(".")) - 2]
            if out.is_file():
                built[ext.name] = NATIVE.source_digest(_source_of(ext.name))
        if package_dir is None:
            return
        package_dir.mkdir(parents=True, exist_ok=True)
        stamp = {"modules": built}
        (package_dir / NATIVE.STAMP).write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
        reused = f" ({self.reused} unchanged since the last build, reused)" if self.reused else ""
        print(
            f"cstrace: {len(built)} of {len(self.extensions)} hot modules compiled "
            f"in {seconds:.0f} s{reused}",
            file=sys.stderr,
            flush=True,
        )


_CIMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+cimport\b", re.MULTILINE)


def _pxd_of(name: str) -> Path:
    return Path("src", *name.split(".")).with_suffix(".pxd")


def _drop_stale_c(names: tuple[str, ...]) -> None:
    """Delete the generated C file of a hot module when a ``.pxd`` it cimports (directly
    or not) is newer: Cython's own check follows the ``.py``'s cimports but not those of
    the ``.pxd`` beside it, and a C file made against another layout of an extension
    type fails to import."""
    for name in names:
        c_file = Path("src", *name.split(".")).with_suffix(".c")
        if not c_file.is_file():
            continue
        built = c_file.stat().st_mtime
        seen: set[str] = set()
        todo = [name]
        while todo:
            mod = todo.pop()
            pxd = _pxd_of(mod)
            if mod in seen or not pxd.is_file():
                continue
            seen.add(mod)
            if pxd.stat().st_mtime > built:
                c_file.unlink()
                break
            todo.extend(_CIMPORT.findall(pxd.read_text()))


def _drop_orphans(root: Path, names: tuple[str, ...]) -> None:
    """Delete, under ``root`` (the source tree, or a build's output), the extension
    modules (and generated C) of modules that are no longer hot.

    A checkout built when a module was hot keeps its extension beside the ``.py``,
    and a build folder keeps it among the files the next wheel packs; Python's
    import machinery would go on preferring it to the source, and
    ``cstrace._native`` only decides for the modules of ``HOT_MODULES``."""
    hot = {root.joinpath(*name.split(".")) for name in names}
    package = root / "cstrace"
    built = [*package.rglob("*.so"), *package.rglob("*.pyd")] if package.is_dir() else []
    for ext in built:
        module = ext.with_name(ext.name.split(".")[0])
        if module not in hot and module.with_suffix(".py").is_file():
            ext.unlink()
            module.with_suffix(".c").unlink(missing_ok=True)


def extensions() -> list:  # type: ignore[type-arg]
    """The Cython extensions of the hot modules, or none when they cannot be made."""
    if os.environ.get("CSTRACE_BUILD_PURE", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("cstrace: Cython not available; installing pure Python", file=sys.stderr)
        return []
    from setuptools import Extension

    _drop_orphans(Path("src"), HOT_MODULES)
    _drop_stale_c(HOT_MODULES)
    exts = [
        Extension(name, [str(Path("src", *name.split(".")).with_suffix(".py"))], optional=True)
        for name in HOT_MODULES
    ]
    try:
        return cythonize(
            exts,
            include_path=["src"],  # for the .pxd files' cimports
            language_level=3,
            quiet=True,
            compiler_directives={
                # Types come from the .pxd files only: the .py annotations are for
                # mypy and readers, and must not change what the code accepts.
                "annotation_typing": False,
                "binding": True,
                "embedsignature": True,
            },
        )
    except Exception as exc:
        print(f"cstrace: Cython failed ({exc}); installing pure Python", file=sys.stderr)
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
