"""``cstrace coverage`` end to end, against the emulator's run and judged by genhtml.

The profile test program, with a function whose branch goes one way only and
one that is never called (:mod:`tests.profiles.coverage_truth`), is built with
DWARF, run in an emulator and traced with the project's ETMv4 encoder; the
raw capture goes through ``cstrace coverage --image PROG@BASE``. The expected
coverage is computed from the emulator's executed addresses, the DWARF line
table read with pyelftools and objdump's disassembly, not through cstrace:
every line's count, every conditional branch's taken and not-taken counts
and every function's calls must be equal. ``genhtml`` (Debian's ``lcov``)
must render the lcov file without a warning; the Cobertura XML must follow
``coverage-04.dtd``. Skips without the cross compiler, objdump or unicorn.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.profiles import coverage_truth as ct
from tests.profiles import program as prog

pytestmark = pytest.mark.skipif(
    prog.compiler() is None or ct.objdump() is None,
    reason=f"{prog.CC} or {ct.OBJDUMP} not installed (Debian: gcc-aarch64-linux-gnu); "
    "the test program cannot be built",
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> prog.Program:
    pytest.importorskip("unicorn")
    return prog.build(tmp_path_factory.mktemp("cov"), ct.SOURCE)


@pytest.fixture(scope="module")
def truth(built: prog.Program) -> ct.Truth:
    return ct.truth(built)


def coverage(built: prog.Program, fmt: str, *extra: str) -> str:
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    done = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "coverage", str(built.capture),
         f"--image={built.path}@{prog.BASE:#x}", "--protocol=0x10=ETM4.0",
         "--core=0x10=Cortex-A53", *regs, "--format", fmt, *extra],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def read_lcov(text: str) -> dict[str, dict[str, object]]:
    """Per SF: DA counts, BRDA counts by (line, block, branch), FNDA counts, FN lines."""
    files: dict[str, dict[str, object]] = {}
    current: dict[str, object] = {}
    for line in text.splitlines():
        tag, _, value = line.partition(":")
        if tag == "SF":
            current = files[value] = {"DA": {}, "BRDA": {}, "FNDA": {}, "FN": {}}
        elif tag == "DA":
            n, count = value.split(",")[:2]
            current["DA"][int(n)] = int(count)  # type: ignore[index]
        elif tag == "BRDA":
            n, block, branch, taken = value.split(",")
            key = (int(n), int(block), int(branch))
            current["BRDA"][key] = None if taken == "-" else int(taken)  # type: ignore[index]
        elif tag == "FNDA":
            count, name = value.split(",", 1)
            current["FNDA"][name] = int(count)  # type: ignore[index]
        elif tag == "FN":
            n, name = value.split(",", 1)
            current["FN"][name] = int(n)  # type: ignore[index]
    return files


def test_lines_branches_and_functions_are_what_ran(built: prog.Program, truth: ct.Truth) -> None:
    files = read_lcov(coverage(built, "lcov"))
    got_lines = {(path, n): c for path, rec in files.items() for n, c in rec["DA"].items()}  # type: ignore[attr-defined]
    assert got_lines == truth.lines
    # BRDA blocks number a line's conditional branches in address order
    expected: dict[tuple[str, int, int, int], int | None] = {}
    blocks: dict[tuple[str, int], int] = {}
    for address in sorted(truth.branches):
        path, line = truth.branch_lines[address]
        block = blocks.get((path, line), 0)
        blocks[(path, line)] = block + 1
        outcome = truth.branches[address]
        expected[(path, line, block, 0)] = None if outcome is None else outcome[0]
        expected[(path, line, block, 1)] = None if outcome is None else outcome[1]
    got_branches = {
        (path, *key): c
        for path, rec in files.items()
        for key, c in rec["BRDA"].items()  # type: ignore[attr-defined]
    }
    assert got_branches == expected
    calls = {name: c for rec in files.values() for name, c in rec["FNDA"].items()}  # type: ignore[attr-defined]
    assert calls == truth.calls
    assert calls["never_called"] == 0 and calls["f1"] == 5
    # the branch of check() is taken once and never falls through; never_called has 3
    # branches that never ran
    assert sorted(o for o in truth.branches.values() if o is not None and 0 in o)[0] == (0, 5)
    assert sum(1 for o in truth.branches.values() if o is None) == 3


def test_the_text_table_lists_every_function(built: prog.Program, truth: ct.Truth) -> None:
    text = coverage(built, "text")
    rows = {ln.split()[0]: ln.split() for ln in text.splitlines()[1:]}
    for name, calls in truth.calls.items():
        assert rows[name][2] == str(calls), name
    assert rows["never_called"][3] == "0"
    hit = sum(1 for c in truth.lines.values() if c)
    assert f" {hit}/{len(truth.lines)} (" in text.splitlines()[-1]


def test_genhtml_renders_the_lcov_file(built: prog.Program, tmp_path: Path) -> None:
    genhtml = shutil.which("genhtml")
    if genhtml is None:
        pytest.skip("genhtml not installed (Debian: lcov)")
    info = tmp_path / "cov.info"
    coverage(built, "lcov", "-o", str(info))
    done = subprocess.run(
        [genhtml, "--branch-coverage", "-o", str(tmp_path / "html"), str(info)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr.upper() and "ERROR" not in done.stderr.upper(), done.stderr
    assert re.search(r"functions\.*: 83\.3% \(5 of 6 functions\)", done.stdout), done.stdout
    pages = list((tmp_path / "html").rglob("prog.c.gcov.html"))
    assert len(pages) == 1
    assert "never_called" in pages[0].read_text()


HEADER_SOURCE = prog.SOURCE.replace(
    "static volatile int sink;", '#include "helper.h"\nstatic volatile int sink;'
).replace("s += i & 3;", "s += low2(i);")
HELPER = "static inline __attribute__((always_inline)) int low2(int v) { return v & 3; }\n"


def test_genhtml_accepts_a_program_whose_header_is_gone(tmp_path: Path) -> None:
    """The line table names helper.h, which is not on disk any more (a vendor header of
    the build machine): the lcov file leaves it out, says so, and genhtml renders it
    with no option."""
    genhtml = shutil.which("genhtml")
    if genhtml is None:
        pytest.skip("genhtml not installed (Debian: lcov)")
    pytest.importorskip("unicorn")
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "helper.h").write_text(HELPER)
    built = prog.build(folder, HEADER_SOURCE)
    (folder / "helper.h").unlink()
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    info = tmp_path / "cov.info"
    done = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "coverage", str(built.capture),
         f"--image={built.path}@{prog.BASE:#x}", "--protocol=0x10=ETM4.0",
         "--core=0x10=Cortex-A53", *regs, "--format", "lcov", "-o", str(info)],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "left out of the lcov file" in done.stderr and "helper.h" in done.stderr
    text = info.read_text()
    assert "helper.h" not in text and "prog.c" in text
    html = subprocess.run(
        [genhtml, "-o", str(tmp_path / "html"), str(info)],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert html.returncode == 0, html.stderr
    assert list((tmp_path / "html").rglob("prog.c.gcov.html"))


# coverage-04.dtd, as facts: each element's children in order (? optional, * any number)
# and its required attributes.
DTD: dict[str, tuple[list[str], set[str]]] = {
    "coverage": (
        ["sources?", "packages"],
        {"line-rate", "branch-rate", "lines-covered", "lines-valid", "branches-covered",
         "branches-valid", "complexity", "version", "timestamp"},
    ),
    "sources": (["source*"], set()),
    "source": ([], set()),
    "packages": (["package*"], set()),
    "package": (["classes"], {"name", "line-rate", "branch-rate", "complexity"}),
    "classes": (["class*"], set()),
    "class": (["methods", "lines"], {"name", "filename", "line-rate", "branch-rate", "complexity"}),
    "methods": (["method*"], set()),
    "method": (["lines"], {"name", "signature", "line-rate", "branch-rate"}),
    "lines": (["line*"], set()),
    "line": (["conditions*"], {"number", "hits"}),
    "conditions": (["condition*"], set()),
    "condition": ([], {"number", "type", "coverage"}),
}  # fmt: skip


def check_dtd(elem: ET.Element) -> None:
    pattern, required = DTD[elem.tag]
    assert required <= set(elem.attrib), (elem.tag, required - set(elem.attrib))
    children = [c.tag for c in elem]
    regex = "".join(
        f"(?:{p.rstrip('?*')},)" + ("?" if p.endswith("?") else "*" if p.endswith("*") else "")
        for p in pattern
    )
    assert re.fullmatch(regex, "".join(f"{c}," for c in children)), (elem.tag, children)
    for child in elem:
        check_dtd(child)


def test_cobertura_follows_the_dtd_and_counts(built: prog.Program, truth: ct.Truth) -> None:
    text = coverage(built, "cobertura")
    assert (
        '<!DOCTYPE coverage SYSTEM "http://cobertura.sourceforge.net/xml/coverage-04.dtd">' in text
    )
    root = ET.fromstring(text)
    check_dtd(root)
    lines_hit = sum(1 for c in truth.lines.values() if c)
    assert root.get("lines-valid") == str(len(truth.lines))
    assert root.get("lines-covered") == str(lines_hit)
    outcomes = [o for o in truth.branches.values()]
    assert root.get("branches-valid") == str(2 * len(outcomes))
    assert root.get("branches-covered") == str(
        sum(0 if o is None else (o[0] > 0) + (o[1] > 0) for o in outcomes)
    )
    source = root.findtext("sources/source")
    assert source is not None
    got: dict[tuple[str, int], int] = {}
    for cls in root.iter("class"):
        for line in cls.findall("lines/line"):
            path = str(Path(source) / cls.get("filename", ""))
            got[(path, int(line.get("number", "0")))] = int(line.get("hits", "-1"))
            if line.get("branch") == "true":
                m = re.fullmatch(r"\d+% \((\d+)/(\d+)\)", line.get("condition-coverage", ""))
                assert m is not None
                assert int(m.group(2)) == 2 * len(line.findall("conditions/condition"))
    assert got == truth.lines


def test_html_is_self_contained_and_colours_lines(built: prog.Program, truth: ct.Truth) -> None:
    page = coverage(built, "html")
    assert "http://" not in page and "https://" not in page and "<script" not in page
    for (_path, n), count in truth.lines.items():
        cls = "miss" if count == 0 else "(hit|part)"
        assert re.search(
            rf'<span class="l {cls}"><span class="no">{n}</span><span class="cnt">{count}</span>',
            page,
        ), (n, count)
    assert "never_called" in page


def test_thumb2_with_it_blocks_is_what_ran(tmp_path: Path) -> None:
    """A Thumb-2 program (IT blocks): conditional instructions inside an IT block count as
    executed whether their condition passed or not (the trace cannot tell), as the emulator's
    run with the failed ones put back says; the T32 branch outcomes are the emulator's."""
    from tests.profiles import thumb_program as tp

    objdump = shutil.which("arm-none-eabi-objdump")
    if tp.compiler() is None or objdump is None:
        pytest.skip(f"{tp.CC} not installed (Debian: gcc-arm-none-eabi)")
    pytest.importorskip("unicorn")
    built = tp.build(tmp_path)
    truth = ct.truth_of(
        built.path,
        built.executed,
        ct.instructions(built.path, objdump),
        ct.T32_CONDITIONAL,
        ct.T32_BRANCH,
    )
    assert built.failed and all(truth.executed[a] for a in built.failed)
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in tp.REGISTERS.items()]
    done = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "coverage", str(built.capture),
         f"--image={built.path}", "--protocol=0x10=ETM4.0", "--core=0x10=Cortex-A53",
         *regs, "--format", "lcov"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    files = read_lcov(done.stdout)
    got_lines = {(path, n): c for path, rec in files.items() for n, c in rec["DA"].items()}  # type: ignore[attr-defined]
    assert got_lines == truth.lines
    got = sorted(
        (n, block, branch, c)
        for rec in files.values()
        for (n, block, branch), c in rec["BRDA"].items()  # type: ignore[attr-defined]
    )
    expected = sorted(
        (truth.branch_lines[a][1], 0, k, None if o is None else o[k])
        for a, o in truth.branches.items()
        for k in (0, 1)
    )
    assert got == expected
    calls = {name: c for rec in files.values() for name, c in rec["FNDA"].items()}  # type: ignore[attr-defined]
    assert calls == truth.calls
