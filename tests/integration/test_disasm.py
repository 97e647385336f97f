"""Executed instructions and ``cstrace disasm``, against emulators, models and binutils.

- The AArch64 program of :mod:`tests.profiles.program` and the Thumb-2 program
  of :mod:`tests.profiles.thumb_program` run in unicorn; the instructions
  :func:`cstrace.analyses.instructions.iter_executed` walks from their ETMv4
  traces are the instructions the emulator executed, in order, exactly.
- ``cstrace disasm`` of the etm_demo example (a DS-5 snapshot whose memory
  dumps hold the code) with ``--image program.elf``: the instructions are the
  ones the generator's model of the core executed, named by function, with
  the mnemonic binutils' objdump gives and the source line of ``program.s``.
- On the Thumb-2 program, the instructions of IT blocks carry their
  condition, as ``arm-none-eabi-objdump`` writes them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import cstrace
from cstrace.analyses.instructions import Disassembler, Executed, Passed, iter_executed
from cstrace.cli import main
from cstrace.elements import Exception_, InstrType, Isa
from tests.conftest import ROOT
from tests.profiles import program as prog
from tests.profiles import thumb_program as thumb

EXAMPLE = ROOT / "examples" / "etm_demo"
LINE = re.compile(
    r"^([0-9a-f]{8}|[0-9a-f]{16})  (\S*)\s+((?:[0-9a-f]{4} ?){1,2}|[0-9a-f]{8})\s+(.*)$"
)


def regs(registers: dict[str, int]) -> list[str]:
    return [f"--reg=0x10:{k}={v:#x}" for k, v in registers.items()]


@pytest.fixture(scope="module")
def a64(tmp_path_factory: pytest.TempPathFactory) -> prog.Program:
    return prog.build_or_skip(tmp_path_factory.mktemp("a64"))


@pytest.fixture(scope="module")
def t32(tmp_path_factory: pytest.TempPathFactory) -> thumb.Program:
    if thumb.compiler() is None:
        pytest.skip(f"{thumb.CC} not installed (Debian: gcc-arm-none-eabi)")
    pytest.importorskip("unicorn")
    return thumb.build(tmp_path_factory.mktemp("t32"))


def _open(capture: Path, image: str, registers: dict[str, int]) -> cstrace.Trace:
    return cstrace.open_trace(
        capture,
        images=[image],
        protocols=["0x10=ETM4.0"],
        cores=["0x10=Cortex-A53"],
        registers=[f"0x10:{k}={v:#x}" for k, v in registers.items()],
    )


def _check_walk(steps: list[Executed | Passed], executed: list[int]) -> list[Executed]:
    """The instructions walked are the emulator's, up to the last waypoint the trace has."""
    walked = [s for s in steps if isinstance(s, Executed)]
    addresses = [s.address for s in walked]
    assert addresses == executed[: len(addresses)]
    # what the trace cannot show: the instructions after the last branch, up to the spin
    assert 0 < len(executed) - len(addresses) <= 8
    for s, nxt in zip(walked, executed[1:], strict=False):
        if s.waypoint is not None and s.waypoint != InstrType.OTHER:
            assert s.taken == (nxt != s.address + s.size)
        assert len(s.opcode) == s.size
    return walked


def test_aarch64_instructions_are_the_emulators(a64: prog.Program) -> None:
    trace = _open(a64.capture, f"{a64.path}@{prog.BASE:#x}", prog.REGISTERS)
    walked = _check_walk(list(iter_executed(trace)), a64.executed)
    assert {s.isa for s in walked} == {Isa.A64}
    assert all(s.size == 4 and s.trace_id == 0x10 for s in walked)
    data = a64.path.read_bytes()
    load = a64.elf.loads[0]
    for s in walked[:200]:
        off = s.address - prog.BASE - load.vaddr + load.offset
        assert s.opcode == data[off : off + 4]


def test_thumb_instructions_are_the_emulators(t32: thumb.Program) -> None:
    trace = _open(t32.capture, str(t32.path), thumb.REGISTERS)
    walked = _check_walk(list(iter_executed(trace)), t32.executed)
    assert {s.isa for s in walked} == {Isa.T32}
    assert {s.size for s in walked} == {2, 4}
    assert t32.failed <= {s.address for s in walked}


def disasm(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["disasm", *args])
    out, err = capsys.readouterr()
    return status, out, err


def instruction_lines(out: str) -> list[re.Match[str]]:
    found = [LINE.match(line) for line in out.splitlines()]
    return [m for m in found if m is not None]


def model_addresses() -> list[int]:
    from tests.unit.test_examples import generator

    gen = generator()
    user, kernel = gen.user_program(), gen.kernel_handler()
    steps = gen.run_program(
        [(gen.USER_BASE, user.code()), (gen.EL0_SYNC, kernel.code())], gen.USER_BASE
    )
    return [s.pc for s in steps]


def objdump_mnemonics(tool: str, elf: Path) -> dict[int, str]:
    done = subprocess.run([tool, "-d", str(elf)], capture_output=True, text=True, check=True)
    out = {}
    for line in done.stdout.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\t[0-9a-f ]+\t(\S+)", line)
        if m:
            out[int(m.group(1), 16)] = m.group(2)
    return out


def test_disasm_of_the_example_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = disasm(str(EXAMPLE), "--image", str(EXAMPLE / "program.elf"), capsys=capsys)
    assert status == 0, err
    assert err == ""
    rows = instruction_lines(out)
    model = model_addresses()
    # the model runs on in its final loop; the trace has what its last atoms say
    assert [int(m.group(1), 16) for m in rows] == model[: len(rows)]
    assert len(rows) >= len(model) - 2
    listing = (EXAMPLE / "program.txt").read_text()
    source = (EXAMPLE / "program.s").read_text().splitlines()
    tool = shutil.which("aarch64-linux-gnu-objdump")
    judged = objdump_mnemonics(tool, EXAMPLE / "program.elf") if tool else {}
    for m in rows:
        address, name, opcode, rest = int(m.group(1), 16), m.group(2), m.group(3), m.group(4)
        assert name.split("+")[0] in ("_start", "square", "el0_sync", "panic")
        assert f"{address:016x}  {opcode.strip()}" in listing
        text, where = re.split(r"\s{2,}", rest.strip())
        file, line = where.split(":")
        assert file == "program.s"
        assert source[int(line) - 1].split()[0] == text.split()[0]  # the mnemonic of that line
        if judged:
            assert text.split()[0] == judged[address]
    # an exception after each SVC, in line
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if " svc #0" in line:
            assert lines[i + 1].startswith("-- EXCEPTION")
    assert "-- SWTRACE" in out  # the STM's messages


def test_disasm_with_source_and_filters(capsys: pytest.CaptureFixture[str]) -> None:
    image = ["--image", str(EXAMPLE / "program.elf")]
    _, full, _ = disasm(str(EXAMPLE), *image, capsys=capsys)
    status, out, _ = disasm(str(EXAMPLE), *image, "--source", capsys=capsys)
    assert status == 0
    assert "program.s:20  mul x0, x0, x0" in out.splitlines()
    assert [m.group(1) for m in instruction_lines(out)] == [
        m.group(1) for m in instruction_lines(full)
    ]
    _, out, _ = disasm(str(EXAMPLE), *image, "--last", "3", capsys=capsys)
    etm = out.split("# source STM_0")[0]
    assert [m.group(0) for m in instruction_lines(etm)] == [
        m.group(0) for m in instruction_lines(full)
    ][-3:]
    _, out, _ = disasm(str(EXAMPLE), *image, "--function", "square", capsys=capsys)
    names = [m.group(2) for m in instruction_lines(out)]
    assert names == ["square", "square+0x4"] * 3
    _, out, _ = disasm(str(EXAMPLE), *image, "--range", "0x400008:0x400010", capsys=capsys)
    assert [m.group(1)[-2:] for m in instruction_lines(out)] == ["08", "0c"] * 3
    # the same image placed where it is linked: the same listing
    _, placed, _ = disasm(
        str(EXAMPLE), "--image", f"{EXAMPLE / 'program.elf'}@0x400000", capsys=capsys
    )
    assert placed == full


def test_disasm_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.txt"
    status, printed, _ = disasm(
        str(EXAMPLE), "--image", str(EXAMPLE / "program.elf"), "-o", str(out), capsys=capsys
    )
    assert status == 0 and printed == ""
    _, full, _ = disasm(str(EXAMPLE), "--image", str(EXAMPLE / "program.elf"), capsys=capsys)
    assert out.read_text() == full


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--image", "/no/such.elf"], "/no/such.elf: image file not found"),
        (["--function", "nosuch"], "--function 'nosuch': no function"),
        (["--range", "0x10"], "--range '0x10': give START:END"),
        (["--last", "0"], "--last must be a positive"),
    ],
)
def test_disasm_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = disasm(str(EXAMPLE), *args, capsys=capsys)
    assert status == 2
    assert err.startswith("cstrace: error: ") and message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_disasm_of_a_damaged_elf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.elf"
    cut.write_bytes((EXAMPLE / "program.elf").read_bytes()[:200])
    status, _, err = disasm(str(EXAMPLE), "--image", str(cut), capsys=capsys)
    assert status == 2
    assert f"{cut}" in err and "malformed" in err and len(err.splitlines()) == 1


def test_thumb_it_blocks_show_their_conditions(
    t32: thumb.Program, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = disasm(
        str(t32.capture), "--image", str(t32.path), "--protocol=0x10=ETM4.0",
        "--core=0x10=Cortex-A53", *regs(thumb.REGISTERS), capsys=capsys,
    )  # fmt: skip
    assert status == 0, err
    rows = instruction_lines(out)
    texts = {int(m.group(1), 16): re.split(r"\s{2,}", m.group(4).strip())[0] for m in rows}
    # the emulator saw these fail their condition in an IT block: they are conditional
    assert t32.failed
    conds = ("eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt",
             "gt", "le")  # fmt: skip
    for address in t32.failed:
        mnemonic = texts[address].split()[0].split(".")[0]
        assert mnemonic.endswith(conds), texts[address]
    tool = shutil.which("arm-none-eabi-objdump")
    if tool is None:
        pytest.skip("arm-none-eabi-objdump not installed (Debian: binutils-arm-none-eabi)")
    judged = objdump_mnemonics(tool, t32.path)

    def plain(mnemonic: str) -> str:
        return re.sub(r"\.[nw]$", "", mnemonic)

    for address, text in texts.items():
        assert plain(text.split()[0]) == plain(judged[address]), hex(address)


def test_disassembler_it_state_follows_execution() -> None:
    d = Disassembler()
    ite_ne = bytes.fromhex("14bf")
    movs_r0_1 = bytes.fromhex("0120")
    assert d.text(0x100, Isa.T32, ite_ne) == "ite ne"
    assert d.text(0x102, Isa.T32, movs_r0_1) == "movne r0, #1"
    assert d.text(0x104, Isa.T32, movs_r0_1) == "moveq r0, #1"
    assert d.text(0x106, Isa.T32, movs_r0_1) == "movs r0, #1"  # after the block
    assert d.text(0x100, Isa.T32, ite_ne) == "ite ne"
    assert d.text(0x200, Isa.T32, movs_r0_1) == "movs r0, #1"  # elsewhere: no longer in it
    assert d.text(0x1000, Isa.A64, bytes.fromhex("c0035fd6")) == "ret"
    assert d.text(0x1000, Isa.A32, bytes.fromhex("1eff2fe1")) == "bx lr"
    assert d.text(0x1000, Isa.A64, bytes.fromhex("0a000094")) == "bl #0x1028"
    assert d.text(0x2000, Isa.A64, bytes.fromhex("0a000094")) == "bl #0x2028"  # PC-relative


def test_exceptions_pass_through(a64: prog.Program) -> None:
    trace = _open(a64.capture, f"{a64.path}@{prog.BASE:#x}", prog.REGISTERS)
    passed = [s for s in iter_executed(trace) if isinstance(s, Passed)]
    assert not any(isinstance(p.element, Exception_) for p in passed)
    assert [p.index for p in passed] == sorted(p.index for p in passed)


def test_each_process_has_its_own_code(tmp_path: Path) -> None:
    """Two processes with different code at one address (an event log places them): each
    instruction's opcode is read from its own process's image, as the decoder read it."""
    from cstrace.inputs import open_trace_input
    from tests.integration.test_event_log_decode import A_CODE, B_CODE, PROCESSES, make_package

    a, b = 0x4D2 << 8, 0x162E << 8
    path = make_package(tmp_path / "p", [(None, a), (None, b), (None, a)], PROCESSES, "pid")
    steps = list(iter_executed(open_trace_input(path)))
    walked = [s for s in steps if isinstance(s, Executed)]
    assert [s.context_id for s in walked] == [a] * 3 + [b] * 2 + [a] * 3
    for s in walked:
        code = A_CODE if s.context_id == a else B_CODE
        assert s.opcode == code[s.address - 0x8000 : s.address - 0x7FFC]
    assert Disassembler().text(walked[3].address + 4, Isa.A32, walked[4].opcode) == "b #0x8020"


def test_disasm_of_a_recording_says_who_ran(
    perfdata: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cstrace.elements import InstrRange

    path = perfdata / "perf_etm.data"
    status, out, err = disasm(str(path), "--symdir", str(perfdata), capsys=capsys)
    assert status == 0, err
    trace = cstrace.open_trace(path, symdirs=[perfdata])
    ctx = trace.buffers[0].context
    assert ctx is not None
    assert f"-- RUNNING          cpu {ctx.cpu}  pid {ctx.pid}  tid {ctx.tid}" in out.splitlines()
    expected = sum(
        e.num_instr for _, e in cstrace.iter_elements(trace) if isinstance(e, InstrRange)
    )
    assert len(instruction_lines(out)) == expected > 0
