"""Decode my dump: a raw capture and the program's code, nothing else.

Captures are made with the project's encoders for a small Thumb program (a
Cortex-M3-style ETMv3.4 source in CoreSight frames, as a SWO/TPIU capture
carries it). Each is decoded twice through the command line: once with the
registers and core named, as a user who knows them would, and once with only
the capture and its code, so that configuration is inferred. Both must give the
same elements, and the inferred settings must be the ones the trace was made
with.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cstrace.capture.encode import format_frames
from cstrace.elements import Isa
from cstrace.protocols.etmv3 import encoder as e3


def _halfwords(*values: int) -> bytes:
    return b"".join(v.to_bytes(2, "little") for v in values)


# 0x8000: movs r0,#0; adds r0,#1; cmp r0,#3; bne 0x8002; bl 0x8010; b .; nop
# 0x8010: nop; bx lr   (then padding)
CODE = _halfwords(0x2000, 0x3001, 0x2803, 0xD1FC, 0xF000, 0xF802, 0xE7FE, 0xBF00)
CODE += _halfwords(0xBF00, 0x4770, 0xBF00, 0xBF00)
ETM_ID = 0x02
ETMIDR_M3 = 0x4114F240  # ETMv3.4, alternative branch encoding (bit 20)


def _etm_trace(cycle_accurate: bool, rounds: int = 40) -> bytes:
    """The program's loop and call, ``rounds`` times, each time re-synchronised."""
    out = bytearray(e3.encode_async())
    for _ in range(rounds):
        out += e3.encode_isync(0x8000, Isa.T32, cycle_count=1 if cycle_accurate else None)
        if cycle_accurate:
            out += e3.encode_phdr("WEWEWEWE", True) + e3.encode_phdr("WEWEWEWE", True)
            out += e3.encode_phdr("WEWN", True) + e3.encode_phdr("WEWEWE", True)
        else:
            out += e3.encode_phdr("EEEEEEEEEN") + e3.encode_phdr("EEE")
        out += e3.encode_branch(0x800C, Isa.T32, 0x8012, alt=True)
        out += e3.encode_phdr("WEWEWE", True) if cycle_accurate else e3.encode_phdr("EEE")
        out += e3.encode_async()
    return bytes(out)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cstrace.cli", *args], capture_output=True, text=True, check=False
    )


def _elements(stdout: str) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in stdout.splitlines()]
    return [r for r in rows if "type" in r]


@pytest.mark.parametrize("cycle_accurate", [False, True])
def test_etmv3_m_profile_capture_decodes_as_with_its_registers(
    tmp_path: Path, cycle_accurate: bool
) -> None:
    capture = tmp_path / "swo.bin"
    capture.write_bytes(format_frames([(ETM_ID, _etm_trace(cycle_accurate))]))
    code = tmp_path / "code.bin"
    code.write_bytes(CODE)
    etmcr = 0xC00 | (0x1000 if cycle_accurate else 0)
    given = _cli(
        "decode",
        str(capture),
        f"--memory={code}@0x8000",
        "--protocol=2=ETM3.4",
        "--core=2=Cortex-M3",
        f"--reg=2:ETMCR={etmcr:#x}",
        f"--reg=2:ETMIDR={ETMIDR_M3:#x}",
        "--reg=2:ETMCCER=0",
        "--format=jsonl",
    )
    assert given.returncode == 0, given.stderr
    inferred = _cli("decode", str(capture), f"--memory={code}@0x8000", "--format=jsonl")
    assert inferred.returncode == 0, inferred.stderr
    want, got = _elements(given.stdout), _elements(inferred.stdout)
    executed = sum(int(str(r.get("num_instr", 0))) for r in want if r["type"] == "INSTR_RANGE")
    assert executed >= 40 * 16
    assert got == want
    head = json.loads(inferred.stdout.splitlines()[0])["inferred"]
    assert head["id"] == ETM_ID and head["protocol"].startswith("ETM3")
    assert head["settings"]["cyclecount"] == ("1" if cycle_accurate else "0")
    assert head["settings"]["context_id"] == "0"
    assert 0 < head["confidence"] <= 1


def test_info_prints_the_inferred_configuration(tmp_path: Path) -> None:
    capture = tmp_path / "swo.bin"
    capture.write_bytes(format_frames([(ETM_ID, _etm_trace(True))]))
    code = tmp_path / "code.bin"
    code.write_bytes(CODE)
    done = _cli("info", str(capture), f"--memory={code}@0x8000")
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if "configuration inferred" in ln]
    assert len(lines) == 1 and "trace ID 0x02" in lines[0] and "ETMv3" in lines[0]
    assert "cyclecount=1" in done.stdout


def test_random_bytes_give_clear_output(tmp_path: Path) -> None:
    import random

    rng = random.Random(11)
    capture = tmp_path / "noise.bin"
    capture.write_bytes(bytes(rng.randrange(256) for _ in range(50_000)))
    info = _cli("info", str(capture))
    assert info.returncode == 0 and "Traceback" not in info.stderr
    assert "configuration: not found" in info.stdout
    decode = _cli("decode", str(capture))
    assert decode.returncode == 2 and "Traceback" not in decode.stderr
    assert decode.stderr.count("\n") <= 2 and "protocol not recognised" in decode.stderr
    # Named as ETMv4, the noise is decoded with an inferred configuration: no traceback.
    forced = _cli("decode", str(capture), "--protocol=etmv4", "--format=jsonl")
    assert "Traceback" not in forced.stderr
    assert forced.returncode in (0, 2)


def test_package_keeps_what_was_inferred(tmp_path: Path) -> None:
    capture = tmp_path / "swo.bin"
    capture.write_bytes(format_frames([(ETM_ID, _etm_trace(True))]))
    code = tmp_path / "code.bin"
    code.write_bytes(CODE)
    made = _cli("package", str(capture), str(tmp_path / "dump.zip"), f"--memory={code}@0x8000")
    assert made.returncode == 0, made.stderr
    inferred = _cli("decode", str(capture), f"--memory={code}@0x8000", "--format=jsonl")
    packaged = _cli("decode", str(tmp_path / "dump.zip"), "--format=jsonl")
    assert packaged.returncode == 0, packaged.stderr
    # The package decodes with no options, and nothing is inferred again.
    assert "inferred" not in packaged.stdout.splitlines()[0]
    strip = [{k: v for k, v in r.items() if k != "buffer"} for r in _elements(inferred.stdout)]
    again = [{k: v for k, v in r.items() if k != "buffer"} for r in _elements(packaged.stdout)]
    assert again == strip and len(again) > 100
    import zipfile

    with zipfile.ZipFile(tmp_path / "dump.zip") as z:
        contents = z.read("contents.ini").decode()
    assert "; configuration trace ID 0x02: ETMv3" in contents and "cyclecount=1" in contents


def _itm_trace() -> tuple[bytes, dict[str, int]]:
    """An ITM/DWT stream with no synchronisation packet, as an SWO capture of a Cortex-M
    often is: stimulus port strings, PC samples, exception entries and returns, data
    watchpoint events and overflows; and how many of each it holds."""
    from cstrace.protocols.itm import packets as itm
    from cstrace.protocols.itm.encoder import encode_packets

    pkts: list[itm.ItmPacket] = []
    counts = {"swit": 0, "pc": 0, "exception": 0, "watchpoint": 0, "overflow": 0}
    for k in range(30):
        for ch in (b"On", b"Off", b"Sort")[k % 3]:
            pkts.append(itm.Swit(0, b"", 0, ch, 1))
            counts["swit"] += 1
        pkts.append(itm.Dwt(0, b"", 2, 0x8000 + 2 * (k % 8), 4))
        counts["pc"] += 1
        if k % 4 == 0:
            pkts += [itm.Dwt(0, b"", 1, 0x1000 | 15, 2), itm.Dwt(0, b"", 1, 0x3000, 2)]
            counts["exception"] += 2
        if k % 5 == 0:
            pkts += [itm.Dwt(0, b"", 8, 0x8004, 4), itm.Dwt(0, b"", 17, k, 1)]
            counts["watchpoint"] += 2
        if k % 7 == 3:
            pkts.append(itm.Overflow(0, b""))
            counts["overflow"] += 1
    return encode_packets(pkts), counts


def test_swo_capture_with_itm_without_sync(tmp_path: Path) -> None:
    # ETMv3 on ID 2 and ITM/DWT on ID 1 (no ITM sync at all), with only the code given.
    etm = _etm_trace(False)
    itm_bytes, counts = _itm_trace()
    etm_pieces = [(ETM_ID, etm[i : i + 40]) for i in range(0, len(etm), 40)]
    itm_pieces = [(0x01, itm_bytes[i : i + 24]) for i in range(0, len(itm_bytes), 24)]
    pieces = [p for pair in itertools.zip_longest(etm_pieces, itm_pieces) for p in pair if p]
    capture = tmp_path / "swo.bin"
    capture.write_bytes(format_frames(pieces))
    code = tmp_path / "code.bin"
    code.write_bytes(CODE)
    info = _cli("info", str(capture), f"--memory={code}@0x8000")
    assert "trace ID 0x01" in info.stdout and "ITM" in info.stdout, info.stdout
    done = _cli("decode", str(capture), f"--memory={code}@0x8000", "--format=jsonl")
    assert done.returncode == 0, done.stderr
    rows = _elements(done.stdout)
    items = [r for r in rows if r["id"] == 1 and r["type"] == "ITMTRACE"]
    by_kind = {
        # Stimulus bytes that spell text are one string object, its bytes in "payloads".
        "swit": sum(len(r.get("payloads", [0])) for r in items if r["pkt_type"] == "SWIT"),  # type: ignore[arg-type]
        "pc": sum(1 for r in items if r["pkt_type"] == "DWT" and r["src_id"] == 2),
        "exception": sum(1 for r in items if r["pkt_type"] == "DWT" and r["src_id"] == 1),
        "watchpoint": sum(1 for r in items if r["pkt_type"] == "DWT" and r["src_id"] >= 8),
        "overflow": sum(1 for r in items if r["overflow"]),
    }
    assert by_kind == counts
    text = "".join(
        str(r["text"]) if "text" in r else chr(int(str(r["value"])))
        for r in items
        if r["pkt_type"] == "SWIT"
    )
    assert text.startswith("OnOffSort")
    assert sum(int(str(r.get("num_instr", 0))) for r in rows if r["id"] == ETM_ID) >= 40 * 16


DEMO = Path(__file__).resolve().parents[2] / "examples" / "etm_demo"


def _demo_inferred(*options: str) -> dict[str, object]:
    done = _cli(
        "decode",
        str(DEMO / "etb_0.bin"),
        f"--memory={DEMO / 'user.bin'}@0x400000",
        f"--memory={DEMO / 'kernel.bin'}@0xffffffc000080400",
        *options,
        "--format=jsonl",
        "--no-summary",
    )
    assert done.returncode == 0, done.stderr
    head = json.loads(done.stdout.splitlines()[0])["inferred"]
    assert isinstance(head, dict)
    return head


def test_an_undecided_setting_is_named_with_the_option_that_decides_it() -> None:
    # etm_demo's ETMv4 trace has no packet only ETE or only ETMv4 has; with its code the
    # two decode differently (ETE's EXCEPTION_RET after an ERET), both consistently.
    head = _demo_inferred()
    undecided = head["undecided"]
    assert isinstance(undecided, list) and len(undecided) == 1
    assert undecided[0].startswith("protocol (TRCDEVARCH (ETE) or TRCIDR1 (ETMv4))")
    assert "--protocol 0x10=etmv4 or --protocol 0x10=ete decides" in undecided[0]
    assert float(str(head["confidence"])) <= 0.5
    assert str(head["label"]).startswith("ETE or ETMv4 (the trace does not tell)")
    # An Armv8.0 core named: ETE is ruled out, nothing is left undecided.
    named = _demo_inferred("--core=0x10=Cortex-A53")
    assert named["undecided"] == [] and named["protocol"] == "ETM4.6"
    assert str(named["label"]) == "ETMv4 (minor version not seen) on Cortex-A53 (Armv8-A)"
