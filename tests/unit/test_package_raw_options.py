"""Raw-capture options: shared settings apply where they fit; an ID can be left out."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cstrace.cli import main
from tests.conftest import ROOT

CAPTURE = ROOT / "examples" / "etm_demo" / "etb_0.bin"


def test_protocol_none_leaves_a_trace_id_out(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["decode", str(CAPTURE), "--protocol", "0x10=none"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "trace ID 0x20" in out and "trace ID 0x10" not in out


def test_shared_setting_goes_only_where_it_is_known(capsys: pytest.CaptureFixture[str]) -> None:
    # cyclecount is an ETMv4 item: the STM source must not reject it.
    code = main(["decode", str(CAPTURE), "--protocol", "0x10=none", "--set", "cyclecount=0"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "no trace source of this capture has that option" in err
    code = main(["decode", str(CAPTURE), "--set", "cyclecount=0", "--core", "Cortex-A53"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "unknown item" not in err
    # The ETMv4 keeps what was given; the rest of its settings are inferred.
    head = [ln for ln in out.splitlines() if ln.startswith("# configuration")]
    assert len(head) == 1 and "trace ID 0x10" in head[0]
    assert "on Cortex-A53" in head[0] and "cyclecount=0" in head[0]


def test_package_file_gets_the_usual_mode(tmp_path: Path) -> None:
    out = tmp_path / "p.zip"
    assert main(["package", str(ROOT / "examples" / "stm_demo"), str(out)]) == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


ETM_SETTINGS = [
    "--core",
    "Cortex-A53",
    *("--set", "0x10:cyclecount=0", "--set", "0x10:context_id=32", "--set", "0x10:vmid=0"),
    *("--set", "0x10:timestamp_bits=64", "--set", "0x10:return_stack=0"),
    *("--set", "0x10:conditional=none", "--set", "0x10:commit_opt=0"),
]


def _body(listing: str) -> list[str]:
    """The element lines of a text listing (buffer and source names left out)."""
    return [line for line in listing.splitlines() if not line.startswith("#")]


def test_package_of_a_raw_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = ROOT / "examples" / "etm_demo"
    memory = [
        *("--memory", f"{demo / 'user.bin'}@0x400000"),
        *("--memory", f"{demo / 'kernel.bin'}@0xffffffc000080400"),
    ]
    out = tmp_path / "raw.zip"
    assert main(["package", str(CAPTURE), str(out), *memory, *ETM_SETTINGS]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["decode", str(demo)]) == 0
    want = _body(capsys.readouterr().out)
    assert main(["decode", str(out)]) == 0
    got = _body(capsys.readouterr().out)
    assert "INSTR_RANGE" in "\n".join(want) and got == want
    # Without the settings they are inferred (the protocol named: nothing in this trace
    # tells ETMv4 from ETE), and the package keeps them: the same elements again.
    inferred = tmp_path / "inferred.zip"
    assert main(["package", str(CAPTURE), str(inferred), *memory, "--protocol=0x10=etmv4"]) == 0
    capsys.readouterr()
    assert main(["decode", str(inferred)]) == 0
    assert _body(capsys.readouterr().out) == want
