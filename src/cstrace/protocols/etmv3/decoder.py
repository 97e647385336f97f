"""ETMv3 program-flow decoder: ETMv3 packets + code memory → generic trace elements.

Input: the packets of :mod:`cstrace.protocols.etmv3.reader`, the
:class:`~cstrace.protocols.etmv3.config.Etmv3Config` and a
:class:`~cstrace.protocols.base.DecodeContext` (code memory of the traced core);
output: :mod:`cstrace.elements` elements, as the reference decoder (OpenCSD's
ETMv3 decoder) produces them.

ETMv3 traces every instruction (IHI 0014Q §7.3.1): each P-header atom is one
instruction, executed (E) or failing its condition code (N). The decoder reads
the instruction at the current address, gives it an ``INSTR_RANGE`` of one
instruction (one lookup in the block cache of :mod:`cstrace.isa.blocks`) and
moves to the next address (the branch target when a direct
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

The decoder drives the code memory: ``set_context`` on context IDs and VMIDs,
and ``advance(time)`` as each ``TIMESTAMP`` leaves the ring.

A packet the reference cannot decode once synchronised (a reserved header, a
malformed A-sync, data trace) stops its whole decode: no element follows,
not even the end of trace; a :class:`~cstrace.elements.Diagnostic` says why.
A configuration with data tracing is not decoded at all, as in the reference.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator

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
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.isa import IsaOptions, Profile
from cstrace.isa.blocks import BlockCache
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
_T32 = int(Isa.T32)
_ISAS = tuple(Isa)
_BR = int(InstrType.BR)
_BR_IND = int(InstrType.BR_INDIRECT)


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
    """The reference's output element ring: allocate, hold back (pend), cancel, send.

    ``on_time`` is called with the time of every ``TIMESTAMP`` sent, as it is sent.
    """

    __slots__ = ("first", "on_time", "pend", "slots", "used")

    def __init__(self, on_time: Callable[[int], None]) -> None:
        self.slots: list[_Slot] = []
        self.first = 0
        self.used = 0
        self.pend = 0
        self.on_time = on_time

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
                if type(e) is Timestamp:
                    # Trace time moves when its element goes out (a timestamp
                    # held back or cancelled does not move it).
                    self.on_time(e.timestamp)
                yield e


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

    ca = config.cycle_accurate
    m_profile = config.profile == Profile.M
    blocks = BlockCache.shared(context.memory, IsaOptions(config.arch, config.profile))
    memory = blocks.memory
    q = _Queue(memory.advance)
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
    # packets skipped while waiting for synchronisation: their bytes, the first one's index
    waited = waited_at = 0

    # One-instruction tables of the current memory view and space, indexed by ISA.
    generation = memory.generation
    cache_space = MemSpace.S
    instrs = blocks.instr_tables(cache_space)

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
            elif type(pkt) is not NotSync:  # (the reader counts those)
                waited, waited_at = _skipped(pkt, waited, waited_at)
            continue
        if state == 2:
            is_isync = type(pkt) is ISync
            if not is_isync and not (
                type(pkt) is TimestampPacket
                or (ca and (type(pkt) is PHeader or type(pkt) is CycleCountPacket))
            ):
                if type(pkt) is not NotSync and type(pkt) is not ASync:
                    waited, waited_at = _skipped(pkt, waited, waited_at)
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
            isa_i = int(isa)  # the same, as a plain int for the tables
            count = pkt.count
            bits = pkt.atoms
            fmt = pkt.fmt
            space = MemSpace.S if sec == SecLevel.SECURE else MemSpace.N
            mgen = memory.generation
            if mgen != generation or space != cache_space:
                generation = mgen
                cache_space = space
                instrs = blocks.instr_tables(space)
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
                        executed = (bits & 1) == 1
                        if isa_i <= _T32:  # A32 or T32: classified
                            blk = instrs[isa_i].get(iaddr)
                            if blk is None:
                                blk = blocks.instr(iaddr, isa_i, space)
                            readable = blk.found
                        else:
                            blk = None
                            readable = blocks.readable(iaddr, space)
                        if blk is not None and readable:
                            # One instruction per atom: the shared tail, no tuple per block.
                            rng = InstrRange(off, iaddr, blk.end, 1, isa, executed, *blk.tail, acc)
                            slot.elem = slot.rng = rng
                            slot.isa = isa
                            slot.start = None
                            if not executed:
                                iaddr = blk.end
                            else:
                                itype = blk.itype
                                if itype == _BR:
                                    iaddr = blk.target
                                elif itype == _BR_IND:
                                    need_addr = True
                                    sent_unknown = False
                                else:
                                    iaddr = blk.end
                            nisa = blk.next_isa
                            if nisa == isa_i:
                                follower_isa = isa
                            else:  # BLX (immediate): A32 <-> T32
                                isa = follower_isa = _ISAS[nisa]
                                isa_i = nisa
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
                                isa_i = int(isa)
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
                if waited:
                    q.put(_sync_wait(waited_at, tid, waited))
                    waited = 0

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
        if waited:
            q.put(_sync_wait(waited_at, tid, waited))
        q.put(EoTrace(last_offset, UnsyncReason.EOT))
        q.commit()
        yield from q.send()


def _skipped(pkt: Packet, waited: int, waited_at: int) -> tuple[int, int]:
    """Count a packet skipped while waiting for synchronisation: (bytes, first index)."""
    return waited + len(pkt.raw), (waited_at if waited else pkt.offset)


def _sync_wait(offset: int, trace_id: int, waited: int) -> Diagnostic:
    """The count of the packets skipped while waiting for synchronisation."""
    return Diagnostic(offset, trace_id, DiagCode.NONE, DiagKind.SYNC_WAIT, waited, Severity.WARNING)


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
