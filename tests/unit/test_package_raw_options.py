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
    _, err = capsys.readouterr()
    assert code == 2
    assert "unknown item" not in err and "[trace_0x10]" in err  # only the ETMv4 wants more


def test_package_file_gets_the_usual_mode(tmp_path: Path) -> None:
    out = tmp_path / "p.zip"
    assert main(["package", str(ROOT / "examples" / "stm_demo"), str(out)]) == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
