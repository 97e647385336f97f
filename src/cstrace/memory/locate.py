"""Which image holds an address of a process, and where in its file: for profiles and reports.

Input: the event log of a trace (:class:`~cstrace.memory.events.EventLog`:
processes, threads and the images mapped in them over time), a way to find the
images it names (the same resolver the code memory uses), the images mapped in
every address space, and how the trace names processes (CONTEXTIDR ``pid``,
``tid``, ``asid`` or ``vmid``). Output: an :class:`ImageLocator`:

- :meth:`~ImageLocator.locate` ``(pid, address, time)`` gives a
  :class:`Location`: the image's name (its path on the traced system), its
  build ID, the file offset of the address, its link-time address when the
  file was found, where the image is loaded, and the local file read;
- :meth:`~ImageLocator.process_of` gives the process of a thread at a time;
- :meth:`~ImageLocator.count_missing` locates an address the decoder could
  not read and counts it against its image when that image's file was not
  found: :meth:`~ImageLocator.missing_images` lists them with their counts;
  when the file was found but the address is in none of its code (an image
  placed where it was not, such as a kernel module laid out otherwise than the
  kernel did), against that file: :meth:`~ImageLocator.missed_images`;
- :class:`LogBinaries` answers the profiles' seam
  (:class:`~cstrace.memory.binaries.BinaryResolver`) from the same log.

An image's extent in a process is the ``size`` the log gives (a recording's
memory maps), else the code of its file. The file offset of an address comes
from the file's loadable segments when the file is there; without it, it is
``address - base``, exact for the base a recording gives (its mapping's start
less its file offset). Process 0 (the kernel) is seen in every process.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from cstrace.memory.binaries import Binary, Mapping
from cstrace.memory.elf import ElfImage
from cstrace.memory.events import EventLog, ProcessEvent
from cstrace.memory.spaces import KERNEL_PID, ImageResolver, StaticMapping, Timeline

__all__ = [
    "GlobalImage",
    "ImageLocator",
    "Location",
    "LogBinaries",
    "MissedImage",
    "MissingImage",
]


@dataclass(frozen=True, slots=True)
class Location:
    """Where an address of a process is: in which image, and at which offset of its file."""

    image: str
    """The image's name as the trace gives it (its path on the traced system)."""
    build_id: str | None
    """Its build ID (hex digits), from the trace or, failing that, from the file."""
    offset: int
    """The address's offset in the image file."""
    address: int | None
    """The address in the image's own (link-time) addresses; None when the file is missing."""
    base: int
    """Where the image's first loadable byte is in the process."""
    file: str | None
    """The file the image was read from; None when it was not found."""


@dataclass(frozen=True, slots=True)
class MissingImage:
    """An image whose file was not found, and how many trace addresses fell in it."""

    image: str
    build_id: str | None
    addresses: int


@dataclass(frozen=True, slots=True)
class MissedImage:
    """An image whose file was found, and how many trace addresses in its mapping missed
    its code."""

    image: str
    build_id: str | None
    file: str
    addresses: int


@dataclass(frozen=True, slots=True)
class GlobalImage:
    """An image mapped in every address space (not placed by the log)."""

    name: str
    uuid: str | None
    base: int | None
    load: Callable[[], ElfImage | bytes]


class _Span:
    __slots__ = ("base", "end", "got", "image", "start", "uuid")

    def __init__(
        self,
        start: int,
        end: int,
        image: str,
        uuid: str | None,
        base: int | None,
        got: ElfImage | bytes | None,
    ) -> None:
        self.start = start
        self.end = end
        self.image = image
        self.uuid = uuid
        self.base = base
        self.got = got


class ImageLocator:
    """Answers "which image and file offset" for an address of a process (module docstring)."""

    def __init__(
        self,
        log: EventLog | None,
        resolve: ImageResolver,
        *,
        mode: str = "pid",
        static_mappings: list[StaticMapping] | None = None,
        images: list[GlobalImage] | None = None,
    ) -> None:
        self.mode = mode
        """How the trace names processes: ``pid``, ``tid``, ``asid`` or ``vmid``."""
        self._timeline = Timeline(log, list(static_mappings or []), [])
        self._resolve = resolve
        self._where = log.path if log is not None else ""
        self._images = list(images or [])
        self._loaded: dict[int, ElfImage | bytes | None] = {}
        self._tables: dict[tuple[int, int | None], tuple[list[int], list[_Span]]] = {}
        self._global: list[_Span] | None = None
        self.missing: Counter[tuple[str, str | None]] = Counter()
        """Addresses counted against images whose file was not found, by (name, build ID)."""
        self.missed: Counter[tuple[str, str | None, str]] = Counter()
        """Addresses in the mapping of an image whose file was found that are in none of its
        code, by (name, build ID, file)."""

    # -- processes --

    def process_of(self, ident: int, time: int | None = None) -> int:
        """The process of thread (or process) ``ident`` at ``time`` (itself when not a thread)."""
        ep = self._timeline.epoch(self._timeline.index_at(time))
        return ep.threads.get(ident, ident)

    def thread_of(
        self, context_id: int | None, vmid: int | None, time: int | None = None
    ) -> tuple[int | None, int | None]:
        """(process, thread) a traced context stands for at ``time``, by :attr:`mode`.

        ``tid``: the context ID is the thread; ``pid``: its bits 8..31 are;
        ``vmid``: the VMID is; ``asid``: the ASID gives the process through the
        log, and the thread is unknown. (None, None) when the trace does not say.
        """
        mode = self.mode
        ident = vmid if mode == "vmid" else context_id
        if ident is None:
            return None, None
        ep = self._timeline.epoch(self._timeline.index_at(time))
        if mode == "asid":
            return ep.asids.get(ident & 0xFF), None
        tid = (ident >> 8) & 0xFFFFFF if mode == "pid" else ident & 0xFFFFFFFF
        return ep.threads.get(tid, tid), tid

    # -- images --

    def _load(self, serial: int, iv_value: object) -> ElfImage | bytes | None:
        if serial not in self._loaded:
            got: ElfImage | bytes | None = None
            if isinstance(iv_value, ProcessEvent):
                if iv_value.image is not None or iv_value.uuid is not None:
                    got = self._resolve(iv_value.image, iv_value.uuid, self._where, iv_value.line)
            elif isinstance(iv_value, StaticMapping):
                got = self._resolve(iv_value.image, iv_value.uuid, "package", 0)
            self._loaded[serial] = got
        return self._loaded[serial]

    def _spans_of(
        self,
        image: str,
        uuid: str | None,
        base: int | None,
        size: int | None,
        got: ElfImage | bytes | None,
    ) -> list[_Span]:
        if size is not None and base is not None:
            return [_Span(base, base + size, image, uuid, base, got)]
        if isinstance(got, ElfImage):
            where = None if got.elf_type == "ET_EXEC" else base
            return [_Span(r.start, r.end, image, uuid, base, got) for r in got.regions(where)]
        if isinstance(got, bytes) and base is not None:
            return [_Span(base, base + len(got), image, uuid, base, got)]
        return []

    def _globals(self) -> list[_Span]:
        if self._global is None:
            self._global = []
            for g in self._images:
                self._global.extend(self._spans_of(g.name, g.uuid, g.base, None, g.load()))
        return self._global

    def _table(self, pid: int | None, time: int | None) -> tuple[list[int], list[_Span]]:
        index = self._timeline.index_at(time)
        key = (index, pid)
        got = self._tables.get(key)
        if got is not None:
            return got
        ep = self._timeline.epoch(index)
        ordered: list[_Span] = []
        pids = [] if pid is None else [pid]
        if KERNEL_PID not in pids:
            pids.append(KERNEL_PID)
        for p in pids:
            for iv in ep.maps.get(p, []):
                value = iv.value
                loaded = self._load(iv.serial, value)
                if isinstance(value, ProcessEvent):
                    name = value.image or value.uuid or "?"
                    ordered.extend(self._spans_of(name, value.uuid, value.base, value.size, loaded))
                elif isinstance(value, StaticMapping):
                    ordered.extend(
                        self._spans_of(value.image, value.uuid, value.base, None, loaded)
                    )
        ordered.extend(self._globals())
        # Earlier spans win where they overlap; keep the pieces nobody claimed.
        kept: list[_Span] = []
        for sp in ordered:
            parts = [(sp.start, sp.end)]
            for k in kept:
                nxt: list[tuple[int, int]] = []
                for s, e in parts:
                    if k.end <= s or e <= k.start:
                        nxt.append((s, e))
                        continue
                    if s < k.start:
                        nxt.append((s, k.start))
                    if k.end < e:
                        nxt.append((k.end, e))
                parts = nxt
            kept.extend(_Span(s, e, sp.image, sp.uuid, sp.base, sp.got) for s, e in parts)
        kept.sort(key=lambda sp: sp.start)
        got = ([sp.start for sp in kept], kept)
        self._tables[key] = got
        return got

    def locate(self, pid: int | None, address: int, time: int | None = None) -> Location | None:
        """The image of process ``pid`` (None: only the kernel's and global ones) holding
        ``address`` at event-log ``time`` (None: each image as it first appears), and the
        file offset there; None when no image holds it."""
        starts, spans = self._table(pid, time)
        k = bisect_right(starts, address) - 1
        if k < 0 or address >= spans[k].end:
            return None
        return self._location_in(spans[k], address)

    @staticmethod
    def _location_in(sp: _Span, address: int) -> Location:
        """Where ``address`` of the span ``sp`` is in its image."""
        got = sp.got
        base = sp.base
        if isinstance(got, ElfImage):
            if got.elf_type == "ET_EXEC" or base is None:
                link = address
                base = got.link_base
            else:
                link = address - base + got.link_base
            offset = got.file_offset(link)
            uuid = sp.uuid or got.uuid
            return Location(
                sp.image,
                uuid,
                link - got.link_base if offset is None else offset,
                link,
                base,
                got.name,
            )
        start = sp.start if base is None else base
        name = sp.image if isinstance(got, bytes) else None
        return Location(sp.image, sp.uuid, address - start, None, start, name)

    def mapping(
        self, pid: int | None, address: int, time: int | None = None
    ) -> tuple[int, int, Location, ElfImage | bytes | None] | None:
        """Like :meth:`locate`, with the extent ``[start, end)`` of the image's mapping that
        holds ``address`` and the image's contents (None when its file was not found)."""
        starts, spans = self._table(pid, time)
        k = bisect_right(starts, address) - 1
        if k < 0 or address >= spans[k].end:
            return None
        loc = self.locate(pid, address, time)
        assert loc is not None
        return spans[k].start, spans[k].end, loc, spans[k].got

    def mapped(self) -> list[tuple[int, int, int, Location, ElfImage | bytes | None]]:
        """Every image mapping of the log, as it first appears: (process, start, end, where
        its start is in the image, the image's contents or None), in the log's order."""
        out: list[tuple[int, int, int, Location, ElfImage | bytes | None]] = []
        for iv in self._timeline.intervals:
            value = iv.value
            if iv.kind != "map" or not isinstance(value, ProcessEvent):
                continue
            got = self._load(iv.serial, value)
            name = value.image or value.uuid or "?"
            for sp in self._spans_of(name, value.uuid, value.base, value.size, got):
                out.append((value.pid, sp.start, sp.end, self._location_in(sp, sp.start), got))
        return out

    def processes(self) -> list[int]:
        """The processes the log maps images in, in the order they first appear."""
        seen: dict[int, None] = {}
        for iv in self._timeline.intervals:
            if iv.kind == "map" and iv.key[0] != KERNEL_PID:
                seen.setdefault(iv.key[0], None)
        return list(seen)

    def count_missing(self, pid: int | None, address: int, time: int | None = None) -> bool:
        """Count ``address`` (one the decoder could not read) against its image if that
        image's file was not found, or against the file found when the address is in none
        of its code; whether it was counted."""
        got = self.mapping(pid, address, time)
        if got is None:
            return False
        loc, contents = got[2], got[3]
        if loc.file is None:
            self.missing[(loc.image, loc.build_id)] += 1
            return True
        if isinstance(contents, ElfImage) and loc.address is not None:
            link = loc.address
            if not any(s.address <= link < s.address + len(s.data) for s in contents.segments):
                self.missed[(loc.image, loc.build_id, loc.file)] += 1
                return True
        return False

    def missing_images(self) -> list[MissingImage]:
        """The images not found that trace addresses fell in, most addresses first."""
        return [
            MissingImage(name, uuid, n)
            for (name, uuid), n in sorted(self.missing.items(), key=lambda kv: (-kv[1], kv[0][0]))
        ]

    def missed_images(self) -> list[MissedImage]:
        """The images found whose mapping trace addresses fell in outside their code, most
        addresses first."""
        return [
            MissedImage(name, uuid, file, n)
            for (name, uuid, file), n in sorted(
                self.missed.items(), key=lambda kv: (-kv[1], kv[0][0])
            )
        ]


class LogBinaries:
    """The binaries an event log maps, as a :class:`~cstrace.memory.binaries.BinaryResolver`.

    For profiles of a recording (``Trace.binaries``): ``find(address,
    context_id, trace_id, time)`` takes the process from the traced context ID
    as the locator's convention says (the thread, through the log's threads);
    when the trace gives none (a recording whose process is in the VMID, or no
    context tracing), the kernel's and global images, then each process of the
    log in turn. Images are those mapped at ``time`` (after an exec, the new
    program's), or, without a time, as each first appears in the log. A binary
    whose file was not found has its file offsets as its addresses.
    """

    def __init__(self, locator: ImageLocator) -> None:
        self.locator = locator
        self._binaries: dict[tuple[str, str | None], Binary] = {}

    def _binary(self, loc: Location, got: ElfImage | bytes | None) -> Binary:
        key = (loc.image, loc.build_id)
        binary = self._binaries.get(key)
        if binary is None:
            elf = got if isinstance(got, ElfImage) else None
            binary = self._binaries[key] = Binary(loc.image, loc.build_id, elf)
        return binary

    @property
    def mappings(self) -> list[Mapping]:
        """The code of every image the log maps, as mappings (for listing them, as the
        ``PERF_RECORD_MMAP2`` lines of perf-script text): an ELF file's executable
        segments (a kernel module's code sections), else the whole mapping; each once."""
        out: list[Mapping] = []
        seen: set[tuple[int, int, tuple[str, str | None]]] = set()
        for _pid, start, end, where, contents in self.locator.mapped():
            binary = self._binary(where, contents)
            link = where.address if where.address is not None else where.offset
            delta = start - link
            pieces = [(start, end)]
            if isinstance(contents, ElfImage) and contents.loads:
                pieces = [
                    (ld.vaddr + delta, ld.vaddr + delta + ld.filesz)
                    for ld in contents.loads
                    if ld.executable and ld.filesz
                ]
            elif isinstance(contents, ElfImage):
                pieces = [
                    (s.address + delta, s.address + delta + len(s.data)) for s in contents.segments
                ]
            for lo, hi in pieces:
                lo, hi = max(lo, start), min(hi, end)
                key = (lo, hi, binary.key)
                if lo < hi and key not in seen:
                    seen.add(key)
                    out.append(Mapping(lo, hi, binary, delta))
        return out

    def find(
        self, address: int, context_id: int | None, trace_id: int, time: int | None = None
    ) -> Mapping | None:
        """The mapping holding ``address`` in the process ``context_id`` names at ``time``
        (see above)."""
        loc = self.locator
        pids: list[int | None] = []
        if context_id is not None and loc.mode in ("tid", "pid"):
            pid, _tid = loc.thread_of(context_id, None, time)
            if pid is not None:
                pids.append(pid)
        if not pids:
            pids = [None, *loc.processes()]
        for pid in pids:
            got = loc.mapping(pid, address, time)
            if got is not None:
                start, end, where, contents = got
                link = where.address if where.address is not None else where.offset
                return Mapping(start, end, self._binary(where, contents), address - link)
        return None
