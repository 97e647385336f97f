"""Encode direct branches with random offsets, classify them, get the offsets back.

The encoders follow the Arm ARM field layouts (DDI 0487 C6.2 for A64; DDI 0406C
A8.8.18/A8.8.25/A8.8.27/A8.8.29 for A32/T32 B, BL, BLX, CBZ; DDI 0553 for the
v8.1-M loop branches) and are independent of the classifier's bit extraction.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.elements import InstrType, Isa
from cstrace.isa import ArchVersion, IsaOptions, decode

OPTS = IsaOptions(ArchVersion.AA64)
M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1


def _field(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


# ---------------------------------------------------------------- A64


def a64_b(off: int, link: bool) -> int:
    return (0x94000000 if link else 0x14000000) | _field(off >> 2, 26)


def a64_bcond(off: int, cond: int, consistent: bool) -> int:
    return 0x54000000 | (_field(off >> 2, 19) << 5) | (int(consistent) << 4) | cond


def a64_cbz(off: int, sf: bool, nz: bool, rt: int) -> int:
    return (int(sf) << 31) | 0x34000000 | (int(nz) << 24) | (_field(off >> 2, 19) << 5) | rt


def a64_tbz(off: int, bit: int, nz: bool, rt: int) -> int:
    b5, b40 = bit >> 5, bit & 0x1F
    return (
        (b5 << 31) | 0x36000000 | (int(nz) << 24) | (b40 << 19) | (_field(off >> 2, 14) << 5) | rt
    )


def a64_cb_reg(off: int, sf: bool, cc: int, rm: int, rt: int) -> int:
    """CB<cc> Rt, Rm, <label> (FEAT_CMPBR): sf 1110100 cc Rm 00 imm9 Rt."""
    return (int(sf) << 31) | 0x74000000 | (cc << 21) | (rm << 16) | (_field(off >> 2, 9) << 5) | rt


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M64 >> 2).map(lambda a: a << 2),
    off=st.integers(-(1 << 25), (1 << 25) - 1).map(lambda o: o * 4),
    link=st.booleans(),
)
def test_a64_b_bl(addr: int, off: int, link: bool) -> None:
    i = decode(Isa.A64, addr, a64_b(off, link), OPTS)
    assert i.itype == InstrType.BR and i.is_link == link and not i.is_cond
    assert i.target == (addr + off) & M64


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M64 >> 2).map(lambda a: a << 2),
    off=st.integers(-(1 << 18), (1 << 18) - 1).map(lambda o: o * 4),
    cond=st.integers(0, 15),
    consistent=st.booleans(),
    sf=st.booleans(),
    nz=st.booleans(),
    rt=st.integers(0, 31),
)
def test_a64_imm19(
    addr: int, off: int, cond: int, consistent: bool, sf: bool, nz: bool, rt: int
) -> None:
    for op in (a64_bcond(off, cond, consistent), a64_cbz(off, sf, nz, rt)):
        i = decode(Isa.A64, addr, op, OPTS)
        assert i.itype == InstrType.BR and i.is_cond and not i.is_link
        assert i.target == (addr + off) & M64


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M64 >> 2).map(lambda a: a << 2),
    off=st.integers(-(1 << 13), (1 << 13) - 1).map(lambda o: o * 4),
    bit=st.integers(0, 63),
    nz=st.booleans(),
    rt=st.integers(0, 31),
)
def test_a64_tbz(addr: int, off: int, bit: int, nz: bool, rt: int) -> None:
    i = decode(Isa.A64, addr, a64_tbz(off, bit, nz, rt), OPTS)
    assert i.itype == InstrType.BR and i.is_cond
    assert i.target == (addr + off) & M64


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M64 >> 2).map(lambda a: a << 2),
    off=st.integers(-(1 << 8), (1 << 8) - 1).map(lambda o: o * 4),
    sf=st.booleans(),
    cc=st.integers(0, 7),
    rm=st.integers(0, 31),
    rt=st.integers(0, 31),
)
def test_a64_cmpbr(addr: int, off: int, sf: bool, cc: int, rm: int, rt: int) -> None:
    i = decode(Isa.A64, addr, a64_cb_reg(off, sf, cc, rm, rt), OPTS)
    assert i.itype == InstrType.BR and not i.is_cond
    assert i.target == (addr + off) & M64


# ---------------------------------------------------------------- A32


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M32 >> 2).map(lambda a: a << 2),
    imm24=st.integers(-(1 << 23), (1 << 23) - 1),
    cond=st.integers(0, 14),
    link=st.booleans(),
    h=st.integers(0, 1),
)
def test_a32_b_bl_blx(addr: int, imm24: int, cond: int, link: bool, h: int) -> None:
    op = (cond << 28) | 0x0A000000 | (int(link) << 24) | _field(imm24, 24)
    i = decode(Isa.A32, addr, op, OPTS)
    assert i.itype == InstrType.BR and i.is_link == link and i.is_cond == (cond != 14)
    assert i.target == (addr + 8 + 4 * imm24) & M32 and i.next_isa == Isa.A32
    blx = 0xFA000000 | (h << 24) | _field(imm24, 24)
    i = decode(Isa.A32, addr, blx, OPTS)
    assert i.itype == InstrType.BR and i.is_link and i.next_isa == Isa.T32
    assert i.target == (addr + 8 + 4 * imm24 + 2 * h) & M32


# ---------------------------------------------------------------- T32


def t32_bl_like(off: int, hw2_base: int) -> int:
    """B.W (T4) / BL / BLX (T2) layout: S:I1:I2:imm10:imm11:'0', J = NOT(I xor S)."""
    v = _field(off >> 1, 24)
    s = v >> 23
    i1 = (v >> 22) & 1
    i2 = (v >> 21) & 1
    j1 = 1 ^ i1 ^ s
    j2 = 1 ^ i2 ^ s
    hw1 = 0xF000 | (s << 10) | ((v >> 11) & 0x3FF)
    hw2 = hw2_base | (j1 << 13) | (j2 << 11) | (v & 0x7FF)
    return (hw1 << 16) | hw2


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M32 >> 1).map(lambda a: a << 1),
    off=st.integers(-(1 << 23), (1 << 23) - 1).map(lambda o: o * 2),
)
def test_t32_b_w_and_bl(addr: int, off: int) -> None:
    i = decode(Isa.T32, addr, t32_bl_like(off, 0x9000), OPTS)
    assert (i.itype, i.size, i.is_link) == (InstrType.BR, 4, False)
    assert i.target == (addr + 4 + off) & M32
    i = decode(Isa.T32, addr, t32_bl_like(off, 0xD000), OPTS)
    assert (i.itype, i.size, i.is_link, i.next_isa) == (InstrType.BR, 4, True, Isa.T32)
    assert i.target == (addr + 4 + off) & M32
    off4 = off & ~3
    i = decode(Isa.T32, addr, t32_bl_like(off4, 0xC000), OPTS)
    assert (i.itype, i.is_link, i.next_isa) == (InstrType.BR, True, Isa.A32)
    assert i.target == ((addr & ~3) + 4 + off4) & M32


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M32 >> 1).map(lambda a: a << 1),
    off=st.integers(-(1 << 19), (1 << 19) - 1).map(lambda o: o * 2),
    cond=st.integers(0, 13),
)
def test_t32_bcond_w(addr: int, off: int, cond: int) -> None:
    v = _field(off >> 1, 20)  # S:J2:J1:imm6:imm11
    s, j2, j1 = v >> 19, (v >> 18) & 1, (v >> 17) & 1
    hw1 = 0xF000 | (s << 10) | (cond << 6) | ((v >> 11) & 0x3F)
    hw2 = 0x8000 | (j1 << 13) | (j2 << 11) | (v & 0x7FF)
    i = decode(Isa.T32, addr, (hw1 << 16) | hw2, OPTS)
    assert (i.itype, i.size, i.is_cond) == (InstrType.BR, 4, True)
    assert i.target == (addr + 4 + off) & M32


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M32 >> 1).map(lambda a: a << 1),
    imm8=st.integers(-128, 127),
    imm11=st.integers(-1024, 1023),
    cond=st.integers(0, 13),
    imm6=st.integers(0, 63),
    nz=st.booleans(),
    rn=st.integers(0, 7),
)
def test_t32_16bit_branches(
    addr: int, imm8: int, imm11: int, cond: int, imm6: int, nz: bool, rn: int
) -> None:
    i = decode(Isa.T32, addr, (0xD000 | (cond << 8) | _field(imm8, 8)) << 16, OPTS)
    assert (i.itype, i.size, i.is_cond) == (InstrType.BR, 2, True)
    assert i.target == (addr + 4 + 2 * imm8) & M32
    i = decode(Isa.T32, addr, (0xE000 | _field(imm11, 11)) << 16, OPTS)
    assert (i.itype, i.size, i.is_cond) == (InstrType.BR, 2, False)
    assert i.target == (addr + 4 + 2 * imm11) & M32
    cb = 0xB100 | (int(nz) << 11) | ((imm6 >> 5) << 9) | ((imm6 & 0x1F) << 3) | rn
    i = decode(Isa.T32, addr, cb << 16, OPTS)
    assert (i.itype, i.size, i.is_cond) == (InstrType.BR, 2, True)
    assert i.target == (addr + 4 + 2 * imm6) & M32


@settings(max_examples=150, deadline=None)
@given(
    addr=st.integers(0, M32 >> 1).map(lambda a: a << 1),
    off=st.integers(1, 2047).map(lambda o: o * 2),
    rn=st.integers(0, 14),
)
def test_v81m_loop_branches(addr: int, off: int, rn: int) -> None:
    # imml = off[11:2] in hw2[10:1], immh = off[1] in hw2[11]
    hw2 = 0xC001 | (((off >> 2) & 0x3FF) << 1) | (((off >> 1) & 1) << 11)
    for hw1 in (0xF00F, 0xF02F, 0xF01F):  # LE, LE (no LR update), LETP
        i = decode(Isa.T32, addr, (hw1 << 16) | hw2, OPTS)
        assert (i.itype, i.size, i.is_cond) == (InstrType.BR, 4, False)
        assert i.target == (addr + 4 - off) & M32
    i = decode(Isa.T32, addr, ((0xF040 | rn) << 16) | hw2, OPTS)  # WLS
    assert (i.itype, i.target) == (InstrType.BR, (addr + 4 + off) & M32)
