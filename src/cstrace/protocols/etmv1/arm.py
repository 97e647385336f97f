"""Instruction facts the classic trace decoders need beyond :mod:`cstrace.isa`.

Input: ARM (A32) opcodes and Thumb halfwords of ARMv4T/ARMv5TE cores (ARM7,
ARM9, ARM10, XScale). Output: per instruction a :class:`Step` (size, type for
the instruction ranges, direct-branch target and the state after it, and the
number of data bytes a load/store moves, which tells how many data value
packets an ETMv1 ``ID`` PIPESTAT brings).

Branch classification comes from :func:`cstrace.isa.decode`. What is added here:

- Thumb ``BL``/``BLX`` are two 16-bit instructions on these cores, each with
  its own pipeline status: the prefix (``0xF000``-``0xF7FF``) only sets LR, the
  suffix (``0xF800``, or ``0xE800`` for BLX) branches to an address made of both
  halves (ARM ARM v5, "Thumb BL, BLX (1)").
- Data transfer sizes (ARM ARM v5, "Load and Store instructions"; IHI 0014
  table 5.2: 1, 2 or 4 data packets, 4 per register of a load/store multiple).
"""

from __future__ import annotations

from cstrace.bits import sign_extend
from cstrace.elements import InstrSubtype, InstrType, Isa
from cstrace.isa import IsaOptions, decode

__all__ = ["OPTS", "Step", "arm_transfer_bytes", "step_arm", "step_thumb", "thumb_transfer_bytes"]

OPTS = IsaOptions()


class Step:
    """One classic instruction: what a decoder needs to follow it."""

    __slots__ = ("cond", "is_branch", "itype", "size", "subtype", "target", "target_thumb", "xfer")

    def __init__(
        self,
        size: int,
        itype: InstrType,
        subtype: InstrSubtype,
        cond: bool,
        target: int | None,
        target_thumb: bool,
        xfer: int,
    ) -> None:
        self.size = size
        self.itype = itype
        self.subtype = subtype
        self.cond = cond
        self.target = target
        """Destination of a direct branch, else None."""
        self.target_thumb = target_thumb
        self.xfer = xfer
        """Data bytes moved by a load/store (0 when none)."""
        self.is_branch = itype != InstrType.OTHER


def _popcount(v: int) -> int:
    return bin(v).count("1")


def arm_transfer_bytes(op: int, cprt: bool = False) -> int:
    """Data bytes an ARM load/store moves (0 for other instructions)."""
    if (op >> 28) == 0xF:
        return 0
    top = (op >> 25) & 7
    if top in (2, 3):  # LDR/STR word or byte, immediate or register offset
        if top == 3 and op & 0x10:
            return 0  # media / undefined space
        return 1 if op & (1 << 22) else 4
    if top == 4:  # LDM/STM
        return 4 * _popcount(op & 0xFFFF)
    if top == 0 and (op & 0x90) == 0x90:
        sh = (op >> 5) & 3
        if sh == 0:
            if (op & 0x0FB00FF0) == 0x01000090:  # SWP/SWPB
                return 1 if op & (1 << 22) else 4
            return 0  # multiplies
        load = bool(op & (1 << 20))
        if sh == 1:
            return 2
        if sh == 2:
            return 1 if load else 8
        return 2 if load else 8
    if cprt and top == 7 and (op & 0x0F000010) == 0x0E000010:  # MRC/MCR
        return 4
    return 0


def thumb_transfer_bytes(hw: int) -> int:
    """Data bytes a Thumb (ARMv4T/v5TE) load/store moves (0 for other instructions)."""
    top5 = hw >> 11
    if (hw >> 12) == 0x5:  # register offset
        return (4, 2, 1, 1, 4, 2, 1, 2)[(hw >> 9) & 7]
    if top5 in (0x0C, 0x0D, 0x12, 0x13, 0x09):  # STR/LDR imm, SP-relative, LDR literal
        return 4
    if top5 in (0x0E, 0x0F):
        return 1
    if top5 in (0x10, 0x11):
        return 2
    if (hw & 0xF600) == 0xB400:  # PUSH / POP
        return 4 * (_popcount(hw & 0xFF) + ((hw >> 8) & 1))
    if (hw >> 12) == 0xC:  # LDMIA / STMIA
        return 4 * _popcount(hw & 0xFF)
    return 0


def step_arm(address: int, op: int, cprt: bool = False) -> Step:
    """The :class:`Step` of the ARM instruction ``op`` at ``address``."""
    info = decode(Isa.A32, address, op, OPTS)
    return Step(
        4,
        info.itype,
        info.subtype,
        info.is_cond,
        info.target,
        info.next_isa == Isa.T32,
        arm_transfer_bytes(op, cprt),
    )


def step_thumb(address: int, hw: int, prev_hw: int | None) -> Step:
    """The :class:`Step` of the Thumb halfword ``hw`` at ``address``.

    ``prev_hw`` is the halfword at ``address - 2``, needed for the second half of
    a ``BL``/``BLX`` pair.
    """
    kind = hw >> 11
    if kind == 0x1E:  # BL/BLX prefix: sets LR only
        return Step(2, InstrType.OTHER, InstrSubtype.NONE, False, None, True, 0)
    if kind in (0x1F, 0x1D):  # BL / BLX suffix
        if prev_hw is None or (prev_hw >> 11) != 0x1E:
            # LR was set some other way: the target is not known from the code.
            return Step(2, InstrType.BR_INDIRECT, InstrSubtype.BR_LINK, False, None, True, 0)
        hi = sign_extend(prev_hw & 0x7FF, 11) << 12
        target = (address - 2 + 4 + hi + ((hw & 0x7FF) << 1)) & 0xFFFFFFFF
        thumb = kind == 0x1F
        if not thumb:
            target &= ~3
        return Step(2, InstrType.BR, InstrSubtype.BR_LINK, False, target, thumb, 0)
    info = decode(Isa.T32, address, hw << 16, OPTS)
    return Step(
        2,
        info.itype,
        info.subtype,
        info.is_cond,
        info.target,
        info.next_isa == Isa.T32,
        thumb_transfer_bytes(hw),
    )
