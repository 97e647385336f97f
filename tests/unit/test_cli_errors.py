"""Bad input on the command line: one line on stderr naming the place, exit status 2."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from cstrace.cli import main
from cstrace.protocols import find_protocol
from tests.snapshots import Buffer, Core, Source, make_snapshot

STM = Source("STM_0", "STM", {"STMTCSR": 0x00A00007})


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("cstrace: error:")]


def assert_one_line_error(err: str, *needles: str) -> None:
    lines = error_lines(err)
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_missing_snapshot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "decode", str(tmp_path / "nope"))
    assert code == 2
    assert_one_line_error(err, "nope")


def test_folder_without_snapshot_ini(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "decode", str(tmp_path))
    assert code == 2
    assert_one_line_error(err, "snapshot.ini")


def test_garbled_snapshot_ini(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    rng = random.Random(3)
    (snap / "snapshot.ini").write_bytes(bytes(rng.randrange(1, 256) for _ in range(300)))
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "snapshot.ini", "line")


def test_random_bytes_with_nul(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    (snap / "trace.ini").write_bytes(b"[trace_buffers]\nbuffers=\x00\x01\x02")
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "trace.ini", "offset")


def test_malformed_section_header(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    text = (snap / "trace.ini").read_text().replace("[buffer0]", "[buffer0")
    (snap / "trace.ini").write_text(text)
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "trace.ini", "line 4")


def test_missing_device_ini(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    (snap / "STM_0.ini").unlink()
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "snapshot.ini", "line", "STM_0.ini")


@pytest.mark.parametrize(
    "path", ["../outside.bin", "/etc/passwd", "a/../../outside.bin", "..\\outside.bin"]
)
def test_path_outside_snapshot_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: str
) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    (tmp_path / "outside.bin").write_bytes(bytes(32))
    text = (snap / "trace.ini").read_text().replace("file=ETB_0.bin", f"file={path}")
    (snap / "trace.ini").write_text(text)
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "trace.ini", "line", "refused")


def test_symlink_outside_snapshot_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    (tmp_path / "secret.bin").write_bytes(bytes(32))
    (snap / "ETB_0.bin").unlink()
    os.symlink(tmp_path / "secret.bin", snap / "ETB_0.bin")
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "ETB_0.bin", "outside")


@pytest.mark.skipif(find_protocol("STM") is None, reason="STM decoder not available")
def test_register_not_a_number(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = Source("STM_0", "STM", {"STMTCSR": "0xZZ12"})
    snap = make_snapshot(tmp_path / "s", [bad], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "STM_0.ini", "line 7", "not a number")


def test_dump_address_not_a_number(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    (snap / "core.ini").write_text(
        "[device]\nname=core\nclass=core\ntype=Cortex-A53\n[dump1]\nfile=x.bin\naddress=12k\n"
    )
    text = (snap / "snapshot.ini").read_text().replace("[device_list]", "[device_list]\nc=core.ini")
    (snap / "snapshot.ini").write_text(text)
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "core.ini", "line 7", "not a number")


def test_empty_buffer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", b"", ["STM_0"])])
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "ETB_0.bin", "empty")


def test_truncated_buffer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(40), ["STM_0"])])
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "ETB_0.bin", "offset 0x20", "not a multiple of 16")


def test_unknown_buffer_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    code, _, err = run(capsys, "decode", str(snap), "--buffer", "ETB_9")
    assert code == 2
    assert_one_line_error(err, "ETB_9", "ETB_0")


def test_unknown_format_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(
        tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"], format="mystery")]
    )
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 2
    assert_one_line_error(err, "mystery")


def test_random_trace_bytes_decode_without_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rng = random.Random(9)
    data = bytes(rng.randrange(256) for _ in range(16 * 64))
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", data, ["STM_0"])])
    code, _, err = run(capsys, "decode", str(snap), "--format", "ocsd")
    assert code == 0, err
    assert "Traceback" not in err


def test_missing_dump_is_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    (snap / "core.ini").write_text(
        "[device]\nname=core\nclass=core\ntype=Cortex-A53\n[dump1]\nfile=gone.bin\naddress=0x1000\n"
    )
    text = (snap / "snapshot.ini").read_text().replace("[device_list]", "[device_list]\nc=core.ini")
    (snap / "snapshot.ini").write_text(text)
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 0, err
    assert "warning" in err and "gone.bin" in err


def test_unwritable_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "s", [STM], [Buffer("ETB_0", bytes(32), ["STM_0"])])
    code, _, err = run(capsys, "decode", str(snap), "-o", str(tmp_path / "no" / "such" / "x"))
    assert code == 2
    assert_one_line_error(err, "x")


def test_bad_source_skipped_others_decoded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # One source lacks its registers: it is reported and skipped, the other is decoded.
    from cstrace.capture.encode import format_frames
    from cstrace.protocols.stm.encoder import StmMessage, encode_messages

    good = Source("STM_0", "STM", {"STMTCSR": 0x00A00007})
    bad = Source("STM_1", "STM", {})
    stp = encode_messages([StmMessage(0x41, 1, 0x1234, bits=16)])
    data = format_frames([(0x20, stp)])
    snap = make_snapshot(tmp_path / "s", [good, bad], [Buffer("ETB_0", data, ["STM_0", "STM_1"])])
    code, out, err = run(capsys, "decode", str(snap), "--format", "ocsd")
    assert code == 2
    assert_one_line_error(err, "STM_1.ini", "STMTCSR")
    assert "OCSD_GEN_TRC_ELEM_SWTRACE" in out


def test_overlapping_memory_dumps_are_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Two dumps of the traced core at overlapping addresses in one memory space: the
    # second is left out, as the reference does, and the user is told once.
    core = Core(
        "cpu_0",
        "Cortex-A53",
        [("a.bin", 0x1000, bytes(64), "ANY"), ("b.bin", 0x1020, bytes(64), "ANY")],
    )
    regs = {"TRCCONFIGR": 1, "TRCTRACEIDR": 0x10, "TRCIDR0": 0x28000EA1, "TRCIDR2": 0x488}
    etm = Source("ETM_0", "ETM4", regs, core="cpu_0")
    snap = make_snapshot(tmp_path / "s", [etm], [Buffer("ETB_0", bytes(32), ["ETM_0"])], [core])
    code, _, err = run(capsys, "decode", str(snap))
    assert code == 0, err
    warnings = [w for w in err.splitlines() if "overlaps" in w]
    assert len(warnings) == 1 and "b.bin" in warnings[0] and "cpu_0.ini" in warnings[0]
