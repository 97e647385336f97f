"""The viewer's store: a trace decoded once into columns, and the queries the page asks.

Input: a :class:`~cstrace.trace.Trace` (any input the command line opens) and
the images given with ``--image``; output: :class:`TraceStore`, whose methods
answer the page's questions with plain JSON-ready dictionaries (addresses as
``0x`` strings, since JavaScript numbers stop at 53 bits).

Decoding happens once, in :meth:`TraceStore.build`: every source run's element
batches (:mod:`cstrace.batch`) are concatenated, counted for the loss report
(:class:`~cstrace.analyses.loss.LossCounter`) and loaded into an in-memory
DuckDB database (``el``: one row per element; ``data``: one row per data
transfer or software message). The page's instruction list is a list of
*rows*: each ``INSTR_RANGE`` element gives one row per instruction, every
other element one row. A NumPy column of each element's first row
(``first_row``) turns a window of rows into the elements that make it with two
binary searches, so a window anywhere in millions of rows costs the same;
searches (an address, a function, disassembly text) are DuckDB queries over the
executed ranges. Instructions are expanded, disassembled and given their
function and source line only for the rows asked for.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from cstrace.analyses.loss import LossCounter, LossReport
from cstrace.batch import ElementBatch
from cstrace.decode import Session
from cstrace.elements import (
    Custom,
    Element,
    ElemType,
    Instrumentation,
    Isa,
    ITMPacketType,
    ITMTrace,
    SWTrace,
    TraceOnReason,
)
from cstrace.errors import CstraceError, Issue
from cstrace.protocols import DecodeOptions
from cstrace.trace import Trace
from cstrace.viewer.code import CodeView, Disassemble, Instr, instruction_sizes

__all__ = ["RunInfo", "TraceStore"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_RANGE = int(ElemType.INSTR_RANGE)
_DATA_TYPES = (
    int(ElemType.SWTRACE),
    int(ElemType.ITMTRACE),
    int(ElemType.INSTRUMENTATION),
    int(ElemType.CUSTOM),
)
_GAP_TYPES = {
    ElemType.NO_SYNC,
    ElemType.TRACE_ON,
    ElemType.EO_TRACE,
    ElemType.ADDR_NACC,
    ElemType.ADDR_UNKNOWN,
    ElemType.I_RANGE_NOPATH,
    ElemType.UNKNOWN,
}
_CHUNK = 1 << 18
"""Elements a search looks at per step."""
_MAX_WINDOW = 2000
"""The most rows one window request gives."""
_MAX_FUNCTION = 4096
"""The most instructions of one function the disassembly pane shows."""
_SOURCE_CONTEXT = 60
"""Source lines shown before and after the selected line."""
_STORE_MNEMONICS = re.compile(r"^\s*(st|push|swp)", re.IGNORECASE)
_LOAD_MNEMONICS = re.compile(r"^\s*(ld|pop)", re.IGNORECASE)


def _hex(value: int | None) -> str | None:
    return None if value is None else f"{value:#x}"


@dataclass
class RunInfo:
    """One decoded source run: where its elements are in the store, and its code."""

    index: int
    buffer: str
    source: str
    protocol: str
    trace_id: int
    core: str
    cpu: int | None
    first: int
    """Index of the run's first element in the store."""
    count: int = 0
    code: CodeView | None = None

    def to_dict(self) -> dict[str, Any]:
        """The run as the overview shows it."""
        return {
            "index": self.index,
            "buffer": self.buffer,
            "source": self.source,
            "protocol": self.protocol,
            "trace_id": _hex(self.trace_id),
            "core": self.core,
            "cpu": self.cpu,
            "elements": self.count,
        }


@dataclass
class _Coverage:
    """Every executed instruction address, sorted, with how often it ran."""

    addresses: npt.NDArray[np.uint64]
    counts: I64
    runs: npt.NDArray[np.int32]
    """The run whose code memory reads each address (the first that ran it)."""
    isas: npt.NDArray[np.uint8]
    contexts: I64
    """The context ID to read each address in (-1: none)."""

    def count(self, address: int) -> int:
        """How often the instruction at ``address`` ran."""
        i = int(np.searchsorted(self.addresses, np.uint64(address)))
        if i < len(self.addresses) and int(self.addresses[i]) == address:
            return int(self.counts[i])
        return 0

    def max_in(self, start: int, end: int) -> int:
        """The most any instruction in ``[start, end)`` ran (0: none ran)."""
        lo = int(np.searchsorted(self.addresses, np.uint64(start)))
        hi = int(np.searchsorted(self.addresses, np.uint64(end)))
        return int(self.counts[lo:hi].max()) if hi > lo else 0


@dataclass
class _Slices:
    """The timeline of each run: function and exception-level slices, exceptions and
    messages, in rows and on the timeline's axis (rows, or trace time)."""

    lanes: list[dict[str, Any]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    axis: str = "rows"
    anchors: dict[int, tuple[F64, F64]] = field(default_factory=dict)
    extent: tuple[float, float] = (0.0, 1.0)

    def to_axis(self, run: int, rows: I64) -> F64:
        """Rows of ``run`` as positions on the axis."""
        if self.axis == "rows" or run not in self.anchors:
            return rows.astype(np.float64)
        xp, fp = self.anchors[run]
        return np.interp(rows.astype(np.float64), xp, fp)

    def add(
        self, run: int, name: str, kind: str, slices: tuple[I64, I64, I64], marks: I64, msgs: I64
    ) -> None:
        """A lane of ``run``: ``slices`` as ``(first rows, end rows, name ids)``."""
        r0, r1, ids = slices
        x0 = self.to_axis(run, r0)
        x1 = np.maximum(self.to_axis(run, r1), x0)
        self.lanes.append(
            {
                "name": name,
                "kind": kind,
                "run": run,
                "r0": r0,
                "r1": r1,
                "ids": ids,
                "x0": x0,
                "x1": x1,
                "marks": marks,
                "xmarks": self.to_axis(run, marks),
                "msgs": msgs,
                "xmsgs": self.to_axis(run, msgs),
            }
        )


class TraceStore:
    """A trace decoded once, and the answers to the viewer page's queries.

    Made by :meth:`build`. Every query method is safe to call from several threads
    (each takes its own DuckDB cursor; the caches it fills are guarded by one lock).
    """

    def __init__(self) -> None:
        self.trace: Trace | None = None
        self.input_name = ""
        self.runs: list[RunInfo] = []
        self.batch = ElementBatch.empty()
        self.run_of: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self.first_row: I64 = np.zeros(1, np.int64)
        self.timestamps: I64 = np.zeros(0, np.int64)
        self.levels: npt.NDArray[np.int8] = np.zeros(0, np.int8)
        self.contexts: I64 = np.zeros(0, np.int64)
        self.report = LossReport()
        self.issues: list[Issue] = []
        self.decode_seconds = 0.0
        self.symbols: Any = None
        self.symbols_error: str | None = None
        self._db: Any = None
        self._lock = threading.RLock()
        self._coverage: _Coverage | None = None
        self._slices: _Slices | None = None
        self._texts: list[str] | None = None
        self._functions: list[Any] | None = None
        self._func_starts: npt.NDArray[np.uint64] | None = None

    # -- building ----------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        trace: Trace,
        *,
        name: str = "",
        images: Sequence[str] = (),
        options: DecodeOptions | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> TraceStore:
        """Decode ``trace`` (every buffer, every source) into a new store.

        ``images`` are the ``--image`` arguments (``FILE`` or ``FILE@BASE``), for the
        symbols; ``progress`` is told what is being decoded.
        """
        import duckdb

        store = cls()
        store.trace = trace
        store.input_name = name
        began = time.perf_counter()
        session = Session(trace, options)
        counter = LossCounter()
        counter.add_issues(trace.issues)
        parts: list[ElementBatch] = []
        runs_of: list[npt.NDArray[np.int32]] = []
        total = 0
        disassemble = _disassembler()
        for buffer in trace.buffers:
            decoded = session.open_buffer(buffer)
            counter.add_issues(decoded.issues)
            for run in decoded.runs:
                if progress is not None:
                    progress(f"decoding {buffer.name}: {run.source.name} ({run.protocol.name})")
                info = RunInfo(
                    len(store.runs),
                    buffer.name,
                    run.source.name,
                    run.protocol.name,
                    run.trace_id,
                    run.source.core,
                    run.source.cpu,
                    total,
                )
                info.code = CodeView(session.memories.for_source(run.source), disassemble)
                store.runs.append(info)
                for batch in counter.watch(run).batches():
                    parts.append(batch)
                    info.count += len(batch)
                runs_of.append(np.full(info.count, info.index, np.int32))
                total += info.count
                counter.add_issues(session.new_issues())
        store.batch = ElementBatch.concat(parts)
        del parts
        store.run_of = np.concatenate(runs_of) if runs_of else np.zeros(0, np.int32)
        store.report = counter.report()
        store.issues = list(session.issues)
        store._index()
        store._db = duckdb.connect(":memory:")
        store._load(store._db)
        store.decode_seconds = time.perf_counter() - began
        store._load_symbols(trace, images)
        return store

    def _index(self) -> None:
        """The first row of each element, and each element's last timestamp and level."""
        b = self.batch
        types = b["type"]
        rows = np.ones(len(b), np.int64)
        ranges = types == _RANGE
        rows[ranges] = np.maximum(b["num_instr"][ranges].astype(np.int64), 1)
        self.first_row = np.concatenate(([0], np.cumsum(rows))).astype(np.int64)
        n = len(b)
        idx = np.arange(n, dtype=np.int64)
        # Carry each run's last timestamp, exception level and context ID forward.
        ts_at = np.where(b["timestamp_valid"], idx, -1)
        el_at = np.where((types == int(ElemType.PE_CONTEXT)) & b["el_valid"], idx, -1)
        ctx_at = np.where((types == int(ElemType.PE_CONTEXT)) & b["ctxt_id_valid"], idx, -1)
        self.timestamps = self._carried(ts_at, b["timestamp"], np.int64, 0)
        self.levels = self._carried(el_at, b["exception_level"], np.int8, -1)
        self.contexts = self._carried(ctx_at, b["context_id"], np.int64, -1)

    def _carried(
        self, marked: npt.NDArray[np.int64], values: npt.NDArray[Any], dtype: Any, init: int
    ) -> npt.NDArray[Any]:
        """Per element, ``values`` at the last element of its run at or before it that
        ``marked`` names (``marked``: the element's index there, -1 elsewhere); -1 where
        there is none yet (``init`` outside every run)."""
        out = np.full(len(marked), init, dtype)
        for run in self.runs:
            if run.count == 0:
                continue
            s = slice(run.first, run.first + run.count)
            last = np.maximum.accumulate(marked[s])
            ok = last >= run.first
            out[s] = np.where(ok, values[np.maximum(last, 0)].astype(dtype), -1)
        return out

    def _load(self, db: Any) -> None:
        """Load the element and data tables into DuckDB."""
        import pyarrow as pa

        b = self.batch
        n = len(b)
        table = pa.table(
            {
                "seq": np.arange(n, dtype=np.int64),
                "run": self.run_of,
                "type": b["type"],
                "start": b["start"],
                "end": b["end"],
                "num_instr": b["num_instr"],
                "isa": b["isa"],
                "ctx": self.contexts,
            }
        )
        db.register("el_arrow", table)
        db.execute("CREATE TABLE el AS SELECT * FROM el_arrow")
        db.unregister("el_arrow")
        data = self._data_rows()
        db.register("data_arrow", data)
        db.execute("CREATE TABLE data AS SELECT * FROM data_arrow")
        db.unregister("data_arrow")

    def _data_rows(self) -> Any:
        """The ``data`` table: one row per data transfer or software message."""
        import pyarrow as pa

        b = self.batch
        where = np.flatnonzero(np.isin(b["type"], _DATA_TYPES))
        seqs: list[int] = []
        kinds: list[str] = []
        keys: list[str] = []
        values: list[str | None] = []
        writes: list[bool] = []
        texts: list[str] = []
        if len(where):
            # The ISA of each data element's load or store: that of the last range before it.
            types = b["type"]
            at = np.maximum.accumulate(np.where(types == _RANGE, np.arange(len(b)), 0))
            isas = b["isa"][at[where]].tolist()
            sub = ElementBatch({k: v[where] for k, v in b.columns.items()}, b.objects)
            for seq, elem, isa in zip(where.tolist(), sub, isas, strict=True):
                row = self._data_row(seq, elem, isa)
                if row is None:
                    continue
                kind, key, value, write, text = row
                seqs.append(seq)
                kinds.append(kind)
                keys.append(key)
                values.append(value)
                writes.append(write)
                texts.append(text)
        return pa.table(
            {
                "seq": pa.array(seqs, pa.int64()),
                "kind": pa.array(kinds, pa.string()),
                "key": pa.array(keys, pa.string()),
                "value": pa.array(values, pa.string()),
                "write": pa.array(writes, pa.bool_()),
                "text": pa.array(texts, pa.string()),
            }
        )

    def _data_row(
        self, seq: int, elem: Element, isa: int
    ) -> tuple[str, str, str | None, bool, str] | None:
        """``(kind, key, value, is a write, text)`` of one data element, None if it is none;
        ``isa`` is that of the run's last instruction range before it."""
        from cstrace.render.text import element_details

        text = element_details(elem)
        if isinstance(elem, SWTrace):
            value = _hex(elem.payload) if elem.payload_bits else None
            key = f"STM master {elem.master:#x} channel {elem.channel:#x}"
            return "message", key, value, True, text
        if isinstance(elem, ITMTrace):
            if elem.pkt_type == ITMPacketType.SWIT:
                return "message", f"ITM port {elem.src_id}", _hex(elem.value), True, text
            if elem.pkt_type == ITMPacketType.DWT:
                return "dwt", f"DWT {elem.src_id}", _hex(elem.value), False, text
            return None
        if isinstance(elem, Custom):
            data = elem.data
            address = getattr(data, "address", None)
            value_bytes = getattr(data, "data", None)
            pc = getattr(data, "pc", None)
            if not isinstance(value_bytes, bytes | None) or not isinstance(address, int | None):
                return "custom", "custom", None, False, text
            value = None if value_bytes is None else "0x" + value_bytes[::-1].hex()
            access = self._access(seq, pc, isa)
            key = _hex(address) or "(address not traced)"
            return access, key, value, access == "write", text
        if isinstance(elem, Instrumentation):
            return "instrumentation", f"instrumentation EL{elem.el}", _hex(elem.value), True, text
        return None

    def _access(self, seq: int, pc: object, isa: int) -> str:
        """Whether the instruction at ``pc`` (``isa``, run of element ``seq``) reads or
        writes, by its mnemonic."""
        run = self.runs[int(self.run_of[seq])]
        if not isinstance(pc, int) or run.code is None:
            return "access"
        opcode = run.code.read(pc, 4, self._ctx(seq))
        sizes = instruction_sizes(opcode, isa, 1)
        if not sizes:
            return "access"
        text = run.code.text(Instr(pc, sizes[0], opcode[: sizes[0]]), isa)
        if _STORE_MNEMONICS.match(text):
            return "write"
        if _LOAD_MNEMONICS.match(text):
            return "read"
        return "access"

    def _load_symbols(self, trace: Trace, images: Sequence[str]) -> None:
        try:
            from cstrace.analyses.symbols import Symbols
        except ImportError:  # pragma: no cover - until the symbols analysis is there
            self.symbols_error = "no symbols analysis in this cstrace"
            return
        try:
            symbols = Symbols.from_trace(trace, images)
        except CstraceError as exc:  # a bad image: the page says so
            self.symbols_error = str(exc)
            return
        if symbols.functions():
            self.symbols = symbols
        else:
            self.symbols_error = "the trace's images have no symbols"

    def warm(self) -> None:
        """Make what the first queries of a kind would otherwise wait for: the executed
        addresses and their disassembly (text search, counts), the timeline's slices."""
        self.coverage()
        self.slices()
        self._executed_texts()

    # -- helpers -----------------------------------------------------------------------------

    @property
    def total_rows(self) -> int:
        """How many rows the instruction list has."""
        return int(self.first_row[-1])

    def _cursor(self) -> Any:
        return self._db.cursor()

    def locate(self, row: int) -> tuple[int, int]:
        """The element a row belongs to, and the row's index within it."""
        e = int(np.searchsorted(self.first_row, row, side="right")) - 1
        e = min(max(e, 0), len(self.batch) - 1)
        return e, row - int(self.first_row[e])

    def _instrs(self, e: int) -> tuple[Instr, ...]:
        b = self.batch
        run = self.runs[int(self.run_of[e])]
        assert run.code is not None
        return run.code.instructions(
            int(b["start"][e]),
            int(b["end"][e]),
            int(b["num_instr"][e]),
            int(b["isa"][e]),
            self._ctx(e),
        )

    def _ctx(self, e: int) -> int | None:
        """The context ID element ``e`` ran in (None when the trace did not say)."""
        c = int(self.contexts[e])
        return None if c < 0 else c

    def _function(self, address: int, context: int | None = None) -> Any:
        if self.symbols is None:
            return None
        return self.symbols.function(address, context)

    def _line(self, address: int, context: int | None = None) -> Any:
        if self.symbols is None:
            return None
        return self.symbols.line(address, context)

    def _element(self, e: int) -> Element:
        cols = {k: v[e : e + 1] for k, v in self.batch.columns.items()}
        return ElementBatch(cols, self.batch.objects).to_elements()[0]

    # -- the instruction list ----------------------------------------------------------------

    def rows(self, start: int, count: int) -> dict[str, Any]:
        """Rows ``[start, start + count)`` of the instruction list."""
        total = self.total_rows
        start = max(0, min(start, total))
        count = max(0, min(count, _MAX_WINDOW, total - start))
        out: list[dict[str, Any]] = []
        if count:
            e, i = self.locate(start)
            row = start
            while row < start + count and e < len(self.batch):
                out.extend(self._element_rows(e, i, start + count - row, row))
                row = int(self.first_row[e + 1])
                e, i = e + 1, 0
        return {"start": start, "total": total, "rows": out}

    def _element_rows(self, e: int, skip: int, limit: int, row: int) -> list[dict[str, Any]]:
        b = self.batch
        t = int(b["type"][e])
        run = int(self.run_of[e])
        ts = int(self.timestamps[e])
        common = {
            "run": run,
            "id": _hex(int(b["trace_id"][e])),
            "el": int(self.levels[e]),
            "ts": None if ts < 0 else ts,
            "idx": int(b["offset"][e]),
            "ctx": self._ctx(e),
        }
        if t != _RANGE:
            elem = self._element(e)
            from cstrace.render.text import element_details

            kind = _row_kind(elem)
            return [
                {
                    **common,
                    "row": row,
                    "kind": kind,
                    "type": ElemType(t).name,
                    "text": element_details(elem),
                }
            ]
        instrs = self._instrs(e)
        isa = int(b["isa"][e])
        code = self.runs[run].code
        assert code is not None
        cc = int(b["cycle_count"][e]) if b["cycle_count_valid"][e] else None
        n = int(b["num_instr"][e])
        out: list[dict[str, Any]] = []
        for k in range(skip, min(n, skip + limit)):
            ins = instrs[k] if k < len(instrs) else None
            rec: dict[str, Any] = {**common, "row": row + k - skip, "kind": "instr"}
            if ins is None:
                rec.update(addr=None, text="(no code image: instruction unknown)")
            else:
                rec.update(addr=_hex(ins.address), text=code.text(ins, isa))
                rec.update(self._where(ins.address, self._ctx(e)))
            if k == n - 1:
                rec["cc"] = cc
                if b["last_exec"][e]:
                    rec["taken"] = True
            rec["isa"] = Isa(isa).name if isa in Isa._value2member_map_ else str(isa)
            out.append(rec)
        return out

    def _where(self, address: int, context: int | None) -> dict[str, Any]:
        f = self._function(address, context)
        line = self._line(address, context)
        return {
            "func": None if f is None else f.name,
            "off": None if f is None else address - f.start,
            "file": None if line is None else line.file,
            "line": None if line is None else line.line,
        }

    # -- searching ---------------------------------------------------------------------------

    def search(self, query: str, row: int, forward: bool = True) -> dict[str, Any]:
        """The next (or previous) row after ``row`` that matches ``query``: an address
        (``0x...``), a function name (exact, then part of one) or disassembly text."""
        query = query.strip()
        if not query:
            return {"row": None, "message": "nothing to search for"}
        intervals: list[tuple[int, int]] = []
        what = ""
        try:
            address = int(query, 16) if re.fullmatch(r"(0x)?[0-9a-fA-F]{4,}", query) else None
        except ValueError:
            address = None
        if address is not None:
            intervals = [(address, address + 1)]
            what = f"address {address:#x}"
        else:
            funcs = self._find_functions(query)
            if funcs:
                intervals = [(f.start, f.end) for f in funcs]
                what = "function " + ", ".join(sorted({f.name for f in funcs})[:3])
            else:
                intervals = self._find_text(query)
                what = f"instructions matching {query!r}"
        if not intervals:
            return {"row": None, "message": f"no executed code matches {query!r}"}
        found = self._find(intervals, row, forward)
        if found is None:
            where = "after" if forward else "before"
            return {"row": None, "message": f"no execution of {what} {where} row {row}"}
        return {"row": found, "message": what}

    def next_execution(self, address: int, row: int, forward: bool = True) -> dict[str, Any]:
        """The next (or previous) execution of the instruction at ``address`` from ``row``."""
        found = self._find([(address, address + 1)], row, forward)
        if found is None:
            return {"row": None, "message": f"no {'later' if forward else 'earlier'} execution"}
        return {"row": found, "message": f"address {address:#x}"}

    def _find_functions(self, query: str) -> list[Any]:
        if self.symbols is None:
            return []
        funcs = list(self.symbols.functions())
        exact = [f for f in funcs if query in (f.name, f.raw_name)]
        if exact:
            return exact
        low = query.lower()
        return [f for f in funcs if low in f.name.lower()][:256]

    def _find_text(self, query: str) -> list[tuple[int, int]]:
        cov = self.coverage()
        low = query.lower()
        texts = self._executed_texts()
        hits = [i for i, text in enumerate(texts) if low in text]
        return [(int(cov.addresses[i]), int(cov.addresses[i]) + 1) for i in hits[:4096]]

    def _executed_texts(self) -> list[str]:
        """The disassembly of every executed instruction, lower case, in the order of
        :meth:`coverage` (made once, on the first text search)."""
        with self._lock:
            if self._texts is None:
                cov = self.coverage()
                texts: list[str] = []
                for addr, run, isa, ctx in zip(
                    cov.addresses.tolist(),
                    cov.runs.tolist(),
                    cov.isas.tolist(),
                    cov.contexts.tolist(),
                    strict=True,
                ):
                    code = self.runs[run].code
                    assert code is not None
                    op = code.read(addr, 4, None if ctx < 0 else ctx)
                    size = (instruction_sizes(op, isa, 1) or [4])[0]
                    texts.append(code.text(Instr(addr, size, op[:size]), isa).lower())
                self._texts = texts
            return self._texts

    def _find(self, intervals: list[tuple[int, int]], row: int, forward: bool) -> int | None:
        """The first row after (before) ``row`` whose instruction falls in ``intervals``.

        The intervals are merged into sorted, disjoint ones; a range ``[start, end)``
        overlaps one of them when the first interval ending after ``start`` begins
        before ``end``: two binary searches per range, over the columns, a chunk at a
        time from ``row`` on, so a near match costs little and a far one a scan.
        """
        if not len(self.batch):
            return None
        e, i = self.locate(max(0, min(row, self.total_rows - 1)))
        if row >= 0:
            hit = self._hit(e, intervals, i, forward)
            if hit is not None:
                return hit
            first = e + 1 if forward else e - 1
        else:
            first = 0
        los, his = _merge(intervals)
        types, starts, ends = self.batch["type"], self.batch["start"], self.batch["end"]
        n = len(types)
        pos = first
        while 0 <= pos < n:
            a, b = (pos, min(n, pos + _CHUNK)) if forward else (max(0, pos - _CHUNK + 1), pos + 1)
            k = np.searchsorted(his, starts[a:b], side="right")
            inside = k < len(his)
            lo_k = los[np.minimum(k, len(los) - 1)]
            ok = inside & (lo_k < ends[a:b]) & (types[a:b] == _RANGE)
            found = np.flatnonzero(ok) + a
            for s in found.tolist() if forward else reversed(found.tolist()):
                hit = self._hit(s, intervals, None, forward)
                if hit is not None:
                    return hit
            pos = b if forward else a - 1
        return None

    def _hit(
        self, e: int, intervals: list[tuple[int, int]], after: int | None, forward: bool
    ) -> int | None:
        if int(self.batch["type"][e]) != _RANGE:
            return None
        instrs = self._instrs(e)
        order = range(len(instrs)) if forward else range(len(instrs) - 1, -1, -1)
        for k in order:
            if after is not None and (k <= after if forward else k >= after):
                continue
            a = instrs[k].address
            if any(lo <= a < hi for lo, hi in intervals):
                return int(self.first_row[e]) + k
        return None

    # -- coverage, source and functions ------------------------------------------------------

    def coverage(self) -> _Coverage:
        """Every executed instruction address and how often it ran (made once)."""
        with self._lock:
            if self._coverage is None:
                self._coverage = self._make_coverage()
            return self._coverage

    def _make_coverage(self) -> _Coverage:
        cur = self._cursor()
        got = cur.execute(
            f'SELECT start, "end", num_instr, isa, min(run), min(ctx), count(*) FROM el '
            f'WHERE type = {_RANGE} GROUP BY start, "end", num_instr, isa'
        ).fetchnumpy()
        starts = np.asarray(got["start"], np.uint64)
        n = np.asarray(got["num_instr"], np.int64)
        isas = np.asarray(got["isa"], np.uint8)
        runs = np.asarray(got["min(run)"], np.int32)
        ctxs = np.asarray(got["min(ctx)"], np.int64)
        times = np.asarray(got["count_star()"], np.int64)
        fixed = isas != Isa.T32
        addr_parts: list[npt.NDArray[np.uint64]] = []
        group_parts: list[I64] = []
        """For each address, the distinct range (row of ``got``) it came from."""
        # A64 and A32: four bytes an instruction, so the addresses are arithmetic.
        if fixed.any():
            which = np.flatnonzero(fixed)
            fn = n[which]
            rep = np.repeat(which, fn)
            within = np.arange(len(rep)) - np.repeat(np.cumsum(fn) - fn, fn)
            addr_parts.append(starts[rep] + (within * 4).astype(np.uint64))
            group_parts.append(rep.astype(np.int64))
        # T32: walk each distinct range once.
        ends = np.asarray(got["end"], np.uint64)
        for k in np.flatnonzero(~fixed).tolist():
            run = self.runs[int(runs[k])]
            assert run.code is not None
            ctx = int(ctxs[k])
            instrs = run.code.instructions(
                int(starts[k]), int(ends[k]), int(n[k]), int(isas[k]), None if ctx < 0 else ctx
            )
            addr_parts.append(np.array([x.address for x in instrs], np.uint64))
            group_parts.append(np.full(len(instrs), k, np.int64))
        if not addr_parts:
            return _Coverage(
                np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int32),
                np.zeros(0, np.uint8), np.zeros(0, np.int64),
            )  # fmt: skip
        addrs = np.concatenate(addr_parts)
        groups = np.concatenate(group_parts)
        uniq, inverse = np.unique(addrs, return_inverse=True)
        total = np.zeros(len(uniq), np.int64)
        np.add.at(total, inverse, times[groups])
        first = np.full(len(uniq), len(addrs), np.int64)
        np.minimum.at(first, inverse, np.arange(len(addrs)))
        g = groups[first]
        return _Coverage(uniq, total, runs[g], isas[g], ctxs[g])

    def source(self, address: int, context: int | None = None) -> dict[str, Any]:
        """The source file around the line of the instruction at ``address``, with how
        often each line ran."""
        if self.symbols is None:
            return {"file": None, "message": self._no_symbols()}
        line = self._line(address, context)
        if line is None:
            return {"file": None, "message": f"no source line for {address:#x} in the images"}
        ranges = self.symbols.line_ranges()
        cov = self.coverage()
        counts: dict[int, int] = {}
        has_code: set[int] = set()
        for sl, spans in ranges.items():
            if sl.file != line.file:
                continue
            has_code.add(sl.line)
            best = max(cov.max_in(a, b) for a, b in spans)
            counts[sl.line] = max(counts.get(sl.line, 0), best)
        first = max(1, line.line - _SOURCE_CONTEXT)
        lines: list[dict[str, Any]] = []
        for n in range(first, line.line + _SOURCE_CONTEXT + 1):
            text = self.symbols.source(line.file, n)
            if text is None and n > line.line:
                break
            lines.append(
                {
                    "n": n,
                    "text": text,
                    "count": counts.get(n) if n in has_code else None,
                }
            )
        missing = all(x["text"] is None for x in lines)
        return {
            "file": line.file,
            "line": line.line,
            "lines": lines,
            "message": f"source file {line.file} not found" if missing else None,
        }

    def function(self, address: int, run: int = 0, context: int | None = None) -> dict[str, Any]:
        """The disassembly of the function holding ``address``, with execution counts and
        source lines (a mixed source and disassembly view)."""
        f = self._function(address, context)
        if f is None:
            return {"name": None, "message": self._no_symbols() or f"no function at {address:#x}"}
        runinfo = self.runs[min(max(run, 0), len(self.runs) - 1)]
        assert runinfo.code is not None
        isa = Isa.A64
        if self.symbols is not None and hasattr(self.symbols, "isa"):
            isa = self.symbols.isa(address) or self._isa_at(address)
        cov = self.coverage()
        out: list[dict[str, Any]] = []
        last_line: Any = None
        code = runinfo.code.function_instructions(f.start, f.end, int(isa), context)
        for ins in code[:_MAX_FUNCTION]:
            line = self._line(ins.address, context)
            rec: dict[str, Any] = {
                "addr": _hex(ins.address),
                "text": runinfo.code.text(ins, int(isa)),
                "count": cov.count(ins.address),
            }
            if line is not None and line != last_line:
                rec["file"] = line.file
                rec["line"] = line.line
                rec["src"] = self.symbols.source(line.file, line.line)
                last_line = line
            out.append(rec)
        return {
            "name": f.name,
            "start": _hex(f.start),
            "end": _hex(f.end),
            "image": f.image,
            "instrs": out,
            "message": None if out else f"no code image covers {f.name}",
        }

    def _isa_at(self, address: int) -> Isa:
        cov = self.coverage()
        i = int(np.searchsorted(cov.addresses, np.uint64(address)))
        if i < len(cov.addresses):
            return Isa(int(cov.isas[i]))
        return Isa.A64

    def _no_symbols(self) -> str:
        if self.symbols_error:
            return f"no symbols: {self.symbols_error}"
        return "no symbols: give the program's ELF image with --image"

    # -- data --------------------------------------------------------------------------------

    def data(self, row: int, around: int = 12) -> dict[str, Any]:
        """Data transfers and software messages near ``row``, and the last value written to
        each address (or channel) up to it."""
        e, _ = self.locate(max(0, min(row, self.total_rows - 1))) if self.total_rows else (0, 0)
        cur = self._cursor()
        total = int(cur.execute("SELECT count(*) FROM data").fetchone()[0])
        cols = "seq, kind, key, value, text"
        before = cur.execute(
            f"SELECT {cols} FROM data WHERE seq <= ? ORDER BY seq DESC LIMIT ?", [e, around]
        ).fetchall()
        after = cur.execute(
            f"SELECT {cols} FROM data WHERE seq > ? ORDER BY seq LIMIT ?", [e, around]
        ).fetchall()
        near = [self._data_dict(r, r[0] <= e) for r in reversed(before)]
        near += [self._data_dict(r, False) for r in after]
        last = cur.execute(
            "SELECT key, arg_max(value, seq), max(seq), count(*) FROM data "
            "WHERE seq <= ? AND write GROUP BY key ORDER BY key LIMIT 500",
            [e],
        ).fetchall()
        values = [
            {
                "key": k,
                "value": v,
                "row": int(self.first_row[int(s)]),
                "writes": int(c),
            }
            for k, v, s, c in last
        ]
        return {"total": total, "near": near, "last": values, "element": e}

    def _data_dict(self, r: tuple[Any, ...], done: bool) -> dict[str, Any]:
        seq, kind, key, value, text = r
        return {
            "row": int(self.first_row[int(seq)]),
            "kind": kind,
            "key": key,
            "value": value,
            "text": text,
            "past": done,
        }

    # -- timeline ----------------------------------------------------------------------------

    def timeline(self, lo: float | None, hi: float | None, width: int) -> dict[str, Any]:
        """The slices of each run between ``lo`` and ``hi`` on the timeline's axis (all
        of it when None), for ``width`` pixels: slices narrower than a pixel are merged
        into ``busy`` marks.

        The axis is trace time (the trace's timestamps, spread over the rows between two
        by instruction count) when every program-flow source has timestamps, so that
        sources that ran at once are drawn at once; otherwise it is the row number.
        Each slice is ``[x0, x1, name id, first row, end row]``.
        """
        sl = self.slices()
        x_min, x_max = sl.extent
        lo = x_min if lo is None else max(x_min, lo)
        hi = x_max if hi is None else min(x_max, hi)
        if hi <= lo:
            hi = lo + 1.0
        width = max(100, min(width, 8000))
        per_px = (hi - lo) / width
        lanes: list[dict[str, Any]] = []
        used: set[int] = set()
        for lane in sl.lanes:
            x0: F64 = lane["x0"]
            x1: F64 = lane["x1"]
            keep = np.flatnonzero((x1 >= lo) & (x0 <= hi))
            wide = keep[(x1[keep] - x0[keep]) >= per_px]
            narrow = keep[(x1[keep] - x0[keep]) < per_px]
            ids, r0, r1 = lane["ids"], lane["r0"], lane["r1"]
            slices = [
                [float(x0[k]), float(x1[k]), int(ids[k]), int(r0[k]), int(r1[k])]
                for k in wide[:20000].tolist()
            ]
            used.update(int(ids[k]) for k in wide[:20000].tolist())
            px = np.unique(((x0[narrow] - lo) / per_px).astype(np.int64))
            busy = [float(lo + p * per_px) for p in px.tolist()]
            lanes.append(
                {
                    "name": lane["name"],
                    "kind": lane["kind"],
                    "run": lane["run"],
                    "slices": slices,
                    "busy": busy,
                    "marks": _within(lane["xmarks"], lane["marks"], lo, hi),
                    "msgs": _within(lane["xmsgs"], lane["msgs"], lo, hi),
                }
            )
        names = {str(i): sl.names[i] for i in sorted(used)}
        return {
            "axis": sl.axis,
            "lo": lo,
            "hi": hi,
            "extent": [x_min, x_max],
            "lanes": lanes,
            "names": names,
        }

    def position(self, row: int) -> dict[str, Any]:
        """Where ``row`` is on the timeline's axis."""
        sl = self.slices()
        if not self.total_rows:
            return {"x": None}
        e, _ = self.locate(max(0, min(row, self.total_rows - 1)))
        run = int(self.run_of[e])
        return {"x": float(sl.to_axis(run, np.array([row], np.int64))[0])}

    def slices(self) -> _Slices:
        """Function and exception-level slices per run (made once)."""
        with self._lock:
            if self._slices is None:
                self._slices = self._make_slices()
            return self._slices

    def _time_anchors(self) -> dict[int, tuple[F64, F64]] | None:
        """Per run, rows and trace times to interpolate between; None unless every
        program-flow run has two timestamps at least."""
        b = self.batch
        out: dict[int, tuple[F64, F64]] = {}
        for run in self.runs:
            s = slice(run.first, run.first + run.count)
            at = np.flatnonzero(b["timestamp_valid"][s]) + run.first
            ranges = bool((b["type"][s] == _RANGE).any())
            if len(at) < 2:
                if ranges:
                    return None
                if not len(at):
                    continue
            rows = self.first_row[at].astype(np.float64)
            times = b["timestamp"][at].astype(np.float64)
            if ranges and times[-1] <= times[0]:
                return None
            # Before the first and after the last timestamp, time goes at the mean rate.
            rate = (times[-1] - times[0]) / max(rows[-1] - rows[0], 1.0) if len(at) > 1 else 0.0
            first, last = float(self.first_row[run.first]), float(self.first_row[s.stop])
            rows = np.concatenate(([first], rows, [last]))
            times = np.concatenate(
                (
                    [times[0] - (rows[1] - first) * rate],
                    times,
                    [times[-1] + (last - rows[-2]) * rate],
                )
            )
            out[run.index] = (rows, times)
        return out

    def _make_slices(self) -> _Slices:
        out = _Slices()
        anchors = self._time_anchors()
        if anchors is not None:
            out.axis = "time"
            out.anchors = anchors
        names: dict[str, int] = {}
        b = self.batch
        types = b["type"]
        data = np.isin(types, _DATA_TYPES)
        for run in self.runs:
            s = slice(run.first, run.first + run.count)
            idx = np.flatnonzero(types[s] == _RANGE) + run.first
            label = f"{run.source} ({run.protocol}, ID {run.trace_id:#x})"
            exc = self.first_row[np.flatnonzero(types[s] == int(ElemType.EXCEPTION)) + run.first]
            msgs = self.first_row[np.flatnonzero(data[s]) + run.first]
            if len(idx) == 0:
                if len(exc) or len(msgs):
                    out.add(run.index, label, "messages", _NO_SLICES, exc, msgs)
                continue
            starts = b["start"][idx]
            uniq, where, inverse = np.unique(starts, return_index=True, return_inverse=True)
            fid = np.empty(len(uniq), np.int64)
            ctx = self.contexts[idx[where]].tolist()
            for k, addr in enumerate(uniq.tolist()):
                f = self._function(addr, None if ctx[k] < 0 else ctx[k])
                name = f.name if f is not None else "(no symbol)"
                fid[k] = names.setdefault(name, len(names))
            per = fid[inverse]
            r0 = self.first_row[idx]
            r1 = self.first_row[idx + 1]
            out.add(run.index, label, "functions", _runs(per, r0, r1), exc, msgs)
            el = self.levels[idx].astype(np.int64)
            level_ids = [names.setdefault(f"EL{x}" if x >= 0 else "EL?", len(names)) for x in
                         range(-1, 4)]  # fmt: skip
            lv = np.array(level_ids, np.int64)[el + 1]
            levels = _runs(lv, r0, r1)
            out.add(run.index, label + " exception level", "levels", levels, exc, _NO_ROWS)
        out.names = [n for n, _ in sorted(names.items(), key=lambda kv: kv[1])]
        xs = [lane[k] for lane in out.lanes for k in ("x0", "x1", "xmarks", "xmsgs")]
        xs = [x for x in xs if len(x)]
        if xs:
            out.extent = (float(min(x.min() for x in xs)), float(max(x.max() for x in xs)))
        if out.extent[1] <= out.extent[0]:
            out.extent = (out.extent[0], out.extent[0] + 1.0)
        return out

    # -- overview ----------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        """Inputs, sources, configuration, what the trace lost, and the top functions."""
        from cstrace.render.loss import loss_lines

        trace = self.trace
        buffers: list[dict[str, Any]] = []
        sources: list[dict[str, Any]] = []
        inferred: list[str] = []
        if trace is not None:
            for buf in trace.buffers:
                buffers.append(
                    {
                        "name": buf.name,
                        "format": buf.format,
                        "files": [f.name for f in buf.files],
                    }
                )
            for src in trace.sources:
                sources.append(
                    {
                        "name": src.name,
                        "protocol": src.protocol,
                        "type": src.source_type,
                        "core": src.core,
                        "registers": {k: _hex(v) for k, v in src.registers.items()},
                    }
                )
            inferred = [i.describe() for i in trace.inferred]
        return {
            "input": self.input_name,
            "buffers": buffers,
            "sources": sources,
            "runs": [r.to_dict() for r in self.runs],
            "inferred": inferred,
            "elements": len(self.batch),
            "data": int(self._cursor().execute("SELECT count(*) FROM data").fetchone()[0]),
            "rows": self.total_rows,
            "decode_seconds": round(self.decode_seconds, 3),
            "loss": self.report.to_dict(),
            "loss_text": loss_lines(self.report),
            "issues": [str(i) for i in self.issues],
            "symbols": None if self.symbols is not None else self._no_symbols(),
            "top": self.top_functions(),
            "columns": self._columns(),
        }

    def _columns(self) -> dict[str, bool]:
        """Which of the instruction list's optional columns have something to show: function
        names (symbols), source lines (a line table), times (timestamps or cycle counts)."""
        symbols = self.symbols
        funcs = symbols is not None and bool(symbols.functions())
        lines = False
        if symbols is not None:
            try:
                lines = bool(symbols.line_table())
            except CstraceError:
                lines = False
        times = bool(len(self.timestamps) and int(self.timestamps.max()) >= 0)
        times = times or bool(self.batch["cycle_count_valid"].any())
        return {"func": funcs, "src": lines, "time": times}

    def top_functions(self, limit: int = 20) -> list[dict[str, Any]]:
        """The functions that ran the most instructions."""
        cov = self.coverage()
        if self.symbols is None or not len(cov.addresses):
            return []
        per: dict[str, list[int]] = {}
        funcs = list(self.symbols.functions())
        starts = np.array([f.start for f in funcs], np.uint64)
        ends = np.array([f.end for f in funcs], np.uint64)
        if not len(starts):
            return []
        where = np.searchsorted(starts, cov.addresses, side="right") - 1
        ok = (where >= 0) & (cov.addresses < ends[np.maximum(where, 0)])
        total = int(cov.counts.sum())
        sums = np.bincount(where[ok], weights=cov.counts[ok], minlength=len(funcs))
        for k in np.argsort(-sums)[:limit].tolist():
            if sums[k] <= 0:
                break
            f = funcs[k]
            per[f.name] = [int(sums[k]), f.start]
        return [
            {
                "name": name,
                "instructions": n,
                "share": round(n / total, 4) if total else 0,
                "start": _hex(start),
            }
            for name, (n, start) in per.items()
        ]


def _merge(intervals: list[tuple[int, int]]) -> tuple[npt.NDArray[np.uint64], ...]:
    """``[lo, hi)`` intervals merged into sorted, disjoint ones: ``(los, his)``."""
    out: list[list[int]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return (
        np.array([x[0] for x in out], np.uint64),
        np.array([min(x[1], (1 << 64) - 1) for x in out], np.uint64),
    )


def _row_kind(elem: Element) -> str:
    t = elem.TYPE
    if t == ElemType.EXCEPTION or t == ElemType.EXCEPTION_RET:
        return "exception"
    if t == ElemType.TRACE_ON and getattr(elem, "reason", None) == TraceOnReason.OVERFLOW:
        return "overflow"
    if isinstance(elem, ITMTrace) and elem.overflow:
        return "overflow"
    if t in _GAP_TYPES:
        return "gap"
    if t == ElemType.DIAGNOSTIC:
        return "diag"
    if int(t) in _DATA_TYPES:
        return "message"
    return "other"


def _runs(ids: I64, r0: I64, r1: I64) -> tuple[I64, I64, I64]:
    """Merge consecutive ranges with the same id into slices ``(starts, ends, ids)``."""
    if not len(ids):
        z = np.zeros(0, np.int64)
        return z, z, z
    change = np.flatnonzero(np.diff(ids) != 0) + 1
    first = np.concatenate(([0], change))
    last = np.concatenate((change, [len(ids)])) - 1
    return r0[first].astype(np.int64), r1[last].astype(np.int64), ids[first].astype(np.int64)


def _within(xs: F64, rows: I64, lo: float, hi: float, limit: int = 2000) -> list[list[float]]:
    """``[x, row]`` of the points between ``lo`` and ``hi`` (at most ``limit``)."""
    keep = np.flatnonzero((xs >= lo) & (xs <= hi))[:limit]
    return [[float(xs[k]), int(rows[k])] for k in keep.tolist()]


_NO_ROWS: I64 = np.zeros(0, np.int64)
_NO_SLICES: tuple[I64, I64, I64] = (_NO_ROWS, _NO_ROWS, _NO_ROWS)


def _disassembler() -> Disassemble:
    """The disassembler of the instructions analysis, as a plain function."""
    try:
        from cstrace.analyses.instructions import Disassembler
    except ImportError:  # pragma: no cover - until the instructions analysis is there
        return _capstone_text
    dis = Disassembler()

    def text(address: int, isa: int, opcode: bytes) -> str:
        return str(dis.text(address, Isa(isa), opcode))

    return text


def _capstone_text(address: int, isa: int, opcode: bytes) -> str:  # pragma: no cover
    import capstone

    if isa == Isa.A64:
        md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    elif isa == Isa.T32:
        md = capstone.Cs(capstone.CS_ARCH_ARM, capstone.CS_MODE_THUMB)
    else:
        md = capstone.Cs(capstone.CS_ARCH_ARM, capstone.CS_MODE_ARM)
    for ins in md.disasm(opcode, address):
        return f"{ins.mnemonic} {ins.op_str}".strip()
    return "(undefined)"
