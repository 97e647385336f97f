"""Call tracking on hand-made element streams: calls, returns, tail calls, exceptions, gaps.

The symbols are a small fake (four functions of 0x100 bytes); each test
builds the elements a decoder would give for a known run and checks the
counts, times, arcs and collapsed stacks :class:`CallTracker` makes of them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from cstrace.analyses.calls import CYCLES, TICKS, CallProfile, CallTracker
from cstrace.cli import main
from cstrace.elements import (
    Element,
    Exception_,
    ExceptionRet,
    InstrRange,
    InstrSubtype,
    InstrType,
    Isa,
    NoSync,
    Timestamp,
)
from cstrace.render.calls import callgrind_lines, flamegraph_svg, folded_lines, function_lines
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "etm_demo"


@dataclass(frozen=True)
class Func:
    name: str
    start: int
    end: int
    file: str | None = "prog.c"
    line: int | None = None


@dataclass(frozen=True)
class Line:
    file: str
    line: int


class FakeSymbols:
    """main at 0x1000, a at 0x2000, b at 0x3000, irq at 0x4000; source line = address >> 4."""

    funcs: ClassVar[list[Func]] = [
        Func(n, s, s + 0x100, line=s >> 4)
        for n, s in (("main", 0x1000), ("a", 0x2000), ("b", 0x3000), ("irq", 0x4000))
    ]

    def function(self, address: int, context_id: int | None = None) -> Func | None:
        return next((f for f in self.funcs if f.start <= address < f.end), None)

    def line(self, address: int, context_id: int | None = None) -> Line | None:
        return Line("prog.c", address >> 4) if self.function(address) else None


def rng(
    start: int,
    n: int,
    kind: InstrType = InstrType.OTHER,
    sub: InstrSubtype = InstrSubtype.NONE,
    cc: int | None = None,
) -> InstrRange:
    """``n`` A64 instructions from ``start``; the last one an executed ``kind`` branch."""
    return InstrRange(0, start, start + 4 * n, n, Isa.A64, True, 4, kind, sub, cycle_count=cc)


def call(start: int, n: int, cc: int | None = None) -> InstrRange:
    return rng(start, n, InstrType.BR, InstrSubtype.BR_LINK, cc)


def ret(start: int, n: int, cc: int | None = None) -> InstrRange:
    return rng(start, n, InstrType.BR_INDIRECT, InstrSubtype.V8_RET, cc)


def track(elements: list[Element]) -> CallProfile:
    tracker = CallTracker(FakeSymbols())
    tracker.feed(0x10, elements)
    return tracker.profile()


def names(profile: CallProfile) -> dict[str, int]:
    return {p.function.name: p.calls for p in profile.functions.values()}


def test_calls_and_returns_count_instructions_and_cycles() -> None:
    prof = track([
        call(0x1000, 3, cc=3),  # main: BL a
        call(0x2000, 2, cc=2),  # a: BL b
        ret(0x3000, 4, cc=4),  # b returns to a
        ret(0x2008, 1, cc=1),  # a returns to main
        rng(0x100C, 2, cc=2),
    ])  # fmt: skip
    by = {p.function.name: p for p in prof.functions.values()}
    assert names(prof) == {"main": 0, "a": 1, "b": 1}
    assert (by["main"].instructions, by["a"].instructions, by["b"].instructions) == (5, 3, 4)
    assert (by["a"].inclusive, by["b"].inclusive) == (7, 4)
    assert prof.units == (CYCLES,)
    a = by["a"].timing[CYCLES]
    assert (a.count, a.total, a.minimum, a.maximum) == (1, 7, 7, 7)
    assert by["b"].timing[CYCLES].total == 4
    assert prof.stacks == {("main",): 5, ("main", "a"): 3, ("main", "a", "b"): 4}
    assert sum(prof.stacks.values()) == prof.instructions == 12
    arcs = {(k[0].name, k[2].name): v for k, v in prof.arcs.items()}
    assert (arcs["main", "a"].calls, arcs["main", "a"].instructions) == (1, 7)
    assert arcs["main", "a"].site == 0x1008 and arcs["main", "a"].site_line == 0x100
    assert (arcs["a", "b"].calls, arcs["a", "b"].cycles) == (1, 4)


def test_a_return_that_skips_frames_pops_them_all() -> None:
    prof = track([
        call(0x1000, 1),  # main -> a, returns to 0x1004
        call(0x2000, 1),  # a -> b, returns to 0x2004
        ret(0x3000, 1),  # b returns straight to main (longjmp-like)
        rng(0x1004, 1),
    ])  # fmt: skip
    assert prof.stacks[("main",)] == 2


def test_a_tail_call_takes_the_frame_of_the_function_it_leaves() -> None:
    prof = track([
        call(0x1000, 2),  # main: BL a
        rng(0x2000, 3, InstrType.BR),  # a: B b (a tail call)
        ret(0x3000, 2),  # b returns to main, for a
        rng(0x1008, 1),
    ])  # fmt: skip
    assert names(prof) == {"main": 0, "a": 1, "b": 1}
    assert prof.stacks == {("main",): 3, ("main", "a"): 3, ("main", "b"): 2}


def test_an_exception_is_timed_from_entry_to_its_return() -> None:
    prof = track([
        Timestamp(0, 100),
        rng(0x1000, 2),
        Exception_(0, 5, return_address=0x1008),
        rng(0x4000, 3, InstrType.BR_INDIRECT, InstrSubtype.V8_ERET),
        Timestamp(0, 130),
        rng(0x1008, 1),
        Exception_(0, 5, return_address=0x100C),
        Timestamp(0, 150),
        rng(0x4000, 4, InstrType.BR_INDIRECT),  # an M-profile return: BX LR then EXCEPTION_RET
        ExceptionRet(0),
        Timestamp(0, 200),
        rng(0x100C, 1),
    ])  # fmt: skip
    exc = prof.exceptions[5]
    assert exc.count == exc.returned == 2 and exc.handlers == {"irq"} and exc.instructions == 7
    t = exc.timing[TICKS]
    assert (t.count, t.total, t.minimum, t.maximum) == (2, 80, 30, 50)
    assert prof.stacks == {("main",): 4, ("main", "irq"): 7}
    irq = next(p for p in prof.functions.values() if p.function.name == "irq")
    assert irq.handler and irq.calls == 2


def test_a_return_above_the_known_stack_relinks_it() -> None:
    prof = track([
        ret(0x3000, 2),  # trace starts in b, which returns
        ret(0x2010, 1),  # into a, which returns
        rng(0x1010, 1),  # into main
    ])  # fmt: skip
    assert prof.stacks == {("main", "a", "b"): 2, ("main", "a"): 1, ("main",): 1}
    assert prof.relinks == 2
    arcs = {(k[0].name, k[2].name) for k in prof.arcs}
    assert arcs == {("a", "b"), ("main", "a")}


def test_a_gap_keeps_the_stack_when_the_trace_resumes_in_it_but_stops_timing() -> None:
    prof = track([
        Timestamp(0, 0),
        call(0x1000, 1),
        rng(0x2000, 2),
        NoSync(0),
        ret(0x2020, 2),  # still in a, which returns to main
        Timestamp(0, 10),
        rng(0x1004, 1),
    ])  # fmt: skip
    assert prof.gaps == 1
    assert prof.stacks == {("main",): 2, ("main", "a"): 4}
    a = next(p for p in prof.functions.values() if p.function.name == "a")
    assert a.calls == 1 and TICKS not in a.timing


def test_a_gap_into_another_function_restarts_the_stack() -> None:
    prof = track([call(0x1000, 1), rng(0x2000, 2), NoSync(0), rng(0x3000, 2)])
    assert prof.stacks == {("main",): 1, ("main", "a"): 2, ("b",): 2}


def test_renderers_write_the_profile() -> None:
    prof = track([
        call(0x1000, 3, cc=3), call(0x2000, 2, cc=2), ret(0x3000, 4, cc=4),
        ret(0x2008, 1, cc=1), rng(0x100C, 2, cc=2),
    ])  # fmt: skip
    folded = list(folded_lines(prof))
    assert folded == ["main 5", "main;a 3", "main;a;b 4"]
    cg = list(callgrind_lines(prof))
    assert "events: Ir Cycles" in cg and cg[-1] == "totals: 12 12"
    i = cg.index("cfn=b")
    # b's first line 0x300, called from line 0x200 (a's BL)
    assert cg[i + 1 : i + 3] == ["calls=1 768", "512 4 4"]
    text = list(function_lines(prof))
    assert text[0].startswith("12 instructions in 3 functions; time per call in cycles")
    row = next(r.split() for r in text if r.startswith("a "))
    # calls, returned, own, inclusive, own cycles, cycles total, min, max, average
    assert row[:10] == ["a", "1", "1", "3", "7", "3", "7", "7", "7", "7.0"]
    csv = list(function_lines(prof, "csv"))
    assert csv[0].startswith("kind,name,calls,returned,instructions,inclusive,cycles,cycles total")
    assert "function,b,1,1,4,4,4,4,4,4,4.0,prog.c:768" in csv
    svg = ET.fromstring(flamegraph_svg(prof, "test"))
    titles = [t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert any(t.startswith("main;a;b (4 instructions") for t in titles)


def test_a_bad_image_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.elf"
    bad.write_bytes(b"\x7fELFgarbage")
    status = main(["profile", str(EXAMPLE), "--image", str(bad), "--format", "callgrind"])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.splitlines()) == 1
    assert err.startswith(f"cstrace: error: {bad}: malformed ELF file")
    assert "Traceback" not in err


def test_the_command_profiles_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    image = str(EXAMPLE / "program.elf")
    assert main(["profile", str(EXAMPLE), "--image", image, "--format", "folded"]) == 0
    folded = dict(line.rsplit(" ", 1) for line in capsys.readouterr().out.splitlines())
    # square: mul and ret, three calls; everything traced is on some stack
    assert folded["_start;square"] == "6"
    assert main(["decode", str(EXAMPLE), "--no-summary", "--format", "jsonl"]) == 0
    ranges = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    traced = sum(r["num_instr"] for r in ranges if r.get("type") == "INSTR_RANGE")
    assert sum(int(v) for v in folded.values()) == traced
