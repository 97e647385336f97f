"""Build script: compiles cstrace's hot modules with Cython when it can.

The hot modules (``cstrace._native.HOT_MODULES``) are plain Python; Cython
compiles each, in its pure-Python mode, to an extension module installed
beside the ``.py`` (a ``.pxd`` beside it adds C types). Every extension is
optional: without Cython, without a C compiler, with ``CSTRACE_BUILD_PURE=1``
or when a compilation fails, the package installs as pure Python and says so
when imported (see docs/performance.md).
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def _hot_modules() -> tuple[str, ...]:
    """``HOT_MODULES`` of cstrace/_native.py, read from its text (cstrace is not importable yet)."""
    tree = ast.parse((HERE / "src" / "cstrace" / "_native.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "HOT_MODULES":
            return tuple(ast.literal_eval(node.value))  # type: ignore[arg-type]
    raise RuntimeError("HOT_MODULES not found in src/cstrace/_native.py")


HOT_MODULES = _hot_modules()


class OptionalBuildExt(build_ext):
    """build_ext that never fails the installation: a failed extension is left out."""

    def run(self) -> None:
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1  # the modules compile independently
        try:
            super().run()
        except Exception as exc:  # no compiler, say
            print(f"cstrace: compiled modules not built ({exc}); pure Python", file=sys.stderr)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"cstrace: {ext.name} not compiled ({exc}); pure Python", file=sys.stderr)


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
