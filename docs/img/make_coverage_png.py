"""Make docs/img/coverage.png and coverage-html.png: the coverage example's reports, in Chromium.

    python docs/img/make_coverage_png.py

Input: ``examples/coverage_demo`` (a traced C program with DWARF), ``cstrace``
from this checkout, ``genhtml`` (Debian's ``lcov``) and ``chromium``. Output:
``docs/img/coverage.png``, a screenshot of the source page genhtml makes from
``cstrace coverage --format lcov``: per line the execution count, lines that
never ran in red, and the branch outcomes; ``docs/img/coverage-html.png``, one
of cstrace's own page (``--format html``). Everything happens in a temporary
folder; nothing is fetched.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEMO = ROOT / "examples" / "coverage_demo"
OUT = HERE / "coverage.png"
OUT_HTML = HERE / "coverage-html.png"


def screenshot(chromium: str, page: Path, out: Path, height: int) -> None:
    """A 1000-pixel-wide screenshot of ``page`` in headless Chromium."""
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size=1000,{height}", f"--screenshot={out}", page.as_uri()],
        check=True, capture_output=True,
    )  # fmt: skip


def main() -> int:
    """Write the screenshot; 1 when a tool is missing."""
    genhtml, chromium = shutil.which("genhtml"), shutil.which("chromium")
    if genhtml is None or chromium is None:
        print("needs genhtml (Debian: lcov) and chromium", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "coverage_demo"  # the folder name genhtml shows
        work.mkdir()
        # DWARF names the source prog.c in the folder ".": genhtml runs beside a copy.
        shutil.copy(DEMO / "files" / "prog.c", work / "prog.c")
        info = work / "coverage.info"
        subprocess.run(
            [sys.executable, "-m", "cstrace.cli", "coverage", str(DEMO), "--format", "lcov",
             "--test-name", "coverage_demo", "-o", str(info)],
            check=True,
        )  # fmt: skip
        subprocess.run(
            [genhtml, "--branch-coverage", "--quiet", "--title", "cstrace coverage_demo",
             "-o", "html", info.name],
            check=True, cwd=work,
        )  # fmt: skip
        page = next((work / "html").rglob("prog.c.gcov.html"))
        screenshot(chromium, page, OUT, 900)
        own = work / "coverage.html"
        subprocess.run(
            [sys.executable, "-m", "cstrace.cli", "coverage", "examples/coverage_demo",
             "--format", "html", "-o", str(own)],
            check=True, cwd=ROOT,
        )  # fmt: skip
        screenshot(chromium, own, OUT_HTML, 1350)
    print(f"wrote {OUT} and {OUT_HTML}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
