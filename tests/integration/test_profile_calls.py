"""``cstrace profile --format functions|callgrind|folded|flamegraph`` against the emulator.

The AArch64 test program (:mod:`tests.profiles.program`: ``work`` calls
``f1`` five times and ``f2`` five times) is built, run in unicorn and traced
with the project's ETMv4 encoder, once plain and once with a timestamp after
every waypoint counting the instructions executed so far. The call counts,
the instructions per function and per call stack, and the time of each call
(in timestamp ticks, which here are instructions) are checked against the
emulator's own record of the run; ``callgrind_annotate`` (Debian's
``valgrind``) must read the callgrind output and name the hot function. The
tests skip without the cross compiler (``gcc-aarch64-linux-gnu``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import replace
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


@pytest.fixture(scope="module")
def timed(built: prog.Program) -> prog.Program:
    capture = prog.timed_capture(built, built.capture.with_name("timed.bin"))
    return replace(built, capture=capture)


def profile(built: prog.Program, fmt: str, *extra: str, timestamps: bool = False) -> str:
    regs = prog.TIMED_REGISTERS if timestamps else prog.REGISTERS
    done = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "profile", str(built.capture),
         f"--image={built.path}@{prog.BASE:#x}", "--protocol=0x10=ETM4.0",
         "--core=0x10=Cortex-A53", *[f"--reg=0x10:{k}={v:#x}" for k, v in regs.items()],
         "--format", fmt, *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def function_of(built: prog.Program, address: int) -> str:
    """The function holding a run-time address, from the ELF symbol addresses alone."""
    starts = sorted((prog.BASE + a, n) for n, a in built.symbols.items())
    name = ""
    for start, n in starts:
        if start <= address:
            name = n
    return name


def per_call(built: prog.Program, name: str) -> list[int]:
    """The instructions of each call of ``name`` in the emulator's run (entry to return)."""
    entry = prog.BASE + built.symbols[name]
    out = []
    executed = built.executed
    for i, address in enumerate(executed):
        if address == entry:
            j = i
            while function_of(built, executed[j]) == name:
                j += 1
            out.append(j - i)
    return out


def traced(built: prog.Program) -> list[int]:
    """The executed instructions the trace covers: up to the last waypoint (the spin loop's
    nop and what follows the last branch are not traced)."""
    work = prog.BASE + built.symbols["work"]
    last = max(i for i, a in enumerate(built.executed) if work <= a < work + 0x60)
    return built.executed[: last + 1 + 3]  # work's ret, then _start's str, before the loop


def test_call_counts_and_instructions_are_the_programs(built: prog.Program) -> None:
    table = json.loads(profile(built, "functions", "--table", "json"))
    by = {f["function"]: f for f in table["functions"]}
    assert by["f1"]["calls"] == 5 and by["f2"]["calls"] == 5 and by["work"]["calls"] == 1
    ran = Counter(function_of(built, a) for a in built.executed)
    for name in ("f1", "f2"):
        assert by[name]["instructions"] == ran[name]
        assert by[name]["inclusive_instructions"] == sum(per_call(built, name))
    assert table["instructions"] == sum(by[n]["instructions"] for n in by)


def test_folded_stacks_sum_to_the_instructions(built: prog.Program) -> None:
    folded = {}
    for line in profile(built, "folded").splitlines():
        stack, count = line.rsplit(" ", 1)
        folded[stack] = int(count)
    ran = Counter(function_of(built, a) for a in built.executed)
    assert folded["_start;work;f1"] == ran["f1"]
    assert folded["_start;work;f2"] == ran["f2"]
    table = json.loads(profile(built, "functions", "--table", "json"))
    assert sum(folded.values()) == table["instructions"]
    assert abs(table["instructions"] - len(built.executed)) <= 4  # the untraced tail


def test_times_per_call_are_the_emulators(timed: prog.Program) -> None:
    table = json.loads(profile(timed, "functions", "--table", "json", timestamps=True))
    assert table["time_units"] == ["ticks"]
    by = {f["function"]: f for f in table["functions"]}
    for name in ("f1", "f2"):
        calls = per_call(timed, name)
        t = by[name]["time"]["ticks"]
        assert (t["count"], t["total"]) == (len(calls), sum(calls))
        assert (t["min"], t["max"]) == (min(calls), max(calls))
    text = profile(timed, "functions", timestamps=True)
    assert "time per call in timestamp ticks" in text.splitlines()[0]


def test_callgrind_annotate_names_the_hot_function(built: prog.Program, tmp_path: Path) -> None:
    tool = shutil.which("callgrind_annotate")
    if tool is None:
        pytest.skip("callgrind_annotate not installed (Debian: valgrind)")
    out = tmp_path / "callgrind.out"
    out.write_text(profile(built, "callgrind"))
    done = subprocess.run(
        [tool, "--inclusive=yes", str(out)], capture_output=True, text=True, check=True
    )
    assert "WARNING" not in done.stderr, done.stderr
    rows = [ln for ln in done.stdout.splitlines() if ":" in ln and "(" in ln and "%" in ln]
    ran = Counter(function_of(built, a) for a in built.executed)
    # inclusive: _start, then work hold everything; the hottest leaf comes next
    names = [r.rsplit(":", 1)[1].split()[0] for r in rows if "prog.c:" in r]
    assert names[:2] == ["_start", "work"]
    assert names[2] == max(("f1", "f2"), key=lambda n: ran[n])
    done = subprocess.run([tool, str(out)], capture_output=True, text=True, check=True)
    self_rows = [r for r in done.stdout.splitlines() if "prog.c:" in r and "%" in r]
    assert self_rows[0].rstrip().endswith(max(("f1", "f2"), key=lambda n: ran[n]))


def test_the_flame_graph_is_svg_with_a_box_per_stack(built: prog.Program) -> None:
    svg = ET.fromstring(profile(built, "flamegraph"))
    titles = [t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert any(t.startswith("_start;work;f1 (") for t in titles)
    assert any(t.startswith("_start;work;f2 (") for t in titles)


DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def test_the_docs_flame_graph_is_the_commands(tmp_path: Path) -> None:
    out = tmp_path / "flamegraph.svg"
    root = DOCS_IMG.parents[1]
    subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "profile", "examples/etm_demo",
         "--image", "examples/etm_demo/program.elf", "--format", "flamegraph", "-o", str(out)],
        check=True, cwd=root, capture_output=True,
    )  # fmt: skip
    committed = DOCS_IMG / "flamegraph.svg"
    assert out.read_bytes() == committed.read_bytes(), (
        "docs/img/flamegraph.svg is stale: run docs/img/make_flamegraphs.py"
    )


def test_the_docs_flame_graph_of_the_program_has_its_stacks(built: prog.Program) -> None:
    def stacks(svg: str) -> set[str]:
        root = ET.fromstring(svg)
        titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
        return {t.split(" (")[0] for t in titles}

    committed = stacks((DOCS_IMG / "flamegraph-program.svg").read_text())
    assert committed == stacks(profile(built, "flamegraph"))
    assert "_start;work;f1" in committed
