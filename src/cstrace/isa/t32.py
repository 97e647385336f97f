"""T32 (Thumb state) instruction classification for trace decode.

Input: a T32 opcode as ``first_halfword << 16 | second_halfword`` (the second
halfword is ignored for 16-bit instructions) and the waypoint options. Output:
a :data:`~cstrace.isa.cls.Cls` tuple.

Encodings are from the Arm Architecture Reference Manual ARMv7-A/R (DDI 0406C),
chapter A6 "Thumb Instruction Set Encoding" (16-bit: B<c> T1, B T2, CBZ/CBNZ,
BX/BLX register, POP {..,PC}, ADD/MOV PC; 32-bit: B<c> T3, B T4, BL, BLX
immediate, TBB/TBH, LDR PC, LDM {..,PC}, RFE, SUBS PC,LR / ERET, BXJ, barriers,
hints, IT) and the Armv8.1-M additions of DDI 0553 (the low-overhead-loop
branches LE, LETP, WLS, WLSTP).

As in the reference decoder (OpenCSD): BX LR, MOV PC,LR, POP {..,PC},
LDR PC,[SP],#imm and LDMIA SP!,{..,PC} get the "V7 implied return" sub-type;
only B<c>, CBZ and CBNZ are conditional (IT blocks are the scanner's business);
the loop-start/loop-end branches are unconditional direct branches, and DLS,
DLSTP and the branch-future instructions (BF, BFX, BFL, BFLX, BFCSEL) are not
waypoints.
"""

from __future__ import annotations

from cstrace.elements import InstrSubtype, InstrType
from cstrace.isa.cls import Cls, sext

__all__ = ["classify_t32", "is_wide"]

_NONE = InstrSubtype.NONE
_IRET = InstrSubtype.V7_IMPLIED_RET
_LINK = InstrSubtype.BR_LINK
_ALL = 0xFFFFFFFF
_ALIGN4 = 0xFFFFFFFC


def is_wide(hw1: int) -> bool:
    """True if the halfword ``hw1`` starts a 32-bit T32 instruction (A6.1)."""
    return hw1 & 0xF800 in (0xE800, 0xF000, 0xF800)


def _bl_offset(w: int) -> int:
    """S:I1:I2:imm10:imm11:'0' of B.W (T4), BL, with I = NOT(J xor S)."""
    s = (w >> 26) & 1
    i1 = 1 ^ ((w >> 13) & 1) ^ s
    i2 = 1 ^ ((w >> 11) & 1) ^ s
    v = (s << 24) | (i1 << 23) | (i2 << 22) | (((w >> 16) & 0x3FF) << 12) | ((w & 0x7FF) << 1)
    return sext(v, 25)


def _loop_offset(w: int) -> int:
    """The unsigned loop offset imml:immh:'0' of LE, LETP, WLS, WLSTP."""
    return ((w & 0x7FE) << 1) | ((w & 0x800) >> 10)


def _direct(w: int) -> Cls | None:
    """Direct branches, with their offsets from the instruction's address."""
    if w & 0xF0000000 == 0xD0000000 and w & 0x0E000000 != 0x0E000000:
        # B<c> <label> (T1): imm8:'0'; cond 1110/1111 are UDF/SVC.
        rel = 4 + (sext((w >> 16) & 0xFF, 8) << 1)
        return (2, InstrType.BR, _NONE, True, False, rel, _ALL, False, 0)
    if w & 0xF8000000 == 0xE0000000:  # B <label> (T2): imm11:'0'
        rel = 4 + (sext((w >> 16) & 0x7FF, 11) << 1)
        return (2, InstrType.BR, _NONE, False, False, rel, _ALL, False, 0)
    if w & 0xF800D000 == 0xF0008000 and w & 0x03800000 != 0x03800000:
        # B<c>.W <label> (T3): S:J2:J1:imm6:imm11:'0'
        v = (
            (((w >> 26) & 1) << 20)
            | (((w >> 11) & 1) << 19)
            | (((w >> 13) & 1) << 18)
            | (((w >> 16) & 0x3F) << 12)
            | ((w & 0x7FF) << 1)
        )
        return (4, InstrType.BR, _NONE, True, False, 4 + sext(v, 21), _ALL, False, 0)
    if w & 0xF8009000 == 0xF0009000:  # B.W (T4) and BL (T1, bit 14 of hw2 set)
        link = bool(w & 0x4000)
        rel = 4 + _bl_offset(w)
        return (4, InstrType.BR, _LINK if link else _NONE, False, link, rel, _ALL, False, 0)
    if w & 0xF800D001 == 0xF000C000:  # BLX <label> (T2): to A32, from Align(PC, 4)
        rel = 4 + (_bl_offset(w) & ~3)
        return (4, InstrType.BR, _LINK, False, True, rel, _ALIGN4, True, 0)
    if w & 0xF5000000 == 0xB1000000:  # CBZ/CBNZ: i:imm5:'0', forward only
        rel = 4 + ((((w >> 25) & 1) << 6) | (((w >> 19) & 0x1F) << 1))
        return (2, InstrType.BR, _NONE, True, False, rel, _ALL, False, 0)
    # Armv8.1-M low-overhead loops (DDI 0553, C2.4): LE, LETP branch back ...
    if w & 0xFFFFF001 in (0xF00FC001, 0xF02FC001, 0xF01FC001):  # LE (T1, T2), LETP
        return (4, InstrType.BR, _NONE, False, False, 4 - _loop_offset(w), _ALL, False, 0)
    # ... WLS, WLSTP branch forward past the loop.
    if w & 0xFFF0F001 == 0xF040C001 or w & 0xFFC0F001 == 0xF000C001:
        return (4, InstrType.BR, _NONE, False, False, 4 + _loop_offset(w), _ALL, False, 0)
    return None


def _indirect(w: int) -> tuple[InstrSubtype, bool] | None:
    """Indirect branches: ``(subtype, is_link)``, or ``None``."""
    top = w >> 24
    if top == 0x47:  # BX Rm, BLX Rm (v8-M: BXNS, BLXNS)
        if w & 0x00800000:
            return _LINK, True
        return (_IRET if w & 0x00780000 == 0x00700000 else _NONE), False  # BX LR
    if w & 0xFFF0D000 == 0xF3C08000:  # BXJ
        return _NONE, False
    if top == 0xBD:  # POP {..,PC}
        return _IRET, False
    if w & 0xFD870000 == 0x44870000:  # ADD PC, Rm / MOV PC, Rm
        return (_IRET if w & 0xFFFF0000 == 0x46F70000 else _NONE), False  # MOV PC, LR
    if w & 0xFFF0FFE0 == 0xE8D0F000:  # TBB/TBH
        return _NONE, False
    if w & 0xFFD00000 in (0xE8100000, 0xE9900000):  # RFE (T1, T2)
        return _NONE, False
    if w & 0xFFF0D000 == 0xF3D08000:  # SUBS PC, LR, #imm (ERET)
        return _NONE, False
    if w & 0xFFF0F000 == 0xF8D0F000:  # LDR PC, [Rn, #imm12] (T3)
        return _NONE, False
    if w & 0xFF7FF000 == 0xF85FF000:  # LDR PC, <label> (T2)
        return _NONE, False
    if w & 0xFFF0F800 == 0xF850F800:  # LDR PC, [Rn, #+/-imm8] (T4)
        return (_IRET if w & 0x000F0F00 == 0x000D0B00 else _NONE), False  # [SP], #imm
    if w & 0xFFF0FFC0 == 0xF850F000:  # LDR PC, [Rn, Rm] (T2)
        return _NONE, False
    if w & 0xFE508000 == 0xE8108000:  # LDM Rn{!}, {..,PC}
        return (_IRET if w & 0x0FFF0000 == 0x08BD0000 else _NONE), False  # LDMIA SP!
    return None


def _it_count(w: int) -> int:
    """For IT{x{y{z}}}: how many instructions the mask covers (A6.7.50), else 0."""
    if w & 0xFF000000 != 0xBF000000:
        return 0
    mask = (w >> 16) & 0xF
    if not mask:
        return 0  # a hint (NOP, YIELD, WFE, WFI, SEV)
    return 4 - ((mask & -mask).bit_length() - 1)


def classify_t32(w: int, dsb_dmb: bool, wfi_wfe: bool) -> Cls:
    """Classify the T32 opcode ``w`` (``hw1 << 16 | hw2``)."""
    size = 4 if is_wide(w >> 16) else 2
    c = _direct(w)
    if c is not None:
        return c
    ind = _indirect(w)
    if ind is not None:
        return (size, InstrType.BR_INDIRECT, ind[0], False, ind[1], None, _ALL, False, 0)
    itype = InstrType.OTHER
    if w & 0xFFFFFF00 == 0xF3BF8F00:  # DSB/DMB/ISB
        op = w & 0xF0
        itype = _barrier(op == 0x60, op in (0x40, 0x50), dsb_dmb)
    elif w & 0xFFFF0F00 == 0xEE070F00:  # MCR p15 barrier forms
        low = w & 0xFF
        itype = _barrier(low == 0x95, low in (0x9A, 0xBA), dsb_dmb)
    elif wfi_wfe and (w & 0xFFFFFFFE == 0xF3AF8002 or w & 0xFFEF0000 == 0xBF200000):
        itype = InstrType.WFI_WFE  # WFE/WFI .W (T2), WFE/WFI (T1)
    return (size, itype, _NONE, False, False, None, _ALL, False, _it_count(w))


def _barrier(isb: bool, dsb_dmb: bool, dsb_dmb_waypoints: bool) -> InstrType:
    if isb:
        return InstrType.ISB
    if dsb_dmb and dsb_dmb_waypoints:
        return InstrType.DSB_DMB
    return InstrType.OTHER
