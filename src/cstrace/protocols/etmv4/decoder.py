"""ETMv4 / ETE program-flow decoder: packets + configuration + code memory → generic elements.

Input: the packets of one trace ID (:mod:`cstrace.protocols.etmv4.packets`),
the trace unit's :class:`~cstrace.protocols.etmv4.config.Etmv4Config` and a
:class:`~cstrace.protocols.base.DecodeContext` (code memory, options, whether
this is a reset decoder and whether the capture is complete). Output: the
generic elements of :mod:`cstrace.elements` (``TRACE_ON``, ``PE_CONTEXT``,
``INSTR_RANGE``, ``EXCEPTION``, ``ADDR_NACC``, ...), in the order and with the
``Idx`` values of the reference decoder (OpenCSD ``trc_pkt_lister``).

How it works (ETMv4 architecture specification IHI0064, chapter 6 "Decoding
the trace"; ETE: Arm ARM chapter D4/D5 "Embedded Trace Extension"):

- Packets become *stack elements* on the P0 stack: atoms, exceptions, Q
  elements and (ETE) source addresses are P0 elements that can be speculative;
  addresses, contexts, timestamps, cycle counts, events, markers, transactional
  memory and instrumentation records ride along with them in order.
- Commit, cancel and mispredict packets, and the maximum speculation depth
  (TRCIDR8.MAXSPEC: anything deeper is committed at once), resolve the stack
  from its oldest end. Committing an atom walks the program image from the
  current address to the next waypoint (one lookup in the shared block cache
  of :mod:`cstrace.isa.blocks` per atom) and emits an ``INSTR_RANGE``; where
  no image covers the address it emits ``ADDR_NACC`` with the memory space of
  the current exception level and security state.
- The decoder drives the code memory (:class:`~cstrace.memory.code.CodeMemory`):
  ``set_context`` when a context element changes the context ID or VMID, and
  ``advance(time)`` for each ``TIMESTAMP`` it outputs, once the elements of
  that packet are made (an atom resolved by the same packet still walks the
  code of the time before).
- A packet that cannot be decoded (reserved header, bad sequence, conditional
  or data trace) resets the decoder, which reports ``NO_SYNC [bad-packet]``
  with the next packet; a sequence the stack cannot satisfy (commit or cancel
  of more elements than stacked, a mispredict with no atom, a return-stack
  underflow, an exception without its address) resets it at once, dropping
  that step's elements. Either way it waits for an A-sync and a trace info,
  and yields a :class:`~cstrace.elements.Diagnostic` where the reference logs
  its error.

Element ordering follows the reference: an element held on the stack is
emitted, with the ``Idx`` of the packet that created it, when a later packet
resolves it. Some behaviours of the reference (OpenCSD 1.8) are kept on
purpose because its listings show them: the PE context survives resets (and,
through ``context.state``, the buffers of a session); after a Q element the
commit step removes the next stacked element too; an ETE source address is not
a P0 element for cancelling.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cstrace.capture.stream import Stream
from cstrace.elements import (
    AddrNacc,
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
    Instrumentation,
    IRangeNoPath,
    Isa,
    MemSpace,
    MemTrans,
    MemTransType,
    NoSync,
    PEContext,
    PEContextInfo,
    SecLevel,
    SyncMarker,
    SyncMarkerType,
    Timestamp,
    TraceOn,
    TraceOnReason,
    UnsyncReason,
    el_space,
)
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.isa import IsaOptions, StopReason
from cstrace.isa.blocks import Block, BlockCache, Instr
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.etmv4.packets import Address as Address_
from cstrace.protocols.etmv4.packets import AddressMatch as AddressMatch_
from cstrace.protocols.etmv4.packets import Atom as Atom_
from cstrace.protocols.etmv4.packets import AtomRun as AtomRun_
from cstrace.protocols.etmv4.packets import NotSync as NotSync_
from cstrace.protocols.etmv4.packets import PacketType as PT
from cstrace.protocols.etmv4.reader import ATOM_FIELDS as _ATOM_FIELDS
from cstrace.protocols.etmv4.reader import PacketSink, read_into
from cstrace.protocols.kit import ReturnStack
from cstrace.rows import expand
from cstrace.tally import PacketCount

__all__ = ["Etmv4Decoder", "iter_elements", "iter_rows", "iter_stream_rows", "merge_log"]

# --- packet kinds, as the decoder groups them ------------------------------------------
K_BAD = 0
K_ASYNC = 1
K_IGNORE = 2
K_TRACE_INFO = 3
K_TRACE_ON = 4
K_ATOM = 5
K_CTXT = 6
K_ADDR = 7
K_ADDR_CTXT = 8
K_SRC_ADDR = 9
K_EXCEPT = 10
K_EXCEPT_RTN = 11
K_FUNC_RET = 12
K_EVENT = 13
K_CCNT = 14
K_TIMESTAMP = 15
K_TS_MARKER = 16
K_MISPREDICT = 17
K_CANCEL = 18
K_COMMIT = 19
K_OVERFLOW = 20
K_DISCARD = 21
K_Q = 22
K_TRANS_ST = 23
K_TRANS_COMMIT = 24
K_TRANS_FAIL = 25
K_ITE = 26
K_NOT_SYNC = 27

_KIND: dict[int, int] = {
    PT.ASYNC: K_ASYNC,
    PT.IGNORE: K_IGNORE,
    PT.TRACE_INFO: K_TRACE_INFO,
    PT.TRACE_ON: K_TRACE_ON,
    PT.ATOM_F1: K_ATOM,
    PT.ATOM_F2: K_ATOM,
    PT.ATOM_F3: K_ATOM,
    PT.ATOM_F4: K_ATOM,
    PT.ATOM_F5: K_ATOM,
    PT.ATOM_F6: K_ATOM,
    PT.CTXT: K_CTXT,
    PT.ADDR_MATCH: K_ADDR,
    PT.ADDR_S_IS0: K_ADDR,
    PT.ADDR_S_IS1: K_ADDR,
    PT.ADDR_L_32IS0: K_ADDR,
    PT.ADDR_L_32IS1: K_ADDR,
    PT.ADDR_L_64IS0: K_ADDR,
    PT.ADDR_L_64IS1: K_ADDR,
    PT.ADDR_CTXT_L_32IS0: K_ADDR_CTXT,
    PT.ADDR_CTXT_L_32IS1: K_ADDR_CTXT,
    PT.ADDR_CTXT_L_64IS0: K_ADDR_CTXT,
    PT.ADDR_CTXT_L_64IS1: K_ADDR_CTXT,
    PT.SRC_ADDR_MATCH: K_SRC_ADDR,
    PT.SRC_ADDR_S_IS0: K_SRC_ADDR,
    PT.SRC_ADDR_S_IS1: K_SRC_ADDR,
    PT.SRC_ADDR_L_32IS0: K_SRC_ADDR,
    PT.SRC_ADDR_L_32IS1: K_SRC_ADDR,
    PT.SRC_ADDR_L_64IS0: K_SRC_ADDR,
    PT.SRC_ADDR_L_64IS1: K_SRC_ADDR,
    PT.EXCEPT: K_EXCEPT,
    PT.EXCEPT_RTN: K_EXCEPT_RTN,
    PT.FUNC_RET: K_FUNC_RET,
    PT.EVENT: K_EVENT,
    PT.CCNT_F1: K_CCNT,
    PT.CCNT_F2: K_CCNT,
    PT.CCNT_F3: K_CCNT,
    PT.TIMESTAMP: K_TIMESTAMP,
    PT.TS_MARKER: K_TS_MARKER,
    PT.MISPREDICT: K_MISPREDICT,
    PT.CANCEL_F1: K_CANCEL,
    PT.CANCEL_F1_MISPRED: K_CANCEL,
    PT.CANCEL_F2: K_CANCEL,
    PT.CANCEL_F3: K_CANCEL,
    PT.COMMIT: K_COMMIT,
    PT.OVERFLOW: K_OVERFLOW,
    PT.DISCARD: K_DISCARD,
    PT.Q: K_Q,
    PT.TRANS_ST: K_TRANS_ST,
    PT.TRANS_COMMIT: K_TRANS_COMMIT,
    PT.TRANS_FAIL: K_TRANS_FAIL,
    PT.ITE: K_ITE,
    PT.NOT_SYNC: K_NOT_SYNC,
}
"""Packet type → decoder kind; anything else (reserved, bad, conditional and data
trace, ETE PE reset) is a packet the reference decoder rejects."""

# --- P0 stack element kinds (the reference's p0_elem_t) -------------------------------
_UNKNOWN = 0
_ATOM = 1
_ADDR = 2
_CTXT = 3
_TRC_ON = 4
_EXCEP = 5
_EXCEP_RET = 6
_EVENT = 7
_TS = 8
_CC = 9
_TS_CC = 10
_MARKER = 11
_Q = 12
_OVERFLOW = 13
_FUNC_RET = 14
_SRC_ADDR = 15
_TRANS_TRACE_INIT = 16
_TRANS_START = 17
_TRANS_COMMIT = 18
_TRANS_FAIL = 19
_ITE = 20
_UNSEEN = 21
_TINFO = 22

# Stack elements are small lists ``[kind, is_p0, idx, a, b, c]``; the stack is a
# deque with the oldest element first (taking the first costs the same however many
# elements a damaged stream has piled up behind it).
#   atom:      a = atoms left, b = E/N bits (oldest in bit 0)
#   addr:      a = address, b = IS          src addr: the same
#   ctxt:      a = context tuple (see _ctxt_of)
#   excep:     a = exception number, b = "address is also the previous branch target"
#   ts, ts+cc: a = timestamp, b = cycle count          cc: a = cycle count
#   event:     a = event bits                          ite: a = EL, b = value
#   q:         a = instruction count, b = address or None, c = IS
#   unseen:    a = how many speculative P0 elements a trace info said were not traced
#              (one entry for all of them: commit and cancel take from the count)
_K, _P0, _IX, _A, _B, _C = 0, 1, 2, 3, 4, 5

# Decoder states (the reference's processor_state_t; its RESOLVE state is a call).
_NO_SYNC = 0
_WAIT_SYNC = 1
_WAIT_TINFO = 2
_DECODE = 3

_ISA = tuple(Isa)
_A32, _T32, _A64 = int(Isa.A32), int(Isa.T32), int(Isa.A64)
_BR = int(InstrType.BR)
_BR_IND = int(InstrType.BR_INDIRECT)
_OTHER = int(InstrType.OTHER)
_V8_ERET = int(InstrSubtype.V8_ERET)

_M_CLASS_TAIL_ADDR = 0xFFFFFFFE

_MEMTRANS = {
    _TRANS_TRACE_INIT: MemTransType.TRACE_INIT,
    _TRANS_START: MemTransType.START,
    _TRANS_COMMIT: MemTransType.COMMIT,
    _TRANS_FAIL: MemTransType.FAIL,
}
_FLUSH_ON_EOT = frozenset((_UNKNOWN, _ATOM, _TRC_ON, _EXCEP, _EXCEP_RET, _OVERFLOW, _Q, _UNSEEN))
_KEEP_ON_CANCEL = frozenset((_EVENT, _TS, _CC, _TS_CC, _MARKER, _ITE))
_TS_CC_EVENT = frozenset((_EVENT, _TS, _CC, _TS_CC))
_TRANS = frozenset((_TRANS_START, _TRANS_COMMIT, _TRANS_FAIL, _TRANS_TRACE_INIT))


# Diagnostics of the sequence errors the reference reports (its error class, what happened).
_COMMIT_SHORT = (DiagCode.COMMIT_PKT_OVERRUN, DiagKind.COMMIT_SHORT)
_CANCEL_SHORT = (DiagCode.COMMIT_PKT_OVERRUN, DiagKind.CANCEL_SHORT)
_MISPREDICT_NO_ATOM = (DiagCode.COMMIT_PKT_OVERRUN, DiagKind.MISPREDICT_NO_ATOM)
_RET_STACK_OVERFLOW = (DiagCode.RET_STACK_OVERFLOW, DiagKind.RETURN_STACK_OVERFLOW)
_EXCEPTION_NO_ADDRESS = (DiagCode.BAD_PACKET_SEQ, DiagKind.EXCEPTION_NO_ADDRESS)
_Q_NO_ADDRESS = (DiagCode.BAD_PACKET_SEQ, DiagKind.Q_NO_ADDRESS)
_SPEC_DEPTH = (DiagCode.BAD_PACKET_SEQ, DiagKind.SPEC_DEPTH_EXCEEDED)
_DATA_TRACE_KINDS = frozenset(
    (
        PT.COND_FLUSH,
        PT.COND_I_F1,
        PT.COND_I_F2,
        PT.COND_I_F3,
        PT.COND_RES_F1,
        PT.COND_RES_F2,
        PT.COND_RES_F3,
        PT.COND_RES_F4,
        PT.NUM_DS_MKR,
        PT.UNNUM_DS_MKR,
    )
)


class _SeqError(Exception):
    """A packet sequence the decoder cannot follow: it resets and resynchronises."""


class Etmv4Decoder(PacketSink):
    """The program-flow decoder of one ETMv4/ETE trace stream.

    ``decode(packet)`` appends the elements the packet completed to the list
    ``out`` (the caller's: it may empty or replace it between packets),
    ``finish()`` the end-of-trace elements, as element rows (:mod:`cstrace.rows`:
    an ``INSTR_RANGE`` of a block walk is two items, its offset and the block's
    ``RangeArgs``). Diagnostics go to ``log`` with their position in ``out``.

    The decoder is also a :class:`~cstrace.protocols.etmv4.reader.PacketSink`:
    the reader's loop can hand it the packets it reads (:func:`iter_stream_rows`),
    the hot kinds (atoms, target addresses and exact matches) as fields, without
    a packet object, and each packet's diagnostics are then merged into ``out``
    at once (:func:`merge_log`).
    """

    def __init__(self, config: Any, context: DecodeContext) -> None:
        super().__init__()
        self.packets = 0
        """Packets given to the decoder as a sink (the hot kinds as fields included)."""
        self.handlers: dict[type, Any] | None = None
        """Packet class -> what to call with each such packet given to the decoder as
        a sink (for counting: :class:`cstrace.tally.PacketCount`)."""
        self.config = config
        self.context = context
        major = int(getattr(config, "major_version", 4))
        self.is_ete = bool(getattr(config, "is_ete", False)) or major >= 5
        self.max_spec_depth = int(getattr(config, "max_spec_depth", 0))
        self.fast_atoms = self.max_spec_depth == 0
        self.comm_trans_p0 = bool(getattr(config, "comm_trans_p0", True))
        self.ts_with_cc = bool(getattr(config, "cycle_counting", False))
        idr0 = int(getattr(config, "idr0", 0))
        self.ete_has_ts_marker = int(getattr(config, "full_version", 0)) >= 0x51 and bool(
            idr0 & 0x800000
        )
        arch = int(getattr(config, "arch_version", 0))
        profile = int(getattr(config, "core_profile", 0))
        self.m_profile = profile == 1
        self.v7m = arch == 0x0700 and self.m_profile
        self.v8m = 0x0800 <= arch <= 0x0864 and self.m_profile
        self.src_addr_n = bool(getattr(context.options, "src_addr_n", False))
        self.walker = BlockCache.shared(context.memory, isa_options(config))
        self.memory = self.walker.memory
        self.generation = self.memory.generation
        self.timed = False
        """A ``TIMESTAMP`` was output for the current packet: trace time moves after it."""
        self.rs = ReturnStack(bool(getattr(config, "ret_stack", False)))
        # What the reference keeps when it resets between buffers of a session:
        # the PE context its output element carries, the code follower's address,
        # ISA and IT state, and the packet processor's last cycle count.
        persist: dict[str, Any] | None = getattr(context, "state", None)
        self.persist: dict[str, Any] = {} if persist is None else persist
        saved = self.persist.get("etmv4")
        self.pe: PEContextInfo = PEContextInfo() if saved is None else saved[0]
        self.addr: int = 0
        self.isa: int = _A32
        self.it: int = 0
        self.last_cc: int = 0
        if saved is not None:
            self.addr, self.isa, self.it, self.last_cc = saved[1:]
        self.unsync_reason = (
            UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER
        )
        self.stack: deque[list[Any]] = deque()
        self.lone: tuple[int, int, int] | None = None
        """A target address stacked alone, kept out of :attr:`stack` as (Idx, address,
        ISA) while the stack is otherwise empty: the fast paths take one target address
        and then atoms without a list entry (see :meth:`_target`). Anything else that
        reads or pushes the stack puts it back there first (:meth:`_unlone`)."""
        self.out: list[Any] = []
        """Where the elements go, as element rows (cstrace.rows)."""
        self.trace_id = int(getattr(config, "trace_id", context.trace_id))
        self.seen_not_sync = False
        self.waited = 0
        """Bytes of the packets skipped so far while waiting for synchronisation (reported
        as a ``SYNC_WAIT`` diagnostic when a trace info ends the wait, or at the end)."""
        self.waited_at = 0
        """The index of the first of them."""
        self.log: list[tuple[int, Diagnostic]] = []
        """Diagnostics of the current packet, with the number of its elements before each."""
        self.last_idx = 0
        # Where the last atom left the walk (a cache: see _atoms): the address object,
        # ISA, IT state and block tables then, the block walked last and its outcome,
        # and the block its link gave. Good only while the walk is still there.
        self.walk_addr: object = None
        self.walk_isa = -1
        self.walk_it = 0
        self.walk_tables: list[dict[Any, Block]] | None = None
        self.walk_prev: Block | None = None
        self.walk_prev_taken = False
        self.walk_next: Block | None = None
        self.stale = True
        """The code memory's view may have changed since the fast paths last compared its
        generation: set by everything that can move it (the general path, the caller)."""
        self._reset()

    # -- state -------------------------------------------------------------------

    def _reset(self) -> None:
        """The reference's resetDecoder (the PE context and return stack survive)."""
        self.state = _NO_SYNC
        self.is_secure = True
        self.is_64bit = False
        self.cc_threshold = 0
        self.spec_depth = 0
        self.need_ctxt = True
        self.need_addr = True
        self.elem_pending_addr = False
        self.prev_overflow = False
        self.stack.clear()
        self.lone = None
        self.res_commit = 0
        self.res_cancel = 0
        self.res_mispredict = False
        self.res_discard = False
        self.ete_first_ts_marker = False
        self._set_space()

    CUT_CONSTANTS = frozenset(
        (
            "config",
            "context",
            "is_ete",
            "max_spec_depth",
            "fast_atoms",
            "comm_trans_p0",
            "ts_with_cc",
            "ete_has_ts_marker",
            "m_profile",
            "v7m",
            "v8m",
            "src_addr_n",
            "trace_id",
            "walker",
            "memory",
            "generation",
            "blocks",
            "persist",
            "out",
            "log",
            "seen_not_sync",
            "group_atoms",
            "limit",
            "packets",
            "handlers",
            "walk_addr",
            "walk_isa",
            "walk_it",
            "walk_tables",
            "walk_prev",
            "walk_prev_taken",
            "walk_next",
            "stale",
        )
    )
    """Attributes that are not state crossing a cut: set from the configuration and
    context, caches of the code memory (``generation``, ``blocks``: derived from
    ``space``), the dictionary kept across buffers (written by :meth:`finish` only),
    the per-packet output lists (empty between packets), ``seen_not_sync`` (read by
    ``NOT_SYNC`` packets only, which the reader gives before its first A-sync only) and
    what the decoder does as a packet sink (the sink's options, the packet count and the
    counting handlers), and where the last atom left the walk (``walk_*``: a cache of
    block look-ups, used only when the walk is still there)."""

    def cut_state(self) -> tuple[object, ...]:
        """Everything that decides what later packets give, as one comparable value.

        Two decoders of the same configuration and a code memory without state
        (a static map) whose cut states are equal give the same elements for the
        same packets from then on: :mod:`cstrace.split` compares a decoder started
        at a synchronisation point with the one that decoded the stream up to
        there. Every attribute is here or in :data:`CUT_CONSTANTS` (a test checks).
        """
        pe = self.pe
        rs = self.rs
        return (
            self.state,
            # Read only on the way out of NO_SYNC, and always set on the way into it.
            self.unsync_reason if self.state != _DECODE else None,
            self.is_secure,
            self.is_64bit,
            self.cc_threshold,
            self.spec_depth,
            self.need_ctxt,
            self.need_addr,
            self.elem_pending_addr,
            self.prev_overflow,
            self.res_commit,
            self.res_cancel,
            self.res_mispredict,
            self.res_discard,
            self.ete_first_ts_marker,
            self.timed,
            self.last_idx,
            self.addr,
            self.isa,
            self.it,
            self.last_cc,
            self.space,
            self.waited,
            self.waited_at,
            tuple(getattr(pe, name) for name in PEContextInfo.__slots__),
            self._stack_key(),
            rs.cut_state(),
        )

    def settled(self) -> bool:
        """Whether the decoder is synchronised with its address and context known and
        nothing stacked: what a decoder started at a cut waits for (:mod:`cstrace.split`)."""
        return self.state == _DECODE and not (
            self.need_addr or self.need_ctxt or self.stack or self.lone is not None
        )

    def _lone_entry(self, lone: tuple[int, int, int]) -> list[Any]:
        """The stack entry that :attr:`lone` (given) stands for."""
        return [_ADDR, False, lone[0], lone[1], lone[2], 0]

    def _stack_key(self) -> tuple[tuple[Any, ...], ...]:
        """The P0 stack as :meth:`cut_state` compares it, :attr:`lone` in its place."""
        lone = self.lone
        stack = self.stack if lone is None else [self._lone_entry(lone), *self.stack]
        return tuple(tuple(e) for e in stack)

    def _unlone(self) -> None:
        """Put :attr:`lone` back on the stack (before anything else reads or pushes it)."""
        lone = self.lone
        if lone is not None:
            self.lone = None
            self.stack.appendleft(self._lone_entry(lone))

    def _log(self, code: DiagCode, kind: DiagKind, detail: int = 0) -> None:
        """Report a diagnostic at the packet being decoded.

        It comes after the elements already output for this packet: the caller
        hands it on at that point of the element stream (see iter_elements).
        """
        diag = Diagnostic(self.last_idx, self.trace_id, code, kind, detail)
        self.log.append((len(self.out), diag))

    def _clip_log(self, count: int) -> None:
        """The packet's elements were cut to ``count``: no diagnostic may come after them."""
        self.log[:] = [(min(pos, count), d) for pos, d in self.log]

    def _seq_error(self, err: tuple[DiagCode, DiagKind]) -> None:
        """A sequence error: report it, reset (dropping unsent elements), report a bad packet."""
        self._fail(err)
        raise _SeqError

    def _fail(self, err: tuple[DiagCode, DiagKind]) -> None:
        """:meth:`_seq_error` without the exception (the caller stops at once)."""
        self._log(*err)
        self._reset()
        self.unsync_reason = UnsyncReason.BAD_PACKET

    def _set_space(self) -> None:
        """Recompute the memory space and select its block tables."""
        self.space = self._mem_space()
        self.blocks = self.walker.tables(self.space)

    def _mem_space(self) -> MemSpace:
        """Memory space of the current exception level and security state."""
        pe = self.pe
        if not pe.el_valid:
            return MemSpace.S if self.is_secure else MemSpace.N
        return el_space(int(pe.exception_level), pe.security_level)

    # -- packet input --------------------------------------------------------------

    def decode(self, pkt: Any) -> None:
        """Process one packet; append the elements it completed to ``out``."""
        if self.lone is not None:
            self._unlone()
        out = self.out
        base = len(out)
        if type(pkt) is NotSync_:
            # Only the first unsynchronised piece of a stream reaches the
            # reference decoder; the others go to its packet monitor alone.
            if self.seen_not_sync:
                return
            self.seen_not_sync = True
            idx = self.last_idx = pkt.offset
            self._no_sync(pkt, K_NOT_SYNC, idx)
            return
        if type(pkt) is AtomRun_:
            raw = pkt.raw
            self._atom_run(pkt.offset, raw, 0, len(raw))
            return
        idx = pkt.offset
        self.last_idx = idx
        kind = K_ATOM if type(pkt) is Atom_ else _KIND.get(pkt.kind, K_BAD)
        if self.memory.generation != self.generation:
            self.generation = self.memory.generation
            self._set_space()
        # (what follows may move the code memory: the fast paths look at it again)
        self.stale = True
        if self.state == _DECODE:
            if kind == K_ATOM and self._fast_atom(idx, pkt.bits, pkt.count):
                return
            if self._decode_packet(pkt, kind, idx):
                self._settle(pkt, kind, idx, base)
            return
        self._no_sync(pkt, kind, idx)

    def _settle(self, pkt: Any, kind: int, idx: int, base: int) -> None:
        """After a packet that asks for it: resolve the stack, report a loss of
        synchronisation, tell the code memory that time moved."""
        self._resolve()
        if self.state == _NO_SYNC:
            # (the packet that lost synchronisation: decoded, not skipped)
            self._no_sync(None, kind, idx)
        if self.timed:
            self._advance_time(base)

    # -- packets from the reader's loop (the PacketSink methods) ---------------------

    def atoms(self, off: int, data: bytes, pos: int, end: int) -> None:
        """Atom packets, one per header byte of ``data[pos:end]``, the first at ``off``."""
        self._atom_run(off, data, pos, end)
        self.packets += end - pos

    def address(
        self,
        off: int,
        data: bytes,
        pos: int,
        end: int,
        kind: PT,
        address: int,
        isa: int,
        nbits: int,
    ) -> None:
        """A target address packet, stacked without an object in the decode state."""
        self.packets += 1
        if not self._target(off, address, isa):
            self._packet(Address_(off, data[pos:end], kind, address, isa, nbits))

    def match(self, off: int, header: int, kind: PT, entry: tuple[int, int, int]) -> None:
        """A target address exact match, stacked without an object in the decode state."""
        self.packets += 1
        address, isa, nbits = entry
        if not self._target(off, address, isa):
            self._packet(AddressMatch_(off, bytes((header,)), header & 0x3, address, isa, nbits))

    def packet(self, pkt: Any) -> None:
        """Any other packet: counted (see :attr:`handlers`), then decoded."""
        self.packets += 1
        handlers = self.handlers
        if handlers is not None:
            handler = handlers.get(type(pkt))
            if handler is not None:
                handler(pkt)
        self._packet(pkt)

    def _packet(self, pkt: Any) -> None:
        """:meth:`decode`, with the packet's diagnostics merged into ``out``."""
        out = self.out
        base = len(out)
        self.decode(pkt)
        if self.log:
            merge_log(out, base, self.log)

    def _target(self, off: int, address: int, isa: int) -> bool:
        """A target address (``K_ADDR``) as :meth:`decode` takes it, when synchronised and
        the code memory's view has not changed; False, having done nothing, otherwise."""
        if self.state != _DECODE:
            return False
        if self.stale:
            if self.memory.generation != self.generation:
                return False
            self.stale = False
        idx = off
        self.last_idx = idx
        if (
            self.lone is None
            and not self.stack
            and not (self.spec_depth or self.elem_pending_addr)
            and not (self.res_commit or self.res_cancel or self.res_mispredict or self.res_discard)
        ):
            # Alone on the stack, with nothing to resolve (_stacked would say so): kept
            # out of the list until the next packet takes it.
            self.lone = (idx, address, isa)
            return True
        self._unlone()
        out = self.out
        base = len(out)
        self.stack.append([_ADDR, False, idx, address, isa, 0])
        if self._stacked(True):
            self._settle(None, K_ADDR, idx, base)
            self.stale = True
            if self.log:
                merge_log(out, base, self.log)
        return True

    def _fast_atom(self, idx: int, bits: int, n: int) -> bool:
        """The fast path of an atom packet (no speculation), in the decode state.

        Taken when :meth:`_fast_ready`: every atom is then committed at once.
        Returns False, having done nothing, when the general path must take the
        packet.
        """
        if not self._fast_ready():
            return False
        out = self.out
        base = len(out)
        self.res_commit = n
        if self._atoms(n, bits, idx) < 0:
            self._drop_atom_packet(base, idx)
        return True

    def _drop_atom_packet(self, base: int, idx: int) -> None:
        """After an atom packet (at ``idx``) met a sequence error, reported and having reset
        the decoder: drop its elements (those in ``out`` from ``base`` on) and wait for
        synchronisation."""
        del self.out[base:]
        self._clip_log(base)
        self._no_sync(None, K_ATOM, idx)

    def _fast_ready(self) -> bool:
        """Whether atom packets can take the fast path now (in the decode state): no
        speculation, and nothing older stacked but perhaps one address, which is
        then taken (an atom packet would commit it first)."""
        if not self.fast_atoms or self.spec_depth:
            return False
        lone = self.lone
        if lone is not None:
            self.lone = None
            address = lone[1]
            isa = lone[2]
        else:
            stack = self.stack
            if not stack:
                return True
            if len(stack) != 1 or stack[0][_K] != _ADDR:
                return False
            a = stack.pop()
            address = a[_A]
            isa = a[_B]
        rs = self.rs
        rs.pop_pending = False
        rs.tinfo_wait = False
        self.addr = address
        self.isa = _A64 if self.is_64bit else (_T32 if isa else _A32)
        self.need_addr = False
        return True

    def _atom_run(self, off: int, data: bytes, pos: int, end: int) -> None:
        """Atom packets, one per header byte of ``data[pos:end]`` (an
        :class:`~cstrace.protocols.etmv4.packets.AtomRun`, or a run the reader's loop
        found), each as :meth:`decode` takes an atom packet, without an object when the
        fast path takes it; their diagnostics merged into ``out``."""
        out = self.out
        base = len(out)
        fields = _ATOM_FIELDS
        off0 = off - pos  # the capture index of data[i] is off0 + i
        i = pos
        while i < end:
            if self.state == _DECODE:
                if self.stale:
                    self.stale = False
                    if self.memory.generation != self.generation:
                        self.generation = self.memory.generation
                        self._set_space()
                if self._fast_ready():
                    # the packets from i on, in one call (it stops after a sequence error)
                    self.res_commit = 0
                    i = self._atoms(0, 0, 0, data, i, end, off0)
                    continue
            f = fields[data[i]]
            assert f is not None  # (the reader gives atom headers only)
            self.decode(Atom_(off0 + i, f[0], f[1], f[2], f[3]))
            i += 1
        if self.log:
            merge_log(out, base, self.log)

    def _no_sync(self, pkt: Any, kind: int, idx: int) -> None:
        """The reference's NO_SYNC / WAIT_SYNC / WAIT_TINFO states for one packet; the
        packets skipped on the way are counted (:meth:`_waited`)."""
        st = self.state
        if st == _NO_SYNC:
            self.out.append(NoSync(idx, self.unsync_reason))
            st = self.state = _WAIT_SYNC
        if st == _WAIT_SYNC:
            if kind == K_ASYNC:
                self.state = _WAIT_TINFO
            elif pkt is not None and kind != K_NOT_SYNC:
                self._skipped(pkt, idx)
            return
        if st == _WAIT_TINFO:
            self.need_ctxt = True
            self.need_addr = True
            if kind == K_TRACE_INFO:
                self._trace_info(pkt, idx)
                self.state = _DECODE
                self.rs.flush()
                if self.waited:
                    self._waited()
            elif kind == K_EVENT and self.is_ete:
                # ETE allows event packets before the first trace info.
                self.stack.append([_EVENT, False, idx, pkt.events, 0, 0])
            elif pkt is not None and kind != K_ASYNC:
                self._skipped(pkt, idx)

    def _skipped(self, pkt: Any, idx: int) -> None:
        """A packet skipped while waiting for synchronisation: counted."""
        if not self.waited:
            self.waited_at = idx
        self.waited += len(pkt.raw)

    def _waited(self) -> None:
        """Report the packets skipped while waiting for synchronisation (a count)."""
        diag = Diagnostic(
            self.waited_at, self.trace_id, DiagCode.NONE, DiagKind.SYNC_WAIT, self.waited,
            Severity.WARNING,
        )  # fmt: skip
        self.log.append((len(self.out), diag))
        self.waited = 0
        self.waited_at = 0

    def finish(self) -> None:
        """End of trace: output what no later packet can cancel, then ``EO_TRACE``."""
        out = self.out
        base = len(out)
        self.persist["etmv4"] = (self.pe, self.addr, self.isa, self.it, self.last_cc)
        if not self.context.complete:
            return
        if self.waited:
            self._waited()
        self._unlone()
        stack = self.stack
        while stack:
            e = stack[0]
            k = e[_K]
            if k in _FLUSH_ON_EOT:
                stack.clear()
                break
            if k == _TRANS_START:
                if self.comm_trans_p0:
                    stack.clear()
                    break
            elif k in (_TRANS_FAIL, _TRANS_COMMIT):
                if self.max_spec_depth == 0 or self.spec_depth == 0:
                    self._trans_elem(e)
            elif k in _TS_CC_EVENT:
                self._ts_cc_event(e)
            elif k == _MARKER:
                self._marker(e)
            elif k == _ITE:
                self._ite(e)
            stack.popleft()
        reason = UnsyncReason.OVERFLOW if self.prev_overflow else UnsyncReason.EOT
        out.append(EoTrace(self.last_idx, reason))
        if self.timed:
            self._advance_time(base)
        if self.log:
            merge_log(out, base, self.log)

    def _advance_time(self, base: int) -> None:
        """Trace time moved: tell the code memory, once the packet's elements are made.

        The timestamps of a packet's elements take effect after the packet, in
        order: the walks that packet made read the memory of the time before
        it, as when the time reached the memory with the elements.
        """
        self.timed = False
        advance = self.memory.advance
        for e in self.out[base:]:
            if type(e) is Timestamp:
                advance(e.timestamp)

    # -- packet → stack elements -----------------------------------------------------

    def _trace_info(self, pkt: Any, idx: int) -> None:
        """The first trace info after a sync: speculation depth, CC threshold, TME state.

        The P0 elements the trace unit had not traced yet are one stack entry that
        holds their count. A depth beyond TRCIDR8.MAXSPEC cannot happen in a sound
        stream: it is reported, and (as the reference does) the excess is committed
        with the next packet.
        """
        self.cc_threshold = pkt.cc_threshold or 0
        depth = pkt.spec_depth or 0
        self.spec_depth = depth
        stack = self.stack
        if depth:
            if depth > self.max_spec_depth:
                self._log(*_SPEC_DEPTH, depth)
            stack.append([_UNSEEN, True, idx, depth, 0, 0])
        stack.append([_TINFO, False, idx, 0, 0, 0])
        if pkt.in_trans_state:
            stack.append([_TRANS_TRACE_INIT, False, idx, 0, 0, 0])

    def _decode_packet(self, pkt: Any, kind: int, idx: int) -> bool:
        """The reference's decodePacket: stack the packet; True if something must be resolved."""
        stack = self.stack
        is_addr = False
        if kind == K_ATOM:
            n = pkt.count
            stack.append([_ATOM, True, idx, n, pkt.bits, 0])
            self.spec_depth += n
        elif kind == K_ADDR:
            stack.append([_ADDR, False, idx, pkt.address, pkt.isa, 0])
            is_addr = True
        elif kind == K_ADDR_CTXT:
            stack.append([_ADDR, False, idx, pkt.address, pkt.isa, 0])
            stack.append([_CTXT, False, idx, _ctxt_of(pkt), 0, 0])
            is_addr = True
        elif kind == K_CTXT:
            stack.append([_CTXT, False, idx, _ctxt_of(pkt), 0, 0])
        elif kind == K_CCNT:
            self.last_cc = pkt.count
            stack.append([_CC, False, idx, pkt.count, 0, 0])
            # Under TRCIDR0.COMMOPT == 0 a cycle count also commits elements;
            # the reader gives no commit under COMMOPT == 1.
            self.res_commit = pkt.commit or 0
        elif kind == K_TIMESTAMP:
            if self.ts_with_cc:
                # The reference takes the packet processor's last cycle count,
                # which a timestamp without one leaves as it was.
                cc = pkt.cycle_count
                if cc is None:
                    cc = self.last_cc
                self.last_cc = cc
                stack.append([_TS_CC, False, idx, pkt.timestamp, cc, 0])
            else:
                stack.append([_TS, False, idx, pkt.timestamp, 0, 0])
        elif kind == K_EXCEPT:
            stack.append([_EXCEP, True, idx, pkt.exception_type, pkt.addr_interp == 2, 0])
            self.elem_pending_addr = True
        elif kind == K_TRACE_ON:
            stack.append([_TRC_ON, False, idx, 0, 0, 0])
        elif kind == K_COMMIT:
            self.res_commit = pkt.count
        elif kind in (K_MISPREDICT, K_CANCEL):
            if kind == K_MISPREDICT or pkt.mispredict:
                self.res_mispredict = True
                n = pkt.atom_count
                if n:
                    stack.append([_ATOM, True, idx, n, pkt.atom_bits, 0])
                    self.spec_depth += n
            self.res_cancel = 0 if kind == K_MISPREDICT else pkt.count
        elif kind == K_SRC_ADDR:
            stack.append([_SRC_ADDR, False, idx, pkt.address, pkt.isa, 0])
            self.spec_depth += 1
        elif kind == K_EVENT:
            stack.append([_EVENT, False, idx, pkt.events, 0, 0])
        elif kind == K_TRACE_INFO:
            stack.append([_TINFO, False, idx, 0, 0, 0])
        elif kind == K_EXCEPT_RTN:
            stack.append([_EXCEP_RET, self.v7m, idx, 0, 0, 0])
            if self.v7m:
                self.spec_depth += 1
        elif kind == K_FUNC_RET:
            if self.v8m:
                stack.append([_FUNC_RET, True, idx, 0, 0, 0])
                self.spec_depth += 1
        elif kind == K_TS_MARKER:
            stack.append([_MARKER, False, idx, 0, 0, 0])
        elif kind == K_OVERFLOW:
            self.prev_overflow = True
            self.spec_depth = 0
            self.res_discard = True
        elif kind == K_DISCARD:
            self.spec_depth = 0
            self.res_discard = True
        elif kind == K_Q:
            count = pkt.count or 0
            if pkt.has_address:
                stack.append([_Q, True, idx, count, pkt.address, pkt.isa])
                self.spec_depth += 1
            else:
                stack.append([_Q, True, idx, count, None, 0])
                self.elem_pending_addr = True
        elif kind == K_TRANS_ST:
            p0 = self.comm_trans_p0
            stack.append([_TRANS_START, p0, idx, 0, 0, 0])
            if p0:
                self.spec_depth += 1
        elif kind == K_TRANS_COMMIT:
            stack.append([_TRANS_COMMIT, False, idx, 0, 0, 0])
        elif kind == K_TRANS_FAIL:
            stack.append([_TRANS_FAIL, False, idx, 0, 0, 0])
        elif kind == K_ITE:
            stack.append([_ITE, False, idx, pkt.el, pkt.value, 0])
        elif kind in (K_ASYNC, K_IGNORE):
            pass
        else:
            # Reserved, bad or unsupported (conditional and data trace, ETE PE
            # reset) packets: the reference resets and reports NO_SYNC with the
            # next packet.
            if pkt.kind in _DATA_TRACE_KINDS:
                self._log(DiagCode.UNSUPP_DECODE_PKT, DiagKind.DATA_TRACE, int(pkt.kind))
            else:
                bad = DiagKind.BAD_SEQUENCE if pkt.kind == PT.BAD_SEQUENCE else DiagKind.BAD_PACKET
                self._log(DiagCode.BAD_DECODE_PKT, bad, int(pkt.kind))
            self._reset()
            self.unsync_reason = UnsyncReason.BAD_PACKET
            return False

        return self._stacked(is_addr)

    def _stacked(self, is_addr: bool) -> bool:
        """The end of decodePacket, once a packet is stacked (``is_addr``: a target
        address): True if something must be resolved."""
        if is_addr and self.elem_pending_addr:
            self.spec_depth += 1
            self.elem_pending_addr = False
        if self.spec_depth > self.max_spec_depth:
            self.res_commit = self.spec_depth - self.max_spec_depth
        return bool(self.res_commit or self.res_cancel or self.res_mispredict or self.res_discard)

    # -- resolution ------------------------------------------------------------------

    def _resolve(self) -> None:
        """Commit / cancel / mispredict / discard, as the reference's resolveElements.

        Elements of a step that ends in a sequence error are dropped, as the
        reference drops the unsent elements when it resets.
        """
        out = self.out
        while self.res_commit or self.res_cancel or self.res_mispredict or self.res_discard:
            mark = len(out)
            try:
                if self.res_commit:
                    self._commit()
                if not self.res_commit:
                    if self.res_cancel:
                        self._cancel()
                    if self.res_mispredict:
                        self._mispredict()
                    if self.res_discard:
                        self._discard()
            except _SeqError:
                del out[mark:]
                self._clip_log(mark)
                break

    def _commit(self) -> None:
        """Process the stack from its oldest element until enough P0 elements are committed."""
        stack = self.stack
        out = self.out
        num_req = self.res_commit
        rs = self.rs
        while self.res_commit:
            if not stack:
                self._seq_error(_COMMIT_SHORT)
            e = stack[0]
            k = e[_K]
            if k == _ATOM:
                total = e[_A]
                left = self._atoms(total, e[_B], e[_IX])
                if left < 0:
                    raise _SeqError
                if left:
                    e[_A] = left
                    e[_B] >>= total - left
                    continue  # atoms left in the element: nothing more to commit
            elif k == _ADDR:
                rs.pop_pending = False
                rs.tinfo_wait = False
                self.addr = e[_A]
                self.isa = _A64 if self.is_64bit else (_T32 if e[_B] else _A32)
                self.need_addr = False
            elif k == _CTXT:
                ctxt = e[_A]
                if ctxt[0]:
                    self._update_context(ctxt, e[_IX])
                    stack.popleft()
                    break  # the reference sends its output after a context change
            elif k in _TS_CC_EVENT:
                self._ts_cc_event(e)
            elif k == _TRC_ON:
                reason = TraceOnReason.OVERFLOW if self.prev_overflow else TraceOnReason.NORMAL
                out.append(TraceOn(e[_IX], reason))
                self.prev_overflow = False
                rs.flush()
            elif k == _EXCEP:
                if rs.pop_pending and not self._rs_pop():
                    raise _SeqError
                self._exception()
                self.res_commit -= 1
            elif k == _MARKER:
                self._marker(e)
            elif k == _EXCEP_RET:
                out.append(ExceptionRet(e[_IX]))
                if e[_P0]:
                    self.res_commit -= 1
            elif k == _FUNC_RET:
                if e[_P0]:
                    self.res_commit -= 1
            elif k == _SRC_ADDR:
                self._source_address(e)
                self.res_commit -= 1
            elif k == _Q:
                self._q_element()
                self.res_commit -= 1
            elif k in _TRANS:
                if k == _TRANS_START and self.comm_trans_p0:
                    self.res_commit -= 1
                self._trans_elem(e)
            elif k == _ITE:
                self._ite(e)
            elif k == _UNSEEN:
                n = min(self.res_commit, e[_A])
                self.res_commit -= n
                e[_A] -= n
                if e[_A]:
                    continue  # unseen elements left: nothing more to commit
            elif k == _TINFO:
                rs.tinfo_wait = True
                rs.flush()
            if stack:
                stack.popleft()
        self.spec_depth -= num_req - self.res_commit

    def _cancel(self) -> None:
        """Remove the newest ``res_cancel`` P0 elements, keeping TS/CC/event/marker/ITE."""
        stack = self.stack
        keep: list[list[Any]] = []
        num_req = self.res_cancel
        while self.res_cancel:
            if not stack:
                self.res_cancel = 0
                self._seq_error(_CANCEL_SHORT)
            e = stack[-1]
            if e[_P0]:
                if e[_K] == _ATOM or e[_K] == _UNSEEN:
                    n = min(self.res_cancel, e[_A])
                    e[_A] -= n
                    self.res_cancel -= n
                    if not e[_A]:
                        stack.pop()
                else:
                    self.res_cancel -= 1
                    stack.pop()
            elif e[_K] in _KEEP_ON_CANCEL:
                keep.append(stack.pop())
            else:
                stack.pop()
        while keep:
            stack.append(keep.pop())
        self.spec_depth -= num_req - self.res_cancel

    def _mispredict(self) -> None:
        """Flip the newest atom, dropping addresses stacked after it."""
        stack = self.stack
        found = False
        held: list[list[Any]] = []  # what was stacked after the atom, newest first
        while stack:
            e = stack[-1]
            k = e[_K]
            if k == _ATOM:
                e[_B] ^= 1 << (e[_A] - 1)
                found = True
                break
            if k == _UNSEEN:
                found = True
                break
            stack.pop()
            if k != _ADDR:
                held.append(e)
        while held:
            stack.append(held.pop())
        self.res_mispredict = False
        if not found:
            self._seq_error(_MISPREDICT_NO_ATOM)

    def _discard(self) -> None:
        """Discard / overflow: output held TS/CC/events/markers, drop the rest, resync."""
        stack = self.stack
        while stack:
            e = stack.popleft()
            if e[_K] == _MARKER:
                self._marker(e)
            else:
                self._ts_cc_event(e)
        self.res_commit = self.res_cancel = 0
        self.res_mispredict = self.res_discard = False
        self.spec_depth = 0
        self.state = _NO_SYNC
        self.unsync_reason = UnsyncReason.OVERFLOW if self.prev_overflow else UnsyncReason.DISCARD
        self.need_ctxt = True
        self.need_addr = True
        self.elem_pending_addr = False

    # -- element output helpers --------------------------------------------------------

    def _ts_cc_event(self, e: list[Any]) -> None:
        k = e[_K]
        if k == _CC:
            self.out.append(CycleCount(e[_IX], e[_A]))
        elif k == _EVENT:
            self.out.append(Event(e[_IX], EventType.NUMBERED, e[_A]))
        elif k in (_TS, _TS_CC):
            # ETE with timestamp markers: no timestamp before the first marker.
            if not self.ete_has_ts_marker or self.ete_first_ts_marker:
                cc = e[_B] if k == _TS_CC else None
                self.out.append(Timestamp(e[_IX], e[_A], cc))
                self.timed = True

    def _marker(self, e: list[Any]) -> None:
        if self.ete_has_ts_marker:
            self.ete_first_ts_marker = True
        self.out.append(SyncMarker(e[_IX], SyncMarkerType.TS, 0))

    def _trans_elem(self, e: list[Any]) -> None:
        self.out.append(MemTrans(e[_IX], _MEMTRANS[e[_K]]))

    def _ite(self, e: list[Any]) -> None:
        self.out.append(Instrumentation(e[_IX], e[_A], e[_B]))

    def _update_context(self, ctxt: tuple[Any, ...], idx: int) -> None:
        """Apply a context and emit PE_CONTEXT (the reference's updateContext)."""
        _, sf, ns, nse, el, cid, vmid = ctxt
        pe = self.pe
        self.is_64bit = bool(sf)
        pe.bits64 = bool(sf)
        self.is_secure = not ns
        if nse:
            pe.security_level = SecLevel.REALM if ns else SecLevel.ROOT
        else:
            pe.security_level = SecLevel.NONSECURE if ns else SecLevel.SECURE
        pe.exception_level = ExLevel(el)
        pe.el_valid = True
        if cid is not None:
            pe.ctxt_id_valid = True
            pe.context_id = cid
        if vmid is not None:
            pe.vmid_valid = True
            pe.vmid = vmid
        if self.is_64bit:
            self.isa = _A64
        elif self.isa == _A64:
            self.isa = _A32
        self.need_ctxt = False
        self.out.append(PEContext(idx, pe.copy(), _ISA[self.isa]))
        self.memory.set_context(
            pe.context_id if pe.ctxt_id_valid else None, pe.vmid if pe.vmid_valid else None
        )
        self._set_space()

    def _rs_pop(self) -> bool:
        """Pop the return stack into the current address; False when it is empty (a
        sequence error: reported, and the decoder reset)."""
        r = self.rs.pop()
        if r is None:
            self._fail(_RET_STACK_OVERFLOW)
            return False
        self.addr, self.isa = r
        self.need_addr = False
        return True

    # -- program flow ----------------------------------------------------------------

    def _atoms(
        self,
        n: int,
        bits: int,
        ix: int,
        data: bytes | None = None,
        i: int = 0,
        end: int = 0,
        off0: int = 0,
    ) -> int:
        """Commit up to ``n`` atoms (the reference's processAtom, once per atom).

        ``bits`` holds the atoms, oldest in bit 0 (1 = E); ``ix`` is the Idx of
        their packet. Each atom walks from the current address to the next
        waypoint (one block-cache lookup, or the link of the block before: see
        :attr:`~cstrace.isa.blocks.Block.next_e`) and applies E/N to it. Returns how
        many atoms are left uncommitted: the caller's ``bits`` shifted right by
        the atoms taken (``n`` less that) are theirs; -1 after a sequence error
        (an empty return stack), which has been reported and has reset the decoder.

        With ``data``, the fast path (:meth:`_fast_ready`) of the atom packets
        whose headers are ``data[i:end]`` (the first at capture index ``off0 +
        i``), each committing its atoms as it comes (``n``, ``bits`` and ``ix``
        are unused); returns the position after the last one taken: ``end``, or
        the position after a packet that met a sequence error (reported: its
        elements dropped, the decoder reset and waiting for synchronisation).
        """
        commit = self.res_commit
        rs = self.rs
        out = self.out
        blocks = self.blocks
        addr = self.addr
        isa = self.isa
        it = self.it
        pop_pending = rs.pop_pending
        need = self.need_ctxt or self.need_addr
        base = 0  # (a run) the elements in out before the packet's
        # The block walked last, whose link to the next one is set once looked up,
        # and the block that link gave (None: look the next one up): from the last
        # call when the walk is where that call left it.
        prev: Block | None = None
        prev_taken = False
        nxt: Block | None = None
        if self.walk_addr is addr and self.walk_isa == isa and self.walk_it == it:
            if self.walk_tables is blocks:
                prev = self.walk_prev
                prev_taken = self.walk_prev_taken
                nxt = self.walk_next
        while True:
            if data is not None:
                # (a run) the atom packet at data[i]
                f = _ATOM_FIELDS[data[i]]
                assert f is not None  # (the reader gives atom headers only)
                bits = f[2]
                n = commit = f[3]
                ix = off0 + i
                self.last_idx = ix
                base = len(out)
            while n and commit:
                n -= 1
                commit -= 1
                taken = bits & 1
                bits >>= 1
                if pop_pending:
                    self.addr = addr
                    self.isa = isa
                    self.it = it
                    if not self._rs_pop():
                        # (reported, and the decoder reset: nothing to write back)
                        if data is None:
                            return -1
                        self._drop_atom_packet(base, ix)
                        return i + 1
                    pop_pending = False
                    addr = self.addr
                    isa = self.isa
                    need = self.need_ctxt or self.need_addr
                    prev = nxt = None
                if need:
                    continue
                blk = nxt
                if blk is None:
                    if it and isa == _T32:
                        table = blocks[isa]
                        blk = table.get((addr, it))
                        if blk is None:
                            blk = self.walker.block(addr, isa, self.space, it)
                    else:
                        table = blocks[isa]
                        blk = table.get(addr)
                        if blk is None:
                            blk = self.walker.block(addr, isa, self.space, 0)
                    if prev is not None:
                        if prev_taken:
                            prev.next_e = blk
                        else:
                            prev.next_n = blk
                it = blk.it_out
                prev = blk
                prev_taken = taken == 1
                if blk.found:
                    # waypoint found
                    if taken:
                        itype = blk.itype
                        if itype == _BR:
                            if blk.link:
                                rs.push(blk.end, isa)
                            addr = blk.target
                            it = 0
                        else:
                            addr = blk.end
                            if itype == _BR_IND:
                                need = True
                                self.need_addr = True
                                if blk.link:
                                    rs.push(addr, isa)
                                it = 0
                                pop_pending = rs.active
                                prev = None  # where an indirect branch goes is not the block's
                                if blk.subtype == _V8_ERET and self.is_ete:
                                    # No exception-return packet in ETE: show the ERET.
                                    isa = blk.next_isa
                                    out.append(ix)
                                    out.append(blk.range_e)
                                    out.append(ExceptionRet(ix))
                                    nxt = None
                                    continue
                        isa = blk.next_isa
                        out.append(ix)
                        out.append(blk.range_e)
                        nxt = blk.next_e
                    else:
                        addr = blk.end
                        out.append(ix)
                        out.append(blk.range_n)
                        nxt = blk.next_n
                else:
                    # No waypoint: the opcode at blk.end is in no memory image.
                    need = True
                    self.need_addr = True
                    prev = None
                    nxt = None
                    if blk.count:
                        out.append(ix)
                        out.append(blk.range_e)
                        isa = blk.next_isa
                    addr = blk.end
                    out.append(AddrNacc(ix, addr, self.space))
            if data is None or i + 1 >= end:
                break
            i += 1  # the next atom packet of the run
        self.addr = addr
        self.isa = isa
        self.it = it
        rs.pop_pending = pop_pending
        self.res_commit = commit
        self.walk_addr = addr
        self.walk_isa = isa
        self.walk_it = it
        self.walk_tables = blocks
        self.walk_prev = prev
        self.walk_prev_taken = prev_taken
        self.walk_next = nxt
        return n if data is None else i + 1

    def _exception(self) -> None:
        """Range up to the preferred return address, then EXCEPTION (processException)."""
        stack = self.stack
        ex = stack.popleft()
        idx = ex[_IX]
        br_tgt = bool(ex[_B])
        ctxt_elem = None
        if stack and stack[0][_K] == _CTXT:
            ctxt_elem = stack.popleft()
        if not stack or stack[0][_K] != _ADDR:
            self._seq_error(_EXCEPTION_NO_ADDRESS)
        addr_elem = stack[0]  # removed by the commit loop, as in the reference
        ret_addr = addr_elem[_A]
        if br_tgt:
            # The return address is also the target of the previous branch: no range.
            b64 = self.isa == _A64 if ctxt_elem is None else bool(ctxt_elem[_A][1])
            self.addr = ret_addr
            self.isa = _T32 if addr_elem[_B] else (_A64 if b64 else _A32)
            self.need_addr = False
        out = self.out
        if ctxt_elem is not None:
            self._update_context(ctxt_elem[_A], idx)
        tail = self.m_profile and ret_addr == _M_CLASS_TAIL_ADDR
        if self.addr < ret_addr and not tail:
            space = self.space
            start = self.addr
            isa = self.isa
            blk = self.walker.walk_to(start, isa, space, ret_addr, self.it if isa == _T32 else 0)
            self.it = blk.it_out
            if blk.count:
                out.append(idx)
                out.append(blk.range_e)
                self.isa = blk.next_isa
            self.addr = blk.end
            if not blk.found:
                self.need_addr = True
                out.append(AddrNacc(idx, blk.end, space))
        out.append(Exception_(idx, ex[_A], None if tail else ret_addr, br_tgt, m_tail_chain=tail))
        self.it = 0

    def _q_element(self) -> None:
        """Q element: N instructions executed, path known only if walkable (processQElement)."""
        stack = self.stack
        q = stack.popleft()
        idx = q[_IX]
        count = q[_A]
        if q[_B] is None:
            ctxt_elem = None
            if stack and stack[0][_K] == _CTXT:
                ctxt_elem = stack.popleft()
            if not stack or stack[0][_K] != _ADDR:
                self._seq_error(_Q_NO_ADDRESS)
            a = stack.popleft()
            q_addr, q_is = a[_A], a[_B]
            if ctxt_elem is not None:
                stack.appendleft(ctxt_elem)
        else:
            q_addr, q_is = q[_B], q[_C]
        start = self.addr
        isa = self.isa
        blk: Block | None = None
        if count:
            blk = self.walker.walk_count(
                start, isa, self.space, count, self.it if isa == _T32 else 0
            )
            self.it = blk.it_out
        if (
            blk is not None
            and blk.count == count
            and (blk.end == q_addr or blk.reason == StopReason.WAYPOINT)
        ):
            # All N instructions walked, ending at the address or after a branch.
            self.out.append(idx)
            self.out.append(blk.range_e)
        else:
            q_isa = _A64 if self.is_64bit else (_T32 if q_is else _A32)
            self.out.append(IRangeNoPath(idx, start, q_addr, count, _ISA[q_isa]))
        self.addr = q_addr
        self.isa = _A64 if self.is_64bit else (_T32 if q_is else _A32)
        self.need_addr = False

    def _source_address(self, e: list[Any]) -> None:
        """ETE source address: the range up to and including the instruction there."""
        idx = e[_IX]
        src = e[_A]
        space = self.space
        curr = self.addr
        isa = self.isa
        walker = self.walker
        info = walker.instr(src, isa, space)
        out = self.out
        if not info.found:
            out.append(AddrNacc(idx, src, space))
            return
        size = info.size
        itype = info.itype
        link = info.link
        next_isa = info.next_isa
        after = src + size
        if self.need_addr or curr > src:
            self.need_addr = False
            st = src
        else:
            st = curr
        num = 1
        if after - st > size:
            if isa != _T32 and not self.src_addr_n:
                num = (after - st) // 4
            else:
                num = 0
                a = st
                while a < after:
                    ii = walker.instr(a, isa, space)
                    if not ii.found:
                        out.append(AddrNacc(idx, src, space))
                        num = 1
                        st = src
                        break
                    a += ii.size
                    num += 1
                    if self.src_addr_n and a < after and ii.itype != _OTHER:
                        # -src_addr_n: a waypoint on the way ends a range, not executed.
                        out.append(_range(idx, st, a, num, isa, False, ii))
                        st = a
                        num = 0
        self.addr = after
        if itype == _BR:
            if link:
                self.rs.push(after, isa)
            self.addr = info.target
        elif itype == _BR_IND:
            self.need_addr = True
            if link:
                self.rs.push(after, isa)
            if self.rs.active:
                self.rs.pop_pending = True
        # The reference switches the ISA before it fills in the range.
        self.isa = next_isa
        out.append(_range(idx, st, after, num, next_isa, True, info))


def isa_options(config: Any) -> IsaOptions:
    """The instruction-classification options of an ETMv4/ETE configuration."""
    return IsaOptions(
        int(getattr(config, "arch_version", 0x0800)) or 0x0800,
        int(getattr(config, "core_profile", 3)) or 3,
        dsb_dmb_waypoints=False,
        wfi_wfe_branch=bool(getattr(config, "wfi_wfe_branch", False)),
        track_it_block=True,
    )


def _range(
    idx: int, start: int, end: int, n: int, isa: int, taken: bool, last: Instr
) -> InstrRange:
    """An ``INSTR_RANGE`` of ``n`` instructions ending with the instruction ``last``."""
    return InstrRange(idx, start, end, n, _ISA[isa], taken, *last.tail)


def _ctxt_of(pkt: Any) -> tuple[Any, ...]:
    """``(updated, SF, NS, NSE, EL, context ID or None, VMID or None)`` of a context packet."""
    return (
        bool(pkt.updated),
        pkt.sf,
        pkt.ns,
        pkt.nse,
        pkt.el,
        pkt.context_id if pkt.cid_updated else None,
        pkt.vmid if pkt.vmid_updated else None,
    )


def merge_log(out: list[Any], base: int, log: list[tuple[int, Diagnostic]]) -> None:
    """Put each diagnostic of ``log`` where the reference logs it among the elements of
    ``out`` from ``base`` on (its position counts from the start of ``out``)."""
    tail = out[base:]
    del out[base:]
    done = 0
    for pos, diag in log:
        pos -= base
        out += tail[done:pos]
        done = max(done, pos)
        out.append(diag)
    log.clear()
    out += tail[done:]


def iter_rows(
    packets: Iterable[Packet], config: Any, context: DecodeContext, size: int = 4096
) -> Iterator[list[Any]]:
    """Decode the packets of one ETMv4/ETE trace ID into lists of element rows.

    Each list holds about ``size`` elements or more, as :mod:`cstrace.rows`
    describes them (an ``INSTR_RANGE`` is its offset and its ``RangeArgs``).
    """
    dec = Etmv4Decoder(config, context)
    log = dec.log
    out: list[Any] = []
    dec.out = out
    for pkt in packets:
        base = len(out)
        dec.stale = True  # (the caller ran: it may have moved the code memory)
        dec.decode(pkt)
        if log:
            merge_log(out, base, log)
        if len(out) >= size:
            yield out
            out = []
            dec.out = out
    dec.finish()
    if out:
        yield out


def iter_stream_rows(
    stream: Stream,
    config: Any,
    context: DecodeContext,
    count: PacketCount | None = None,
    size: int = 4096,
) -> Iterator[list[Any]]:
    """The element rows of one ETMv4/ETE trace ID's stream, read and decoded in one loop.

    The same lists as ``iter_rows(iter_packets(stream, config, complete,
    group_atoms=True), config, context)``, without a packet object for the hot
    kinds: the reader's loop gives them to the decoder as fields
    (:func:`~cstrace.protocols.etmv4.reader.read_into`, the decoder being the
    :class:`~cstrace.protocols.etmv4.reader.PacketSink`). ``count``, when
    given, counts the packets as :func:`cstrace.tally.counted` would have
    counted the reader's.
    """
    return sink_rows(Etmv4Decoder(config, context), stream, config, context.complete, count, size)


def sink_rows(
    dec: Etmv4Decoder,
    stream: Stream,
    config: Any,
    complete: bool,
    count: PacketCount | None = None,
    size: int = 4096,
    *,
    state: Any = None,
    quiet_to: int = -1,
    at_quiet: Callable[[], None] | None = None,
    finish: bool = True,
) -> Iterator[list[Any]]:
    """The element rows of ``stream`` read into ``dec`` in the reader's one loop (with the
    reader state ``state``, when given), in lists of about ``size``; ``count`` as in
    :func:`iter_stream_rows`.

    A piece of a stream cut at synchronisation points (:mod:`.cut`) starts at a cut:
    the packets up to the one at capture index ``quiet_to`` (when not -1) are decoded
    in silence, nothing output or counted, one at a time, and ``at_quiet`` is called
    right after that packet; it may end before the stream does (``finish`` False: no
    end of trace).
    """
    quiet = quiet_to >= 0
    if count is not None and not quiet:
        dec.handlers = count.handlers
    dec.limit = 0 if quiet else size  # (quiet: the loop returns after every packet)
    dec.out = []
    done = False
    try:
        for _ in read_into(stream, config, dec, complete, state, False):
            if quiet:
                if dec.last_idx < quiet_to:
                    continue
                quiet = False
                if at_quiet is not None:
                    at_quiet()
                dec.out = []
                dec.packets = 0
                dec.limit = size
                if count is not None:
                    dec.handlers = count.handlers
            elif len(dec.out) >= size:
                yield dec.out
                dec.out = []
                dec.stale = True  # (the caller ran: it may have moved the code memory)
        done = True
        if quiet:
            dec.out = []
            dec.packets = 0
        elif finish:
            dec.finish()
        if dec.out:
            yield dec.out
    finally:
        if count is not None:
            count.add(dec.packets, done)


def iter_elements(
    packets: Iterable[Packet], config: Any, context: DecodeContext
) -> Iterator[Element]:
    """Decode the packets of one ETMv4/ETE trace ID into generic elements.

    Lazy: the elements of a packet come before the next packet is read.
    """
    # One list of rows per packet that gave elements, made objects before the next is read.
    for out in iter_rows(packets, config, context, 1):
        yield from expand(out)
