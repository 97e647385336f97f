"""Every corpus snapshot, written as a trace package ZIP, decodes to the snapshot's own listing.

Also: ``cstrace info`` names the right format, trace IDs and protocols for every
buffer of the corpus from the buffer file alone. Skipped without the corpus.
"""

from __future__ import annotations

import io
import itertools
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from cstrace.capture import demux
from cstrace.cli import main
from cstrace.decode import Session
from cstrace.inputs import open_trace_input, read_snapshot, write_package
from cstrace.inputs.metadata import family_of, trace_id_of
from cstrace.memory.build import CodeMemories
from cstrace.protocols import DecodeOptions
from cstrace.render.ocsd import listing_lines
from cstrace.trace import Trace
from tests.conftest import corpus_dir

_CORPUS = corpus_dir()
SNAPSHOTS = (
    sorted(p.name for p in (_CORPUS / "snapshots").iterdir() if p.is_dir())
    if _CORPUS is not None
    else ["<corpus absent>"]
)
MAX_LINES = 50_000
"""Listing lines compared per snapshot (the whole model is compared as well)."""


def listing(snap: Trace, src_addr_n: bool = False) -> list[str]:
    session = Session(snap, DecodeOptions(src_addr_n=src_addr_n, decode_before_sync=False))

    def lines() -> object:
        for b in snap.buffers:
            decoded = session.open_buffer(b)
            yield f"Using {b.name} as trace source"
            for run in decoded.runs:
                yield from listing_lines(run)

    return list(itertools.islice(lines(), MAX_LINES))  # type: ignore[call-overload]


def model(snap: Trace) -> list[object]:
    """Everything the decode of a trace depends on, in order."""
    out: list[object] = []
    memories = CodeMemories(snap)
    for b in snap.buffers:
        out.append((b.name, b.format, b.read()))
        for s in snap.sources_for(b):
            mem = memories.static_map(s.core_name)
            out.append((s.name, s.protocol, s.source_type, dict(s.registers), s.core, s.core_name))
            out.append([(r.start, r.data, r.space) for r in mem.regions])
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("name", SNAPSHOTS)
def test_package_decodes_like_the_snapshot(corpus: Path, name: str, tmp_path: Path) -> None:
    snap = read_snapshot(corpus / "snapshots" / name)
    out = tmp_path / f"{name}.zip"
    write_package(snap, out)
    pkg = open_trace_input(out)
    assert [b.name for b in pkg.buffers] == [b.name for b in snap.buffers]
    assert model(pkg) == model(snap)
    assert listing(pkg) == listing(snap)


def _expected_streams(snap: Trace, buffer_name: str) -> dict[int | None, str]:
    """Trace ID (None when single-source) → protocol family, for sources with data."""
    b = snap.buffer(buffer_name)
    single = b.format == "source_data"
    result = demux(b.read(), b.format)
    sources = snap.sources_for(b)[:1] if single else snap.sources_for(b)
    out: dict[int | None, str] = {}
    for s in sources:
        tid = trace_id_of(s)
        stream = result.streams.get(0 if single else tid)  # type: ignore[arg-type]
        if stream is not None and len(stream.data) > 0:
            fam = family_of(s.source_type)
            out[None if single else tid] = "etm4" if fam == "ete" else fam
    return out


_NAMES = {
    "ETMv4/ETE": "etm4",
    "PTM (PFT)": "ptm",
    "ETMv3": "etm3",
    "STM (STPv2)": "stm",
    "ITM": "itm",
}
_LINE = re.compile(r"^  (single source|trace ID 0x([0-9a-f]+)): \d+ bytes: (.+?) \(confidence")


@pytest.mark.corpus
@pytest.mark.parametrize("name", SNAPSHOTS)
def test_info_names_protocols_and_trace_ids(corpus: Path, name: str) -> None:
    snap = read_snapshot(corpus / "snapshots" / name)
    for b in snap.buffers:
        (file,) = b.files
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(["info", file.name]) == 0
        text = out.getvalue()
        assert f"format: {b.format} " in text, text
        found: dict[int | None, str] = {}
        for line in text.splitlines():
            m = _LINE.match(line)
            if m and m.group(3) in _NAMES:
                tid = None if m.group(2) is None else int(m.group(2), 16)
                found[tid] = _NAMES[m.group(3)]
        assert found == _expected_streams(snap, b.name), text
