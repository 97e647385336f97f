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
from cstrace.isa.blocks import BlockCache
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

__all__ = ["ReturnStack", "iter_elements"]

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
_ISA_DETAIL = {
    BranchAddress: int(PtmPacketType.BRANCH_ADDRESS),
    WaypointUpdate: int(PtmPacketType.WAYPOINT_UPDATE),
}
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


def _isa_options(config: PtmConfig) -> IsaOptions:
    arch, profile = arch_profile(config.core)
    return IsaOptions(arch, profile, dsb_dmb_waypoints=config.dmb_dsb_waypoints)


def _sync_wait(offset: int, trace_id: int, waited: int) -> Diagnostic:
    """The count of the packets skipped while waiting for synchronisation."""
    return Diagnostic(offset, trace_id, DiagCode.NONE, DiagKind.SYNC_WAIT, waited, Severity.WARNING)


def iter_elements(
    packets: Iterable[Packet], config: PtmConfig, context: DecodeContext
) -> Iterator[Element]:
    """Decode PTM packets to generic trace elements."""
    walker = BlockCache.shared(context.memory, _isa_options(config))
    memory = walker.memory
    stack = ReturnStack(config.return_stack)
    state = _NO_SYNC
    need_isync = True
    # current program state: the address and ISA of the next instruction
    pe_valid = False
    pe_addr = 0
    pe_isa = int(Isa.UNKNOWN)
    # PE context
    ctxt = PEContextInfo(SecLevel.SECURE)
    space = int(MemSpace.S)
    tables = walker.tables(space)
    # the reference reuses one output element: its ISA persists between elements
    elem_isa = int(Isa.UNKNOWN)
    offset = 0
    isas = _ISAS
    seen_notsync = False
    # packets skipped while waiting for synchronisation: their bytes, the first one's index
    waited = waited_at = 0

    for pkt in packets:
        if state != _DECODE:
            if type(pkt) is NotSync:
                # the reference hands only the first unsynchronised block to its decoder
                if seen_notsync or pkt.carried:
                    continue
                seen_notsync = True
            offset = pkt.offset
            if state == _NO_SYNC:
                reason = UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER
                yield NoSync(offset, reason)
                state = _WAIT_ISYNC if isinstance(pkt, ASync) else _WAIT_SYNC
                continue
            if not isinstance(pkt, (ASync, ISync, NotSync)):
                if not waited:
                    waited_at = offset
                waited += len(pkt.raw)
            if state == _WAIT_SYNC:
                if isinstance(pkt, ASync):
                    state = _WAIT_ISYNC
                continue
            if not isinstance(pkt, ISync):
                continue
            state = _DECODE
            if waited:
                yield _sync_wait(waited_at, config.trace_id, waited)
                waited = 0
        offset = pkt.offset

        # the code walks this packet asks for: ``nwalk`` atoms, E/N in ``bits``
        to_addr = False
        if type(pkt) is Atom:  # the most frequent packet first
            if not pe_valid:
                continue
            bits = pkt.bits
            nwalk = pkt.count
            cc = pkt.cycle_count
        else:
            bits = 0
            match pkt:
                case BranchAddress():
                    cc = pkt.cycle_count
                    nwalk = 0
                    if pkt.exception is not None:
                        yield Exception_(
                            offset,
                            pkt.exception,
                            pe_addr if pe_valid else None,
                            cycle_count=cc,
                        )
                    elif pe_valid:
                        nwalk, bits = 1, 1  # a branch address implies an E atom
                case WaypointUpdate():
                    if not pe_valid:
                        continue
                    cc = None
                    nwalk, bits, to_addr = 1, 1, True
                case ISync():
                    pe_addr = pkt.address
                    pe_isa = int(pkt.isa)
                    pe_valid = True
                    show_ctxt = pkt.isa_changed
                    if pkt.context_id is not None:
                        ctxt.context_id = pkt.context_id
                        ctxt.ctxt_id_valid = True
                        show_ctxt = True
                        memory.set_context(ctxt.context_id, ctxt.vmid if ctxt.vmid_valid else None)
                    ctxt.security_level = SecLevel.NONSECURE if pkt.ns else SecLevel.SECURE
                    space = int(MemSpace.N if pkt.ns else MemSpace.S)
                    tables = walker.tables(space)
                    if need_isync or pkt.reason != ISyncReason.PERIODIC:
                        yield TraceOn(offset, _TRACE_ON[pkt.reason], pkt.cycle_count)
                    else:
                        show_ctxt = False
                    need_isync = False
                    stack.flush()
                    if show_ctxt:
                        elem_isa = pe_isa
                        yield PEContext(offset, ctxt.copy(), isas[pe_isa])
                    continue
                case ContextID(context_id=cid):
                    if not (ctxt.ctxt_id_valid and ctxt.context_id == cid):
                        ctxt.context_id = cid
                        ctxt.ctxt_id_valid = True
                        memory.set_context(cid, ctxt.vmid if ctxt.vmid_valid else None)
                        tables = walker.tables(space)
                        yield PEContext(offset, ctxt.copy(), isas[elem_isa])
                    continue
                case VMID(vmid=vmid):
                    if not (ctxt.vmid_valid and ctxt.vmid == vmid):
                        ctxt.vmid = vmid
                        ctxt.vmid_valid = True
                        memory.set_context(ctxt.context_id if ctxt.ctxt_id_valid else None, vmid)
                        tables = walker.tables(space)
                        yield PEContext(offset, ctxt.copy(), isas[elem_isa])
                    continue
                case Timestamp(timestamp=ts, cycle_count=tcc):
                    # Trace time moved on: the code memory applies its events up to it
                    # (an event log may map other code from now on).
                    memory.advance(ts)
                    tables = walker.tables(space)
                    yield TimestampElem(offset, ts, tcc)
                    continue
                case Trigger():
                    yield Event(offset, EventType.TRIGGER)
                    continue
                case ExceptionReturn():
                    yield ExceptionRet(offset)
                    continue
                case BadSequence() | Reserved():
                    state = _WAIT_SYNC
                    need_isync = True
                    # the reference gives no reason here: it prints "undefined"
                    yield NoSync(offset, UnsyncReason.UNKNOWN)
                    continue
                case _:
                    continue  # A-sync, ignore and incomplete packets

        # follow the code for each atom (explicit or implied) of this packet
        for _ in range(nwalk):
            if pe_isa > _T32:  # Jazelle, ThumbEE...: not decodable
                # the reference reads the opcode before refusing the instruction set
                pe_valid = False
                if not walker.readable(pe_addr, space):
                    yield AddrNacc(offset, pe_addr, MemSpace(space))
                else:
                    yield Diagnostic(
                        offset,
                        config.trace_id,
                        DiagCode.UNSUPPORTED_ISA,
                        DiagKind.UNSUPPORTED_ISA,
                        _ISA_DETAIL.get(type(pkt), _ATOM_DETAIL),
                        Severity.WARNING,
                    )
                break
            if to_addr:
                assert isinstance(pkt, WaypointUpdate)
                blk = walker.walk_through(pe_addr, pe_isa, space, pkt.address)
            else:
                cached = tables[pe_isa].get(pe_addr)
                blk = walker.block(pe_addr, pe_isa, space) if cached is None else cached
            end = blk.end
            if not blk.found:
                pe_valid = False
                if blk.count:
                    elem_isa = pe_isa
                    yield InstrRange(offset, *blk.range_e)
                yield AddrNacc(offset, end, MemSpace(space))
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
                        stack.push(end, pe_isa)
                elif itype == _BR_IND:
                    pe_valid = False
                    if stack.active and type(pkt) is Atom:
                        popped = stack.pop()
                        if stack.overflow:
                            # fatal in the reference: it stops decoding there
                            yield Diagnostic(
                                offset,
                                config.trace_id,
                                DiagCode.RET_STACK_OVERFLOW,
                                DiagKind.RETURN_STACK_OVERFLOW,
                                _ATOM_DETAIL,
                            )
                            return
                        assert popped is not None
                        next_addr, next_isa = popped
                        pe_valid = True
                    if blk.link:
                        stack.push(end, pe_isa)
            elem_isa = pe_isa
            yield InstrRange(offset, *(blk.range_e if taken else blk.range_n), cc)
            pe_addr = next_addr
            pe_isa = next_isa
            if not pe_valid:
                break

        if type(pkt) is BranchAddress:
            pe_isa = int(pkt.isa)
            pe_addr = pkt.address
            pe_valid = True

    if context.complete:
        if waited:
            yield _sync_wait(waited_at, config.trace_id, waited)
        yield EoTrace(offset, UnsyncReason.EOT)
