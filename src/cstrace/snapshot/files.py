"""Safe access to the files of a snapshot or package.

Every path named inside a metadata file is resolved against the folder the user
gave, and refused if it would lead outside it (``..``, absolute paths, symbolic
links pointing elsewhere). :class:`FileTree` is the one door through which the
snapshot reader touches the file system, so a ZIP package can provide the same
interface.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Protocol

from cstrace.errors import SnapshotError

__all__ = ["DirTree", "FileTree", "safe_relative"]


def safe_relative(name: str, *, path: str, line: int | None) -> PurePosixPath:
    """Check that ``name`` is a relative path that stays inside its folder."""
    text = name.strip().replace("\\", "/")
    if not text:
        raise SnapshotError("empty file name", path=path, line=line)
    pure = PurePosixPath(text)
    if pure.is_absolute() or (len(text) > 1 and text[1] == ":"):
        raise SnapshotError(f"absolute path {name!r} refused", path=path, line=line)
    depth = 0
    for part in pure.parts:
        if part == "..":
            depth -= 1
        elif part not in ("", "."):
            depth += 1
        if depth < 0:
            raise SnapshotError(
                f"path {name!r} leads outside the snapshot folder; refused", path=path, line=line
            )
    return pure


class FileTree(Protocol):
    """Read-only access to the files of a snapshot or package, by relative path."""

    def display(self, rel: PurePosixPath | str) -> str:
        """How to name this file in messages."""
        ...

    def exists(self, rel: PurePosixPath) -> bool:
        """Whether the file exists."""
        ...

    def size(self, rel: PurePosixPath) -> int:
        """Size of the file in bytes."""
        ...

    def read_bytes(self, rel: PurePosixPath, offset: int = 0, length: int | None = None) -> bytes:
        """Read ``length`` bytes (all by default) from ``offset``."""
        ...


class DirTree:
    """A snapshot folder on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._real_root = Path(os.path.realpath(root))

    def display(self, rel: PurePosixPath | str) -> str:
        """How to name this file in messages."""
        return str(self.root / str(rel))

    def _real(self, rel: PurePosixPath) -> Path:
        real = Path(os.path.realpath(self.root / str(rel)))
        if real != self._real_root and self._real_root not in real.parents:
            raise SnapshotError(
                "path leads outside the snapshot folder (through a link); refused",
                path=self.display(rel),
            )
        return real

    def exists(self, rel: PurePosixPath) -> bool:
        """Whether the file exists (and is a regular file inside the folder)."""
        return self._real(rel).is_file()

    def size(self, rel: PurePosixPath) -> int:
        """Size of the file in bytes."""
        try:
            return self._real(rel).stat().st_size
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc.strerror}", path=self.display(rel)) from None

    def read_bytes(self, rel: PurePosixPath, offset: int = 0, length: int | None = None) -> bytes:
        """Read ``length`` bytes (all by default) from ``offset``."""
        real = self._real(rel)
        try:
            with open(real, "rb") as f:
                if offset:
                    f.seek(offset)
                return f.read() if length is None else f.read(length)
        except FileNotFoundError:
            raise SnapshotError("file not found", path=self.display(rel)) from None
        except IsADirectoryError:
            raise SnapshotError("is a directory, expected a file", path=self.display(rel)) from None
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc.strerror}", path=self.display(rel)) from None
