"""ITM round trips: encode random packet sequences, read them back, compare every field."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture import Stream
from cstrace.protocols.itm import iter_packets
from cstrace.protocols.itm import packets as P
from cstrace.protocols.itm.encoder import encode_packets

_EXT_BITS = [2, 9, 16, 23, 31]


@st.composite
def packets(draw: st.DrawFn) -> P.ItmPacket:
    kind = draw(st.integers(0, 8))
    if kind == 0:
        return P.Async(0, b"")
    if kind == 1:
        return P.Overflow(0, b"")
    if kind in (2, 3):
        size = draw(st.sampled_from([1, 2, 4]))
        cls = P.Swit if kind == 2 else P.Dwt
        return cls(
            0, b"", draw(st.integers(0, 31)), draw(st.integers(0, (1 << 8 * size) - 1)), size
        )
    if kind == 4:
        if draw(st.booleans()):
            return P.LocalTs(0, b"", 0, draw(st.integers(1, 6)), 1, True)
        size = draw(st.integers(1, 4))
        return P.LocalTs(
            0, b"", draw(st.integers(0, 3)), draw(st.integers(0, (1 << 7 * size) - 1)), size
        )
    if kind == 5:
        size = draw(st.integers(1, 4))
        bits = 26 if size == 4 else 7 * size
        flags = draw(st.integers(0, 3)) if size == 4 else 0
        return P.GlobalTs1(0, b"", flags, draw(st.integers(0, (1 << bits) - 1)), size)
    if kind == 6:
        size = draw(st.integers(1, 6))
        bits = min(7 * size, 40)
        return P.GlobalTs2(0, b"", draw(st.integers(0, (1 << bits) - 1)), size)
    if kind == 7:
        nbits = draw(st.sampled_from(_EXT_BITS))
        width = 3 + 7 * _EXT_BITS.index(nbits)
        return P.Extension(
            0, b"", draw(st.booleans()), nbits, draw(st.integers(0, (1 << width) - 1))
        )
    return P.Swit(0, b"", 0, 0, 1)


def fields(p: P.ItmPacket) -> tuple[object, ...]:
    names = [
        s
        for k in type(p).__mro__
        for s in getattr(k, "__slots__", ())
        if s not in ("offset", "raw")
    ]
    return (type(p).__name__, *(getattr(p, n) for n in sorted(names)))


@settings(max_examples=300, deadline=None)
@given(st.lists(packets(), max_size=30), st.integers(1, 16))
def test_packets_read_back(pkts: list[P.ItmPacket], chunk: int) -> None:
    pkts = [P.Async(0, b""), *pkts]
    data = encode_packets(pkts)
    stream = Stream.from_chunks(
        0x10, [(16 * (i // chunk), data[i : i + chunk]) for i in range(0, len(data), chunk)]
    )
    got = list(iter_packets(stream, None, True))
    assert isinstance(got[0], P.NotSync) and got[0].raw == b""  # tells the decoder: no sync yet
    assert [fields(p) for p in got[1:]] == [fields(p) for p in pkts]
    # Every byte is in exactly one packet (GTS1 prints its last byte without the flags).
    raw = b"".join(p.raw for p in got)
    assert len(raw) == len(data)
