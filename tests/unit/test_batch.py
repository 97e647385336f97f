"""Element batches (cstrace.batch): hand-made elements of every type, through the columns and back.

Every element type appears with unusual values: each integer field at the top of
its column's range (64-bit addresses and payloads, 32-bit context IDs...) or at 0,
optional fields both None and set (set to 0 as well, which is not None), enums away
from their defaults, flag combinations of ``MemSpace``, ``ExLevel.UNKNOWN`` (-1).
"""

from __future__ import annotations

import inspect
import pickle
import random
from typing import Any

import numpy as np
import pytest

import cstrace
from cstrace.batch import SCHEMA, SCHEMA_VERSION, BatchBuilder, ElementBatch, iter_batches
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
from tests.conftest import ROOT

U64 = 2**64 - 1
U32 = 2**32 - 1
I64 = 2**63 - 1
TRACE_ID = 0x7E


def sample_elements() -> list[Element]:
    """At least one element of every type, most of them twice: extremes, and defaults."""
    return [
        Unknown(I64),
        NoSync(0, UnsyncReason.BAD_PACKET),
        NoSync(1),
        TraceOn(2, TraceOnReason.EX_DEBUG, cycle_count=U64),
        TraceOn(3, TraceOnReason.OVERFLOW),
        TraceOn(4, cycle_count=0),
        EoTrace(5, UnsyncReason.OVERFLOW),
        PEContext(
            6,
            PEContextInfo(SecLevel.REALM, ExLevel.EL3, U32, U32, True, True, True, True),
            Isa.A64,
            12345,
        ),
        PEContext(7, PEContextInfo(), Isa.UNKNOWN),  # ExLevel.UNKNOWN is -1
        PEContext(8, PEContextInfo(SecLevel.NONSECURE, ExLevel.EL0, 0, 7), Isa.T32, 0),
        InstrRange(
            9,
            U64 - 3,
            U64,
            U32,
            Isa.T32,
            True,
            255,
            InstrType.BR_INDIRECT,
            InstrSubtype.V8_ERET,
            True,
            U64,
        ),
        InstrRange(10, 0, 0, 0, Isa.A32, False, 0, InstrType.OTHER),
        InstrRange(11, 0x400000, 0x400010, 4, Isa.A64, True, 4, InstrType.BR, cycle_count=0),
        IRangeNoPath(12, U64, 0x8000_0000_0000_0000, U32, Isa.JAZELLE),
        IRangeNoPath(13, 0, 0, 0, Isa.TEE),
        AddrNacc(14, U64, MemSpace.EL1S | MemSpace.EL2R, U64),
        AddrNacc(15, 0),
        AddrNacc(16, 0xFFFFFFC000080400, MemSpace.ANY, 0),
        AddrUnknown(17),
        AddrUnknown(18, U64),
        Exception_(19, U32, U64, True, True, True, U64),
        Exception_(20, 0),
        Exception_(21, 0x1FF, return_address=0, cycle_count=0),
        ExceptionRet(22),
        Timestamp(23, U64, U64),
        Timestamp(24, 0),
        CycleCount(25, U64),
        CycleCount(26, 0),
        Event(27, EventType.NUMBERED, U32),
        Event(28, EventType.TRIGGER),
        SWTrace(29, 0xFFFF, 0xFFFF, False, 64, U64, True, True, U64, True, True, True),
        SWTrace(30),
        SWTrace(31, 0x40, 1, payload_bits=8, payload=0x41, timestamp=0),
        SyncMarker(32, SyncMarkerType.TS, U64),
        SyncMarker(33, SyncMarkerType.TS, 0),
        MemTrans(34, MemTransType.FAIL),
        MemTrans(35, MemTransType.TRACE_INIT),
        Instrumentation(36, 0xFF, U64),
        Instrumentation(37, 0, 0),
        ITMTrace(38, ITMPacketType.TS_GLOBAL, 0xFF, 0xFF, U64, True, U64, True),
        ITMTrace(39, ITMPacketType.SWIT),
        ITMTrace(40, ITMPacketType.DWT, 3, 4, 0, timestamp=0),
        Custom(41, {"pc": "0x8000", "address": "0x1000", "data": "0xff"}),
        Custom(42),
        Custom(43, ["any", "object", 1]),
        Custom(44, 0),  # not None: kept in objects
        Diagnostic(
            45, 0x7F, DiagCode.RET_STACK_OVERFLOW, DiagKind.DATA_TRACE, U64, Severity.WARNING
        ),
        Diagnostic(46, TRACE_ID, DiagCode.NOT_INIT, DiagKind.NO_CONFIG),
        NoSync(0, UnsyncReason.RESET_DECODER),  # offsets need not increase
    ]


def field_values(elem: object) -> dict[str, Any]:
    """Every slot of an element (or PEContextInfo), from all its classes."""
    out: dict[str, Any] = {}
    for klass in type(elem).__mro__:
        for name in getattr(klass, "__slots__", ()):
            out[name] = getattr(elem, name)
    return out


def assert_identical(got: list[Element], want: list[Element]) -> None:
    """Equal elements, and every field of the same class (enums, bool, int, None)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert type(g) is type(w), (g, w)
        assert g == w, (g, w)
        gf, wf = field_values(g), field_values(w)
        for name, value in wf.items():
            assert type(gf[name]) is type(value), (name, g, w)
            if isinstance(value, PEContextInfo):
                for sub, v in field_values(value).items():
                    assert type(getattr(gf[name], sub)) is type(v), (name, sub, g, w)


def builder_args(method: Any, elem: Element) -> list[Any]:
    """The arguments of a BatchBuilder method for ``elem``, by parameter name."""
    args = []
    for name in inspect.signature(method).parameters:
        if name == "data":
            args.append(elem.data)  # type: ignore[attr-defined]
        elif hasattr(elem, name):
            args.append(getattr(elem, name))
        else:  # PE_CONTEXT: the fields of its PEContextInfo
            args.append(getattr(elem.context, name))  # type: ignore[attr-defined]
    return args


# --- the schema ------------------------------------------------------------------------------


def test_samples_cover_every_element_type() -> None:
    assert {e.TYPE for e in sample_elements()} == set(ElemType)


def test_schema_is_one_table() -> None:
    names = [s.name for s in SCHEMA]
    assert len(names) == len(set(names))
    assert names[:3] == ["type", "offset", "trace_id"]
    for spec in SCHEMA:
        assert spec.doc
        if spec.valid is not None:
            valid = next(s for s in SCHEMA if s.name == spec.valid)
            assert valid.dtype == np.bool_ and valid.validity_of == spec.name
    # every field of every element class has its column (PEContextInfo fields flattened)
    fields = {f for e in sample_elements() for f in field_values(e)}
    fields |= set(field_values(PEContextInfo()))
    fields -= {"context", "data"}  # flattened; data goes to `objects` (the `obj` column)
    assert fields <= set(names)
    assert SCHEMA_VERSION == 1


def test_the_docs_table_is_the_schema() -> None:
    """docs/api.md lists every column, in order, as SCHEMA says (regenerate it from here)."""
    want = ["| column | dtype | holds |", "|---|---|---|"]
    want += [f"| `{s.name}` | {s.dtype} | {s.doc} |" for s in SCHEMA]
    lines = (ROOT / "docs" / "api.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(want[0])
    got = lines[start : start + len(want) + 1]
    assert got == [*want, ""], "docs/api.md, the table of batch columns, should be:\n" + "\n".join(
        want
    )


def test_builder_methods_take_the_element_fields_in_order() -> None:
    """One method per type, named after it, with the constructor's parameters and defaults."""
    builder = BatchBuilder()
    for elem_type in ElemType:
        cls = type(next(e for e in sample_elements() if elem_type == e.TYPE))
        method = getattr(builder, elem_type.name.lower())
        params = list(inspect.signature(method).parameters.values())
        init = list(inspect.signature(cls.__init__).parameters.values())[1:]
        if cls is PEContext:
            info = list(inspect.signature(PEContextInfo.__init__).parameters.values())[1:]
            init = [init[0], *info, *init[2:]]
        assert [p.name for p in params] == [p.name for p in init], cls
        assert [p.default for p in params] == [p.default for p in init], cls


# --- round trips -----------------------------------------------------------------------------


def test_objects_to_batch_to_objects_is_the_identity() -> None:
    elems = sample_elements()
    batch = ElementBatch.from_elements(elems, TRACE_ID)
    assert len(batch) == len(elems)
    assert_identical(batch.to_elements(), elems)
    assert_identical(list(batch), elems)


def test_any_order_of_types_round_trips() -> None:
    elems = sample_elements() * 3
    random.Random(1).shuffle(elems)
    assert_identical(ElementBatch.from_elements(elems, TRACE_ID).to_elements(), elems)


def test_batches_of_one_type_round_trip() -> None:
    for elem in sample_elements():
        elems = [elem, elem, elem]
        assert_identical(ElementBatch.from_elements(elems, 0).to_elements(), elems)


def test_batch_to_objects_to_batch_gives_equal_columns() -> None:
    batch = ElementBatch.from_elements(sample_elements(), TRACE_ID)
    again = ElementBatch.from_elements(batch.to_elements(), TRACE_ID)
    assert again.equals(batch)
    for spec in SCHEMA:
        assert again[spec.name].dtype == spec.dtype
        np.testing.assert_array_equal(again[spec.name], batch[spec.name], err_msg=spec.name)
    assert again.objects == batch.objects


def test_builder_methods_give_the_batch_of_from_elements() -> None:
    elems = sample_elements()
    builder = BatchBuilder(TRACE_ID)
    for elem in elems:
        method = getattr(builder, elem.TYPE.name.lower())
        method(*builder_args(method, elem))
    assert len(builder) == len(elems)
    built = builder.flush()
    assert built.equals(ElementBatch.from_elements(elems, TRACE_ID))
    assert len(builder) == 0
    assert len(builder.flush()) == 0  # flush starts a new batch
    builder.append(elems[0])
    assert_identical(builder.build().to_elements(), elems[:1])


def test_builder_keeps_plain_numbers_and_gives_enums_back() -> None:
    builder = BatchBuilder(1)
    builder.instr_range(5, 0x1000, 0x1008, 2, 2, 1, 4, 1, 2, 0, None)
    builder.addr_nacc(6, 0x2000, 0x05)
    builder.pe_context(7, 1, 2, isa=2)
    elems = builder.flush().to_elements()
    assert elems == [
        InstrRange(5, 0x1000, 0x1008, 2, Isa.A64, True, 4, InstrType.BR, InstrSubtype.V8_RET),
        AddrNacc(6, 0x2000, MemSpace.EL1S | MemSpace.EL2),
        PEContext(7, PEContextInfo(SecLevel.NONSECURE, ExLevel.EL2), Isa.A64),
    ]
    ir, nacc, ctx = elems
    assert type(ir.isa) is Isa and type(ir.last_type) is InstrType  # type: ignore[attr-defined]
    assert type(ir.last_exec) is bool  # type: ignore[attr-defined]
    assert type(nacc.mem_space) is MemSpace  # type: ignore[attr-defined]
    assert type(ctx.context.exception_level) is ExLevel  # type: ignore[attr-defined]


def test_numbers_outside_an_enum_come_back_as_numbers() -> None:
    odd = InstrRange(1, 2, 3, 4, 77, False, 4, 99)  # type: ignore[arg-type]
    usual = InstrRange(5, 6, 7, 8, Isa.A64, False, 4, InstrType.BR)
    diag = Diagnostic(9, 1, 0xFFFF, DiagKind.BAD_PACKET)  # type: ignore[arg-type]
    elems = [odd, usual, diag]
    back = ElementBatch.from_elements(elems, 0).to_elements()
    assert back == elems
    assert type(back[0].isa) is int and type(back[0].last_type) is int  # type: ignore[attr-defined]
    assert type(back[1].isa) is Isa and type(back[1].last_type) is InstrType  # type: ignore[attr-defined]
    assert type(back[2].code) is int and type(back[2].kind) is DiagKind  # type: ignore[attr-defined]


EXAMPLES = [
    "etm_demo",
    "stm_demo",
    *(f"classic/{p.name}" for p in (ROOT / "examples" / "classic").iterdir() if p.is_dir()),
]


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_the_shipped_examples_round_trip(example: str) -> None:
    """Real decoder output (ETMv1 data trace is CUSTOM elements with dicts) through batches."""
    pairs = list(cstrace.iter_elements(ROOT / "examples" / example))
    assert pairs
    for trace_id in {t for t, _ in pairs}:
        elems = [e for t, e in pairs if t == trace_id]
        batch = ElementBatch.from_elements(elems, trace_id)
        assert_identical(batch.to_elements(), elems)
        assert ElementBatch.from_elements(batch.to_elements(), trace_id).equals(batch)


# --- the columns -----------------------------------------------------------------------------


def test_columns_follow_the_contract() -> None:
    elems = sample_elements()
    batch = ElementBatch.from_elements(elems, TRACE_ID)
    cols = batch.columns
    assert list(cols) == [s.name for s in SCHEMA]
    for spec in SCHEMA:
        assert cols[spec.name].dtype == spec.dtype and len(cols[spec.name]) == len(elems)
    assert cols["type"].tolist() == [e.TYPE for e in elems]
    assert cols["offset"].tolist() == [e.offset for e in elems]
    # every row carries the batch's trace ID, except diagnostics, which carry their own
    assert cols["trace_id"].tolist() == [
        e.trace_id if isinstance(e, Diagnostic) else TRACE_ID for e in elems
    ]
    rows = {i: e for i, e in enumerate(elems)}
    ir = next(i for i, e in rows.items() if isinstance(e, InstrRange))
    assert cols["start"][ir] == U64 - 3 and cols["end"][ir] == U64
    assert cols["num_instr"][ir] == U32 and cols["last_size"][ir] == 255
    assert cols["cycle_count"][ir] == U64 and cols["cycle_count_valid"][ir]
    # optional fields: None is a False validity and a 0 value; 0 is valid
    for i, e in rows.items():
        cc = getattr(e, "cycle_count", None)
        assert cols["cycle_count_valid"][i] == (cc is not None), e
        assert cols["cycle_count"][i] == (cc or 0), e
        ts = getattr(e, "timestamp", None)
        assert cols["timestamp_valid"][i] == (ts is not None), e
        assert cols["timestamp"][i] == (ts or 0), e
        ret = getattr(e, "return_address", None)
        assert cols["return_address_valid"][i] == (ret is not None), e
    # fields a row's type does not have hold 0 (obj: -1)
    for i, e in rows.items():
        own = set(field_values(e)) | ({"obj"} if isinstance(e, Custom) else set())
        if isinstance(e, PEContext):
            own |= set(field_values(e.context))
        for spec in SCHEMA[3:]:
            name = spec.validity_of or spec.name
            if name not in own:
                assert cols[spec.name][i] == (-1 if name == "obj" else 0), (spec.name, e)
    # Custom data: in objects, by index; None is -1
    customs = [(i, e) for i, e in rows.items() if isinstance(e, Custom)]
    assert [batch.objects[cols["obj"][i]] for i, e in customs if e.data is not None] == [
        e.data for _, e in customs if e.data is not None
    ]
    assert [cols["obj"][i] for i, e in customs if e.data is None] == [-1]


def test_columns_are_read_only() -> None:
    batch = ElementBatch.from_elements(sample_elements(), 0)
    with pytest.raises(ValueError, match="read-only"):
        batch["start"][0] = 1
    with pytest.raises(TypeError):
        batch.columns["start"] = np.zeros(len(batch), np.uint64)  # type: ignore[index]


def test_batches_pickle() -> None:
    batch = ElementBatch.from_elements(sample_elements(), TRACE_ID)
    again = pickle.loads(pickle.dumps(batch))
    assert again.equals(batch)
    assert not again["start"].flags.writeable
    assert_identical(again.to_elements(), sample_elements())


def test_to_numpy_is_one_record_per_row() -> None:
    batch = ElementBatch.from_elements(sample_elements(), TRACE_ID)
    records = batch.to_numpy()
    assert records.dtype.names == tuple(s.name for s in SCHEMA)
    assert len(records) == len(batch)
    for spec in SCHEMA:
        np.testing.assert_array_equal(records[spec.name], batch[spec.name])
        assert records.dtype[spec.name] == spec.dtype


def test_constructor_checks_names_dtypes_and_lengths() -> None:
    batch = ElementBatch.from_elements(sample_elements(), 0)
    cols = dict(batch.columns)
    assert ElementBatch(cols, batch.objects).equals(batch)
    with pytest.raises(ValueError, match="missing \\['vmid'\\]"):
        ElementBatch({k: v for k, v in cols.items() if k != "vmid"})
    with pytest.raises(ValueError, match="unknown \\['extra'\\]"):
        ElementBatch({**cols, "extra": cols["vmid"]})
    with pytest.raises(ValueError, match="'start'"):
        ElementBatch({**cols, "start": cols["start"].astype(np.int64)})
    with pytest.raises(ValueError, match="'end'"):
        ElementBatch({**cols, "end": cols["end"][:-1]})


def test_a_row_of_no_element_type_is_refused() -> None:
    batch = ElementBatch.from_elements([Unknown(0)], 0)
    cols = dict(batch.columns)
    cols["type"] = np.array([200], np.uint8)
    with pytest.raises(ValueError, match="unknown element type 200"):
        ElementBatch(cols).to_elements()


def test_empty_batches() -> None:
    for batch in (ElementBatch.empty(), ElementBatch.from_elements([], 3), BatchBuilder().flush()):
        assert len(batch) == 0 and batch.to_elements() == [] and batch.objects == []
        assert [c.dtype for c in batch.columns.values()] == [s.dtype for s in SCHEMA]
    assert ElementBatch.concat([]).equals(ElementBatch.empty())
    assert list(iter_batches([], 0)) == []


# --- builder errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "args", "error"),
    [
        ("instr_range", (1, 2**64, 0, 1, Isa.A64, True, 4, InstrType.BR), OverflowError),
        ("instr_range", (1, 0, 0, 2**32, Isa.A64, True, 4, InstrType.BR), OverflowError),
        ("instr_range", (1, 0, 0, 1, Isa.A64, True, 4, InstrType.BR, 0, False, -1), OverflowError),
        ("pe_context", (1, 0, 0, 2**32), OverflowError),
        ("exception", (1, 0, 2**64), OverflowError),
        ("timestamp", (1, -1), OverflowError),
        ("swtrace", (1, 0x10000), OverflowError),
        ("diagnostic", (1, 0x100, DiagCode.NOT_INIT, DiagKind.NO_CONFIG), OverflowError),
        ("custom", (2**63,), OverflowError),
        ("no_sync", (1, "reason"), TypeError),
    ],
)
def test_a_value_that_does_not_fit_appends_no_row(
    method: str, args: tuple[Any, ...], error: type
) -> None:
    builder = BatchBuilder(1)
    builder.no_sync(0)
    with pytest.raises(error):
        getattr(builder, method)(*args)
    assert len(builder) == 1
    builder.eo_trace(9)
    builder.extend(sample_elements())  # rows of every type, the failed one's too
    assert_identical(builder.flush().to_elements(), [NoSync(0), EoTrace(9), *sample_elements()])


def test_trace_id_must_fit_its_column() -> None:
    with pytest.raises(ValueError, match="8 bits"):
        BatchBuilder(0x100)
    with pytest.raises(ValueError, match="8 bits"):
        ElementBatch.from_elements([], -1)


# --- concat and iter_batches -----------------------------------------------------------------


def test_concat_is_the_batch_of_all_rows() -> None:
    elems = sample_elements() * 2
    whole = ElementBatch.from_elements(elems, TRACE_ID)
    for size in (1, 5, 17, len(elems)):
        parts = list(iter_batches(elems, TRACE_ID, size))
        assert [len(p) for p in parts[:-1]] == [size] * (len(parts) - 1)
        assert 0 < len(parts[-1]) <= size
        joined = ElementBatch.concat(parts)
        assert joined.equals(whole), size
        assert_identical(joined.to_elements(), elems)
    # Custom data indices are rebased onto the joined objects
    a = ElementBatch.from_elements([Custom(1, "a"), Custom(2), Custom(3, "b")], 1)
    b = ElementBatch.from_elements([Custom(4, "c"), NoSync(5)], 2)
    joined = ElementBatch.concat([a, b])
    assert joined.objects == ["a", "b", "c"]
    assert joined["obj"].tolist() == [0, -1, 1, 2, -1]
    assert joined["trace_id"].tolist() == [1, 1, 1, 2, 2]
    assert joined.to_elements() == [
        Custom(1, "a"),
        Custom(2),
        Custom(3, "b"),
        Custom(4, "c"),
        NoSync(5),
    ]


def test_iter_batches_is_lazy() -> None:
    def endless() -> Any:
        offset = 0
        while True:
            yield CycleCount(offset, offset)
            offset += 1

    batches = iter_batches(endless(), 1, size=4)
    first, second = next(batches), next(batches)
    assert first["cycle_count"].tolist() == [0, 1, 2, 3]
    assert second["offset"].tolist() == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="positive"):
        next(iter_batches([], 1, size=0))


# --- Arrow -----------------------------------------------------------------------------------


def _pyarrow() -> Any:
    return pytest.importorskip(
        "pyarrow", reason="pyarrow is not installed (pip install 'cstrace[arrow]')"
    )


def test_to_arrow_types_nulls_and_metadata() -> None:
    pa = _pyarrow()
    elems = sample_elements()
    batch = ElementBatch.from_elements(elems, TRACE_ID)
    table = batch.to_arrow()
    assert table.num_rows == len(elems)
    want = [s.name for s in SCHEMA if s.validity_of is None]
    assert table.column_names == want
    for gone in ("cycle_count_valid", "timestamp_valid", "return_address_valid"):
        assert gone not in table.column_names
    types = {f.name: f.type for f in table.schema}
    assert types["start"] == pa.uint64() and types["offset"] == pa.int64()
    assert types["exception_level"] == pa.int8() and types["context_id"] == pa.uint32()
    assert types["last_exec"] == pa.bool_() and types["obj"] == pa.int32()
    assert types["type"] == pa.uint8() and types["channel"] == pa.uint16()
    # validity masks are nulls (so rows of types without the field are null too)
    for name in ("cycle_count", "timestamp", "return_address"):
        assert table.column(name).to_pylist() == [getattr(e, name, None) for e in elems], name
        assert table.schema.field(name).nullable
    # obj: null for no object
    assert table.column("obj").to_pylist() == [
        (batch["obj"][i] if isinstance(e, Custom) and e.data is not None else None)
        for i, e in enumerate(elems)
    ]
    assert not table.schema.field("start").nullable
    assert table.column("start").null_count == 0
    assert table.column("start").to_pylist() == batch["start"].tolist()
    assert table.column("exception_level").to_pylist() == batch["exception_level"].tolist()
    meta = table.schema.metadata
    assert meta[b"cstrace.schema_version"] == b"1"
    assert b'"5": "INSTR_RANGE"' in meta[b"cstrace.elem_types"]
    assert table.schema.field("isa").metadata[b"doc"].startswith(b"PE_CONTEXT")


def test_to_arrow_hands_integer_columns_over_without_copying() -> None:
    _pyarrow()
    batch = ElementBatch.from_elements(sample_elements() * 10, TRACE_ID)
    table = batch.to_arrow()
    for name in ("offset", "start", "num_instr", "cycle_count", "timestamp", "exception_level"):
        (chunk,) = table.column(name).chunks
        assert chunk.buffers()[1].address == batch[name].ctypes.data, name
    (chunk,) = table.column("last_exec").chunks  # booleans are bit-packed: a copy
    assert chunk.buffers()[1].address != batch["last_exec"].ctypes.data


def test_to_arrow_of_an_empty_batch() -> None:
    _pyarrow()
    table = ElementBatch.empty().to_arrow()
    assert table.num_rows == 0
    assert table.num_columns == len([s for s in SCHEMA if s.validity_of is None])
