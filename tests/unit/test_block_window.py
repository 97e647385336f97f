"""BlockWindow: kept bytes plus the next block, with their runs and capture indices."""

from __future__ import annotations

import numpy as np

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow
from tests.blocks import SplitStream


def _stream(chunks: list[tuple[int, bytes]]) -> Stream:
    return Stream.from_chunks(0x10, chunks)


def test_plain_stream_is_one_window() -> None:
    s = _stream([(16, b"abc"), (32, b"defg")])
    win = BlockWindow(s)
    assert win.data == b""
    assert not win.final
    assert win.advance(0)
    assert win.final
    assert win.data == b"abcdefg"
    assert win.run_pos == [0, 3]
    assert win.run_idx == [16, 32]
    assert [win.index_at(p) for p in range(7)] == [16, 17, 18, 32, 33, 34, 35]
    assert not win.advance(7)
    assert win.data == b"abcdefg"  # unchanged when no block is left


def test_empty_stream_has_no_window() -> None:
    win = BlockWindow(Stream(0x10, b""))
    assert win.final
    assert not win.advance(0)


def test_kept_bytes_keep_their_indices() -> None:
    # runs: 16..20 "abcde", 48..50 "fgh" | next block: 80..83 "ijkl"
    s = _stream([(16, b"abcde"), (48, b"fgh"), (80, b"ijkl")])
    win = BlockWindow(SplitStream(s, [8]))
    assert win.advance(0)
    assert win.data == b"abcdefgh"
    assert not win.final
    assert win.advance(3)  # keep "defgh"
    assert win.final
    assert win.data == b"defghijkl"
    assert win.run_pos == [0, 2, 5]
    assert win.run_idx == [19, 48, 80]
    assert win.start == 3
    assert win.first_run == 0  # "de" is still the stream's first run
    assert [win.index_at(p) for p in range(9)] == [19, 20, 48, 49, 50, 80, 81, 82, 83]


def test_dropping_everything_counts_runs() -> None:
    s = _stream([(16, b"abcde"), (48, b"fgh"), (80, b"ijkl")])
    win = BlockWindow(SplitStream(s, [8]))
    win.advance(0)
    win.advance(8)
    assert win.data == b"ijkl"
    assert win.run_idx == [80]
    assert win.start == 8
    assert win.first_run == 2


def test_run_cut_by_a_block_is_joined_again() -> None:
    # one run of 10 bytes cut in the middle: the window sees one run again
    s = _stream([(100, b"0123456789")])
    win = BlockWindow(SplitStream(s, [4]))
    win.advance(0)
    assert win.data == b"0123"
    win.advance(2)
    assert win.data == b"23456789"
    assert win.run_pos == [0]
    assert win.run_idx == [102]


def test_next_run_after_a_gap_stays_separate() -> None:
    s = _stream([(100, b"0123"), (105, b"4567")])
    win = BlockWindow(SplitStream(s, [4]))
    win.advance(0)
    win.advance(2)
    assert win.run_pos == [0, 2]
    assert win.run_idx == [102, 105]


def test_empty_blocks_are_skipped() -> None:
    class Gappy(Stream):
        __slots__ = ()

        def blocks(self):  # type: ignore[no-untyped-def]
            yield Stream(0x10, b"", np.zeros(1, np.int64), np.zeros(1, np.int64))
            yield Stream(0x10, b"ab", np.zeros(1, np.int64), np.full(1, 7, np.int64))
            yield Stream(0x10, b"", np.zeros(1, np.int64), np.zeros(1, np.int64))

    win = BlockWindow(Gappy(0x10, b"ab"))
    assert win.advance(0)
    assert win.data == b"ab"
    assert win.final
