"""``cstrace decode`` reads every classic capture format from a snapshot (examples/classic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cstrace.cli import main
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples" / "classic"
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "snapshot.ini").exists())


def _jsonl(name: str, tmp_path: Path, *extra: str) -> list[dict[str, object]]:
    """The element objects of the JSON Lines output (the closing summary left out)."""
    out = tmp_path / f"{name}.jsonl"
    assert main(["decode", str(EXAMPLES / name), "--format", "jsonl", "-o", str(out), *extra]) == 0
    *elements, summary = [json.loads(line) for line in out.read_text().splitlines()]
    assert list(summary) == ["summary"]
    return elements


def test_all_formats_have_an_example() -> None:
    fmts = {
        line.split("=", 1)[1].strip()
        for n in NAMES
        for line in (EXAMPLES / n / "trace.ini").read_text().splitlines()
        if line.startswith("format=")
    }
    assert fmts == {
        "etm_etb",
        "etm_cycles",
        "etm_cycles_text",
        "etm_port",
        "xscale_tb",
        "dcc_words",
    }


@pytest.mark.parametrize("name", [n for n in NAMES if n != "dcc"])
def test_program_examples_decode(name: str, tmp_path: Path) -> None:
    elements = _jsonl(name, tmp_path)
    ranges = [e for e in elements if e["type"] == "INSTR_RANGE"]
    assert ranges and ranges[0]["start"] == 0x8000
    assert sum(int(e["num_instr"]) for e in ranges) >= 100  # type: ignore[call-overload]
    # The same program: every example follows the same first ranges.
    firsts = [(e["start"], e["end"]) for e in ranges[:4]]
    assert firsts == [(0x8000, 0x8014), (0x8024, 0x8030), (0x8026, 0x8030), (0x8026, 0x8030)]
    for fmt in ("text", "ocsd"):
        assert (
            main(["decode", str(EXAMPLES / name), "--format", fmt, "-o", str(tmp_path / fmt)]) == 0
        )


def test_dcc_example(tmp_path: Path) -> None:
    # The ASCII debug message is one string; its bytes stay available.
    sw = [e for e in _jsonl("dcc", tmp_path) if e["type"] == "SWTRACE"]
    ascii_ = [e for e in sw if e["master"] == 1 and e["channel"] == 0]
    assert [e["text"] for e in ascii_] == ["hello from the target"]
    assert bytes(ascii_[0]["payloads"]) == b"hello from the target"  # type: ignore[call-overload]
    assert [e["payload"] for e in sw if e["master"] == 0] == [1, 2]
    # --no-strings: one object per byte, as decoded.
    raw = [e for e in _jsonl("dcc", tmp_path, "--no-strings") if e["type"] == "SWTRACE"]
    text = bytes(int(e["payload"]) for e in raw if e["master"] == 1 and e["channel"] == 0)  # type: ignore[call-overload]
    assert text == b"hello from the target"


def test_etmcr_option_overrides_the_register(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The 16-bit text capture declared as an 8-bit port: a clear error, exit status 2.
    out = tmp_path / "x"
    args = ["decode", str(EXAMPLES / "etmv1_text"), "-o", str(out), "--etmcr", "0x10"]
    assert main(args) == 2
    assert "wider than the 8-bit port" in capsys.readouterr().err
