"""``cstrace decode --format parquet / null`` and the progress bar.

Parquet is judged by DuckDB, reading the file back: its rows against the
element stream of the Python API (count per trace ID and element type, the
instruction ranges' addresses), its column types, and the same file from a
parallel decode. The progress bar: nothing on stderr when it is not a
terminal, a bar when it is.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

import cstrace
from cstrace.cli import main
from cstrace.elements import InstrRange

duckdb = pytest.importorskip("duckdb", reason="duckdb reads the Parquet file back")
pytest.importorskip("pyarrow", reason="--format parquet needs pyarrow")


def decode_parquet(snapshot: Path, out: Path, *extra: str) -> None:
    assert main(["decode", str(snapshot), "--format", "parquet", "-o", str(out), *extra]) == 0


@pytest.mark.parametrize("name", ["TC2", "stm_only", "itm_only_csformat"])
def test_parquet_rows_are_the_elements(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    snapshot = corpus / "snapshots" / name
    out = tmp_path / "elements.parquet"
    decode_parquet(snapshot, out, "--jobs", "1")
    assert capsys.readouterr().out == ""

    stream = list(cstrace.iter_elements(snapshot))
    want = Counter((tid, int(e.TYPE)) for tid, e in stream)
    con = duckdb.connect()
    got_rows = con.execute(
        f"SELECT trace_id, type, count(*) FROM '{out}' WHERE type != 20 GROUP BY ALL"
    ).fetchall()
    got = Counter({(tid, t): n for tid, t, n in got_rows})
    # Diagnostics carry their own trace ID in the file; the rest is the source's.
    want_plain = Counter({k: n for k, n in want.items() if k[1] != 20})
    assert got == want_plain
    total = con.execute(f"SELECT count(*) FROM '{out}'").fetchone()
    assert total is not None and total[0] == len(stream)

    ranges = [(e.start, e.end, e.num_instr) for _, e in stream if isinstance(e, InstrRange)]
    rows = con.execute(
        f"SELECT start, \"end\", num_instr FROM read_parquet('{out}', file_row_number=true) "
        "WHERE type = 5 ORDER BY file_row_number"
    ).fetchall()
    assert [tuple(r) for r in rows] == ranges


def test_parquet_types_and_jobs(corpus: Path, tmp_path: Path) -> None:
    snapshot = corpus / "snapshots" / "TC2"
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    decode_parquet(snapshot, one, "--jobs", "1")
    decode_parquet(snapshot, two, "--jobs", "2")
    con = duckdb.connect()
    types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE '{one}')").fetchall())
    assert types["offset"] == "BIGINT"
    assert types["start"] == "UBIGINT"
    assert types["trace_id"] == "UTINYINT"
    assert types["cycle_count"] == "UBIGINT"
    assert types["buffer"] == "VARCHAR"
    assert "cycle_count_valid" not in types  # optional fields are nulls instead
    # The parallel decode writes the same rows in the same order.
    diff = con.execute(
        f"SELECT count(*) FROM (SELECT * FROM '{one}' EXCEPT ALL SELECT * FROM '{two}')"
    ).fetchone()
    assert diff == (0,)
    order = con.execute(
        f"SELECT count(*) FROM read_parquet('{one}', file_row_number=true) a "
        f"JOIN read_parquet('{two}', file_row_number=true) b USING (file_row_number) "
        "WHERE a.offset != b.offset OR a.type != b.type OR a.trace_id != b.trace_id"
    ).fetchone()
    assert order == (0,)
    buffers = con.execute(f"SELECT DISTINCT buffer FROM '{one}'").fetchall()
    assert buffers == [("ETB_0",)]


def test_parquet_needs_a_file(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", str(corpus / "snapshots" / "TC2"), "--format", "parquet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-o FILE" in err


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    import cstrace.cli as cli

    snapshot = str(corpus / "snapshots" / "TC2")
    argv = ["decode", snapshot, "--format", "null", "--jobs", "1"]

    # Not a terminal: stderr holds the summary and nothing else.
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    assert main(argv) == 0
    assert plain.getvalue().startswith("summary:\n")
    assert "decoding" not in plain.getvalue() and "\x1b" not in plain.getvalue()

    # A terminal, and a decode "slower than the delay" (no delay here): a bar is drawn.
    real = cli._Progress.__init__

    def no_delay(self: object, err: object, sizes: object, delay: float = 1.0) -> None:
        real(self, err, sizes, 0.0)  # type: ignore[arg-type]

    monkeypatch.setattr(cli._Progress, "__init__", no_delay)
    for jobs in ("1", "2"):
        tty = _Terminal()
        monkeypatch.setattr(sys, "stderr", tty)
        assert main([*argv[:-1], jobs]) == 0
        text = tty.getvalue()
        assert "decoding" in text
        # The summary still follows, whole.
        assert text[text.index("summary:") :] == plain.getvalue()


def test_several_inputs_one_output_each(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Several inputs: -o is a folder with one output per input, each the single decode's."""
    snaps = [corpus / "snapshots" / n for n in ("TC2", "stm_only")]
    assert main(["decode", *map(str, snaps), "-f", "jsonl", "--no-summary"]) == 2
    assert "give an output folder with -o" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["decode", *map(str, snaps), "-f", "jsonl", "-o", str(out)]) == 0
    both = capsys.readouterr().err
    for snap in snaps:
        one = tmp_path / f"{snap.name}.one"
        assert main(["decode", str(snap), "-f", "jsonl", "-o", str(one)]) == 0
        alone = capsys.readouterr().err
        assert (out / f"{snap.name}.jsonl").read_text() == one.read_text()
        assert alone in both
    same = [str(snaps[0]), str(snaps[0])]
    assert main(["decode", *same, "-o", str(out)]) == 2
    assert "two inputs would both write" in capsys.readouterr().err
