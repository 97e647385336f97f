"""From decoded elements to the instructions executed, and their text.

Input: the runs of a :class:`~cstrace.decode.Session` (one trace source in one
buffer each) and the trace's code memory. Output, per run in trace order:

- :class:`Executed`, one per instruction of every ``INSTR_RANGE`` element:
  the instruction's address, size and opcode bytes (read from code memory by
  walking the range from its start: A64 and A32 instructions are 4 bytes, T32
  ones 2 or 4 as their first halfword says), and for the last instruction of
  the range how it ended (the waypoint kind, conditional, executed or taken)
  and its cycle count;
- :class:`Passed`, for every other element (exceptions, trace on and gaps,
  context changes, timestamps, software-trace messages...), unchanged;

both with who ran them (CPU, process, thread: :mod:`cstrace.execution`) and
the last timestamp seen. :func:`iter_executed` does this for a whole trace;
:class:`RunWalker` for one run, or for any element stream with a code memory.

The walker follows the trace's context and time with its own cursor over the
code memory (``set_context`` at each ``PE_CONTEXT``, ``advance`` at each
``TIMESTAMP``), so its view of memory is the one the elements were decoded
with even when the decoder has run ahead.

:class:`Disassembler` gives the text of an instruction with capstone (A64,
A32, T32). A T32 instruction inside an IT block shows its condition: the
disassembler keeps the IT state of the instructions it is given in execution
order, and lets capstone see an ``IT`` with that condition just before the
instruction (Arm ARM DDI 0406C A6.7.50, ``ITSTATE``: each instruction of the
block takes ``firstcond[3:1]`` and the next bit of the mask).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cstrace.decode import Session, SourceRun
from cstrace.elements import (
    Element,
    ExLevel,
    InstrRange,
    InstrType,
    Isa,
    MemSpace,
    PEContext,
    Timestamp,
    el_space,
)
from cstrace.execution import ContextTracker, tracker_for
from cstrace.isa.t32 import is_wide
from cstrace.memory.code import CodeMemory
from cstrace.protocols import DecodeOptions
from cstrace.trace import ExecContext, Trace

__all__ = ["Disassembler", "Executed", "Passed", "RunWalker", "Step", "iter_executed", "walk_run"]

_NO_CONTEXT = ExecContext()
_MAX_LAYOUTS = 1 << 16  # instruction ranges whose instructions are kept


@dataclass(slots=True)
class Executed:
    """One instruction executed (see the module doc).

    ``index`` is the index of its ``INSTR_RANGE`` element in the run;
    ``waypoint`` is the kind of the range's last instruction on that
    instruction (None on the others), with ``conditional`` and ``taken``
    (executed, for a conditional non-branch; taken, for a branch) from the
    element; ``opcode`` is empty when code memory does not hold the
    instruction. ``timestamp`` is the last timestamp of the run before it;
    ``cycles`` the range's cycle count, on its last instruction.
    """

    address: int
    size: int
    isa: Isa
    opcode: bytes
    trace_id: int
    index: int
    waypoint: InstrType | None = None
    conditional: bool = False
    taken: bool | None = None
    timestamp: int | None = None
    cycles: int | None = None
    cpu: int | None = None
    pid: int | None = None
    tid: int | None = None
    context_id: int | None = None

    @property
    def last(self) -> bool:
        """Whether the instruction ends its range."""
        return self.waypoint is not None


@dataclass(slots=True)
class Passed:
    """An element that is not an instruction range, passed through in its place."""

    element: Element
    trace_id: int
    index: int
    timestamp: int | None = None
    cpu: int | None = None
    pid: int | None = None
    tid: int | None = None
    context_id: int | None = None


Step = Executed | Passed
"""What the walk yields, in trace order."""


def _space(pe: PEContext) -> MemSpace:
    """The memory space of a context element (as the decoders select their code memory)."""
    ctx = pe.context
    if not ctx.el_valid or ctx.exception_level == ExLevel.UNKNOWN:
        return MemSpace.ANY
    return el_space(int(ctx.exception_level), ctx.security_level)


class RunWalker:
    """Turns the elements of one trace source into :data:`Step` records (module doc).

    ``memory`` is a code-memory cursor of its own (the walker drives its
    context and time); ``tracker`` says who ran (None: nobody known).
    """

    def __init__(
        self, trace_id: int, memory: CodeMemory, tracker: ContextTracker | None = None
    ) -> None:
        self.trace_id = trace_id
        self.memory = memory
        self.tracker = tracker
        self.space: MemSpace = MemSpace.ANY
        self.timestamp: int | None = None
        self.context_id: int | None = None
        self._layouts: dict[tuple[int, int, int, int, int, int], tuple[tuple[int, int, bytes], ...]]
        self._layouts = {}

    def walk(self, elements: Iterable[Element], first_index: int = 0) -> Iterator[Step]:
        """The steps of ``elements`` (numbered from ``first_index``), in order."""
        memory = self.memory
        update = self.tracker.update if self.tracker is not None else None
        trace_id = self.trace_id
        ctx = _NO_CONTEXT
        for index, elem in enumerate(elements, first_index):
            if update is not None:
                ctx = update(elem)
            kind = type(elem)
            if kind is InstrRange:
                assert isinstance(elem, InstrRange)
                yield from self._range(elem, index, ctx)
                continue
            if kind is PEContext:
                assert isinstance(elem, PEContext)
                info = elem.context
                if info.ctxt_id_valid or info.vmid_valid:
                    if info.ctxt_id_valid:
                        self.context_id = info.context_id
                    memory.set_context(
                        info.context_id if info.ctxt_id_valid else None,
                        info.vmid if info.vmid_valid else None,
                    )
                self.space = _space(elem)
            elif kind is Timestamp:
                assert isinstance(elem, Timestamp)
                self.timestamp = elem.timestamp
                memory.advance(elem.timestamp)
            yield Passed(
                elem, trace_id, index, self.timestamp, ctx.cpu, ctx.pid, ctx.tid, self.context_id
            )

    def _range(self, elem: InstrRange, index: int, ctx: ExecContext) -> Iterator[Executed]:
        key = (elem.start, elem.end, int(elem.isa), elem.last_size, int(self.space),
               self.memory.generation)  # fmt: skip
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= _MAX_LAYOUTS:
                self._layouts.clear()
            layout = self._layouts[key] = self._layout(elem)
        isa, trace_id = elem.isa, self.trace_id
        ts, cpu, pid, tid, cid = self.timestamp, ctx.cpu, ctx.pid, ctx.tid, self.context_id
        for address, size, opcode in layout[:-1]:
            yield Executed(
                address, size, isa, opcode, trace_id, index,
                None, False, None, ts, None, cpu, pid, tid, cid,
            )  # fmt: skip
        address, size, opcode = layout[-1]
        yield Executed(
            address, size, isa, opcode, trace_id, index,
            elem.last_type, elem.last_cond, elem.last_exec,
            ts, elem.cycle_count, cpu, pid, tid, cid,
        )  # fmt: skip

    def _layout(self, elem: InstrRange) -> tuple[tuple[int, int, bytes], ...]:
        """(address, size, opcode) of each instruction of a range, walked from its start."""
        start, end = elem.start, elem.end
        code = self._read(start, end - start)
        t32 = elem.isa == Isa.T32
        last_at = end - elem.last_size
        out: list[tuple[int, int, bytes]] = []
        address = start
        while True:
            off = address - start
            if address >= last_at:
                size = elem.last_size
            elif t32:
                if off + 2 <= len(code):
                    size = 4 if is_wide(int.from_bytes(code[off : off + 2], "little")) else 2
                else:
                    size = 2
            else:
                size = 4
            opcode = code[off : off + size]
            if len(opcode) < size:
                opcode = self._read(address, size)
                if len(opcode) < size:
                    opcode = b""
            out.append((address, size, opcode))
            address += size
            if address >= end:
                return tuple(out)

    def _read(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address``, across regions where a range spans two."""
        got = self.memory.read(address, size, self.space)
        while len(got) < size:
            more = self.memory.read(address + len(got), size - len(got), self.space)
            if not more:
                break
            got += more
        return got


def walk_run(session: Session, run: SourceRun) -> Iterator[Step]:
    """The steps of one run of ``session``, with a code-memory cursor of their own."""
    memory = session.memories.for_source(run.source, run.buffer.time)
    walker = RunWalker(run.trace_id, memory, tracker_for(session, run, count=False))
    return walker.walk(run.elements())


def iter_executed(
    trace: Trace,
    buffers: Sequence[str] | None = None,
    options: DecodeOptions | None = None,
    session: Session | None = None,
) -> Iterator[Step]:
    """Decode ``trace`` (every buffer, or those named, in order) and yield its steps: each
    trace ID's in trace order, one source after another (as :func:`cstrace.iter_elements`)."""
    if session is None:
        session = Session(trace, options)
    for run in session.runs(buffers):
        yield from walk_run(session, run)


# -- disassembly ----------------------------------------------------------------------------

_IT_AL = 0xE


def _capstone(isa: Isa) -> Any:
    import capstone

    if isa == Isa.A64:
        arch = getattr(capstone, "CS_ARCH_ARM64", None)
        if arch is None:  # capstone 6 renamed it
            arch = capstone.CS_ARCH_AARCH64
        return capstone.Cs(arch, capstone.CS_MODE_ARM)
    mode = capstone.CS_MODE_THUMB if isa == Isa.T32 else capstone.CS_MODE_ARM
    return capstone.Cs(capstone.CS_ARCH_ARM, mode)


class Disassembler:
    """Instruction text from capstone, cached (see the module doc for IT blocks).

    :meth:`text` is meant to be called for instructions in the order they were
    executed: a T32 ``IT`` instruction sets the conditions of the instructions
    at the addresses that follow it, which are then shown with their
    condition; a call for any other address ends the block.
    """

    def __init__(self) -> None:
        self._cs: dict[Isa, Any] = {}
        self._plain: dict[tuple[int, bytes, int], str] = {}
        self._placed: dict[tuple[int, bytes, int, int], str] = {}
        self._it: list[int] = []  # conditions still to come in the IT block
        self._it_next = -1  # the address the block's next instruction must be at

    def _engine(self, isa: Isa) -> Any:
        cs = self._cs.get(isa)
        if cs is None:
            cs = self._cs[isa] = _capstone(isa)
        return cs

    def _raw(self, isa: Isa, code: bytes, address: int, skip: int) -> str | None:
        """The text of the instruction at ``code[skip:]`` (capstone sees ``code`` from
        ``address - skip``); None when it is not an instruction capstone knows."""
        cs = self._engine(isa)
        for insn in cs.disasm(code, address - skip):
            if insn.address == address:
                text: str = insn.mnemonic
                return f"{text} {insn.op_str}" if insn.op_str else text
        return None

    def text(self, address: int, isa: Isa, opcode: bytes) -> str:
        """The text of the instruction ``opcode`` (its bytes, in memory order) at ``address``."""
        cond = -1
        if isa == Isa.T32:
            if self._it and address == self._it_next:
                cond = self._it.pop(0)
                self._it_next = address + len(opcode)
            else:
                self._it = []
            if len(opcode) == 2 and opcode[1] == 0xBF and opcode[0] & 0xF:
                self._start_it(opcode[0], address + 2)
        if not opcode:
            return "<not readable>"
        if isa not in (Isa.A64, Isa.A32, Isa.T32):
            return f"<{isa.name} code>"
        key = (int(isa), opcode, cond)
        got = self._plain.get(key)
        if got is not None:
            return got
        pkey = (int(isa), opcode, cond, address)
        got = self._placed.get(pkey)
        if got is not None:
            return got
        got = self._make(address, isa, opcode, cond)
        # The same text one page on: the text does not depend on the address (no PC-relative
        # operand), and serves every address.
        if self._make(address + 0x1000, isa, opcode, cond) == got:
            self._plain[key] = got
        else:
            if len(self._placed) >= 1 << 20:
                self._placed.clear()
            self._placed[pkey] = got
        return got

    def _make(self, address: int, isa: Isa, opcode: bytes, cond: int) -> str:
        if cond >= 0:
            it = bytes((0x08 | (cond << 4), 0xBF))  # IT <cond>: the condition of one instruction
            got = self._raw(isa, it + opcode, address, 2)
        else:
            got = self._raw(isa, opcode, address, 0)
        if got is None:
            value = int.from_bytes(opcode, "little")
            if isa == Isa.T32 and len(opcode) == 4:
                value = (value & 0xFFFF) << 16 | value >> 16
            width = 2 * len(opcode)
            return f".inst 0x{value:0{width}x}"
        return got

    def _start_it(self, low: int, after: int) -> None:
        """An IT instruction (``0xBFxy``, ``low`` = ``xy``): the conditions of its block."""
        first, mask = low >> 4, low & 0xF
        count = 4 - ((mask & -mask).bit_length() - 1)
        conds = [first]
        for i in range(1, count):
            bit = (mask >> (4 - i)) & 1
            conds.append(first if first == _IT_AL else (first & 0xE) | bit)
        self._it = conds
        self._it_next = after
