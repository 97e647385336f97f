"""Shared fixtures of the ground-truth tests: emulator runs, cached per program."""

from __future__ import annotations

from functools import cache

import pytest

pytest.importorskip("unicorn")

from tests.classic.emu import Run, run
from tests.classic.programs import PROGRAMS

STEPS = 100_000
"""Instructions per program run (the issue asks for more than 100,000)."""


@cache
def program_run(name: str, steps: int = STEPS, irq_every: int = 97) -> Run:
    """Run program ``name`` in the emulator (once per test session)."""
    image, base, entry = PROGRAMS[name]()
    return run(image, base, entry, steps, irq_every=irq_every)
