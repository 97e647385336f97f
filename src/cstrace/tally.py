"""A counting pass-through iterator, compiled with the decoders (a hot module).

Input: an iterable (a reader's packets, say), a ``type → handler`` table and
a two-item list of totals. Output: the same items, in order; each item whose
type has a handler is given to it on the way; ``totals[0]`` grows by the
number of items passed (an item of one of the ``grouped`` types stands for
``len(item.raw)`` items: ETMv4 atom packets read as one) and ``totals[1]``
becomes 1 when the iterable is used up. The loss report
(:mod:`cstrace.analyses.loss`) counts every packet of a decode this way;
compiled, the count costs a few tens of nanoseconds per item.

A consumer that reads its packets without an iterator in between (the ETMv4/ETE
decoder's element rows, read and decoded in one loop) counts them itself into
a :class:`PacketCount`, which holds the same handlers and totals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["PacketCount", "counted"]

T = TypeVar("T")


class PacketCount:
    """The handlers and totals of :func:`counted`, for a consumer that counts its packets
    itself: it calls the handler of each packet object's type and :meth:`add`s the number
    of packets it read (objects or not) when it stops."""

    __slots__ = ("handlers", "last", "limit", "occurrences", "on_not_decoded", "totals")

    def __init__(
        self,
        handlers: dict[type, Callable[[Any], None]],
        totals: list[int],
        occurrences: dict[str, Callable[[int, list[int]], None]] | None = None,
        limit: int = 0,
    ) -> None:
        self.handlers = handlers
        self.totals = totals
        self.occurrences = occurrences if occurrences is not None else {}
        """Per loss category (``"sync"``, ``"overflow"``): what counts packets of that
        category that a reader counted itself, without making them objects."""
        self.limit = limit
        """How many offsets of each such category are worth keeping (:meth:`occurred`)."""
        self.last: list[Any] = []
        """The packet a reader stopped at, when it stops before the end of its stream
        (as :func:`counted`'s ``last`` holds the last packet passed)."""
        self.on_not_decoded: Callable[[int, int, int], None] | None = None
        """What counts the packets read after the decoder stopped (:meth:`not_decoded`)."""

    def occurred(self, category: str, count: int, offsets: list[int]) -> None:
        """Count ``count`` packets of loss category ``category`` read without a packet
        object, the first of them at capture indices ``offsets`` (at most :attr:`limit`)."""
        add = self.occurrences.get(category)
        if add is not None and count:
            add(count, offsets)

    def not_decoded(self, offset: int, packets: int, size: int) -> None:
        """Count ``packets`` packets (``size`` bytes, the first at capture index ``offset``)
        read after the decoder stopped at a packet it cannot decode (as the reference's
        does), among those :meth:`add` counts."""
        if self.on_not_decoded is not None:
            self.on_not_decoded(offset, packets, size)

    def add(self, n: int, done: bool) -> None:
        """Count ``n`` packets; ``done``: the reading reached the end of the stream."""
        self.totals[0] += n
        if done:
            self.totals[1] = 1


def counted(
    source: Iterable[T],
    handlers: dict[type, Callable[[Any], None]],
    totals: list[int],
    grouped: frozenset[type] = frozenset(),
    last: list[Any] | None = None,
) -> Iterator[T]:
    """``source``, counted into ``totals`` (see the module docstring); the last item
    passed is appended to ``last``, if given, when the iteration ends."""
    get = handlers.get
    n = 0
    item: Any = None
    try:
        for item in source:
            kind = type(item)
            if kind in grouped:
                n += len(item.raw)
            else:
                n += 1
            handler = get(kind)
            if handler is not None:
                handler(item)
            yield item
        totals[1] = 1
    finally:
        totals[0] += n
        if last is not None and item is not None:
            last.append(item)
