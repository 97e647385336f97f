"""STM without an ASYNC: a capture that starts mid-stream decodes from its first
unambiguous packet boundary (``decode_before_sync``), as read, as decoded, through
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
from cstrace.elements import Diagnostic, NoSync, SWTrace, UnsyncReason
from cstrace.errors import DiagKind, Severity
from cstrace.protocols.base import DecodeContext, DecodeOptions, Packet
from cstrace.protocols.stm import StmConfig, iter_elements, iter_packets
from cstrace.protocols.stm import packets as P
from cstrace.protocols.stm.boundary import find_async, first_certain, packet_end
from cstrace.protocols.stm.encoder import StmEncoder, pack_nibbles
from tests.counting import counting_run_end

WAIT = StmConfig.from_trace_id(0x20)
RECOVER = StmConfig(WAIT.stmtcsr, decode_before_sync=True)
ASYNC_NIBBLES = [0xF] * 21 + [0x0]  # 11 bytes


def stm_packets(seed: int = 9, count: int = 300) -> list[P.StmPacket]:
    """Software messages from two masters on a few channels, with markers, timestamps,
    flags, triggers and errors; a VERSION a third of the way in (none at the start)."""
    rng = random.Random(seed)
    out: list[P.StmPacket] = []
    ts = 0
    for n in range(count):
        if n == count // 3:
            out.append(P.Version(0, b"", 3))
        k = rng.randrange(12)
        stamp: int | None = None
        if rng.randrange(3) == 0:
            ts += rng.randrange(1, 5000)
            stamp = ts
        if k == 0:
            out.append(P.M8(0, b"", rng.choice([0x40, 0x41, 0x80])))
        elif k == 1:
            out.append(P.C8(0, b"", rng.randrange(256)))
        elif k == 2:
            out.append(P.C16(0, b"", rng.randrange(256)))
        elif k in (3, 4, 5, 6, 7):
            bits = rng.choice([4, 8, 16, 32, 64])
            out.append(P.Data(0, b"", bits, rng.randrange(1 << bits), rng.randrange(2) == 1, stamp))
        elif k == 8:
            out.append(P.Flag(0, b"", stamp))
        elif k == 9:
            out.append(P.Trig(0, b"", rng.randrange(256), stamp))
        elif k == 10:
            out.append(P.Null(0, b"", stamp))
        else:
            out.append(P.MErr(0, b"", rng.randrange(256)))
    return out


def encode_nibbles() -> tuple[list[int], list[int]]:
    """The nibbles of ASYNC, VERSION and the packets, and where each packet starts."""
    enc = StmEncoder()
    nibs = [*ASYNC_NIBBLES, *enc.packet_nibbles(P.Version(0, b"", 3))]
    starts = []
    for p in PKTS:
        starts.append(len(nibs))
        nibs += enc.packet_nibbles(p)
    return nibs, starts


def fields(p: Packet) -> tuple[object, ...]:
    """What the stream itself says about a packet: not the timestamp (a cut capture
    has only the updated bits) nor the channel's high byte, which come from earlier."""
    out: list[object] = [type(p).__name__, p.offset, p.raw]
    for name in ("bits", "value", "marker", "master", "version"):
        out.append(getattr(p, name, None))
    if isinstance(p, P.C8):
        out.append(p.channel & 0xFF)
    elif isinstance(p, P.C16):
        out.append(p.channel)
    out.append(getattr(p, "ts_bits", None))
    return tuple(out)


def read(data: bytes, base: int, config: StmConfig = RECOVER) -> list[P.StmPacket]:
    return list(iter_packets(Stream(None, data, base=base), config, True))


def decode(packets: list[P.StmPacket], config: StmConfig = RECOVER) -> list[object]:
    return list(iter_elements(packets, config, DecodeContext(0x20, DecodeOptions())))


PKTS = stm_packets()
NIBBLES, STARTS = encode_nibbles()
STREAM = pack_nibbles(NIBBLES)  # ASYNC, VERSION, then the packets
SYNCED = read(STREAM, 0, WAIT)[2:]  # the packets as the reference reads them
SKIP = 13  # bytes of the ASYNC and the VERSION


def test_the_reference_reads_every_packet() -> None:
    # (and a NULL that pads the last byte)
    types = [type(p) for p in SYNCED]
    assert types in ([type(p) for p in PKTS], [*(type(p) for p in PKTS), P.Null])


@pytest.mark.parametrize("cut", range(0, 60, 3))
def test_mid_stream_capture_gives_every_packet_after_the_first_boundary(cut: int) -> None:
    start = SKIP + cut
    got = read(STREAM[start:], start)
    head = got[0]
    assert isinstance(head, P.Unsynced), got[:3]
    assert head.resume == head.certain
    assert start <= head.resume <= start + 160
    after = [fields(p) for p in got[1:]]
    assert got[1].offset == head.resume
    # (a packet that starts in the high nibble of a byte has the index of the next
    # byte, as the one after it may have: compare from the end)
    assert after == [fields(p) for p in SYNCED[len(SYNCED) - len(after) :]]
    assert len(after) > len(PKTS) - 40
    # Timestamps: unknown until a VERSION says how they are encoded.
    version = next(p.offset for p in got if isinstance(p, P.Version))
    stamped = [p for p in got if isinstance(p, P.Data) and p.ts_bits]
    assert all(p.timestamp is None for p in stamped if p.offset < version)
    assert all(p.timestamp is not None for p in stamped if p.offset > version)


def test_elements_after_the_boundary() -> None:
    start = SKIP + 20
    got = decode(read(STREAM[start:], start))
    assert got[0] == NoSync(start, UnsyncReason.INIT_DECODER)
    note = got[1]
    assert isinstance(note, Diagnostic) and note.kind == DiagKind.UNSYNCED_START
    assert note.severity == Severity.WARNING and note.detail == note.offset
    ref = decode(read(STREAM, 0, WAIT), WAIT)

    def payloads(elems: list[object], since: int) -> list[tuple[object, ...]]:
        # (a NULL_TS gives an element for its timestamp: none until a VERSION)
        return [
            (e.offset, e.payload_bits, e.payload, e.marker, e.trigger, e.master_err)
            for e in elems
            if isinstance(e, SWTrace)
            and e.offset >= since
            and (e.payload_bits or e.marker or e.trigger or e.master_err)
        ]

    want = payloads(ref, note.detail)
    assert len(want) > 150 and payloads(got, note.detail) == want
    # The master is unknown until an M8; from the first one on, elements agree.
    m8 = next(p.offset for p in read(STREAM[start:], start) if isinstance(p, P.M8))
    mine = [
        (e.offset, e.master, e.id_valid) for e in got if isinstance(e, SWTrace) and e.payload_bits
    ]
    theirs = [
        (e.offset, e.master, e.id_valid) for e in ref if isinstance(e, SWTrace) and e.payload_bits
    ]
    assert [m for m in mine if m[0] > m8] == [t for t in theirs if t[0] > m8]
    assert all(not valid for off, _, valid in mine if off < m8)


def test_reference_behaviour_waits_for_async() -> None:
    start = SKIP + 6
    elems = decode(read(STREAM[start:], start, WAIT), WAIT)
    assert not [e for e in elems if isinstance(e, SWTrace | Diagnostic)]


def test_stream_that_starts_with_async_reads_as_the_reference_does() -> None:
    for data in (STREAM, b"\x42\x13" + STREAM):
        ref = read(data, 0, WAIT)
        got = read(data, 0)
        assert [(type(p), p.offset, p.raw) for p in got] == [
            (type(p), p.offset, p.raw) for p in ref
        ]
        assert decode(got) == decode(ref, WAIT)


def test_bad_packet_reports_and_decoding_goes_on() -> None:
    k = STARTS[150]
    data = pack_nibbles([*NIBBLES[:k], 0xF, 0x1, *NIBBLES[k:]])  # F1: a reserved opcode
    at = (k + 1) >> 1  # the index of a packet starting at nibble k
    got = decode(read(data, 0))
    bad = [e for e in got if isinstance(e, Diagnostic) and e.severity == Severity.ERROR]
    assert [(e.offset, e.kind) for e in bad] == [(at, DiagKind.BAD_PACKET)]
    assert NoSync(at, UnsyncReason.BAD_PACKET) in got
    assert len([e for e in got if isinstance(e, SWTrace) and e.offset > at]) > 50


@pytest.mark.parametrize("chunk", [1, 7, 15])
def test_through_formatter_frames(chunk: int) -> None:
    body = STREAM[SKIP + 5 :]
    frames = format_frames([(0x20, body[i : i + chunk]) for i in range(0, len(body), chunk)])
    got = list(iter_packets(demux(frames, "coresight").streams[0x20], RECOVER, True))
    head = got[0]
    assert isinstance(head, P.Unsynced)
    after = [fields(p)[3:] for p in got[1:]]  # the fields without offsets and raw bytes
    assert len(after) > len(PKTS) - 40
    assert after == [fields(p)[3:] for p in SYNCED[-len(after) :]]


def test_decode_command_recovers_and_ocsd_listing_waits(tmp_path: Path) -> None:
    body = STREAM[SKIP + 8 :]
    path = tmp_path / "stm.bin"
    path.write_bytes(format_frames([(0x20, body[i : i + 40]) for i in range(0, len(body), 40)]))

    def run(*args: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            # (the capture format is given: frames whose only stream has no sync are not
            # recognised as frames)
            cmd = ["decode", str(path), "--capture-format", "coresight", "--protocol", "0x20=stm"]
            assert main([*cmd, *args]) == 0
        return out.getvalue()

    lines = [json.loads(t) for t in run("--format", "jsonl", "--no-summary").splitlines()]
    alone = [e for e in decode(read(body, 0)) if isinstance(e, SWTrace)]
    assert len([e for e in lines if e["type"] == "SWTRACE"]) == len(alone) > 100
    assert [e["kind"] for e in lines if e["type"] == "DIAGNOSTIC"] == ["UNSYNCED_START"]
    assert "SWTRACE" not in run("--before-sync", "wait")
    listing = run("--format", "ocsd")
    assert "NOTSYNC" in listing and "OCSD_GEN_TRC_ELEM_SWTRACE" not in listing
    assert "OCSD_GEN_TRC_ELEM_SWTRACE" in run("--format", "ocsd", "--before-sync", "decode")


def test_boundary_rule() -> None:
    assert packet_end("f1", 0) < 0  # reserved opcode
    assert packet_end("f02", 0) < 0  # reserved opcode
    assert packet_end("f005", 0) < 0  # VERSION 5
    assert packet_end("f003", 0) == 4
    assert packet_end("8120", 0) == 4 and packet_end("812f", 0) < 0  # timestamp length F
    assert packet_end("f" * 21 + "0", 0) == 22 and packet_end("f" * 20 + "0", 0) < 0
    assert packet_end("6123", 0) == 5  # D32 cut by the end: needs more
    assert find_async("12" + "f" * 25 + "0", 0) == 2
    assert first_certain("1" * 3000, 0) is None  # M8 0x11 forever: three readings never meet


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_do_not_raise(seed: int) -> None:
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5000)))
    stream = Stream.from_chunks(0x20, [(16 * i, data[i : i + 15]) for i in range(0, len(data), 15)])
    decode(list(iter_packets(stream, RECOVER, rng.randrange(2) == 0)))


def test_a_long_run_of_f_nibbles_is_measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of ``f`` nibbles that does not end in an ASYNC's ``0`` (found by the fuzz
    campaign: 64 Ki bytes of 0xFF took 40 s to search for a decode start): each nibble of
    the run is tried as a packet start, and the run is measured once, not once per nibble."""
    import re

    from cstrace.protocols.stm import boundary

    run_end, long, other = counting_run_end(re.compile("f{21,}"), re.compile("[^f]"), 21)
    monkeypatch.setattr(boundary, "_F_RUN_END", run_end)
    hx = "f" * 20_000 + "1" + "f" * 30 + "4"
    ends = [packet_end(hx, k) for k in range(0, 20_000, 7)]
    assert all(e < 0 for e in ends)  # an FF opcode that is no ASYNC: invalid
    assert packet_end(hx, 20_001) < 0  # another run
    start, _ = boundary.find_start(hx, 0, True)
    assert start >= 20_000
    # one pass, and a few units around each short run
    assert long.looked + other.looked < 3 * len(hx)
