"""Trace packages (metadata requirements §6.4): a directory or ZIP archive with ``contents.ini``.

Input: a package folder or ZIP file. ``contents.ini`` locates the trace
metadata (the INI format of §6.3.1, :mod:`cstrace.snapshot.metadata`), the
trace buffer files, memory contents, program images (ELF) and the system event
log (:mod:`cstrace.memory.spaces`)::

    [trace]
    metadata = trace.ini
    buffer0 = cluster0.data
    buffer1 = cluster1.data
    events = system-event-log

Output: a :class:`Package`, a :class:`~cstrace.snapshot.model.Snapshot` that the
decode pipeline uses like any snapshot, which also builds each core's code
memory from images and the event log (:meth:`Package.code_memory`).

:func:`open_trace_input` opens whatever the user names: a DS-5 snapshot folder
or ``snapshot.ini``, a package folder, or a ZIP of either. :func:`write_package`
turns a snapshot into a package ZIP that decodes the same.

ZIP archives are read in place through :class:`ZipTree`, which checks every
entry when the archive is opened: names must be relative paths that stay inside
the archive (no ``..``, no absolute or drive paths, no links), declared sizes
and entry counts are bounded, and a damaged archive gives a clear error naming
it. :meth:`ZipTree.extract_to` writes entries to a folder under the same rules.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cstrace.errors import SnapshotError
from cstrace.memory.elf import ElfImage, format_uuid, load_elf, uuid_matches
from cstrace.memory.image import MemoryMap, MemoryRegion, mem_space_from_name
from cstrace.memory.spaces import (
    CONTEXTIDR_MODES,
    AddressSpaces,
    EventLog,
    PatchEvent,
    ProcessEvent,
    StaticMapping,
    TraceEvent,
    flatten_regions,
    parse_event_log,
)
from cstrace.snapshot.files import DirTree, FileTree, safe_relative
from cstrace.snapshot.ini import IniFile, IniSection
from cstrace.snapshot.metadata import (
    BUFFER_FORMATS,
    TraceMetadata,
    family_of,
    format_metadata,
    parse_metadata,
    parse_metadata_text,
    source_trace_id,
    trace_id_register,
)
from cstrace.snapshot.model import (
    Device,
    MemoryDump,
    Register,
    Snapshot,
    TraceBuffer,
    TraceSource,
    parse_int,
)
from cstrace.snapshot.reader import load_snapshot

__all__ = [
    "CONTENTS",
    "Extras",
    "ImageSpec",
    "Limits",
    "Package",
    "PackageSummary",
    "RawOptions",
    "ZipTree",
    "add_input_options",
    "capture_package",
    "is_zip",
    "open_from_args",
    "open_trace_input",
    "package_command",
    "read_package",
    "with_extras",
    "write_package",
]

CONTENTS = "contents.ini"
_SNAPSHOT_INI = "snapshot.ini"
_GLOBAL_MEMORY = "package_memory"


# --- ZIP archives -------------------------------------------------------------------------


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


class HostFiles:
    """A :class:`FileTree` over files the user named on the command line (trusted paths)."""

    def __init__(self) -> None:
        self._files: dict[str, Path] = {}

    def add(self, path: str | Path) -> PurePosixPath:
        """Register a file; returns the name to use for it in the tree."""
        p = Path(path)
        name = f"{len(self._files)}/{p.name}"
        self._files[name] = p
        return PurePosixPath(name)

    def display(self, rel: PurePosixPath | str) -> str:
        """The file's own path."""
        p = self._files.get(str(rel))
        return str(p) if p is not None else str(rel)

    def exists(self, rel: PurePosixPath) -> bool:
        """Whether the file exists."""
        p = self._files.get(str(rel))
        return p is not None and p.is_file()

    def size(self, rel: PurePosixPath) -> int:
        """Size of the file in bytes."""
        p = self._files.get(str(rel))
        if p is None:
            raise SnapshotError("file not found", path=str(rel))
        try:
            return p.stat().st_size
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc.strerror}", path=str(p)) from None

    def read_bytes(self, rel: PurePosixPath, offset: int = 0, length: int | None = None) -> bytes:
        """Read ``length`` bytes (all by default) from ``offset``."""
        p = self._files.get(str(rel))
        if p is None:
            raise SnapshotError("file not found", path=str(rel))
        try:
            with open(p, "rb") as f:
                if offset:
                    f.seek(offset)
                return f.read() if length is None else f.read(length)
        except FileNotFoundError:
            raise SnapshotError("file not found", path=str(p)) from None
        except IsADirectoryError:
            raise SnapshotError("is a directory, expected a file", path=str(p)) from None
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc.strerror}", path=str(p)) from None


# --- the package model --------------------------------------------------------------------


@dataclass(frozen=True)
class ImageSpec:
    """A program image of the package (``[image_N]``): where it goes and what it should be."""

    file: PurePosixPath
    name: str
    base: int | None = None
    uuid: str | None = None
    core: str | None = None
    pid: int | None = None
    space: str = ""
    path: str = ""
    line: int = 0


@dataclass
class Package(Snapshot):
    """A snapshot read from a trace package, with its images and system event log."""

    images: list[ImageSpec] = field(default_factory=list)
    events: EventLog | None = None
    contextidr: str | None = None
    _loaded: dict[str, ElfImage | bytes] = field(default_factory=dict)
    _spaces: dict[str, AddressSpaces] = field(default_factory=dict)

    def load_image(self, spec: ImageSpec) -> ElfImage | bytes:
        """The image of ``spec``: an ELF image, or raw bytes for any other file (cached)."""
        key = str(spec.file)
        got = self._loaded.get(key)
        if got is None:
            if not self.tree.exists(spec.file):
                raise SnapshotError(
                    f"image file {self.tree.display(spec.file)} not found",
                    path=spec.path or None,
                    line=spec.line or None,
                )
            data = self.tree.read_bytes(spec.file)
            got = load_elf(data, self.tree.display(spec.file)) if data[:4] == b"\x7fELF" else data
            if isinstance(got, ElfImage) and spec.uuid and not uuid_matches(spec.uuid, got.uuid):
                have = format_uuid(got.build_id) if got.build_id else "no build ID"
                self.warnings.append(
                    f"{spec.path}: line {spec.line}: image {got.name} has {have} but "
                    f"{spec.uuid} is expected; decoding may be wrong"
                )
            self._loaded[key] = got
        return got

    def _in_log(self, spec: ImageSpec) -> bool:
        """Whether the event log names this image (by name, file name or UUID)."""
        if self.events is None:
            return False
        names = {spec.name, str(spec.file), spec.file.name}
        for e in self.events.events:
            if isinstance(e, ProcessEvent):
                if e.image is not None:
                    base = e.image.replace("\\", "/").rsplit("/", 1)[-1]
                    if e.image in names or base in names:
                        return True
                if e.uuid and spec.uuid and uuid_matches(e.uuid, spec.uuid):
                    return True
            elif isinstance(e, PatchEvent):
                if (e.file or e.ident) in names:
                    return True
        return False

    def _images_for(self, core: Device | None) -> list[ImageSpec]:
        name = core.name if core is not None else None
        return [i for i in self.images if i.core is None or i.core == name]

    def resolve_image(
        self, name: str | None, uuid: str | None, where: str, line: int
    ) -> ElfImage | bytes | None:
        """Find an image the event log names, by UUID (build ID) or by name or file path."""
        if uuid:
            for spec in self.images:
                if spec.uuid and uuid_matches(uuid, spec.uuid):
                    return self.load_image(spec)
            for spec in self.images:
                got = self.load_image(spec)
                if isinstance(got, ElfImage) and uuid_matches(uuid, got.uuid):
                    return got
        if not name:
            return None
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        for spec in self.images:
            if name in (spec.name, str(spec.file)) or base in (spec.name, spec.file.name):
                return self.load_image(spec)
        rel_text = name.replace("\\", "/").lstrip("/")
        try:
            rel = safe_relative(rel_text, path=where, line=line or None)
        except SnapshotError:
            return None
        if self.tree.exists(rel):
            spec = ImageSpec(rel, name)
            return self.load_image(spec)
        return None

    def code_memory(self, source: TraceSource, static: MemoryMap) -> MemoryMap | AddressSpaces:
        """The code memory a decoder of ``source`` reads: dumps, images, and the event log.

        Without images or an event log this is ``static`` itself. Each call
        returns a fresh reader (each trace source starts at the beginning of time).
        """
        core = source.core
        images = self._images_for(core)
        # Images the event log places are mapped where it says, not everywhere.
        global_images = [i for i in images if i.pid is None and not self._in_log(i)]
        per_process = [i for i in images if i.pid is not None]
        if not global_images and not per_process and self.events is None:
            return static
        key = core.name if core is not None else ""
        spaces = self._spaces.get(key)
        if spaces is None:
            base = static
            if global_images:
                pieces = list(static.regions)
                for spec in global_images:
                    got = self.load_image(spec)
                    space = mem_space_from_name(spec.space)
                    if isinstance(got, ElfImage):
                        if not got.segments:
                            self.warnings.append(f"{got.name}: no executable code in the image")
                        pieces.extend(got.regions(spec.base, space))
                    else:
                        pieces.append(
                            MemoryRegion(spec.base or 0, got, space, self.tree.display(spec.file))
                        )
                base = MemoryMap()
                for r in flatten_regions(pieces):
                    base.add(r)
            if self.events is None and not per_process:
                return base
            mappings = [
                StaticMapping(i.pid, i.base, i.name or str(i.file), i.uuid)
                for i in per_process
                if i.pid is not None
            ]
            spaces = AddressSpaces(
                base,
                self.events,
                self.resolve_image,
                contextidr=self.contextidr,
                static_mappings=mappings,
                warnings=self.warnings,
            )
            self._spaces[key] = spaces
        return spaces.cursor()


# --- reading ------------------------------------------------------------------------------


def _read_text_ini(tree: FileTree, rel: PurePosixPath) -> IniFile:
    name = tree.display(rel)
    if not tree.exists(rel):
        raise SnapshotError("file not found", path=name)
    raw = tree.read_bytes(rel)
    if len(raw) > 16 << 20:
        raise SnapshotError(f"INI file too large ({len(raw)} bytes)", path=name)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise SnapshotError("not a text file (NUL byte)", path=name, offset=nul)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return parse_metadata_text(text, name)


def _int_item(sec: IniSection, key: str, ini: IniFile, *, required: bool = False) -> int | None:
    e = sec.entry(key)
    if e is None or not e.value.strip():
        if required:
            raise ini.error(f"[{sec.name}] has no '{key}'", sec.line)
        return None
    return parse_int(e.value, what=f"{key}", path=ini.path, line=e.line)


def _files(
    sec_value: str, ini: IniFile, line: int, base: PurePosixPath
) -> tuple[PurePosixPath, ...]:
    files = tuple(
        base / safe_relative(f, path=ini.path, line=line) for f in sec_value.split(",") if f.strip()
    )
    if not files:
        raise ini.error("no file named", line)
    return files


_BUFFER_KEY = re.compile(r"^buffer\w*$", re.I)


def _define_trace_sources(
    events: EventLog, devices: dict[str, Device], path: str
) -> list[tuple[Device, str]]:
    """Sources declared by ``define_trace`` START/CURRENT events: copies of a named source.

    Returns (new device, name of the source it was derived from).
    """
    out: list[tuple[Device, str]] = []
    for e in events.events:
        if not isinstance(e, TraceEvent) or e.state == e.state.END:
            continue
        base = devices.get(e.source)
        if base is None:
            for d in devices.values():
                if d.device_class == "trace_source" and source_trace_id(d) == _maybe_int(e.source):
                    base = d
                    break
        if base is None:
            raise SnapshotError(
                f"define_trace: no trace source named {e.source!r}", path=path, line=e.line
            )
        family = family_of(base.device_type)
        regs = dict(base.registers)
        for name, value in e.registers.items():
            regs[name] = Register(name, f"0x{value:08X}", path, e.line)
        where = trace_id_register(family)
        if where is not None:
            reg_name, shift = where
            old = regs.get(reg_name)
            value = old.value if old is not None else 0
            value = (value & ~(0x7F << shift)) | (e.trace_id << shift)
            regs[reg_name] = Register(reg_name, f"0x{value:08X}", path, e.line)
        name = f"{base.name}@{e.trace_id:#04x}"
        out.append(
            (
                Device(name, base.device_class, base.device_type, base.location, path, regs),
                base.name,
            )
        )
    return out


def _maybe_int(text: str) -> int | None:
    try:
        return parse_int(text, what="", path="", line=None)
    except SnapshotError:
        return None


def read_package(tree: FileTree, top: PurePosixPath | None = None) -> Package:
    """Read the package whose ``contents.ini`` is ``top`` (default: at the root of ``tree``)."""
    top = top or PurePosixPath(CONTENTS)
    ini = _read_text_ini(tree, top)
    base = top.parent
    trace = ini.section("trace")
    if trace is None:
        raise ini.error("no [trace] section (it locates the metadata and the trace buffers)")
    warnings: list[str] = []

    snap_entry = trace.entry("snapshot")
    meta_entry = trace.entry("metadata")
    ds5: Snapshot | None = None
    if snap_entry is not None:
        rel = base / safe_relative(snap_entry.value, path=ini.path, line=snap_entry.line)
        ds5 = load_snapshot(tree, rel)

    metas: dict[str, TraceMetadata] = {}

    def metadata(rel_text: str, line: int) -> TraceMetadata:
        rel = base / safe_relative(rel_text, path=ini.path, line=line)
        key = str(rel)
        got = metas.get(key)
        if got is None:
            if not tree.exists(rel):
                raise SnapshotError(
                    f"metadata file {rel_text!r} not found", path=ini.path, line=line
                )
            raw = tree.read_bytes(rel)
            probe = parse_metadata_text(raw.decode("latin-1"), tree.display(rel))
            if probe.section("device_list") is not None or probe.section("trace_buffers"):
                raise SnapshotError(
                    f"{rel_text!r} is DS-5 snapshot metadata: name the snapshot's "
                    "snapshot.ini with 'snapshot =' instead",
                    path=ini.path,
                    line=line,
                )
            got = parse_metadata(raw, tree.display(rel))
            metas[key] = got
        return got

    buffers: list[TraceBuffer] = []
    buffer_meta: list[TraceMetadata | None] = []
    for e in trace.entries:
        if not _BUFFER_KEY.match(e.key):
            continue
        key = e.key
        sec = ini.section(key)
        file_text = e.value
        if sec is not None and sec.get("file"):
            fe = sec.entry("file")
            assert fe is not None
            files = _files(fe.value, ini, fe.line, base)
        else:
            files = _files(file_text, ini, e.line, base)
        meta: TraceMetadata | None = None
        me = sec.entry("metadata") if sec is not None else None
        if me is not None:
            meta = metadata(me.value, me.line)
        elif meta_entry is not None:
            meta = metadata(meta_entry.value, meta_entry.line)
        name = (sec.get("name") if sec is not None else None) or None
        if name is None and meta is not None and me is not None and meta.buffer.name:
            name = meta.buffer.name
        name = (name or key).strip()
        fmt: str | None = None
        fe = sec.entry("format") if sec is not None else None
        if fe is not None:
            low = fe.value.strip().lower()
            if low not in BUFFER_FORMATS:
                raise SnapshotError(
                    f"buffer format {fe.value!r} is not one of {', '.join(BUFFER_FORMATS)}",
                    path=ini.path,
                    line=fe.line,
                )
            fmt = BUFFER_FORMATS[low]
        elif meta is not None:
            fmt = meta.buffer.format
        if fmt is None and ds5 is not None:
            for b in ds5.buffers:
                if b.name == name:
                    fmt = b.format
        if fmt is None:
            raise SnapshotError(
                f"buffer {key!r}: missing item 'format' (give it in the metadata's [buffer] "
                f"section or in [{key}] of {CONTENTS})",
                path=ini.path,
                line=e.line,
            )
        if any(b.name == name for b in buffers):
            raise SnapshotError(f"two buffers are named {name!r}", path=ini.path, line=e.line)
        buffers.append(TraceBuffer(key, name, files, fmt, ini.path, e.line))
        buffer_meta.append(meta)

    devices: dict[str, Device] = {}
    source_buffers: list[tuple[str, list[str]]] = []
    core_sources: list[tuple[str, str]] = []
    description = ""
    pkg_sec = ini.section("package")
    if pkg_sec is not None:
        description = pkg_sec.get("description", "") or ""

    if ds5 is not None:
        devices.update(ds5.devices)
        source_buffers.extend(ds5.source_buffers)
        core_sources.extend(ds5.core_sources)
        warnings.extend(ds5.warnings)
        description = description or ds5.description
        if not buffers:
            buffers = list(ds5.buffers)
            buffer_meta = [None] * len(buffers)
    elif not buffers:
        raise ini.error("[trace] names no buffer (buffer0 = FILE ...)", trace.line)

    # Trace sources from metadata files, per buffer.
    placed: dict[tuple[str, int], str] = {}  # (metadata path, trace id) → device name
    members: dict[str, list[str]] = {}
    cores: dict[str, Device] = {}
    core_of: dict[str, str] = {}
    for buf, meta in zip(buffers, buffer_meta, strict=True):
        if meta is None:
            continue
        for spec in meta.traces:
            if (
                spec.buffers is not None
                and buf.name not in spec.buffers
                and buf.key not in spec.buffers
            ):
                continue
            pkey = (meta.path, spec.trace_id)
            dev_name = placed.get(pkey)
            if dev_name is None:
                dev = spec.device
                dev_name = dev.name
                old = devices.get(dev_name)
                if old is not None and (
                    old.device_type != dev.device_type
                    or {k: r.text for k, r in old.registers.items()}
                    != {k: r.text for k, r in dev.registers.items()}
                ):
                    dev_name = f"{dev.name}@{PurePosixPath(meta.path).stem}"
                    dev = Device(
                        dev_name,
                        dev.device_class,
                        dev.device_type,
                        dev.location,
                        dev.path,
                        dev.registers,
                    )
                devices[dev_name] = dev
                placed[pkey] = dev_name
                if spec.core_type or spec.core_name:
                    cname = spec.core_name or f"core_{spec.trace_id:#04x}"
                    ctype = spec.core_type or ""
                    have = cores.get(cname)
                    if have is None:
                        cores[cname] = Device(cname, "core", ctype, "", meta.path)
                    elif ctype and have.device_type and have.device_type != ctype:
                        raise SnapshotError(
                            f"core {cname!r} is a {have.device_type} and a {ctype}",
                            path=meta.path,
                            line=spec.line,
                        )
                    elif ctype and not have.device_type:
                        have.device_type = ctype
                    core_of[dev_name] = cname
            members.setdefault(dev_name, [])
            if buf.name not in members[dev_name]:
                members[dev_name].append(buf.name)
    for cname, core in cores.items():
        devices.setdefault(cname, core)
    for dev_name, bufs in members.items():
        source_buffers.append((dev_name, bufs))
        if dev_name in core_of:
            core_sources.append((core_of[dev_name], dev_name))

    # Memory contents.
    global_mem = Device(_GLOBAL_MEMORY, "memory_space", "", "", ini.path)
    for sec in ini.sections:
        low = sec.name.lower()
        if not (low.startswith("memory") or low.startswith("dump")):
            continue
        fe = sec.entry("file")
        if fe is None:
            raise ini.error(f"[{sec.name}] has no 'file'", sec.line)
        rel = base / safe_relative(fe.value, path=ini.path, line=fe.line)
        address = _int_item(sec, "address", ini, required=True)
        assert address is not None
        dump = MemoryDump(
            rel,
            address,
            _int_item(sec, "offset", ini) or 0,
            _int_item(sec, "length", ini),
            (sec.get("space") or "").strip(),
            ini.path,
            sec.line,
        )
        core_name = (sec.get("core") or "").strip()
        if core_name:
            owner = devices.get(core_name)
            if owner is None:
                owner = Device(core_name, "core", "", "", ini.path)
                devices[core_name] = owner
                warnings.append(
                    f"{ini.path}: line {sec.line}: memory for core {core_name!r}, which no "
                    "trace source traces"
                )
            owner.dumps.append(dump)
        else:
            global_mem.dumps.append(dump)
        if not tree.exists(rel):
            warnings.append(
                f"{ini.path}: line {sec.line}: memory file {tree.display(rel)} not found; "
                "decoding continues without it"
            )
    if global_mem.dumps:
        devices[_GLOBAL_MEMORY] = global_mem

    # Program images.
    images: list[ImageSpec] = []
    for sec in ini.sections:
        if not sec.name.lower().startswith("image"):
            continue
        fe = sec.entry("file")
        if fe is None:
            raise ini.error(f"[{sec.name}] has no 'file'", sec.line)
        rel = base / safe_relative(fe.value, path=ini.path, line=fe.line)
        if not tree.exists(rel):
            raise SnapshotError(f"image file {fe.value!r} not found", path=ini.path, line=fe.line)
        images.append(
            ImageSpec(
                rel,
                (sec.get("name") or "").strip() or rel.name,
                _int_item(sec, "base", ini),
                (sec.get("uuid") or "").strip() or None,
                (sec.get("core") or "").strip() or None,
                _int_item(sec, "pid", ini),
                (sec.get("space") or "").strip(),
                ini.path,
                sec.line,
            )
        )

    # The system event log.
    events: EventLog | None = None
    contextidr: str | None = None
    ev_entry = trace.entry("events")
    ev_sec = ini.section("events")
    if ev_sec is not None and ev_sec.entry("file") is not None:
        ev_entry = ev_sec.entry("file")
    if ev_entry is not None:
        rel = base / safe_relative(ev_entry.value, path=ini.path, line=ev_entry.line)
        if not tree.exists(rel):
            raise SnapshotError(
                f"event log {ev_entry.value!r} not found", path=ini.path, line=ev_entry.line
            )
        events = parse_event_log(tree.read_bytes(rel), tree.display(rel))
    for holder in (trace, ev_sec):
        if holder is None:
            continue
        ce = holder.entry("contextidr")
        if ce is not None:
            contextidr = ce.value.strip().lower()
            if contextidr not in CONTEXTIDR_MODES:
                raise SnapshotError(
                    f"contextidr {ce.value!r} is not one of {', '.join(CONTEXTIDR_MODES)}",
                    path=ini.path,
                    line=ce.line,
                )
    if events is not None:
        for dev, origin in _define_trace_sources(events, devices, events.path):
            devices[dev.name] = dev
            for src, bufs in list(source_buffers):
                if src == origin:
                    source_buffers.append((dev.name, list(bufs)))
                    break
            for cname, src in list(core_sources):
                if src == origin:
                    core_sources.append((cname, dev.name))
                    break

    for b in buffers:
        for f in b.files:
            if not tree.exists(f):
                warnings.append(
                    f"{b.path}: line {b.line}: trace file {tree.display(f)} of buffer "
                    f"{b.name!r} not found"
                )
    return Package(
        tree,
        description,
        devices,
        buffers,
        source_buffers,
        core_sources,
        warnings,
        images=images,
        events=events,
        contextidr=contextidr,
    )


def _find_root(names: list[str], wanted: str) -> str | None:
    """The folder holding ``wanted`` at the archive root or in its single top folder."""
    lows = {n.lower() for n in names}
    if wanted in lows:
        return ""
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    if len(tops) == 1:
        top = tops.pop()
        if f"{top.lower()}/{wanted}" in lows:
            return top
    return None


def open_trace_input(path: str | Path, *, limits: Limits | None = None) -> Snapshot:
    """Open a DS-5 snapshot (folder or ``snapshot.ini``), a package folder, or a ZIP of either."""
    p = Path(path)
    if not p.exists():
        raise SnapshotError("no such file or folder", path=str(p))
    if p.is_dir():
        if (p / _SNAPSHOT_INI).is_file():
            return load_snapshot(DirTree(p))
        if (p / CONTENTS).is_file():
            return read_package(DirTree(p))
        raise SnapshotError(
            f"not a snapshot or trace package: no {_SNAPSHOT_INI} or {CONTENTS}", path=str(p)
        )
    if p.name.lower() == CONTENTS:
        return read_package(DirTree(p.parent))
    if p.name.lower().endswith(".ini"):
        return load_snapshot(DirTree(p.parent), PurePosixPath(p.name))
    if not zipfile.is_zipfile(p):
        raise SnapshotError("not a snapshot, trace package or ZIP archive", path=str(p))
    tree = ZipTree(p, limits=limits)
    names = tree.names()
    root = _find_root(names, _SNAPSHOT_INI)
    if root is not None:
        sub = ZipTree(p, prefix=root, limits=limits) if root else tree
        return load_snapshot(sub)
    root = _find_root(names, CONTENTS)
    if root is not None:
        sub = ZipTree(p, prefix=root, limits=limits) if root else tree
        return read_package(sub)
    raise SnapshotError(f"ZIP archive holds no {CONTENTS} or {_SNAPSHOT_INI}", path=str(p))


# --- writing ------------------------------------------------------------------------------


@dataclass
class PackageSummary:
    """What :func:`write_package` wrote."""

    output: Path
    buffers: int = 0
    sources: int = 0
    files: int = 0
    bytes: int = 0
    metadata_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _ini_value(text: str) -> str:
    if "\n" in text or "\r" in text:
        raise SnapshotError(f"value {text!r} cannot be written to an INI file")
    return text


def write_package(
    snapshot: Snapshot, output: str | Path, *, compression: int = zipfile.ZIP_DEFLATED
) -> PackageSummary:
    """Write ``snapshot`` as a trace package ZIP at ``output`` that decodes to the same listing.

    The metadata keeps every register of the trace sources as it is, with the
    name, core and buffers of each source; buffers keep their names, order and
    formats; memory dumps keep their addresses, spaces and order. Images and the
    event log of a package are carried over.
    """
    out = Path(output)
    summary = PackageSummary(out)
    tree = snapshot.tree
    files: dict[str, PurePosixPath] = {}  # name in the archive → name in the tree

    def add_file(rel: PurePosixPath) -> str:
        name = str(rel)
        if name.lower() in (CONTENTS,) or name.lower().startswith("metadata"):
            name = f"data/{name}"
        files[name] = rel
        return name

    # Sources per buffer.
    per_buffer: list[tuple[TraceBuffer, list[TraceSource]]] = [
        (b, snapshot.sources_for(b)) for b in snapshot.buffers
    ]
    by_id: dict[int, str] = {}
    shared = True
    for _, sources in per_buffer:
        for s in sources:
            tid = source_trace_id(s.device)
            if tid is None:
                shared = False
                continue
            if by_id.setdefault(tid, s.device.name) != s.device.name:
                shared = False
    all_names = [b.name for b in snapshot.buffers]

    contents: list[str] = [
        "; cstrace trace package (metadata requirements §6.4)",
        "",
        "[package]",
        "format = cstrace-package 1",
    ]
    if snapshot.description:
        contents.append(f"description = {_ini_value(snapshot.description)}")
    contents += ["", "[trace]"]
    metadata_texts: dict[str, str] = {}
    if shared:
        seen: dict[str, tuple[Device, Device | None, list[str] | None]] = {}
        for b, sources in per_buffer:
            for s in sources:
                if s.device.name not in seen:
                    seen[s.device.name] = (s.device, s.core, [])
                bufs = seen[s.device.name][2]
                assert bufs is not None
                bufs.append(b.name)
        items = [
            (dev, core, None if bufs == all_names else bufs) for dev, core, bufs in seen.values()
        ]
        fmt = snapshot.buffers[0].format if snapshot.buffers else "coresight"
        metadata_texts["metadata.ini"] = format_metadata(
            fmt, items, comment="trace source metadata (metadata requirements §6.3.1)"
        )
        contents.append("metadata = metadata.ini")
        summary.sources = len(items)
    if isinstance(snapshot, Package) and snapshot.events is not None:
        contents.append("events = events.log")
    if isinstance(snapshot, Package) and snapshot.contextidr:
        contents.append(f"contextidr = {snapshot.contextidr}")
    sections: list[str] = []
    for k, (b, sources) in enumerate(per_buffer):
        key = f"buffer{k}"
        names = [add_file(f) for f in b.files]
        contents.append(f"{key} = {', '.join(names)}")
        sections += ["", f"[{key}]", f"name = {_ini_value(b.name)}", f"format = {b.format}"]
        if not shared:
            mname = f"metadata_{k}.ini"
            metadata_texts[mname] = format_metadata(
                b.format,
                [(s.device, s.core, None) for s in sources],
                comment=f"trace source metadata of buffer {b.name}",
            )
            sections.append(f"metadata = {mname}")
            summary.sources += len(sources)
    contents += sections

    # Memory: each traced core's dumps, then memory-space devices seen by every core.
    cores: list[Device] = []
    for _, sources in per_buffer:
        for s in sources:
            if s.core is not None and all(c.name != s.core.name for c in cores):
                cores.append(s.core)
    mem_index = 0
    for dev in [
        *cores,
        *(d for d in snapshot.devices.values() if d.device_class == "memory_space"),
    ]:
        for d in dev.dumps:
            if not tree.exists(d.file):
                summary.warnings.append(
                    f"{d.path}: line {d.line}: memory dump {tree.display(d.file)} not found; "
                    "left out of the package"
                )
                continue
            name = add_file(d.file)
            contents += ["", f"[memory_{mem_index}]", f"file = {name}", f"address = {d.address:#x}"]
            if d.offset:
                contents.append(f"offset = {d.offset:#x}")
            if d.length is not None:
                contents.append(f"length = {d.length:#x}")
            if d.space:
                contents.append(f"space = {d.space}")
            if dev.device_class != "memory_space":
                contents.append(f"core = {dev.name}")
            mem_index += 1

    if isinstance(snapshot, Package):
        for k, spec in enumerate(snapshot.images):
            name = add_file(spec.file)
            contents += ["", f"[image_{k}]", f"file = {name}", f"name = {_ini_value(spec.name)}"]
            if spec.base is not None:
                contents.append(f"base = {spec.base:#x}")
            if spec.uuid:
                contents.append(f"uuid = {spec.uuid}")
            if spec.core:
                contents.append(f"core = {spec.core}")
            if spec.pid is not None:
                contents.append(f"pid = {spec.pid}")
            if spec.space:
                contents.append(f"space = {spec.space}")

    summary.buffers = len(per_buffer)
    summary.metadata_files = sorted(metadata_texts)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".cstrace-", suffix=".zip", dir=str(out.parent))
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with zipfile.ZipFile(tmp, "w", compression=compression, allowZip64=True) as zf:
            zf.writestr(CONTENTS, "\n".join(contents) + "\n")
            for mname, text in metadata_texts.items():
                zf.writestr(mname, text)
            if isinstance(snapshot, Package) and snapshot.events is not None:
                log_rel = _event_log_rel(snapshot)
                if log_rel is not None:
                    zf.writestr("events.log", tree.read_bytes(log_rel))
            for name, rel in files.items():
                size = tree.size(rel)
                with zf.open(name, "w", force_zip64=size > (1 << 31)) as dst:
                    for chunk in _chunks(tree, rel, size):
                        dst.write(chunk)
                summary.files += 1
                summary.bytes += size
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it private; give it the usual mode
        os.replace(tmp, out)
    except OSError as exc:
        raise SnapshotError(f"cannot write: {exc.strerror or exc}", path=str(out)) from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return summary


def _event_log_rel(pkg: Package) -> PurePosixPath | None:
    if pkg.events is None:
        return None
    shown = pkg.events.path
    # The event log's name as the tree shows it; find it back among the tree's files.
    tree = pkg.tree
    if isinstance(tree, ZipTree):
        for n in tree.names():
            if tree.display(n) == shown:
                return PurePosixPath(n)
    if isinstance(tree, DirTree):
        try:
            return PurePosixPath(Path(shown).relative_to(tree.root).as_posix())
        except ValueError:
            return None
    return None


def _chunks(tree: FileTree, rel: PurePosixPath, size: int) -> Iterator[bytes]:
    step = 16 << 20
    pos = 0
    if size == 0:
        return
    while pos < size:
        chunk = tree.read_bytes(rel, pos, min(step, size - pos))
        if not chunk:
            break
        yield chunk
        pos += len(chunk)


# --- raw captures and extra files named on the command line -------------------------------


_HOST = "@host"


class OverlayTree:
    """A tree whose ``@host/...`` names are files the user named; the rest is ``base``."""

    def __init__(self, base: FileTree, host: HostFiles) -> None:
        self.base = base
        self.host = host

    def _split(self, rel: PurePosixPath | str) -> tuple[FileTree, PurePosixPath]:
        text = str(rel)
        if text.startswith(_HOST + "/"):
            return self.host, PurePosixPath(text[len(_HOST) + 1 :])
        return self.base, PurePosixPath(text)

    def display(self, rel: PurePosixPath | str) -> str:
        """How to name this file in messages."""
        tree, inner = self._split(rel)
        return tree.display(inner)

    def exists(self, rel: PurePosixPath) -> bool:
        """Whether the file exists."""
        tree, inner = self._split(rel)
        return tree.exists(inner)

    def size(self, rel: PurePosixPath) -> int:
        """Size of the file in bytes."""
        tree, inner = self._split(rel)
        return tree.size(inner)

    def read_bytes(self, rel: PurePosixPath, offset: int = 0, length: int | None = None) -> bytes:
        """Read ``length`` bytes (all by default) from ``offset``."""
        tree, inner = self._split(rel)
        return tree.read_bytes(inner, offset, length)


def _split_at(text: str, what: str) -> tuple[str, int | None]:
    """``FILE@ADDRESS`` → (FILE, ADDRESS); the address is optional."""
    name, sep, addr = text.rpartition("@")
    if not sep or not name:
        return text, None
    return name, parse_int(addr, what=f"{what} address", path="command line", line=None)


@dataclass
class Extras:
    """Images, memory, event log and CONTEXTIDR convention named on the command line."""

    images: list[str] = field(default_factory=list)
    """``FILE`` or ``FILE@BASE``."""
    memory: list[str] = field(default_factory=list)
    """``FILE@ADDRESS``."""
    events: str | None = None
    contextidr: str | None = None

    def __bool__(self) -> bool:
        return bool(self.images or self.memory or self.events or self.contextidr)


def with_extras(snapshot: Snapshot, extras: Extras) -> Snapshot:
    """``snapshot`` with the images, memory and event log of ``extras`` added."""
    if not extras:
        return snapshot
    host = HostFiles()
    tree = OverlayTree(snapshot.tree, host)
    if isinstance(snapshot, Package):
        pkg = snapshot
        pkg.tree = tree
    else:
        pkg = Package(
            tree,
            snapshot.description,
            snapshot.devices,
            snapshot.buffers,
            snapshot.source_buffers,
            snapshot.core_sources,
            snapshot.warnings,
        )
    for text in extras.images:
        name, base = _split_at(text, "image")
        rel = PurePosixPath(_HOST) / host.add(name)
        if not tree.exists(rel):
            raise SnapshotError("image file not found", path=name)
        pkg.images.append(ImageSpec(rel, Path(name).name, base, path="command line"))
    if extras.memory:
        found = pkg.devices.get(_GLOBAL_MEMORY)
        mem = found or Device(_GLOBAL_MEMORY, "memory_space", "", "", "command line")
        pkg.devices[_GLOBAL_MEMORY] = mem
        for text in extras.memory:
            name, address = _split_at(text, "memory")
            if address is None:
                raise SnapshotError(
                    f"--memory {text!r}: give the address the contents go to, as FILE@ADDRESS"
                )
            rel = PurePosixPath(_HOST) / host.add(name)
            if not tree.exists(rel):
                raise SnapshotError("memory file not found", path=name)
            mem.dumps.append(MemoryDump(rel, address, 0, None, "", "command line", 0))
    if extras.events is not None:
        rel = PurePosixPath(_HOST) / host.add(extras.events)
        if not tree.exists(rel):
            raise SnapshotError("event log not found", path=extras.events)
        pkg.events = parse_event_log(tree.read_bytes(rel), extras.events)
    if extras.contextidr is not None:
        if extras.contextidr not in CONTEXTIDR_MODES:
            raise SnapshotError(
                f"contextidr {extras.contextidr!r} is not one of {', '.join(CONTEXTIDR_MODES)}"
            )
        pkg.contextidr = extras.contextidr
    return pkg


@dataclass
class RawOptions:
    """What the user says about a raw capture that detection cannot tell."""

    capture_format: str | None = None
    metadata: str | None = None
    """A metadata file (§6.3.1) describing the capture's trace sources."""
    protocols: list[str] = field(default_factory=list)
    """``NAME`` or ``ID=NAME`` (``etmv4``, ``ptm``, ``ETM3.5``...)."""
    cores: list[str] = field(default_factory=list)
    """``TYPE`` or ``ID=TYPE`` (``Cortex-A53``)."""
    registers: list[str] = field(default_factory=list)
    """``NAME=VALUE`` or ``ID:NAME=VALUE``."""
    settings: list[str] = field(default_factory=list)
    """``ITEM=VALUE`` or ``ID:ITEM=VALUE`` (individual options such as ``cyclecount=1``)."""


_PROTOCOL_WORDS = {
    "etmv4": "ETM4",
    "etm4": "ETM4",
    "ete": "ETE",
    "ptm": "PTM1.1",
    "pft": "PTM1.1",
    "etmv3": "ETM3.5",
    "etm3": "ETM3.5",
    "stm": "STM",
    "itm": "ITM",
}
_FAMILY_FORMAT = {"etm4": "ETM4", "ptm": "PTM1.1", "etm3": "ETM3.5", "stm": "STM", "itm": "ITM"}


def _per_id(text: str, sep: str, what: str) -> tuple[int | None, str]:
    """``ID<sep>REST`` → (ID, REST); without a leading ID → (None, text)."""
    head, s, rest = text.partition(sep)
    if s and re.fullmatch(r"\s*(0[xX][0-9a-fA-F]+|\d+)\s*", head):
        tid = parse_int(head, what=f"{what} trace ID", path="command line", line=None)
        if not 0 <= tid <= 0x7F:
            raise SnapshotError(f"{what} {text!r}: trace ID {tid:#x} is outside 0x00..0x7f")
        return tid, rest
    return None, text


def capture_package(path: str | Path, raw: RawOptions, extras: Extras | None = None) -> Package:
    """A package for a raw capture file: detected streams, plus what the user told us.

    Single-source data gives one source whose trace ID comes from the metadata,
    an ``ID=`` option, or 0. Formatted data gives one source per trace ID whose
    protocol was recognised or named by the user.
    """
    from cstrace.detect import detect_capture
    from cstrace.snapshot.ini import IniEntry
    from cstrace.snapshot.metadata import knows_option, metadata_from_ini

    capture = Path(path)
    host = HostFiles()
    cap_rel = host.add(capture)
    if not host.exists(cap_rel):
        raise SnapshotError("no such file", path=str(capture))
    data = host.read_bytes(cap_rel)

    if raw.metadata is not None:
        mrel = host.add(raw.metadata)
        if not host.exists(mrel):
            raise SnapshotError("metadata file not found", path=raw.metadata)
        mraw = host.read_bytes(mrel)
        ini = parse_metadata_text(mraw.decode("utf-8", "replace"), raw.metadata)
    else:
        ini = IniFile("command line", [])

    fmt = raw.capture_format
    bsec = ini.section("buffer")
    if fmt is None and bsec is not None and bsec.get("format"):
        low = (bsec.get("format") or "").strip().lower()
        fmt = BUFFER_FORMATS.get(low)
    if fmt is not None and fmt not in BUFFER_FORMATS.values():
        raise SnapshotError(f"capture format {fmt!r} is not one of {', '.join(BUFFER_FORMATS)}")
    guess = detect_capture(data, fmt)
    fmt = guess.format
    single = fmt == "source_data"

    sections: dict[int, IniSection] = {}
    for sec in ini.sections:
        if sec.name.lower().startswith("trace_"):
            tid = parse_int(sec.name[6:], what="trace source ID", path=ini.path, line=sec.line)
            sections[tid] = sec

    def section(tid: int) -> IniSection:
        sec = sections.get(tid)
        if sec is None:
            sec = IniSection(f"trace_{tid:#04x}", 0)
            sections[tid] = sec
            ini.sections.append(sec)
        return sec

    per_id: dict[str, dict[int | None, list[tuple[str, str]]]] = {}

    def collect(kind: str, items: list[str], sep: str) -> None:
        for item in items:
            tid, rest = _per_id(item, sep, f"--{kind}")
            per_id.setdefault(kind, {}).setdefault(tid, []).append((item, rest))

    collect("protocol", raw.protocols, "=")
    collect("core", raw.cores, "=")
    collect("reg", raw.registers, ":")
    collect("set", raw.settings, ":")

    ids: list[int]
    if single:
        explicit = sorted({t for kind in per_id.values() for t in kind if t is not None})
        ids = sorted(set(sections) | set(explicit)) or [0]
        if len(ids) > 1:
            raise SnapshotError(
                "the capture holds a single source, but several trace IDs are described: "
                + ", ".join(f"{t:#x}" for t in ids)
            )
    else:
        ids = sorted(
            {g.trace_id for g in guess.identified if g.trace_id is not None}
            | set(sections)
            | {t for kind in per_id.values() for t in kind if t is not None}
        )
    if not ids:
        raise SnapshotError(
            "no trace source found in the capture: name one with --protocol ID=PROTOCOL",
            path=str(capture),
        )
    # "--protocol ID=none" leaves a detected trace ID out.
    for drop, entries in per_id.get("protocol", {}).items():
        if drop is not None and any(v.strip().lower() == "none" for _, v in entries):
            if drop in ids:
                ids.remove(drop)
            gone = sections.pop(drop, None)
            ini.sections = [x for x in ini.sections if x is not gone]
    if not ids:
        raise SnapshotError("every trace source was left out with --protocol ID=none")
    # Options given without an ID apply to the sources whose protocol knows them.
    unplaced = {item for item, _ in per_id.get("set", {}).get(None, [])}
    detected = {g.trace_id: g for g in guess.streams}
    for tid in ids:
        sec = section(tid)
        g = detected.get(None if single else tid)
        for _, value in per_id.get("protocol", {}).get(None, []) + per_id.get("protocol", {}).get(
            tid, []
        ):
            word = value.strip()
            sec.entries.append(IniEntry("format", _PROTOCOL_WORDS.get(word.lower(), word), 0))
        if sec.entry("format") is None:
            if g is None or g.family is None:
                raise SnapshotError(
                    f"trace ID {tid:#x}: protocol not recognised; name it with "
                    f"--protocol {tid:#x}=PROTOCOL (etmv4, ete, ptm, etmv3, stm, itm)",
                    path=str(capture),
                )
            sec.entries.append(IniEntry("format", _FAMILY_FORMAT[g.family], 0))
        for _, value in per_id.get("core", {}).get(None, []) + per_id.get("core", {}).get(tid, []):
            sec.entries.append(IniEntry("core", value.strip(), 0))
        fmt_entry = sec.entry("format")
        source_type = fmt_entry.value if fmt_entry is not None else ""
        for kind in ("reg", "set"):
            shared = per_id.get(kind, {}).get(None, [])
            for item, rest in shared + per_id.get(kind, {}).get(tid, []):
                key, eq, value = rest.partition("=")
                if not eq or not key.strip():
                    raise SnapshotError(f"--{kind} {item!r}: expected NAME=VALUE")
                key = key.strip().upper() if kind == "reg" else key.strip().lower()
                if kind == "set" and (item, rest) in shared:
                    if not knows_option(source_type, key):
                        continue
                    unplaced.discard(item)
                sec.entries.append(IniEntry(key, value.strip(), 0))
    if unplaced:
        raise SnapshotError(
            f"--set {sorted(unplaced)[0]!r}: no trace source of this capture has that option"
        )
    if not ini.sections or ini.section("buffer") is None:
        ini.sections.insert(0, IniSection("buffer", 0))
    try:
        meta = metadata_from_ini(ini)
    except SnapshotError as exc:
        if exc.line == 0:  # an item given on the command line
            exc.line = None
            exc.path = "command line"
        if "cannot be decoded without" in exc.message:
            exc.message += "; on the command line: --set [ID:]ITEM=VALUE or --reg [ID:]NAME=VALUE"
            exc.args = (exc.message,)
        raise

    buf = TraceBuffer("buffer0", capture.name, (cap_rel,), fmt, str(capture), 0)
    devices: dict[str, Device] = {}
    source_buffers: list[tuple[str, list[str]]] = []
    core_sources: list[tuple[str, str]] = []
    for spec in meta.traces:
        if spec.trace_id not in ids:
            continue
        devices[spec.device.name] = spec.device
        source_buffers.append((spec.device.name, [buf.name]))
        if spec.core_type or spec.core_name:
            cname = spec.core_name or f"core_{spec.trace_id:#04x}"
            devices.setdefault(cname, Device(cname, "core", spec.core_type or "", "", ini.path))
            core_sources.append((cname, spec.device.name))
    warnings: list[str] = []
    if guess.confidence < 0.5 and raw.capture_format is None:
        warnings.append(
            f"{capture}: capture format {fmt} guessed with low confidence "
            f"({guess.confidence:.2f}); give --capture-format if it is wrong"
        )
    pkg = Package(
        host,
        "raw capture",
        devices,
        [buf],
        source_buffers,
        core_sources,
        warnings,
    )
    return pkg if extras is None else _as_package(with_extras(pkg, extras))


def _as_package(s: Snapshot) -> Package:
    assert isinstance(s, Package)
    return s


# --- command-line glue ---------------------------------------------------------------------


def add_input_options(dec: argparse.ArgumentParser) -> None:
    """Options for packages, program images and raw captures (metadata requirements §5, §6)."""
    mem = dec.add_argument_group("program images and address spaces")
    mem.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="FILE[@BASE]",
        help="an ELF (or raw binary) program image, at its link address or with its first "
        "loadable segment at BASE (repeatable)",
    )
    mem.add_argument(
        "--memory",
        action="append",
        default=[],
        metavar="FILE@ADDRESS",
        help="raw memory contents at ADDRESS (repeatable)",
    )
    mem.add_argument("--events", metavar="LOG", help="system event log (docs/metadata.md)")
    mem.add_argument(
        "--contextidr",
        choices=("pid", "asid", "tid"),
        help="how CONTEXTIDR names the process: pid (bits 8..31), asid (bits 0..7, mapped by "
        "declare_asid events) or tid (bits 0..31)",
    )
    raw = dec.add_argument_group(
        "raw captures (SNAPSHOT is a trace file with no metadata)",
        "ID is a trace ID (0x10); without it an option applies to every source.",
    )
    raw.add_argument(
        "--capture-format",
        choices=("coresight", "dstream_coresight", "tpiu", "source_data"),
        help="do not guess the capture format",
    )
    raw.add_argument("--metadata", metavar="FILE", help="INI trace metadata for the capture")
    raw.add_argument(
        "--protocol",
        action="append",
        default=[],
        metavar="[ID=]NAME",
        help="protocol of a source: etmv4, ete, ptm, etmv3, stm, itm or a format such as "
        "ETM4.2; ID=none leaves that trace ID out",
    )
    raw.add_argument(
        "--core", action="append", default=[], metavar="[ID=]TYPE", help="core type (Cortex-A53)"
    )
    raw.add_argument(
        "--reg",
        action="append",
        default=[],
        metavar="[ID:]NAME=VALUE",
        help="a register value of a trace source (TRCCONFIGR=0x1)",
    )
    raw.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="[ID:]ITEM=VALUE",
        help="an individual option of a trace source (cyclecount=1, context_id=32)",
    )


def open_any(path: str | Path, extras: Extras, raw: RawOptions) -> Snapshot:
    """A snapshot, a package or a raw capture, with extra images, memory and events.

    A file that is neither an ini file nor a ZIP is a raw capture, described by
    ``raw``; for a snapshot or package, ``raw`` must be empty.
    """
    path = Path(path)
    is_raw = path.is_file() and not path.name.lower().endswith(".ini") and not is_zip(path)
    if is_raw:
        return capture_package(path, raw, extras)
    if raw != RawOptions():
        raise SnapshotError(
            "options that describe a raw capture (metadata, protocol, core, registers, "
            "settings, capture format) do not apply: the snapshot or package describes "
            "its own trace",
            path=str(path),
        )
    return with_extras(open_trace_input(path), extras)


def open_from_args(args: argparse.Namespace) -> Snapshot:
    """The snapshot, package or raw capture named on the command line, with extra files."""
    extras = Extras(args.image, args.memory, args.events, args.contextidr)
    raw = RawOptions(
        args.capture_format,
        args.metadata,
        list(args.protocol or []),
        list(args.core or []),
        list(args.reg or []),
        list(args.set or []),
    )
    return open_any(args.snapshot, extras, raw)


def is_zip(path: object) -> bool:
    """Whether ``path`` names a ZIP archive."""
    try:
        return zipfile.is_zipfile(str(path))
    except OSError:
        return False


def package_command(args: argparse.Namespace) -> int:
    """``cstrace package SNAPSHOT OUTPUT.zip`` (with the input options of ``decode``)."""
    snapshot = open_from_args(args)
    summary = write_package(snapshot, args.output)
    for w in [*snapshot.warnings, *summary.warnings]:
        print(f"cstrace: warning: {w}", file=sys.stderr)
    print(
        f"wrote {summary.output}: {summary.buffers} buffer(s), {summary.sources} trace "
        f"source(s), {summary.files} file(s), {summary.bytes} bytes"
    )
    return 0
