"""Following a classic ARM program through the code image: the PC and the open instruction range.

Input: the code memory of the traced core (:class:`~cstrace.memory.code.CodeMemory`:
``read(address, size)``, ``generation``) and what a trace decoder learns
(instructions executed in sequence, branches taken); output: ``INSTR_RANGE``
and ``ADDR_NACC`` elements. Shared by the XScale and ETMv2 decoders (the ETMv1
decoder keeps its own faster loop).

Classic cores are stepped one instruction at a time, not walked by blocks
(:mod:`cstrace.isa.blocks`): ARMv4T/v5 Thumb ``BL`` is two 16-bit
instructions with their own pipeline status, a Thumb instruction needs only
its 2 bytes, and the decoders need each load/store's data size
(:mod:`cstrace.protocols.etmv1.arm`).
"""

from __future__ import annotations

from collections.abc import Iterator

from cstrace.elements import AddrNacc, Element, InstrRange, Isa
from cstrace.memory.code import NO_MEMORY, CodeMemory
from cstrace.protocols.etmv1.arm import Step, step_arm, step_thumb

__all__ = ["Flow"]


class Flow:
    """Program-flow state: the PC, the open instruction range, the code cache."""

    def __init__(self, mem: CodeMemory | None) -> None:
        self.mem: CodeMemory = NO_MEMORY if mem is None else mem
        self.gen = self.mem.generation
        self.steps: dict[int, Step | None] = {}
        self.pc = 0
        self.thumb = False
        self.ok = False
        self.r_start = 0
        self.r_end = 0
        self.r_n = 0
        self.r_isa = Isa.A32
        self.r_last: Step | None = None
        self.r_exec = True

    def step(self) -> Step | None:
        """The instruction at the PC, or None when the image does not hold it."""
        mem = self.mem
        if mem.generation != self.gen:  # the memory changed (another context): read again
            self.gen = mem.generation
            self.steps.clear()
        key = (self.pc << 1) | self.thumb
        s = self.steps.get(key, False)
        if s is not False:
            return s  # type: ignore[return-value]
        s = None
        read = mem.read
        if self.thumb:
            b = read(self.pc, 2)
            if len(b) == 2:
                prev = read(self.pc - 2, 2) if self.pc >= 2 else b""
                s = step_thumb(
                    self.pc,
                    int.from_bytes(b, "little"),
                    int.from_bytes(prev, "little") if len(prev) == 2 else None,
                )
        else:
            b = read(self.pc, 4)
            if len(b) == 4:
                s = step_arm(self.pc, int.from_bytes(b, "little"))
        self.steps[key] = s
        return s

    def close(self, off: int) -> Iterator[Element]:
        """End the open instruction range."""
        s = self.r_last
        if self.r_n and s is not None:
            yield InstrRange(
                off, self.r_start, self.r_end, self.r_n, self.r_isa, self.r_exec, s.size, s.itype,
                s.subtype, s.cond,
            )  # fmt: skip
        self.r_n = 0
        self.r_last = None

    def run(self, n: int, off: int) -> Iterator[Element]:
        """Execute ``n`` sequential instructions from the PC.

        A branch among them was not taken (it would have changed the flow): it
        ends its range as an instruction that failed its condition.
        """
        for _ in range(n):
            s = self.step()
            if s is None:
                yield from self.close(off)
                yield AddrNacc(off, self.pc)
                self.ok = False
                return
            yield from self.add(s, off, not s.is_branch)
            if s.is_branch:
                yield from self.close(off)
            self.pc = (self.pc + s.size) & 0xFFFFFFFF

    def add(self, s: Step, off: int, executed: bool = True) -> Iterator[Element]:
        """Append the instruction at the PC (described by ``s``) to the open range."""
        isa = Isa.T32 if self.thumb else Isa.A32
        if self.r_n and (self.r_end != self.pc or self.r_isa != isa):
            yield from self.close(off)
        if not self.r_n:
            self.r_start = self.pc
            self.r_isa = isa
        self.r_n += 1
        self.r_end = self.pc + s.size
        self.r_last = s
        self.r_exec = executed
