"""Compare decoded elements with what the emulator says executed."""

from __future__ import annotations

from collections.abc import Iterable

from cstrace.elements import Element, Exception_, InstrRange, Isa, MemSpace
from cstrace.memory import MemoryMap
from cstrace.memory.image import MemoryRegion
from cstrace.protocols.etmv1.encoder import Exec, ExecKind


def memory_of(image: bytes, base: int) -> MemoryMap:
    """A memory map holding the program image."""
    return MemoryMap([MemoryRegion(base, image, MemSpace.ANY, "program")])


def expected(execs: list[Exec], traced: list[bool]) -> list[tuple[int, bool]]:
    """(address, thumb) of every traced instruction, in order."""
    return [
        (e.pc, e.thumb)
        for e, t in zip(execs, traced, strict=True)
        if t and e.kind == ExecKind.INSTR
    ]


def decoded(elements: Iterable[Element]) -> tuple[list[tuple[int, bool]], list[Exception_]]:
    """(address, thumb) of every instruction the elements say executed, and the exceptions."""
    out: list[tuple[int, bool]] = []
    exc: list[Exception_] = []
    for el in elements:
        if isinstance(el, InstrRange):
            step = 2 if el.isa == Isa.T32 else 4
            thumb = el.isa == Isa.T32
            out.extend((el.start + k * step, thumb) for k in range(el.num_instr))
            assert el.start + el.num_instr * step == el.end, el
        elif isinstance(el, Exception_):
            exc.append(el)
    return out, exc
