"""Element batches on the corpus: every element of every snapshot goes through the columns.

Each snapshot is decoded with the public API (``cstrace.iter_elements``, every
buffer), its elements grouped by source (the consecutive elements of one trace
ID), in chunks of at most ``CHUNK`` so that memory stays flat. Per chunk:
objects → batch → objects is the identity (equal elements whose fields have
the same classes: see ``fingerprint``), batch → objects → batch gives equal
columns (``iter_batches`` then ``concat``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import groupby
from operator import attrgetter, itemgetter, ne
from pathlib import Path
from typing import Any

import pytest

import cstrace
from cstrace.batch import ElementBatch, iter_batches
from cstrace.elements import Element, PEContextInfo
from tests.conftest import corpus_dir
from tests.marks import corpus_params

CHUNK = 200_000
"""Elements checked at a time (bugfix-exact-match's 1.74 M elements make 9 chunks)."""

_CORPUS = corpus_dir()
SNAPSHOTS = (
    sorted(p.name for p in (_CORPUS / "snapshots").iterdir() if p.is_dir())
    if _CORPUS is not None
    else ["<corpus absent>"]
)


def chunks(path: Path) -> Iterator[tuple[int, list[Element]]]:
    """(trace ID, up to CHUNK elements) of one source at a time, in decode order."""
    for trace_id, pairs in groupby(cstrace.iter_elements(path), key=itemgetter(0)):
        chunk: list[Element] = []
        for _, elem in pairs:
            chunk.append(elem)
            if len(chunk) == CHUNK:
                yield trace_id, chunk
                chunk = []
        if chunk:
            yield trace_id, chunk


_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


def fingerprint(elem: object) -> tuple[tuple[Any, ...], tuple[type, ...]]:
    """Class and field values of ``elem`` (PEContextInfo fields too), and their classes.

    Equal for two elements when they are ``==`` and every field has the same
    class. ``Element.__eq__`` compares the same values, but slowly for
    millions of elements, and not their classes.
    """
    get = _GETTERS.get(type(elem))
    if get is None:
        names = ["__class__"]
        for klass in type(elem).__mro__:
            for name in getattr(klass, "__slots__", ()):
                if isinstance(getattr(elem, name), PEContextInfo):
                    names += [f"{name}.{n}" for n in PEContextInfo.__slots__]
                names.append(name)
        get = _GETTERS[type(elem)] = attrgetter(*names)
    values = get(elem)
    return values, tuple(map(type, values))


def first_difference(got: list[Element], want: list[Element]) -> str | None:
    """None when both lists hold identical elements, else where and how they differ."""
    if len(got) != len(want):
        return f"{len(got)} elements instead of {len(want)}"
    got_fp, want_fp = map(fingerprint, got), map(fingerprint, want)
    if not any(map(ne, got_fp, want_fp)):
        return None
    i = next(
        i
        for i, (g, w) in enumerate(zip(got, want, strict=True))
        if fingerprint(g) != fingerprint(w)
    )
    g, w = fingerprint(got[i]), fingerprint(want[i])
    return f"element {i}: {got[i]!r} {g[1]} instead of {want[i]!r} {w[1]}"


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus_params(SNAPSHOTS))
def test_corpus_elements_round_trip_through_batches(corpus: Path, name: str) -> None:
    rows = 0
    for trace_id, elems in chunks(corpus / "snapshots" / name):
        batch = ElementBatch.from_elements(elems, trace_id)
        assert len(batch) == len(elems)
        back = batch.to_elements()
        diff = first_difference(back, elems)
        assert diff is None, f"{name} {trace_id:#x}: objects → batch → objects: {diff}"
        assert back[::101] == elems[::101]  # Element.__eq__ itself, on a sample
        # batch → objects → batch, in batches of 64 Ki rows joined again
        again = ElementBatch.concat(iter_batches(back, trace_id, size=65536))
        assert again.equals(batch), f"{name} {trace_id:#x}: batch → objects → batch differ"
        rows += len(elems)
    assert rows > 0 or name in EMPTY, f"{name}: no elements decoded"


EMPTY: set[str] = set()
"""Snapshots that decode to no element at all (none today)."""
