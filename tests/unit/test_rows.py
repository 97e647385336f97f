"""Element rows (cstrace.rows) and the counting pass-through (cstrace.tally)."""

from __future__ import annotations

import numpy as np
import pytest

from cstrace.batch import ElementBatch, batches_from_rows
from cstrace.elements import (
    EoTrace,
    InstrRange,
    InstrSubtype,
    InstrType,
    Isa,
    NoSync,
    Timestamp,
    UnsyncReason,
)
from cstrace.rows import expand, fill_ranges, scan
from cstrace.tally import counted

RANGE_E = (0x1000, 0x1010, 4, Isa.A64, True, 4, InstrType.BR, InstrSubtype.NONE, False)
RANGE_N = (0x2000, 0x2008, 2, Isa.T32, False, 2, InstrType.BR_INDIRECT, InstrSubtype.V8_RET, True)


def _items() -> list[object]:
    return [
        NoSync(3, UnsyncReason.INIT_DECODER),
        10,
        RANGE_E,
        11,
        RANGE_N,
        Timestamp(12, 0x1234),
        13,
        RANGE_E,
        EoTrace(14),
    ]


def test_expand_makes_the_objects_in_order() -> None:
    got = expand(_items())
    assert got == [
        NoSync(3, UnsyncReason.INIT_DECODER),
        InstrRange(10, *RANGE_E),
        InstrRange(11, *RANGE_N),
        Timestamp(12, 0x1234),
        InstrRange(13, *RANGE_E),
        EoTrace(14),
    ]
    assert type(got[2].isa) is Isa and type(got[2].last_type) is InstrType


def test_scan_counts_rows_and_lists_objects() -> None:
    objects: list[object] = []
    assert scan(_items(), objects) == 6
    assert [type(o).__name__ for o in objects] == ["NoSync", "Timestamp", "EoTrace"]
    assert scan([], objects) == 0


def test_fill_ranges_writes_range_rows_and_leaves_object_rows() -> None:
    items = _items()
    n = len(items)
    cols = {
        "types": np.zeros(n, np.uint8),
        "offset": np.zeros(n, np.int64),
        "start": np.zeros(n, np.uint64),
        "end": np.zeros(n, np.uint64),
        "num_instr": np.zeros(n, np.uint32),
        "isa": np.zeros(n, np.uint8),
        "last_exec": np.zeros(n, np.uint8),
        "last_size": np.zeros(n, np.uint8),
        "last_type": np.zeros(n, np.uint8),
        "last_subtype": np.zeros(n, np.uint8),
        "last_cond": np.zeros(n, np.uint8),
        "cycle_count": np.zeros(n, np.uint64),
        "cycle_count_valid": np.zeros(n, np.uint8),
    }
    rows: list[int] = []
    objs: list[object] = []
    assert fill_ranges(items, *cols.values(), rows, objs) == 6
    assert rows == [0, 3, 5]
    assert objs == [items[0], items[5], items[8]]
    assert cols["types"][:6].tolist() == [0, 5, 5, 0, 5, 0]
    assert cols["offset"][:6].tolist() == [0, 10, 11, 0, 13, 0]
    assert cols["end"][2] == 0x2008 and cols["num_instr"][2] == 2
    assert cols["isa"][1] == Isa.A64 and cols["isa"][2] == Isa.T32
    assert cols["last_exec"][:3].tolist() == [0, 1, 0]
    assert cols["last_subtype"][2] == InstrSubtype.V8_RET and cols["last_cond"][2] == 1
    assert not cols["cycle_count_valid"].any()


def test_fill_ranges_takes_range_objects_with_cycle_counts() -> None:
    items: list[object] = [InstrRange(7, *RANGE_N, 99), 8, RANGE_E, InstrRange(9, *RANGE_E)]
    n = len(items)
    cols = [np.zeros(n, t) for t in ("u1", "i8", "u8", "u8", "u4", *["u1"] * 6, "u8", "u1")]
    rows: list[int] = []
    assert fill_ranges(items, *cols, rows, []) == 3
    assert rows == []
    types, offset, start = cols[0], cols[1], cols[2]
    cycle_count, valid = cols[11], cols[12]
    assert types[:3].tolist() == [5, 5, 5] and offset[:3].tolist() == [7, 8, 9]
    assert start[:3].tolist() == [0x2000, 0x1000, 0x1000]
    assert cycle_count[:3].tolist() == [99, 0, 0] and valid[:3].tolist() == [1, 0, 0]


@pytest.mark.parametrize("size", [1, 2, 5, 100])
def test_batches_from_rows_equal_batches_from_objects(size: int) -> None:
    items = _items()
    got = list(batches_from_rows([items[:3], items[3:]], 0x12, size))
    assert all(len(b) <= size for b in got)
    want = ElementBatch.from_elements(expand(items), 0x12)
    assert ElementBatch.concat(got).equals(want)
    assert ElementBatch.concat(got).to_elements() == expand(items)


def test_batches_from_rows_with_range_objects_equal_batches_from_objects() -> None:
    elems = [*expand(_items()), InstrRange(20, *RANGE_N, 1234)]
    got = list(batches_from_rows([elems[:4], elems[4:]], 0x10, 3))
    assert ElementBatch.concat(got).equals(ElementBatch.from_elements(elems, 0x10))


def test_batches_from_rows_refuses_a_size_below_one() -> None:
    with pytest.raises(ValueError, match="positive"):
        list(batches_from_rows([_items()], 0, 0))


def test_counted_passes_counts_and_hands_on() -> None:
    seen: list[object] = []
    totals = [0, 0]
    source = [1, "a", 2.5, "b"]
    got = list(counted(source, {str: seen.append}, totals))
    assert got == source
    assert seen == ["a", "b"]
    assert totals == [4, 1]


def test_counted_counts_what_passed_when_stopped_early() -> None:
    totals = [0, 0]
    it = counted(iter(range(10)), {}, totals)
    assert [next(it), next(it), next(it)] == [0, 1, 2]
    it.close()
    assert totals == [3, 0]
