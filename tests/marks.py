"""Marks shared by the test modules: which parameters belong to the slow group.

``python -m tests`` (the README's test command) leaves out tests marked ``slow``:
they are slow and no more telling than the quick ones that remain, and CI runs them
(``python -m pytest -m slow``). A corpus test run on every snapshot keeps its quick
run on every snapshot but the largest, whose checks the others already make on
captures of the same protocols.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

HEAVY = frozenset({"bugfix-exact-match"})
"""Corpus captures too large for the quick run of the tests that go over every snapshot
(bugfix-exact-match: 1 MiB of ETMv4, 1.74 million elements)."""


def corpus_params(names: Iterable[str], heavy: Iterable[str] = HEAVY) -> list[object]:
    """``names`` as parameters, those in ``heavy`` (their base name before ``@``) marked slow."""
    slow = set(heavy)
    return [
        pytest.param(n, marks=pytest.mark.slow) if n.partition("@")[0] in slow else n for n in names
    ]
