"""A run-end finder that counts the units it looks at (the ITM and STM boundary tests)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import AnyStr, Generic

from cstrace.protocols.unsynced import RunEnd


class CountingPattern(Generic[AnyStr]):
    """A pattern that adds to ``looked`` every unit its searches may look at."""

    def __init__(self, pattern: re.Pattern[AnyStr]) -> None:
        self.pattern = pattern
        self.looked = 0

    def finditer(self, data: AnyStr) -> Iterator[re.Match[AnyStr]]:
        self.looked += len(data)
        return self.pattern.finditer(data)

    def search(self, data: AnyStr, pos: int, endpos: int) -> re.Match[AnyStr] | None:
        self.looked += min(endpos, len(data)) - pos
        return self.pattern.search(data, pos, endpos)


def counting_run_end(
    long: re.Pattern[AnyStr], other: re.Pattern[AnyStr], minimum: int
) -> tuple[RunEnd[AnyStr], CountingPattern[AnyStr], CountingPattern[AnyStr]]:
    """A :class:`RunEnd` on counting patterns, and the two patterns."""
    counted_long, counted_other = CountingPattern(long), CountingPattern(other)
    return RunEnd(counted_long, counted_other, minimum), counted_long, counted_other  # type: ignore[arg-type]
