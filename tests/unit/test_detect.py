"""Raw capture detection: formatted or single source, trace IDs, protocol from sync packets."""

from __future__ import annotations

import io
import random
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from cstrace.capture.encode import format_frames
from cstrace.cli import main
from cstrace.elements import Isa
from cstrace.inputs.detect import detect_capture, identify_stream
from cstrace.protocols.ptm.encoder import encode_async, encode_atoms, encode_isync
from tests.unit.test_itm_unsynced import DATA as ITM_DATA

ETM4_ASYNC = bytes(11) + b"\x80"
STP_ASYNC = b"\xff" * 10 + b"\x0f"


def etmv4_stream(n: int = 3) -> bytes:
    # A-sync, trace info, then an address and some atoms, repeated.
    body = b"\x01\x00" + b"\x9d\x00\x35\x09\x00\xc0\xff\xff\xff" + b"\xf7\xf6" * 20
    return (ETM4_ASYNC + body) * n


def stm_stream(n: int = 3) -> bytes:
    return (STP_ASYNC + b"\x0f\x30\x41\xf1\x1a\x00\x00\x00\x30\x10\xaf\x01" * 4) * n


def itm_stream() -> bytes:
    sync = bytes(5) + b"\x80"
    # software source packets of 1, 2 and 4 bytes, a local timestamp, an overflow
    body = b"\x01\x41" + b"\x0a\x42\x43" + b"\x1b\x44\x45\x46\x47" + b"\xc0\x85\x01" + b"\x70"
    return (sync + body * 8) * 3


def ptm_stream() -> bytes:
    out = bytearray()
    for k in range(4):
        out += encode_async()
        isync = bytearray(encode_isync(0xC0008000 + 0x40 * k, Isa.A32, ns=True))
        isync[5] |= 0x01  # PTMs set bit 0 of the information byte
        out += isync
        out += encode_atoms([True, False, True]) * 6
    return bytes(out)


def etmv3_stream() -> bytes:
    out = bytearray()
    for addr in (0xC003F5FD, 0xC004165B, 0xC003B795, 0xC00426F1):
        out += bytes(5) + b"\x80"
        out += b"\x08\x01" + addr.to_bytes(4, "little")  # I-sync: info byte, then address
        out += b"\x84\x88\xa0\x84\xb0\x84"  # P-headers
    return bytes(out)


@pytest.mark.parametrize(
    ("data", "family"),
    [
        (etmv4_stream(), "etm4"),
        (stm_stream(), "stm"),
        (itm_stream(), "itm"),
        (ptm_stream(), "ptm"),
        (etmv3_stream(), "etm3"),
    ],
)
def test_protocol_from_sync_packets(data: bytes, family: str) -> None:
    g = identify_stream(data, 0x10)
    assert g.family == family, g.evidence
    assert g.confidence >= 0.5
    assert g.syncs >= 3
    assert g.trace_id == 0x10 and g.size == len(data)


def test_no_sync_means_unknown() -> None:
    g = identify_stream(bytes(range(1, 200)))
    assert g.family is None and g.confidence == 0.0 and g.protocol == "unknown"


def itm_without_sync(cut: int = 3) -> bytes:
    return ITM_DATA[cut:]


@pytest.mark.parametrize("cut", [0, 1, 4])
def test_itm_without_sync_by_its_grammar(cut: int) -> None:
    g = identify_stream(itm_without_sync(cut), 0x01)
    assert g.family == "itm", g.evidence
    assert g.confidence >= 0.8 and g.syncs == 0
    assert "grammar" in g.evidence


def test_random_bytes_are_not_itm() -> None:
    rng = random.Random(11)
    for n in (64, 100, 200, 400, 1000, 4096):
        for _ in range(40):
            data = bytes(rng.randrange(256) for _ in range(n))
            assert identify_stream(data).family is None, data.hex()


def test_formatted_capture_with_itm_without_sync() -> None:
    swo = itm_without_sync()
    data = format_frames(
        [(0x02, etmv3_stream()), *((0x01, swo[i : i + 40]) for i in range(0, len(swo), 40))]
    )
    guess = detect_capture(data)
    assert guess.format == "coresight"
    assert {(s.trace_id, s.family) for s in guess.identified} == {(0x01, "itm"), (0x02, "etm3")}


def test_single_source_capture() -> None:
    guess = detect_capture(b"\x55" * 3 + etmv4_stream(4))
    assert guess.format == "source_data"
    assert [(s.trace_id, s.family) for s in guess.streams] == [(None, "etm4")]
    assert guess.confidence >= 0.7


def test_formatted_capture_lists_trace_ids() -> None:
    data = format_frames(
        [
            (0x10, etmv4_stream(2)),
            (0x20, stm_stream(2)),
            (0x10, etmv4_stream(1)),
            (0x21, itm_stream()),
        ]
    )
    guess = detect_capture(data)
    assert guess.format == "coresight"
    assert {(s.trace_id, s.family) for s in guess.identified} == {
        (0x10, "etm4"),
        (0x20, "stm"),
        (0x21, "itm"),
    }
    assert guess.confidence >= 0.8
    assert "16-byte frames" in guess.evidence


def test_fsync_padded_capture() -> None:
    frames = format_frames([(0x10, etmv4_stream(4)), (0x11, ptm_stream())])
    out = bytearray()
    for k in range(0, len(frames), 16):
        if k % 64 == 0:
            out += b"\xff\xff\xff\x7f"
        out += frames[k : k + 16]
    guess = detect_capture(bytes(out))
    assert guess.format == "dstream_coresight"
    assert {(s.trace_id, s.family) for s in guess.identified} == {(0x10, "etm4"), (0x11, "ptm")}


def test_given_format_is_not_guessed() -> None:
    data = etmv4_stream()
    guess = detect_capture(data, "source_data")
    assert guess.format == "source_data" and guess.confidence == 1.0
    assert guess.streams[0].family == "etm4"


def test_random_and_flipped_data_never_raise() -> None:
    rng = random.Random(7)
    samples = [bytes(rng.randrange(256) for _ in range(n)) for n in (0, 1, 15, 16, 100, 4096)]
    base = format_frames([(0x10, etmv4_stream(3)), (0x20, ptm_stream())])
    for _ in range(30):
        flipped = bytearray(base)
        for _ in range(rng.randint(1, 40)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        samples.append(bytes(flipped))
    for data in samples:
        guess = detect_capture(data)
        assert 0.0 <= guess.confidence <= 1.0
        assert guess.size == len(data)


def test_info_command(tmp_path: Path) -> None:
    path = tmp_path / "capture.bin"
    path.write_bytes(format_frames([(0x10, etmv4_stream(2)), (0x20, stm_stream(2))]))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["info", str(path)]) == 0
    text = out.getvalue()
    assert "format: coresight" in text
    assert "trace IDs with a recognised protocol: 0x10, 0x20" in text
    assert "trace ID 0x10" in text and "ETMv4/ETE" in text and "STM" in text
    assert main(["info", str(tmp_path / "missing.bin")]) == 2
