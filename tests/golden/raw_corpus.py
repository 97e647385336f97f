"""Corpus snapshots given as raw captures: the trace buffer and its memory dumps, nothing else.

For the inference test of configuration (issue 11): each expected listing's
buffer is written out as a plain file, and each memory dump the snapshot
describes is sliced (offset, length) into its own file, named on the command
line as ``FILE@ADDRESS``. No registers, no core type, no protocol, no capture
format: everything else must be found from the bytes.
"""

from __future__ import annotations

import lzma
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cstrace.decode import Session
from cstrace.inputs import Extras, RawOptions, open_input, read_snapshot
from cstrace.protocols import DecodeOptions
from cstrace.render.ocsd import listing_lines
from cstrace.trace import Trace
from tests.golden.corpus import using_buffer


@dataclass
class RawCase:
    """A corpus listing as a raw capture and the memory files to give with it."""

    name: str
    capture: Path
    memory: list[str]
    trace_id: int | None = None
    """For a single-source buffer, the trace ID that labels it (the data cannot say it)."""


def raw_case(corpus: Path, name: str, work: Path) -> RawCase:
    """Write the buffer and the sliced memory dumps of listing ``name`` under ``work``."""
    base, _, variant = name.partition("@")
    snap = read_snapshot(corpus / "snapshots" / base)
    if variant == "multi_session":
        raise ValueError("multi-session listings decode several buffers")
    buffer = snap.buffer(using_buffer(corpus / "expected" / f"{name}.ppl.xz"))
    work.mkdir(parents=True, exist_ok=True)
    capture = work / f"{base}.bin"
    capture.write_bytes(buffer.read())
    memory: list[str] = []
    seen: set[tuple[int, bytes]] = set()
    for k, dump in enumerate(snap.dumps):
        if not dump.file.exists():
            continue  # the snapshot names a file it does not hold
        data = dump.file.read()
        end = len(data) if dump.length is None else min(len(data), dump.offset + dump.length)
        piece = data[dump.offset : end]
        if (dump.address, piece) in seen or not piece:
            continue
        seen.add((dump.address, piece))
        path = work / f"{base}.mem{k}.bin"
        path.write_bytes(piece)
        memory.append(f"{path}@{dump.address:#x}")
    label = None
    if buffer.format == "source_data":
        sources = snap.sources_for(buffer)
        if sources:
            label = _source_trace_id(sources[0].registers)
    return RawCase(name, capture, memory, label)


def _source_trace_id(regs: Mapping[str, int]) -> int | None:
    for name in ("TRCTRACEIDR", "ETMTRACEIDR"):
        if name in regs:
            return regs[name] & 0x7F
    return None


def open_case(case: RawCase) -> Trace:
    """The raw capture with its memory, as ``cstrace decode CAPTURE --memory ...`` opens it."""
    return open_input(
        case.capture, Extras(memory=list(case.memory)), RawOptions(trace_id=case.trace_id)
    )


def raw_listing(case: RawCase) -> list[str]:
    """The OpenCSD-format listing of the raw capture, decoded with inferred configuration."""
    trace = open_case(case)
    # The OpenCSD listing waits for synchronisation, as --format ocsd does.
    session = Session(trace, DecodeOptions(decode_before_sync=False))
    lines: list[str] = []
    for buffer in trace.buffers:
        decoded = session.open_buffer(buffer)
        lines.append(f"Using {buffer.name} as trace source")
        for run in decoded.runs:
            lines.extend(listing_lines(run))
    return lines


def expected_listing(corpus: Path, name: str) -> list[str]:
    """The reference listing of ``name``."""
    with lzma.open(corpus / "expected" / f"{name}.ppl.xz", "rt") as f:
        return f.read().splitlines()
