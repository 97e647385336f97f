"""ETMv1 decoder: pipeline-status cycles + code image → generic trace elements.

Input: the :class:`~cstrace.protocols.etmv1.packets.PipeStat` packets of one
ETM, its configuration and the traced core's memory. Output: elements of
:mod:`cstrace.elements` (``NO_SYNC``, ``TRACE_ON``, ``PE_CONTEXT``,
``INSTR_RANGE``, ``EXCEPTION``, ``ADDR_NACC``, ``EVENT`` for triggers,
``EO_TRACE``) and, for traced data accesses, ``CUSTOM`` elements holding a
:class:`DataTransfer`.

How TRACEPKT bytes are matched with instructions (ARM IHI 0014Q chapter 5 and
the thesis ``seeds/004`` §8.5, whose LPC3180 listing the unit tests decode):

- every cycle other than TD and trigger cycles outputs FIFO bytes: one on an
  8-bit port, two on a 16-bit port (TRACEPKT[7:0] first), half a byte on a 4-bit
  port (bits [3:0] first);
- the bytes of one instruction form a contiguous block that starts no earlier
  than the cycle after the previous instruction's PIPESTAT; a branch address
  starts no earlier than its own BE/BD cycle, always on TRACEPKT[7:0], with
  TRACESYNC high on its first cycle (a 16-bit port leaves TRACEPKT[15:8]
  unused before it);
- the two cycles after a BE/BD carry the address packet offset (APO) on
  PIPESTAT[1:0]: how many TRACESYNC cycles, counting from the branch's own
  cycle, to skip to reach its address. A BE/BD in an APO cycle abandons the
  earlier branch, whose address is still output (§5.5.1);
- branch addresses are 1-5 packets, bit 7 meaning another follows; the bits
  sent replace those of the previous branch address; the fifth packet holds
  address bits [31:28], a reason code in bits [6:4] (normal, trace enabled,
  restart after FIFO overflow, exit from debug, periodic synchronisation) and,
  in ETMv1.3, the Jazelle state in bit 7; a context ID follows a five-packet
  address whose reason is not normal (§5.6.3). Bit 0 of an address set means
  Thumb state;
- an ``ID``/``BD`` instruction's data packets are the data address (1-5 packets,
  compressed against the previous data address) and the data value (1, 2, 4
  or 4 per register bytes, least significant first) when traced.

The data packets need the instruction's transfer size from the code image; if
it is unknown the decoder keeps following the program (PIPESTATs) and finds the
next branch address through its APO and TRACESYNC, which needs no counting.

Exceptions are traced as branches to their vectors (§5.1): a branch to the
undefined-instruction, SWI, prefetch-abort or data-abort vector completes the
instruction it is traced on; a branch to the reset, IRQ or FIQ vector
interrupts it (it did not execute). Both give an ``EXCEPTION`` element whose
number follows the ETMv3 encoding (reset 8, undefined 9, SVC 10, prefetch
abort 11, data abort 12, IRQ 14, FIQ 15). A software branch to a vector address
is therefore reported as an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.elements import (
    AddrNacc,
    Custom,
    Element,
    EoTrace,
    Event,
    EventType,
    Exception_,
    InstrRange,
    Isa,
    NoSync,
    PEContext,
    PEContextInfo,
    TraceOn,
    TraceOnReason,
    UnsyncReason,
)
from cstrace.memory.code import NO_MEMORY, CodeMemory
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.etmv1.arm import Step, step_arm, step_thumb
from cstrace.protocols.etmv1.config import ClassicEtmConfig
from cstrace.protocols.etmv1.packets import PipeStat

__all__ = ["VECTOR_EXCEPTIONS", "BranchReason", "DataTransfer", "iter_elements"]

_IE, _ID, _IN, _WT, _BE, _BD, _TR, _TD = range(8)


class BranchReason:
    """Reason codes of a five-packet branch address (IHI 0014Q table 5.3)."""

    NORMAL = 0
    TRACE_ENABLED = 1
    OVERFLOW_RESTART = 2
    DEBUG_EXIT = 3
    PERIODIC = 4


# Vector offset → (exception number, the traced instruction completed).
VECTOR_EXCEPTIONS: dict[int, tuple[int, bool]] = {
    0x00: (8, False),
    0x04: (9, True),
    0x08: (10, True),
    0x0C: (11, True),
    0x10: (12, True),
    0x18: (14, False),
    0x1C: (15, False),
}


class DataTransfer(dict[str, object]):
    """A traced data access: its address (if traced) and the bytes moved (if traced).

    A ``dict`` (``pc``, ``address``, ``data`` as a hexadecimal string) so that
    JSON renderings of the ``CUSTOM`` element that carries it work as is; the
    attributes give the typed values.
    """

    def __init__(self, pc: int | None, address: int | None, data: bytes | None) -> None:
        super().__init__(pc=pc, address=address, data=None if data is None else data.hex())

    @property
    def pc(self) -> int | None:
        """Address of the load/store instruction, if known."""
        return self["pc"]  # type: ignore[return-value]

    @pc.setter
    def pc(self, value: int | None) -> None:
        self["pc"] = value

    @property
    def address(self) -> int | None:
        """The data address, when traced (and known in full)."""
        return self["address"]  # type: ignore[return-value]

    @property
    def data(self) -> bytes | None:
        """The bytes moved, in order, when data values are traced."""
        d = self["data"]
        return None if d is None else bytes.fromhex(str(d))

    def __repr__(self) -> str:
        a = "-" if self.address is None else f"{self.address:#x}"
        return f"DataTransfer(pc={self.pc}, address={a}, data={self['data'] or '-'})"


def _vector(addr: int) -> tuple[int, bool] | None:
    if addr < 0x20 or 0xFFFF0000 <= addr < 0xFFFF0020:
        return VECTOR_EXCEPTIONS.get(addr & 0x1F)
    return None


class _Decoder:
    """State of one ETMv1 decode run (see the module docstring)."""

    def __init__(self, packets: Iterable[Packet], cfg: ClassicEtmConfig, ctx: DecodeContext):
        self.it = iter(packets)
        self.cfg = cfg
        self.ctx = ctx
        self.width = cfg.port.width
        # Buffered cycles (TD runs count as one entry); entries before `base` are dropped.
        self.ps: list[int] = []
        self.pk: list[int] = []
        self.sy: list[bool] = []
        self.trg: list[bool] = []
        self.off: list[int] = []
        self.base = 0
        self.ended = False
        self.mem: CodeMemory = NO_MEMORY if ctx.memory is None else ctx.memory
        self.steps: dict[int, Step | None] = {}
        self.gen = self.mem.generation

    # -- cycle buffer -------------------------------------------------------
    def have(self, i: int) -> bool:
        """True when entry ``i`` is buffered (reading more packets as needed)."""
        if i - self.base < len(self.ps):
            return True
        return self._fill(i)

    def _fill(self, i: int) -> bool:
        ps, pk, sy, trg, off = self.ps, self.pk, self.sy, self.trg, self.off
        it = self.it
        while i - self.base >= len(ps):
            if self.ended:
                return False
            for _ in range(256):
                p = next(it, None)
                if p is None:
                    self.ended = True
                    break
                if isinstance(p, PipeStat):
                    ps.append(p.status)
                    pk.append(p.tracepkt)
                    sy.append(p.sync)
                    trg.append(p.trigger)
                else:
                    ps.append(_TD)
                    pk.append(0)
                    sy.append(False)
                    trg.append(False)
                off.append(p.offset)
        return True

    def trim(self, keep: int) -> None:
        """Drop buffered entries before ``keep``."""
        n = keep - self.base
        if n > 4096:
            del self.ps[:n], self.pk[:n], self.sy[:n], self.trg[:n], self.off[:n]
            self.base = keep

    def is_slot(self, e: int) -> bool:
        """Entry ``e`` outputs FIFO bytes (not TD, not a trigger cycle)."""
        k = e - self.base
        return self.ps[k] != _TD and not self.trg[k]

    def next_slot(self, e: int) -> int | None:
        """The first entry at or after ``e`` that outputs FIFO bytes."""
        while True:
            if not self.have(e):
                return None
            if self.is_slot(e):
                return e
            e += 1

    # Positions: entry*2 + half on a 16-bit port, else the entry.
    def pos_of(self, e: int) -> int:
        """The position of the first FIFO byte of entry ``e``."""
        return e * 2 if self.width == 16 else e

    def read_byte(self, pos: int) -> tuple[int, bool, int] | None:
        """The FIFO byte at or after ``pos``: (value, TRACESYNC of its cycle, next position)."""
        w = self.width
        if w == 8:
            e = self.next_slot(pos)
            if e is None:
                return None
            k = e - self.base
            return self.pk[k] & 0xFF, self.sy[k], e + 1
        if w == 16:
            e, h = pos >> 1, pos & 1
            if h:
                k = e - self.base
                return (self.pk[k] >> 8) & 0xFF, False, (e + 1) << 1
            e2 = self.next_slot(e)
            if e2 is None:
                return None
            k = e2 - self.base
            return self.pk[k] & 0xFF, self.sy[k], (e2 << 1) | 1
        e = self.next_slot(pos)
        if e is None:
            return None
        e2 = self.next_slot(e + 1)
        if e2 is None:
            return None
        k, k2 = e - self.base, e2 - self.base
        return (self.pk[k] & 0xF) | ((self.pk[k2] & 0xF) << 4), self.sy[k], e2 + 1

    def branch_start(self, pos: int) -> int:
        """A branch address starts on TRACEPKT[7:0]: skip an unused upper half."""
        if self.width == 16 and pos & 1:
            return pos + 1
        return pos

    def apo_locate(self, e: int, apo: int) -> int | None:
        """The position of the branch address ``apo`` TRACESYNC cycles after entry ``e``."""
        n = apo
        while True:
            if not self.have(e):
                return None
            k = e - self.base
            if self.sy[k] and self.ps[k] != _TD and not self.trg[k]:
                if n == 0:
                    return self.pos_of(e)
                n -= 1
            e += 1

    # -- code ---------------------------------------------------------------
    def step(self, pc: int, thumb: bool) -> Step | None:
        """The instruction at ``pc`` (cached), or None if the image does not hold it."""
        mem = self.mem
        gen = mem.generation
        if gen != self.gen:  # the memory changed (another context or time): read again
            self.steps.clear()
            self.gen = gen
        key = (pc << 1) | thumb
        s = self.steps.get(key, False)
        if s is not False:
            return s  # type: ignore[return-value]
        if thumb:
            b = mem.read(pc, 2)
            if len(b) < 2:
                s = None
            else:
                prev = mem.read(pc - 2, 2) if pc >= 2 else b""
                s = step_thumb(
                    pc,
                    int.from_bytes(b, "little"),
                    int.from_bytes(prev, "little") if len(prev) == 2 else None,
                )
        else:
            b = mem.read(pc, 4)
            s = (
                step_arm(pc, int.from_bytes(b, "little"), self.cfg.monitor_cprt)
                if len(b) == 4
                else None
            )
        self.steps[key] = s
        return s


def iter_elements(
    packets: Iterable[Packet], config: ClassicEtmConfig, context: DecodeContext
) -> Iterator[Element]:
    """Decode ETMv1 pipeline-status packets into generic elements."""
    d = _Decoder(packets, config, context)
    cfg = config
    yield NoSync(0, UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER)

    pc_ok = False
    pc = 0
    thumb = False
    jazelle = False
    cur_ok = False  # the data cursor is known
    cursor = 0
    prev_instr = -1  # entry of the previous instruction PIPESTAT
    baddr = 0
    baddr_ok = False
    daddr = 0
    daddr_ok = False
    ctxid: int | None = None
    # Open instruction range.
    r_start = 0
    r_n = 0
    r_isa = Isa.A32
    r_last: Step | None = None
    r_last_exec = True
    r_last_off = 0
    cc_mark: int | None = None  # cycle-accurate: the cycle of the previous range's end
    ca = cfg.cycle_accurate
    pending: list[Element] = []
    last_off = 0

    def close(off: int) -> Iterator[Element]:
        nonlocal r_n, r_last, cc_mark
        if r_n and r_last is not None:
            end = r_end
            cc = None
            if ca:
                # Cycle-accurate trace keeps every cycle: the range took the cycles
                # from the end of the previous one to its last instruction.
                if cc_mark is not None:
                    cc = r_last_off - cc_mark
                cc_mark = r_last_off
            yield InstrRange(
                off,
                r_start,
                end,
                r_n,
                r_isa,
                r_last_exec,
                r_last.size,
                r_last.itype,
                r_last.subtype,
                r_last.cond,
                cc,
            )
        r_n = 0
        r_last = None
        if pending:
            yield from pending
            pending.clear()

    r_end = 0

    def add(s: Step, addr: int, executed: bool, isa: Isa, off: int) -> Iterator[Element]:
        """Append the instruction at ``addr`` to the open range."""
        nonlocal r_start, r_n, r_isa, r_last, r_last_exec, r_end, r_last_off
        if r_n and (r_end != addr or r_isa != isa):
            yield from close(off)
        if not r_n:
            r_start = addr
            r_isa = isa
        r_n += 1
        r_last = s
        r_last_exec = executed
        r_end = addr + s.size
        r_last_off = off

    def context_elem(off: int) -> PEContext:
        info = PEContextInfo(ctxt_id_valid=ctxid is not None, context_id=ctxid or 0)
        return PEContext(off, info, Isa.JAZELLE if jazelle else (Isa.T32 if thumb else Isa.A32))

    def read_data(pos: int, s: Step | None) -> tuple[int, DataTransfer] | None:
        """Read the data packets of a load/store at ``pos``: (next position, transfer)."""
        nonlocal daddr, daddr_ok
        address: int | None = None
        if cfg.data_addr:
            value = 0
            shift = 0
            n = 0
            while True:
                rb = d.read_byte(pos)
                if rb is None:
                    return None
                b, _s, pos = rb
                n += 1
                if n == 5:
                    value |= (b & 0xF) << 28
                    shift = 32
                    break
                value |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            mask = (1 << shift) - 1
            daddr = (daddr & ~mask & 0xFFFFFFFF) | value
            if n == 5:
                daddr_ok = True
            address = daddr if daddr_ok else None
        data: bytes | None = None
        if cfg.data_value:
            if s is None or not s.xfer:
                return None
            buf = bytearray()
            for _ in range(s.xfer):
                rb = d.read_byte(pos)
                if rb is None:
                    return None
                buf.append(rb[0])
                pos = rb[2]
            data = bytes(buf)
        return pos, DataTransfer(None, address, data)

    i = 0
    dps = d.ps
    while i - d.base < len(dps) or d.have(i):
        if dps is not d.ps:
            dps = d.ps
        k = i - d.base
        st = dps[k]
        off = d.off[k]
        last_off = off
        if d.trg[k]:
            pending.append(Event(off, EventType.TRIGGER))
        if st in (_TD, _WT, _TR):
            i += 1
            continue
        lb = d.pos_of(prev_instr + 1)
        if st in (_IE, _ID, _IN):
            s: Step | None = None
            if pc_ok and not jazelle:
                s = d.step(pc, thumb)
                if s is None:
                    yield from close(off)
                    yield AddrNacc(off, pc)
                    pc_ok = False
            if st == _ID:
                if cur_ok:
                    res = read_data(max(cursor, lb), s)
                    if res is None:
                        cur_ok = False
                    else:
                        cursor, dti = res
                        dti.pc = pc if pc_ok else None
                        pending.append(Custom(off, dti))
            if pc_ok and s is not None:
                isa = Isa.T32 if thumb else Isa.A32
                executed = st != _IN
                yield from add(s, pc, executed, isa, off)
                if executed and s.target is not None:
                    yield from close(off)
                    pc = s.target
                    thumb = s.target_thumb
                else:
                    if s.is_branch:
                        yield from close(off)
                    pc = (pc + s.size) & 0xFFFFFFFF
            prev_instr = i
            i += 1
            if i - d.base > 8192:
                ce = ((cursor >> 1) if d.width == 16 else cursor) if cur_ok else i
                d.trim(min(i, ce) - 8)
            continue

        # BE / BD: a branch; the next two cycles carry its address packet offset.
        abandoned = False
        apo: int | None = None
        nxt = i + 3
        for j in (1, 2):
            if not d.have(i + j):
                apo = None
                nxt = i + j
                break
            sj = d.ps[i + j - d.base]
            if sj in (_BE, _BD):
                abandoned = True
                nxt = i + j
                break
            if sj == _TD:
                nxt = i + j
                apo = None
                break
        else:
            s1 = d.ps[i + 1 - d.base] & 3
            s2 = d.ps[i + 2 - d.base] & 3
            apo = s1 | (s2 << 2)
        s = None
        if pc_ok and not jazelle:
            s = d.step(pc, thumb)
        dt = None
        if st == _BD:
            if cur_ok:
                res = read_data(max(cursor, lb), s)
                if res is None:
                    cur_ok = False
                else:
                    cursor, dt = res
                    dt.pc = pc if pc_ok else None
        pos: int | None = None
        if apo is not None and apo < 15 and not abandoned:
            pos = d.apo_locate(i, apo)
        elif cur_ok:
            e0 = max(cursor, d.pos_of(i))
            e0 = d.branch_start(e0)
            e = e0 >> 1 if d.width == 16 else e0
            while d.have(e):
                kk = e - d.base
                if d.sy[kk] and d.is_slot(e):
                    break
                e += 1
            pos = d.pos_of(e) if d.have(e) else None
        if pos is None:
            # The address cannot be found: the program flow is lost here.
            yield from close(off)
            if dt is not None:
                yield Custom(off, dt)
            if pc_ok:
                yield NoSync(off, UnsyncReason.BAD_PACKET)
            pc_ok = False
            cur_ok = False
            prev_instr = i
            i = nxt
            continue
        # Read the branch address.
        value = 0
        shift = 0
        n = 0
        b = 0
        ok = True
        while True:
            rb = d.read_byte(pos)
            if rb is None:
                ok = False
                break
            b, _sync, pos = rb
            n += 1
            if n == 5:
                value |= (b & 0xF) << 28
                shift = 32
                break
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        reason = (b >> 4) & 7 if n == 5 else BranchReason.NORMAL
        new_ctx: int | None = None
        if ok and n == 5 and reason != BranchReason.NORMAL and cfg.ctxid_bytes:
            new_ctx = 0
            for j in range(cfg.ctxid_bytes):
                rb = d.read_byte(pos)
                if rb is None:
                    ok = False
                    break
                new_ctx |= rb[0] << (8 * j)
                pos = rb[2]
        if not ok:
            break
        cursor = pos
        cur_ok = True
        mask = (1 << shift) - 1
        baddr = (baddr & ~mask & 0xFFFFFFFF) | value
        if n == 5:
            baddr_ok = True
        j_state = n == 5 and bool(b & 0x80) and cfg.minor >= 3
        if j_state:
            target = baddr
        elif baddr & 1:
            target = baddr & ~1
        else:
            target = baddr & ~3
        target_thumb = bool(baddr & 1) and not j_state
        if dt is not None:
            pending.append(Custom(off, dt))
        restart = n == 5 and reason in (
            BranchReason.TRACE_ENABLED,
            BranchReason.OVERFLOW_RESTART,
            BranchReason.DEBUG_EXIT,
        )
        ctx_changed = new_ctx is not None and new_ctx != ctxid
        if new_ctx is not None:
            ctxid = new_ctx
            d.mem.set_context(ctxid, None)
        if restart or not pc_ok:
            if not baddr_ok:
                prev_instr = i
                i = nxt
                continue
            yield from close(off)
            was_ok = pc_ok
            pc, thumb, jazelle = target, target_thumb, j_state
            pc_ok = True
            if restart or not was_ok:
                why = {
                    BranchReason.OVERFLOW_RESTART: TraceOnReason.OVERFLOW,
                    BranchReason.DEBUG_EXIT: TraceOnReason.EX_DEBUG,
                }.get(reason, TraceOnReason.NORMAL)
                yield TraceOn(off, why)
                yield context_elem(off)
                cc_mark = off
                if not daddr_ok or restart:
                    daddr_ok = False
            prev_instr = i
            i = nxt
            continue
        # A normal branch (or a periodic synchronisation point) from the instruction at pc.
        vec = None if (target_thumb or j_state) else _vector(target)
        isa = Isa.JAZELLE if jazelle else (Isa.T32 if thumb else Isa.A32)
        if vec is not None:
            number, completes = vec
            ret: int | None = None
            if completes and s is not None:
                yield from add(s, pc, True, isa, off)
                ret = (pc + s.size) & 0xFFFFFFFF if number in (9, 10) else pc
            elif not completes:
                ret = pc
            yield from close(off)
            yield Exception_(off, number, ret)
        else:
            if s is not None:
                yield from add(s, pc, True, isa, off)
            elif not jazelle:
                yield from close(off)
                yield AddrNacc(off, pc)
            yield from close(off)
        pc, thumb, jazelle = target, target_thumb, j_state
        if ctx_changed:
            yield context_elem(off)
        prev_instr = i
        i = nxt
    yield from close(last_off)
    if context.complete:
        yield EoTrace(last_off)
