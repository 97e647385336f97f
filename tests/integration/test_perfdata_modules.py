"""Kernel modules in perf.data recordings: placed as the kernel places them, profiled in their
own addresses.

A loadable module is a relocatable ELF file: the kernel lays its sections out
itself (executable ones first, ``.init`` ones apart) from the address a
recording's MMAP record gives. Checked on the real recording
``perf_kernel.data`` with ``rq_stats.ko`` beside it (simpleperf's test
``inject_kernel_data`` asks for an AutoFDO block for the module: its ranges and
branches in its own addresses), and on recordings written with
``tests/perfgen.py`` around a module written with ``tests/integration/elfgen.py``:
where the recording says where the module's code went (simpleperf's FILE2), that
is followed; where the module's code is not where the trace runs, the addresses
that missed it are counted against the file found.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cstrace.elements import InstrType, Isa
from cstrace.inputs.perfdata import read_recording
from cstrace.isa.decode import decode
from cstrace.isa.types import IsaOptions
from cstrace.memory.elf import load_elf
from cstrace.protocols.etmv4 import encoder as e4
from tests.integration.elfgen import kernel_module
from tests.perfgen import AUX_RAW, ETMV4_MAGIC, PerfWriter, cs_etm_info, etmv4_params
from tests.unit.test_perfdata import run_cli

KERNEL_REC = "perf_kernel.data"
KO = "rq_stats.ko"
KO_PATH = "/vendor/lib/modules/rq_stats.ko"
KO_ID = "a535d7222f9f01d1"


def autofdo_block(
    text: str, path: str
) -> tuple[Counter[tuple[int, int]], Counter[tuple[int, int]]]:
    """The ranges and branches of the AutoFDO block of ``path``, and checks its comments."""
    for block in text.split("\n\n"):
        lines = block.strip("\n").splitlines()
        if lines and lines[-1] == f"// {path}":
            break
    else:
        raise AssertionError(f"no AutoFDO block for {path}:\n{text}")
    n = int(lines[0])
    ranges: Counter[tuple[int, int]] = Counter()
    for line in lines[1 : 1 + n]:
        span, count = line.split(":")
        a, b = span.split("-")
        ranges[(int(a, 16), int(b, 16))] += int(count)
    assert lines[1 + n] == "0"  # no address counts: trace gives ranges
    m = int(lines[2 + n])
    branches: Counter[tuple[int, int]] = Counter()
    for line in lines[3 + n : 3 + n + m]:
        pair, count = line.split(":")
        f, t = pair.split("->")
        branches[(int(f, 16), int(t, 16))] += int(count)
    assert lines[3 + n + m].startswith("// build_id: 0x")
    return ranges, branches


# --- the real recording ------------------------------------------------------------------------


def test_the_module_is_where_simpleperf_says_it_was(perfdata: Path) -> None:
    """simpleperf's FILE2 says how far into the module's memory its .text was; the layout
    cstrace makes from the file alone (the kernel's rules) agrees."""
    rec = read_recording(perfdata / KERNEL_REC)
    [entry] = [f for f in rec.file.simpleperf_files if f.path == KO_PATH]
    assert entry.type == 1 and entry.offset == 0x1000
    layout = load_elf((perfdata / KO).read_bytes(), KO).module
    assert layout is not None and layout.anchor == ".text"
    assert layout.anchor_offset == entry.offset


def test_autofdo_has_a_block_for_the_module_in_its_own_addresses(perfdata: Path) -> None:
    code, out, err = run_cli(
        "profile", str(perfdata / KERNEL_REC), "--symdir", str(perfdata), "--format", "autofdo"
    )
    assert code == 0, err
    ranges, branches = autofdo_block(out, KO_PATH)
    assert f"// build_id: 0x{KO_ID}{'0' * 24}\n// {KO_PATH}" in out
    ko = load_elf((perfdata / KO).read_bytes(), KO)
    [text] = [s for s in ko.segments if s.name == ".text"]
    assert text.address == 0
    assert ranges and branches
    # Every range is code of .text, in .text's own offsets (objdump's addresses).
    assert all(0 <= s <= e < len(text.data) for s, e in ranges), ranges
    options = IsaOptions()
    for f, t in branches:
        op = int.from_bytes(text.data[f : f + 4], "little")
        got = decode(Isa.A64, f, op, options)
        assert got.itype in (InstrType.BR, InstrType.BR_INDIRECT), (hex(f), got)
        if got.itype == InstrType.BR:
            # A direct branch goes where the instruction says (relocations are not
            # applied: a call out of the module is a branch to itself in the file).
            assert t == got.target, (hex(f), hex(t), got)
        else:
            assert t == 0  # simpleperf does not follow indirect branches
    # The decode shows the same code, at the module's .text in the kernel.
    code, out, err = run_cli(
        "decode", str(perfdata / KERNEL_REC), "--symdir", str(perfdata), "--no-summary"
    )
    assert code == 0, err
    start = 0xFFFFFF99F5896000 + 0x1000
    spans = [
        (int(x.split()[0].split("-")[0], 16), int(x.split()[0].split("-")[1], 16))
        for x in (ln.split("INSTR_RANGE")[1] for ln in out.splitlines() if "INSTR_RANGE" in ln)
    ]
    assert spans and all(start <= a < b <= start + len(text.data) for a, b in spans), spans
    assert len(spans) == sum(ranges.values())
    assert KO_PATH not in err  # found, and the trace found its code where it was put


# --- recordings written here ---------------------------------------------------------------


MODULE = 0xFFFF_8000_0100_0000
MODULE_PATH = "/lib/modules/6.1.0/extra/tracee.ko"
MODULE_ID = bytes.fromhex("8bbaf5dc62a9b644b4d4e4539737e104e4a84541")
NOP, RET = 0xD503201F, 0xD65F03C0
# .text: nop; nop; b.eq 0x10; nop; 0x10: nop; ret
TEXT = b"".join(w.to_bytes(4, "little") for w in (NOP, NOP, 0x54000040, NOP, NOP, RET))
TEXT_AT = 0x50  # two veneers and the loader's one, the ftrace trampoline, then .text


def module_recording(
    text_at: int,
    files: list[tuple[str, int, int, int]] | None = None,
    name: str = MODULE_PATH,
    build_id: bool = True,
) -> bytes:
    """A kernel recording of thread 100 running the module's .text at MODULE + ``text_at``
    (the module mapped as ``name``, with its build ID in the BUILD_ID feature or not)."""
    w = PerfWriter()
    w.build_ids = [(-1, MODULE_ID, name)] if build_id else []
    w.files = files or []
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10))]))
    w.mmap2(-1, 0, MODULE, 0x4000, 0, name, time=1)
    w.comm(100, 100, "insmod", time=2)
    w.itrace_start(100, 100, time=3)
    data = (
        e4.a_sync()
        + e4.trace_info(0)
        + e4.trace_on()
        + e4.address_context(MODULE + text_at, el=1, sf=True, ns=True, context_id=100)
        + e4.atom("EE")  # b.eq taken to 0x10, ret taken: its target follows
        + e4.address_long(0xFFFF_8000_0801_0000)
    )
    w.aux(0, len(data), AUX_RAW, pid=100, tid=100, time=4)
    w.auxtrace(data + b"\0" * (-len(data) % 8), cpu=0)
    return w.build()


@pytest.fixture()
def module_dir(tmp_path: Path) -> Path:
    d = tmp_path / "modules"
    d.mkdir()
    ko = kernel_module(
        TEXT, calls=["printk", "printk", "other"], build_id=MODULE_ID, functions={"tail": 0x10}
    )
    (d / "tracee.ko").write_bytes(ko)
    return d


@pytest.mark.parametrize(
    ("text_at", "files"),
    [
        (TEXT_AT, None),  # where the kernel's rules put it
        (0x1000, [(MODULE_PATH, 1, 0, 0x1000)]),  # where simpleperf's FILE2 says it was
        (0x1010, [(MODULE_PATH, 1, 0x8, 0x1018)]),  # FILE2 naming a symbol 8 bytes into .text
    ],
)
def test_a_module_decodes_and_profiles_in_its_own_addresses(
    tmp_path: Path, module_dir: Path, text_at: int, files: list[tuple[str, int, int, int]] | None
) -> None:
    path = tmp_path / "kernel.data"
    path.write_bytes(module_recording(text_at, files))
    code, out, err = run_cli("decode", str(path), "--symdir", str(module_dir), "--no-summary")
    assert code == 0 and "Traceback" not in err
    ranges = [
        ln.split("INSTR_RANGE")[1].split()[0] for ln in out.splitlines() if "INSTR_RANGE" in ln
    ]
    base = MODULE + text_at
    assert ranges == [f"{base:#x}-{base + 0xC:#x}", f"{base + 0x10:#x}-{base + 0x18:#x}"], out
    assert MODULE_PATH not in err, err
    code, out, err = run_cli(
        "profile", str(path), "--symdir", str(module_dir), "--format", "autofdo"
    )
    assert code == 0, err
    ranges_c, branches_c = autofdo_block(out, MODULE_PATH)
    assert ranges_c == Counter({(0x0, 0x8): 1, (0x10, 0x14): 1})
    assert branches_c == Counter({(0x8, 0x10): 1, (0x14, 0x0): 1})
    assert f"// build_id: 0x{MODULE_ID.hex()}" in out


def test_a_module_not_where_the_trace_runs_it_is_named_with_the_addresses_that_missed(
    tmp_path: Path, module_dir: Path
) -> None:
    path = tmp_path / "kernel.data"
    path.write_bytes(module_recording(0x2000))  # a layout the file does not give
    code, out, err = run_cli("decode", str(path), "--symdir", str(module_dir), "--no-summary")
    assert code == 0 and "INSTR_RANGE" not in out
    [warned] = [ln for ln in err.splitlines() if MODULE_PATH in ln]
    assert f"build ID {MODULE_ID.hex()}" in warned and "found as" in warned
    assert "1 trace address(es) in its mapping are in none of its code" in warned


def test_a_module_perf_names_by_module_name_is_found_by_file_name(
    tmp_path: Path, module_dir: Path
) -> None:
    """perf names a module whose file it did not find ``[name]``: ``name.ko`` is taken."""
    path = tmp_path / "kernel.data"
    path.write_bytes(module_recording(TEXT_AT, name="[tracee]", build_id=False))
    code, out, err = run_cli("profile", str(path), "--symdir", str(module_dir), "-f", "autofdo")
    assert code == 0, err
    ranges, _ = autofdo_block(out, "[tracee]")
    assert ranges == Counter({(0x0, 0x8): 1, (0x10, 0x14): 1})


def test_a_perf_record_kcore_folder_places_the_module_by_its_kallsyms(
    tmp_path: Path, module_dir: Path
) -> None:
    """``perf record --kcore`` keeps the running kernel's kallsyms: a module's function
    there places the module (here its .text 0x2000 into its memory, not where the file's
    layout puts it)."""
    from tests.integration.elfgen import PF_R, PF_X, PT_LOAD, ElfSpec, Section, Segment, write_elf

    folder = tmp_path / "perf.data"
    (folder / "kcore_dir").mkdir(parents=True)
    (folder / "data").write_bytes(module_recording(0x2000))
    kernel = 0xFFFF_8000_0801_0000
    core = ElfSpec(e_type=4, machine=183, bits=64)  # ET_CORE, AArch64
    core.sections.append(Section("load0", 1, 6, kernel, bytes(64), 8))
    core.segments.append(Segment(PT_LOAD, PF_R | PF_X, "load0"))
    (folder / "kcore_dir" / "kcore").write_bytes(write_elf(core))
    (folder / "kcore_dir" / "kallsyms").write_text(
        f"{kernel:016x} T _text\n{MODULE + 0x2000 + 0x10:016x} t tail\t[tracee]\n"
    )
    code, out, err = run_cli("decode", str(folder), "--symdir", str(module_dir), "--no-summary")
    assert code == 0, err
    ranges = [
        ln.split("INSTR_RANGE")[1].split()[0] for ln in out.splitlines() if "INSTR_RANGE" in ln
    ]
    base = MODULE + 0x2000
    assert ranges == [f"{base:#x}-{base + 0xC:#x}", f"{base + 0x10:#x}-{base + 0x18:#x}"], out
    assert MODULE_PATH not in err, err
