"""ETMv1 encoder: an executed instruction sequence → the trace-port cycles an ETMv1 outputs.

Input: a list of :class:`Exec` records (what a core executed: each instruction
with its condition result, where execution went next, its data accesses and
exceptions; interrupts; context ID changes), the ETM configuration and
hardware parameters (:class:`HwModel`: FIFO depth, synchronisation period,
wait states, trigger). Output: cycle words for
:func:`cstrace.capture.etmport.pack_cycles`, and which records were traced.

This is the inverse of :mod:`cstrace.protocols.etmv1.decoder` and models the
hardware rules it relies on (ARM IHI 0014Q chapter 5; thesis ``seeds/004``
§8.5): PIPESTAT per cycle, a FIFO drained onto TRACEPKT (a byte per cycle on
8-bit ports, two on 16-bit ports unless a wait cycle would carry only one, half
a byte on 4-bit ports), trace packets of an instruction placed in the FIFO in
the cycle after the previous instruction's PIPESTAT, branch addresses in the
branch's own cycle with TRACESYNC on their first cycle, address packet offsets
in the two cycles after each branch, compressed branch and data addresses,
five-packet addresses with reason codes at trace start (tracing enabled), after
a FIFO overflow (restart) and periodically (synchronisation), context IDs after
them, a trigger cycle that delays the FIFO output by one cycle.

Choices where the specification leaves the implementation free (documented in
``docs/classic.md``): a context ID change makes the next branch output a full
address with the periodic-synchronisation reason; when no indirect branch comes
within half a period after synchronisation is due, the next executed
instruction is traced as a branch to the following instruction with a full
address.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cstrace.capture.etmport import SYNC
from cstrace.protocols.etmv1.arm import Step, step_arm, step_thumb
from cstrace.protocols.etmv1.config import ClassicEtmConfig

__all__ = ["Exec", "ExecKind", "HwModel", "encode_etmv1", "step_of"]


class ExecKind:
    """Kinds of :class:`Exec` records."""

    INSTR = 0
    """An instruction reached execute (``executed`` tells the condition result)."""
    INTERRUPT = 1
    """An interrupt or reset was taken before the next instruction (``vector``)."""
    CONTEXT = 2
    """The context ID changed to ``value``."""


class Exec:
    """One record of an executed program (from an emulator, or made by hand)."""

    __slots__ = (
        "data",
        "executed",
        "kind",
        "next_pc",
        "next_thumb",
        "pc",
        "thumb",
        "value",
        "vector",
    )

    def __init__(
        self,
        kind: int,
        pc: int = 0,
        thumb: bool = False,
        executed: bool = True,
        next_pc: int = 0,
        next_thumb: bool = False,
        data: tuple[tuple[int, bytes], ...] = (),
        vector: int | None = None,
        value: int = 0,
    ) -> None:
        self.kind = kind
        self.pc = pc
        self.thumb = thumb
        self.executed = executed
        self.next_pc = next_pc
        """Address of the next instruction executed (after a branch or exception)."""
        self.next_thumb = next_thumb
        self.data = data
        """Data accesses in order: (address, bytes moved)."""
        self.vector = vector
        """For an instruction: the exception vector it raised (SWI, undefined, abort)."""
        self.value = value

    def __repr__(self) -> str:
        return (
            f"Exec(kind={self.kind}, pc={self.pc:#x}, thumb={self.thumb}, "
            f"executed={self.executed}, next={self.next_pc:#x}, vector={self.vector})"
        )


@dataclass
class HwModel:
    """Parameters of the modelled ETM and core."""

    fifo_depth: int = 64
    """FIFO capacity in bytes; packets that do not fit overflow it."""
    sync_period: int = 1024
    """Cycles between periodic full addresses (IHI 0014Q §5.6.2)."""
    seed: int = 1
    """Seed of the wait-state generator."""
    max_wait: int = 2
    """Up to this many wait cycles before an instruction (loads/stores get more)."""
    long_stall_every: int = 0
    """If non-zero, about one instruction in this many stalls 20-80 cycles."""
    trigger_cycle: int | None = None
    """Cycle that outputs the trigger (TR) status, if any."""
    load_miss_every: int = 0
    """ETMv2 with data values traced: if non-zero, about one single load in this many
    misses in the data cache, its value output later as a Load Miss data packet."""
    load_miss_delay: int = 6
    """ETMv2: a missed load's value comes 1 to this many traced instructions later."""


def step_of(read: Callable[[int, int], bytes], pc: int, thumb: bool) -> Step:
    """The :class:`Step` of the instruction at ``pc`` read through ``read(address, size)``."""
    if thumb:
        hw = int.from_bytes(read(pc, 2), "little")
        prev = read(pc - 2, 2) if pc >= 2 else b""
        return step_thumb(pc, hw, int.from_bytes(prev, "little") if len(prev) == 2 else None)
    return step_arm(pc, int.from_bytes(read(pc, 4), "little"))


def _addr_packets(value: int, n: int, tail: int = 0) -> list[int]:
    out = []
    for k in range(n):
        if k < 4:
            b = (value >> (7 * k)) & 0x7F
            if k < n - 1:
                b |= 0x80
        else:
            b = ((value >> 28) & 0xF) | tail
        out.append(b)
    return out


def _packets_needed(value: int, prev: int) -> int:
    for n in range(1, 5):
        if (value >> (7 * n)) == (prev >> (7 * n)):
            return n
    return 5


_IE, _ID, _IN, _WT, _BE, _BD, _TR, _TD = range(8)
_APO = 8  # internal marker: an address-packet-offset cycle


def encode_etmv1(
    execs: list[Exec],
    cfg: ClassicEtmConfig,
    read: Callable[[int, int], bytes],
    hw: HwModel | None = None,
) -> tuple[list[int], list[bool]]:
    """The cycles an ETMv1 outputs for ``execs``, and for each record whether it was traced.

    ``read(address, size)`` reads the program image (to classify instructions).
    """
    hw = hw or HwModel()
    rng = random.Random(hw.seed)
    width = cfg.port.width
    ctx_bytes = cfg.ctxid_bytes
    ps: list[int] = []  # status per cycle (_APO for APO cycles)
    push: list[list[tuple[int, bool]]] = []  # packets placed in the FIFO in each cycle
    branches: list[tuple[int, int]] = []  # (cycle of BE/BD, index of its first packet)
    traced = [False] * len(execs)
    npk = 0  # packets pushed so far
    last_baddr = 0
    last_daddr = 0
    daddr_full = True
    ctxid = 0
    ctx_pending = False
    since_sync = 0
    sync_due = False
    sync_force_at = 0
    overflow = False
    restart_reason = 1  # the next traced instruction starts with a full address
    fifo_level = 0  # estimate of bytes in the FIFO, drained at the port rate
    drain_rate = {4: 0.5, 8: 1.0, 16: 2.0}[width]

    def new_cycle(status: int) -> int:
        nonlocal fifo_level
        ps.append(status)
        push.append([])
        fifo_level = max(0.0, fifo_level - drain_rate)  # type: ignore[assignment]
        return len(ps) - 1

    def add_packets(t: int, pk: list[tuple[int, bool]]) -> bool:
        nonlocal npk, fifo_level
        if fifo_level + len(pk) > hw.fifo_depth:
            return False
        push[t].extend(pk)
        npk += len(pk)
        fifo_level += len(pk)
        return True

    def branch_packets(addr_value: int, full: bool, reason: int) -> list[tuple[int, bool]]:
        nonlocal last_baddr
        n = 5 if full else _packets_needed(addr_value, last_baddr)
        tail = (reason << 4) if n == 5 else 0
        bytes_ = _addr_packets(addr_value, n, tail)
        if n == 5 and reason != 0 and ctx_bytes:
            bytes_ += [(ctxid >> (8 * j)) & 0xFF for j in range(ctx_bytes)]
        last_baddr = addr_value
        return [(b, k == 0) for k, b in enumerate(bytes_)]

    def data_packets(e: Exec, s: Step) -> list[tuple[int, bool]]:
        nonlocal last_daddr, daddr_full
        out: list[int] = []
        if cfg.data_addr and e.data:
            a = e.data[0][0]
            n = 5 if daddr_full else _packets_needed(a, last_daddr)
            out += _addr_packets(a, n)
            last_daddr = a
            daddr_full = False
        if cfg.data_value:
            for _a, v in e.data:
                out += list(v)
        return [(b, False) for b in out]

    def traced_data(e: Exec, s: Step) -> bool:
        return (cfg.data_addr or cfg.data_value) and bool(e.data) and s.xfer > 0

    def emit_branch(
        status: int, value: int, full: bool, reason: int, data_first: list[tuple[int, bool]] | None
    ) -> bool:
        """A BE/BD cycle with its address and the two APO cycles; False on overflow."""
        t = new_cycle(status)
        pk = branch_packets(value, full, reason)
        start = npk
        if not add_packets(t, pk):
            ps[t] = _WT
            return False
        branches.append((t, start))
        new_cycle(_APO)
        new_cycle(_APO)
        return True

    def full_start(e_pc: int, e_thumb: bool, reason: int) -> bool:
        nonlocal daddr_full, since_sync, sync_due, ctx_pending
        value = e_pc | 1 if e_thumb else e_pc
        if not emit_branch(_BE, value, True, reason, None):
            return False
        daddr_full = True
        since_sync = 0
        sync_due = False
        ctx_pending = False
        return True

    for idx, e in enumerate(execs):
        if e.kind == ExecKind.CONTEXT:
            ctxid = e.value
            if ctx_bytes:
                ctx_pending = True
            continue
        # Wait states before the record.
        waits = rng.randint(0, hw.max_wait)
        if hw.long_stall_every and rng.randrange(hw.long_stall_every) == 0:
            waits += rng.randint(20, 80)
        if e.kind == ExecKind.INSTR:
            s = step_of(read, e.pc, e.thumb)
            if s.xfer:
                waits += rng.randint(0, 2)
        else:
            s = None
        first_t = len(ps)
        for _ in range(waits):
            new_cycle(_WT)
        since_sync += len(ps) - first_t
        if overflow:
            # Untraced until the FIFO has drained; then trace restarts with a
            # full address and the overflow reason (IHI 0014Q §5.8).
            new_cycle(_WT)
            if fifo_level <= 0:
                overflow = False
                restart_reason = 2
            continue
        if restart_reason:
            if not full_start(e.pc, e.thumb, restart_reason):
                overflow = True
                continue
            restart_reason = 0
        if sync_due is False and since_sync >= hw.sync_period:
            sync_due = True
            sync_force_at = since_sync + hw.sync_period // 2
        if e.kind == ExecKind.INTERRUPT:
            assert e.vector is not None
            if not emit_branch(_BE, e.vector, False, 0, None):
                overflow = True
                continue
            traced[idx] = True
            since_sync += 3
            continue
        assert s is not None
        dpk = data_packets(e, s) if traced_data(e, s) else []
        # The data packets go in the FIFO in the first cycle after the previous
        # instruction: the oldest cycle of this record, or the APO cycles before.
        push_t = max(first_t - 0, 0)
        if dpk:
            # The previous instruction: the last functional cycle so far.
            k = len(ps) - 1
            while k >= 0 and ps[k] in (_WT, _APO, _TD):
                k -= 1
            push_t = k + 1
        taken = e.executed and (e.next_pc != ((e.pc + s.size) & 0xFFFFFFFF) or e.vector is not None)
        direct = s.target is not None and e.vector is None
        is_branch_out = e.vector is not None or (taken and (not direct or cfg.branch_output))
        force_full = False
        reason = 0
        if is_branch_out and (sync_due or ctx_pending):
            force_full = True
            reason = 4
        elif sync_due and since_sync >= sync_force_at and e.executed and not dpk:
            is_branch_out = True
            force_full = True
            reason = 4
        if dpk:
            if push_t < len(ps):
                ok = add_packets(push_t, dpk)
            else:
                ok = False
                t0 = new_cycle(_WT)
                ok = add_packets(t0, dpk)
            if not ok:
                overflow = True
                continue
        if is_branch_out:
            if e.vector is not None:
                value = e.vector
            else:
                value = e.next_pc | 1 if e.next_thumb else e.next_pc
            if not emit_branch(_BD if dpk else _BE, value, force_full, reason, None):
                overflow = True
                continue
            if force_full:
                since_sync = 0
                sync_due = False
                ctx_pending = False
                daddr_full = True
        else:
            new_cycle(_IN if not e.executed else (_ID if dpk else _IE))
            if taken:
                new_cycle(_WT)  # pipeline refill after a direct branch
                new_cycle(_WT)
        traced[idx] = True
        since_sync += 1
    # Drain what is left with trace disabled.
    for _ in range(8):
        new_cycle(_WT)
    return _drain(ps, push, branches, width, rng, hw, npk), traced


def _drain(
    ps: list[int],
    push: list[list[tuple[int, bool]]],
    branches: list[tuple[int, int]],
    width: int,
    rng: random.Random,
    hw: HwModel,
    npk: int,
) -> list[int]:
    """Drain the FIFO onto TRACEPKT cycle by cycle and fill in the APOs."""
    fifo: deque[tuple[int, bool, int]] = deque()  # (byte, branch start, packet index)
    out: list[int] = []
    start_cycle: dict[int, int] = {}
    starts = {p for _t, p in branches}
    pidx = 0
    half: int | None = None  # 4-bit port: the upper nibble still to output
    n = len(ps)
    t = 0
    while t < n or fifo or half is not None:
        if t >= n:
            ps.append(_WT)
            push.append([])
        st = ps[t]
        for b, s in push[t]:
            fifo.append((b, s, pidx))
            pidx += 1
        trig = hw.trigger_cycle == t
        garbage = rng.getrandbits(16)
        pkt = garbage
        sync = False
        real = st
        if trig:
            pass
        elif width == 8:
            if fifo:
                b, s, p = fifo.popleft()
                pkt = (garbage & 0xFF00) | b
                sync = s
                if p in starts:
                    start_cycle[p] = t
            elif st == _WT:
                real = _TD
        elif width == 16:
            if fifo:
                defer = st == _WT and len(fifo) == 1 and t < n - 8
                if defer:
                    real = _TD
                else:
                    b, s, p = fifo.popleft()
                    sync = s
                    if p in starts:
                        start_cycle[p] = t
                    hi = garbage >> 8
                    if fifo and not fifo[0][1]:
                        hi = fifo.popleft()[0]
                    pkt = b | (hi << 8)
            elif st == _WT:
                real = _TD
        else:
            if half is not None:
                pkt = (garbage & 0xFFF0) | half
                half = None
            elif fifo:
                b, s, p = fifo.popleft()
                pkt = (garbage & 0xFFF0) | (b & 0xF)
                half = b >> 4
                sync = s
                if p in starts:
                    start_cycle[p] = t
            elif st == _WT:
                real = _TD
        if real == _APO:
            real = 0  # filled in below
        if trig:
            base = _WT if st == _APO else st
            out.append(_TR | ((garbage & 0xFFF8 | base) << 8))
        else:
            out.append(real | (SYNC if sync else 0) | ((pkt & 0xFFFF) << 8))
        t += 1
    # Address packet offsets: TRACESYNC cycles from the branch cycle to its address.
    sync_cycles = [i for i, c in enumerate(out) if c & SYNC and (c & 7) != _TR]
    import bisect

    for tb, p in branches:
        ts = start_cycle.get(p)
        if ts is None:
            apo = 15
        else:
            apo = bisect.bisect_left(sync_cycles, ts) - bisect.bisect_left(sync_cycles, tb)
            apo = min(apo, 15)
        for j, v in ((1, apo & 3), (2, apo >> 2)):
            c = out[tb + j]
            if (c & 7) == _TR:
                out[tb + j] = (c & ~(7 << 8)) | (v << 8)
            else:
                out[tb + j] = (c & ~7) | v
    return out
