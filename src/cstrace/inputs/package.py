"""Trace packages (metadata requirements §6.4): a directory or ZIP archive with ``contents.ini``.

Input: a package folder or ZIP file. ``contents.ini`` locates the trace
metadata (the INI format of §6.3.1, :mod:`cstrace.inputs.metadata`), the
trace buffer files, memory contents, program images (ELF) and the system event
log (:mod:`cstrace.memory.events`)::

    [trace]
    metadata = trace.ini
    buffer0 = cluster0.data
    buffer1 = cluster1.data
    events = system-event-log

Output: a :class:`~cstrace.trace.Trace` (:func:`read_package`, through the
device view :class:`Package`).

:func:`open_trace_input` opens whatever the user names: a DS-5 snapshot folder
or ``snapshot.ini``, a package folder, or a ZIP of either (read in place
through :class:`~cstrace.inputs.zipfiles.ZipTree`, which checks every entry).
:mod:`cstrace.inputs.package_write` goes the other way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from cstrace.errors import SnapshotError
from cstrace.inputs.devices import Device, MemoryDump, Register, Snapshot, TraceBuffer, to_trace
from cstrace.inputs.files import DirTree, FileTree, TreeBlob, safe_relative
from cstrace.inputs.ini import IniFile, IniSection
from cstrace.inputs.metadata import (
    BUFFER_FORMATS,
    TraceMetadata,
    family_of,
    parse_metadata,
    parse_metadata_text,
    source_trace_id,
    trace_id_register,
)
from cstrace.inputs.snapshot import load_snapshot
from cstrace.memory.image import mem_space_from_name
from cstrace.parsing import parse_int
from cstrace.trace import ExecContext, Image, Origin, Trace

if TYPE_CHECKING:
    from cstrace.inputs.zipfiles import Limits
    from cstrace.memory.clock import CounterClock
    from cstrace.memory.events import EventLog

__all__ = [
    "CONTENTS",
    "ImageSpec",
    "Package",
    "load_package",
    "open_trace_input",
    "read_package",
]

CONTENTS = "contents.ini"
_SNAPSHOT_INI = "snapshot.ini"
_GLOBAL_MEMORY = "package_memory"


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
    """The device view of a trace package: a snapshot plus images and the system event log."""

    images: list[ImageSpec] = field(default_factory=list)
    events: EventLog | None = None
    contextidr: str | None = None
    clock: CounterClock | None = None

    def to_trace(self) -> Trace:
        """The :class:`~cstrace.trace.Trace` this package describes."""
        images = [
            Image(
                TreeBlob(self.tree, spec.file),
                spec.name,
                spec.base,
                spec.uuid,
                spec.core,
                spec.pid,
                mem_space_from_name(spec.space),
                Origin(spec.path, spec.line or None),
            )
            for spec in self.images
        ]
        return to_trace(
            self, images=images, events=self.events, contextidr=self.contextidr, clock=self.clock
        )


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
    from cstrace.memory.events import TraceEvent

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


def load_package(tree: FileTree, top: PurePosixPath | None = None) -> Package:
    """The device view of the package whose ``contents.ini`` is ``top`` (default: at the root)."""
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
        context: ExecContext | None = None
        time: int | None = None
        if sec is not None:
            who = [_int_item(sec, k, ini) for k in ("cpu", "pid", "tid")]
            if any(v is not None for v in who):
                context = ExecContext(*who)
            time = _int_item(sec, "time", ini)
        buffers.append(TraceBuffer(key, name, files, fmt, ini.path, e.line, context, time))
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
                        cpu=dev.cpu,
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
        from cstrace.memory.events import parse_event_log

        events = parse_event_log(tree.read_bytes(rel), tree.display(rel))
    for holder in (trace, ev_sec):
        if holder is None:
            continue
        ce = holder.entry("contextidr")
        if ce is not None:
            from cstrace.memory.events import CONTEXTIDR_MODES

            contextidr = ce.value.strip().lower()
            if contextidr not in CONTEXTIDR_MODES:
                raise SnapshotError(
                    f"contextidr {ce.value!r} is not one of {', '.join(CONTEXTIDR_MODES)}",
                    path=ini.path,
                    line=ce.line,
                )
    # How trace timestamps become event-log time (a recording's TIME_CONV).
    clock: CounterClock | None = None
    mult = _int_item(trace, "clock_mult", ini)
    if mult is not None:
        from cstrace.memory.clock import CounterClock

        clock = CounterClock(
            _int_item(trace, "clock_shift", ini) or 0,
            mult,
            _int_item(trace, "clock_zero", ini) or 0,
            _int_item(trace, "clock_cycles", ini) or 0,
            _int_item(trace, "clock_mask", ini) or 0,
            bool(_int_item(trace, "clock_short", ini)),
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
        clock=clock,
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


def read_package(tree: FileTree, top: PurePosixPath | None = None) -> Trace:
    """The :class:`~cstrace.trace.Trace` of the package whose ``contents.ini`` is ``top``."""
    return load_package(tree, top).to_trace()


def open_trace_input(path: str | Path, *, limits: Limits | None = None) -> Trace:
    """Open a DS-5 snapshot (folder or ``snapshot.ini``), a package folder, or a ZIP of either."""
    p = Path(path)
    if not p.exists():
        raise SnapshotError("no such file or folder", path=str(p))
    if p.is_dir():
        if (p / _SNAPSHOT_INI).is_file():
            return to_trace(load_snapshot(DirTree(p)))
        if (p / CONTENTS).is_file():
            return read_package(DirTree(p))
        raise SnapshotError(
            f"not a snapshot or trace package: no {_SNAPSHOT_INI} or {CONTENTS}", path=str(p)
        )
    if p.name.lower() == CONTENTS:
        return read_package(DirTree(p.parent))
    if p.name.lower().endswith(".ini"):
        return to_trace(load_snapshot(DirTree(p.parent), PurePosixPath(p.name)))
    # (ZIP support loaded only for a ZIP: a folder needs none of it)
    import zipfile

    from cstrace.inputs.zipfiles import ZipTree

    if not zipfile.is_zipfile(p):
        raise SnapshotError("not a snapshot, trace package or ZIP archive", path=str(p))
    tree = ZipTree(p, limits=limits)
    names = tree.names()
    root = _find_root(names, _SNAPSHOT_INI)
    if root is not None:
        sub = ZipTree(p, prefix=root, limits=limits) if root else tree
        return to_trace(load_snapshot(sub))
    root = _find_root(names, CONTENTS)
    if root is not None:
        sub = ZipTree(p, prefix=root, limits=limits) if root else tree
        return read_package(sub)
    raise SnapshotError(f"ZIP archive holds no {CONTENTS} or {_SNAPSHOT_INI}", path=str(p))
