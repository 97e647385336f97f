"""XScale encoder: an executed instruction sequence → trace buffer fills.

Input: :class:`~cstrace.protocols.etmv1.encoder.Exec` records, a function
reading the program image, and the buffer mode: ``fill`` (fill-once, the core
stopping in debug state whenever the buffer is full and resuming, as OpenOCD's
"fill n times") or ``wrap`` (wrap-around: only the newest 256 entries remain).
Output: an ``xscale_tb`` capture (see :mod:`cstrace.protocols.xscale.reader`)
and the address where tracing started.

The messages follow the thesis ``seeds/004`` table 7.1 and the counting rules
of :mod:`cstrace.protocols.xscale.decoder`. The first branch message written in
each half of the buffer is checkpointed: its target goes to CHKPT0 and the
previous CHKPT0 to CHKPT1 (cstrace's model of the checkpoint placement "about
half the buffer apart").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cstrace.protocols.etmv1.encoder import Exec, ExecKind, step_of
from cstrace.protocols.xscale.reader import ENTRIES

__all__ = ["encode_xscale"]


def encode_xscale(
    execs: list[Exec], read: Callable[[int, int], bytes], mode: str = "fill"
) -> tuple[bytes, int]:
    """The ``xscale_tb`` capture of ``execs`` and the start PC (bit 0: Thumb)."""
    fills: list[tuple[list[int], int, int, int]] = []
    cur: list[int] = []  # entries of the current fill (or every entry, in wrap mode)
    chk = [0, 0]
    half = [-1]
    count = 0
    first = next((e for e in execs if e.kind != ExecKind.CONTEXT), None)
    start = 0 if first is None else (first.pc | int(first.thumb))

    def emit(body: list[int], head: int, pc_here: int, target: int | None = None) -> None:
        """Write a message: ``body`` (an address) then ``head | count``.

        Branch messages (``target`` given) are checkpointed when they are the
        first written in a half of the buffer. When the message does not fit in
        a fill-once buffer, the core stops at ``pc_here`` and a new fill starts
        (the instructions counted so far lie between the last message and it).
        """
        nonlocal cur, count
        if mode == "fill" and len(cur) + len(body) + 1 > ENTRIES:
            fills.append((cur, chk[0], chk[1], pc_here))
            cur = []
            half[0] = -1
            count = 0
            if head == 0xFF:
                return  # the sixteen instructions are the gap before the debug entry
        if target is not None:
            h = (len(cur) + len(body)) // (ENTRIES // 2)
            if h != half[0]:
                half[0] = h
                chk[1] = chk[0]
                chk[0] = target
                head |= 0x40
        cur.extend(body)
        cur.append(head | (0 if head == 0xFF else count))
        count = 0

    for e in execs:
        if e.kind == ExecKind.CONTEXT:
            continue
        here = e.pc | int(e.thumb)
        if e.kind == ExecKind.INTERRUPT:
            emit([], (e.vector or 0) >> 2 << 4, here)
            continue
        s = step_of(read, e.pc, e.thumb)
        if e.vector is not None:
            emit([], e.vector >> 2 << 4, here)
            continue
        fall = (e.pc + s.size) & 0xFFFFFFFF
        if e.executed and e.next_pc != fall:
            target = e.next_pc | int(e.next_thumb)
            if s.target is not None:
                emit([], 0x80, here, target)
            else:
                emit(list(target.to_bytes(4, "big")), 0x90, here, target)
        else:
            count += 1
            if count == 16:
                emit([], 0xFF, fall | int(e.thumb))
    last = execs[-1] if execs else None
    final = 0 if last is None else (last.next_pc | int(last.next_thumb))
    if mode == "fill":
        fills.append((cur, chk[0], chk[1], final))
    else:
        fills.append((cur[-ENTRIES:], chk[0], chk[1], final))
    words: list[int] = []
    for entries, c0, c1, pc in fills:
        pad = [0] * (ENTRIES - len(entries))
        words += pad + entries + [c0, c1, pc]
    return np.array(words, dtype="<u4").tobytes(), start
