"""The viewer's store and server, without a browser: rows, searches, panes, queries.

The store's answers are checked against the decoded elements themselves
(:func:`cstrace.iter_elements`) and against a brute-force walk of the whole row
list, never against hard-coded outputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cstrace.api import iter_elements, open_trace
from cstrace.elements import Custom, InstrRange

pytest.importorskip("duckdb", reason="duckdb is not installed (pip install 'cstrace[view]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed")

from cstrace.viewer import TraceStore, make_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO = EXAMPLES / "etm_demo"


@pytest.fixture(scope="module")
def demo() -> TraceStore:
    elf = str(DEMO / "program.elf")
    return TraceStore.build(open_trace(DEMO, images=[elf]), name="etm_demo", images=[elf])


@pytest.fixture(scope="module")
def every_row(demo: TraceStore) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while len(out) < demo.total_rows:
        out.extend(demo.rows(len(out), 7)["rows"])
    return out


def test_rows_are_the_elements(demo: TraceStore, every_row: list[dict[str, Any]]) -> None:
    """One row per instruction of each range and per other element, in decode order."""
    elements = [e for _, e in iter_elements(DEMO)]
    expect: list[str | None] = []
    for e in elements:
        if isinstance(e, InstrRange):
            expect.extend(f"{e.start + 4 * k:#x}" for k in range(e.num_instr))
        else:
            expect.append(None)
    assert [r.get("addr") for r in every_row] == expect
    assert [r["row"] for r in every_row] == list(range(len(expect)))
    assert demo.total_rows == len(expect)
    # Windows of any size and place agree with each other.
    assert demo.rows(5, 11)["rows"] == every_row[5:16]
    assert demo.rows(demo.total_rows - 3, 50)["rows"] == every_row[-3:]


def test_functions_and_lines(demo: TraceStore, every_row: list[dict[str, Any]]) -> None:
    """Each instruction of the user program is named by the ELF's symbols and lines."""
    user = [r for r in every_row if r.get("addr", "") and r["addr"].startswith("0x4000")]
    assert user
    for r in user:
        assert r["func"] in ("_start", "square"), r
        assert r["file"].endswith("program.s") and r["line"] > 0
    text = (DEMO / "program.s").read_text().splitlines()
    for r in user:
        mnemonic = r["text"].split()[0]
        assert mnemonic in text[r["line"] - 1], (r, text[r["line"] - 1])


def test_next_and_previous_execution(demo: TraceStore, every_row: list[dict[str, Any]]) -> None:
    """Walking next/previous executions of an address visits exactly its rows."""
    rows_of: dict[str, list[int]] = {}
    for r in every_row:
        if r.get("addr"):
            rows_of.setdefault(r["addr"], []).append(r["row"])
    for addr, rows in rows_of.items():
        a = int(addr, 16)
        seen: list[int] = []
        at = -1
        while (got := demo.next_execution(a, at)["row"]) is not None:
            seen.append(got)
            at = got
        assert seen == rows
        back: list[int] = []
        at = demo.total_rows
        while (got := demo.next_execution(a, at, forward=False)["row"]) is not None:
            back.append(got)
            at = got
        assert back == rows[::-1]


def test_search(demo: TraceStore, every_row: list[dict[str, Any]]) -> None:
    """Search by function name, by address and by instruction text."""
    got = demo.search("square", -1)["row"]
    assert got == next(r["row"] for r in every_row if r.get("func") == "square")
    got = demo.search("0x400034", got)["row"]
    later = [r["row"] for r in every_row if r.get("addr") == "0x400034"]
    assert got == later[1]
    got = demo.search("mrs", -1)["row"]
    assert got == next(r["row"] for r in every_row if r.get("text", "").startswith("mrs"))
    assert demo.search("no such thing", -1)["row"] is None


def test_source_and_function_counts(demo: TraceStore, every_row: list[dict[str, Any]]) -> None:
    """Per-line and per-instruction counts are the number of rows that ran them."""
    ran = Counter(r["addr"] for r in every_row if r.get("addr"))
    pane = demo.function(0x400000)
    assert pane["name"] == "_start"
    for ins in pane["instrs"]:
        assert ins["count"] == ran.get(ins["addr"], 0)
    src = demo.source(0x400010)
    assert src["file"].endswith("program.s")
    per_line = Counter(r["line"] for r in every_row if r.get("addr") and r["file"] == src["file"])
    shown = {ln["n"]: ln["count"] for ln in src["lines"] if ln["count"] is not None}
    assert shown and all(shown[n] == per_line[n] for n in shown)


def test_data_last_values() -> None:
    """Classic ETM data trace: the last value written to each address up to a row."""
    snap = EXAMPLES / "classic" / "etmv1_etb"
    store = TraceStore.build(open_trace(snap))
    transfers = [e.data for _, e in iter_elements(snap) if isinstance(e, Custom)]
    pane = store.data(store.total_rows - 1)
    assert pane["total"] == len(transfers)
    writes = {w["key"]: w for w in pane["last"]}
    assert writes
    for key, w in writes.items():
        last = [t for t in transfers if f"{t.address:#x}" == key and t.data is not None]
        # The value shown is one of the values moved at that address: the last one written.
        values = ["0x" + t.data[::-1].hex() for t in last]
        assert w["value"] in values and w["writes"] <= len(last)
    # Before the first transfer nothing was written yet.
    assert store.data(0)["last"] == []


def test_timeline(demo: TraceStore) -> None:
    """Function slices cover the instruction rows, on the trace's time; exceptions are
    marked; clicking is by first row."""
    tl = demo.timeline(None, None, 1000)
    assert tl["axis"] == "time"
    lane = tl["lanes"][0]
    names = {tl["names"][str(s[2])] for s in lane["slices"]}
    assert {"_start", "square", "el0_sync"} <= names
    assert len(lane["marks"]) == 2  # the two SVCs
    rows = demo.rows(0, demo.total_rows)["rows"]
    for x0, x1, f, r0, r1 in lane["slices"]:
        assert x0 <= x1 and 0 <= r0 < r1 <= demo.total_rows
        assert rows[r0]["func"] == tl["names"][str(f)]
        assert demo.position(r0)["x"] == x0
    # Time goes forward along the rows.
    xs = [s[0] for s in lane["slices"]]
    assert xs == sorted(xs)
    # Zoomed in: only what overlaps the window, nothing narrower than a pixel is a slice.
    lo, hi = xs[1], xs[3]
    part = demo.timeline(lo, hi, 200)
    for x0, x1, *_ in part["lanes"][0]["slices"]:
        assert x1 >= lo and x0 <= hi and (x1 - x0) >= (hi - lo) / 200


@pytest.fixture
def server(demo: TraceStore) -> Iterator[str]:
    srv = make_server(demo)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.url
    srv.shutdown()
    srv.server_close()


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_server(server: str, demo: TraceStore) -> None:
    """The page and its queries; bad queries are 400s with a message, unknown paths 404s."""
    assert server.startswith("http://127.0.0.1:")
    status, headers, body = _get(server)
    assert status == 200 and b"viewer.js" in body
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    status, _, body = _get(server + "api/rows?start=3&count=4")
    assert status == 200 and json.loads(body) == json.loads(json.dumps(demo.rows(3, 4)))
    status, _, body = _get(server + "api/rows?start=x")
    assert status == 400 and "start" in json.loads(body)["error"]
    assert _get(server + "api/nothing")[0] == 404
    assert _get(server + "../../etc/passwd")[0] == 404
    assert _get(server + "static/../store.py")[0] == 404


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    """A missing input: one line naming it, exit status 2, no server started."""
    missing = tmp_path / "no-such-snapshot"
    run = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "view", str(missing), "--no-open", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "Traceback" not in run.stderr
    assert "serving" not in run.stdout


def test_view_says_a_busy_port_before_decoding(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cstrace view --port P`` with P taken: exit 2 at once, nothing decoded."""
    import socket

    from cstrace.cli import main
    from cstrace.viewer import store as store_module

    def no_decode(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoded before the port was bound")

    monkeypatch.setattr(store_module.TraceStore, "build", no_decode)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        code = main(["view", str(DEMO), "--port", str(port), "--no-open"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"cannot serve on 127.0.0.1:{port}" in err
    assert "decoded" not in err
