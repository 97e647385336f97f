"""ETMv3 program-flow decoder: ETMv3 packet fields + code memory → generic trace elements.

Input: the fields of each ETMv3 packet, handed over by the reader's loop
(:func:`cstrace.protocols.etmv3.reader.read`; its
:func:`~cstrace.protocols.etmv3.reader.iter_stream_rows` gives the element
rows) or taken from packet objects (:func:`iter_elements`), the
:class:`~cstrace.protocols.etmv3.config.Etmv3Config` and a
:class:`~cstrace.protocols.base.DecodeContext` (code memory of the traced
core); output: :mod:`cstrace.elements` elements, as the reference decoder
(OpenCSD's ETMv3 decoder) produces them.

One decoder, :class:`Etmv3Decoder`, with one method per packet kind, built on
the protocol kit's :class:`~cstrace.protocols.kit.ElementSink` (the two sinks:
element objects one packet at a time, as the listing wants them, or element
columns with no object per ``INSTR_RANGE``: ``--format null``, Parquet, the
loss report). P-headers and branch addresses, most of the packets, come as
fields; the rare kinds as packet objects (:meth:`Etmv3Decoder.other`).

ETMv3 traces every instruction (IHI 0014Q §7.3.1): each P-header atom is one
instruction, executed (E) or failing its condition code (N). The decoder reads
the instruction at the current address, gives it an ``INSTR_RANGE`` of one
instruction (one lookup in the block cache of :mod:`cstrace.isa.blocks`) and
moves to the next address (the branch target when a direct
branch is executed; an indirect branch waits for the branch address packet).
In cycle-accurate mode each range carries the W cycles of its atom, and
P-headers with only W atoms give ``CYCLE_COUNT`` elements.

Synchronisation takes two packets: an A-sync, then an I-sync (the states
:data:`_NO_SYNC`, :data:`_WAIT_ASYNC`, :data:`_WAIT_ISYNC`, :data:`_SYNCED`;
while waiting for the I-sync, timestamps and, cycle-accurate, P-headers and
cycle counts are decoded). The bytes of the packets skipped meanwhile are
counted in a warning ``DIAGNOSTIC``.

The reference queues its output in a small ring of reusable element records,
and a few details of its output come from that: the last instruction range of
a P-header is held back while it is the only element queued (an exception
with "cancel previous instruction" may remove it), an exception return holds
back itself and the range before it, and some elements are sent with values
left in their record by an earlier element (the instruction set of a
``PE_CONTEXT`` made by a context ID, VMID or exception packet; the range of an
instruction the reference cannot decode). :class:`_Slot` is one record of that
ring; an ``INSTR_RANGE`` is kept in its record as fields, and becomes a row of
columns (or an object) only when it is sent.

The decoder drives the code memory: ``set_context`` on context IDs and VMIDs,
and ``advance(time)`` as each ``TIMESTAMP`` leaves the ring.

A packet the reference cannot decode once synchronised (a reserved header, a
malformed A-sync, data trace) stops its whole decode: no element follows,
not even the end of trace; a :class:`~cstrace.elements.Diagnostic` says why.
A configuration with data tracing is not decoded at all, as in the reference.
"""

from __future__ import annotations

import copy
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
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.isa import IsaOptions, Profile
from cstrace.isa.blocks import BlockCache, Instr
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
    NotSync,
    PHeader,
    Reserved,
)
from cstrace.protocols.etmv3.packets import CycleCount as CycleCountPacket
from cstrace.protocols.etmv3.packets import Timestamp as TimestampPacket
from cstrace.protocols.etmv3.packets import Trigger as TriggerPacket
from cstrace.protocols.kit import SINK_FIELDS, ElementSink, elements_of

__all__ = ["COLUMNS", "Etmv3Decoder", "iter_elements"]

_TRACE_ON = (
    TraceOnReason.NORMAL,
    TraceOnReason.NORMAL,
    TraceOnReason.OVERFLOW,
    TraceOnReason.EX_DEBUG,
)
_ISAS = tuple(Isa)
_ITYPES = tuple(InstrType)
_ISUBS = tuple(InstrSubtype)
_A32 = 0  # Isa.A32
_T32 = 1  # Isa.T32
_BR = 1  # InstrType.BR
_BR_IND = 2  # InstrType.BR_INDIRECT
_INSTR_RANGE = 5  # ElemType.INSTR_RANGE
_SPACE_S = int(MemSpace.S)
_SPACE_N = int(MemSpace.N)

# synchronisation states
_NO_SYNC = 0
_WAIT_ASYNC = 1
_WAIT_ISYNC = 2
_SYNCED = 3

# what a record holds
_OBJECT = 0  # an element object (``elem``)
_RANGE = 1  # an INSTR_RANGE, as fields
_CYCLES = 2  # a CYCLE_COUNT, as fields (offset, cc, cc_valid)
_CYCLE_COUNT = 12  # ElemType.CYCLE_COUNT

COLUMNS = (
    ("type", "uint8"),
    ("offset", "int64"),
    ("isa", "uint8"),
    ("start", "uint64"),
    ("end", "uint64"),
    ("num_instr", "uint32"),
    ("last_exec", "uint8"),
    ("last_size", "uint8"),
    ("last_type", "uint8"),
    ("last_subtype", "uint8"),
    ("last_cond", "uint8"),
    ("cycle_count", "uint64"),
    ("cycle_count_valid", "uint8"),
)
"""The element columns the decoder writes (``INSTR_RANGE`` rows; booleans as bytes)."""


class _Slot:
    """One reusable element record of the reference's output ring.

    It holds an element object (``kind`` :data:`_OBJECT`) or the fields of an
    ``INSTR_RANGE`` (:data:`_RANGE`) or of a ``CYCLE_COUNT`` (:data:`_CYCLES`).
    Besides that, a record keeps what some elements leave as they were: the
    instruction set (``isa``), and the fields of the last range built in it
    (``l_*``) with a start address set since (``start``, when ``has_start``).
    """

    __slots__ = (
        "cc",
        "cc_valid",
        "cond",
        "elem",
        "end",
        "executed",
        "first",
        "fresh",
        "has_rng",
        "has_start",
        "isa",
        "itype",
        "kind",
        "l_end",
        "l_start",
        "l_subtype",
        "l_type",
        "num",
        "offset",
        "r_isa",
        "size",
        "start",
        "subtype",
    )

    def __init__(self) -> None:
        self.kind = _OBJECT
        self.elem: Element | None = None
        self.offset = 0
        self.isa = _A32  # a fresh record reads as A32
        self.has_start = False
        self.start = 0
        self.has_rng = False
        self.l_start = 0
        self.l_end = 0
        self.l_type = 0
        self.l_subtype = 0
        # the INSTR_RANGE held (kind _RANGE)
        self.first = 0
        self.end = 0
        self.num = 0
        self.r_isa = 0
        self.executed = False
        self.size = 0
        self.itype = 0
        self.subtype = 0
        self.cond = False
        self.cc = 0
        self.cc_valid = False
        self.fresh = False
        """A range was built in this record since the decoder was made (see
        :meth:`Etmv3Decoder.settled`)."""

    def put(self, elem: Element) -> None:
        """Hold an element object."""
        self.kind = _OBJECT
        self.elem = elem

    def cycles(self, offset: int, cc: int, cc_valid: bool) -> None:
        """Hold a ``CYCLE_COUNT`` (whose count is None unless ``cc_valid``)."""
        self.kind = _CYCLES
        self.offset = offset
        self.cc = cc
        self.cc_valid = cc_valid

    def stale_range(self, offset: int, cc: int, cc_valid: bool) -> None:
        """Hold a range record typed but never filled: the reference sends its leftover
        fields."""
        self.kind = _RANGE
        self.offset = offset
        self.first = self.start if self.has_start else self.l_start
        self.end = self.l_end
        self.num = 0
        self.r_isa = self.isa
        self.executed = False
        self.size = 0
        self.itype = self.l_type
        self.subtype = self.l_subtype
        self.cond = False
        self.cc = cc
        self.cc_valid = cc_valid

    def cycles_object(self) -> CycleCount:
        """The held ``CYCLE_COUNT`` as an object."""
        e = CycleCount(self.offset, 0)
        if self.cc_valid:
            e.cycle_count = self.cc
        else:
            e.cycle_count = None  # type: ignore[assignment]
        return e

    def range_object(self) -> InstrRange:
        """The held ``INSTR_RANGE`` as an object."""
        cc: int | None = None
        if self.cc_valid:
            cc = self.cc
        return InstrRange(
            self.offset,
            self.first,
            self.end,
            self.num,
            _ISAS[self.r_isa],
            self.executed,
            self.size,
            _ITYPES[self.itype],
            _ISUBS[self.subtype],
            self.cond,
            cc,
        )


class Etmv3Decoder(ElementSink):
    """The ETMv3 decoder: its state and one method per packet kind (module text).

    ``context`` None: a decoder for a tap only (:func:`~cstrace.protocols.kit.tapped`),
    without code memory. ``columns``: write elements as column rows
    (:meth:`~ElementSink.take`); otherwise as element objects in
    :attr:`~ElementSink.objects`.
    """

    def __init__(
        self,
        config: Etmv3Config,
        context: DecodeContext | None = None,
        columns: bool = False,
        size: int = 65536,
    ) -> None:
        self.recover = False
        self.refused = not config.instr_trace or config.data_trace
        """A configuration the reference does not decode (data trace)."""
        self.ca = config.cycle_accurate
        self.m_profile = config.profile == Profile.M
        self.blocks: Any = None
        self.memory: Any = None
        self.instrs: list[Any] = []
        self.generation: object = None
        if context is not None:
            self.blocks = BlockCache.shared(context.memory, IsaOptions(config.arch, config.profile))
            self.memory = self.blocks.memory
            self.generation = self.memory.generation
            self.instrs = self.blocks.instr_tables(_SPACE_S)
        self.cache_space = _SPACE_S
        self.sync = _NO_SYNC
        self.need_addr = True
        self.sent_unknown = False
        self.iaddr = 0
        self.sec = 0  # SecLevel.SECURE
        self.el_hyp = False  # ExLevel EL2 (True) or UNKNOWN
        self.el_valid = False
        self.ctxid = 0
        self.ctxid_valid = False
        self.vmid = 0
        self.vmid_valid = False
        self.follower_isa = _A32
        """The ISA after the last instruction the follower decoded."""
        self.waited = 0
        """Bytes of the packets skipped while waiting for synchronisation."""
        self.waited_at = 0
        # the output ring
        self.slots: list[_Slot] = []
        self.first = 0
        self.used = 0
        self.pend = 0
        reset = context.reset if context is not None else False
        super().__init__(config.trace_id, reset, columns, size, COLUMNS)

    def bind_columns(self) -> None:
        """Typed views of the columns."""
        arrays = self.arrays
        self.c_type = arrays["type"]
        self.c_offset = arrays["offset"]
        self.c_isa = arrays["isa"]
        self.c_start = arrays["start"]
        self.c_end = arrays["end"]
        self.c_num = arrays["num_instr"]
        self.c_exec = arrays["last_exec"]
        self.c_size = arrays["last_size"]
        self.c_itype = arrays["last_type"]
        self.c_sub = arrays["last_subtype"]
        self.c_cond = arrays["last_cond"]
        self.c_cc = arrays["cycle_count"]
        self.c_ccv = arrays["cycle_count_valid"]

    # ---------------------------------------------------------------- the ring

    def alloc(self) -> _Slot:
        """The next record, growing the ring by half when every record is in use."""
        slots = self.slots
        size = len(slots)
        if self.used == size:
            grow = 8 if size == 0 else size // 2
            f = self.first
            self.slots = slots = slots[f:] + slots[:f] + [_Slot() for _ in range(grow)]
            self.first = 0
            size += grow
        self.used += 1
        slot: _Slot = slots[(self.first + self.used - 1) % size]
        return slot

    def put(self, elem: Element) -> None:
        """Queue an element object in the next record."""
        self.alloc().put(elem)

    def last_is_range(self, back: int) -> bool:
        """Whether the element ``back`` places from the end of the ring is an ``INSTR_RANGE``."""
        if self.used < back:
            return False
        slots = self.slots
        slot: _Slot = slots[(self.first + self.used - back) % len(slots)]
        if slot.kind == _RANGE:
            return True
        return type(slot.elem) is InstrRange

    def pend_last(self, count: int) -> None:
        """Hold back the last ``count`` elements (only when nothing else is queued)."""
        if count >= self.used:
            self.pend = count

    def cancel(self) -> None:
        """Drop the held-back elements (the reference keeps its hold-back count)."""
        if self.pend > 0:
            self.used -= self.pend

    def send(self) -> None:
        """Output the queued elements that are not held back."""
        slots = self.slots
        size = len(slots)
        while self.used - self.pend > 0:
            slot: _Slot = slots[self.first]
            self.first = (self.first + 1) % size
            self.used -= 1
            if slot.kind == _RANGE:
                self.range_out(slot)
                continue
            if slot.kind == _CYCLES:
                self.cycles_out(slot)
                continue
            e = slot.elem
            if e is not None:
                if type(e) is Timestamp:
                    # Trace time moves when its element goes out (a timestamp
                    # held back or cancelled does not move it).
                    self.memory.advance(e.timestamp)
                self.element(e)

    def cycles_out(self, slot: _Slot) -> None:
        """Output the ``CYCLE_COUNT`` held in ``slot``."""
        if not self.as_columns:
            self.objects.append(slot.cycles_object())
            return
        r = self.next_row()
        self.c_type[r] = _CYCLE_COUNT
        self.c_offset[r] = slot.offset
        self.c_cc[r] = slot.cc
        self.c_ccv[r] = slot.cc_valid

    def range_out(self, slot: _Slot) -> None:
        """Output the ``INSTR_RANGE`` held in ``slot``."""
        if not self.as_columns:
            self.objects.append(slot.range_object())
            return
        r = self.next_row()
        self.c_type[r] = _INSTR_RANGE
        self.c_offset[r] = slot.offset
        self.c_isa[r] = slot.r_isa
        self.c_start[r] = slot.first
        self.c_end[r] = slot.end
        self.c_num[r] = slot.num
        self.c_exec[r] = slot.executed
        self.c_size[r] = slot.size
        self.c_itype[r] = slot.itype
        self.c_sub[r] = slot.subtype
        self.c_cond[r] = slot.cond
        self.c_cc[r] = slot.cc
        self.c_ccv[r] = slot.cc_valid

    # ---------------------------------------------------------------- state

    def context_info(self) -> PEContextInfo:
        """The PE context as the decoder knows it."""
        return PEContextInfo(
            SecLevel(self.sec),
            ExLevel.EL2 if self.el_hyp else ExLevel.UNKNOWN,
            self.ctxid,
            self.vmid,
            False,
            self.ctxid_valid,
            self.vmid_valid,
            self.el_valid,
        )

    def skipped(self, offset: int, size: int) -> None:
        """Count a packet skipped while waiting for synchronisation."""
        if not self.waited:
            self.waited_at = offset
        self.waited += size

    def sync_wait(self) -> None:
        """Queue the count of the packets skipped while waiting for synchronisation."""
        self.put(
            Diagnostic(
                self.waited_at,
                self.trace_id,
                DiagCode.NONE,
                DiagKind.SYNC_WAIT,
                self.waited,
                Severity.WARNING,
            )
        )
        self.waited = 0

    def begin(self, offset: int, size: int, kind: int) -> bool:
        """Before a packet of ``kind`` (:data:`_K_ISYNC`...) at capture index ``offset``:
        True when it is to be decoded (the synchronisation states)."""
        self.packets += 1
        if self.stopped:
            self.after_stop(offset, size)
            return False
        self.last = offset
        sync = self.sync
        if sync == _SYNCED:
            return True
        if sync == _NO_SYNC:
            self.put(NoSync(offset, self.reason))
            if self.used > self.pend:
                self.send()
            self.sync = sync = _WAIT_ASYNC
        if sync == _WAIT_ASYNC:
            if kind == _K_ASYNC:
                self.sync = _WAIT_ISYNC
            elif kind != _K_NOT_SYNC:  # (the reader counts those)
                self.skipped(offset, size)
            return False
        # waiting for an I-sync
        if kind in (_K_ISYNC, _K_TIMESTAMP):
            return True
        if self.ca and (kind in (_K_PHEADER, _K_CYCLE_COUNT)):
            return True
        if kind != _K_NOT_SYNC and kind != _K_ASYNC:
            self.skipped(offset, size)
        return False

    def done(self) -> None:
        """After a packet decoded: output what the ring lets go."""
        if self.used > self.pend:
            self.send()

    # ---------------------------------------------------------------- packets

    def pheader(self, offset: int, fmt: int, count: int, atoms: int, cycles: int, isa: int) -> None:
        """A P-header: ``count`` atoms (E bits in ``atoms``, oldest in bit 0), and ``cycles``
        W cycles (cycle-accurate) of format ``fmt``, in instruction set ``isa``."""
        if self.refused:
            self.refuse(offset, 1)
            return
        if not self.begin(offset, 1, _K_PHEADER):
            return
        self.pend = 0
        ca = self.ca
        space = _SPACE_S if self.sec == 0 else _SPACE_N
        memory = self.memory
        mgen = memory.generation
        if mgen != self.generation or space != self.cache_space:
            self.generation = mgen
            self.cache_space = space
            self.instrs = self.blocks.instr_tables(space)
        instrs = self.instrs
        blocks = self.blocks
        iaddr = self.iaddr
        bits = atoms
        while True:
            if self.need_addr:
                if not self.sent_unknown or ca:
                    cc = 0
                    if ca:
                        cc = (
                            count
                            if fmt == 1
                            else cycles
                            if fmt == 3
                            else (1 if fmt == 2 and count > 1 else 0)
                        )
                    if self.sent_unknown or not count:
                        self.alloc().cycles(offset, cc, ca)
                    else:
                        ccv: int | None = None
                        if ca:
                            ccv = cc
                        self.put(AddrUnknown(offset, ccv))
                    self.sent_unknown = True
                count = 0
            else:
                slot = self.alloc()
                acc = 0
                if ca:
                    acc = (
                        1
                        if fmt == 1
                        else cycles
                        if fmt == 3
                        else (1 if fmt == 2 and count > 1 else 0)
                    )
                if not count:
                    if ca:
                        slot.cycles(offset, acc, True)
                    else:
                        slot.stale_range(offset, 0, False)
                else:
                    executed = (bits & 1) == 1
                    readable = False
                    blk: Instr | None = None
                    if isa <= _T32:  # A32 or T32: classified
                        table: dict[int, Instr] = instrs[isa]
                        blk = table.get(iaddr)
                        if blk is None:
                            blk = blocks.instr(iaddr, isa, space)
                        readable = blk.found
                    else:
                        readable = blocks.readable(iaddr, space)
                    if blk is not None and readable:
                        # One instruction per atom: held as fields in the record.
                        slot.kind = _RANGE
                        slot.offset = offset
                        slot.first = slot.l_start = iaddr
                        slot.end = slot.l_end = blk.end
                        slot.num = 1
                        slot.r_isa = slot.isa = isa
                        slot.executed = executed
                        slot.size = blk.size
                        slot.itype = slot.l_type = blk.itype
                        slot.subtype = slot.l_subtype = blk.subtype
                        slot.cond = blk.cond
                        slot.cc = acc
                        slot.cc_valid = ca
                        slot.has_rng = slot.fresh = True
                        slot.has_start = False
                        if not executed:
                            iaddr = blk.end
                        else:
                            itype = blk.itype
                            if itype == _BR:
                                iaddr = blk.target
                            elif itype == _BR_IND:
                                self.need_addr = True
                                self.sent_unknown = False
                            else:
                                iaddr = blk.end
                        nisa = blk.next_isa
                        self.follower_isa = isa = nisa  # BLX (immediate): A32 <-> T32
                    elif not readable:
                        accv: int | None = None
                        if ca:
                            accv = acc
                        slot.put(AddrNacc(offset, iaddr, MemSpace(space), accv))
                        slot.start = iaddr
                        slot.has_start = True
                        self.need_addr = True
                        self.sent_unknown = False
                    else:
                        # An instruction set the reference cannot decode (ThumbEE,
                        # Jazelle): no range, no NACC, and the next atom is read with
                        # the instruction set its follower decoded last.
                        slot.stale_range(offset, acc, ca)
                        isa = self.follower_isa
                bits >>= 1
                if count:
                    count -= 1
            if not count:
                break
        self.iaddr = iaddr
        if self.used and self.last_is_range(1):
            self.pend_last(1)
        self.done()

    def branch(
        self,
        offset: int,
        size: int,
        address: int,
        has_exception: bool,
        exception: int,
        cancel: bool,
        ctxt_updated: bool,
        ns: bool,
        hyp: bool,
    ) -> None:
        """A branch address packet: the new address (``address``), and, with exception
        information (``has_exception``), the exception number, whether the last
        instruction was cancelled, and the security and Hyp state given."""
        if self.refused:
            self.refuse(offset, size)
            return
        if not self.begin(offset, size, _K_BRANCH):
            return
        if has_exception and cancel:
            self.cancel()
        else:
            self.pend = 0
        self.iaddr = address
        self.need_addr = False
        self.sent_unknown = False
        if has_exception:
            update = False
            if ctxt_updated:
                nsec = 1 if ns else 0
                if nsec != self.sec:
                    self.sec = nsec
                    update = True
                if hyp != self.el_hyp:
                    self.el_hyp = hyp
                    self.el_valid = True
                    update = True
            if update:
                slot = self.alloc()
                slot.put(PEContext(offset, self.context_info(), _ISAS[slot.isa]))
            if exception:
                self.put(Exception_(offset, exception))
        self.done()

    def isync(
        self,
        offset: int,
        size: int,
        reason: int,
        address: int,
        isa: int,
        ns: bool,
        hyp: bool,
        has_ctxid: bool,
        ctxid: int,
        has_cc: bool,
        cc: int,
        no_address: bool,
        complete: bool,
    ) -> None:
        """An I-sync packet (``complete`` False: cut by the end of the trace, its fields
        stale)."""
        if self.refused:
            self.refuse(offset, size)
            return
        first_sync = self.sync == _WAIT_ISYNC
        if not self.begin(offset, size, _K_ISYNC):
            return
        self.pend = 0
        slot = self.alloc()
        if first_sync or reason != 0:  # ISyncReason.PERIODIC
            slot.put(TraceOn(offset, _TRACE_ON[reason]))
            slot = self.alloc()
        if complete or first_sync:
            if first_sync:
                self.sec = 0
                self.el_hyp = False
                self.el_valid = False
                self.ctxid = self.vmid = 0
                self.ctxid_valid = self.vmid_valid = False
            if has_ctxid:
                self.ctxid = ctxid
                self.ctxid_valid = True
                self.memory.set_context(ctxid, self.vmid if self.vmid_valid else None)
            if complete:
                self.el_hyp = hyp
                self.el_valid = True
                self.sec = 1 if ns else 0
            ccv: int | None = None
            if has_cc:
                ccv = cc
            slot.put(PEContext(offset, self.context_info(), _ISAS[isa], ccv))
            slot.isa = isa
        elif slot.kind != _OBJECT:
            slot.offset = offset  # the record sent again, with this packet's index
        elif slot.elem is None:
            slot.elem = Unknown(offset)
        else:
            e = copy.copy(slot.elem)
            e.offset = offset
            slot.elem = e
        if not no_address:
            self.iaddr = address
            self.need_addr = False
            self.sent_unknown = False
        if first_sync:
            self.sync = _SYNCED
            if self.waited:
                self.sync_wait()
        self.done()

    def cycle_count(self, offset: int, size: int, count: int) -> None:
        """A cycle count packet."""
        if self.refused:
            self.refuse(offset, size)
            return
        if not self.begin(offset, size, _K_CYCLE_COUNT):
            return
        self.pend = 0
        self.alloc().cycles(offset, count, True)
        self.done()

    def timestamp(self, offset: int, size: int, value: int) -> None:
        """A timestamp packet."""
        if self.refused:
            self.refuse(offset, size)
            return
        if not self.begin(offset, size, _K_TIMESTAMP):
            return
        self.pend = 0
        self.put(Timestamp(offset, value))
        self.done()

    def async_packet(self, offset: int, size: int) -> None:
        """An A-sync packet."""
        self.count_sync(offset)
        if self.refused:
            self.refuse(offset, size)
            return
        if not self.begin(offset, size, _K_ASYNC):
            return
        self.pend = 0
        self.done()

    def refuse(self, offset: int, size: int) -> None:
        """A configuration with data trace: the reference's decode stops at the first
        packet."""
        self.packets += 1
        if self.stopped:
            self.after_stop(offset, size)
        else:
            self.element(Diagnostic(offset, self.trace_id, DiagCode.NOT_INIT, DiagKind.NO_CONFIG))
            self.stopped = True

    def stop(self, diag: Diagnostic) -> None:
        """A packet the reference cannot decode: its decode stops (no end of trace)."""
        self.element(diag)
        self.stopped = True

    def other(self, pkt: Packet) -> None:
        """Any other packet, as an object (rare: the loss report's handler for its class
        is called too)."""
        self.count_other(pkt)
        self.packets -= 1  # (counted again by begin)
        if self.refused:
            self.refuse(pkt.offset, len(pkt.raw))
            return
        tp = type(pkt)
        kind = _KIND_OF.get(tp, _K_OTHER)
        if not self.begin(pkt.offset, len(pkt.raw), kind):
            return
        off = pkt.offset
        if tp is ASync or tp is Ignore:
            self.pend = 0
        elif tp is TriggerPacket:
            self.pend = 0
            self.put(Event(off, EventType.TRIGGER))
        elif tp is ContextID or tp is VMID:
            self.pend = 0
            if isinstance(pkt, ContextID):
                self.ctxid = pkt.context_id
                self.ctxid_valid = True
            else:
                assert isinstance(pkt, VMID)
                self.vmid = pkt.vmid
                self.vmid_valid = True
            self.memory.set_context(
                self.ctxid if self.ctxid_valid else None, self.vmid if self.vmid_valid else None
            )
            slot = self.alloc()
            slot.put(PEContext(off, self.context_info(), _ISAS[slot.isa]))
        elif tp is ExceptionEntry:
            self.pend = 0
            self.put(Exception_(off, 0, data_marker=True))
        elif tp is ExceptionExit:
            self.pend = 0
            self.put(ExceptionRet(off))
            count_back = 1
            if not self.m_profile and self.used > 1 and self.last_is_range(2):
                count_back = 2
            self.pend_last(count_back)
        elif tp is NotSync:
            # Lost synchronisation: start again from an A-sync.
            self.pend = 0
            self.reason = UnsyncReason.BAD_PACKET
            self.first = self.used = self.pend = 0
            self.sync = _NO_SYNC
            self.need_addr = True
            self.sent_unknown = False
            return
        else:
            # Reserved headers, bad sequences and data trace: the reference stops.
            tid = self.trace_id
            if tp is BadSequence:
                self.stop(Diagnostic(off, tid, DiagCode.BAD_PACKET_SEQ, DiagKind.BAD_SEQUENCE))
            elif tp is Reserved:
                self.stop(Diagnostic(off, tid, DiagCode.BAD_PACKET_SEQ, DiagKind.BAD_PACKET))
            else:
                self.stop(Diagnostic(off, tid, DiagCode.HW_CFG_UNSUPP, DiagKind.DATA_TRACE))
            return
        self.done()

    # ---------------------------------------------------------------- cuts

    CUT_CONSTANTS = SINK_FIELDS | frozenset(
        (
            # the kit's state (ETMv3 synchronises in two steps of its own: ``sync``), and
            # what the configuration sets
            "state", "refused", "ca", "m_profile",
            # caches of the code memory
            "blocks", "memory", "instrs", "generation", "cache_space",
            # the element columns (pure Python: attributes too)
            "c_type", "c_offset", "c_isa", "c_start", "c_end", "c_num", "c_exec",
            "c_size", "c_itype", "c_sub", "c_cond", "c_cc", "c_ccv",
            # read only before synchronisation: why it was lost, where a wait began
            "reason", "waited_at",
        )
    )  # fmt: skip
    """Attributes that are not state crossing a cut (the ring, ``slots``, is compared
    from its oldest record: :meth:`cut_state`)."""

    def settled(self) -> bool:
        """Whether a decoder started at a cut (:mod:`cstrace.protocols.etmv3.cut`) knows
        all it will ever know of what came before: synchronised, and a range built in
        every record of its output ring (whose leftover fields some elements read)."""
        if self.sync != _SYNCED or not self.slots:
            return False
        return all(slot.fresh for slot in self.slots)

    def cut_state(self) -> tuple[object, ...]:
        """What decoding later packets depends on, as one comparable value (see
        :mod:`cstrace.split`): the PE state, the address, and the output ring from its
        oldest record on (the elements held back, and what every record keeps)."""
        ring: list[object] = []
        slots = self.slots
        size = len(slots)
        for i in range(size):
            slot = slots[(self.first + i) % size]
            keep: tuple[object, ...] = (
                slot.isa,
                slot.has_start,
                slot.start,
                slot.l_start,
                slot.l_end,
                slot.l_type,
                slot.l_subtype,
            )
            if i < self.used:  # held back: the element too
                if slot.kind == _RANGE:
                    keep += (slot.range_object(),)
                elif slot.kind == _CYCLES:
                    keep += (slot.cycles_object(),)
                else:
                    keep += (slot.elem,)
            ring.append(keep)
        return (
            self.sync,
            self.stopped,
            self.need_addr,
            self.sent_unknown,
            0 if self.need_addr else self.iaddr,
            self.sec,
            self.el_hyp,
            self.el_valid,
            self.ctxid,
            self.ctxid_valid,
            self.vmid,
            self.vmid_valid,
            self.follower_isa,
            self.waited,
            self.used,
            self.pend,
            tuple(ring),
        )

    # ---------------------------------------------------------------- packet objects

    def packet(self, pkt: Packet) -> None:
        """Decode one packet object (what the reader would have handed over as fields)."""
        tp = type(pkt)
        if tp is PHeader:
            assert isinstance(pkt, PHeader)
            self.pheader(pkt.offset, pkt.fmt, pkt.count, pkt.atoms, pkt.cycles, int(pkt.isa))
        elif tp is BranchAddress:
            assert isinstance(pkt, BranchAddress)
            exc = pkt.exception
            self.branch(
                pkt.offset,
                len(pkt.raw),
                pkt.address,
                exc is not None,
                exc or 0,
                pkt.cancel,
                pkt.ctxt_updated,
                pkt.ns,
                pkt.hyp,
            )
        elif tp is ISync:
            assert isinstance(pkt, ISync)
            self.isync(
                pkt.offset,
                len(pkt.raw),
                int(pkt.reason),
                pkt.address,
                int(pkt.isa),
                pkt.ns,
                pkt.hyp,
                pkt.context_id is not None,
                pkt.context_id or 0,
                pkt.cycle_count is not None,
                pkt.cycle_count or 0,
                pkt.no_address,
                pkt.complete,
            )
        elif tp is TimestampPacket:
            assert isinstance(pkt, TimestampPacket)
            self.timestamp(pkt.offset, len(pkt.raw), pkt.timestamp)
        elif tp is CycleCountPacket:
            assert isinstance(pkt, CycleCountPacket)
            self.cycle_count(pkt.offset, len(pkt.raw), pkt.count)
        else:
            self.other(pkt)

    def finish(self, complete: bool) -> None:
        """At the end of the stream: the held-back elements and ``EO_TRACE`` (when the
        capture is complete and the decoder did not stop)."""
        if not complete or self.stopped or self.refused:
            return
        self.pend = 0
        if self.waited:
            self.sync_wait()
        self.put(EoTrace(self.last, UnsyncReason.EOT))
        self.pend = 0
        self.send()


# packet kinds, for the synchronisation states (begin)
_K_OTHER = 0
_K_ASYNC = 1
_K_NOT_SYNC = 2
_K_ISYNC = 3
_K_TIMESTAMP = 4
_K_PHEADER = 5
_K_CYCLE_COUNT = 6
_K_BRANCH = 7
_KIND_OF: dict[type, int] = {
    ASync: _K_ASYNC,
    NotSync: _K_NOT_SYNC,
    ISync: _K_ISYNC,
    TimestampPacket: _K_TIMESTAMP,
    PHeader: _K_PHEADER,
    CycleCountPacket: _K_CYCLE_COUNT,
    BranchAddress: _K_BRANCH,
}


def iter_elements(
    packets: Iterable[Packet], config: Etmv3Config, context: DecodeContext
) -> Iterator[Element]:
    """Decode ETMv3 packet objects into generic trace elements (those of each packet
    before the next packet is read)."""
    return elements_of(Etmv3Decoder(config, context), packets, context)
