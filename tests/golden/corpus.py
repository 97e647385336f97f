"""Running the decoder on corpus snapshots the way the reference listings were made."""

from __future__ import annotations

import lzma
from pathlib import Path

from cstrace.decode import Session
from cstrace.inputs import read_snapshot
from cstrace.protocols import DecodeOptions
from cstrace.render.ocsd import listing_lines


def expected_names(corpus: Path) -> list[str]:
    """Names of the expected listings: ``NAME`` or ``NAME@variant``."""
    return sorted(p.name.split(".ppl")[0] for p in (corpus / "expected").glob("*.ppl*"))


def using_buffer(expected: Path) -> str:
    """The buffer named on the expected listing's ``Using B as trace source`` line."""
    with lzma.open(expected, "rt") as f:
        for line in f:
            if line.startswith("Using "):
                return line.split()[1]
    raise ValueError(f"{expected}: no 'Using' line")


def listing(corpus: Path, name: str) -> list[str]:
    """Decode corpus listing ``name`` as the CLI would with the documented options."""
    base, _, variant = name.partition("@")
    snap = read_snapshot(corpus / "snapshots" / base)
    if variant == "multi_session":
        buffers = [b.name for b in snap.buffers]
    else:
        buffers = [using_buffer(corpus / "expected" / f"{name}.ppl.xz")]
    options = DecodeOptions(src_addr_n=(variant == "src_addr_n"), decode_before_sync=False)
    session = Session(snap, options)
    lines: list[str] = []
    for bname in buffers:
        decoded = session.open_buffer(snap.buffer(bname))
        lines.append(f"Using {bname} as trace source")
        for run in decoded.runs:
            lines.extend(listing_lines(run))
    return lines
