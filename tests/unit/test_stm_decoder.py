"""STM decoder and listing text: SWTRACE elements and packet lines as the reference prints them."""

from __future__ import annotations

from cstrace.capture import Stream
from cstrace.elements import EoTrace, NoSync, SWTrace, UnsyncReason
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.stm import iter_elements, iter_packets
from cstrace.protocols.stm import packets as P
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.stm import packet_text
from tests.unit.test_stm_reader import ASYNC, SYNC_V3, nib


def decode(text: str, *, reset: bool = False, complete: bool = True) -> list[object]:
    stream = Stream.from_chunks(0x20, [(0, nib(text))])
    ctx = DecodeContext(0x20, DecodeOptions(), reset=reset, complete=complete)
    return list(iter_elements(iter_packets(stream, None, complete), None, ctx))


def texts(text: str) -> list[str]:
    return [element_text(e) for e in decode(text)]  # type: ignore[arg-type]


def test_no_sync_then_payloads_then_end() -> None:
    elems = decode(SYNC_V3 + "141 6 10000000 0")
    assert isinstance(elems[0], NoSync) and elems[0].reason == UnsyncReason.INIT_DECODER
    sw = elems[1]
    assert isinstance(sw, SWTrace)
    assert (sw.master, sw.channel, sw.id_valid, sw.payload_bits, sw.payload) == (
        0x41,
        0,
        True,
        32,
        0x10000000,
    )
    assert isinstance(elems[-1], EoTrace)
    assert elems[-1].offset == 20  # the last packet: the padding NULL in a high nibble


def test_reset_reason_and_incomplete_capture() -> None:
    elems = decode(SYNC_V3, reset=True, complete=False)
    assert isinstance(elems[0], NoSync) and elems[0].reason == UnsyncReason.RESET_DECODER
    assert not any(isinstance(e, EoTrace) for e in elems)


def test_element_texts() -> None:
    lines = texts(
        SYNC_V3
        + "f08 0124f800"  # FREQ before any master: ids not valid
        + "140 f3 0480 a 01021010 0"  # D32MTS with an empty timestamp update
        + "e c 0003aeb284c9"  # FLAG_TS
        + "f06 42"  # TRIG
        + "2 14"  # MERR: channel back to 0
        + "f2 55"  # GERR
        + "c 3"  # D4 after GERR: ids not valid
        + "f01 2 d6"  # NULL_TS
    )
    assert lines[1:] == [
        "OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x0124f800; Freq)",
        "OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x40; Ch:0x480) 0x01021010; +Mrk  [ TS=0x000000000000]; )",
        "OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x40; Ch:0x480) +Mrk  [ TS=0x0003aeb284c9]; )",
        "OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x40; Ch:0x480) 0x42; Trig )",
        "OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x40; Ch:0x00) 0x14; {Master Error.})",
        "OCSD_GEN_TRC_ELEM_SWTRACE({Global Error.})",
        "OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x3; )",
        "OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??)  [ TS=0x0003aeb284d6]; )",
        "OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
    ]


def test_version_resets_master_and_channel() -> None:
    lines = texts(SYNC_V3 + "141 3 05 f003 4 aa")
    assert lines[1] == "OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x00; Ch:0x00) 0xaa; )"


def test_bad_packet_stops_decoding_without_end_of_trace() -> None:
    elems = decode(SYNC_V3 + "4 aa f1 4 bb")
    assert isinstance(elems[-1], SWTrace)
    assert elems[-1].payload == 0xAA


def test_nothing_before_async_is_decoded() -> None:
    elems = decode("141 4 aa" + ASYNC + "f003")
    assert [type(e) for e in elems] == [NoSync, EoTrace]


def test_packet_texts() -> None:
    cases: list[tuple[P.StmPacket, str]] = [
        (P.Async(0, b""), "ASYNC:Alignment synchronisation packet"),
        (P.Version(0, b"", 3), "VERSION:Version packet; Ver=3"),
        (P.Null(0, b"", None, 0), "NULL:Null packet"),
        (
            P.Null(0, b"", 0x3B08, 16),
            "NULL:Null packet; TS=0x0000000000003B08 ~[0x3B08]",
        ),
        (P.M8(0, b"", 0x41), "M8:Set current master; Master=0x41"),
        (P.C8(0, b"", 1), "C8:Set current channel; Chan=0x0001"),
        (P.C16(0, b"", 0x480), "C16:Set current channel; Chan=0x0480"),
        (P.MErr(0, b"", 0x14), "MERR:Master Error"),
        (P.GErr(0, b"", 0x14), "GERR:Global Error"),
        (P.Freq(0, b"", 19200000), "FREQ:Frequency packet; Freq=19200000Hz"),
        (P.Trig(0, b"", 0x42), "TRIG:Trigger packet; TrigData=0x42"),
        (P.Data(0, b"", 4, 0xA), "D4:4 bit data; Data=0xa"),
        (P.Data(0, b"", 8, 0xF3, True), "D8M:8 bit data + marker; Data=0xf3"),
        (
            P.Data(0, b"", 32, 0x000C709C, False, 0, 0),
            "D32TS:32 bit data + timestamp; Data=0x000c709c; TS=0x0000000000000000",
        ),
        (
            P.Data(0, b"", 64, 1, True, 0x3AEB284D6, 8),
            "D64MTS:64 bit data + marker + timestamp; Data=0x0000000000000001; "
            "TS=0x00000003AEB284D6 ~[0xD6]",
        ),
        (
            P.Flag(0, b"", 0x3AEB284C9, 36),
            "FLAGTS:Flag packet + timestamp; TS=0x00000003AEB284C9 ~[0x3AEB284C9]",
        ),
        (P.NotSync(0, b""), "NOTSYNC:STM not synchronised"),
        (P.Reserved(0, b"", 0x1F), "RESERVED:Reserved Packet Header"),
        (
            P.BadSequence(0, b"", P.StmPktType.D8, True),
            "BAD_SEQUENCE:Invalid sequence in packet[D8M]",
        ),
        (
            P.IncompleteEot(0, b"", P.StmPktType.D32),
            "INCOMPLETE_EOT:Incomplete packet flushed at end of trace[D32]",
        ),
    ]
    for pkt, text in cases:
        assert packet_text(pkt) == text
