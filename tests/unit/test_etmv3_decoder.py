"""ETMv3 decoder: hand-made packet streams over a small code image → generic elements.

The expected element texts are what the reference decoder (trc_pkt_lister)
printed for the same trace bytes and memory, including its quirks: the last
range of a P-header held back so that an exception can cancel it, and values
left over in its reusable element records.
"""

from __future__ import annotations

from dataclasses import replace

from cstrace.capture import Stream
from cstrace.elements import Diagnostic, Isa, MemSpace
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv3 import iter_elements, iter_packets
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.encoder import encode_branch, encode_isync
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.diagnostics import diagnostic_text

PLAIN = Etmv3Config(ctrl=0x10000860, ccer=0x344008F2, idr=0x410CF250, traceidr=0x10)
CA = replace(PLAIN, ctrl=PLAIN.ctrl | 0x1000)
ASYNC = b"\x00\x00\x00\x00\x00\x80"
SYNC = ASYNC + bytes([0x08, 0x00, 0x01, 0x10, 0x00, 0x00])  # I-sync: Thumb 0x1000, periodic
NOPS = MemoryMap([MemoryRegion(0x1000, bytes([0x00, 0xBF] * 64), MemSpace.ANY, "nops")])

RANGE = (
    "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x{:x}:[0x{:x}] num_i(1) last_sz(2) "
    "(ISA=T32) E --- {})"
)
HEAD = [
    "OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
    "OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
    "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) S; 32-bit; )",
]
EOT = "OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])"


def rng(start: int, cc: str = "") -> str:
    return RANGE.format(start, start + 2, cc)


def decode(
    data: bytes,
    cfg: Etmv3Config = PLAIN,
    memory: MemoryMap | None = NOPS,
    *,
    reset: bool = False,
    complete: bool = True,
) -> list[str]:
    ctx = DecodeContext(0x10, DecodeOptions(), memory, reset=reset, complete=complete)
    pkts = iter_packets(Stream(0x10, data), cfg, complete)
    return [
        diagnostic_text("etmv3", e) if isinstance(e, Diagnostic) else element_text(e)
        for e in iter_elements(pkts, cfg, ctx)
    ]


def test_atoms_follow_one_instruction_each() -> None:
    assert decode(SYNC + bytes([0x84, 0x88])) == [
        *HEAD,
        rng(0x1000),
        rng(0x1002),
        rng(0x1004),
        EOT,
    ]


def test_cycle_accurate_ranges_and_cycle_counts() -> None:
    out = decode(SYNC + bytes([0x84, 0xBC, 0x82, 0xA8]), CA)
    assert out[3:] == [
        rng(0x1000, " [CC=1]; "),
        "OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=8]; )",
        rng(0x1002, " [CC=1]; "),
        rng(0x1004, " [CC=0]; "),
        "OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=3]; )",
        EOT,
    ]


def test_cycle_counts_before_the_first_isync() -> None:
    out = decode(ASYNC + bytes([0xBC, 0x84, 0x42, 0x05]), CA)
    assert out == [
        "OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
        "OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=8]; )",
        "OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=1]; )",
        "OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000005]; )",
        EOT,
    ]


def test_invalid_cycle_accurate_phdrs_give_cycle_counts() -> None:
    out = decode(SYNC + bytes([0x84, 0xA2, 0x84, 0x80, 0x84]), CA)
    assert out[3:] == [
        rng(0x1000, " [CC=1]; "),
        "OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=1]; )",
        rng(0x1002, " [CC=1]; "),
        "OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=1]; )",
        rng(0x1004, " [CC=1]; "),
        EOT,
    ]
    assert decode(SYNC + bytes([0xA2]), CA)[3] == "OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=0]; )"


def test_unreadable_code_gives_nacc_then_unknown_address() -> None:
    sync = ASYNC + encode_isync(0x107E, Isa.T32)
    out = decode(sync + bytes([0x84, 0x88, 0x84]))
    assert out[3:] == [
        "OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x107e; Memspace [0x19:Any S] )",
        "OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN()",
        EOT,
    ]


def test_branch_with_exception() -> None:
    branch = encode_branch(0x1010, Isa.T32, exception=14, ns=True)
    out = decode(SYNC + bytes([0x84, 0x88]) + branch + bytes([0x84]))
    assert out[3:] == [
        rng(0x1000),
        rng(0x1002),
        rng(0x1004),
        # The context element's instruction set is what its record held: A32 here.
        "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) N; 32-bit; )",
        "OCSD_GEN_TRC_ELEM_EXCEPTION(excep num (0x0e) )",
        rng(0x1010),
        EOT,
    ]


def test_cancelled_exception_return_and_range() -> None:
    cancel = encode_branch(0x1020, Isa.T32, exception=3, cancel=True)
    out = decode(SYNC + bytes([0x84, 0x76]) + cancel + bytes([0x84]))
    assert out[3:] == ["OCSD_GEN_TRC_ELEM_EXCEPTION(excep num (0x03) )", rng(0x1020), EOT]
    # With a packet in between the held-back elements are sent first.
    cancel = encode_branch(0x1030, Isa.T32, exception=2, cancel=True)
    out = decode(SYNC + bytes([0x84, 0x76, 0x66]) + cancel + bytes([0x84]))
    assert out[3:] == [
        rng(0x1000),
        "OCSD_GEN_TRC_ELEM_EXCEPTION_RET()",
        "OCSD_GEN_TRC_ELEM_EXCEPTION(excep num (0x02) )",
        rng(0x1030),
        EOT,
    ]


def test_context_id_packets_reuse_element_records() -> None:
    cfg = replace(PLAIN, ctrl=PLAIN.ctrl | (1 << 14))
    sync = ASYNC + encode_isync(0x1000, Isa.T32, context_id=0x55, ctxt_bytes=1)
    data = sync
    for k in range(6):
        data += b"\x84"
        if k % 3 == 2:
            data += bytes([0x6E, 0x10 + k])
    out = [e for e in decode(data, cfg) if "PE_CONTEXT" in e]
    assert out == [
        "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) S; 32-bit; CTXTID=0x55; )",
        "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; CTXTID=0x12; )",
        "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) S; 32-bit; CTXTID=0x15; )",
    ]


def test_exception_entry_and_short_context_id() -> None:
    out = decode(SYNC + bytes([0x84, 0x84, 0x7E, 0x6E, 0x84]))
    assert out[5:] == [
        "OCSD_GEN_TRC_ELEM_EXCEPTION(excep num (0x00) )",
        "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; CTXTID=0x0; )",
        EOT,
    ]


def test_thumbee_is_not_decoded() -> None:
    sync = ASYNC + encode_isync(0x1000, Isa.TEE)
    out = decode(sync + bytes([0x88]), replace(PLAIN, idr=0x410CF240))
    assert out[3:5] == [
        "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x0:[0x0] num_i(0) last_sz(0) (ISA=A32) N --- )",
        # NOP;NOP read as an A32 word has condition 0xB: conditional.
        "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1004] num_i(1) last_sz(4) (ISA=A32) "
        "E ---  <cond>)",
    ]


def test_bad_packet_stops_the_decode() -> None:
    out = decode(SYNC + bytes([0x84, 0x00, 0, 0, 0, 0, 0, 0, 0x80, 0x84]))
    # the held-back range is dropped and no end of trace follows, only the diagnostic
    assert out[:-1] == HEAD
    assert out[-1] == (
        f"DCD_ETMV3_0016 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; "
        f"TrcIdx={len(SYNC) + 1}; CS ID=10; Bad Packet sequence."
    )
    out = decode(SYNC + bytes([0x84, 0x84, 0x12, 0x84]))
    assert out[:-1] == [*HEAD, rng(0x1000), rng(0x1002)]
    assert out[-1].endswith(f"TrcIdx={len(SYNC) + 2}; CS ID=10; Reserved or unknown packet ID.")


def test_bad_packets_before_the_isync_are_skipped_and_counted() -> None:
    out = decode(ASYNC + bytes([0x12, 0x00, 0x00, 0x80]) + SYNC[6:] + b"\x84")
    skipped = (
        "DCD_ETMV3_0016 : 0x0000 (OCSD_OK) [No Error.]; TrcIdx=6; CS ID=10; "
        "4 bytes of packets skipped waiting for synchronisation."
    )
    assert out == [*HEAD[:3], skipped, *HEAD[3:], rng(0x1000), EOT]


def test_data_trace_configuration_is_not_decoded() -> None:
    assert decode(SYNC + b"\x84", replace(PLAIN, ctrl=PLAIN.ctrl | 0x4)) == [
        "DCD_ETMV3_0016 : 0x0003 (OCSD_ERR_NOT_INIT) [Component not initialised.]; "
        "No decoder configuration information"
    ]


def test_packet_cut_at_the_end_and_incomplete_capture() -> None:
    out = decode(SYNC + bytes([0x84, 0x42, 0x85, 0x86]))
    assert out[3:] == [rng(0x1000), "OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000000]; )", EOT]
    assert decode(SYNC + bytes([0x84]), complete=False) == HEAD


def test_reset_decoder_and_no_memory() -> None:
    out = decode(SYNC + bytes([0x84]), memory=None, reset=True)
    assert out[0] == "OCSD_GEN_TRC_ELEM_NO_SYNC( [reset-decoder])"
    assert out[3] == "OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x1000; Memspace [0x19:Any S] )"


def test_arm_branch_and_blx_switch() -> None:
    # ARM: BL +8 at 0x2000 (to 0x2010), then at 0x2010 BLX to Thumb 0x2020.
    code = bytearray(0x40)
    code[0:4] = (0xEB000002).to_bytes(4, "little")
    code[0x10:0x14] = (0xFA000002).to_bytes(4, "little")
    code[0x20:0x24] = bytes([0x00, 0xBF, 0x00, 0xBF])
    mem = MemoryMap([MemoryRegion(0x2000, bytes(code), MemSpace.ANY, "code")])
    sync = ASYNC + encode_isync(0x2000, Isa.A32)
    out = decode(sync + bytes([0x8C]), memory=mem)
    assert out[3:] == [
        "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2000:[0x2004] num_i(1) last_sz(4) (ISA=A32) "
        "E BR  b+link )",
        "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2010:[0x2014] num_i(1) last_sz(4) (ISA=A32) "
        "E BR  b+link )",
        "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2020:[0x2022] num_i(1) last_sz(2) (ISA=T32) "
        "E --- )",
        EOT,
    ]
