"""A64 instruction classification for trace decode.

Input: a 32-bit A64 opcode and the classification level of the options.
Output: a :data:`~cstrace.isa.cls.Cls` tuple (size, type, sub-type, conditional,
link, branch offset...).

Encodings are from the Arm Architecture Reference Manual for A-profile (DDI 0487),
section C4.1 "A64 instruction set encoding": "Branches, Exception Generating and
System instructions" (op0 = x101): unconditional branch (immediate) B/BL,
compare and branch CBZ/CBNZ, test and branch TBZ/TBNZ, conditional branch
B.cond and BC.cond (FEAT_HBC), unconditional branch (register) BR/BLR/RET/ERET
and the FEAT_PAuth forms (BRAA.., BLRAA.., RETAA/RETAB, ERETAA/ERETAB), the
FEAT_PAuth_LR returns (RETAASPPC/RETABSPPC and their register forms), TEXIT and
TSTART (FEAT_TME), the FEAT_CMPBR compare-and-branch forms (CB<cc>, CBB<cc>,
CBH<cc>), barriers (DSB, DMB, ISB) and hints (WFE, WFI, WFET, WFIT).

The choice of what counts as a waypoint, and the sub-types, follow the
reference decoder (OpenCSD): for example A64 compare-and-branch (FEAT_CMPBR)
instructions are direct branches but not flagged conditional, unlike CBZ.
"""

from __future__ import annotations

from cstrace.elements import InstrSubtype, InstrType
from cstrace.isa.cls import LEVEL_AA64, LEVEL_V8R3, Cls, sext

__all__ = ["classify_a64"]

_OTHER = InstrType.OTHER
_BR = InstrType.BR
_IBR = InstrType.BR_INDIRECT
_NONE = InstrSubtype.NONE
_LINK = InstrSubtype.BR_LINK
_RET = InstrSubtype.V8_RET
_ERET = InstrSubtype.V8_ERET
_ALL = (1 << 64) - 1

_PLAIN: Cls = (4, _OTHER, _NONE, False, False, None, _ALL, False, 0)


def _ind(subtype: InstrSubtype, link: bool = False) -> Cls:
    return (4, _IBR, subtype, False, link, None, _ALL, False, 0)


def _indirect(w: int, level: int) -> Cls | None:
    """Register branches and returns (C4.1.x "Unconditional branch (register)")."""
    if w & 0xFFDFFC1F == 0xD61F0000:  # BR Xn (bit 21 clear) / BLR Xn (bit 21 set)
        link = bool(w & 0x00200000)
        return _ind(_LINK if link else _NONE, link)
    if w & 0xFFFFFC1F == 0xD65F0000:  # RET {Xn}
        return _ind(_RET)
    if w == 0xD69F03E0:  # ERET
        return _ind(_ERET)
    if level < LEVEL_V8R3:
        return None
    # FEAT_PAuth (v8.3) register branches.
    if w & 0xFFDFF800 == 0xD71F0800:  # BRAA/BRAB, BLRAA/BLRAB Xn, Xm|SP
        link = bool(w & 0x00200000)
        return _ind(_LINK if link else _NONE, link)
    if w & 0xFFDFF81F == 0xD61F081F:  # BRAAZ/BRABZ, BLRAAZ/BLRABZ Xn
        link = bool(w & 0x00200000)
        return _ind(_LINK if link else _NONE, link)
    if w & 0xFFFFFBFF == 0xD69F0BFF:  # ERETAA/ERETAB
        return _ind(_ERET)
    if w & 0xFFFFFBFF == 0xD65F0BFF:  # RETAA/RETAB
        return _ind(_RET)
    # FEAT_PAuth_LR returns.
    if w & 0xFFC0001F == 0x5500001F:  # RETAASPPC/RETABSPPC <label>
        return _ind(_RET)
    if w & 0xFFFFFBE0 == 0xD65F0BE0 and w & 0x1F != 0x1F:  # RETAASPPC/RETABSPPC Xm
        return _ind(_RET)
    if w in (0xD6FF03E0, 0xD6FF07E0):  # TEXIT: leaves a transaction like ERET
        return _ind(_ERET)
    return None


def _is_cmp_branch(w: int) -> bool:
    """FEAT_CMPBR compare and branch: CB<cc> (register, immediate), CBB<cc>, CBH<cc>."""
    top = w >> 24
    op = w & 0x0000C000
    if top == 0x74:  # CBB<cc> (10), CB<cc> Wt,Wm (00), CBH<cc> (11)
        return op != 0x4000
    if top == 0xF4:  # CB<cc> Xt, Xm
        return op == 0
    if top in (0x75, 0xF5):  # CB<cc> Rt, #imm
        return not op & 0x4000
    return False


def classify_a64(w: int, level: int, dsb_dmb: bool, wfi_wfe: bool) -> Cls:
    """Classify the A64 opcode ``w`` (``level``: see :mod:`cstrace.isa.cls`)."""
    c = _indirect(w, level)
    if c is not None:
        return c
    # Direct branches; only CBZ/CBNZ, TBZ/TBNZ and B.cond/BC.cond are "conditional".
    if w & 0x7C000000 == 0x34000000:
        if w & 0x02000000:  # TBZ/TBNZ: imm14 at [18:5]
            rel = sext((w >> 5) & 0x3FFF, 14) << 2
        else:  # CBZ/CBNZ: imm19 at [23:5]
            rel = sext((w >> 5) & 0x7FFFF, 19) << 2
        return (4, _BR, _NONE, True, False, rel, _ALL, False, 0)
    if w & 0xFF000000 == 0x54000000:  # B.cond (bit 4 = 0), BC.cond (bit 4 = 1)
        rel = sext((w >> 5) & 0x7FFFF, 19) << 2
        return (4, _BR, _NONE, True, False, rel, _ALL, False, 0)
    if w & 0x7C000000 == 0x14000000:  # B / BL imm26
        rel = sext(w & 0x03FFFFFF, 26) << 2
        link = bool(w & 0x80000000)
        return (4, _BR, _LINK if link else _NONE, False, link, rel, _ALL, False, 0)
    if _is_cmp_branch(w):  # imm9 at [13:5]
        rel = sext((w >> 5) & 0x1FF, 9) << 2
        return (4, _BR, _NONE, False, False, rel, _ALL, False, 0)
    # Barriers: DSB (opc 00), DMB (01), ISB (10); SB (11) is not a barrier here.
    if w & 0xFFFFF09F == 0xD503309F:
        opc = w & 0x60
        if opc == 0x40:
            return (4, InstrType.ISB, _NONE, False, False, None, _ALL, False, 0)
        if opc != 0x60 and dsb_dmb:
            return (4, InstrType.DSB_DMB, _NONE, False, False, None, _ALL, False, 0)
        return _PLAIN
    if wfi_wfe:
        if w & 0xFFFFFFDF == 0xD503205F or (
            level >= LEVEL_AA64 and w & 0xFFFFFFC0 == 0xD5031000
        ):  # WFE/WFI; WFET/WFIT Xt
            return (4, InstrType.WFI_WFE, _NONE, False, False, None, _ALL, False, 0)
    if level >= LEVEL_AA64 and w & 0xFFFFFFE0 == 0xD5233060:  # TSTART Xt
        return (4, InstrType.TSTART, _NONE, False, False, None, _ALL, False, 0)
    return _PLAIN
