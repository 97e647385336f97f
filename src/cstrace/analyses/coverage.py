"""Code coverage from the trace alone: instructions, lines, functions and branches.

Input: the executed instructions of a decode (records with ``address``,
``size``, ``isa``, ``waypoint``, ``conditional`` and ``taken``: the
``Executed`` records of :mod:`cstrace.analyses.instructions`), a symbol table
(:class:`SymbolTable`: functions and the DWARF line table, as
:class:`cstrace.analyses.symbols.Symbols` gives them) and, optionally, a way
to read the program's code so that what never ran can be listed too. Output:
a :class:`Coverage`, per source file its lines (with execution counts and
the outcomes of their conditional branches) and per function its calls and
executed instructions; text is made by :mod:`cstrace.render.coverage`
(lcov, Cobertura XML, HTML, a table).

What the counts mean:

- an **instruction** is covered when the trace shows it executed; its count
  is how many times. A conditional non-branch instruction (A32 conditional
  execution, the instructions of a T32 IT block) counts as executed when the
  trace passes over it: ETMv4, ETE and PTM do not say whether its condition
  passed, so it is reported as reached, and it has no branch outcomes;
- a **line** (a line of the DWARF line table) has as count the largest count
  of its instructions, the number of times its most-run code ran (for a
  ``for`` line, its condition, not its once-run initialisation); a line whose
  code never ran has 0;
- a **function** (a symbol of the images) has as call count the number of
  times its entry instruction ran, or 1 when only later instructions did (the
  trace began inside it);
- a **conditional branch** (``B.cond``, ``CBZ``, ``TBNZ``, a conditional
  ``B``/``BX`` in A32 or T32) has two outcomes, *taken* and *not taken*, each
  counted: a range of executed instructions that ends on the branch says
  which (the trace's atom). A branch in code that never ran has no counts
  (``None``, lcov's ``-``).

With a code reader, every function of the images is walked (instruction
classification by :mod:`cstrace.isa`) so that instructions and conditional
branches that never ran are counted as well; without one only what ran is
known, plus the lines and functions of the symbol table.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cstrace.analyses.instructions import Executed
from cstrace.decode import Session, SourceRun
from cstrace.elements import InstrRange, InstrType, Isa, PEContext
from cstrace.isa.decode import decode, read_opcode
from cstrace.isa.types import IsaOptions
from cstrace.protocols import DecodeOptions
from cstrace.trace import Trace

__all__ = [
    "BranchCoverage",
    "CodeReader",
    "Coverage",
    "CoverageCounter",
    "FileCoverage",
    "FunctionCoverage",
    "FunctionInfo",
    "LineCoverage",
    "LineInfo",
    "SymbolTable",
    "Totals",
    "count_run",
    "coverage_of_trace",
    "static_instructions",
]

_BRANCHES = (InstrType.BR, InstrType.BR_INDIRECT)
_RangeKey = tuple[int | None, int | None, int, int, Isa, int, bool, bool]
"""A range as counted: context ID, VMID, start, end, ISA, size of the last instruction,
whether it is a conditional branch, whether it executed (was taken)."""


def _order(value: int | None) -> int:
    return -1 if value is None else value


_ISA_OPTIONS = IsaOptions()
_MAX_WALK = 1 << 20
"""The longest function walked for instructions that never ran, in bytes."""


class FunctionInfo(Protocol):
    """What coverage needs of a function symbol (``cstrace.analyses.symbols.Function``)."""

    @property
    def name(self) -> str:
        """The (demangled) name."""
        ...

    @property
    def start(self) -> int:
        """The first address (run-time)."""
        ...

    @property
    def end(self) -> int:
        """The address after the last byte."""
        ...

    @property
    def file(self) -> str | None:
        """The source file it is declared in, if DWARF says."""
        ...

    @property
    def line(self) -> int | None:
        """The line it is declared at, if DWARF says."""
        ...


class LineInfo(Protocol):
    """A source line (``cstrace.analyses.symbols.SourceLine``)."""

    @property
    def file(self) -> str:
        """The source file's path."""
        ...

    @property
    def line(self) -> int:
        """The line number, from 1."""
        ...


class SymbolTable(Protocol):
    """What coverage asks of symbols (``cstrace.analyses.symbols.Symbols``)."""

    def function(self, address: int, context_id: int | None = None) -> FunctionInfo | None:
        """The function holding ``address`` (in the process ``context_id`` names)."""
        ...

    def line(self, address: int, context_id: int | None = None) -> LineInfo | None:
        """The source line of the instruction at ``address`` (in the process ``context_id``
        names)."""
        ...

    def functions(self) -> Iterable[FunctionInfo]:
        """Every function."""
        ...

    def line_table(self) -> Mapping[Any, Sequence[int]]:
        """Every line with code (:class:`LineInfo` keys) and the addresses of its
        line-table rows."""
        ...


CodeReader = Callable[[int, int], bytes]
"""Reads up to ``size`` bytes of code at an address: ``read(address, size)``; empty where
nothing is mapped."""


@dataclass(frozen=True, slots=True)
class StaticInstruction:
    """One instruction found by walking a function's code."""

    address: int
    size: int
    conditional_branch: bool


def static_instructions(
    read: CodeReader, start: int, end: int, isa: Isa
) -> list[StaticInstruction]:
    """The instructions of ``[start, end)`` in instruction set ``isa``, walked in order.

    The walk stops where the code cannot be read or classified (an ISA with
    no instructions to classify, an unmapped address).
    """
    if isa not in (Isa.A64, Isa.A32, Isa.T32) or end <= start or end - start > _MAX_WALK:
        return []
    code = read(start, end - start)
    out: list[StaticInstruction] = []
    offset = 0
    padded = code + b"\0\0"  # a 16-bit T32 instruction at the end is read as 4 bytes
    in_it = 0  # instructions left in a T32 IT block: conditional whatever their encoding
    while offset < len(code):
        opcode = read_opcode(isa, padded, offset)
        if opcode is None:
            break
        info = decode(isa, start + offset, opcode, _ISA_OPTIONS)
        if offset + info.size > len(code):
            break
        conditional = info.is_cond or in_it > 0
        in_it = info.it_count if info.it_count else max(in_it - 1, 0)
        cond_branch = info.itype in _BRANCHES and conditional
        out.append(StaticInstruction(start + offset, info.size, cond_branch))
        offset += info.size
    return out


@dataclass(slots=True)
class BranchCoverage:
    """The outcomes of one conditional branch instruction."""

    address: int
    taken: int | None
    """Times the branch was taken; None when it never ran."""
    not_taken: int | None
    """Times it fell through; None when it never ran."""

    @property
    def outcomes_covered(self) -> int:
        """How many of its two outcomes happened (0, 1 or 2)."""
        return int(bool(self.taken)) + int(bool(self.not_taken))


@dataclass(slots=True)
class LineCoverage:
    """One source line with code."""

    file: str
    line: int
    hits: int = 0
    """The largest execution count of its instructions (0: none ran)."""
    instructions: int = 0
    """Instructions known to belong to the line (walked or executed)."""
    executed: int = 0
    """Of which the trace shows executed."""
    branches: list[BranchCoverage] = field(default_factory=list)
    """Its conditional branches, in address order."""


@dataclass(slots=True)
class FunctionCoverage:
    """One function of the images."""

    name: str
    start: int
    end: int
    file: str | None
    line: int | None
    calls: int = 0
    """Executions of its entry instruction (1 when only later instructions ran)."""
    instructions: int = 0
    """Instructions known in it (walked or executed)."""
    executed: int = 0
    """Of which executed at least once."""
    executions: int = 0
    """Instruction executions in it, in all."""
    lines: int = 0
    """Source lines with code in it."""
    lines_hit: int = 0
    """Of which executed."""
    branches: list[BranchCoverage] = field(default_factory=list)
    """Its conditional branches, in address order."""
    source_lines: list[int] = field(default_factory=list)
    """The numbers of its lines with code in :attr:`file`, in order."""

    @property
    def covered(self) -> bool:
        """Whether any of its instructions ran."""
        return self.executions > 0


@dataclass(slots=True)
class FileCoverage:
    """One source file: its lines with code and its functions."""

    path: str
    lines: dict[int, LineCoverage] = field(default_factory=dict)
    functions: list[FunctionCoverage] = field(default_factory=list)

    def sorted_lines(self) -> list[LineCoverage]:
        """The lines, in line order."""
        return [self.lines[n] for n in sorted(self.lines)]

    def branches(self) -> list[tuple[int, BranchCoverage]]:
        """``(line, branch)`` for every conditional branch of the file, in line order."""
        return [(ln.line, b) for ln in self.sorted_lines() for b in ln.branches]

    def totals(self) -> Totals:
        """Found/hit counts of this file."""
        return Totals.of(self.sorted_lines(), self.functions)


@dataclass(frozen=True, slots=True)
class Totals:
    """Found and hit counts of lines, functions, branch outcomes and instructions."""

    lines: int
    lines_hit: int
    functions: int
    functions_hit: int
    branches: int
    """Branch outcomes: two per conditional branch."""
    branches_hit: int
    instructions: int
    instructions_hit: int

    @staticmethod
    def of(lines: Iterable[LineCoverage], functions: Iterable[FunctionCoverage]) -> Totals:
        """The totals of ``lines`` and ``functions``."""
        ls = list(lines)
        fs = list(functions)
        branches = [b for ln in ls for b in ln.branches]
        return Totals(
            len(ls),
            sum(1 for ln in ls if ln.hits),
            len(fs),
            sum(1 for f in fs if f.covered),
            2 * len(branches),
            sum(b.outcomes_covered for b in branches),
            sum(f.instructions for f in fs),
            sum(f.executed for f in fs),
        )


@dataclass(slots=True)
class Coverage:
    """The coverage of a trace: per source file, and per function of the images."""

    files: dict[str, FileCoverage] = field(default_factory=dict)
    functions: list[FunctionCoverage] = field(default_factory=list)
    """Every function, with or without source, in address order."""
    unattributed: int = 0
    """Instruction executions at addresses no function symbol covers."""
    instructions: int = 0
    """Instruction executions in all."""

    def sorted_files(self) -> list[FileCoverage]:
        """The files, by path."""
        return [self.files[p] for p in sorted(self.files)]

    def totals(self) -> Totals:
        """Found/hit counts over every file (functions: every function, with source or not)."""
        return Totals.of(
            (ln for f in self.sorted_files() for ln in f.sorted_lines()), self.functions
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready summary: totals and per-function counts."""
        t = self.totals()
        return {
            "totals": {k: getattr(t, k) for k in Totals.__slots__},
            "instructions_executed": self.instructions,
            "unattributed": self.unattributed,
            "functions": [
                {
                    "name": f.name,
                    "start": f.start,
                    "file": f.file,
                    "line": f.line,
                    "calls": f.calls,
                    "instructions": f.instructions,
                    "executed": f.executed,
                    "executions": f.executions,
                }
                for f in self.functions
            ],
        }


class CoverageCounter:
    """Counts executed instructions and conditional branch outcomes, by run-time address.

    Feed it executed instructions (:meth:`add` or :meth:`feed`), then make a
    :class:`Coverage` with :meth:`coverage`.
    """

    def __init__(self) -> None:
        self.hits: Counter[int] = Counter()
        """Executions per instruction address."""
        self.sizes: dict[int, int] = {}
        """Size in bytes of each executed instruction."""
        self.isas: dict[int, Isa] = {}
        """Instruction set of each executed instruction."""
        self.taken: Counter[int] = Counter()
        """Taken outcomes per conditional branch address."""
        self.not_taken: Counter[int] = Counter()
        """Not-taken outcomes per conditional branch address."""
        self.contexts: dict[int, int] = {}
        """The context ID (the process) each instruction first ran in, where the trace
        says."""

    def add(
        self,
        address: int,
        size: int,
        isa: Isa,
        conditional_branch: bool = False,
        taken: bool | None = None,
        count: int = 1,
        context_id: int | None = None,
    ) -> None:
        """Count ``count`` executions of the instruction at ``address``.

        ``conditional_branch`` with ``taken`` True or False counts an outcome;
        ``taken`` None (not known) counts none. ``context_id`` names the
        process it ran in, when the trace says.
        """
        self.hits[address] += count
        if address not in self.sizes:
            self.sizes[address] = size
            self.isas[address] = isa
            if context_id is not None:
                self.contexts[address] = context_id
        if conditional_branch:
            if taken is True:
                self.taken[address] += count
            elif taken is False:
                self.not_taken[address] += count
            else:
                self.taken[address] += 0  # known as a conditional branch
                self.not_taken[address] += 0

    def feed(self, steps: Iterable[object]) -> None:
        """Count the :class:`~cstrace.analyses.instructions.Executed` records of ``steps``
        (the other steps, elements passed through, are skipped).

        The record of a range's last instruction says how it ended: a conditional
        branch (``waypoint`` a branch, ``conditional``) counts a taken outcome when
        ``taken``, a not-taken one when not.
        """
        add = self.add
        for r in steps:
            if type(r) is not Executed:
                continue
            assert isinstance(r, Executed)
            branch = r.conditional and r.waypoint in _BRANCHES
            add(r.address, r.size, r.isa, branch, r.taken if branch else None, 1, r.context_id)

    def feed_ranges(
        self,
        elements: Iterable[object],
        read: CodeReader,
        select: Callable[[int | None, int | None], None] | None = None,
    ) -> None:
        """Count the instructions of the ``INSTR_RANGE`` elements of ``elements``.

        The ranges are first counted as they are (start, end, ISA, how the last
        instruction ended and the context, from the ``PE_CONTEXT`` elements,
        they ran in), then each distinct one is walked once in the code
        ``read`` gives, after ``select(context_id, vmid)`` (a code memory's
        ``set_context``) has chosen the address space of its context: the cost
        per element is one dictionary update. The last instruction of a range
        that is a conditional branch counts a taken outcome when the range says
        it executed (an E atom) and a not-taken one otherwise (an N atom); it
        ran either way.
        """
        ranges: Counter[_RangeKey] = Counter()
        cid: int | None = None
        vmid: int | None = None
        for e in elements:
            kind = type(e)
            if kind is InstrRange:
                assert isinstance(e, InstrRange)
                branch = e.last_cond and e.last_type in _BRANCHES
                ranges[(cid, vmid, e.start, e.end, e.isa, e.last_size, branch, e.last_exec)] += 1
            elif kind is PEContext:
                assert isinstance(e, PEContext)
                if e.context.ctxt_id_valid:
                    cid = e.context.context_id
                if e.context.vmid_valid:
                    vmid = e.context.vmid
        walked: dict[tuple[int | None, int | None, int, int, Isa], list[StaticInstruction]] = {}
        selected: tuple[int | None, int | None] | None = None
        for key, n in sorted(ranges.items(), key=lambda kv: (_order(kv[0][0]), _order(kv[0][1]))):
            cid, vmid, start, end, isa, last_size, branch, last_exec = key
            where = (cid, vmid, start, end, isa)
            instrs = walked.get(where)
            if instrs is None:
                if select is not None and selected != (cid, vmid) and (cid, vmid) != (None, None):
                    select(cid, vmid)
                    selected = (cid, vmid)
                instrs = walked[where] = static_instructions(read, start, end, isa)
            last = end - last_size
            for ins in instrs:
                if ins.address == last:
                    self.add(last, last_size, isa, branch, last_exec if branch else None, n, cid)
                else:
                    self.add(ins.address, ins.size, isa, False, None, n, cid)

    @property
    def branch_addresses(self) -> set[int]:
        """Addresses of the conditional branches that ran."""
        return set(self.taken) | set(self.not_taken)

    def coverage(
        self,
        symbols: SymbolTable,
        read: CodeReader | None = None,
        default_isa: Isa | None = None,
    ) -> Coverage:
        """The coverage of what was counted, over ``symbols``.

        ``read`` reads the program's code so that each function is walked and
        its instructions and branches that never ran are known; the ISA of a
        function is that of its executed instructions, else ``default_isa``
        (else the most common executed ISA), and a function with neither is
        not walked.
        """
        return _Builder(self, symbols, read, default_isa).build()


class _Builder:
    """Puts a :class:`CoverageCounter` together with symbols and code into a :class:`Coverage`."""

    def __init__(
        self,
        counter: CoverageCounter,
        symbols: SymbolTable,
        read: CodeReader | None,
        default_isa: Isa | None,
    ) -> None:
        self.c = counter
        self.symbols = symbols
        self.read = read
        if default_isa is None and counter.isas:
            default_isa = Counter(counter.isas.values()).most_common(1)[0][0]
        self.default_isa = default_isa
        self.cov = Coverage()
        self.sizes: dict[int, int] = dict(counter.sizes)
        self.cond: set[int] = counter.branch_addresses
        self.sorted_hits = sorted(counter.hits)
        self.walked: dict[int, list[int]] = {}
        """The instruction addresses of each function, by its start."""

    def build(self) -> Coverage:
        cov = self.cov
        cov.instructions = sum(self.c.hits.values())
        for source_line in self.symbols.line_table():
            self._line(source_line.file, source_line.line)
        functions = sorted(self.symbols.functions(), key=lambda f: (f.start, f.name))
        addresses_in_functions: set[int] = set()
        for fn in functions:
            fc = self._function(fn)
            cov.functions.append(fc)
            addresses_in_functions.update(self._addresses(fn.start, fn.end))
            if fc.file is not None:
                self._file(fc.file).functions.append(fc)
        # Instructions of no walked function still count towards their lines.
        loose = set(self.c.hits) - addresses_in_functions
        cov.unattributed = sum(self.c.hits[a] for a in loose if self._function_of(a) is None)
        # Functions the symbol table finds only by context (a recording's processes' binaries)
        for address in sorted(loose):
            found = self._function_of(address)
            if found is not None and found.start not in self.walked:
                fc = self._function(found, walk=False)
                cov.functions.append(fc)
                if fc.file is not None:
                    self._file(fc.file).functions.append(fc)
        cov.functions.sort(key=lambda f: (f.start, f.name))
        done = {a for fc in cov.functions for a in self.walked.get(fc.start, ())}
        for address in sorted(loose - done):
            self._count_instruction(address, None)
        for fc in cov.functions:
            fc.branches.sort(key=lambda b: b.address)
        for f in cov.files.values():
            for ln in f.lines.values():
                ln.branches.sort(key=lambda b: b.address)
        return cov

    def _file(self, path: str) -> FileCoverage:
        f = self.cov.files.get(path)
        if f is None:
            f = self.cov.files[path] = FileCoverage(path)
        return f

    def _line(self, path: str, number: int) -> LineCoverage:
        f = self._file(path)
        ln = f.lines.get(number)
        if ln is None:
            ln = f.lines[number] = LineCoverage(path, number)
        return ln

    def _addresses(self, start: int, end: int) -> list[int]:
        return [a for a in self.walked.get(start, ()) if start <= a < end]

    def _function_of(self, address: int) -> FunctionInfo | None:
        ctx = self.c.contexts.get(address)
        if ctx is None:
            return self.symbols.function(address)
        return self.symbols.function(address, ctx)

    def _line_of(self, address: int) -> LineInfo | None:
        ctx = self.c.contexts.get(address)
        if ctx is None:
            return self.symbols.line(address)
        return self.symbols.line(address, ctx)

    def _function(self, fn: FunctionInfo, walk: bool = True) -> FunctionCoverage:
        hits = self.c.hits
        executed = self._executed_in(fn.start, fn.end)
        addresses = set(executed)
        isa = self.c.isas[executed[0]] if executed else self._isa_of(fn.start)
        if walk and self.read is not None and isa is not None:
            mapped = self._mapping(fn.start) is not None
            for ins in static_instructions(self.read, fn.start, fn.end, isa):
                if mapped and ins.address not in addresses and self._mapping(ins.address) is None:
                    continue  # data ($d mapping symbol: a literal pool), not an instruction
                addresses.add(ins.address)
                self.sizes.setdefault(ins.address, ins.size)
                if ins.conditional_branch:
                    self.cond.add(ins.address)
        ordered = sorted(addresses)
        self.walked[fn.start] = ordered
        file, line = fn.file, fn.line
        if file is None or line is None:
            where = self._line_of(fn.start)  # no DWARF entry: the line of its entry
            if where is not None:
                file, line = where.file, where.line
        fc = FunctionCoverage(fn.name, fn.start, fn.end, file, line)
        fc.instructions = len(ordered)
        fc.executed = len(executed)
        fc.executions = sum(hits[a] for a in executed)
        entry = hits.get(fn.start, 0)
        fc.calls = entry if entry else (1 if executed else 0)
        lines: set[tuple[str, int]] = set()
        hit_lines: set[tuple[str, int]] = set()
        for address in ordered:
            key = self._count_instruction(address, fc)
            if key is not None:
                lines.add(key)
                if hits.get(address):
                    hit_lines.add(key)
        fc.lines = len(lines)
        fc.lines_hit = len(hit_lines)
        fc.source_lines = sorted(n for f, n in lines if f == file)
        return fc

    def _mapping(self, address: int) -> Isa | None:
        """The ISA the ARM mapping symbols give ``address`` (None: data, or no mapping
        symbols, or a symbol table that does not say)."""
        ask = getattr(self.symbols, "isa", None)
        found = ask(address) if callable(ask) else None
        return found if isinstance(found, Isa) else None

    def _isa_of(self, address: int) -> Isa | None:
        """The ISA of code that never ran: the ARM mapping symbols' where the symbol table
        has them, else the default."""
        found = self._mapping(address)
        return self.default_isa if found is None else found  # Isa.A32 is 0: no `or`

    def _executed_in(self, start: int, end: int) -> list[int]:
        keys = self.sorted_hits
        return keys[bisect.bisect_left(keys, start) : bisect.bisect_left(keys, end)]

    def _count_instruction(
        self, address: int, fc: FunctionCoverage | None
    ) -> tuple[str, int] | None:
        """Add the instruction at ``address`` to its line (and branch); its line's key."""
        count = self.c.hits.get(address, 0)
        branch: BranchCoverage | None = None
        if address in self.cond:
            ran = count > 0
            branch = BranchCoverage(
                address,
                self.c.taken.get(address, 0) if ran else None,
                self.c.not_taken.get(address, 0) if ran else None,
            )
            if fc is not None:
                fc.branches.append(branch)
        where = self._line_of(address)
        if where is None:
            return None
        ln = self._line(where.file, where.line)
        ln.instructions += 1
        if count:
            ln.executed += 1
            ln.hits = max(ln.hits, count)
        if branch is not None:
            ln.branches.append(branch)
        return (where.file, where.line)


def count_run(counter: CoverageCounter, session: Session, run: SourceRun) -> CodeReader:
    """Count the executed instructions of one run of ``session`` into ``counter``; the
    reader of the code memory the run was decoded with (to walk what never ran)."""
    memory = session.memories.for_source(run.source, run.buffer.time)

    def read(address: int, size: int) -> bytes:
        return memory.read(address, size)

    counter.feed_ranges(run.elements(), read, memory.set_context)
    return read


def coverage_of_trace(
    trace: Trace,
    images: Sequence[str] = (),
    options: DecodeOptions | None = None,
) -> Coverage:
    """Decode every buffer of ``trace`` and return its coverage over the symbols of its
    ELF images and ``images`` (``FILE`` or ``FILE@BASE``).

    Problems met while decoding are in the session's issues, as for any
    decode; the command line prints them (``cstrace coverage``).
    """
    from cstrace.analyses.symbols import Symbols

    session = Session(trace, options)
    counter = CoverageCounter()
    read: CodeReader | None = None
    for run in session.runs():
        read = count_run(counter, session, run)
    return counter.coverage(Symbols.from_trace(trace, images), read)
