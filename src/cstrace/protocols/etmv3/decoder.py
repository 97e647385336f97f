"""ETMv3 program-flow decoder: ETMv3 packets + code memory → generic trace elements.

Input: the packets of :mod:`cstrace.protocols.etmv3.reader`, the
:class:`~cstrace.protocols.etmv3.config.Etmv3Config` and a
:class:`~cstrace.protocols.base.DecodeContext` (code memory of the traced core);
output: :mod:`cstrace.elements` elements, as the reference decoder (OpenCSD's
ETMv3 decoder) produces them.

ETMv3 traces every instruction (IHI 0014Q §7.3.1): each P-header atom is one
instruction, executed (E) or failing its condition code (N). The decoder reads
the instruction at the current address, gives it an ``INSTR_RANGE`` of one
instruction and moves to the next address (the branch target when a direct
branch is executed; an indirect branch waits for the branch address packet).
In cycle-accurate mode each range carries the W cycles of its atom, and
P-headers with only W atoms give ``CYCLE_COUNT`` elements.

The reference queues its output in a small ring of reusable element records,
and a few details of its output come from that: the last instruction range of
a P-header is held back while it is the only element queued (an exception
with "cancel previous instruction" may remove it), an exception return holds
back itself and the range before it, and some elements are sent with values
left in their record by an earlier element (the instruction set of a
``PE_CONTEXT`` made by a context ID, VMID or exception packet; the range of an
instruction the reference cannot decode). :class:`_Queue` reproduces that ring.

A packet the reference cannot decode once synchronised (a reserved header, a
malformed A-sync, data trace) stops its whole decode: no element follows,
not even the end of trace; a :class:`~cstrace.elements.Diagnostic` says why.
A configuration with data tracing is not decoded at all, as in the reference.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from cstrace.elements import (
    AddrNacc,
    AddrUnknown,
    CycleCount,
    Diagnostic,
    Element,
    EoTrace,
    Event,
    EventType,
    Exception_,
    ExceptionRet,
    ExLevel,
    InstrRange,
    InstrSubtype,
    InstrType,
    Isa,
    MemSpace,
    NoSync,
    PEContext,
    PEContextInfo,
    SecLevel,
    Timestamp,
    TraceOn,
    TraceOnReason,
    Unknown,
    UnsyncReason,
)
from cstrace.errors import DiagCode, DiagKind
from cstrace.isa import IsaOptions, Profile
from cstrace.isa.decode import cls_cache
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.packets import (
    VMID,
    ASync,
    BadSequence,
    BranchAddress,
    ContextID,
    ExceptionEntry,
    ExceptionExit,
    Ignore,
    ISync,
    ISyncReason,
    NotSync,
    PHeader,
    Reserved,
)
from cstrace.protocols.etmv3.packets import CycleCount as CycleCountPacket
from cstrace.protocols.etmv3.packets import Timestamp as TimestampPacket
from cstrace.protocols.etmv3.packets import Trigger as TriggerPacket

__all__ = ["iter_elements"]

_TRACE_ON = (
    TraceOnReason.NORMAL,
    TraceOnReason.NORMAL,
    TraceOnReason.OVERFLOW,
    TraceOnReason.EX_DEBUG,
)
_CLASSIFIED = (Isa.A32, Isa.T32)


class _Slot:
    """One reusable element record of the reference's output ring.

    Besides the element last built in it, a record keeps the fields that some
    elements leave as they were: the instruction set and the range fields.
    """

    __slots__ = ("elem", "isa", "rng", "start")

    def __init__(self) -> None:
        self.elem: Element | None = None
        self.isa = Isa.A32  # a fresh record reads as A32
        self.start: int | None = None  # a start address set after the last range
        self.rng: InstrRange | None = None  # the last range built in this record


class _Queue:
    """The reference's output element ring: allocate, hold back (pend), cancel, send."""

    __slots__ = ("first", "pend", "slots", "used")

    def __init__(self) -> None:
        self.slots: list[_Slot] = []
        self.first = 0
        self.used = 0
        self.pend = 0

    def reset(self) -> None:
        """Forget every queued element (the records keep their contents)."""
        self.first = 0
        self.used = 0
        self.pend = 0

    def alloc(self) -> _Slot:
        """The next record, growing the ring by half when every record is in use."""
        size = len(self.slots)
        if self.used == size:
            grow = 8 if size == 0 else size // 2
            f = self.first
            self.slots = self.slots[f:] + self.slots[:f] + [_Slot() for _ in range(grow)]
            self.first = 0
            size += grow
        self.used += 1
        return self.slots[(self.first + self.used - 1) % size]

    def put(self, elem: Element) -> _Slot:
        """Queue ``elem`` in the next record."""
        slot = self.alloc()
        slot.elem = elem
        return slot

    def last_type(self, back: int = 1) -> type | None:
        """The type of the element ``back`` places from the end of the queue."""
        if self.used < back:
            return None
        e = self.slots[(self.first + self.used - back) % len(self.slots)].elem
        return type(e)

    def pend_last(self, count: int) -> None:
        """Hold back the last ``count`` elements (only when nothing else is queued)."""
        if count >= self.used:
            self.pend = count

    def commit(self) -> None:
        """Release the held-back elements."""
        self.pend = 0

    def cancel(self) -> None:
        """Drop the held-back elements (the reference keeps its hold-back count)."""
        if self.pend > 0:
            self.used -= self.pend

    def send(self) -> Iterator[Element]:
        """Yield the queued elements that are not held back."""
        slots = self.slots
        while self.used - self.pend > 0:
            e = slots[self.first].elem
            self.first = (self.first + 1) % len(slots)
            self.used -= 1
            if e is not None:
                yield e


_Info = tuple[int, InstrType, InstrSubtype, bool, int | None, Isa]
_SHARED: weakref.WeakKeyDictionary[Any, dict[tuple[int, int], dict[int, _Info | None]]] = (
    weakref.WeakKeyDictionary()
)


def _instr_cache(memory: Any, generation: int, space: MemSpace) -> dict[int, _Info | None]:
    """The instruction cache of a memory view and space, shared by the decoders of a session."""
    if memory is None:
        return {}
    try:
        per = _SHARED.get(memory)
        if per is None:
            per = _SHARED[memory] = {}
    except TypeError:  # a memory object that cannot be weakly referenced: no sharing
        return {}
    key = (generation, int(space))
    cache = per.get(key)
    if cache is None:
        if len(per) >= 16:
            per.clear()
        cache = per[key] = {}
    return cache


def _restamp(elem: Element | None, offset: int) -> Element:
    """An element record re-sent unchanged except for its index."""
    if elem is None:
        return Unknown(offset)
    e = copy.copy(elem)
    e.offset = offset
    return e


def iter_elements(
    packets: Iterable[Packet], config: Etmv3Config, context: DecodeContext
) -> Iterator[Element]:
    """Decode ETMv3 packets into generic trace elements."""
    it = iter(packets)
    tid = config.trace_id
    if not config.instr_trace or config.data_trace:
        # The reference refuses data trace configurations: its decode stops at
        # the first packet.
        first = next(it, None)
        if first is not None:
            yield Diagnostic(first.offset, tid, DiagCode.NOT_INIT, DiagKind.NO_CONFIG)
        return

    memory = context.memory
    ca = config.cycle_accurate
    m_profile = config.profile == Profile.M
    opts = IsaOptions(config.arch, config.profile)
    q = _Queue()
    unsync = UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER

    # Decoder state.
    state = 0  # 0 no sync, 1 wait A-sync, 2 wait I-sync, 3 decode
    need_addr = True
    sent_unknown = False
    iaddr = 0
    sec = SecLevel.SECURE
    el = ExLevel.UNKNOWN
    el_valid = False
    ctxid = 0
    ctxid_valid = False
    vmid = 0
    vmid_valid = False
    last_offset = 0
    follower_isa = Isa.A32  # the ISA after the last instruction the follower decoded

    # Instruction cache for the current memory view and space: (address << 3 | isa) → info,
    # or None when the 4 bytes the reference fetches are not mapped (ADDR_NACC).
    generation = getattr(memory, "generation", 0)
    cache_space = MemSpace.S
    cache = _instr_cache(memory, generation, cache_space)
    cls_t32, cls_t32_fn = cls_cache(Isa.T32, opts)
    cls_a32, cls_a32_fn = cls_cache(Isa.A32, opts)

    def instr_at(address: int, isa: Isa, space: MemSpace) -> _Info | None:
        """(size, type, subtype, cond, direct target, next isa) of an instruction; None = NACC."""
        if memory is None:
            return None
        region = memory.find(address, space)
        if region is None:
            return None
        off = address - region.start
        b = region.data[off : off + 4]
        if len(b) < 4:
            return None
        if isa == Isa.T32:
            op = (b[1] << 24) | (b[0] << 16) | (b[3] << 8) | b[2]
            if (op >> 27) < 0x1D:  # a 16-bit instruction: the second halfword is not part of it
                op &= 0xFFFF0000
            c = cls_t32.get(op)
            if c is None:
                c = cls_t32[op] = cls_t32_fn(op)
        else:
            op = b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)
            c = cls_a32.get(op)
            if c is None:
                c = cls_a32[op] = cls_a32_fn(op)
        size, itype, subtype, cond, _link, rel, align, switch, _it = c
        target = None
        nisa = isa
        if rel is not None:
            target = ((address & align) + rel) & 0xFFFFFFFF & ~1
            if switch:
                nisa = Isa.T32 if isa == Isa.A32 else Isa.A32
        return size, InstrType(itype), InstrSubtype(subtype), cond, target, nisa

    def readable_at(address: int, space: MemSpace) -> bool:
        """Whether the 4 bytes the reference fetches per instruction are mapped."""
        if memory is None:
            return False
        region = memory.find(address, space)
        return region is not None and address + 4 <= region.start + len(region.data)

    def context_info() -> PEContextInfo:
        return PEContextInfo(sec, el, ctxid, vmid, False, ctxid_valid, vmid_valid, el_valid)

    for pkt in it:
        off = pkt.offset
        last_offset = off

        if state == 0:
            q.put(NoSync(off, unsync))
            if q.used > q.pend:
                yield from q.send()
            state = 1
        if state == 1:
            if type(pkt) is ASync:
                state = 2
            continue
        if state == 2:
            is_isync = type(pkt) is ISync
            if not is_isync and not (
                type(pkt) is TimestampPacket
                or (ca and (type(pkt) is PHeader or type(pkt) is CycleCountPacket))
            ):
                continue
        else:
            is_isync = False
        first_sync = is_isync

        # ---- Decode one packet (the reference's decodePacket / processISync).
        tp = type(pkt)
        if tp is not BranchAddress:
            q.commit()

        if tp is PHeader:
            assert isinstance(pkt, PHeader)
            isa = pkt.isa
            count = pkt.count
            bits = pkt.atoms
            fmt = pkt.fmt
            space = MemSpace.S if sec == SecLevel.SECURE else MemSpace.N
            mgen = getattr(memory, "generation", 0)
            if mgen != generation or space != cache_space:
                generation = mgen
                cache_space = space
                cache = _instr_cache(memory, generation, space)
            while True:
                if need_addr:
                    if not sent_unknown or ca:
                        cc: int | None = None
                        if ca:
                            cc = (
                                count
                                if fmt == 1
                                else pkt.cycles
                                if fmt == 3
                                else (1 if fmt == 2 and count > 1 else 0)
                            )
                        if sent_unknown or not count:
                            ce = CycleCount(off, 0)
                            ce.cycle_count = cc  # type: ignore[assignment]
                            q.put(ce)
                        else:
                            q.put(AddrUnknown(off, cc))
                        sent_unknown = True
                    count = 0
                else:
                    slot = q.alloc()
                    acc: int | None = None
                    if ca:
                        acc = (
                            1
                            if fmt == 1
                            else pkt.cycles
                            if fmt == 3
                            else (1 if fmt == 2 and count > 1 else 0)
                        )
                    if not count:
                        if ca:
                            slot.elem = CycleCount(off, acc or 0)
                        else:
                            slot.elem = _stale_range(slot, off, acc)
                    else:
                        executed = bool(bits & 1)
                        info: _Info | None = None
                        if isa in _CLASSIFIED:
                            key = (iaddr << 3) | isa
                            if key in cache:
                                info = cache[key]
                            else:
                                info = cache[key] = instr_at(iaddr, isa, space)
                            readable = info is not None
                        else:
                            readable = readable_at(iaddr, space)
                        if info is not None:
                            size, itype, subtype, cond, target, nisa = info
                            slot.elem = InstrRange(
                                off,
                                iaddr,
                                iaddr + size,
                                1,
                                isa,
                                executed,
                                size,
                                itype,
                                subtype,
                                cond,
                                acc,
                            )
                            slot.isa = isa
                            slot.rng = slot.elem
                            slot.start = None
                            nxt: int | None = iaddr + size
                            if executed:
                                if itype == InstrType.BR:
                                    nxt = target
                                elif itype == InstrType.BR_INDIRECT:
                                    nxt = None
                            if nxt is None:
                                need_addr = True
                                sent_unknown = False
                            else:
                                iaddr = nxt
                            follower_isa = nisa
                            if nisa != isa:
                                isa = nisa
                        elif not readable:
                            slot.elem = AddrNacc(off, iaddr, space, acc)
                            slot.start = iaddr
                            need_addr = True
                            sent_unknown = False
                        else:
                            # An instruction set the reference cannot decode (ThumbEE,
                            # Jazelle): no range, no NACC, and the next atom is read with
                            # the instruction set its follower decoded last.
                            slot.elem = _stale_range(slot, off, acc)
                            if follower_isa != isa:
                                isa = follower_isa
                    bits >>= 1
                    if count:
                        count -= 1
                if not count:
                    break
            if q.used and q.last_type() is InstrRange:
                q.pend_last(1)

        elif tp is BranchAddress:
            assert isinstance(pkt, BranchAddress)
            if pkt.exception is not None and pkt.cancel:
                q.cancel()
            else:
                q.commit()
            iaddr = pkt.address
            need_addr = False
            sent_unknown = False
            if pkt.exception is not None:
                update = False
                if pkt.ctxt_updated:
                    nsec = SecLevel.NONSECURE if pkt.ns else SecLevel.SECURE
                    if nsec != sec:
                        sec = nsec
                        update = True
                    nel = ExLevel.EL2 if pkt.hyp else ExLevel.UNKNOWN
                    if nel != el:
                        el = nel
                        el_valid = True
                        update = True
                if update:
                    slot = q.alloc()
                    slot.elem = PEContext(off, context_info(), slot.isa)
                if pkt.exception:
                    slot = q.alloc()
                    slot.elem = Exception_(off, pkt.exception)

        elif tp is ISync:
            assert isinstance(pkt, ISync)
            slot = q.alloc()
            if first_sync or pkt.reason != ISyncReason.PERIODIC:
                slot.elem = TraceOn(off, _TRACE_ON[pkt.reason])
                slot = q.alloc()
            if pkt.complete or first_sync:
                if first_sync:
                    sec = SecLevel.SECURE
                    el = ExLevel.UNKNOWN
                    el_valid = False
                    ctxid = vmid = 0
                    ctxid_valid = vmid_valid = False
                if pkt.context_id is not None:
                    ctxid = pkt.context_id
                    ctxid_valid = True
                    if memory is not None:
                        memory.set_context(ctxid, vmid if vmid_valid else None)
                if pkt.complete:
                    el = ExLevel.EL2 if pkt.hyp else ExLevel.UNKNOWN
                    el_valid = True
                    sec = SecLevel.NONSECURE if pkt.ns else SecLevel.SECURE
                slot.elem = PEContext(off, context_info(), pkt.isa, pkt.cycle_count)
                slot.isa = pkt.isa
            else:
                slot.elem = _restamp(slot.elem, off)
            if not pkt.no_address:
                iaddr = pkt.address
                need_addr = False
                sent_unknown = False
            if first_sync:
                state = 3

        elif tp is CycleCountPacket:
            assert isinstance(pkt, CycleCountPacket)
            q.put(CycleCount(off, pkt.count))
        elif tp is TimestampPacket:
            assert isinstance(pkt, TimestampPacket)
            q.put(Timestamp(off, pkt.timestamp))
        elif tp is ASync or tp is Ignore:
            pass
        elif tp is TriggerPacket:
            q.put(Event(off, EventType.TRIGGER))
        elif tp is ContextID or tp is VMID:
            if isinstance(pkt, ContextID):
                ctxid = pkt.context_id
                ctxid_valid = True
            else:
                assert isinstance(pkt, VMID)
                vmid = pkt.vmid
                vmid_valid = True
            if memory is not None:
                memory.set_context(ctxid if ctxid_valid else None, vmid if vmid_valid else None)
            slot = q.alloc()
            slot.elem = PEContext(off, context_info(), slot.isa)
        elif tp is ExceptionEntry:
            slot = q.alloc()
            slot.elem = Exception_(off, 0, data_marker=True)
        elif tp is ExceptionExit:
            q.put(ExceptionRet(off))
            count_back = 1
            if not m_profile and q.used > 1 and q.last_type(2) is InstrRange:
                count_back = 2
            q.pend_last(count_back)
        elif tp is NotSync:
            # Lost synchronisation: start again from an A-sync.
            unsync = UnsyncReason.BAD_PACKET
            q.reset()
            state = 0
            need_addr = True
            sent_unknown = False
            continue
        else:
            # Reserved headers, bad sequences and data trace: the reference stops.
            if tp is BadSequence:
                yield Diagnostic(off, tid, DiagCode.BAD_PACKET_SEQ, DiagKind.BAD_SEQUENCE)
            elif tp is Reserved:
                yield Diagnostic(off, tid, DiagCode.BAD_PACKET_SEQ, DiagKind.BAD_PACKET)
            else:
                yield Diagnostic(off, tid, DiagCode.HW_CFG_UNSUPP, DiagKind.DATA_TRACE)
            return

        if q.used > q.pend:
            yield from q.send()

    if context.complete:
        q.commit()
        q.put(EoTrace(last_offset, UnsyncReason.EOT))
        q.commit()
        yield from q.send()


def _stale_range(slot: _Slot, offset: int, cycle_count: int | None) -> Element:
    """A range record typed but never filled: the reference sends its leftover fields."""
    r = slot.rng
    start = r.start if r is not None else 0
    if slot.start is not None:
        start = slot.start
    return InstrRange(
        offset,
        start,
        r.end if r is not None else 0,
        0,
        slot.isa,
        False,
        0,
        r.last_type if r is not None else InstrType.OTHER,
        r.last_subtype if r is not None else InstrSubtype.NONE,
        False,
        cycle_count,
    )
