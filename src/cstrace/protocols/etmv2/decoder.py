"""ETMv2 decoder: cycles with their FIFO packets + code image → generic trace elements.

Input: :class:`~cstrace.protocols.etmv2.packets.Cycle2` packets, the ETM
configuration and the traced core's memory. Output: ``NO_SYNC``, ``TRACE_ON``,
``PE_CONTEXT``, ``INSTR_RANGE``, ``EXCEPTION``, ``ADDR_NACC``, ``EVENT``
(trigger), ``CUSTOM`` (:class:`~cstrace.protocols.etmv1.decoder.DataTransfer`)
and ``EO_TRACE`` elements.

Meaning of the pipeline status (IHI 0014Q §6.1): IE/DE an instruction executed,
IN/DN one failed its condition, WT/DW no instruction; the D forms placed
packets: data of the instruction, a context ID, and last a branch address when
the instruction branched indirectly or took an exception (an exception between
instructions, such as an interrupt, places its address in a DW cycle). The
branch phantom forms (PT/PN) first execute a folded direct branch, taken or
not, then the instruction of the low two bits. A TFO packet (§6.5) gives a full
address: with reason 0 (periodic synchronisation) the TD of the TFO stands for
an executed instruction at that address; with reasons 1-3 (trace enabled,
restart after overflow, exit from debug) trace (re)starts there.

A TFO packet with a load/store multiple in progress (LSiP, §6.5.3; §7.14.2
says such a packet implies the execution of that instruction) names the LSM
instruction, which is output as executed, whatever the reason; execution then
goes on at the packet's instruction address (for reason 0 the TD stands for
the LSM itself).

Data packets of a cycle belong to its instruction (a ``CUSTOM`` element with a
:class:`~cstrace.protocols.etmv1.decoder.DataTransfer`), except Load Miss
packets (§6.4, table 6.2): a Load Miss occurred packet takes the place of the
load's data (its address, if traced) and a tag; the value comes later, in any
cycle, as a Load Miss data packet with the same tag, and the transfer is output
then, with the load's address and the address of its instruction.

A new context ID (TFO or context ID packet) selects its address space in the
code memory (``set_context``).

Branch addresses (cstrace's reading of the encoding, as ETMv3's original
scheme, since the stored specification lost its figures; see
``docs/classic.md``): the first byte has bit 0 set and holds address bits
[7:2] (ARM), [6:1] (Thumb) or [5:0] (Jazelle) in bits [6:1]; the next bytes
hold 7 bits each; a fifth byte holds the top bits and the state: b0x001AAA ARM
(A[31:29]), b0x01AAAA Thumb (A[31:28]), b0x1AAAAA Jazelle (A[31:27]), bit 6
ignored. Bits not sent keep their previous value; a change of state sends all
five bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.elements import (
    Custom,
    Element,
    EoTrace,
    Event,
    EventType,
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
from cstrace.protocols.etmv1.config import ClassicEtmConfig
from cstrace.protocols.etmv1.decoder import VECTOR_EXCEPTIONS, DataTransfer
from cstrace.protocols.etmv1.flow import Flow
from cstrace.protocols.etmv2.packets import (
    BranchAddr,
    ContextIdPkt,
    Cycle2,
    LoadMissData,
    LoadMissOccurred,
    NormalData,
    ReservedPkt,
    TfoPacket,
)

__all__ = ["decode_branch", "encode_branch", "iter_elements"]

# ISA → (low address bit of the first byte, bits in the fifth byte, fifth-byte marker).
_LAYOUT = {Isa.A32: (2, 3, 0x08), Isa.T32: (1, 4, 0x10), Isa.JAZELLE: (0, 5, 0x20)}


def _isa_of_fifth(b: int) -> Isa | None:
    """The state a fifth address byte names (bits 7 and 5:3; bit 6 is not looked at)."""
    if b & 0xB8 == 0x08:
        return Isa.A32
    if b & 0xB0 == 0x10:
        return Isa.T32
    if b & 0xA0 == 0x20:
        return Isa.JAZELLE
    return None


def decode_branch(data: bytes, prev: int, isa: Isa) -> tuple[int, Isa]:
    """The target of a branch address packet, given the previous address and state."""
    n = len(data)
    if n == 5:
        new_isa = _isa_of_fifth(data[4])
        if new_isa is not None:
            isa = new_isa
    lo, top, _mark = _LAYOUT.get(isa, _LAYOUT[Isa.A32])
    value = (data[0] >> 1) & 0x3F
    bits = 6
    for k in range(1, min(n, 4)):
        value |= (data[k] & 0x7F) << bits
        bits += 7
    if n == 5:
        value |= (data[4] & ((1 << top) - 1)) << bits
        bits += top
    mask = ((1 << bits) - 1) << lo
    addr = (prev & ~mask & 0xFFFFFFFF) | ((value << lo) & mask)
    return addr & 0xFFFFFFFF & ~((1 << lo) - 1), isa


def encode_branch(addr: int, prev: int, isa: Isa, prev_isa: Isa) -> bytes:
    """The branch address packet for ``addr`` after ``prev`` (the inverse of decode_branch)."""
    lo, top, mark = _LAYOUT[isa]
    v = addr >> lo
    pv = prev >> lo
    n = 5
    if isa == prev_isa:
        for k in range(1, 5):
            shift = 6 + 7 * (k - 1)
            if (v >> shift) == (pv >> shift):
                n = k
                break
    out = [(((v & 0x3F) << 1) | 1) | (0x80 if n > 1 else 0)]
    shift = 6
    for k in range(1, min(n, 4)):
        out.append(((v >> shift) & 0x7F) | (0x80 if k < n - 1 else 0))
        shift += 7
    if n == 5:
        out.append(mark | ((v >> shift) & ((1 << top) - 1)))
    return bytes(out)


_EXECUTED = {0: True, 1: True, 2: False, 3: False}


def iter_elements(
    packets: Iterable[Packet], config: ClassicEtmConfig, context: DecodeContext
) -> Iterator[Element]:
    """Decode ETMv2 cycles into generic elements."""
    f = Flow(context.memory)
    yield NoSync(0, UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER)
    baddr = 0
    bisa = Isa.A32
    daddr = 0
    ctxid: int | None = None
    last = 0
    pending: list[Element] = []
    # Load misses waiting for their value, by tag: (instruction address, data address).
    misses: dict[int, tuple[int | None, int | None]] = {}

    def ctx_elem(off: int) -> PEContext:
        info = PEContextInfo(ctxt_id_valid=ctxid is not None, context_id=ctxid or 0)
        return PEContext(off, info, Isa.T32 if f.thumb else Isa.A32)

    def flush(off: int) -> Iterator[Element]:
        yield from f.close(off)
        if pending:
            yield from pending
            pending.clear()

    def data_address(addr: bytes) -> int:
        """The full data address of compressed address bytes (IHI 0014Q §6.4.2)."""
        nonlocal daddr
        v = 0
        for k, b in enumerate(addr):
            v |= ((b & 0xF) << 28) if k == 4 else ((b & 0x7F) << (7 * k))
        bits = 32 if len(addr) == 5 else 7 * len(addr)
        mask = (1 << bits) - 1
        daddr = (daddr & ~mask & 0xFFFFFFFF) | v
        return daddr

    def lsm_executed(off: int, pk: TfoPacket, lsm: int) -> Iterator[Element]:
        """An LSM-in-progress TFO: the LSM executed, then execution goes on at the address."""
        f.pc, f.thumb = lsm & ~1, bool(lsm & 1)
        yield from _execute(f, off, None, pending)
        # The packet says where execution goes on, even when the image lacks the LSM.
        f.pc, f.thumb, f.ok = pk.address & ~1, bool(pk.address & 1), True

    for p in packets:
        if not isinstance(p, Cycle2):
            continue
        off = p.offset
        last = off
        if p.trigger:
            pending.append(Event(off, EventType.TRIGGER))
        group = p.group or ()
        branch: BranchAddr | None = None
        data: list[NormalData] = []
        miss: LoadMissOccurred | None = None
        for pk in group:
            if isinstance(pk, TfoPacket):
                if pk.context_id is not None and pk.context_id != ctxid:
                    ctxid = pk.context_id
                    f.mem.set_context(ctxid)
                baddr = pk.address & ~1
                bisa = Isa.JAZELLE if pk.jazelle else (Isa.T32 if pk.address & 1 else Isa.A32)
                lsm = pk.lsm_address
                if pk.reason == 0 and f.ok:
                    # A periodic TFO: its TD stands for an executed instruction
                    # (the LSM, for an LSM-in-progress packet).
                    if lsm is not None:
                        yield from lsm_executed(off, pk, lsm)
                    else:
                        f.pc, f.thumb = pk.address & ~1, bool(pk.address & 1)
                        yield from _execute(f, off, None, pending)
                    continue
                yield from flush(off)
                why = {2: TraceOnReason.OVERFLOW, 3: TraceOnReason.EX_DEBUG}.get(
                    pk.reason, TraceOnReason.NORMAL
                )
                if pk.reason == 2:
                    misses.clear()  # values of loads before the overflow are lost
                f.pc, f.thumb, f.ok = pk.address & ~1, bool(pk.address & 1), True
                yield TraceOn(off, why)
                yield ctx_elem(off)
                if lsm is not None:
                    yield from lsm_executed(off, pk, lsm)
                elif pk.reason == 0:
                    yield from _execute(f, off, None, pending)
            elif isinstance(pk, BranchAddr):
                branch = pk
            elif isinstance(pk, NormalData):
                data.append(pk)
            elif isinstance(pk, LoadMissOccurred):
                miss = pk
            elif isinstance(pk, LoadMissData):
                pc_addr = misses.pop(pk.tag, (None, None))
                value = pk.value if config.data_value else None
                pending.append(Custom(off, DataTransfer(pc_addr[0], pc_addr[1], value)))
            elif isinstance(pk, ContextIdPkt):
                if pk.value != ctxid:
                    ctxid = pk.value
                    f.mem.set_context(ctxid)
                    yield from flush(off)
                    yield ctx_elem(off)
            elif isinstance(pk, ReservedPkt):
                yield from flush(off)
                yield NoSync(off, UnsyncReason.BAD_PACKET)
                f.ok = False
        if p.group is None or p.tfo is not None:
            continue
        st = p.status
        if st in (6, 7):
            continue
        target: int | None = None
        tthumb = False
        if branch is not None:
            baddr, bisa = decode_branch(branch.data, baddr, bisa)
            target, tthumb = baddr, bisa == Isa.T32
        # Data transfers of this cycle.
        dt: DataTransfer | None = None
        if data:
            address: int | None = None
            if data[0].first and config.data_addr and data[0].addr:
                address = data_address(data[0].addr)
            value = b"".join(d.value for d in data) if config.data_value else None
            dt = DataTransfer(f.pc if f.ok else None, address, value)
        miss_address: int | None = None
        if miss is not None and miss.first and config.data_addr and miss.addr:
            miss_address = data_address(miss.addr)
        if st in (4, 5):
            if target is not None and f.ok:
                vec = None if tthumb else _vector(target)
                yield from flush(off)
                if vec is not None:
                    yield Exception_(off, vec[0], f.pc)
                f.pc, f.thumb = target, tthumb
            elif target is not None:
                f.pc, f.thumb, f.ok = target, tthumb, True
                yield TraceOn(off, TraceOnReason.NORMAL)
                yield ctx_elem(off)
            continue
        if not f.ok:
            if target is not None:
                f.pc, f.thumb, f.ok = target, tthumb, True
                yield TraceOn(off, TraceOnReason.NORMAL)
                yield ctx_elem(off)
            continue
        if st >= 8:
            # A folded branch phantom first: taken (PT) or not (PN).
            s = f.step()
            if s is None:
                yield from f.run(1, off)
                continue
            yield from f.add(s, off, st < 12)
            yield from f.close(off)
            if st < 12 and s.target is not None:
                f.pc, f.thumb = s.target, s.target_thumb
            else:
                f.pc = (f.pc + s.size) & 0xFFFFFFFF
            st &= 3
        executed = _EXECUTED[st & 3]
        if dt is not None:
            dt.pc = f.pc
            pending.append(Custom(off, dt))
        if miss is not None:
            misses[miss.tag] = (f.pc, miss_address)
        yield from _execute(
            f, off, (target, tthumb) if target is not None else None, pending, executed
        )
    yield from flush(last)
    if context.complete:
        yield EoTrace(last)


def _vector(addr: int) -> tuple[int, bool] | None:
    if addr < 0x20 or 0xFFFF0000 <= addr < 0xFFFF0020:
        return VECTOR_EXCEPTIONS.get(addr & 0x1F)
    return None


def _execute(
    f: Flow,
    off: int,
    branch: tuple[int, bool] | None,
    pending: list[Element],
    executed: bool = True,
) -> Iterator[Element]:
    """One instruction at the PC: sequential, a direct branch, or to ``branch``."""
    s = f.step()
    if s is None:
        yield from f.run(1, off)  # reports the inaccessible address
        return
    yield from f.add(s, off, executed)
    if branch is not None:
        target, thumb = branch
        vec = None if thumb else _vector(target)
        ret = (f.pc + s.size) & 0xFFFFFFFF
        yield from f.close(off)
        yield from pending
        pending.clear()
        if vec is not None:
            yield Exception_(off, vec[0], ret if vec[0] in (9, 10) else f.pc)
        f.pc, f.thumb = target, thumb
        return
    if executed and s.target is not None:
        yield from f.close(off)
        yield from pending
        pending.clear()
        f.pc, f.thumb = s.target, s.target_thumb
        return
    if s.is_branch:
        yield from f.close(off)
        yield from pending
        pending.clear()
    f.pc = (f.pc + s.size) & 0xFFFFFFFF
