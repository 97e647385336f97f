"""Text of function profiles: tables, callgrind, collapsed stacks and flame graphs.

Input: a :class:`~cstrace.analyses.calls.CallProfile`; output: lines of text
(without newlines), or one SVG document:

- :func:`function_lines`: a table per function (calls, own and inclusive
  instructions, own cycles, and the time per call in each unit the trace
  gave: number of whole calls timed, total, minimum, maximum, average),
  then one per exception number (how often it was taken and returned, its
  handlers, the instructions and time from entry to exception return, for
  the exceptions that returned); as aligned text,
  CSV (one header row, then a row per function or exception, ``kind``
  ``function`` or ``exception``) or JSON.
- :func:`callgrind_lines`: the callgrind format (``positions: line``; events
  ``Ir``, and ``Cycles`` when the trace had cycle counts): per function its
  object, file and name (``ob=``, ``fl=``, ``fn=``), its own costs per
  source line (``fi=`` where a line is in another file, as inlined code is),
  and per call site ``cfi=``, ``cfn=``, ``calls=COUNT LINE`` and the
  inclusive costs of those calls. ``callgrind_annotate`` and KCacheGrind
  read it.
- :func:`folded_lines`: collapsed stacks, ``bottom;...;top count``, the
  count being the instructions executed with that stack (the input of
  flame-graph tools).
- :func:`flamegraph_svg`: a flame graph of the collapsed stacks, drawn here:
  one box per function in each calling context, as wide as its share of the
  instructions, callers below callees, siblings in name order; each box's
  tooltip gives its instructions and share.
"""

from __future__ import annotations

import csv
import io
import json
import zlib
from collections.abc import Iterator, Sequence
from xml.sax.saxutils import escape

from cstrace.analyses.calls import (
    CYCLES,
    TICKS,
    CallArc,
    CallProfile,
    ExceptionProfile,
    FunctionInfo,
    FunctionProfile,
    Timing,
)

__all__ = [
    "TABLE_FORMATS",
    "callgrind_lines",
    "flamegraph_svg",
    "folded_lines",
    "function_lines",
]

TABLE_FORMATS = ("text", "csv", "json")
"""The forms :func:`function_lines` writes."""

_UNIT_NAMES = {CYCLES: "cycles (the trace's cycle counts)", TICKS: "timestamp ticks"}


def _time_headers(units: Sequence[str]) -> list[str]:
    out: list[str] = []
    for unit in units:
        out += [f"{unit} total", f"{unit} min", f"{unit} max", f"{unit} avg"]
    return out


def _time_cells(timing: dict[str, Timing], units: Sequence[str]) -> list[str]:
    cells: list[str] = []
    for unit in units:
        t = timing.get(unit)
        if t is None or not t.count:
            cells += ["-", "-", "-", "-"]
        else:
            cells += [str(t.total), str(t.minimum), str(t.maximum), f"{t.average:.1f}"]
    return cells


def _function_row(p: FunctionProfile, units: Sequence[str], cycles: bool) -> list[str]:
    f = p.function
    where = f"{f.file}:{f.line}" if f.file and f.line else (f.file or "")
    row = [f.name + (" [handler]" if p.handler else ""), str(p.calls), str(p.returned)]
    row += [str(p.instructions), str(p.inclusive)]
    if cycles:
        row.append(str(p.cycles))
    return [*row, *_time_cells(p.timing, units), where]


def _exception_row(e: ExceptionProfile, units: Sequence[str], cycles: bool) -> list[str]:
    row = [str(e.number), str(e.count), str(e.returned), "-", str(e.instructions)]
    if cycles:
        row.append("-")
    return [*row, *_time_cells(e.timing, units), " ".join(sorted(e.handlers))]


def _aligned(rows: list[list[str]]) -> Iterator[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:-1], widths[1:-1], strict=True)]
        cells.append(row[-1])
        yield "  ".join(cells).rstrip()


def function_lines(profile: CallProfile, form: str = "text") -> Iterator[str]:
    """The per-function and per-exception tables of ``profile`` (``form``: text, csv, json).

    Columns: the name, calls (entries seen), returned (calls seen whole: the
    inclusive instructions and the times are theirs), own instructions,
    inclusive instructions, own cycles (with cycle counts), then total,
    minimum, maximum and average time per unit, and the source (for an
    exception: its handlers). An exception's row has the exception number,
    how often it was taken and returned, and its instructions as inclusive.
    """
    units = profile.units
    if form == "json":
        yield json.dumps(profile.to_dict(), indent=1, sort_keys=True)
        return
    cycles = profile.cycles is not None
    head = ["function", "calls", "returned", "instructions", "inclusive"]
    if cycles:
        head.append("cycles")
    head += _time_headers(units)
    functions = profile.sorted_functions()
    exceptions = [profile.exceptions[n] for n in sorted(profile.exceptions)]
    if form == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["kind", "name", *head[1:], "source"])
        for p in functions:
            w.writerow(["function", *_function_row(p, units, cycles)])
        for e in exceptions:
            w.writerow(["exception", *_exception_row(e, units, cycles)])
        yield from buf.getvalue().splitlines()
        return
    summary = f"{profile.instructions} instructions in {len(functions)} functions"
    if units:
        summary += "; time per call in " + " and ".join(_UNIT_NAMES[u] for u in units)
    else:
        summary += "; no timestamps or cycle counts in the trace: no times"
    yield summary
    if profile.gaps:
        yield f"{profile.gaps} trace gaps: calls open across a gap are not timed"
    if not functions:
        return
    yield ""
    yield from _aligned([[*head, "source"], *(_function_row(p, units, cycles) for p in functions)])
    if exceptions:
        yield ""
        rows = [["exception", "taken", *head[2:], "handlers"]]
        rows += [_exception_row(e, units, cycles) for e in exceptions]
        yield from _aligned(rows)


# -- callgrind --------------------------------------------------------------------------------


def _costs(ir: int, cycles: int, with_cycles: bool) -> str:
    return f"{ir} {cycles}" if with_cycles else str(ir)


def callgrind_lines(profile: CallProfile, command: str = "") -> Iterator[str]:
    """The callgrind-format text of ``profile`` (``command``: the ``cmd:`` line)."""
    with_cycles = profile.cycles is not None
    yield "# callgrind format"
    yield "version: 1"
    yield "creator: cstrace"
    if command:
        yield f"cmd: {command}"
    yield "positions: line"
    yield "event: Ir : Instructions executed (trace)"
    if with_cycles:
        yield "event: Cycles : Cycles (trace cycle counts)"
    yield "events: Ir Cycles" if with_cycles else "events: Ir"
    lines: dict[FunctionInfo, list[tuple[str | None, int, int, int]]] = {}
    for (func, file, line), cost in profile.lines.items():
        lines.setdefault(func, []).append((file, line, cost.instructions, cost.cycles))
    arcs: dict[FunctionInfo, list[CallArc]] = {}
    for arc in profile.arcs.values():
        arcs.setdefault(arc.caller, []).append(arc)
    funcs = sorted(set(lines) | set(arcs), key=lambda f: (f.name, f.start))
    total_ir = total_cycles = 0
    for func in funcs:
        home = func.file or next((f for f, *_ in lines.get(func, ()) if f), None) or "???"
        yield ""
        yield f"fl={home}"
        yield f"fn={func.name}"
        current = home
        for file, line, ir, cyc in sorted(lines.get(func, ()), key=lambda x: (x[0] or "", x[1])):
            where = file or home
            if where != current:
                yield f"fi={where}"
                current = where
            yield f"{line} {_costs(ir, cyc, with_cycles)}"
            total_ir += ir
            total_cycles += cyc
        for arc in sorted(arcs.get(func, ()), key=lambda a: (a.site, a.callee.name)):
            where = arc.site_file or home
            if where != current:
                yield f"fi={where}"
                current = where
            yield f"cfi={arc.callee.file or '???'}"
            yield f"cfn={arc.callee.name}"
            yield f"calls={arc.calls} {arc.callee.line or 0}"
            yield f"{arc.site_line} {_costs(arc.instructions, arc.cycles, with_cycles)}"
    yield ""
    yield f"totals: {_costs(total_ir, total_cycles, with_cycles)}"


# -- collapsed stacks and flame graphs --------------------------------------------------------


def folded_lines(profile: CallProfile) -> Iterator[str]:
    """The collapsed stacks of ``profile``: ``a;b;c count``, sorted by stack."""
    for stack, count in sorted(profile.stacks.items()):
        yield f"{';'.join(stack)} {count}"


class _Box:
    __slots__ = ("children", "count", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.children: dict[str, _Box] = {}


def _tree(stacks: dict[tuple[str, ...], int]) -> _Box:
    root = _Box("all")
    for stack, count in stacks.items():
        root.count += count
        box = root
        for name in stack:
            nxt = box.children.get(name)
            if nxt is None:
                nxt = box.children[name] = _Box(name)
            nxt.count += count
            box = nxt
    return root


def _depth(box: _Box) -> int:
    return 1 + max((_depth(c) for c in box.children.values()), default=0)


def _colour(name: str) -> str:
    """A warm colour fixed by the name (the same function is the same colour everywhere)."""
    h = zlib.crc32(name.encode("utf-8"))
    return f"rgb({205 + h % 50},{80 + (h >> 8) % 130},{(h >> 16) % 55})"


def flamegraph_svg(
    profile: CallProfile, title: str = "Flame graph", width: int = 1200, row: int = 17
) -> str:
    """A flame graph of ``profile``'s collapsed stacks, as one SVG document."""
    root = _tree(profile.stacks)
    depth = _depth(root)
    top, margin = 44, 10
    height = top + depth * row + 2 * margin
    scale = (width - 2 * margin) / root.count if root.count else 0.0
    out = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" '
        'font-size="12">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fdf6ec"/>',
        f'<text x="{width // 2}" y="20" text-anchor="middle" font-size="16">{escape(title)}</text>',
        f'<text x="{width // 2}" y="36" text-anchor="middle" fill="#555">'
        f"{root.count} instructions; width: share of the instructions executed with the "
        "function on the stack</text>",
    ]

    def draw(box: _Box, x: float, level: int, path: str) -> None:
        w = box.count * scale
        if w < 0.3:
            return
        y = height - margin - (level + 1) * row
        share = 100.0 * box.count / root.count
        label = f"{path} ({box.count} instructions, {share:.2f}%)"
        fill = "#e0e0e0" if level == 0 else _colour(box.name)
        out.append(f"<g><title>{escape(label)}</title>")
        out.append(
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row - 1}" '
            f'fill="{fill}" rx="2" ry="2"/>'
        )
        chars = int((w - 6) / 7.2)
        if chars >= 3:
            text = box.name if len(box.name) <= chars else box.name[: chars - 2] + ".."
            out.append(f'<text x="{x + 3:.2f}" y="{y + row - 5}">{escape(text)}</text>')
        out.append("</g>")
        cx = x
        for name in sorted(box.children):
            child = box.children[name]
            draw(child, cx, level + 1, f"{path};{name}" if level else name)
            cx += child.count * scale

    if root.count:
        draw(root, float(margin), 0, "all")
    out.append("</svg>")
    return "\n".join(out) + "\n"
