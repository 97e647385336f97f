"""DCC software trace: the thesis's target-request messages, round trips, and bad words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cstrace.capture.etmport import CycleStream
from cstrace.elements import SWTrace, Unknown
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.dcc import (
    DccConfig,
    DebugMessage,
    MsgType,
    TracePoint,
    UnknownWord,
    encode_dcc,
    iter_elements,
    iter_packets,
)

CFG = DccConfig()


def _packets(data: bytes) -> list[object]:
    return list(iter_packets(CycleStream("dcc_words", data), CFG))


def test_thesis_messages() -> None:
    # TRACEPOINT(1): command 0x00 with the number in bits [31:8] (thesis listing 6.3).
    # DEBUGHEX32 with two words: 0x01 | type 4 << 8 | length << 16 (listing 6.6).
    words = [0x00000100, 0x00020401, 0xDEADBEEF, 0x0BADC0DE]
    data = b"".join(w.to_bytes(4, "little") for w in words)
    pkts = _packets(data)
    assert isinstance(pkts[0], TracePoint) and pkts[0].number == 1
    assert isinstance(pkts[1], DebugMessage)
    assert pkts[1].mtype == MsgType.WORDS and pkts[1].items == (0xDEADBEEF, 0x0BADC0DE)
    els = list(iter_elements(pkts, CFG, DecodeContext(0, DecodeOptions())))  # type: ignore[arg-type]
    sw = [e for e in els if isinstance(e, SWTrace)]
    assert [(e.master, e.channel, e.payload, e.payload_bits, e.marker) for e in sw] == [
        (0, 0, 1, 24, True),
        (1, 4, 0xDEADBEEF, 32, False),
        (1, 4, 0x0BADC0DE, 32, True),
    ]


def test_ascii_message() -> None:
    data = encode_dcc([("text", "hello, world")])
    (pkt,) = _packets(data)
    assert isinstance(pkt, DebugMessage) and pkt.text == "hello, world"
    assert len(data) == 4 + 12


def test_unknown_and_cut_messages() -> None:
    data = (0x00000005).to_bytes(4, "little") + (0x00100101).to_bytes(4, "little") + b"\x01"
    pkts = _packets(data)
    assert [type(p) for p in pkts] == [UnknownWord, UnknownWord, UnknownWord]
    els = list(iter_elements(pkts, CFG, DecodeContext(0, DecodeOptions())))  # type: ignore[arg-type]
    assert sum(isinstance(e, Unknown) for e in els) == 3


_msgs = st.lists(
    st.one_of(
        st.tuples(st.just("tp"), st.integers(0, 0xFFFFFF)),
        st.tuples(st.just("text"), st.text(st.characters(max_codepoint=255), max_size=20)),
        st.tuples(st.just(MsgType.BYTES), st.lists(st.integers(0, 0xFF), max_size=9)),
        st.tuples(st.just(MsgType.HALFWORDS), st.lists(st.integers(0, 0xFFFF), max_size=9)),
        st.tuples(st.just(MsgType.WORDS), st.lists(st.integers(0, 0xFFFFFFFF), max_size=9)),
    ),
    max_size=12,
)


@given(_msgs)
def test_round_trip(msgs: list[tuple[object, object]]) -> None:
    pkts = _packets(encode_dcc(msgs))  # type: ignore[arg-type]
    assert len(pkts) == len(msgs)
    for p, (kind, value) in zip(pkts, msgs, strict=True):
        if kind == "tp":
            assert isinstance(p, TracePoint) and p.number == value
        elif kind == "text":
            assert isinstance(p, DebugMessage) and p.text == value
        else:
            assert isinstance(p, DebugMessage) and p.mtype == kind and list(p.items) == value


@given(st.binary(max_size=200))
def test_random_words_never_raise(data: bytes) -> None:
    pkts = _packets(data)
    list(iter_elements(pkts, CFG, DecodeContext(0, DecodeOptions())))  # type: ignore[arg-type]
