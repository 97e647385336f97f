"""The documentation's examples work and print what the documentation says.

- The scripts in ``examples/scripts/`` are run on the shipped example snapshots
  and their output is checked, against the output shown in the docs and
  against facts about the example programs that do not come from the decoder
  (the instructions the etm_demo program executes, the message the stm_demo
  firmware writes).
- Every ``console`` block of the user documentation (``docs/usage.md``,
  ``api.md``, ``protocols.md``, ``performance.md``) is a shell session: each
  ``$ `` line is run with bash in a scratch folder holding a link to
  ``examples/``, and must print the lines that follow it (standard output and
  standard error, either first); ``$ echo $?`` prints the previous command's
  exit status.
- Every ``python`` block of those pages is run from the repository root;
  when a ``text`` block follows it directly, that is its exact output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cstrace
from tests.conftest import ROOT, perfdata_dir

DOCS = ROOT / "docs"
SCRIPTS = ROOT / "examples" / "scripts"
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent


# --- the documentation's blocks --------------------------------------------------------------


def fenced_blocks(path: Path) -> list[tuple[str, list[str], int]]:
    """The fenced blocks of a Markdown file: (language, lines, line number of the fence)."""
    blocks: list[tuple[str, list[str], int]] = []
    current: list[str] | None = None
    lang, start = "", 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            if current is None:
                current, lang, start = [], line[3:].strip(), number
            else:
                blocks.append((lang, current, start))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


# The user documentation; other pages (architecture.md, metadata.md...) have their own tests.
USER_DOCS = (
    "README.md",
    "usage.md",
    "api.md",
    "protocols.md",
    "performance.md",
    "disasm.md",
    "coverage.md",
    "profiles-functions.md",
    "timeline.md",
    "query.md",
)


def _doc_files() -> list[Path]:
    return [DOCS / name for name in USER_DOCS]


def _blocks_of(lang: str) -> list[tuple[str, int, list[str], list[str] | None]]:
    """(file name, line, block, following text block if it comes directly after) per block."""
    out: list[tuple[str, int, list[str], list[str] | None]] = []
    for path in _doc_files():
        blocks = fenced_blocks(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, (blang, body, start) in enumerate(blocks):
            if blang != lang:
                continue
            expected = None
            if i + 1 < len(blocks) and blocks[i + 1][0] == "text":
                end = start + len(body) + 1  # the closing fence's line number
                between = lines[end : blocks[i + 1][2] - 1]
                if all(not t.strip() for t in between):
                    expected = blocks[i + 1][1]
            out.append((path.name, start, body, expected))
    return out


CONSOLE = _blocks_of("console")
PYTHON = _blocks_of("python")


def _sessions(block: list[str]) -> list[tuple[str, list[str]]]:
    """The commands of a console block, each with the lines it must print."""
    out: list[tuple[str, list[str]]] = []
    for line in block:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line.rstrip())
    return out


def _programs(command: str) -> list[str]:
    """The programs a shell command line runs (first word of each part)."""
    names = []
    for part in re.split(r"&&|\|\||\||;", command):
        words = part.split()
        if words and not words[0].startswith("$"):
            names.append(words[0])
    return names


def _trim(lines: list[str]) -> list[str]:
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


@pytest.mark.parametrize(
    ("doc", "line", "block"),
    [(d, n, b) for d, n, b, _ in CONSOLE],
    ids=[f"{d}:{n}" for d, n, _, _ in CONSOLE],
)
def test_console_block(tmp_path: Path, doc: str, line: int, block: list[str]) -> None:
    sessions = _sessions(block)
    assert sessions, f"{doc}:{line}: a console block without a command"
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    missing = {
        p
        for command, _ in sessions
        for p in _programs(command)
        if p not in ("echo", "cd") and shutil.which(p, path=env["PATH"]) is None
    }
    if missing:
        pytest.skip(f"{doc}:{line} needs {', '.join(sorted(missing))}")
    (tmp_path / "examples").symlink_to(EXAMPLES, target_is_directory=True)
    status = 0
    for command, expected in sessions:
        if command.strip() == "echo $?":
            assert _trim(expected) == [str(status)], f"{doc}:{line}: `{command}`"
            continue
        run = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        status = run.returncode
        out, err = run.stdout.splitlines(), run.stderr.splitlines()
        want = _trim(expected)
        assert want in (_trim(out + err), _trim(err + out)), (
            f"{doc}:{line}: `{command}` printed:\n{run.stdout}{run.stderr}"
        )


@pytest.mark.parametrize(
    ("doc", "line", "code", "expected"),
    PYTHON,
    ids=[f"{d}:{n}" for d, n, _, _ in PYTHON],
)
def test_python_block(
    tmp_path: Path, doc: str, line: int, code: list[str], expected: list[str] | None
) -> None:
    """Run from a scratch folder holding ``examples`` and, for the blocks on simpleperf's
    recordings, ``perfdata`` (the real recordings; skipped without them)."""
    text = "\n".join(code)
    (tmp_path / "examples").symlink_to(EXAMPLES, target_is_directory=True)
    if "perfdata/" in text:
        recordings = perfdata_dir()
        if recordings is None:
            pytest.skip(f"{doc}:{line} reads simpleperf's test recordings: set CSTRACE_PERFDATA")
        (tmp_path / "perfdata").symlink_to(recordings, target_is_directory=True)
    run = subprocess.run(
        [sys.executable, "-c", text],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"{doc}:{line}: the block failed:\n{run.stderr}"
    if expected is not None:
        assert _trim(run.stdout.splitlines()) == _trim(expected), (
            f"{doc}:{line}: the block printed:\n{run.stdout}"
        )


def test_docs_have_runnable_examples() -> None:
    names = {d for d, _, _, _ in CONSOLE} | {d for d, _, _, _ in PYTHON}
    assert {"usage.md", "api.md"} <= names


# --- links between the pages -----------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(path: Path) -> str:
    """The text of a Markdown file without its fenced blocks."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return "\n".join(out)


def _anchors(path: Path) -> set[str]:
    """The heading anchors of a Markdown file, as GitHub makes them."""
    out = set()
    for line in _prose(path).splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("name", USER_DOCS)
def test_links_lead_somewhere(name: str) -> None:
    page = DOCS / name
    for target in _LINK.findall(_prose(page)):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        assert dest.exists(), f"{name}: link to {target}: no such file"
        if anchor:
            assert dest.suffix == ".md", f"{name}: anchor on a non-Markdown link {target}"
            assert anchor in _anchors(dest), f"{name}: link to {target}: no such heading"


# --- the scripts -----------------------------------------------------------------------------


def run_script(name: str, *args: str) -> list[str]:
    """Run ``examples/scripts/NAME`` from the repository root; its output lines."""
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


KERNEL = 0xFFFFFFC000080400  # el0_sync in examples/etm_demo/kernel.bin (program.txt)


def test_coverage_of_the_kernel_handler() -> None:
    out = run_script("coverage.py", "examples/etm_demo", hex(KERNEL), hex(KERNEL + 0x30))
    assert out[:4] == [
        "function 0xffffffc000080400-0xffffffc000080430: 48 bytes",
        "  executed      0xffffffc000080400-0xffffffc00008042c  (44 bytes)",
        "  not executed  0xffffffc00008042c-0xffffffc000080430  (4 bytes)",
        "coverage 91.7% of bytes; 20 instructions traced",
    ]
    counts = {int(a, 16): int(n.rstrip("x")) for a, n in (t.split() for t in out[4:])}
    # From the program, not the decoder: the handler runs twice (write, then exit);
    # the first call returns at eret (0x420), the second goes to sys_exit (0x424)
    # and parks in `halt` (0x428), which the capture shows three times; `panic`
    # (0x42c) never runs.
    assert all(counts[KERNEL + 4 * i] == 2 for i in range(7))  # up to b.eq sys_exit
    assert counts[KERNEL + 0x1C] == counts[KERNEL + 0x20] == 1  # str, eret
    assert counts[KERNEL + 0x24] == 1 and counts[KERNEL + 0x28] == 3
    assert KERNEL + 0x2C not in counts
    assert sum(counts.values()) == 20


def test_coverage_of_the_user_program_and_a_function() -> None:
    out = run_script("coverage.py", "examples/etm_demo", "0x400000", "0x40003c")
    assert out[1:3] == [
        "  executed      0x400000-0x40003c  (60 bytes)",
        "coverage 100.0% of bytes; 29 instructions traced",
    ]
    counts = {int(a, 16): int(n.rstrip("x")) for a, n in (t.split() for t in out[3:])}
    assert counts[0x400000] == counts[0x400004] == 1  # before the loop
    assert all(counts[a] == 3 for a in range(0x400008, 0x40001C, 4))  # the loop, 3 times
    assert all(counts[a] == 1 for a in range(0x40001C, 0x400034, 4))  # after it
    assert counts[0x400034] == counts[0x400038] == 3  # square, called 3 times
    # The same function alone, with its 2 instructions and 3 calls.
    square = run_script("coverage.py", "examples/etm_demo", "0x400034", "0x40003c", "--id", "0x10")
    assert square[-3:] == [
        "coverage 100.0% of bytes; 6 instructions traced",
        "  0x400034       3x",
        "  0x400038       3x",
    ]


def test_coverage_counts_agree_with_the_elements() -> None:
    total = sum(
        e.num_instr
        for _, e in cstrace.iter_elements(EXAMPLES / "etm_demo")
        if isinstance(e, cstrace.InstrRange)
    )
    user = run_script("coverage.py", "examples/etm_demo", "0x400000", "0x40003c")
    kernel = run_script("coverage.py", "examples/etm_demo", hex(KERNEL), hex(KERNEL + 0x30))

    def traced(lines: list[str]) -> int:
        return int(next(t for t in lines if t.startswith("coverage")).split("; ")[1].split()[0])

    assert traced(user) + traced(kernel) == total


def test_exception_histogram() -> None:
    assert run_script("exceptions.py", "examples/etm_demo") == [
        "ETB_0 ETM_0 (etmv4, trace ID 0x10)",
        "  0x002 call (SVC...)                   2  ########################################",
    ]
    # No exceptions in STM-only trace: nothing printed.
    assert run_script("exceptions.py", "examples/stm_demo") == []


def test_stm_messages() -> None:
    assert run_script("stm_messages.py", "examples/stm_demo") == [
        "0x20 0x40/0         0x1250  0x00000100 marker",
        "0x20 0x40/0         0x14a0  0x00000200 marker",
        "0x20 0x40/0         0x16f0  0x00000300 marker",
        '0x20 0x40/1                 "boot ok\\n"',
        "0x20 0x40/2         0x1770  0x0123",
        "0x20 0x40/2         0x17f0  0x0130",
        "0x20 0x40/2         0x1870  0x0142",
        "0x20 0x40/2         0x18f0  0x0151",
    ]
    # etm_demo's kernel writes the sum of squares (1 + 4 + 9) and the exit code 0.
    assert run_script("stm_messages.py", "examples/etm_demo") == [
        "0x20 0x40/0       0x100063  0x0000000e",
        "0x20 0x40/1       0x100087  0x00000000 marker",
    ]
    # DCC debug messages are software trace too: master 1, an ASCII string on channel 0.
    dcc = run_script("stm_messages.py", "examples/classic/dcc")
    assert '0x00 0x01/0                 "hello from the target"' in dcc
