"""Packet boundaries without a synchronisation packet: the rule ITM and STM share.

Input: a protocol's data as a sequence of units (ITM: bytes; STM: nibbles, as
hexadecimal digits) and a function that tells where the packet starting at a
unit ends by the protocol's grammar (or that it is invalid); output: where to
start reading packets, and from which packet boundary that reading is certain.

**Decode start**: the first unit from which ``run`` packets in a row read as
valid packets (or every packet up to the end of the data, when fewer follow).
A capture that begins on a packet boundary is read from its first unit.

**First unambiguous boundary**: the first packet boundary of that reading that
every valid reading starting on one of the next ``span - 1`` units also
reaches, ``span`` being the length of the protocol's longest packet (other
than synchronisation). A capture that begins inside a packet has its first real
boundary among those units, so from this boundary on the packets are the same
whichever unit the capture really began on; packets before it may be the
misread tail of a packet. A reading that meets an invalid packet is not the
stream's and does not count. When some reading neither meets the decode
start's reading nor fails within ``horizon`` units, there is no unambiguous
boundary (``None``).

The protocol modules (:mod:`cstrace.protocols.itm.boundary`,
:mod:`cstrace.protocols.stm.boundary`) give the grammar and the numbers.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from typing import AnyStr, Generic, TypeVar

__all__ = ["INVALID", "RunEnd", "find_start", "first_certain", "scan"]

INVALID = -1
"""What a packet-end function returns for an invalid packet."""

Units = TypeVar("Units", bytes, str)

"""The data: ``bytes`` (ITM) or a string of hexadecimal nibble digits (STM).

``end(data, p)``, the protocol's grammar, is the end (exclusive) of the packet at
``p``; :data:`INVALID`; or ``len(data) + 1`` when the data ends before the packet
does."""


class RunEnd(Generic[AnyStr]):
    """Where a run of one repeated unit ends (ITM's zero bytes, STM's ``f`` nibbles), at the
    cost of one pass over the data: the searches try every unit as a packet start, and
    each unit of a run would otherwise measure the rest of the run again (64 Ki zero bytes:
    30 s of CPU). Runs of at least ``minimum`` units are found once per data (a regular
    expression's pass); a shorter run is measured where it is, at most ``minimum`` units."""

    __slots__ = ("_data", "_ends", "_long", "_minimum", "_other", "_starts")

    def __init__(self, long: re.Pattern[AnyStr], other: re.Pattern[AnyStr], minimum: int) -> None:
        """``long``: a pattern matching ``minimum`` or more units of the run; ``other``: one
        unit that is not the run's."""
        self._long: re.Pattern[AnyStr] = long
        self._other: re.Pattern[AnyStr] = other
        self._minimum = minimum
        self._data: AnyStr | None = None
        self._starts: list[int] = []
        self._ends: list[int] = []

    def __call__(self, data: AnyStr, k: int) -> int:
        """The first position at or after ``k`` whose unit is not the run's (``len(data)``
        when the run reaches the end)."""
        if self._data is not data:
            runs = [m.span() for m in self._long.finditer(data)]
            self._starts = [start for start, _ in runs]
            self._ends = [end for _, end in runs]
            self._data = data
        i = bisect_right(self._starts, k) - 1
        if i >= 0 and k < self._ends[i]:
            return self._ends[i]
        found = self._other.search(data, k, k + self._minimum)
        return found.start() if found is not None else len(data)


def find_start(
    data: Units,
    q: int,
    final: bool,
    end: Callable[[Units, int], int],
    run: int,
    stop: int | None = None,
) -> tuple[int, bool]:
    """The decode start at or after ``data[q]``, and whether it is settled.

    Returns ``(s, True)`` for the first position ``s`` from which ``run``
    packets read validly, or from which every packet reads validly up to the end
    of ``data`` when ``final`` (no more data follows). Returns ``(s, False)``
    when the reading from ``s`` reaches the end of ``data`` first and more data
    may follow: every position before ``s`` is invalid, ``s`` needs more data.
    ``(len(data), True)`` when no position reads validly. With ``stop``, only the
    positions before it are tried (``(stop, True)`` when none reads validly): the
    caller knows a start there.
    """
    n = len(data)
    for c in range(q, n if stop is None else min(n, stop)):
        p = c
        count = 0
        while count < run and p < n:
            e = end(data, p)
            if e < 0:
                break
            p = e
            count += 1
        else:
            return c, count == run or final
    return (n if stop is None else min(n, stop)), True


def first_certain(
    data: Units, s: int, end: Callable[[Units, int], int], span: int, horizon: int
) -> int | None:
    """The first unambiguous packet boundary of the reading from ``data[s]`` (module text).

    ``data`` should hold ``horizon`` units after ``s`` unless the stream ends
    sooner. ``None`` when some valid reading of the next units does not meet
    the reading from ``s`` inside them.
    """
    n = len(data)
    limit = min(n, s + horizon)
    main = {s}
    last = s
    while last < limit:
        e = end(data, last)
        if e < 0 or e > n:
            break
        last = e
        main.add(last)
    certain = s
    for o in range(s + 1, min(s + span, n)):
        a = o
        while a not in main:
            if a >= last:
                return None  # neither met nor failed: the readings stay apart
            e = end(data, a)
            if e < 0:
                break  # this reading fails: the stream cannot have begun at o
            if e > n:
                return None
            a = e
        else:
            certain = max(certain, a)
    return certain


def scan(data: Units, end: Callable[[Units, int], int], run: int) -> tuple[int, int, int, int]:
    """Read ``data`` from its decode start, starting again after each invalid packet.

    Returns (decode start, valid packets, invalid packets, units in valid
    packets): the evidence that ``data`` is of the protocol when it holds no sync.
    """
    n = len(data)
    start, _ = find_start(data, 0, True, end, run)
    good = bad = covered = 0
    p = start
    while p < n:
        e = end(data, p)
        if e < 0:
            bad += 1
            p, _ = find_start(data, p + 1, True, end, run)
        elif e > n:
            break
        else:
            good += 1
            covered += e - p
            p = e
    return start, good, bad, covered
