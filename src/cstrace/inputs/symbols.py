"""Finding the program images a recording names, by build ID and by name, on this machine.

Input: an image's name as the recording gives it (its path on the traced
system, ``/data/local/tmp/app``) and its build ID, and where to look
(:class:`SymbolPaths`):

- symbol folders (``--symdir DIR``), searched recursively: first the files with
  the image's file name, then, if none has the build ID, every ELF file;
- perf's build-ID cache (``--buildid-dir``; by default ``$PERF_BUILDID_DIR`` or
  ``~/.debug``): ``.build-id/<first 2 hex digits>/<the rest>``, a link to the
  file or to a folder holding ``elf``, and ``<path>/<build ID>/elf``;
- a root folder the traced system's files are under (``--symfs ROOT``):
  ``ROOT/<path>``.

A kernel module that ``perf record`` names by its module name (``[rq_stats]``,
when perf did not find its file on the traced system) is looked for as
``rq_stats.ko`` (and with ``-`` for ``_``, as module file names may have it).

Output: :meth:`ImageSearch.find` gives a :class:`FoundImage` (the file, where it
was found, its build ID) or None. With a build ID, only a file with that build
ID is taken; one with the right name but another build ID is remembered
(:attr:`ImageSearch.mismatches`) so the user can be told. Build IDs are read
from the ELF notes directly (:func:`read_build_id`), without loading the file.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path

from cstrace.inputs.files import PathBlob, beneath
from cstrace.trace import Image, Origin, Trace

__all__ = [
    "FoundImage",
    "ImageSearch",
    "SymbolPaths",
    "add_found_images",
    "default_buildid_dir",
    "read_build_id",
    "same_build_id",
    "trim_build_id",
]

_MAX_FILES = 200_000
_NT_GNU_BUILD_ID = 3
_PT_NOTE = 4
_SHT_NOTE = 7


def trim_build_id(raw: bytes) -> bytes:
    """A build ID from a 20-byte field without its zero padding (16 or 8 bytes when padded).

    perf and simpleperf store build IDs in 20-byte fields; a 16-byte (MD5,
    UUID-style) or 8-byte (xxHash) ID is padded with zeros.
    """
    if len(raw) == 20 and not any(raw[16:]):
        raw = raw[:16]
        if not any(raw[8:]):
            raw = raw[:8]
    return raw


def same_build_id(a: bytes, b: bytes) -> bool:
    """Whether two build IDs are the same, one of them possibly zero-padded to 20 bytes."""
    if a == b:
        return True
    if not a or not b or max(len(a), len(b)) > 20:
        return False
    return a.ljust(20, b"\0") == b.ljust(20, b"\0")


def _key(build_id: bytes) -> bytes:
    """A build ID padded as perf pads it, so padded and unpadded forms meet."""
    return build_id.ljust(20, b"\0") if len(build_id) <= 20 else build_id


def default_buildid_dir() -> Path | None:
    """perf's build-ID cache folder: ``$PERF_BUILDID_DIR``, else ``~/.debug`` (None if neither)."""
    env = os.environ.get("PERF_BUILDID_DIR")
    if env:
        return Path(env)
    home = os.environ.get("HOME")
    return Path(home) / ".debug" if home else None


def _notes(data: bytes, little: bool) -> bytes | None:
    """The GNU build ID among the notes ``data``."""
    end = "<" if little else ">"
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from(f"{end}III", data, pos)
        name_at = pos + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        nxt = desc_at + ((descsz + 3) & ~3)
        if nxt > len(data) or nxt <= pos:
            return None
        if ntype == _NT_GNU_BUILD_ID and data[name_at : name_at + namesz].rstrip(b"\0") == b"GNU":
            return bytes(data[desc_at : desc_at + descsz])
        pos = nxt
    return None


def read_build_id(path: str | Path) -> bytes | None:
    """The GNU build ID of the ELF file at ``path`` (None: not ELF, no ID, unreadable)."""
    try:
        with open(path, "rb") as f:
            ident = f.read(64)
            if len(ident) < 52 or ident[:4] != b"\x7fELF":
                return None
            is64 = ident[4] == 2
            little = ident[5] != 2
            e = "<" if little else ">"
            size = os.fstat(f.fileno()).st_size
            if is64:
                phoff, shoff = struct.unpack_from(f"{e}QQ", ident, 32)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(f"{e}HHHH", ident, 54)
            else:
                phoff, shoff = struct.unpack_from(f"{e}II", ident, 28)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(f"{e}HHHH", ident, 42)
            chunks: list[tuple[int, int]] = []
            if phoff and 0 < phnum <= 4096 and phentsize >= (56 if is64 else 32):
                f.seek(phoff)
                table = f.read(phentsize * phnum)
                for k in range(len(table) // phentsize):
                    at = k * phentsize
                    (ptype,) = struct.unpack_from(f"{e}I", table, at)
                    if ptype != _PT_NOTE:
                        continue
                    if is64:
                        off, _v, _p, filesz = struct.unpack_from(f"{e}QQQQ", table, at + 8)
                    else:
                        off, _v, _p, filesz = struct.unpack_from(f"{e}IIII", table, at + 4)
                    chunks.append((off, filesz))
            if not chunks and shoff and 0 < shnum <= 65535 and shentsize >= (64 if is64 else 40):
                f.seek(shoff)
                table = f.read(shentsize * shnum)
                for k in range(len(table) // shentsize):
                    at = k * shentsize
                    (stype,) = struct.unpack_from(f"{e}I", table, at + 4)
                    if stype != _SHT_NOTE:
                        continue
                    if is64:
                        off, sz = struct.unpack_from(f"{e}QQ", table, at + 24)
                    else:
                        off, sz = struct.unpack_from(f"{e}II", table, at + 16)
                    chunks.append((off, sz))
            for off, sz in chunks:
                if off + sz > size or sz > 1 << 20:
                    continue
                f.seek(off)
                found = _notes(f.read(sz), little)
                if found:
                    return found
    except (OSError, struct.error):
        return None
    return None


def _module_name(name: str) -> str | None:
    """``rq_stats`` of a kernel module named as perf names one it found no file for,
    ``[rq_stats]``; None for other names (``[kernel.kallsyms]``, ``[vdso]``, paths)."""
    if len(name) > 2 and name[0] == "[" and name[-1] == "]":
        inner = name[1:-1]
        if inner and all(c.isalnum() or c in "_-" for c in inner) and inner not in _NOT_MODULES:
            return inner
    return None


_NOT_MODULES = frozenset({"vdso", "vsyscall", "vectors", "sigpage", "stack", "heap", "uprobes"})


@dataclass(frozen=True)
class SymbolPaths:
    """Where to look for images: symbol folders, a file system root, perf's build-ID cache."""

    symdirs: tuple[str, ...] = ()
    symfs: str | None = None
    buildid_dir: str | None = None
    """perf's build-ID cache; None: the default (:func:`default_buildid_dir`)."""
    files: tuple[str, ...] = ()
    """Files named one by one (``--image`` for a recording): looked at first, and taken when
    their build ID is the one wanted (or, for an image without one, their name)."""
    vmlinux: str | None = None
    """The kernel image (``--vmlinux``), whatever its file name: taken for the kernel when
    its build ID is the one the recording gives (or the recording gives none)."""
    kcore: str | None = None
    """A copy of the kernel's text as ``perf record --kcore`` makes it (``--kcore``): an ELF
    core file whose segments are mapped at their kernel addresses in every process. A
    ``perf record --kcore`` folder's own ``kcore_dir/kcore`` is used without it."""

    def __bool__(self) -> bool:
        return bool(
            self.symdirs
            or self.symfs
            or self.buildid_dir
            or self.files
            or self.vmlinux
            or self.kcore
        )


@dataclass(frozen=True)
class FoundImage:
    """A file found for an image: where it is, how it was found, its build ID."""

    path: Path
    how: str
    """``--image``, ``--vmlinux``, ``symdir``, ``build-id cache``, ``symfs`` or ``kcore`` (the
    kernel's text, or a module's, in a recording's kcore copy)."""
    build_id: bytes | None


@dataclass
class ImageSearch:
    """Looks for images in the places of :class:`SymbolPaths` (see the module docstring)."""

    paths: SymbolPaths = field(default_factory=SymbolPaths)
    mismatches: dict[str, list[tuple[Path, bytes | None]]] = field(default_factory=dict)
    """Files with an image's name but another build ID (or none), by image name."""

    def __post_init__(self) -> None:
        self._by_name: dict[str, list[Path]] | None = None
        self._ids: dict[Path, bytes | None] = {}
        self._all_scanned = False
        self._by_id: dict[bytes, Path] = {}

    def _build_id(self, path: Path) -> bytes | None:
        if path not in self._ids:
            self._ids[path] = read_build_id(path)
        return self._ids[path]

    def _index(self) -> dict[str, list[Path]]:
        """Every regular file under the symbol folders, by file name (built once)."""
        if self._by_name is None:
            self._by_name = {}
            count = 0
            for top in self.paths.symdirs:
                for root, dirs, files in os.walk(top):
                    dirs.sort()
                    for name in sorted(files):
                        p = Path(root) / name
                        if p.is_file():
                            self._by_name.setdefault(name, []).append(p)
                            count += 1
                            if count >= _MAX_FILES:
                                return self._by_name
        return self._by_name

    def _accept(self, name: str, path: Path, build_id: bytes | None, how: str) -> FoundImage | None:
        have = self._build_id(path)
        if build_id is None or (have is not None and same_build_id(build_id, have)):
            return FoundImage(path, how, have)
        seen = self.mismatches.setdefault(name, [])
        if all(p != path for p, _ in seen):
            seen.append((path, have))
        return None

    def find(self, name: str, build_id: bytes | None) -> FoundImage | None:
        """The file for image ``name`` (a path on the traced system) with ``build_id``."""
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        module = _module_name(name)
        if module is not None and self.paths.symdirs:
            index = self._index()
            for file_name in dict.fromkeys((f"{module}.ko", f"{module.replace('_', '-')}.ko")):
                for p in index.get(file_name, []):
                    got = self._accept(name, p, build_id, "symdir")
                    if got is not None:
                        return got
        if name == "vmlinux" and self.paths.vmlinux:
            p = Path(self.paths.vmlinux)
            got = self._accept(name, p, build_id, "--vmlinux") if p.is_file() else None
            if got is not None:
                return got
        for f in self.paths.files:
            p = Path(f)
            if build_id is None and p.name != base:
                continue
            got = self._accept(name, p, build_id, "--image") if p.is_file() else None
            if got is not None:
                return got
        if self.paths.symdirs and base:
            for p in self._index().get(base, []):
                got = self._accept(name, p, build_id, "symdir")
                if got is not None:
                    return got
        if build_id:
            got = self._in_cache(name, build_id)
            if got is not None:
                return got
        if self.paths.symfs and name.startswith("/"):
            # (a name from a recording: it stays inside the folder, '..' and links too)
            inside = beneath(self.paths.symfs, name)
            if inside is not None and inside.is_file():
                got = self._accept(name, inside, build_id, "symfs")
                if got is not None:
                    return got
        if build_id and self.paths.symdirs:
            return self._scan_for(build_id)
        return None

    def _in_cache(self, name: str, build_id: bytes) -> FoundImage | None:
        top = Path(self.paths.buildid_dir) if self.paths.buildid_dir else default_buildid_dir()
        if top is None or not top.is_dir():
            return None
        for bid in {build_id.hex(), build_id.ljust(20, b"\0").hex()}:
            named = [f".build-id/{bid[:2]}/{bid[2:]}"]
            if name.startswith("/"):
                named.append(f"{name}/{bid}")
            for n in named:
                # (names from a recording: they stay inside the folder, '..' and links too)
                for p in (beneath(top, f"{n}/{leaf}") for leaf in ("elf", "debug", "")):
                    if p is not None and p.is_file():
                        have = self._build_id(p)
                        if have is not None and same_build_id(build_id, have):
                            return FoundImage(p, "build-id cache", have)
        return None

    def _scan_for(self, build_id: bytes) -> FoundImage | None:
        """Any ELF file under the symbol folders with ``build_id`` (all are read once)."""
        if not self._all_scanned:
            self._all_scanned = True
            for paths in self._index().values():
                for p in paths:
                    have = self._build_id(p)
                    if have is not None:
                        self._by_id.setdefault(_key(have), p)
        found = self._by_id.get(_key(build_id))
        return FoundImage(found, "symdir", self._build_id(found)) if found is not None else None


def add_found_images(trace: Trace, paths: SymbolPaths) -> Trace:
    """``trace`` with the images its event log names and it lacks, where ``paths`` has them.

    An image counts as present when one of the trace's images has its name or
    file name, or its build ID.
    """
    events = trace.events
    if events is None or not paths:
        return trace
    from cstrace.memory.events import ProcessEvent

    have_names = set()
    have_ids = set()
    for image in trace.images:
        have_names.add(image.name)
        have_names.add(image.file.name.replace("\\", "/").rsplit("/", 1)[-1])
        if image.uuid:
            have_ids.add(image.uuid.lower())
    search = ImageSearch(paths)
    added: list[Image] = []
    seen: set[tuple[str, str | None]] = set()
    for e in events.events:
        if not isinstance(e, ProcessEvent) or e.image is None:
            continue
        key = (e.image, e.uuid)
        base = e.image.replace("\\", "/").rsplit("/", 1)[-1]
        if key in seen or (e.uuid and e.uuid.lower() in have_ids) or base in have_names:
            continue
        seen.add(key)
        raw_id = None
        if e.uuid:
            try:
                raw_id = bytes.fromhex("".join(c for c in e.uuid if c not in "-{} "))
            except ValueError:
                raw_id = None
        found = search.find(e.image, raw_id)
        if found is not None:
            added.append(
                Image(PathBlob(found.path), e.image, uuid=e.uuid, origin=Origin(str(found.path)))
            )
    return replace(trace, images=[*trace.images, *added]) if added else trace
