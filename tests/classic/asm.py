"""A tiny two-pass assembler for the ARM (ARMv5TE) and Thumb instructions the tests use.

Input: calls such as ``a.add(0, 0, imm=1)`` or ``a.b("loop")``; output: the
machine code (``Asm.code()``) and label addresses. Encodings follow the ARM
Architecture Reference Manual (ARMv5): data processing, multiply, load/store
(word, byte, halfword), load/store multiple, B/BL/BX/BLX, SWI, MSR; Thumb
formats 1-19 (ARMv4T/v5T). Branch offsets are resolved in ``code()``.
"""

from __future__ import annotations

from collections.abc import Callable

COND = {
    c: i
    for i, c in enumerate(
        ["eq", "ne", "cs", "cc", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le", "al"]
    )
}
DP = {
    n: i
    for i, n in enumerate(
        [
            "and",
            "eor",
            "sub",
            "rsb",
            "add",
            "adc",
            "sbc",
            "rsc",
            "tst",
            "teq",
            "cmp",
            "cmn",
            "orr",
            "mov",
            "bic",
            "mvn",
        ]
    )
}
TALU = {
    n: i
    for i, n in enumerate(
        [
            "and",
            "eor",
            "lsl",
            "lsr",
            "asr",
            "adc",
            "sbc",
            "ror",
            "tst",
            "neg",
            "cmp",
            "cmn",
            "orr",
            "mul",
            "bic",
            "mvn",
        ]
    )
}
PC, LR, SP = 15, 14, 13


def rot_imm(v: int) -> int:
    """The 12-bit rotated-immediate field for ``v``."""
    v &= 0xFFFFFFFF
    for r in range(16):
        x = ((v << (2 * r)) | (v >> (32 - 2 * r))) & 0xFFFFFFFF if r else v
        if x < 256:
            return (r << 8) | x
    raise ValueError(f"{v:#x} is not an ARM immediate")


class Asm:
    """Assemble ARM and Thumb code at ``base``; ``thumb`` selects the current state."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.items: list[tuple[int, int, Callable[[int], int] | int]] = []  # (addr, size, word|fn)
        self.labels: dict[str, int] = {}
        self.pc = base
        self.thumb = False

    # -- layout -------------------------------------------------------------
    def label(self, name: str) -> None:
        self.labels[name] = self.pc

    def align(self, n: int = 4) -> None:
        while self.pc % n:
            self.emit16(0x46C0 if self.thumb else 0)

    def org(self, addr: int) -> None:
        assert addr >= self.pc
        while self.pc < addr:
            self.items.append((self.pc, 1, 0))
            self.pc += 1

    def emit32(self, w: int | Callable[[int], int]) -> None:
        self.items.append((self.pc, 4, w))
        self.pc += 4

    def emit16(self, w: int | Callable[[int], int]) -> None:
        self.items.append((self.pc, 2, w))
        self.pc += 2

    def word(self, v: int | str) -> None:
        if isinstance(v, str):
            name = v
            self.emit32(lambda _a: self.labels[name])
        else:
            self.emit32(v & 0xFFFFFFFF)

    def addr(self, name: str) -> int:
        return self.labels[name]

    def code(self) -> bytes:
        out = bytearray()
        for a, size, w in self.items:
            v = w(a) if callable(w) else w
            out += (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        return bytes(out)

    # -- ARM ----------------------------------------------------------------
    def dp(
        self,
        op: str,
        rd: int,
        rn: int,
        rm: int | None = None,
        imm: int | None = None,
        s: bool = False,
        cond: str = "al",
        shift: int = 0,
        stype: int = 0,
    ) -> None:
        o = DP[op]
        if o in (8, 9, 10, 11):
            s = True
        w = (COND[cond] << 28) | (o << 21) | (int(s) << 20) | (rn << 16) | (rd << 12)
        if imm is not None:
            w |= (1 << 25) | rot_imm(imm)
        else:
            assert rm is not None
            w |= rm | (shift << 7) | (stype << 5)
        self.emit32(w)

    def mov(self, rd: int, rm: int | None = None, imm: int | None = None, **kw: object) -> None:
        self.dp("mov", rd, 0, rm, imm, **kw)  # type: ignore[arg-type]

    def li(self, rd: int, value: int) -> None:
        """Load a 32-bit constant with MOV and ORRs of its bytes."""
        parts = [value & (0xFF << s) for s in (0, 8, 16, 24) if value & (0xFF << s)] or [0]
        self.mov(rd, imm=parts[0])
        for p in parts[1:]:
            self.dp("orr", rd, rd, imm=p)

    def add(
        self, rd: int, rn: int, rm: int | None = None, imm: int | None = None, **kw: object
    ) -> None:
        self.dp("add", rd, rn, rm, imm, **kw)  # type: ignore[arg-type]

    def sub(
        self, rd: int, rn: int, rm: int | None = None, imm: int | None = None, **kw: object
    ) -> None:
        self.dp("sub", rd, rn, rm, imm, **kw)  # type: ignore[arg-type]

    def cmp(self, rn: int, rm: int | None = None, imm: int | None = None, cond: str = "al") -> None:
        self.dp("cmp", 0, rn, rm, imm, cond=cond)

    def mul(self, rd: int, rm: int, rs: int, cond: str = "al") -> None:
        self.emit32((COND[cond] << 28) | (rd << 16) | (rs << 8) | 0x90 | rm)

    def ldst(
        self,
        load: bool,
        rd: int,
        rn: int,
        off: int = 0,
        byte: bool = False,
        cond: str = "al",
        wb: bool = False,
        pre: bool = True,
    ) -> None:
        u = off >= 0
        w = (COND[cond] << 28) | (1 << 26) | (int(pre) << 24) | (int(u) << 23) | (int(byte) << 22)
        w |= (int(wb) << 21) | (int(load) << 20) | (rn << 16) | (rd << 12) | abs(off)
        self.emit32(w)

    def ldr(self, rd: int, rn: int, off: int = 0, **kw: object) -> None:
        self.ldst(True, rd, rn, off, **kw)  # type: ignore[arg-type]

    def str_(self, rd: int, rn: int, off: int = 0, **kw: object) -> None:
        self.ldst(False, rd, rn, off, **kw)  # type: ignore[arg-type]

    def ldrh(self, load: bool, rd: int, rn: int, off: int = 0, cond: str = "al") -> None:
        u = off >= 0
        o = abs(off)
        w = (COND[cond] << 28) | (1 << 24) | (int(u) << 23) | (1 << 22) | (int(load) << 20)
        w |= (rn << 16) | (rd << 12) | ((o >> 4) << 8) | 0xB0 | (o & 0xF)
        self.emit32(w)

    def ldm(
        self,
        load: bool,
        rn: int,
        regs: list[int],
        mode: str = "ia",
        wb: bool = True,
        cond: str = "al",
        s: bool = False,
    ) -> None:
        p, u = {"ia": (0, 1), "ib": (1, 1), "da": (0, 0), "db": (1, 0)}[mode]
        w = (COND[cond] << 28) | (4 << 25) | (p << 24) | (u << 23) | (int(s) << 22)
        w |= (int(wb) << 21) | (int(load) << 20) | (rn << 16)
        for r in regs:
            w |= 1 << r
        self.emit32(w)

    def push(self, regs: list[int]) -> None:
        self.ldm(False, SP, regs, "db")

    def pop(self, regs: list[int]) -> None:
        self.ldm(True, SP, regs, "ia")

    def b(self, target: str, cond: str = "al", link: bool = False) -> None:
        c = COND[cond]
        self.emit32(
            lambda a: (
                (c << 28)
                | (0b101 << 25)
                | (int(link) << 24)
                | (((self.labels[target] - a - 8) >> 2) & 0xFFFFFF)
            )
        )

    def bl(self, target: str, cond: str = "al") -> None:
        self.b(target, cond, True)

    def blx_imm(self, target: str) -> None:
        def enc(a: int) -> int:
            off = self.labels[target] - a - 8
            return 0xFA000000 | (((off >> 1) & 1) << 24) | ((off >> 2) & 0xFFFFFF)

        self.emit32(enc)

    def bx(self, rm: int, cond: str = "al") -> None:
        self.emit32((COND[cond] << 28) | 0x012FFF10 | rm)

    def blx(self, rm: int, cond: str = "al") -> None:
        self.emit32((COND[cond] << 28) | 0x012FFF30 | rm)

    def swi(self, n: int = 0, cond: str = "al") -> None:
        self.emit32((COND[cond] << 28) | 0x0F000000 | n)

    def msr_c(self, imm: int) -> None:
        self.emit32(0xE321F000 | rot_imm(imm))

    def udf(self) -> None:
        self.emit32(0xE7F000F0)

    def ldr_lit(self, rd: int, label: str) -> None:
        """LDR rd, [pc, #label - (pc + 8)] (the label must hold a word)."""

        def enc(a: int) -> int:
            off = self.labels[label] - a - 8
            return 0xE51F0000 | (rd << 12) | (-off) if off < 0 else 0xE59F0000 | (rd << 12) | off

        self.emit32(enc)

    # -- Thumb --------------------------------------------------------------
    def t_movi(self, rd: int, imm: int) -> None:
        self.emit16(0x2000 | (rd << 8) | imm)

    def t_cmpi(self, rn: int, imm: int) -> None:
        self.emit16(0x2800 | (rn << 8) | imm)

    def t_addi(self, rd: int, imm: int) -> None:
        self.emit16(0x3000 | (rd << 8) | imm)

    def t_subi(self, rd: int, imm: int) -> None:
        self.emit16(0x3800 | (rd << 8) | imm)

    def t_add3(self, rd: int, rn: int, rm: int) -> None:
        self.emit16(0x1800 | (rm << 6) | (rn << 3) | rd)

    def t_sub3(self, rd: int, rn: int, rm: int) -> None:
        self.emit16(0x1A00 | (rm << 6) | (rn << 3) | rd)

    def t_alu(self, op: str, rd: int, rm: int) -> None:
        self.emit16(0x4000 | (TALU[op] << 6) | (rm << 3) | rd)

    def t_lsli(self, rd: int, rm: int, n: int) -> None:
        self.emit16((n << 6) | (rm << 3) | rd)

    def t_lsri(self, rd: int, rm: int, n: int) -> None:
        self.emit16(0x0800 | (n << 6) | (rm << 3) | rd)

    def t_movhi(self, rd: int, rm: int) -> None:
        self.emit16(0x4600 | ((rd >> 3) << 7) | (rm << 3) | (rd & 7))

    def t_bx(self, rm: int) -> None:
        self.emit16(0x4700 | (rm << 3))

    def t_blx(self, rm: int) -> None:
        self.emit16(0x4780 | (rm << 3))

    def t_ldst(self, kind: str, rd: int, rn: int, off: int = 0) -> None:
        base, scale = {
            "str": (0x6000, 4),
            "ldr": (0x6800, 4),
            "strb": (0x7000, 1),
            "ldrb": (0x7800, 1),
            "strh": (0x8000, 2),
            "ldrh": (0x8800, 2),
        }[kind]
        self.emit16(base | ((off // scale) << 6) | (rn << 3) | rd)

    def t_ldr_lit(self, rd: int, label: str) -> None:
        self.emit16(lambda a: 0x4800 | (rd << 8) | ((self.labels[label] - ((a + 4) & ~3)) >> 2))

    def t_push(self, regs: list[int], lr: bool = False) -> None:
        self.emit16(0xB400 | (int(lr) << 8) | sum(1 << r for r in regs))

    def t_pop(self, regs: list[int], pc: bool = False) -> None:
        self.emit16(0xBC00 | (int(pc) << 8) | sum(1 << r for r in regs))

    def t_ldmia(self, load: bool, rn: int, regs: list[int]) -> None:
        self.emit16((0xC800 if load else 0xC000) | (rn << 8) | sum(1 << r for r in regs))

    def t_bcond(self, cond: str, target: str) -> None:
        c = COND[cond]
        self.emit16(lambda a: 0xD000 | (c << 8) | (((self.labels[target] - a - 4) >> 1) & 0xFF))

    def t_b(self, target: str) -> None:
        self.emit16(lambda a: 0xE000 | (((self.labels[target] - a - 4) >> 1) & 0x7FF))

    def t_bl(self, target: str, x: bool = False) -> None:
        a0 = self.pc

        def off() -> int:
            if x:  # BLX: the result is word-aligned; keep the low offset bit clear
                return self.labels[target] - ((a0 + 4) & ~3)
            return self.labels[target] - (a0 + 4)

        self.emit16(lambda _a: 0xF000 | ((off() >> 12) & 0x7FF))
        self.emit16(lambda _a: (0xE800 if x else 0xF800) | ((off() >> 1) & 0x7FF))

    def t_swi(self, n: int = 0) -> None:
        self.emit16(0xDF00 | n)
