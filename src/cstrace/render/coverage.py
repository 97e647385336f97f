"""Coverage reports: lcov tracefiles, Cobertura XML, a self-contained HTML page, a table.

Input: a :class:`~cstrace.analyses.coverage.Coverage`; output: text.

- :func:`lcov_lines`: an lcov tracefile (the ``.info`` format of
  ``geninfo(1)``), one record per source file: ``FN``/``FNDA`` per function
  (calls), ``BRDA`` per conditional branch outcome (block: the branch's
  position on its line; branch 0 taken, 1 not taken; ``-`` when the branch
  never ran), ``DA`` per line with code, and the found/hit counts.
  ``genhtml --branch-coverage`` renders it.
- :func:`cobertura_xml`: Cobertura's ``coverage-04.dtd`` XML, which CI
  services read: one package per source folder, one class per file, its
  functions as methods, and per line its hits and, for a line with
  conditional branches, ``branch="true"``, ``condition-coverage`` and one
  ``condition`` per branch (two outcomes each).
- :func:`html_report`: one HTML page with nothing loaded from elsewhere: the
  totals, a table of files, a table of functions, then each file's source
  with the count of each line, coloured (hit, not hit, no code), and its
  branch outcomes.
- :func:`text_lines`: a table of every function (those that never ran with
  zeros): calls, instructions executed of those known, lines, branch outcomes.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Iterator
from xml.sax.saxutils import quoteattr

from cstrace.analyses.coverage import (
    BranchCoverage,
    Coverage,
    FileCoverage,
    FunctionCoverage,
    LineCoverage,
    Totals,
)

__all__ = ["cobertura_xml", "html_report", "lcov_lines", "text_lines"]

SourceReader = Callable[[str], list[str] | None]
"""The lines of a source file (without newlines), or None when it cannot be read."""


def _lcov_count(value: int | None) -> str:
    return "-" if value is None else str(value)


def lcov_lines(
    coverage: Coverage,
    test_name: str = "",
    source_path: Callable[[str], str | None] | None = None,
) -> Iterator[str]:
    """The lcov tracefile of ``coverage`` (see the module docstring).

    ``source_path`` gives the path ``genhtml`` reads each source file by, or None
    for a file that is not on disk: such a file is left out (``genhtml`` stops at
    a source it cannot read). Without it every file is written under its name.
    """
    for f in coverage.sorted_files():
        path = f.path if source_path is None else source_path(f.path)
        if path is None:
            continue
        yield f"TN:{test_name}"
        yield f"SF:{path}"
        names: set[str] = set()
        functions = [fn for fn in f.functions if fn.line is not None]
        for fn in functions:
            if fn.name not in names:
                yield f"FN:{fn.line},{fn.name}"
        for fn in functions:
            if fn.name not in names:
                names.add(fn.name)
                yield f"FNDA:{fn.calls},{fn.name}"
        yield f"FNF:{len(names)}"
        yield f"FNH:{len({fn.name for fn in functions if fn.calls})}"
        found = hit = 0
        for ln in f.sorted_lines():
            for block, b in enumerate(ln.branches):
                yield f"BRDA:{ln.line},{block},0,{_lcov_count(b.taken)}"
                yield f"BRDA:{ln.line},{block},1,{_lcov_count(b.not_taken)}"
                found += 2
                hit += b.outcomes_covered
        if found:
            yield f"BRF:{found}"
            yield f"BRH:{hit}"
        lines = f.sorted_lines()
        for ln in lines:
            yield f"DA:{ln.line},{ln.hits}"
        yield f"LF:{len(lines)}"
        yield f"LH:{sum(1 for ln in lines if ln.hits)}"
        yield "end_of_record"


def _rate(hit: int, found: int) -> str:
    return f"{hit / found:.4f}" if found else "1"


def _percent(hit: int, found: int) -> str:
    return f"{round(100 * hit / found)}%" if found else "100%"


def _source_root(coverage: Coverage) -> str:
    folders = [os.path.dirname(p) for p in coverage.files]
    if not folders:
        return "."
    try:
        return os.path.commonpath(folders) or "."
    except ValueError:  # absolute and relative paths mixed
        return "."


def _relative(path: str, root: str) -> str:
    if root == ".":
        return path
    return os.path.relpath(path, root)


def _xml_line(ln: LineCoverage, indent: str) -> Iterator[str]:
    if not ln.branches:
        yield f'{indent}<line number="{ln.line}" hits="{ln.hits}" branch="false"/>'
        return
    found = 2 * len(ln.branches)
    hit = sum(b.outcomes_covered for b in ln.branches)
    yield (
        f'{indent}<line number="{ln.line}" hits="{ln.hits}" branch="true" '
        f'condition-coverage="{_percent(hit, found)} ({hit}/{found})">'
    )
    yield f"{indent}  <conditions>"
    for i, b in enumerate(ln.branches):
        yield (
            f'{indent}    <condition number="{i}" type="jump" '
            f'coverage="{_percent(b.outcomes_covered, 2)}"/>'
        )
    yield f"{indent}  </conditions>"
    yield f"{indent}</line>"


def _rates(t: Totals) -> str:
    return (
        f'line-rate="{_rate(t.lines_hit, t.lines)}" '
        f'branch-rate="{_rate(t.branches_hit, t.branches)}" complexity="0"'
    )


def cobertura_xml(coverage: Coverage, version: str, timestamp: int) -> Iterator[str]:
    """Cobertura XML lines of ``coverage`` (``version``: the tool's; ``timestamp`` in ms)."""
    t = coverage.totals()
    root = _source_root(coverage)
    yield '<?xml version="1.0" encoding="UTF-8"?>'
    yield '<!DOCTYPE coverage SYSTEM "http://cobertura.sourceforge.net/xml/coverage-04.dtd">'
    yield (
        f'<coverage line-rate="{_rate(t.lines_hit, t.lines)}" '
        f'branch-rate="{_rate(t.branches_hit, t.branches)}" '
        f'lines-covered="{t.lines_hit}" lines-valid="{t.lines}" '
        f'branches-covered="{t.branches_hit}" branches-valid="{t.branches}" '
        f'complexity="0" version={quoteattr(version)} timestamp="{timestamp}">'
    )
    yield "  <sources>"
    yield f"    <source>{html.escape(root, quote=False)}</source>"
    yield "  </sources>"
    yield "  <packages>"
    packages: dict[str, list[FileCoverage]] = {}
    for f in coverage.sorted_files():
        folder = os.path.dirname(_relative(f.path, root))
        packages.setdefault(folder.replace(os.sep, ".").strip("."), []).append(f)
    for name, files in packages.items():
        lines = [ln for f in files for ln in f.sorted_lines()]
        functions = [fn for f in files for fn in f.functions]
        yield f"    <package name={quoteattr(name)} {_rates(Totals.of(lines, functions))}>"
        yield "      <classes>"
        for f in files:
            rel = _relative(f.path, root)
            cls = os.path.splitext(os.path.basename(rel))[0]
            yield (
                f"        <class name={quoteattr(cls)} filename={quoteattr(rel)} "
                f"{_rates(f.totals())}>"
            )
            yield "          <methods>"
            for fn in f.functions:
                own = [f.lines[n] for n in fn.source_lines if n in f.lines]
                yield (
                    f'            <method name={quoteattr(fn.name)} signature="" '
                    f"{_rates(Totals.of(own, [fn]))}>"
                )
                yield "              <lines>"
                for ln in own:
                    yield from _xml_line(ln, "                ")
                yield "              </lines>"
                yield "            </method>"
            yield "          </methods>"
            yield "          <lines>"
            for ln in f.sorted_lines():
                yield from _xml_line(ln, "            ")
            yield "          </lines>"
            yield "        </class>"
        yield "      </classes>"
        yield "    </package>"
    yield "  </packages>"
    yield "</coverage>"


def _ratio(hit: int, found: int) -> str:
    if not found:
        return "-"
    return f"{hit}/{found} ({100 * hit / found:.1f}%)"


def text_lines(coverage: Coverage) -> Iterator[str]:
    """A table of every function: calls, instructions, lines and branch outcomes covered."""
    rows: list[tuple[str, ...]] = []
    for fn in coverage.functions:
        found = 2 * len(fn.branches)
        hit = sum(b.outcomes_covered for b in fn.branches)
        where = f"{fn.file}:{fn.line}" if fn.file is not None else f"{fn.start:#x}"
        rows.append(
            (
                fn.name,
                where,
                str(fn.calls),
                str(fn.executions),
                _ratio(fn.executed, fn.instructions),
                _ratio(fn.lines_hit, fn.lines),
                _ratio(hit, found),
            )
        )
    t = coverage.totals()
    head = ("function", "source", "calls", "executed", "instructions", "lines", "branches")
    total = (
        "total",
        f"{t.functions_hit}/{t.functions} functions",
        "",
        str(coverage.instructions),
        _ratio(t.instructions_hit, t.instructions),
        _ratio(t.lines_hit, t.lines),
        _ratio(t.branches_hit, t.branches),
    )
    table = [head, *rows, total]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    left = (0, 1)
    for r in table:
        cells = [
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        yield "  ".join(cells).rstrip()
    if coverage.unattributed:
        yield f"({coverage.unattributed} instruction executions at addresses of no function)"


_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th { background: #eee; } td.name { text-align: left; font-family: monospace; }
.bar { display: inline-block; height: 0.8em; background: #c33; width: 80px; }
.bar span { display: block; height: 100%; background: #3a3; }
pre.src { font-family: monospace; font-size: 13px; margin: 0; }
pre.src span.l { display: block; white-space: pre; }
span.hit { background: #cfc; } span.miss { background: #fcc; }
span.part { background: #ffc; } span.none { color: #777; }
span.no { color: #999; display: inline-block; width: 4em; text-align: right; }
span.cnt { display: inline-block; width: 7em; text-align: right; padding-right: 1em; }
span.br { color: #555; }
"""


def _bar(hit: int, found: int) -> str:
    width = 0 if not found else round(100 * hit / found)
    return f'<span class="bar"><span style="width:{width}%"></span></span>'


def _cell_ratio(hit: int, found: int) -> str:
    if not found:
        return "<td>-</td>"
    return f"<td>{_bar(hit, found)} {hit}/{found} ({100 * hit / found:.1f}%)</td>"


def _anchor(path: str) -> str:
    return "f" + "".join(c if c.isalnum() else "_" for c in path)


def _branch_marks(branches: list[BranchCoverage]) -> str:
    marks = []
    for b in branches:
        if b.taken is None:
            marks.append("[- -]")
        else:
            t = "T" if b.taken else "t"
            n = "N" if b.not_taken else "n"
            marks.append(f"[{t}{b.taken} {n}{b.not_taken}]")
    return " ".join(marks)


def _file_section(f: FileCoverage, source: SourceReader) -> Iterator[str]:
    yield f'<h2 id="{_anchor(f.path)}">{html.escape(f.path)}</h2>'
    text = source(f.path)
    lines = text if text is not None else []
    if text is None:
        yield "<p>(the source file cannot be read: its lines with code only)</p>"
    last = max([len(lines), *f.lines])
    # One line of HTML: each source line is a block of its own, newlines would double them.
    spans: list[str] = []
    for n in range(1, last + 1):
        src = html.escape(lines[n - 1]) if n <= len(lines) else ""
        ln = f.lines.get(n)
        if ln is None:
            cls, count, marks = "none", "", ""
        else:
            partial = any(b.outcomes_covered < 2 for b in ln.branches)
            cls = "miss" if not ln.hits else "part" if partial else "hit"
            count = str(ln.hits)
            marks = _branch_marks(ln.branches)
        tail = f' <span class="br">{html.escape(marks)}</span>' if marks else ""
        spans.append(
            f'<span class="l {cls}"><span class="no">{n}</span>'
            f'<span class="cnt">{count}</span>{src}{tail}</span>'
        )
    yield '<pre class="src">' + "".join(spans) + "</pre>"


def html_report(coverage: Coverage, source: SourceReader, title: str) -> Iterator[str]:
    """A self-contained HTML page of ``coverage``; ``source`` gives each file's lines."""
    t = coverage.totals()
    yield "<!DOCTYPE html>"
    yield '<html lang="en"><head><meta charset="utf-8">'
    yield f"<title>{html.escape(title)}</title>"
    yield f"<style>{_STYLE}</style></head><body>"
    yield f"<h1>Coverage: {html.escape(title)}</h1>"
    yield "<table><tr><th></th><th>covered</th></tr>"
    for label, hit, found in (
        ("lines", t.lines_hit, t.lines),
        ("functions", t.functions_hit, t.functions),
        ("branch outcomes", t.branches_hit, t.branches),
        ("instructions", t.instructions_hit, t.instructions),
    ):
        yield f'<tr><td class="name">{label}</td>{_cell_ratio(hit, found)}</tr>'
    yield "</table>"
    yield "<h2>Files</h2>"
    yield "<table><tr><th>file</th><th>lines</th><th>functions</th><th>branches</th></tr>"
    for f in coverage.sorted_files():
        ft = f.totals()
        yield (
            f'<tr><td class="name"><a href="#{_anchor(f.path)}">{html.escape(f.path)}</a></td>'
            f"{_cell_ratio(ft.lines_hit, ft.lines)}"
            f"{_cell_ratio(ft.functions_hit, ft.functions)}"
            f"{_cell_ratio(ft.branches_hit, ft.branches)}</tr>"
        )
    yield "</table>"
    yield "<h2>Functions</h2>"
    yield (
        "<table><tr><th>function</th><th>source</th><th>calls</th>"
        "<th>instructions</th><th>lines</th><th>branches</th></tr>"
    )
    for fn in coverage.functions:
        yield _function_row(fn)
    yield "</table>"
    yield (
        "<p>Each source line: its number, how many times its code ran, the line. Green: "
        "ran, with every branch outcome; yellow: ran, a branch outcome missing; red: never "
        "ran; grey: no code. After a line, one bracket per conditional branch: "
        "<code>[T5 N2]</code> taken 5 times, not taken twice (a small letter: never); "
        "<code>[- -]</code> the branch never ran.</p>"
    )
    for f in coverage.sorted_files():
        yield from _file_section(f, source)
    yield "</body></html>"


def _function_row(fn: FunctionCoverage) -> str:
    where = f"{fn.file}:{fn.line}" if fn.file is not None else f"{fn.start:#x}"
    link = (
        f'<a href="#{_anchor(fn.file)}">{html.escape(where)}</a>'
        if fn.file is not None
        else html.escape(where)
    )
    found = 2 * len(fn.branches)
    hit = sum(b.outcomes_covered for b in fn.branches)
    return (
        f'<tr><td class="name">{html.escape(fn.name)}</td><td class="name">{link}</td>'
        f"<td>{fn.calls}</td>{_cell_ratio(fn.executed, fn.instructions)}"
        f"{_cell_ratio(fn.lines_hit, fn.lines)}{_cell_ratio(hit, found)}</tr>"
    )
