"""Address spaces keyed by context ID, driven by the system event log (metadata requirements §5).

Input: the static memory of a core (a :class:`~cstrace.memory.MemoryMap` of
dumps and images), a system event log (:class:`~cstrace.memory.events.EventLog`,
§5.5: ``declare_process``, ``declare_thread``, ``declare_library``,
``declare_asid``, ``patch_code``, each with a timestamp and a STATE of START,
END or CURRENT) and a way to find the program images the log names. Output:
an :class:`AddressSpaces`, a :class:`~cstrace.memory.code.CodeMemory`
(``find``, ``read``, ``set_context``, ``advance``, ``generation``), so the
program-flow decoders use it like any code memory.

The log is parsed by :mod:`cstrace.memory.events`. Events are applied in
timestamp order as the decoder reports trace time (:meth:`AddressSpaces.advance`). The state at
a time is reconstructed from intervals, so an incomplete log still decodes what
it can (§5.1, §5.5.1): an END whose START was lost means the entity existed from
before the log began; a CURRENT event (a system snapshot, §5.6) asserts that it
exists at that time, so a snapshot taken at the end of the trace covers the
whole trace. Before the trace shows any timestamp, each entity is taken as it
first appears in the log.

The two decode procedures of §5.7 choose the process from CONTEXTIDR:
``pid`` (the process or thread ID in bits 8..31, ARMv7 Linux with
CONFIG_PID_IN_CONTEXTIDR), ``tid`` (the whole register, as arm64 Linux writes
it) and ``asid`` (the ASID in bits 0..7, mapped to a process by
``declare_asid``). Thread IDs are aliased to their process (``declare_thread``).
Process 0 is the kernel: its images are mapped in every address space.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cstrace.elements import MemSpace
from cstrace.errors import InputError, Issue, IssueKind, Severity
from cstrace.memory.elf import ElfImage, format_uuid, uuid_matches
from cstrace.memory.events import (
    CONTEXTIDR_MODES,
    AsidEvent,
    EventLog,
    LibraryEvent,
    PatchEvent,
    ProcessEvent,
    State,
    ThreadEvent,
)
from cstrace.memory.image import MemoryMap, MemoryRegion

__all__ = [
    "KERNEL_PID",
    "AddressSpaces",
    "Epoch",
    "ImageResolver",
    "Interval",
    "StaticMapping",
    "Timeline",
    "flatten_regions",
]

_NEG_INF = float("-inf")
_POS_INF = float("inf")
KERNEL_PID = 0
"""Process 0 is the kernel: its images are seen in every address space."""


# --- timeline -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StaticMapping:
    """An image mapped in a process for the whole trace (a package ``[image]`` with a ``pid``)."""

    pid: int
    base: int | None
    image: str
    uuid: str | None = None


class Interval:
    """An entity of the log alive from ``start`` (inclusive) to ``end`` (exclusive).

    ``kind`` is ``map`` (a process or library image; ``key`` is (pid, base)),
    ``thread`` (key (tid,), value the pid), ``asid`` or ``patch``; ``value``
    the event (or :class:`StaticMapping`) that made it; ``serial`` its number.
    """

    __slots__ = ("end", "key", "kind", "serial", "start", "value")

    def __init__(
        self, kind: str, key: tuple[int, ...], start: float, value: object, serial: int
    ) -> None:
        self.kind = kind
        self.key = key
        self.start = start
        self.end = _POS_INF
        self.value = value
        self.serial = serial


ImageResolver = Callable[[str | None, str | None, str, int], "ElfImage | bytes | None"]
"""Finds an image by (name, uuid, where, line): an ELF image, raw bytes, or None if absent."""


class Timeline:
    """The log as intervals, built once; shared by every cursor over the same log.

    :meth:`index_at` gives the epoch of a time and :meth:`epoch` what is alive
    during it.
    """

    def __init__(
        self,
        log: EventLog | None,
        static: list[StaticMapping],
        warnings: list[Issue],
    ) -> None:
        self.intervals: list[Interval] = []
        self.warnings = warnings
        serial = 0
        open_: dict[tuple[object, ...], Interval] = {}
        seen_end: dict[tuple[object, ...], float] = {}
        process_ends: dict[int, list[float]] = {}

        for m in static:
            iv = Interval("map", (m.pid, -1 if m.base is None else m.base), _NEG_INF, m, serial)
            serial += 1
            self.intervals.append(iv)

        events = log.events if log is not None else []
        where = log.path if log is not None else ""
        for e in events:
            t = float(e.timestamp)
            kind: str
            key: tuple[int, ...]
            value: object
            state: State
            if isinstance(e, ProcessEvent):
                kind, key, value, state = "map", (e.pid, e.base), e, e.state
                if e.state == State.END and not isinstance(e, LibraryEvent):
                    process_ends.setdefault(e.pid, []).append(t)
            elif isinstance(e, ThreadEvent):
                kind, key, value, state = "thread", (e.tid,), e.pid, e.state
            elif isinstance(e, AsidEvent):
                kind, key, value, state = "asid", (e.asid,), e.pid, e.state
            elif isinstance(e, PatchEvent):
                iv = Interval("patch", (e.pid, e.address), t, e, serial)
                serial += 1
                self.intervals.append(iv)
                continue
            else:
                continue
            full = (kind, *key)
            cur = open_.get(full)
            if state == State.START:
                if cur is not None:
                    cur.end = t
                iv = Interval(kind, key, t, value, serial)
                serial += 1
                open_[full] = iv
                self.intervals.append(iv)
            elif state == State.CURRENT:
                if cur is not None and _same(cur.value, value):
                    continue
                if cur is not None:
                    cur.end = t
                    start = t
                else:
                    start = seen_end.get(full, _NEG_INF)
                iv = Interval(kind, key, start, value, serial)
                serial += 1
                open_[full] = iv
                self.intervals.append(iv)
            else:  # END
                if cur is not None:
                    cur.end = t
                    del open_[full]
                elif full not in seen_end:
                    # Its creation was lost: it existed from before the log began.
                    iv = Interval(kind, key, _NEG_INF, value, serial)
                    serial += 1
                    iv.end = t
                    self.intervals.append(iv)
                else:
                    warnings.append(
                        Issue(
                            Severity.WARNING,
                            IssueKind.INPUT,
                            "END of something already ended; ignored",
                            where,
                            e.line,
                        )
                    )
                seen_end[full] = t

        # A patch lasts until its process ends.
        for iv in self.intervals:
            if iv.kind == "patch":
                pid = iv.key[0]
                for t_end in sorted(process_ends.get(pid, [])):
                    if t_end > iv.start:
                        iv.end = t_end
                        break

        bounds = set()
        for iv in self.intervals:
            if iv.start not in (_NEG_INF, _POS_INF):
                bounds.add(iv.start)
            if iv.end not in (_NEG_INF, _POS_INF):
                bounds.add(iv.end)
        self.bounds: list[float] = sorted(bounds)
        self._epochs: dict[int, Epoch] = {}

    def epoch(self, index: int) -> Epoch:
        """The state between two boundaries (index -1: before any trace time is known)."""
        ep = self._epochs.get(index)
        if ep is None:
            if index < 0:
                firsts: dict[tuple[object, ...], Interval] = {}
                for iv in self.intervals:
                    k = (iv.kind, *iv.key) if iv.kind != "patch" else ("patch", iv.serial)
                    old = firsts.get(k)
                    if old is None or (iv.start, iv.serial) < (old.start, old.serial):
                        firsts[k] = iv
                active = sorted(firsts.values(), key=lambda iv: iv.serial)
            else:
                if index == 0:
                    t = _NEG_INF
                else:
                    t = self.bounds[index - 1]
                active = [iv for iv in self.intervals if iv.start <= t < iv.end]
            ep = Epoch(active)
            self._epochs[index] = ep
        return ep

    def index_at(self, time: float | None) -> int:
        """The epoch index of a trace time."""
        if time is None:
            return -1
        return bisect_right(self.bounds, time)


def _same(a: object, b: object) -> bool:
    if isinstance(a, ProcessEvent) and isinstance(b, ProcessEvent):
        return (a.image, a.uuid) == (b.image, b.uuid)
    return a == b


class Epoch:
    """What is alive during one stretch of time: threads, ASIDs, mappings and patches by pid."""

    def __init__(self, active: list[Interval]) -> None:
        self.threads: dict[int, int] = {}
        self.asids: dict[int, int] = {}
        self.maps: dict[int, list[Interval]] = {}
        self.patches: dict[int, list[Interval]] = {}
        for iv in active:
            if iv.kind == "thread":
                self.threads[iv.key[0]] = int(iv.value)  # type: ignore[call-overload]
            elif iv.kind == "asid":
                self.asids[iv.key[0]] = int(iv.value)  # type: ignore[call-overload]
            elif iv.kind == "map":
                self.maps.setdefault(iv.key[0], []).append(iv)
            elif iv.kind == "patch":
                self.patches.setdefault(iv.key[0], []).append(iv)
        for lst in self.patches.values():
            lst.sort(key=lambda iv: (iv.start, iv.serial), reverse=True)

    def layers(self, pid: int | None) -> tuple[int, ...]:
        """Serials of the intervals making up ``pid``'s view, highest priority first."""
        out: list[int] = []
        pids = [] if pid is None else [pid]
        if KERNEL_PID not in pids:
            pids.append(KERNEL_PID)
        for p in pids:
            out.extend(iv.serial for iv in self.patches.get(p, []))
        for p in pids:
            out.extend(iv.serial for iv in self.maps.get(p, []))
        return tuple(out)


# --- the code memory ----------------------------------------------------------------------


class _Shared:
    """State shared by all cursors over the same log: timeline, images, built views."""

    def __init__(
        self,
        static: MemoryMap,
        timeline: Timeline,
        resolve: ImageResolver,
        mode: str,
        warnings: list[Issue],
        where: str,
        clock: Callable[[int], int] | None = None,
    ) -> None:
        self.clock = clock
        self.static = static
        self.timeline = timeline
        self.resolve = resolve
        self.mode = mode
        self.warnings = warnings
        self.where = where
        self.by_serial = {iv.serial: iv for iv in timeline.intervals}
        self.views: dict[tuple[int, ...], tuple[int, MemoryMap]] = {}
        self.regions: dict[int, list[MemoryRegion]] = {}
        self._warned: set[str] = set()
        self.next_generation = 1

    def warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.warnings.append(Issue(Severity.WARNING, IssueKind.MEMORY, message))

    def regions_of(self, serial: int) -> list[MemoryRegion]:
        got = self.regions.get(serial)
        if got is not None:
            return got
        iv = self.by_serial[serial]
        out: list[MemoryRegion] = []
        value = iv.value
        if isinstance(value, PatchEvent):
            out = self._patch_regions(value)
        elif isinstance(value, ProcessEvent):
            out = self._image_regions(
                value.image,
                value.uuid,
                value.base,
                value.pid,
                f"{self.where}: line {value.line}",
                value.size,
            )
        elif isinstance(value, StaticMapping):
            out = self._image_regions(value.image, value.uuid, value.base, value.pid, "package")
        self.regions[serial] = out
        return out

    def _patch_regions(self, e: PatchEvent) -> list[MemoryRegion]:
        where = f"{self.where}: line {e.line}"
        code = e.code
        if code is None and (e.file is not None or e.ident is not None):
            got = self.resolve(e.file or e.ident, None, where, e.line)
            if isinstance(got, bytes):
                code = got[: e.length]
            elif got is None:
                self.warn_once(
                    f"patch{e.line}",
                    f"{where}: code of patch_code at {e.address:#x} not found; "
                    "the code there is taken as it was",
                )
        if not code:
            return []
        return [MemoryRegion(e.address, code, MemSpace.ANY, f"patch@{e.line}")]

    def _image_regions(
        self,
        name: str | None,
        uuid: str | None,
        base: int | None,
        pid: int,
        where: str,
        size: int | None = None,
    ) -> list[MemoryRegion]:
        if name is None and uuid is None:
            return []
        got = self.resolve(name, uuid, where, 0)
        label = name or uuid or "?"
        if got is None:
            if size is not None:
                # Its extent is known: the addresses that fall in it are counted and
                # reported by whoever locates them (memory.locate), not every image
                # the log names.
                return []
            self.warn_once(
                f"img:{label}:{pid}",
                f"{where}: image {label!r} of process {pid} not found; its code cannot be decoded",
            )
            return []
        if isinstance(got, bytes):
            return [MemoryRegion(base or 0, got, MemSpace.ANY, label)]
        if uuid and got.uuid is not None and not uuid_matches(uuid, got.uuid):
            self.warn_once(
                f"uuid:{label}:{uuid}",
                f"{where}: image {label!r} has build ID {format_uuid(got.build_id or b'')} "
                f"but {uuid} is expected; decoding may be wrong",
            )
        if got.elf_type == "ET_EXEC":
            if base and base != got.link_base:
                self.warn_once(
                    f"exec:{label}:{base}",
                    f"{where}: {label!r} is not relocatable; base {base:#x} ignored, "
                    f"loaded at its link address {got.link_base:#x}",
                )
            return got.regions(None)
        return got.regions(base if base is not None else None)

    def view(self, layers: tuple[int, ...]) -> tuple[int, MemoryMap]:
        got = self.views.get(layers)
        if got is None:
            pieces: list[MemoryRegion] = []
            for serial in layers:
                pieces.extend(self.regions_of(serial))
            pieces.extend(self.static.regions)
            mm = MemoryMap()
            for r in flatten_regions(pieces):
                mm.add(r)
            got = (self.next_generation, mm)
            self.next_generation += 1
            self.views[layers] = got
        return got


def flatten_regions(regions: list[MemoryRegion]) -> list[MemoryRegion]:
    """Non-overlapping pieces of ``regions`` (earlier ones win where they overlap)."""
    claimed: list[tuple[int, int, int]] = []  # (start, end, space bits)
    out: list[MemoryRegion] = []
    for r in regions:
        parts = [(r.start, r.end)]
        space = int(r.space)
        for cs, ce, csp in claimed:
            if not (csp & space):
                continue
            nxt: list[tuple[int, int]] = []
            for s, e in parts:
                if ce <= s or e <= cs:
                    nxt.append((s, e))
                    continue
                if s < cs:
                    nxt.append((s, cs))
                if ce < e:
                    nxt.append((ce, e))
            parts = nxt
            if not parts:
                break
        for s, e in parts:
            if s == r.start and e == r.end:
                out.append(r)
            else:
                out.append(MemoryRegion(s, r.data[s - r.start : e - r.start], r.space, r.name))
            claimed.append((s, e, space))
    return out


class AddressSpaces:
    """Code memory selecting the traced process's mappings by context ID and trace time.

    A :class:`~cstrace.memory.code.CodeMemory`: ``find(address, space)``,
    ``read(address, size, space)``, ``set_context(context_id, vmid)``,
    ``advance(time)`` and ``generation``; the decoder calls ``set_context`` and
    ``advance`` itself as the trace's context and time change. Each trace
    source decodes through its own :meth:`cursor`, since each source's trace
    starts again at the earliest time.
    """

    def __init__(
        self,
        static: MemoryMap | None = None,
        log: EventLog | None = None,
        resolve: ImageResolver | None = None,
        *,
        contextidr: str | None = None,
        static_mappings: Iterable[StaticMapping] = (),
        warnings: list[Issue] | None = None,
        clock: Callable[[int], int] | None = None,
        _shared: _Shared | None = None,
    ) -> None:
        if _shared is None:
            warn = warnings if warnings is not None else []
            mode = contextidr or ("asid" if log is not None and log.uses_asids else "pid")
            if mode not in CONTEXTIDR_MODES:
                raise InputError(f"contextidr {mode!r} is not one of {', '.join(CONTEXTIDR_MODES)}")
            timeline = Timeline(log, list(static_mappings), warn)
            _shared = _Shared(
                static or MemoryMap(),
                timeline,
                resolve or (lambda name, uuid, where, line: None),
                mode,
                warn,
                log.path if log is not None else "",
                clock,
            )
        self._s = _shared
        self._time: float | None = None
        self._epoch_index = -2
        self._context: int | None = None
        self._vmid: int | None = None
        self._pid: int | None = None
        self._default_pid: int | None = None
        self._map = MemoryMap()
        self.generation = 0
        self._refresh()

    @property
    def mode(self) -> str:
        """How CONTEXTIDR identifies the process: ``pid``, ``asid`` or ``tid``."""
        return self._s.mode

    @property
    def warnings(self) -> list[Issue]:
        """Problems met so far (images not found, build ID mismatches...)."""
        return self._s.warnings

    @property
    def pid(self) -> int | None:
        """The process whose address space is selected (None when unknown)."""
        return self._pid

    def cursor(self) -> AddressSpaces:
        """A new reader over the same log and images, at the start of time and context."""
        return AddressSpaces(_shared=self._s)

    # -- the code-memory interface --

    def find(self, address: int, space: MemSpace | int = MemSpace.ANY) -> MemoryRegion | None:
        """The region holding ``address`` in the current address space."""
        return self._map.find(address, space)

    def read(self, address: int, size: int, space: MemSpace | int = MemSpace.ANY) -> bytes:
        """Up to ``size`` bytes at ``address`` from one region; empty if unmapped."""
        return self._map.read(address, size, space)

    def set_context(self, context_id: int | None, vmid: int | None = None) -> None:
        """Select the address space of the process CONTEXTIDR (``context_id``) identifies
        (in ``vmid`` mode, the one the VMID identifies)."""
        if self._s.mode == "vmid":
            if vmid == self._vmid:
                return
            self._vmid = vmid
        elif context_id == self._context:
            return
        self._context = context_id
        self._refresh()

    def set_default_process(self, pid: int | None) -> None:
        """The process whose address space is selected while the trace names none (no context
        ID traced, or none yet): the one a recording says ran when the trace began."""
        if pid != self._default_pid:
            self._default_pid = pid
            self._refresh()

    def advance(self, time: int) -> None:
        """Move to trace time ``time`` (events up to it are applied).

        With a clock (a recording whose timestamps count CPU cycles), ``time``
        is converted to the log's time first.
        """
        clock = self._s.clock
        self.set_time(time if clock is None else clock(time))

    def set_time(self, timestamp: int | None) -> None:
        """Move to trace time ``timestamp`` (events up to it are applied; None: before any)."""
        self._time = None if timestamp is None else float(timestamp)
        index = self._s.timeline.index_at(self._time)
        if index != self._epoch_index:
            self._refresh()

    # -- internals --

    def process_of(self, context_id: int | None, vmid: int | None = None) -> int | None:
        """The process a CONTEXTIDR value (or, in ``vmid`` mode, a VMID) stands for at the
        current time (§5.7)."""
        mode = self._s.mode
        if mode == "vmid":
            context_id = vmid
        if context_id is None:
            return None
        ep = self._s.timeline.epoch(self._s.timeline.index_at(self._time))
        ident: int | None
        if mode == "asid":
            ident = ep.asids.get(context_id & 0xFF)
            if ident is None:
                return None
        elif mode == "pid":
            ident = (context_id >> 8) & 0xFFFFFF
        else:
            ident = context_id & 0xFFFFFFFF
        return ep.threads.get(ident, ident)

    def _refresh(self) -> None:
        tl = self._s.timeline
        index = tl.index_at(self._time)
        self._epoch_index = index
        self._pid = self.process_of(self._context, self._vmid)
        if self._pid is None and self._default_pid is not None:
            named = self._vmid if self._s.mode == "vmid" else self._context
            if named is None:
                self._pid = self._default_pid
        gen, mm = self._s.view(tl.epoch(index).layers(self._pid))
        self._map = mm
        self.generation = gen
