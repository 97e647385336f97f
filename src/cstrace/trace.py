"""The container-free description of a trace: what the decoder needs, wherever it came from.

Input: nothing (plain records). Output: :class:`Trace`, built by the input
adapters of :mod:`cstrace.inputs` from a DS-5 snapshot, a trace package
(metadata requirements §6.4), a raw capture with options, or any other
container. Nothing downstream knows which one it was:

- :class:`Buffer`: captured bytes (one or more files, read lazily through
  :class:`Blob`) and their capture format (``coresight``, ``dstream_coresight``,
  ``tpiu``, ``source_data`` and the classic port formats); for a recording that
  says so, who ran when it was captured (:class:`ExecContext`: CPU, process,
  thread) and the event-log time its decoding starts at;
- :class:`Source`: a trace source: protocol, trace ID, the type of the core it
  traces, a plain mapping of register (or option) values, and the buffers that
  carry its trace. Protocols configure themselves from these with their
  ``from_registers``;
- :class:`Dump`: memory contents at an address in a memory space, for one core
  or for all;
- :class:`Image`: a program image (ELF or raw) to map, for one core or process;
- :class:`~cstrace.memory.events.EventLog`: the time-ordered system events
  (processes, threads, libraries, code patches) of metadata requirements §5;
- :class:`~cstrace.errors.Issue` records: what the input adapter noticed
  (a memory file that is missing, a format guessed with low confidence);
- a :class:`~cstrace.memory.clock.CounterClock` when the trace's timestamps
  and the event log count time differently (perf's TIME_CONV);
- optionally a :class:`~cstrace.memory.binaries.BinaryResolver`: which program
  binary each traced address belongs to, where the input knows more than its
  images (the memory maps of a recording's processes).

Where each item came from (file and line) is kept as an :class:`Origin` so
errors can point at it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cstrace.elements import MemSpace
from cstrace.errors import InputError, Issue

if TYPE_CHECKING:  # (what a recording or an event log adds: loaded by the inputs that have it)
    from cstrace.memory.binaries import BinaryResolver
    from cstrace.memory.clock import CounterClock
    from cstrace.memory.events import EventLog

__all__ = [
    "Blob",
    "Buffer",
    "Dump",
    "ExecContext",
    "Image",
    "Origin",
    "Source",
    "Trace",
]


class Blob(Protocol):
    """The bytes of one file, read when needed (a file on disk, a ZIP member, memory)."""

    @property
    def name(self) -> str:
        """How to name the file in messages (a path, ``archive.zip/inner/path``)."""
        ...

    def exists(self) -> bool:
        """Whether the file is there to be read."""
        ...

    def size(self) -> int:
        """Size in bytes."""
        ...

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes (all by default) from ``offset``; a located :class:`InputError`."""
        ...

    def blocks(self, block_size: int) -> Iterator[bytes]:
        """The bytes from start to end in consecutive blocks, read as they are needed."""
        ...


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an item of a trace was described: a file (or ``command line``) and a line."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return self.path if self.line is None else f"{self.path}: line {self.line}"


@dataclass(frozen=True, slots=True)
class ExecContext:
    """Who ran the traced code: the CPU, the process and the thread (None when unknown)."""

    cpu: int | None = None
    pid: int | None = None
    tid: int | None = None


@dataclass(frozen=True)
class Buffer:
    """A trace buffer: captured bytes, in one or more files read in order, and their format.

    A recording may say more (perf.data does, for each piece of AUX data):
    ``context``, who ran when the trace in it began, and ``time``, the
    event-log time at which its code memory is looked up until the trace
    gives a timestamp (None: as each process and image first appears).
    """

    name: str
    format: str
    """Capture format (see :data:`cstrace.capture.FORMATS`)."""
    files: tuple[Blob, ...]
    origin: Origin = Origin("")
    context: ExecContext | None = None
    time: int | None = None

    def size(self) -> int:
        """Size in bytes: the sum of the files' sizes."""
        return sum(f.size() for f in self.files)

    def read(self) -> bytes:
        """All the bytes, files concatenated in order."""
        return b"".join(f.read() for f in self.files)

    def blocks(self, block_size: int = 1 << 20) -> Iterator[bytes]:
        """The bytes in consecutive blocks (never spanning two files), read as needed."""
        for f in self.files:
            yield from f.blocks(block_size)

    def where(self, offset: int) -> tuple[str, int]:
        """The file holding capture ``offset`` and the offset inside it."""
        start = 0
        for f in self.files:
            size = f.size()
            if offset < start + size or f is self.files[-1]:
                return f.name, offset - start
            start += size
        return self.name, offset


@dataclass(frozen=True)
class Source:
    """A trace source: how to configure its protocol, and where its trace is.

    ``protocol`` is a protocol package name (``etmv4``, ``ete``, ``ptm``,
    ``etmv3``, ``stm``, ``itm``, ``etmv1``, ``etmv2``, ``xscale``, ``dcc``) or
    the source type as given when cstrace does not know it; ``source_type`` is
    the type as the input wrote it (``ETM4.2``, ``PTM1.1``); ``version`` its
    version part (``4.2``). ``registers`` maps upper-case register (or option)
    names to values; ``core`` is the type of the traced core (``Cortex-A53``)
    and ``core_name`` the name of that core in the input, which selects its
    memory dumps and images; ``cpu`` the number of the CPU it traces, when the
    input says (a perf.data recording does).
    """

    name: str
    protocol: str
    source_type: str
    registers: Mapping[str, int]
    buffers: tuple[str, ...]
    core: str = ""
    core_name: str | None = None
    origin: Origin = Origin("")
    cpu: int | None = None

    @property
    def version(self) -> str:
        """The version part of the source type: ``4.2`` for ``ETM4.2``, empty if none."""
        head, dot, rest = self.source_type.partition(".")
        digits = "".join(c for c in head if c.isdigit())
        return f"{digits}.{rest}" if dot else digits


@dataclass(frozen=True)
class Dump:
    """Memory contents: ``length`` bytes (default: all) of ``file`` from ``offset`` at ``address``.

    ``core`` names the core that sees it (None: every core).
    """

    file: Blob
    address: int
    space: MemSpace = MemSpace.ANY
    offset: int = 0
    length: int | None = None
    core: str | None = None
    origin: Origin = Origin("")


@dataclass(frozen=True)
class Image:
    """A program image (ELF, or raw bytes at ``base``) to map into code memory.

    ``base`` moves an ELF's first loadable segment there; ``uuid`` is the
    build ID it must have; ``core`` and ``pid`` restrict it to one core or
    process; ``name`` is how an event log may refer to it.
    """

    file: Blob
    name: str
    base: int | None = None
    uuid: str | None = None
    core: str | None = None
    pid: int | None = None
    space: MemSpace = MemSpace.ANY
    origin: Origin = Origin("")


@dataclass(frozen=True)
class Inferred:
    """How the configuration of one trace source was inferred from its trace (raw captures)."""

    trace_id: int
    protocol: str
    """The source type chosen (``ETE``, ``ETM4.6``, ``PTM1.1``, ``ETM3.5``)."""
    core: str
    """The core type chosen (an architecture name such as ``ARM-AA64``)."""
    settings: Mapping[str, str]
    """Each setting and its value in words (``cyclecount``: ``1``)."""
    confidence: float
    """Between 0 and 1: how much better the choice decoded than the next best that
    decodes differently (0.5 or less when the evidence does not separate them)."""
    evidence: str
    label: str = ""
    """The protocol and core in words, as far as the evidence goes (``ETMv4 (minor
    version not seen) on an Armv8-A core``); empty: ``protocol on core``."""
    undecided: tuple[str, ...] = ()
    """Settings the evidence does not decide: field, deciding option, what each gives."""
    same: tuple[str, ...] = ()
    """Settings whose other values decode the trace the same."""

    def describe(self) -> str:
        """One line: trace ID, protocol, core and settings, with the confidence."""
        items = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        what = self.label or f"{self.protocol} on {self.core}"
        return (
            f"trace ID {self.trace_id:#04x}: {what} (decoded as {self.protocol} on "
            f"{self.core}){': ' + items if items else ''} (inferred, confidence "
            f"{self.confidence:.2f})"
        )

    def notes(self) -> list[str]:
        """What the evidence left undecided, one line each (empty when it decided all)."""
        return [f"trace ID {self.trace_id:#04x}: undecided: {u}" for u in self.undecided]


@dataclass
class Trace:
    """Everything needed to decode: buffers, sources, code memory and the event log."""

    buffers: list[Buffer]
    sources: list[Source]
    dumps: list[Dump] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    events: EventLog | None = None
    contextidr: str | None = None
    """How CONTEXTIDR names processes (``pid``, ``asid``, ``tid``); None: from the log."""
    description: str = ""
    issues: list[Issue] = field(default_factory=list)
    """What the input adapter noticed while reading (missing files, guesses)."""
    find_file: Callable[[str], Blob | None] | None = None
    """Finds a file the event log names, inside the container (None: no such lookup)."""
    inferred: list[Inferred] = field(default_factory=list)
    """Sources of a raw capture whose configuration was inferred, and how."""
    clock: CounterClock | None = None
    """How trace timestamps become event-log time (None: they are the same)."""
    binaries: BinaryResolver | None = None
    """Where trace addresses fall in program binaries, for an input that knows its processes'
    memory maps (a recording); None: from :attr:`images` and :attr:`dumps`, which hold in
    every context (``cstrace.analyses.profile.image_resolver``)."""

    @property
    def has_exec_context(self) -> bool:
        """Whether the input says who ran (CPU, process, thread) for its buffers."""
        return any(b.context is not None for b in self.buffers)

    def buffer(self, name: str) -> Buffer:
        """The buffer named ``name``; an :class:`InputError` listing the valid names otherwise."""
        for b in self.buffers:
            if b.name == name:
                return b
        valid = ", ".join(b.name for b in self.buffers) or "none"
        raise InputError(f"no trace buffer named {name!r} (buffers: {valid})")

    def sources_for(self, buffer: Buffer) -> list[Source]:
        """The sources whose trace is in ``buffer``, ordered by name."""
        return sorted((s for s in self.sources if buffer.name in s.buffers), key=lambda s: s.name)
