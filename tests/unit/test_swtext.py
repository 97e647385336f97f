"""Software-trace strings: byte writes that spell text are grouped, everything else kept."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

from hypothesis import given
from hypothesis import strategies as st

from cstrace.analyses.swtext import MAX_TEXT, TextMessage, group_text, quote_text
from cstrace.capture.encode import format_frames
from cstrace.cli import main
from cstrace.elements import Element, ITMPacketType, ITMTrace, SWTrace, Timestamp
from cstrace.protocols.itm.encoder import SYNC, encode_packets
from cstrace.protocols.itm.packets import Swit
from cstrace.render.text import message_details


def _sw(text: bytes, channel: int = 1, start: int = 0, **last: object) -> list[SWTrace]:
    out = [SWTrace(start + i, 0x40, channel, payload_bits=8, payload=b) for i, b in enumerate(text)]
    for k, v in last.items():
        setattr(out[-1], k, v)
    return out


def _flat(items: list[Element | TextMessage]) -> list[Element]:
    """The elements back, in the order they were given."""
    out: list[Element] = []
    for item in items:
        out.extend(item.elements if isinstance(item, TextMessage) else [item])
    return out


def test_stm_line_ends_at_newline_and_marker() -> None:
    elems = [*_sw(b"boot ok\n"), *_sw(b"second", start=8, marker=True), *_sw(b"tail", start=20)]
    got = list(group_text(elems))
    assert [g.text for g in got if isinstance(g, TextMessage)] == ["boot ok\n", "second", "tail"]
    assert _flat(got) == elems
    first = got[0]
    assert isinstance(first, TextMessage)
    assert first.offset == 0 and first.offsets == list(range(8))
    assert bytes(first.payloads) == b"boot ok\n"
    assert message_details(got[1]) == 'master 0x40 channel 0x0001  text "second"  6 bytes  marker'  # type: ignore[arg-type]


def test_channel_change_non_text_and_other_elements_end_a_run() -> None:
    elems: list[Element] = [
        *_sw(b"ab", channel=1),
        *_sw(b"cd", channel=2, start=2),
        SWTrace(4, 0x40, 2, payload_bits=8, payload=0x01),  # not text
        *_sw(b"ef", channel=2, start=5),
        Timestamp(7, 0x100),
        *_sw(b"gh", channel=2, start=8),
        SWTrace(10, 0x40, 2, payload_bits=16, payload=0x6869),  # not a byte write
    ]
    got = list(group_text(elems))
    assert [g.text if isinstance(g, TextMessage) else g.TYPE.name for g in got] == [
        "ab",
        "cd",
        "SWTRACE",
        "ef",
        "TIMESTAMP",
        "gh",
        "SWTRACE",
    ]
    assert _flat(got) == elems


def test_nul_ends_a_string_and_a_lone_byte_stays_an_element() -> None:
    elems = [*_sw(b"hi\x00"), *_sw(b"x", start=3), *_sw(b"\x01", start=4), *_sw(b"\x00", start=5)]
    got = list(group_text(elems))
    msg = got[0]
    assert isinstance(msg, TextMessage) and msg.text == "hi" and msg.payloads[-1] == 0
    assert got[1:] == elems[3:]


def test_long_runs_are_cut() -> None:
    elems = _sw(b"a" * (2 * MAX_TEXT + 5))
    got = list(group_text(elems))
    assert [len(g.text) for g in got if isinstance(g, TextMessage)] == [MAX_TEXT, MAX_TEXT, 5]


def test_itm_timestamps_inside_a_string_follow_it() -> None:
    port = [
        ITMTrace(i, ITMPacketType.SWIT, src_id=3, payload_size=1, value=b)
        for i, b in enumerate(b"ok\n")
    ]
    ts = ITMTrace(1, ITMPacketType.TS_SYNC, value=5, timestamp=5)
    got = list(group_text([port[0], ts, port[1], port[2]]))
    assert isinstance(got[0], TextMessage) and got[0].text == "ok\n" and got[1] is ts
    assert message_details(got[0]) == 'stimulus port 3  text "ok\\n"  3 bytes'
    # A lone byte before a timestamp: both as they were, in order.
    assert list(group_text([port[0], ts])) == [port[0], ts]


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 255), st.booleans()), max_size=60))
def test_nothing_is_lost_or_reordered(writes: list[tuple[int, int, bool]]) -> None:
    elems = [
        SWTrace(i, 0x40, ch, payload_bits=8, payload=v, marker=m)
        for i, (ch, v, m) in enumerate(writes)
    ]
    got = list(group_text(elems))
    assert _flat(got) == elems
    for g in got:
        if isinstance(g, TextMessage):
            assert len(g.elements) > 1 and len({e.channel for e in g.elements}) == 1  # type: ignore[union-attr]
            assert g.text.encode() == bytes(g.payloads).rstrip(b"\x00")


def test_quote_text() -> None:
    assert quote_text('a"b\\c\td\r\n') == '"a\\"b\\\\c\\td\\r\\n"'


def test_cli_itm_strings(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    data = SYNC + encode_packets([Swit(0, b"", 0, c, 1) for c in b"hello\nworld"])
    path = tmp_path / "swo.bin"
    path.write_bytes(format_frames([(0x01, data)]))
    args = ["decode", str(path), "--protocol", "itm", "--no-summary", "--format", "jsonl"]
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert main(args) == 0
    lines = [json.loads(t) for t in out.getvalue().splitlines()]
    assert [e["text"] for e in lines if "text" in e] == ["hello\n", "world"]
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert main([*args, "--no-strings"]) == 0
    raw = [json.loads(t) for t in out.getvalue().splitlines()]
    assert bytes(e["value"] for e in raw if e["type"] == "ITMTRACE") == b"hello\nworld"
