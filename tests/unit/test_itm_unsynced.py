"""ITM without a synchronisation packet: a capture that starts mid-stream decodes from its
first unambiguous packet boundary (``decode_before_sync``), as read, as decoded, through
formatter frames and from the command line; the OpenCSD listing still waits for sync."""

from __future__ import annotations

import io
import json
import random
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from cstrace.capture import Stream, demux
from cstrace.capture.encode import format_frames
from cstrace.cli import main
from cstrace.elements import Diagnostic, ITMPacketType, ITMTrace, NoSync, UnsyncReason
from cstrace.errors import DiagKind, Severity
from cstrace.protocols.base import DecodeContext, DecodeOptions, Packet
from cstrace.protocols.itm import ItmConfig, iter_elements, iter_packets
from cstrace.protocols.itm import packets as P
from cstrace.protocols.itm.boundary import SPAN, find_start, first_certain, packet_end
from cstrace.protocols.itm.encoder import SYNC, encode_packet
from tests.counting import counting_run_end

WAIT = ItmConfig.from_trace_id(0x21)
RECOVER = ItmConfig(WAIT.itmtcr, decode_before_sync=True)

# Exception trace payload: number in bits [8:0], function in bits [13:12].
ENTRY, EXIT, RETURN = 1 << 12, 2 << 12, 3 << 12


def swo_packets(seed: int = 5, count: int = 400) -> list[P.ItmPacket]:
    """A software-trace session as a Cortex-M DWT and ITM give it: stimulus bytes,
    PC samples, exceptions, data watchpoints, overflows and timestamps (no sync)."""
    rng = random.Random(seed)
    out: list[P.ItmPacket] = []
    for _ in range(count):
        k = rng.randrange(10)
        if k == 0:
            for ch in b"Sort":
                out.append(P.Swit(0, b"", 0, ch, 1))
        elif k == 1:
            out.append(P.Swit(0, b"", rng.randrange(32), rng.randrange(1 << 32), 4))
        elif k in (2, 3):
            out.append(P.Dwt(0, b"", 2, 0x0800_0000 | rng.randrange(1 << 16) * 2, 4))
        elif k == 4:
            irq = rng.randrange(16, 80)
            out.append(P.Dwt(0, b"", 1, ENTRY | irq, 2))
            out.append(P.Dwt(0, b"", 1, EXIT | irq, 2))
            out.append(P.Dwt(0, b"", 1, RETURN, 2))
        elif k == 5:
            cmp = rng.randrange(4)
            out.append(P.Dwt(0, b"", 8 + 2 * cmp, 0x0800_0100 + rng.randrange(256) * 2, 4))
            out.append(P.Dwt(0, b"", 9 + 2 * cmp, rng.randrange(1 << 16), 2))
            size = rng.choice([1, 2, 4])
            write = rng.randrange(2)
            out.append(P.Dwt(0, b"", 16 + 2 * cmp + write, rng.randrange(1 << (8 * size)), size))
        elif k == 6:
            out.append(P.Overflow(0, b""))
        elif k == 7:
            if rng.randrange(2):
                out.append(P.LocalTs(0, b"", 0, rng.randrange(1, 7), 1, True))
            else:
                out.append(P.LocalTs(0, b"", rng.randrange(4), rng.randrange(1, 1 << 14), 2))
        elif k == 8:
            out.append(P.GlobalTs1(0, b"", 0, rng.randrange(1 << 21), 3))
        else:
            out.append(P.Dwt(0, b"", 0, rng.randrange(64), 1))  # event counter wrap
    return out


def encode(pkts: list[P.ItmPacket]) -> tuple[bytes, list[int]]:
    """The bytes of ``pkts`` and the stream position of each packet."""
    data = bytearray()
    starts = []
    for p in pkts:
        starts.append(len(data))
        data += encode_packet(p)
    return bytes(data), starts


def fields(p: Packet) -> tuple[object, ...]:
    names = [
        s
        for k in type(p).__mro__
        for s in getattr(k, "__slots__", ())
        if s not in ("offset", "raw")
    ]
    return (type(p).__name__, *(getattr(p, n) for n in sorted(names)))


def read(data: bytes, base: int, config: ItmConfig = RECOVER) -> list[P.ItmPacket]:
    return list(iter_packets(Stream(None, data, base=base), config, True))


def decode(packets: list[P.ItmPacket], config: ItmConfig = RECOVER) -> list[object]:
    return list(iter_elements(packets, config, DecodeContext(0x21, DecodeOptions())))


PKTS = swo_packets()
DATA, STARTS = encode(PKTS)


@pytest.mark.parametrize("cut", range(24))
def test_mid_stream_capture_gives_every_packet_after_the_first_boundary(cut: int) -> None:
    got = read(DATA[cut:], cut)
    head = got[0]
    assert isinstance(head, P.Unsynced)
    assert head.certain is not None
    assert cut <= head.resume <= head.certain <= cut + 64
    expected = [
        (s, len(encode_packet(p)), fields(p))
        for s, p in zip(STARTS, PKTS, strict=True)
        if s >= head.certain
    ]
    after = [(p.offset, len(p.raw), fields(p)) for p in got[1:] if p.offset >= head.certain]
    assert after == expected
    # Every kind of packet is in what was recovered.
    kinds = {(type(p).__name__, getattr(p, "src_id", None)) for p in got if p.offset >= cut + 64}
    assert {("Swit", 0), ("Dwt", 1), ("Dwt", 2), ("Dwt", 8), ("Overflow", None)} <= kinds
    assert {("Dwt", 9), ("Dwt", 16), ("LocalTs", None), ("GlobalTs1", None)} <= kinds


def test_capture_on_a_packet_boundary_reads_from_its_first_byte() -> None:
    got = read(DATA, 0)
    head = got[0]
    assert isinstance(head, P.Unsynced) and head.raw == b"" and head.resume == 0
    assert [fields(p) for p in got[1:]] == [fields(p) for p in PKTS]


def test_elements_after_the_boundary_match_a_synchronised_decode() -> None:
    cut = 11
    synced = decode(read(SYNC + DATA, -len(SYNC), WAIT), WAIT)
    got = decode(read(DATA[cut:], cut))
    assert got[0] == NoSync(cut, UnsyncReason.INIT_DECODER)
    note = got[1]
    assert isinstance(note, Diagnostic)
    assert note.kind == DiagKind.UNSYNCED_START and note.severity == Severity.WARNING
    certain = note.detail
    assert note.offset <= certain <= cut + 64

    def payloads(elems: list[object]) -> list[tuple[object, ...]]:
        # Timestamps add up deltas from the start, which a cut capture does not have.
        return [
            (e.offset, e.pkt_type, e.src_id, e.value, e.payload_size, e.overflow)
            for e in elems
            if isinstance(e, ITMTrace)
            and e.offset >= certain
            and e.pkt_type in (ITMPacketType.SWIT, ITMPacketType.DWT)
        ]

    want = payloads(synced)
    assert len(want) > 300
    assert payloads(got) == want
    assert sum(1 for e in got if isinstance(e, ITMTrace) and e.overflow) > 10


def test_reference_behaviour_waits_for_sync() -> None:
    got = read(DATA[5:], 5, WAIT)
    assert all(isinstance(p, P.NotSync) for p in got)
    elems = decode(got, WAIT)
    assert elems[0] == NoSync(5)
    assert not [e for e in elems if isinstance(e, ITMTrace | Diagnostic)]


def test_stream_that_starts_with_sync_decodes_as_the_reference_does() -> None:
    data = SYNC + DATA
    ref = decode(read(data, 0, WAIT), WAIT)
    rec = decode(read(data, 0))
    assert rec == ref
    assert not [e for e in rec if isinstance(e, Diagnostic)]


def test_bad_packet_reports_and_decoding_goes_on() -> None:
    cut = STARTS[200]
    data = DATA[:cut] + b"\x04" + DATA[cut:]  # a reserved header in the middle
    got = decode(read(data, 0))
    bad = [e for e in got if isinstance(e, Diagnostic) and e.severity == Severity.ERROR]
    assert [(e.offset, e.kind) for e in bad] == [(cut, DiagKind.BAD_PACKET)]
    assert NoSync(cut, UnsyncReason.BAD_PACKET) in got
    after = [e for e in got if isinstance(e, ITMTrace) and e.offset > cut + 1 + 64]
    assert len(after) > 100
    # The reference stops there.
    ref = decode(read(SYNC + data, -len(SYNC), WAIT), WAIT)
    assert max(e.offset for e in ref) <= cut  # type: ignore[attr-defined]


@pytest.mark.parametrize("chunk", [1, 7, 16])
def test_through_formatter_frames(chunk: int) -> None:
    cut = 3
    body = DATA[cut:]
    pieces = [(0x21, body[i : i + chunk]) for i in range(0, len(body), chunk)]
    frames = format_frames([(0x10, b"\x55" * 5), *pieces])
    stream = demux(frames, "coresight").streams[0x21]
    got = list(iter_packets(stream, RECOVER, True))
    head = got[0]
    assert isinstance(head, P.Unsynced) and head.certain is not None
    after = [fields(p) for p in got[1:] if p.offset >= head.certain]
    assert len(after) > len(PKTS) - 10
    assert after == [fields(p) for p in PKTS[-len(after) :]]


def test_decode_command_recovers_and_ocsd_listing_waits(tmp_path: Path) -> None:
    body = DATA[7:]
    path = tmp_path / "swo.bin"
    path.write_bytes(format_frames([(0x01, body[i : i + 64]) for i in range(0, len(body), 64)]))

    def run(*args: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            assert main(["decode", str(path), *args]) == 0, err.getvalue()
        return out.getvalue()

    lines = [json.loads(t) for t in run("--format", "jsonl", "--no-summary").splitlines()]
    items = [e for e in lines if e["type"] == "ITMTRACE"]
    alone = [e for e in decode(read(body, 0)) if isinstance(e, ITMTrace)]
    # A "Sort" written to port 0 is one string object with its four bytes.
    assert sum(len(e.get("payloads", [0])) for e in items) == len(alone) > 600
    texts = [e["text"] for e in items if "text" in e]
    assert len(texts) > 10 and all(t in "Sort" * len(t) for t in texts)
    notes = [e for e in lines if e["type"] == "DIAGNOSTIC"]
    assert [n["kind"] for n in notes] == ["UNSYNCED_START"]
    assert "decoded before any synchronisation packet" in run()
    assert "ITMTRACE" not in run("--before-sync", "wait")
    listing = run("--format", "ocsd")
    assert "ITM_NOTSYNC" in listing and "OCSD_GEN_TRC_ELEM_ITMTRACE" not in listing
    forced = run("--format", "ocsd", "--before-sync", "decode")
    assert "OCSD_GEN_TRC_ELEM_ITMTRACE" in forced and "TrcIdx=" in forced


def test_boundary_rule() -> None:
    # Every position inside the first packet reads differently; the readings meet.
    assert packet_end(b"\x04", 0) < 0  # reserved
    assert packet_end(b"\x80\x01", 0) < 0  # 0b10xx0000 is reserved
    assert packet_end(b"\x00\x00\x00\x80", 0) < 0  # too few zeros for a sync
    assert packet_end(SYNC, 0) == len(SYNC)
    assert packet_end(b"\x0d\x01\x00", 0) < 0  # exception trace with function 0
    assert packet_end(b"\x05\x01", 0) == 2  # event counter: one byte
    assert packet_end(b"\x06\x01\x00", 0) < 0  # event counter with two bytes
    assert packet_end(b"\x17\x00\x00", 0) == 4  # PC sample cut by the end: needs more
    assert find_start(b"\x04\x04" + DATA, 0, True) == (2, True)
    assert find_start(DATA[:20], 0, False) == (0, False)
    certain = first_certain(DATA, 0)
    assert certain is not None and certain in STARTS and certain >= SPAN - 1
    assert first_certain(b"\x01\x01" * 2000, 0) is None  # two readings that never meet


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_do_not_raise(seed: int) -> None:
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
    stream = Stream.from_chunks(0x21, [(16 * i, data[i : i + 15]) for i in range(0, len(data), 15)])
    pkts = list(iter_packets(stream, RECOVER, rng.randrange(2) == 0))
    decode(pkts)


def test_a_long_run_of_zero_bytes_is_measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 Ki zero bytes not followed by 0x80 (found by the fuzz campaign: 16 s of CPU to
    detect the protocol of a 66 KB input): each zero byte is tried as a packet start, and
    the run is measured once, not once per byte."""
    import re

    from cstrace.protocols.itm import boundary

    run_end, long, other = counting_run_end(re.compile(b"\x00{4,}"), re.compile(b"[^\x00]"), 4)
    monkeypatch.setattr(boundary, "_ZEROS_END", run_end)
    data = bytes(20_000) + b"\x01\x41" + bytes(10) + b"\x80"
    ends = [boundary.packet_end(data, p) for p in range(0, 19_990, 7)]
    assert all(e < 0 for e in ends)  # zeros ended by 0x01: no synchronisation packet
    assert boundary.packet_end(data, 20_002) == len(data)  # a real one after: still read
    boundary.scan(data)
    # one pass, and a few bytes around each short run
    assert long.looked + other.looked < 3 * len(data)
