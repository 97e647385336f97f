"""Symbols and source lines (:mod:`cstrace.analyses.symbols`) of programs built here.

Judges: the AArch64 program of :mod:`tests.profiles.program` (built with
``aarch64-linux-gnu-gcc -g``) against binutils' ``addr2line`` and the
symbol table as pyelftools reads it; the etm_demo example's ``program.elf``
against its generator's listing (``program.txt``); a Thumb-2 program
(``arm-none-eabi-gcc``) for the Thumb bit and the mapping symbols; a C++
program for demangled names. Each test skips, naming the Debian package, when
its compiler or tool is missing.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cstrace.analyses.symbols import Function, SourceLine, Symbols, demangle
from cstrace.elements import Isa
from cstrace.errors import InputError
from tests.conftest import ROOT
from tests.profiles import program as prog
from tests.profiles import thumb_program as thumb

EXAMPLE = ROOT / "examples" / "etm_demo"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> prog.Program:
    return prog.build_or_skip(tmp_path_factory.mktemp("prog"))


@pytest.fixture(scope="module")
def symbols(built: prog.Program) -> Symbols:
    s = Symbols()
    s.add_elf_at(built.path, prog.BASE)
    return s


def test_functions_are_the_symbol_table_moved_to_the_base(
    built: prog.Program, symbols: Symbols
) -> None:
    funcs = symbols.functions()
    assert [f.name for f in funcs] == sorted(built.symbols, key=built.symbols.__getitem__)
    for f in funcs:
        assert f.start == prog.BASE + built.symbols[f.name]
        assert f.image == built.path.name
        assert f.file is not None and f.file.endswith("prog.c")
        # DWARF's declaration line is the line of the function's head in the source
        assert f.line is not None
        assert f.name in prog.SOURCE.splitlines()[f.line - 1]
    assert all(a.end <= b.start for a, b in itertools.pairwise(funcs))


def test_every_executed_address_is_in_its_function(built: prog.Program, symbols: Symbols) -> None:
    starts = sorted((prog.BASE + a, n) for n, a in built.symbols.items())
    for address in built.executed:
        f = symbols.function(address)
        assert f is not None
        expected = [n for a, n in starts if a <= address][-1]
        assert f.name == expected
        assert symbols.name(address) == (
            f.name if address == f.start else f"{f.name}+{address - f.start:#x}"
        )
    assert symbols.function(prog.BASE - 4) is None
    assert symbols.name(prog.BASE - 4) == f"{prog.BASE - 4:#x}"


def test_lines_are_what_addr2line_says(built: prog.Program, symbols: Symbols) -> None:
    tool = shutil.which("aarch64-linux-gnu-addr2line")
    if tool is None:
        pytest.skip(
            "aarch64-linux-gnu-addr2line not installed (Debian: binutils-aarch64-linux-gnu)"
        )
    addresses = sorted(set(built.executed))
    done = subprocess.run(
        [tool, "-e", str(built.path), *(f"{a - prog.BASE:#x}" for a in addresses)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    answers = done.stdout.splitlines()
    assert len(answers) == len(addresses)
    for address, answer in zip(addresses, answers, strict=True):
        file, _, line = re.sub(r" \(discriminator \d+\)$", "", answer).rpartition(":")
        got = symbols.line(address)
        assert got == SourceLine(file, int(line)), hex(address)


def test_line_table_and_source(built: prog.Program, symbols: Symbols) -> None:
    table = symbols.line_table()
    for address in built.executed:
        line = symbols.line(address)
        assert line is not None and address in _covered(symbols, line)
    text = prog.SOURCE.splitlines()
    for line, rows in table.items():
        assert rows == sorted(rows)
        assert symbols.source(line.file, line.line) == text[line.line - 1]
    # every function's first line has code
    for f in symbols.functions():
        assert any(ln.line == f.line for ln in table)
    assert symbols.source(str(built.path.parent / "prog.c"), 10_000) is None


def _covered(symbols: Symbols, line: SourceLine) -> set[int]:
    out: set[int] = set()
    for start, end in symbols.line_ranges()[line]:
        out.update(range(start, end))
    return out


def test_source_reads_only_what_dwarf_names(symbols: Symbols, tmp_path: Path) -> None:
    other = tmp_path / "other.c"
    other.write_text("int x;\n")
    assert symbols.source(str(other), 1) is None


def test_the_example_elf_gives_the_listings_lines() -> None:
    s = Symbols()
    s.add_elf(EXAMPLE / "program.elf")
    assert [f.name for f in s.functions()] == ["_start", "square", "el0_sync", "panic"]
    listing = (EXAMPLE / "program.txt").read_text().splitlines()
    seen = 0
    for row in listing:
        m = re.match(r"([0-9a-f]{16})  [0-9a-f]{8}  (?:\S+:)?\s+(.+?)\s*(?:;.*)?$", row)
        if m is None:
            continue
        address, text = int(m.group(1), 16), m.group(2)
        line = s.line(address)
        assert line is not None and line.file == "program.s"
        source = s.source(line.file, line.line)
        assert source is not None and source.split("//")[0].strip() == text
        assert s.isa(address) == Isa.A64
        seen += 1
    assert seen == 27


def test_thumb_functions_and_mapping_symbols(tmp_path: Path) -> None:
    if thumb.compiler() is None:
        pytest.skip(f"{thumb.CC} not installed (Debian: gcc-arm-none-eabi)")
    src = tmp_path / "t.c"
    src.write_text(thumb.SOURCE)
    exe = tmp_path / "t.elf"
    subprocess.run(
        [thumb.CC, "-O2", "-g", "-mthumb", "-march=armv7-a", "-nostdlib", "-o", str(exe), str(src)],
        check=True, capture_output=True,
    )  # fmt: skip
    s = Symbols()
    s.add_elf(exe)
    names = {f.name: f for f in s.functions()}
    assert set(names) >= {"clamp", "sign", "_start"}
    assert not any(n.startswith("$") for n in names)
    raw = _elf_function_values(exe)
    for name, f in names.items():
        assert raw[name] & 1  # the symbol says Thumb...
        assert f.start == raw[name] & ~1  # ...and the function starts on the even address
        assert s.isa(f.start) == Isa.T32
        assert s.name(f.start + 2) == f"{name}+0x2"


def _elf_function_values(path: Path) -> dict[str, int]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    out: dict[str, int] = {}
    with path.open("rb") as f:
        for sec in ELFFile(f).iter_sections():
            if isinstance(sec, SymbolTableSection):
                for sym in sec.iter_symbols():
                    if sym["st_info"]["type"] == "STT_FUNC":
                        out[sym.name] = int(sym["st_value"])
    return out


def test_cplusplus_names_are_demangled(tmp_path: Path) -> None:
    cxx = shutil.which("aarch64-linux-gnu-g++")
    if cxx is None:
        pytest.skip("aarch64-linux-gnu-g++ not installed (Debian: g++-aarch64-linux-gnu)")
    src = tmp_path / "p.cc"
    src.write_text(
        "namespace ns { template <typename T> struct Box { T v; T get() const { return v; } };\n"
        "__attribute__((noinline)) int twice(int x) { return 2 * x; } }\n"
        'extern "C" int start() { ns::Box<long> b{3}; return ns::twice(int(b.get())); }\n'
    )
    exe = tmp_path / "p"
    subprocess.run(
        [cxx, "-O1", "-g", "-nostdlib", "-ffreestanding", "-Wl,-e,start", "-o", str(exe),
         str(src)],
        check=True, capture_output=True,
    )  # fmt: skip
    s = Symbols()
    s.add_elf(exe)
    by_raw = {f.raw_name: f for f in s.functions()}
    assert by_raw["_ZN2ns5twiceEi"].name == "ns::twice(int)"
    assert by_raw["start"].name == "start"


def test_demangle_cplusplus_and_rust() -> None:
    assert demangle(["_ZN3foo3barEv", "main", "_ZN4core3fmt5write17h0123456789abcdefE"]) == [
        "foo::bar()",
        "main",
        "core::fmt::write",
    ]
    assert demangle(["_RNvCs15kBYyAo9fc_7mycrate3foo"]) == ["mycrate::foo"]


def test_bad_files_are_located_errors(tmp_path: Path) -> None:
    s = Symbols()
    with pytest.raises(InputError, match=r"nothing\.elf"):
        s.add_elf(tmp_path / "nothing.elf")
    text = tmp_path / "text.elf"
    text.write_text("hello")
    with pytest.raises(InputError, match=r"text.elf: offset 0x0: not an ELF file"):
        s.add_elf(text)
    cut = tmp_path / "cut.elf"
    cut.write_bytes((EXAMPLE / "program.elf").read_bytes()[:100])
    with pytest.raises(InputError, match=r"cut\.elf: malformed"):
        s.add_elf(cut)


def test_function_record() -> None:
    f = Function("f", "f", 0x100, 0x110, "x")
    assert 0x10F in f and 0x110 not in f


def test_a_recordings_binaries_through_its_resolver() -> None:
    from cstrace.memory.binaries import Binary, Mapping, StaticResolver
    from cstrace.memory.elf import load_elf

    path = EXAMPLE / "program.elf"
    binary = Binary("/system/bin/demo", image=load_elf(path.read_bytes(), str(path)))
    delta = 0x7000_0000_0000 - 0x40_0000
    mapping = Mapping(0x40_0000 + delta, 0x40_003C + delta, binary, delta)
    s = Symbols()
    s.add_resolver(StaticResolver(per_context=[(42, mapping)]))
    f = s.function(0x40_0038 + delta, context_id=42)
    assert f is not None and f.name == "square"
    assert (f.start, f.end) == (0x40_0034 + delta, 0x40_003C + delta)
    assert s.name(0x40_0038 + delta, 42) == "square+0x4"
    assert s.line(0x40_0038 + delta, 42) == SourceLine("program.s", 21)
    assert s.function(0x40_0038 + delta, context_id=7) is None  # another process
    assert s.function(0x40_0038) is None


@pytest.mark.parametrize("version", [4, 5])
def test_dwarf_versions_agree_with_addr2line(tmp_path: Path, version: int) -> None:
    cc, tool = prog.compiler(), shutil.which("aarch64-linux-gnu-addr2line")
    if cc is None or tool is None:
        pytest.skip("gcc-aarch64-linux-gnu (with its binutils) not installed")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "p.c").write_text(prog.SOURCE)
    exe = tmp_path / "p"
    # compiled from the parent folder: the file's folder is in the line table's directories
    subprocess.run(
        [cc, "-O1", f"-gdwarf-{version}", "-nostdlib", "-ffreestanding", "-o", str(exe),
         "src/p.c"],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    s = Symbols()
    s.add_elf(exe)
    addresses = sorted(a for rows in s.line_table().values() for a in rows)
    assert len(addresses) > 20
    done = subprocess.run(
        [tool, "-e", str(exe), *(f"{a:#x}" for a in addresses)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    for address, answer in zip(addresses, done.stdout.splitlines(), strict=True):
        file, _, line = re.sub(r" \(discriminator \d+\)$", "", answer).rpartition(":")
        assert s.line(address) == SourceLine(file, int(line)), hex(address)
        assert file == str(tmp_path / "src" / "p.c")
    text = prog.SOURCE.splitlines()
    assert all(s.source(ln.file, ln.line) == text[ln.line - 1] for ln in s.line_table())
