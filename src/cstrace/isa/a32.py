"""A32 (ARM state) instruction classification for trace decode.

Input: a 32-bit A32 opcode and the waypoint options. Output: a
:data:`~cstrace.isa.cls.Cls` tuple.

Encodings are from the Arm Architecture Reference Manual ARMv7-A/R (DDI 0406C),
chapter A5 "ARM Instruction Set Encoding": branch and branch with link
(A5.5, B/BL/BLX immediate), miscellaneous instructions (A5.2.12: BX, BXJ, BLX
register), load/store word with Rt = PC (A5.3), load/store multiple with PC in
the register list (A5.5), data-processing with Rd = PC (A5.2), RFE, barriers
(DSB/DMB/ISB and their CP15 forms, A5.4 / B4.2) and the WFI/WFE hints.

As in the reference decoder (OpenCSD; PFT IHI0035B table 2-3 lists the same
branch classes), BX LR, MOV PC,LR, LDR PC,[SP],#imm and LDMIA SP!,{..,PC}
(POP) get the "V7 implied return" sub-type, and every instruction whose
condition field is not AL (or the unconditional space) is conditional.
"""

from __future__ import annotations

from cstrace.elements import InstrSubtype, InstrType
from cstrace.isa.cls import Cls, sext

__all__ = ["classify_a32"]

_NONE = InstrSubtype.NONE
_IRET = InstrSubtype.V7_IMPLIED_RET
_LINK = InstrSubtype.BR_LINK
_ALL = 0xFFFFFFFF


def _indirect(w: int) -> InstrSubtype | None:
    """The sub-type of an A32 indirect branch, or ``None`` if ``w`` is not one."""
    if w & 0xF0000000 == 0xF0000000:  # unconditional space: only RFE
        return _NONE if w & 0xFE500000 == 0xF8100000 else None
    if w & 0x0FF000D0 == 0x01200010:  # BX Rm / BLX Rm
        return _IRET if w & 0xFF == 0x1E else _NONE  # BX LR
    if w & 0x0FF000F0 == 0x01200020:  # BXJ (behaves as BX)
        return _NONE
    if w & 0x0E108000 == 0x08108000:  # LDM{type} Rn{!}, {..,PC}
        return _IRET if w & 0x0FFFA000 == 0x08BD8000 else _NONE  # LDMIA SP!, {..,PC}
    if w & 0x0E50F000 == 0x0410F000:  # LDR PC, [Rn, #imm] (incl. POP {PC})
        return _IRET if w & 0x01FF0000 == 0x009D0000 else _NONE  # LDR PC, [SP], #imm
    if w & 0x0E50F010 == 0x0610F000:  # LDR PC, [Rn, Rm]
        return _NONE
    if w & 0x0FE0F000 == 0x01A0F000:  # MOV PC, Rm (register form)
        return _IRET if w & 0x00100FFF == 0x00E else _NONE  # MOV PC, LR (no S, no shift)
    if w & 0x0F900080 == 0x01000000:  # miscellaneous instructions in the DP space
        return None
    if w & 0x0F9000F0 == 0x01800090:  # extra load/store
        return None
    if w & 0x0FB0F000 == 0x0320F000:  # MSR (immediate) and hints
        return None
    if w & 0x0E00F000 == 0x0200F000:  # data-processing (immediate) Rd = PC
        return None if w & 0x0F90F000 == 0x0310F000 else _NONE  # TST/TEQ/CMP/CMN write no PC
    if w & 0x0E00F000 == 0x0000F000:  # data-processing (register) Rd = PC
        return _NONE
    return None


def _is_link(w: int) -> bool:
    """BL, BLX (immediate) and BLX (register)."""
    if w & 0xF0000000 == 0xF0000000:
        return w & 0xFE000000 == 0xFA000000
    return w & 0x0F000000 == 0x0B000000 or w & 0x0FF000F0 == 0x01200030


def classify_a32(w: int, dsb_dmb: bool, wfi_wfe: bool) -> Cls:
    """Classify the A32 opcode ``w``."""
    cond = w & 0xE0000000 != 0xE0000000
    sub = _indirect(w)
    if sub is not None:
        link = _is_link(w)
        return (4, InstrType.BR_INDIRECT, _LINK if link else sub, cond, link, None, _ALL, False, 0)
    nv = w & 0xF0000000 == 0xF0000000
    if (nv and w & 0xFE000000 == 0xFA000000) or (not nv and w & 0x0E000000 == 0x0A000000):
        # B/BL <label>: PC + 8 + imm24:'00'; BLX <label>: also + H:'0', to T32.
        rel = 8 + (sext(w & 0x00FFFFFF, 24) << 2)
        if nv:
            rel += (w >> 23) & 2
        link = _is_link(w)
        return (4, InstrType.BR, _LINK if link else _NONE, cond, link, rel, _ALL, nv, 0)
    itype = InstrType.OTHER
    if w & 0xFFF00000 == 0xF5700000:  # DSB/DMB/ISB (v7 encodings)
        op = w & 0xF0
        itype = _barrier(op == 0x60, op in (0x40, 0x50), dsb_dmb)
    elif w & 0x0FFF0F00 == 0x0E070F00:  # MCR p15, 0, Rt, c7, c10, 4/5 or c7, c5, 4
        low = w & 0xFF
        itype = _barrier(low == 0x95, low in (0x9A, 0xBA), dsb_dmb)
    elif wfi_wfe and w & 0xF0000000 != 0xF0000000 and w & 0x0FFFFFFE == 0x0320F002:
        itype = InstrType.WFI_WFE  # WFE (..2), WFI (..3)
    return (4, itype, _NONE, cond, False, None, _ALL, False, 0)


def _barrier(isb: bool, dsb_dmb: bool, dsb_dmb_waypoints: bool) -> InstrType:
    if isb:
        return InstrType.ISB
    if dsb_dmb and dsb_dmb_waypoints:
        return InstrType.DSB_DMB
    return InstrType.OTHER
