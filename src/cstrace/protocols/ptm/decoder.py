"""PTM decoder: PTM packets + configuration + code memory → generic trace elements.

Input: the packets of :mod:`cstrace.protocols.ptm.reader`, the
:class:`~cstrace.protocols.ptm.config.PtmConfig` and a
:class:`~cstrace.protocols.base.DecodeContext` (the traced core's memory
images); output: the elements of :mod:`cstrace.elements`.

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

The elements reproduce the reference decoder (OpenCSD's PTM decoder) exactly,
including its choices where the specification leaves room:

- a branch address packet without exception information implies an E atom on
  the waypoint before it; with exception information it gives an ``EXCEPTION``
  whose preferred return address is the current address;
- a waypoint update walks to the instruction at its address (inclusive);
- with the return stack enabled, an E atom on an indirect branch takes its
  target from the return stack; a pop from an empty stack stops the decoding
  of the trace ID, as in the reference;
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
    EoTrace,
    Event,
    EventType,
    Exception_,
    ExceptionRet,
    InstrRange,
    InstrType,
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
from cstrace.isa.blocks import Block, BlockCache, BlockKey
from cstrace.protocols.base import DecodeContext, Packet
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

__all__ = ["PtmDecoder", "ReturnStack", "iter_elements", "iter_rows"]

_ISAS = tuple(Isa)
_BR = int(InstrType.BR)
_BR_IND = int(InstrType.BR_INDIRECT)
_T32 = int(Isa.T32)
_TRACE_ON = {
    ISyncReason.PERIODIC: TraceOnReason.NORMAL,
    ISyncReason.TRACE_ON: TraceOnReason.NORMAL,
    ISyncReason.OVERFLOW: TraceOnReason.OVERFLOW,
    ISyncReason.DEBUG_EXIT: TraceOnReason.EX_DEBUG,
}

# States of the decoder, as the reference names them.
_NO_SYNC = 0
_WAIT_SYNC = 1
_WAIT_ISYNC = 2
_DECODE = 3

# What the decoder was processing when it met code it cannot walk (Diagnostic detail).
_BRANCH_DETAIL = int(PtmPacketType.BRANCH_ADDRESS)
_WAYPOINT_DETAIL = int(PtmPacketType.WAYPOINT_UPDATE)
_ATOM_DETAIL = int(PtmPacketType.ATOM)


class ReturnStack:
    """The reference decoder's 16-entry return address stack (PTM return stack option).

    A pop from an empty stack returns no address and leaves the stack
    "overflowed" (``overflow`` is True), which the decoder treats as fatal.
    """

    __slots__ = ("active", "count", "entries", "head")

    def __init__(self, active: bool) -> None:
        self.active = active
        self.entries: list[tuple[int, int]] = [(0, 0)] * 16
        self.head = 0
        self.count = 0

    def push(self, address: int, isa: int) -> None:
        """Remember a return address (a branch with link was taken)."""
        if self.active:
            self.head = (self.head + 1) & 0xF
            self.entries[self.head] = (address, isa)
            self.count = min(self.count + 1, 16)

    def pop(self) -> tuple[int, int] | None:
        """The most recent return address and ISA, or None when empty."""
        if not self.active:
            return None
        out = None
        if self.count > 0:
            out = self.entries[self.head]
            self.head = (self.head - 1) & 0xF
        self.count -= 1
        return out

    @property
    def overflow(self) -> bool:
        """True after a pop from the empty stack."""
        return self.count < 0

    def flush(self) -> None:
        """Forget every entry (on an I-sync)."""
        self.count = 0

    def cut_state(self) -> tuple[object, ...]:
        """What decides later pops: whether the stack is on, and the entries it holds,
        the most recent first (those beyond ``count`` are never read again)."""
        entries = self.entries
        head = self.head
        live = tuple(entries[(head - i) & 0xF] for i in range(max(self.count, 0)))
        return (self.active, self.count, live)


def _isa_options(config: PtmConfig) -> IsaOptions:
    arch, profile = arch_profile(config.core)
    return IsaOptions(arch, profile, dsb_dmb_waypoints=config.dmb_dsb_waypoints)


def _sync_wait(offset: int, trace_id: int, waited: int) -> Diagnostic:
    """The count of the packets skipped while waiting for synchronisation."""
    return Diagnostic(offset, trace_id, DiagCode.NONE, DiagKind.SYNC_WAIT, waited, Severity.WARNING)


class PtmDecoder:
    """Decodes the packets of one PTM trace ID, one :meth:`decode` call per packet.

    The elements of a packet are appended to :attr:`out` as element rows
    (:mod:`cstrace.rows`: an ``INSTR_RANGE`` without a cycle count is its offset and
    the walked block's ``RangeArgs``; every other element an object); :meth:`finish`
    appends the end of trace. After a fatal error (a pop from the empty return
    stack) :attr:`halted` is set: the reference stops decoding the trace ID there,
    and so must the caller (no more packets, no end of trace).

    The state is plain attributes (typed for Cython by ``decoder.pxd``).
    :meth:`cut_state` and :meth:`settled` say what :mod:`cstrace.split` needs to
    decode a stream in pieces cut at synchronisation points.
    """

    def __init__(self, config: PtmConfig, context: DecodeContext) -> None:
        self.config = config
        self.context = context
        self.trace_id: int = config.trace_id
        self.walker = BlockCache.shared(context.memory, _isa_options(config))
        self.memory = self.walker.memory
        self.stack = ReturnStack(config.return_stack)
        self.unsync_reason = (
            UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER
        )
        self.out: list[Any] = []
        """Where the elements of the packets go, as element rows."""
        self.state = _NO_SYNC
        self.need_isync = True
        """No I-sync decoded since synchronisation (the next one always says TRACE_ON)."""
        self.pe_valid = False
        """Whether the address and ISA of the next instruction are known."""
        self.pe_addr: int = 0
        self.pe_isa = int(Isa.UNKNOWN)
        self.ctxt = PEContextInfo(SecLevel.SECURE)
        self.space = int(MemSpace.S)
        """The memory space code is read from (only I-syncs change it)."""
        self.tables: list[dict[BlockKey, Block]] = self.walker.tables(self.space)
        self.elem_isa = int(Isa.UNKNOWN)
        """The ISA of the last element output: the reference reuses one output element,
        so its ISA persists into the context elements that follow."""
        self.last_idx: int = 0
        """The capture index of the last packet decoded (or waited through)."""
        self.seen_notsync = False
        self.waited = 0
        """Bytes of the packets skipped while waiting for synchronisation."""
        self.waited_at: int = 0
        """The capture index of the first of them."""
        self.halted = False

    # -- state crossing a cut (cstrace.split) --------------------------------------------

    CUT_CONSTANTS = frozenset(
        (
            "config",
            "context",
            "trace_id",
            "walker",
            "memory",
            "tables",
            "out",
            "seen_notsync",
        )
    )
    """Attributes that are not state crossing a cut: set from the configuration and
    context, the block tables of the code memory (derived from ``space``, the memory
    having no state of its own where a stream is cut), the per-packet output list
    (emptied between packets) and ``seen_notsync`` (read by ``NotSync`` packets only,
    which the reader gives before its first A-sync only)."""

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
            self.unsync_reason if self.state == _NO_SYNC else None,
            self.need_isync,
            self.pe_valid,
            self.pe_addr if self.pe_valid else None,
            self.pe_isa,
            tuple(getattr(ctxt, name) for name in PEContextInfo.__slots__),
            self.space,
            self.elem_isa,
            self.last_idx,
            self.waited,
            self.waited_at if self.waited else None,
            self.halted,
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
            and not self.halted
        )

    # -- packets -----------------------------------------------------------------------

    def step(self, pkt: Any) -> list[Any]:
        """The elements of one packet: :attr:`out`, emptied, then given them."""
        out = self.out
        del out[:]
        self.decode(pkt)
        return out

    def decode(self, pkt: Any) -> None:
        """Decode one packet: its elements are appended to :attr:`out`."""
        if self.halted:
            return
        if self.state != _DECODE and not self._wait(pkt):
            return
        self.last_idx = pkt.offset
        t = type(pkt)
        if t is Atom:  # the most frequent packet first
            if self.pe_valid:
                self._walk(pkt.count, pkt.bits, pkt.cycle_count, _ATOM_DETAIL, True)
        elif t is BranchAddress:
            self._branch(pkt)
        elif t is WaypointUpdate:
            if self.pe_valid:
                self._walk(1, 1, None, _WAYPOINT_DETAIL, False, pkt.address)
        elif t is ISync:
            self._isync(pkt)
        elif t is ContextID:
            self._context_id(pkt.context_id)
        elif t is VMID:
            self._vmid(pkt.vmid)
        elif t is Timestamp:
            self._timestamp(pkt)
        elif t is Trigger:
            self.out.append(Event(self.last_idx, EventType.TRIGGER))
        elif t is ExceptionReturn:
            self.out.append(ExceptionRet(self.last_idx))
        elif t is BadSequence or t is Reserved:
            self._bad()
        # (A-sync, ignore and incomplete packets give nothing)

    def _wait(self, pkt: Any) -> bool:
        """A packet before synchronisation: whether decoding starts with it (an I-sync
        after an A-sync)."""
        t = type(pkt)
        if t is NotSync:
            # the reference hands only the first unsynchronised block to its decoder
            if self.seen_notsync or pkt.carried:
                return False
            self.seen_notsync = True
        offset = self.last_idx = pkt.offset
        if self.state == _NO_SYNC:
            self.out.append(NoSync(offset, self.unsync_reason))
            self.state = _WAIT_ISYNC if t is ASync else _WAIT_SYNC
            return False
        if t is not ASync and t is not ISync and t is not NotSync:
            if not self.waited:
                self.waited_at = offset
            self.waited += len(pkt.raw)
        if self.state == _WAIT_SYNC:
            if t is ASync:
                self.state = _WAIT_ISYNC
            return False
        if t is not ISync:
            return False
        self.state = _DECODE
        if self.waited:
            self.out.append(_sync_wait(self.waited_at, self.trace_id, self.waited))
            self.waited = 0
        return True

    def _branch(self, pkt: BranchAddress) -> None:
        """Branch address: an exception, or an E atom on the waypoint before it; then the
        address and ISA it gives."""
        cc = pkt.cycle_count
        if pkt.exception is not None:
            self.out.append(
                Exception_(
                    self.last_idx,
                    pkt.exception,
                    self.pe_addr if self.pe_valid else None,
                    cycle_count=cc,
                )
            )
        elif self.pe_valid:
            self._walk(1, 1, cc, _BRANCH_DETAIL, False)
        self.pe_isa = int(pkt.isa)
        self.pe_addr = pkt.address
        self.pe_valid = True

    def _isync(self, pkt: ISync) -> None:
        """I-sync: the address, ISA, security state and context ID; TRACE_ON when it
        starts the trace or is not periodic."""
        offset = self.last_idx
        ctxt = self.ctxt
        self.pe_addr = pkt.address
        self.pe_isa = int(pkt.isa)
        self.pe_valid = True
        show_ctxt = pkt.isa_changed
        if pkt.context_id is not None:
            ctxt.context_id = pkt.context_id
            ctxt.ctxt_id_valid = True
            show_ctxt = True
            self.memory.set_context(ctxt.context_id, ctxt.vmid if ctxt.vmid_valid else None)
        ctxt.security_level = SecLevel.NONSECURE if pkt.ns else SecLevel.SECURE
        self.space = int(MemSpace.N if pkt.ns else MemSpace.S)
        self.tables = self.walker.tables(self.space)
        if self.need_isync or pkt.reason != ISyncReason.PERIODIC:
            self.out.append(TraceOn(offset, _TRACE_ON[pkt.reason], pkt.cycle_count))
        else:
            show_ctxt = False
        self.need_isync = False
        self.stack.flush()
        if show_ctxt:
            self.elem_isa = self.pe_isa
            self.out.append(PEContext(offset, ctxt.copy(), _ISAS[self.pe_isa]))

    def _context_id(self, cid: int) -> None:
        """Context ID: a PE context element when it changes."""
        ctxt = self.ctxt
        if not (ctxt.ctxt_id_valid and ctxt.context_id == cid):
            ctxt.context_id = cid
            ctxt.ctxt_id_valid = True
            self.memory.set_context(cid, ctxt.vmid if ctxt.vmid_valid else None)
            self.tables = self.walker.tables(self.space)
            self.out.append(PEContext(self.last_idx, ctxt.copy(), _ISAS[self.elem_isa]))

    def _vmid(self, vmid: int) -> None:
        """VMID: a PE context element when it changes."""
        ctxt = self.ctxt
        if not (ctxt.vmid_valid and ctxt.vmid == vmid):
            ctxt.vmid = vmid
            ctxt.vmid_valid = True
            self.memory.set_context(ctxt.context_id if ctxt.ctxt_id_valid else None, vmid)
            self.tables = self.walker.tables(self.space)
            self.out.append(PEContext(self.last_idx, ctxt.copy(), _ISAS[self.elem_isa]))

    def _timestamp(self, pkt: Timestamp) -> None:
        """Timestamp: trace time moved on, and the code memory applies its events up to
        it (an event log may map other code from now on)."""
        ts = pkt.timestamp
        self.memory.advance(ts)
        self.tables = self.walker.tables(self.space)
        self.out.append(TimestampElem(self.last_idx, ts, pkt.cycle_count))

    def _bad(self) -> None:
        """A bad sequence or reserved header: wait for synchronisation again."""
        self.state = _WAIT_SYNC
        self.need_isync = True
        # the reference gives no reason here: it prints "undefined"
        self.out.append(NoSync(self.last_idx, UnsyncReason.UNKNOWN))

    def _walk(
        self,
        nwalk: int,
        bits: int,
        cc: int | None,
        detail: int,
        atom: bool,
        to_addr: int | None = None,
    ) -> None:
        """Follow the code for ``nwalk`` atoms (E/N in ``bits``, the first in bit 0) of
        the packet (an atom packet when ``atom``: only those pop the return stack;
        ``detail`` names its kind in a diagnostic); with ``to_addr``, walk to the
        instruction at that address (a waypoint update)."""
        offset = self.last_idx
        walker = self.walker
        tables = self.tables
        out = self.out
        space = self.space
        pe_addr = self.pe_addr
        pe_isa = self.pe_isa
        pe_valid = True
        for _ in range(nwalk):
            if pe_isa > _T32:  # Jazelle, ThumbEE...: not decodable
                # the reference reads the opcode before refusing the instruction set
                pe_valid = False
                if not walker.readable(pe_addr, space):
                    out.append(AddrNacc(offset, pe_addr, MemSpace(space)))
                else:
                    out.append(
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
            if to_addr is not None:
                blk = walker.walk_through(pe_addr, pe_isa, space, to_addr)
            else:
                cached = tables[pe_isa].get(pe_addr)
                blk = walker.block(pe_addr, pe_isa, space) if cached is None else cached
            end = blk.end
            if not blk.found:
                pe_valid = False
                if blk.count:
                    self.elem_isa = pe_isa
                    out.append(offset)
                    out.append(blk.range_e)
                out.append(AddrNacc(offset, end, MemSpace(space)))
                break
            taken = bits & 1
            bits >>= 1
            next_addr = end
            next_isa = blk.next_isa
            if taken:
                itype = blk.itype
                if itype == _BR:
                    next_addr = blk.target
                    if blk.link:
                        self.stack.push(end, pe_isa)
                elif itype == _BR_IND:
                    pe_valid = False
                    stack = self.stack
                    if stack.active and atom:
                        popped = stack.pop()
                        if stack.overflow:
                            # fatal in the reference: it stops decoding there
                            out.append(
                                Diagnostic(
                                    offset,
                                    self.trace_id,
                                    DiagCode.RET_STACK_OVERFLOW,
                                    DiagKind.RETURN_STACK_OVERFLOW,
                                    _ATOM_DETAIL,
                                )
                            )
                            self.halted = True
                            break
                        assert popped is not None
                        next_addr, next_isa = popped
                        pe_valid = True
                    if blk.link:
                        stack.push(end, pe_isa)
            self.elem_isa = pe_isa
            rng = blk.range_e if taken else blk.range_n
            if cc is None:
                out.append(offset)
                out.append(rng)
            else:
                out.append(InstrRange(offset, *rng, cc))
            pe_addr = next_addr
            pe_isa = next_isa
            if not pe_valid:
                break
        self.pe_addr = pe_addr
        self.pe_isa = pe_isa
        if not pe_valid:
            self.pe_valid = False

    def finish(self) -> None:
        """End of trace (unless the capture stopped on a framing error)."""
        if self.halted or not self.context.complete:
            return
        if self.waited:
            self.out.append(_sync_wait(self.waited_at, self.trace_id, self.waited))
        self.out.append(EoTrace(self.last_idx, UnsyncReason.EOT))


def iter_rows(
    packets: Iterable[Packet], config: PtmConfig, context: DecodeContext, size: int = 4096
) -> Iterator[list[Any]]:
    """Decode PTM packets into lists of element rows (:mod:`cstrace.rows`) of about
    ``size`` elements or more."""
    dec = PtmDecoder(config, context)
    out: list[Any] = []
    dec.out = out
    for pkt in packets:
        dec.decode(pkt)
        if dec.halted:
            break
        if len(out) >= size:
            yield out
            out = []
            dec.out = out
    dec.finish()
    if out:
        yield out


def iter_elements(
    packets: Iterable[Packet], config: PtmConfig, context: DecodeContext
) -> Iterator[Element]:
    """Decode PTM packets to generic trace elements.

    Lazy: the elements of a packet come before the next packet is read.
    """
    dec = PtmDecoder(config, context)
    out = dec.out
    for pkt in packets:
        dec.decode(pkt)
        if out:
            yield from expand(out)
            del out[:]
        if dec.halted:
            return
    dec.finish()
    yield from expand(out)
