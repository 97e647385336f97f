"""Execution profiles from decoded trace: instruction ranges and taken branches per binary.

Input: the elements of each trace source in decode order (element streams or
:class:`~cstrace.batch.ElementBatch` es, one trace ID at a time) and a
:class:`~cstrace.memory.binaries.BinaryResolver` that says which program binary
an address belongs to. Output: a :class:`Profile` holding, for each
:class:`~cstrace.memory.binaries.Binary`, counts in the binary's own (link-time)
addresses; or, with :class:`BranchSampler`, the branch-stack samples that
``perf inject --itrace=il`` synthesises, in run-time addresses.

Consecutive ``INSTR_RANGE`` elements of one trace ID are linked: the last
instruction of a range whose last instruction is a taken branch
(``last_exec`` with a branch type) is followed by the first instruction of the
next range. Trace gaps (``NO_SYNC``, ``TRACE_ON``, ``EO_TRACE``) cut the links,
so nothing is counted across them; after a ``NO_SYNC`` (a decoder reset) the
context ID is unknown until a ``PE_CONTEXT`` gives it again. Two views of
the same links are counted, because the consumers were built on two different
tools:

- **simpleperf's** (``simpleperf inject``, AutoFDO text): every decoded range
  counts once as ``[first instruction, last instruction]``; a taken direct
  branch goes to the start of the next range when there is a next range in a
  known binary, else to the target encoded in the instruction; a taken
  indirect branch goes to ``0`` (simpleperf does not follow it); exceptions
  change nothing. These are :attr:`BinaryProfile.ranges` and
  :attr:`BinaryProfile.branches`.
- **perf's** (``perf inject --itrace``, the branch records that llvm-profgen
  and BOLT read): a branch record links a range to the next one when the
  range's last instruction was a taken branch, or when an exception came
  after it (perf marks the range before an exception as ending in a taken
  branch); fall-through runs go from a branch target to the next taken
  branch, through not-taken branches, as a branch-record consumer rebuilds
  them from consecutive records. These are :attr:`BinaryProfile.taken` and
  :attr:`BinaryProfile.fallthroughs`; branches between two binaries are in
  :attr:`Profile.external`.

Counting first aggregates the links of the raw elements (run-time addresses
and the context ID they ran in), then resolves each distinct one once, so the
cost per element is a few comparisons and one dictionary update.

:class:`PerfBranches` gives, from the same elements, the branch samples Linux
perf's cs_etm decoder synthesises (``perf script --itrace=b``, with the flags
``-F flags`` prints), so that perf can judge the decode: the tests compare them
with perf's own.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from cstrace.batch import ElementBatch
from cstrace.decode import Session
from cstrace.elements import (
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
    TraceOn,
)
from cstrace.errors import CstraceError
from cstrace.isa.decode import decode, read_opcode
from cstrace.isa.types import IsaOptions
from cstrace.memory.binaries import (
    Binary,
    BinaryResolver,
    Mapping,
    StaticResolver,
    find_by_build_id,
)
from cstrace.memory.elf import load_elf
from cstrace.protocols import DecodeOptions
from cstrace.trace import Image, Trace

__all__ = [
    "PERF_FLAG_NAMES",
    "BinaryProfile",
    "BranchSample",
    "BranchSampler",
    "PerfBranch",
    "PerfBranches",
    "Profile",
    "ProfileCounter",
    "image_resolver",
    "profile_trace",
    "resolver_for",
    "with_symdir",
]

BinaryKey = tuple[str, str | None]

# What ends a range, for linking it to the next one.
_FALLS = 0  # the last instruction is not a taken branch: execution goes on after it
_DIRECT = 1  # a taken direct branch
_INDIRECT = 2  # a taken indirect branch
_BRANCH_TYPES = (InstrType.BR, InstrType.BR_INDIRECT)
_GAPS = (NoSync, TraceOn, EoTrace)
_NO_NEXT = -1


@dataclass
class BinaryProfile:
    """The counts of one binary, in its link-time addresses.

    ``ranges`` and ``branches`` are simpleperf's view (see the module doc):
    ``(first, last)`` instruction addresses of each decoded range, and
    ``(branch, target)`` of taken branches (target 0: not followed).
    ``fallthroughs`` and ``taken`` are perf's: ``(branch target, next taken
    branch)`` runs and ``(branch, target)`` records with both ends in this
    binary.
    """

    binary: Binary
    ranges: Counter[tuple[int, int]] = field(default_factory=Counter)
    branches: Counter[tuple[int, int]] = field(default_factory=Counter)
    fallthroughs: Counter[tuple[int, int]] = field(default_factory=Counter)
    taken: Counter[tuple[int, int]] = field(default_factory=Counter)

    def add(self, other: BinaryProfile) -> None:
        """Add the counts of ``other`` (the same binary, from another input) to these."""
        self.ranges.update(other.ranges)
        self.branches.update(other.branches)
        self.fallthroughs.update(other.fallthroughs)
        self.taken.update(other.taken)

    @property
    def instructions_seen(self) -> bool:
        """Whether anything at all was counted for the binary."""
        return bool(self.ranges or self.fallthroughs)


@dataclass
class Profile:
    """Counts per binary, summed over the trace sources (and inputs) fed to it."""

    binaries: dict[BinaryKey, BinaryProfile] = field(default_factory=dict)
    """Per :attr:`Binary.key <cstrace.memory.binaries.Binary.key>`."""
    external: Counter[tuple[BinaryKey, int, BinaryKey, int]] = field(default_factory=Counter)
    """Taken branches (perf's view) from one binary into another: (from binary, from, to
    binary, to)."""
    unmapped: int = 0
    """Instruction ranges whose first address no known binary holds."""

    def binary(self, binary: Binary) -> BinaryProfile:
        """The counts of ``binary`` (created empty when first asked)."""
        got = self.binaries.get(binary.key)
        if got is None:
            got = self.binaries[binary.key] = BinaryProfile(binary)
        return got

    def add(self, other: Profile) -> None:
        """Add the counts of ``other`` (another input) to these: binaries with the same key sum."""
        for key, prof in other.binaries.items():
            mine = self.binaries.get(key)
            if mine is None:
                self.binaries[key] = BinaryProfile(prof.binary)
                mine = self.binaries[key]
            mine.add(prof)
        self.external.update(other.external)
        self.unmapped += other.unmapped

    def select(self, pattern: str | None) -> Profile:
        """The binaries whose path matches the regular expression ``pattern`` (all if None).

        Raises ``re.error`` for a bad pattern.
        """
        if not pattern:
            return self
        rx = re.compile(pattern)
        keep = {k: v for k, v in self.binaries.items() if rx.search(v.binary.path)}
        external = Counter({k: c for k, c in self.external.items() if k[0] in keep or k[2] in keep})
        return Profile(keep, external, self.unmapped)

    def sorted_binaries(self) -> list[BinaryProfile]:
        """The binaries with counts, by path then build ID."""
        profs = [p for p in self.binaries.values() if p.instructions_seen]
        return sorted(profs, key=lambda p: (p.binary.path, p.binary.build_id or ""))


# One link between a range and what followed it, in run-time addresses.
# (trace ID, event-log time of the range, context ID, ISA, start, end, last size, how it
#  ends, exception after it, next start or _NO_NEXT, context ID of the next range, start of
#  its fall-through run)
_Link = tuple[int, int | None, int | None, int, int, int, int, int, bool, int, int | None, int]


class _Track:
    """What is pending on one trace ID: the last range, and whether an exception followed."""

    __slots__ = ("chain", "ctx", "exc", "prev")

    def __init__(self) -> None:
        self.ctx: int | None = None
        # (time, context, isa, start, end, last size, how it ends)
        self.prev: tuple[int | None, int | None, int, int, int, int, int] | None = None
        self.exc = False
        self.chain = 0


def _ends(elem: InstrRange) -> int:
    if elem.last_exec and elem.last_type in _BRANCH_TYPES:
        return _DIRECT if elem.last_type == InstrType.BR else _INDIRECT
    return _FALLS


class ProfileCounter:
    """Counts ranges and branches of element streams (see the module doc).

    Feed each trace source's elements in decode order with :meth:`feed` (or
    :meth:`feed_batch`); several calls for one trace ID continue its stream.
    :meth:`profile` resolves the counts through ``resolver`` into a
    :class:`Profile`, each range in the binaries mapped at the event-log time
    it was fed with (a recording's buffer time: after an exec, the new
    program's; None: as the resolver sees a trace without time).
    """

    def __init__(self, resolver: BinaryResolver) -> None:
        self.resolver = resolver
        self._links: Counter[_Link] = Counter()
        self._tracks: dict[int, _Track] = {}

    def _track(self, trace_id: int) -> _Track:
        track = self._tracks.get(trace_id)
        if track is None:
            track = self._tracks[trace_id] = _Track()
        return track

    def feed(self, trace_id: int, elements: Iterable[Element], time: int | None = None) -> None:
        """Count the elements of the source ``trace_id`` (continuing its earlier ones), which
        ran at event-log ``time`` (the time of their buffer, if the input gives one)."""
        track = self._track(trace_id)
        links = self._links
        ctx = track.ctx
        prev = track.prev
        exc = track.exc
        chain = track.chain
        for elem in elements:
            kind = type(elem)
            if kind is InstrRange:
                assert isinstance(elem, InstrRange)
                start = elem.start
                if prev is not None:
                    links[(trace_id, *prev, exc, start, ctx, chain)] += 1
                    # prev: (time, context, isa, start, end, last size, how it ends)
                    if exc or prev[6] != _FALLS or prev[4] != start:
                        chain = start
                else:
                    chain = start
                prev = (time, ctx, int(elem.isa), start, elem.end, elem.last_size, _ends(elem))
                exc = False
            elif kind is PEContext:
                assert isinstance(elem, PEContext)
                if elem.context.ctxt_id_valid:
                    ctx = elem.context.context_id
            elif kind is Exception_:
                if prev is not None:
                    exc = True
            elif kind in _GAPS:
                if prev is not None:
                    links[(trace_id, *prev, exc, _NO_NEXT, None, chain)] += 1
                prev = None
                exc = False
                if kind is NoSync:
                    ctx = None  # a decoder reset: the context is unknown until the trace says
        track.ctx = ctx
        track.prev = prev
        track.exc = exc
        track.chain = chain

    def feed_batch(self, batch: ElementBatch) -> None:
        """Count the elements of an element batch of one trace source."""
        ids = batch["trace_id"]
        trace_id = int(ids[0]) if len(ids) else 0
        self.feed(trace_id, iter(batch))

    def _flush(self) -> None:
        for trace_id, track in self._tracks.items():
            if track.prev is not None:
                self.feed(trace_id, [EoTrace(0)])

    def profile(self) -> Profile:
        """The counts so far, resolved to binaries (pending ranges are ended first)."""
        self._flush()
        return _resolve(self._links, self.resolver)


def _resolve(links: Counter[_Link], resolver: BinaryResolver) -> Profile:
    """Turn aggregated links into per-binary counts in link-time addresses."""
    out = Profile()
    cache: dict[tuple[int, int | None, int, int | None], Mapping | None] = {}

    def find(address: int, ctx: int | None, trace_id: int, time: int | None) -> Mapping | None:
        key = (address, ctx, trace_id, time)
        if key in cache:
            return cache[key]
        if time is None:
            got = resolver.find(address, ctx, trace_id)  # (resolvers without time)
        else:
            got = resolver.find(address, ctx, trace_id, time)
        cache[key] = got
        return got

    for link, count in links.items():
        trace_id, time, ctx, isa, start, end, size, ends, exc, nxt, nctx, chain = link
        m = find(start, ctx, trace_id, time)
        if m is None:
            out.unmapped += count
            continue
        prof = out.binary(m.binary)
        last = end - size
        b_start = m.binary_address(start)
        b_last = m.binary_address(last)
        prof.ranges[(b_start, b_last)] += count
        nm = find(nxt, nctx, trace_id, time) if nxt != _NO_NEXT else None
        # simpleperf's branches
        if ends == _DIRECT:
            if nm is not None:
                target = nm.binary_address(nxt)
            else:
                target = _encoded_target(m.binary, b_last, isa)
            prof.branches[(b_last, target)] += count
        elif ends == _INDIRECT:
            prof.branches[(b_last, 0)] += count
        # perf's branch records and fall-through runs
        taken = exc or ends != _FALLS
        if taken and nm is not None:
            if nm.binary is m.binary:
                prof.taken[(b_last, nm.binary_address(nxt))] += count
            else:
                key = (m.binary.key, b_last, nm.binary.key, nm.binary_address(nxt))
                out.external[key] += count
                out.binary(nm.binary)
        if taken or nxt == _NO_NEXT or nxt != end:
            cm = m if chain in m else find(chain, ctx, trace_id, time)
            if cm is not None and cm.binary is m.binary:
                prof.fallthroughs[(cm.binary_address(chain), b_last)] += count
    return out


_ISA_OPTIONS = IsaOptions()


def _encoded_target(binary: Binary, address: int, isa: int) -> int:
    """The target encoded in the direct branch at ``address`` of ``binary`` (0 if unreadable)."""
    code = binary.read(address, 4)
    if len(code) < 4:
        code = code + bytes(4 - len(code))
    if not any(code):
        return 0
    try:
        isa_e = Isa(isa)
        opcode = read_opcode(isa_e, code, 0)
        if opcode is None:
            return 0
        target = decode(isa_e, address, opcode, _ISA_OPTIONS).target
    except ValueError:
        return 0
    return 0 if target is None else target


# -- branch-stack samples (perf inject --itrace=i<period>il<size>) --------------------------


@dataclass(frozen=True, slots=True)
class BranchSample:
    """One synthesised instruction sample with its branch stack, in run-time addresses.

    ``branches`` are ``(from, to)`` pairs, the most recent first, as perf
    stores a last-branch stack.
    """

    trace_id: int
    context_id: int | None
    ip: int
    branches: tuple[tuple[int, int], ...]


class BranchSampler:
    """Synthesises branch-stack samples from element streams as ``perf inject --itrace=il`` does.

    Every ``period`` instructions an instruction sample is taken, carrying the
    last ``depth`` taken branches (a branch is recorded when a range follows a
    range that ended in a taken branch or was interrupted by an exception).
    At a trace gap and at the end, one more sample is taken at the last
    executed instruction, and the branch stack is emptied.
    """

    def __init__(self, period: int = 100_000, depth: int = 64) -> None:
        if period < 1 or depth < 1:
            raise ValueError("period and depth must be positive")
        self.period = period
        self.depth = depth

    def samples(self, trace_id: int, elements: Iterable[Element]) -> Iterator[BranchSample]:
        """The samples of one trace source's elements, in order."""
        stack: list[tuple[int, int]] = []  # oldest first
        depth = self.depth
        period = self.period
        pending = 0
        ctx: int | None = None
        prev: InstrRange | None = None
        prev_taken = False
        for elem in elements:
            kind = type(elem)
            if kind is InstrRange:
                assert isinstance(elem, InstrRange)
                if prev is not None and prev_taken:
                    stack.append((prev.end - prev.last_size, elem.start))
                    if len(stack) > depth:
                        del stack[0]
                before = pending
                pending += elem.num_instr
                if pending >= period:
                    offset = period - before
                    branches = tuple(reversed(stack))
                    while pending >= period:
                        ip = _instr_address(elem, offset - 1)
                        yield BranchSample(trace_id, ctx, ip, branches)
                        offset += period
                        pending -= period
                prev = elem
                prev_taken = elem.last_exec and elem.last_type in _BRANCH_TYPES
            elif kind is Exception_:
                if prev is not None:
                    prev_taken = True
            elif kind is PEContext:
                assert isinstance(elem, PEContext)
                if elem.context.ctxt_id_valid:
                    ctx = elem.context.context_id
            elif kind in _GAPS:
                if prev is not None:
                    ip = prev.end - prev.last_size
                    yield BranchSample(trace_id, ctx, ip, tuple(reversed(stack)))
                stack = []
                pending = 0
                prev = None
                prev_taken = False
        if prev is not None:
            yield BranchSample(trace_id, ctx, prev.end - prev.last_size, tuple(reversed(stack)))


def _instr_address(elem: InstrRange, index: int) -> int:
    """The address of instruction ``index`` of a range (T32 sizes taken as 2 but the last)."""
    if index >= elem.num_instr - 1:
        return elem.end - elem.last_size
    step = 2 if elem.isa == Isa.T32 else 4
    return elem.start + index * step


# -- perf's branch samples (perf script --itrace=b) --------------------------------------------

# PERF_IP_FLAG_* (tools/perf/util/event.h)
_F_BRANCH = 1 << 0
_F_CALL = 1 << 1
_F_RETURN = 1 << 2
_F_CONDITIONAL = 1 << 3
_F_SYSCALLRET = 1 << 4
_F_ASYNC = 1 << 5
_F_INTERRUPT = 1 << 6
_F_TRACE_BEGIN = 1 << 8
_F_TRACE_END = 1 << 9

PERF_FLAG_NAMES: dict[int, str] = {
    _F_BRANCH | _F_CALL: "call",
    _F_BRANCH | _F_RETURN: "return",
    _F_BRANCH | _F_CONDITIONAL: "jcc",
    _F_BRANCH: "jmp",
    _F_BRANCH | _F_CALL | _F_INTERRUPT: "int",
    _F_BRANCH | _F_RETURN | _F_INTERRUPT: "iret",
    _F_BRANCH | _F_CALL | _F_SYSCALLRET: "syscall",
    _F_BRANCH | _F_RETURN | _F_SYSCALLRET: "sysret",
    _F_BRANCH | _F_ASYNC: "async",
    _F_BRANCH | _F_CALL | _F_ASYNC | _F_INTERRUPT: "hw int",
    _F_BRANCH | _F_TRACE_BEGIN: "tr strt",
    _F_BRANCH | _F_TRACE_END: "tr end",
}
"""perf's names of branch-sample flags (``perf script -F flags``), by PERF_IP_FLAG_* bits."""

_FLAG_CHARS = "bcrosyiABExgh"  # PERF_IP_FLAG_CHARS, one per bit from bit 0

# Exception numbers as the trace units give them (perf's CS_ETMV3_EXC_* and CS_ETMV4_EXC_*).
_V3_ASYNC = {1, 4, 8, 14, 15}  # debug halt, async data abort, PE reset, IRQ, FIQ
_V3_SYNC = {2, 3, 5, 9, 11, 12, 13}  # SMC, HYP, Jazelle, undefined, aborts, generic
_V3_SVC = 10
_V4_ASYNC = {0, 1, 4, 6, 7, 14, 15}  # reset, debug halt, SError, debug, IRQ, FIQ
_V4_SYNC = {3, 10, 11, 12}  # trap, alignment, instruction and data faults
_V4_CALL = 2  # SVC, HVC or SMC: SVC when the instruction before says so
_V4_LAST = 31


@dataclass(frozen=True, slots=True)
class PerfBranch:
    """A branch sample as perf synthesises it: from ``ip`` (0 at a trace start) to ``addr``
    (0 at a trace end), with PERF_IP_FLAG_* ``flags``."""

    ip: int
    addr: int
    flags: int

    @property
    def name(self) -> str:
        """The flags as ``perf script -F flags`` prints them (words one space apart)."""
        name = PERF_FLAG_NAMES.get(self.flags)
        if name is not None:
            return name
        for bit, prefix in ((_F_TRACE_BEGIN, "tr strt"), (_F_TRACE_END, "tr end")):
            if self.flags & bit:
                inner = PERF_FLAG_NAMES.get(self.flags & ~bit)
                if inner is not None:
                    return f"{prefix} {inner}"
        return "".join(c for k, c in enumerate(_FLAG_CHARS) if self.flags >> k & 1)


class _Packet:
    """One of perf's cs_etm packets: a range, an exception, a return or a discontinuity."""

    __slots__ = ("elem", "flags", "kind", "number", "taken")

    def __init__(self, kind: str, elem: InstrRange | None = None, number: int = -1) -> None:
        self.kind = kind
        self.elem = elem
        self.number = number
        self.flags = 0
        self.taken = bool(elem is not None and elem.last_exec and elem.last_type in _BRANCH_TYPES)

    def first(self) -> int:
        return self.elem.start if self.elem is not None else 0

    def last(self) -> int:
        return self.elem.end - self.elem.last_size if self.elem is not None else 0


def _is_svc(read: Callable[[int, int], bytes] | None, isa: Isa, end: int) -> bool:
    """Whether the instruction just before ``end`` is an SVC (perf's ``cs_etm__is_svc_instr``:
    T32 reads 2 bytes, A32 and A64 4)."""
    if read is None:
        return False
    if isa == Isa.T32:
        code = read(end - 2, 2)
        return len(code) == 2 and code[1] == 0xDF
    code = read(end - 4, 4)
    if len(code) != 4:
        return False
    op = int.from_bytes(code, "little")
    if isa == Isa.A64:
        return op & 0xFFE0001F == 0xD4000001
    return op & 0x0F000000 == 0x0F000000 and op & 0xF0000000 != 0xF0000000


def _range_flags(elem: InstrRange) -> int:
    """The flags of a range's last instruction (perf's ``cs_etm__set_sample_flags``)."""
    kind, sub = elem.last_type, elem.last_subtype
    if kind == InstrType.BR:
        if sub == InstrSubtype.NONE:
            return _F_BRANCH | (_F_CONDITIONAL if elem.last_cond else 0)
        if sub == InstrSubtype.BR_LINK:
            return _F_BRANCH | _F_CALL
    elif kind == InstrType.BR_INDIRECT:
        if sub == InstrSubtype.BR_LINK:
            return _F_BRANCH | _F_CALL
        if sub in (InstrSubtype.NONE, InstrSubtype.V8_RET, InstrSubtype.V7_IMPLIED_RET):
            return _F_BRANCH | _F_RETURN
    return 0


class PerfBranches:
    """The branch samples perf (``perf script --itrace=b``) makes of one trace source.

    Feed the elements of each of the source's buffers in order to :meth:`samples`
    (one object per source: what the last buffer left pending carries on, as in
    perf's queue of the source). As perf's ``tools/perf/util/cs-etm.c`` does:
    ``INSTR_RANGE`` elements are range packets, ``NO_SYNC`` and ``TRACE_ON``
    discontinuities (``EO_TRACE`` is never one: perf does not ask the decoder to
    flush at the end of the data), ``EXCEPTION`` and ``EXCEPTION_RET`` exception
    packets. A sample is made when a range follows a range whose last
    instruction was a taken branch or was interrupted by an exception (from its
    last instruction to the new range's first), when a range follows a
    discontinuity (``tr strt``, from 0), and at a discontinuity after a range
    (``tr end``, to 0). The flags are the branch's kind (``jmp``, ``jcc``,
    ``call``, ``return``), or the exception's (``syscall`` for an SVC, ``hw int``
    for an asynchronous one, ``int`` for a synchronous one, ``iret`` or
    ``sysret`` for a return), as perf classifies them by the trace unit's
    exception numbers (``protocol``: ``etmv3`` and ``ptm`` use ETMv3's, ``etmv4``
    ETMv4's; perf 6.1 gives ETE's exceptions no kind).
    """

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self._prev = _Packet("empty")

    def samples(
        self, elements: Iterable[Element], read: Callable[[int, int], bytes] | None = None
    ) -> Iterator[PerfBranch]:
        """The samples of ``elements`` (after those fed before); ``read`` reads code, for
        telling an SVC (without it, none is)."""
        v3 = self.protocol in ("etmv3", "ptm")
        v4 = self.protocol == "etmv4"
        yield from self._walk(elements, read, v3, v4)

    def _walk(
        self,
        elements: Iterable[Element],
        read: Callable[[int, int], bytes] | None,
        v3: bool,
        v4: bool,
    ) -> Iterator[PerfBranch]:
        prev = self._prev
        for elem in elements:
            kind = type(elem)
            if kind is InstrRange:
                assert isinstance(elem, InstrRange)
                packet = _Packet("range", elem)
                packet.flags = _range_flags(elem)
                if prev.kind == "gap":
                    prev.flags |= _F_BRANCH | _F_TRACE_BEGIN
                if prev.flags == _F_BRANCH | _F_RETURN | _F_INTERRUPT and _is_svc(
                    read, elem.isa, elem.start
                ):
                    prev.flags = _F_BRANCH | _F_RETURN | _F_SYSCALLRET
                if prev.kind == "gap" or (prev.kind == "range" and prev.taken):
                    yield PerfBranch(prev.last(), packet.first(), prev.flags)
                prev = packet
            elif kind is Exception_:
                assert isinstance(elem, Exception_)
                number = elem.number
                flags = 0
                isa = prev.elem.isa if prev.elem is not None else Isa.A64
                svc = prev.kind == "range" and _is_svc(read, isa, prev.elem.end if prev.elem else 0)
                if (v3 and number == _V3_SVC) or (v4 and number == _V4_CALL and svc):
                    flags = _F_BRANCH | _F_CALL | _F_SYSCALLRET
                elif (v3 and number in _V3_ASYNC) or (v4 and number in _V4_ASYNC):
                    flags = _F_BRANCH | _F_CALL | _F_ASYNC | _F_INTERRUPT
                elif (v3 and number in _V3_SYNC) or (
                    v4 and (number in _V4_SYNC or number == _V4_CALL or 15 < number <= _V4_LAST)
                ):
                    flags = _F_BRANCH | _F_CALL | _F_INTERRUPT
                if prev.kind == "range":
                    prev.flags = flags
                    prev.taken = True
            elif kind is ExceptionRet:
                if prev.kind == "range":
                    prev.flags = _F_BRANCH | _F_RETURN | _F_INTERRUPT
                    prev.taken = True
            elif kind is NoSync or kind is TraceOn:
                if prev.kind == "range":
                    prev.flags |= _F_BRANCH | _F_TRACE_END
                    yield PerfBranch(prev.last(), 0, prev.flags)
                prev = _Packet("gap")
            self._prev = prev


# -- traces -----------------------------------------------------------------------------------


def image_resolver(trace: Trace) -> StaticResolver:
    """The binaries of ``trace``'s program images and memory dumps, where they are mapped.

    An ELF image is placed as code memory places it (at its link address, or
    moved so that its first loadable byte is at the image's base); each of its
    code segments is a mapping whose link addresses are the file's. A raw
    image or a memory dump is a binary whose addresses are the run-time ones.
    Images for one process (``Image.pid``) answer for that context ID only.
    A binary's path is the image's name when that is a path, else its file's.
    Files that cannot be read are left out (decoding reports them).
    """
    mappings: list[Mapping] = []
    per_context: list[tuple[int, Mapping]] = []
    for image in trace.images:
        if not image.file.exists():
            continue
        try:
            data = image.file.read()
        except CstraceError:
            continue
        # The path the input named (a recording's), else the file it was read from.
        name = image.name if "/" in image.name else image.file.name
        found: list[Mapping] = []
        if data[:4] == b"\x7fELF":
            try:
                elf = load_elf(data, image.file.name)
            except CstraceError:
                continue
            binary = Binary(name, image.uuid or elf.uuid, elf)
            delta = elf.load_offset(image.base)
            found = [
                Mapping(s.address + delta, s.address + delta + len(s.data), binary, delta)
                for s in elf.segments
            ]
        else:
            base = image.base or 0
            binary = Binary(name, image.uuid, reader=_bytes_reader(base, data))
            found = [Mapping(base, base + len(data), binary, 0)]
        if image.pid is not None:
            per_context.extend((image.pid, m) for m in found)
        else:
            mappings.extend(found)
    for dump in trace.dumps:
        if not dump.file.exists():
            continue
        size = dump.file.size()
        length = size - min(dump.offset, size) if dump.length is None else dump.length
        if length <= 0:
            continue
        reader = _dump_reader(dump.address, dump.offset, length, dump.file.read)
        binary = Binary(dump.file.name, reader=reader)
        mappings.append(Mapping(dump.address, dump.address + length, binary, 0))
    return StaticResolver(mappings, per_context)


def _bytes_reader(base: int, data: bytes) -> Callable[[int, int], bytes]:
    def read(address: int, size: int) -> bytes:
        off = address - base
        return data[off : off + size] if 0 <= off < len(data) else b""

    return read


def _dump_reader(
    address: int, offset: int, length: int, read_file: Callable[[int, int | None], bytes]
) -> Callable[[int, int], bytes]:
    def read(at: int, size: int) -> bytes:
        off = at - address
        if not 0 <= off < length:
            return b""
        return read_file(offset + off, min(size, length - off))

    return read


def resolver_for(trace: Trace) -> BinaryResolver:
    """The binary resolver of ``trace``: the input's own if it has one, else its images'."""
    return trace.binaries if trace.binaries is not None else image_resolver(trace)


def with_symdir(trace: Trace, symdir: str | Path | None) -> Trace:
    """``trace`` with each image whose file is missing replaced by the ELF file under ``symdir``
    (searched recursively) that has the build ID the image expects."""
    if symdir is None or not os.path.isdir(symdir):
        return trace
    from cstrace.inputs.files import PathBlob

    images: list[Image] = []
    changed = False
    for image in trace.images:
        if not image.file.exists() and image.uuid:
            found = find_by_build_id(symdir, image.uuid)
            if found is not None:
                images.append(replace(image, file=PathBlob(found)))
                changed = True
                continue
        images.append(image)
    return replace(trace, images=images) if changed else trace


def profile_trace(
    trace: Trace,
    options: DecodeOptions | None = None,
    buffers: Sequence[str] | None = None,
    resolver: BinaryResolver | None = None,
) -> Profile:
    """Decode ``trace`` (every buffer, or those named) in one session and count its profile."""
    session = Session(trace, options)
    counter = ProfileCounter(resolver if resolver is not None else resolver_for(trace))
    for run in session.runs(buffers):
        counter.feed(run.trace_id, run.elements(), run.buffer.time)
    return counter.profile()
