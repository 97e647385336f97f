"""The device view of a snapshot or package, and its conversion into a Trace.

Input: nothing (plain records), filled by :mod:`cstrace.inputs.snapshot` from a
DS-5 snapshot (ARM-ECM-0611873, "Debug and Trace Snapshot File Format") and by
:mod:`cstrace.inputs.package` from trace packages: devices with their
registers (as written) and memory dumps, trace buffers, which source feeds
which buffer and traces which core. Output: :func:`to_trace` turns it into the
container-free :class:`~cstrace.trace.Trace` the decoder takes, with each trace
source's registers as numbers (a malformed value is a located error then).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from cstrace.errors import Issue, IssueKind, Severity, SnapshotError
from cstrace.inputs.files import FileTree, TreeBlob, safe_relative
from cstrace.memory.image import mem_space_from_name
from cstrace.parsing import parse_int
from cstrace.protocols import protocol_name
from cstrace.trace import Blob, Buffer, Dump, ExecContext, Image, Origin, Source, Trace

if TYPE_CHECKING:
    from cstrace.memory.clock import CounterClock
    from cstrace.memory.events import EventLog

__all__ = [
    "Device",
    "MemoryDump",
    "Register",
    "Snapshot",
    "TraceBuffer",
    "TraceSource",
    "parse_int",
    "to_trace",
]


@dataclass(frozen=True)
class Register:
    """One register of a device, as written in its ``[regs]`` section."""

    name: str
    text: str
    path: str
    line: int
    reg_id: int | None = None
    size: int = 32

    @property
    def value(self) -> int:
        """The register value; a located error if it is not a number or is wider than any
        register (64 bits)."""
        value = parse_int(self.text, what=f"register {self.name}", path=self.path, line=self.line)
        if value >> 64:
            raise SnapshotError(
                f"register {self.name}: {self.text.strip()!r} is wider than 64 bits",
                path=self.path,
                line=self.line,
            )
        return value


@dataclass(frozen=True)
class MemoryDump:
    """A memory region of a device: ``length`` bytes at ``address``, from ``file`` at ``offset``."""

    file: PurePosixPath
    address: int
    offset: int
    length: int | None
    space: str
    path: str
    line: int


@dataclass
class Device:
    """A device of the snapshot: a core, a trace source, or a memory space."""

    name: str
    device_class: str
    device_type: str
    location: str
    path: str
    registers: dict[str, Register] = field(default_factory=dict)
    dumps: list[MemoryDump] = field(default_factory=list)
    cpu: int | None = None
    """The CPU a trace source traces, when the metadata says (``cpu`` item)."""

    @property
    def protocol(self) -> str:
        """The trace protocol name of a trace source, without its version: ``ETM4``, ``PTM``..."""
        return self.device_type.split(".", 1)[0].strip().upper()

    def register(self, name: str) -> Register | None:
        """The register named ``name`` (case-insensitive), if present."""
        return self.registers.get(name.upper())

    def reg(self, name: str, default: int | None = None) -> int | None:
        """The value of register ``name``, or ``default`` when it is absent."""
        r = self.register(name)
        return default if r is None else r.value

    def require(self, name: str) -> int:
        """The value of register ``name``; a located error when it is absent."""
        r = self.register(name)
        if r is None:
            raise SnapshotError(
                f"register {name} is required to decode {self.device_type} trace "
                f"of device {self.name!r}",
                path=self.path,
            )
        return r.value


@dataclass(frozen=True)
class TraceBuffer:
    """A trace buffer of ``trace.ini``: its name, files and data format."""

    key: str
    name: str
    files: tuple[PurePosixPath, ...]
    format: str
    path: str
    line: int
    context: ExecContext | None = None
    """Who ran when its trace began, when the package says (``cpu``, ``pid``, ``tid``)."""
    time: int | None = None
    """The event-log time its code is looked up at (``time``)."""


@dataclass(frozen=True)
class TraceSource:
    """A trace source device feeding a buffer, with the core it traces (if any)."""

    device: Device
    core: Device | None


@dataclass
class Snapshot:
    """A loaded snapshot: devices, buffers and the source/core/buffer associations."""

    tree: FileTree
    description: str
    devices: dict[str, Device]
    buffers: list[TraceBuffer]
    source_buffers: list[tuple[str, list[str]]]
    core_sources: list[tuple[str, str]]
    warnings: list[str] = field(default_factory=list)

    def device(self, name: str) -> Device | None:
        """The device named ``name`` (exact match first, then case-insensitive)."""
        dev = self.devices.get(name)
        if dev is not None:
            return dev
        low = name.lower()
        for key, value in self.devices.items():
            if key.lower() == low:
                return value
        return None

    def buffer(self, name: str) -> TraceBuffer:
        """The buffer named ``name``; an error listing the valid names otherwise."""
        for b in self.buffers:
            if b.name == name:
                return b
        valid = ", ".join(b.name for b in self.buffers) or "none"
        raise SnapshotError(f"no trace buffer named {name!r} (buffers: {valid})")

    def read_buffer(self, buffer: TraceBuffer) -> bytes:
        """The bytes of a trace buffer: its files concatenated in order."""
        return b"".join(self.tree.read_bytes(f) for f in buffer.files)

    def buffer_size(self, buffer: TraceBuffer) -> int:
        """The size of a trace buffer in bytes (the sum of its files)."""
        return sum(self.tree.size(f) for f in buffer.files)

    def iter_buffer(self, buffer: TraceBuffer, block_size: int = 1 << 20) -> Iterator[bytes]:
        """The bytes of a trace buffer in consecutive blocks, read as they are needed."""
        for f in buffer.files:
            sequential = getattr(self.tree, "iter_blocks", None)
            if sequential is not None:
                yield from sequential(f, block_size)
                continue
            size = self.tree.size(f)
            offset = 0
            while offset < size:
                chunk = self.tree.read_bytes(f, offset, min(block_size, size - offset))
                if not chunk:
                    break
                yield chunk
                offset += len(chunk)

    def core_of(self, source: Device) -> Device | None:
        """The core traced by a trace source, from ``core_trace_sources``."""
        for core_name, src in self.core_sources:
            if src.startswith("@"):
                if source.location and src[1:].strip() == source.location:
                    return self.device(core_name)
            elif src.lower() == source.name.lower():
                return self.device(core_name)
        return None

    def sources_for(self, buffer: TraceBuffer) -> list[TraceSource]:
        """The trace sources whose data is in ``buffer``, ordered by source name."""
        names: list[str] = []
        if self.source_buffers:
            for source, bufs in self.source_buffers:
                base = source.split("(", 1)[0].strip()
                if buffer.name in bufs and base not in names:
                    names.append(base)
        elif len(self.buffers) == 1:
            names = [d.name for d in self.devices.values() if d.device_class == "trace_source"]
        out: list[TraceSource] = []
        for name in sorted(names):
            dev = self.device(name)
            if dev is None:
                continue
            out.append(TraceSource(dev, self.core_of(dev)))
        return out

    def memory_devices(self, core: Device | None) -> list[Device]:
        """Devices whose dumps describe memory seen by ``core``: the core and memory spaces."""
        devs = [d for d in self.devices.values() if d.device_class == "memory_space"]
        return ([core] if core is not None else []) + devs


def _issue(text: str) -> Issue:
    """A warning of a reader (already located in its text)."""
    return Issue(Severity.WARNING, IssueKind.INPUT, text)


def trace_sources(snap: Snapshot) -> list[Source]:
    """The trace sources that feed the snapshot's buffers, with numeric registers.

    A register whose value is not a number is a located :class:`~cstrace.errors.InputError`.
    """
    order: list[str] = []
    found: dict[str, tuple[TraceSource, list[str]]] = {}
    for b in snap.buffers:
        for ts in snap.sources_for(b):
            name = ts.device.name
            if name not in found:
                found[name] = (ts, [])
                order.append(name)
            found[name][1].append(b.name)
    out: list[Source] = []
    for name in order:
        ts, bufs = found[name]
        dev = ts.device
        # A malformed value is bad metadata: a located error (the file and line of it).
        regs = {r.name: r.value for r in dev.registers.values()}
        out.append(
            Source(
                name=dev.name,
                protocol=protocol_name(dev.device_type) or "",
                source_type=dev.device_type,
                registers=regs,
                buffers=tuple(bufs),
                core=ts.core.device_type if ts.core is not None else "",
                core_name=ts.core.name if ts.core is not None else None,
                origin=Origin(dev.path),
                cpu=dev.cpu,
            )
        )
    return out


def to_trace(
    snap: Snapshot,
    *,
    images: list[Image] | None = None,
    events: EventLog | None = None,
    contextidr: str | None = None,
    clock: CounterClock | None = None,
) -> Trace:
    """The :class:`~cstrace.trace.Trace` a snapshot (or package) describes.

    Buffers keep their names, order and formats; sources their registers
    (parsed now: a malformed value is a located :class:`~cstrace.errors.InputError`);
    memory dumps of each core, then of memory-space devices, keep their order.
    Files the event log names are looked for inside the snapshot's tree.
    """
    tree = snap.tree
    buffers = [
        Buffer(
            b.name,
            b.format,
            tuple(TreeBlob(tree, f) for f in b.files),
            Origin(b.path, b.line),
            b.context,
            b.time,
        )
        for b in snap.buffers
    ]
    dumps: list[Dump] = []
    shared: list[Dump] = []
    for dev in snap.devices.values():
        for d in dev.dumps:
            dump = Dump(
                TreeBlob(tree, d.file),
                d.address,
                mem_space_from_name(d.space),
                d.offset,
                d.length,
                None if dev.device_class == "memory_space" else dev.name,
                Origin(d.path, d.line),
            )
            (shared if dump.core is None else dumps).append(dump)

    def find_file(name: str) -> Blob | None:
        rel_text = name.replace("\\", "/").lstrip("/")
        try:
            rel = safe_relative(rel_text, path="event log", line=None)
        except SnapshotError:
            return None
        return TreeBlob(tree, rel) if tree.exists(rel) else None

    issues = [_issue(w) for w in snap.warnings]
    sources = trace_sources(snap)
    return Trace(
        buffers=buffers,
        sources=sources,
        dumps=dumps + shared,
        images=list(images or []),
        events=events,
        contextidr=contextidr,
        description=snap.description,
        issues=issues,
        find_file=find_file,
        clock=clock,
    )
