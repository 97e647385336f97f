"""``cstrace query``: DuckDB over the tables of a decode, checked against the emulator.

The program of :mod:`tests.profiles.program` (``work`` calls ``f1`` five times
and ``f2`` five times) is built, run in an emulator and traced; a GROUP BY
over the ``functions`` and ``instructions`` tables must give the calls and the
instructions the emulator executed in each function, and the instruction
addresses must be the emulator's, in number. The examples give the
``messages`` and ``elements`` tables.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from cstrace.cli import main
from tests.conftest import ROOT
from tests.profiles import program as prog

pytest.importorskip("duckdb", reason="cstrace query needs duckdb (pip install duckdb)")
pytest.importorskip("pyarrow", reason="cstrace query needs pyarrow (pip install pyarrow)")

needs_program = pytest.mark.skipif(
    prog.compiler() is None,
    reason=f"{prog.CC} not installed (Debian: gcc-aarch64-linux-gnu); the test program "
    "cannot be built",
)


def query(*args: str, status: int = 0) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(["query", *args]) == status, err.getvalue()
    assert "Traceback" not in err.getvalue()
    return out.getvalue(), err.getvalue()


def rows(*args: str) -> list[dict[str, object]]:
    out, _ = query(*args, "--format", "json")
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> prog.Program:
    pytest.importorskip("unicorn")
    return prog.build(tmp_path_factory.mktemp("prog"))


def program_args(built: prog.Program) -> list[str]:
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    return [
        str(built.capture), f"--image={built.path}@{prog.BASE:#x}", "--protocol=0x10=ETM4.0",
        "--core=0x10=Cortex-A53", *regs,
    ]  # fmt: skip


def emulated(built: prog.Program, count: int) -> dict[str, int]:
    """Instructions the emulator executed per function, in its first ``count``."""
    bounds = sorted((prog.BASE + a, n) for n, a in built.symbols.items())
    out: Counter[str] = Counter()
    for address in built.executed[:count]:
        name = max((b for b in bounds if b[0] <= address), default=(0, "?"))[1]
        out[name] += 1
    return dict(out)


@needs_program
def test_group_by_function_gives_the_programs_counts(built: prog.Program) -> None:
    args = program_args(built)
    per_function = rows(
        *args[:1], "SELECT function, count(*) AS n FROM instructions GROUP BY function", *args[1:]
    )
    got = {str(r["function"]): int(r["n"]) for r in per_function}  # type: ignore[call-overload]
    total = sum(got.values())
    # The trace ends where the capture stopped: a few instructions short of the emulator's.
    assert len(built.executed) - 4 <= total <= len(built.executed)
    assert got == emulated(built, total)
    calls = rows(
        *args[:1],
        "SELECT function, calls, instructions FROM functions WHERE function IN ('f1', 'f2') "
        "ORDER BY function",
        *args[1:],
    )
    assert [(r["function"], r["calls"]) for r in calls] == [("f1", 5), ("f2", 5)]
    assert [r["instructions"] for r in calls] == [got["f1"], got["f2"]]


@needs_program
def test_instruction_addresses_and_lines(built: prog.Program) -> None:
    args = program_args(built)
    addresses = rows(
        *args[:1], "SELECT address, count(*) AS n FROM instructions GROUP BY address", *args[1:]
    )
    got = Counter({int(r["address"]): int(r["n"]) for r in addresses})  # type: ignore[call-overload]
    assert got == Counter(built.executed[: sum(got.values())])
    # Every instruction of f1's loop has its source line (DWARF).
    lines = rows(
        *args[:1],
        "SELECT DISTINCT file, line FROM instructions WHERE function = 'f1' ORDER BY line",
        *args[1:],
    )
    assert lines and all(str(r["file"]).endswith("prog.c") and r["line"] for r in lines)


def test_messages_table() -> None:
    got = rows(
        str(ROOT / "examples" / "stm_demo"),
        "SELECT channel, text, value, timestamp FROM messages ORDER BY idx",
    )
    assert [r["text"] for r in got if r["text"] is not None] == ["boot ok\n"]
    assert [r["value"] for r in got if r["channel"] == 2] == [0x123, 0x130, 0x142, 0x151]
    assert [r["timestamp"] for r in got if r["channel"] == 2] == [0x1770, 0x17F0, 0x1870, 0x18F0]


def test_elements_table_formats_and_parquet(tmp_path: Path) -> None:
    sql = (
        "SELECT t.name, count(*) AS n FROM elements e JOIN element_types t USING (type) "
        "GROUP BY t.name ORDER BY t.name"
    )
    snapshot = str(ROOT / "examples" / "etm_demo")
    table, _ = query(snapshot, sql)
    lines = table.splitlines()
    assert lines[0].split() == ["name", "n"] and lines[-1].endswith("rows)")
    parsed = list(csv.reader(io.StringIO(query(snapshot, sql, "--format", "csv")[0])))
    assert parsed[0] == ["name", "n"]
    counts = {name: int(n) for name, n in parsed[1:]}
    assert counts["SWTRACE"] == 2 and counts["INSTR_RANGE"] > 10
    # The same rows from a Parquet file of them (what decode --format parquet writes).
    import pyarrow.parquet as pq

    from cstrace.analyses.query import build_tables
    from cstrace.inputs import Extras, RawOptions, open_input

    trace = open_input(snapshot, Extras([], [], None, None), RawOptions(), None)
    path = tmp_path / "elements.parquet"
    pq.write_table(build_tables(trace, ["elements"])["elements"], path)
    again = list(csv.reader(io.StringIO(query(str(path), sql, "--format", "csv")[0])))
    assert again == parsed


def test_sql_errors_are_one_line() -> None:
    _, err = query(str(ROOT / "examples" / "stm_demo"), "SELECT * FROM nowhere", status=2)
    assert err.startswith("cstrace: error: query: ") and len(err.splitlines()) == 1


def test_decode_parquet_output_is_the_elements_table(tmp_path: Path) -> None:
    snapshot = str(ROOT / "examples" / "etm_demo")
    path = tmp_path / "elements.parquet"
    err = io.StringIO()
    try:
        with redirect_stderr(err):
            status = main(["decode", snapshot, "--format", "parquet", "-o", str(path)])
    except SystemExit:
        pytest.skip("cstrace decode --format parquet is not in this build")
    assert status == 0, err.getvalue()
    sql = "SELECT trace_id, type, count(*) AS n FROM elements GROUP BY ALL ORDER BY ALL"
    assert query(str(path), sql)[0] == query(snapshot, sql)[0]
