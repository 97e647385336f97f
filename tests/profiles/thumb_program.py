"""A small Thumb-2 program with IT blocks and debug info, run in an emulator and traced.

Input: a C compiler for 32-bit Arm (``arm-none-eabi-gcc``, Debian's
``gcc-arm-none-eabi``) and the unicorn emulator; output: the program (an ELF
executable with DWARF, built ``-mthumb -march=armv7-a -O2`` so that its
conditionals become ``IT`` blocks), the addresses of the instructions it
executed, and the ETMv4 trace of that run in AArch32 state (instruction set
T32, ``IS1`` addresses), in CoreSight frames under trace ID :data:`TRACE_ID`.

The emulator does not report an instruction of an IT block whose condition
fails; the trace does (it is executed, as a no-op), so :func:`run` puts those
back: after an instruction that is not a branch, the instructions up to the
next one reported are the ones that failed their condition.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cstrace.capture.encode import format_frames
from cstrace.elements import InstrType, Isa
from cstrace.isa.decode import decode
from cstrace.isa.t32 import is_wide
from cstrace.isa.types import IsaOptions
from cstrace.memory.elf import ElfImage, load_elf
from cstrace.protocols.etmv4 import encoder as enc
from tests.profiles.program import REGISTERS as A64_REGISTERS

CC = "arm-none-eabi-gcc"
TRACE_ID = 0x10
REGISTERS = dict(A64_REGISTERS)
"""The same ETMv4.0 unit as :mod:`tests.profiles.program`'s, tracing a core in AArch32."""

SOURCE = r"""
static volatile int sink;

__attribute__((noinline)) int clamp(int v, int lo, int hi) {
    if (v < lo)
        return lo;
    if (v > hi)
        return hi;
    return v;
}

__attribute__((noinline)) int sign(int v) {
    return v > 0 ? 1 : (v < 0 ? -1 : 0);
}

void _start(void) {
    int s = 0;
    for (int i = -20; i < 20; i++)
        s += clamp(i * 3, -10, 10) + sign(i);
    sink = s;
    for (;;)
        __asm__ volatile("nop");
}
"""


@dataclass
class Program:
    """The built program, its run (with the IT instructions that failed) and its trace."""

    path: Path
    elf: ElfImage
    executed: list[int]
    failed: set[int]
    """Addresses of IT-block instructions seen to fail their condition."""
    capture: Path


def compiler() -> str | None:
    """The Arm C compiler's path, or None when it is not installed."""
    return shutil.which(CC)


def _code(elf: ElfImage, address: int) -> int:
    """The T32 opcode at ``address`` as ``hw1 << 16 | hw2``."""
    for seg in elf.segments:
        off = address - seg.address
        if 0 <= off < len(seg.data):
            hw1 = int.from_bytes(seg.data[off : off + 2], "little")
            hw2 = int.from_bytes(seg.data[off + 2 : off + 4], "little")
            return hw1 << 16 | hw2
    raise AssertionError(f"no code at {address:#x}")


def _size(elf: ElfImage, address: int) -> int:
    return 4 if is_wide(_code(elf, address) >> 16) else 2


def build(folder: Path) -> Program:
    """Compile, run and trace the program in ``folder``."""
    cc = compiler()
    assert cc is not None
    src = folder / "thumb.c"
    src.write_text(SOURCE)
    exe = folder / "thumb.elf"
    subprocess.run(
        [cc, "-O2", "-g", "-mthumb", "-march=armv7-a", "-nostdlib", "-ffreestanding",
         "-o", str(exe), str(src)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    elf = load_elf(exe.read_bytes(), str(exe))
    executed, failed = run(exe, elf)
    capture = folder / "etr.bin"
    capture.write_bytes(format_frames([(TRACE_ID, etmv4_trace(elf, executed))]))
    return Program(exe, elf, executed, failed, capture)


def _start_address(exe: Path) -> int:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with exe.open("rb") as f:
        for sec in ELFFile(f).iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.get_symbol_by_name("_start") or ():
                    return int(sym["st_value"]) & ~1
    raise AssertionError("no _start")


def run(exe: Path, elf: ElfImage) -> tuple[list[int], set[int]]:
    """The instructions executed from ``_start`` until it spins, and those that failed."""
    from unicorn import UC_ARCH_ARM, UC_HOOK_CODE, UC_MODE_THUMB, Uc
    from unicorn import arm_const as A

    data = exe.read_bytes()
    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB)
    uc.mem_map(0, 0x40000)
    for load in elf.loads:
        uc.mem_write(load.vaddr, data[load.offset : load.offset + load.filesz])
    uc.mem_map(0x100000, 0x10000)
    uc.reg_write(A.UC_ARM_REG_SP, 0x10F000)
    seen: list[int] = []
    uc.hook_add(UC_HOOK_CODE, lambda _uc, address, _size, _user: seen.append(address))
    start = _start_address(exe)
    # The final loop: `nop; b.n nop` at the end of _start.
    spin = next(a for a in range(start, start + 0x100, 2) if _code(elf, a) >> 16 == 0xE7FD) - 2
    uc.emu_start(start | 1, spin)
    seen.append(spin)
    opts = IsaOptions()
    executed: list[int] = []
    failed: set[int] = set()
    for pc, nxt in itertools.pairwise(seen):
        executed.append(pc)
        size = _size(elf, pc)
        if nxt == pc + size:
            continue
        if decode(Isa.T32, pc, _code(elf, pc), opts).itype != InstrType.OTHER:
            continue  # a branch taken
        at = pc + size
        while at != nxt:  # failed their condition in an IT block
            assert at < nxt < at + 10, f"gap {at:#x}..{nxt:#x} is not an IT block"
            executed.append(at)
            failed.add(at)
            at += _size(elf, at)
    executed.append(seen[-1])
    return executed, failed


def etmv4_trace(elf: ElfImage, executed: list[int]) -> bytes:
    """The ETMv4 trace of the run, in AArch32 state at EL0: atoms, addresses after indirect
    branches taken."""
    opts = IsaOptions()
    addresses = enc.AddressEncoder()
    addresses.context_64bit = False
    out = bytearray(enc.a_sync() + enc.trace_info(0) + enc.trace_on())
    out += enc.address_context(executed[0], 1, False, el=0, sf=False, ns=True)
    addresses.history = [(executed[0], 1), *addresses.history[:2]]
    for pc, nxt in itertools.pairwise(executed):
        info = decode(Isa.T32, pc, _code(elf, pc), opts)
        if info.itype == InstrType.OTHER:
            continue
        taken = nxt != pc + _size(elf, pc)
        out += enc.atom("E" if taken else "N")
        if taken and info.itype == InstrType.BR_INDIRECT:
            out += addresses.encode(nxt, 1)
    return bytes(out)
