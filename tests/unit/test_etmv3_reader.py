"""ETMv3 packet reader: the header table, and hand-made bytes for every packet kind.

Expected values come from ARM IHI 0014Q chapter 7 and from what the reference
packet processor lists for the same bytes (checked against trc_pkt_lister).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cstrace.capture import Stream
from cstrace.elements import Isa
from cstrace.protocols.base import Packet
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.packets import (
    VMID,
    ASync,
    BadSequence,
    BadTraceMode,
    BranchAddress,
    ContextID,
    CycleCount,
    DataSuppressed,
    ExceptionEntry,
    ExceptionExit,
    Ignore,
    ISync,
    ISyncReason,
    NormalData,
    NotSync,
    OOOData,
    OOOPlaceholder,
    PHeader,
    Reserved,
    StoreFailed,
    Timestamp,
    Trigger,
    ValueNotTraced,
)
from cstrace.protocols.etmv3.reader import (
    HEADER_KIND,
    HEADER_ROWS,
    Header,
    build_header_table,
    iter_packets,
    phdr_fields,
)
from cstrace.render.ocsd.etmv3 import packet_text, val_str

# TC2's Cortex-A7 ETMs: ETMv3.5, cycle-accurate, timestamps (64-bit), no context ID.
CFG = Etmv3Config(ctrl=0x10001860, ccer=0x344008F2, idr=0x410CF250, traceidr=0x10)
PLAIN = Etmv3Config(ctrl=0x10000860, ccer=0x344008F2, idr=0x410CF250, traceidr=0x10)
ASYNC = b"\x00\x00\x00\x00\x00\x80"
ISYNC_T32 = bytes([0x08, 0x00, 0x01, 0x10, 0x00, 0x00])  # periodic, 0x1000, Thumb


def read(data: bytes, cfg: Etmv3Config = PLAIN, complete: bool = True) -> list[Packet]:
    return list(iter_packets(Stream(0x10, data), cfg, complete))


def synced(data: bytes, cfg: Etmv3Config = PLAIN, complete: bool = True) -> list[Packet]:
    pkts = read(ASYNC + data, cfg, complete)
    assert isinstance(pkts[0], ASync)
    return pkts[1:]


# ---- the header table


def test_header_rows_cover_every_byte_once() -> None:
    table, hits = build_header_table()
    assert all(k is not None for k in table)
    overlaps = [f"{b:#04x}" for b, n in enumerate(hits) if n != 1]
    assert not overlaps, f"bytes matched by several rows or none: {overlaps}"


def test_header_rows_cite_the_spec() -> None:
    for pattern, _kind, cite in HEADER_ROWS:
        assert len(pattern) == 8
        assert "IHI 0014Q" in cite


@pytest.mark.parametrize(
    ("byte", "kind"),
    [
        (0x01, Header.BRANCH_ADDRESS),
        (0xFF, Header.BRANCH_ADDRESS),
        (0x00, Header.A_SYNC),
        (0x04, Header.CYCLE_COUNT),
        (0x08, Header.I_SYNC),
        (0x0C, Header.TRIGGER),
        (0x2C, Header.OOO_DATA),
        (0x50, Header.STORE_FAILED),
        (0x70, Header.I_SYNC_CYCLE),
        (0x54, Header.OOO_PLACEHOLDER),
        (0x7C, Header.OOO_PLACEHOLDER),
        (0x3C, Header.VMID),
        (0x02, Header.NORMAL_DATA),
        (0x2E, Header.NORMAL_DATA),
        (0x42, Header.TIMESTAMP),
        (0x46, Header.TIMESTAMP),
        (0x62, Header.DATA_SUPPRESSED),
        (0x66, Header.IGNORE),
        (0x6A, Header.VALUE_NOT_TRACED),
        (0x7A, Header.VALUE_NOT_TRACED),
        (0x6E, Header.CONTEXT_ID),
        (0x76, Header.EXCEPTION_EXIT),
        (0x7E, Header.EXCEPTION_ENTRY),
        (0x80, Header.P_HEADER),
        (0xFE, Header.P_HEADER),
        (0x10, Header.RESERVED),
        (0x38, Header.RESERVED),
        (0x72, Header.RESERVED),
        (0x4A, Header.RESERVED),
    ],
)
def test_header_kinds(byte: int, kind: Header) -> None:
    assert HEADER_KIND[byte] == kind


# ---- P-headers


def test_phdr_formats_not_cycle_accurate() -> None:
    assert phdr_fields(0b11001000, False) == (1, 3, 0b011, 0)  # EEN (spec example 7.1)
    assert phdr_fields(0b10001010, False) == (2, 2, 0b10, 0)  # NE
    assert phdr_fields(0x80, False) == (1, 0, 0, 0)


def test_phdr_formats_cycle_accurate() -> None:
    assert phdr_fields(0x84, True) == (1, 1, 1, 1)  # WE
    assert phdr_fields(0x82, True) == (2, 2, 0b11, 1)  # WEE
    assert phdr_fields(0x88, True) == (1, 2, 0b11, 2)  # WEWE
    assert phdr_fields(0xBC, True) == (3, 0, 0, 8)  # WWWWWWWW
    assert phdr_fields(0xF4, True) == (3, 1, 1, 6)  # WWWWWWE
    assert phdr_fields(0x92, True) == (4, 1, 1, 0)  # E
    assert phdr_fields(0x96, True) == (4, 1, 0, 0)  # N
    assert phdr_fields(0xA2, True) is None
    assert phdr_fields(0x80, True) is None


def test_phdr_packets_and_text() -> None:
    pkts = synced(bytes([0x84, 0xBC, 0x82, 0xA2, 0x88]), CFG)
    assert [packet_text(p) for p in pkts] == [
        "P_HDR : Atom P-header.; WE; Cycles=1",
        "P_HDR : Atom P-header.; WWWWWWWW; Cycles=8",
        "P_HDR : Atom P-header.; WEE; Cycles=1",
        "P_HDR : Atom P-header.; ",
        "P_HDR : Atom P-header.; WEWE; Cycles=2",
    ]
    bad = pkts[3]
    assert isinstance(bad, PHeader) and not bad.valid and bad.count == 0
    assert bad.fmt == 2  # an invalid header keeps the previous format
    plain = synced(bytes([0xC8, 0x8A]))
    assert [packet_text(p) for p in plain] == [
        "P_HDR : Atom P-header.; EEN",
        "P_HDR : Atom P-header.; NE",
    ]


# ---- synchronisation


def test_notsync_blocks_of_16_and_before_zeros() -> None:
    data = bytes([0x84] * 20) + bytes([0x84, 0x00, 0x84]) + ASYNC
    pkts = read(data)
    assert [type(p) for p in pkts] == [NotSync, NotSync, NotSync, ASync]
    assert [len(p.raw) for p in pkts] == [16, 5, 2, 6]
    assert [p.offset for p in pkts] == [0, 16, 21, 23]
    assert packet_text(pkts[0]) == "NOTSYNC : Trace Stream not synchronised"


def test_leading_zeros_split_off_before_async() -> None:
    # As the reference lists 20 zeros then 0x80: 8, then 7, then the A-sync.
    pkts = read(bytes(20) + b"\x80")
    assert [len(p.raw) for p in pkts] == [8, 7, 6]
    assert isinstance(pkts[2], ASync) and pkts[2].offset == 15
    assert packet_text(pkts[0]) == "I_RESERVED : Reserved Packet Header"
    assert packet_text(pkts[1]) == "NOTSYNC : Trace Stream not synchronised"


def test_unformatted_capture_is_read_in_1024_byte_blocks() -> None:
    data = bytes([0x84, 0x00]) + bytes([0x84] * 1100)
    pkts = list(iter_packets(Stream(None, data), PLAIN, True))
    offsets = [p.offset for p in pkts]
    assert 1009 in offsets and 1024 in offsets
    assert len(pkts[offsets.index(1009)].raw) == 15


def test_extra_zero_in_async_is_a_bad_sequence() -> None:
    pkts = synced(bytes([0x84, 0, 0, 0, 0, 0, 0, 0, 0x80]))
    assert [type(p) for p in pkts] == [PHeader, BadSequence, BadSequence, ASync]
    assert [p.offset for p in pkts] == [6, 7, 8, 9]
    assert packet_text(pkts[1]) == "BAD_SEQUENCE : Invalid sequence for packet type.[A_SYNC]"


def test_short_async_is_a_bad_sequence_and_the_byte_is_read_again() -> None:
    pkts = synced(bytes([0x00, 0x00, 0x80]))
    assert [type(p) for p in pkts] == [BadSequence, PHeader]
    assert pkts[0].raw == b"\x00\x00"


# ---- I-sync


def test_isync_thumb() -> None:
    (p,) = synced(ISYNC_T32)
    assert isinstance(p, ISync)
    assert (p.reason, p.address, p.isa, p.ns, p.cycle_count) == (
        ISyncReason.PERIODIC,
        0x1000,
        Isa.T32,
        False,
        None,
    )
    assert packet_text(p) == (
        "I_SYNC : Instruction Packet synchronisation.; (Periodic); Addr=0x00001000; S;  "
        "ISA=Thumb2; "
    )


def test_isync_with_cycle_count_from_tc2() -> None:
    raw = bytes([0x70, 0x8F, 0x3C, 0x21, 0x99, 0xF6, 0x04, 0xC0])
    (p,) = synced(raw, CFG)
    assert isinstance(p, ISync)
    assert p.cycle_count == 7695 and p.address == 0xC004F698 and p.isa == Isa.T32
    assert p.reason == ISyncReason.TRACE_ENABLE
    assert packet_text(p).endswith("(Trace Enable); Addr=0xc004f698; S;  ISA=Thumb2; Cycles=7695; ")


def test_isync_context_id_ns_hyp_and_arm() -> None:
    cfg = replace(PLAIN, ctrl=PLAIN.ctrl | (2 << 14))  # two context ID bytes
    raw = bytes([0x08, 0x34, 0x12, 0x6A, 0x00, 0x20, 0x00, 0x80])
    (p,) = synced(raw, cfg)
    assert isinstance(p, ISync)
    assert p.context_id == 0x1234 and p.ns and p.hyp and p.isa == Isa.A32
    assert p.reason == ISyncReason.DEBUG_EXIT and p.address == 0x80002000
    assert "NS; Hyp; CtxtID=1234; ISA=ARM(32); " in packet_text(p)


def test_isync_lsip_address_is_merged_over_the_first() -> None:
    # Address 0xC0001000 (top bit set, so the LSiP address follows), LSiP bytes 0x91 0xA0 0x05.
    raw = bytes([0x08, 0x80, 0x01, 0x10, 0x00, 0xC0, 0x91, 0xA0, 0x05])
    (p,) = synced(raw)
    assert isinstance(p, ISync) and p.address == 0xC0015010 and len(p.raw) == 9


# ---- branch addresses


def test_branch_compressed_from_tc2() -> None:
    pkts = synced(
        bytes([0x70, 0x8F, 0x3C, 0x21, 0x99, 0xF6, 0x04, 0xC0, 0xB7, 0xFD, 0xD6, 0x01]), CFG
    )
    b = pkts[1]
    assert isinstance(b, BranchAddress)
    assert b.address == 0xC035BEB6 and b.bits == 28 and not b.isa_changed
    assert packet_text(b) == "BRANCH_ADDRESS : Branch address.; Addr=0xC035BEB6 ~[0x35BEB6]; "


def test_branch_full_with_exception() -> None:
    # Thumb 0x1010, exception IRQ (14) in non-secure state.
    pkts = synced(ISYNC_T32 + bytes([0x91, 0xA0, 0x80, 0x80, 0x50, 0x1D]))
    b = pkts[1]
    assert isinstance(b, BranchAddress)
    assert b.address == 0x1010 and b.exception == 14 and b.ns and b.ctxt_updated
    assert packet_text(b) == (
        "BRANCH_ADDRESS : Branch address.; Addr=0x00001010 ~[0x1010]; NS; Exception=IRQ; "
    )


def test_branch_exception_cancel_text() -> None:
    pkts = synced(ISYNC_T32 + bytes([0xA1, 0xA0, 0x80, 0x80, 0x50, 0x26]))
    b = pkts[1]
    assert isinstance(b, BranchAddress) and b.cancel and b.exception == 3
    assert packet_text(b).endswith("S; Exception=Hyp; ; Cancel prev instr")


def test_branch_isa_change_to_arm() -> None:
    pkts = synced(ISYNC_T32 + bytes([0x81, 0x80, 0x80, 0x80, 0x08]))
    b = pkts[1]
    assert isinstance(b, BranchAddress) and b.isa == Isa.A32 and b.isa_changed
    assert b.address == 0 and "ISA=ARM(32); " in packet_text(b)


def test_branch_one_byte_before_sync_of_isa_uses_arm_alignment() -> None:
    (b,) = synced(bytes([0x23]))
    assert isinstance(b, BranchAddress) and b.address == 0x44 and b.bits == 8
    assert packet_text(b) == "BRANCH_ADDRESS : Branch address.; Addr=0x??????44 (7:0) ~[0x44]; "


def test_branch_alternative_encoding_exception_in_short_packet() -> None:
    alt = replace(PLAIN, idr=PLAIN.idr | (1 << 20))
    assert alt.alt_branch
    # Two address bytes; the second has no continuation and bit 6 set: exception follows.
    pkts = synced(ISYNC_T32 + bytes([0x83, 0x42, 0x05]), alt)
    b = pkts[1]
    assert isinstance(b, BranchAddress) and len(b.raw) == 3 and b.exception == 2


def test_branch_unknown_isa_keeps_the_address() -> None:
    pkts = synced(ISYNC_T32 + bytes([0x81, 0x80, 0x80, 0x80, 0x00]))
    b = pkts[1]
    assert isinstance(b, BranchAddress) and b.address == 0x1000 and b.bits == 0


# ---- other instruction trace packets


def test_cycle_count_timestamp_context_vmid() -> None:
    cfg = replace(PLAIN, ctrl=PLAIN.ctrl | (3 << 14))
    raw = bytes([0x04, 0x85, 0xA6, 0x67])
    raw += bytes([0x42, 0xBD, 0x9A, 0xC3, 0xCE, 0xAF, 0x90, 0x80, 0x80, 0x00])
    raw += bytes([0x6E, 0x78, 0x56, 0x34, 0x12, 0x3C, 0x07])
    cc, ts, ctx, vm = synced(raw, cfg)
    assert isinstance(cc, CycleCount) and cc.count == 1692421
    assert isinstance(ts, Timestamp) and ts.timestamp == 0x82F9D0CD3D
    assert packet_text(ts) == "TIMESTAMP : Timestamp Value.; TS=0x82f9d0cd3d (562536959293) "
    assert isinstance(ctx, ContextID) and ctx.context_id == 0x12345678
    assert isinstance(vm, VMID) and vm.vmid == 7


def test_timestamp_updates_low_bits_only() -> None:
    a, b = synced(bytes([0x42, 0x85, 0x01, 0x42, 0x7F]))
    assert isinstance(a, Timestamp) and isinstance(b, Timestamp)
    assert a.timestamp == 0x85 and b.timestamp == 0xFF


def test_single_byte_packets() -> None:
    pkts = synced(bytes([0x0C, 0x66, 0x76, 0x7E, 0x10]))
    assert [type(p) for p in pkts] == [Trigger, Ignore, ExceptionExit, ExceptionEntry, Reserved]
    assert [packet_text(p) for p in pkts] == [
        "TRIGGER : Trace Trigger Event.",
        "IGNORE : Packet ignored.",
        "EXCEPTION_EXIT : Exception return.",
        "EXCEPTION_ENTRY : Exception entry data marker.",
        "I_RESERVED : Reserved Packet Header",
    ]


def test_context_id_packet_without_context_id_size_takes_the_next_byte() -> None:
    (p,) = synced(bytes([0x6E, 0x84]))
    assert isinstance(p, ContextID) and p.raw == b"\x6e\x84" and p.context_id == 0


# ---- data trace packets


def test_data_headers_without_data_trace_are_bad_trace_mode() -> None:
    pkts = synced(bytes([0x84, 0x02, 0x2C, 0x50, 0x62, 0x6A, 0x54]))
    assert [type(p) for p in pkts] == [PHeader] + [BadTraceMode] * 6
    assert packet_text(pkts[1]).endswith("[P_HDR]")
    assert packet_text(pkts[6]).endswith("[OOO_ADDR_PLC]")


def test_data_packets_with_data_trace() -> None:
    cfg = replace(PLAIN, ctrl=PLAIN.ctrl | 0xC)  # data values and addresses
    raw = bytes([0x06, 0x12])  # normal data, 1 byte value, no address
    raw += bytes([0x2E, 0x15, 0x78, 0x56, 0x34, 0x12])  # address byte then a word
    raw += bytes([0x2C, 0x44, 0x33, 0x22, 0x11])  # out-of-order data, tag 1
    raw += bytes([0x74, 0x05])  # placeholder, tag 1, with address
    raw += bytes([0x6A, 0x09, 0x50, 0x62])  # value not traced + store failed + suppressed
    n1, n2, ooo, plc, vnt, sf, sup = synced(raw, cfg)
    assert isinstance(n1, NormalData) and n1.value == 0x12 and n1.address is None
    assert isinstance(n2, NormalData) and n2.address == 0x15 and n2.value == 0x12345678
    assert isinstance(ooo, OOOData) and ooo.value == 0x11223344 and ooo.tag == 1
    assert isinstance(plc, OOOPlaceholder) and plc.tag == 1 and plc.address == 5
    assert isinstance(vnt, ValueNotTraced) and vnt.address == 9
    assert isinstance(sf, StoreFailed) and isinstance(sup, DataSuppressed)
    assert (
        packet_text(ooo) == "OOO_DATA : Out of Order data value packet.; Val=0x11223344; OO_Tag=0x1"
    )


# ---- end of trace


def test_packet_cut_short_is_emitted_with_carried_values() -> None:
    _first, b = synced(bytes([0x42, 0x05, 0x42, 0x86]))
    assert isinstance(b, Timestamp) and b.timestamp == 5 and b.raw == b"\x42\x86"
    assert synced(bytes([0x42, 0x05, 0x42, 0x86]), complete=False)[-1].raw == b"\x42\x05"


def test_val_str() -> None:
    assert val_str(32, 0xC035BEB6, 28) == "0xC035BEB6 ~[0x35BEB6]"
    assert val_str(8, 0x44, 8) == "0x??????44 (7:0) ~[0x44]"
    assert val_str(0, 0) == "0x????????0 (-1:0)"
