"""ZIP archives read in place, safely: the :class:`~cstrace.inputs.files.FileTree` of a ZIP.

Input: a ZIP file (a trace package, or a snapshot folder zipped). Output: a
:class:`ZipTree`, read-only access to its members by relative name.

Every entry is checked when the archive is opened: names must be relative
paths that stay inside the archive (no ``..``, no absolute or drive paths, no
links, no NUL), entries are neither encrypted nor compressed with an unknown
method, and declared sizes and entry counts are bounded (:class:`Limits`); a
damaged archive gives a clear error naming it. :meth:`ZipTree.extract_to`
writes entries to a folder under the same rules.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cstrace.errors import SnapshotError

__all__ = ["Limits", "ZipTree", "is_zip"]


@dataclass(frozen=True)
class Limits:
    """Bounds on what a ZIP archive may declare; anything beyond is refused when it is opened."""

    max_entry_bytes: int = 2 << 30
    max_total_bytes: int = 16 << 30
    max_entries: int = 100_000
    max_name_chars: int = 1024


_DRIVE = re.compile(r"^[A-Za-z]:")
_SUPPORTED = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


def _entry_name(raw: str, archive: str) -> str | None:
    """The checked relative name of an entry (None for a folder entry); refuses unsafe names."""
    if "\x00" in raw:
        raise SnapshotError(f"entry {raw!r}: NUL in name; refused", path=archive)
    text = raw.replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text):
        raise SnapshotError(f"entry {raw!r} has an absolute path; refused", path=archive)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise SnapshotError(
            f"entry {raw!r} leads outside the archive folder ('..'); refused", path=archive
        )
    if not parts:
        return None
    if text.endswith("/"):
        return None
    return "/".join(parts)


class ZipTree:
    """Read-only access to the files of a ZIP archive (the :class:`FileTree` interface).

    ``prefix`` makes a folder inside the archive the root of the tree.
    """

    def __init__(self, path: str | Path, *, prefix: str = "", limits: Limits | None = None) -> None:
        self.path = Path(path)
        self.prefix = prefix.strip("/")
        self.limits = limits or Limits()
        name = str(self.path)
        try:
            self._zip = zipfile.ZipFile(self.path)
        except FileNotFoundError:
            raise SnapshotError("file not found", path=name) from None
        except IsADirectoryError:
            raise SnapshotError("is a directory, expected a ZIP file", path=name) from None
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
            raise SnapshotError(f"not a valid ZIP archive ({exc})", path=name) from None
        except NotImplementedError as exc:  # "zip file version 8.4": a feature not read
            raise SnapshotError(f"unsupported ZIP archive ({exc})", path=name) from None
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc.strerror}", path=name) from None
        self._entries: dict[str, zipfile.ZipInfo] = {}
        try:
            self._check()
        except SnapshotError:
            self._zip.close()
            raise

    def _check(self) -> None:
        archive = str(self.path)
        lim = self.limits
        infos = self._zip.infolist()
        if len(infos) > lim.max_entries:
            raise SnapshotError(
                f"archive has {len(infos)} entries (limit {lim.max_entries}); refused",
                path=archive,
            )
        total = 0
        for info in infos:
            if len(info.filename) > lim.max_name_chars:
                raise SnapshotError(
                    f"entry name of {len(info.filename)} characters; refused", path=archive
                )
            name = _entry_name(info.filename, archive)
            mode = (info.external_attr >> 16) & 0xFFFF
            if stat.S_ISLNK(mode):
                raise SnapshotError(
                    f"entry {info.filename!r} is a symbolic link; refused", path=archive
                )
            if name is None or info.is_dir():
                continue
            if info.flag_bits & 0x1:
                raise SnapshotError(f"entry {info.filename!r} is encrypted", path=archive)
            if info.compress_type not in _SUPPORTED:
                raise SnapshotError(
                    f"entry {info.filename!r} uses unsupported compression method "
                    f"{info.compress_type}",
                    path=archive,
                )
            if info.file_size > lim.max_entry_bytes or info.file_size < 0:
                raise SnapshotError(
                    f"entry {info.filename!r} declares {info.file_size} bytes "
                    f"(limit {lim.max_entry_bytes}); refused",
                    path=archive,
                )
            total += info.file_size
            if total > lim.max_total_bytes:
                raise SnapshotError(
                    f"archive declares more than {lim.max_total_bytes} bytes in total; refused",
                    path=archive,
                )
            key = name.lower()
            if key in self._entries:
                raise SnapshotError(
                    f"entry {info.filename!r} appears twice in the archive", path=archive
                )
            self._entries[key] = info

    def close(self) -> None:
        """Close the archive."""
        self._zip.close()

    def names(self) -> list[str]:
        """Relative names of the files under the tree's root, in archive order."""
        pre = self.prefix.lower() + "/" if self.prefix else ""
        out = []
        for key, info in self._entries.items():
            if key.startswith(pre):
                out.append(info.filename.replace("\\", "/").lstrip("./")[len(pre) :])
        return out

    def _info(self, rel: PurePosixPath | str) -> zipfile.ZipInfo | None:
        text = str(rel)
        full = f"{self.prefix}/{text}" if self.prefix else text
        name = _entry_name(full, str(self.path))
        if name is None:
            return None
        return self._entries.get(name.lower())

    def display(self, rel: PurePosixPath | str) -> str:
        """How to name this file in messages: ``archive.zip/inner/path``."""
        inner = f"{self.prefix}/{rel}" if self.prefix else str(rel)
        return f"{self.path}/{inner}"

    def exists(self, rel: PurePosixPath) -> bool:
        """Whether the archive holds this file."""
        return self._info(rel) is not None

    def size(self, rel: PurePosixPath) -> int:
        """Declared size of the file in bytes."""
        info = self._info(rel)
        if info is None:
            raise SnapshotError("file not found in the archive", path=self.display(rel))
        return info.file_size

    def read_bytes(self, rel: PurePosixPath, offset: int = 0, length: int | None = None) -> bytes:
        """Read ``length`` bytes (all by default) from ``offset`` of an archive member."""
        info = self._info(rel)
        shown = self.display(rel)
        if info is None:
            raise SnapshotError("file not found in the archive", path=shown)
        if offset < 0 or (length is not None and length < 0):
            raise SnapshotError("negative offset or length", path=shown)
        want = info.file_size - offset if length is None else length
        want = max(0, min(want, info.file_size - offset))
        try:
            with self._zip.open(info) as f:
                if offset:
                    f.seek(offset)
                data = f.read(want)
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
            raise SnapshotError(f"damaged archive member ({exc})", path=shown) from None
        except RuntimeError as exc:  # encrypted member
            raise SnapshotError(f"cannot read archive member ({exc})", path=shown) from None
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc}", path=shown) from None
        return data

    def iter_blocks(self, rel: PurePosixPath, block_size: int) -> Iterator[bytes]:
        """Read an archive member from start to end in blocks (one decompression pass)."""
        info = self._info(rel)
        shown = self.display(rel)
        if info is None:
            raise SnapshotError("file not found in the archive", path=shown)
        try:
            with self._zip.open(info) as f:
                while True:
                    chunk = f.read(block_size)
                    if not chunk:
                        return
                    yield chunk
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
            raise SnapshotError(f"damaged archive member ({exc})", path=shown) from None
        except RuntimeError as exc:  # encrypted member
            raise SnapshotError(f"cannot read archive member ({exc})", path=shown) from None
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc}", path=shown) from None

    def extract_to(self, dest: str | Path) -> list[Path]:
        """Write every file of the tree under folder ``dest``; returns the paths written.

        Names were checked when the archive was opened; each target is checked
        again to be inside ``dest`` once resolved (a link already in ``dest``
        cannot redirect it).
        """
        root = Path(dest)
        root.mkdir(parents=True, exist_ok=True)
        real_root = Path(os.path.realpath(root))
        written: list[Path] = []
        for name in self.names():
            target = root / name
            real_parent = Path(os.path.realpath(target.parent))
            if real_parent != real_root and real_root not in real_parent.parents:
                raise SnapshotError(
                    f"entry {name!r} would be written outside {root}; refused", path=str(self.path)
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                raise SnapshotError(f"{target} is a symbolic link; refused", path=str(self.path))
            rel = PurePosixPath(name)
            info = self._info(rel)
            assert info is not None
            with open(target, "wb") as out:
                pos = 0
                step = 16 << 20
                while pos < info.file_size:
                    chunk = self.read_bytes(rel, pos, step)
                    if not chunk:
                        break
                    out.write(chunk)
                    pos += len(chunk)
            written.append(target)
        return written


def is_zip(path: object) -> bool:
    """Whether ``path`` names a ZIP archive."""
    try:
        return zipfile.is_zipfile(str(path))
    except OSError:
        return False
