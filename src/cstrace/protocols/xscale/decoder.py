"""XScale decoder: trace buffer messages + code image → generic trace elements.

Input: :class:`~cstrace.protocols.xscale.packets.Message` and
:class:`~cstrace.protocols.xscale.packets.FillEnd` packets, the configuration
and the traced core's memory. Output: ``NO_SYNC``, ``TRACE_ON``,
``PE_CONTEXT``, ``INSTR_RANGE``, ``EXCEPTION``, ``ADDR_NACC`` and ``EO_TRACE``
elements.

Reconstruction (thesis ``seeds/004`` §7.2-7.3): the count of a message is the
number of instructions executed since the previous message, not counting the
instruction the message is about; a roll-over stands for sixteen instructions;
a direct branch message adds the branch, whose target is read from the image;
an indirect branch message adds the branch, whose target is the address
recorded before it (bit 0 set: Thumb state); an exception message for the
undefined-instruction, SWI or prefetch-abort vector adds the instruction that
raised it, the others (reset, data abort, IRQ, FIQ) add none. Where the start
address is unknown (a wrapped buffer), decoding starts at the first indirect
branch with a whole address, or at a checkpointed branch, whose target is in a
checkpoint register (with two checkpointed messages in the buffer the older
one's is in CHKPT1, the newer one's in CHKPT0). At the end of a fill the core
entered debug state at the recorded PC: the instructions from the last
message up to it executed too, and the next fill continues from there.
Exception numbers follow the ETMv3 encoding (reset 8, undefined 9, SVC 10,
prefetch abort 11, data abort 12, IRQ 14, FIQ 15).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from cstrace.elements import (
    AddrNacc,
    Element,
    EoTrace,
    Exception_,
    Isa,
    NoSync,
    PEContext,
    PEContextInfo,
    TraceOn,
    TraceOnReason,
    UnsyncReason,
)
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.etmv1.flow import Flow
from cstrace.protocols.xscale.config import XscaleConfig
from cstrace.protocols.xscale.packets import FillEnd, Message, MsgKind

__all__ = ["EXCEPTION_NUMBERS", "iter_elements"]

# Vector number (VVV) → (exception number, the raising instruction is implied by the message).
EXCEPTION_NUMBERS: dict[int, tuple[int, bool]] = {
    0: (8, False),
    1: (9, True),
    2: (10, True),
    3: (11, True),
    4: (12, False),
    5: (0, False),
    6: (14, False),
    7: (15, False),
}

_CHKPT = (MsgKind.DIRECT_CHKPT, MsgKind.INDIRECT_CHKPT)


def iter_elements(
    packets: Iterable[Packet], config: XscaleConfig, context: DecodeContext
) -> Iterator[Element]:
    """Decode XScale trace buffer messages into generic elements."""
    f = Flow(context.memory)
    yield NoSync(0, UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER)
    vbase = 0xFFFF0000 if config.high_vectors else 0

    def start(pc: int, off: int) -> Iterator[Element]:
        f.pc = pc & ~1
        f.thumb = bool(pc & 1)
        f.ok = True
        yield TraceOn(off, TraceOnReason.NORMAL)
        yield PEContext(off, PEContextInfo(), Isa.T32 if f.thumb else Isa.A32)

    if config.start_pc is not None:
        yield from start(config.start_pc, 0)
    # One fill is buffered so that checkpointed messages meet their registers.
    buf: list[Packet] = []
    last_off = 0
    for p in packets:
        buf.append(p)
        if isinstance(p, FillEnd):
            yield from _decode_fill(buf, f, vbase, start)
            last_off = p.offset
            buf = []
    if buf:
        yield from _decode_fill(buf, f, vbase, start)
        last_off = buf[-1].offset
    yield from f.close(last_off)
    if context.complete:
        yield EoTrace(last_off)


def _decode_fill(
    buf: list[Packet],
    f: Flow,
    vbase: int,
    start_cb: Callable[[int, int], Iterator[Element]],
) -> Iterator[Element]:
    """Decode the messages of one buffer fill (ending with its FillEnd, if any)."""
    end = buf[-1] if buf and isinstance(buf[-1], FillEnd) else None
    nck = sum(1 for p in buf if isinstance(p, Message) and p.kind in _CHKPT)
    k = 0
    for p in buf:
        if not isinstance(p, Message):
            continue
        off = p.offset
        kind = p.kind
        chk: int | None = None
        if kind in _CHKPT:
            if end is not None and nck >= 1:
                if k == nck - 1:
                    chk = end.chkpt0
                elif k == nck - 2:
                    chk = end.chkpt1
            k += 1
        if not f.ok:
            # Not synchronised: an indirect target or a checkpoint gives the next PC.
            target = None
            if kind in (MsgKind.INDIRECT, MsgKind.INDIRECT_CHKPT):
                target = p.target
            if target is None and chk is not None:
                target = chk
            if target is not None:
                yield from start_cb(target, off)
            continue
        if kind == MsgKind.ROLLOVER:
            yield from f.run(16, off)
            continue
        if kind == MsgKind.RESERVED:
            yield from f.close(off)
            yield NoSync(off, UnsyncReason.BAD_PACKET)
            f.ok = False
            continue
        yield from f.run(p.count, off)
        if not f.ok:
            continue
        if kind == MsgKind.EXCEPTION:
            number, implied = EXCEPTION_NUMBERS[p.vector >> 2]
            ret: int | None = f.pc
            if implied:
                s = f.step()
                if s is None:
                    yield from f.close(off)
                    yield AddrNacc(off, f.pc)
                    ret = None
                else:
                    yield from f.add(s, off)
                    ret = (f.pc + s.size) & 0xFFFFFFFF if number in (9, 10) else f.pc
            yield from f.close(off)
            yield Exception_(off, number, ret)
            f.pc = vbase + p.vector
            f.thumb = False
            continue
        s = f.step()
        if s is None:
            yield from f.close(off)
            yield AddrNacc(off, f.pc)
            f.ok = False
            continue
        yield from f.add(s, off)
        yield from f.close(off)
        if kind in (MsgKind.DIRECT, MsgKind.DIRECT_CHKPT):
            if s.target is not None:
                f.pc, f.thumb = s.target, s.target_thumb
            elif chk is not None:
                f.pc, f.thumb = chk & ~1, bool(chk & 1)
            else:
                f.ok = False
        else:
            target = p.target if p.target is not None else chk
            if target is None:
                f.ok = False
            else:
                f.pc, f.thumb = target & ~1, bool(target & 1)
    if end is not None:
        if f.ok:
            last = end.last_pc & ~1
            gap = (last - f.pc) // (2 if f.thumb else 4)
            if 0 <= gap <= 16:
                yield from f.run(gap, end.offset)
            else:
                yield from f.close(end.offset)
                f.ok = False
        if not f.ok:
            yield from start_cb(end.last_pc, end.offset)
        else:
            f.pc, f.thumb = end.last_pc & ~1, bool(end.last_pc & 1)
