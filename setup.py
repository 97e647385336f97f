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

import importlib.util
import json
import os
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
                f"cstrace: compiling {len(self.extensions)} hot modules with Cython and the C "
                f"compiler ({self.parallel} at a time; a few minutes; CSTRACE_BUILD_PURE=1 "
                "skips this and installs pure Python)",
                file=sys.stderr,
                flush=True,
            )
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
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"cstrace: {ext.name} not compiled ({exc}); pure Python", file=sys.stderr)

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
        print(
            f"cstrace: {len(built)} of {len(self.extensions)} hot modules compiled "
            f"in {seconds:.0f} s",
            file=sys.stderr,
            flush=True,
        )


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
