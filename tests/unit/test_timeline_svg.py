"""The SVG timeline's instant labels: shown where they fit, never drawn over each other."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

from cstrace.analyses.timeline import Instant, Slice, Timeline, Track
from cstrace.render.timeline_svg import _CHAR, svg_lines

NS = "{http://www.w3.org/2000/svg}"


def _timeline(ticks: list[tuple[int, str]]) -> Timeline:
    root = Track(1, "ETM_0", "etmv4", clock="elements")
    marks = Track(2, "ETM_0 trace", "trace events", parent=1)
    tl = Timeline(tracks=[root, marks])
    tl.slices.append(Slice(1, "main", 0, 10_000, "function"))
    tl.instants.extend(Instant(2, name, at, "trace") for at, name in ticks)
    return tl


def _labels(tl: Timeline) -> list[tuple[float, float, float, str]]:
    """(left, right, baseline, text) of each instant label, by the same width estimate."""
    svg = ET.fromstring("\n".join(svg_lines(tl)))
    out = []
    for t in svg.iter(f"{NS}text"):
        if t.find(f"{NS}title") is not None or t.get("font-weight") == "bold":
            continue
        text = t.text or ""
        if text in ("main", "ETM_0 trace"):
            continue
        x = float(t.get("x", "0"))
        w = _CHAR * len(text)
        left, right = (x - w, x) if t.get("text-anchor") == "end" else (x, x + w)
        out.append((left, right, float(t.get("y", "0")), text))
    return out


def test_crowded_trace_on_labels_do_not_overlap() -> None:
    rng = random.Random(7)
    ticks = sorted((rng.randrange(0, 10_000), rng.choice(["trace on", "overflow", "end of trace"]))
                   for _ in range(400))  # fmt: skip
    labels = _labels(_timeline(ticks))
    assert labels  # some are shown
    assert len(labels) < 400  # not all of them fit
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if a[2] == b[2]:
                assert a[1] <= b[0] or b[1] <= a[0], (a, b)
    # Every tick is still drawn, with its name as a tooltip.
    svg = ET.fromstring("\n".join(svg_lines(_timeline(ticks))))
    lines = [ln for ln in svg.iter(f"{NS}line") if ln.find(f"{NS}title") is not None]
    assert len(lines) == 400


def test_sparse_labels_are_all_shown() -> None:
    ticks = [(1000, "trace on"), (5000, "overflow"), (9990, "end of trace")]
    labels = _labels(_timeline(ticks))
    assert sorted(t for *_, t in labels) == ["end of trace", "overflow", "trace on"]
    # The one at the right edge is drawn to the left of its tick, inside the picture.
    end = next(lab for lab in labels if lab[3] == "end of trace")
    assert end[1] <= 1200
