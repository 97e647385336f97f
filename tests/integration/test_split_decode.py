"""One long stream cut at synchronisation points and decoded in pieces gives the serial output.

Judged by the serial decode itself (``--jobs 1``): the listing (packet lines
included), text, JSON Lines and the null format's loss summary, stdout and
stderr, with ``--jobs 2`` and ``--jobs 3`` on ETMv4, ETE, PTM and ETMv3 corpus
snapshots (small streams are cut too: ``CSTRACE_SPLIT_MIN=1``), and with a
cut forced at every synchronisation point of the PTM and ETMv3 streams. Also: the run is really
cut and its pieces decoded in worker processes; a join whose states do not
agree (forced) is decoded again by the parent and the output stays the same;
every piece joins on the corpus, and the pieces' counts merge to the whole
run's.
"""

from __future__ import annotations

import filecmp
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from cstrace.analyses.loss import LossCounter, merge_losses
from cstrace.batch import ElementBatch
from cstrace.cli import main
from cstrace.decode import Session, SourceRun
from cstrace.inputs import open_input
from cstrace.parallel import ParallelDecode, can_fork, lanes_of, split_plans
from cstrace.protocols import DecodeOptions
from cstrace.render.ocsd import listing_lines
from cstrace.rows import expand
from cstrace.split import (
    SplitPlan,
    WindowStream,
    cut_in_every_format,
    fallback_run,
    find_gate,
    piece_of,
    piece_run,
    plan_split,
)
from tests.marks import corpus_params

pytestmark = pytest.mark.skipif(not can_fork(), reason="the process pool forks its workers")

SMALL = ["juno_r1_1", "infrastructure", "juno-uname-001"]
"""ETMv4 and ETE snapshots whose streams are short: cut with CSTRACE_SPLIT_MIN=1."""
PTM = ["Snowball", "TC2", "trace_cov_a15"]
"""Snapshots with PTM streams (TC2: with ETMv3 ones, cut too)."""


def decode(argv: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``cstrace decode`` with ``argv``, output to ``out``."""
    status = main(["decode", *argv, "-o", str(out)])
    got, err = capsys.readouterr()
    return status, got, err


def same_as_serial(
    snap: Path, fmt: str, jobs: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Path:
    """Decode ``snap`` with --jobs 1 and --jobs ``jobs``; assert the same files and messages."""
    serial_out = tmp_path / f"serial.{fmt}"
    serial = decode([str(snap), "--format", fmt, "--jobs", "1"], serial_out, capsys)
    cut_out = tmp_path / f"jobs{jobs}.{fmt}"
    cut = decode([str(snap), "--format", fmt, "--jobs", str(jobs)], cut_out, capsys)
    assert cut[0] == serial[0] == 0
    assert cut[2] == serial[2], "stderr differs"
    assert cut[1] == serial[1], "stdout differs"
    if fmt == "null":
        assert "summary:" in serial[2]
        assert not cut_out.exists()
    else:
        assert filecmp.cmp(serial_out, cut_out, shallow=False), "output differs"
    return serial_out


def plans_of(snap: Path, jobs: int, min_size: int) -> dict[int, SplitPlan]:
    trace = open_input(snap)
    return split_plans(trace, trace.buffers, DecodeOptions(), jobs, min_size)


@pytest.mark.parametrize("jobs", [2, 3])
@pytest.mark.parametrize("fmt", ["ocsd", "text", "jsonl", "null"])
@pytest.mark.parametrize("name", SMALL)
def test_small_streams_cut(
    corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    fmt: str,
    jobs: int,
) -> None:
    monkeypatch.setenv("CSTRACE_SPLIT_MIN", "1")
    snap = corpus / "snapshots" / name
    assert plans_of(snap, jobs, 1), "nothing to cut: the test would not test the split"
    same_as_serial(snap, fmt, jobs, tmp_path, capsys)


@pytest.mark.parametrize(
    ("fmt", "jobs"),
    [
        ("ocsd", 2),
        pytest.param("null", 2, marks=pytest.mark.slow),
        pytest.param("null", 3, marks=pytest.mark.slow),
        pytest.param("text", 3, marks=pytest.mark.slow),
    ],
)
def test_long_stream_cut(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, jobs: int
) -> None:
    """The busy stream of bugfix-exact-match (about 1 MB) is cut by default. (JSON Lines,
    20 s a decode, is left to the short streams: its lines are the text's elements.)"""
    snap = corpus / "snapshots" / "bugfix-exact-match"
    plans = plans_of(snap, jobs, 256 * 1024)
    assert {tid: p.pieces for tid, p in plans.items()} == {0x12: jobs}
    same_as_serial(snap, fmt, jobs, tmp_path, capsys)


def test_element_formats_cut_long_streams(
    corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The element formats cut a stream of the size the CLI asks for them (4 MiB by
    default: lowered here), without ``CSTRACE_SPLIT_MIN``, and the pieces' output (the
    null format's summary) is the serial one."""
    import cstrace.cli
    import cstrace.parallel

    monkeypatch.delenv("CSTRACE_SPLIT_MIN", raising=False)
    monkeypatch.setattr(cstrace.cli, "_SPLIT_MIN_ELEMENTS", 256 * 1024)
    made: list[dict[int, SplitPlan]] = []
    real = cstrace.parallel.split_plans

    def spy(*args: object, **kwargs: object) -> dict[int, SplitPlan]:
        plans = real(*args, **kwargs)  # type: ignore[arg-type]
        made.append(plans)
        return plans

    monkeypatch.setattr(cstrace.parallel, "split_plans", spy)
    same_as_serial(corpus / "snapshots" / "bugfix-exact-match", "null", 2, tmp_path, capsys)
    assert [{tid: p.pieces for tid, p in plans.items()} for plans in made] == [{0x12: 2}]


def test_short_streams_not_cut(corpus: Path) -> None:
    """By default a short stream keeps its lane (nothing to gain from cutting it)."""
    assert plans_of(corpus / "snapshots" / "juno_r1_1", 2, 256 * 1024) == {}


@pytest.mark.parametrize(("fmt", "jobs"), [("ocsd", 2), ("null", 2), ("text", 3)])
@pytest.mark.parametrize("name", ["Snowball", "TC2"])
def test_ptm_streams_cut(
    corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    fmt: str,
    jobs: int,
) -> None:
    monkeypatch.setenv("CSTRACE_SPLIT_MIN", "1")
    snap = corpus / "snapshots" / name
    plans = plans_of(snap, jobs, 1)
    assert plans, "nothing to cut: the test would not test the split"
    same_as_serial(snap, fmt, jobs, tmp_path, capsys)


def test_program_flow_cut_in_every_format(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PTM, ETMv3 and ETMv4 streams are cut in every output format
    (``CutPoints.every_format``): a piece of the element formats runs the protocol's one
    loop. By default only a stream of several megabytes is cut for them (the corpus's
    are not), and a cut one gives the serial output."""
    snaps = corpus / "snapshots"
    for name in ("Snowball", "TC2", "juno_r1_1"):
        trace = open_input(snaps / name)
        assert cut_in_every_format(trace)
        assert split_plans(trace, trace.buffers, DecodeOptions(), 2, 1, every_format_only=True)
    monkeypatch.delenv("CSTRACE_SPLIT_MIN", raising=False)
    snap = snaps / "juno_r1_1"
    trace = open_input(snap)
    assert not split_plans(trace, trace.buffers, DecodeOptions(), 2, 4 << 20, True)


def runs_of(snap: Path) -> Iterator[tuple[Session, SourceRun]]:
    """Every run of ``snap`` whose protocol can be cut, each in a session of its own."""
    trace = open_input(snap)
    for buffer in trace.buffers:
        for i, run in enumerate(Session(trace).open_buffer(buffer).runs):
            if run.protocol.splittable:
                session = Session(trace)
                yield session, session.open_buffer(buffer).runs[i]


@pytest.mark.parametrize("name", corpus_params(["bugfix-exact-match", *SMALL, *PTM]))
def test_every_piece_joins(corpus: Path, name: str) -> None:
    """Cut into many pieces, every join holds and the listing is the serial one."""
    cut = 0
    for _, run in runs_of(corpus / "snapshots" / name):
        plan = plan_split(run, 8)
        if plan is None:
            continue
        serial = list(listing_lines(run))
        lines: list[str] = []
        k = 0
        while True:
            piece = piece_run(run, plan, k)
            lines.extend(listing_lines(piece))
            info = piece_of(piece)
            assert info is not None and info.start_ok
            if info.stopped is None:
                break
            assert info.joined, f"piece {k} of trace ID {run.trace_id:#x} does not join"
            k = info.stopped + 1
            cut += 1
        assert k == plan.pieces - 1
        assert lines == serial
    if name != "trace_cov_a15":  # (its PTM stream is 14 bytes long)
        assert cut >= 1


def forced_plans(run: SourceRun) -> Iterator[SplitPlan]:
    """One plan per synchronisation point of ``run``'s stream where a fresh decode
    settles: a single cut there."""
    cuts = run.protocol.cuts
    assert cuts is not None
    data = run.stream.data
    size = len(data)
    at = data.find(cuts.sync)
    while at >= 0:
        first = at if cuts.start_of is None else cuts.start_of(data, at)
        cut = find_gate(run, WindowStream(run.stream, run.stream.offset_at(first)))
        if cut is not None:
            yield SplitPlan(run.trace_id, (cut,), size)
        at = data.find(cuts.sync, at + 1)


@pytest.mark.parametrize("name", corpus_params(PTM))
def test_ptm_cut_forced_at_every_sync(corpus: Path, name: str) -> None:
    """A cut at each A-sync of each PTM stream in turn: the two pieces join and give the
    serial listing; after the first piece, decoding again from its start (as the parent
    does when a join fails) gives the serial listing too."""
    forced = 0
    for _, run in runs_of(corpus / "snapshots" / name):
        serial = list(listing_lines(run))
        for plan in forced_plans(run):
            first = piece_run(run, plan, 0)
            lines = list(listing_lines(first))
            info = piece_of(first)
            assert info is not None and info.stopped == 0 and info.joined
            second = piece_run(run, plan, 1)
            rest = list(listing_lines(second))
            start = piece_of(second)
            assert start is not None and start.start_ok and start.at_end
            assert lines + rest == serial, (run.trace_id, plan.cuts[0].offset)
            assert info.last is not None
            again = list(listing_lines(fallback_run(run, plan, 0, info.last)))
            assert lines + again == serial
            forced += 1
    if name != "trace_cov_a15":
        assert forced >= 3


ETMV3 = ["TC2"]
"""Snapshots with ETMv3 streams that are decoded (trace_cov_a15 describes ETMv3 sources
but captured none of their trace)."""


@pytest.mark.parametrize("name", corpus_params(ETMV3))
def test_etmv3_cut_forced_at_every_sync(corpus: Path, name: str) -> None:
    """A cut at each A-sync of each ETMv3 stream in turn: the two pieces join and give
    the serial listing (as :func:`test_ptm_cut_forced_at_every_sync`), and the serial
    element rows."""
    forced = syncs = 0
    for _, run in runs_of(corpus / "snapshots" / name):
        if run.protocol.name != "etmv3":
            continue
        cuts = run.protocol.cuts
        assert cuts is not None
        syncs += run.stream.data.count(cuts.sync)
        serial = list(listing_lines(run))
        rows = [e for items in run.rows() for e in expand_rows(items)]
        for plan in forced_plans(run):
            first = piece_run(run, plan, 0)
            second = piece_run(run, plan, 1)
            lines = list(listing_lines(first)) + list(listing_lines(second))
            info, start = piece_of(first), piece_of(second)
            assert info is not None and info.joined and start is not None and start.start_ok
            assert lines == serial, (run.trace_id, plan.cuts[0].offset)
            first, second = piece_run(run, plan, 0), piece_run(run, plan, 1)
            pieces = [e for r in (first, second) for items in r.rows() for e in expand_rows(items)]
            assert pieces == rows, (run.trace_id, plan.cuts[0].offset)
            forced += 1
    assert forced == syncs >= 20  # (a cut at every one)


def expand_rows(items: list[object]) -> list[object]:
    """Element objects of a list of element rows (of objects or of a batch)."""
    if len(items) == 1 and isinstance(items[0], ElementBatch):
        return list(items[0])
    return list(expand(items))


def test_pieces_count_as_the_run(corpus: Path) -> None:
    """The loss counts of the pieces, merged, are those of the whole run."""
    sessions = list(runs_of(corpus / "snapshots" / "juno_r1_1"))
    _, run = next((s, r) for s, r in sessions if r.trace_id == 0x10)
    plan = plan_split(run, 4)
    assert plan is not None and plan.pieces == 4
    whole = LossCounter()
    for _ in whole.watch(run).elements():
        pass
    parts = []
    for k in range(plan.pieces):
        counter = LossCounter()
        for _ in counter.watch(piece_run(run, plan, k)).elements():
            pass
        parts.append((counter.report().sources[0], counter.address_hits()))
    expected = whole.report().sources[0]
    merged = merge_losses(parts, plan.size)
    assert merged == expected
    assert expected.nacc and expected.syncs.count > 3  # there was something to merge


def listing_work(
    session: Session, run: SourceRun, path: str, progress: Callable[[int], None]
) -> object:
    """A worker's job: the run's listing lines into ``path``; says whether it was a piece."""
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for line in listing_lines(run):
            out.write(line + "\n")
    return (os.getpid(), piece_of(run) is not None)


def pool_listing(
    snap: Path, plans: dict[int, SplitPlan], jobs: int
) -> tuple[list[str], list[object], int]:
    """The listing of every run of ``snap`` through the pool (runs cut by ``plans``), the
    results of the runs and how many parts the parent decoded again."""
    trace = open_input(snap)
    buffers = list(trace.buffers)
    lanes = lanes_of(trace, buffers, DecodeOptions())
    assert lanes is not None
    text: list[str] = []
    results: list[object] = []
    with ParallelDecode(
        trace,
        buffers,
        DecodeOptions(),
        listing_work,
        lanes,
        jobs,
        splits=plans,
        merge=lambda parts, plan: list(parts),
    ) as pool:
        index = 0
        for buffer in buffers:
            for run in Session(trace).open_buffer(buffer).runs:
                done = yield_all(pool.follow(index, run.trace_id), text)
                os.unlink(done.path)
                results.append(done.result)
                index += 1
        again = pool.decoded_again
    return text, results, again


def yield_all(gen: Iterator[str], into: list[str]) -> object:
    """Collect the lines of a follow generator into ``into``; its return value."""
    while True:
        try:
            piece = next(gen)
        except StopIteration as end:
            done = end.value
            break
        into.extend(piece.split("\n"))
    return done


def serial_listing(snap: Path) -> list[str]:
    trace = open_input(snap)
    session = Session(trace)
    return [line for run in session.runs() for line in listing_lines(run)]


def test_pieces_decoded_by_workers(corpus: Path) -> None:
    snap = corpus / "snapshots" / "juno_r1_1"
    plans = plans_of(snap, 3, 1)
    text, results, again = pool_listing(snap, plans, 2)
    assert text == serial_listing(snap)
    assert again == 0
    cut = [r for r in results if isinstance(r, list)]
    assert len(cut) == len(plans)
    pieces = [p for parts in cut for p in parts]
    assert all(isinstance(p, tuple) and p[1] for p in pieces)  # decoded as pieces...
    assert {p[0] for p in pieces if isinstance(p, tuple)} - {os.getpid()}  # ...by workers


@pytest.mark.parametrize("broken", [0, 1])
def test_failed_join_decoded_again(corpus: Path, broken: int) -> None:
    """A cut whose planned state is wrong: the piece before it does not join, the piece
    after it does not start as planned; the parent decodes that part again, and the
    listing is still the serial one."""
    snap = corpus / "snapshots" / "juno_r1_1"
    plans = plans_of(snap, 3, 1)
    plan = plans[0x10]
    assert plan.pieces == 3
    cuts = list(plan.cuts)
    cuts[broken] = replace(cuts[broken], state=("not", "the", "state"))
    plans[0x10] = replace(plan, cuts=tuple(cuts))
    text, _, again = pool_listing(snap, plans, 2)
    assert again >= 1
    assert text == serial_listing(snap)


def test_fallback_from_every_piece(corpus: Path) -> None:
    """Decoding again after any piece (as the parent does when a join fails), then on with
    the pieces from the cut where the fallback joins, gives the serial listing."""
    checked = 0
    for _, run in runs_of(corpus / "snapshots" / "infrastructure"):
        plan = plan_split(run, 4)
        if plan is None:
            continue
        serial = list(listing_lines(run))
        for k in range(plan.pieces - 1):
            lines: list[str] = []
            for j in range(k + 1):
                piece = piece_run(run, plan, j)
                lines.extend(listing_lines(piece))
            info = piece_of(piece)
            assert info is not None and info.last is not None
            again = fallback_run(run, plan, k, info.last)
            lines.extend(listing_lines(again))
            rest = piece_of(again)
            assert rest is not None
            if rest.stopped is not None:
                assert rest.joined
                for j in range(rest.stopped + 1, plan.pieces):
                    lines.extend(listing_lines(piece_run(run, plan, j)))
            assert lines == serial, (run.trace_id, k)
            checked += 1
    assert checked >= 3


def rows_of(run: SourceRun) -> list[object]:
    """The element objects of ``run``'s rows (:meth:`SourceRun.rows`: the one loop)."""
    return [e for items in run.rows() for e in expand_rows(items)]


@pytest.mark.parametrize("name", corpus_params(["bugfix-exact-match", "juno_r1_1", *PTM]))
def test_piece_rows_are_the_serial_rows(corpus: Path, name: str) -> None:
    """The element rows of the pieces (each read and decoded in the protocol's one loop,
    not packet by packet), put end to end, are the serial rows; every join holds."""
    cut = 0
    for _, run in runs_of(corpus / "snapshots" / name):
        plan = plan_split(run, 6)
        if plan is None:
            continue
        serial = rows_of(run)
        rows: list[object] = []
        k = 0
        while True:
            piece = piece_run(run, plan, k)
            assert piece.protocol.iter_stream_rows is not None  # (the one loop)
            rows.extend(rows_of(piece))
            info = piece_of(piece)
            assert info is not None and info.start_ok
            if info.stopped is None:
                break
            assert info.joined, f"piece {k} of trace ID {run.trace_id:#x} does not join"
            k = info.stopped + 1
            cut += 1
        assert k == plan.pieces - 1
        assert rows == serial, run.trace_id
    if name != "trace_cov_a15":
        assert cut >= 1


@pytest.mark.parametrize("name", corpus_params(["juno_r1_1", "Snowball"]))
def test_piece_rows_after_a_failed_join(corpus: Path, name: str) -> None:
    """A cut whose planned state is wrong: the piece before it reads up to its gate and
    says it does not join, the piece after it that it did not start as planned; the rows
    decoded again from where the first stopped (as the parent does) complete the serial
    rows."""
    checked = 0
    for _, run in runs_of(corpus / "snapshots" / name):
        plan = plan_split(run, 3)
        if plan is None:
            continue
        cuts = list(plan.cuts)
        cuts[0] = replace(cuts[0], state=("not", "the", "state"))
        plan = replace(plan, cuts=tuple(cuts))
        first = piece_run(run, plan, 0)
        rows = rows_of(first)
        info = piece_of(first)
        assert info is not None and info.stopped == 0 and not info.joined
        assert info.last == plan.cuts[0].gate
        second = piece_run(run, plan, 1)
        rows_of(second)
        after = piece_of(second)
        assert after is not None and not after.start_ok
        again = fallback_run(run, plan, 0, info.last)
        rows.extend(rows_of(again))
        rest = piece_of(again)
        assert rest is not None
        if rest.stopped is not None:
            assert rest.joined
            for j in range(rest.stopped + 1, plan.pieces):
                rows.extend(rows_of(piece_run(run, plan, j)))
        assert rows == rows_of(run), run.trace_id
        checked += 1
    assert checked >= 1


def test_window_stream_ends() -> None:
    """A window with an end gives the bytes from capture index ``start`` up to the end of
    the packet of ``size`` bytes at capture index ``index``, block by block, runs kept,
    even when that packet goes on in the next run (formatter frame)."""
    import numpy as np

    from cstrace.capture.stream import Stream

    data = bytes(range(40))
    # two runs: positions 0-19 at capture indices 100-119, 20-39 at 200-219
    inner = Stream(7, data, np.array([0, 20], np.int64), np.array([100, 200], np.int64))
    for start, end, want in [
        (-1, (110, 1), data[:11]),
        (105, (118, 4), data[5:22]),  # the packet goes on in the second run
        (105, (119, 1), data[5:20]),
        (105, (150, 2), data[5:22]),  # (no byte at 150: from the next one)
        (0, (215, 100), data),
        (210, (212, 3), data[30:35]),
    ]:
        window = WindowStream(inner, start, end)
        got = b"".join(bytes(b.data) for b in window.blocks())
        assert got == want, (start, end)
    part = next(WindowStream(inner, 105, (200, 5)).blocks())
    assert [int(x) for x in part.run_idx] == [105, 200]
    assert [int(x) for x in part.run_pos] == [0, 15]
