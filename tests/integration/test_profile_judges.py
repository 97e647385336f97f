"""``cstrace profile`` end to end, judged by the tools that read each format.

A small AArch64 program with debug info is built, run in an emulator and
traced with the project's ETMv4 encoder (:mod:`tests.profiles.program`); the
raw capture is profiled through the command line with ``--image PROG@BASE``.
The counts are checked against the program's source, then each profile is fed
to its consumer: ``create_llvm_prof --profiler text`` (Debian's ``autofdo``),
``llvm-profgen`` (``llvm-19``) and ``perf2bolt -pa`` (``bolt-19``). Each
consumer's test skips, naming the package, when the tool is not installed; all
skip without the cross compiler (``gcc-aarch64-linux-gnu``).
"""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.profiles import program as prog

pytestmark = pytest.mark.skipif(
    prog.compiler() is None,
    reason=f"{prog.CC} not installed (Debian: gcc-aarch64-linux-gnu); the test program "
    "cannot be built",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> prog.Program:
    pytest.importorskip("unicorn")
    return prog.build(tmp_path_factory.mktemp("prog"))


def profile(built: prog.Program, fmt: str, *extra: str, inputs: int = 1) -> str:
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    done = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "profile", *[str(built.capture)] * inputs,
         f"--image={built.path}@{prog.BASE:#x}", "--protocol=0x10=ETM4.0",
         "--core=0x10=Cortex-A53", *regs, "--format", fmt, *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name) or next(iter(sorted(glob.glob(name))), None)
        if found:
            return found
    pytest.skip(f"{names[0]} not installed")


def lines_with(text: str, pattern: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.search(pattern, ln)]


def test_the_counts_are_the_programs(built: prog.Program) -> None:
    f1 = built.symbols["f1"]
    text = profile(built, "autofdo")
    # f1 runs its loop body 100 times per call, 5 calls: the b.ne at f1+0x24 is taken
    # back to f1+0x14 495 times (the first pass enters at f1+0xc)
    assert f"{f1 + 0x24:x}->{f1 + 0x14:x}:495" in text.splitlines()
    assert text.splitlines()[-2] == f"// {built.path}"
    assert text.splitlines()[-3] == f"// build_id: 0x{built.elf.uuid}"
    bolt = profile(built, "bolt")
    assert f"B {f1 + 0x24:x} {f1 + 0x14:x} 495 0" in bolt.splitlines()
    assert f"F {f1 + 0x14:x} {f1 + 0x28:x} 5" in bolt.splitlines()  # last pass, on to ret


def test_several_inputs_are_summed(built: prog.Program) -> None:
    f1 = built.symbols["f1"]
    text = profile(built, "autofdo", inputs=2)
    assert f"{f1 + 0x24:x}->{f1 + 0x14:x}:990" in text.splitlines()


def test_binary_filter(built: prog.Program) -> None:
    assert profile(built, "autofdo", "--binary", "no-such-binary") == ""
    assert profile(built, "autofdo", "--binary", "prog$").startswith("1")


def test_create_llvm_prof_reads_the_autofdo_text(built: prog.Program, tmp_path: Path) -> None:
    create = tool("create_llvm_prof")
    afdo = tmp_path / "prog.afdo.txt"
    afdo.write_text(profile(built, "autofdo"))
    out = tmp_path / "prog.prof"
    done = subprocess.run(
        [create, "--profiler=text", f"--binary={built.path}", f"--profile={afdo}",
         f"--out={out}", "--format=text"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = out.read_text()
    # f1's loop body (line offset 2) ran 500 times; work calls f1 and f2 5 times each
    assert re.search(r"^f1:\d+:5$", result, re.M), result
    assert re.search(r"^ 2: 500$", result, re.M), result
    assert re.search(r"f1:5", result) and re.search(r"f2:5", result), result


def test_llvm_profgen_reads_the_unsymbolized_profile(built: prog.Program, tmp_path: Path) -> None:
    profgen = tool("llvm-profgen", "llvm-profgen-19", "/usr/lib/llvm-*/bin/llvm-profgen")
    raw = tmp_path / "prog.unsym"
    raw.write_text(profile(built, "profgen"))
    out = tmp_path / "prog.prof"
    done = subprocess.run(
        [profgen, f"--binary={built.path}", f"--unsymbolized-profile={raw}",
         f"--output={out}", "--format=text"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = out.read_text()
    assert lines_with(result, r"^f1:\d+:5$") and lines_with(result, r"^ 2: 500$"), result
    assert lines_with(result, r"^ 3: 10 f1:5$"), result


def test_llvm_profgen_reads_the_perf_script(built: prog.Program, tmp_path: Path) -> None:
    profgen = tool("llvm-profgen", "llvm-profgen-19", "/usr/lib/llvm-*/bin/llvm-profgen")
    script = tmp_path / "prog.script"
    script.write_text(profile(built, "perf-script", "--period=100", "--last-branch=16"))
    out = tmp_path / "prog.prof"
    done = subprocess.run(
        [profgen, f"--binary={built.path}", f"--perfscript={script}", f"--output={out}",
         "--format=text"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = out.read_text()
    assert lines_with(result, r"^f1:\d+:") and lines_with(result, r"^f2:\d+:"), result


def _recipe(heading: str) -> list[str]:
    """The commands of the fenced block after ``heading`` in docs/usage.md."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    block = text.split(heading, 1)[1].split("```", 2)[1]
    return [ln.strip() for ln in block.splitlines() if ln.strip()]


def test_the_llvm_profgen_recipe_of_the_docs_on_a_recording(
    built: prog.Program, tmp_path: Path
) -> None:
    """docs/usage.md's "From perf record to llvm-profgen", run as written on a perf.data
    recording of the program (named ``app`` on the device and here, with ``perf.data``
    in the current folder): llvm-profgen's profile names the program's functions."""
    import shlex

    profgen = tool("llvm-profgen", "llvm-profgen-19", "/usr/lib/llvm-*/bin/llvm-profgen")
    prog.recording(built, tmp_path / "perf.data")
    shutil.copy(built.path, tmp_path / "app")
    commands = _recipe("### From `perf record` to llvm-profgen")
    run = [c for c in commands if c.split()[0] in ("cstrace", "llvm-profgen")]
    assert [c.split()[0] for c in run] == ["cstrace", "llvm-profgen"], commands
    for command in run:
        argv = shlex.split(command)
        argv = (
            [sys.executable, "-m", "cstrace.cli", *argv[1:]]
            if argv[0] == "cstrace"
            else [profgen, *argv[1:]]
        )
        done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path)
        assert done.returncode == 0, (command, done.stderr)
        assert "Traceback" not in done.stderr and "No samples" not in done.stderr, done.stderr
    script = (tmp_path / "app.script").read_text()
    assert " PERF_RECORD_MMAP2 " in script and "P/-/-/0/" in script
    # The recipe writes llvm-profgen's default, binary, format: llvm-profdata reads it.
    profdata = tool("llvm-profdata", "llvm-profdata-19", "/usr/lib/llvm-*/bin/llvm-profdata")
    shown = subprocess.run(
        [profdata, "show", "--sample", "--all-functions", str(tmp_path / "app.prof")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    names = re.findall(r"^Function: (\w+):", shown.stdout, re.M)
    # One sample per 100000 instructions (the default --period) and at the end of the
    # trace: the short run gives one, with the last 64 branches (f1's loop, in work).
    assert names and set(names) <= set(built.symbols) and "work" in names, shown.stdout


def test_perf2bolt_reads_the_pre_aggregated_profile(built: prog.Program, tmp_path: Path) -> None:
    # perf2bolt picks its mode from its own name: the versioned link is llvm-bolt
    perf2bolt = tool("perf2bolt", "/usr/lib/llvm-*/bin/perf2bolt")
    agg = tmp_path / "prog.pa"
    agg.write_text(profile(built, "bolt"))
    out = tmp_path / "prog.fdata"
    done = subprocess.run(
        [perf2bolt, "-pa", "-p", str(agg), "-o", str(out), str(built.path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "traces mismatching disassembled function contents: 0 " in done.stdout, done.stdout
    fdata = out.read_text()
    # f1's back edge (b.ne at +0x24 to +0x14), in function-relative offsets
    assert re.search(r"^1 f1\S* 24 1 f1\S* 14 0 495$", fdata, re.M), fdata


# --- the same program through a perf.data recording ------------------------------------------


@pytest.fixture(scope="module")
def recorded(built: prog.Program) -> Path:
    """The run written as a perf.data recording by the test writer: its trace as an ETR's AUX
    data on CPU 0, the program mapped (MMAP2 of each loadable segment) in process 1000 at
    :data:`prog.BASE`, its build ID in the BUILD_ID feature."""
    from cstrace.inputs.files import PathBlob
    from cstrace.trace import Buffer, Dump, Source, Trace
    from tests.perfdata_writer import write_perf_data

    exe = PathBlob(built.path)
    dumps = [
        Dump(exe, prog.BASE + load.vaddr, offset=load.offset, length=load.filesz)
        for load in built.elf.loads
        if load.filesz
    ]
    trace = Trace(
        [Buffer("etr", "coresight", (PathBlob(built.capture),))],
        [Source("etm0", "etmv4", "ETM4.0", prog.REGISTERS, ("etr",), "Cortex-A53", "cpu0")],
        dumps=dumps,
    )
    path = built.path.parent / "perf.data"
    assert built.elf.build_id is not None
    write_perf_data(trace, path, comm="prog", build_ids={"prog": built.elf.build_id})
    return path


def profile_recording(built: prog.Program, recorded: Path, fmt: str, *extra: str) -> str:
    symbols = built.path.parent / "symbols"
    symbols.mkdir(exist_ok=True)
    if not (symbols / "prog").exists():
        shutil.copyfile(built.path, symbols / "prog")
    done = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "profile", str(recorded), "--symdir", str(symbols),
         "--format", fmt, *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "not found" not in done.stderr, done.stderr
    return done.stdout


def test_the_recording_profiles_as_the_capture(built: prog.Program, recorded: Path) -> None:
    from_capture = profile(built, "autofdo").splitlines()
    from_recording = profile_recording(built, recorded, "autofdo").splitlines()
    assert [x for x in from_recording if not x.startswith("//")] == [
        x for x in from_capture if not x.startswith("//")
    ]
    assert f"// build_id: 0x{built.elf.uuid}" in from_recording and "// prog" in from_recording
    for fmt in ("bolt", "profgen"):
        assert profile_recording(built, recorded, fmt) == profile(built, fmt), fmt
    perf = shutil.which("perf")
    if perf is not None:  # Debian's linux-perf reads the build ID the writer gave
        listed = subprocess.run(
            [perf, "buildid-list", "-i", str(recorded)],
            capture_output=True, text=True, check=False,
            env={"HOME": str(recorded.parent), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        if listed.returncode == 0:
            assert f"{built.elf.uuid} prog" in listed.stdout.splitlines(), listed.stdout


def test_the_judges_read_the_recordings_profiles(
    built: prog.Program, recorded: Path, tmp_path: Path
) -> None:
    """create_llvm_prof, llvm-profgen and perf2bolt on the profiles of the perf.data path, with
    the matching (unstripped) binary."""
    create = tool("create_llvm_prof")
    profgen = tool("llvm-profgen", "llvm-profgen-19", "/usr/lib/llvm-*/bin/llvm-profgen")
    perf2bolt = tool("perf2bolt", "/usr/lib/llvm-*/bin/perf2bolt")

    afdo = tmp_path / "prog.afdo.txt"
    afdo.write_text(profile_recording(built, recorded, "autofdo"))
    out = tmp_path / "afdo.prof"
    done = subprocess.run(
        [create, "--profiler=text", f"--binary={built.path}", f"--profile={afdo}",
         f"--out={out}", "--format=text"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.search(r"^ 2: 500$", out.read_text(), re.M), out.read_text()

    raw = tmp_path / "prog.unsym"
    raw.write_text(profile_recording(built, recorded, "profgen"))
    out = tmp_path / "profgen.prof"
    done = subprocess.run(
        [profgen, f"--binary={built.path}", f"--unsymbolized-profile={raw}", f"--output={out}",
         "--format=text"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = out.read_text()
    assert lines_with(result, r"^f1:\d+:5$") and lines_with(result, r"^ 3: 10 f1:5$"), result

    agg = tmp_path / "prog.pa"
    agg.write_text(profile_recording(built, recorded, "bolt"))
    fdata = tmp_path / "prog.fdata"
    done = subprocess.run(
        [perf2bolt, "-pa", "-p", str(agg), "-o", str(fdata), str(built.path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "traces mismatching disassembled function contents: 0 " in done.stdout, done.stdout
    assert re.search(r"^1 f1\S* 24 1 f1\S* 14 0 495$", fdata.read_text(), re.M)
