"""Re-exported names imported on first use (PEP 562), for the packages that gather an API.

``cstrace``, ``cstrace.analyses``, ``cstrace.inputs`` and
``cstrace.inputs.perfdata`` re-export names defined in their modules. Importing
those modules eagerly made every ``import cstrace`` (and so every ``cstrace``
command, ``--help`` included) load NumPy, pyelftools, every input adapter and
every analysis. Instead each of these packages lists, per defining module, the
names it re-exports, and :func:`lazy_exports` gives it the module-level
``__getattr__`` and ``__dir__`` that import a name's module the first time the
name is asked for (``from cstrace import Session`` or ``cstrace.Session``) and
keep the value in the package's namespace, so that later look-ups are plain
attribute reads. ``dir(package)`` lists the names not imported yet.

A submodule asked for as an attribute (``cstrace.decode`` after ``import
cstrace`` alone) is imported too, as it was when the package imported it.

Type checkers do not see these functions: each package imports the same names
under ``if TYPE_CHECKING:``, and ``tests/unit/test_startup.py`` checks that the
two lists agree. Standard library only.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, lazy_from: Mapping[str, Sequence[str]], public: Sequence[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, which re-exports ``lazy_from``.

    ``lazy_from`` maps each defining module (its full name) to the names
    ``package`` re-exports from it; ``public`` is the package's ``__all__``.
    """
    where = {name: module for module, names in lazy_from.items() for name in names}

    def __getattr__(name: str) -> object:
        """The re-exported ``name``, imported now (or submodule ``name``)."""
        module = where.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
            setattr(sys.modules[package], name, value)
            return value
        if not name.startswith("__"):
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        """The package's names, with the re-exported ones not imported yet."""
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__
