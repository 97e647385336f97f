"""STM reader on hand-made nibble streams: every packet type, sync, indices and raw bytes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cstrace.capture import Stream, demux
from cstrace.capture.encode import format_frames
from cstrace.capture.lazy import LazyStream
from cstrace.protocols.stm import packets as P
from cstrace.protocols.stm.reader import (
    OPCODES_1N,
    OPCODES_2N,
    OPCODES_3N,
    bin_to_gray,
    gray_to_bin,
    iter_packets,
)


def nib(text: str) -> bytes:
    """Pack a nibble string in protocol order ("f0 0 3" -> nibbles F,0,0,3) into bytes."""
    n = [int(c, 16) for c in text.replace(" ", "")]
    if len(n) % 2:
        n.append(0)
    return bytes(n[i] | (n[i + 1] << 4) for i in range(0, len(n), 2))


ASYNC = "f" * 21 + "0"
SYNC_V3 = ASYNC + "f003"  # ASYNC, VERSION 3


def read(data: bytes, *, base: int = 0, complete: bool = True) -> list[P.StmPacket]:
    return list(iter_packets(Stream.from_chunks(0x20, [(base, data)]), None, complete))


def after_sync(text: str) -> list[P.StmPacket]:
    pkts = read(nib(SYNC_V3 + text))
    assert isinstance(pkts[0], P.Async)
    assert isinstance(pkts[1], P.Version)
    return pkts[2:]


@pytest.mark.parametrize("rows", [OPCODES_1N, OPCODES_2N, OPCODES_3N])
def test_opcode_rows_cover_every_nibble_once(rows: tuple[tuple[object, ...], ...]) -> None:
    codes = [r[0] for r in rows]
    assert sorted(codes) == list(range(16))


def test_async_version_at_start() -> None:
    pkts = read(nib(SYNC_V3))
    assert [type(p) for p in pkts] == [P.Async, P.Version]
    assert pkts[0].offset == 0
    assert pkts[0].raw == b"\xff" * 10 + b"\x0f"
    assert isinstance(pkts[1], P.Version)
    assert pkts[1].version == 3
    assert pkts[1].offset == 11
    assert pkts[1].raw == bytes([0x0F, 0x30])


def test_master_channel_packets() -> None:
    pkts = after_sync("141 3 02 f3 1234 2 7f f2 33 3 55")
    m8, c8, c16, merr, gerr, c8b = pkts[:6]
    assert isinstance(m8, P.M8) and m8.master == 0x41
    assert isinstance(c8, P.C8) and c8.channel == 0x02
    assert isinstance(c16, P.C16) and c16.channel == 0x1234
    assert isinstance(merr, P.MErr) and merr.value == 0x7F
    assert isinstance(gerr, P.GErr) and gerr.value == 0x33
    # C8 after GERR (channel reset to 0) sets the low byte only.
    assert isinstance(c8b, P.C8) and c8b.channel == 0x55


def test_c8_keeps_the_high_channel_byte() -> None:
    pkts = after_sync("f3 1234 3 56")
    assert isinstance(pkts[1], P.C8)
    assert pkts[1].channel == 0x1256


@pytest.mark.parametrize(
    ("text", "bits", "value", "marker", "stamped"),
    [
        ("c 7", 4, 0x7, False, False),
        ("4 a5", 8, 0xA5, False, False),
        ("5 1234", 16, 0x1234, False, False),
        ("6 10000000", 32, 0x10000000, False, False),
        ("7 0123456789abcdef", 64, 0x0123456789ABCDEF, False, False),
        ("fd 7", 4, 0x7, True, False),
        ("f8 a5", 8, 0xA5, True, False),
        ("f9 1234", 16, 0x1234, True, False),
        ("fa deadbeef", 32, 0xDEADBEEF, True, False),
        ("fb 0123456789abcdef", 64, 0x0123456789ABCDEF, True, False),
        ("fc 7 2 ab", 4, 0x7, False, True),
        ("f4 a5 2 ab", 8, 0xA5, False, True),
        ("f5 1234 2 ab", 16, 0x1234, False, True),
        ("f6 deadbeef 2 ab", 32, 0xDEADBEEF, False, True),
        ("f7 0123456789abcdef 2 ab", 64, 0x0123456789ABCDEF, False, True),
        ("d 7 2 ab", 4, 0x7, True, True),
        ("8 a5 2 ab", 8, 0xA5, True, True),
        ("9 1234 2 ab", 16, 0x1234, True, True),
        ("a deadbeef 2 ab", 32, 0xDEADBEEF, True, True),
        ("b 0123456789abcdef 2 ab", 64, 0x0123456789ABCDEF, True, True),
    ],
)
def test_data_packets(text: str, bits: int, value: int, marker: bool, stamped: bool) -> None:
    (pkt, *_rest) = after_sync(text)
    assert isinstance(pkt, P.Data)
    assert (pkt.bits, pkt.value, pkt.marker) == (bits, value, marker)
    if stamped:
        assert pkt.timestamp == 0xAB
        assert pkt.ts_bits == 8
    else:
        assert pkt.timestamp is None


def test_flag_trig_freq_null() -> None:
    pkts = after_sync("fe e 1 5 f06 42 f07 43 0 f08 0124f800 0 f01 0")
    flag, flag_ts, trig, trig_ts, freq, null, null_ts = pkts[:7]
    assert isinstance(flag, P.Flag) and flag.timestamp is None
    assert isinstance(flag_ts, P.Flag) and flag_ts.timestamp == 5 and flag_ts.ts_bits == 4
    assert isinstance(trig, P.Trig) and trig.value == 0x42 and trig.timestamp is None
    assert isinstance(trig_ts, P.Trig) and trig_ts.value == 0x43 and trig_ts.timestamp == 5
    assert trig_ts.ts_bits == 0
    assert isinstance(freq, P.Freq) and freq.value == 19200000
    assert isinstance(null, P.Null) and null.timestamp is None
    assert isinstance(null_ts, P.Null) and null_ts.timestamp == 5


def test_timestamp_lengths_and_natural_binary_update() -> None:
    pkts = after_sync("e e 0123456789abcdef e 2 ff e d 11223344556677 e 0")
    full, low, d14, none = pkts[:4]
    assert isinstance(full, P.Flag) and full.timestamp == 0x0123456789ABCDEF
    assert full.ts_bits == 64
    assert isinstance(low, P.Flag) and low.timestamp == 0x0123456789ABCDFF
    assert isinstance(d14, P.Flag) and d14.timestamp == 0x0111223344556677
    assert d14.ts_bits == 56
    assert isinstance(none, P.Flag) and none.timestamp == 0x0111223344556677
    assert none.ts_bits == 0


def test_grey_timestamps() -> None:
    ts = 0x0123456789ABCDE0
    gray = bin_to_gray(ts)
    assert gray_to_bin(gray) == ts
    pkts = read(nib(ASYNC + "f004" + f"e e {gray:016x}" + f"e 1 {bin_to_gray(ts + 1) & 0xF:x}"))
    assert isinstance(pkts[1], P.Version) and pkts[1].version == 4
    assert isinstance(pkts[2], P.Flag) and pkts[2].timestamp == ts
    assert isinstance(pkts[3], P.Flag) and pkts[3].timestamp == ts + 1


def test_timestamp_before_version_is_a_bad_sequence() -> None:
    pkts = read(nib(ASYNC + "e 1 5 0 0"))
    assert isinstance(pkts[-1], P.BadSequence)
    assert pkts[-1].orig == P.StmPktType.FLAG
    assert len(pkts) == 2  # decoding stops at the bad packet


def test_timestamp_length_f_is_a_bad_sequence() -> None:
    pkts = after_sync("8 a5 f 0000")
    assert isinstance(pkts[0], P.BadSequence)
    assert pkts[0].orig == P.StmPktType.D8
    assert pkts[0].marker


def test_bad_version() -> None:
    pkts = read(nib(ASYNC + "f005 0000"))
    assert isinstance(pkts[1], P.BadSequence)
    assert pkts[1].orig == P.StmPktType.VERSION
    assert len(pkts) == 2


@pytest.mark.parametrize("text", ["f1", "f02", "f05", "f09", "f0f"])
def test_reserved_opcodes_stop_the_reader(text: str) -> None:
    pkts = after_sync(text + "0 0 0 0")
    assert isinstance(pkts[0], P.Reserved)
    assert len(pkts) == 1


def test_async_while_synchronised() -> None:
    pkts = after_sync("0 " + ASYNC + "0")
    assert [type(p) for p in pkts] == [P.Null, P.Async, P.Null]
    # An F run too short for ASYNC is a bad sequence, typed as the previous packet.
    pkts = after_sync("141 " + "f" * 10 + "0")
    assert isinstance(pkts[1], P.BadSequence)
    assert pkts[1].orig == P.StmPktType.M8


def test_packet_starting_in_a_high_nibble() -> None:
    # M8 (3 nibbles) leaves the high nibble of its second byte: the next packet
    # starts there, takes the index of the following byte and prints the nibble alone.
    pkts = after_sync("141 fa 10000000")
    m8, data = pkts[0], pkts[1]
    assert m8.raw == bytes([0x41, 0xF1])
    assert isinstance(data, P.Data)
    assert data.raw[0] == 0xF0
    assert data.offset == m8.offset + 2


def test_notsync_before_async() -> None:
    data = bytes([0x12, 0x34]) + nib(ASYNC + "f003")
    pkts = read(data)
    assert isinstance(pkts[0], P.NotSync)
    assert pkts[0].raw == bytes([0x12, 0x34])
    assert pkts[0].offset == 0
    assert isinstance(pkts[1], P.Async)
    assert pkts[1].offset == 2


def test_async_index_is_its_first_f_nibble() -> None:
    # An odd number of nibbles before the F run: ASYNC starts in a high nibble.
    data = nib("2" + "f" * 21 + "0" + "0")
    pkts = read(data, base=100)
    notsync, asy = pkts[0], pkts[1]
    assert isinstance(notsync, P.NotSync) and notsync.raw == bytes([0xF2])
    assert isinstance(asy, P.Async) and asy.offset == 100


def test_long_f_run_is_still_async() -> None:
    pkts = read(nib("f" * 30 + "0" + "0"))
    assert isinstance(pkts[0], P.NotSync)
    assert isinstance(pkts[1], P.Async)
    assert pkts[1].offset == 0


def test_unsynchronised_blocks_make_one_notsync_each() -> None:
    stream = Stream.from_chunks(0x20, [(0, bytes(range(1, 15))), (16, bytes(range(16, 31)))])
    pkts = list(iter_packets(stream, None, True))
    assert [p.offset for p in pkts] == [0, 16]
    assert all(isinstance(p, P.NotSync) for p in pkts)
    assert pkts[0].raw == bytes(range(1, 15))


def test_notsync_counts_f_nibbles_carried_from_the_previous_block() -> None:
    # The first block ends in an F nibble; the reference then prints one byte more
    # for the next block than it holds: the slot memory after the data (here the
    # stale byte of the previous, longer block, then the valid count).
    stream = Stream.from_chunks(0x20, [(0, bytes([0x12] * 14 + [0xF2])), (16, bytes([0x34] * 14))])
    pkts = list(iter_packets(stream, None, True))
    assert pkts[1].raw == bytes([0x34] * 14 + [0xF2])


def test_incomplete_packet_at_end() -> None:
    pkts = after_sync("6 1234")
    assert isinstance(pkts[-1], P.IncompleteEot)
    assert pkts[-1].orig == P.StmPktType.D32
    pkts = read(nib(SYNC_V3 + "6 1234"), complete=False)
    assert not any(isinstance(p, P.IncompleteEot) for p in pkts)


def test_packet_split_across_blocks() -> None:
    data = nib(SYNC_V3 + "6 10000000 0")
    stream = Stream.from_chunks(0x20, [(0, data[:15]), (16, data[15:])])
    pkts = list(iter_packets(stream, None, True))
    d32 = pkts[2]
    assert isinstance(d32, P.Data) and d32.value == 0x10000000
    assert d32.offset == 13
    assert d32.raw == data[13:]


def test_empty_stream() -> None:
    assert read(b"") == []


def test_lazy_streams_in_small_blocks_give_the_same_packets() -> None:
    # A lazy stream delivers the capture in blocks; packets (and the F run of an
    # ASYNC) may run across them.
    text = SYNC_V3 + "141 f3 0480 " + "a 01021010 0 e c 0003aeb284c9 " * 20 + ASYNC + "f003 6 12"
    text += "f" * 60 + "0 6 1234"  # an F run longer than a block
    capture = format_frames([(0x20, nib(text))])
    want = [repr(p) for p in iter_packets(demux(capture, "coresight").streams[0x20])]
    for size in (16, 32, 48, 160):

        def read() -> Iterator[bytes]:
            yield capture

        lazy = LazyStream(0x20, read, block_size=size)
        assert [repr(p) for p in iter_packets(lazy)] == want
    # Unformatted data in blocks that are not multiples of the 1024-byte reads.
    single = bytes(range(1, 15)) * 200 + nib("f2" + text)
    want = [repr(p) for p in iter_packets(Stream(None, single))]
    for size in (16, 100, 1000):

        def read_single() -> Iterator[bytes]:
            yield single

        assert [
            repr(p) for p in iter_packets(LazyStream(None, read_single, block_size=size))
        ] == want


def test_unformatted_data_is_read_in_1024_byte_blocks() -> None:
    # trc_pkt_lister reads unformatted captures 1024 bytes at a time: each read is a
    # block, and the 8-bit nibble counter wraps on a full block (no NOTSYNC for it).
    # The ASYNC's first F is in the last byte of the second block: its index is
    # computed from the wrapped counter (checked against trc_pkt_lister).
    data = bytes([0x12]) * 2047 + nib("2" + ASYNC + "f003")
    pkts = read_single(data)
    assert [(type(p).__name__, p.offset) for p in pkts[:2]] == [("Async", 1024), ("Version", 2059)]


def read_single(data: bytes) -> list[P.StmPacket]:
    return list(iter_packets(Stream(None, data), None, True))
