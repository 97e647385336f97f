"""Hostile and damaged inputs (issue 26): a one-line located error or a counted loss, never a
traceback, nothing read outside the folders given, every lost byte reported.

Each case of the issue is made here from the example snapshot (``examples/etm_demo``:
an ETMv4 and an STM source in one ETB) or small hand-made captures.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from cstrace.capture.encode import format_frames
from cstrace.cli import main
from cstrace.inputs.files import beneath
from cstrace.inputs.symbols import ImageSearch, SymbolPaths
from cstrace.protocols.etmv4 import encoder as enc
from tests.snapshots import Buffer, Source, make_snapshot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def demo(tmp_path: Path) -> Path:
    """A writable copy of the example snapshot."""
    out = tmp_path / "demo"
    shutil.copytree(EXAMPLES / "etm_demo", out)
    return out


def edit(path: Path, old: str, new: str) -> int:
    """Replace the line starting with ``old`` by ``new``; returns its line number."""
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(old))
    lines[at] = new
    path.write_text("\n".join(lines) + "\n")
    return at + 1


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def one_error(err: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("cstrace: error:")]
    assert len(errors) == 1, err
    return errors[0]


# -- values wider than their register ---------------------------------------------------------


@pytest.mark.parametrize("value", ["0x80000000", "0xFFFFFFFF", "0xFFFFFFFFFFFFFFFF"])
def test_wide_speculation_depth_registers_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    snap = demo(tmp_path)
    edit(snap / "ETM_0.ini", "TRCIDR8", f"TRCIDR8(0x060)={value}")
    code, _, _ = run(capsys, "decode", str(snap), "--format", "null")
    assert code == 0


def test_a_register_wider_than_64_bits_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = demo(tmp_path)
    line = edit(snap / "ETM_0.ini", "TRCIDR0", "TRCIDR0(0x078)=0x1" + "0" * 17)
    code, _, err = run(capsys, "decode", str(snap), "--format", "null")
    assert code == 2
    assert f"ETM_0.ini: line {line}: register TRCIDR0" in one_error(err)


# -- names too long, unknown formats, ZIP features --------------------------------------------


@pytest.mark.parametrize(("ini", "key"), [("trace.ini", "file="), ("snapshot.ini", "device0=")])
def test_a_file_name_too_long_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ini: str, key: str
) -> None:
    snap = demo(tmp_path)
    line = edit(snap / ini, key, key + "a" * 256)
    code, _, err = run(capsys, "decode", str(snap), "--format", "null")
    assert code == 2
    assert f"{ini}: line {line}: file name too long" in one_error(err)


def test_an_unknown_buffer_format_names_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = demo(tmp_path)
    line = edit(snap / "trace.ini", "format=", "format=bogus")
    code, _, err = run(capsys, "decode", str(snap), "--format", "null")
    assert code == 2
    assert f"trace.ini: line {line}: unknown trace buffer format 'bogus'" in one_error(err)


def test_a_long_bad_line_gives_one_short_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A metadata line of 64 KiB of 0xFF bytes (found by the fuzz campaign): the error names
    the file and line and quotes only the start of it."""
    snap = demo(tmp_path)
    ini = snap / "ETM_0.ini"
    lines = ini.read_bytes().splitlines()
    ini.write_bytes(b"\n".join([*lines[:3], b"\xff" * 65536, *lines[3:]]) + b"\n")
    code, _, err = run(capsys, "decode", str(snap), "--format", "null")
    assert code == 2
    line = one_error(err)
    assert "ETM_0.ini: line 4: expected 'key=value'" in line, line
    assert "(65536 characters)" in line and len(line) < 300, line


def test_every_error_message_is_one_bounded_line() -> None:
    from cstrace.errors import MESSAGE_LIMIT, InputError

    text = str(InputError("first\nsecond " + "x" * 10_000, path="f.ini", line=3))
    assert "\n" not in text and text.startswith("f.ini: line 3: first second ")
    assert len(text) < MESSAGE_LIMIT + 60 and text.endswith("more characters)")


def test_a_zip_needing_version_8_4_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pkg = tmp_path / "demo.zip"
    assert run(capsys, "package", str(EXAMPLES / "etm_demo"), str(pkg))[0] == 0
    data = bytearray(pkg.read_bytes())
    central = data.find(b"PK\x01\x02")
    struct.pack_into("<H", data, central + 6, 84)  # version needed to extract: 8.4
    pkg.write_bytes(bytes(data))
    for argv in (["decode", str(pkg)], ["info", str(pkg)], ["package", str(pkg), "out.zip"]):
        code, _, err = run(capsys, *argv)
        assert code == 2
        assert "unsupported ZIP archive (zip file version 8.4)" in one_error(err)


# -- names from a recording stay inside the folders given -------------------------------------


def test_names_from_a_recording_stay_inside_the_folders(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "app").write_bytes(b"\x7fELF not really")
    symfs = tmp_path / "root"
    (symfs / "lib").mkdir(parents=True)
    (symfs / "lib" / "ok").write_bytes(b"x")
    (symfs / "lib" / "out").symlink_to(outside / "app")
    (symfs / "lib" / "rel").symlink_to("../../outside/app")
    assert beneath(symfs, "/lib/ok") == symfs.resolve() / "lib" / "ok"
    assert beneath(symfs, "/lib/../lib/ok") == symfs.resolve() / "lib" / "ok"
    for name in ("/../outside/app", "/lib/../../outside/app", "/lib/out", "/lib/rel"):
        assert beneath(symfs, name) is None, name
    search = ImageSearch(SymbolPaths(symfs=str(symfs), buildid_dir=str(symfs)))
    assert search.find("/../outside/app", None) is None
    assert search.find("/../outside/app", b"\1" * 20) is None
    assert search.find("/lib/ok", None) is not None


# -- every lost byte reported -----------------------------------------------------------------

ETM4 = {"TRCCONFIGR": 0x1, "TRCTRACEIDR": 0x10, "TRCIDR0": 0x28000EA1, "TRCIDR1": 0x4100F403,
        "TRCIDR2": 0x488}  # fmt: skip
TRACE = enc.a_sync() + enc.trace_info(0) + enc.trace_on() + enc.address_long(0x1000) + enc.atom("E")


def test_bytes_on_trace_ids_with_no_source_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (the encoder refuses the reserved ID 0x7f: its data is written as 0x6f's, then renamed)
    frames = bytearray(format_frames([(0x10, TRACE), (0x6F, b"\x11" * 21), (0x33, b"\x22" * 9)]))
    for at in range(0, len(frames), 2):
        if at % 16 != 15 and frames[at] == (0x6F << 1) | 1:
            frames[at] = (0x7F << 1) | 1
    snap = make_snapshot(
        tmp_path / "s", [Source("etm", "ETM4", ETM4)], [Buffer("b", frames, ["etm"])]
    )
    code, _, err = run(capsys, "decode", str(snap), "--format", "null")
    assert code == 0
    assert "buffer b, trace ID 0x33: 9 bytes, not decoded: no trace source" in err
    assert "buffer b, trace ID 0x7f: 21 bytes, not decoded: reserved trace ID" in err
    code, out, _ = run(capsys, "decode", str(snap), "--format", "jsonl")
    summary = json.loads(out.splitlines()[-1])["summary"]
    gone = {n["trace_id"]: n["bytes"] for n in summary["not_decoded"]}
    assert gone == {0x33: 9, 0x7F: 21}
    (cap,) = summary["captures"]
    parts = ("decoded", "unsourced", "padding", "no_id", "overhead", "after_stop", "trailing")
    assert sum(cap[k] for k in parts) == cap["size"] == len(frames)
    assert cap["decoded"] == len(TRACE) and cap["unsourced"] == 30


def test_packets_skipped_waiting_for_a_trace_info_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the trace info's header damaged into a trace-on: the decoder waits for one to the end
    rest = enc.trace_on() + enc.address_long(0x1000) + enc.atom("E")
    damaged = enc.a_sync() + b"\x04" + rest * 4
    snap = make_snapshot(
        tmp_path / "s",
        [Source("etm", "ETM4", ETM4)],
        [Buffer("b", damaged, ["etm"], "source_data")],
    )
    code, out, err = run(capsys, "decode", str(snap), "--format", "jsonl")
    assert code == 0
    (src,) = json.loads(out.splitlines()[-1])["summary"]["sources"]
    assert src["sync_wait_bytes"] == len(damaged) - 12  # all but the A-sync
    assert src["unsynced_bytes"] == 0
    code, _, err = run(capsys, "decode", str(snap), "--format", "null")
    assert "skipped waiting for synchronisation: " in err and "lost: nothing" not in err


def test_where_an_itm_listing_stops_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sync = b"\x00" * 5 + b"\x80"
    itm = sync + b"\x01\x41" + b"\x04" + b"\x01\x42" * 20  # a reserved header after one write
    snap = make_snapshot(
        tmp_path / "s",
        [Source("itm", "ITM", {"ITMTCR": 0x00200310})],
        [Buffer("b", itm, ["itm"], "source_data")],
    )
    for fmt in (["--format", "ocsd"], ["--format", "null", "--before-sync", "wait"]):
        code, _, err = run(capsys, "decode", str(snap), *fmt)
        assert code == 0
        assert "decoding stopped at 8 (reading stops after a reserved header): 40 bytes" in err


def test_a_long_run_of_zeros_is_idle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zeros = bytes(8 << 20)
    snap = make_snapshot(
        tmp_path / "s",
        [Source("itm", "ITM", {"ITMTCR": 0x00200310})],
        [Buffer("b", zeros, ["itm"], "source_data")],
    )
    code, out, _ = run(capsys, "decode", str(snap), "--format", "jsonl")
    assert code == 0
    (src,) = json.loads(out.splitlines()[-1])["summary"]["sources"]
    assert src["bytes"] == len(zeros) and src["idle_bytes"] > len(zeros) - 64 * 1024


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_by_a_snapshot_is_not_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = demo(tmp_path)
    os.mkfifo(snap / "fifo.bin")
    edit(snap / "trace.ini", "file=", "file=fifo.bin")
    code, _, err = run(capsys, "decode", str(snap), "--format", "null")
    assert code == 2 and "fifo.bin" in one_error(err)
