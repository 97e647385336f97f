"""What the viewer says about code: the instructions of an executed range, their
disassembly, and the functions and source lines they belong to.

Input: a trace source's code memory (:class:`~cstrace.memory.code.CodeMemory`)
and the trace's symbols (:class:`~cstrace.analyses.symbols.Symbols`, when the
images have them); output: :class:`Instr` records (address, size, opcode bytes,
text) for a range ``[start, end)`` of ``num_instr`` instructions of one ISA,
cached per range, since a trace runs the same few thousand ranges over and
over. Disassembly is capstone's (:class:`~cstrace.analyses.instructions.Disassembler`);
the instruction sizes of T32 come from the first halfword, as the architecture
defines them (Arm ARM A6.1: a halfword whose bits [15:11] are 0b11101, 0b11110
or 0b11111 starts a 32-bit instruction).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cstrace.elements import Isa
from cstrace.memory.code import CodeMemory

__all__ = ["CodeView", "Disassemble", "Instr", "instruction_sizes"]

Disassemble = Callable[[int, int, bytes], str]
"""The disassembler a :class:`CodeView` calls: ``(address, isa, opcode) -> text``."""

_CACHE_RANGES = 65536
"""How many expanded ranges a :class:`CodeView` keeps."""


@dataclass(frozen=True, slots=True)
class Instr:
    """One instruction of an executed range: its address, size and opcode bytes (empty
    when no image covers it)."""

    address: int
    size: int
    opcode: bytes


def instruction_sizes(code: bytes, isa: int, count: int) -> list[int]:
    """The sizes of the first ``count`` instructions of ``code`` (fewer when the bytes run
    out): 4 for A64 and A32, 2 or 4 for T32 by the first halfword."""
    if isa != Isa.T32:
        return [4] * min(count, len(code) // 4)
    sizes: list[int] = []
    pos = 0
    while len(sizes) < count and pos + 2 <= len(code):
        half = code[pos] | code[pos + 1] << 8
        size = 4 if (half >> 11) in (0b11101, 0b11110, 0b11111) else 2
        if pos + size > len(code):
            break
        sizes.append(size)
        pos += size
    return sizes


class CodeView:
    """The instructions, disassembly and symbols of the code one trace source ran."""

    def __init__(self, memory: CodeMemory, disassemble: Disassemble) -> None:
        self._memory = memory
        self._disassemble = disassemble
        self._lock = threading.Lock()
        self._context: int | None = None
        self._ranges: OrderedDict[tuple[int, int, int, int, int | None], tuple[Instr, ...]] = (
            OrderedDict()
        )
        self._text: dict[tuple[int, int, bytes], str] = {}

    def read(self, address: int, size: int, context: int | None = None) -> bytes:
        """Up to ``size`` bytes of code at ``address`` (fewer, or none, where no image
        covers it), in the address space of ``context`` (a context ID) when given."""
        out = b""
        with self._lock:
            if context is not None and context != self._context:
                self._memory.set_context(context)
                self._context = context
            while len(out) < size:
                got = self._memory.read(address + len(out), size - len(out))
                if not got:
                    break
                out += got
        return out

    def instructions(
        self, start: int, end: int, num_instr: int, isa: int, context: int | None = None
    ) -> tuple[Instr, ...]:
        """The ``num_instr`` instructions of the executed range ``[start, end)``.

        Without code for the range, A64 and A32 addresses still follow (4 bytes each,
        no opcode); a T32 range without code gives only its first instruction's address.
        """
        key = (start, end, num_instr, isa, context)
        with self._lock:
            got = self._ranges.get(key)
            if got is not None:
                self._ranges.move_to_end(key)
                return got
        code = self.read(start, max(end - start, 0), context)
        sizes = instruction_sizes(code, isa, num_instr)
        out: list[Instr] = []
        pos = 0
        for size in sizes:
            out.append(Instr(start + pos, size, code[pos : pos + size]))
            pos += size
        if len(out) < num_instr:
            step = 2 if isa == Isa.T32 else 4
            if isa != Isa.T32 or not out:
                addr = start + pos
                while len(out) < num_instr and (isa != Isa.T32 or not out):
                    out.append(Instr(addr, step, b""))
                    addr += step
        result = tuple(out)
        with self._lock:
            self._ranges[key] = result
            if len(self._ranges) > _CACHE_RANGES:
                self._ranges.popitem(last=False)
        return result

    def text(self, instr: Instr, isa: int) -> str:
        """The disassembly of ``instr`` (``(no code image)`` without its opcode)."""
        if not instr.opcode:
            return "(no code image)"
        key = (instr.address, isa, instr.opcode)
        got = self._text.get(key)
        if got is None:
            got = self._disassemble(instr.address, isa, instr.opcode)
            if len(self._text) > 1 << 20:
                self._text.clear()
            self._text[key] = got
        return got

    def function_instructions(
        self, start: int, end: int, isa: int, context: int | None = None
    ) -> Sequence[Instr]:
        """Every instruction of ``[start, end)`` (a function), as the code memory has it."""
        code = self.read(start, end - start, context)
        sizes = instruction_sizes(code, isa, len(code))
        out: list[Instr] = []
        pos = 0
        for size in sizes:
            out.append(Instr(start + pos, size, code[pos : pos + size]))
            pos += size
        return out
