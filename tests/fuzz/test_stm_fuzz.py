"""STM fuzzing: random and bit-flipped streams give packets or resync, never an exception.

Every stream is read in random blocks, decoded and rendered as the listing would be.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture import Stream
from cstrace.elements import Diagnostic
from cstrace.protocols.base import DecodeContext, DecodeOptions, Packet
from cstrace.protocols.stm import StmConfig, iter_elements, iter_packets
from cstrace.protocols.stm.encoder import StmMessage, encode_messages
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.diagnostics import diagnostic_text
from cstrace.render.ocsd.stm import packet_text

_VALID = encode_messages(
    [
        StmMessage(m, c, p, bits=b, marker=bool(p & 1), timestamp=(p * 977) if p % 3 else None)
        for m, c, p, b in [
            (0x41, 0, 0x10000000, 32),
            (0x41, 1, 0xAB, 8),
            (0x42, 0x480, 0x1234, 16),
            (0x42, 0x481, 0x0123456789ABCDEF, 64),
            (0x42, 0x481, 0x7, 4),
        ]
    ],
    sync_every=2,
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
    seen: list[Packet] = []

    config = StmConfig(0x200000, decode_before_sync=recover)

    def tap() -> Iterator[Packet]:
        for p in iter_packets(stream, config, complete):
            packet_text(p)
            seen.append(p)
            yield p

    for e in iter_elements(tap(), config, ctx):
        if isinstance(e, Diagnostic):
            diagnostic_text("stm", e)
        else:
            element_text(e)
    for p in seen:
        assert p.offset >= 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 1000), st.booleans(), st.booleans())
def test_random_bytes(data: bytes, seed: int, complete: bool, recover: bool) -> None:
    run(data, seed, complete, recover)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, len(_VALID) * 8 - 1), max_size=8),
    st.integers(0, 1000),
    st.booleans(),
    st.integers(0, 40),
)
def test_bit_flips(flips: list[int], seed: int, recover: bool, cut: int) -> None:
    data = bytearray(_VALID)
    for bit in flips:
        data[bit // 8] ^= 1 << (bit % 8)
    # Without sync (decode_before_sync), the capture may also start anywhere.
    run(bytes(data[cut:] if recover else data), seed, True, recover)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 300), st.integers(0, 255), st.integers(0, 1000))
def test_long_f_runs(count: int, tail: int, seed: int) -> None:
    # Long runs of F nibbles exercise the reference's 8-bit sync counters.
    run(b"\xff" * count + bytes([tail]) + _VALID, seed)
