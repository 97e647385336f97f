"""ETMv2 encoder: an executed instruction sequence → the trace-port cycles an ETMv2 outputs.

Input: :class:`~cstrace.protocols.etmv1.encoder.Exec` records, the ETM
configuration, a function reading the program image and the hardware model
(:class:`~cstrace.protocols.etmv1.encoder.HwModel`). Output: cycle words (4-bit
PIPESTAT) and which records were traced.

The inverse of :mod:`cstrace.protocols.etmv2.reader` and
:mod:`cstrace.protocols.etmv2.decoder`: each cycle's PIPESTAT, the packets it
places in the FIFO (a context ID, data packets, a branch address last, with
the C bits of IHI 0014Q §6.2), the FIFO drained onto TRACEPKT from the next
cycle on (a byte per cycle, two on 16-bit ports when there are two, a nibble on
4-bit ports), TFOs at trace start, after an overflow and periodically
(``seeds/002``: the TFO value in TRACEPKT, on two cycles on 4-bit ports,
followed by a gap nibble when it falls between the nibbles of a byte).

Two features of §6.4-6.5 that depend on the core are modelled as cstrace's
decoder reads them (``docs/classic.md``): a TFO that falls on a load/store
multiple which places no packets is an LSM-in-progress TFO (the LSM's address
after the next instruction's; its TD stands for the LSM), also at a restart;
with :attr:`HwModel.load_miss_every`, some single loads miss in the data cache:
their cycle places a Load Miss occurred packet (tag 1-3, the data address) and
the value follows a few instructions later in a Load Miss data packet. A FIFO
overflow loses the values of the misses still outstanding.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable

from cstrace.elements import Isa
from cstrace.protocols.etmv1.arm import arm_transfer_bytes
from cstrace.protocols.etmv1.config import ClassicEtmConfig
from cstrace.protocols.etmv1.encoder import Exec, ExecKind, HwModel, step_of
from cstrace.protocols.etmv2.decoder import encode_branch
from cstrace.protocols.etmv2.reader import tfo_encode

__all__ = ["encode_etmv2"]

_IE, _DE, _IN, _DN, _WT, _DW, _TR, _TD = range(8)


def _data_addr(a: int, prev: int, full: bool) -> bytes:
    n = 5
    if not full:
        for k in range(1, 5):
            if (a >> (7 * k)) == (prev >> (7 * k)):
                n = k
                break
    out = []
    for k in range(n):
        if k < 4:
            out.append(((a >> (7 * k)) & 0x7F) | (0x80 if k < n - 1 else 0))
        else:
            out.append((a >> 28) & 0xF)
    return bytes(out)


def access_kind(read: Callable[[int, int], bytes], pc: int, thumb: bool) -> str:
    """``"lsm"`` for a load/store multiple, ``"load"`` for a single load, else ``""``."""
    if thumb:
        hw = int.from_bytes(read(pc, 2), "little")
        if (hw >> 12) == 0xC or (hw & 0xF600) == 0xB400:  # LDMIA/STMIA, PUSH/POP
            return "lsm"
        if (hw >> 12) == 0x5:  # register offset: LDRSB LDR LDRH LDRB LDRSH
            return "load" if (hw >> 9) & 7 >= 3 else ""
        # LDR literal, LDR/LDRB/LDRH immediate, LDR SP-relative
        return "load" if hw >> 11 in (0x09, 0x0D, 0x0F, 0x11, 0x13) else ""
    op = int.from_bytes(read(pc, 4), "little")
    top = (op >> 25) & 7
    if (op >> 28) == 0xF or not arm_transfer_bytes(op):
        return ""
    if top == 4:
        return "lsm"
    load = bool(op & (1 << 20))
    if top == 0 and (op & 0x0FB00FF0) == 0x01000090:
        return ""  # SWP/SWPB: a load and a store
    if top == 0 and (op >> 5) & 3 == 2 and not load:
        return ""  # LDRD: two words
    return "load" if load else ""


def encode_etmv2(
    execs: list[Exec],
    cfg: ClassicEtmConfig,
    read: Callable[[int, int], bytes],
    hw: HwModel | None = None,
    stats: dict[str, int] | None = None,
    lost_values: list[int] | None = None,
) -> tuple[list[int], list[bool]]:
    """The cycles an ETMv2 outputs for ``execs``, and for each record whether it was traced.

    ``stats``, if given, receives counts of TFOs (``tfos``), of TFOs output
    between the two nibbles of a byte on a 4-bit port (``gaps``), of
    LSM-in-progress TFOs (``lsip``) and of load misses (``load_misses``).
    ``lost_values``, if given, receives the indices of traced loads that
    missed and whose value a FIFO overflow lost.
    """
    hw = hw or HwModel()
    rng = random.Random(hw.seed)
    st_ = stats if stats is not None else {}
    st_.setdefault("lsip", 0)
    st_.setdefault("load_misses", 0)
    ps: list[int] = []
    place: list[bytes] = []
    tfo: list[bool] = []
    traced = [False] * len(execs)
    ctx_bytes = cfg.ctxid_bytes
    ctxid = 0
    ctx_pending = False
    baddr, bisa = 0, Isa.A32
    daddr = 0
    dfull = True
    restart = 1
    overflow = False
    since = 0
    level = 0.0
    rate = {4: 0.5, 8: 1.0, 16: 2.0}[cfg.port.width]

    def cycle(st: int, group: bytes = b"", is_tfo: bool = False) -> None:
        nonlocal level
        ps.append(st)
        place.append(group)
        tfo.append(is_tfo)
        level = max(0.0, level - rate) + len(group)

    def tfo_packet(
        reason: int, addr: int, thumb: bool, lsm: tuple[int, bool] | None = None
    ) -> bytes:
        head = ((reason & 3) << 5) | (0x80 if lsm is not None else 0)
        body = ctxid.to_bytes(4, "little")[:ctx_bytes] if ctx_bytes else b""
        out = bytes([head]) + body + (addr | int(thumb)).to_bytes(4, "little")
        if lsm is not None:
            out += (lsm[0] | int(lsm[1])).to_bytes(4, "little")
        return out

    # Load misses waiting for their value: [due instruction count, tag, value, record index].
    misses: list[tuple[int, int, bytes, int]] = []
    count = 0  # traced instructions so far

    def lose_misses() -> None:
        if lost_values is not None:
            lost_values.extend(m[3] for m in [*delivering, *misses])
        misses.clear()
        delivering.clear()

    # Load misses whose value the cycle being built places (lost with it on an overflow).
    delivering: list[tuple[int, int, bytes, int]] = []

    def due_misses() -> list[bytes]:
        delivering[:] = [m for m in misses if m[0] <= count]
        out = []
        for m in delivering:
            misses.remove(m)
            ss = {1: 0, 2: 1, 4: 2}[len(m[2])]
            out.append(bytes([(m[1] << 5) | (ss << 2)]) + m[2])
        return out

    def lsip_ok(e: Exec) -> bool:
        """An executed LSM that places nothing and does not branch: an LSiP TFO can stand for it."""
        if e.kind != ExecKind.INSTR or not e.executed or e.vector is not None:
            return False
        if access_kind(read, e.pc, e.thumb) != "lsm":
            return False
        s = step_of(read, e.pc, e.thumb)
        if e.next_pc != ((e.pc + s.size) & 0xFFFFFFFF):
            return False
        return not (e.data and (cfg.data_value or cfg.data_addr))

    for idx, e in enumerate(execs):
        if e.kind == ExecKind.CONTEXT:
            ctxid = e.value
            ctx_pending = bool(ctx_bytes)
            continue
        waits = rng.randint(0, hw.max_wait)
        if hw.long_stall_every and rng.randrange(hw.long_stall_every) == 0:
            waits += rng.randint(20, 80)
        for _ in range(waits):
            cycle(_WT)
        since += waits
        if overflow:
            cycle(_WT)
            if level <= 0:
                overflow = False
                restart = 2
            continue
        if restart:
            lsm = lsip_ok(e) and not ctx_pending
            if lsm:
                # Trace starts while an LSM is in progress: the TFO implies it.
                pkt = tfo_packet(restart, e.next_pc, e.next_thumb, (e.pc, e.thumb))
                start_at = (e.next_pc, e.next_thumb)
            else:
                pkt = tfo_packet(restart, e.pc, e.thumb)
                start_at = (e.pc, e.thumb)
            if level + len(pkt) > min(hw.fifo_depth, 90):
                overflow = True
                lose_misses()
                cycle(_WT)
                continue
            cycle(_TD, pkt, True)
            baddr, bisa = start_at[0], Isa.T32 if start_at[1] else Isa.A32
            dfull = True
            ctx_pending = False
            restart = 0
            since = 0
            if lsm:
                st_["lsip"] += 1
                traced[idx] = True
                count += 1
                continue
        pkts: list[bytes] = []
        if ctx_pending:
            pkts.append(bytes([0x6E]) + ctxid.to_bytes(4, "little")[:ctx_bytes])
            ctx_pending = False
        if e.kind == ExecKind.INTERRUPT:
            isa = Isa.A32
            br = encode_branch(e.vector or 0, baddr, isa, bisa)
            baddr, bisa = e.vector or 0, isa
            group = _join([*pkts, br])
            if level + len(group) > hw.fifo_depth:
                overflow = True
                lose_misses()
                cycle(_WT)
                continue
            cycle(_DW, group)
            traced[idx] = True
            continue
        s = step_of(read, e.pc, e.thumb)
        # Periodic synchronisation on an instruction that places nothing.
        taken = e.executed and (e.next_pc != ((e.pc + s.size) & 0xFFFFFFFF) or e.vector is not None)
        direct = s.target is not None and e.vector is None
        out_branch = e.vector is not None or (taken and (not direct or cfg.branch_output))
        has_data = bool(e.data) and s.xfer > 0 and (cfg.data_value or cfg.data_addr)
        pkts += due_misses()
        if (
            since >= hw.sync_period
            and e.executed
            and not out_branch
            and not has_data
            and not pkts
            and level + 9 <= min(hw.fifo_depth, 90)
        ):
            if lsip_ok(e) and level + 13 <= min(hw.fifo_depth, 90):
                # The TD stands for the LSM, which is still transferring its data.
                sync = tfo_packet(0, e.next_pc, e.next_thumb, (e.pc, e.thumb))
                baddr, bisa = e.next_pc, Isa.T32 if e.next_thumb else Isa.A32
                st_["lsip"] += 1
            else:
                sync = tfo_packet(0, e.pc, e.thumb)
                baddr, bisa = e.pc, Isa.T32 if e.thumb else Isa.A32
            cycle(_TD, sync, True)
            since = 0
            dfull = True
            traced[idx] = True
            count += 1
            if taken and direct:
                cycle(_WT)
                cycle(_WT)
            continue
        miss_tag = 0
        if (
            has_data
            and cfg.data_value
            and hw.load_miss_every
            and e.executed
            and len(e.data) == 1
            and len(e.data[0][1]) in (1, 2, 4)
            and rng.randrange(hw.load_miss_every) == 0
            and access_kind(read, e.pc, e.thumb) == "load"
        ):
            free = sorted({1, 2, 3} - {m[1] for m in misses})
            miss_tag = free[0] if free else 0
        if miss_tag:
            # A load miss: the address now, the value later under the tag.
            a, v = e.data[0]
            pk = bytearray([0x50 | 0x20 | (miss_tag << 2)])
            if cfg.data_addr:
                pk += _data_addr(a, daddr, dfull)
                daddr = a
                dfull = False
            pkts.append(bytes(pk))
            misses.append((count + 1 + rng.randrange(hw.load_miss_delay), miss_tag, v, idx))
            st_["load_misses"] += 1
        elif has_data:
            for k, (a, v) in enumerate(e.data):
                first = k == 0
                ss = {1: 0, 2: 1, 4: 2}.get(len(v), 2)
                pk = bytearray([0x02 | (ss << 2) | (0x20 if first else 0)])
                if first and cfg.data_addr:
                    pk += _data_addr(a, daddr, dfull)
                    daddr = a
                    dfull = False
                if cfg.data_value:
                    pk += v
                pkts.append(bytes(pk))
        if out_branch:
            if e.vector is not None:
                tgt, isa = e.vector, Isa.A32
            else:
                tgt, isa = e.next_pc, Isa.T32 if e.next_thumb else Isa.A32
            br = encode_branch(tgt, baddr, isa, bisa)
            baddr, bisa = tgt, isa
            pkts.append(br)
        group = _join(pkts)
        if group and level + len(group) > hw.fifo_depth:
            overflow = True
            if miss_tag:
                misses.pop()  # this load was not traced
                st_["load_misses"] -= 1
            lose_misses()
            cycle(_WT)
            continue
        if e.executed:
            cycle(_DE if group else _IE, group)
        else:
            cycle(_DN if group else _IN, group)
        delivering.clear()
        traced[idx] = True
        count += 1
        since += 1
        if taken and direct:
            cycle(_WT)
            cycle(_WT)
    if misses:
        # The values still outstanding at the end come in one last cycle.
        count += hw.load_miss_delay
        group = _join(due_misses())
        if overflow or level + len(group) > hw.fifo_depth:
            lose_misses()
        else:
            cycle(_DW, group)
    for _ in range(8):
        cycle(_WT)
    return _drain(ps, place, tfo, cfg.port.width, rng, hw.trigger_cycle, stats), traced


def _join(pkts: list[bytes]) -> bytes:
    """A group: every header but the last packet's gets its C bit (bit 7) set."""
    out = bytearray()
    for k, p in enumerate(pkts):
        if k < len(pkts) - 1:
            out.append(p[0] | 0x80)
            out += p[1:]
        else:
            out += p
    return bytes(out)


def _drain(
    ps: list[int],
    place: list[bytes],
    tfo: list[bool],
    width: int,
    rng: random.Random,
    trigger: int | None,
    stats: dict[str, int] | None = None,
) -> list[int]:
    """Drain the FIFO onto TRACEPKT cycle by cycle, outputting TFO values and gap nibbles."""
    st_ = stats if stats is not None else {}
    st_.setdefault("tfos", 0)
    st_.setdefault("gaps", 0)
    fifo: deque[int] = deque()
    out: list[int] = []
    parts: list[int] = []
    gap = False
    half: int | None = None
    n = len(ps)
    t = 0
    while t < n or fifo or half is not None or parts or gap:
        if t >= n:
            ps.append(_WT)
            place.append(b"")
            tfo.append(False)
        st = ps[t]
        g = rng.getrandbits(16)
        pkt = g
        trig = trigger is not None and t >= trigger and not tfo[t] and trigger >= 0
        if trig:
            trigger = -1
        if trig:
            out.append(_TR | (((g & 0xFFF0) | st) << 8))
        elif tfo[t]:
            value = len(fifo) + (1 if half is not None else 0)
            enc = tfo_encode(value)
            if width == 4:
                pkt = (g & 0xFFF0) | (enc & 0xF)
                parts = [enc >> 4]
            else:
                pkt = (g & 0xFF00) | enc
            if half is not None:
                gap = True
                st_["gaps"] += 1
            st_["tfos"] += 1
            out.append(_TD | (pkt << 8))
        else:
            if parts:
                pkt = (g & 0xFFF0) | parts.pop(0)
            elif gap:
                pkt = (g & 0xFFF0) | 0x6
                gap = False
            elif width == 4:
                if half is not None:
                    pkt = (g & 0xFFF0) | half
                    half = None
                elif fifo:
                    b = fifo.popleft()
                    pkt = (g & 0xFFF0) | (b & 0xF)
                    half = b >> 4
                elif st == _WT:
                    st = _TD
            elif fifo:
                lo = fifo.popleft()
                hi = fifo.popleft() if (width == 16 and fifo) else (g >> 8)
                pkt = lo | (hi << 8) if width == 16 else (g & 0xFF00) | lo
            elif st == _WT:
                st = _TD
            if st == _TD:
                pkt &= ~1  # a plain TD: not a TFO
            out.append(st | ((pkt & 0xFFFF) << 8))
        fifo.extend(place[t])
        t += 1
    return out
