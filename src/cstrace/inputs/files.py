"""Safe access to the files of a snapshot or package, and files as :class:`~cstrace.trace.Blob`.

Every path named inside a metadata file is resolved against the folder the user
gave, and refused if it would lead outside it (``..``, absolute paths, symbolic
links pointing elsewhere). :class:`FileTree` is the one door through which the
input readers touch the file system, so a ZIP package (:mod:`.zipfiles`)
provides the same interface. :class:`TreeBlob` is one file of a tree as the
:class:`~cstrace.trace.Trace` model sees it; :class:`PathBlob` a file the user
named on the command line; :class:`BytesBlob` bytes already in memory;
:class:`SliceBlob` a part of another file (the AUX data inside a perf.data file).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Protocol

from cstrace.errors import SnapshotError

__all__ = [
    "BytesBlob",
    "DirTree",
    "FileTree",
    "PathBlob",
    "SliceBlob",
    "TreeBlob",
    "beneath",
    "safe_relative",
]


_NAME_MAX = 255
"""The longest file name (one path component, in bytes) a file system takes."""
_PATH_MAX = 4095
"""The longest path (in bytes) the system calls take."""


def safe_relative(name: str, *, path: str, line: int | None) -> PurePosixPath:
    """Check that ``name`` is a relative path that stays inside its folder."""
    text = name.strip().replace("\\", "/")
    if not text:
        raise SnapshotError("empty file name", path=path, line=line)
    if "\x00" in text:
        raise SnapshotError(
            f"file name {name!r} holds a NUL character; refused", path=path, line=line
        )
    pure = PurePosixPath(text)
    longest = max((len(os.fsencode(p)) for p in pure.parts), default=0)
    if longest > _NAME_MAX or len(os.fsencode(text)) > _PATH_MAX:
        raise SnapshotError(
            f"file name too long ({len(text)} characters): {text[:40]!r}...", path=path, line=line
        )
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


_MAX_LINKS = 40
"""Symbolic links followed in one path before it counts as a loop (as the kernel does)."""


def beneath(root: str | Path, name: str) -> Path | None:
    """The real path of ``name`` (a path named by an input file) inside folder ``root``;
    None when it leads outside it.

    ``..`` components and symbolic links are followed only while they stay inside
    ``root`` (whose own real path is trusted: the user named it), so nothing outside
    is ever looked at, not even with ``lstat``. A leading ``/`` counts from ``root``
    (a perf.data recording names ``/usr/lib/libc.so.6``); an absolute link target
    must lie inside ``root``. Parts that do not exist are kept as named (the caller
    finds no file there).
    """
    if "\x00" in name:
        return None
    try:
        base = os.path.realpath(root)
        given = os.path.abspath(root)
    except (OSError, ValueError):
        return None
    todo = name.replace("\\", "/").split("/")
    todo.reverse()
    cur: list[str] = []
    links = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not cur:
                return None
            cur.pop()
            continue
        path = os.path.join(base, *cur, part)
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            cur.append(part)
            continue
        except (OSError, ValueError):
            return None
        if not stat.S_ISLNK(mode):
            cur.append(part)
            continue
        links += 1
        if links > _MAX_LINKS:
            return None
        try:
            target = os.readlink(path)
        except OSError:
            return None
        if target.startswith("/"):
            # an absolute link: it must name a place inside the folder
            inside = [
                t for t in (base, given) if target == t or target.startswith(t.rstrip("/") + "/")
            ]
            if not inside:
                return None
            target = target[len(inside[0]) :]
            cur = []
        todo.extend(reversed(target.split("/")))
    return Path(base, *cur)


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
        self._reals: dict[str, Path] = {}
        """Each file's checked real path, resolved once (a snapshot names the same memory
        files for every core, and a capture is read block by block)."""

    def display(self, rel: PurePosixPath | str) -> str:
        """How to name this file in messages."""
        return str(self.root / str(rel))

    def _real(self, rel: PurePosixPath) -> Path:
        key = str(rel)
        real = self._reals.get(key)
        if real is None:
            real = beneath(self._real_root, key)
            if real is None:
                raise SnapshotError(
                    "path leads outside the snapshot folder (through a link); refused",
                    path=self.display(rel),
                )
            self._reals[key] = real
        return real

    def exists(self, rel: PurePosixPath) -> bool:
        """Whether the file exists (and is a regular file inside the folder)."""
        real = self._real(rel)
        try:
            return stat.S_ISREG(real.stat().st_mode)
        except FileNotFoundError:
            return False
        except (OSError, ValueError) as exc:
            raise SnapshotError(f"cannot read: {exc}", path=self.display(rel)) from None

    def size(self, rel: PurePosixPath) -> int:
        """Size of the file in bytes."""
        try:
            return self._real(rel).stat().st_size
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc.strerror}", path=self.display(rel)) from None

    def read_bytes(self, rel: PurePosixPath, offset: int = 0, length: int | None = None) -> bytes:
        """Read ``length`` bytes (all by default) from ``offset``."""
        return _read_file(self._real(rel), self.display(rel), offset, length)


def _read_file(p: Path, shown: str, offset: int, length: int | None) -> bytes:
    try:
        with open(p, "rb") as f:
            if offset:
                f.seek(offset)
            if length is None:
                return f.read()
            # Never ask for more than the file holds: a huge declared length must not
            # allocate a huge buffer.
            size = os.fstat(f.fileno()).st_size
            return f.read(max(0, min(length, size - offset)))
    except FileNotFoundError:
        raise SnapshotError("file not found", path=shown) from None
    except IsADirectoryError:
        raise SnapshotError("is a directory, expected a file", path=shown) from None
    except OSError as exc:
        raise SnapshotError(f"cannot read: {exc.strerror}", path=shown) from None


def _blocks_of(read: Callable[[int, int], bytes], size: int, block_size: int) -> Iterator[bytes]:
    offset = 0
    while offset < size:
        chunk = read(offset, min(block_size, size - offset))
        if not chunk:
            break
        yield chunk
        offset += len(chunk)


class TreeBlob:
    """One file of a :class:`FileTree` (a snapshot folder, a ZIP archive), read when needed."""

    __slots__ = ("rel", "tree")

    def __init__(self, tree: FileTree, rel: PurePosixPath) -> None:
        self.tree = tree
        self.rel = rel
        """The file's path inside its tree."""

    @property
    def name(self) -> str:
        """How to name the file in messages."""
        return self.tree.display(self.rel)

    def exists(self) -> bool:
        """Whether the tree holds the file."""
        return self.tree.exists(self.rel)

    def size(self) -> int:
        """Size in bytes."""
        return self.tree.size(self.rel)

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes (all by default) from ``offset``."""
        if length is not None:
            length = max(0, min(length, self.size() - offset))
        return self.tree.read_bytes(self.rel, offset, length)

    def blocks(self, block_size: int) -> Iterator[bytes]:
        """The file in consecutive blocks (one decompression pass for a ZIP member)."""
        sequential = getattr(self.tree, "iter_blocks", None)
        if sequential is not None:
            yield from sequential(self.rel, block_size)
            return
        yield from _blocks_of(self.read, self.size(), block_size)

    def __repr__(self) -> str:
        return f"TreeBlob({self.name!r})"


class PathBlob:
    """A file the user named (on the command line or through the API): a trusted path."""

    __slots__ = ("path",)

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def name(self) -> str:
        """The path as given."""
        return str(self.path)

    def exists(self) -> bool:
        """Whether the path names a regular file."""
        return self.path.is_file()

    def size(self) -> int:
        """Size in bytes."""
        try:
            return self.path.stat().st_size
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc.strerror}", path=self.name) from None

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes (all by default) from ``offset``."""
        return _read_file(self.path, self.name, offset, length)

    def blocks(self, block_size: int) -> Iterator[bytes]:
        """The file in consecutive blocks."""
        yield from _blocks_of(self.read, self.size(), block_size)

    def __repr__(self) -> str:
        return f"PathBlob({self.name!r})"


class BytesBlob:
    """Bytes already in memory, as a file named ``name``."""

    __slots__ = ("_data", "_name")

    def __init__(self, data: bytes, name: str = "<bytes>") -> None:
        self._data = bytes(data)
        self._name = name

    @property
    def name(self) -> str:
        """The name given."""
        return self._name

    def exists(self) -> bool:
        """Always there."""
        return True

    def size(self) -> int:
        """Size in bytes."""
        return len(self._data)

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes (all by default) from ``offset``."""
        end = len(self._data) if length is None else offset + max(0, length)
        return self._data[offset:end]

    def blocks(self, block_size: int) -> Iterator[bytes]:
        """The bytes in consecutive blocks."""
        yield from _blocks_of(self.read, len(self._data), block_size)

    def __repr__(self) -> str:
        return f"BytesBlob({self._name!r}, {len(self._data)} bytes)"


class SliceBlob:
    """``length`` bytes of another file from ``offset``, as a file of their own."""

    __slots__ = ("_name", "base", "length", "offset")

    def __init__(self, base: PathBlob | TreeBlob | BytesBlob, offset: int, length: int) -> None:
        self.base = base
        self.offset = offset
        """Where the part begins in the file."""
        self.length = length
        self._name = f"{base.name}@{offset:#x}"

    @property
    def name(self) -> str:
        """The file's name and where the part begins: ``rec.data@0x26d8``."""
        return self._name

    def exists(self) -> bool:
        """Whether the file is there."""
        return self.base.exists()

    def size(self) -> int:
        """Size in bytes of the part."""
        return self.length

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes (all by default) from ``offset`` of the part."""
        offset = max(0, min(offset, self.length))
        left = self.length - offset
        want = left if length is None else max(0, min(length, left))
        return self.base.read(self.offset + offset, want)

    def blocks(self, block_size: int) -> Iterator[bytes]:
        """The part in consecutive blocks."""
        yield from _blocks_of(self.read, self.length, block_size)

    def __repr__(self) -> str:
        return f"SliceBlob({self.base.name!r}, {self.offset:#x}, {self.length})"
