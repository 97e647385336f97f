"""ITM fuzzing: random and bit-flipped streams give packets or resync, never an exception.

Every stream is read in random blocks, decoded and rendered as the listing would be;
all bytes are accounted for by the packets, or are an unfinished sync at the end.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture import Stream
from cstrace.elements import Diagnostic
from cstrace.protocols.base import DecodeContext, DecodeOptions, Packet
from cstrace.protocols.itm import ItmConfig, iter_elements, iter_packets
from cstrace.protocols.itm import packets as P
from cstrace.protocols.itm.encoder import encode_packets
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.diagnostics import diagnostic_text
from cstrace.render.ocsd.itm import packet_text

_VALID = encode_packets(
    [
        P.Async(0, b""),
        P.Overflow(0, b""),
        P.Swit(0, b"", 3, 0xBB, 1),
        P.LocalTs(0, b"", 0, 2, 1, True),
        P.Extension(0, b"", False, 2, 2),
        P.Swit(0, b"", 10, 0x2345, 2),
        P.Dwt(0, b"", 1, 0x1004, 2),
        P.LocalTs(0, b"", 3, 0x7543F5E, 4),
        P.GlobalTs1(0, b"", 3, 0x2FEA782, 4),
        P.GlobalTs2(0, b"", 0x4080C13, 6),
        P.Dwt(0, b"", 20, 0x778899AA, 4),
        P.Async(0, b""),
        P.Extension(0, b"", True, 16, 0x1234),
        P.Swit(0, b"", 1, 0x67890123, 4),
    ]
)


def run(data: bytes, seed: int, complete: bool = True, recover: bool = False) -> None:
    rng = random.Random(seed)
    chunks = []
    pos = 0
    idx = 0
    while pos < len(data):
        n = rng.randint(1, 15)
        chunks.append((idx, data[pos : pos + n]))
        pos += n
        idx += 16
    stream = Stream.from_chunks(0x20, chunks)
    ctx = DecodeContext(0x20, DecodeOptions(), complete=complete)
    seen: list[P.ItmPacket] = []

    config = ItmConfig(0x200310, decode_before_sync=recover)

    def tap() -> Iterator[Packet]:
        for p in iter_packets(stream, config, complete):
            packet_text(p)
            seen.append(p)
            yield p

    for e in iter_elements(tap(), config, ctx):
        if isinstance(e, Diagnostic):
            diagnostic_text("itm", e)
        else:
            element_text(e)
    stopped = seen and isinstance(seen[-1], P.Reserved | P.BadSequence)
    # (after a bad packet, decoding before sync reads its bytes again as headers)
    if not stopped and complete and not recover:
        printed = sum(len(p.raw) for p in seen)
        assert printed <= len(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 1000), st.booleans(), st.booleans())
def test_random_bytes(data: bytes, seed: int, complete: bool, recover: bool) -> None:
    run(data, seed, complete, recover)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, len(_VALID) * 8 - 1), max_size=8),
    st.integers(0, 1000),
    st.booleans(),
    st.integers(0, 12),
)
def test_bit_flips(flips: list[int], seed: int, recover: bool, cut: int) -> None:
    data = bytearray(_VALID)
    for bit in flips:
        data[bit // 8] ^= 1 << (bit % 8)
    # Without sync (decode_before_sync), the capture may also start anywhere.
    run(bytes(data[cut:] if recover else data), seed, True, recover)
