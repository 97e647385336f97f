"""Timelines: what each trace source did over time, as tracks of slices, instants and counters.

Input: the elements of each trace source in decode order and a symbol lookup
(:class:`cstrace.analyses.symbols.Symbols`); output: a :class:`Timeline`,
which :mod:`cstrace.render.perfetto` writes as a Perfetto trace.

Per trace source (a CPU's trace unit, an STM, an ITM...) there is one track:

- program-flow sources get **function slices** from call/return tracking
  (:class:`cstrace.analyses.calls.CallTracker`: calls, returns, tail calls,
  exceptions, the stack kept across trace gaps as far as the trace allows),
  nested as the calls were; an exception's handler is a slice of category
  ``exception`` named ``HANDLER (exception 0xNN)``;
- **markers** as instants on a child track ``trace``: trace on, the end of
  the trace, a loss of synchronisation, an overflow (``TRACE_ON`` after an
  overflow, an ITM overflow), STM errors;
- software-trace sources get a child track per channel (STM/DCC master and
  channel, ITM stimulus port): each string written
  (:mod:`cstrace.analyses.swtext`) is an **instant** named by its text, and
  each other value written is a point of a **counter** track of that channel.

Time: each source is placed on its own clock, the best the trace gives, and
the track says which (``Track.clock``):

- ``timestamps``: the trace's timestamps (one tick a nanosecond), with the
  events between two timestamps spread by instruction count (or element
  order), since timestamps come only now and then;
- ``cycles``: the running sum of the trace's cycle counts, spread the same way;
- ``instructions``: the count of instructions executed before the event;
- ``elements``: the element's index in the source (software trace with no
  timestamps).

Sources on the ``timestamps`` clock of one trace share its time base; the
others each start at 0. Timestamps past 2**62 (their top bits set) would not fit
Perfetto's signed 64-bit times: then all of them are counted from the first.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from cstrace.analyses.calls import CallTracker, FunctionInfo, SymbolLookup
from cstrace.analyses.swtext import TextMessage, group_text
from cstrace.elements import (
    Element,
    EoTrace,
    InstrRange,
    ITMPacketType,
    ITMTrace,
    NoSync,
    SWTrace,
    Timestamp,
    TraceOn,
    TraceOnReason,
    UnsyncReason,
)

if TYPE_CHECKING:
    from cstrace.errors import Issue
    from cstrace.protocols import DecodeOptions
    from cstrace.trace import Trace

__all__ = [
    "CLOCKS",
    "MAX_SLICES",
    "CounterPoint",
    "Instant",
    "Slice",
    "Timeline",
    "TimelineBuilder",
    "Track",
    "trace_timeline",
]

MAX_SLICES = 2_000_000
"""Function slices kept by default; the calls after them are counted, not drawn (the track's
description says how many), so that memory stays bounded on long traces."""

CLOCKS = ("timestamps", "cycles", "instructions", "elements")
"""The clocks a track's times can be in, best first (see the module doc)."""

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

Args = tuple[tuple[str, str | int | float], ...]
"""Named values shown with an event (Perfetto's debug annotations)."""


@dataclass(frozen=True, slots=True)
class Track:
    """A row of the timeline: a trace source, or a child of one (``parent``)."""

    uid: int
    name: str
    description: str
    parent: int | None = None
    counter: bool = False
    """A counter track (values over time) rather than a track of slices and instants."""
    clock: str = "elements"
    """Which clock the times of this track are in (one of :data:`CLOCKS`)."""


@dataclass(frozen=True, slots=True)
class Slice:
    """Something that lasted: a function call, or an exception handler, ``[start, end]``."""

    track: int
    name: str
    start: int
    end: int
    category: str
    args: Args = ()


@dataclass(frozen=True, slots=True)
class Instant:
    """Something that happened at one time: a marker or a software-trace string."""

    track: int
    name: str
    at: int
    category: str
    args: Args = ()


@dataclass(frozen=True, slots=True)
class CounterPoint:
    """A value a counter track took at a time."""

    track: int
    at: int
    value: int


@dataclass
class Timeline:
    """Tracks and their events, every time in nanoseconds of the track's clock.

    ``slices`` of each track are properly nested and in the order of their
    start (a parent before its children).
    """

    tracks: list[Track] = field(default_factory=list)
    slices: list[Slice] = field(default_factory=list)
    instants: list[Instant] = field(default_factory=list)
    counters: list[CounterPoint] = field(default_factory=list)

    def track(self, name: str) -> Track:
        """The track named ``name`` (KeyError when there is none)."""
        for t in self.tracks:
            if t.name == name:
                return t
        raise KeyError(name)


# -- call tracking that keeps each call --------------------------------------------------------


class _SliceTracker(CallTracker):
    """:class:`CallTracker` that also keeps each frame it closes, with its start and end
    (instruction counts of its trace ID) and its depth."""

    def __init__(self, symbols: SymbolLookup, max_slices: int | None = None) -> None:
        super().__init__(symbols)
        self.closed: dict[int, list[tuple[FunctionInfo, int | None, int, int]]] = {}
        self.max_slices = max_slices
        self.kept = 0
        self.dropped: dict[int, int] = {}
        """Per trace ID, the calls left out once ``max_slices`` were kept."""
        self._tid = 0

    def feed(self, trace_id: int, elements: Iterable[Element]) -> None:
        """Follow the elements of the source ``trace_id``, keeping each frame closed."""
        self._tid = trace_id
        super().feed(trace_id, elements)

    def _pop(self, track: object) -> object:  # type: ignore[override]
        frame = super()._pop(track)  # type: ignore[arg-type]
        end = track.clock.instructions  # type: ignore[attr-defined]
        if self.max_slices is not None and self.kept >= self.max_slices:
            self.dropped[self._tid] = self.dropped.get(self._tid, 0) + 1
            return frame
        self.kept += 1
        self.closed.setdefault(self._tid, []).append((frame.func, frame.exc, frame.instr0, end))
        return frame

    def position(self, trace_id: int) -> int:
        """Instructions counted so far for ``trace_id``."""
        track = self._tracks.get(trace_id)
        return 0 if track is None else track.clock.instructions

    def still_open(self, trace_id: int) -> list[tuple[FunctionInfo, int | None, int, int]]:
        """The frames still on the stack of ``trace_id``, ended at its last instruction."""
        track = self._tracks.get(trace_id)
        if track is None:
            return []
        end = track.clock.instructions
        return [(f.func, f.exc, f.instr0, end) for f in track.stack]


# -- one source ----------------------------------------------------------------------------


class _Source:
    """What one trace source gave, in positions (instruction counts and element indices)."""

    def __init__(self, uid: int, name: str, protocol: str, trace_id: int) -> None:
        self.uid = uid
        self.name = name
        self.protocol = protocol
        self.trace_id = trace_id
        self.elements = 0
        self.instructions = 0
        # (instruction count, element index, value)
        self.timestamps: list[tuple[int, int, int]] = []
        self.cycles: list[tuple[int, int, int]] = []
        self.cycle_total = 0
        self.instants: list[tuple[int | None, str, int, int, str, Args]] = []
        """(child track key or None for ``trace``, name, instructions, index, category, args)"""
        self.values: list[tuple[tuple[int, int], int, int, int]] = []
        """((master, channel), instructions, index, value)"""
        self.channels: dict[tuple[int, int], str] = {}


_MAX_NAME = 80


def _marker(elem: Element) -> tuple[str, str] | None:
    """The name and category of a trace marker, or None."""
    t = type(elem)
    if t is TraceOn:
        assert isinstance(elem, TraceOn)
        if elem.reason == TraceOnReason.OVERFLOW:
            return "overflow (trace on)", "overflow"
        return f"trace on ({elem.reason.name.lower().replace('_', ' ')})", "trace-on"
    if t is EoTrace:
        return "end of trace", "trace-off"
    if t is NoSync:
        assert isinstance(elem, NoSync)
        if elem.reason == UnsyncReason.INIT_DECODER:
            return None
        return f"sync lost ({elem.reason.name.lower().replace('_', ' ')})", "trace-off"
    if t is ITMTrace:
        assert isinstance(elem, ITMTrace)
        if elem.overflow:
            return "overflow", "overflow"
    if t is SWTrace:
        assert isinstance(elem, SWTrace)
        if elem.global_err or elem.master_err:
            return "STM error", "overflow"
    return None


class TimelineBuilder:
    """Builds a :class:`Timeline` from trace sources fed one after another.

    Feed each source's elements with :meth:`feed` (several calls for one
    source continue it, as for the buffers of a snapshot); :meth:`timeline`
    places every event on its source's clock.
    """

    def __init__(self, symbols: SymbolLookup, max_slices: int | None = MAX_SLICES) -> None:
        self._calls = _SliceTracker(symbols, max_slices)
        self._sources: dict[tuple[int, str], _Source] = {}
        self._uids = 0

    def _uid(self) -> int:
        self._uids += 1
        return self._uids

    def feed(self, trace_id: int, name: str, protocol: str, elements: Iterable[Element]) -> None:
        """Follow the elements of source ``name`` (trace ID, protocol name)."""
        key = (trace_id, name)
        src = self._sources.get(key)
        if src is None:
            src = self._sources[key] = _Source(self._uid(), name, protocol, trace_id)
        self._calls.feed(trace_id, self._watch(src, group_text(elements)))

    def _watch(self, src: _Source, items: Iterable[Element | TextMessage]) -> Iterator[Element]:
        """The elements, passed on to call tracking, with what the timeline needs noted."""
        calls = self._calls
        tid = src.trace_id
        for item in items:
            if isinstance(item, TextMessage):
                pos = calls.position(tid)
                key = (item.master, item.channel)
                self._channel(src, key, item.last)
                text = item.text.rstrip("\n\r\x00")
                label = text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 3] + "..."
                args: Args = (("text", item.text), ("bytes", len(item.elements)))
                src.instants.append(
                    (key[0] << 16 | key[1], label, pos, src.elements, "message", args)
                )
                for e in item.elements:
                    self._time(src, e, pos)
                    src.elements += 1
                    yield e
                continue
            elem = item
            pos = calls.position(tid)
            marker = _marker(elem)
            if marker is not None:
                src.instants.append((None, marker[0], pos, src.elements, marker[1], ()))
            if type(elem) is SWTrace:
                assert isinstance(elem, SWTrace)
                if elem.payload_bits and elem.id_valid and not elem.global_err:
                    key = (elem.master, elem.channel)
                    self._channel(src, key, elem)
                    src.values.append((key, pos, src.elements, elem.payload))
            elif type(elem) is ITMTrace:
                assert isinstance(elem, ITMTrace)
                if elem.pkt_type == ITMPacketType.SWIT:
                    key = (0, elem.src_id)
                    self._channel(src, key, elem)
                    src.values.append((key, pos, src.elements, elem.value))
            yield elem
            after = calls.position(tid)
            self._time(src, elem, after)
            src.elements += 1

    @staticmethod
    def _channel(src: _Source, key: tuple[int, int], elem: SWTrace | ITMTrace) -> None:
        if key not in src.channels:
            if isinstance(elem, ITMTrace):
                src.channels[key] = f"stimulus port {key[1]}"
            else:
                src.channels[key] = f"master 0x{key[0]:x} channel {key[1]}"

    @staticmethod
    def _time(src: _Source, elem: Element, pos: int) -> None:
        """Note the timestamp and cycle count an element carries, at ``pos``."""
        if isinstance(elem, InstrRange):
            if elem.cycle_count is not None:
                src.cycle_total += elem.cycle_count
                src.cycles.append((pos, src.elements, src.cycle_total))
            return
        ts = getattr(elem, "timestamp", None)
        if ts is not None and (type(elem) is not ITMTrace or ts):
            src.timestamps.append((pos, src.elements, int(ts)))
        cc = getattr(elem, "cycle_count", None)
        if cc is not None and type(elem) is not Timestamp:
            src.cycle_total += cc
            src.cycles.append((pos, src.elements, src.cycle_total))

    # -- placing on a clock ----------------------------------------------------------------

    def timeline(self) -> Timeline:
        """Every source's events on its clock (see the module doc)."""
        out = Timeline()
        # Timestamps past 2**62 (top bits set) do not fit Perfetto's signed 64-bit times:
        # then every source's are counted from the first of them all.
        stamps = [a[2] for src in self._sources.values() for a in src.timestamps]
        origin = min(stamps) if stamps and max(stamps) >= _BIG_TIME else 0
        for src in self._sources.values():
            self._place(src, out, origin)
        return out

    def _place(self, src: _Source, out: Timeline, origin: int = 0) -> None:
        calls = self._calls
        tid = src.trace_id
        closed = [*calls.closed.get(tid, []), *calls.still_open(tid)]
        instructions = calls.position(tid)
        by_instr = instructions > 0
        axis = 0 if by_instr else 1  # which position the events are placed by
        base = 0
        if len({a[2] for a in src.timestamps}) > 1:
            clock, anchors, base = "timestamps", src.timestamps, origin
        elif src.cycles:
            clock, anchors = "cycles", src.cycles
        else:
            clock, anchors = ("instructions" if by_instr else "elements"), []
        place = _placer([(a[axis], a[2] - base) for a in anchors])
        unit = {
            "timestamps": "1 ns = 1 timestamp tick, spread between timestamps by "
            + ("instruction count" if by_instr else "element order"),
            "cycles": "1 ns = 1 cycle (the sum of the trace's cycle counts)",
            "instructions": "1 ns = 1 instruction executed (no timestamps or cycle counts)",
            "elements": "1 ns = 1 element (no timestamps)",
        }[clock]
        name = f"{src.name} ({src.protocol}) [{clock}]"
        about = f"trace ID 0x{tid:02x}; {unit}"
        dropped = calls.dropped.get(tid, 0)
        if dropped:
            about += f"; {dropped} calls left out after the first {calls.max_slices} slices"
        out.tracks.append(Track(src.uid, name, about, clock=clock))
        # Function and exception slices, nested, parents first.
        if closed:
            starts = place(np.array([c[2] for c in closed], dtype=np.int64))
            ends = place(np.array([c[3] for c in closed], dtype=np.int64))
            for i in _nest_order([(c[2], c[3]) for c in closed]):
                func, exc, _, _ = closed[i]
                if exc is not None:
                    label, cat = f"{func.name} (exception 0x{exc:02x})", "exception"
                else:
                    label, cat = func.name, "function"
                args: Args = (("address", f"0x{func.start:x}"),)
                if func.file is not None:
                    args += (("source", f"{func.file}:{func.line}"),)
                out.slices.append(Slice(src.uid, label, int(starts[i]), int(ends[i]), cat, args))
        # Markers and strings.
        children: dict[int | None, int] = {}
        instants = src.instants
        if instants:
            at = place(np.array([i[2 + axis] for i in instants], dtype=np.int64))
            for (child, label, _, _, cat, args), t in zip(instants, at.tolist(), strict=True):
                uid = children.get(child)
                if uid is None:
                    uid = children[child] = self._uid()
                    if child is None:
                        cname, what = "trace", "trace on/off, synchronisation and overflows"
                    else:
                        cname = src.channels[(child >> 16, child & 0xFFFF)]
                        what = "strings written"
                    out.tracks.append(Track(uid, f"{src.name} {cname}", what, src.uid, clock=clock))
                out.instants.append(Instant(uid, label, int(t), cat, args))
        # Values written, per channel.
        if src.values:
            at = place(np.array([v[1 + axis] for v in src.values], dtype=np.int64))
            counters: dict[tuple[int, int], int] = {}
            for (key, _, _, value), t in zip(src.values, at.tolist(), strict=True):
                uid = counters.get(key)
                if uid is None:
                    uid = counters[key] = self._uid()
                    out.tracks.append(
                        Track(
                            uid,
                            f"{src.name} {src.channels[key]} value",
                            "values written",
                            src.uid,
                            counter=True,
                            clock=clock,
                        )
                    )
                out.counters.append(CounterPoint(uid, int(t), value))


def _placer(anchors: list[tuple[int, int]]) -> _Place:
    """A function from positions to times, through ``anchors`` (position, time)."""
    if not anchors:
        return _Place(None, None)
    # One time per position (the last), never going back.
    last: dict[int, int] = {}
    for pos, value in anchors:
        last[pos] = value
    xs = np.array(sorted(last), dtype=np.float64)
    values = [last[int(x)] for x in xs]
    ys = np.maximum.accumulate(np.array(values, dtype=np.float64))
    return _Place(xs, ys)


_BIG_TIME = 1 << 62
_LAST_TIME = float(np.nextafter(np.float64(2.0**63), 0.0))
"""The greatest float64 below 2**63: times are clipped to it so they fit an int64."""


class _Place:
    """Positions to times: linear between anchors, at the mean rate outside them."""

    def __init__(self, xs: Floats | None, ys: Floats | None) -> None:
        self.xs = xs
        self.ys = ys

    def __call__(self, pos: Ints) -> Ints:
        xs, ys = self.xs, self.ys
        if xs is None or ys is None:
            return pos.astype(np.int64)
        p = pos.astype(np.float64)
        if len(xs) == 1:
            t = ys[0] + (p - xs[0])
        else:
            span = xs[-1] - xs[0]
            rate = (ys[-1] - ys[0]) / span if span else 1.0
            t = np.interp(p, xs, ys)
            t = np.where(p < xs[0], ys[0] + (p - xs[0]) * rate, t)
            t = np.where(p > xs[-1], ys[-1] + (p - xs[-1]) * rate, t)
        out: Ints = np.clip(np.rint(t), 0.0, _LAST_TIME).astype(np.int64)
        return out


def _nest_order(spans: list[tuple[int, int]]) -> list[int]:
    """The indices of ``spans`` (start, end) with parents before children: by start, the
    longer first."""
    return sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1]))


def trace_timeline(
    trace: Trace,
    symbols: SymbolLookup | None = None,
    buffers: Sequence[str] | None = None,
    options: DecodeOptions | None = None,
    issues: list[Issue] | None = None,
    max_slices: int | None = MAX_SLICES,
) -> Timeline:
    """Decode ``trace`` (every buffer, or those named, in order) into a :class:`Timeline`.

    ``symbols`` name the functions (default: the symbols of the trace's ELF
    images); problems met while decoding are added to ``issues`` when given;
    function slices after the first ``max_slices`` are counted, not kept.
    """
    from cstrace.analyses.symbols import Symbols
    from cstrace.decode import Session

    if symbols is None:
        symbols = Symbols.from_trace(trace)
    builder = TimelineBuilder(symbols, max_slices)
    session = Session(trace, options)
    for run in session.runs(buffers, issues):
        builder.feed(run.trace_id, run.source.name, run.protocol.name, run.elements())
    return builder.timeline()
