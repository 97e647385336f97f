"""ETMv4/ETE program-flow decoder on crafted trace: bytes (from the packet encoder) → elements.

Each test writes a little A64 program into a memory image, encodes the trace a
trace unit would produce for it, and checks the elements against what the
ETMv4 architecture (IHI0064 chapter 6) and the reference decoder give.
"""

from __future__ import annotations

from typing import Any

from cstrace.capture import Stream
from cstrace.elements import (
    AddrNacc,
    CycleCount,
    Diagnostic,
    Element,
    EoTrace,
    Event,
    Exception_,
    ExceptionRet,
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
    SecLevel,
    SyncMarker,
    Timestamp,
    TraceOn,
    TraceOnReason,
    UnsyncReason,
)
from cstrace.errors import DiagCode, DiagKind
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.etmv4.decoder import iter_elements
from cstrace.protocols.etmv4.reader import iter_packets
from cstrace.render.ocsd.diagnostics import diagnostic_text

# A64 encodings (Arm ARM C4.1): NOP, B, BL, B.EQ, RET, BR X0, ERET, ISB.
NOP = 0xD503201F
RET = 0xD65F03C0
BR_X0 = 0xD61F0000
ERET = 0xD69F03E0


def b(offset: int) -> int:
    return 0x14000000 | ((offset >> 2) & 0x3FFFFFF)


def bl(offset: int) -> int:
    return 0x94000000 | ((offset >> 2) & 0x3FFFFFF)


def beq(offset: int) -> int:
    return 0x54000000 | (((offset >> 2) & 0x7FFFF) << 5)


def code(*words: int) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in words)


BASE = 0x1000
# 0x1000: nop; nop; b.eq +0x10 (-> 0x1018); bl +0x20 (-> 0x102c); nop; nop
# 0x1018: nop; ret
# 0x1020: nop; nop; nop
# 0x102c: nop; ret
PROGRAM = code(NOP, NOP, beq(0x10), bl(0x20), NOP, NOP, NOP, RET, NOP, NOP, NOP, NOP, RET)


def config(*, spec: int = 0, ret_stack: bool = False, ete: bool = False) -> Etmv4Config:
    """A Cortex-A53-like ETMv4.0 (or ETE 1.3) unit: 64-bit addresses, 32-bit context ID."""
    return Etmv4Config(
        configr=(1 << 12) if ret_stack else 0,
        traceidr=0x10,
        idr0=0x28000EA1 | (0x200 if ret_stack else 0),
        idr2=0x00000488,
        idr8=spec,
        devarch=0x47735A13 if ete else None,
        core_name="Cortex-A53",
    )


def decode(
    data: bytes,
    *,
    cfg: Etmv4Config | None = None,
    memory: MemoryMap | None = None,
    complete: bool = True,
    reset: bool = False,
    options: DecodeOptions | None = None,
) -> tuple[list[Element], list[Diagnostic]]:
    """The elements decoded from ``data``, and apart from them the diagnostics."""
    cfg = cfg or config()
    if memory is None:
        memory = MemoryMap([MemoryRegion(BASE, PROGRAM, MemSpace.ANY)])
    ctx = DecodeContext(
        trace_id=cfg.trace_id,
        options=options or DecodeOptions(),
        memory=memory,
        reset=reset,
        complete=complete,
    )
    packets = iter_packets(Stream(cfg.trace_id, data), cfg, complete)
    out = list(iter_elements(packets, cfg, ctx))
    return [e for e in out if type(e) is not Diagnostic], [e for e in out if type(e) is Diagnostic]


def start(address: int = BASE, *, el: int = 1, ns: bool = True) -> bytes:
    """A-sync, trace info, trace on and a 64-bit address with an AArch64 context."""
    return (
        enc.a_sync()
        + enc.trace_info(0)
        + enc.trace_on()
        + enc.address_context(address, el=el, sf=True, ns=ns)
    )


def ranges(elems: list[Element]) -> list[tuple[int, int, int, bool]]:
    return [(e.start, e.end, e.num_instr, e.last_exec) for e in elems if isinstance(e, InstrRange)]


def kinds(elems: list[Element]) -> list[str]:
    return [type(e).__name__ for e in elems]


# -- synchronisation ---------------------------------------------------------------------


def test_no_sync_then_sync_on_async_and_trace_info() -> None:
    data = b"\xf7\xf7" + start() + enc.atom("E")
    elems, _ = decode(data)
    assert isinstance(elems[0], NoSync)
    assert elems[0].reason == UnsyncReason.INIT_DECODER
    assert elems[0].offset == 0  # the first packet (unsynchronised bytes)
    assert kinds(elems[1:]) == ["TraceOn", "PEContext", "InstrRange", "EoTrace"]


def test_reset_decoder_reason_and_eot_index() -> None:
    data = start() + enc.atom("E")
    elems, _ = decode(data, reset=True)
    assert elems[0] == NoSync(0, UnsyncReason.RESET_DECODER)
    assert elems[-1] == EoTrace(len(data) - 1, UnsyncReason.EOT)


def test_incomplete_capture_has_no_end_of_trace() -> None:
    elems, _ = decode(start() + enc.atom("E"), complete=False)
    assert not any(isinstance(e, EoTrace) for e in elems)


def test_empty_stream_still_ends() -> None:
    elems, _ = decode(b"")
    assert elems == [EoTrace(0, UnsyncReason.EOT)]


# -- atoms and program flow -------------------------------------------------------------


def test_context_and_first_range() -> None:
    elems, _ = decode(start() + enc.atom("E"))
    on, ctx, rng = elems[1], elems[2], elems[3]
    assert isinstance(on, TraceOn) and on.reason == TraceOnReason.NORMAL
    assert isinstance(ctx, PEContext)
    assert ctx.isa == Isa.A64
    assert ctx.context.security_level == SecLevel.NONSECURE and ctx.context.el_valid
    assert int(ctx.context.exception_level) == 1 and ctx.context.bits64
    assert isinstance(rng, InstrRange)
    # walks 0x1000.. to the b.eq at 0x1008: three instructions, taken
    assert (rng.start, rng.end, rng.num_instr) == (0x1000, 0x100C, 3)
    assert rng.last_exec and rng.last_type == InstrType.BR and rng.last_cond
    assert rng.isa == Isa.A64 and rng.last_size == 4


def test_taken_and_not_taken_branches() -> None:
    # E: b.eq taken -> 0x1018; E: ret at 0x101c (indirect, needs an address)
    elems, _ = decode(start() + enc.atom("EE"))
    assert ranges(elems) == [(0x1000, 0x100C, 3, True), (0x1018, 0x1020, 2, True)]
    last = [e for e in elems if isinstance(e, InstrRange)][-1]
    assert last.last_type == InstrType.BR_INDIRECT and last.last_subtype == InstrSubtype.V8_RET
    # N: b.eq not taken, then E: bl taken -> 0x102c (call)
    elems, _ = decode(start() + enc.atom("NE"))
    assert ranges(elems) == [(0x1000, 0x100C, 3, False), (0x100C, 0x1010, 1, True)]
    bl_range = [e for e in elems if isinstance(e, InstrRange)][-1]
    assert bl_range.last_subtype == InstrSubtype.BR_LINK


def test_indirect_branch_waits_for_an_address() -> None:
    # after the ret (E) the next atom is ignored until an address arrives
    data = start() + enc.atom("EE") + enc.atom("E") + enc.address_long(0x1020) + enc.atom("E")
    elems, _ = decode(data)
    assert ranges(elems) == [
        (0x1000, 0x100C, 3, True),
        (0x1018, 0x1020, 2, True),
        (0x1020, 0x1034, 5, True),
    ]


def test_return_stack_supplies_the_return_address() -> None:
    # N (b.eq), E (bl -> 0x102c, pushes 0x1010), E (ret at 0x1030: pops 0x1010),
    # E (-> ret at 0x101c)
    data = start() + enc.atom("NEEE")
    elems, _ = decode(data, cfg=config(ret_stack=True))
    assert ranges(elems)[-1] == (0x1010, 0x1020, 4, True)
    # without a return stack the last atom waits for an address
    elems, _ = decode(data, cfg=config(ret_stack=False))
    assert len(ranges(elems)) == 3


def test_memory_not_accessible() -> None:
    data = start(0x8000) + enc.atom("E")
    elems, _ = decode(data)
    nacc = [e for e in elems if isinstance(e, AddrNacc)]
    assert nacc == [AddrNacc(nacc[0].offset, 0x8000, MemSpace.EL1N)]
    # EL2, secure: the memory space follows the exception level and security state
    elems, _ = decode(start(0x8000, el=2, ns=False) + enc.atom("E"))
    assert [e.mem_space for e in elems if isinstance(e, AddrNacc)] == [MemSpace.EL2S]


def test_range_runs_into_unmapped_memory() -> None:
    # three NOPs mapped at 0x2000, nothing after: a range, then ADDR_NACC at 0x200c
    mm = MemoryMap([MemoryRegion(0x2000, code(NOP, NOP, NOP), MemSpace.ANY)])
    elems, _ = decode(start(0x2000) + enc.atom("E"), memory=mm)
    assert ranges(elems) == [(0x2000, 0x200C, 3, True)]
    assert isinstance(elems[-2], AddrNacc) and elems[-2].address == 0x200C


def test_exception_with_preferred_return_address() -> None:
    # exception, return address 0x1008 (the b.eq): range 0x1000-0x1008, then EXCEPTION
    data = start() + enc.exception(0x0E, addr_interp=1) + enc.address_long(0x1008)
    elems, _ = decode(data)
    assert ranges(elems) == [(0x1000, 0x1008, 2, True)]
    ex = [e for e in elems if isinstance(e, Exception_)]
    assert len(ex) == 1 and ex[0].number == 0x0E and ex[0].return_address == 0x1008
    assert not ex[0].ret_addr_br_tgt
    # the address is also the previous branch target: no range, flag set
    data = start() + enc.exception(0x0E, addr_interp=2) + enc.address_long(0x1018)
    elems, _ = decode(data)
    assert ranges(elems) == []
    ex = [e for e in elems if isinstance(e, Exception_)]
    assert ex[0].return_address == 0x1018 and ex[0].ret_addr_br_tgt


def test_ete_eret_gives_exception_return() -> None:
    mm = MemoryMap([MemoryRegion(0x3000, code(NOP, ERET), MemSpace.ANY)])
    elems, _ = decode(start(0x3000) + enc.atom("E"), memory=mm, cfg=config(ete=True))
    assert kinds(elems)[-3:] == ["InstrRange", "ExceptionRet", "EoTrace"]
    elems, _ = decode(start(0x3000) + enc.atom("E"), memory=mm, cfg=config())
    assert not any(isinstance(e, ExceptionRet) for e in elems)


# -- speculation ------------------------------------------------------------------------


def test_speculative_atoms_wait_for_commit() -> None:
    cfg = config(spec=8)
    data = start() + enc.atom("NE")
    elems, _ = decode(data, cfg=cfg)
    assert ranges(elems) == []  # nothing committed: cleared at end of trace
    elems, _ = decode(data + enc.commit(2), cfg=cfg)
    assert ranges(elems) == [(0x1000, 0x100C, 3, False), (0x100C, 0x1010, 1, True)]
    # the elements carry the Idx of the atom packet, not of the commit
    atom_idx = len(start())
    assert {e.offset for e in elems if isinstance(e, InstrRange)} == {atom_idx}


def test_cancel_and_mispredict() -> None:
    cfg = config(spec=8)
    # cancel the newest atom, commit the oldest
    elems, _ = decode(start() + enc.atom("NE") + enc.cancel_f1(1) + enc.commit(1), cfg=cfg)
    assert ranges(elems) == [(0x1000, 0x100C, 3, False)]
    # mispredict flips the newest atom (N -> E)
    elems, _ = decode(start() + enc.atom("N") + enc.mispredict() + enc.commit(1), cfg=cfg)
    assert ranges(elems) == [(0x1000, 0x100C, 3, True)]


def test_commit_overrun_resets_with_a_message() -> None:
    cfg = config(spec=8)
    data = start() + enc.atom("E") + enc.commit(3) + enc.atom("E")
    elems, ctx = decode(data, cfg=cfg)
    bad = [e for e in elems if isinstance(e, NoSync) and e.reason == UnsyncReason.BAD_PACKET]
    assert len(bad) == 1
    assert bad[0].offset == len(start()) + 1  # the commit packet
    assert ranges(elems) == []  # the range of the failed commit is dropped
    # the atom after the reset is read but not decoded: a count of its byte, at the end
    assert [(d.code, d.kind, d.offset, d.detail) for d in ctx] == [
        (DiagCode.COMMIT_PKT_OVERRUN, DiagKind.COMMIT_SHORT, bad[0].offset, 0),
        (DiagCode.NONE, DiagKind.SYNC_WAIT, bad[0].offset + 2, 1),
    ]
    assert "Not enough elements to commit" in diagnostic_text("etmv4", ctx[0])


# -- other elements ---------------------------------------------------------------------


def test_timestamp_cycle_count_event_marker_ite_memtrans() -> None:
    cfg = config(ete=True)
    data = (
        start()
        + enc.timestamp(0x1234)
        + enc.event(0x5)
        + enc.instrumentation(1, 0xABCD)
        + enc.trans_start()
        + enc.trans_commit()
        + enc.atom("E")
    )
    elems, _ = decode(data, cfg=cfg)
    ts = [e for e in elems if isinstance(e, Timestamp)]
    assert [t.timestamp for t in ts] == [0x1234] and ts[0].cycle_count is None
    assert [(e.number) for e in elems if isinstance(e, Event)] == [0x5]
    assert [(e.el, e.value) for e in elems if isinstance(e, Instrumentation)] == [(1, 0xABCD)]
    assert [e.trans for e in elems if isinstance(e, MemTrans)] == [
        MemTransType.START,
        MemTransType.COMMIT,
    ]
    # held until the next P0 element commits, in packet order, before the range
    order = kinds(elems)
    assert order.index("Timestamp") < order.index("Instrumentation") < order.index("InstrRange")


def test_timestamp_marker_gates_ete_timestamps() -> None:
    cfg = config(ete=True)
    cfg.idr0 |= 0x800000  # TRCIDR0.TSMARK (ETE 1.1 and later)
    data = start() + enc.timestamp(1) + enc.timestamp_marker() + enc.timestamp(2) + enc.atom("E")
    elems, _ = decode(data, cfg=cfg)
    assert [e.timestamp for e in elems if isinstance(e, Timestamp)] == [2]
    assert sum(isinstance(e, SyncMarker) for e in elems) == 1


def test_cycle_count_element() -> None:
    data = start() + enc.cycle_count_f3(2) + enc.atom("E")
    elems, _ = decode(data)
    assert [e.cycle_count for e in elems if isinstance(e, CycleCount)] == [2]


def test_q_element_without_path() -> None:
    cfg = config()
    cfg.q_support = cfg.q_support.__class__(3)  # Q elements allowed by the reader
    # 5 instructions to 0x1018: the walk meets the b.eq first (a branch) -> no path
    data = start() + enc.q(5, address=0x1018, short=False) + enc.atom("E")
    elems, _ = decode(data, cfg=cfg)
    nopath = [e for e in elems if isinstance(e, IRangeNoPath)]
    assert [(e.start, e.end, e.num_instr) for e in nopath] == [(0x1000, 0x1018, 5)]
    # tracing resumes at the Q address
    assert ranges(elems)[-1] == (0x1018, 0x1020, 2, True)


def test_ete_source_address() -> None:
    cfg = config(ete=True)
    # source address of the bl at 0x100c: range 0x1000-0x1010 executed, then at 0x102c
    data = start() + enc.source_address_long(0x100C) + enc.atom("E")
    elems, _ = decode(data, cfg=cfg)
    assert ranges(elems) == [(0x1000, 0x1010, 4, True), (0x102C, 0x1034, 2, True)]
    # with --src-addr-n the not-taken b.eq on the way splits the range
    elems, _ = decode(data, cfg=cfg, options=DecodeOptions(src_addr_n=True))
    assert ranges(elems)[:2] == [(0x1000, 0x100C, 3, False), (0x100C, 0x1010, 1, True)]


# -- errors, overflow ---------------------------------------------------------------------


def test_bad_packet_resynchronises_at_next_packet() -> None:
    data = start() + b"\x06\xff\xff\xff\xff\xff\xff\xff\xff" + enc.atom("E")
    elems, ctx = decode(data)
    nosync = [e for e in elems if isinstance(e, NoSync)]
    assert nosync[-1].reason == UnsyncReason.BAD_PACKET
    # the reference logs the rejected packet (an exception packet without its address);
    # the packets skipped until the end of the trace are counted
    assert [d.kind for d in ctx] == [DiagKind.EXCEPTION_NO_ADDRESS, DiagKind.SYNC_WAIT]
    # no more ranges until the next A-sync and trace info
    assert ranges(elems) == []
    elems, _ = decode(data + start() + enc.atom("E"))
    assert len(ranges(elems)) == 1


def test_overflow_then_trace_on_reason() -> None:
    data = start() + enc.overflow() + start() + enc.atom("E")
    elems, _ = decode(data)
    nosync = [e for e in elems if isinstance(e, NoSync)]
    assert nosync[-1].reason == UnsyncReason.OVERFLOW
    assert nosync[-1].offset == len(start())  # at the overflow packet
    # the first trace on was never committed: the overflow discarded it
    ons = [e.reason for e in elems if isinstance(e, TraceOn)]
    assert ons == [TraceOnReason.OVERFLOW]


def test_context_persists_through_resync() -> None:
    # the context ID stays known after a bad packet, as the reference's output element keeps it
    first = start() + enc.context(1, True, True, context_id=0x12345678) + enc.atom("E")
    elems, _ = decode(first + b"\x06\xff\xff\xff\xff\xff\xff\xff\xff" + start() + enc.atom("E"))
    ctxs: list[Any] = [e.context for e in elems if isinstance(e, PEContext)]
    assert ctxs[-1].ctxt_id_valid and ctxs[-1].context_id == 0x12345678


def test_next_session_keeps_the_context_of_the_previous_one() -> None:
    # multi-session: the reference resets its decoder between buffers, so a context
    # ID seen in the first buffer is still shown in the second
    cfg = config()
    state: dict[str, Any] = {}
    mm = MemoryMap([MemoryRegion(BASE, PROGRAM, MemSpace.ANY)])
    results = []
    for reset, data in (
        (False, start() + enc.context(1, True, True, context_id=0x42) + enc.atom("E")),
        (True, start() + enc.atom("E")),
    ):
        ctx = DecodeContext(cfg.trace_id, DecodeOptions(), memory=mm, reset=reset, state=state)
        pk = iter_packets(Stream(cfg.trace_id, data), cfg, True)
        results.append(list(iter_elements(pk, cfg, ctx)))
    second = [e.context for e in results[1] if isinstance(e, PEContext)]
    assert results[1][0] == NoSync(0, UnsyncReason.RESET_DECODER)
    assert second[0].ctxt_id_valid and second[0].context_id == 0x42


def test_only_the_first_unsynchronised_piece_reaches_the_decoder() -> None:
    # 20 bytes that never synchronise: the reader cuts them in pieces (8, 8, and 4
    # left incomplete at the end); the decoder sees the first piece and the
    # incomplete packet, which gives the end-of-trace Idx
    elems, _ = decode(b"\x11" * 20)
    assert elems == [NoSync(0, UnsyncReason.INIT_DECODER), EoTrace(16, UnsyncReason.EOT)]


def test_return_stack_underflow_resets_and_recovers() -> None:
    # b.eq taken, then ret (E) with an empty return stack: the next atom pops nothing
    cfg = config(ret_stack=True)
    data = start() + enc.atom("EE") + enc.atom("E")
    mm = MemoryMap([MemoryRegion(BASE, PROGRAM, MemSpace.ANY)])
    ctx = DecodeContext(cfg.trace_id, DecodeOptions(), memory=mm)
    data += start() + enc.atom("E")
    out = list(iter_elements(iter_packets(Stream(cfg.trace_id, data), cfg, True), cfg, ctx))
    seen = [type(e).__name__ for e in out]
    diag = seen.index("Diagnostic")
    assert seen[diag + 1] == "NoSync"  # the diagnostic comes before its NO_SYNC
    bad = diag + 1
    d = out[diag]
    assert isinstance(d, Diagnostic) and d.kind == DiagKind.RETURN_STACK_OVERFLOW
    assert "Return Stack Overflow" in diagnostic_text("etmv4", d)
    assert seen[:bad].count("InstrRange") == 2
    # decoding resumes normally after the next A-sync and trace info
    assert seen[bad:] == ["NoSync", "TraceOn", "PEContext", "InstrRange", "EoTrace"]


def test_trace_on_forgets_a_pending_return_stack_pop() -> None:
    # ret taken (pop pending), then a trace-on before the next atom: the pop is forgotten
    cfg = config(ret_stack=True)
    data = start() + enc.atom("EE") + enc.trace_on() + enc.atom("E")
    elems, ctx = decode(data, cfg=cfg)
    assert not ctx  # no return stack underflow
    assert kinds(elems)[-2:] == ["TraceOn", "EoTrace"]  # the atom waits for an address
