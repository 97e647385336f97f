"""The analyses of issue 14 (disasm, coverage, profile, timeline, query) on inputs they
have not been written for, and on bad inputs.

Judges: each command's exit status and its standard error (no traceback; bad input is
one ``cstrace: error:`` line naming the file); the outputs' own readers: the lcov
tracefile by a small parser of its record grammar (and genhtml when installed),
Cobertura by an XML parser, callgrind by ``callgrind_annotate`` when installed, the
Perfetto trace by the perfetto package's protobuf ``Trace`` class.

The smoke test runs over a handful of small corpus snapshots and the examples; the
bad-input tests use the AArch64 program of :mod:`tests.profiles.program` (built with
``aarch64-linux-gnu-gcc -g``) and damaged copies of it.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from cstrace.cli import main
from tests.conftest import ROOT
from tests.profiles import program as prog

SMALL_SNAPSHOTS = [
    "a57_single_step", "init-short-addr", "stm_only", "juno-uname-001", "TC2", "Snowball",
    "itm_only_csformat", "a55-test-tpiu", "event_test", "ete_ip", "trace_cov_a15",
]  # fmt: skip
"""Small corpus snapshots of different protocols (ETMv4, ETMv3/PTM, STM), each a few
seconds for all the commands."""

EXAMPLES = ["etm_demo", "coverage_demo", "stm_demo"]


def run(*args: str) -> tuple[int, str, str]:
    """Run the command line in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    import sys

    old = sys.stderr
    sys.stderr = err
    try:
        with redirect_stdout(out):
            code = main(list(args))
    finally:
        sys.stderr = old
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return code, out.getvalue(), err.getvalue()


def check_lcov(text: str) -> int:
    """Parse an lcov tracefile: its records, one SF..end_of_record block per file, counts
    that are numbers; the number of files."""
    files = 0
    in_file = False
    for line in text.splitlines():
        if line == "end_of_record":
            assert in_file, "end_of_record outside a file"
            in_file = False
            continue
        key, sep, value = line.partition(":")
        assert sep, f"not a record: {line!r}"
        if key == "TN":
            continue
        if key == "SF":
            assert not in_file, "SF inside a file"
            in_file, files = True, files + 1
            continue
        assert in_file, f"{key} outside a file"
        fields = value.split(",")
        if key == "DA":
            assert len(fields) >= 2 and int(fields[0]) > 0 and int(fields[1]) >= 0
        elif key == "FN":
            assert len(fields) >= 2 and int(fields[0]) > 0
        elif key == "FNDA":
            assert len(fields) == 2 and int(fields[0]) >= 0
        elif key == "BRDA":
            assert len(fields) == 4 and (fields[3] == "-" or int(fields[3]) >= 0)
        elif key in ("LF", "LH", "FNF", "FNH", "BRF", "BRH"):
            assert int(value) >= 0
        else:
            raise AssertionError(f"unknown lcov record {key}")
    assert not in_file, "the last file has no end_of_record"
    return files


def check_perfetto(path: Path) -> int:
    """Parse a Perfetto trace with the perfetto package; its number of packets."""
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    for packet in trace.packet:
        assert packet.timestamp >= 0
    return len(trace.packet)


def check_callgrind(path: Path) -> None:
    """callgrind_annotate reads the profile (when it is installed)."""
    tool = shutil.which("callgrind_annotate")
    if tool is None:
        return
    done = subprocess.run([tool, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def inputs() -> Iterator[object]:
    from tests.conftest import corpus_dir

    corpus = corpus_dir()
    for name in SMALL_SNAPSHOTS:
        if corpus is None:
            yield pytest.param(None, id=name, marks=pytest.mark.skip(reason="no corpus"))
        else:
            yield pytest.param(corpus / "snapshots" / name, id=name)
    for name in EXAMPLES:
        yield pytest.param(ROOT / "examples" / name, id=name)


@pytest.mark.parametrize("snapshot", list(inputs()))
def test_every_command_on_small_inputs(snapshot: Path, tmp_path: Path) -> None:
    if not snapshot.exists():
        pytest.skip(f"{snapshot} not found")
    s = str(snapshot)
    ok = (0, 2)  # 2: the trace has errors, which decoding reports (and the command still ends)

    code, out, err = run("disasm", s)
    assert code in ok, err
    assert out.startswith("# source") or not out.strip()

    code, out, err = run("coverage", "-f", "lcov", s)
    assert code in ok, err
    files = check_lcov(out)
    if files == 0:
        assert "no source lines" in err
    elif shutil.which("genhtml"):
        info = tmp_path / "c.info"
        info.write_text(out)
        done = subprocess.run(
            ["genhtml", "-q", "--ignore-errors", "source", "-o", str(tmp_path / "html"), str(info)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    code, out, err = run("coverage", "-f", "cobertura", s)
    assert code in ok, err
    assert ET.fromstring(out).tag == "coverage"

    code, out, err = run("coverage", "-f", "html", s)
    assert code in ok, err
    assert out.lstrip().lower().startswith("<!doctype html")

    cg = tmp_path / "callgrind.out"
    code, _, err = run("profile", "-f", "callgrind", "-o", str(cg), s)
    assert code in ok, err
    check_callgrind(cg)

    code, out, err = run("profile", "-f", "folded", s)
    assert code in ok, err
    for line in out.splitlines():
        stack, _, count = line.rpartition(" ")
        assert stack and int(count) > 0, line

    code, out, err = run("profile", "-f", "functions", "--table", "csv", s)
    assert code in ok, err

    pf = tmp_path / "t.pftrace"
    code, _, err = run("timeline", "-o", str(pf), s)
    assert code in ok, err
    assert check_perfetto(pf) > 0

    svg = tmp_path / "t.svg"
    code, _, err = run("timeline", "-o", str(svg), s)
    assert code in ok, err
    ET.fromstring(svg.read_text())

    code, out, err = run("query", "-f", "csv", s, "select count(*) as n from elements")
    assert code in ok, err
    assert out.splitlines()[0] == "n" and int(out.splitlines()[1]) >= 0


def test_timestamps_with_the_top_bit_set_make_a_perfetto_trace(
    corpus: Path, tmp_path: Path
) -> None:
    snap = corpus / "snapshots" / "ts_bit64_set"
    if not snap.is_dir():
        pytest.skip("ts_bit64_set not in the corpus")
    pf = tmp_path / "t.pftrace"
    code, _, err = run("timeline", "-o", str(pf), str(snap))
    assert code == 0, err
    assert check_perfetto(pf) > 0


# -- bad inputs --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> prog.Program:
    return prog.build_or_skip(tmp_path_factory.mktemp("prog"))


def raw_args(built: prog.Program, image: Path | str) -> list[str]:
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    return [
        str(built.capture), f"--image={image}@{prog.BASE:#x}", "--protocol=0x10=ETM4.0",
        "--core=0x10=Cortex-A53", *regs,
    ]  # fmt: skip


COMMANDS: dict[str, list[str]] = {
    "disasm": ["disasm", "--source"],
    "coverage": ["coverage", "-f", "lcov"],
    "html": ["coverage", "-f", "html"],
    "profile": ["profile", "-f", "callgrind"],
    "query": ["query"],
}


def command(name: str, built: prog.Program, image: Path | str, tmp_path: Path) -> list[str]:
    args = [*COMMANDS.get(name, []), *raw_args(built, image)]
    if name == "timeline":
        return ["timeline", "-o", str(tmp_path / "t.pftrace"), *args]
    if name == "query":
        return [*args, "select file, line, count(*) from instructions group by all"]
    return args


ALL = [*COMMANDS, "timeline"]


def one_error(err: str, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("cstrace: error:")]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def damaged(built: prog.Program, folder: Path, section: str, step: int) -> Path:
    """A copy of the program with every ``step``-th byte of ``section`` flipped."""
    from elftools.elf.elffile import ELFFile

    data = bytearray(built.path.read_bytes())
    with built.path.open("rb") as f:
        sec = ELFFile(f).get_section_by_name(section)
        assert sec is not None
        start, size = int(sec["sh_offset"]), int(sec["sh_size"])
    for i in range(start, start + size, step):
        data[i] ^= 0xFF
    out = folder / f"damaged{section}"
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("name", ALL)
def test_the_program_itself_gives_results(built: prog.Program, name: str, tmp_path: Path) -> None:
    code, out, err = run(*command(name, built, built.path, tmp_path))
    assert code == 0, err
    assert "error" not in err
    if name == "coverage":
        assert check_lcov(out) == 1


@pytest.mark.parametrize("name", ALL)
def test_missing_image(built: prog.Program, name: str, tmp_path: Path) -> None:
    code, _, err = run(*command(name, built, tmp_path / "nope.elf", tmp_path))
    assert code == 2
    one_error(err, "nope.elf", "not found")


@pytest.mark.parametrize("name", ALL)
def test_truncated_elf(built: prog.Program, name: str, tmp_path: Path) -> None:
    cut = tmp_path / "cut.elf"
    cut.write_bytes(built.path.read_bytes()[:3000])
    code, _, err = run(*command(name, built, cut, tmp_path))
    assert code == 2
    one_error(err, "cut.elf", "malformed")


@pytest.mark.parametrize("name", ALL)
def test_elf_for_another_machine(built: prog.Program, name: str, tmp_path: Path) -> None:
    data = bytearray(built.path.read_bytes())
    data[0x12:0x14] = (62).to_bytes(2, "little")  # EM_X86_64
    other = tmp_path / "x86.elf"
    other.write_bytes(bytes(data))
    code, _, err = run(*command(name, built, other, tmp_path))
    assert code == 2
    one_error(err, "x86.elf", "offset 0x12", "EM_X86_64")


@pytest.mark.parametrize("name", ["disasm", "profile"])
def test_not_an_elf_is_raw_code_with_a_warning(
    built: prog.Program, name: str, tmp_path: Path
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    code, _, err = run(*command(name, built, text, tmp_path))
    assert code == 0, err
    if name == "disasm":
        assert "notes.txt: not an ELF file" in err


@pytest.mark.parametrize("name", ALL)
def test_stripped_elf_gives_results_without_names(
    built: prog.Program, name: str, tmp_path: Path
) -> None:
    strip = shutil.which("aarch64-linux-gnu-strip")
    if strip is None:
        pytest.skip("aarch64-linux-gnu-strip not installed (Debian: binutils-aarch64-linux-gnu)")
    stripped = tmp_path / "stripped"
    subprocess.run([strip, "-o", str(stripped), str(built.path)], check=True)
    code, out, err = run(*command(name, built, stripped, tmp_path))
    assert code == 0, err
    if name == "coverage":
        assert check_lcov(out) == 0 and "no source lines" in err
    if name == "disasm":
        assert " work" not in out  # no symbols: addresses only


@pytest.mark.parametrize("section", [".debug_line", ".debug_info"])
@pytest.mark.parametrize("name", ALL)
def test_damaged_dwarf(built: prog.Program, name: str, section: str, tmp_path: Path) -> None:
    bad = damaged(built, tmp_path, section, 3)
    code, _, err = run(*command(name, built, bad, tmp_path))
    assert code == 2
    line = one_error(err, bad.name, "malformed DWARF")
    assert "offset 0x" in line


@pytest.mark.parametrize("name", ["disasm", "html"])
def test_missing_source_is_one_note(built: prog.Program, name: str, tmp_path: Path) -> None:
    # The program's DWARF names prog.c in its build folder: a copy built elsewhere,
    # its source removed.
    (tmp_path / "b").mkdir()
    other = prog.build(tmp_path / "b")
    (tmp_path / "b" / "prog.c").unlink()
    code, out, err = run(*command(name, built, other.path, tmp_path))
    assert code == 0, err
    notes = [ln for ln in err.splitlines() if "source file" in ln]
    assert len(notes) == 1 and "prog.c" in notes[0], err
    assert out


def test_bad_sql(built: prog.Program, tmp_path: Path) -> None:
    code, _, err = run("query", *raw_args(built, built.path), "selec nothing from")
    assert code == 2
    one_error(err, "query", "syntax error")


@pytest.mark.parametrize("sql", ["", " ; "])
def test_empty_sql(built: prog.Program, sql: str) -> None:
    code, _, err = run("query", *raw_args(built, built.path), sql)
    assert code == 2
    one_error(err, "no SQL")


@pytest.mark.parametrize("name", ["disasm", "timeline"])
def test_image_is_a_folder(built: prog.Program, name: str, tmp_path: Path) -> None:
    code, _, err = run(*command(name, built, tmp_path, tmp_path))
    assert code == 2
    one_error(err, str(tmp_path), "folder")


def test_unknown_table(built: prog.Program, tmp_path: Path) -> None:
    code, _, err = run("query", *raw_args(built, built.path), "select * from nosuchtable")
    assert code == 2
    one_error(err, "nosuchtable")


@pytest.mark.parametrize(
    "name", ["timeline", "coverage", "disasm", "profile", "query"]
)  # fmt: skip
def test_output_into_a_missing_folder(built: prog.Program, name: str, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "out.file"
    args = command(name, built, built.path, tmp_path)
    if name == "timeline":
        args[2] = str(target)
    else:
        args[1:1] = ["-o", str(target)]
    code, _, err = run(*args)
    assert code == 2
    one_error(err, str(target))
    assert not target.parent.exists()
    # said before decoding: nothing else on stderr (no decode notes, no summary)
    assert len(err.splitlines()) == 1, err


def test_timeline_to_a_folder(built: prog.Program, tmp_path: Path) -> None:
    args = command("timeline", built, built.path, tmp_path)
    args[2] = str(tmp_path)
    code, _, err = run(*args)
    assert code == 2
    one_error(err, str(tmp_path))


@pytest.mark.parametrize("command", [["coverage", "--format", "text"], ["disasm"],
                                     ["profile", "--format", "functions"], ["query",
                                     "SELECT count(*) FROM elements"]])  # fmt: skip
def test_corrupt_trace_is_reported_after_an_analysis(
    corpus: Path, tmp_path: Path, command: list[str]
) -> None:
    """Bytes overwritten in the middle of an ETMv4 buffer (0x0A, not a packet header the
    decoder takes): the analysis still answers (the decoder resynchronises) and says,
    after its results, what the trace lost; the intact capture gives no such note."""
    snap = tmp_path / "snap"
    shutil.copytree(corpus / "snapshots" / "a57_single_step", snap)
    buffer = snap / "CSTMC_TRACE_FIFO.bin"
    buffer.chmod(0o644)
    data = bytearray(buffer.read_bytes())
    data[42:73] = b"\x0a" * 31
    buffer.write_bytes(bytes(data))

    def line(source: Path) -> list[str]:
        # query takes its SQL after the input; the others take options before it.
        return (
            [command[0], str(source), *command[1:]]
            if command[0] == "query"
            else [*command, str(source)]
        )

    _, _, clean_err = run(*line(corpus / "snapshots" / "a57_single_step"))
    assert "lost data" not in clean_err
    code, _, err = run(*line(snap))
    assert code == 0, err
    assert "the trace lost data" in err
    assert "trace ID 0x10" in err
