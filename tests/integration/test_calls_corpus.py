"""Call tracking on real captures of the reference corpus: cycle counts and exceptions.

The snapshots have no symbols, so functions are named by address; what can
be checked without them is that nothing is lost or invented: the collapsed
stacks hold every traced instruction, the cycle clock every cycle count the
elements carry (``TC2``, PTM with cycle-accurate trace and timestamps), and
every exception the decoder gives is counted under its number (``juno_r1_1``,
ETMv4 with exceptions on six cores).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cstrace.analyses.calls import CYCLES, TICKS, CallTracker
from cstrace.api import open_trace
from cstrace.decode import Session
from cstrace.elements import Element, Exception_, InstrRange, Timestamp


class NoSymbols:
    def function(self, address: int, context_id: int | None = None) -> None:
        return None

    def line(self, address: int, context_id: int | None = None) -> None:
        return None


def track(snapshot: Path) -> tuple[CallTracker, list[Element]]:
    trace = open_trace(snapshot)
    session = Session(trace)
    tracker = CallTracker(NoSymbols())
    seen: list[Element] = []
    for buffer in trace.buffers:
        for run in session.open_buffer(buffer).runs:
            elements = list(run.elements())
            seen += elements
            tracker.feed(run.trace_id, elements)
    return tracker, seen


def test_cycle_counts_time_the_calls(corpus: Path) -> None:
    tracker, elements = track(corpus / "snapshots" / "TC2")
    prof = tracker.profile()
    assert prof.units == (CYCLES, TICKS)
    ranges = [e for e in elements if isinstance(e, InstrRange)]
    assert sum(prof.stacks.values()) == prof.instructions == sum(e.num_instr for e in ranges)
    cycles = sum(
        e.cycle_count
        for e in elements
        if not isinstance(e, Timestamp) and getattr(e, "cycle_count", None) is not None
    )
    assert prof.cycles == cycles > 0
    assert sum(p.cycles for p in prof.functions.values()) <= cycles
    timed = [p.timing[CYCLES] for p in prof.functions.values() if CYCLES in p.timing]
    assert timed and sum(t.count for t in timed) > 100
    assert all(0 <= t.minimum <= t.average <= t.maximum for t in timed)


def test_every_exception_is_counted(corpus: Path) -> None:
    tracker, elements = track(corpus / "snapshots" / "juno_r1_1")
    prof = tracker.profile()
    want = Counter(e.number for e in elements if isinstance(e, Exception_))
    assert {n: e.count for n, e in prof.exceptions.items()} == dict(want)
    assert sum(e.returned for e in prof.exceptions.values()) > 0
    assert all(e.returned <= e.count for e in prof.exceptions.values())
