"""The examples of docs/metadata.md are complete and valid: each one is parsed here."""

from __future__ import annotations

from pathlib import Path

from cstrace.inputs.metadata import parse_metadata, parse_metadata_text
from cstrace.memory.events import AsidEvent, PatchEvent, ProcessEvent, TraceEvent, parse_event_log

DOC = Path(__file__).resolve().parents[2] / "docs" / "metadata.md"


def blocks(lang: str) -> list[str]:
    """The fenced code blocks of the page written with language ``lang`` ("" for none)."""
    out: list[str] = []
    current: list[str] | None = None
    current_lang = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if current is None:
                current, current_lang = [], line[3:].strip()
            else:
                if current_lang == lang:
                    out.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return out


def test_metadata_example_parses() -> None:
    meta_text = next(b for b in blocks("ini") if "[trace_0x10]" in b)
    meta = parse_metadata(meta_text, "docs example")
    assert meta.buffer.format == "coresight"
    assert [t.trace_id for t in meta.traces] == [0x10, 0x11, 0x20]
    etm = meta.trace(0x10)
    assert etm is not None and etm.device.device_type == "ETM4.2"
    assert etm.core_type == "Cortex-A53"


def test_contents_example_is_well_formed() -> None:
    contents = next(b for b in blocks("ini") if "[trace]" in b and "buffer0" in b)
    ini = parse_metadata_text(contents, "contents.ini")
    trace = ini.section("trace")
    assert trace is not None
    assert trace.get("metadata") == "trace.ini" and trace.get("events") == "system-event-log"
    assert ini.section("buffer1") is not None and ini.section("memory_0") is not None


def test_event_log_example_parses() -> None:
    log_text = next(b for b in blocks("") if "declare_process" in b)
    log = parse_event_log(log_text, "docs example")
    kinds = {type(e) for e in log.events}
    assert {ProcessEvent, AsidEvent, PatchEvent, TraceEvent} <= kinds
    assert len(log.events) == 11
