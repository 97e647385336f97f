"""The whole test suite, as the README runs it: ``python -m tests [--slow] [PYTEST ARGS]``.

Two pytest sessions, one after the other, each spread over the machine's cores
(pytest-xdist, ``-n auto``):

1. every test, with the hot modules compiled when the installation has them;
2. the corpus checks (``tests/golden``) again in pure Python (``CSTRACE_PURE=1``):
   the compiled modules and their sources must decode to the same bytes.

Both sessions run whatever the first one finds; the exit status is 0 only when
both pass. Tests marked ``slow`` (slow but not more telling than the rest: the
larger matrices and captures) and ``fuzz`` (the fuzz harness's fixed seeds) are
left out unless ``--slow`` is given; CI runs them. Further arguments go to both
sessions (``-x``, ``-k NAME``...).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _session(label: str, args: list[str], env: dict[str, str]) -> int:
    print(f"== {label}: pytest {' '.join(args)}", flush=True)
    began = time.monotonic()
    status = subprocess.call([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env)
    print(f"== {label}: exit status {status} after {time.monotonic() - began:.0f} s", flush=True)
    return status


def main(argv: list[str]) -> int:
    """Run both sessions; 0 when both pass (pytest's "no tests ran" counts as a pass)."""
    slow = "--slow" in argv
    extra = [a for a in argv if a != "--slow"]
    select = [] if slow else ["-m", "not slow and not fuzz"]
    parallel = ["-n", "auto"] if "-n" not in extra else []
    env = dict(os.environ)
    env.pop("CSTRACE_PURE", None)
    first = _session("all tests", ["-q", *parallel, *select, *extra], env)
    pure_env = {**env, "CSTRACE_PURE": "1"}
    second = _session(
        "corpus in pure Python", ["-q", *parallel, *select, *extra, "tests/golden"], pure_env
    )
    ok = {0, 5}  # 5: no test collected (a -k that selects none in one session)
    return 0 if first in ok and second in ok and (first, second) != (5, 5) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
