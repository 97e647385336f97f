"""Every byte of a formatted capture accounted for (issue 26): ``count_frame_bytes`` agrees with
the demultiplexer on each trace ID's bytes, and its parts add up to the capture's size."""

from __future__ import annotations

import random

import pytest

from cstrace.capture import demux
from cstrace.capture.encode import format_frames
from cstrace.capture.lazy import count_frame_bytes


def check(data: bytes, stop_ids: frozenset[int] = frozenset(), block: int = 1 << 20) -> None:
    got = count_frame_bytes(lambda: iter([data]), len(data), stop_ids, block)
    streams = demux(data, "coresight", stop_ids=stop_ids).streams
    assert got.data == {t: len(s) for t, s in streams.items() if len(s)}
    parts = sum(got.data.values()) + got.no_id + got.overhead + got.after_stop + got.trailing
    assert parts == len(data)


@pytest.mark.parametrize("seed", range(40))
def test_random_frames(seed: int) -> None:
    rng = random.Random(seed)
    data = bytes(rng.randrange(256) for _ in range(16 * rng.randint(1, 60) + rng.randrange(3)))
    check(data, block=rng.choice((16, 64, 1 << 20)))
    check(data, frozenset(rng.sample(range(0x70), 5)), block=rng.choice((16, 1 << 20)))


def test_formatted_sources_padding_and_a_tail() -> None:
    frames = format_frames([(0x10, bytes(range(100))), (0x22, b"\x01" * 37), (0x10, b"\x05" * 9)])
    check(frames)
    got = count_frame_bytes(lambda: iter([frames + b"\x01\x02"]), len(frames) + 2)
    assert got.data[0x10] == 109 and got.data[0x22] == 37
    assert got.trailing == 2 and got.no_id == 0
    id_bytes = sum(1 for at in range(0, len(frames), 2) if at % 16 < 15 and frames[at] & 1)
    assert got.overhead == len(frames) // 16 + id_bytes  # a flag byte per frame, the ID bytes
