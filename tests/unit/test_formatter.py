"""The frame deformatter: hand-made frames, and the frame walk against a plain model."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cstrace
from cstrace.capture import demux
from cstrace.capture.encode import format_frames
from cstrace.capture.formatter import CaptureIssue, _Framing, _fsync_frames, demux_frames
from cstrace.capture.lazy import LazyStream, find_empty_block_stop, scan_frames
from cstrace.decode import Session


def model_demux(data: bytes, sofs: list[int] | None = None) -> dict[int, list[tuple[int, int]]]:
    """One frame at a time, byte by byte: (index, value) of every data byte per trace ID.

    A straightforward model of the formatter rules: an even byte with bit 0 set is an
    ID; a changed ID whose flag bit is set lets the next byte still belong to the old
    ID; data runs start at the frame start or at the ID byte that started them.
    """
    out: dict[int, list[tuple[int, int]]] = {}
    cur = -1
    nframes = len(data) // 16
    for n in range(nframes):
        f = data[16 * n : 16 * n + 16]
        sof = sofs[n] if sofs is not None else 16 * n
        flags = f[15]
        run_id = cur
        run_idx = sof
        run_len = 0

        def put(owner: int, value: int, start: int) -> None:
            nonlocal run_len
            if owner >= 0:
                out.setdefault(owner, []).append((start + run_len, value))
            run_len += 1

        for i in range(0, 14, 2):
            flag = (flags >> (i // 2)) & 1
            prev_and_change = False
            if f[i] & 1:
                new = f[i] >> 1
                if new != cur:
                    prev_and_change = bool(flag)
                    if prev_and_change:
                        put(run_id, f[i + 1], run_idx)
                    cur = new
                    if run_len > 0:
                        run_idx = sof + i
                        run_len = 0
                    run_id = cur
            else:
                put(run_id, f[i] | flag, run_idx)
            if not prev_and_change:
                put(run_id, f[i + 1], run_idx)
        if f[14] & 1:
            cur = f[14] >> 1
        else:
            put(run_id, f[14] | ((flags >> 7) & 1), run_idx)
    return out


def flatten(data: bytes) -> dict[int, list[tuple[int, int]]]:
    result = demux_frames(data)
    out: dict[int, list[tuple[int, int]]] = {}
    for tid, stream in result.streams.items():
        offs = stream.offsets().tolist()
        out[tid] = list(zip(offs, stream.data, strict=True))
    return out


def frame(ids_and_data: list[int], flags: int = 0) -> bytes:
    assert len(ids_and_data) == 15
    return bytes([*ids_and_data, flags])


def test_single_id_frame() -> None:
    # ID 0x10 in byte 0, then 14 data bytes.
    f = frame([0x21, *range(1, 15)])
    result = demux(f, "coresight")
    s = result.streams[0x10]
    assert s.data == bytes(range(1, 15))
    assert [s.offset_at(i) for i in range(14)] == list(range(14))


def test_id_change_with_flag_keeps_next_byte_for_old_id() -> None:
    # byte 0: ID 1; bytes 1..3 data; byte 4: ID 2 with flag bit 2 set -> byte 5 is ID 1's.
    body = [
        0x03,
        0xA1,
        0xA2,
        0xA3,
        0x05,
        0xA5,
        0xB6,
        0xB7,
        0xB8,
        0xB9,
        0xBA,
        0xBB,
        0xBC,
        0xBD,
        0xBE,
    ]
    f = frame(body, flags=0b0000_0100)
    out = flatten(f)
    assert [v for _, v in out[1]] == [0xA1, 0xA2, 0xA3, 0xA5]
    assert [v for _, v in out[2]] == [0xB6, 0xB7, 0xB8, 0xB9, 0xBA, 0xBB, 0xBC, 0xBD, 0xBE]
    # The new run starts at the index of the ID byte (4).
    assert out[2][0][0] == 4


def test_data_bit0_comes_from_flag_byte() -> None:
    body = [0x03] + [0x10] * 14
    f = frame(body, flags=0b1000_0010)  # flag for byte 2 and byte 14
    out = flatten(f)
    values = [v for _, v in out[1]]
    assert values[1] == 0x11  # byte 2
    assert values[-1] == 0x11  # byte 14
    assert values[0] == 0x10


def test_id_carries_over_frames_and_byte14_id() -> None:
    f1 = frame([0x03, *([0x40] * 13), 0x05])  # byte 14 switches to ID 2 for the next frame
    f2 = frame([0x42] * 15)
    out = flatten(f1 + f2)
    assert len(out[1]) == 13
    assert len(out[2]) == 15
    assert out[2][0][0] == 16


def test_partial_frame_reported() -> None:
    result = demux(bytes(20), "coresight")
    assert result.issues and result.issues[0].offset == 16


def test_fsync_stripping_and_fatal_fsync_in_frame() -> None:
    fsync = b"\xff\xff\xff\x7f"
    f = frame([0x03, *range(1, 15)])
    result = demux(fsync + f + fsync + f, "dstream_coresight")
    assert result.complete
    s = result.streams[1]
    assert len(s.data) == 28
    assert s.offset_at(0) == 4
    assert s.offset_at(14) == 24
    bad = fsync + f[:8] + fsync + f
    result = demux(bad, "dstream_coresight")
    assert not result.complete
    assert any("FSYNC inside a frame" in i.message for i in result.issues)


def test_hsync_removed_in_tpiu_mode() -> None:
    fsync = b"\xff\xff\xff\x7f"
    f = frame([0x03, *range(1, 15)])
    data = fsync + f[:6] + b"\xff\x7f" + f[6:]
    result = demux(data, "tpiu")
    assert result.streams[1].data == bytes(range(1, 15))


def _sequential_framing(data: bytes, hsyncs: bool) -> tuple[bytes, list[int], bool, list[str]]:
    """FSYNC/HSYNC framing by the sequential rules alone, from the first FSYNC."""
    issues: list[CaptureIssue] = []
    framing = _Framing(data, hsyncs, issues)
    frames = bytearray()
    sofs: list[int] = []
    start = data.find(b"\xff\xff\xff\x7f")
    if start >= 0:
        framing.run(start, np.zeros(0, dtype=np.int64), frames, sofs)
    return bytes(frames), sofs, framing.complete, [f"{i.offset}:{i.message}" for i in issues]


def _tpiu_capture(rng: random.Random) -> bytes:
    """FSYNC-separated frames with now and then an HSYNC, a stray FSYNC or lost bytes."""
    fsync, hsync = b"\xff\xff\xff\x7f", b"\xff\x7f"
    out = bytearray(bytes(rng.randrange(256) for _ in range(rng.randrange(3))) + fsync)
    for _ in range(rng.randrange(1, 50)):
        f = bytearray(rng.randrange(256) & (0xFE if i % 2 == 0 else 0xFF) for i in range(16))
        r = rng.random()
        if r < 0.08:
            f[2 * rng.randrange(8) : 0] = hsync
        elif r < 0.10:
            f[4 * rng.randrange(4) : 0] = fsync
        elif r < 0.12:
            f[rng.randrange(16) : 0] = fsync
        elif r < 0.13:
            del f[rng.randrange(16)]
        elif r < 0.16:
            f[2 * rng.randrange(8) : 0] = hsync  # same length as a frame, with an HSYNC
            del f[-2:]
        out += f
        if rng.random() < 0.7:
            out += fsync * rng.randrange(1, 3)
    return bytes(out)


@pytest.mark.parametrize("hsyncs", [False, True])
def test_bulk_fsync_framing_matches_sequential_rules(hsyncs: bool) -> None:
    rng = random.Random(99 + hsyncs)
    for _ in range(400):
        data = _tpiu_capture(rng)
        issues: list[CaptureIssue] = []
        frames, sof, complete = _fsync_frames(data, hsyncs, issues)
        want = _sequential_framing(data, hsyncs)
        got_issues = [
            f"{i.offset}:{i.message}" for i in issues if "before the first" not in i.message
        ]
        assert (frames.tobytes(), sof.tolist(), complete, got_issues) == want, data.hex()


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=16 * 40))
def test_walk_matches_model(data: bytes) -> None:
    data = data[: len(data) // 16 * 16]
    assert flatten(data) == {k: v for k, v in model_demux(data).items() if v}


def test_walk_matches_model_on_realistic_frames() -> None:
    rng = random.Random(1234)
    frames = bytearray()
    for _ in range(3000):
        body = []
        for i in range(15):
            if i % 2 == 0 and rng.random() < 0.15:
                body.append((rng.choice([0x10, 0x11, 0x12, 0x20]) << 1) | 1)
            else:
                body.append(rng.randrange(256) & (0xFE if i % 2 == 0 else 0xFF))
        frames += bytes([*body, rng.randrange(256)])
    data = bytes(frames)
    assert flatten(data) == model_demux(data)


def test_offsets_array_matches_offset_at() -> None:
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, size=16 * 200, dtype=np.uint8).tobytes()
    for stream in demux(data, "coresight").streams.values():
        offs = stream.offsets()
        assert all(stream.offset_at(i) == offs[i] for i in range(0, len(stream), 7))
        joined = b"".join(chunk for _, chunk in stream.chunks())
        assert joined == stream.data


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0x10, 0x11, 0x22, 0x6F]), st.binary(min_size=1, max_size=40)),
        max_size=30,
    )
)
def test_encode_then_demux_round_trip(pieces: list[tuple[int, bytes]]) -> None:
    frames = format_frames(pieces)
    assert len(frames) % 16 == 0
    result = demux(frames, "coresight")
    expected: dict[int, bytes] = {}
    for tid, data in pieces:
        expected[tid] = expected.get(tid, b"") + data
    got = {tid: s.data for tid, s in result.streams.items() if tid != 0}
    assert got == expected


def test_frames_without_any_id_byte() -> None:
    # Data before the first ID has no owner; a block without IDs keeps the current ID.
    assert demux(bytes(64), "coresight").streams == {}
    first = frame([0x03, *range(1, 15)])
    result = demux(first + bytes(16 * 3), "coresight")
    assert len(result.streams[1].data) == 14 + 15 * 3


def _reader(data: bytes, piece: int):  # type: ignore[no-untyped-def]
    def read():  # type: ignore[no-untyped-def]
        for i in range(0, len(data), piece):
            yield data[i : i + piece]

    return read


@pytest.mark.parametrize("piece", [7, 16, 100, 4096])
def test_lazy_stream_blocks_match_whole_demux(piece: int) -> None:
    rng = random.Random(11)
    pieces = [
        (rng.choice([0x10, 0x11, 0x12]), rng.randbytes(rng.randrange(1, 60))) for _ in range(400)
    ]
    data = format_frames(pieces)
    whole = demux(data, "coresight").streams
    for tid in (0x10, 0x11, 0x12, 0x33):
        lazy = LazyStream(tid, _reader(data, piece), block_size=16 * 37)
        blocks = list(lazy.blocks())
        assert len(blocks) > 1 or tid == 0x33
        joined = b"".join(b.data for b in blocks)
        offs = [o for b in blocks for o in b.offsets().tolist()]
        if tid in whole:
            assert joined == whole[tid].data
            assert offs == whole[tid].offsets().tolist()
            # Gathering gives the same whole stream.
            assert lazy.data == whole[tid].data
            assert lazy.offsets().tolist() == whole[tid].offsets().tolist()
        else:
            assert joined == b"" and lazy.data == b""


def test_lazy_single_source_blocks_keep_offsets() -> None:
    data = bytes(range(256)) * 10
    lazy = LazyStream(None, _reader(data, 1000), block_size=1024)
    blocks = list(lazy.blocks())
    assert [b.offset_at(0) for b in blocks] == [0, 1024, 2048]
    assert b"".join(b.data for b in blocks) == data


def _empty_block_frame() -> bytes:
    # Byte 0: ID 1; bytes 1..11 data; byte 12: ID 2 with flag bit 6 set (byte 13 is
    # still ID 1's); byte 14: ID 3. ID 2 gets an empty block from the reference.
    body = [0x03, *([0x10] * 11), 0x05, 0x77, 0x07]
    return frame(body, flags=1 << 6)


def test_empty_block_for_a_decoded_id_stops_the_capture() -> None:
    before = frame([0x03, *range(1, 15)])
    after = frame([0x03, *range(1, 15)])
    data = before + _empty_block_frame() + after
    # Without a decoder for ID 2 nothing happens.
    assert demux(data, "coresight").complete
    result = demux(data, "coresight", stop_ids=frozenset({1, 2}))
    assert not result.complete
    assert result.issues[-1].offset == 16
    assert len(result.streams[1].data) == 14 + 12  # the frame after the stop is not read
    lazy = LazyStream(1, _reader(data, 16), stop_ids=frozenset({1, 2}))
    assert lazy.data == result.streams[1].data
    assert find_empty_block_stop(_reader(data, 16), frozenset({2})) == 16
    assert find_empty_block_stop(_reader(data, 16), frozenset({1})) is None


def test_empty_block_needs_an_id_change() -> None:
    # Byte 12 repeats the current ID: no new block, nothing stops.
    body = [0x05, *([0x10] * 11), 0x05, 0x77, 0x07]
    data = frame(body, flags=1 << 6)
    assert demux(data, "coresight", stop_ids=frozenset({2})).complete
    assert find_empty_block_stop(_reader(data, 16), frozenset({2})) is None


@pytest.mark.parametrize("block_size", [16, 32, 1 << 20])
def test_scan_frames_names_the_ids_that_can_have_data(block_size: int) -> None:
    # ID 1 then ID 5 (0x0B); ID 7 appears nowhere; data before the first ID byte is nobody's.
    first = frame([0x10, 0x11, 0x03, *range(1, 13)])
    second = frame([0x0B, *range(1, 15)])
    data = first + second + first
    decoded = frozenset({1, 5, 7})
    scan = scan_frames(_reader(data, 16), decoded, block_size)
    assert scan.stop is None
    assert scan.ids & decoded == {1, 5}
    # Every ID with data in the full demultiplexing is named; 7, never named, has none.
    streams = demux(data, "coresight").streams
    assert {tid for tid, s in streams.items() if len(s.data)} <= scan.ids
    assert 7 not in streams or not streams[7].data
    # Nothing to look for without decoded IDs.
    assert scan_frames(_reader(data, 16), frozenset()).ids == frozenset()


def test_scan_frames_stops_where_the_reference_stops() -> None:
    before = frame([0x03, *range(1, 15)])
    data = before + _empty_block_frame() + frame([0x0B, *range(1, 15)])
    scan = scan_frames(_reader(data, 16), frozenset({1, 2}), 16)
    assert scan.stop == 16
    # IDs named after the stop frame are not there to decode: 5 is left out.
    assert scan.ids == {1, 2, 3}


def test_a_session_knows_which_trace_ids_have_data(corpus: Path) -> None:
    snapshot = corpus / "snapshots" / "bugfix-exact-match"
    if not snapshot.is_dir():
        pytest.skip(f"{snapshot} not found in the corpus")
    trace = cstrace.open_trace(snapshot)
    session = Session(trace)
    buffer = trace.buffers[0]
    assert session.run_ids(buffer) == [0x10, 0x12, 0x14, 0x16, 0x18, 0x1A]
    assert session.ids_with_data(buffer) == {0x12}
    # The others are empty streams, never demultiplexed; the busy one is read lazily.
    runs = session.open_buffer(buffer).runs
    assert [type(r.stream).__name__ for r in runs] == ["Stream", "LazyStream"] + ["Stream"] * 4
    assert all(not r.stream.data for r in runs if r.trace_id != 0x12)
