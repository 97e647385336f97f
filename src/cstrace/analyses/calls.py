"""Function calls from decoded trace: call stacks, per-function costs and timings.

Input: the elements of each trace source in decode order (one trace ID at a
time, several calls continuing a source) and a symbol lookup (``function(address)``
and ``line(address)``, as :class:`cstrace.analyses.symbols.Symbols` gives).
Output: a :class:`CallProfile`: per function, the instructions it executed
itself, how often it was called and, where the trace has timestamps or cycle
counts, the time each call took (entry to return: count, total, minimum,
maximum, average); the same per exception number (entry to exception
return); the call arcs with their inclusive costs (for callgrind); and the
collapsed call stacks with the instructions executed in each (for flame
graphs). Text is made by :mod:`cstrace.render.calls`.

How the stack is followed, per trace ID:

- The last instruction of each ``INSTR_RANGE`` says what comes next: an
  executed branch with link (``BL``, ``BLX``, ``BLR``: subtype ``BR_LINK``)
  is a **call**: the function of the next range's first address is pushed,
  expected to return to the instruction after the branch. An executed ``RET``
  (``V8_RET``) or an implied return (``BX LR``, ``POP {..., PC}``, ``LDR PC,
  [SP]...``, ``MOV PC, LR``: ``V7_IMPLIED_RET``) is a **return**: frames are
  popped down to the one whose return address is the next range's address
  (so a return that skips frames, such as ``longjmp``, pops them all); when
  no frame expects that address, one frame is popped.
- Any other way into a different function (a branch without link, or
  running off the end of a function) is a **tail call**: the top frame is
  closed and the new function takes its place, keeping its caller and its
  return address. A branch (not a ``RET``) to the address the top frame
  returns to is taken as the return it is (``BR X30``; ``SUBS PC, LR, #4``
  at the end of an IRQ handler).
- An ``EXCEPTION`` element pushes an exception frame; its function is that
  of the first range after it (the handler or its vector), its return
  address the exception's preferred return address. An exception return
  (an ``EXCEPTION_RET`` element after the branch, or an executed ``ERET``)
  pops frames down to and including the top exception frame. An M-profile
  tail-chained exception ends the handler on top before the next begins.
- **Trace gaps** (``NO_SYNC``, ``TRACE_ON``, ``EO_TRACE``, ``ADDR_NACC``, a
  change of context ID) lose the instructions in between, so the frames
  open at a gap keep counting instructions but give no time per call. After
  the gap, decoding restarts at some address: when its function is on the
  stack, the frames above it are closed and the stack goes on from there;
  otherwise the stack restarts with that function alone, its caller
  unknown. A stack whose callers are unknown is **re-linked** when a return
  goes above it: the function returned into becomes the new bottom frame
  and the caller of the old one, in the call arcs and in the collapsed
  stacks made so far.

Costs: the instructions of a range count for the function on top of the
stack (a range that runs past the end of its function is split at the
function's end: exactly for fixed-size instructions, in proportion to the
bytes for T32). Cycle counts (the ``cycle_count`` of elements) are summed
into a running cycle clock and count for the function on top when they
arrive; the last ``TIMESTAMP`` is the tick clock. A call's time is the
difference of a clock between its entry and its return, so timestamp times
are only as fine as the trace's timestamps are frequent.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Protocol

from cstrace.analyses.symbols import Symbols
from cstrace.decode import Session, SourceRun
from cstrace.elements import (
    AddrNacc,
    Element,
    EoTrace,
    Exception_,
    ExceptionRet,
    InstrRange,
    InstrSubtype,
    InstrType,
    Isa,
    NoSync,
    PEContext,
    Timestamp,
    TraceOn,
)
from cstrace.isa.t32 import is_wide
from cstrace.protocols import DecodeOptions
from cstrace.trace import Trace

__all__ = [
    "CYCLES",
    "TICKS",
    "CallArc",
    "CallProfile",
    "CallTracker",
    "CodeReader",
    "ExceptionProfile",
    "FunctionInfo",
    "FunctionProfile",
    "LineCost",
    "SymbolLookup",
    "Timing",
    "call_profile",
    "memory_reader",
]

CYCLES = "cycles"
"""The unit of times measured with the trace's cycle counts."""
TICKS = "ticks"
"""The unit of times measured with the trace's timestamps (timestamp ticks)."""


class _FunctionLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def file(self) -> str | None: ...
    @property
    def line(self) -> int | None: ...


class _LineLike(Protocol):
    @property
    def file(self) -> str: ...
    @property
    def line(self) -> int: ...


CodeReader = Callable[[int, int, "int | None"], bytes]
"""Reads ``size`` bytes of code at an address (in the process of a context ID), for the
T32 instruction sizes of source-line costs."""


class SymbolLookup(Protocol):
    """What the call tracker asks of symbols: the function and source line at an address."""

    def function(self, address: int, context_id: int | None = None) -> _FunctionLike | None:
        """The function holding ``address`` (in the process of ``context_id``), or None."""
        ...

    def line(self, address: int, context_id: int | None = None) -> _LineLike | None:
        """The source line of the instruction at ``address``, or None."""
        ...


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    """A function as the profile names it.

    ``start`` and ``end`` are run-time addresses (``end`` exclusive; 0 when
    unknown). A function no symbol covers is named ``0x<address>`` after the
    address it was called at, or ``[unknown]`` when it was not entered by a
    call.
    """

    name: str
    start: int
    end: int = 0
    file: str | None = None
    line: int | None = None


UNKNOWN = FunctionInfo("[unknown]", 0)


@dataclass(slots=True)
class Timing:
    """Times of the calls of one function (or one exception), in one unit."""

    count: int = 0
    total: int = 0
    minimum: int = 0
    maximum: int = 0

    def add(self, value: int) -> None:
        """Count one call that took ``value``."""
        if self.count == 0 or value < self.minimum:
            self.minimum = value
        if self.count == 0 or value > self.maximum:
            self.maximum = value
        self.count += 1
        self.total += value

    def merge(self, other: Timing) -> None:
        """Add the calls of ``other``."""
        if other.count:
            if self.count == 0 or other.minimum < self.minimum:
                self.minimum = other.minimum
            if self.count == 0 or other.maximum > self.maximum:
                self.maximum = other.maximum
            self.count += other.count
            self.total += other.total

    @property
    def average(self) -> float:
        """The mean time of a call (0.0 with no calls)."""
        return self.total / self.count if self.count else 0.0

    def to_dict(self) -> dict[str, object]:
        """The timing as plain JSON-ready values."""
        return {
            "count": self.count,
            "total": self.total,
            "min": self.minimum,
            "max": self.maximum,
            "average": self.average,
        }


@dataclass(slots=True)
class FunctionProfile:
    """What one function did.

    ``instructions`` and ``cycles`` are its own (exclusive) costs;
    ``inclusive`` counts the instructions from entry to return of the calls
    that were seen whole, outermost activations only (a recursive call is not
    counted twice). ``calls`` counts the entries seen (calls, tail calls and
    exception entries), ``returned`` the calls seen whole (entry to return,
    no trace gap between); ``timing`` holds the times of those per unit
    (:data:`CYCLES`, :data:`TICKS`).
    """

    function: FunctionInfo
    calls: int = 0
    returned: int = 0
    instructions: int = 0
    cycles: int = 0
    inclusive: int = 0
    handler: bool = False
    timing: dict[str, Timing] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The profile as plain JSON-ready values."""
        f = self.function
        return {
            "function": f.name,
            "start": f.start,
            "file": f.file,
            "line": f.line,
            "handler": self.handler,
            "calls": self.calls,
            "returned": self.returned,
            "instructions": self.instructions,
            "inclusive_instructions": self.inclusive,
            "cycles": self.cycles,
            "time": {unit: t.to_dict() for unit, t in sorted(self.timing.items())},
        }


@dataclass(slots=True)
class ExceptionProfile:
    """One exception number: how often it was taken, its handlers and its time.

    ``returned`` counts the exceptions seen whole, from entry to exception
    return with no trace gap between; ``instructions`` (nested exceptions
    included) and ``timing`` are theirs.
    """

    number: int
    count: int = 0
    returned: int = 0
    handlers: set[str] = field(default_factory=set)
    instructions: int = 0
    timing: dict[str, Timing] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The profile as plain JSON-ready values."""
        return {
            "exception": self.number,
            "handlers": sorted(self.handlers),
            "count": self.count,
            "returned": self.returned,
            "instructions": self.instructions,
            "time": {unit: t.to_dict() for unit, t in sorted(self.timing.items())},
        }


@dataclass(slots=True)
class CallArc:
    """Calls from one call site of ``caller`` to ``callee``, with their inclusive costs.

    ``site`` is the address of the calling instruction; for an exception, its
    preferred return address (where it came); 0 when unknown (a caller found
    by re-linking).
    """

    caller: FunctionInfo
    site: int
    callee: FunctionInfo
    site_file: str | None = None
    site_line: int = 0
    calls: int = 0
    instructions: int = 0
    cycles: int = 0


@dataclass(slots=True)
class LineCost:
    """Exclusive costs of one function at one source line (line 0: unknown)."""

    instructions: int = 0
    cycles: int = 0


@dataclass
class CallProfile:
    """Everything :class:`CallTracker` counted (see the module doc)."""

    functions: dict[FunctionInfo, FunctionProfile] = field(default_factory=dict)
    exceptions: dict[int, ExceptionProfile] = field(default_factory=dict)
    arcs: dict[tuple[FunctionInfo, int, FunctionInfo], CallArc] = field(default_factory=dict)
    stacks: dict[tuple[str, ...], int] = field(default_factory=dict)
    """Collapsed stacks (bottom first) and the instructions executed on top of each."""
    lines: dict[tuple[FunctionInfo, str | None, int], LineCost] = field(default_factory=dict)
    """Exclusive costs per (function, source file, line)."""
    instructions: int = 0
    cycles: int | None = None
    """Cycles counted in all; None when the trace has no cycle counts."""
    units: tuple[str, ...] = ()
    """The time units the trace gave (:data:`CYCLES`, :data:`TICKS`)."""
    gaps: int = 0
    relinks: int = 0

    def add(self, other: CallProfile) -> None:
        """Add the counts of ``other`` (another input) to these."""
        for func, theirs in other.functions.items():
            mine = self.functions.get(func)
            if mine is None:
                mine = self.functions[func] = FunctionProfile(func)
            mine.calls += theirs.calls
            mine.returned += theirs.returned
            mine.instructions += theirs.instructions
            mine.cycles += theirs.cycles
            mine.inclusive += theirs.inclusive
            mine.handler = mine.handler or theirs.handler
            for unit, t in theirs.timing.items():
                mine.timing.setdefault(unit, Timing()).merge(t)
        for number, exc in other.exceptions.items():
            got = self.exceptions.get(number)
            if got is None:
                got = self.exceptions[number] = ExceptionProfile(number)
            got.count += exc.count
            got.returned += exc.returned
            got.instructions += exc.instructions
            got.handlers |= exc.handlers
            for unit, t in exc.timing.items():
                got.timing.setdefault(unit, Timing()).merge(t)
        for key, arc in other.arcs.items():
            have = self.arcs.get(key)
            if have is None:
                have = self.arcs[key] = CallArc(
                    arc.caller, arc.site, arc.callee, arc.site_file, arc.site_line
                )
            have.calls += arc.calls
            have.instructions += arc.instructions
            have.cycles += arc.cycles
        for stack, count in other.stacks.items():
            self.stacks[stack] = self.stacks.get(stack, 0) + count
        for where, cost in other.lines.items():
            mine_cost = self.lines.get(where)
            if mine_cost is None:
                mine_cost = self.lines[where] = LineCost()
            mine_cost.instructions += cost.instructions
            mine_cost.cycles += cost.cycles
        self.instructions += other.instructions
        if other.cycles is not None:
            self.cycles = (self.cycles or 0) + other.cycles
        self.units = tuple(u for u in (CYCLES, TICKS) if u in self.units or u in other.units)
        self.gaps += other.gaps
        self.relinks += other.relinks

    def sorted_functions(self) -> list[FunctionProfile]:
        """The functions, most instructions (inclusive, then own) first."""
        return sorted(
            self.functions.values(),
            key=lambda p: (-p.instructions, -p.inclusive, p.function.name, p.function.start),
        )

    def to_dict(self) -> dict[str, object]:
        """The profile as plain JSON-ready values (functions and exceptions)."""
        return {
            "instructions": self.instructions,
            "cycles": self.cycles,
            "time_units": list(self.units),
            "gaps": self.gaps,
            "functions": [p.to_dict() for p in self.sorted_functions()],
            "exceptions": [self.exceptions[n].to_dict() for n in sorted(self.exceptions)],
        }


# -- the tracker ------------------------------------------------------------------------------

_CALL = 0  # a frame entered by a call seen in the trace
_EXC = 1  # an exception frame
_ROOT = 2  # a frame whose entry was not seen (trace start, after a gap, re-linked)

# What the last range said comes next.
_NEXT_FALL = 0
_NEXT_CALL = 1
_NEXT_RET = 2
_NEXT_ERET = 3
_NEXT_EXC = 4
_NEXT_GAP = 5
_NEXT_JUMP = 6

_RETURNS = (InstrSubtype.V8_RET, InstrSubtype.V7_IMPLIED_RET)
_GAPS = (NoSync, TraceOn, EoTrace, AddrNacc)


class _Node:
    """A node of the calling-context tree: a function under its caller's node."""

    __slots__ = ("children", "func", "instructions", "parent")

    def __init__(self, func: FunctionInfo, parent: _Node | None) -> None:
        self.func = func
        self.parent = parent
        self.children: dict[FunctionInfo, _Node] = {}
        self.instructions = 0

    def child(self, func: FunctionInfo) -> _Node:
        got = self.children.get(func)
        if got is None:
            got = self.children[func] = _Node(func, self)
        return got


class _Frame:
    """One frame of a tracked stack."""

    __slots__ = (
        "cycles0",
        "exc",
        "exc_start",
        "func",
        "instr0",
        "kind",
        "node",
        "ranges",
        "ret",
        "site",
        "stats",
        "ticks0",
        "whole",
    )

    def __init__(
        self,
        func: FunctionInfo,
        node: _Node,
        kind: int,
        ret: int | None,
        site: int,
        clock: _Clock,
        stats: FunctionProfile,
        ranges: dict[tuple[int | None, int, int, int, int], list[int]],
        exc: int | None = None,
    ) -> None:
        self.func = func
        self.stats = stats
        self.ranges = ranges
        self.node = node
        self.kind = kind
        self.ret = ret
        self.site = site
        self.exc = exc
        self.whole = kind != _ROOT
        self.instr0 = clock.instructions
        self.cycles0 = clock.cycles
        self.ticks0 = clock.ticks
        self.exc_start: tuple[int, int | None, int | None] | None = None
        if exc is not None:
            self.exc_start = (self.instr0, self.cycles0, self.ticks0)


class _Clock:
    __slots__ = ("cycles", "instructions", "ticks")

    def __init__(self) -> None:
        self.instructions = 0
        self.cycles: int | None = None
        self.ticks: int | None = None


class _Track:
    """The state of one trace ID."""

    __slots__ = ("clock", "ctx", "exc_number", "exc_ret", "next", "next_ret", "next_site", "stack")

    def __init__(self) -> None:
        self.stack: list[_Frame] = []
        self.clock = _Clock()
        self.next = _NEXT_GAP
        self.next_ret: int | None = None
        self.next_site = 0
        self.exc_number = 0
        self.exc_ret: int | None = None
        self.ctx: int | None = None


class CallTracker:
    """Follows the call stacks of element streams and counts costs (see the module doc).

    Feed each trace source's elements in decode order with :meth:`feed`;
    several calls for one trace ID continue its stream. :meth:`profile`
    gives the :class:`CallProfile` so far.
    """

    def __init__(self, symbols: SymbolLookup, read: CodeReader | None = None) -> None:
        self.symbols = symbols
        self.read = read
        self._tracks: dict[int, _Track] = {}
        self._funcs: dict[tuple[int, int | None], FunctionInfo | None] = {}
        self._ctx: int | None = None
        self._roots: dict[int, _Node] = {}
        self._functions: dict[FunctionInfo, FunctionProfile] = {}
        self._exceptions: dict[int, ExceptionProfile] = {}
        self._arcs: dict[tuple[FunctionInfo, int, FunctionInfo], CallArc] = {}
        # Per function: (context ID, ISA, start, end, last size) -> [count, instructions, cycles]
        self._ranges: dict[
            FunctionInfo, dict[tuple[int | None, int, int, int, int], list[int]]
        ] = {}
        self._active: dict[int, int] = {}  # calls open, per id() of a FunctionProfile
        self._interned: dict[FunctionInfo, FunctionInfo] = {}
        self._units: set[str] = set()
        self._gaps = 0
        self._relinks = 0

    # -- symbols --------------------------------------------------------------------------

    def _lookup(self, address: int, ctx: int | None) -> FunctionInfo | None:
        key = (address, ctx)
        if key in self._funcs:
            return self._funcs[key]
        f = self.symbols.function(address, ctx)
        info = None
        if f is not None:
            info = self._intern(FunctionInfo(f.name, f.start, f.end, f.file, f.line))
        self._funcs[key] = info
        return info

    def _intern(self, func: FunctionInfo) -> FunctionInfo:
        """One object per function, so that frames compare functions by identity."""
        return self._interned.setdefault(func, func)

    def _function(self, address: int, called: bool) -> FunctionInfo:
        info = self._lookup(address, self._ctx)
        if info is not None:
            return info
        return self._intern(FunctionInfo(f"0x{address:x}", address)) if called else UNKNOWN

    def _stats(self, func: FunctionInfo) -> FunctionProfile:
        got = self._functions.get(func)
        if got is None:
            got = self._functions[func] = FunctionProfile(func)
        return got

    # -- frames ---------------------------------------------------------------------------

    def _frame(
        self,
        track: _Track,
        func: FunctionInfo,
        node: _Node,
        kind: int,
        ret: int | None,
        site: int,
        exc: int | None = None,
    ) -> _Frame:
        stats = self._stats(func)
        ranges = self._ranges.get(func)
        if ranges is None:
            ranges = self._ranges[func] = {}
        frame = _Frame(func, node, kind, ret, site, track.clock, stats, ranges, exc)
        self._active[id(stats)] = self._active.get(id(stats), 0) + 1
        return frame

    def _push(
        self,
        track: _Track,
        func: FunctionInfo,
        kind: int,
        ret: int | None,
        site: int,
        exc: int | None = None,
    ) -> None:
        stack = track.stack
        if stack and kind != _ROOT:
            node = stack[-1].node.child(func)
        else:
            node = _Node(func, None)
            self._roots[id(node)] = node
        frame = self._frame(track, func, node, kind, ret, site, exc)
        stack.append(frame)
        if kind != _ROOT:
            stats = frame.stats
            stats.calls += 1
            if kind == _EXC:
                stats.handler = True
        if exc is not None:
            prof = self._exceptions.get(exc)
            if prof is None:
                prof = self._exceptions[exc] = ExceptionProfile(exc)
            prof.count += 1
            prof.handlers.add(func.name)

    def _pop(self, track: _Track) -> _Frame:
        frame = track.stack.pop()
        clock = track.clock
        func = frame.func
        stats = frame.stats
        active = self._active[id(stats)] - 1
        self._active[id(stats)] = active
        instructions = clock.instructions - frame.instr0
        cycles = 0
        if clock.cycles is not None and frame.cycles0 is not None:
            cycles = clock.cycles - frame.cycles0
        if track.stack:
            caller = track.stack[-1].func
            key = (caller, frame.site, func)
            arc = self._arcs.get(key)
            if arc is None:
                arc = self._arcs[key] = self._new_arc(caller, frame.site, func)
            arc.calls += 1
            arc.instructions += instructions
            arc.cycles += cycles
        if not frame.whole:
            return frame
        stats.returned += 1
        if active == 0:
            stats.inclusive += instructions
        for unit, value in self._times(frame.instr0, frame.cycles0, frame.ticks0, clock):
            stats.timing.setdefault(unit, Timing()).add(value)
        if frame.exc is not None and frame.exc_start is not None:
            prof = self._exceptions[frame.exc]
            instr0, cycles0, ticks0 = frame.exc_start
            prof.returned += 1
            prof.instructions += clock.instructions - instr0
            for unit, value in self._times(instr0, cycles0, ticks0, clock):
                prof.timing.setdefault(unit, Timing()).add(value)
        return frame

    @staticmethod
    def _times(
        instr0: int, cycles0: int | None, ticks0: int | None, clock: _Clock
    ) -> list[tuple[str, int]]:
        out = []
        if clock.cycles is not None and cycles0 is not None:
            out.append((CYCLES, clock.cycles - cycles0))
        if clock.ticks is not None and ticks0 is not None and clock.ticks >= ticks0:
            out.append((TICKS, clock.ticks - ticks0))  # (not when timestamps went back)
        return out

    def _replace(self, track: _Track, func: FunctionInfo) -> None:
        """A tail call: the top frame ends and ``func`` runs in its place.

        The new frame keeps the old one's caller, return address and, for an
        exception frame, the exception (whose return ends it).
        """
        if not track.stack:
            self._push(track, func, _ROOT, None, 0)
            return
        old = self._pop(track)
        if old.kind == _ROOT and not track.stack:
            self._push(track, func, _ROOT, None, 0)
        else:
            self._push(track, func, old.kind if old.kind != _ROOT else _CALL, old.ret, old.site)
        frame = track.stack[-1]
        frame.exc = old.exc
        frame.exc_start = old.exc_start

    def _return_to(self, track: _Track, address: int, kinds: tuple[int, ...]) -> bool:
        """Pop down to the frame of ``kinds`` returning to ``address``; False if none does."""
        stack = track.stack
        for i in range(len(stack) - 1, -1, -1):
            if stack[i].kind in kinds and stack[i].ret == address:
                while len(stack) > i:
                    self._pop(track)
                return True
        return False

    def _belongs(self, func: FunctionInfo, address: int) -> bool:
        """Whether ``address`` is in ``func``: by its symbol, or, for a function no symbol
        covers, when no symbol covers ``address`` either (its bounds are unknown)."""
        if func.end:
            return func.start <= address < func.end
        return self._lookup(address, self._ctx) is None

    def _settle(self, track: _Track, address: int) -> None:
        """After a return: make the top frame ``address``'s function's, popping or
        replacing as needed."""
        stack = track.stack
        if stack and self._belongs(stack[-1].func, address):
            return
        for i in range(len(stack) - 2, -1, -1):
            if self._belongs(stack[i].func, address):
                while len(stack) > i + 1:
                    self._pop(track)
                return
        func = self._function(address, False)
        if stack:
            self._replace(track, func)
            return
        self._push(track, func, _ROOT, None, 0)

    def _relink(self, track: _Track, address: int) -> None:
        """A return above the known stack: ``address``'s function becomes the new bottom."""
        bottom = track.stack[0]
        func = self._function(address, False)
        # The frames above are closed as the return closes them; the bottom one
        # gets its caller first, so that its arc is counted.
        node = _Node(func, None)
        self._roots[id(node)] = node
        if bottom.node.parent is None:
            bottom.node.parent = node  # (it stays among the roots: the walk starts there too)
        track.stack.insert(0, self._frame(track, func, node, _ROOT, None, 0))
        self._relinks += 1
        while len(track.stack) > 1:
            self._pop(track)

    def _enter(self, track: _Track, address: int) -> None:
        """Settle what the previous range (or element) said comes next, at ``address``."""
        nxt = track.next
        stack = track.stack
        if nxt == _NEXT_CALL:
            self._push(track, self._function(address, True), _CALL, track.next_ret, track.next_site)
        elif nxt == _NEXT_EXC:
            self._push(
                track,
                self._function(address, True),
                _EXC,
                track.exc_ret,
                track.exc_ret or 0,
                track.exc_number,
            )
        elif nxt == _NEXT_RET:
            if self._return_to(track, address, (_CALL,)):
                self._settle(track, address)
            elif len(stack) == 1 and stack[0].kind == _ROOT:
                self._relink(track, address)
            else:
                if stack:
                    self._pop(track)
                if not stack:
                    self._push(track, self._function(address, False), _ROOT, None, 0)
                else:
                    self._settle(track, address)
        elif nxt == _NEXT_ERET:
            exc = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].kind == _EXC), None)
            if exc is not None:
                while len(stack) > exc:
                    self._pop(track)
            if stack:
                self._settle(track, address)
            else:
                self._push(track, self._function(address, False), _ROOT, None, 0)
        elif nxt == _NEXT_GAP:
            func = self._function(address, False)
            self._close_all(track)
            if stack and func is not stack[-1].func:
                i = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].func is func), None)
                if i is None:
                    while stack:
                        self._pop(track)
                else:
                    while len(stack) > i + 1:
                        self._pop(track)
            if not stack:
                self._push(track, func, _ROOT, None, 0)
        else:
            top = stack[-1] if stack else None
            if top is None:
                self._push(track, self._function(address, False), _ROOT, None, 0)
            elif nxt == _NEXT_JUMP and top.kind != _ROOT and top.ret == address:
                # A return by another branch: BR X30, SUBS PC, LR, #4 from an IRQ handler.
                self._pop(track)
                self._settle(track, address)
            elif self._belongs(top.func, address):
                pass
            else:
                func = self._function(address, False)
                if func is not top.func:
                    self._replace(track, func)
        track.next = _NEXT_FALL

    def _close_all(self, track: _Track) -> None:
        for frame in track.stack:
            frame.whole = False
            frame.exc_start = None

    # -- elements -------------------------------------------------------------------------

    def _range(self, track: _Track, elem: InstrRange) -> None:
        start = elem.start
        stack = track.stack
        nxt = track.next
        top = stack[-1] if stack else None
        if (
            top is not None
            and (nxt == _NEXT_FALL or (nxt == _NEXT_JUMP and top.ret != start))
            and (
                top.func.start <= start < top.func.end
                or (not top.func.end and self._lookup(start, self._ctx) is None)
            )
        ):
            track.next = _NEXT_FALL  # on in the same function: nothing to settle
        else:
            self._enter(track, start)
        num = elem.num_instr
        end = elem.end
        while True:
            frame = track.stack[-1]
            fend = frame.func.end
            if not fend or not (frame.func.start <= start < fend < end):
                break
            # The range runs past the end of its function: split it there.
            if elem.isa == Isa.T32:
                part = max(1, min(num - 1, (num * (fend - start)) // (end - start)))
            else:
                part = min(num - 1, (fend - start) // 4)
            self._count(track, frame, elem, start, fend, part, 0)
            num -= part
            start = fend
            track.next = _NEXT_FALL
            self._enter(track, start)
        self._count(track, track.stack[-1], elem, start, end, num, elem.cycle_count or 0)
        if elem.cycle_count is not None:
            clock = track.clock
            clock.cycles = (clock.cycles or 0) + elem.cycle_count
            self._units.add(CYCLES)
        if not elem.last_exec:
            track.next = _NEXT_FALL
            return
        subtype = elem.last_subtype
        if subtype == InstrSubtype.BR_LINK:
            track.next = _NEXT_CALL
            track.next_ret = end
            track.next_site = end - elem.last_size
        elif subtype in _RETURNS:
            track.next = _NEXT_RET
        elif subtype == InstrSubtype.V8_ERET:
            track.next = _NEXT_ERET
        elif elem.last_type in (InstrType.BR, InstrType.BR_INDIRECT):
            track.next = _NEXT_JUMP
        else:
            track.next = _NEXT_FALL

    def _count(
        self,
        track: _Track,
        frame: _Frame,
        elem: InstrRange,
        start: int,
        end: int,
        num: int,
        cycles: int,
    ) -> None:
        frame.node.instructions += num
        stats = frame.stats
        stats.instructions += num
        stats.cycles += cycles
        track.clock.instructions += num
        key = (self._ctx, elem.isa, start, end, elem.last_size if end == elem.end else 0)
        ranges = frame.ranges
        got = ranges.get(key)
        if got is None:
            ranges[key] = [1, num, cycles]
        else:
            got[0] += 1
            got[2] += cycles

    def _exception(self, track: _Track, elem: Exception_) -> None:
        resume = elem.return_address
        if track.next != _NEXT_FALL:
            # A branch was taken (or the trace restarted) before the exception: execution
            # goes on at the resume point. (After a range that falls through, the resume
            # point has not run yet, and may be the next function's start: the last
            # instruction of a function that does not return.)
            if resume is not None:
                self._enter(track, resume)
            elif track.next != _NEXT_GAP:
                self._close_all(track)
        stack = track.stack
        if elem.m_tail_chain:
            # The handler on top ends where the next one begins.
            exc = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].kind == _EXC), None)
            if exc is not None:
                while len(stack) > exc:
                    self._pop(track)
        track.next = _NEXT_EXC
        track.exc_number = elem.number
        track.exc_ret = resume

    def _gap(self, track: _Track, count: bool = True) -> None:
        if track.stack and count:
            self._gaps += 1  # (the start and the end of the trace are not gaps)
        self._close_all(track)
        track.next = _NEXT_GAP

    def feed(self, trace_id: int, elements: Iterable[Element]) -> None:
        """Follow the elements of the source ``trace_id`` (continuing its earlier ones)."""
        track = self._tracks.get(trace_id)
        if track is None:
            track = self._tracks[trace_id] = _Track()
        clock = track.clock
        self._ctx = track.ctx
        for elem in elements:
            kind = type(elem)
            if kind is InstrRange:
                assert isinstance(elem, InstrRange)
                self._range(track, elem)
                continue
            cc = getattr(elem, "cycle_count", None)
            if cc is not None and kind is not Timestamp:
                clock.cycles = (clock.cycles or 0) + cc
                self._units.add(CYCLES)
            if kind is Timestamp:
                assert isinstance(elem, Timestamp)
                clock.ticks = elem.timestamp
                self._units.add(TICKS)
            elif kind is Exception_:
                assert isinstance(elem, Exception_)
                self._exception(track, elem)
            elif kind is ExceptionRet:
                if track.next in (_NEXT_RET, _NEXT_JUMP, _NEXT_FALL):
                    track.next = _NEXT_ERET
            elif kind in _GAPS:
                if track.next != _NEXT_GAP:
                    self._gap(track, kind is not EoTrace)
            elif kind is PEContext:
                assert isinstance(elem, PEContext)
                if elem.context.ctxt_id_valid:
                    ctx = elem.context.context_id
                    if track.ctx is not None and ctx != track.ctx:
                        self._gap(track)
                    track.ctx = self._ctx = ctx

    # -- results --------------------------------------------------------------------------

    def _folded(self) -> dict[tuple[str, ...], int]:
        out: dict[tuple[str, ...], int] = {}
        paths: dict[int, tuple[str, ...]] = {}

        def path(node: _Node) -> tuple[str, ...]:
            got = paths.get(id(node))
            if got is None:
                got = (node.func.name,)
                if node.parent is not None:
                    got = path(node.parent) + got
                paths[id(node)] = got
            return got

        for node in self._walk():
            if node.instructions:
                key = path(node)
                out[key] = out.get(key, 0) + node.instructions
        return out

    def _walk(self) -> Iterator[_Node]:
        todo = list(self._roots.values())
        while todo:
            node = todo.pop()
            yield node
            todo.extend(node.children.values())

    def _lines(self) -> dict[tuple[FunctionInfo, str | None, int], LineCost]:
        out: dict[tuple[FunctionInfo, str | None, int], LineCost] = {}
        cache: dict[tuple[int, int | None], tuple[str | None, int]] = {}
        for func, ranges in self._ranges.items():
            for key, counts in ranges.items():
                self._line_costs(func, key, counts, out, cache)
        return out

    def _line_costs(
        self,
        func: FunctionInfo,
        key: tuple[int | None, int, int, int, int],
        counts: list[int],
        out: dict[tuple[FunctionInfo, str | None, int], LineCost],
        cache: dict[tuple[int, int | None], tuple[str | None, int]],
    ) -> None:
        count, num, cycles = counts
        ctx, isa, start, end, last_size = key
        addresses = self._addresses(isa, start, end, num, last_size, ctx)
        for i, address in enumerate(addresses):
            where = cache.get((address, ctx))
            if where is None:
                ln = self.symbols.line(address, ctx)
                where = (ln.file, ln.line) if ln is not None else (None, 0)
                cache[(address, ctx)] = where
            cost = out.get((func, *where))
            if cost is None:
                cost = out[(func, *where)] = LineCost()
            cost.instructions += count
            if i == len(addresses) - 1:
                cost.cycles += cycles

    def _addresses(
        self, isa: int, start: int, end: int, num: int, last_size: int, ctx: int | None
    ) -> list[int]:
        """The addresses of the ``num`` instructions of a range.

        T32 sizes come from the code read through ``read`` (the first halfword
        says 2 or 4 bytes); without it, or where it gives nothing, T32
        instructions are taken as 2 bytes but the last.
        """
        if num <= 0:
            return []
        if isa != Isa.T32:
            return [start + 4 * i for i in range(num)]
        code = self.read(start, end - start, ctx) if self.read is not None else b""
        out: list[int] = []
        address = start
        while len(out) < num - 1:
            out.append(address)
            off = address - start
            wide = off + 2 <= len(code) and is_wide(int.from_bytes(code[off : off + 2], "little"))
            address += 4 if wide else 2
        out.append(end - last_size if last_size else address)
        return out

    def _new_arc(self, caller: FunctionInfo, site: int, callee: FunctionInfo) -> CallArc:
        arc = CallArc(caller, site, callee)
        if site:
            where = self.symbols.line(site, self._ctx)
            if where is not None:
                arc.site_file, arc.site_line = where.file, where.line
        return arc

    def _open_arcs(self) -> dict[tuple[FunctionInfo, int, FunctionInfo], CallArc]:
        """The call arcs, with the calls still open at the end counted up to there."""
        arcs = {k: replace(a) for k, a in self._arcs.items()}
        for track in self._tracks.values():
            stack, clock = track.stack, track.clock
            for caller, frame in itertools.pairwise(stack):
                key = (caller.func, frame.site, frame.func)
                arc = arcs.get(key)
                if arc is None:
                    arc = arcs[key] = self._new_arc(caller.func, frame.site, frame.func)
                arc.calls += 1
                arc.instructions += clock.instructions - frame.instr0
                if clock.cycles is not None and frame.cycles0 is not None:
                    arc.cycles += clock.cycles - frame.cycles0
        return arcs

    def profile(self) -> CallProfile:
        """The counts so far (frames still open count their instructions but no time)."""
        cycles = None
        for track in self._tracks.values():
            if track.clock.cycles is not None:
                cycles = (cycles or 0) + track.clock.cycles
        return CallProfile(
            functions=dict(self._functions),
            exceptions=dict(self._exceptions),
            arcs=self._open_arcs(),
            stacks=self._folded(),
            lines=self._lines(),
            instructions=sum(t.clock.instructions for t in self._tracks.values()),
            cycles=cycles,
            units=tuple(u for u in (CYCLES, TICKS) if u in self._units),
            gaps=self._gaps,
            relinks=self._relinks,
        )


def call_profile(
    trace: Trace,
    symbols: SymbolLookup | None = None,
    options: DecodeOptions | None = None,
    images: Iterable[str] = (),
) -> CallProfile:
    """Decode every buffer of ``trace`` in one session and follow its calls.

    ``symbols`` defaults to :meth:`Symbols.from_trace(trace, images)
    <cstrace.analyses.symbols.Symbols.from_trace>`; T32 source-line costs read
    the code through each source's code memory.
    """
    if symbols is None:
        symbols = Symbols.from_trace(trace, images)
    session = Session(trace, options)
    tracker = CallTracker(symbols)
    for run in session.runs():
        tracker.read = memory_reader(session, run)
        tracker.feed(run.trace_id, run.elements())
    return tracker.profile()


def memory_reader(session: Session, run: SourceRun) -> CodeReader:
    """A :data:`CodeReader` over the code memory of ``run``'s source."""
    memory = session.memories.for_source(run.source, run.buffer.time)

    def read(address: int, size: int, _context: int | None) -> bytes:
        return bytes(memory.read(address, size))

    return read
