"""Atom packets read as runs (``iter_packets(..., group_atoms=True)``) on the corpus.

For every ETMv4/ETE run of every corpus snapshot, the packets read with atoms
grouped, each :class:`AtomRun` expanded into its atom packets, are the packets
read one by one (same classes, offsets, raw bytes and fields); and no run
crosses a gap in capture indices.
"""

from __future__ import annotations

from itertools import zip_longest

import pytest

import cstrace
from cstrace.decode import Session
from cstrace.protocols.etmv4.packets import Atom, AtomRun
from cstrace.protocols.etmv4.reader import iter_packets, run_atoms
from tests.conftest import corpus_dir

_CORPUS = corpus_dir()
SNAPSHOTS = (
    sorted(p.name for p in (_CORPUS / "snapshots").iterdir() if p.is_dir())
    if _CORPUS is not None
    else ["<corpus absent>"]
)


def _fields(p: object) -> tuple[object, ...]:
    names = ["offset", "raw", "kind"]
    if isinstance(p, Atom):
        names += ["bits", "count"]
    return (type(p), *(getattr(p, n, None) for n in names))


def test_grouped_atoms_expand_to_the_packets() -> None:
    if _CORPUS is None:
        pytest.skip("corpus absent: set CSTRACE_CORPUS or put it at ../shared/corpus")
    checked: list[str] = []
    for name in SNAPSHOTS:
        trace = cstrace.open_trace(_CORPUS / "snapshots" / name)
        session = Session(trace)
        for buffer in trace.buffers:
            for run in session.open_buffer(buffer).runs:
                if run.protocol.name not in ("etmv4", "ete"):
                    continue
                stream, config, complete = run.stream, run.config, run.context.complete
                grouped = []
                for p in iter_packets(stream, config, complete, group_atoms=True):
                    if type(p) is AtomRun:
                        assert len(p.raw) > 1
                        grouped += run_atoms(p)
                    else:
                        grouped.append(p)
                plain = iter_packets(stream, config, complete)
                for i, (g, want) in enumerate(zip_longest(grouped, plain)):
                    assert g is not None and want is not None, f"{name}: lengths differ at {i}"
                    assert _fields(g) == _fields(want), f"{name} {run.trace_id:#x} packet {i}"
                checked.append(name)
    assert "bugfix-exact-match" in checked
