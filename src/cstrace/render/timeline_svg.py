"""A timeline as an SVG picture: a quick look without the Perfetto UI.

Input: a :class:`cstrace.analyses.timeline.Timeline`; output: the lines of
one SVG document. Each source is a band with its own time axis (its clock,
named in its title): function and exception slices stacked by call depth
(exceptions in red), markers and strings as ticks with their names, counter
values as a step line. Colours come from the function's name, so a function
has the same colour everywhere.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from html import escape

from cstrace.analyses.timeline import Slice, Timeline, Track

__all__ = ["svg_lines"]

WIDTH = 1200
_LEFT = 10
_ROW = 18
_FONT = 11


def _colour(name: str) -> str:
    hue = zlib.crc32(name.encode()) % 360
    return f"hsl({hue},55%,70%)"


_LABEL_ROW = 13
"""Height of a row of instant labels."""
_LABEL_ROWS = 3
"""Rows of labels a track of instants may use; a label that fits in none is left out
(its tick keeps the name as a tooltip)."""
_HALO = 'stroke="white" stroke-width="3" paint-order="stroke"'
"""A label's white outline, so that it reads over the ticks it is drawn across."""
_CHAR = 6.5
"""Width of a character of the labels' font, estimated generously (sans-serif, 11 px)."""


def _place_labels(ticks: list[tuple[float, str]], width: int) -> list[tuple[float, int, str, bool]]:
    """Where the labels of a track's instants go: ``(x, row, name, to the left)`` for each
    label that can be shown without overlapping another.

    Ticks are taken left to right; each label goes in the first row where it clears the
    labels already there (with a gap), to the right of its tick, or to its left near the
    picture's right edge. A label that is the same as the last one shown in every row
    within its own width adds nothing and is left out, as is one that fits nowhere.
    """
    ends = [float("-inf")] * _LABEL_ROWS
    last: list[tuple[float, str]] = [(float("-inf"), "")] * _LABEL_ROWS
    out: list[tuple[float, int, str, bool]] = []
    for xi, name in ticks:
        size = _CHAR * len(name) + 6
        right = xi + size > width - _LEFT
        lo, hi = (xi - size, xi) if right else (xi, xi + size)
        for row in range(_LABEL_ROWS):
            if ends[row] + 4 <= lo:
                break
        else:
            continue
        if any(lx + size > xi and lname == name for lx, lname in last):
            continue  # the same text just before it: the tick alone says enough
        ends[row] = hi
        last[row] = (xi, name)
        out.append((xi, row, name, right))
    return out


def _depths(slices: list[Slice]) -> list[int]:
    """The call depth of each slice (given parents first), from how they nest."""
    out: list[int] = []
    stack: list[Slice] = []
    for s in slices:
        while stack and not (stack[-1].start <= s.start and s.end <= stack[-1].end):
            stack.pop()
        out.append(len(stack))
        stack.append(s)
    return out


def svg_lines(timeline: Timeline, width: int = WIDTH) -> Iterator[str]:
    """The SVG document of ``timeline``, one element a line."""
    roots = [t for t in timeline.tracks if t.parent is None]
    children: dict[int, list[Track]] = {}
    for track in timeline.tracks:
        if track.parent is not None:
            children.setdefault(track.parent, []).append(track)
    # Sources on the trace's timestamps share one axis; the others each have their own.
    axes: dict[int, tuple[int, int]] = {}
    shared: list[int] = []
    for root in roots:
        family = {root.uid, *(c.uid for c in children.get(root.uid, []))}
        times = [s.start for s in timeline.slices if s.track in family]
        times += [s.end for s in timeline.slices if s.track in family]
        times += [i.at for i in timeline.instants if i.track in family]
        times += [c.at for c in timeline.counters if c.track in family]
        axes[root.uid] = (min(times), max(times)) if times else (0, 1)
        if root.clock == "timestamps" and times:
            shared += [min(times), max(times)]
    body: list[str] = []
    y = 0
    for root in roots:
        lo, hi = axes[root.uid]
        if root.clock == "timestamps" and shared:
            lo, hi = min(shared), max(shared)
        span = max(hi - lo, 1)
        usable = width - 2 * _LEFT

        def x(t: int, lo: int = lo, span: int = span, usable: int = usable) -> float:
            return _LEFT + usable * (t - lo) / span

        title = f"{root.name}: {lo} .. {hi} ({root.description})"
        body.append(f'<text x="{_LEFT}" y="{y + 14}" font-weight="bold">{escape(title)}</text>')
        y += 22
        slices = [s for s in timeline.slices if s.track == root.uid]
        depths = _depths(slices)
        for s, d in zip(slices, depths, strict=True):
            x0, x1 = x(s.start), x(s.end)
            w = max(x1 - x0, 1.0)
            top = y + d * _ROW
            fill = "hsl(0,70%,65%)" if s.category == "exception" else _colour(s.name)
            body.append(
                f'<rect x="{x0:.1f}" y="{top}" width="{w:.1f}" height="{_ROW - 2}" '
                f'fill="{fill}" stroke="#555" stroke-width="0.5">'
                f"<title>{escape(s.name)} [{s.start}, {s.end}]</title></rect>"
            )
            if w > 7 * len(s.name):
                body.append(f'<text x="{x0 + 3:.1f}" y="{top + 12}">{escape(s.name)}</text>')
        y += (max(depths) + 1) * _ROW if depths else 0
        for child in children.get(root.uid, []):
            y += 4
            body.append(f'<text x="{_LEFT}" y="{y + 11}" fill="#444">{escape(child.name)}</text>')
            y += 14
            if child.counter:
                points = [(c.at, c.value) for c in timeline.counters if c.track == child.uid]
                if points:
                    vmax = max(max(v for _, v in points), 1)
                    level = [y + 2 * _ROW - 2 * _ROW * v / vmax for _, v in points]
                    path = [f"M{x(points[0][0]):.1f},{level[0]:.1f}"]
                    for (t, _), vy in zip(points[1:], level[1:], strict=True):
                        path.append(f"H{x(t):.1f} V{vy:.1f}")  # a step: held, then the new value
                    body.append(
                        f'<path d="{" ".join(path)}" fill="none" stroke="#2a6" stroke-width="1.5"/>'
                    )
                    for (t, v), vy in zip(points, level, strict=True):
                        body.append(
                            f'<circle cx="{x(t):.1f}" cy="{vy:.1f}" r="2.5" fill="#2a6">'
                            f"<title>{v} (0x{v:x}) at {t}</title></circle>"
                        )
                y += 2 * _ROW + 4
                continue
            instants = sorted(
                (i for i in timeline.instants if i.track == child.uid), key=lambda i: i.at
            )
            for xi, name in ((x(i.at), i.name) for i in instants):
                body.append(
                    f'<line x1="{xi:.1f}" y1="{y}" x2="{xi:.1f}" y2="{y + _ROW}" stroke="#c33">'
                    f"<title>{escape(name)}</title></line>"
                )
            labels = _place_labels([(x(i.at), i.name) for i in instants], width)
            for xi, row, name, right in labels:
                at = f'x="{xi - 3:.1f}" text-anchor="end"' if right else f'x="{xi + 3:.1f}"'
                body.append(
                    f'<text {at} y="{y + 13 + row * _LABEL_ROW}" {_HALO}>{escape(name)}</text>'
                )
            rows = 1 + max((row for _, row, _, _ in labels), default=0)
            y += _ROW + 4 + (rows - 1) * _LABEL_ROW
        y += 10
    yield (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'font-family="sans-serif" font-size="{_FONT}">'
    )
    yield f'<rect width="{width}" height="{y}" fill="white"/>'
    yield from body
    yield "</svg>"
