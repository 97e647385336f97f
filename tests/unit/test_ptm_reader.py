"""PTM packet reader and packet text: hand-made bytes, the header table, synchronisation."""

from __future__ import annotations

import pytest

from cstrace.capture import Stream
from cstrace.elements import Isa
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.encoder import (
    encode_async,
    encode_atom_ca,
    encode_atoms,
    encode_branch,
    encode_isync,
    encode_timestamp,
)
from cstrace.protocols.ptm.packets import (
    VMID,
    ASync,
    Atom,
    BadSequence,
    BranchAddress,
    ContextID,
    ExceptionReturn,
    Ignore,
    IncompleteEOT,
    ISync,
    ISyncReason,
    NotSync,
    PtmPacketType,
    Reserved,
    Timestamp,
    Trigger,
    WaypointUpdate,
)
from cstrace.protocols.ptm.reader import HEADER_ROWS, HEADER_TABLE, iter_packets, pattern_bytes
from cstrace.render.ocsd.ptm import packet_text

SYNC = encode_async() + encode_isync(0x1000, Isa.A32, ISyncReason.PERIODIC)
PLAIN = PtmConfig(trace_id=0x10)
CA = PtmConfig(trace_id=0x10, etmcr=1 << 12)


def read(data: bytes, config: PtmConfig = PLAIN, complete: bool = True) -> list[object]:
    return list(iter_packets(Stream.from_chunks(0x10, [(0, data)]), config, complete))


def after_sync(data: bytes, config: PtmConfig = PLAIN) -> list[object]:
    sync = encode_async() + encode_isync(
        0x1000, Isa.A32, ISyncReason.PERIODIC, ctxt_id_bytes=config.ctxt_id_bytes
    )
    pkts = read(sync + data, config)
    assert isinstance(pkts[0], ASync) and isinstance(pkts[1], ISync)
    return pkts[2:]


# --- header table -------------------------------------------------------------------


def test_header_rows_cover_every_byte_once() -> None:
    seen: dict[int, str] = {}
    for row in HEADER_ROWS:
        row_bytes: set[int] = set()
        for pattern in row.patterns:
            assert len(pattern) == 8 and set(pattern) <= {"0", "1", "x"}
            row_bytes |= pattern_bytes(pattern)
        for b in row_bytes:
            assert b not in seen, f"0x{b:02x} in both {seen[b]!r} and {row.spec!r}"
            seen[b] = row.spec
        assert row.spec.startswith("§4.5")
    assert sorted(seen) == list(range(256))


def test_header_table_kinds() -> None:
    assert HEADER_TABLE[0x00] == PtmPacketType.A_SYNC
    assert HEADER_TABLE[0x08] == PtmPacketType.I_SYNC
    assert HEADER_TABLE[0x42] == HEADER_TABLE[0x46] == PtmPacketType.TIMESTAMP
    assert HEADER_TABLE[0x72] == PtmPacketType.WAYPOINT_UPDATE
    assert HEADER_TABLE[0x6E] == PtmPacketType.CONTEXT_ID
    assert HEADER_TABLE[0x3C] == PtmPacketType.VMID
    assert HEADER_TABLE[0x76] == PtmPacketType.EXCEPTION_RETURN
    assert HEADER_TABLE[0x66] == PtmPacketType.IGNORE
    assert HEADER_TABLE[0x0C] == PtmPacketType.TRIGGER
    assert all(HEADER_TABLE[b] == PtmPacketType.BRANCH_ADDRESS for b in range(1, 256, 2))
    assert all(HEADER_TABLE[b] == PtmPacketType.ATOM for b in range(0x80, 256, 2))
    assert HEADER_TABLE[0x02] == HEADER_TABLE[0x7E] == PtmPacketType.RESERVED


# --- synchronisation ----------------------------------------------------------------


def test_unsynced_bytes_are_cut_every_16_bytes() -> None:
    junk = bytes(range(1, 40))
    pkts = read(junk + SYNC)
    notsync = [p for p in pkts if isinstance(p, NotSync)]
    assert [len(p.raw) for p in notsync] == [16, 16, 7]
    assert [p.offset for p in notsync] == [0, 16, 32]
    assert isinstance(pkts[3], ASync) and pkts[3].offset == 39


def test_unsynced_blocks_follow_formatter_runs() -> None:
    # two runs (two frames): a NotSync packet ends with each run
    stream = Stream.from_chunks(0x10, [(0, b"\x11\x22\x33"), (16, b"\x44" + SYNC)])
    pkts = list(iter_packets(stream, PLAIN, True))
    assert [(p.offset, p.raw) for p in pkts[:2]] == [(0, b"\x11\x22\x33"), (16, b"\x44")]
    assert isinstance(pkts[2], ASync) and pkts[2].offset == 17


def test_async_split_across_blocks_keeps_its_first_index() -> None:
    stream = Stream.from_chunks(0x10, [(0, b"\x11\x00\x00"), (16, b"\x00\x00\x00\x80")])
    pkts = list(iter_packets(stream, PLAIN, True))
    assert isinstance(pkts[0], NotSync) and pkts[0].raw == b"\x11"
    assert isinstance(pkts[1], ASync) and pkts[1].offset == 1 and pkts[1].raw == encode_async()


def test_async_with_extra_zeros() -> None:
    pkts = read(encode_async(3))
    assert len(pkts) == 1 and isinstance(pkts[0], ASync) and len(pkts[0].raw) == 9


def test_no_sync_at_all_ends_with_pending_zeros() -> None:
    pkts = read(b"\x12\x00\x00")
    assert isinstance(pkts[0], NotSync) and pkts[0].raw == b"\x12"
    assert isinstance(pkts[1], IncompleteEOT) and pkts[1].offset == 1
    assert len(read(b"\x12\x00\x00", complete=False)) == 1


def test_bad_async_after_sync_is_a_bad_sequence() -> None:
    pkts = after_sync(b"\x00\x00\x01" + bytes(16) + b"\x80")
    assert isinstance(pkts[0], BadSequence) and pkts[0].raw == b"\x00\x00\x01"
    assert pkts[0].kind == PtmPacketType.A_SYNC
    assert isinstance(pkts[1], BadSequence) and pkts[1].raw == bytes(16)
    assert packet_text(pkts[0]) == "BAD_SEQUENCE : Invalid sequence in packet; [ASYNC]; "


def test_reserved_header_and_trailing_incomplete_packet() -> None:
    pkts = after_sync(b"\x02\x81\x80")
    assert isinstance(pkts[0], Reserved)
    assert isinstance(pkts[1], IncompleteEOT) and pkts[1].raw == b"\x81\x80"


# --- packets --------------------------------------------------------------------------


def test_isync_fields_and_text() -> None:
    raw = bytes([0x08, 0x58, 0x05, 0x00, 0x80, 0x61])
    (pkt,) = read(encode_async() + raw)[1:]
    assert isinstance(pkt, ISync)
    assert pkt.address == 0x80000558 and pkt.isa == Isa.A32
    assert pkt.reason == ISyncReason.DEBUG_EXIT and not pkt.ns and pkt.cycle_count is None
    assert packet_text(pkt) == (
        "ISYNC : Instruction Synchronisation packet; (Debug Exit); Addr=0x80000558; S;  "
        "ISA=ARM(32); "
    )


def test_isync_cycle_count_and_context_id() -> None:
    config = PtmConfig(trace_id=0x10, etmcr=(1 << 12) | (3 << 14))
    raw = encode_isync(
        0x2001,
        Isa.T32,
        ISyncReason.TRACE_ON,
        ns=True,
        cycle_count=380,
        context_id=0x1234,
        ctxt_id_bytes=4,
    )
    (pkt,) = read(encode_async() + raw, config)[1:]
    assert isinstance(pkt, ISync)
    assert (pkt.address, pkt.isa, pkt.ns) == (0x2000, Isa.T32, True)
    assert (pkt.cycle_count, pkt.context_id) == (380, 0x1234)
    assert "CtxtID=00001234; ISA=Thumb2; Cycles=380; " in packet_text(pkt)
    # periodic I-syncs carry no cycle count even in cycle-accurate mode
    raw = encode_isync(0x2000, Isa.A32, ISyncReason.PERIODIC, context_id=7, ctxt_id_bytes=4)
    (pkt,) = read(encode_async() + raw, config)[1:]
    assert isinstance(pkt, ISync) and pkt.cycle_count is None and pkt.context_id == 7


def test_isync_thumbee() -> None:
    (pkt,) = read(encode_async() + encode_isync(0x3000, Isa.TEE))[1:]
    assert isinstance(pkt, ISync) and pkt.isa == Isa.TEE and pkt.alt_isa


@pytest.mark.parametrize(
    ("header", "text"),
    [(0x84, "E"), (0x86, "N"), (0x88, "EE"), (0xD0, "ENEEE"), (0xD2, "ENEEN"), (0x9C, "NNE")],
)
def test_atoms(header: int, text: str) -> None:
    (pkt,) = after_sync(bytes([header]))
    assert isinstance(pkt, Atom) and pkt.cycle_count is None
    assert packet_text(pkt) == f"ATOM : Atom packet; {text}; "


def test_cycle_accurate_atoms() -> None:
    pkts = after_sync(bytes([0xBE, 0xFA, 0x01, 0xE8, 0x20]), CA)
    assert [(p.bits, p.cycle_count, len(p.raw)) for p in pkts] == [  # type: ignore[attr-defined]
        (0, 15, 1),
        (0, 30, 2),
        (1, 522, 2),
    ]
    assert packet_text(pkts[1]) == "ATOM : Atom packet; N; Cycles=30; "


def test_branch_address_compressed_and_text() -> None:
    pkts = after_sync(bytes([0xA7, 0xEA, 0x0E, 0x44, 0x01]), CA)
    (pkt,) = pkts
    assert isinstance(pkt, BranchAddress)
    assert pkt.address == 0x00076A4C and pkt.pkt_bits == 21 and pkt.cycle_count == 17
    assert packet_text(pkt) == (
        "BRANCH_ADDRESS : Branch address packet; Addr=0x00076A4C ~[0x76A4C]; Cycles=17; "
    )


def test_branch_address_before_isync_shows_unknown_bits() -> None:
    pkts = read(encode_async() + bytes([0xFF, 0x26, 0x04]), CA)
    pkt = pkts[1]
    assert isinstance(pkt, BranchAddress) and pkt.isa == Isa.UNKNOWN
    assert packet_text(pkt) == (
        "BRANCH_ADDRESS : Branch address packet; Addr=0x????137E (12:0) ~[0x137E]; Cycles=1; "
    )


def test_branch_address_with_exception() -> None:
    (pkt,) = after_sync(bytes([0x81, 0x80, 0x80, 0x80, 0x48, 0x02]))
    assert isinstance(pkt, BranchAddress)
    assert pkt.address == 0 and pkt.exception == 1 and pkt.ns_updated and not pkt.ns
    assert packet_text(pkt).endswith("Addr=0x00000000 ~[0x0]; S; Excep=Debug Halt [01]; ")


def test_branch_address_isa_change_and_long_exception() -> None:
    raw = encode_branch(0xB643D836, Isa.T32, exception=0x1F3, ns=True, hyp=True, cycle_count=9)
    (pkt,) = after_sync(raw, CA)
    assert isinstance(pkt, BranchAddress)
    assert (pkt.address, pkt.isa, pkt.isa_changed) == (0xB643D836, Isa.T32, True)
    assert (pkt.exception, pkt.ns, pkt.hyp, pkt.cycle_count) == (0x1F3, True, True, 9)
    assert "ISA=Thumb2; NS; Hyp; Excep=Unknown [1f3]; Cycles=9; " in packet_text(pkt)


def test_branch_address_jazelle() -> None:
    (pkt,) = after_sync(encode_branch(0x12345677, Isa.JAZELLE))
    assert isinstance(pkt, BranchAddress) and pkt.isa == Isa.JAZELLE
    assert pkt.address == 0x12345677


def test_waypoint_update() -> None:
    pkts = after_sync(b"\x72\x79")
    (pkt,) = pkts
    assert isinstance(pkt, WaypointUpdate) and pkt.address == 0x10F0 and pkt.pkt_bits == 8
    assert packet_text(pkt) == "WP_UPDATE : Waypoint update packet; Addr=0x000010F0 ~[0xF0]; "


def test_timestamps_48_and_64_bit() -> None:
    raw = bytes([0x42, 0xE7, 0xF0, 0xAE, 0xC8, 0x8E, 0x8B, 0x00, 0x0C])
    (pkt,) = after_sync(raw, PtmConfig(trace_id=0x10, etmcr=0x10001000, etmidr=0x411CF301))
    assert isinstance(pkt, Timestamp)
    assert (pkt.timestamp, pkt.update_bits, pkt.cycle_count) == (0x58E90BB867, 48, 3)
    assert packet_text(pkt) == (
        "TIMESTAMP : Timestamp packet; TS=0x00000058E90BB867 ~[0x58E90BB867](381866981479); "
        "Cycles=3; "
    )
    ts64 = PtmConfig(trace_id=0x10, etmccer=1 << 29, etmidr=0x411CF312)
    value = 0xFEDCBA9876543210
    pkts = after_sync(
        encode_timestamp(value, ts_64bit=True) + encode_timestamp(0x5, nbytes=1), ts64
    )
    assert [(p.timestamp, p.update_bits) for p in pkts] == [  # type: ignore[attr-defined]
        (value, 64),
        ((value & ~0x7F) | 5, 7),
    ]


def test_single_byte_packets_and_context() -> None:
    config = PtmConfig(trace_id=0x10, etmcr=2 << 14)
    pkts = after_sync(b"\x0c\x76\x66\x6e\x34\x12\x3c\x07", config)
    assert [type(p) for p in pkts] == [Trigger, ExceptionReturn, Ignore, ContextID, VMID]
    assert pkts[3].context_id == 0x1234  # type: ignore[attr-defined]
    assert packet_text(pkts[3]) == "CTXTID : Context ID packet; CtxtID=0x00001234; "
    assert packet_text(pkts[4]) == "VMID : VM ID packet; VMID=0x07; "


def test_packets_continue_across_runs_with_their_first_index() -> None:
    data = SYNC + encode_atom_ca(True, 1000)
    stream = Stream.from_chunks(0x10, [(0, data[:-1]), (32, data[-1:])])
    pkts = list(iter_packets(stream, CA, True))
    assert isinstance(pkts[-1], Atom) and pkts[-1].cycle_count == 1000
    assert pkts[-1].offset == len(data) - 2


def test_encoded_atoms_read_back() -> None:
    for pattern in ([True], [False, True], [True, False, False], [False] * 4, [True] * 5):
        (pkt,) = after_sync(encode_atoms(pattern))
        assert isinstance(pkt, Atom) and pkt.count == len(pattern)
        assert [bool((pkt.bits >> i) & 1) for i in range(pkt.count)] == pattern


def test_carried_zeros_are_listed_again_and_over_read() -> None:
    # A 0x00 ends a full 15-byte frame block; the next block does not continue an
    # A-sync. The reference lists the carried 0x00 again, then over-counts by one
    # and reads one byte past the 15-byte block (its slot's byte count, 15).
    first = bytes([0x11] * 14) + b"\x00"
    second = bytes([0x22] * 15)
    stream = Stream.from_chunks(0x10, [(0, first), (16, second), (32, SYNC)])
    pkts = list(iter_packets(stream, PLAIN, True))
    notsync = [p for p in pkts if isinstance(p, NotSync)]
    assert [(p.offset, p.raw, p.carried) for p in notsync] == [
        (0, bytes([0x11] * 14), False),
        (14, b"\x00", True),
        (15, second + b"\x0f", False),
    ]
    assert isinstance(pkts[len(notsync)], ASync) and pkts[len(notsync)].offset == 32
