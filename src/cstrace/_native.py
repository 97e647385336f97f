"""Compiled or pure Python: which implementation of the hot modules is imported.

Input: the environment variable ``CSTRACE_PURE``, the files installed next to
each hot module and the build stamp (``_compiled.json``, written by
``setup.py`` beside the package's ``__init__``). Output: an import hook
(:func:`install`, run when this module is imported as ``cstrace._native``,
which ``cstrace/__init__.py`` does before anything else) and the answer to
"which mode runs" (:func:`compiled`, :func:`compiled_modules`).

The hot modules (``HOT_MODULES``: the readers' and decoders' inner loops, the
block walker, the deformatter) are ordinary Python modules. When the package is
built with Cython and a C compiler at hand, ``setup.py`` also compiles each of
them, unchanged, to an extension module beside its ``.py`` (Cython's pure
Python mode; the ``.pxd`` file next to a module adds C types to it), and
records in the build stamp a digest (:func:`source_digest`) of the ``.py`` and
``.pxd`` each extension was made from. Python's own import machinery prefers
the extension to the source; the hook installed here decides instead, per hot
module:

- ``CSTRACE_PURE=1`` (any value but empty or ``0``): the ``.py`` source, always;
- a hot module with no extension, or whose source no longer has the digest the
  stamp recorded (edited since the build, as in an editable install): the
  ``.py`` sources, so that a stale build never decodes with old code;
- otherwise the extensions. The choice is the same for every hot module
  (the compiled modules share C types).

The stamp, not file times, decides: an installer (``pip install .``, a wheel)
writes files in whatever order it likes, so an extension can be a few
milliseconds older than the source it was built from and still be its build.

When the hot modules run from their sources without ``CSTRACE_PURE`` asking
for it, :func:`install` warns once (a :class:`RuntimeWarning`; once per process
tree: it sets ``CSTRACE_PURE_WARNED`` for child processes), naming the fix:
reinstall with Cython and a C compiler. Results are the same in both modes;
only the speed differs.

This module depends on the standard library only, and has no effect when it
is loaded under another name: ``setup.py`` loads it from its file for
``HOT_MODULES`` and :func:`source_digest`.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

__all__ = [
    "HOT_MODULES",
    "STAMP",
    "compiled",
    "compiled_modules",
    "install",
    "pure_requested",
    "source_digest",
]

HOT_MODULES: tuple[str, ...] = (
    "cstrace.capture.walk",
    "cstrace.capture.window",
    "cstrace.rows",
    "cstrace.tally",
    "cstrace.isa.a32",
    "cstrace.isa.a64",
    "cstrace.isa.t32",
    "cstrace.isa.decode",
    "cstrace.isa.blocks",
    "cstrace.isa.scan",
    "cstrace.memory.image",
    "cstrace.protocols.packet",
    "cstrace.protocols.etmv4.packets",
    "cstrace.protocols.etmv4.reader",
    "cstrace.protocols.etmv4.decoder",
    "cstrace.protocols.ptm.reader",
    "cstrace.protocols.ptm.decoder",
    "cstrace.protocols.etmv3.reader",
    "cstrace.protocols.etmv3.decoder",
    "cstrace.protocols.stm.reader",
    "cstrace.protocols.stm.decoder",
    "cstrace.protocols.kit",
    "cstrace.bits",
    "cstrace.render.ocsd.elements",
    "cstrace.render.ocsd.listing",
    "cstrace.render.ocsd.itm",
    "cstrace.render.ocsd.stm",
    "cstrace.render.ocsd.ptm",
    "cstrace.render.ocsd.etmv4",
    "cstrace.render.ocsd.etmv3",
    "cstrace.protocols.ptm.packets",
    "cstrace.protocols.itm.boundary",
    "cstrace.protocols.itm.decoder",
    "cstrace.protocols.itm.reader",
)
"""The modules ``setup.py`` compiles, by their import names.

``isa/blocks.py``, ``isa/scan.py``, ``protocols/packet.py``,
``protocols/etmv4/packets.py``, ``protocols/etmv4/decoder.py``,
``protocols/etmv4/reader.py``, ``protocols/kit.py``, the PTM, ETMv3, ITM and
STM readers and decoders, ``protocols/itm/boundary.py``, ``capture/walk.py``
(the deformatter's frame walk) and ``rows.py`` have a
``.pxd`` beside them (extension types, typed loops). The others are compiled
as they are: the instruction classifiers and the memory map (called for each
new block walked), the listing's loop and printers of element text and of ITM,
STM, PTM, ETMv4/ETE and ETMv3 packets (``bits.py`` and ``render/ocsd``: a line of
text per packet and element; the ETMv4 printer compiled takes 0.36 to 0.55 s for
the 687775 packets of ``bugfix-exact-match``, 0.52 to 0.61 s from its source),
and the PTM packet classes (made for each packet the listing shows).

A module compiled without a ``.pxd`` keeps Python's semantics except where
Cython gives an expression a C type: the value of a ``bytes`` item, ``len()``.
Shifting such a value can overflow a C int; these modules keep byte values out
of shifts (``int.from_bytes``), and the test suite runs in both modes.
"""

STAMP = "_compiled.json"
"""The build stamp's file name, beside the package's ``__init__.py``: a JSON object
``{"modules": {hot module: source digest}}`` for every extension the build made."""

_ROOT = Path(__file__).resolve().parent
_choice: dict[str, bool] = {}
_WARNED = "CSTRACE_PURE_WARNED"
"""Set in the environment once the pure-Python warning was given (child processes skip it)."""
_installed = False
_stamps: dict[str, str] | None = None


def pure_requested() -> bool:
    """Whether ``CSTRACE_PURE`` asks for pure Python (set, and neither empty nor ``0``)."""
    return os.environ.get("CSTRACE_PURE", "") not in ("", "0")


def source_digest(source: Path) -> str:
    """The digest of a hot module's source: its ``.py`` and, if present, its ``.pxd``.

    ``setup.py`` records it for each extension it builds; an extension is used
    only while its module's source still has the recorded digest.
    """
    h = hashlib.sha256()
    for path in (source, source.with_suffix(".pxd")):
        if path.is_file():
            h.update(path.suffix.encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()


def _source(name: str) -> Path:
    """The ``.py`` file of hot module ``name``."""
    return _ROOT.joinpath(*name.split(".")[1:]).with_suffix(".py")


def _extension(name: str) -> Path | None:
    """The compiled extension of hot module ``name``, if one is installed beside its source."""
    src = _source(name)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = src.with_suffix(suffix)
        if path.is_file():
            return path
    return None


def _recorded() -> dict[str, str]:
    """The source digests the build stamp records, by hot module (empty without a stamp)."""
    global _stamps
    if _stamps is None:
        try:
            data = json.loads((_ROOT / STAMP).read_text(encoding="utf-8"))
            mods = data.get("modules", {}) if isinstance(data, dict) else {}
            _stamps = {str(k): str(v) for k, v in mods.items()} if isinstance(mods, dict) else {}
        except (OSError, ValueError):
            _stamps = {}
    return _stamps


def _fresh(name: str) -> bool:
    """Whether hot module ``name`` has an extension built from its present source."""
    if _extension(name) is None:
        return False
    src = _source(name)
    if not src.is_file():
        return True  # an installation with no sources: nothing to disagree with
    recorded = _recorded().get(name)
    return recorded is not None and recorded == source_digest(src)


def _use_extension(name: str) -> bool:
    """Whether hot module ``name`` is imported from its extension (decided once).

    All or nothing: the compiled modules share C types (a decoder reads the
    block walker's ``Block`` as a C struct), so unless every hot module has a
    fresh extension, and ``CSTRACE_PURE`` does not ask for pure Python, they
    all run from their sources.
    """
    use = _choice.get(name)
    if use is None:
        use = not pure_requested() and all(_fresh(n) for n in HOT_MODULES)
        for n in HOT_MODULES:
            _choice[n] = use
    return use


class _HotFinder:
    """A ``sys.meta_path`` finder that imports each hot module from the file chosen for it."""

    @staticmethod
    def find_spec(
        fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """The spec of a hot module (extension or source); ``None`` for any other module."""
        if fullname not in HOT_MODULES:
            return None
        ext = _extension(fullname)
        if _use_extension(fullname) and ext is not None:
            return importlib.util.spec_from_file_location(fullname, ext)
        src = _source(fullname)
        loader = importlib.machinery.SourceFileLoader(fullname, str(src))
        return importlib.util.spec_from_file_location(fullname, src, loader=loader)


def compiled_modules() -> dict[str, bool]:
    """For each hot module, whether it runs (or will run) compiled in this process."""
    result = {}
    for name in HOT_MODULES:
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            result[name] = not str(mod.__file__).endswith(".py")
        else:
            result[name] = _use_extension(name)
    return result


def compiled() -> bool:
    """Whether cstrace runs its hot loops compiled (every hot module from its extension)."""
    return all(compiled_modules().values())


def install() -> None:
    """Put the hot-module finder first on ``sys.meta_path``; warn once if pure by default."""
    global _installed
    if _installed:
        return
    _installed = True
    sys.meta_path.insert(0, _HotFinder())
    if pure_requested() or os.environ.get(_WARNED):
        return
    if not _use_extension(HOT_MODULES[0]):
        stale = [name for name in HOT_MODULES if _extension(name) is not None]
        missing = [name for name in HOT_MODULES if _extension(name) is None]
        why = (
            f"{len(missing)} of the hot modules not compiled, e.g. {missing[0]}"
            if missing
            else "a compiled module built from another version of its source (edited "
            "since the build?): " + next(name for name in stale if not _fresh(name))
        )
        warnings.warn(
            f"cstrace runs in pure Python ({why}): decoding is slower; reinstall with "
            "Cython and a C compiler at hand (pip install ., or pip install -e . in a "
            "checkout), or set CSTRACE_PURE=1 "
            "to choose pure Python and silence this warning",
            RuntimeWarning,
            stacklevel=3,
        )
        # Worker processes (--jobs, Dask) inherit the environment: they do not warn again.
        os.environ[_WARNED] = "1"


if __name__ == "cstrace._native":  # not when setup.py loads this file for its constants
    install()
