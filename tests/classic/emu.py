"""Run ARM/Thumb programs in the unicorn emulator and record what executed.

Input: a program image (bytes at a base address), an entry point, a step budget
and an interrupt schedule. Output: :class:`Run`: the list of
:class:`~cstrace.protocols.etmv1.encoder.Exec` records (every instruction that
reached execute, with its condition result, the next address, its data
accesses; interrupts and exceptions; context ID changes) and a ``read``
function over the final memory image.

Exceptions: SWI and undefined instructions raise unicorn interrupts, which are
turned into exception entries here (the emulator leaves that to the host);
IRQs are injected between instructions at the scheduled instruction counts
while the I bit is clear. A store to :data:`CTX_REG` is the test system's
context ID register.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from unicorn import (
    UC_ARCH_ARM,
    UC_ERR_INSN_INVALID,
    UC_HOOK_CODE,
    UC_HOOK_INTR,
    UC_HOOK_MEM_READ,
    UC_HOOK_MEM_WRITE,
    UC_MODE_ARM,
    Uc,
    UcError,
)
from unicorn import arm_const as A

from cstrace.protocols.etmv1.encoder import Exec, ExecKind
from tests.classic.programs import CTX_REG

RAM_SIZE = 0x0010_0000

_COND_EVAL = []
for _cond in range(16):
    row = []
    for nzcv in range(16):
        n, z, c, v = (nzcv >> 3) & 1, (nzcv >> 2) & 1, (nzcv >> 1) & 1, nzcv & 1
        r = [
            z,
            not z,
            c,
            not c,
            n,
            not n,
            v,
            not v,
            c and not z,
            (not c) or z,
            n == v,
            n != v,
            (not z) and n == v,
            z or n != v,
            True,
            True,
        ][_cond]
        row.append(bool(r))
    _COND_EVAL.append(row)


@dataclass
class Run:
    """What a program did."""

    execs: list[Exec]
    image: bytes
    base: int
    instructions: int = 0
    final_pc: int = 0
    final_thumb: bool = False
    notes: list[str] = field(default_factory=list)

    def read(self, address: int, size: int) -> bytes:
        off = address - self.base
        if off < 0 or off + size > len(self.image):
            return b""
        return self.image[off : off + size]


def run(
    image: bytes, base: int, entry: int, steps: int, irq_every: int = 0, cpu: int = A.UC_CPU_ARM_926
) -> Run:
    """Execute ``steps`` instructions from ``entry``; an IRQ every ``irq_every`` (0: none)."""
    uc = Uc(UC_ARCH_ARM, UC_MODE_ARM)
    uc.ctl_set_cpu_model(cpu)
    uc.mem_map(0, RAM_SIZE)
    uc.mem_write(base, image)
    execs: list[Exec] = []
    cur: list[Exec | None] = [None]
    count = [0]

    def finish(addr: int, thumb: bool) -> None:
        e = cur[0]
        if e is not None:
            e.next_pc = addr
            e.next_thumb = thumb
            cur[0] = None

    def on_code(uc: Uc, address: int, size: int, _u: object) -> None:
        cpsr = uc.reg_read(A.UC_ARM_REG_CPSR)
        thumb = bool(cpsr & 0x20)
        finish(address, thumb)
        flags = cpsr >> 28
        if thumb:
            hw = int.from_bytes(uc.mem_read(address, 2), "little")
            executed = True
            if (hw >> 12) == 0xD and ((hw >> 8) & 0xF) < 14:
                executed = _COND_EVAL[(hw >> 8) & 0xF][flags]
            if size == 4 and (hw >> 11) == 0x1E:
                # A BL/BLX pair: two instructions on ARMv4T/v5 cores.
                execs.append(Exec(ExecKind.INSTR, address, True, True, address + 2, True))
                count[0] += 1
                address += 2
        else:
            op = int.from_bytes(uc.mem_read(address, 4), "little")
            executed = _COND_EVAL[op >> 28][flags]
        e = Exec(ExecKind.INSTR, address, thumb, executed)
        e.data = ()
        execs.append(e)
        cur[0] = e
        count[0] += 1

    def on_mem(uc: Uc, access: int, address: int, size: int, value: int, _u: object) -> None:
        e = cur[0]
        if address == CTX_REG and access == 17:  # UC_MEM_WRITE
            execs.append(Exec(ExecKind.CONTEXT, value=value & 0xFFFFFFFF))
        if e is None:
            return
        if access == 17:
            data = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        else:
            data = bytes(uc.mem_read(address, size))
        e.data = (*e.data, (address, data))

    def enter(vector: int, mode: int, ret: int) -> None:
        cpsr = uc.reg_read(A.UC_ARM_REG_CPSR)
        uc.reg_write(A.UC_ARM_REG_CPSR, (cpsr & ~0x3F) | 0x80 | mode)
        uc.reg_write(A.UC_ARM_REG_SPSR, cpsr)
        uc.reg_write(A.UC_ARM_REG_LR, ret)
        uc.reg_write(A.UC_ARM_REG_PC, vector)

    def on_intr(uc: Uc, intno: int, _u: object) -> None:
        e = cur[0]
        pc = uc.reg_read(A.UC_ARM_REG_PC)
        if e is not None:
            pc = e.pc + (2 if e.thumb else 4)
        if intno == 2:  # SWI
            vec, mode = 0x08, 0x13
        else:  # undefined instruction
            vec, mode = 0x04, 0x1B
        if e is not None:
            e.vector = vec
        enter(vec, mode, pc)

    uc.hook_add(UC_HOOK_CODE, on_code)
    uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE, on_mem)
    uc.hook_add(UC_HOOK_INTR, on_intr)

    pc = entry
    while count[0] < steps:
        chunk = min(irq_every or steps, steps - count[0])
        before = count[0]
        try:
            uc.emu_start(pc, 0xFFFFFFFF, count=chunk)
        except UcError as exc:
            if exc.errno != UC_ERR_INSN_INVALID:
                raise
            # An undefined instruction: the emulator stops on it; take the exception.
            bad = uc.reg_read(A.UC_ARM_REG_PC)
            e = cur[0]
            thumb = bool(uc.reg_read(A.UC_ARM_REG_CPSR) & 0x20)
            if e is None or e.pc != bad or count[0] == before:
                raise
            e.vector = 0x04
            enter(0x04, 0x1B, bad + (2 if thumb else 4))
            pc = 0x04
            continue
        cpsr = uc.reg_read(A.UC_ARM_REG_CPSR)
        pc = uc.reg_read(A.UC_ARM_REG_PC)
        thumb = bool(cpsr & 0x20)
        if thumb:
            pc |= 1
        if irq_every and count[0] < steps and not cpsr & 0x80:
            finish(pc & ~1, thumb)
            execs.append(Exec(ExecKind.INTERRUPT, pc & ~1, thumb, vector=0x18))
            enter(0x18, 0x12, (pc & ~1) + 4)
            pc = 0x18
    cpsr = uc.reg_read(A.UC_ARM_REG_CPSR)
    final = uc.reg_read(A.UC_ARM_REG_PC)
    thumb = bool(cpsr & 0x20)
    finish(final, thumb)
    # Interrupt records: the next executed address is the vector.
    for e in execs:
        if e.kind == ExecKind.INTERRUPT:
            e.next_pc = 0x18
    return Run(execs, bytes(image), base, count[0], final, thumb)
