"""Element batches: time to go from element objects to batches and back, and memory per row.

Input: a snapshot (default: ``bugfix-exact-match`` of the reference corpus,
1.74 million elements, nearly all ``INSTR_RANGE``), decoded once with
``cstrace.iter_elements`` and kept as element objects per source. Output, per
step, the best of ``--repeat`` runs in nanoseconds per element, by CPU time
(the steadier figure on a shared machine) and wall clock:

- ``objects → batches``: ``iter_batches`` (64 Ki rows a batch), every source;
- ``builder methods``: the same rows through the typed ``BatchBuilder``
  methods, as a decoder would call them (arguments read from the objects);
- ``batches → objects (streamed)``: iterating the batches, objects dropped;
- ``batches → objects (kept)``: ``to_elements`` of every batch, kept in a list;
- ``to_arrow``: one Arrow table of all the rows.

Memory: bytes per row of the batch columns, of the Arrow table, and of the
element objects (``tracemalloc`` while ``to_elements`` makes them).

    python benchmarks/bench_batch.py [--snapshot PATH] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import time
import tracemalloc
from collections.abc import Callable
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import cstrace
from cstrace.batch import BatchBuilder, ElementBatch, iter_batches
from cstrace.elements import Element, InstrRange

CORPUS = Path(os.environ.get("CSTRACE_CORPUS", Path(__file__).parents[2] / "shared" / "corpus"))


def best(repeat: int, step: Callable[[], Any]) -> tuple[float, float]:
    """(CPU seconds, wall seconds), each the least of ``repeat`` runs of ``step``."""
    cpu, wall = [], []
    for _ in range(repeat):
        gc.collect()
        c, w = time.process_time(), time.perf_counter()
        step()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return min(cpu), min(wall)


def by_builder_methods(sources: list[tuple[int, list[Element]]]) -> list[ElementBatch]:
    """Batches made by the typed builder methods (INSTR_RANGE) and ``append`` (the rest)."""
    out = []
    for trace_id, elems in sources:
        builder = BatchBuilder(trace_id)
        instr_range, append = builder.instr_range, builder.append
        for i, e in enumerate(elems, 1):
            if type(e) is InstrRange:
                instr_range(
                    e.offset,
                    e.start,
                    e.end,
                    e.num_instr,
                    e.isa,
                    e.last_exec,
                    e.last_size,
                    e.last_type,
                    e.last_subtype,
                    e.last_cond,
                    e.cycle_count,
                )
            else:
                append(e)
            if i % 65536 == 0:
                out.append(builder.flush())
        out.append(builder.flush())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--snapshot", type=Path, default=CORPUS / "snapshots" / "bugfix-exact-match"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    sources = [
        (tid, [e for _, e in pairs])
        for tid, pairs in groupby(cstrace.iter_elements(args.snapshot), key=itemgetter(0))
    ]
    rows = sum(len(elems) for _, elems in sources)
    print(f"{args.snapshot.name}: {rows} elements, {len(sources)} sources")

    def to_batches() -> list[ElementBatch]:
        return [b for tid, elems in sources for b in iter_batches(elems, tid)]

    batches = to_batches()

    def streamed() -> None:
        for batch in batches:
            for _ in batch:
                pass

    def kept() -> list[Element]:
        return [e for batch in batches for e in batch.to_elements()]

    whole = ElementBatch.concat(batches)
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("objects → batches (iter_batches)", to_batches),
        ("builder methods", lambda: by_builder_methods(sources)),
        ("batches → objects (streamed)", streamed),
        ("batches → objects (kept)", kept),
        ("to_arrow", whole.to_arrow),
    ]
    for name, step in steps:
        cpu, wall = best(args.repeat, step)
        print(f"  {name:34} {cpu * 1e9 / rows:7.0f} ns/row CPU  {wall * 1e9 / rows:7.0f} wall")

    table = whole.to_arrow()
    gc.collect()
    tracemalloc.start()
    objects = whole.to_elements()
    object_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(objects) == rows
    print(
        f"  memory: columns {whole.nbytes / rows:.0f} B/row, Arrow {table.nbytes / rows:.0f} B/row"
    )
    print(f"          element objects {object_bytes / rows:.0f} B/row (with the list)")


if __name__ == "__main__":
    main()
