"""Element rows: what the program-flow decoders output before there are element objects.

Input: the output list of a decoder (its ``decode(packet)``), in which every
generic element is either an element object (:mod:`cstrace.elements`) or, for
the ``INSTR_RANGE`` elements of a block walk, two items: the element's offset
(an ``int``) and the walked block's :data:`~cstrace.isa.blocks.RangeArgs`
tuple (``Block.range_e`` or ``Block.range_n``, shared by every walk of that
block). Output: the element objects (:func:`expand`), the number of elements
and the other objects (:func:`scan`), or NumPy columns (:func:`fill_ranges`,
which :func:`cstrace.batch.batches_from_rows` uses).

Why: most of a program-flow trace is ``INSTR_RANGE`` elements, one per atom.
Building an :class:`~cstrace.elements.InstrRange` object costs more than
finding its block; the two items cost two list appends of objects that
already exist. A consumer that wants objects gets them from :func:`expand`;
one that wants columns (``--format null``, ``parquet``, the viewer's store)
never makes them. This module is compiled with the decoders
(``cstrace._native.HOT_MODULES``; ``rows.pxd`` types it).
"""

from __future__ import annotations

from typing import Any

from cstrace.elements import Element, InstrRange

__all__ = ["expand", "fill_ranges", "scan"]


def expand(items: list[Any]) -> list[Element]:
    """The element objects of a decoder's output list, in order."""
    out: list[Element] = []
    append = out.append
    n = len(items)
    i = 0
    while i < n:
        x = items[i]
        if type(x) is int:
            append(InstrRange(x, *items[i + 1]))
            i += 2
        else:
            append(x)
            i += 1
    return out


def scan(items: list[Any], objects: list[Any]) -> int:
    """The number of elements in ``items``; appends the element objects among them to ``objects``.

    (The ``INSTR_RANGE`` rows given as items are counted, not listed.)
    """
    n = len(items)
    rows = 0
    i = 0
    while i < n:
        x = items[i]
        if type(x) is int:
            i += 2
        else:
            objects.append(x)
            i += 1
        rows += 1
    return rows


def fill_ranges(
    items: list[Any],
    types: Any,
    offset: Any,
    start: Any,
    end: Any,
    num_instr: Any,
    isa: Any,
    last_exec: Any,
    last_size: Any,
    last_type: Any,
    last_subtype: Any,
    last_cond: Any,
    cycle_count: Any,
    cycle_count_valid: Any,
    obj_rows: list[int],
    objects: list[Any],
) -> int:
    """Write the ``INSTR_RANGE`` elements of ``items`` into columns; return the rows written.

    The columns (one-dimensional arrays with room for ``len(items)`` rows; the
    boolean ones as ``uint8``) get one row per element, in order: the range
    rows are written here (type 5, ``INSTR_RANGE``), whether given as two items
    or as an :class:`~cstrace.elements.InstrRange` object; any other element
    object only takes its row, whose number goes to ``obj_rows`` and the object
    to ``objects``, for the caller to fill.
    """
    n = len(items)
    row = 0
    i = 0
    while i < n:
        x = items[i]
        if type(x) is int:
            t = items[i + 1]
            types[row] = 5
            offset[row] = x
            start[row] = t[0]
            end[row] = t[1]
            num_instr[row] = t[2]
            isa[row] = t[3]
            last_exec[row] = t[4]
            last_size[row] = t[5]
            last_type[row] = t[6]
            last_subtype[row] = t[7]
            last_cond[row] = t[8]
            i += 2
        elif type(x) is InstrRange:
            types[row] = 5
            offset[row] = x.offset
            start[row] = x.start
            end[row] = x.end
            num_instr[row] = x.num_instr
            isa[row] = x.isa
            last_exec[row] = x.last_exec
            last_size[row] = x.last_size
            last_type[row] = x.last_type
            last_subtype[row] = x.last_subtype
            last_cond[row] = x.last_cond
            cc = x.cycle_count
            if cc is not None:
                cycle_count[row] = cc
                cycle_count_valid[row] = 1
            i += 1
        else:
            obj_rows.append(row)
            objects.append(x)
            i += 1
        row += 1
    return row
