"""ETMv4 packet reader on hand-made bytes: every packet kind, the header table, bad trace.

Expected values come from the packet layouts of the ETMv4 specification
(IHI0064 ch. 6) and the ETE chapter of the Arm ARM (D5), and, for imperfect
trace, from what the reference decoder lists for the same bytes.
"""

from __future__ import annotations

import pytest

from cstrace.capture.stream import Stream
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.etmv4.packets import (
    Address,
    AddressContext,
    AddressMatch,
    Async,
    Atom,
    BadPacket,
    Cancel,
    Commit,
    CondInstr,
    CondResult,
    Context,
    CycleCount,
    DataSyncMarker,
    Discard,
    Etmv4Packet,
    Event,
    Exception_,
    ExceptionReturn,
    FuncRet,
    Ignore,
    Mispredict,
    NotSync,
    Overflow,
    PacketType,
    Q,
    Timestamp,
    TraceInfo,
    TraceOn,
)
from cstrace.protocols.etmv4.reader import (
    HEADER_ROWS,
    header_table,
    iter_packets,
    read_address_long,
    read_instrumentation,
    read_reserved,
    row_bytes,
)
from cstrace.render.ocsd.etmv4 import packet_text

P = PacketType
SYNC = enc.a_sync() + enc.trace_info()


def etm4(**kw: int) -> Etmv4Config:
    """A Juno-like ETMv4.0 configuration (Cortex-A57, 32-bit context ID, 8-bit VMID)."""
    regs = dict(configr=0xC1, traceidr=0x10, idr0=0x28000EA1, idr1=0x4100F403, idr2=0x00000488)
    regs.update(kw)
    return Etmv4Config(core_name="Cortex-A57", **regs)


def read(data: bytes, cfg: Etmv4Config | None = None, complete: bool = True) -> list[Etmv4Packet]:
    """All packets of ``data`` as one stream starting at capture index 0."""
    stream = Stream.from_chunks(0x10, [(0, data)])
    return list(iter_packets(stream, cfg or etm4(), complete))


def after_sync(data: bytes, cfg: Etmv4Config | None = None) -> list[Etmv4Packet]:
    """The packets read from ``data`` placed after an A-sync and a trace info."""
    pkts = read(SYNC + data, cfg)
    assert isinstance(pkts[0], Async) and isinstance(pkts[1], TraceInfo)
    return pkts[2:]


def one(data: bytes, cfg: Etmv4Config | None = None) -> Etmv4Packet:
    pkts = after_sync(data, cfg)
    assert len(pkts) == 1, pkts
    assert pkts[0].raw == data
    return pkts[0]


# -- the header table --------------------------------------------------------------


def test_header_rows_cover_every_byte_once() -> None:
    seen: dict[int, str] = {}
    for row in HEADER_ROWS:
        assert len(row.pattern) == 8 and set(row.pattern) <= {"0", "1", "x"}, row
        assert row.section, row
        for value in row_bytes(row.pattern):
            assert value not in seen, f"{value:#04x} in {row.pattern} and {seen[value]}"
            seen[value] = row.pattern
    assert sorted(seen) == list(range(256))


def test_header_rows_are_in_header_order() -> None:
    firsts = [row_bytes(row.pattern)[0] for row in HEADER_ROWS]
    assert firsts == sorted(firsts)


def test_header_table_depends_on_configuration() -> None:
    _, kinds = header_table(etm4())
    assert kinds[0x07] == P.EXCEPT_RTN
    ete = Etmv4Config(configr=1, traceidr=1, idr0=0x28C1CEA1, idr1=0x4100FFF0, idr2=0xD0001088,
                      devarch=0x47735A13, core_name="ARM-AA64")  # fmt: skip
    readers_v4, _ = header_table(etm4())
    readers_ete, kinds_ete = header_table(ete)
    assert kinds_ete[0x09] == P.ITE and kinds_ete[0xB6] == P.SRC_ADDR_L_32IS0
    assert readers_ete[0x09] is read_instrumentation and readers_ete[0xB6] is read_address_long
    assert readers_v4[0x09] is readers_v4[0xB6] is read_reserved  # reserved in ETMv4.0


# -- synchronisation ------------------------------------------------------------------


def test_async_then_trace_info() -> None:
    pkts = read(enc.a_sync() + b"\x01\x01\x00")
    assert [type(p) for p in pkts] == [Async, TraceInfo]
    assert pkts[0].offset == 0 and pkts[1].offset == 12
    ti = pkts[1]
    assert isinstance(ti, TraceInfo)
    assert ti.raw == b"\x01\x01\x00" and ti.info == 0 and ti.initial
    assert (
        packet_text(ti) == "I_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }; Decoder Sync point TINFO"
    )


def test_bytes_before_sync_are_split_like_the_reference() -> None:
    # a piece ends before a 0x00 (a possible A-sync) or after 8 bytes
    data = bytes(range(1, 11)) + b"\x00\xf7\x95" + enc.a_sync()
    pkts = read(data)
    assert [(type(p), p.offset, p.raw) for p in pkts] == [
        (NotSync, 0, bytes(range(1, 9))),
        (NotSync, 8, b"\x09\x0a"),
        (NotSync, 10, b"\x00\xf7\x95"),
        (Async, 13, enc.a_sync()),
    ]


def test_extra_leading_zeros_are_shed_one_by_one() -> None:
    pkts = read(b"\x00\x00" + enc.a_sync())
    assert [(type(p), p.kind, p.offset, p.raw) for p in pkts] == [
        (NotSync, P.ASYNC, 0, b"\x00"),
        (NotSync, P.ASYNC, 0, b"\x00"),
        (Async, P.ASYNC, 0, enc.a_sync()),
    ]
    assert packet_text(pkts[0]).startswith("I_ASYNC : ")


def test_bad_async_when_synchronised() -> None:
    pkts = after_sync(b"\x00\x00\x00\x7f\xf7")
    assert isinstance(pkts[0], BadPacket)
    assert (pkts[0].kind, pkts[0].err_kind, pkts[0].raw) == (
        P.BAD_SEQUENCE,
        P.ASYNC,
        b"\x00\x00\x00\x7f",
    )
    assert packet_text(pkts[0]) == "I_BAD_SEQUENCE : Invalid Sequence in packet.[I_ASYNC]"
    assert isinstance(pkts[1], Atom)


def test_extension_packets() -> None:
    assert isinstance(one(enc.discard()), Discard)
    assert isinstance(one(enc.overflow()), Overflow)
    bad = one(b"\x00\x07")
    assert isinstance(bad, BadPacket) and bad.err_kind == P.EXTENSION


# -- simple packets ---------------------------------------------------------------------


def test_single_byte_packets() -> None:
    assert isinstance(one(enc.trace_on()), TraceOn)
    assert isinstance(one(enc.exception_return()), ExceptionReturn)
    ev = one(enc.event(0b0101))
    assert isinstance(ev, Event) and ev.events == 5
    assert packet_text(ev) == "I_EVENT : Trace Event."


def test_ignore_needs_etmv4_3() -> None:
    bad = one(enc.ignore())
    assert isinstance(bad, BadPacket) and bad.kind == P.RESERVED
    assert isinstance(one(enc.ignore(), etm4(idr1=0x4100F433)), Ignore)


def test_reserved_headers() -> None:
    for header in (0x08, 0x84, 0x93, 0x9C, 0xA3, 0xBF):
        bad = one(bytes((header,)))
        assert isinstance(bad, BadPacket) and bad.kind == P.RESERVED, hex(header)
        assert packet_text(bad) == "I_RESERVED : Reserved Packet Header"


def test_data_trace_packets_need_data_trace() -> None:
    bad = one(b"\x21")
    assert isinstance(bad, BadPacket) and (bad.kind, bad.err_kind) == (P.RESERVED_CFG, P.NUM_DS_MKR)
    assert packet_text(bad) == (
        "I_RESERVED_CFG : Reserved header for current configuration.[I_NUM_DS_MKR]"
    )
    cfg = etm4(idr0=0x28000EA1 | 0x18, configr=0xC1 | 0x2 | 0x10000)
    dsm = one(b"\x2a", cfg)
    assert isinstance(dsm, DataSyncMarker) and dsm.kind == P.UNNUM_DS_MKR and dsm.value == 2


def test_function_return_on_v8m_only() -> None:
    bad = one(b"\x05")
    assert isinstance(bad, BadPacket) and bad.err_kind == P.FUNC_RET
    m33 = Etmv4Config(configr=1, traceidr=0, idr0=0x280006E1, idr1=0x4100F454, idr2=0x4,
                      core_name="Cortex-M33")  # fmt: skip
    assert isinstance(one(b"\x05", m33), FuncRet)


# -- trace info, timestamps, cycle counts --------------------------------------------


def test_trace_info_sections() -> None:
    data = enc.trace_info(info=0x1, p0_key=0x5, spec_depth=0x83, cc_threshold=0x16)
    ti = one(data)
    assert isinstance(ti, TraceInfo)
    assert (ti.info, ti.p0_key, ti.spec_depth, ti.cc_threshold) == (1, 5, 0x83, 0x16)
    assert ti.cc_enabled and not ti.initial
    assert packet_text(ti) == "I_TRACE_INFO : Trace Info.; INFO=0x1 { CC.1 }; CC_THRESHOLD=0x16"


def test_trace_info_extended_control_bytes() -> None:
    # first control byte says "more control bytes follow" (bit 7)
    ti = one(b"\x01\x81\x00\x05")
    assert isinstance(ti, TraceInfo) and ti.info == 5


def test_timestamp_merges_changed_bits() -> None:
    pkts = after_sync(enc.timestamp(0x123456789, nbytes=9) + enc.timestamp(0x7F, nbytes=1))
    assert [p.timestamp for p in pkts if isinstance(p, Timestamp)] == [0x123456789, 0x1234567FF]
    assert packet_text(pkts[1]) == "I_TIMESTAMP : Timestamp.; Updated val = 0x1234567ff"


def test_first_timestamp_after_trace_info_is_complete() -> None:
    # after a trace info, the bits a timestamp does not carry are zero
    pkts = after_sync(enc.timestamp(0x3FFF, nbytes=2))
    assert isinstance(pkts[0], Timestamp) and pkts[0].bits_changed == 64


def test_timestamp_with_cycle_count() -> None:
    # the count keeps TRCIDR2.CCSIZE bits (12 here)
    ts = one(enc.timestamp(0x10, cycle_count=0x1234))
    assert isinstance(ts, Timestamp) and ts.cycle_count == 0x234
    assert packet_text(ts).endswith("; CC=0x234")


def test_cycle_count_f2_large_commit_form() -> None:
    # header bit 0 (F) picks the commit form: set, the field counts up from
    # TRCIDR8.MAXSPEC - 15; clear, it is the count less one. Bit 0 of the payload
    # is the low bit of the cycle count and changes nothing.
    cfg = etm4(idr0=0x08000EA1, idr8=32)
    cc = one(b"\x0d\x30", cfg)
    assert isinstance(cc, CycleCount) and (cc.count, cc.commit) == (0, 3 + 32 - 15)
    cc = one(b"\x0c\x31", cfg)
    assert isinstance(cc, CycleCount) and (cc.count, cc.commit) == (1, 3 + 1)
    cc = one(enc.cycle_count_f2(7, 30, max_spec=32), cfg)
    assert isinstance(cc, CycleCount) and (cc.count, cc.commit) == (7, 30)
    # MAXSPEC under 15: a large form below zero commits nothing
    cc = one(b"\x0d\x21", etm4(idr0=0x08000EA1, idr8=6))
    assert isinstance(cc, CycleCount) and cc.commit == 0
    # TRCIDR0.COMMOPT == 1: no commit in any format
    cc = one(b"\x0d\xf6", etm4(idr0=0x28000EA1, idr8=0))
    assert isinstance(cc, CycleCount) and cc.commit is None and cc.count == 6


def test_cycle_counts_add_the_threshold() -> None:
    stream = enc.a_sync() + enc.trace_info(info=1, cc_threshold=0x10)
    stream += enc.cycle_count_f1(0x25, commit=3) + enc.cycle_count_f2(4, commit=2)
    stream += enc.cycle_count_f3(2, commit=4) + enc.cycle_count_f1(None, commit=1)
    pkts = read(stream, etm4(idr0=0x08000EA1))[2:]  # TRCIDR0.COMMOPT = 0
    assert [(p.kind, p.count, p.commit) for p in pkts if isinstance(p, CycleCount)] == [
        (P.CCNT_F1, 0x35, 3),
        (P.CCNT_F2, 0x14, 2),
        (P.CCNT_F3, 0x12, 4),
        (P.CCNT_F1, 0, 1),
    ]
    assert isinstance(pkts[3], CycleCount) and pkts[3].count_unknown
    assert packet_text(pkts[0]) == "I_CCNT_F1 : Cycle Count format 1.; Count=0x35"


def test_cycle_count_without_commit_under_commopt1() -> None:
    cfg = etm4(idr0=0x28000EA1 | 0x20000000)
    cc = one(b"\x0e\x05", cfg)
    assert isinstance(cc, CycleCount) and cc.commit is None and cc.count == 5


# -- speculation --------------------------------------------------------------------------


def test_commit_and_cancel() -> None:
    c = one(enc.commit(200))
    assert isinstance(c, Commit) and c.count == 200
    assert packet_text(c) == "I_COMMIT : Commit; Commit(200)"
    c1 = one(enc.cancel_f1(3, mispredict=True))
    assert isinstance(c1, Cancel) and (c1.kind, c1.count, c1.mispredict) == (
        P.CANCEL_F1_MISPRED, 3, True)  # fmt: skip
    c2 = one(enc.cancel_f2(3, 2))
    assert isinstance(c2, Cancel) and (c2.count, c2.atom_bits, c2.atom_count) == (1, 3, 2)
    assert packet_text(c2) == "I_CANCEL_F2 : Cancel Format 2.; Atom: EE, Cancel(1), Mispredict"
    c3 = one(enc.cancel_f3(5, e_atom=True))
    assert isinstance(c3, Cancel) and (c3.count, c3.atom_count) == (5, 1)
    m = one(enc.mispredict(0, 1))
    assert isinstance(m, Mispredict) and (m.atom_bits, m.atom_count) == (0, 1)
    assert packet_text(m) == "I_MISPREDICT : Mispredict.; Atom: N, Mispredict"


# -- exceptions -----------------------------------------------------------------------------


def test_exception_short_and_extended() -> None:
    e = one(enc.exception(2, addr_interp=1))
    assert isinstance(e, Exception_) and (e.exception_type, e.addr_interp) == (2, 1)
    assert packet_text(e) == "I_EXCEPT : Exception.;  Call; Ret Addr Follows;"
    e = one(enc.exception(0x0E, addr_interp=2))
    assert isinstance(e, Exception_) and e.addr_interp == 2
    assert packet_text(e).endswith(" IRQ; Ret Addr Follows, Match Prev;")
    e = one(enc.exception(0x210, addr_interp=1, m_fault_pending=True))
    assert isinstance(e, Exception_) and e.exception_type == 0x210 and e.m_fault_pending


def test_m_profile_exception_names() -> None:
    m33 = Etmv4Config(configr=1, traceidr=0, idr0=0x280006E1, idr1=0x4100F454, idr2=0x4,
                      core_name="Cortex-M33")  # fmt: skip
    e = one(enc.exception(0x10 + 3, addr_interp=1), m33)
    assert isinstance(e, Exception_) and e.m_type
    assert packet_text(e) == "I_EXCEPT : Exception.;  IRQ3; Ret Addr Follows;"


# -- addresses and context ------------------------------------------------------------------


def test_long_and_short_addresses() -> None:
    data = enc.address_long(0xFFFFFFC000096A00, 0, True)
    data += enc.address_short(0xFFFFFFC000096A44, 0, False)
    data += enc.address_short(0xFFFFFFC000091234, 0, True)
    data += enc.address_long(0xFFFFFFC0000A10C8, 0, False)
    pkts = after_sync(data)
    assert [p.address for p in pkts if isinstance(p, Address)] == [
        0xFFFFFFC000096A00, 0xFFFFFFC000096A44, 0xFFFFFFC000091234, 0x00000000000A10C8,
    ]  # fmt: skip
    # the upper half survives a 32-bit update only in a 64-bit context: there is none yet
    assert packet_text(pkts[1]) == (
        "I_ADDR_S_IS0 : Address, Short, IS0.; Addr=0xFFFFFFC000096A44 ~[0x44]"
    )
    assert packet_text(pkts[0]) == (
        "I_ADDR_L_64IS0 : Address, Long, 64 bit, IS0.; Addr=0xFFFFFFC000096A00; "
    )


def test_32_bit_address_clears_upper_half_without_64_bit_context() -> None:
    pkts = after_sync(enc.address_long(0x1_2345_6780, 0, True) + enc.address_long(0x1000, 0, False))
    assert isinstance(pkts[1], Address) and pkts[1].address == 0x1000
    ctx = enc.context(1, True, True)
    pkts = after_sync(
        enc.address_long(0x1_2345_6780, 0, True) + ctx + enc.address_long(0x1000, 0, False)
    )
    assert isinstance(pkts[2], Address) and pkts[2].address == 0x1_0000_1000


def test_is1_addresses() -> None:
    pkts = after_sync(enc.address_long(0x4F9A02, 1, False) + enc.address_short(0x4F9A42, 1, False))
    assert [(p.address, p.isa, p.pkt_bits) for p in pkts if isinstance(p, Address)] == [
        (0x4F9A02, 1, 32), (0x4F9A42, 1, 8),
    ]  # fmt: skip


def test_exact_match_uses_the_address_history() -> None:
    data = enc.address_long(0x1000, 0, True) + enc.address_long(0x2000, 0, True)
    data += enc.address_long(0x3000, 0, True) + enc.exact_match(2) + enc.exact_match(1)
    pkts = after_sync(data)
    matches = [p for p in pkts if isinstance(p, AddressMatch)]
    assert [(m.index, m.address) for m in matches] == [(2, 0x1000), (1, 0x3000)]
    assert packet_text(matches[0]) == (
        "I_ADDR_MATCH : Exact Address Match., [2]; Addr=0x0000000000001000; "
    )


def test_exact_match_pushes_the_matched_address() -> None:
    # history [C, B, A]; match 1 gives B and pushes it: [B, C, B]; A has dropped out
    data = enc.address_long(0xA000, 0, True) + enc.address_long(0xB000, 0, True)
    data += enc.address_long(0xC000, 0, True)
    data += enc.exact_match(1) + enc.exact_match(2) + enc.exact_match(0)
    pkts = after_sync(data)
    assert [p.address for p in pkts if isinstance(p, AddressMatch)] == [0xB000, 0xB000, 0xB000]


def test_context_packets() -> None:
    c = one(enc.context(1, True, True, vmid=0x12, context_id=0xABCD))
    assert isinstance(c, Context)
    assert (c.el, c.sf, c.ns, c.vmid, c.context_id, c.cid_updated, c.vmid_updated) == (
        1, True, True, 0x12, 0xABCD, True, True)  # fmt: skip
    assert packet_text(c) == (
        "I_CTXT : Context Packet.; Ctxt: AArch64,EL1, NS; CID=0x0000abcd; VMID=0x0012; "
    )
    same = one(enc.context_same())
    assert isinstance(same, Context) and not same.updated
    assert packet_text(same) == "I_CTXT : Context Packet.; Ctxt: Same"
    aarch32 = one(enc.context(3, False, False))
    assert packet_text(aarch32) == "I_CTXT : Context Packet.; Ctxt: AArch32, EL3, S; "


def test_context_with_id_flag_but_no_id_size_takes_one_more_byte() -> None:
    # TRCIDR2.CIDSIZE = 0: the reference still reads one byte after the info byte
    cfg = etm4(idr2=0x00000008)
    pkts = after_sync(b"\x81\x81\x00\xf7", cfg)
    assert pkts[0].raw == b"\x81\x81\x00" and isinstance(pkts[1], Atom)


def test_address_with_context() -> None:
    data = enc.address_context(0xFFFFFFC000081000, 0, True, el=1, sf=True, ns=True, context_id=7)
    a = one(data)
    assert isinstance(a, AddressContext)
    assert (a.address, a.el, a.context_id, a.cid_updated, a.vmid_updated) == (
        0xFFFFFFC000081000, 1, 7, True, False)  # fmt: skip
    assert packet_text(a) == (
        "I_ADDR_CTXT_L_64IS0 : Address & Context, Long, 64 bit, IS0.; "
        "Addr=0xFFFFFFC000081000; Ctxt: AArch64,EL1, NS; CID=0x00000007; "
    )


# -- atoms ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "kind", "text"),
    [
        (0xF7, P.ATOM_F1, "E"),
        (0xF6, P.ATOM_F1, "N"),
        (0xD9, P.ATOM_F2, "EN"),
        (0xFB, P.ATOM_F3, "EEN"),
        (0xDC, P.ATOM_F4, "NEEE"),
        (0xDF, P.ATOM_F4, "ENEN"),
        (0xF5, P.ATOM_F5, "NEEEE"),
        (0xD5, P.ATOM_F5, "NNNNN"),
        (0xD6, P.ATOM_F5, "NENEN"),
        (0xD7, P.ATOM_F5, "ENENE"),
        (0xC0, P.ATOM_F6, "EEEE"),
        (0xE1, P.ATOM_F6, "EEEEN"),
        (0xD4, P.ATOM_F6, "E" * 24),
    ],
)
def test_atoms(header: int, kind: PacketType, text: str) -> None:
    a = one(bytes((header,)))
    assert isinstance(a, Atom) and a.kind == kind and a.count == len(text)
    assert "".join("E" if (a.bits >> i) & 1 else "N" for i in range(a.count)) == text
    assert packet_text(a).endswith("; " + text)


# -- Q and conditional packets ----------------------------------------------------------------


def test_q_packets() -> None:
    cfg = etm4(idr0=0x28000EA1 | 0x18000)
    data = enc.address_long(0x63800, 0, True) + enc.q(3, address=0x63830, isa=0, short=True)
    data += enc.q(12) + enc.q(None) + enc.q(2, match=1)
    pkts = after_sync(data, cfg)[1:]
    assert all(isinstance(p, Q) for p in pkts)
    qs = [p for p in pkts if isinstance(p, Q)]
    assert [(q.count, q.has_address, q.address if q.has_address else None) for q in qs] == [
        (3, True, 0x63830), (12, False, None), (None, False, None), (2, True, 0x63800),
    ]  # fmt: skip
    assert packet_text(qs[0]) == "I_Q : Q Packet.; Count(3); Addr=0x0000000000063830 ~[0x3830]"


def test_q_reserved_without_q_support() -> None:
    bad = after_sync(enc.q(3))[0]
    assert isinstance(bad, BadPacket) and (bad.kind, bad.err_kind) == (P.RESERVED, P.Q)


def test_conditional_packets() -> None:
    cfg = etm4(idr0=0x28000EA1 | 0x40, configr=0xC1 | 0x700)
    ci = one(b"\x6d\x05", cfg)
    assert isinstance(ci, CondInstr) and (ci.num_elements, ci.final) == (3, True)
    cr = one(b"\x6e\x95\x01", cfg)
    assert isinstance(cr, CondResult) and cr.results == ((9, 5, 0),)
    cr3 = one(b"\x53\x21", cfg)
    assert isinstance(cr3, CondResult) and cr3.tokens == 0x321
    bad = one(b"\x6d")
    assert isinstance(bad, BadPacket) and bad.kind == P.RESERVED_CFG


# -- end of trace ---------------------------------------------------------------------------------


def test_incomplete_packet_at_end_of_trace() -> None:
    pkts = after_sync(b"\xf7\x9a\x12")
    bad = pkts[-1]
    assert isinstance(bad, BadPacket) and (bad.kind, bad.err_kind, bad.raw) == (
        P.INCOMPLETE_EOT, P.ADDR_L_32IS0, b"\x9a\x12")  # fmt: skip
    assert packet_text(bad) == (
        "I_INCOMPLETE_EOT : Incomplete packet at end of trace.[I_ADDR_L_32IS0]"
    )


def test_no_incomplete_packet_when_the_capture_stopped() -> None:
    pkts = read(SYNC + b"\xf7\x9a\x12", complete=False)
    assert not any(isinstance(p, BadPacket) for p in pkts)


def test_unsynchronised_tail_is_incomplete() -> None:
    pkts = read(b"\x11\x22\x33")
    assert [(type(p), p.kind) for p in pkts] == [(BadPacket, P.INCOMPLETE_EOT)]
    assert isinstance(pkts[0], BadPacket) and pkts[0].err_kind == P.NOT_SYNC


def test_offsets_follow_the_capture_index() -> None:
    # bytes of one trace ID split over two runs of capture indices
    data = SYNC + b"\xf7\xf7\xf6"
    stream = Stream.from_chunks(0x10, [(100, data[:16]), (200, data[16:])])
    pkts = list(iter_packets(stream, etm4(), True))
    assert [p.offset for p in pkts] == [100, 112, 115, 200, 201]
