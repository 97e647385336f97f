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
            for i in (i for i in timeline.instants if i.track == child.uid):
                xi = x(i.at)
                body.append(
                    f'<line x1="{xi:.1f}" y1="{y}" x2="{xi:.1f}" y2="{y + _ROW}" stroke="#c33"/>'
                )
                # A label near the right edge goes to the left of its tick.
                right = xi > width - 8 * len(i.name) - _LEFT
                at = f'x="{xi - 3:.1f}" text-anchor="end"' if right else f'x="{xi + 3:.1f}"'
                body.append(f'<text {at} y="{y + 13}">{escape(i.name)}</text>')
            y += _ROW + 4
        y += 10
    yield (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'font-family="sans-serif" font-size="{_FONT}">'
    )
    yield f'<rect width="{width}" height="{y}" fill="white"/>'
    yield from body
    yield "</svg>"
