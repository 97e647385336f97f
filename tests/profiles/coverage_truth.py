"""What a run of the test program covered, computed from the emulator, not from the trace.

Input: a :class:`tests.profiles.program.Program` (the ELF with DWARF and the
emulator's list of executed addresses); output: the expected line, branch and
function coverage, made with pyelftools (the DWARF line table, the symbol
table) and ``aarch64-linux-gnu-objdump`` (which instructions are conditional
branches), independently of cstrace's own code path.

The program variant :data:`SOURCE` adds to the profile program a function
whose branch goes one way only (``check``) and one that is never called
(``never_called``); ``_start`` is unchanged, so :func:`program.run` stops
where it does.

A trace shows instructions up to its last waypoint only (nothing marks the
instructions after it), so the emulator's list is cut after its last branch.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.profiles import program as prog

OBJDUMP = "aarch64-linux-gnu-objdump"

SOURCE = prog.SOURCE.replace(
    """__attribute__((noinline)) int work(void) {
    int total = 0;
    for (int k = 0; k < 10; k++)
        total += (k & 1) ? f1(100) : f2(50);
    return total;
}""",
    """__attribute__((noinline)) static void check(int v) {
    if (v > 1000000)
        sink = v;
}

__attribute__((noinline)) int never_called(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (i & 1)
            sink = i;
    return s;
}

__attribute__((noinline)) int work(void) {
    int total = 0;
    for (int k = 0; k < 10; k++)
        total += (k & 1) ? f1(100) : f2(50);
    check(total);
    return total;
}""",
)
assert SOURCE != prog.SOURCE

_CONDITIONAL = re.compile(r"^(b\.\w+|cbz|cbnz|tbz|tbnz)$")
_BRANCH = re.compile(r"^(b|bl|br|blr|ret|b\.\w+|cbz|cbnz|tbz|tbnz)$")

_COND = "(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)"
T32_CONDITIONAL = re.compile(rf"^(b{_COND}|bx{_COND}|cbz|cbnz)(\.[nw])?$")
"""T32 conditional branches as objdump writes them (a branch in an IT block has the suffix
too)."""
T32_BRANCH = re.compile(rf"^(b|bl|blx|bx|cbz|cbnz)({_COND})?(\.[nw])?$")


@dataclass
class Truth:
    """The expected coverage, in link-time addresses."""

    lines: dict[tuple[str, int], int]
    """Every line with code (a row of the line table covering at least one byte): the
    largest execution count of its instructions."""
    branches: dict[int, tuple[int, int] | None]
    """Every conditional branch: (taken, not taken) counts, None when it never ran."""
    branch_lines: dict[int, tuple[str, int]]
    """The line of each conditional branch."""
    calls: dict[str, int]
    """Every function symbol: executions of its first instruction."""
    executed: Counter[int]
    """Executions per instruction, as far as the trace can show them."""


def objdump() -> str | None:
    """The AArch64 objdump's path, or None."""
    return shutil.which(OBJDUMP)


def instructions(path: Path, tool: str | None = None) -> dict[int, tuple[str, int]]:
    """Address → (mnemonic, size) of every instruction objdump (default: the AArch64 one)
    disassembles in ``path``."""
    tool = tool or objdump()
    assert tool is not None
    text = subprocess.run([tool, "-d", str(path)], capture_output=True, text=True, check=True)
    out: dict[int, tuple[str, int]] = {}
    for line in text.stdout.splitlines():
        m = re.match(r"^\s+([0-9a-f]+):\t((?:[0-9a-f]{4,8} ?)+)\s+(\S+)", line)
        if m:
            size = len(m.group(2).replace(" ", "")) // 2
            out[int(m.group(1), 16)] = (m.group(3), size)
    return out


def function_symbols(path: Path) -> dict[str, int]:
    """Name → address (the Thumb bit cleared) of every function symbol of ``path``."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    out: dict[str, int] = {}
    with path.open("rb") as f:
        for sec in ELFFile(f).iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.iter_symbols():
                    if sym["st_info"]["type"] == "STT_FUNC":
                        out[sym.name] = int(sym["st_value"]) & ~1
    return out


def line_rows(path: Path) -> list[tuple[int, str, int, bool]]:
    """The DWARF line table's rows: (address, file, line, end of sequence), by address."""
    from elftools.elf.elffile import ELFFile

    rows: list[tuple[int, str, int, bool]] = []
    with path.open("rb") as f:
        elf = ELFFile(f)
        dwarf = elf.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            top = cu.get_top_DIE()
            comp_dir = top.attributes["DW_AT_comp_dir"].value.decode()
            lp = dwarf.line_program_for_CU(cu)
            assert lp is not None
            dirs = [comp_dir, *(d.decode() for d in lp["include_directory"])]
            files = lp["file_entry"]
            for entry in lp.get_entries():
                st = entry.state
                if st is None:
                    continue
                fe = files[st.file - 1]  # DWARF 4: file numbers count from 1
                name = fe.name.decode()
                full = os.path.join(dirs[fe.dir_index], name)
                rows.append((st.address, os.path.normpath(full), st.line, st.end_sequence))
    rows.sort(key=lambda r: (r[0], not r[3]))
    return rows


def truth(built: prog.Program) -> Truth:
    """The coverage the emulator's run of ``built`` has (see the module docstring)."""
    run = [a - prog.BASE for a in built.executed]
    return truth_of(built.path, run, instructions(built.path), _CONDITIONAL, _BRANCH)


def truth_of(
    path: Path,
    run: list[int],
    code: dict[int, tuple[str, int]],
    conditional: re.Pattern[str],
    branch: re.Pattern[str],
) -> Truth:
    """The coverage of the run ``run`` (link-time addresses, in order) of the ELF ``path``;
    ``code`` is its disassembly, ``conditional`` and ``branch`` match the mnemonics of its
    conditional branches and of every branch."""
    last = max(i for i, a in enumerate(run) if branch.match(code.get(a, ("", 0))[0]))
    traced = run[: last + 1]
    nexts = run[1 : last + 2]
    executed = Counter(traced)

    rows = line_rows(path)
    starts = [r[0] for r in rows]

    def line_of(address: int) -> tuple[str, int] | None:
        # the last row at or before the address, unless it ends a sequence
        i = bisect.bisect_right(starts, address) - 1
        if i < 0 or rows[i][3] or rows[i][2] == 0:
            return None
        return (rows[i][1], rows[i][2])

    # a line has code when one of its rows covers at least one byte
    lines: dict[tuple[str, int], int] = {
        (r[1], r[2]): 0
        for r, after in itertools.pairwise(rows)
        if not r[3] and r[2] and after[0] > r[0]
    }
    for address, n in executed.items():
        key = line_of(address)
        if key is not None:
            lines[key] = max(lines.get(key, 0), n)

    branches: dict[int, tuple[int, int] | None] = {}
    branch_lines: dict[int, tuple[str, int]] = {}
    for address, (mnemonic, size) in code.items():
        if not conditional.match(mnemonic):
            continue
        where = line_of(address)
        if where is not None:
            branch_lines[address] = where
        if not executed[address]:
            branches[address] = None
            continue
        taken = sum(1 for a, b in zip(traced, nexts, strict=True) if a == address and b != a + size)
        branches[address] = (taken, executed[address] - taken)

    calls = {name: executed[address] for name, address in function_symbols(path).items()}
    return Truth(lines, branches, branch_lines, calls, executed)
