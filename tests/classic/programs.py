"""Test programs for the classic-trace ground truth: ARM and Thumb code, written with :mod:`asm`.

Each builder returns ``(image, base, entry)``. Every program runs forever (it
loops over its work), so a run is cut at a step budget; together they exercise
loops, calls and returns, indirect branches (BX, BLX, LDR pc, MOV pc, POP pc,
LDM with pc), conditional execution (instructions that fail their condition),
ARM/Thumb interworking, SWI and undefined-instruction exceptions (plus the IRQs
the harness injects), byte/halfword/word/multiple data accesses and context ID
changes (stores to the test system's context register).
"""

from __future__ import annotations

from tests.classic.asm import LR, PC, SP, Asm
from tests.classic.emu import CTX_REG

BASE = 0x0
DATA = 0x40000


def _vectors(a: Asm) -> None:
    """Exception vectors at 0, the handlers, and the stack set-up; falls into ``main``."""
    a.b("reset")  # 0x00
    a.b("undef_handler")  # 0x04
    a.ldr_lit(PC, "swi_addr")  # 0x08: an indirect branch
    a.b("reset")  # 0x0c
    a.b("reset")  # 0x10
    a.b("reset")  # 0x14
    a.b("irq_handler")  # 0x18
    a.b("reset")  # 0x1c
    a.label("swi_addr")
    a.word("swi_handler")
    a.label("ctx_addr")
    a.word(CTX_REG)
    a.label("reset")
    for mode, sp in ((0x12 | 0xC0, 0x7F000), (0x13 | 0xC0, 0x7E000), (0x1B | 0xC0, 0x7D000)):
        a.msr_c(mode)
        a.mov(SP, imm=sp)
    a.msr_c(0x1F)  # system mode, IRQs enabled
    a.mov(SP, imm=0x7C000)
    a.b("main")
    # IRQ: save, count, touch a few words, return to the interrupted instruction.
    a.label("irq_handler")
    a.push([0, 1, 2, 3, 12, LR])
    a.li(0, DATA + 0x800)
    a.ldm(True, 0, [1, 2], wb=False)
    a.add(1, 1, imm=1)
    a.dp("eor", 2, 2, 1)
    a.ldm(False, 0, [1, 2], wb=False)
    a.pop([0, 1, 2, 3, 12, LR])
    a.sub(PC, LR, imm=4, s=True)
    # SWI: r0 = service number; 1 = set the context ID from r1.
    a.label("swi_handler")
    a.push([2, 3, LR])
    a.cmp(0, imm=1)
    a.ldr_lit(2, "ctx_addr")
    a.str_(1, 2, 0, cond="eq")
    a.li(3, DATA + 0x900)
    a.ldr(2, 3)
    a.add(2, 2, 0)
    a.str_(2, 3)
    a.pop([2, 3, LR])
    a.mov(PC, LR, s=True)  # MOVS pc, lr
    # Undefined instruction: count it and skip it.
    a.label("undef_handler")
    a.push([0, 1])
    a.li(0, DATA + 0x904)
    a.ldr(1, 0)
    a.add(1, 1, imm=1)
    a.str_(1, 0)
    a.pop([0, 1])
    a.mov(PC, LR, s=True)


def sort_program() -> tuple[bytes, int, int]:
    """ARM main fills an array from an LCG and calls a Thumb insertion sort, then checksums."""
    a = Asm(BASE)
    _vectors(a)
    a.label("main")
    a.li(4, 0x1234)  # LCG state
    a.label("outer")
    a.mov(5, imm=DATA)  # array
    a.mov(6, imm=0)
    a.label("fill")
    a.mov(7, imm=0x41)
    a.dp("orr", 7, 7, imm=0x4E00)
    a.mul(8, 4, 7)
    a.add(4, 8, imm=0x39)
    a.add(4, 4, imm=0x3000)
    a.dp("mov", 8, 0, 4, shift=16, stype=1)  # LSR #16
    a.ldrh(False, 8, 5, 0)
    a.add(5, 5, imm=2)
    a.add(6, 6, imm=1)
    a.cmp(6, imm=24)
    a.b("fill", cond="lt")
    a.mov(0, imm=DATA)
    a.mov(1, imm=24)
    a.ldr_lit(12, "sort_addr")
    a.blx(12)  # to Thumb
    a.mov(0, imm=DATA)
    a.mov(1, imm=24)
    a.bl("checksum")
    a.swi(0)
    a.cmp(0, imm=0x100, cond="al")
    a.udf()
    a.mov(1, 0)
    a.mov(0, imm=1)
    a.swi(1)  # context ID := checksum
    a.b("outer")
    # checksum(r0=array, r1=count) in ARM: bytes summed with conditional adds.
    a.label("checksum")
    a.push([4, 5, LR])
    a.mov(2, imm=0)
    a.label("ck_loop")
    a.ldr(3, 0, 0, byte=True)
    a.ldr(4, 0, 1, byte=True)
    a.dp("tst", 0, 3, imm=1)
    a.add(2, 2, 3, cond="ne")
    a.add(2, 2, 4, cond="eq")
    a.add(0, 0, imm=2)
    a.sub(1, 1, imm=1, s=True)
    a.b("ck_loop", cond="ne")
    a.mov(0, 2)
    a.pop([4, 5, PC])
    a.label("sort_addr")
    a.word(0)  # patched below with the Thumb address | 1
    # Thumb insertion sort (r0 = array of halfwords, r1 = n), calls a Thumb helper.
    a.align(4)
    a.thumb = True
    a.label("sort")
    a.t_push([4, 5, 6, 7], lr=True)
    a.t_movi(4, 1)  # i
    a.label("s_outer")
    a.t_alu("cmp", 4, 1)
    a.t_bcond("ge", "s_done")
    a.t_lsli(5, 4, 1)
    a.t_add3(5, 5, 0)
    a.t_ldst("ldrh", 6, 5, 0)  # key
    a.label("s_inner")
    a.t_alu("cmp", 5, 0)
    a.t_bcond("eq", "s_put")
    a.t_subi(5, 2)
    a.t_ldst("ldrh", 7, 5, 0)
    a.t_alu("cmp", 7, 6)
    a.t_bcond("ls", "s_put1")
    a.t_ldst("strh", 7, 5, 2)
    a.t_b("s_inner")
    a.label("s_put1")
    a.t_addi(5, 2)
    a.label("s_put")
    a.t_ldst("strh", 6, 5, 0)
    a.t_bl("bump")
    a.t_addi(4, 1)
    a.t_b("s_outer")
    a.label("s_done")
    a.t_pop([4, 5, 6, 7])
    a.t_pop([3])
    a.t_bx(3)
    a.label("bump")  # counts calls in a word of memory
    a.t_push([0, 1])
    a.t_ldr_lit(0, "cnt_addr")
    a.t_ldst("ldr", 1, 0, 0)
    a.t_addi(1, 1)
    a.t_ldst("str", 1, 0, 0)
    a.t_pop([0, 1])
    a.t_movhi(PC, LR)  # MOV pc, lr (stays in Thumb)
    a.align(4)
    a.label("cnt_addr")
    a.word(DATA + 0x908)
    code = bytearray(a.code())
    off = a.addr("sort_addr")
    code[off : off + 4] = (a.addr("sort") | 1).to_bytes(4, "little")
    return bytes(code), BASE, 0
