"""PTM decoder: hand-made trace over small A32/T32 programs, and the configuration."""

from __future__ import annotations

import struct

from cstrace.capture import Stream
from cstrace.elements import (
    AddrNacc,
    Diagnostic,
    Element,
    EoTrace,
    Event,
    Exception_,
    ExceptionRet,
    InstrRange,
    InstrSubtype,
    InstrType,
    Isa,
    MemSpace,
    NoSync,
    PEContext,
    SecLevel,
    Timestamp,
    TraceOn,
    TraceOnReason,
    UnsyncReason,
)
from cstrace.errors import Severity
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.kit import ReturnStack
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.decoder import iter_elements
from cstrace.protocols.ptm.encoder import (
    encode_async,
    encode_atom_ca,
    encode_atoms,
    encode_branch,
    encode_context_id,
    encode_exception_return,
    encode_isync,
    encode_timestamp,
    encode_trigger,
    encode_vmid,
    encode_waypoint_update,
)
from cstrace.protocols.ptm.packets import ISyncReason
from cstrace.protocols.ptm.reader import iter_packets
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.diagnostics import diagnostic_text

# A32 program at 0x1000:
#   1000 mov r0,r0 ; 1004 b 1010 ; 1008 nop ; 100c nop ; 1010 bl 1020 ; 1014 bx lr
#   1018 nop ; 101c nop ; 1020 add r0,#1 ; 1024 bx lr ; 1028 beq 1000 ; 102c.. nops
A32_CODE = struct.pack(
    "<16I",
    0xE1A00000,
    0xEA000001,
    0xE1A00000,
    0xE1A00000,
    0xEB000002,
    0xE12FFF1E,
    0xE1A00000,
    0xE1A00000,
    0xE2800001,
    0xE12FFF1E,
    0x0AFFFFF4,
    *([0xE1A00000] * 5),
)
# T32 program at 0x2000:
#   2000 movs r0,#1 ; 2002 bl 2010 ; 2006 bx lr ; 2008.. nops
#   2010 adds r0,#1 ; 2012 cmp r0,#5 ; 2014 bne 2010 ; 2016 bx lr ; 2018 blx r3 ; nops
T32_CODE = struct.pack(
    "<32H",
    0x2001,
    0xF000,
    0xF805,
    0x4770,
    *([0xBF00] * 4),
    0x3001,
    0x2805,
    0xD1FC,
    0x4770,
    0x4798,
    *([0xBF00] * 19),
)


def memory() -> MemoryMap:
    return MemoryMap(
        [
            MemoryRegion(0x1000, A32_CODE, MemSpace.ANY, "a32"),
            MemoryRegion(0x2000, T32_CODE, MemSpace.ANY, "t32"),
        ]
    )


def decode(data: bytes, config: PtmConfig | None = None, *, reset: bool = False) -> list[Element]:
    config = config or PtmConfig(trace_id=0x10, core="Cortex-A15")
    stream = Stream.from_chunks(0x10, [(0, data)])
    context = DecodeContext(0x10, DecodeOptions(), memory(), reset=reset)
    return list(iter_elements(iter_packets(stream, config, True), config, context))


def sync(address: int = 0x1000, isa: Isa = Isa.A32, **kw: object) -> bytes:
    return encode_async() + encode_isync(address, isa, **kw)  # type: ignore[arg-type]


def ranges(elems: list[Element]) -> list[tuple[int, int, int, bool]]:
    return [(e.start, e.end, e.num_instr, e.last_exec) for e in elems if isinstance(e, InstrRange)]


def test_start_of_trace() -> None:
    elems = decode(b"\x11" + sync())
    assert isinstance(elems[0], NoSync) and elems[0].reason == UnsyncReason.INIT_DECODER
    assert elems[0].offset == 0
    assert isinstance(elems[1], TraceOn) and elems[1].reason == TraceOnReason.NORMAL
    assert isinstance(elems[2], PEContext) and elems[2].isa == Isa.A32
    assert elems[2].context.security_level == SecLevel.SECURE
    assert isinstance(elems[-1], EoTrace) and elems[-1].offset == 7
    assert decode(sync(), reset=True)[0].reason == UnsyncReason.RESET_DECODER  # type: ignore[attr-defined]


def test_empty_stream_only_ends() -> None:
    elems = decode(b"")
    assert len(elems) == 1 and isinstance(elems[0], EoTrace) and elems[0].offset == 0


def test_atoms_follow_the_program() -> None:
    elems = decode(sync() + encode_atoms([True, True, True]) + encode_branch(0x1014, Isa.A32))
    assert ranges(elems) == [
        (0x1000, 0x1008, 2, True),
        (0x1010, 0x1014, 1, True),
        (0x1020, 0x1028, 2, True),
    ]
    r = [e for e in elems if isinstance(e, InstrRange)]
    assert r[1].last_type == InstrType.BR and r[1].last_subtype == InstrSubtype.BR_LINK
    assert r[2].last_type == InstrType.BR_INDIRECT
    assert r[2].last_subtype == InstrSubtype.V7_IMPLIED_RET
    assert element_text(r[0]) == (
        "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1008] num_i(2) last_sz(4) "
        "(ISA=A32) E BR  )"
    )


def test_branch_address_implies_an_e_atom_and_nacc_ends_walks() -> None:
    elems = decode(
        sync(0x1028)
        + encode_atoms([False, True])  # beq not taken, then nops to the end of memory
        + encode_atoms([True])  # no address: ignored
        + encode_branch(0x1004, Isa.A32, 2)  # sets a new address
        + encode_atoms([True])
    )
    assert ranges(elems) == [
        (0x1028, 0x102C, 1, False),
        (0x102C, 0x1040, 5, True),
        (0x1004, 0x1008, 1, True),
    ]
    nacc = [e for e in elems if isinstance(e, AddrNacc)]
    assert len(nacc) == 1 and nacc[0].address == 0x1040 and nacc[0].mem_space == MemSpace.S
    assert element_text(nacc[0]) == ("OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x1040; Memspace [0x19:Any S] )")


def test_exception_gives_the_preferred_return_address() -> None:
    elems = decode(
        sync(0x1000)
        + encode_branch(0xFFFF0008, Isa.A32, exception=2, ns=True)
        + encode_branch(0x1004, Isa.A32, 5, exception=0xE)
    )
    exc = [e for e in elems if isinstance(e, Exception_)]
    assert [(e.number, e.return_address) for e in exc] == [(2, 0x1000), (0xE, 0xFFFF0008)]
    # the branch's NS bit does not change the memory space: code is still read secure
    assert not any(isinstance(e, InstrRange) for e in elems)


def test_waypoint_update_walks_to_its_address() -> None:
    elems = decode(
        sync(0x1004, reason=ISyncReason.PERIODIC)
        + encode_atoms([True])
        + encode_waypoint_update(0x1024, Isa.A32, 2)
    )
    assert ranges(elems) == [(0x1004, 0x1008, 1, True), (0x1010, 0x1028, 6, True)]


def test_thumb_return_stack_and_cycle_counts() -> None:
    config = PtmConfig(
        trace_id=0x10, etmcr=(1 << 12) | (1 << 29), etmccer=1 << 23, core="Cortex-A15"
    )
    elems = decode(
        sync(0x2000, Isa.T32, cycle_count=100)
        + encode_atom_ca(True, 5)  # bl 2010
        + encode_atom_ca(False, 2)  # bne not taken
        + encode_atom_ca(True, 7)  # bx lr: the return stack gives 0x2006
        + encode_branch(0x2018, Isa.T32, 2, cycle_count=300),  # bx lr at 2006
        config,
    )
    assert isinstance(elems[1], TraceOn) and elems[1].cycle_count == 100
    r = [e for e in elems if isinstance(e, InstrRange)]
    assert [(e.start, e.end, e.cycle_count, e.isa) for e in r] == [
        (0x2000, 0x2006, 5, Isa.T32),
        (0x2010, 0x2016, 2, Isa.T32),
        (0x2016, 0x2018, 7, Isa.T32),
        (0x2006, 0x2008, 300, Isa.T32),
    ]
    assert r[1].last_cond and r[0].last_size == 4 and r[1].last_size == 2


def test_return_stack_underflow_stops_decoding() -> None:
    config = PtmConfig(trace_id=0x10, etmcr=1 << 29, etmccer=1 << 23, core="Cortex-A15")
    elems = decode(sync(0x2016, Isa.T32) + encode_atoms([True, True]), config)
    assert not any(isinstance(e, (InstrRange, EoTrace)) for e in elems)


def test_return_stack() -> None:
    stack = ReturnStack(True)
    for a in range(20):
        stack.push(a, 0)
    assert [stack.pop() for _ in range(16)] == [(a, 0) for a in range(19, 3, -1)]
    assert stack.pop() is None and stack.overflow
    stack.flush()
    assert not stack.overflow
    off = ReturnStack(False)
    off.push(1, 0)
    assert off.pop() is None and not off.overflow


def test_context_packets_and_misc_elements() -> None:
    config = PtmConfig(trace_id=0x10, etmcr=(1 << 14) | (1 << 30), core="Cortex-A15")
    elems = decode(
        sync(ctxt_id_bytes=1, context_id=5)
        + encode_context_id(5, 1)  # no change: nothing
        + encode_context_id(6, 1)
        + encode_vmid(3)
        + encode_vmid(3)
        + encode_trigger()
        + encode_exception_return()
        + encode_timestamp(0x1234),
        config,
    )
    ctx = [e for e in elems if isinstance(e, PEContext)]
    assert [(c.context.context_id, c.context.vmid_valid) for c in ctx] == [
        (5, False),
        (6, False),
        (6, True),
    ]
    assert element_text(ctx[2]) == (
        "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; VMID=0x3; CTXTID=0x6; )"
    )
    assert [type(e) for e in elems[-4:]] == [Event, ExceptionRet, Timestamp, EoTrace]


def test_bad_packet_waits_for_async_and_isync() -> None:
    elems = decode(
        sync()
        + b"\x02"
        + encode_atoms([True])
        + sync(reason=ISyncReason.PERIODIC)
        + encode_atoms([True])
    )
    nosync = [e for e in elems if isinstance(e, NoSync)]
    assert [n.reason for n in nosync] == [UnsyncReason.INIT_DECODER, UnsyncReason.UNKNOWN]
    # after the bad packet a periodic I-sync still restarts trace
    assert sum(isinstance(e, TraceOn) for e in elems) == 2
    assert ranges(elems) == [(0x1000, 0x1008, 2, True)]


def test_unsupported_isa_waits_for_an_address() -> None:
    start = sync(0x1000) + encode_branch(0x1000, Isa.JAZELLE)
    elems = decode(start + encode_atoms([True]))
    after = [e for e in elems if e.offset >= len(start)]
    # mapped, but Jazelle: no range, a warning
    assert [type(e) for e in after] == [Diagnostic, EoTrace]
    start = sync(0x1000) + encode_branch(0x9000, Isa.JAZELLE)
    elems = decode(start + encode_atoms([True]) + encode_atoms([True]))
    after = [e for e in elems if e.offset >= len(start)]
    assert [type(e) for e in after] == [AddrNacc, EoTrace]  # not mapped: ADDR_NACC once
    assert after[0].address == 0x9000  # type: ignore[attr-defined]


def test_config_fields() -> None:
    c = PtmConfig(
        trace_id=0x13,
        etmcr=0x10001000 | (2 << 14) | (1 << 8) | (1 << 29) | (1 << 30),
        etmccer=0x34C01AC2 | (1 << 24),
        etmidr=0x411CF312,
    )
    assert c.cycle_accurate and c.timestamps and c.branch_broadcast and c.vmid
    assert c.ctxt_id_bytes == 2 and c.minor_rev == 1
    assert c.return_stack and c.has_return_stack and c.has_timestamps and c.has_virt_ext
    assert c.ts_64bit and c.ts_binary and c.dmb_dsb_waypoints and not c.dmb_dsb_timestamps
    v10 = PtmConfig(trace_id=1, etmccer=0x34C01AC2, etmidr=0x411CF301)
    assert not v10.ts_64bit and not v10.ts_binary and not v10.return_stack


def test_decoder_sees_only_the_first_uncarried_notsync() -> None:
    stream = Stream.from_chunks(0x10, [(0, b"\x00"), (16, b"\x12\x13"), (32, sync())])
    config = PtmConfig(trace_id=0x10)
    context = DecodeContext(0x10, DecodeOptions(), memory())
    elems = list(iter_elements(iter_packets(stream, config, True), config, context))
    assert isinstance(elems[0], NoSync) and elems[0].offset == 1


def test_unsupported_isa_warning_is_logged() -> None:
    config = PtmConfig(trace_id=0x10, core="Cortex-A15")
    data = sync(0x1000) + encode_branch(0x1004, Isa.JAZELLE) + encode_atoms([True])
    stream = Stream.from_chunks(0x10, [(0, data)])
    context = DecodeContext(0x10, DecodeOptions(), memory())
    out = list(iter_elements(iter_packets(stream, config, True), config, context))
    diags = [e for e in out if isinstance(e, Diagnostic)]
    assert [diagnostic_text("ptm", d) for d in diags] == [
        f"DCD_PTM_0016 : 0x0016 (OCSD_ERR_UNSUPPORTED_ISA) [ISA not supported in decoder]; "
        f"TrcIdx={len(data) - 1}; CS ID=10; "
        "Warning: unsupported instruction set processing atom packet."
    ]
    assert diags[0].severity == Severity.WARNING
