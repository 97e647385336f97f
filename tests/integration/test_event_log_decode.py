"""End to end: two processes with different code at the same addresses, told apart by context ID.

A trace package (folder and ZIP) holds PTM trace built with the PTM encoder,
two ELF executables linked at the same address, the INI metadata written with
individual options only, and a system event log. The trace switches between
the processes with I-sync packets carrying CONTEXTIDR; the decoded instruction
ranges show which image was used. Both CONTEXTIDR conventions of the metadata
requirements §5.7 are exercised, as is a log that starts mid-run and events
applied in timestamp order.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cstrace.decode import Session
from cstrace.elements import AddrNacc, Element, InstrRange
from cstrace.inputs import open_trace_input
from cstrace.protocols import find_protocol
from tests.integration.elfgen import executable

pytestmark = pytest.mark.skipif(find_protocol("PTM1.1") is None, reason="no PTM decoder")

NOP = bytes.fromhex("00f020e3")


def b_to(at: int, target: int) -> bytes:
    """A32 ``B target`` placed at ``at``."""
    return (0xEA000000 | (((target - at - 8) >> 2) & 0xFFFFFF)).to_bytes(4, "little")


# Process A at 0x8000: nop, nop, b 0x8010 (3 instructions to the branch).
A_CODE = NOP + NOP + b_to(0x8008, 0x8010) + NOP + NOP + b_to(0x8014, 0x8000)
# Process B at 0x8000: nop, b 0x8020 (2 instructions to the branch).
B_CODE = NOP + b_to(0x8004, 0x8020) + NOP * 6 + NOP + b_to(0x8024, 0x8000)
# Process C (reusing A's pid later): b 0x8000 straight away (1 instruction).
C_CODE = b_to(0x8000, 0x8000) + NOP * 3

METADATA = """\
[buffer]
format: source_data

[trace_0x10]
format: PFT1.1
name: PTM_0
core: Cortex-A9
core_name: cpu_0
cyclecount: 0
context_id: 32
vmid: 0
timestamp_bits: 48
timestamp_gray: 0
return_stack: 0
dmb_dsb_waypoints: 0
"""


def trace(steps: list[tuple[int | None, int]]) -> bytes:
    """A-sync, then per step: an optional timestamp, an I-sync at 0x8000 with CONTEXTIDR, an E."""
    from cstrace.elements import Isa
    from cstrace.protocols.ptm.encoder import (
        encode_async,
        encode_atoms,
        encode_isync,
        encode_timestamp,
    )

    out = bytearray(encode_async())
    for ts, ctx in steps:
        if ts is not None:
            out += encode_timestamp(ts)
        out += encode_isync(0x8000, Isa.A32, ns=True, context_id=ctx, ctxt_id_bytes=4)
        out += encode_atoms([True])
    return bytes(out)


def make_package(
    root: Path,
    steps: list[tuple[int | None, int]],
    log: str,
    contextidr: str | None,
    images: str = "abc",
) -> Path:
    root.mkdir(parents=True)
    (root / "trace.bin").write_bytes(trace(steps))
    (root / "metadata.ini").write_text(METADATA)
    files = {
        "a": executable(A_CODE, 0x8000, build_id=b"\xaa" * 20),
        "b": executable(B_CODE, 0x8000, build_id=b"\xbb" * 20),
        "c": executable(C_CODE, 0x8000),
    }
    sections = ""
    for k, name in enumerate(images):
        (root / f"{name}.elf").write_bytes(files[name])
        sections += f"[image_{k}]\nfile = {name}.elf\n"
    (root / "events.log").write_text(log)
    extra = f"contextidr = {contextidr}\n" if contextidr else ""
    (root / "contents.ini").write_text(
        "[trace]\nmetadata = metadata.ini\nbuffer0 = trace.bin\nevents = events.log\n"
        + extra
        + "[buffer0]\nname = capture\n"
        + sections
    )
    return root


def ranges(path: Path) -> list[Element]:
    pkg = open_trace_input(path)
    session = Session(pkg)
    decoded = session.open_buffer(pkg.buffers[0])
    (run,) = decoded.runs
    return [e for e in run.elements() if isinstance(e, InstrRange | AddrNacc)]


def summary(elems: list[Element]) -> list[tuple[str, int, int]]:
    out = []
    for e in elems:
        if isinstance(e, InstrRange):
            out.append(("range", e.start, e.num_instr))
        elif isinstance(e, AddrNacc):
            out.append(("nacc", e.address, 0))
    return out


A_RANGE = ("range", 0x8000, 3)
B_RANGE = ("range", 0x8000, 2)
C_RANGE = ("range", 0x8000, 1)

PROCESSES = """\
0 declare_process(CURRENT, 0x4d2, 0x8000, "a.elf", "{a}")
0 declare_process(CURRENT, 0x162e, 0x8000, "b.elf")
""".format(a="aa" * 20)


@pytest.mark.parametrize("as_zip", [False, True])
def test_pid_in_contextidr(tmp_path: Path, as_zip: bool) -> None:
    # CONTEXTIDR = PID << 8 | ASID (ARMv7 Linux with CONFIG_PID_IN_CONTEXTIDR).
    a, b = (0x4D2 << 8) | 0x11, (0x162E << 8) | 0x22
    steps = [(None, a), (None, b), (None, a), (None, b)]
    path = make_package(tmp_path / "p", steps, PROCESSES, "pid")
    if as_zip:
        z = tmp_path / "p.zip"
        with zipfile.ZipFile(z, "w") as zf:
            for f in path.iterdir():
                zf.write(f, f.name)
        path = z
    assert summary(ranges(path)) == [A_RANGE, B_RANGE, A_RANGE, B_RANGE]


def test_asid_in_contextidr(tmp_path: Path) -> None:
    # CONTEXTIDR holds only the ASID; declare_asid maps it to the process.
    log = (
        PROCESSES + "0 declare_asid(CURRENT, 0x11, 0x4d2)\n0 declare_asid(CURRENT, 0x22, 0x162e)\n"
    )
    steps = [(None, 0x11), (None, 0x22), (None, 0x11)]
    path = make_package(tmp_path / "p", steps, log, None)  # the convention is inferred
    assert summary(ranges(path)) == [A_RANGE, B_RANGE, A_RANGE]
    # An ASID the log does not map: the process is unknown, so is its code.
    path2 = make_package(tmp_path / "q", [(None, 0x33)], log, "asid", images="ab")
    assert summary(ranges(path2)) == [("nacc", 0x8000, 0)]


def test_threads_are_aliased_to_their_process(tmp_path: Path) -> None:
    log = PROCESSES + "0 declare_thread(CURRENT, 0x4d3, 0x4d2)\n"
    steps = [(None, 0x4D3 << 8), (None, 0x162E << 8)]
    path = make_package(tmp_path / "p", steps, log, "pid")
    assert summary(ranges(path)) == [A_RANGE, B_RANGE]


def test_without_the_log_the_processes_cannot_be_told_apart(tmp_path: Path) -> None:
    steps = [(None, 0x4D2 << 8), (None, 0x162E << 8)]
    path = make_package(tmp_path / "p", steps, "", "pid")
    # The images are mapped for every process, the first one winning: both steps decode
    # through a.elf, and process 0x162e's trace is decoded wrongly.
    assert summary(ranges(path)) == [A_RANGE, A_RANGE]


def test_log_starting_mid_run_in_timestamp_order(tmp_path: Path) -> None:
    # Process 0x4d2's creation was lost: only its END is in the log. The pid is then
    # reused by a new process running c.elf.
    log = """\
2000 declare_process(END, 0x4d2, 0x8000, "a.elf")
3000 declare_process(START, 0x4d2, 0x8000, "c.elf")
"""
    a = 0x4D2 << 8
    steps = [(1000, a), (1500, a), (2500, a), (3500, a)]
    path = make_package(tmp_path / "p", steps, log, "pid", images="ac")
    assert summary(ranges(path)) == [A_RANGE, A_RANGE, ("nacc", 0x8000, 0), C_RANGE]


def test_cli_decodes_the_package_and_warns_on_build_id(tmp_path: Path) -> None:
    log = PROCESSES.replace("aa" * 20, "cc" * 20)
    path = make_package(tmp_path / "p", [(None, 0x4D2 << 8)], log, "pid")
    done = subprocess.run(
        [sys.executable, "-m", "cstrace.cli", "decode", str(path), "--format", "text"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "0x8000" in done.stdout.lower() or "8000" in done.stdout
    assert "build ID" in done.stderr and "cccc" in done.stderr


def test_raw_capture_with_images_on_the_command_line(tmp_path: Path) -> None:
    root = tmp_path / "raw"
    root.mkdir()
    (root / "trace.bin").write_bytes(trace([(None, 0x4D2 << 8)]))
    (root / "b.elf").write_bytes(executable(B_CODE, 0x8000))
    (root / "meta.ini").write_text(METADATA)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cstrace.cli",
            "decode",
            str(root / "trace.bin"),
            "--metadata",
            str(root / "meta.ini"),
            "--image",
            f"{root / 'b.elf'}@0x8000",
            "--format",
            "jsonl",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"num_instr": 2' in done.stdout.replace("'", '"') or "num_instr" in done.stdout


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cstrace.cli", *args], capture_output=True, text=True, check=False
    )


PTM_OPTIONS = [
    "--set=0x10:cyclecount=0",
    "--set=0x10:context_id=32",
    "--set=0x10:vmid=0",
    "--set=0x10:timestamp_bits=48",
    "--set=0x10:timestamp_gray=0",
    "--set=0x10:return_stack=0",
    "--set=0x10:dmb_dsb_waypoints=0",
    "--core=0x10=Cortex-A9",
]


def test_raw_formatted_capture_with_per_id_options(tmp_path: Path) -> None:
    from cstrace.capture.encode import format_frames

    ptm = trace([(None, 0x4D2 << 8), (None, 0x4D2 << 8)])
    (tmp_path / "cap.bin").write_bytes(format_frames([(0x10, ptm), (0x11, ptm)]))
    (tmp_path / "b.elf").write_bytes(executable(B_CODE, 0x8000))
    # 0x11 is not described: a protocol is named for it, but not its options, which
    # are inferred from its trace and said at the top of the output.
    done = _cli(
        "decode", str(tmp_path / "cap.bin"), "--protocol=ptm", *PTM_OPTIONS, "--format=text"
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    head = [ln for ln in done.stdout.splitlines() if ln.startswith("# configuration")]
    assert len(head) == 1 and "trace ID 0x11: PTM" in head[0] and "inferred" in head[0]
    assert "(decoded as PTM1.1 on " in head[0]
    # Decode only what is described: the other ID's options come from a register.
    done = _cli(
        "decode",
        str(tmp_path / "cap.bin"),
        "--protocol=ptm",
        *PTM_OPTIONS,
        "--reg=0x11:ETMCR=0x0000C000",
        "--reg=0x11:ETMCCER=0x00000000",
        "--image",
        str(tmp_path / "b.elf"),
        "--format",
        "ocsd",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Using cap.bin as trace source"
    ranges = [ln for ln in lines if "INSTR_RANGE" in ln]
    assert len(ranges) == 4 and all("0x8000:[0x8008] num_i(2)" in r for r in ranges)
    assert {r.split(";")[1].strip() for r in ranges} == {"ID:10", "ID:11"}
