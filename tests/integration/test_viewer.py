"""``cstrace view`` in a real browser: Debian's chromium, driven by Playwright.

Each test starts the command line on a trace (``--port 0 --no-open``), opens the
page headless and checks what a person sees: the instruction list with function
names and source lines, the source and disassembly panes following a click, the
data pane, the timeline (a click on a slice selects its first instruction), the
overview. Any console error or page error fails the test. Screenshots go to a
temporary folder, or to ``$CSTRACE_VIEWER_SCREENSHOTS`` (``docs/img`` makes the
pictures docs/viewer.md shows).

The scale test (``bugfix-exact-match``, 1.74 million elements, from the corpus)
logs how long scrolling to the end and searching an address take; it does not
assert times.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CHROMIUM = "/usr/bin/chromium"

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if not Path(CHROMIUM).exists():  # pragma: no cover - depends on the machine
    pytest.skip(f"{CHROMIUM} not found (Debian package chromium)", allow_module_level=True)
pytest.importorskip("duckdb", reason="duckdb is not installed (pip install 'cstrace[view]')")


@dataclass
class Viewer:
    """A running ``cstrace view`` and what it said."""

    url: str
    process: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)

    def decode_seconds(self) -> float | None:
        for line in self.stderr:
            m = re.search(r"decoded \d+ elements .* in ([0-9.]+) s", line)
            if m:
                return float(m.group(1))
        return None


def start_viewer(*args: str, timeout: float = 600.0) -> Viewer:
    """Start ``cstrace view ARGS --port 0 --no-open`` and wait for its address."""
    cmd = [sys.executable, "-m", "cstrace.cli", "view", *args, "--port", "0", "--no-open"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    viewer = Viewer("", proc)
    assert proc.stderr is not None and proc.stdout is not None
    err = proc.stderr

    def drain() -> None:
        for line in err:
            viewer.stderr.append(line.rstrip("\n"))

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + timeout
    line = proc.stdout.readline()
    while line and "serving" not in line and time.monotonic() < deadline:
        line = proc.stdout.readline()
    m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
    if m is None:
        proc.kill()
        proc.wait()
        raise AssertionError(f"cstrace view did not start: {line!r} {viewer.stderr}")
    viewer.url = m.group(1)
    return viewer


def stop_viewer(viewer: Viewer) -> None:
    viewer.process.terminate()
    try:
        viewer.process.wait(10)
    except subprocess.TimeoutExpired:  # pragma: no cover
        viewer.process.kill()
        viewer.process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless chromium (Debian's; no browser is downloaded)."""
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: ``$CSTRACE_VIEWER_SCREENSHOTS`` or a temporary folder."""
    env = os.environ.get("CSTRACE_VIEWER_SCREENSHOTS")
    folder = Path(env) if env else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Page:
    """A viewer page that fails on any console or page error."""

    def __init__(self, browser: Any, url: str) -> None:
        # bypass_csp: the page's policy forbids eval, which wait_for_function uses.
        self.page = browser.new_page(viewport={"width": 1500, "height": 900}, bypass_csp=True)
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']")
        self.settle()

    def settle(self) -> None:
        """Wait until every row shown has arrived and the panes are filled."""
        self.page.wait_for_function(
            "state.inflight === 0 && "
            "document.querySelectorAll('#list-body .row.loading').length === 0"
        )

    def js(self, expression: str) -> Any:
        return self.page.evaluate(expression)

    def rows(self) -> list[dict[str, str]]:
        """The instruction list as shown: each visible row's cells."""
        out: list[dict[str, str]] = self.js(
            """[...document.querySelectorAll('#list-body .row')].map(r => ({
                row: r.dataset.row, kind: [...r.classList].find(c => c.startsWith('k-')) || '',
                addr: r.querySelector('.c-addr')?.textContent || '',
                func: r.querySelector('.c-func')?.textContent || '',
                text: r.querySelector('.c-text')?.textContent || '',
                src: r.querySelector('.c-src')?.textContent || ''}))"""
        )
        return out

    def click_row(self, row: str) -> None:
        self.page.click(f"#list-body .row[data-row='{row}']")
        self.settle()

    def selected(self) -> int | None:
        value: int | None = self.js("state.selected")
        return value

    def close(self) -> None:
        self.page.close()
        assert not self.errors, f"page errors: {self.errors}"


def _instr_rows(page: Page) -> list[dict[str, str]]:
    return [r for r in page.rows() if r["kind"] == "k-instr"]


def _check_timeline_click(page: Page, name: str) -> None:
    """Click the middle of the first timeline slice of function ``name``: its first
    instruction is selected."""
    page.page.wait_for_function("state.tl.data !== null")
    target = page.js(
        f"""(() => {{
            const d = state.tl.data, cv = document.getElementById('timeline');
            const lane = laneLayout()[0];
            const id = Object.keys(d.names).find(k => d.names[k] === {name!r});
            const s = lane.lane.slices.find(x => String(x[2]) === id);
            const x = v => (v - state.tl.lo) / (state.tl.hi - state.tl.lo) * cv.clientWidth;
            return {{first: s[3], x: (x(s[0]) + x(s[1])) / 2, y: lane.y + 10}};
        }})()"""
    )
    page.page.locator("#timeline").click(position={"x": target["x"], "y": target["y"]})
    page.page.wait_for_function(f"state.selected === {target['first']}")
    page.settle()
    rec = page.js("state.selectedRec")
    assert rec["func"] == name, rec


def test_etm_demo(browser: Any, shots: Path) -> None:
    """The ETMv4 example with its program's ELF: functions, source, disassembly, STM data,
    timeline, overview."""
    demo = EXAMPLES / "etm_demo"
    viewer = start_viewer(str(demo), "--image", str(demo / "program.elf"))
    try:
        page = Page(browser, viewer.url)
        instrs = _instr_rows(page)
        assert instrs, page.rows()
        # Every instruction of the user program is in a function with a source line.
        user = [r for r in instrs if r["addr"].startswith("0x4000")]
        assert user and all(r["func"] for r in user)
        assert all(re.fullmatch(r"program\.s:\d+", r["src"]) for r in user), user
        assert {"_start", "square"} <= {r["func"].split("+")[0] for r in user}
        # A click on a row: the source pane shows that row's line, the disassembly its
        # function, highlighting the instruction.
        pick = next(r for r in user if r["func"] == "square")
        page.click_row(pick["row"])
        line = pick["src"].split(":")[1]
        assert page.page.inner_text("#source-title").endswith(f"program.s:{line}")
        current = page.page.inner_text("#source-body .src-line.current")
        assert current.split()[0] == line and "\u00d7" in current
        assert page.page.inner_text("#disasm-title").startswith("square")
        assert pick["addr"] in page.page.inner_text("#disasm-body .dis-line.current")
        page.page.screenshot(path=str(shots / "viewer-etm-demo.png"))
        # Another row in another function: the panes follow.
        other = next(r for r in user if r["func"].startswith("_start+"))
        page.click_row(other["row"])
        assert page.page.inner_text("#disasm-title").startswith("_start")
        assert page.page.inner_text("#source-title").endswith(other["src"])
        # The STM messages in the data pane, and the last value of each channel at the end.
        assert "STM master 0x40 channel 0x0" in page.page.inner_text("#data-body")
        last = page.js("state.total") - 1
        page.page.evaluate(f"select({last})")
        page.settle()
        assert re.search(r"STM master 0x40 channel 0x0\s+0xe", page.page.inner_text("#data-body"))
        # Search a function, then an address; next execution.
        page.page.fill("#search", "square")
        page.page.press("#search", "Enter")
        page.page.wait_for_function("state.selectedRec && state.selectedRec.func === 'square'")
        first = page.selected()
        page.page.click("#exec-next")
        page.page.wait_for_function(f"state.selected !== {first}")
        page.settle()
        rec = page.js("state.selectedRec")
        assert rec["func"] == "square" and page.selected() > first
        page.page.fill("#search", "0x400034")
        page.page.press("#search", "Enter")
        page.page.wait_for_function("state.selectedRec && state.selectedRec.addr === '0x400034'")
        # The timeline: a slice per function call, the exception handler's too.
        page.page.wait_for_function("state.tl.data !== null")
        names = set(page.js("Object.values(state.tl.data.names)"))
        assert {"_start", "square", "EL0", "EL1"} <= names
        # The trace has timestamps: the axis is trace time, and the STM's lane shows its
        # two messages, inside the kernel handler's slices (which wrote them).
        assert page.js("state.tl.data.axis") == "time"
        stm = page.js("state.tl.data.lanes.find(l => l.name.startsWith('STM_0'))")
        handler = page.js(
            "(() => { const d = state.tl.data; const id = Object.keys(d.names)"
            ".find(k => d.names[k] === 'el0_sync'); return d.lanes[0].slices"
            ".filter(s => String(s[2]) === id); })()"
        )
        assert len(stm["msgs"]) == 2
        for x, _ in stm["msgs"]:
            assert any(s[0] <= x <= s[1] for s in handler), (x, handler)
        _check_timeline_click(page, "square")
        # The overview: sources, what the trace lost, top functions.
        page.page.click("#tab-overview")
        assert page.page.is_visible("#overview-body")
        assert not page.page.is_visible("#list-pane")
        text = page.page.inner_text("#overview-body")
        assert "ETM_0" in text and "STM_0" in text and "What the trace lost" in text
        assert "_start" in text.split("Top functions")[1]
        page.page.screenshot(path=str(shots / "viewer-overview.png"))
        page.close()
    finally:
        stop_viewer(viewer)


def test_program_with_dwarf(browser: Any, shots: Path, tmp_path: Path) -> None:
    """A C program with DWARF, run in an emulator and traced: C source lines with counts."""
    from tests.profiles import program as prog

    if prog.compiler() is None:
        pytest.skip(f"{prog.CC} not installed (Debian package gcc-aarch64-linux-gnu)")
    pytest.importorskip("unicorn", reason="unicorn is not installed")
    built = prog.build(tmp_path)
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    viewer = start_viewer(
        str(built.capture), f"--image={built.path}@{prog.BASE:#x}", "--protocol=0x10=ETM4.0",
        *regs,
    )  # fmt: skip
    try:
        page = Page(browser, viewer.url)
        page.page.fill("#search", "f1")
        page.page.press("#search", "Enter")
        page.page.wait_for_function("state.selectedRec && state.selectedRec.func === 'f1'")
        page.settle()
        instrs = _instr_rows(page)
        in_c = [r for r in instrs if re.fullmatch(r"prog\.c:\d+", r["src"])]
        assert {"f1", "work"} <= {r["func"].split("+")[0] for r in in_c}, instrs
        # The source pane shows the C line of the selected instruction, with a count.
        rec = page.js("state.selectedRec")
        assert page.page.inner_text("#source-title").endswith(f"prog.c:{rec['line']}")
        source = page.page.inner_text("#source-body")
        assert "static int f1(int n)" in source and "s += i & 3;" in source
        loop = page.page.locator("#source-body .src-line", has_text="s += i & 3;")
        count = int(loop.locator(".cnt").inner_text().rstrip("\u00d7"))
        assert count >= 100  # the loop body ran at least 100 times in one call
        # Mixed source and disassembly of f1.
        assert page.page.inner_text("#disasm-title").startswith("f1")
        assert "prog.c:" in page.page.inner_text("#disasm-body")
        page.page.screenshot(path=str(shots / "viewer-dwarf.png"))
        _check_timeline_click(page, "f2")
        # Zoom in around the selection: fewer rows across, slices of single calls.
        before = page.js("state.tl.hi - state.tl.lo")
        x = page.js(
            "(state.tl.cursor - state.tl.lo) / (state.tl.hi - state.tl.lo)"
            " * document.getElementById('timeline').clientWidth"
        )
        page.page.mouse.move(x, page.page.locator("#timeline").bounding_box()["y"] + 30)
        for _ in range(4):
            page.page.mouse.wheel(0, -100)
        page.settle()
        assert page.js("state.tl.hi - state.tl.lo") < before / 2
        assert page.js("state.tl.data.hi - state.tl.data.lo") < before / 2
        page.page.screenshot(path=str(shots / "viewer-timeline.png"))
        page.close()
    finally:
        stop_viewer(viewer)


def test_data_trace(browser: Any, shots: Path) -> None:
    """Classic ETM data trace: the transfers near the selection, the last value written."""
    viewer = start_viewer(str(EXAMPLES / "classic" / "etmv1_etb"))
    try:
        page = Page(browser, viewer.url)
        last = page.js("state.total") - 1
        page.page.evaluate(f"select({last})")
        page.settle()
        data = page.page.inner_text("#data-body")
        assert "data element(s)" in page.page.inner_text("#data-title")
        assert "last value written to each address" in data
        rows = page.js(
            "[...document.querySelectorAll('#data-body table:last-of-type tr')].slice(1)"
            ".map(tr => [...tr.children].map(td => td.textContent))"
        )
        assert rows and all(r[0].startswith("0x") and r[1].startswith("0x") for r in rows), rows
        # Clicking a transfer selects its row.
        page.page.locator("#data-body table").first.locator("tr").nth(1).click()
        page.settle()
        assert page.js("state.selectedRec.kind") == "message"
        page.page.screenshot(path=str(shots / "viewer-data.png"))
        page.close()
    finally:
        stop_viewer(viewer)


@pytest.mark.corpus
def test_scale_bugfix_exact_match(
    browser: Any, corpus: Path, shots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1.74 million elements: scroll to the end and search an address; times are logged."""
    snap = corpus / "snapshots" / "bugfix-exact-match"
    if not snap.is_dir():
        pytest.skip(f"{snap} not found")
    began = time.perf_counter()
    viewer = start_viewer(str(snap))
    ready = time.perf_counter() - began
    try:
        page = Page(browser, viewer.url)
        total = page.js("state.total")
        t0 = time.perf_counter()
        page.page.evaluate("scrollToRow(state.total, false)")
        page.settle()
        scroll_end = time.perf_counter() - t0
        shown = [int(r["row"]) for r in page.rows()]
        assert shown[-1] == total - 1
        # An address executed in the middle of the trace, searched from the start.
        middle = page.js(f"api('rows', {{start: {total // 2}, count: 200}})")
        addr = next(r["addr"] for r in middle["rows"] if r.get("addr"))
        page.page.evaluate("state.selected = null")
        page.page.fill("#search", addr)
        t0 = time.perf_counter()
        page.page.press("#search", "Enter")
        page.page.wait_for_function(f"state.selectedRec && state.selectedRec.addr === {addr!r}")
        page.settle()
        search = time.perf_counter() - t0
        t0 = time.perf_counter()
        page.page.click("#exec-next")
        page.page.wait_for_function("document.getElementById('status').textContent !== ''")
        page.settle()
        next_exec = time.perf_counter() - t0
        page.page.screenshot(path=str(shots / "viewer-scale.png"))
        page.close()
    finally:
        stop_viewer(viewer)
    with capsys.disabled():
        print(
            f"\nviewer scale ({snap.name}, {total} rows): decode once "
            f"{viewer.decode_seconds()} s (server ready after {ready:.2f} s); scroll to end "
            f"{scroll_end:.3f} s; search {addr} {search:.3f} s; next execution {next_exec:.3f} s"
        )


def test_no_internet_in_the_page() -> None:
    """Every file the page is made of refers only to itself and the local server."""
    static = ROOT / "src" / "cstrace" / "viewer" / "static"
    for f in static.iterdir():
        text = f.read_text()
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.IGNORECASE), f


_TRUNCATED = """[...document.querySelectorAll('#list-body .row.k-instr .c-text')]
    .filter(s => s.scrollWidth > s.clientWidth + 1).map(s => s.textContent)"""
_WRAPPED_BUTTONS = """[...document.querySelectorAll('header button')]
    .filter(b => b.offsetParent !== null && b.getBoundingClientRect().height > 30)
    .map(b => b.textContent)"""


@pytest.mark.parametrize("width", [900, 1280, 1800])
def test_layout_keeps_instructions_whole(
    browser: Any, shots: Path, tmp_path: Path, width: int
) -> None:
    """At a narrow and a wide window, with a long input path: every instruction's text is
    shown whole (operands included), and no header button wraps onto a second line."""
    from tests.profiles import program as prog

    deep = tmp_path / ("a-long-folder-name-for-the-input-" * 4).rstrip("-")
    deep.mkdir()
    built = prog.build_or_skip(deep)
    regs = [f"--reg=0x10:{k}={v:#x}" for k, v in prog.REGISTERS.items()]
    viewer = start_viewer(
        str(built.capture), f"--image={built.path}@{prog.BASE:#x}", "--protocol=0x10=ETM4.0",
        *regs,
    )  # fmt: skip
    try:
        page = Page(browser, viewer.url)
        page.page.set_viewport_size({"width": width, "height": 800})
        page.page.evaluate("layoutList(); renderList()")
        page.settle()
        page.page.fill("#search", "work")
        page.page.press("#search", "Enter")
        page.page.wait_for_function("state.selectedRec && state.selectedRec.func === 'work'")
        page.settle()
        texts = [r["text"] for r in _instr_rows(page)]
        assert max(len(t) for t in texts) >= 20, texts  # operands worth checking
        assert page.js(_TRUNCATED) == []
        assert page.js(_WRAPPED_BUTTONS) == []
        # The function column is there (symbols) and so is the source column, when the
        # list is wide enough; no timestamps in this trace: no time column.
        assert page.js("getComputedStyle(document.querySelector('.row .c-func')).display") != "none"
        assert page.js("getComputedStyle(document.querySelector('.row .c-time')).display") == "none"
        page.page.screenshot(path=str(shots / f"viewer-width-{width}.png"))
        page.close()
    finally:
        stop_viewer(viewer)


def test_data_pane_keeps_words_whole(browser: Any, shots: Path) -> None:
    """The data pane at a narrow window: the kind of each transfer ("message", "write")
    is on one line, not broken inside the word."""
    viewer = start_viewer(str(EXAMPLES / "etm_demo"))
    try:
        page = Page(browser, viewer.url)
        page.page.set_viewport_size({"width": 900, "height": 700})
        last = page.js("state.total") - 1
        page.page.evaluate(f"select({last})")
        page.settle()
        page.page.wait_for_selector("#data-body table")
        # A word broken over lines has more than one line box in its text.
        broken = page.js(
            """[...document.querySelectorAll('#data-body td:nth-child(2)')].filter(td => {
                   const r = document.createRange(); r.selectNodeContents(td);
                   return r.getClientRects().length > 1; }).map(td => td.textContent)"""
        )
        kinds = page.js("[...document.querySelectorAll('#data-body td:nth-child(2)')]"
                        ".map(td => td.textContent)")  # fmt: skip
        assert kinds and broken == [], (kinds, broken)
        page.page.screenshot(path=str(shots / "viewer-data-narrow.png"))
        page.close()
    finally:
        stop_viewer(viewer)


_OVERLAPS = """(() => {
    const boxes = [...document.querySelectorAll('text')]
        .filter(t => !t.getAttribute('font-weight')).map(t => [t.getBBox(), t.textContent]);
    const out = [];
    for (let i = 0; i < boxes.length; i++)
        for (let j = i + 1; j < boxes.length; j++) {
            const [a, an] = boxes[i], [b, bn] = boxes[j];
            if (a.x < b.x + b.width - 0.5 && b.x < a.x + a.width - 0.5 &&
                a.y < b.y + b.height - 0.5 && b.y < a.y + a.height - 0.5) out.push([an, bn]);
        }
    return out.slice(0, 5);
})()"""


@pytest.mark.corpus
def test_svg_timeline_labels_are_readable(browser: Any, corpus: Path, shots: Path) -> None:
    """The SVG timeline of a capture with hundreds of trace-on events (TC2), as chromium
    draws it: no two texts overlap."""
    snap = corpus / "snapshots" / "TC2"
    if not snap.is_dir():
        pytest.skip(f"{snap} not found")
    out = shots / "timeline-tc2.svg"
    r = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "timeline", str(snap), "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.read_text().count("trace on") > 100
    page = browser.new_page(viewport={"width": 1250, "height": 900})
    try:
        page.goto(out.resolve().as_uri())
        assert page.evaluate(_OVERLAPS) == []
        page.screenshot(path=str(shots / "timeline-tc2.png"))
    finally:
        page.close()
