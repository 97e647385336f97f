"""Element rows on the corpus: the columns a decoder fills without element objects.

For every run of every buffer of every snapshot, the batches of
``SourceRun.batches()`` (from the decoder's element rows, :mod:`cstrace.rows`,
where the protocol makes them) hold exactly the columns of the batches made
from the element objects of ``SourceRun.elements()``; and the loss counts of a
decode through the rows equal those of a decode through the objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import cstrace
from cstrace.analyses.loss import LossCounter
from cstrace.batch import ElementBatch, iter_batches
from cstrace.decode import Session, SourceRun
from tests.conftest import corpus_dir
from tests.marks import corpus_params

_CORPUS = corpus_dir()
SNAPSHOTS = (
    sorted(p.name for p in (_CORPUS / "snapshots").iterdir() if p.is_dir())
    if _CORPUS is not None
    else ["<corpus absent>"]
)


def _runs(path: Path) -> Iterator[tuple[SourceRun, SourceRun]]:
    """Each run of each buffer twice, from two sessions decoding in step."""
    trace_a, trace_b = cstrace.open_trace(path), cstrace.open_trace(path)
    sa, sb = Session(trace_a), Session(trace_b)
    for buf_a, buf_b in zip(trace_a.buffers, trace_b.buffers, strict=True):
        runs_a = sa.open_buffer(buf_a).runs
        runs_b = sb.open_buffer(buf_b).runs
        yield from zip(runs_a, runs_b, strict=True)


def _rows_of(batches: Iterator[ElementBatch]) -> Iterator[dict[str, np.ndarray]]:
    for batch in batches:
        yield dict(batch.columns)


def first_difference(got: Iterator[ElementBatch], want: Iterator[ElementBatch]) -> str | None:
    """None when both batch streams hold the same rows (however they are cut), else where."""
    a, b = _rows_of(got), _rows_of(want)
    ca: dict[str, np.ndarray] | None = None
    cb: dict[str, np.ndarray] | None = None
    row = 0
    while True:
        if not ca or len(ca["type"]) == 0:
            ca = next(a, None)
        if not cb or len(cb["type"]) == 0:
            cb = next(b, None)
        if ca is None or cb is None:
            if ca is None and cb is None:
                return None
            return f"one side ends at row {row}"
        n = min(len(ca["type"]), len(cb["type"]))
        if n == 0:
            continue
        for name in ca:
            if not np.array_equal(ca[name][:n], cb[name][:n]):
                at = int(np.flatnonzero(ca[name][:n] != cb[name][:n])[0])
                return f"row {row + at}: column {name} {ca[name][at]} != {cb[name][at]}"
        ca = {k: v[n:] for k, v in ca.items()}
        cb = {k: v[n:] for k, v in cb.items()}
        row += n


@pytest.mark.parametrize("name", corpus_params(SNAPSHOTS))
def test_row_batches_equal_object_batches(name: str) -> None:
    if _CORPUS is None:
        pytest.skip("corpus absent: set CSTRACE_CORPUS or put it at ../shared/corpus")
    checked = 0
    for run_rows, run_objs in _runs(_CORPUS / "snapshots" / name):
        got = run_rows.batches(size=50_000)
        want = iter_batches(run_objs.elements(), run_objs.trace_id, 65536)
        diff = first_difference(got, want)
        assert diff is None, f"{name} trace ID {run_rows.trace_id:#x}: {diff}"
        checked += 1
    assert checked


@pytest.mark.parametrize("name", corpus_params(SNAPSHOTS))
def test_row_counts_equal_object_counts(name: str) -> None:
    if _CORPUS is None:
        pytest.skip("corpus absent: set CSTRACE_CORPUS or put it at ../shared/corpus")
    by_rows, by_objs = LossCounter(), LossCounter()
    for run_rows, run_objs in _runs(_CORPUS / "snapshots" / name):
        for _ in by_rows.watch(run_rows).rows():
            pass
        for _ in by_objs.watch(run_objs).elements():
            pass
    assert by_rows.report() == by_objs.report()
    assert sum(s.elements for s in by_rows.report().sources) > 0
