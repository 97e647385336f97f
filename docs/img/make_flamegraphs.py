"""Make docs/img/flamegraph.svg and flamegraph-program.svg with ``cstrace profile --format flamegraph``.

    .venv/bin/python docs/img/make_flamegraphs.py

- ``flamegraph.svg``: ``examples/etm_demo`` with its ``program.elf``; made the
  same way by ``tests/integration/test_profile_calls.py``, which fails if the
  committed file differs by one byte.
- ``flamegraph-program.svg``: the AArch64 test program of
  ``tests/profiles/program.py`` (``work`` calls ``f1`` and ``f2`` five times
  each), compiled with ``aarch64-linux-gnu-gcc``, run in unicorn and traced
  with timestamps, in a temporary folder. Its counts depend on the compiler's
  code, so the test compares its stacks, not its bytes.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CSTRACE = [sys.executable, "-m", "cstrace.cli"]


def etm_demo() -> None:
    """docs/img/flamegraph.svg, from the shipped example."""
    subprocess.run(
        [*CSTRACE, "profile", "examples/etm_demo", "--image", "examples/etm_demo/program.elf",
         "--format", "flamegraph", "-o", str(HERE / "flamegraph.svg")],
        check=True, cwd=ROOT,
    )  # fmt: skip


def test_program() -> int:
    """docs/img/flamegraph-program.svg; 1 when the cross compiler is missing."""
    sys.path.insert(0, str(ROOT))
    from tests.profiles import program as prog

    if prog.compiler() is None:
        print(f"{prog.CC} not installed (Debian: gcc-aarch64-linux-gnu)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        built = prog.build(Path(tmp))
        capture = prog.timed_capture(built, Path(tmp) / "prog.etr")
        regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.TIMED_REGISTERS.items()]
        subprocess.run(
            [*CSTRACE, "profile", str(capture), f"--image={built.path}@{prog.BASE:#x}",
             "--protocol=0x10=ETM4.0", "--core=0x10=Cortex-A53", *regs,
             "--format", "flamegraph", "-o", str(HERE / "flamegraph-program.svg")],
            check=True, cwd=ROOT,
        )  # fmt: skip
    return 0


def main() -> int:
    """Write both pictures; 1 when the second cannot be made."""
    etm_demo()
    return test_program()


if __name__ == "__main__":
    sys.exit(main())
