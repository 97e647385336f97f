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

BASE = 0x0
DATA = 0x40000
CTX_REG = 0x000F_F000
"""The test system's context ID register: a store there changes the context ID."""


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


def dispatch_program() -> tuple[bytes, int, int]:
    """An LCG picks functions from a table of ARM and Thumb entries, called with BLX/LDR pc."""
    a = Asm(BASE)
    _vectors(a)
    a.label("main")
    a.li(4, 0x2545)
    a.li(9, DATA + 0x100)  # scratch buffer
    a.label("loop")
    a.li(7, 0x41C64E6D & 0xFFFF)
    a.mul(8, 4, 7)
    a.add(4, 8, imm=0x39)
    a.dp("mov", 5, 0, 4, shift=13, stype=1)  # LSR #13
    a.dp("and", 5, 5, imm=7)
    a.ldr_lit(6, "table_addr")
    a.dp("add", 6, 6, 5, shift=2)  # r6 += r5 << 2
    a.ldr(12, 6)
    a.dp("tst", 0, 4, imm=0x100)
    a.blx(12, cond="eq")  # BLX r12 ...
    a.mov(LR, PC, cond="ne")  # ... or MOV lr, pc; BX r12
    a.bx(12, cond="ne")
    a.b("loop")
    a.label("table_addr")
    a.word("table")
    a.label("table")
    for i in range(8):
        a.word(f"f{i}")  # patched: Thumb entries get bit 0 set
    # f0 (ARM): sum four words with LDM, return with BX lr.
    a.label("f0")
    a.push([4, 5, 6, 7])
    a.ldm(True, 9, [4, 5, 6, 7], wb=False)
    a.add(4, 4, 5)
    a.add(6, 6, 7)
    a.add(4, 4, 6)
    a.ldm(False, 9, [4, 5, 6, 7], wb=False)
    a.pop([4, 5, 6, 7])
    a.bx(LR)
    # f2 (ARM): conditional execution.
    a.label("f2")
    a.mov(0, imm=10)
    a.label("f2_loop")
    a.dp("tst", 0, 0, imm=1)
    a.add(1, 1, imm=3, cond="eq")
    a.sub(1, 1, imm=1, cond="ne")
    a.ldr(2, 9, 16, cond="gt")
    a.str_(1, 9, 20, cond="mi")
    a.sub(0, 0, imm=1, s=True)
    a.b("f2_loop", cond="ne")
    a.bx(LR)
    # f4 (ARM): a system call.
    a.label("f4")
    a.push([0, LR])
    a.mov(0, imm=0)
    a.swi(0)
    a.pop([0, PC])  # LDM with pc: an indirect branch
    # f6 (ARM): context switch through SWI 1.
    a.label("f6")
    a.push([0, 1, LR])
    a.dp("and", 1, 4, imm=0xFF)
    a.mov(0, imm=1)
    a.swi(1)
    a.pop([0, 1, LR])
    a.mov(PC, LR)
    # f7 (ARM): an undefined instruction.
    a.label("f7")
    a.udf()
    a.bx(LR)
    # f8 (ARM): called from Thumb with BLX (immediate).
    a.label("f8")
    a.add(3, 3, imm=1)
    a.bx(LR)
    a.thumb = True
    a.align(4)
    # f1 (Thumb): byte copy loop.
    a.label("f1")
    a.t_push([4, 5])
    a.t_movi(2, 12)
    a.t_movhi(3, 9)
    a.label("f1_loop")
    a.t_ldst("ldrb", 4, 3, 0)
    a.t_ldst("strb", 4, 3, 16)
    a.t_addi(3, 1)
    a.t_subi(2, 1)
    a.t_bcond("ne", "f1_loop")
    a.t_pop([4, 5])
    a.t_bx(LR)
    # f3 (Thumb): BL to a Thumb helper, BLX to ARM f8, return through POP and BX.
    a.label("f3")
    a.t_push([4], lr=True)
    a.t_bl("t_helper")
    a.t_bl("f8", x=True)
    a.t_pop([4])
    a.t_pop([3])
    a.t_bx(3)
    a.label("t_helper")
    a.t_movhi(2, 9)
    a.t_ldst("ldrh", 1, 2, 4)
    a.t_addi(1, 7)
    a.t_ldst("strh", 1, 2, 6)
    a.t_bx(LR)
    # f5 (Thumb): SWI from Thumb state.
    a.label("f5")
    a.t_push([0], lr=True)
    a.t_movi(0, 0)
    a.t_swi(0)
    a.t_pop([0])
    a.t_pop([3])
    a.t_bx(3)
    a.align(4)
    code = bytearray(a.code())
    for i in range(8):
        addr = a.addr(f"f{i}") | (1 if i in (1, 3, 5) else 0)
        off = a.addr("table") + 4 * i
        code[off : off + 4] = addr.to_bytes(4, "little")
    return bytes(code), BASE, 0


def copy_program() -> tuple[bytes, int, int]:
    """Block copies with LDM/STM, a Thumb string scan and a computed jump (ADD pc, pc, r0)."""
    a = Asm(BASE)
    _vectors(a)
    a.label("main")
    a.li(10, DATA)
    a.mov(11, imm=0)
    a.label("loop")
    a.add(11, 11, imm=1)
    a.mov(0, 10)
    a.add(1, 10, imm=0x400)
    a.mov(2, imm=52)
    a.bl("memcpy")
    a.add(0, 10, imm=0x400)
    a.ldr_lit(12, "strlen_addr")
    a.mov(LR, PC)
    a.bx(12)
    a.dp("and", 0, 11, imm=3)
    a.bl("jump")
    a.dp("tst", 0, 11, imm=0x8)
    a.swi(0, cond="eq")
    a.b("loop")
    # memcpy(r0=src, r1=dst, r2=bytes): 16-byte blocks with LDM/STM, then bytes.
    a.label("memcpy")
    a.push([4, 5, 6, 7])
    a.label("mc_blocks")
    a.cmp(2, imm=16)
    a.b("mc_bytes", cond="lt")
    a.ldm(True, 0, [4, 5, 6, 7])
    a.ldm(False, 1, [4, 5, 6, 7])
    a.sub(2, 2, imm=16)
    a.b("mc_blocks")
    a.label("mc_bytes")
    a.sub(2, 2, imm=1, s=True)
    a.ldr(3, 0, 1, byte=True, wb=False, pre=False, cond="ge")
    a.ldr(3, 0, 0, byte=True, cond="ge")
    a.add(0, 0, imm=1, cond="ge")
    a.str_(3, 1, 0, byte=True, cond="ge")
    a.add(1, 1, imm=1, cond="ge")
    a.b("mc_bytes", cond="gt")
    a.pop([4, 5, 6, 7])
    a.mov(PC, LR)
    # jump(r0 in 0..3): ADD pc, pc, r0, LSL #2 into a table of branches.
    a.label("jump")
    a.dp("add", PC, PC, 0, shift=2)
    a.mov(0, 0)
    a.b("j0")
    a.b("j1")
    a.b("j2")
    a.b("j3")
    a.label("j0")
    a.add(11, 11, imm=2)
    a.label("j1")
    a.add(11, 11, imm=0)
    a.label("j2")
    a.ldrh(True, 3, 10, 8)
    a.ldrh(False, 3, 10, 10)
    a.label("j3")
    a.bx(LR)
    a.label("strlen_addr")
    a.word(0)
    a.thumb = True
    a.align(4)
    a.label("strlen")  # Thumb: r0 = address; counts bytes until 0 or 24
    a.t_movi(1, 0)
    a.label("sl_loop")
    a.t_ldst("ldrb", 2, 0, 0)
    a.t_cmpi(2, 0)
    a.t_bcond("eq", "sl_done")
    a.t_addi(0, 1)
    a.t_addi(1, 1)
    a.t_cmpi(1, 24)
    a.t_bcond("lt", "sl_loop")
    a.label("sl_done")
    a.t_movhi(0, 1)
    a.t_bx(LR)
    a.align(4)
    code = bytearray(a.code())
    off = a.addr("strlen_addr")
    code[off : off + 4] = (a.addr("strlen") | 1).to_bytes(4, "little")
    # Seed the data area with text so strlen finds ends.
    data = bytes((i * 7 + 1) % 40 for i in range(64))
    image = bytes(code) + bytes(DATA - len(code)) + data
    return image, BASE, 0


PROGRAMS = {"sort": sort_program, "dispatch": dispatch_program, "copy": copy_program}
