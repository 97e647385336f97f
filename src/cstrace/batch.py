"""Element batches: the generic element stream as typed columns, one row per element.

Input: generic elements (:mod:`cstrace.elements`), either as objects
(:meth:`ElementBatch.from_elements`, :func:`iter_batches`,
:meth:`BatchBuilder.append`) or as plain field values handed to one
:class:`BatchBuilder` method per element type, which is how a decoder fills a
batch without making an object per element. Output: :class:`ElementBatch`, a
fixed set of NumPy columns in stream order, from which element objects
(:meth:`ElementBatch.to_elements`), a structured array
(:meth:`ElementBatch.to_numpy`) or an Arrow table (:meth:`ElementBatch.to_arrow`)
are made on demand.

The schema contract (``SCHEMA``, one :class:`ColumnSpec` per column):

- Every batch has every column of ``SCHEMA``, with exactly its dtype, all of
  the same length; row ``i`` of each column belongs to element ``i``.
- ``type`` (an :class:`~cstrace.elements.ElemType`), ``offset`` and
  ``trace_id`` apply to every row. Every other column holds one field of the
  element types that have it (``cycle_count`` is shared by all types with a
  cycle count, ``reason`` by ``NO_SYNC``, ``EO_TRACE`` and ``TRACE_ON``...);
  in rows of the other types it holds 0 (``False``; -1 for ``obj``).
- A field that is optional in the element objects (``None`` when absent) has a
  boolean ``<field>_valid`` column; where it is False the value column holds 0.
- Enumerations are stored as their numbers; :meth:`ElementBatch.to_elements`
  gives back the right ``IntEnum``/``IntFlag`` member for the row's type.
- ``PEContextInfo`` fields are flattened into ``security_level`` ...
  ``el_valid``; ``Custom.data`` (any Python object) is kept in the batch's
  ``objects`` list, and ``obj`` is its index there (-1: ``None``).
- A ``DIAGNOSTIC`` row keeps its own trace ID in ``trace_id``.

Objects → batch → objects is the identity (elements compare equal, field by
field, with the same enumeration classes), and so is batch → objects → batch
for batches that keep the contract. A value that does not fit its column (a
context ID over 32 bits, say) raises ``OverflowError`` when it is appended.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from cstrace.elements import (
    AddrNacc,
    AddrUnknown,
    Custom,
    CycleCount,
    Diagnostic,
    Element,
    ElemType,
    EoTrace,
    Event,
    EventType,
    Exception_,
    ExceptionRet,
    ExLevel,
    InstrRange,
    InstrSubtype,
    InstrType,
    Instrumentation,
    IRangeNoPath,
    Isa,
    ITMPacketType,
    ITMTrace,
    MemSpace,
    MemTrans,
    MemTransType,
    NoSync,
    PEContext,
    PEContextInfo,
    SecLevel,
    SWTrace,
    SyncMarker,
    SyncMarkerType,
    Timestamp,
    TraceOn,
    TraceOnReason,
    Unknown,
    UnsyncReason,
)
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.rows import fill_ranges

if TYPE_CHECKING:
    import pyarrow

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "BatchBuilder",
    "ColumnSpec",
    "ElementBatch",
    "batches_from_rows",
    "iter_batches",
]

Column = npt.NDArray[Any]
"""One column of a batch: a one-dimensional NumPy array."""


# --- the schema ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One column of the batch schema."""

    name: str
    dtype: np.dtype[Any]
    doc: str
    """What the column holds, and for which element types."""
    valid: str | None = None
    """The name of this column's validity column, for optional fields."""
    validity_of: str | None = None
    """For a validity column: the column whose values it marks as present."""


def _col(name: str, dtype: str, doc: str, *, optional: bool = False) -> tuple[ColumnSpec, ...]:
    if not optional:
        return (ColumnSpec(name, np.dtype(dtype), doc),)
    valid = f"{name}_valid"
    return (
        ColumnSpec(name, np.dtype(dtype), doc, valid=valid),
        ColumnSpec(
            valid, np.dtype("bool"), f"`{name}` is present (None in the objects)", None, name
        ),
    )


SCHEMA_VERSION = 1
"""Bumped whenever a column is added, removed, renamed or retyped."""

SCHEMA: tuple[ColumnSpec, ...] = (
    # every row
    *_col("type", "uint8", "element type (`ElemType`)"),
    *_col("offset", "int64", "capture index of the first byte of the element's packet"),
    *_col("trace_id", "uint8", "trace ID of the source (DIAGNOSTIC: the diagnostic's `trace_id`)"),
    # NO_SYNC, EO_TRACE, TRACE_ON
    *_col("reason", "uint8", "NO_SYNC, EO_TRACE: `UnsyncReason`; TRACE_ON: `TraceOnReason`"),
    # PE_CONTEXT: PEContextInfo, flattened
    *_col("security_level", "uint8", "PE_CONTEXT: `SecLevel`"),
    *_col("exception_level", "int8", "PE_CONTEXT: `ExLevel` (-1: unknown)"),
    *_col("context_id", "uint32", "PE_CONTEXT: context ID (CONTEXTIDR, 32 bits)"),
    *_col("vmid", "uint32", "PE_CONTEXT: VMID (up to 32 bits)"),
    *_col("bits64", "bool", "PE_CONTEXT: the PE is in AArch64 state"),
    *_col("ctxt_id_valid", "bool", "PE_CONTEXT: the trace gave `context_id`"),
    *_col("vmid_valid", "bool", "PE_CONTEXT: the trace gave `vmid`"),
    *_col("el_valid", "bool", "PE_CONTEXT: the trace gave `exception_level`"),
    # instruction ranges
    *_col("isa", "uint8", "PE_CONTEXT, INSTR_RANGE, I_RANGE_NOPATH: `Isa`"),
    *_col("start", "uint64", "INSTR_RANGE, I_RANGE_NOPATH: address of the first instruction"),
    *_col("end", "uint64", "INSTR_RANGE: address after the last instruction; I_RANGE_NOPATH: next"),
    *_col("num_instr", "uint32", "INSTR_RANGE, I_RANGE_NOPATH: number of instructions"),
    *_col("last_exec", "bool", "INSTR_RANGE: the last instruction executed (branch taken)"),
    *_col("last_size", "uint8", "INSTR_RANGE: size of the last instruction in bytes"),
    *_col("last_type", "uint8", "INSTR_RANGE: `InstrType` of the last instruction"),
    *_col("last_subtype", "uint8", "INSTR_RANGE: `InstrSubtype` of the last instruction"),
    *_col("last_cond", "bool", "INSTR_RANGE: the last instruction is conditional"),
    # cycle counts
    *_col(
        "cycle_count",
        "uint64",
        "TRACE_ON, PE_CONTEXT, INSTR_RANGE, ADDR_NACC, ADDR_UNKNOWN, EXCEPTION, TIMESTAMP, "
        "CYCLE_COUNT: cycles",
        optional=True,
    ),
    # ADDR_NACC
    *_col("address", "uint64", "ADDR_NACC: address no memory image covers"),
    *_col("mem_space", "uint8", "ADDR_NACC: `MemSpace` (flags)"),
    # EXCEPTION, EVENT
    *_col("number", "uint32", "EXCEPTION: exception number; EVENT: event number (bits)"),
    *_col("return_address", "uint64", "EXCEPTION: preferred return address", optional=True),
    *_col("ret_addr_br_tgt", "bool", "EXCEPTION: the return address is a branch target"),
    *_col("m_tail_chain", "bool", "EXCEPTION: M-profile tail chain"),
    *_col("data_marker", "bool", "EXCEPTION: data marker"),
    # timestamps
    *_col("timestamp", "uint64", "TIMESTAMP, SWTRACE, ITMTRACE: timestamp", optional=True),
    # EVENT
    *_col("event_type", "uint8", "EVENT: `EventType`"),
    # SWTRACE
    *_col("master", "uint16", "SWTRACE: master"),
    *_col("channel", "uint16", "SWTRACE: channel"),
    *_col("id_valid", "bool", "SWTRACE: master and channel are valid"),
    *_col("payload_bits", "uint8", "SWTRACE: payload size in bits (0: none)"),
    *_col("payload", "uint64", "SWTRACE: payload"),
    *_col("marker", "bool", "SWTRACE: marker"),
    *_col("trigger", "bool", "SWTRACE: trigger"),
    *_col("frequency", "bool", "SWTRACE: the payload is a frequency"),
    *_col("master_err", "bool", "SWTRACE: master error"),
    *_col("global_err", "bool", "SWTRACE: global error"),
    # SYNC_MARKER, MEMTRANS, INSTRUMENTATION, ITMTRACE
    *_col("marker_type", "uint8", "SYNC_MARKER: `SyncMarkerType`"),
    *_col("value", "uint64", "SYNC_MARKER, INSTRUMENTATION, ITMTRACE: value or payload"),
    *_col("trans", "uint8", "MEMTRANS: `MemTransType`"),
    *_col("el", "uint8", "INSTRUMENTATION: exception level"),
    *_col("pkt_type", "uint8", "ITMTRACE: `ITMPacketType`"),
    *_col("src_id", "uint8", "ITMTRACE: stimulus port or DWT discriminator"),
    *_col("payload_size", "uint8", "ITMTRACE: payload size in bytes"),
    *_col("overflow", "bool", "ITMTRACE: an overflow came before"),
    *_col("ts_freq_change", "bool", "ITMTRACE: the timestamp frequency changed"),
    # CUSTOM
    *_col("obj", "int32", "CUSTOM: index of `data` in the batch's `objects` (-1: None)"),
    # DIAGNOSTIC
    *_col("code", "uint16", "DIAGNOSTIC: `DiagCode`"),
    *_col("kind", "uint16", "DIAGNOSTIC: `DiagKind`"),
    *_col("detail", "uint64", "DIAGNOSTIC: detail (meaning depends on `kind`)"),
    *_col("severity", "uint8", "DIAGNOSTIC: `Severity`"),
)
"""The columns of every batch, in order."""

_SPEC: dict[str, ColumnSpec] = {s.name: s for s in SCHEMA}
_NTYPES = max(ElemType) + 1


# --- how each element type maps onto the columns ---------------------------------------------


class _Lookup(dict[int, object]):
    """Number → enumeration member; numbers that are no member come back as they are."""

    def __init__(self, enum: type[IntEnum] | type[IntFlag]) -> None:
        super().__init__((int(m), m) for m in enum)
        self.enum = enum
        # Every number from the least member to the greatest (to 0xFF for flags), as an
        # object array: a whole column is restored by one NumPy gather.
        flags = issubclass(enum, IntFlag)
        self.low = 0 if flags else min(self)
        high = 0xFF if flags else max(self)
        self.table = np.array([self[v] for v in range(self.low, high + 1)], dtype=object)

    def __missing__(self, key: int) -> object:
        try:
            value: object = self.enum(key)  # IntFlag: a combination of flags
        except ValueError:
            value = key
        self[key] = value
        return value

    def restore(self, column: Column) -> list[object]:
        """The members (or numbers) of a column of numbers."""
        if len(column) == 0:
            return []
        index = column.astype(np.intp) - self.low
        if index.min() >= 0 and index.max() < len(self.table):
            members: list[object] = self.table[index].tolist()
            return members
        return list(map(self.__getitem__, column.tolist()))


def _optional(values: Column, valid: Column) -> list[object]:
    """The numbers of ``values``, None where ``valid`` is False."""
    if valid.all():
        out: list[object] = values.tolist()
        return out
    if not valid.any():
        return [None] * len(values)
    mixed = values.astype(object)
    mixed[~valid] = None
    out = mixed.tolist()
    return out


@dataclass(frozen=True, slots=True)
class _Field:
    attr: str
    """Attribute path on the element object (``context.vmid``)."""
    column: str
    lookup: _Lookup | None
    """Restores the enumeration members of the field."""
    optional: bool
    """The column has a validity column: ``None`` in the objects is a row with it False."""


@dataclass(frozen=True, slots=True)
class _Layout:
    elem_type: ElemType
    cls: type[Element]
    fields: tuple[_Field, ...]
    """In the order of the class's constructor arguments and the builder method's."""
    method: str
    """The :class:`BatchBuilder` method that appends a row of this type."""
    getter: Callable[[Element], tuple[Any, ...]]


def _layout(
    cls: type[Element],
    *fields: str | tuple[str, type[IntEnum] | type[IntFlag]],
    columns: Mapping[str, str] | None = None,
) -> _Layout:
    """The layout of ``cls``: its fields after ``offset``, each in the column of its name
    (or of ``columns[name]``), with the enumeration that restores it."""
    out = []
    for f in ("offset", *fields):
        attr, enum = (f, None) if isinstance(f, str) else f
        column = (columns or {}).get(attr, attr.rsplit(".", 1)[-1])
        spec = _SPEC[column]
        out.append(_Field(attr, column, _Lookup(enum) if enum else None, spec.valid is not None))
    attrs = [f.attr for f in out]
    getter = attrgetter(*attrs) if len(attrs) > 1 else (lambda e: (e.offset,))
    return _Layout(cls.TYPE, cls, tuple(out), cls.TYPE.name.lower(), getter)


_CONTEXT: tuple[str | tuple[str, type[IntEnum]], ...] = (
    ("context.security_level", SecLevel),
    ("context.exception_level", ExLevel),
    "context.context_id",
    "context.vmid",
    "context.bits64",
    "context.ctxt_id_valid",
    "context.vmid_valid",
    "context.el_valid",
)

_LAYOUTS: dict[int, _Layout] = {
    layout.elem_type: layout
    for layout in (
        _layout(Unknown),
        _layout(NoSync, ("reason", UnsyncReason)),
        _layout(TraceOn, ("reason", TraceOnReason), "cycle_count"),
        _layout(EoTrace, ("reason", UnsyncReason)),
        _layout(PEContext, *_CONTEXT, ("isa", Isa), "cycle_count"),
        _layout(
            InstrRange,
            "start",
            "end",
            "num_instr",
            ("isa", Isa),
            "last_exec",
            "last_size",
            ("last_type", InstrType),
            ("last_subtype", InstrSubtype),
            "last_cond",
            "cycle_count",
        ),
        _layout(IRangeNoPath, "start", "end", "num_instr", ("isa", Isa)),
        _layout(AddrNacc, "address", ("mem_space", MemSpace), "cycle_count"),
        _layout(AddrUnknown, "cycle_count"),
        _layout(
            Exception_,
            "number",
            "return_address",
            "ret_addr_br_tgt",
            "m_tail_chain",
            "data_marker",
            "cycle_count",
        ),
        _layout(ExceptionRet),
        _layout(Timestamp, "timestamp", "cycle_count"),
        _layout(CycleCount, "cycle_count"),
        _layout(Event, ("event_type", EventType), "number"),
        _layout(
            SWTrace,
            "master",
            "channel",
            "id_valid",
            "payload_bits",
            "payload",
            "marker",
            "trigger",
            "timestamp",
            "frequency",
            "master_err",
            "global_err",
        ),
        _layout(SyncMarker, ("marker_type", SyncMarkerType), "value"),
        _layout(MemTrans, ("trans", MemTransType)),
        _layout(Instrumentation, "el", "value"),
        _layout(
            ITMTrace,
            ("pkt_type", ITMPacketType),
            "src_id",
            "payload_size",
            "value",
            "overflow",
            "timestamp",
            "ts_freq_change",
        ),
        _layout(Custom, "data", columns={"data": "obj"}),  # the data goes to `objects`
        _layout(
            Diagnostic,
            "trace_id",
            ("code", DiagCode),
            ("kind", DiagKind),
            "detail",
            ("severity", Severity),
        ),
    )
}


def _make_pe_context(cols: list[list[Any]]) -> Iterator[Element]:
    offset, sec, el, ctx, vmid, bits64, ctx_ok, vmid_ok, el_ok, isa, cc = cols
    contexts = map(PEContextInfo, sec, el, ctx, vmid, bits64, ctx_ok, vmid_ok, el_ok)
    return map(PEContext, offset, contexts, isa, cc)


# --- array.array storage of the builder ------------------------------------------------------

_TYPECODE = {
    np.dtype(np.int8): "b",
    np.dtype(np.uint8): "B",
    np.dtype(np.bool_): "B",
    np.dtype(np.uint16): "H",
    np.dtype(np.int32): "i",
    np.dtype(np.uint32): "I",
    np.dtype(np.int64): "q",
    np.dtype(np.uint64): "Q",
}
assert all(array(code).itemsize == dt.itemsize for dt, code in _TYPECODE.items())


def _storage(layout: _Layout) -> list[tuple[str, np.dtype[Any]]]:
    """(column, dtype of its bytes in the builder's array) for each array of one type."""
    out = []
    for f in layout.fields:
        spec = _SPEC[f.column]
        out.append((f.column, np.dtype(np.uint8) if spec.dtype == np.bool_ else spec.dtype))
        if spec.valid is not None:
            out.append((spec.valid, np.dtype(np.uint8)))
    return out


_STORAGE: dict[int, list[tuple[str, np.dtype[Any]]]] = {t: _storage(v) for t, v in _LAYOUTS.items()}


# --- ElementBatch ----------------------------------------------------------------------------


class ElementBatch:
    """Elements of a trace stream as typed columns, one row per element, in stream order.

    The columns are those of :data:`SCHEMA` (read-only NumPy arrays of equal
    length); ``objects`` holds the ``data`` of ``CUSTOM`` rows. Batches are
    made by a :class:`BatchBuilder`, :meth:`from_elements`, :func:`iter_batches`
    or :meth:`concat`; the constructor takes columns that keep the contract
    of the module docstring (without copying them), and checks their names,
    dtypes and lengths. Batches pickle (to cross process pools).
    """

    __slots__ = ("_columns", "objects")

    def __init__(self, columns: Mapping[str, Column], objects: Sequence[object] = ()) -> None:
        missing = [s.name for s in SCHEMA if s.name not in columns]
        extra = sorted(set(columns) - set(_SPEC))
        if missing or extra:
            raise ValueError(f"batch columns: missing {missing}, unknown {extra}")
        n = len(columns["type"])
        cols: dict[str, Column] = {}
        for spec in SCHEMA:
            col = np.asarray(columns[spec.name])
            if col.dtype != spec.dtype or col.ndim != 1 or len(col) != n:
                raise ValueError(
                    f"batch column {spec.name!r}: want {n} rows of {spec.dtype}, "
                    f"got shape {col.shape} of {col.dtype}"
                )
            cols[spec.name] = col
        self._columns = _readonly(cols)
        self.objects: list[object] = list(objects)

    @classmethod
    def _trusted(cls, columns: dict[str, Column], objects: list[object]) -> ElementBatch:
        """A batch of columns made here, that need no checks."""
        batch = cls.__new__(cls)
        batch._columns = _readonly(columns)
        batch.objects = objects
        return batch

    @classmethod
    def empty(cls) -> ElementBatch:
        """A batch with no rows."""
        return cls._trusted({s.name: np.zeros(0, s.dtype) for s in SCHEMA}, [])

    @classmethod
    def from_elements(cls, elements: Iterable[Element], trace_id: int) -> ElementBatch:
        """A batch of ``elements``, all from the source ``trace_id``."""
        builder = BatchBuilder(trace_id)
        builder.extend(elements)
        return builder.flush()

    @classmethod
    def concat(cls, batches: Iterable[ElementBatch]) -> ElementBatch:
        """One batch with the rows of ``batches``, one after the other."""
        parts = list(batches)
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        objects: list[object] = []
        objs: list[Column] = []
        for part in parts:
            obj = part._columns["obj"]
            objs.append(np.where(obj >= 0, obj + len(objects), -1).astype(np.int32))
            objects.extend(part.objects)
        columns = {
            s.name: np.concatenate([p._columns[s.name] for p in parts])
            for s in SCHEMA
            if s.name != "obj"
        }
        columns["obj"] = np.concatenate(objs)
        return cls._trusted(columns, objects)

    def __len__(self) -> int:
        return len(self._columns["type"])

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (for process pools) as columns and objects; read-only again when unpickled."""
        return (_unpickle, (dict(self._columns), self.objects))

    def __repr__(self) -> str:
        ids = np.unique(self._columns["trace_id"]).tolist()
        return f"ElementBatch({len(self)} rows, trace IDs {[hex(i) for i in ids]})"

    @property
    def columns(self) -> Mapping[str, Column]:
        """The columns by name, in :data:`SCHEMA` order (read-only arrays)."""
        return MappingProxyType(self._columns)

    def __getitem__(self, name: str) -> Column:
        """One column by name (a read-only array)."""
        return self._columns[name]

    @property
    def nbytes(self) -> int:
        """Bytes held by the columns (``objects`` not counted)."""
        return sum(c.nbytes for c in self._columns.values())

    def equals(self, other: ElementBatch) -> bool:
        """Whether both batches have equal columns and equal ``objects``."""
        return self.objects == other.objects and all(
            np.array_equal(self._columns[s.name], other._columns[s.name]) for s in SCHEMA
        )

    def to_numpy(self) -> Column:
        """The rows as one structured NumPy array (a copy), fields in :data:`SCHEMA` order."""
        out = np.zeros(len(self), dtype=[(s.name, s.dtype) for s in SCHEMA])
        for spec in SCHEMA:
            out[spec.name] = self._columns[spec.name]
        return out

    def to_elements(self) -> list[Element]:
        """The rows as element objects, in order (see :meth:`__iter__`)."""
        return list(self)

    def take(self, rows: Column) -> list[Element]:
        """The element objects of the rows numbered ``rows`` (in that order)."""
        cols = {name: col[rows] for name, col in self._columns.items()}
        return ElementBatch._trusted(cols, self.objects).to_elements()

    def __iter__(self) -> Iterator[Element]:
        """Element objects made from the rows, in order.

        Each type's column slices go to Python lists (``tolist``) when
        iteration starts; the objects are made as they are asked for, by the
        class's constructor, and not kept.
        """
        types = self._columns["type"]
        n = len(types)
        if n == 0:
            return iter(())
        counts = np.bincount(types, minlength=_NTYPES)
        present = np.flatnonzero(counts).tolist()
        for t in present:
            if t not in _LAYOUTS:
                raise ValueError(f"batch row of unknown element type {t}")
        if len(present) == 1:
            return self._make(present[0], slice(None))
        # One lazy iterator per type; each row takes the next object of its type's (all in C).
        made = {t: self._make(t, np.flatnonzero(types == t)) for t in present}
        return map(next, map(made.__getitem__, types.tolist()))

    def _make(self, t: int, where: slice | Column) -> Iterator[Element]:
        """Element objects of the rows ``where``, all of type ``t``."""
        layout = _LAYOUTS[t]
        cols: list[list[Any]] = []
        for f in layout.fields:
            column = self._columns[f.column][where]
            if f.optional:
                cols.append(_optional(column, self._columns[f.column + "_valid"][where]))
            elif f.lookup is not None:
                cols.append(f.lookup.restore(column))
            else:
                cols.append(column.tolist())
        if t == ElemType.CUSTOM:
            objects = self.objects
            cols[1] = [objects[i] if i >= 0 else None for i in cols[1]]
        if t == ElemType.PE_CONTEXT:
            return _make_pe_context(cols)
        return map(layout.cls, *cols)

    def to_arrow(self) -> pyarrow.Table:
        """The batch as a ``pyarrow.Table`` (needs ``pyarrow``: ``pip install 'cstrace[arrow]'``).

        One Arrow column per :data:`SCHEMA` column except the ``*_valid`` ones:
        an optional field's validity becomes the nulls of its column, and
        ``obj`` is null where it is -1. ``objects`` are not part of the table.

        Zero-copy: every integer column is handed to Arrow without copying
        (Arrow wraps the NumPy buffer, and keeps the batch's array alive); the
        columns with nulls get a new validity bitmap (1 bit per row) but keep
        their data buffer. Boolean columns are copied, since Arrow packs
        booleans into bits. Field metadata ``doc`` describes each column;
        schema metadata names the schema version and the element types.
        """
        try:
            import pyarrow as pa
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "ElementBatch.to_arrow needs pyarrow: pip install 'cstrace[arrow]'"
            ) from exc
        arrays = []
        fields = []
        for spec in SCHEMA:
            if spec.validity_of is not None:
                continue
            col = self._columns[spec.name]
            if spec.valid is not None:
                arr = pa.array(col, mask=~self._columns[spec.valid])
            elif spec.name == "obj":
                arr = pa.array(col, mask=col < 0)
            else:
                arr = pa.array(col)
            nullable = spec.valid is not None or spec.name == "obj"
            arrays.append(arr)
            fields.append(pa.field(spec.name, arr.type, nullable, metadata={"doc": spec.doc}))
        metadata = {
            "cstrace.schema_version": str(SCHEMA_VERSION),
            "cstrace.elem_types": json.dumps({int(t): t.name for t in ElemType}),
        }
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=metadata))


def _unpickle(columns: dict[str, Column], objects: list[object]) -> ElementBatch:
    return ElementBatch._trusted(columns, objects)


def _readonly(columns: dict[str, Column]) -> dict[str, Column]:
    """Read-only views of ``columns`` (the arrays themselves are left as they are)."""
    out = {}
    for name, col in columns.items():
        view = col.view()
        view.flags.writeable = False
        out[name] = view
    return out


# --- BatchBuilder ----------------------------------------------------------------------------

_Append = Callable[[int], None]


class BatchBuilder:
    """Fills the columns of an :class:`ElementBatch` row by row, without element objects.

    One method per element type takes that element's fields (as the element
    class's constructor does, with the same defaults; a ``PE_CONTEXT``'s
    ``PEContextInfo`` fields are arguments of their own), appends one row and
    makes no Python object; :meth:`append` takes an element object instead.
    :meth:`flush` returns the rows so far as a batch and starts the next.

    Rows are kept in ``array.array`` columns per element type (only the fields
    of that type are written per row), and go to the batch's NumPy columns in
    :meth:`flush`. ``trace_id`` is the source of every row but ``DIAGNOSTIC``
    rows, which carry their own. A value that does not fit its column raises
    ``OverflowError`` (a wrong type ``TypeError``), and no row is appended.
    """

    __slots__ = ("_app", "_arrays", "_dispatch", "_objects", "_type", "_types", "trace_id")

    def __init__(self, trace_id: int = 0) -> None:
        if not 0 <= trace_id <= 0xFF:
            raise ValueError(f"trace ID {trace_id:#x} does not fit the trace_id column (8 bits)")
        self.trace_id = trace_id
        self._types: array[int] = array("B")
        self._type = self._types.append
        self._objects: list[object] = []
        self._arrays: dict[int, list[array[int]]] = {
            t: [array(_TYPECODE[dt]) for _, dt in storage] for t, storage in _STORAGE.items()
        }
        self._app: list[tuple[_Append, ...]] = [()] * _NTYPES
        for t, arrays in self._arrays.items():
            self._app[t] = tuple(a.append for a in arrays)
        self._dispatch: dict[int, tuple[Callable[[Element], tuple[Any, ...]], Callable[..., None]]]
        self._dispatch = {
            t: (layout.getter, getattr(self, layout.method)) for t, layout in _LAYOUTS.items()
        }

    def __len__(self) -> int:
        """Rows appended since the last :meth:`flush`."""
        return len(self._types)

    def _undo(self, t: int) -> None:
        """Drop a partly appended row of type ``t`` (a field did not fit its column)."""
        arrays = self._arrays[t]
        rows = min(len(a) for a in arrays)
        for a in arrays:
            del a[rows:]

    def append(self, elem: Element) -> None:
        """Append one element object (any class of :mod:`cstrace.elements`)."""
        getter, method = self._dispatch[elem.TYPE]
        method(*getter(elem))

    def extend(self, elements: Iterable[Element]) -> None:
        """Append element objects."""
        dispatch = self._dispatch
        for elem in elements:
            getter, method = dispatch[elem.TYPE]
            method(*getter(elem))

    def flush(self) -> ElementBatch:
        """The rows appended so far as a batch; the builder starts empty again."""
        n = len(self._types)
        types = np.frombuffer(self._types, np.uint8).copy() if n else np.zeros(0, np.uint8)
        del self._types[:]
        columns = {s.name: np.zeros(n, s.dtype) for s in SCHEMA}
        columns["type"] = types
        columns["trace_id"].fill(self.trace_id)
        columns["obj"].fill(-1)
        counts = np.bincount(types, minlength=_NTYPES)
        for t in np.flatnonzero(counts).tolist():
            where = slice(None) if counts[t] == n else np.flatnonzero(types == t)
            for (name, dtype), arr in zip(_STORAGE[t], self._arrays[t], strict=True):
                columns[name][where] = np.frombuffer(arr, dtype)
                del arr[:]
        objects, self._objects = self._objects, []
        return ElementBatch._trusted(columns, objects)

    build = flush
    """Another name of :meth:`flush`."""

    # One method per element type, in ElemType order. Each appends the row's fields to the
    # arrays of its type (in _LAYOUTS order, a validity byte after each optional field),
    # then its type, so that a field that fails leaves no row behind.

    def unknown(self, offset: int) -> None:
        """Append an ``UNKNOWN`` row (:class:`~cstrace.elements.Unknown`)."""
        (o,) = self._app[0]
        o(offset)
        self._type(0)

    def no_sync(self, offset: int, reason: int = UnsyncReason.INIT_DECODER) -> None:
        """Append a ``NO_SYNC`` row (:class:`~cstrace.elements.NoSync`)."""
        o, r = self._app[1]
        try:
            o(offset)
            r(reason)
        except BaseException:
            self._undo(1)
            raise
        self._type(1)

    def trace_on(
        self, offset: int, reason: int = TraceOnReason.NORMAL, cycle_count: int | None = None
    ) -> None:
        """Append a ``TRACE_ON`` row (:class:`~cstrace.elements.TraceOn`)."""
        o, r, cc, ccv = self._app[2]
        try:
            o(offset)
            r(reason)
            cc(cycle_count or 0)
            ccv(cycle_count is not None)
        except BaseException:
            self._undo(2)
            raise
        self._type(2)

    def eo_trace(self, offset: int, reason: int = UnsyncReason.EOT) -> None:
        """Append an ``EO_TRACE`` row (:class:`~cstrace.elements.EoTrace`)."""
        o, r = self._app[3]
        try:
            o(offset)
            r(reason)
        except BaseException:
            self._undo(3)
            raise
        self._type(3)

    def pe_context(
        self,
        offset: int,
        security_level: int = SecLevel.SECURE,
        exception_level: int = ExLevel.UNKNOWN,
        context_id: int = 0,
        vmid: int = 0,
        bits64: bool = False,
        ctxt_id_valid: bool = False,
        vmid_valid: bool = False,
        el_valid: bool = False,
        isa: int = Isa.UNKNOWN,
        cycle_count: int | None = None,
    ) -> None:
        """Append a ``PE_CONTEXT`` row (:class:`~cstrace.elements.PEContext`).

        The arguments after ``offset`` up to ``el_valid`` are the fields of its
        :class:`~cstrace.elements.PEContextInfo`, with its defaults.
        """
        o, sec, el, ctx, vm, b64, ctx_ok, vm_ok, el_ok, i, cc, ccv = self._app[4]
        try:
            o(offset)
            sec(security_level)
            el(exception_level)
            ctx(context_id)
            vm(vmid)
            b64(bits64)
            ctx_ok(ctxt_id_valid)
            vm_ok(vmid_valid)
            el_ok(el_valid)
            i(isa)
            cc(cycle_count or 0)
            ccv(cycle_count is not None)
        except BaseException:
            self._undo(4)
            raise
        self._type(4)

    def instr_range(
        self,
        offset: int,
        start: int,
        end: int,
        num_instr: int,
        isa: int,
        last_exec: bool,
        last_size: int,
        last_type: int,
        last_subtype: int = InstrSubtype.NONE,
        last_cond: bool = False,
        cycle_count: int | None = None,
    ) -> None:
        """Append an ``INSTR_RANGE`` row (:class:`~cstrace.elements.InstrRange`)."""
        o, s, e, n, i, ex, sz, ty, sub, cond, cc, ccv = self._app[5]
        try:
            o(offset)
            s(start)
            e(end)
            n(num_instr)
            i(isa)
            ex(last_exec)
            sz(last_size)
            ty(last_type)
            sub(last_subtype)
            cond(last_cond)
            cc(cycle_count or 0)
            ccv(cycle_count is not None)
        except BaseException:
            self._undo(5)
            raise
        self._type(5)

    def i_range_nopath(self, offset: int, start: int, end: int, num_instr: int, isa: int) -> None:
        """Append an ``I_RANGE_NOPATH`` row (:class:`~cstrace.elements.IRangeNoPath`)."""
        o, s, e, n, i = self._app[6]
        try:
            o(offset)
            s(start)
            e(end)
            n(num_instr)
            i(isa)
        except BaseException:
            self._undo(6)
            raise
        self._type(6)

    def addr_nacc(
        self,
        offset: int,
        address: int,
        mem_space: int = MemSpace.NONE,
        cycle_count: int | None = None,
    ) -> None:
        """Append an ``ADDR_NACC`` row (:class:`~cstrace.elements.AddrNacc`)."""
        o, a, m, cc, ccv = self._app[7]
        try:
            o(offset)
            a(address)
            m(mem_space)
            cc(cycle_count or 0)
            ccv(cycle_count is not None)
        except BaseException:
            self._undo(7)
            raise
        self._type(7)

    def addr_unknown(self, offset: int, cycle_count: int | None = None) -> None:
        """Append an ``ADDR_UNKNOWN`` row (:class:`~cstrace.elements.AddrUnknown`)."""
        o, cc, ccv = self._app[8]
        try:
            o(offset)
            cc(cycle_count or 0)
            ccv(cycle_count is not None)
        except BaseException:
            self._undo(8)
            raise
        self._type(8)

    def exception(
        self,
        offset: int,
        number: int,
        return_address: int | None = None,
        ret_addr_br_tgt: bool = False,
        m_tail_chain: bool = False,
        data_marker: bool = False,
        cycle_count: int | None = None,
    ) -> None:
        """Append an ``EXCEPTION`` row (:class:`~cstrace.elements.Exception_`)."""
        o, num, ra, rav, tgt, tail, dm, cc, ccv = self._app[9]
        try:
            o(offset)
            num(number)
            ra(return_address or 0)
            rav(return_address is not None)
            tgt(ret_addr_br_tgt)
            tail(m_tail_chain)
            dm(data_marker)
            cc(cycle_count or 0)
            ccv(cycle_count is not None)
        except BaseException:
            self._undo(9)
            raise
        self._type(9)

    def exception_ret(self, offset: int) -> None:
        """Append an ``EXCEPTION_RET`` row (:class:`~cstrace.elements.ExceptionRet`)."""
        (o,) = self._app[10]
        o(offset)
        self._type(10)

    def timestamp(self, offset: int, timestamp: int, cycle_count: int | None = None) -> None:
        """Append a ``TIMESTAMP`` row (:class:`~cstrace.elements.Timestamp`)."""
        o, ts, tsv, cc, ccv = self._app[11]
        try:
            o(offset)
            ts(timestamp or 0)
            tsv(timestamp is not None)
            cc(cycle_count or 0)
            ccv(cycle_count is not None)
        except BaseException:
            self._undo(11)
            raise
        self._type(11)

    def cycle_count(self, offset: int, cycle_count: int) -> None:
        """Append a ``CYCLE_COUNT`` row (:class:`~cstrace.elements.CycleCount`)."""
        o, cc, ccv = self._app[12]
        try:
            o(offset)
            cc(cycle_count or 0)
            ccv(cycle_count is not None)
        except BaseException:
            self._undo(12)
            raise
        self._type(12)

    def event(self, offset: int, event_type: int, number: int = 0) -> None:
        """Append an ``EVENT`` row (:class:`~cstrace.elements.Event`)."""
        o, et, num = self._app[13]
        try:
            o(offset)
            et(event_type)
            num(number)
        except BaseException:
            self._undo(13)
            raise
        self._type(13)

    def swtrace(
        self,
        offset: int,
        master: int = 0,
        channel: int = 0,
        id_valid: bool = True,
        payload_bits: int = 0,
        payload: int = 0,
        marker: bool = False,
        trigger: bool = False,
        timestamp: int | None = None,
        frequency: bool = False,
        master_err: bool = False,
        global_err: bool = False,
    ) -> None:
        """Append a ``SWTRACE`` row (:class:`~cstrace.elements.SWTrace`)."""
        o, ma, ch, idv, pb, pl, mk, tr, ts, tsv, fr, me, ge = self._app[14]
        try:
            o(offset)
            ma(master)
            ch(channel)
            idv(id_valid)
            pb(payload_bits)
            pl(payload)
            mk(marker)
            tr(trigger)
            ts(timestamp or 0)
            tsv(timestamp is not None)
            fr(frequency)
            me(master_err)
            ge(global_err)
        except BaseException:
            self._undo(14)
            raise
        self._type(14)

    def sync_marker(self, offset: int, marker_type: int, value: int) -> None:
        """Append a ``SYNC_MARKER`` row (:class:`~cstrace.elements.SyncMarker`)."""
        o, mt, v = self._app[15]
        try:
            o(offset)
            mt(marker_type)
            v(value)
        except BaseException:
            self._undo(15)
            raise
        self._type(15)

    def memtrans(self, offset: int, trans: int) -> None:
        """Append a ``MEMTRANS`` row (:class:`~cstrace.elements.MemTrans`)."""
        o, tr = self._app[16]
        try:
            o(offset)
            tr(trans)
        except BaseException:
            self._undo(16)
            raise
        self._type(16)

    def instrumentation(self, offset: int, el: int, value: int) -> None:
        """Append an ``INSTRUMENTATION`` row (:class:`~cstrace.elements.Instrumentation`)."""
        o, e, v = self._app[17]
        try:
            o(offset)
            e(el)
            v(value)
        except BaseException:
            self._undo(17)
            raise
        self._type(17)

    def itmtrace(
        self,
        offset: int,
        pkt_type: int,
        src_id: int = 0,
        payload_size: int = 0,
        value: int = 0,
        overflow: bool = False,
        timestamp: int | None = None,
        ts_freq_change: bool = False,
    ) -> None:
        """Append an ``ITMTRACE`` row (:class:`~cstrace.elements.ITMTrace`)."""
        o, pt, src, ps, v, ov, ts, tsv, fc = self._app[18]
        try:
            o(offset)
            pt(pkt_type)
            src(src_id)
            ps(payload_size)
            v(value)
            ov(overflow)
            ts(timestamp or 0)
            tsv(timestamp is not None)
            fc(ts_freq_change)
        except BaseException:
            self._undo(18)
            raise
        self._type(18)

    def custom(self, offset: int, data: object = None) -> None:
        """Append a ``CUSTOM`` row (:class:`~cstrace.elements.Custom`); ``data`` to ``objects``."""
        o, obj = self._app[19]
        try:
            o(offset)
            obj(-1 if data is None else len(self._objects))
        except BaseException:
            self._undo(19)
            raise
        if data is not None:
            self._objects.append(data)
        self._type(19)

    def diagnostic(
        self,
        offset: int,
        trace_id: int,
        code: int,
        kind: int,
        detail: int = 0,
        severity: int = Severity.ERROR,
    ) -> None:
        """Append a ``DIAGNOSTIC`` row (:class:`~cstrace.elements.Diagnostic`): own trace ID."""
        o, tid, c, k, d, s = self._app[20]
        try:
            o(offset)
            tid(trace_id)
            c(code)
            k(kind)
            d(detail)
            s(severity)
        except BaseException:
            self._undo(20)
            raise
        self._type(20)


def iter_batches(
    elements: Iterable[Element], trace_id: int, size: int = 65536
) -> Iterator[ElementBatch]:
    """Batches of at most ``size`` rows of ``elements`` (from the source ``trace_id``), in order.

    Consumes ``elements`` lazily: memory stays flat whatever the stream's length.
    """
    if size < 1:
        raise ValueError(f"batch size must be positive, not {size}")
    builder = BatchBuilder(trace_id)
    dispatch = builder._dispatch
    count = 0
    for elem in elements:
        getter, method = dispatch[elem.TYPE]
        method(*getter(elem))
        count += 1
        if count == size:
            yield builder.flush()
            count = 0
    if count:
        yield builder.flush()


_RANGE_U8 = ("last_exec", "last_cond", "cycle_count_valid")
"""Boolean columns that :func:`~cstrace.rows.fill_ranges` writes as bytes."""


def _rows_batch(items: list[Any], trace_id: int) -> ElementBatch:
    """One batch of the element rows ``items`` (:mod:`cstrace.rows`)."""
    n = len(items)
    columns = {s.name: np.zeros(n, s.dtype) for s in SCHEMA}
    u8 = {name: columns[name].view(np.uint8) for name in _RANGE_U8}
    obj_rows: list[int] = []
    objs: list[Any] = []
    rows = fill_ranges(
        items,
        columns["type"],
        columns["offset"],
        columns["start"],
        columns["end"],
        columns["num_instr"],
        columns["isa"],
        u8["last_exec"],
        columns["last_size"],
        columns["last_type"],
        columns["last_subtype"],
        u8["last_cond"],
        columns["cycle_count"],
        u8["cycle_count_valid"],
        obj_rows,
        objs,
    )
    if rows < n:
        columns = {name: col[:rows] for name, col in columns.items()}
    columns["trace_id"].fill(trace_id)
    columns["obj"].fill(-1)
    objects: list[object] = []
    if objs:
        # The element objects (the few rows that are not block walks): through a builder.
        sub = ElementBatch.from_elements(objs, trace_id)
        where = np.array(obj_rows, np.intp)
        for name, col in sub.columns.items():
            columns[name][where] = col
        objects = sub.objects
    return ElementBatch._trusted(columns, objects)


def batches_from_rows(
    chunks: Iterable[list[Any]], trace_id: int, size: int = 65536
) -> Iterator[ElementBatch]:
    """Batches of at most ``size`` rows of the element rows ``chunks``, in order.

    ``chunks`` are lists of element rows (:mod:`cstrace.rows`: element objects,
    and an ``INSTR_RANGE`` of a block walk as its offset and ``RangeArgs``), as
    a decoder's ``iter_rows`` gives them; the range rows go to the columns
    without an element object (a compiled loop, :func:`~cstrace.rows.fill_ranges`).
    Lazy: memory stays flat whatever the stream's length.
    """
    if size < 1:
        raise ValueError(f"batch size must be positive, not {size}")
    acc: list[Any] = []
    for items in chunks:
        if len(items) == 1 and type(items[0]) is ElementBatch:
            # a decoder's own batch of rows (ITM): as it is
            if acc:
                yield from _split(_rows_batch(acc, trace_id), size)
                acc = []
            yield from _split(items[0], size)
            continue
        acc += items
        if len(acc) < size:
            continue
        batch = _rows_batch(acc, trace_id)
        acc = []
        yield from _split(batch, size)
    if acc:
        yield from _split(_rows_batch(acc, trace_id), size)


def _split(batch: ElementBatch, size: int) -> Iterator[ElementBatch]:
    """``batch`` in slices of at most ``size`` rows (each slice keeps the objects list)."""
    n = len(batch)
    if n <= size:
        yield batch
        return
    for at in range(0, n, size):
        cols = {name: col[at : at + size] for name, col in batch.columns.items()}
        yield ElementBatch._trusted(cols, batch.objects)
