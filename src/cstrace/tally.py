"""A counting pass-through iterator, compiled with the decoders (a hot module).

Input: an iterable (a reader's packets, say), a ``type → handler`` table and
a two-item list of totals. Output: the same items, in order; each item whose
type has a handler is given to it on the way; ``totals[0]`` grows by the
number of items passed and ``totals[1]`` becomes 1 when the iterable is used
up. The loss report (:mod:`cstrace.analyses.loss`) counts every packet of a
decode this way; compiled, the count costs a few tens of nanoseconds per item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["counted"]

T = TypeVar("T")


def counted(
    source: Iterable[T], handlers: dict[type, Callable[[Any], None]], totals: list[int]
) -> Iterator[T]:
    """``source``, counted into ``totals`` (see the module docstring)."""
    get = handlers.get
    n = 0
    try:
        for item in source:
            n += 1
            handler = get(type(item))
            if handler is not None:
                handler(item)
            yield item
        totals[1] = 1
    finally:
        totals[0] += n
