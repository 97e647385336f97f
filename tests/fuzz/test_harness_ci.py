"""The fuzz harness in CI: fixed seeds over every input kind, about two minutes in all.

Each target (the trace bytes of each protocol, ``.ini`` metadata, a package ZIP, a
perf.data recording, an ELF image) makes inputs from the same seeds on every run,
each run through the command line in a fork with a time and memory limit
(:mod:`tests.fuzz.harness`). None may end in a traceback, a timeout, a memory
blow-up or a crash. Select these tests with ``-m fuzz``; a long campaign is
``python -m tests.fuzz.campaign --minutes 30``.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest

from tests.fuzz.harness import BAD, TARGETS, Limits, Outcome, Seed, make_run, make_seeds

pytestmark = pytest.mark.fuzz

RUNS = 28
"""Seeds per target: 10 targets x 28 runs take about 80 s on a quiet machine."""
BUDGET = 110.0
"""Seconds all targets may take together; runs beyond it are left out (and said so)."""
LIMITS = Limits(seconds=30.0, memory=3 << 30, peak=1 << 30)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Seed]]:
    import cstrace.cli  # noqa: F401  (imported once, before the forks)

    return make_seeds(tmp_path_factory.mktemp("fuzz-seeds"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the harness runs each input in a fork")
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fixed_seeds(target: str, seeds: dict[str, list[Seed]], tmp_path: Path) -> None:
    budget = BUDGET / len(TARGETS)
    start = time.monotonic()
    bad = []
    done = 0
    for seed in range(RUNS):
        if time.monotonic() - start > budget:
            break
        run = make_run(target, seed, seeds, tmp_path, LIMITS)
        done += 1
        assert run.outcome in Outcome
        if run.outcome in BAD:
            bad.append(f"{run.line()}\n{run.detail}")
    assert not bad, "\n\n".join(bad)
    if done < RUNS:
        warnings.warn(f"{target}: time budget used up after {done} of {RUNS} runs", stacklevel=1)
