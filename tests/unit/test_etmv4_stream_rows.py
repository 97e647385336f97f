"""ETMv4/ETE element rows read and decoded in one loop (``iter_stream_rows``).

The reader's loop hands the decoder the hot packet kinds as fields, without
packet objects (the decoder is a ``PacketSink``). Whatever the bytes, the
configuration, the cuts between blocks and the gaps in capture indices, this
must give what the two stages give apart: the same lists of element rows
(same items, same list boundaries), the same packet count, and the same
packets handed to the counting handlers, in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture import Stream
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.decoder import iter_rows, iter_stream_rows
from cstrace.protocols.etmv4.packets import Async, AtomRun, BadPacket, NotSync, Overflow
from cstrace.protocols.etmv4.reader import PacketSink, iter_packets, read_into
from cstrace.rows import expand
from cstrace.tally import PacketCount, counted
from tests.blocks import SplitStream, random_cuts
from tests.unit.test_etmv4_decoder_fuzz import _MEMORY, _PACKETS, _config

_WATCHED = (NotSync, Async, Overflow, BadPacket)


def _context(variant: int, complete: bool) -> DecodeContext:
    cfg = _config(variant)
    return DecodeContext(
        trace_id=cfg.trace_id,
        options=DecodeOptions(src_addr_n=bool(variant & 32)),
        memory=_MEMORY,
        complete=complete,
    )


def _stream(data: bytes, seed: int) -> Stream:
    """``data`` as runs of capture indices with gaps (as formatter frames give them),
    delivered in blocks cut at random places."""
    r = random.Random(seed)
    chunks = []
    pos = 0
    index = r.randrange(100)
    while pos < len(data):
        n = r.randint(1, 15)
        chunks.append((index, data[pos : pos + n]))
        pos += n
        index += n + r.choice([0, 0, 1, 17])
    stream = Stream.from_chunks(0x10, chunks) if chunks else Stream(0x10, b"")
    return SplitStream(stream, random_cuts(len(data), r.randint(0, 6), seed))


def _two_ways(data: bytes, variant: int, complete: bool, seed: int, size: int) -> None:
    cfg = _config(variant)
    seen_a: list[tuple[str, int]] = []
    seen_b: list[tuple[str, int]] = []

    def watch(seen: list[tuple[str, int]]) -> dict[type, Any]:
        return {cls: (lambda p, s=seen: s.append((type(p).__name__, p.offset))) for cls in _WATCHED}

    totals_a = [0, 0]
    packets = counted(
        iter_packets(_stream(data, seed), cfg, complete, group_atoms=True),
        watch(seen_a),
        totals_a,
        frozenset((AtomRun,)),
    )
    apart = [list(out) for out in iter_rows(packets, cfg, _context(variant, complete), size)]

    totals_b = [0, 0]
    count = PacketCount(watch(seen_b), totals_b)
    fused = [
        list(out)
        for out in iter_stream_rows(
            _stream(data, seed), cfg, _context(variant, complete), count, size
        )
    ]
    assert [expand(out) for out in fused] == [expand(out) for out in apart]
    assert [len(out) for out in fused] == [len(out) for out in apart]
    assert totals_b == totals_a
    assert seen_b == seen_a


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 63), st.sampled_from([1, 7, 4096]))
def test_packet_sequences_give_the_same_rows(seed: int, variant: int, size: int) -> None:
    r = random.Random(seed)
    data = (
        bytes(r.randrange(3))  # unsynchronised bytes first, sometimes
        + enc.a_sync()
        + enc.trace_info(0)
        + b"".join(r.choice(_PACKETS)(r) for _ in range(r.randint(1, 80)))
    )
    _two_ways(data, variant, r.random() < 0.8, seed, size)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 63))
def test_bit_flipped_streams_give_the_same_rows(seed: int, variant: int) -> None:
    r = random.Random(seed)
    good = bytearray(
        enc.a_sync() + enc.trace_info(0) + b"".join(r.choice(_PACKETS)(r) for _ in range(60))
    )
    for _ in range(r.randint(1, 8)):
        good[r.randrange(len(good))] ^= 1 << r.randrange(8)
    _two_ways(bytes(good), variant, True, seed, 64)


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 63), st.booleans())
def test_random_bytes_give_the_same_rows(data: bytes, variant: int, complete: bool) -> None:
    _two_ways(data, variant, complete, len(data), 16)


class _Kinds(PacketSink):
    """A sink that records which method got each packet."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def atoms(self, off: int, data: bytes, pos: int, end: int) -> None:
        self.calls.append(f"atoms {end - pos}")

    def address(self, *args: Any) -> None:
        self.calls.append("address")

    def match(self, *args: Any) -> None:
        self.calls.append("match")

    def packet(self, pkt: Any) -> None:
        self.calls.append(type(pkt).__name__)


def _calls(data: bytes) -> list[str]:
    sink = _Kinds()
    for _ in read_into(Stream(0x10, data), _config(1), sink):  # ETE: source addresses
        pass
    return sink.calls


def test_the_sink_gets_the_hot_kinds_as_fields() -> None:
    data = (
        enc.a_sync()
        + enc.trace_info(0)
        + enc.atom("E")
        + enc.atom("EN")
        + enc.atom("E")
        + enc.address_short(0x1010)
        + enc.address_long(0x2000, 0)
        + enc.exact_match(1)
        + enc.atom("N")
        + enc.source_address_long(0x1000)
        + enc.timestamp(5)
    )
    assert _calls(data) == [
        "Async",
        "TraceInfo",
        "atoms 3",  # three atom packets in a row: one call
        "address",
        "address",
        "match",
        "atoms 1",
        "SourceAddress",  # source addresses are not hot: objects
        "Timestamp",
    ]


def test_default_sink_groups_atoms_only_when_asked() -> None:
    data = enc.a_sync() + enc.trace_info(0) + enc.atom("E") * 3 + enc.atom("N")
    grouped = list(iter_packets(Stream(0x10, data), _config(0), group_atoms=True))
    single = list(iter_packets(Stream(0x10, data), _config(0)))
    assert [type(p).__name__ for p in grouped] == ["Async", "TraceInfo", "AtomRun"]
    assert [type(p).__name__ for p in single][2:] == ["Atom"] * 4
    assert grouped[2].raw == b"".join(p.raw for p in single[2:])


def _rows(data: bytes, size: int) -> Iterator[list[Any]]:
    cfg = _config(0)
    return iter_stream_rows(Stream(0x10, data), cfg, _context(0, True), None, size)


def test_lists_are_cut_once_they_hold_the_size() -> None:
    # Each list is cut after the packet (or run of atom packets) that filled it.
    start = enc.address_context(0x1000, el=1, sf=True, ns=True)
    pieces = [enc.address_long(0x1000, 0) + enc.atom("N") * 3 for _ in range(40)]
    data = enc.a_sync() + enc.trace_info(0) + start + b"".join(pieces)
    lists = list(_rows(data, 10))
    assert len(lists) > 5
    assert all(10 <= len(out) <= 10 + 2 * 3 for out in lists[:-1])
