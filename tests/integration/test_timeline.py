"""``cstrace timeline``: the Perfetto trace it writes, read back with Perfetto's own schema.

The program of :mod:`tests.profiles.program` (``work`` calls ``f1`` five times
and ``f2`` five times) is built, run in an emulator and traced; the timeline
of its trace is parsed with the ``perfetto`` package's protobuf classes (the
``Trace`` message; its trace processor would download a binary, so it is not
used) and its slices are rebuilt from the begin/end events: every call the
emulator made is a slice named after its function, nested in its caller, and
on the instruction clock starts and ends where the emulator's count says.
The examples give the software-trace side: strings as instants, values as
counters, on the trace's timestamps.
"""

from __future__ import annotations

import io
import itertools
from contextlib import redirect_stderr
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cstrace.cli import main
from tests.conftest import ROOT
from tests.profiles import program as prog

trace_pb2 = pytest.importorskip(
    "perfetto.protos.perfetto.trace.perfetto_trace_pb2",
    reason="the perfetto package (pip install perfetto) holds Perfetto's trace schema",
)

needs_program = pytest.mark.skipif(
    prog.compiler() is None,
    reason=f"{prog.CC} not installed (Debian: gcc-aarch64-linux-gnu); the test program "
    "cannot be built",
)


@dataclass
class Read:
    """A Perfetto trace read back: tracks by uuid, slices, instants and counter values."""

    tracks: dict[int, Any]
    slices: list[tuple[int, str, int, int, int, str]]
    """(track, name, start, end, depth, category)"""
    instants: list[tuple[int, str, int, dict[str, object]]]
    counters: list[tuple[int, int, int]]

    def track(self, name: str) -> int:
        (uid,) = [u for u, t in self.tracks.items() if t.name == name]
        return uid


def read(path: Path) -> Read:
    trace = trace_pb2.Trace()
    trace.ParseFromString(path.read_bytes())
    tracks: dict[int, Any] = {}
    slices = []
    instants = []
    counters = []
    stacks: dict[int, list[tuple[str, int, str]]] = {}
    last = 0
    E = trace_pb2.TrackEvent
    for p in trace.packet:
        assert p.trusted_packet_sequence_id == 1
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
            continue
        ev = p.track_event
        assert ev.track_uuid in tracks  # described before use
        assert p.timestamp >= last  # in time order
        last = p.timestamp
        stack = stacks.setdefault(ev.track_uuid, [])
        if ev.type == E.TYPE_SLICE_BEGIN:
            stack.append((ev.name, p.timestamp, ev.categories[0]))
        elif ev.type == E.TYPE_SLICE_END:
            name, start, cat = stack.pop()
            slices.append((ev.track_uuid, name, start, p.timestamp, len(stack), cat))
        elif ev.type == E.TYPE_INSTANT:
            args = {
                a.name: a.string_value if a.HasField("string_value") else a.int_value
                for a in ev.debug_annotations
            }
            instants.append((ev.track_uuid, ev.name, p.timestamp, args))
        else:
            assert ev.type == E.TYPE_COUNTER
            assert tracks[ev.track_uuid].HasField("counter")
            counters.append((ev.track_uuid, p.timestamp, ev.counter_value))
    assert all(not s for s in stacks.values())  # every slice ended
    return Read(tracks, sorted(slices, key=lambda s: (s[2], s[4])), instants, counters)


def timeline(tmp_path: Path, *args: str) -> Read:
    out = tmp_path / "trace.pftrace"
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["timeline", *args, "-o", str(out)]) == 0, err.getvalue()
    assert "wrote" in err.getvalue() and "Traceback" not in err.getvalue()
    return read(out)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> prog.Program:
    pytest.importorskip("unicorn")
    return prog.build(tmp_path_factory.mktemp("prog"))


def calls(built: prog.Program, name: str, end: str) -> list[tuple[int, int]]:
    """(start, end) instruction counts of each run of the emulator inside ``name`` (up to
    the function ``end`` starts at)."""
    lo, hi = prog.BASE + built.symbols[name], prog.BASE + built.symbols[end]
    out = []
    for inside, group in itertools.groupby(
        enumerate(built.executed), key=lambda ia: lo <= ia[1] < hi
    ):
        if inside:
            idx = [i for i, _ in group]
            out.append((idx[0], idx[-1] + 1))
    return out


@needs_program
def test_function_slices_are_the_emulators_calls(built: prog.Program, tmp_path: Path) -> None:
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    got = timeline(
        tmp_path, str(built.capture), f"--image={built.path}@{prog.BASE:#x}",
        "--protocol=0x10=ETM4.0", "--core=0x10=Cortex-A53", *regs,
    )  # fmt: skip
    uid = got.track("trace_0x10 (etmv4) [instructions]")
    assert "1 ns = 1 instruction" in got.tracks[uid].description
    mine = [s for s in got.slices if s[0] == uid]
    names = [s[1] for s in mine]
    assert names.count("f1") == 5 and names.count("f2") == 5
    assert names.count("work") == 1 and names.count("_start") == 1
    (start,) = [s for s in mine if s[1] == "_start"]
    (work,) = [s for s in mine if s[1] == "work"]
    assert start[4] == 0 and work[4] == 1 and start[2] <= work[2] < work[3] <= start[3]
    # Each call of f1 and f2: nested in work, and exactly where the emulator ran it.
    for name, end in (("f1", "f2"), ("f2", "work")):
        spans = [(s[2], s[3]) for s in mine if s[1] == name]
        assert spans == calls(built, name, end)
        assert all(s[4] == 2 for s in mine if s[1] == name)
    assert all(s[5] == "function" for s in mine)
    markers = [i[1] for i in got.instants if got.tracks[i[0]].parent_uuid == uid]
    assert markers == ["trace on (normal)", "end of trace"]
    # A bound on the slices kept: the first ones, the others counted on the track.
    few = timeline(
        tmp_path, str(built.capture), f"--image={built.path}@{prog.BASE:#x}",
        "--protocol=0x10=ETM4.0", "--core=0x10=Cortex-A53", *regs, "--max-slices", "4",
    )  # fmt: skip
    uid = few.track("trace_0x10 (etmv4) [instructions]")
    kept = [s for s in few.slices if s[0] == uid]
    assert [(s[1], s[2], s[3]) for s in kept] == [(s[1], s[2], s[3]) for s in mine[:6]]
    # (_start and work are still running when the trace ends: kept, not counted.)
    assert f"{len(mine) - 2 - 4} calls left out" in few.tracks[uid].description


@needs_program
def test_timestamps_clock(built: prog.Program, tmp_path: Path) -> None:
    # A timestamp after every waypoint, counting the instructions executed: the slices on
    # the timestamps clock are the emulator's calls again.
    capture = prog.timed_capture(built, tmp_path / "timed.bin")
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.TIMED_REGISTERS.items()]
    got = timeline(
        tmp_path, str(capture), f"--image={built.path}@{prog.BASE:#x}",
        "--protocol=0x10=ETM4.0", "--core=0x10=Cortex-A53", *regs,
    )  # fmt: skip
    uid = got.track("trace_0x10 (etmv4) [timestamps]")
    assert "timestamp tick" in got.tracks[uid].description
    for name, end in (("f1", "f2"), ("f2", "work")):
        spans = [(s[2], s[3]) for s in got.slices if s[0] == uid and s[1] == name]
        assert spans == calls(built, name, end)


def test_software_trace_strings_and_values(tmp_path: Path) -> None:
    got = timeline(tmp_path, str(ROOT / "examples" / "stm_demo"))
    uid = got.track("STM_0 (stm) [timestamps]")
    text = got.track("STM_0 master 0x40 channel 1")
    assert got.tracks[text].parent_uuid == uid
    (boot,) = [i for i in got.instants if i[0] == text]
    assert boot[1] == "boot ok" and boot[3] == {"text": "boot ok\n", "bytes": 8}
    # Values written are counters, at their timestamps.
    sensor = got.track("STM_0 master 0x40 channel 2 value")
    assert [(t, v) for u, t, v in got.counters if u == sensor] == [
        (0x1770, 0x123),
        (0x17F0, 0x130),
        (0x1870, 0x142),
        (0x18F0, 0x151),
    ]
    # The string has no timestamp of its own: it lies between the writes around it.
    assert 0x16F0 < boot[2] < 0x1770


def test_exceptions_and_shared_time_base(tmp_path: Path) -> None:
    got = timeline(tmp_path, str(ROOT / "examples" / "etm_demo"))
    etm = got.track("ETM_0 (etmv4) [timestamps]")
    stm = got.track("STM_0 (stm) [timestamps]")
    exceptions = [s for s in got.slices if s[0] == etm and s[5] == "exception"]
    assert exceptions and all(s[1].endswith("(exception 0x02)") for s in exceptions)
    # Two SVCs enter the handler (no symbols: it is named by its address; its branches
    # to addresses no symbol covers go on as "[unknown]" frames of the same exception).
    entries = [s for s in exceptions if s[1].startswith("0xffffffc000080400 ")]
    assert len(entries) == 2
    # The sum (14) is written by the first SVC's handler, on the ETM's clock.
    (sum_,) = [(t, v) for u, t, v in got.counters if got.tracks[u].parent_uuid == stm and v == 14]
    assert entries[0][2] <= sum_[0] <= entries[1][2]


def test_bad_output_path(tmp_path: Path) -> None:
    err = io.StringIO()
    with redirect_stderr(err):
        status = main(
            ["timeline", str(ROOT / "examples" / "stm_demo"), "-o", str(tmp_path / "no" / "x")]
        )
    assert status == 2 and err.getvalue().startswith("cstrace: error: ")


@needs_program
def test_svg_picture(built: prog.Program, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    out = tmp_path / "prog.svg"
    err = io.StringIO()
    with redirect_stderr(err):
        status = main(
            ["timeline", str(built.capture), f"--image={built.path}@{prog.BASE:#x}",
             "--protocol=0x10=ETM4.0", "--core=0x10=Cortex-A53", *regs, "-o", str(out)]
        )  # fmt: skip
    assert status == 0, err.getvalue()
    svg = ET.parse(out).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text or "" for t in svg.iter(f"{ns}title")]
    names = [t.split(" [")[0] for t in titles]
    assert names.count("f1") == 5 and names.count("f2") == 5 and names.count("work") == 1
    # The slices lie inside the picture, in the order the calls were made.
    rects = [r for r in svg.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    xs = [float(r.get("x", "0")) for r in rects]
    width = float(svg.get("width", "0"))
    assert all(0 <= x < width for x in xs)
    calls_in_order = [n for n in names if n in ("f1", "f2")]
    assert calls_in_order == ["f2", "f1"] * 5
