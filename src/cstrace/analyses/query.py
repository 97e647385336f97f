"""SQL over a decode: DuckDB tables of elements, instructions, functions and messages.

Input: a trace (decoded here, once, source by source, in element batches) and
its symbols; output: Arrow tables, registered in a DuckDB connection under
these names:

- ``elements``: one row per element, the columns of
  :meth:`cstrace.batch.ElementBatch.to_arrow` (zero-copy from the batches)
  and ``buffer``, the trace buffer's name: the rows ``cstrace decode
  --format parquet`` writes (``offset`` is a keyword of SQL: write it
  ``"offset"``). ``element_types`` (``type``, ``name``) names the
  type numbers.
- ``instructions``: one row per instruction executed (the walk of
  :mod:`cstrace.analyses.instructions`): ``trace_id``, ``buffer``,
  ``element`` (its ``INSTR_RANGE``'s index in the source), ``address``,
  ``size``, ``isa``, ``opcode`` (hex), ``function``, ``function_offset``
  (from the function's start), ``file``, ``line``, ``waypoint`` (the kind of the
  range's last instruction, on it), ``taken``, ``timestamp``, ``cycles``,
  ``cpu``, ``pid``, ``tid``.
- ``functions``: one row per function of the images, and per function the
  trace entered that no symbol names: ``function``, ``start``, ``end``,
  ``file``, ``line``, ``image``, ``calls``, ``instructions`` (its own),
  ``inclusive_instructions``, ``cycles``, ``handler`` (entered by an
  exception), from call/return tracking
  (:class:`cstrace.analyses.calls.CallTracker`); functions that never ran
  have zeros.
- ``messages``: software trace (STM, ITM, DCC): ``trace_id``, ``buffer``,
  ``idx`` (the first byte's capture index), ``protocol``, ``master``,
  ``channel``, ``text`` (a string written byte by byte,
  :mod:`cstrace.analyses.swtext`) or ``value`` (any other value written)
  with its ``bits``, ``bytes``, ``marker``, ``timestamp``.

Only the tables a query names are built (instructions cost the most).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cstrace.analyses.calls import CallTracker
from cstrace.analyses.swtext import TextMessage, group_text
from cstrace.elements import Element, ElemType, ITMPacketType, ITMTrace, SWTrace
from cstrace.errors import CstraceError

if TYPE_CHECKING:
    from cstrace.analyses.symbols import Symbols
    from cstrace.errors import Issue
    from cstrace.protocols import DecodeOptions
    from cstrace.trace import Trace

__all__ = ["TABLES", "QueryResult", "build_tables", "connect", "parquet_tables", "run_query"]

TABLES = ("elements", "element_types", "instructions", "functions", "messages")
"""The tables a query can name."""


def _modules() -> tuple[Any, Any]:
    try:
        import duckdb
        import pyarrow as pa
    except ImportError:
        raise CstraceError(
            "cstrace query needs duckdb and pyarrow: pip install duckdb pyarrow"
        ) from None
    return duckdb, pa


def tables_named(sql: str) -> set[str]:
    """The tables of :data:`TABLES` that ``sql`` names (as whole words)."""
    return {t for t in TABLES if re.search(rf"\b{t}\b", sql, re.IGNORECASE)}


@dataclass
class _Columns:
    """Rows of a table being built, column by column."""

    names: tuple[str, ...]
    data: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data = {n: [] for n in self.names}

    def add(self, *values: Any) -> None:
        for name, value in zip(self.names, values, strict=True):
            self.data[name].append(value)

    def table(self, pa: Any, types: dict[str, Any]) -> Any:
        return pa.table({n: pa.array(self.data[n], type=types.get(n)) for n in self.names})


_INSTR = (
    "trace_id", "buffer", "element", "address", "size", "isa", "opcode", "function",
    "function_offset", "file", "line", "waypoint", "taken", "timestamp", "cycles", "cpu",
    "pid", "tid",
)  # fmt: skip
_FUNCS = (
    "function", "start", "end", "file", "line", "image", "calls", "instructions",
    "inclusive_instructions", "cycles", "handler",
)  # fmt: skip
_MSGS = (
    "trace_id", "buffer", "idx", "protocol", "master", "channel", "text", "value",
    "bits", "bytes", "marker", "timestamp",
)  # fmt: skip


class _Builder:
    """Fills the tables from each run of a decode."""

    def __init__(self, symbols: Symbols, want: set[str]) -> None:
        self.symbols = symbols
        self.want = want
        self.arrow: list[Any] = []
        self.instr = _Columns(_INSTR)
        self.msgs = _Columns(_MSGS)
        self.calls = CallTracker(symbols) if "functions" in want else None
        self._where: dict[
            tuple[int, int | None], tuple[str | None, int | None, str | None, int | None]
        ] = {}

    def _place(
        self, address: int, context_id: int | None
    ) -> tuple[str | None, int | None, str | None, int | None]:
        key = (address, context_id)
        got = self._where.get(key)
        if got is None:
            # A recording's processes: the context says which program is at the address.
            f = self.symbols.function(address, context_id)
            src = self.symbols.line(address, context_id)
            got = (
                f.name if f is not None else None,
                address - f.start if f is not None else None,
                src.file if src is not None else None,
                src.line if src is not None else None,
            )
            self._where[key] = got
        return got

    def run(self, session: Any, run: Any, pa: Any) -> None:
        from cstrace.analyses.instructions import Executed, RunWalker
        from cstrace.execution import tracker_for

        buffer = run.buffer.name
        tid = run.trace_id
        walker = None
        if "instructions" in self.want:
            memory = session.memories.for_source(run.source, run.buffer.time)
            walker = RunWalker(tid, memory, tracker_for(session, run, count=False))
        software: list[Element] = []
        first = 0
        for batch in run.batches():
            if "elements" in self.want:
                table = batch.to_arrow()
                names = pa.repeat(pa.scalar(buffer, pa.string()), len(batch))
                self.arrow.append(table.append_column("buffer", names))
            if walker is None and self.calls is None and "messages" not in self.want:
                continue
            elements = batch.to_elements()
            if self.calls is not None:
                self.calls.feed(tid, elements)
            if "messages" in self.want and run.protocol.software_trace:
                software.extend(elements)
            if walker is not None:
                add = self.instr.add
                for step in walker.walk(elements, first):
                    if type(step) is not Executed:
                        continue
                    assert isinstance(step, Executed)
                    func, off, file, line = self._place(step.address, step.context_id)
                    add(
                        tid, buffer, step.index, step.address, step.size, step.isa.name,
                        step.opcode.hex(), func, off, file, line,
                        None if step.waypoint is None else step.waypoint.name,
                        step.taken, step.timestamp, step.cycles, step.cpu, step.pid, step.tid,
                    )  # fmt: skip
            first += len(elements)
        if software:
            self._messages(tid, buffer, run.protocol.name, software)

    def _messages(self, tid: int, buffer: str, protocol: str, elements: Iterable[Element]) -> None:
        add = self.msgs.add
        for item in group_text(elements):
            if isinstance(item, TextMessage):
                last = item.last
                marker = last.marker if isinstance(last, SWTrace) else False
                add(
                    tid, buffer, item.offset, protocol, item.master, item.channel, item.text,
                    None, 8, len(item.elements), marker, last.timestamp,
                )  # fmt: skip
            elif isinstance(item, SWTrace) and item.payload_bits and not item.global_err:
                add(
                    tid, buffer, item.offset, protocol, item.master, item.channel, None,
                    item.payload, item.payload_bits, item.payload_bits // 8, item.marker,
                    item.timestamp,
                )  # fmt: skip
            elif isinstance(item, ITMTrace) and item.pkt_type == ITMPacketType.SWIT:
                add(
                    tid, buffer, item.offset, protocol, 0, item.src_id, None, item.value,
                    8 * item.payload_size, item.payload_size, False, item.timestamp,
                )  # fmt: skip

    def functions(self, pa: Any) -> Any:
        out = _Columns(_FUNCS)
        seen: set[tuple[str, int]] = set()
        profile = self.calls.profile() if self.calls is not None else None
        images = {(f.name, f.start): f.image for f in self.symbols.functions()}
        if profile is not None:
            for p in profile.sorted_functions():
                f = p.function
                seen.add((f.name, f.start))
                out.add(
                    f.name, f.start, f.end or None, f.file, f.line, images.get((f.name, f.start)),
                    p.calls, p.instructions, p.inclusive, p.cycles, p.handler,
                )  # fmt: skip
        for s in self.symbols.functions():
            if (s.name, s.start) not in seen:
                out.add(s.name, s.start, s.end, s.file, s.line, s.image, 0, 0, 0, 0, False)
        return out.table(pa, {"start": pa.uint64(), "end": pa.uint64(), "line": pa.int64()})


_U64 = ("address", "timestamp", "cycles", "value")


def build_tables(
    trace: Trace,
    want: Iterable[str] = TABLES,
    symbols: Symbols | None = None,
    buffers: Sequence[str] | None = None,
    options: DecodeOptions | None = None,
    issues: list[Issue] | None = None,
) -> dict[str, Any]:
    """Decode ``trace`` once and build the tables of ``want`` (``pyarrow.Table`` each)."""
    from cstrace.analyses.symbols import Symbols
    from cstrace.decode import Session

    _, pa = _modules()
    wanted = set(want)
    if symbols is None:
        symbols = Symbols.from_trace(trace)
    builder = _Builder(symbols, wanted)
    session = Session(trace, options)
    for run in session.runs(buffers, issues):
        builder.run(session, run, pa)
    out: dict[str, Any] = {}
    if "elements" in wanted:
        from cstrace.batch import ElementBatch

        empty = ElementBatch.empty().to_arrow()
        empty = empty.append_column("buffer", pa.array([], pa.string()))
        out["elements"] = pa.concat_tables(builder.arrow) if builder.arrow else empty
    if "element_types" in wanted:
        out["element_types"] = _element_types(pa)
    u64 = {n: pa.uint64() for n in _U64}
    if "instructions" in wanted:
        out["instructions"] = builder.instr.table(pa, {**u64, "taken": pa.bool_()})
    if "functions" in wanted:
        out["functions"] = builder.functions(pa)
    if "messages" in wanted:
        out["messages"] = builder.msgs.table(pa, {**u64, "text": pa.string()})
    return out


def _element_types(pa: Any) -> Any:
    return pa.table(
        {
            "type": pa.array([int(t) for t in ElemType], pa.uint8()),
            "name": pa.array([t.name for t in ElemType], pa.string()),
        }
    )


def parquet_tables(path: str) -> dict[str, Any]:
    """The tables of a ``cstrace decode --format parquet`` file: ``elements`` (its rows) and
    ``element_types``."""
    _, pa = _modules()
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise CstraceError(f"{path}: not a readable Parquet file: {exc}") from None
    return {"elements": table, "element_types": _element_types(pa)}


def connect(tables: dict[str, Any]) -> Any:
    """A DuckDB connection (in memory) with ``tables`` registered under their names."""
    duckdb, _ = _modules()
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)
    return con


@dataclass(frozen=True)
class QueryResult:
    """The result of a query: column names and rows of Python values."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


def run_query(con: Any, sql: str) -> QueryResult:
    """Run ``sql`` on ``con``; an SQL error is a :class:`CstraceError` with DuckDB's message."""
    duckdb, _ = _modules()
    if not sql.strip().strip(";").strip():
        raise CstraceError("query: no SQL statement given")
    try:
        rel = con.execute(sql)
        if rel is None:  # nothing DuckDB runs (a comment only)
            return QueryResult((), [])
        rows = rel.fetchall()
        columns = tuple(d[0] for d in rel.description or ())
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CstraceError(f"query: {first}") from None
    return QueryResult(columns, rows)
