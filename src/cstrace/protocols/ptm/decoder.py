"""PTM decoder: PTM packet fields + configuration + code memory → generic trace elements.

Input: the fields of each PTM packet, handed over by the reader's loop
(:func:`cstrace.protocols.ptm.reader.read`; its
:func:`~cstrace.protocols.ptm.reader.iter_stream_rows` gives the element rows)
or taken from packet objects (:func:`iter_elements`), the
:class:`~cstrace.protocols.ptm.config.PtmConfig` and a
:class:`~cstrace.protocols.base.DecodeContext` (the traced core's memory
images); output: the elements of :mod:`cstrace.elements`.

One decoder, :class:`PtmDecoder`, with one method per packet kind, built on
the protocol kit's :class:`~cstrace.protocols.kit.ElementSink` (synchronisation
state, loss counts, and the two sinks: element rows, :mod:`cstrace.rows`, one
packet's at a time, for the listing and the cuts of :mod:`cstrace.split`; or
element columns, with no object per element for the common elements:
``INSTR_RANGE``, ``TRACE_ON``, ``TIMESTAMP``, ``EXCEPTION``, ``ADDR_NACC``).
The reader's loop calls the packet methods with fields and makes packet
objects only for a tap that asks for them (the listing, ``--format packets``).

PTM traces program flow with waypoints (IHI 0035B §2.3): an atom says whether
the next waypoint instruction (a branch) was taken (E) or not (N); a branch
address packet gives the target of an indirect branch or an exception; an
I-sync gives the full address and state. Between waypoints the decoder follows
the program image: it walks the code from the current address to the next
waypoint (:mod:`cstrace.isa.blocks`), and reports the walked instructions as
an ``INSTR_RANGE``. Walks are cached per memory space: after the first walk of
a block, an atom costs one dictionary lookup. The decoder drives the code
memory: ``set_context`` on I-sync, context ID and VMID changes, and
``advance(time)`` with each ``TIMESTAMP`` it outputs.

Synchronisation: the first packet gives a ``NO_SYNC``; an A-sync synchronises
(the kit's :meth:`~cstrace.protocols.kit.ElementSink.gate`), and decoding
starts with the I-sync that follows it (:attr:`PtmDecoder.need_isync`). The
packets skipped meanwhile are counted (a warning ``DIAGNOSTIC`` with their
bytes, where decoding starts).

The elements reproduce the reference decoder (OpenCSD's PTM decoder) exactly,
including its choices where the specification leaves room:

- a branch address packet without exception information implies an E atom on
  the waypoint before it; with exception information it gives an ``EXCEPTION``
  whose preferred return address is the current address;
- a waypoint update walks to the instruction at its address (inclusive);
- with the return stack enabled, an E atom on an indirect branch takes its
  target from the return stack (:class:`~cstrace.protocols.kit.ReturnStack`);
  a pop from an empty stack stops the decoding of the trace ID, as in the
  reference;
- code in an instruction set it cannot walk (Jazelle, ThumbEE) is skipped
  until the next address, with a warning :class:`~cstrace.elements.Diagnostic`
  where the reference logs its warning;
- an instruction whose 4 opcode bytes are not all readable ends the walk with
  an ``ADDR_NACC`` (even a 16-bit Thumb instruction needs 4 bytes);
- only I-sync packets change the security state used to read code memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from cstrace.elements import (
    AddrNacc,
    Diagnostic,
    Element,
    Event,
    EventType,
    Exception_,
    ExceptionRet,
    InstrRange,
    Isa,
    MemSpace,
    NoSync,
    PEContext,
    PEContextInfo,
    SecLevel,
    TraceOn,
    TraceOnReason,
    UnsyncReason,
)
from cstrace.elements import Timestamp as TimestampElem
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.isa import IsaOptions, arch_profile
from cstrace.isa.blocks import Block, BlockCache
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.kit import (
    DECODE,
    NO_SYNC,
    SINK_FIELDS,
    WAIT_SYNC,
    ElementSink,
    ReturnStack,
)
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.packets import (
    VMID,
    ASync,
    Atom,
    BadSequence,
    BranchAddress,
    ContextID,
    ExceptionReturn,
    ISync,
    ISyncReason,
    NotSync,
    PtmPacketType,
    Reserved,
    Timestamp,
    Trigger,
    WaypointUpdate,
)
from cstrace.rows import expand

__all__ = ["COLUMNS", "PtmDecoder", "iter_elements", "iter_rows"]

_ISAS = tuple(Isa)
_REASONS = tuple(ISyncReason)
_BR = 1  # InstrType.BR
_BR_IND = 2  # InstrType.BR_INDIRECT
_T32 = 1  # Isa.T32
_TRACE_ON_REASON = (0, 0, 1, 2)
"""TraceOnReason number of each I-sync reason: PERIODIC and TRACE_ON are NORMAL,
OVERFLOW is OVERFLOW, DEBUG_EXIT is EX_DEBUG."""
_TRACE_ON_REASONS = tuple(TraceOnReason)
_SECURE = SecLevel.SECURE
_NONSECURE = SecLevel.NONSECURE
_SPACE_S = int(MemSpace.S)
_SPACE_N = int(MemSpace.N)
_NO_SYNC = NO_SYNC  # (C copies when compiled)
_WAIT_SYNC = WAIT_SYNC
_DECODE = DECODE

# Element type numbers (ElemType) of the rows the decoder writes itself.
_E_TRACE_ON = 2
_E_INSTR_RANGE = 5
_E_ADDR_NACC = 7
_E_EXCEPTION = 9
_E_TIMESTAMP = 11

# What the decoder was processing when it met code it cannot walk (Diagnostic detail).
_BRANCH_DETAIL = int(PtmPacketType.BRANCH_ADDRESS)
_WAYPOINT_DETAIL = int(PtmPacketType.WAYPOINT_UPDATE)
_ATOM_DETAIL = int(PtmPacketType.ATOM)

# How a packet takes part in synchronisation (PtmDecoder._enter).
_K_OTHER = 0
_K_ASYNC = 1
_K_ISYNC = 2
_K_NOTSYNC = 3

COLUMNS = (
    ("type", "uint8"),
    ("offset", "int64"),
    ("start", "uint64"),
    ("end", "uint64"),
    ("num_instr", "uint32"),
    ("isa", "uint8"),
    ("last_exec", "uint8"),
    ("last_size", "uint8"),
    ("last_type", "uint8"),
    ("last_subtype", "uint8"),
    ("last_cond", "uint8"),
    ("cycle_count", "uint64"),
    ("cycle_count_valid", "uint8"),
    ("reason", "uint8"),
    ("timestamp", "uint64"),
    ("timestamp_valid", "uint8"),
    ("address", "uint64"),
    ("mem_space", "uint8"),
    ("number", "uint32"),
    ("return_address", "uint64"),
    ("return_address_valid", "uint8"),
)
"""The element columns the decoder writes (booleans as bytes)."""


def _isa_options(config: PtmConfig) -> IsaOptions:
    arch, profile = arch_profile(config.core)
    return IsaOptions(arch, profile, dsb_dmb_waypoints=config.dmb_dsb_waypoints)


def _sync_wait(offset: int, trace_id: int, waited: int) -> Diagnostic:
    """The count of the packets skipped while waiting for synchronisation."""
    return Diagnostic(offset, trace_id, DiagCode.NONE, DiagKind.SYNC_WAIT, waited, Severity.WARNING)


def _cc(cc: int) -> int | None:
    """A cycle count field: -1 stands for none."""
    return None if cc < 0 else cc


class PtmDecoder(ElementSink):
    """The PTM decoder of one trace ID: its state and one method per packet kind
    (module text).

    ``columns``: write elements as column rows (:meth:`~ElementSink.take`);
    otherwise as element rows (:mod:`cstrace.rows`: an ``INSTR_RANGE`` without a
    cycle count is its offset and the walked block's ``RangeArgs``, every other
    element an object) in :attr:`~ElementSink.objects`. After a fatal error (a
    pop from the empty return stack) :attr:`~ElementSink.stopped` is set: the
    reference stops decoding the trace ID there, without an end of trace.

    :meth:`cut_state` and
    :meth:`settled` say what :mod:`cstrace.split` needs to decode a stream in
    pieces cut at synchronisation points.
    """

    def __init__(
        self,
        config: PtmConfig,
        context: DecodeContext,
        columns: bool = False,
        size: int = 65536,
    ) -> None:
        self.recover = False
        self.config = config
        self.context = context
        self.reader: Any = None
        """The reader's state (:class:`~cstrace.protocols.ptm.reader.ReaderState`), made by
        the reader that reads into this decoder (or given it, as :mod:`.cut` does)."""
        self.walker = BlockCache.shared(context.memory, _isa_options(config))
        self.memory = self.walker.memory
        self.stack = ReturnStack(config.return_stack)
        self.need_isync = True
        """No I-sync decoded since synchronisation (the next one always says TRACE_ON);
        until one comes, packets are skipped (and counted)."""
        self.pe_valid = False
        """Whether the address and ISA of the next instruction are known."""
        self.pe_addr: int = 0
        self.pe_isa = int(Isa.UNKNOWN)
        self.ctxt = PEContextInfo(SecLevel.SECURE)
        self.space = int(MemSpace.S)
        """The memory space code is read from (only I-syncs change it)."""
        self.tables: list[Any] = self.walker.tables(self.space)
        self.elem_isa = int(Isa.UNKNOWN)
        """The ISA of the last element output: the reference reuses one output element,
        so its ISA persists into the context elements that follow."""
        self.seen_notsync = False
        self.waited = 0
        """Bytes of the packets skipped while waiting for synchronisation."""
        self.waited_at: int = 0
        """The capture index of the first of them."""
        super().__init__(config.trace_id, context.reset, columns, size, COLUMNS)

    def bind_columns(self) -> None:
        """Typed views of the columns."""
        arrays = self.arrays
        self.c_type = arrays["type"]
        self.c_offset = arrays["offset"]
        self.c_start = arrays["start"]
        self.c_end = arrays["end"]
        self.c_num = arrays["num_instr"]
        self.c_isa = arrays["isa"]
        self.c_exec = arrays["last_exec"]
        self.c_size = arrays["last_size"]
        self.c_itype = arrays["last_type"]
        self.c_sub = arrays["last_subtype"]
        self.c_cond = arrays["last_cond"]
        self.c_cc = arrays["cycle_count"]
        self.c_ccv = arrays["cycle_count_valid"]
        self.c_reason = arrays["reason"]
        self.c_ts = arrays["timestamp"]
        self.c_tsv = arrays["timestamp_valid"]
        self.c_addr = arrays["address"]
        self.c_space = arrays["mem_space"]
        self.c_number = arrays["number"]
        self.c_ret = arrays["return_address"]
        self.c_retv = arrays["return_address_valid"]

    # -- state crossing a cut (cstrace.split) --------------------------------------------

    CUT_CONSTANTS = SINK_FIELDS | frozenset(
        (
            "config",
            "context",
            "reader",
            "walker",
            "memory",
            "tables",
            "seen_notsync",
            "c_type",
            "c_offset",
            "c_start",
            "c_end",
            "c_num",
            "c_isa",
            "c_exec",
            "c_size",
            "c_itype",
            "c_sub",
            "c_cond",
            "c_cc",
            "c_ccv",
            "c_reason",
            "c_ts",
            "c_tsv",
            "c_addr",
            "c_space",
            "c_number",
            "c_ret",
            "c_retv",
        )
    )
    """Attributes that are not state crossing a cut: set from the configuration and
    context, the reader's state (compared on its own), the block tables of the code
    memory (derived from ``space``, the memory having no state of its own where a
    stream is cut), the sink (its output, counts and columns, emptied or taken
    between packets) and ``seen_notsync`` (read by ``NotSync`` packets only, which
    the reader gives before its first A-sync only)."""

    def cut_state(self) -> tuple[object, ...]:
        """Everything that decides what later packets give, as one comparable value.

        Two decoders of the same configuration over a code memory without state
        whose cut states are equal give the same elements for the same packets
        from then on. Every attribute is here or in :data:`CUT_CONSTANTS` (a test
        checks).
        """
        ctxt = self.ctxt
        return (
            self.state,
            # Read only on the way out of NO_SYNC.
            self.reason if self.state == _NO_SYNC else None,
            self.need_isync,
            self.pe_valid,
            self.pe_addr if self.pe_valid else None,
            self.pe_isa,
            tuple(getattr(ctxt, name) for name in PEContextInfo.__slots__),
            self.space,
            self.elem_isa,
            self.last,
            self.waited,
            self.waited_at if self.waited else None,
            self.stopped,
            self.stack.cut_state(),
        )

    def settled(self) -> bool:
        """Whether a decoder started at a synchronisation point knows what it will ever
        know of what came before: decoding, an I-sync seen, the next address known and
        an element's ISA given since (what :meth:`cut_state` compares)."""
        return (
            self.state == _DECODE
            and not self.need_isync
            and self.pe_valid
            and self.elem_isa == self.pe_isa
            and not self.stopped
        )

    # -- the sink ------------------------------------------------------------------------

    def _row(self, kind: int, offset: int, cc: int) -> int:
        """A new column row of element type ``kind`` (its offset and cycle count, ``cc``
        < 0: none, written); its number."""
        r = self.rows
        if r < self.size:
            self.rows = r + 1
        else:
            r = self.next_row()
        self.c_type[r] = kind
        self.c_offset[r] = offset
        if cc >= 0:
            self.c_cc[r] = cc
            self.c_ccv[r] = 1
        return r

    def _range(self, offset: int, blk: Block, taken: bool, cc: int) -> None:
        """Output the ``INSTR_RANGE`` of a walked block (``cc`` < 0: no cycle count)."""
        if not self.as_columns:
            rng = blk.range_e if taken else blk.range_n
            if cc < 0:
                self.objects.append(offset)
                self.objects.append(rng)
            else:
                self.objects.append(InstrRange(offset, *rng, cc))
            return
        r = self._row(_E_INSTR_RANGE, offset, cc)
        self.c_start[r] = blk.start
        self.c_end[r] = blk.end
        self.c_num[r] = blk.count
        self.c_isa[r] = blk.isa
        self.c_exec[r] = taken
        self.c_size[r] = blk.size
        self.c_itype[r] = blk.itype
        self.c_sub[r] = blk.subtype
        self.c_cond[r] = blk.cond

    def _trace_on(self, offset: int, reason: int, cc: int) -> None:
        """Output a ``TRACE_ON`` (``reason``: its TraceOnReason number)."""
        if not self.as_columns:
            self.objects.append(TraceOn(offset, _TRACE_ON_REASONS[reason], _cc(cc)))
            return
        r = self._row(_E_TRACE_ON, offset, cc)
        self.c_reason[r] = reason

    def _timestamp_elem(self, offset: int, ts: int, cc: int) -> None:
        """Output a ``TIMESTAMP``."""
        if not self.as_columns:
            self.objects.append(TimestampElem(offset, ts, _cc(cc)))
            return
        r = self._row(_E_TIMESTAMP, offset, cc)
        self.c_ts[r] = ts
        self.c_tsv[r] = 1

    def _nacc(self, offset: int, address: int, space: int) -> None:
        """Output an ``ADDR_NACC``: no code at ``address``."""
        if not self.as_columns:
            self.objects.append(AddrNacc(offset, address, MemSpace(space)))
            return
        r = self._row(_E_ADDR_NACC, offset, -1)
        self.c_addr[r] = address
        self.c_space[r] = space

    def _exception(self, offset: int, number: int, has_ret: bool, ret: int, cc: int) -> None:
        """Output an ``EXCEPTION`` (its preferred return address when ``has_ret``)."""
        if not self.as_columns:
            self.objects.append(
                Exception_(offset, number, ret if has_ret else None, cycle_count=_cc(cc))
            )
            return
        r = self._row(_E_EXCEPTION, offset, cc)
        self.c_number[r] = number
        if has_ret:
            self.c_ret[r] = ret
            self.c_retv[r] = 1

    # -- synchronisation -----------------------------------------------------------------

    def _enter(self, offset: int, size: int, kind: int) -> bool:
        """Before a packet of ``size`` bytes at capture index ``offset`` (``kind``: how it
        takes part in synchronisation): count it, and say whether it is decoded.

        Not after a fatal error. Before synchronisation, the kit's gate (the first
        packet gives ``NO_SYNC``, an A-sync synchronises); then packets wait for an
        I-sync, which starts decoding. Packets skipped while waiting (other than
        A-syncs, I-syncs and the bytes before the first A-sync) are counted.
        """
        self.packets += 1
        if self.stopped:
            return False
        if self.state == _DECODE and not self.need_isync:
            self.last = offset
            return True
        first = self.state == _NO_SYNC
        if not self.gate(offset, kind == _K_ASYNC) or kind != _K_ISYNC:
            if not first and kind == _K_OTHER:
                if not self.waited:
                    self.waited_at = offset
                self.waited += size
            return False
        if self.waited:
            self.element(_sync_wait(self.waited_at, self.trace_id, self.waited))
            self.waited = 0
        return True

    # -- packets -------------------------------------------------------------------------

    def async_packet(self, offset: int) -> None:
        """An A-sync packet: synchronisation."""
        if self.tap is not None:
            self.tap.append(ASync(offset, self.raw))
            return
        self.count_sync(offset)
        self._enter(offset, 0, _K_ASYNC)

    def isync(
        self,
        offset: int,
        size: int,
        address: int,
        isa: int,
        reason: int,
        ns: bool,
        hyp: bool,
        alt_isa: bool,
        context_id: int,
        cc: int,
        changed: bool,
    ) -> None:
        """I-sync: the address, ISA, security state and context ID (``context_id``,
        ``cc``: -1 when the packet has none); TRACE_ON when it starts the trace or is
        not periodic."""
        if self.tap is not None:
            self.tap.append(
                ISync(
                    offset,
                    self.raw,
                    address,
                    _ISAS[isa],
                    _REASONS[reason],
                    ns,
                    hyp,
                    alt_isa,
                    None if context_id < 0 else context_id,
                    _cc(cc),
                    changed,
                )
            )
            return
        if not self._enter(offset, size, _K_ISYNC):
            return
        ctxt = self.ctxt
        self.pe_addr = address
        self.pe_isa = isa
        self.pe_valid = True
        show_ctxt = changed
        if context_id >= 0:
            ctxt.context_id = context_id
            ctxt.ctxt_id_valid = True
            show_ctxt = True
            self.memory.set_context(ctxt.context_id, ctxt.vmid if ctxt.vmid_valid else None)
        ctxt.security_level = _NONSECURE if ns else _SECURE
        self.space = _SPACE_N if ns else _SPACE_S
        self.tables = self.walker.tables(self.space)
        if self.need_isync or reason != 0:  # (0: PERIODIC)
            self._trace_on(offset, _TRACE_ON_REASON[reason], cc)
        else:
            show_ctxt = False
        self.need_isync = False
        self.stack.flush()
        if show_ctxt:
            self.elem_isa = isa
            self.element(PEContext(offset, ctxt.copy(), _ISAS[isa]))

    def atom(self, offset: int, size: int, bits: int, count: int, cc: int) -> None:
        """An atom packet: ``count`` E/N atoms in ``bits`` (the first in bit 0; 1 is E)."""
        if self.tap is not None:
            self.tap.append(Atom(offset, self.raw, bits, count, _cc(cc)))
            return
        if not self._enter(offset, size, _K_OTHER):
            return
        if self.pe_valid:
            self._walk(count, bits, cc, _ATOM_DETAIL, True, False, 0)

    def branch(
        self,
        offset: int,
        size: int,
        address: int,
        isa: int,
        valid_bits: int,
        nbits: int,
        changed: bool,
        exception: int,
        ns: bool,
        hyp: bool,
        cc: int,
    ) -> None:
        """Branch address: an exception (``exception`` >= 0), or an E atom on the
        waypoint before it; then the address and ISA it gives."""
        if self.tap is not None:
            self.tap.append(
                BranchAddress(
                    offset,
                    self.raw,
                    address,
                    _ISAS[isa],
                    valid_bits,
                    nbits,
                    changed,
                    None if exception < 0 else exception,
                    ns,
                    hyp,
                    exception >= 0,
                    _cc(cc),
                )
            )
            return
        if not self._enter(offset, size, _K_OTHER):
            return
        if exception >= 0:
            self._exception(offset, exception, self.pe_valid, self.pe_addr, cc)
        elif self.pe_valid:
            self._walk(1, 1, cc, _BRANCH_DETAIL, False, False, 0)
        self.pe_isa = isa
        self.pe_addr = address
        self.pe_valid = True

    def waypoint_update(
        self,
        offset: int,
        size: int,
        address: int,
        isa: int,
        valid_bits: int,
        nbits: int,
        changed: bool,
    ) -> None:
        """Waypoint update: walk to the instruction at ``address`` (inclusive)."""
        if self.tap is not None:
            self.tap.append(
                WaypointUpdate(offset, self.raw, address, _ISAS[isa], valid_bits, nbits, changed)
            )
            return
        if not self._enter(offset, size, _K_OTHER):
            return
        if self.pe_valid:
            self._walk(1, 1, -1, _WAYPOINT_DETAIL, False, True, address)

    def context_id(self, offset: int, size: int, cid: int) -> None:
        """Context ID: a PE context element when it changes."""
        if self.tap is not None:
            self.tap.append(ContextID(offset, self.raw, cid))
            return
        if not self._enter(offset, size, _K_OTHER):
            return
        ctxt = self.ctxt
        if not (ctxt.ctxt_id_valid and ctxt.context_id == cid):
            ctxt.context_id = cid
            ctxt.ctxt_id_valid = True
            self.memory.set_context(cid, ctxt.vmid if ctxt.vmid_valid else None)
            self.tables = self.walker.tables(self.space)
            self.element(PEContext(offset, ctxt.copy(), _ISAS[self.elem_isa]))

    def vmid(self, offset: int, size: int, vmid: int) -> None:
        """VMID: a PE context element when it changes."""
        if self.tap is not None:
            self.tap.append(VMID(offset, self.raw, vmid))
            return
        if not self._enter(offset, size, _K_OTHER):
            return
        ctxt = self.ctxt
        if not (ctxt.vmid_valid and ctxt.vmid == vmid):
            ctxt.vmid = vmid
            ctxt.vmid_valid = True
            self.memory.set_context(ctxt.context_id if ctxt.ctxt_id_valid else None, vmid)
            self.tables = self.walker.tables(self.space)
            self.element(PEContext(offset, ctxt.copy(), _ISAS[self.elem_isa]))

    def timestamp(self, offset: int, size: int, ts: int, nbits: int, cc: int) -> None:
        """Timestamp: trace time moved on, and the code memory applies its events up to
        it (an event log may map other code from now on)."""
        if self.tap is not None:
            self.tap.append(Timestamp(offset, self.raw, ts, nbits, _cc(cc)))
            return
        if not self._enter(offset, size, _K_OTHER):
            return
        self.memory.advance(ts)
        self.tables = self.walker.tables(self.space)
        self._timestamp_elem(offset, ts, cc)

    def trigger(self, offset: int) -> None:
        """Trigger: an ``EVENT``."""
        if self.tap is not None:
            self.tap.append(Trigger(offset, self.raw))
            return
        if self._enter(offset, 1, _K_OTHER):
            self.element(Event(offset, EventType.TRIGGER))

    def exception_return(self, offset: int) -> None:
        """Exception return: an ``EXCEPTION_RET``."""
        if self.tap is not None:
            self.tap.append(ExceptionReturn(offset, self.raw))
            return
        if self._enter(offset, 1, _K_OTHER):
            self.element(ExceptionRet(offset))

    def other(self, pkt: Packet) -> None:
        """Any other packet, as an object: NotSync, Ignore, Reserved, BadSequence,
        IncompleteEOT (rare: the loss report's handler for its class is called too).

        A bad sequence or reserved header makes the decoder wait for synchronisation
        again. Of the NotSync packets, the reference hands only those of the first
        unsynchronised block to its decoder."""
        tap = self.tap
        if tap is not None:
            tap.append(pkt)
            return
        t = type(pkt)
        self.last_other = pkt
        self.report(pkt)
        if t is NotSync and (self.seen_notsync or pkt.carried):  # type: ignore[attr-defined]
            self.packets += 1
            return
        if t is NotSync:
            self.seen_notsync = True
            self._enter(pkt.offset, len(pkt.raw), _K_NOTSYNC)
            return
        if not self._enter(pkt.offset, len(pkt.raw), _K_OTHER):
            return
        if t is BadSequence or t is Reserved:
            self.state = _WAIT_SYNC
            self.need_isync = True
            # the reference gives no reason here: it prints "undefined"
            self.element(NoSync(pkt.offset, UnsyncReason.UNKNOWN))
        # (ignore and incomplete packets give nothing)

    def packet(self, pkt: Packet) -> None:
        """Decode one packet object (what the reader would have handed over as fields)."""
        t = type(pkt)
        p: Any = pkt
        size = len(pkt.raw)
        if t is Atom:
            self.atom(p.offset, size, p.bits, p.count, _no_cc(p.cycle_count))
        elif t is BranchAddress:
            self.branch(
                p.offset,
                size,
                p.address,
                int(p.isa),
                p.valid_bits,
                p.pkt_bits,
                p.isa_changed,
                -1 if p.exception is None else p.exception,
                p.ns,
                p.hyp,
                _no_cc(p.cycle_count),
            )
        elif t is WaypointUpdate:
            self.waypoint_update(
                p.offset, size, p.address, int(p.isa), p.valid_bits, p.pkt_bits, p.isa_changed
            )
        elif t is ISync:
            self.isync(
                p.offset,
                size,
                p.address,
                int(p.isa),
                int(p.reason),
                p.ns,
                p.hyp,
                p.alt_isa,
                -1 if p.context_id is None else p.context_id,
                _no_cc(p.cycle_count),
                p.isa_changed,
            )
        elif t is ContextID:
            self.context_id(p.offset, size, p.context_id)
        elif t is VMID:
            self.vmid(p.offset, size, p.vmid)
        elif t is Timestamp:
            self.timestamp(p.offset, size, p.timestamp, p.update_bits, _no_cc(p.cycle_count))
        elif t is ASync:
            self.async_packet(p.offset)
        elif t is Trigger:
            self.trigger(p.offset)
        elif t is ExceptionReturn:
            self.exception_return(p.offset)
        else:
            self.other(pkt)

    # -- program flow --------------------------------------------------------------------

    def _walk(
        self,
        nwalk: int,
        bits: int,
        cc: int,
        detail: int,
        atom: bool,
        through: bool,
        to_addr: int,
    ) -> None:
        """Follow the code for ``nwalk`` atoms (E/N in ``bits``, the first in bit 0) of
        the packet (an atom packet when ``atom``: only those pop the return stack;
        ``detail`` names its kind in a diagnostic; ``cc`` its cycle count, -1: none);
        with ``through``, walk to the instruction at ``to_addr`` (a waypoint update)."""
        offset = self.last
        walker = self.walker
        tables = self.tables
        space = self.space
        pe_addr = self.pe_addr
        pe_isa = self.pe_isa
        pe_valid = True
        for _ in range(nwalk):
            if pe_isa > _T32:  # Jazelle, ThumbEE...: not decodable
                # the reference reads the opcode before refusing the instruction set
                pe_valid = False
                if not walker.readable(pe_addr, space):
                    self._nacc(offset, pe_addr, space)
                else:
                    self.element(
                        Diagnostic(
                            offset,
                            self.trace_id,
                            DiagCode.UNSUPPORTED_ISA,
                            DiagKind.UNSUPPORTED_ISA,
                            detail,
                            Severity.WARNING,
                        )
                    )
                break
            if through:
                blk = walker.walk_through(pe_addr, pe_isa, space, to_addr)
            else:
                table = tables[pe_isa]
                cached = table.get(pe_addr)
                blk = walker.block(pe_addr, pe_isa, space) if cached is None else cached
            if not blk.found:
                pe_valid = False
                if blk.count:
                    self.elem_isa = pe_isa
                    self._range(offset, blk, True, -1)
                self._nacc(offset, blk.end, space)
                break
            taken = bits & 1
            bits >>= 1
            next_addr = blk.end
            next_isa = blk.next_isa
            if taken:
                itype = blk.itype
                if itype == _BR:
                    next_addr = blk.target
                    if blk.link:
                        self.stack.push(blk.end, pe_isa)
                elif itype == _BR_IND:
                    pe_valid = False
                    stack = self.stack
                    if stack.active and atom:
                        popped = stack.pop()
                        if popped is None:
                            # fatal in the reference: it stops decoding there
                            self.element(
                                Diagnostic(
                                    offset,
                                    self.trace_id,
                                    DiagCode.RET_STACK_OVERFLOW,
                                    DiagKind.RETURN_STACK_OVERFLOW,
                                    _ATOM_DETAIL,
                                )
                            )
                            self.stopped = True
                            break
                        next_addr, next_isa = popped
                        pe_valid = True
                    if blk.link:
                        stack.push(blk.end, pe_isa)
            self.elem_isa = pe_isa
            self._range(offset, blk, taken == 1, cc)
            pe_addr = next_addr
            pe_isa = next_isa
            if not pe_valid:
                break
        self.pe_addr = pe_addr
        self.pe_isa = pe_isa
        if not pe_valid:
            self.pe_valid = False

    def finish(self, complete: bool) -> None:
        """End of trace (unless the capture stopped on a framing error, or the decoder
        stopped at a fatal error)."""
        if self.stopped or not complete:
            return
        if self.waited:
            self.element(_sync_wait(self.waited_at, self.trace_id, self.waited))
        ElementSink.finish(self, complete)


def _no_cc(cc: int | None) -> int:
    """A cycle count as the packet methods take it: -1 for none."""
    return -1 if cc is None else cc


def iter_rows(
    packets: Iterable[Packet], config: PtmConfig, context: DecodeContext, size: int = 4096
) -> Iterator[list[Any]]:
    """Decode PTM packet objects into lists of element rows (:mod:`cstrace.rows`) of
    about ``size`` elements or more."""
    dec = PtmDecoder(config, context)
    out: list[Any] = []
    dec.objects = out
    for pkt in packets:
        dec.packet(pkt)
        if dec.stopped:
            break
        if len(out) >= size:
            yield out
            out = []
            dec.objects = out
    dec.finish(context.complete)
    if out:
        yield out


def iter_elements(
    packets: Iterable[Packet], config: PtmConfig, context: DecodeContext
) -> Iterator[Element]:
    """Decode PTM packet objects to generic trace elements.

    Lazy: the elements of a packet come before the next packet is read.
    """
    dec = PtmDecoder(config, context)
    out = dec.objects
    for pkt in packets:
        dec.packet(pkt)
        if out:
            yield from expand(out)
            del out[:]
        if dec.stopped:
            return
    dec.finish(context.complete)
    yield from expand(out)
