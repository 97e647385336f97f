"""What the trace lost, on the command line: the summary of ``decode`` and ``cstrace info``."""

from __future__ import annotations

import json

import pytest

from cstrace.cli import main
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"


CAPTURE = (
    "buffer ETB_0 (coresight): 160 bytes: 136 trace data decoded, 8 padding (trace ID 0x00), "
    "16 frame ID and flag bytes"
)
"""Where every byte of the example's capture went."""


@pytest.mark.parametrize("fmt", ["text", "ocsd"])
def test_decode_summary_goes_to_stderr(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", str(EXAMPLES / "etm_demo"), "--format", fmt, "--no-summary"]) == 0
    quiet_out, quiet_err = capsys.readouterr()
    assert quiet_err == ""
    assert main(["decode", str(EXAMPLES / "etm_demo"), "--format", fmt]) == 0
    out, err = capsys.readouterr()
    assert out == quiet_out
    assert err.splitlines()[:3] == [
        "summary:",
        f"  {CAPTURE}",
        "  buffer ETB_0, trace ID 0x10 (ETM_0, etmv4): 102 bytes, 23 packets, 31 elements",
    ]


def test_jsonl_ends_with_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", str(EXAMPLES / "etm_demo"), "--format", "jsonl"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    summary = json.loads(lines[-1])["summary"]
    assert [s["trace_id"] for s in summary["sources"]] == [0x10, 0x20]
    assert summary["sources"][0]["elements"] == len(lines) - 1 - 4  # the STM's 4 elements
    assert all("summary" not in json.loads(line) for line in lines[:-1])
    assert main(["decode", str(EXAMPLES / "etm_demo"), "--format", "jsonl", "--no-summary"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(lines) - 1


def test_info_on_a_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(EXAMPLES / "etm_demo")]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("what the trace lost (decoded):")
    assert out[start + 1] == f"  {CAPTURE}"
    assert out[start + 2] == (
        "  buffer ETB_0, trace ID 0x10 (ETM_0, etmv4): 102 bytes, 23 packets, 31 elements"
    )
    assert main(["info", str(EXAMPLES / "etm_demo"), "--no-decode"]) == 0
    assert "what the trace lost (decoded):" not in capsys.readouterr().out


def test_info_on_a_raw_capture_decodes_what_it_can(capsys: pytest.CaptureFixture[str]) -> None:
    raw = EXAMPLES / "etm_demo" / "etb_0.bin"
    # a setting no ETMv4 can have: the capture cannot be decoded whole
    assert main(["info", str(raw), "--set", "0x10:context_id=7"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("what the trace lost (decoded):")
    # each trace ID on its own: the STM decodes; the ETM is listed with its size and why
    assert (
        out[start + 1]
        == "  buffer etb_0.bin, trace ID 0x20 (trace_0x20, stm): 34 bytes, 9 packets, 4 elements"
    )
    gone = [line for line in out[start:] if "not decoded" in line]
    assert gone == [
        "  buffer etb_0.bin, trace ID 0x10: 102 bytes, not decoded: cannot be configured: "
        "command line: context_id: 7 is not one of 0, 32"
    ]
    # with the options that describe it, it decodes
    settings = ["cyclecount=0", "context_id=32", "vmid=0", "timestamp_bits=64"]
    settings += ["return_stack=0", "conditional=none", "commit_opt=0"]
    args = ["info", str(raw), "--core", "Cortex-A53", "--capture-format", "coresight"]
    args += [f"--set=0x10:{s}" for s in settings]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "buffer etb_0.bin, trace ID 0x10 (trace_0x10, etmv4): 102 bytes, 23 packets" in out
    # no code memory given: every address is missing, grouped into ranges
    assert "no memory image" in out and "0x400000-" in out
