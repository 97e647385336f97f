"""Query results as text: an aligned table, CSV or JSON Lines.

Input: a :class:`cstrace.analyses.query.QueryResult` (column names and rows
of Python values); output: lines. The table right-aligns numbers, shows NULL
for missing values and escapes control characters in strings (a software
message's line feed shows as ``\\n``); CSV and JSON Lines keep values as they
are (bytes as hex).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from cstrace.analyses.query import QueryResult

__all__ = ["csv_lines", "json_lines", "table_lines"]


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, str):
        return value.encode("unicode_escape").decode("ascii")
    return str(value)


def table_lines(result: QueryResult) -> Iterator[str]:
    """The result as a table: a header, a rule, one line per row, then the row count."""
    cells = [[_cell(v) for v in row] for row in result.rows]
    numeric = [
        all(isinstance(row[i], int | float | Decimal) or row[i] is None for row in result.rows)
        for i in range(len(result.columns))
    ]
    widths = [len(c) for c in result.columns]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))

    def line(values: list[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    yield line(list(result.columns))
    yield "  ".join("-" * w for w in widths)
    for row in cells:
        yield line(row)
    n = len(result.rows)
    yield f"({n} row{'s' if n != 1 else ''})"


def csv_lines(result: QueryResult) -> Iterator[str]:
    """The result as CSV: a header line, then one line per row (NULL as an empty field)."""
    for row in (result.columns, *result.rows):
        buf = io.StringIO()
        # A field with a line feed in it (a software message) is quoted, as CSV wants.
        csv.writer(buf, lineterminator="\n").writerow(
            ["" if v is None else v.hex() if isinstance(v, bytes) else v for v in row]
        )
        yield buf.getvalue()[:-1]


def _json(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, date | datetime | time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return value


def json_lines(result: QueryResult) -> Iterator[str]:
    """The result as JSON Lines: one object per row, keyed by column name."""
    for row in result.rows:
        obj = {c: _json(v) for c, v in zip(result.columns, row, strict=True)}
        yield json.dumps(obj, separators=(",", ":"))
