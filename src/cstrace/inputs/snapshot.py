"""DS-5 snapshot folder → :class:`~cstrace.trace.Trace` (through the device view).

Reads ``snapshot.ini`` (devices, ``[trace] metadata``), each device file
(``[device]``, ``[regs]``, ``[dump*]``) and the trace metadata (``trace.ini``:
``[trace_buffers]``, the buffer sections, ``[source_buffers]``,
``[core_trace_sources]``), as specified by ARM-ECM-0611873 §3. Problems are
reported with the file and line that caused them; a memory dump whose file is
missing is only a warning, since the trace may still decode without it.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from cstrace.capture import FORMATS
from cstrace.errors import SnapshotError
from cstrace.inputs.devices import (
    Device,
    MemoryDump,
    Register,
    Snapshot,
    TraceBuffer,
    parse_int,
    to_trace,
)
from cstrace.inputs.files import DirTree, FileTree, safe_relative
from cstrace.inputs.ini import IniFile, IniSection, decode_ini
from cstrace.trace import Trace

__all__ = ["load_snapshot", "read_snapshot"]

_REG_KEY = re.compile(r"^\s*([^()\s]+)\s*(?:\((.*)\))?\s*$")


def _read_ini(tree: FileTree, rel: PurePosixPath) -> IniFile:
    name = tree.display(rel)
    if not tree.exists(rel):
        raise SnapshotError("file not found", path=name)
    return decode_ini(tree.read_bytes(rel), name)


def _parse_register(key: str, value: str, path: str, line: int) -> Register:
    m = _REG_KEY.match(key)
    if not m:
        raise SnapshotError(f"malformed register name {key!r}", path=path, line=line)
    name, extra = m.group(1), m.group(2)
    reg_id: int | None = None
    size = 32
    if extra:
        for item in extra.split(","):
            item = item.strip()
            if not item:
                continue
            k, sep, v = item.partition(":")
            if not sep:
                k, v = "id", k
            k = k.strip().lower()
            if k == "id":
                reg_id = parse_int(v, what=f"register {name} id", path=path, line=line)
            elif k == "size":
                size = parse_int(v, what=f"register {name} size", path=path, line=line)
    return Register(name.upper(), value, path, line, reg_id, size)


def _parse_dump(section: IniSection, ini: IniFile, tree: FileTree) -> MemoryDump:
    file_entry = section.entry("file")
    if file_entry is None:
        raise ini.error(f"[{section.name}] has no 'file' key", section.line)
    rel = safe_relative(file_entry.value, path=ini.path, line=file_entry.line)
    addr_entry = section.entry("address")
    if addr_entry is None:
        raise ini.error(f"[{section.name}] has no 'address' key", section.line)
    address = parse_int(addr_entry.value, what="dump address", path=ini.path, line=addr_entry.line)
    offset = 0
    length: int | None = None
    e = section.entry("offset")
    if e is not None:
        offset = parse_int(e.value, what="dump offset", path=ini.path, line=e.line)
    e = section.entry("length")
    if e is not None:
        length = parse_int(e.value, what="dump length", path=ini.path, line=e.line)
    return MemoryDump(
        rel, address, offset, length, section.get("space", "") or "", ini.path, section.line
    )


def _parse_device(ini: IniFile, tree: FileTree) -> Device:
    sec = ini.section("device")
    if sec is None:
        raise ini.error("no [device] section")
    name = sec.get("name")
    if not name:
        raise ini.error("[device] has no 'name'", sec.line)
    dev = Device(
        name=name,
        device_class=(sec.get("class", "") or "").lower(),
        device_type=sec.get("type", "") or "",
        location=sec.get("location", "") or "",
        path=ini.path,
    )
    regs = ini.section("regs")
    if regs is not None:
        for e in regs.entries:
            reg = _parse_register(e.key, e.value, ini.path, e.line)
            dev.registers[reg.name] = reg
    for dsec in ini.sections_starting("dump"):
        dev.dumps.append(_parse_dump(dsec, ini, tree))
    return dev


def _parse_trace_ini(
    ini: IniFile, tree: FileTree
) -> tuple[list[TraceBuffer], list[tuple[str, list[str]]], list[tuple[str, str]]]:
    tb = ini.section("trace_buffers")
    if tb is None:
        raise ini.error("no [trace_buffers] section")
    entry = tb.entry("buffers")
    if entry is None:
        raise ini.error("[trace_buffers] has no 'buffers' key", tb.line)
    buffers: list[TraceBuffer] = []
    keys = [k.strip() for k in entry.value.split(",") if k.strip()]
    for key in keys:
        if ini.section(key) is None:
            raise ini.error(f"buffer {key!r} is listed but has no [{key}] section", entry.line)
    # Buffers are taken in the order their sections appear in the file, as the
    # reference decoder does (the 'buffers' list only says which sections they are).
    listed = {k.lower() for k in keys}
    for sec in ini.sections:
        if sec.name.lower() not in listed:
            continue
        listed.discard(sec.name.lower())
        key = sec.name
        name = sec.get("name")
        if not name:
            raise ini.error(f"[{key}] has no 'name'", sec.line)
        fentry = sec.entry("file")
        if fentry is None:
            raise ini.error(f"[{key}] has no 'file'", sec.line)
        files = tuple(
            safe_relative(f, path=ini.path, line=fentry.line)
            for f in fentry.value.split(",")
            if f.strip()
        )
        if not files:
            raise ini.error(f"[{key}] names no file", fentry.line)
        fentry = sec.entry("format")
        fmt = (fentry.value if fentry is not None else "").strip().lower() or "coresight"
        if fmt not in FORMATS:
            raise ini.error(
                f"unknown trace buffer format {fmt!r} (expected one of {', '.join(FORMATS)})",
                fentry.line if fentry is not None else sec.line,
            )
        buffers.append(TraceBuffer(key, name, files, fmt, ini.path, sec.line))
    source_buffers: list[tuple[str, list[str]]] = []
    sb = ini.section("source_buffers")
    if sb is not None:
        for e in sb.entries:
            source_buffers.append((e.key, [b.strip() for b in e.value.split(",") if b.strip()]))
    core_sources: list[tuple[str, str]] = []
    cs = ini.section("core_trace_sources")
    if cs is not None:
        for e in cs.entries:
            core_sources.append((e.key, e.value.strip()))
    return buffers, source_buffers, core_sources


def load_snapshot(tree: FileTree, top: PurePosixPath | None = None) -> Snapshot:
    """Read a snapshot whose ``snapshot.ini`` is ``top`` (default: at the root of ``tree``)."""
    if top is None:
        top = PurePosixPath("snapshot.ini")
    ini = _read_ini(tree, top)
    base = top.parent
    warnings: list[str] = []
    sec = ini.section("snapshot")
    description = ""
    if sec is not None:
        version = sec.get("version")
        description = sec.get("description", "") or ""
        if version is not None and version.strip() != "1.0":
            warnings.append(f"{ini.path}: snapshot version {version!r}; only 1.0 is known")
    devices: dict[str, Device] = {}
    dl = ini.section("device_list")
    if dl is None:
        raise ini.error("no [device_list] section")
    for e in dl.entries:
        rel = base / safe_relative(e.value, path=ini.path, line=e.line)
        if not tree.exists(rel):
            raise SnapshotError(f"device file {e.value!r} not found", path=ini.path, line=e.line)
        dev_ini = _read_ini(tree, rel)
        dev = _parse_device(dev_ini, tree)
        dev.dumps = [
            MemoryDump(base / d.file, d.address, d.offset, d.length, d.space, d.path, d.line)
            for d in dev.dumps
        ]
        if dev.name in devices:
            warnings.append(f"{dev_ini.path}: duplicate device name {dev.name!r}; later one kept")
        devices[dev.name] = dev
    trace = ini.section("trace")
    buffers: list[TraceBuffer] = []
    source_buffers: list[tuple[str, list[str]]] = []
    core_sources: list[tuple[str, str]] = []
    if trace is not None and trace.entry("metadata") is not None:
        me = trace.entry("metadata")
        assert me is not None
        rel = base / safe_relative(me.value, path=ini.path, line=me.line)
        if not tree.exists(rel):
            raise SnapshotError(
                f"trace metadata {me.value!r} not found", path=ini.path, line=me.line
            )
        tini = _read_ini(tree, rel)
        buffers, source_buffers, core_sources = _parse_trace_ini(tini, tree)
        buffers = [
            TraceBuffer(b.key, b.name, tuple(base / f for f in b.files), b.format, b.path, b.line)
            for b in buffers
        ]
    for dev in devices.values():
        for d in dev.dumps:
            if not tree.exists(d.file):
                warnings.append(
                    f"{d.path}: line {d.line}: memory dump {tree.display(d.file)} not found; "
                    "decoding continues without it"
                )
    for b in buffers:
        for f in b.files:
            if not tree.exists(f):
                warnings.append(
                    f"{b.path}: line {b.line}: trace file {tree.display(f)} of buffer "
                    f"{b.name!r} not found"
                )
    return Snapshot(tree, description, devices, buffers, source_buffers, core_sources, warnings)


def read_snapshot(path: str | Path) -> Trace:
    """The :class:`~cstrace.trace.Trace` of the DS-5 snapshot in folder ``path``.

    ``path`` may also name the snapshot's ``snapshot.ini``.
    """
    p = Path(path)
    if p.is_file() and p.name.lower().endswith(".ini"):
        return to_trace(load_snapshot(DirTree(p.parent), PurePosixPath(p.name)))
    if not p.exists():
        raise SnapshotError("no such file or folder", path=str(p))
    if not p.is_dir():
        raise SnapshotError("not a snapshot folder", path=str(p))
    if not (p / "snapshot.ini").is_file():
        raise SnapshotError("not a snapshot folder: no snapshot.ini", path=str(p))
    return to_trace(load_snapshot(DirTree(p)))
