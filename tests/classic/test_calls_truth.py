"""Exception handlers timed from classic trace: the emulator's interrupts, entry to return.

The ground-truth programs run with an IRQ every 97 instructions (and their
own SWIs and undefined instructions); the ETMv2 encoder traces them and the
decoder's elements go through :class:`~cstrace.analyses.calls.CallTracker`
with no symbols at all. Each exception number must be counted as often as the
emulator took it and seen returning every time, and the IRQ handler's
instructions, from the vector to its ``SUBS PC, LR, #4``, must be the
emulator's.
"""

from __future__ import annotations

from collections import Counter

import pytest

from cstrace.analyses.calls import CallTracker
from cstrace.capture.etmport import CycleStream, PortMode, pack_cycles
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv1.config import ClassicEtmConfig, etmcr
from cstrace.protocols.etmv1.encoder import ExecKind, HwModel
from cstrace.protocols.etmv2 import iter_elements, iter_packets
from cstrace.protocols.etmv2.encoder import encode_etmv2
from tests.classic.conftest import program_run
from tests.classic.programs import PROGRAMS
from tests.classic.truth import memory_of

NUMBERS = {0x04: 9, 0x08: 10, 0x18: 14}
"""ETMv2 exception numbers of the vectors: undefined instruction, SWI, IRQ."""
SUBS_PC_LR_4 = 0xE25EF004


class NoSymbols:
    """A program without symbols: every function is named after the address it was entered."""

    def function(self, address: int, context_id: int | None = None) -> None:
        return None

    def line(self, address: int, context_id: int | None = None) -> None:
        return None


@pytest.mark.parametrize(
    "program",
    [pytest.param(p, marks=() if p == "dispatch" else pytest.mark.slow) for p in sorted(PROGRAMS)],
)
def test_exceptions_are_counted_and_the_irq_handler_timed(program: str) -> None:
    r = program_run(program)
    cfg = ClassicEtmConfig(etmcr(width=8, mode=PortMode.NORMAL), 2, 1)
    cycles, _traced = encode_etmv2(r.execs, cfg, r.read, HwModel(fifo_depth=4096))
    stream = CycleStream("etm_etb", pack_cycles(cycles, "etm_etb", cfg.port))
    context = DecodeContext(0, DecodeOptions(), memory_of(r.image, r.base))
    tracker = CallTracker(NoSymbols())
    tracker.feed(0, iter_elements(iter_packets(stream, cfg), cfg, context))
    profile = tracker.profile()

    taken = Counter(
        NUMBERS[e.vector]
        for e in r.execs
        if e.vector is not None and (e.kind == ExecKind.INTERRUPT or e.kind == ExecKind.INSTR)
    )
    got = {n: e.count for n, e in profile.exceptions.items()}
    assert got == dict(taken)
    assert all(e.returned == e.count for e in profile.exceptions.values())

    # The IRQ handler: from the vector's instruction to SUBS PC, LR, #4.
    ret = r.base + r.image.index(SUBS_PC_LR_4.to_bytes(4, "little"))
    instructions = 0
    inside = False
    for e in r.execs:
        if e.kind == ExecKind.INTERRUPT and e.vector == 0x18:
            inside = True
        elif e.kind == ExecKind.INSTR and inside:
            instructions += 1
            inside = e.pc != ret
    irq = profile.exceptions[14]
    assert irq.count > 500
    assert irq.instructions == instructions
    assert irq.handlers == {"0x18"}  # named after the vector it entered at
