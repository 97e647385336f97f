"""Test captures of the kinds real boards give, made with the project's encoders.

Input: a C compiler for 32-bit Arm (``arm-none-eabi-gcc``) or AArch64
(``aarch64-linux-gnu-gcc``) and the unicorn emulator; output: a program (an
ELF with its ``.ARM.attributes``), the instructions it executed, and the raw
capture a trace unit of that kind of board would have written of the run, with
the registers that trace unit had (the *true configuration*):

- :func:`r5_etmv3`: a Cortex-R5 (Armv7-R, A32 code with a vector table and an
  IRQ handler) traced by an ETMv3.3 (ETM-R5: no alternative branch encoding,
  no context ID, no timestamps), with or without cycle-accurate tracing, through
  an ETB (CoreSight frames; the buffer wrapped, so the capture begins inside a
  packet);
- :func:`m33_etmv4`: a Cortex-M33 (Armv8-M Mainline, T32 code) traced by an
  ETMv4.2 with M-profile exceptions (SysTick, an interrupt, and a final debug
  halt), a single-source capture as a DMA buffer holds it: a few hundred bytes
  of trace, then zeros;
- :func:`server_etmv4`: an AArch64 user-space program run as two processes
  (two load addresses, two context IDs, two VMIDs) traced by an ETMv4.0 with an
  8-bit VMID, or by an ETMv4.1 with a 32-bit VMID (ETMv4.0 has no VMID wider
  than 8 bits: TRCIDR2.VMIDSIZE, IHI0064), through an ETR;
- :func:`m3_swo`: a Cortex-M3 (Armv7-M) traced by an ETMv3.4 and an ITM/DWT
  stream with no synchronisation packet (stimulus strings, exception trace, PC
  samples, local timestamps), both through the TPIU formatter with FSYNC
  padding, as an SWO capture of a Cortex-M3 is.

ETMv3 traces every instruction (an atom each, N when its condition fails),
with a branch address packet after each indirect branch taken and for each
exception; ETMv4 traces branches (an atom each) with an address packet after
each indirect branch taken, exception packets with the preferred return
address, and context packets when the process changes.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cstrace.capture.encode import format_frames
from cstrace.elements import InstrType, Isa
from cstrace.isa.decode import decode
from cstrace.isa.t32 import is_wide
from cstrace.isa.types import ArchVersion, IsaOptions, Profile
from cstrace.memory.elf import ElfImage, load_elf
from cstrace.protocols.etmv3 import encoder as e3
from cstrace.protocols.etmv4 import encoder as e4

ARM_CC = "arm-none-eabi-gcc"
A64_CC = "aarch64-linux-gnu-gcc"


@dataclass
class BoardCapture:
    """A capture, the program it traced, and the true configuration of its trace source."""

    capture: Path
    elf: Path
    load: int
    """The address given with ``--image ELF@ADDRESS`` (the first loadable segment's)."""
    trace_id: int
    protocol: str
    """The source type (``ETM3.3``, ``ETM4``...), as ``--protocol`` takes it."""
    core: str
    registers: dict[str, int]
    images: list[str] = field(default_factory=list)
    """Every ``--image`` argument the capture needs (more than one for several processes)."""
    single_source: bool = False
    items: dict[str, int] = field(default_factory=dict)
    """For other kinds of trace in the capture (ITM): what the run put in it, per kind."""
    itm_items: list[ItmItem] = field(default_factory=list)
    """The ITM items in the capture, in order (as the run emitted them, before damage)."""

    def true_options(self) -> list[str]:
        """The command-line options that describe the source exactly."""
        tid = f"{self.trace_id:#x}"
        opts = [f"--protocol={tid}={self.protocol}", f"--core={tid}={self.core}"]
        opts += [f"--reg={tid}:{k}={v:#x}" for k, v in self.registers.items()]
        if self.single_source:
            opts.append(f"--trace-id={tid}")
        return opts

    def image_options(self) -> list[str]:
        """The ``--image`` options (the bytes and the ELF are all a user has)."""
        return [f"--image={i}" for i in self.images or [f"{self.elf}@{self.load:#x}"]]


def compilers_or_skip(*names: str) -> None:
    """Skip the calling test unless the compilers and unicorn are installed."""
    import pytest

    for name in names:
        if shutil.which(name) is None:
            pytest.skip(f"{name} not installed")
    pytest.importorskip("unicorn")


def _compile(cc: str, flags: list[str], files: dict[str, str], folder: Path, out: str) -> Path:
    for name, text in files.items():
        (folder / name).write_text(text)
    exe = folder / out
    subprocess.run(
        [cc, *flags, "-o", str(exe), *files],
        check=True,
        capture_output=True,
        cwd=folder,
    )
    return exe


def _symbols(exe: Path) -> dict[str, int]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    out: dict[str, int] = {}
    with exe.open("rb") as f:
        for sec in ELFFile(f).iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.iter_symbols():
                    if sym.name and sym["st_info"]["type"] in ("STT_FUNC", "STT_NOTYPE"):
                        out.setdefault(sym.name, int(sym["st_value"]))
    return out


class _Code:
    """Reads instructions of an ELF's loadable segments by address."""

    def __init__(self, exe: Path, elf: ElfImage, base: int = 0) -> None:
        self.data = exe.read_bytes()
        self.elf = elf
        self.base = base

    def read(self, address: int, size: int) -> bytes:
        link = address - self.base
        for part in self.elf.loads:
            if part.vaddr <= link < part.vaddr + part.filesz:
                off = part.offset + link - part.vaddr
                end = min(off + size, part.offset + part.filesz)
                return self.data[off:end] + bytes(off + size - end)
        raise AssertionError(f"no code at {address:#x}")

    def t32(self, address: int) -> int:
        b = self.read(address, 4)
        return int.from_bytes(b[0:2], "little") << 16 | int.from_bytes(b[2:4], "little")

    def t32_size(self, address: int) -> int:
        return 4 if is_wide(self.t32(address) >> 16) else 2

    def word(self, address: int) -> int:
        return int.from_bytes(self.read(address, 4), "little")


def _cycles(pc: int, n: int) -> int:
    """A made-up but fixed number of cycles for the ``n``-th instruction executed at ``pc``."""
    h = ((pc >> 1) * 2654435761 + n * 40503) & 0xFFFFFFFF
    c = 1 + (h >> 13) % 3
    if (h >> 7) % 29 == 0:
        c += 9 + (h >> 3) % 8  # a stall: a run of W-only P-headers
    return c


# --- ETMv3 ---------------------------------------------------------------------------------


class Etmv3Writer:
    """Builds an ETMv3 stream instruction by instruction (IHI 0014Q chapter 7).

    Atoms are packed into P-headers when a packet other than a P-header must
    follow (a branch address, an I-sync). Cycle-accurate: each instruction of
    ``c`` cycles is ``c - 1`` W atoms, then a W with its E or N atom.
    """

    def __init__(self, cycle_accurate: bool, alt: bool, sync_every: int = 1024) -> None:
        self.ca = cycle_accurate
        self.alt = alt
        self.sync_every = sync_every
        self.out = bytearray()
        self.atoms: list[str] = []
        self.prev: int | None = None
        self.isa: Isa | None = None
        self.last_sync = -(10**9)

    def instruction(self, pc: int, isa: Isa, executed: bool, cycles: int) -> None:
        """One instruction executed (``executed``: its condition passed)."""
        if len(self.out) - self.last_sync >= self.sync_every:
            self.sync(pc, isa)
        if self.ca:
            self.atoms += ["W"] * (cycles - 1) + ["W" + ("E" if executed else "N")]
        else:
            self.atoms.append("E" if executed else "N")

    def sync(self, pc: int, isa: Isa) -> None:
        """A-sync and I-sync at ``pc`` (the next instruction)."""
        self.flush()
        self.last_sync = len(self.out)
        self.out += e3.encode_async()
        self.out += e3.encode_isync(pc, isa, cycle_count=1 if self.ca else None)
        self.prev, self.isa = pc, isa

    def branch(self, target: int, isa: Isa, exception: int | None = None) -> None:
        """A branch address packet (after the atom of the branch, or an exception)."""
        self.flush()
        full = isa != self.isa  # a change of instruction set needs the full address
        self.out += e3.encode_branch(
            target, isa, self.prev, alt=self.alt, exception=exception, full=full
        )
        self.prev, self.isa = target, isa

    def exception_exit(self) -> None:
        """An exception exit packet (ARMv7-M)."""
        self.flush()
        self.out += b"\x76"

    def flush(self) -> None:
        """Pack the pending atoms into P-headers."""
        seq = "".join(self.atoms)
        self.atoms = []
        i = 0
        while i < len(seq):
            if not self.ca:
                e = 0
                while i + e < len(seq) and seq[i + e] == "E" and e < 15:
                    e += 1
                n = 1 if i + e < len(seq) and seq[i + e] == "N" else 0
                self.out += e3.encode_phdr(seq[i : i + e + n])
                i += e + n
                continue
            # cycle-accurate: WE/WN pairs (format 1) or W runs then an optional E (format 3)
            pairs = 0
            while i + 2 * pairs + 1 < len(seq) and seq[i + 2 * pairs] == "W" and pairs < 7:
                if seq[i + 2 * pairs + 1] != "E":
                    break
                pairs += 1
            if pairs:
                n = seq[i + 2 * pairs : i + 2 * pairs + 2] == "WN"
                take = 2 * pairs + (2 if n else 0)
                self.out += e3.encode_phdr(seq[i : i + take], True)
                i += take
                continue
            if seq[i : i + 2] == "WN":
                self.out += e3.encode_phdr("WN", True)
                i += 2
                continue
            w = 0
            while i + w < len(seq) and seq[i + w] == "W" and w < 8:
                w += 1
            tail = seq[i + w : i + w + 1]
            if tail == "E":
                self.out += e3.encode_phdr(seq[i : i + w + 1], True)
                i += w + 1
            elif tail == "N":
                if w > 1:
                    self.out += e3.encode_phdr("W" * (w - 1), True)
                self.out += e3.encode_phdr("WN", True)
                i += w + 1
            else:
                self.out += e3.encode_phdr("W" * w, True)
                i += w


# --- running A32/T32 code ----------------------------------------------------------------


@dataclass
class Step:
    """One instruction that reached execute, or an exception taken before the next one."""

    pc: int
    thumb: bool
    executed: bool = True
    """The instruction passed its condition (an IT block's or its own)."""
    next_pc: int = 0
    next_thumb: bool = False
    exception: int | None = None
    """Set on an exception record: the number the trace gives it (``pc`` is the handler)."""
    ret: int = 0
    """For an exception record: the address of the instruction it interrupted."""


def _thumb_it_gaps(steps: list[Step], code: _Code, opts: IsaOptions) -> list[Step]:
    """``steps`` with the T32 instructions of IT blocks that failed their condition put back.

    The emulator does not report them; the trace does (an N atom each in ETMv3).
    """
    out: list[Step] = []
    for st in steps:
        out.append(st)
        if st.exception is not None or not st.thumb or not st.next_thumb:
            continue
        size = code.t32_size(st.pc)
        if st.next_pc == st.pc + size:
            continue
        if decode(Isa.T32, st.pc, code.t32(st.pc), opts).itype != InstrType.OTHER:
            continue  # a branch
        at = st.pc + size
        if not at < st.next_pc <= at + 12:
            continue  # an exception return or an interrupt: not an IT gap
        while at < st.next_pc:
            out.append(Step(at, True, False, at + code.t32_size(at), True))
            at += code.t32_size(at)
    return out


def run_arm(
    exe: Path,
    elf: ElfImage,
    regions: list[tuple[int, int]],
    entry: int,
    steps: int,
    *,
    irq_every: int = 0,
    cpu: int | None = None,
) -> list[Step]:
    """Run an A-profile style A32/T32 program; an IRQ every ``irq_every`` instructions.

    The IRQ is taken as an A/R-profile core takes it (IRQ mode, vector 0x18,
    LR = return address + 4) while CPSR.I is clear.
    """
    from unicorn import UC_ARCH_ARM, UC_HOOK_CODE, UC_MODE_ARM, Uc
    from unicorn import arm_const as A

    uc = Uc(UC_ARCH_ARM, UC_MODE_ARM)
    if cpu is not None:
        uc.ctl_set_cpu_model(cpu)
    for base, size in regions:
        uc.mem_map(base, size)
    data = exe.read_bytes()
    for part in elf.loads:
        uc.mem_write(part.vaddr, data[part.offset : part.offset + part.filesz])
    out: list[Step] = []

    def on_code(u: Uc, address: int, size: int, _user: object) -> None:
        cpsr = u.reg_read(A.UC_ARM_REG_CPSR)
        thumb = bool(cpsr & 0x20)
        if out and out[-1].exception is None and not out[-1].next_pc:
            out[-1].next_pc, out[-1].next_thumb = address, thumb
        executed = True
        if not thumb:
            cond = int.from_bytes(u.mem_read(address, 4), "little") >> 28
            executed = _cond_passed(cond, cpsr >> 28)
        else:
            hw = int.from_bytes(u.mem_read(address, 2), "little")
            if hw >> 12 == 0xD and (hw >> 8) & 0xF < 14:
                executed = _cond_passed((hw >> 8) & 0xF, cpsr >> 28)
            elif hw >> 11 == 0x1E and size == 4:
                h2 = int.from_bytes(u.mem_read(address + 2, 2), "little")
                if h2 & 0xD000 == 0x8000 and (hw >> 6) & 0xE != 0xE:  # B<c>.W
                    executed = _cond_passed((hw >> 6) & 0xF, cpsr >> 28)
        out.append(Step(address, thumb, executed))

    uc.hook_add(UC_HOOK_CODE, on_code)
    pc = entry
    done = 0
    while done < steps:
        chunk = min(irq_every or steps, steps - done)
        before = len(out)
        uc.emu_start(pc, 0xFFFFFFFF, count=chunk)
        done += len(out) - before
        cpsr = uc.reg_read(A.UC_ARM_REG_CPSR)
        pc = uc.reg_read(A.UC_ARM_REG_PC)
        thumb = bool(cpsr & 0x20)
        if irq_every and not cpsr & 0x80 and done < steps:
            if out and not out[-1].next_pc:
                out[-1].next_pc, out[-1].next_thumb = pc, thumb
            out.append(Step(0x18, False, next_pc=0x18, exception=14, ret=pc))
            uc.reg_write(A.UC_ARM_REG_CPSR, (cpsr & ~0x3F) | 0x80 | 0x12)
            uc.reg_write(A.UC_ARM_REG_SPSR, cpsr)
            uc.reg_write(A.UC_ARM_REG_LR, pc + 4)
            pc = 0x18
        elif thumb:
            pc |= 1
    if out and not out[-1].next_pc:
        out.pop()
    return out


def _cond_passed(cond: int, nzcv: int) -> bool:
    n, z, c, v = (nzcv >> 3) & 1, (nzcv >> 2) & 1, (nzcv >> 1) & 1, nzcv & 1
    table = (
        z, not z, c, not c, n, not n, v, not v,
        c and not z, (not c) or z, n == v, n != v, (not z) and n == v, z or n != v,
        True, True,
    )  # fmt: skip
    return bool(table[cond])


def _passed(st: Step, itype: InstrType, size: int) -> bool:
    """The ETMv3 atom of an instruction: a branch is E when taken (CBZ included), any other
    instruction when it passed its condition."""
    if itype == InstrType.OTHER:
        return st.executed
    return st.next_pc != st.pc + size or st.next_thumb != st.thumb


def etmv3_of_steps(
    steps: list[Step],
    code: _Code,
    opts: IsaOptions,
    cycle_accurate: bool,
    alt: bool,
    m_profile: bool = False,
) -> bytes:
    """The ETMv3 trace of a run (see the module text)."""
    w = Etmv3Writer(cycle_accurate, alt)
    for n, st in enumerate(steps):
        isa = Isa.T32 if st.thumb else Isa.A32
        if st.exception is not None:
            w.branch(st.pc, isa, exception=st.exception)
            continue
        op = code.t32(st.pc) if st.thumb else code.word(st.pc)
        info = decode(isa, st.pc, op, opts)
        passed = _passed(st, info.itype, info.size)
        w.instruction(st.pc, isa, passed, _cycles(st.pc, n))
        if not passed or info.itype == InstrType.OTHER:
            continue
        if info.itype != InstrType.BR_INDIRECT and st.next_thumb == st.thumb:
            continue  # a direct branch that stays in its instruction set: the atom says it
        if m_profile and st.next_pc >> 28 == 0xF:
            continue  # an exception return: the handler record that follows says where
        w.branch(st.next_pc, Isa.T32 if st.next_thumb else Isa.A32)
    w.flush()
    return bytes(w.out)


# --- Cortex-R5, ETMv3.3 --------------------------------------------------------------------

R5_VECTORS = r"""
    .section .vectors, "ax"
    .arm
    .global _vectors
_vectors:
    ldr pc, =reset
    b .
    b .
    b .
    b .
    nop
    ldr pc, =irq_entry
    b .
    .ltorg

    .text
    .arm
reset:
    cps #0x12
    ldr sp, =0x700F0000
    cps #0x13
    ldr sp, =0x700E0000
    cpsie i
    blx main
spin:
    b spin
irq_entry:
    sub lr, lr, #4
    push {r0-r3, r12, lr}
    blx irq_handler
    ldm sp!, {r0-r3, r12, pc}^
    .ltorg
"""

R5_SOURCE = r"""
typedef int (*op_t)(int);
volatile unsigned ticks;
volatile int sink;
struct task { int (*run)(int); int state; };

static int add3(int x) { return x + 3; }
#define FAR __attribute__((noinline, section(".text.far")))
FAR static int mul5(int x) { return x * 5; }
FAR static int neg(int x) { return -x; }
static int halve(int x) { return x >> 1; }
static op_t const ops[4] = { add3, mul5, neg, halve };

__attribute__((noinline)) int classify(int v) {
    switch (v & 7) {
    case 0: return 11;
    case 1: return v * 2;
    case 2: return v - 7;
    case 3: return 42;
    case 4: return v ^ 0x55;
    case 5: return v + v + v;
    case 6: return 0;
    default: return -1;
    }
}

__attribute__((noinline)) int clamp(int v) {
    return v > 1000 ? v - 999 : (v < -1000 ? v + 999 : v);
}

__attribute__((noinline)) int mix(int seed) {
    int acc = 0;
    for (int i = 0; i < 24; i++) {
        acc += ops[(seed + i) & 3](i);
        acc = clamp(acc);
        acc += classify(acc + i);
    }
    return acc;
}

FAR int idle(int s) {
    int n = 0;
    for (int i = 0; i < (s & 15) + 3; i++)
        n += i * s;
    return n;
}

static struct task tasks[3];

void irq_handler(void) {
    ticks++;
    if (ticks & 1)
        sink ^= 1;
}

int main(void) {
    int s = 1;
    tasks[0].run = mix;
    tasks[1].run = idle;
    tasks[2].run = classify;
    for (unsigned k = 0;; k++) {
        struct task *t = &tasks[(k + ticks) % 3];
        t->state = t->run(s + t->state);
        s = clamp(s + t->state);
        sink = s;
    }
}
"""

R5_LINK = """
ENTRY(_vectors)
SECTIONS {
    . = 0x0;
    .vectors : { *(.vectors) }
    . = 0x70002000;
    .text : { *(.text) *(.text.[^f]*) *(.rodata*) }
    . = 0x70024000;
    .textfar : { *(.text.far) . = . + 16; }
    .data : { *(.data*) }
    .bss : { *(.bss*) *(COMMON) }
}
"""

ETMIDR_R5 = 0x410CF230
"""An ETMv3.3 (ETMIDR minor revision 3) without the alternative branch encoding (bit 20)."""


def r5_etmv3(
    folder: Path, cycle_accurate: bool, *, steps: int = 80000, keep: int = 32768
) -> BoardCapture:
    """A Cortex-R5 run traced by its ETMv3.3, the last ``keep`` bytes of the trace in an ETB.

    The C code is T32 in on-chip RAM from 0x70002000 (as TI's AM243x R5F runs
    it), some of it 144 KiB further; the vectors and the IRQ entry are A32, the
    vectors at 0. (Branch addresses with bit 13 set make the original and the
    alternative branch encodings read differently.)
    """
    from unicorn import arm_const as A

    (folder / "r5.ld").write_text(R5_LINK)
    exe = _compile(
        ARM_CC,
        ["-mcpu=cortex-r5", "-mthumb", "-O2", "-g", "-nostdlib", "-ffreestanding", "-T", "r5.ld"],
        {"r5.c": R5_SOURCE, "vectors.S": R5_VECTORS},
        folder,
        "r5.elf",
    )
    elf = load_elf(exe.read_bytes(), str(exe))
    code = _Code(exe, elf)
    opts = IsaOptions(ArchVersion.V7, Profile.R)
    regions = [(0, 0x10000), (0x7000_0000, 0x10_0000)]
    ran = run_arm(exe, elf, regions, 0, steps, irq_every=997, cpu=A.UC_CPU_ARM_CORTEX_R5)
    trace = etmv3_of_steps(_thumb_it_gaps(ran, code, opts), code, opts, cycle_accurate, False)
    assert len(trace) > keep, len(trace)
    trace_id = 0x12
    capture = folder / ("etb_ca.bin" if cycle_accurate else "etb.bin")
    capture.write_bytes(format_frames([(trace_id, trace[-keep:])]))
    regs = {
        "ETMCR": 0x1000 if cycle_accurate else 0,
        "ETMCCER": 0,
        "ETMIDR": ETMIDR_R5,
        "ETMTRACEIDR": trace_id,
    }
    return BoardCapture(capture, exe, 0, trace_id, "ETM3.3", "Cortex-R5", regs)


# --- ETMv4 ---------------------------------------------------------------------------------


class Etmv4Writer:
    """Builds an ETMv4 stream branch by branch (IHI 0064, chapter 6).

    Atoms wait until a packet other than an atom must follow, then go out in
    the fewest atom packets the formats allow.
    """

    def __init__(self, *, isa: int, wide: bool) -> None:
        self.out = bytearray()
        self.atoms = ""
        self.addr = e4.AddressEncoder()
        self.addr.context_64bit = wide
        self.isa = isa
        self.wide = wide

    def start(self, pc: int, **context: object) -> None:
        """A-sync, trace info, trace on, then ``pc`` with its context."""
        self.flush()
        self.out += e4.a_sync() + e4.trace_info(0) + e4.trace_on()
        self.context(pc, **context)

    def context(self, pc: int, **context: object) -> None:
        """An address with context packet."""
        self.flush()
        self.out += e4.address_context(pc, self.isa, self.wide, **context)  # type: ignore[arg-type]
        self.addr.history = [(pc, self.isa), *self.addr.history[:2]]

    def atom(self, taken: bool) -> None:
        self.atoms += "E" if taken else "N"

    def address(self, target: int) -> None:
        self.flush()
        self.out += self.addr.encode(target, self.isa)

    def exception(self, number: int, ret: int, handler: int | None) -> None:
        """An exception taken before ``ret``; the handler's address follows when given."""
        self.flush()
        self.out += e4.exception(number, 1)
        self.out += self.addr.encode(ret, self.isa)
        if handler is not None:
            self.out += self.addr.encode(handler, self.isa)

    def exception_return(self) -> None:
        self.flush()
        self.out += e4.exception_return()

    def flush(self) -> None:
        a = self.atoms
        self.atoms = ""
        i = 0
        while i < len(a):
            for n in (
                24,
                23,
                22,
                21,
                20,
                19,
                18,
                17,
                16,
                15,
                14,
                13,
                12,
                11,
                10,
                9,
                8,
                7,
                6,
                5,
                4,
                3,
                2,
                1,
            ):
                piece = a[i : i + n]
                if len(piece) < n:
                    continue
                try:
                    self.out += e4.atom(piece)
                except ValueError:
                    continue
                i += n
                break


# --- Cortex-M33, ETMv4.2, single source -----------------------------------------------------

M33_SOURCE = r"""
typedef int (*op_t)(int);
volatile unsigned ticks, irqs;
volatile int sink;
extern unsigned _stack_top;
void Reset_Handler(void);
void SysTick_Handler(void);
void IRQ3_Handler(void);

__attribute__((section(".vectors"), used))
void (*const vectors[])(void) = {
    (void (*)(void))&_stack_top, Reset_Handler, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    SysTick_Handler, 0, 0, 0, IRQ3_Handler,
};

static int twice(int x) { return 2 * x; }
static int inc(int x) { return x + 1; }
static op_t const ops[2] = { twice, inc };

__attribute__((noinline)) int step(int v, int k) {
    switch (k & 3) {
    case 0: return v + 7;
    case 1: return v ^ k;
    case 2: return ops[k & 1](v);
    default: return v - k;
    }
}

void SysTick_Handler(void) { ticks++; }
void IRQ3_Handler(void) { irqs += 2; }

void Reset_Handler(void) {
    int v = 1;
    for (int k = 0;; k++) {
        v = step(v, k);
        if (v > 5000)
            v = 3;
        sink = v;
    }
}
"""

M33_LINK = """
ENTRY(Reset_Handler)
SECTIONS {
    . = 0x10000000;
    .text : { KEEP(*(.vectors)) *(.text*) *(.rodata*) . = . + 16; }
    . = 0x20000000;
    .data : { *(.data*) }
    .bss : { *(.bss*) *(COMMON) }
    _stack_top = 0x20040000;
}
"""

M33_REGISTERS = {
    "TRCCONFIGR": 0x1,
    "TRCIDR0": 0x280006E1,
    "TRCIDR1": 0x4100F424,
    "TRCIDR2": 0x00000004,
    "TRCIDR8": 0x0,
}
"""An ETMv4.2 for an M-profile core: 32-bit addresses, no context ID, no VMID, no speculation."""


def run_thumb_m(
    exe: Path,
    elf: ElfImage,
    entry: int,
    steps: int,
    exceptions: dict[int, tuple[int, int]],
) -> list[Step]:
    """Run T32 code; before instruction number ``k`` of ``exceptions`` take exception
    ``(number, handler)`` as an M-profile core does (the handler returns with EXC_RETURN)."""
    from unicorn import UC_ARCH_ARM, UC_HOOK_CODE, UC_MODE_THUMB, Uc
    from unicorn import arm_const as A

    exc_return = 0xFFFFFFBC
    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB)
    uc.mem_map(0x1000_0000, 0x10_0000)
    uc.mem_map(0x2000_0000, 0x10_0000)
    data = exe.read_bytes()
    for part in elf.loads:
        uc.mem_write(part.vaddr, data[part.offset : part.offset + part.filesz])
    uc.reg_write(A.UC_ARM_REG_SP, 0x2004_0000)
    out: list[Step] = []

    def on_code(u: Uc, address: int, size: int, _user: object) -> None:
        if out and out[-1].exception is None and not out[-1].next_pc:
            out[-1].next_pc, out[-1].next_thumb = address, True
        out.append(Step(address, True))

    uc.hook_add(UC_HOOK_CODE, on_code)
    regs = [getattr(A, f"UC_ARM_REG_R{i}") for i in range(13)]
    regs += [A.UC_ARM_REG_SP, A.UC_ARM_REG_LR, A.UC_ARM_REG_CPSR]
    pc = entry | 1
    count = 0
    for at in sorted(exceptions):
        uc.emu_start(pc, 0xFFFFFFFF, count=at - count)
        count = at
        pc = uc.reg_read(A.UC_ARM_REG_PC) | 1
        number, handler = exceptions[at]
        if out and not out[-1].next_pc:
            out[-1].next_pc, out[-1].next_thumb = handler, True
        out.append(
            Step(handler, True, next_pc=handler, next_thumb=True, exception=number, ret=pc & ~1)
        )
        saved = [uc.reg_read(r) for r in regs]
        uc.reg_write(A.UC_ARM_REG_LR, exc_return)
        before = len(out)
        uc.emu_start(handler | 1, exc_return)
        count += len(out) - before
        out[-1].next_pc, out[-1].next_thumb = exc_return, True
        for r, v in zip(regs, saved, strict=True):
            uc.reg_write(r, v)
    uc.emu_start(pc, 0xFFFFFFFF, count=steps - count)
    if out and not out[-1].next_pc:
        out.pop()
    return out


def etmv4_of_t32_steps(steps: list[Step], code: _Code, opts: IsaOptions, w: Etmv4Writer) -> None:
    """ETMv4 trace of T32 steps (M profile): atoms, addresses, exceptions and their returns."""
    pending_ret: list[int] = []
    for st in steps:
        if st.exception is not None:
            w.exception(st.exception, st.ret, st.pc)
            pending_ret.append(st.ret)
            continue
        if not st.executed:
            continue  # an IT-block instruction that failed: not a P0 element unless a branch
        info = decode(Isa.T32, st.pc, code.t32(st.pc), opts)
        if info.itype == InstrType.OTHER:
            continue
        taken = st.next_pc != st.pc + code.t32_size(st.pc)
        w.atom(taken)
        if taken and info.itype == InstrType.BR_INDIRECT:
            if st.next_pc == 0xFFFFFFBC:
                w.exception_return()
                w.address(pending_ret.pop())
            else:
                w.address(st.next_pc)


def m33_etmv4(folder: Path, *, steps: int = 420, buffer: int = 4096) -> BoardCapture:
    """A short Cortex-M33 run (a SysTick, an IRQ, then a debug halt) in a DMA buffer of
    ``buffer`` bytes: the trace, then zeros."""
    (folder / "m33.ld").write_text(M33_LINK)
    exe = _compile(
        ARM_CC,
        ["-mcpu=cortex-m33", "-mthumb", "-O2", "-g", "-nostdlib", "-ffreestanding", "-T", "m33.ld"],
        {"m33.c": M33_SOURCE},
        folder,
        "m33.elf",
    )
    elf = load_elf(exe.read_bytes(), str(exe))
    code = _Code(exe, elf)
    syms = _symbols(exe)
    opts = IsaOptions(ArchVersion.V8, Profile.M)
    exceptions = {
        150: (0x0F, syms["SysTick_Handler"] & ~1),
        290: (0x13, syms["IRQ3_Handler"] & ~1),
    }
    ran = run_thumb_m(exe, elf, syms["Reset_Handler"] & ~1, steps, exceptions)
    ran = _thumb_it_gaps(ran, code, opts)
    w = Etmv4Writer(isa=1, wide=False)
    w.start(ran[0].pc, el=0, sf=False, ns=False)
    etmv4_of_t32_steps(ran, code, opts, w)
    halted = ran[-1].next_pc
    w.exception(0x18, halted, None)  # the debugger halts the core to read the buffer
    trace = bytes(w.out)
    assert len(trace) < buffer
    capture = folder / "dma.bin"
    capture.write_bytes(trace + bytes(buffer - len(trace)))
    regs = {**M33_REGISTERS, "TRCTRACEIDR": 0}
    return BoardCapture(
        capture, exe, 0x1000_0000, 0, "ETM4", "Cortex-M33", regs, single_source=True
    )


# --- an Armv8-A server, ETMv4.0 / ETMv4.1, two processes ----------------------------------

SERVER_BASES = (0x55_5555_0000, 0x55_6666_0000)
"""Where the two processes have the program loaded."""
SERVER_PIDS = (0x1F2A, 0x1F31)
SERVER_VMIDS = (0x05, 0x06)


def server_etmv4(
    folder: Path, vmid_bits: int, *, keep: int = 12000, switch_every: int = 700
) -> BoardCapture:
    """The AArch64 test program (:mod:`tests.profiles.program`) run as two processes that
    take turns, traced at EL0 with context IDs and VMIDs, the last ``keep`` bytes in an ETR.

    ``vmid_bits`` is 8 (an ETMv4.0) or 32 (an ETMv4.1: ETMv4.0 has 8-bit VMIDs only).
    """
    from tests.profiles import program as a64

    prog = a64.build(folder)
    code = b"".join(s.data for s in prog.elf.segments)
    first = prog.elf.segments[0].address
    opts = IsaOptions()
    runs = [[pc - a64.BASE for pc in prog.executed] for _ in SERVER_BASES]
    # each process runs its loop over and over; the trace switches between them
    w = Etmv4Writer(isa=0, wide=True)
    pos = [0, 0]
    vbytes = vmid_bits // 8
    cur = 0
    budget = keep * 3
    n = 0
    last_sync = 0

    def ctx(p: int) -> dict[str, object]:
        return {
            "el": 0, "sf": True, "ns": True, "vmid": SERVER_VMIDS[p],
            "context_id": SERVER_PIDS[p], "vmid_bytes": vbytes, "cid_bytes": 4,
        }  # fmt: skip

    w.start(SERVER_BASES[0] + runs[0][0], **ctx(0))
    while len(w.out) < budget:
        run = runs[cur]
        i = pos[cur]
        pc = SERVER_BASES[cur] + run[i]
        nxt = SERVER_BASES[cur] + run[(i + 1) % len(run)]
        if i + 1 == len(run):
            nxt = SERVER_BASES[cur] + run[0]  # the loop starts again (through an untraced restart)
        off = run[i] - first
        info = decode(Isa.A64, pc, int.from_bytes(code[off : off + 4], "little"), opts)
        n += 1
        pos[cur] = (i + 1) % len(run)
        if info.itype != InstrType.OTHER:
            taken = nxt != pc + 4
            w.atom(taken)
            if taken and info.itype == InstrType.BR_INDIRECT:
                w.address(nxt)
        elif i + 1 == len(run):
            w.exception(0x0E, pc + 4, None)
            w.context(nxt, **ctx(cur))
        if n % switch_every == 0:
            # an interrupt: the kernel (not traced) schedules the other process
            w.exception(0x0E, nxt, None)
            cur = 1 - cur
            w.context(SERVER_BASES[cur] + runs[cur][pos[cur]], **ctx(cur))
        if len(w.out) - last_sync > 2048:
            # the periodic synchronisation: A-sync, trace info, the address and context
            last_sync = len(w.out)
            w.start(SERVER_BASES[cur] + runs[cur][pos[cur]], **ctx(cur))
    w.flush()
    trace = bytes(w.out)
    trace_id = 0x10
    capture = folder / f"etr_vmid{vmid_bits}.bin"
    capture.write_bytes(format_frames([(trace_id, trace[-keep:])]))
    vmidsz = {8: 1, 32: 4}[vmid_bits]
    regs = {
        "TRCCONFIGR": 0xC1,  # context ID and VMID tracing
        "TRCIDR0": 0x28000EA1,
        "TRCIDR1": 0x4100F403 if vmid_bits == 8 else 0x4100F413,
        "TRCIDR2": 0x00000088 | (vmidsz << 10),
        "TRCIDR8": 0x0,
        "TRCTRACEIDR": trace_id,
    }
    images = [f"{prog.path}@{base:#x}" for base in SERVER_BASES]
    return BoardCapture(
        capture, prog.path, SERVER_BASES[0], trace_id, "ETM4", "Cortex-A72", regs, images
    )


# --- Cortex-M3 SWO: ETMv3.4 and ITM without sync through the TPIU formatter ----------------

ETMIDR_M3 = 0x4114F240
"""ETMv3.4 with the alternative branch encoding (ETMIDR bit 20), as a Cortex-M3's ETM."""


@dataclass
class ItmItem:
    """One ITM/DWT item the run emitted: packet kind, source (port or discriminator), value."""

    kind: str
    src: int
    value: int


def _itm_items_of(steps: list[Step], seed: int) -> Iterator[tuple[int, list[ItmItem], bytes]]:
    """Per step index: the ITM items emitted then and their bytes (stimulus strings, DWT
    exception trace, PC samples, local timestamps, a few overflows)."""
    from cstrace.protocols.itm import packets as itm
    from cstrace.protocols.itm.encoder import encode_packet

    words = ["boot ok\n", "tick\n", "sensor=%d\n", "state %d -> %d\n", "idle\n"]
    clock = 0
    for n, st in enumerate(steps):
        pkts: list[tuple[ItmItem, itm.ItmPacket]] = []
        h = (n * 2654435761 + seed) & 0xFFFFFFFF
        if st.exception is not None:
            ev = itm.Dwt(0, b"", 1, 0x1000 | st.exception, 2)
            pkts.append((ItmItem("DWT", 1, ev.value), ev))
        elif st.next_pc == 0xFFFFFFBC:
            for func in (0x2000, 0x3000):  # exit the handler, return to thread
                ev = itm.Dwt(0, b"", 1, func, 2)
                pkts.append((ItmItem("DWT", 1, func), ev))
        if n % 61 == 7:
            pc_sample = itm.Dwt(0, b"", 2, st.pc, 4)
            pkts.append((ItmItem("DWT", 2, st.pc), pc_sample))
        if n % 173 == 11:
            text = words[(h >> 5) % len(words)]
            if "%d" in text:
                text = text.replace("%d", str(h % 997), 1).replace("%d", str(n % 13))
            raw = text.encode()
            if (h >> 11) & 1:
                # a printf that writes four characters at a time (32-bit stimulus writes)
                raw += bytes(-len(raw) % 4)
                for k in range(0, len(raw), 4):
                    word = int.from_bytes(raw[k : k + 4], "little")
                    pkts.append((ItmItem("SWIT", 0, word), itm.Swit(0, b"", 0, word, 4)))
            else:
                for ch in raw:
                    pkts.append((ItmItem("SWIT", 0, ch), itm.Swit(0, b"", 0, ch, 1)))
        if n % 97 == 41:
            word = h ^ 0xA5A5F00D
            pkts.append((ItmItem("SWIT", 1, word), itm.Swit(0, b"", 1, word, 4)))
        if n % 131 == 3:
            half = (h >> 8) & 0xFFFF
            pkts.append((ItmItem("SWIT", 2, half), itm.Swit(0, b"", 2, half, 2)))
        if pkts and n % 5 == 0:
            delta = 1 + h % 3000
            if delta < 7:
                lts = itm.LocalTs(0, b"", 0, delta, 1, True)
            else:
                lts = itm.LocalTs(0, b"", 0, delta, (delta.bit_length() + 6) // 7, False)
            clock += delta
            pkts.append((ItmItem("TS", 0, delta), lts))
        if n % 1999 == 1500:
            pkts.append((ItmItem("OVERFLOW", 0, 0), itm.Overflow(0, b"")))
        if pkts:
            yield n, [i for i, _ in pkts], b"".join(encode_packet(p) for _, p in pkts)


def m3_swo(
    folder: Path,
    *,
    steps: int = 20000,
    skip: int = 1200,
    faults: tuple[tuple[int, str], ...] = (),
) -> BoardCapture:
    """A Cortex-M3 run: its ETMv3.4 trace on ID 2 and its ITM/DWT items on ID 1, through the
    TPIU formatter with an FSYNC every four frames; the capture begins ``skip`` steps into
    the run (inside packets of both streams). ``faults``: ITM bytes (positions in the
    captured stream) damaged on the line: ``flip`` (a bit of the byte), ``drop`` (the
    byte lost) or ``insert`` (a byte added before it).

    ``items`` of the result counts the ITM items in the capture, per kind.
    """
    (folder / "m3.ld").write_text(M33_LINK)
    source = M33_SOURCE.replace(
        "IRQ3_Handler(void) { irqs += 2; }",
        "IRQ3_Handler(void) { irqs += 2; }\nvoid PendSV_Handler(void) { irqs++; }",
    )
    exe = _compile(
        ARM_CC,
        ["-mcpu=cortex-m3", "-mthumb", "-O2", "-g", "-nostdlib", "-ffreestanding", "-T", "m3.ld"],
        {"m3.c": source},
        folder,
        "m3.elf",
    )
    elf = load_elf(exe.read_bytes(), str(exe))
    code = _Code(exe, elf)
    syms = _symbols(exe)
    opts = IsaOptions(ArchVersion.V7, Profile.M)
    exceptions = {k: (0x0F, syms["SysTick_Handler"] & ~1) for k in range(400, steps, 1100)}
    exceptions.update({k: (0x0E, syms["PendSV_Handler"] & ~1) for k in range(950, steps, 2300)})
    ran = _thumb_it_gaps(
        run_thumb_m(exe, elf, syms["Reset_Handler"] & ~1, steps, exceptions), code, opts
    )
    etm = Etmv3Writer(False, alt=True, sync_every=512)
    etm_marks: list[int] = []
    pending: list[int] = []
    for st in ran:
        if st.exception is not None:
            etm.branch(st.pc, Isa.T32, exception=st.exception)
            pending.append(st.ret)
        else:
            info = decode(Isa.T32, st.pc, code.t32(st.pc), opts)
            passed = _passed(st, info.itype, info.size)
            etm.instruction(st.pc, Isa.T32, passed, 1)
            if passed and info.itype == InstrType.BR_INDIRECT:
                if st.next_pc == 0xFFFFFFBC:
                    etm.exception_exit()
                    etm.branch(pending.pop(), Isa.T32)
                else:
                    etm.branch(st.next_pc, Isa.T32)
        etm_marks.append(len(etm.out))
    etm.flush()
    etm_marks[-1] = len(etm.out)
    itm_at: dict[int, tuple[list[ItmItem], bytes]] = {
        n: (items, data) for n, items, data in _itm_items_of(ran, 7)
    }
    # The capture: both streams from step `skip` on, interleaved as the formatter saw them.
    pieces: list[tuple[int, bytes]] = []
    kept: list[ItmItem] = []
    itm_stream = bytearray()
    prev = etm_marks[skip - 1]
    for n in range(skip, len(ran), 40):
        last = min(n + 40, len(ran)) - 1
        pieces.append((0x02, bytes(etm.out[prev : etm_marks[last]])))
        prev = etm_marks[last]
        chunk = bytearray()
        for k in range(n, last + 1):
            if k in itm_at:
                items, data = itm_at[k]
                kept += items
                chunk += data
        start = len(itm_stream)
        itm_stream += chunk
        for at, kind in sorted(faults, reverse=True):
            if start <= at < len(itm_stream):
                k = at - start
                if kind == "flip":
                    chunk[k] ^= 0x10
                elif kind == "drop":
                    del chunk[k]
                else:
                    chunk[k:k] = b"\xa5"
        pieces.append((0x01, bytes(chunk)))
    frames = format_frames(pieces)
    padded = bytearray()
    for f in range(0, len(frames), 16):
        if f % 64 == 0:
            padded += b"\xff\xff\xff\x7f"
        padded += frames[f : f + 16]
    capture = folder / "swo.bin"
    capture.write_bytes(bytes(padded))
    regs = {"ETMCR": 0xC00, "ETMCCER": 0, "ETMIDR": ETMIDR_M3, "ETMTRACEIDR": 0x02}
    counts: dict[str, int] = {}
    for it in kept:
        counts[it.kind] = counts.get(it.kind, 0) + 1
    return BoardCapture(
        capture, exe, 0x1000_0000, 0x02, "ETM3.4", "Cortex-M3", regs, items=counts, itm_items=kept
    )
