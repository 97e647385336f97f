"""Shared test fixtures: where the reference corpus is, and how to find its listings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def corpus_dir() -> Path | None:
    """The reference corpus: ``$CSTRACE_CORPUS`` or ``../shared/corpus`` beside the checkout."""
    env = os.environ.get("CSTRACE_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "corpus")
    for c in candidates:
        if (c / "snapshots").is_dir() and (c / "expected").is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus folder; skips the test when it is absent."""
    c = corpus_dir()
    if c is None:
        pytest.skip(
            "reference corpus not found: set CSTRACE_CORPUS or place it at ../shared/corpus"
        )
    return c


def perfdata_dir() -> Path | None:
    """The real perf.data recordings: ``$CSTRACE_PERFDATA``, ``../shared/perfdata`` beside the
    checkout, or ``perfdata`` beside the corpus."""
    env = os.environ.get("CSTRACE_PERFDATA")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "perfdata")
    c = corpus_dir()
    if c is not None:
        candidates.append(c.parent / "perfdata")
    for d in candidates:
        if (d / "perf_etm.data").is_file():
            return d
    return None


@pytest.fixture(scope="session")
def perfdata() -> Path:
    """The folder of the real perf.data recordings; skips the test when it is absent."""
    d = perfdata_dir()
    if d is None:
        pytest.skip(
            "perf.data recordings not found: set CSTRACE_PERFDATA or place them at "
            "../shared/perfdata"
        )
    return d


# -- Hypothesis (issue 26) ---------------------------------------------------------------------
# Every test that draws random examples runs them from a fixed, derandomised profile: the same
# examples on every run (a random one once hung a test in CI), and no example database written
# beside the checkout. HYPOTHESIS_PROFILE=explore draws fresh examples when looking for bugs.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, database=None, deadline=None)
_hypothesis_settings.register_profile("explore", derandomize=False, database=None, deadline=None)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
