"""Coverage: the counter, the walk of code that never ran, the report and its writers.

Small hand-made inputs (instruction words assembled here, a symbol table
written out) check each rule of :mod:`cstrace.analyses.coverage`; the
shipped ``examples/coverage_demo`` (a compiled program, no compiler needed)
checks that the two ways of feeding the counter agree: decoded ranges, and
the ``Executed`` records of :mod:`cstrace.analyses.instructions`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from cstrace.analyses.coverage import (
    CoverageCounter,
    LineInfo,
    static_instructions,
)
from cstrace.elements import InstrRange, InstrType, Isa
from cstrace.render.coverage import cobertura_xml, html_report, lcov_lines, text_lines
from tests.conftest import ROOT

NOP = 0xD503201F
RET = 0xD65F03C0


def b_cond(pc: int, target: int, cond: int = 1) -> int:
    """A64 B.cond (cond 1: NE)."""
    return 0x54000000 | ((((target - pc) >> 2) & 0x7FFFF) << 5) | cond


def cbz(pc: int, target: int) -> int:
    return 0x34000000 | ((((target - pc) >> 2) & 0x7FFFF) << 5)


@dataclass(frozen=True)
class Line:
    file: str
    line: int


@dataclass(frozen=True)
class Fn:
    name: str
    start: int
    end: int
    file: str | None = None
    line: int | None = None


class FakeSymbols:
    """Two functions: ``loop`` at 0x1000 (lines 1-4) and ``cold`` at 0x1010 (lines 6-8)."""

    lines: ClassVar[dict[int, Line]] = {
        0x1000: Line("a.c", 1),
        0x1004: Line("a.c", 2),  # nop; b.ne 0x1004
        0x100C: Line("a.c", 3),  # ret
        0x1010: Line("a.c", 6),  # cbz 0x101c
        0x1014: Line("a.c", 7),  # nop, nop
        0x101C: Line("a.c", 8),  # ret
    }

    def function(self, address: int, context_id: int | None = None) -> Fn | None:
        return next((f for f in self.functions() if f.start <= address < f.end), None)

    def line(self, address: int, context_id: int | None = None) -> LineInfo | None:
        best = max((a for a in self.lines if a <= address), default=None)
        return None if best is None or address >= 0x1020 else self.lines[best]

    def functions(self) -> list[Fn]:
        return [Fn("loop", 0x1000, 0x1010, "a.c", 1), Fn("cold", 0x1010, 0x1020)]

    def line_table(self) -> Mapping[Line, Sequence[int]]:
        return {ln: [a] for a, ln in self.lines.items()}


CODE = {
    0x1000: NOP,
    0x1004: NOP,
    0x1008: b_cond(0x1008, 0x1004),
    0x100C: RET,
    0x1010: cbz(0x1010, 0x101C),
    0x1014: NOP,
    0x1018: NOP,
    0x101C: RET,
}


def read(address: int, size: int) -> bytes:
    out = bytearray()
    for a in range(address, address + size, 4):
        if a not in CODE:
            break
        out += CODE[a].to_bytes(4, "little")
    return bytes(out)


def ranges() -> list[InstrRange]:
    """loop: enters, goes round the b.ne twice (taken, taken, not taken), returns."""
    br = InstrType.BR
    return [
        InstrRange(0, 0x1000, 0x100C, 3, Isa.A64, True, 4, br, last_cond=True),
        InstrRange(0, 0x1004, 0x100C, 2, Isa.A64, True, 4, br, last_cond=True),
        InstrRange(0, 0x1004, 0x100C, 2, Isa.A64, False, 4, br, last_cond=True),
        InstrRange(0, 0x100C, 0x1010, 1, Isa.A64, True, 4, InstrType.BR_INDIRECT),
    ]


def test_ranges_count_instructions_and_branch_outcomes() -> None:
    c = CoverageCounter()
    c.feed_ranges(ranges(), read)
    assert dict(c.hits) == {0x1000: 1, 0x1004: 3, 0x1008: 3, 0x100C: 1}
    assert (c.taken[0x1008], c.not_taken[0x1008]) == (2, 1)
    assert 0x100C not in c.branch_addresses  # an unconditional return has no outcomes


def test_never_run_code_is_walked_and_listed_with_zero() -> None:
    c = CoverageCounter()
    c.feed_ranges(ranges(), read)
    cov = c.coverage(FakeSymbols(), read)
    loop, cold = cov.functions
    assert (loop.calls, loop.executed, loop.instructions, loop.executions) == (1, 4, 4, 8)
    assert (cold.calls, cold.executed, cold.instructions) == (0, 0, 4)
    # cold has no DWARF declaration: its file and line are those of its entry
    assert (cold.file, cold.line) == ("a.c", 6)
    [never] = cold.branches
    assert (never.address, never.taken, never.not_taken) == (0x1010, None, None)
    lines = cov.files["a.c"].lines
    assert {n: ln.hits for n, ln in lines.items()} == {1: 1, 2: 3, 3: 1, 6: 0, 7: 0, 8: 0}
    assert (lines[2].instructions, lines[2].executed) == (2, 2)
    t = cov.totals()
    assert (t.lines, t.lines_hit, t.functions, t.functions_hit) == (6, 3, 2, 1)
    assert (t.branches, t.branches_hit) == (4, 2)


def test_without_code_only_what_ran_is_known() -> None:
    c = CoverageCounter()
    c.feed_ranges(ranges(), read)
    cov = c.coverage(FakeSymbols())
    assert cov.functions[1].instructions == 0 and not cov.functions[1].branches
    assert cov.files["a.c"].lines[7].hits == 0  # still listed: the line table has it


def test_executed_records_and_unknown_outcomes() -> None:
    from cstrace.analyses.instructions import Executed

    def rec(address: int, waypoint: InstrType | None, cond: bool, taken: bool | None) -> Executed:
        return Executed(
            address=address, size=4, isa=Isa.A64, opcode=b"", trace_id=0x10, index=0,
            waypoint=waypoint, conditional=cond, taken=taken, timestamp=None, cycles=None,
            cpu=None, pid=None, tid=None, context_id=None,
        )  # fmt: skip

    c = CoverageCounter()
    c.feed(
        [
            rec(0x1010, InstrType.BR, True, False),
            rec(0x1014, None, False, None),
            rec(0x2000, InstrType.BR, True, None),  # outcome not known
            "not a record",
        ]
    )
    assert (c.taken[0x1010], c.not_taken[0x1010]) == (0, 1)
    assert c.hits[0x2000] == 1 and 0x2000 in c.branch_addresses
    cov = c.coverage(FakeSymbols(), read)
    assert cov.unattributed == 1  # 0x2000 is in no function
    assert cov.functions[1].calls == 1


def test_t32_branch_in_an_it_block_is_conditional() -> None:
    # it eq; bxeq lr; bx lr: the first BX is conditional only through the IT block
    code = bytes.fromhex("08bf" + "7047" + "7047")
    found = static_instructions(lambda a, n: code[a - 0x100 : a - 0x100 + n], 0x100, 0x106, Isa.T32)
    assert [(i.address, i.size, i.conditional_branch) for i in found] == [
        (0x100, 2, False),
        (0x102, 2, True),
        (0x104, 2, False),
    ]


def test_writers() -> None:
    c = CoverageCounter()
    c.feed_ranges(ranges(), read)
    cov = c.coverage(FakeSymbols(), read)
    lcov = list(lcov_lines(cov, "t"))
    assert lcov[:2] == ["TN:t", "SF:a.c"]
    assert "FN:1,loop" in lcov and "FNDA:0,cold" in lcov and "FNDA:1,loop" in lcov
    assert [x for x in lcov if x.startswith("BRDA")] == [
        "BRDA:2,0,0,2",
        "BRDA:2,0,1,1",
        "BRDA:6,0,0,-",
        "BRDA:6,0,1,-",
    ]
    assert "DA:7,0" in lcov and "LF:6" in lcov and "LH:3" in lcov and lcov[-1] == "end_of_record"
    root = ET.fromstring("\n".join(cobertura_xml(cov, "v", 0)))
    assert root.get("lines-covered") == "3" and root.get("branches-valid") == "4"
    line2 = root.find(".//class/lines/line[@number='2']")
    assert line2 is not None and line2.get("condition-coverage") == "100% (2/2)"
    text = list(text_lines(cov))
    assert text[2].split()[:3] == ["cold", "a.c:6", "0"]
    page = "\n".join(html_report(cov, lambda p: ["x"] * 8, "t"))
    assert '<span class="l miss"><span class="no">7</span>' in page
    assert '<span class="l none"><span class="no">4</span>' in page


DEMO = ROOT / "examples" / "coverage_demo"


def test_the_demo_counts_the_same_from_records_and_from_ranges() -> None:
    pytest.importorskip("elftools")
    from cstrace.analyses.coverage import count_run
    from cstrace.analyses.instructions import Executed, iter_executed
    from cstrace.api import open_trace
    from cstrace.decode import Session

    trace = open_trace(DEMO)
    by_records = CoverageCounter()
    by_records.feed(s for s in iter_executed(trace) if isinstance(s, Executed))
    by_ranges = CoverageCounter()
    session = Session(trace)
    for buffer in trace.buffers:
        for run in session.open_buffer(buffer).runs:
            count_run(by_ranges, session, run)
    assert by_ranges.hits == by_records.hits
    assert by_ranges.taken == by_records.taken
    assert by_ranges.not_taken == by_records.not_taken
    assert by_ranges.hits and by_ranges.taken and by_ranges.not_taken


@pytest.mark.parametrize(
    "name", ["juno_r1_1", "TC2", "Snowball", "armv8_1m_branches", "trace_cov_a15"]
)
def test_corpus_ranges_and_records_agree(corpus: Path, name: str) -> None:
    """On real captures (several ISAs and cores), the fast path counts what the
    instruction walker yields."""
    from cstrace.analyses.coverage import count_run
    from cstrace.analyses.instructions import Executed, iter_executed
    from cstrace.api import open_trace
    from cstrace.decode import Session

    path = corpus / "snapshots" / name
    if not path.exists():
        pytest.skip(f"{name} is not in the corpus")
    by_records = CoverageCounter()
    by_records.feed(s for s in iter_executed(open_trace(path)) if isinstance(s, Executed))
    by_ranges = CoverageCounter()
    trace = open_trace(path)
    session = Session(trace)
    for buffer in trace.buffers:
        for run in session.open_buffer(buffer).runs:
            count_run(by_ranges, session, run)
    assert by_ranges.hits and by_ranges.hits == by_records.hits
    assert (by_ranges.taken, by_ranges.not_taken) == (by_records.taken, by_records.not_taken)


def test_a_recording_is_counted_in_its_process(perfdata: Path) -> None:
    """perf.data: the code is the process's (selected by the trace's context ID), as the
    instruction walker reads it."""
    from cstrace.analyses.coverage import count_run
    from cstrace.analyses.instructions import Executed, iter_executed
    from cstrace.api import open_trace
    from cstrace.decode import Session
    from cstrace.trace import Trace

    path = perfdata / "perf_etm.data"
    if not path.exists():
        pytest.skip("perf_etm.data is not in the perf.data folder")

    def opened() -> Trace:
        return open_trace(path, symdirs=[perfdata])

    by_records = CoverageCounter()
    by_records.feed(s for s in iter_executed(opened()) if isinstance(s, Executed))
    by_ranges = CoverageCounter()
    trace = opened()
    session = Session(trace)
    for buffer in trace.buffers:
        for run in session.open_buffer(buffer).runs:
            count_run(by_ranges, session, run)
    assert by_ranges.hits and by_ranges.hits == by_records.hits
    assert (by_ranges.taken, by_ranges.not_taken) == (by_records.taken, by_records.not_taken)
    assert set(by_ranges.contexts.values()) == set(by_records.contexts.values()) != set()


def test_cli_takes_raw_images_and_reports_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cstrace.cli import main

    demo = ROOT / "examples" / "etm_demo"
    # a raw binary image: code for decoding, no symbols (every execution unattributed)
    assert main(["coverage", str(demo), "--image", f"{demo / 'user.bin'}@0x400000"]) == 0
    out, err = capsys.readouterr()
    assert "instruction executions at addresses of no function" in out
    assert "no source lines" in err
    assert main(["coverage", str(tmp_path / "missing")]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("cstrace: error: ") and "missing" in err and len(err.splitlines()) == 1
    assert main(["coverage", str(demo), "-o", str(tmp_path / "no" / "such.info")]) == 2
    _, err = capsys.readouterr()
    assert "such.info" in err and "Traceback" not in err


def test_mapping_symbols_give_the_isa_and_the_data_of_code_that_never_ran() -> None:
    class Mapped(FakeSymbols):
        def isa(self, address: int) -> Isa | None:
            return None if 0x1018 <= address < 0x101C else Isa.A64  # $d at 0x1018

    cov = CoverageCounter().coverage(Mapped(), read)  # nothing ran: no ISA from the trace
    cold = cov.functions[1]
    assert cold.instructions == 3  # the word at 0x1018 is data
    assert [b.address for b in cold.branches] == [0x1010]
    assert cov.functions[0].instructions == 4
    # without mapping symbols and with nothing executed, nothing is known to walk
    assert CoverageCounter().coverage(FakeSymbols(), read).functions[1].instructions == 0
