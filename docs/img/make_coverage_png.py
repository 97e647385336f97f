"""Make docs/img/coverage.png: genhtml's page of the coverage example, in headless Chromium.

    python docs/img/make_coverage_png.py

Input: ``examples/coverage_demo`` (a traced C program with DWARF), ``cstrace``
from this checkout, ``genhtml`` (Debian's ``lcov``) and ``chromium``. Output:
``docs/img/coverage.png``, a screenshot of the source page genhtml makes from
``cstrace coverage --format lcov``: per line the execution count, lines that
never ran in red, and the branch outcomes. Everything happens in a
temporary folder; nothing is fetched.
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
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=1000,900", f"--screenshot={OUT}", page.as_uri()],
            check=True, capture_output=True,
        )  # fmt: skip
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
