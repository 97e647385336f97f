"""The documentation says what the program does, and stands on its own.

- Every command ``cstrace --help`` lists is in the command table of docs/usage.md
  (and nothing in the table is a command that does not exist).
- The documentation that ships with the project (README.md, docs/, examples/README.md)
  points at nothing outside the repository: no links that leave it, and no mention
  of the development machine's shared folders or of the design notes kept beside
  the checkout, which a user of the package does not have.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cstrace.cli import _build_parser
from tests.conftest import ROOT

SHIPPED = [
    ROOT / "README.md",
    ROOT / "examples" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_OUTSIDE = re.compile(r"\.\./shared|\bseeds/|DESIGN\.md|\bshared/(corpus|perfdata|tools)\b")


def _commands() -> set[str]:
    parser = _build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)  # type: ignore[arg-type]


def test_every_command_is_in_the_usage_table() -> None:
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    table = re.search(r"\| command \| what it does \|\n\|---\|---\|\n((?:\|.*\n)+)", text)
    assert table, "docs/usage.md has no command table"
    listed = set(re.findall(r"^\| `cstrace (\w+)", table.group(1), re.MULTILINE))
    assert listed == _commands()


@pytest.mark.parametrize("page", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_docs_point_inside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        assert not _OUTSIDE.search(line), f"{page.name}:{number}: {line.strip()}"
    root = ROOT.resolve()
    for target in _LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:", "#")):
            continue
        dest = (page.parent / target.partition("#")[0]).resolve()
        assert dest.is_relative_to(root), f"{page.name}: link to {target} leaves the repository"


def _readme_commands() -> list[str]:
    """The README's ``cstrace`` command lines that name only the shipped examples."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    k = 0
    while k < len(lines):
        line = lines[k].strip().removeprefix("$ ")
        while line.endswith("\\") and k + 1 < len(lines):
            k += 1
            line = line[:-1] + " " + lines[k].strip()
        k += 1
        if lines[k - 1].startswith("    ") and line.startswith("cstrace ") and "examples/" in line:
            out.append(line.split("  #")[0].strip())
    return out


def test_readme_commands_run(tmp_path: Path) -> None:
    """The README's commands on the shipped examples, in order, from a scratch folder holding
    them (a command may read what an earlier one wrote): exit status 0 and no warning each."""
    import shlex
    import subprocess
    import sys

    commands = _readme_commands()
    assert len(commands) >= 5, commands
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for command in commands:
        r = subprocess.run(
            [sys.executable, "-m", "cstrace.cli", *shlex.split(command)[1:]],
            cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, (command, r.stderr)
        assert "Warning" not in r.stderr and "warning:" not in r.stderr, (command, r.stderr)
