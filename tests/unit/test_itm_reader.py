"""ITM reader, decoder and listing text on hand-made bytes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cstrace.capture import Stream, demux
from cstrace.capture.encode import format_frames
from cstrace.capture.lazy import LazyStream
from cstrace.elements import EoTrace, ITMPacketType, ITMTrace, NoSync
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.itm import ItmConfig, iter_elements, iter_packets
from cstrace.protocols.itm import packets as P
from cstrace.protocols.itm.reader import HEADER_ROWS, HEADERS
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.itm import packet_text

SYNC = bytes.fromhex("000000000080")


def read(*chunks: tuple[int, bytes], complete: bool = True) -> list[P.ItmPacket]:
    return list(iter_packets(Stream.from_chunks(0x14, list(chunks)), None, complete))


def synced(data: bytes) -> list[P.ItmPacket]:
    pkts = read((0, SYNC + data))
    assert isinstance(pkts[0], P.NotSync) and pkts[0].raw == b""
    assert isinstance(pkts[1], P.Async)
    return pkts[2:]


def test_header_rows_cover_every_byte_once() -> None:
    seen: dict[int, str] = {}
    for _kind, values, cite in HEADER_ROWS:
        for v in values:
            assert v not in seen, f"0x{v:02x} in '{seen.get(v)}' and '{cite}'"
            seen[v] = cite
    assert sorted(seen) == list(range(256))
    assert len(HEADERS) == 256


def test_sync_and_overflow() -> None:
    pkts = read((0, SYNC + b"\x70"))
    assert [type(p) for p in pkts] == [P.NotSync, P.Async, P.Overflow]
    assert pkts[1].raw == SYNC and pkts[1].offset == 0
    assert pkts[2].offset == 6


@pytest.mark.parametrize(
    ("data", "cls", "src", "value", "size"),
    [
        (bytes([0x19, 0xBB]), P.Swit, 3, 0xBB, 1),
        (bytes([0x0A, 0x45, 0x23]), P.Swit, 1, 0x2345, 2),
        (bytes([0x0B, 0x23, 0x01, 0x89, 0x67]), P.Swit, 1, 0x67890123, 4),
        (bytes([0x05, 0x15]), P.Dwt, 0, 0x15, 1),
        (bytes([0x0E, 0x04, 0x10]), P.Dwt, 1, 0x1004, 2),
        (bytes([0x17, 0x00, 0x10, 0x00, 0x00]), P.Dwt, 2, 0x1000, 4),
        (bytes([0xA7, 0xAA, 0x99, 0x88, 0x77]), P.Dwt, 20, 0x778899AA, 4),
    ],
)
def test_source_packets(data: bytes, cls: type, src: int, value: int, size: int) -> None:
    (pkt,) = synced(data)
    assert isinstance(pkt, cls)
    assert isinstance(pkt, P.Swit | P.Dwt)
    assert (pkt.src_id, pkt.value, pkt.size) == (src, value, size)


def test_local_timestamps() -> None:
    pkts = synced(bytes([0x20, 0xC0, 0x82, 0xC8, 0x04, 0xF0, 0xDE, 0xFE, 0xD0, 0x3A]))
    short, three, four = pkts
    assert isinstance(short, P.LocalTs) and short.compact and short.value == 2
    assert isinstance(three, P.LocalTs) and (three.tc, three.value, three.size) == (0, 0x12402, 3)
    assert isinstance(four, P.LocalTs) and (four.tc, four.value, four.size) == (3, 0x07543F5E, 4)


def test_global_timestamps() -> None:
    pkts = synced(bytes.fromhex("94d6e8c807"))
    assert isinstance(pkts[0], P.GlobalTs1)
    assert (pkts[0].flags, pkts[0].value, pkts[0].size) == (0, 0xF23456, 4)
    pkts = synced(bytes.fromhex("9482cffa77b49398a0a08000"))
    gts1, gts2 = pkts
    assert isinstance(gts1, P.GlobalTs1) and gts1.flags == 3 and gts1.value == 0x2FEA782
    assert gts1.raw == bytes.fromhex("9482cffa17")  # the reference prints it without flags
    assert isinstance(gts2, P.GlobalTs2) and gts2.size == 6 and gts2.value == 0x04080C13


def test_extension_packets() -> None:
    pkts = synced(bytes([0x28, 0x0C, 0x8C, 0x05]))
    page, hw, long = pkts
    assert isinstance(page, P.Extension) and (page.hardware, page.nbits, page.value) == (
        False,
        2,
        2,
    )
    assert isinstance(hw, P.Extension) and hw.hardware and hw.nbits == 2
    assert isinstance(long, P.Extension) and (long.nbits, long.value) == (9, 0x28)


def test_reserved_header_stops_reading() -> None:
    pkts = synced(bytes([0x04, 0x70, 0x70]))
    assert len(pkts) == 1 and isinstance(pkts[0], P.Reserved)


def test_too_long_continuation_is_a_bad_sequence() -> None:
    pkts = synced(bytes([0xC0, 0x80, 0x80, 0x80, 0x80, 0x00, 0x70]))
    assert len(pkts) == 1 and isinstance(pkts[0], P.BadSequence)
    assert pkts[0].orig == P.ItmPktType.TS_LOCAL


def test_notsync_blocks_as_the_reference_prints_them() -> None:
    pkts = read(
        (0, bytes.fromhex("f0000034001233441243556622 77".replace(" ", ""))),
        (16, bytes.fromhex("8899000000000080")),
    )
    assert [(p.offset, p.raw.hex()) for p in pkts] == [
        (0, "f0"),
        (1, "000034"),
        (4, "0012334412435566"),
        (4, "2277"),
        (16, "8899"),
        (18, "000000000080"),
    ]
    assert [getattr(p, "decoded", None) for p in pkts] == [True, False, False, False, False, None]


def test_incomplete_packet() -> None:
    pkts = synced(bytes([0x0B, 0x01]))
    assert isinstance(pkts[0], P.IncompleteEot) and pkts[0].orig == P.ItmPktType.SWIT
    assert read((0, SYNC + bytes([0x0B, 0x01])), complete=False)[-1].KIND == P.ItmPktType.ASYNC


def decode(data: bytes, itmtcr: int = 0x140000) -> list[str]:
    stream = Stream.from_chunks(0x14, [(0, data)])
    ctx = DecodeContext(0x14, DecodeOptions())
    return [
        element_text(e)
        for e in iter_elements(iter_packets(stream, None, True), ItmConfig(itmtcr), ctx)
    ]


def test_element_texts() -> None:
    lines = decode(
        b"\xf0"
        + SYNC
        + bytes.fromhex(
            "70 19bb"  # overflow marks the next element
            "20 c08204"  # local timestamps accumulate
            "28 520123"  # stimulus page 2: channel 0x4a
            "9456"  # GTS1 before any GTS2: held back
            "b401"  # GTS2: output
            "9457"  # GTS1: output
            "0e0410"  # exception trace
            "04"  # reserved: stop
            "70".replace(" ", "")
        )
    )
    assert lines == [
        "OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
        "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_OVERFLOW; ITM_SWIT (ch: 0x3; Data: 0xbb) )",
        "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_LOCAL ( TS delta: 0x00000002, { TS Sync}; "
        "TS cumulative: 0x0000000000000002) )",
        "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_LOCAL ( TS delta: 0x00000202, { TS Sync}; "
        "TS cumulative: 0x0000000000000204) )",
        "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x4a; Data: 0x2301) )",
        "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_GLOBAL ( TS: 0x0000000004000056) )",
        "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_GLOBAL ( TS: 0x0000000004000057) )",
        "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x1; Data: 0x1004) )",
    ]


def test_prescaler_and_end_of_trace() -> None:
    # SWOENA (bit 4) and TSPrescale 2 (/16): local timestamp deltas count 16 each.
    lines = decode(SYNC + b"\x30", itmtcr=0x140210)
    assert "TS cumulative: 0x0000000000000030" in lines[1]
    stream = Stream.from_chunks(0x14, [])
    elems = list(iter_elements(iter_packets(stream), None, DecodeContext(0x14, DecodeOptions())))
    assert len(elems) == 1 and isinstance(elems[0], EoTrace) and elems[0].offset == 0


def test_decoder_waits_for_sync() -> None:
    stream = Stream.from_chunks(0x14, [(0, b"\x19\xbb" + SYNC + b"\x19\xcc")])
    elems = list(iter_elements(iter_packets(stream), None, DecodeContext(0x14, DecodeOptions())))
    assert isinstance(elems[0], NoSync)
    sw = elems[1]
    assert isinstance(sw, ITMTrace) and sw.pkt_type == ITMPacketType.SWIT and sw.value == 0xCC


def test_packet_texts() -> None:
    cases: list[tuple[P.ItmPacket, str]] = [
        (P.NotSync(0, b""), "ITM_NOTSYNC: ; 'ITM data stream not synchronised'"),
        (P.Async(0, b""), "ITM_ASYNC: ; 'Alignment synchronisation packet'"),
        (P.Overflow(0, b""), "ITM_OVERFLOW: ; 'ITM overflow packet'"),
        (
            P.Swit(0, b"", 3, 0xBB, 1),
            "ITM_SWIT: {src id: 0x03}  0xbb; 'Software Stimulus write packet'",
        ),
        (
            P.Dwt(0, b"", 0, 0x15, 1),
            "ITM_DWT: {desc: 0x00} [Event Counter: 0x15; Flags:  CPI  ---  Sleep  ---  Fold  "
            "--- ] ; 'DWT hardware stimulus write'",
        ),
        (
            P.Dwt(0, b"", 1, 0x2123, 2),
            "ITM_DWT: {desc: 0x01} [Exception Num:  0x0123(exited) ]; "
            "'DWT hardware stimulus write'",
        ),
        (
            P.Dwt(0, b"", 2, 0x1000, 4),
            "ITM_DWT: {desc: 0x02} [PC Sample: 0x00001000] ; 'DWT hardware stimulus write'",
        ),
        (
            P.Dwt(0, b"", 8, 0x1000, 4),
            "ITM_DWT: {desc: 0x08} [Data Trc: comp=0; PC Value=0x00001000 ] ; "
            "'DWT hardware stimulus write'",
        ),
        (
            P.Dwt(0, b"", 11, 0x1000, 2),
            "ITM_DWT: {desc: 0x0b} [Data Trc: comp=1; Address=0x1000 ] ; "
            "'DWT hardware stimulus write'",
        ),
        (
            P.Dwt(0, b"", 0x13, 0x2233, 2),
            "ITM_DWT: {desc: 0x13} [Data Trc: comp=1; Val write: 0x2233] ; "
            "'DWT hardware stimulus write'",
        ),
        (
            P.Dwt(0, b"", 6, 0x2000, 4),
            "ITM_DWT: {desc: 0x06} [Reserved discriminator value] ; 'DWT hardware stimulus write'",
        ),
        (
            P.LocalTs(0, b"", 2, 0x1342, 2),
            "ITM_TS_LOCAL: 0x1342 { TS Sync, Packet Delayed }; 'Local Timestamp'",
        ),
        (
            P.GlobalTs1(0, b"", 3, 0x2FEA782, 4),
            "ITM_GTS_1: { TS bits [25:0], Clk change, Clk wrap} 0x02fea782; "
            "'Global Timestamp [25:0]'",
        ),
        (
            P.GlobalTs2(0, b"", 0x48D16, 4),
            "ITM_GTS_2: { TS bits [47:26]} 0x00048d16; 'Global Timestamp [{63|42}:26]'",
        ),
        (
            P.GlobalTs2(0, b"", 0x4080C13, 6),
            "ITM_GTS_2: { TS bits [63:26]} 0x0004080c13; 'Global Timestamp [{63|42}:26]'",
        ),
        (
            P.Extension(0, b"", False, 2, 2),
            "ITM_EXTENSION: {stim port page} 0x02; 'Extension packet'",
        ),
        (
            P.Extension(0, b"", True, 9, 0x28),
            "ITM_EXTENSION: {unknown extension type, 10 bits } 0x028; 'Extension packet'",
        ),
        (P.Reserved(0, b""), "ITM_RESERVED: ; 'Reserved Packet Header'"),
        (
            P.BadSequence(0, b"", P.ItmPktType.TS_LOCAL),
            "ITM_BAD_SEQUENCE: [Init type: ITM_TS_LOCAL] ; 'Invalid sequence in packet'",
        ),
        (
            P.IncompleteEot(0, b"", P.ItmPktType.SWIT),
            "ITM_INCOMPLETE_EOT: [Init type: ITM_SWIT] ; "
            "'Incomplete packet flushed at end of trace'",
        ),
    ]
    for pkt, text in cases:
        assert packet_text(pkt) == text


def test_lazy_streams_in_small_blocks_give_the_same_packets() -> None:
    body = bytes.fromhex(
        "70 19bb 20 c0828204 28 520123 94d6e8c807 b49398a0a08000 0b01020304".replace(" ", "")
    )
    data = bytes(range(1, 30)) + SYNC + body * 20 + bytes(12) + b"\x80" + body
    capture = format_frames([(0x14, data)])
    want = [repr(p) for p in iter_packets(demux(capture, "coresight").streams[0x14])]
    for size in (16, 32, 48, 160):

        def read() -> Iterator[bytes]:
            yield capture

        assert [repr(p) for p in iter_packets(LazyStream(0x14, read, block_size=size))] == want
    single = bytes(range(1, 250)) * 9 + data
    want = [repr(p) for p in iter_packets(Stream(None, single))]
    for size in (16, 100, 1000):

        def read_single() -> Iterator[bytes]:
            yield single

        assert [
            repr(p) for p in iter_packets(LazyStream(None, read_single, block_size=size))
        ] == want
