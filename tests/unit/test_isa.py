"""Hand-encoded instructions of every class the trace decoders care about.

Encodings are worked out from the Arm ARM (DDI 0487 for A64, DDI 0406C for
A32/T32, DDI 0553 for the Armv8.1-M loop branches); each case checks size,
type, sub-type, conditional and link flags, the direct target and the ISA
after the branch.
"""

from __future__ import annotations

import pytest

from cstrace.elements import InstrSubtype as S
from cstrace.elements import InstrType as T
from cstrace.elements import Isa
from cstrace.isa import (
    CORES,
    ArchVersion,
    IsaOptions,
    Profile,
    arch_profile,
    decode,
    decode_at,
    is_wide,
    lookup,
    read_opcode,
)

V8 = IsaOptions(ArchVersion.V8)
V83 = IsaOptions(ArchVersion.V8R3)
AA64 = IsaOptions(ArchVersion.AA64)
AA64_WFX = IsaOptions(ArchVersion.AA64, wfi_wfe_branch=True)
V8_WFX = IsaOptions(ArchVersion.V8, wfi_wfe_branch=True)
V7_DSB = IsaOptions(ArchVersion.V7, dsb_dmb_waypoints=True)
V7 = IsaOptions(ArchVersion.V7)

ADDR = 0x80001000

# ---------------------------------------------------------------------------
# A64
# ---------------------------------------------------------------------------

# (opcode, options, size-independent expectations: type, subtype, cond, link, target offset)
A64_CASES = [
    # B / BL imm26 (C6.2 B, BL)
    (0x14000010, V8, T.BR, S.NONE, False, False, 0x40),
    (0x17FFFFFF, V8, T.BR, S.NONE, False, False, -4),
    (0x94000010, V8, T.BR, S.BR_LINK, False, True, 0x40),
    (0x97FFFFFE, V8, T.BR, S.BR_LINK, False, True, -8),
    # B.cond, BC.cond imm19
    (0x54000040, V8, T.BR, S.NONE, True, False, 8),
    (0x54000050, V8, T.BR, S.NONE, True, False, 8),
    (0x54FFFFE1, V8, T.BR, S.NONE, True, False, -4),
    # CBZ/CBNZ imm19, TBZ/TBNZ imm14
    (0xB4000080, V8, T.BR, S.NONE, True, False, 16),
    (0x35000081, V8, T.BR, S.NONE, True, False, 16),
    (0x36000040, V8, T.BR, S.NONE, True, False, 8),
    (0x37F80040, V8, T.BR, S.NONE, True, False, 8),
    (0x367FFFE0, V8, T.BR, S.NONE, True, False, -4),
    # BR, BLR, RET, ERET
    (0xD61F0000, V8, T.BR_INDIRECT, S.NONE, False, False, None),
    (0xD63F0020, V8, T.BR_INDIRECT, S.BR_LINK, False, True, None),
    (0xD65F03C0, V8, T.BR_INDIRECT, S.V8_RET, False, False, None),
    (0xD65F00A0, V8, T.BR_INDIRECT, S.V8_RET, False, False, None),
    (0xD69F03E0, V8, T.BR_INDIRECT, S.V8_ERET, False, False, None),
    # FEAT_PAuth: BRAA, BRAB, BLRAA, BLRAB, BRAAZ, BLRABZ, RETAA, RETAB, ERETAA, ERETAB
    (0xD71F0801, V83, T.BR_INDIRECT, S.NONE, False, False, None),
    (0xD71F0C01, V83, T.BR_INDIRECT, S.NONE, False, False, None),
    (0xD73F0801, V83, T.BR_INDIRECT, S.BR_LINK, False, True, None),
    (0xD73F0C01, V83, T.BR_INDIRECT, S.BR_LINK, False, True, None),
    (0xD61F081F, V83, T.BR_INDIRECT, S.NONE, False, False, None),
    (0xD63F0C1F, V83, T.BR_INDIRECT, S.BR_LINK, False, True, None),
    (0xD65F0BFF, V83, T.BR_INDIRECT, S.V8_RET, False, False, None),
    (0xD65F0FFF, V83, T.BR_INDIRECT, S.V8_RET, False, False, None),
    (0xD69F0BFF, V83, T.BR_INDIRECT, S.V8_ERET, False, False, None),
    (0xD69F0FFF, V83, T.BR_INDIRECT, S.V8_ERET, False, False, None),
    # ... which are not branches before v8.3
    (0xD71F0801, V8, T.OTHER, S.NONE, False, False, None),
    (0xD65F0BFF, V8, T.OTHER, S.NONE, False, False, None),
    (0xD63F081F, V8, T.OTHER, S.NONE, False, False, None),
    # FEAT_PAuth_LR: RETAASPPC/RETABSPPC <label> and <Xm>
    (0x5500001F | (0x10 << 5), V83, T.BR_INDIRECT, S.V8_RET, False, False, None),
    (0x5520001F, AA64, T.BR_INDIRECT, S.V8_RET, False, False, None),
    (0xD65F0BE2, AA64, T.BR_INDIRECT, S.V8_RET, False, False, None),
    (0xD65F0FE2, AA64, T.BR_INDIRECT, S.V8_RET, False, False, None),
    # FEAT_TME: TEXIT ends like ERET, TSTART is its own waypoint type
    (0xD6FF03E0, AA64, T.BR_INDIRECT, S.V8_ERET, False, False, None),
    (0xD5233060, AA64, T.TSTART, S.NONE, False, False, None),
    (0xD5233065, AA64, T.TSTART, S.NONE, False, False, None),
    (0xD5233060, V8, T.OTHER, S.NONE, False, False, None),
    # FEAT_CMPBR: CB<cc> (register), CBB<cc>, CBH<cc>, CB<cc> (immediate): imm9
    (0x74010040, AA64, T.BR, S.NONE, False, False, 8),
    (0xF4010040, AA64, T.BR, S.NONE, False, False, 8),
    (0x74018040, AA64, T.BR, S.NONE, False, False, 8),
    (0x7401C040, AA64, T.BR, S.NONE, False, False, 8),
    (0x75000040, AA64, T.BR, S.NONE, False, False, 8),
    (0xF5400040, AA64, T.BR, S.NONE, False, False, 8),
    (0x74003FE0, AA64, T.BR, S.NONE, False, False, -4),
    (0x74014040, AA64, T.OTHER, S.NONE, False, False, None),
    (0xF4018040, AA64, T.OTHER, S.NONE, False, False, None),
    (0x75004040, AA64, T.OTHER, S.NONE, False, False, None),
    # barriers
    (0xD5033FDF, V8, T.ISB, S.NONE, False, False, None),
    (0xD5033F9F, V8, T.OTHER, S.NONE, False, False, None),
    (0xD5033F9F, IsaOptions(dsb_dmb_waypoints=True), T.DSB_DMB, S.NONE, False, False, None),
    (0xD5033BBF, IsaOptions(dsb_dmb_waypoints=True), T.DSB_DMB, S.NONE, False, False, None),
    (0xD50330FF, IsaOptions(dsb_dmb_waypoints=True), T.OTHER, S.NONE, False, False, None),
    # WFI, WFE; WFET, WFIT only for later architectures
    (0xD503207F, V8, T.OTHER, S.NONE, False, False, None),
    (0xD503207F, V8_WFX, T.WFI_WFE, S.NONE, False, False, None),
    (0xD503205F, V8_WFX, T.WFI_WFE, S.NONE, False, False, None),
    (0xD5031000, V8_WFX, T.OTHER, S.NONE, False, False, None),
    (0xD5031000, AA64_WFX, T.WFI_WFE, S.NONE, False, False, None),
    (0xD5031021, AA64_WFX, T.WFI_WFE, S.NONE, False, False, None),
    # not waypoints
    (0xD503201F, AA64_WFX, T.OTHER, S.NONE, False, False, None),  # NOP
    (0x91000400, AA64_WFX, T.OTHER, S.NONE, False, False, None),  # ADD x0, x0, #1
    (0x9A800020, AA64_WFX, T.OTHER, S.NONE, False, False, None),  # CSEL is not "conditional"
    (0xD4000001, AA64_WFX, T.OTHER, S.NONE, False, False, None),  # SVC
]


@pytest.mark.parametrize(("op", "opts", "itype", "sub", "cond", "link", "rel"), A64_CASES)
def test_a64(
    op: int, opts: IsaOptions, itype: T, sub: S, cond: bool, link: bool, rel: int | None
) -> None:
    i = decode(Isa.A64, ADDR, op, opts)
    assert (i.size, i.itype, i.subtype, i.is_cond, i.is_link) == (4, itype, sub, cond, link)
    assert i.target == (None if rel is None else ADDR + rel)
    assert i.next_isa == Isa.A64
    assert i.is_waypoint == (itype != T.OTHER)
    assert i.next_address == ADDR + 4


def test_a64_target_wraps_at_64_bits() -> None:
    i = decode(Isa.A64, 0xFFFFFFFFFFFFFFF0, 0x14000010, V8)
    assert i.target == 0x30


# ---------------------------------------------------------------------------
# A32
# ---------------------------------------------------------------------------

A32_CASES = [
    # B, B<c>, BL: PC + 8 + imm24:'00'
    (0xEA000000, V7, T.BR, S.NONE, False, False, 8, Isa.A32),
    (0xEAFFFFFE, V7, T.BR, S.NONE, False, False, 0, Isa.A32),
    (0x0A000001, V7, T.BR, S.NONE, True, False, 12, Isa.A32),
    (0xEB000010, V7, T.BR, S.BR_LINK, False, True, 0x48, Isa.A32),
    (0x1BFFFFFC, V7, T.BR, S.BR_LINK, True, True, -8, Isa.A32),
    # BLX <label>: to T32, + H:'0'
    (0xFA000000, V7, T.BR, S.BR_LINK, False, True, 8, Isa.T32),
    (0xFB000000, V7, T.BR, S.BR_LINK, False, True, 10, Isa.T32),
    # BX, BLX, BXJ (register)
    (0xE12FFF1E, V7, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.A32),
    (0x012FFF1E, V7, T.BR_INDIRECT, S.V7_IMPLIED_RET, True, False, None, Isa.A32),
    (0xE12FFF10, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),
    (0xE12FFF33, V7, T.BR_INDIRECT, S.BR_LINK, False, True, None, Isa.A32),
    (0xE12FFF20, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),
    # LDM/POP with PC
    (0xE8BD8010, V7, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.A32),
    (0xE8908000, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),
    (0xE8BD0010, V7, T.OTHER, S.NONE, False, False, None, Isa.A32),  # POP {r4}
    # LDR PC
    (0xE49DF004, V7, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.A32),
    (0xE590F004, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),
    (0xE790F001, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),
    (0xE5900004, V7, T.OTHER, S.NONE, False, False, None, Isa.A32),  # LDR r0, [r0, #4]
    # data processing to PC
    (0xE1A0F00E, V7, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.A32),
    (0xE1B0F00E, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),  # MOVS PC, LR
    (0xE25EF004, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),  # SUBS PC, LR, #4
    (0xE08FF000, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),  # ADD PC, PC, r0
    (0xE310F000, V7, T.OTHER, S.NONE, False, False, None, Isa.A32),  # TST (writes no PC)
    (0xE1A00001, V7, T.OTHER, S.NONE, False, False, None, Isa.A32),  # MOV r0, r1
    (0x01A00001, V7, T.OTHER, S.NONE, True, False, None, Isa.A32),  # MOVEQ r0, r1
    # RFE
    (0xF8900A00, V7, T.BR_INDIRECT, S.NONE, False, False, None, Isa.A32),
    # barriers, with and without DSB/DMB waypoints
    (0xF57FF06F, V7, T.ISB, S.NONE, False, False, None, Isa.A32),
    (0xF57FF04F, V7, T.OTHER, S.NONE, False, False, None, Isa.A32),
    (0xF57FF04F, V7_DSB, T.DSB_DMB, S.NONE, False, False, None, Isa.A32),
    (0xF57FF05F, V7_DSB, T.DSB_DMB, S.NONE, False, False, None, Isa.A32),
    (0xEE070F95, V7, T.ISB, S.NONE, False, False, None, Isa.A32),
    (0xEE070F9A, V7_DSB, T.DSB_DMB, S.NONE, False, False, None, Isa.A32),
    (0xEE070FBA, V7_DSB, T.DSB_DMB, S.NONE, False, False, None, Isa.A32),
    # WFI/WFE
    (0xE320F003, V7, T.OTHER, S.NONE, False, False, None, Isa.A32),
    (0xE320F003, V8_WFX, T.WFI_WFE, S.NONE, False, False, None, Isa.A32),
    (0xE320F002, V8_WFX, T.WFI_WFE, S.NONE, False, False, None, Isa.A32),
    (0xE320F000, V8_WFX, T.OTHER, S.NONE, False, False, None, Isa.A32),  # NOP
]


@pytest.mark.parametrize(("op", "opts", "itype", "sub", "cond", "link", "rel", "nisa"), A32_CASES)
def test_a32(
    op: int,
    opts: IsaOptions,
    itype: T,
    sub: S,
    cond: bool,
    link: bool,
    rel: int | None,
    nisa: Isa,
) -> None:
    i = decode(Isa.A32, ADDR, op, opts)
    assert (i.size, i.itype, i.subtype, i.is_cond, i.is_link) == (4, itype, sub, cond, link)
    assert i.target == (None if rel is None else ADDR + rel)
    assert i.next_isa == nisa


def test_a32_target_wraps_at_32_bits() -> None:
    assert decode(Isa.A32, 0xFFFFFFF8, 0xEA000002, V7).target == 0x8


# ---------------------------------------------------------------------------
# T32 (opcode = first halfword << 16 | second halfword)
# ---------------------------------------------------------------------------

T32_CASES = [
    # 16-bit B<c> (T1), B (T2)
    (0xD0020000, V7, 2, T.BR, S.NONE, True, False, 8, Isa.T32),
    (0xD1FE0000, V7, 2, T.BR, S.NONE, True, False, 0, Isa.T32),
    (0xE7FE0000, V7, 2, T.BR, S.NONE, False, False, 0, Isa.T32),
    (0xE0040000, V7, 2, T.BR, S.NONE, False, False, 12, Isa.T32),
    (0xDE000000, V7, 2, T.OTHER, S.NONE, False, False, None, Isa.T32),  # UDF
    (0xDF000000, V7, 2, T.OTHER, S.NONE, False, False, None, Isa.T32),  # SVC
    # 32-bit B<c>.W (T3), B.W (T4), BL, BLX
    (0xF0008000, V7, 4, T.BR, S.NONE, True, False, 4, Isa.T32),
    (0xF47FAFFE, V7, 4, T.BR, S.NONE, True, False, 0, Isa.T32),  # BNE.W . (offset -4)
    (0xF000B800, V7, 4, T.BR, S.NONE, False, False, 4, Isa.T32),
    (0xF7FFBFFE, V7, 4, T.BR, S.NONE, False, False, 0, Isa.T32),
    (0xF000F800, V7, 4, T.BR, S.BR_LINK, False, True, 4, Isa.T32),
    (0xF7FFFFFF, V7, 4, T.BR, S.BR_LINK, False, True, 2, Isa.T32),
    (0xF000F810, V7, 4, T.BR, S.BR_LINK, False, True, 0x24, Isa.T32),
    (0xF000E800, V7, 4, T.BR, S.BR_LINK, False, True, 4, Isa.A32),  # BLX: Align(PC, 4)
    (0xF000E808, V7, 4, T.BR, S.BR_LINK, False, True, 0x14, Isa.A32),
    # CBZ, CBNZ: i:imm5:'0', forward
    (0xB1080000, V7, 2, T.BR, S.NONE, True, False, 6, Isa.T32),
    (0xB9080000, V7, 2, T.BR, S.NONE, True, False, 6, Isa.T32),
    (0xB3F80000, V7, 2, T.BR, S.NONE, True, False, 4 + 126, Isa.T32),
    # BX, BLX (register), BXJ
    (0x47700000, V7, 2, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.T32),
    (0x47000000, V7, 2, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0x47800000, V7, 2, T.BR_INDIRECT, S.BR_LINK, False, True, None, Isa.T32),
    (0xF3C08F00, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    # POP {..,pc}, MOV/ADD PC
    (0xBD000000, V7, 2, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.T32),
    (0xBD100000, V7, 2, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.T32),
    (0xBC100000, V7, 2, T.OTHER, S.NONE, False, False, None, Isa.T32),  # POP {r4}
    (0x46F70000, V7, 2, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.T32),
    (0x46870000, V7, 2, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0x44870000, V7, 2, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0x46080000, V7, 2, T.OTHER, S.NONE, False, False, None, Isa.T32),  # MOV r0, r1
    # TBB, TBH
    (0xE8D0F001, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xE8D0F011, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    # LDR PC (T3 imm12, T4 imm8 incl. post-index from SP, literal, register)
    (0xF8D0F004, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xF85DFB04, V7, 4, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.T32),
    (0xF850FC04, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xF85FF004, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xF850F001, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xF8D00004, V7, 4, T.OTHER, S.NONE, False, False, None, Isa.T32),  # LDR r0, [r0, #4]
    # LDM with PC, RFE, SUBS PC, LR / ERET
    (0xE8BD8010, V7, 4, T.BR_INDIRECT, S.V7_IMPLIED_RET, False, False, None, Isa.T32),
    (0xE8908000, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xE8BD0010, V7, 4, T.OTHER, S.NONE, False, False, None, Isa.T32),  # POP.W {r4}
    (0xE810C000, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xE990C000, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xF3DE8F04, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    (0xF3DE8F00, V7, 4, T.BR_INDIRECT, S.NONE, False, False, None, Isa.T32),
    # barriers
    (0xF3BF8F6F, V7, 4, T.ISB, S.NONE, False, False, None, Isa.T32),
    (0xF3BF8F4F, V7, 4, T.OTHER, S.NONE, False, False, None, Isa.T32),
    (0xF3BF8F4F, V7_DSB, 4, T.DSB_DMB, S.NONE, False, False, None, Isa.T32),
    (0xF3BF8F5F, V7_DSB, 4, T.DSB_DMB, S.NONE, False, False, None, Isa.T32),
    (0xEE070F95, V7, 4, T.ISB, S.NONE, False, False, None, Isa.T32),
    # WFI, WFE (16- and 32-bit)
    (0xBF300000, V8_WFX, 2, T.WFI_WFE, S.NONE, False, False, None, Isa.T32),
    (0xBF200000, V8_WFX, 2, T.WFI_WFE, S.NONE, False, False, None, Isa.T32),
    (0xBF300000, V7, 2, T.OTHER, S.NONE, False, False, None, Isa.T32),
    (0xF3AF8003, V8_WFX, 4, T.WFI_WFE, S.NONE, False, False, None, Isa.T32),
    (0xF3AF8002, V8_WFX, 4, T.WFI_WFE, S.NONE, False, False, None, Isa.T32),
    (0xBF000000, V8_WFX, 2, T.OTHER, S.NONE, False, False, None, Isa.T32),  # NOP
    # Armv8.1-M: LE, LETP go back by imml:immh:'0'; WLS, WLSTP go forward
    (0xF00FC005, V8, 4, T.BR, S.NONE, False, False, 4 - 8, Isa.T32),
    (0xF00FC801, V8, 4, T.BR, S.NONE, False, False, 4 - 2, Isa.T32),
    (0xF02FC005, V8, 4, T.BR, S.NONE, False, False, 4 - 8, Isa.T32),
    (0xF01FC005, V8, 4, T.BR, S.NONE, False, False, 4 - 8, Isa.T32),
    (0xF040C005, V8, 4, T.BR, S.NONE, False, False, 4 + 8, Isa.T32),
    (0xF043C009, V8, 4, T.BR, S.NONE, False, False, 4 + 16, Isa.T32),
    (0xF010C005, V8, 4, T.BR, S.NONE, False, False, 4 + 8, Isa.T32),
    # ... while DLS, DLSTP and the branch-future hints are not waypoints
    (0xF040E001, V8, 4, T.OTHER, S.NONE, False, False, None, Isa.T32),
    (0xF010E001, V8, 4, T.OTHER, S.NONE, False, False, None, Isa.T32),
    (0xF0A0E001, V8, 4, T.OTHER, S.NONE, False, False, None, Isa.T32),
    # 32-bit data processing
    (0xF04F0000, V7, 4, T.OTHER, S.NONE, False, False, None, Isa.T32),  # MOV.W r0, #0
]


@pytest.mark.parametrize(
    ("op", "opts", "size", "itype", "sub", "cond", "link", "rel", "nisa"), T32_CASES
)
def test_t32(
    op: int,
    opts: IsaOptions,
    size: int,
    itype: T,
    sub: S,
    cond: bool,
    link: bool,
    rel: int | None,
    nisa: Isa,
) -> None:
    for addr in (ADDR, ADDR + 2):
        i = decode(Isa.T32, addr, op, opts)
        assert (i.size, i.itype, i.subtype, i.is_cond, i.is_link) == (size, itype, sub, cond, link)
        if rel is None:
            assert i.target is None
        elif nisa == Isa.A32:
            assert i.target == (addr & ~3) + rel
        else:
            assert i.target == addr + rel
        assert i.next_isa == nisa


def test_t32_16bit_ignores_second_halfword() -> None:
    a = decode(Isa.T32, ADDR, 0x47700000, V7)
    b = decode(Isa.T32, ADDR, 0x4770F000, V7)
    assert (a.size, a.itype, a.subtype) == (b.size, b.itype, b.subtype)


@pytest.mark.parametrize(
    ("op", "count"),
    [(0xBF08, 1), (0xBF0C, 2), (0xBF04, 2), (0xBF1A, 3), (0xBF01, 4), (0xBF00, 0), (0xBF10, 0)],
)
def test_t32_it_count(op: int, count: int) -> None:
    i = decode(Isa.T32, ADDR, op << 16, V7)
    assert i.it_count == count
    assert i.itype == T.OTHER


def test_is_wide() -> None:
    assert is_wide(0xF000) and is_wide(0xE800) and is_wide(0xF800)
    assert not is_wide(0xE7FF) and not is_wide(0x4770) and not is_wide(0xBD00)


# ---------------------------------------------------------------------------
# reading opcodes, options, cores
# ---------------------------------------------------------------------------


def test_read_opcode_and_decode_at() -> None:
    code = bytes.fromhex("7047 00bf 00f0 00f8")
    assert read_opcode(Isa.T32, code, 0) == 0x4770BF00
    assert read_opcode(Isa.T32, code, 4) == 0xF000F800
    assert read_opcode(Isa.A64, code, 0) == 0xBF004770
    assert read_opcode(Isa.A64, code, 6) is None
    assert read_opcode(Isa.A64, code, -1) is None
    i = decode_at(Isa.T32, code, 0x100, 0x104, V7)
    assert i is not None and i.is_link and i.target == 0x108
    assert decode_at(Isa.T32, code, 0x100, 0x106, V7) is None  # only 2 bytes left


def test_plain_int_isa() -> None:
    i = decode(2, ADDR, 0xD65F03C0, V8)  # type: ignore[arg-type]
    assert i.isa is Isa.A64 and i.next_isa is Isa.A64 and "A64" in repr(i)
    j = decode(0, ADDR, 0xFA000000, V7)  # type: ignore[arg-type]
    assert j.isa is Isa.A32 and j.next_isa is Isa.T32


def test_unsupported_isa_raises() -> None:
    with pytest.raises(ValueError):
        decode(Isa.JAZELLE, 0, 0, V7)


def test_options_value_semantics() -> None:
    a = IsaOptions(ArchVersion.V8, Profile.A, wfi_wfe_branch=True)
    b = IsaOptions(0x800, 3, wfi_wfe_branch=True)
    assert a == b and hash(a) == hash(b) and a.key == b.key
    assert a != IsaOptions(ArchVersion.V8, Profile.A)
    with pytest.raises(AttributeError):
        a.arch = ArchVersion.V7  # type: ignore[misc]
    # versions between the named ones round down
    assert IsaOptions(0x0802).arch == ArchVersion.V8
    assert IsaOptions(0x0805).arch == ArchVersion.V8R3
    assert IsaOptions(0x0900).arch == ArchVersion.AA64
    assert "V8" in repr(a)


@pytest.mark.parametrize(
    ("name", "arch", "profile"),
    [
        ("Cortex-A53", ArchVersion.V8, Profile.A),
        ("Cortex-A57", ArchVersion.V8, Profile.A),
        ("Cortex-A72", ArchVersion.V8, Profile.A),
        ("Cortex-A55", ArchVersion.V8R3, Profile.A),
        ("Cortex-A76", ArchVersion.V8R3, Profile.A),
        ("Cortex-A15", ArchVersion.V7, Profile.A),
        ("Cortex-A9", ArchVersion.V7, Profile.A),
        ("Cortex-A7", ArchVersion.V7, Profile.A),
        ("Cortex-R5", ArchVersion.V7, Profile.R),
        ("Cortex-R52", ArchVersion.V8, Profile.R),
        ("Cortex-M3", ArchVersion.V7, Profile.M),
        ("Cortex-M4", ArchVersion.V7, Profile.M),
        ("Cortex-M55", ArchVersion.V8, Profile.M),
        ("ARM-AA64", ArchVersion.AA64, Profile.A),
        ("ARM-aa64", ArchVersion.AA64, Profile.A),
        ("ARM-AA64-R", ArchVersion.AA64, Profile.R),
        ("ARMv7-A", ArchVersion.V7, Profile.A),
        ("ARMv7-M", ArchVersion.V7, Profile.M),
        ("ARMv8-A", ArchVersion.V8, Profile.A),
        ("ARMv8.2-A", ArchVersion.V8, Profile.A),
        ("ARMv8.3-A", ArchVersion.V8R3, Profile.A),
        ("ARMv8.4-A", ArchVersion.AA64, Profile.A),
        ("ARMv8.1-M", ArchVersion.V8, Profile.M),
        ("ARMv9-A", ArchVersion.AA64, Profile.A),
        ("ARMv9.2-R", ArchVersion.AA64, Profile.R),
        ("ARMv8.3-M", ArchVersion.V8R3, Profile.M),
        ("Cortex-A78", ArchVersion.V8, Profile.A),
    ],
)
def test_cores(name: str, arch: ArchVersion, profile: Profile) -> None:
    assert arch_profile(name) == (arch, profile)
    assert lookup(name) == (arch, profile)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Cortex-X9000",
        "ARMv6-A",
        "ARMv8-Q",
        "ARMv8.2",
        "ARM-X64",
        "ARMv8",
        "ARMv8-a",
        "ARMv8-A.1",
    ],
)
def test_unknown_cores(name: str) -> None:
    assert lookup(name) is None
    assert arch_profile(name) == (ArchVersion.UNKNOWN, Profile.UNKNOWN)


def test_core_table_is_consistent() -> None:
    for name, (arch, profile) in CORES.items():
        assert name.startswith("Cortex-")
        assert arch in (ArchVersion.V7, ArchVersion.V8, ArchVersion.V8R3)
        assert profile.name == name[len("Cortex-")]
