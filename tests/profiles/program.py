"""A small AArch64 program with debug info, run in an emulator and traced with ETMv4.

Input: a C compiler for AArch64 (``aarch64-linux-gnu-gcc``, Debian's
``gcc-aarch64-linux-gnu``) and the unicorn emulator; output: the program (a
position-independent executable with DWARF and a build ID), the addresses of
the instructions it executed when loaded at :data:`BASE`, and the ETMv4 trace
a trace unit would have made of that run (atoms for every branch, an address
packet after every taken indirect branch), in CoreSight frames under trace ID
:data:`TRACE_ID`: a raw capture to decode with ``--image PROGRAM@BASE``.

The program calls ``f1`` (a counted loop) five times and ``f2`` (a loop with a
condition in it) five times from ``work``; ``_start`` then spins. Every
function and branch count is fixed by the source, so profiles made of the
trace can be checked against the program itself.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cstrace.capture.encode import format_frames
from cstrace.elements import InstrType, Isa
from cstrace.isa.decode import decode
from cstrace.isa.types import IsaOptions
from cstrace.memory.elf import ElfImage, load_elf
from cstrace.protocols.etmv4 import encoder as enc

CC = "aarch64-linux-gnu-gcc"
BASE = 0x55_0000_0000
TRACE_ID = 0x10
REGISTERS = {
    "TRCCONFIGR": 0x0,
    "TRCTRACEIDR": TRACE_ID,
    "TRCIDR0": 0x28000EA1,
    "TRCIDR1": 0x4100F403,
    "TRCIDR2": 0x00000488,
    "TRCIDR8": 0x0,
}
"""An ETMv4.0 unit: 64-bit addresses, no context ID, no speculation, no cycle counts."""
TIMED_REGISTERS = {**REGISTERS, "TRCCONFIGR": 0x800}
"""The same unit with timestamps on (TRCCONFIGR.TS), for :func:`timed_capture`."""

SOURCE = r"""
static volatile int sink;

__attribute__((noinline)) static int f1(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i & 3;
    return s;
}

__attribute__((noinline)) static int f2(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (i % 3 == 0)
            s += i;
    return s;
}

__attribute__((noinline)) int work(void) {
    int total = 0;
    for (int k = 0; k < 10; k++)
        total += (k & 1) ? f1(100) : f2(50);
    return total;
}

void _start(void) {
    sink = work();
    for (;;)
        __asm__ volatile("nop");
}
"""


@dataclass
class Program:
    """The built program, its run and its trace."""

    path: Path
    elf: ElfImage
    symbols: dict[str, int]
    executed: list[int]
    capture: Path


def compiler() -> str | None:
    """The AArch64 C compiler's path, or None when it is not installed."""
    return shutil.which(CC)


def build_or_skip(folder: Path) -> Program:
    """:func:`build` in ``folder``, or skip the calling test when the AArch64 compiler or
    unicorn (the emulator that traces the program) is not installed."""
    import pytest

    if compiler() is None:
        pytest.skip(f"{CC} not installed (Debian: gcc-aarch64-linux-gnu)")
    pytest.importorskip("unicorn")
    return build(folder)


def _symbols(path: Path) -> dict[str, int]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    out: dict[str, int] = {}
    with path.open("rb") as f:
        elf = ELFFile(f)
        for sec in elf.iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.iter_symbols():
                    if sym["st_info"]["type"] == "STT_FUNC":
                        out[sym.name] = int(sym["st_value"])
    return out


def build(folder: Path, source: str = SOURCE, cflags: Sequence[str] = ()) -> Program:
    """Compile, run and trace the program in ``folder``.

    ``source`` may replace the program with another whose ``_start`` is the same
    (``sink = work();`` then the spin loop, where the run stops); ``cflags`` are
    added to the compiler's options. The compiler runs in ``folder`` on
    ``prog.c``: DWARF names the source ``prog.c`` in the folder.
    """
    cc = compiler()
    assert cc is not None
    src = folder / "prog.c"
    src.write_text(source)
    exe = folder / "prog"
    subprocess.run(
        [cc, "-O1", "-gdwarf-4", "-fPIE", "-pie", "-nostdlib", "-ffreestanding",
         "-fno-stack-protector", "-Wl,--build-id=sha1", "-Wl,-z,norelro",
         *cflags, "-o", str(exe.resolve()), src.name],
        check=True,
        capture_output=True,
        cwd=folder,
    )  # fmt: skip
    elf = load_elf(exe.read_bytes(), str(exe))
    symbols = _symbols(exe)
    executed = run(exe, elf, symbols)
    capture = folder / "etr.bin"
    capture.write_bytes(format_frames([(TRACE_ID, etmv4_trace(elf, executed))]))
    return Program(exe, elf, symbols, executed, capture)


def run(exe: Path, elf: ElfImage, symbols: dict[str, int]) -> list[int]:
    """The addresses of the instructions executed from ``_start`` until it spins."""
    from unicorn import UC_ARCH_ARM64, UC_HOOK_CODE, UC_MODE_ARM, Uc
    from unicorn import arm64_const as A

    data = exe.read_bytes()
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    size = 0x40000
    uc.mem_map(BASE, size)
    for load in elf.loads:
        uc.mem_write(BASE + load.vaddr, data[load.offset : load.offset + load.filesz])
    stack = 0x7F_0000_0000
    uc.mem_map(stack - 0x10000, 0x10000)
    uc.reg_write(A.UC_ARM64_REG_SP, stack - 0x100)
    executed: list[int] = []
    uc.hook_add(UC_HOOK_CODE, lambda _uc, address, _size, _user: executed.append(address))
    start = BASE + symbols["_start"]
    spin = start + 0x14  # the nop of the final loop
    uc.emu_start(start, spin)
    executed.append(spin)
    return executed


def etmv4_trace(elf: ElfImage, executed: list[int], timestamps: bool = False) -> bytes:
    """The ETMv4 trace of the run: sync, trace on, the start address, then the waypoints.

    With ``timestamps``, a timestamp follows every waypoint: the number of
    instructions executed up to and including the waypoint's branch (a clock
    that ticks once per instruction, for :data:`TIMED_REGISTERS`).
    """
    code = b"".join(s.data for s in elf.segments)
    first = elf.segments[0].address
    opts = IsaOptions()
    addresses = enc.AddressEncoder()
    out = bytearray(enc.a_sync() + enc.trace_info(0) + enc.trace_on())
    out += enc.address_context(executed[0], el=0, sf=True, ns=True)
    addresses.history = [(executed[0], 0), *addresses.history[:2]]
    for index, (pc, nxt) in enumerate(itertools.pairwise(executed)):
        off = pc - BASE - first
        info = decode(Isa.A64, pc, int.from_bytes(code[off : off + 4], "little"), opts)
        if info.itype == InstrType.OTHER:
            continue
        taken = nxt != pc + 4
        out += enc.atom("E" if taken else "N")
        if taken and info.itype == InstrType.BR_INDIRECT:
            out += addresses.encode(nxt)
        if timestamps:
            out += enc.timestamp(index + 1)
    return bytes(out)


def timed_capture(program: Program, path: Path) -> Path:
    """Write to ``path`` the program's trace with a timestamp after every waypoint (for
    :data:`TIMED_REGISTERS`); returns ``path``."""
    trace = etmv4_trace(program.elf, program.executed, timestamps=True)
    path.write_bytes(format_frames([(TRACE_ID, trace)]))
    return path


def recording(program: Program, path: Path, name: str = "/data/local/tmp/app") -> Path:
    """Write to ``path`` a perf.data recording of the program's run (``tests/perfgen.py``):
    the trace unit's registers, process 1234 exec'ing the program and mapping each of
    its ``PT_LOAD`` segments (named ``name``, as on the device), and the trace as the AUX
    data of CPU 0 (CoreSight frames, as an ETR holds them); returns ``path``."""
    from tests.perfgen import ETMV4_MAGIC, PerfWriter, cs_etm_info

    pid, page = 1234, 0x1000
    params = [REGISTERS[k] for k in ("TRCCONFIGR", "TRCTRACEIDR", "TRCIDR0", "TRCIDR1")]
    params += [REGISTERS["TRCIDR2"], REGISTERS["TRCIDR8"], 0]  # TRCAUTHSTATUS
    w = PerfWriter()
    assert program.elf.build_id is not None
    w.build_ids = [(-1, program.elf.build_id, name)]
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, params)]))
    w.comm(pid, pid, Path(name).name, exec_=True, time=10)
    for k, load in enumerate(program.elf.loads):
        start = (BASE + load.vaddr) & ~(page - 1)
        end = -(-(BASE + load.vaddr + load.memsz) // page) * page
        prot = 5 if load.executable else 1
        w.mmap2(
            pid, pid, start, end - start, load.offset & ~(page - 1), name, prot=prot, time=11 + k
        )
    w.itrace_start(pid, pid, time=20)
    data = program.capture.read_bytes()
    w.aux(0, len(data), 0, pid=pid, tid=pid, time=30)
    w.auxtrace(data + b"\0" * (-len(data) % 8), cpu=0)
    path.write_bytes(w.build())
    return path
