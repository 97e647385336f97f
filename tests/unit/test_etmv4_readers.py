"""The ETMv4 / ETE per-kind packet readers (``read_<kind>``) on hand-made bytes.

Each reader is called on one packet: it must return the packet and the
position after it, return None for every shorter prefix (need more data)
without touching the reader state, and update the state as the spec says.
The last tests check the reader contract as :func:`iter_packets` applies it:
its inlined copies of the hot kinds read as the readers do, and an internal
bad-sequence error becomes a ``BadPacket``.
"""

from __future__ import annotations

import random

import pytest

from cstrace.capture.stream import Stream
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4 import reader as rd
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
    Ignore,
    Instrumentation,
    Mispredict,
    Overflow,
    PacketType,
    Q,
    SourceAddress,
    SourceAddressMatch,
    Timestamp,
    TraceInfo,
    TraceOn,
)
from cstrace.protocols.etmv4.reader import Reader, ReaderState

P = PacketType
OFF = 0x1000  # capture index given to the header

ETM4 = Etmv4Config(configr=0xC1, traceidr=0x10, idr0=0x28000EA1, idr1=0x4100F403, idr2=0x488,
                   core_name="Cortex-A57")  # fmt: skip
"""Juno-like ETMv4.0: 32-bit context ID, 8-bit VMID."""
ETM43 = Etmv4Config(configr=0x67C7 | 0x30000, traceidr=0x10, idr0=0x280DCEFF, idr1=0x4100F443,
                    idr2=0x20001088, idr8=8, core_name="Cortex-A55")  # fmt: skip
"""ETMv4.3 with data trace, conditional trace and Q elements."""
ETE = Etmv4Config(configr=0x8001, traceidr=0x1, idr0=0x28C1CEA1, idr1=0x4100FFF0,
                  idr2=0xD0001088, devarch=0x47735A13, core_name="ARM-AA64")  # fmt: skip
"""ETE 1.3 (source addresses, ITE)."""


def snapshot(st: ReaderState) -> tuple[object, ...]:
    """Every field of the reader state."""
    return tuple(getattr(st, name) for name in ReaderState.__slots__)


def read(reader: Reader, data: bytes, st: ReaderState | None = None) -> Etmv4Packet:
    """Read one whole packet; check the position, the raw bytes and every cut prefix."""
    st = st or ReaderState(ETM4)
    for cut in range(1, len(data)):
        before = snapshot(st)
        assert reader(data, 0, cut, OFF, st) is None, f"{data.hex()} cut at {cut}"
        assert snapshot(st) == before, "a reader that needs more data changed the state"
    # bytes after the packet are not read
    got = reader(data + b"\xff\xff", 0, len(data) + 2, OFF, st)
    assert got is not None
    pkt, after = got
    assert after == len(data)
    assert pkt.raw == data and pkt.offset == OFF
    return pkt


def test_readers_read_from_pos() -> None:
    """A reader reads at ``pos``, not at the start of the buffer."""
    st = ReaderState(ETM4)
    data = b"\x95\x12" + bytes([0x9A, 0x1E, 0x2B, 0x34, 0x12])
    got = rd.read_address_long(data, 2, len(data), OFF, st)
    assert got is not None
    pkt, after = got
    assert after == 7 and isinstance(pkt, Address) and pkt.address == 0x12345678


# -- header table ------------------------------------------------------------------------


def test_table_dispatches_to_readers() -> None:
    readers, kinds = rd.header_table(ETM4)
    assert readers[0x01] is rd.read_trace_info and kinds[0x01] == P.TRACE_INFO
    assert readers[0x95] is rd.read_address_short and readers[0xF8] is rd.read_atom
    # conditional trace is off in this configuration: RESERVED_CFG, kind kept
    assert readers[0x6C] is rd.read_reserved_cfg and kinds[0x6C] == P.COND_I_F1
    readers43, _ = rd.header_table(ETM43)
    assert readers43[0x6C] is rd.read_cond_instr_f1 and readers43[0xAC] is rd.read_q
    readers_ete, _ = rd.header_table(ETE)
    assert readers_ete[0x07] is rd.read_reserved_cfg  # exception return: ETMv4 only
    assert readers_ete[0xB4] is rd.read_address_short  # source address short


def test_every_row_reader_is_a_read_function() -> None:
    for row in rd.HEADER_ROWS:
        assert row.reader.__name__.startswith("read_") and row.reader.__doc__, row


# -- single-byte packets, errors ---------------------------------------------------------


def test_reserved() -> None:
    pkt = read(rd.read_reserved, b"\x08")
    assert isinstance(pkt, BadPacket) and pkt.kind == P.RESERVED and pkt.err_kind == P.RESERVED
    st = ReaderState(ETM4)
    pkt = read(rd.read_reserved_cfg, b"\x07", ReaderState(ETE))
    assert isinstance(pkt, BadPacket) and pkt.kind == P.RESERVED_CFG
    assert pkt.err_kind == P.EXCEPT_RTN
    pkt = read(rd.read_reserved, b"\xa3", st)  # reserved Q type
    assert isinstance(pkt, BadPacket) and pkt.err_kind == P.Q


def test_no_payload() -> None:
    assert isinstance(read(rd.read_no_payload, b"\x04"), TraceOn)
    assert isinstance(read(rd.read_no_payload, b"\x70", ReaderState(ETM43)), Ignore)


def test_event_and_data_sync_marker() -> None:
    pkt = read(rd.read_event, b"\x75")
    assert isinstance(pkt, Event) and pkt.events == 0x5
    pkt = read(rd.read_data_sync_marker, b"\x23", ReaderState(ETM43))
    assert isinstance(pkt, DataSyncMarker) and pkt.kind == P.NUM_DS_MKR and pkt.value == 3
    pkt = read(rd.read_data_sync_marker, b"\x2a", ReaderState(ETM43))
    assert isinstance(pkt, DataSyncMarker) and pkt.kind == P.UNNUM_DS_MKR and pkt.value == 2


# -- extension: A-sync, discard, overflow ------------------------------------------------


def test_extension() -> None:
    assert isinstance(read(rd.read_extension, b"\x00" * 11 + b"\x80"), Async)
    assert isinstance(read(rd.read_extension, b"\x00\x03"), Discard)
    assert isinstance(read(rd.read_extension, b"\x00\x05"), Overflow)


@pytest.mark.parametrize(
    ("data", "err_kind"),
    [
        (b"\x00\x07", P.EXTENSION),  # no such extension
        (b"\x00\x00\x00\x01", P.ASYNC),  # A-sync broken off early
        (b"\x00" * 11 + b"\x81", P.ASYNC),  # wrong last byte
        (b"\x00" * 12, P.ASYNC),  # too many zeros
    ],
)
def test_bad_extension(data: bytes, err_kind: PacketType) -> None:
    pkt = read(rd.read_extension, data)
    assert isinstance(pkt, BadPacket) and pkt.kind == P.BAD_SEQUENCE
    assert pkt.err_kind == err_kind


# -- trace info, timestamps --------------------------------------------------------------


def test_trace_info_sections() -> None:
    st = ReaderState(ETM4)
    st.ts_valid = True
    # all five sections: INFO 1, KEY 133 (two bytes), SPEC 16, CYCT 7, commit window 0
    data = bytes([0x01, 0x1F, 0x01, 0x85, 0x01, 0x10, 0x07, 0x00])
    pkt = read(rd.read_trace_info, data, st)
    assert isinstance(pkt, TraceInfo)
    assert (pkt.info, pkt.p0_key, pkt.spec_depth, pkt.cc_threshold) == (1, 133, 16, 7)
    assert pkt.initial
    assert st.cc_thr == 7 and st.seen_trace_info and not st.ts_valid
    # no sections: INFO keeps the last value, the others are absent
    pkt = read(rd.read_trace_info, b"\x01\x00", st)
    assert isinstance(pkt, TraceInfo) and not pkt.initial
    assert (pkt.info, pkt.p0_key, pkt.spec_depth, pkt.cc_threshold) == (1, None, None, None)
    assert st.cc_thr == 0


def test_trace_info_extended_control() -> None:
    # a control field of two bytes (bit 7 of the first), then the INFO section
    pkt = read(rd.read_trace_info, bytes([0x01, 0x81, 0x00, 0x03]))
    assert isinstance(pkt, TraceInfo) and pkt.info == 3


def test_timestamp() -> None:
    st = ReaderState(ETM4)
    pkt = read(rd.read_timestamp, bytes([0x02, 0x85, 0x01]), st)
    assert isinstance(pkt, Timestamp)
    assert (pkt.timestamp, pkt.bits_changed, pkt.cycle_count) == (0x85, 14, None)
    # the next one changes the low 7 bits only
    pkt = read(rd.read_timestamp, bytes([0x02, 0x7F]), st)
    assert isinstance(pkt, Timestamp) and pkt.timestamp == 0xFF and pkt.bits_changed == 7
    # with a cycle count
    pkt = read(rd.read_timestamp, bytes([0x03, 0x05, 0x83, 0x01]), st)
    assert isinstance(pkt, Timestamp) and pkt.cycle_count == 131 & st.cc_mask


def test_timestamp_nine_bytes_is_64_bits() -> None:
    data = bytes([0x02] + [0xFF] * 8 + [0xAB])
    pkt = read(rd.read_timestamp, data)
    assert isinstance(pkt, Timestamp) and pkt.bits_changed == 64
    assert pkt.timestamp == (0xAB << 56) | ((1 << 56) - 1)


def test_timestamp_after_trace_info_is_full_width() -> None:
    st = ReaderState(ETM4)
    st.seen_trace_info = True
    st.ts = 0xFFFF_0000
    pkt = read(rd.read_timestamp, bytes([0x02, 0x01]), st)
    assert isinstance(pkt, Timestamp) and pkt.bits_changed == 64 and pkt.timestamp == 1


# -- exceptions, context -----------------------------------------------------------------


def test_exception() -> None:
    pkt = read(rd.read_exception, bytes([0x06, 0x0B]))
    assert isinstance(pkt, Exception_) and pkt.kind == P.EXCEPT
    assert (pkt.exception_type, pkt.addr_interp, pkt.m_fault_pending) == (5, 1, False)
    pkt = read(rd.read_exception, bytes([0x06, 0x8A, 0x21]))
    assert isinstance(pkt, Exception_)
    assert (pkt.exception_type, pkt.addr_interp, pkt.m_fault_pending) == (37, 0, True)


@pytest.mark.parametrize(("c1", "kind"), [(0x00, P.PE_RESET), (0x30, P.TRANS_FAIL)])
def test_ete_reset_and_transaction_failure(c1: int, kind: PacketType) -> None:
    st = ReaderState(ETE)
    st.hist = ((0x4000, 1, 16), (0x3000, 0, 32), (0x2000, 0, 32))
    pkt = read(rd.read_exception, bytes([0x06, c1, 0x00]), st)  # three bytes, bit 7 clear
    assert isinstance(pkt, Exception_) and pkt.kind == kind
    assert st.hist == ((0, 0, 64), (0x4000, 1, 16), (0x3000, 0, 32))


def test_context() -> None:
    st = ReaderState(ETM4)
    assert (st.vmid_bytes, st.cid_bytes) == (1, 4)
    data = bytes([0x81, 0xC0 | 0x10 | 0x2, 0x07, 0x78, 0x56, 0x34, 0x12])
    pkt = read(rd.read_context, data, st)
    assert isinstance(pkt, Context) and pkt.updated and pkt.valid
    assert (pkt.el, pkt.sf, pkt.ns, pkt.vmid, pkt.context_id) == (2, True, False, 7, 0x12345678)
    assert pkt.vmid_updated and pkt.cid_updated
    # context same: the context already known
    pkt = read(rd.read_context, b"\x80", st)
    assert isinstance(pkt, Context) and not pkt.updated
    assert (pkt.el, pkt.vmid, pkt.context_id) == (2, 7, 0x12345678)
    # an info byte without VMID or context ID
    pkt = read(rd.read_context, bytes([0x81, 0x21]), st)
    assert isinstance(pkt, Context) and (pkt.el, pkt.ns, pkt.sf) == (1, True, False)
    assert pkt.context_id == 0x12345678 and not pkt.cid_updated


# -- addresses ---------------------------------------------------------------------------


def test_address_short() -> None:
    st = ReaderState(ETM4)
    st.hist = ((0xFFFF_0000, 0, 64), (0, 0, 0), (0, 0, 0))
    pkt = read(rd.read_address_short, bytes([0x95, 0x12]), st)
    assert isinstance(pkt, Address) and pkt.kind == P.ADDR_S_IS0
    assert (pkt.address, pkt.isa, pkt.pkt_bits) == (0xFFFF_0048, 0, 9)
    pkt = read(rd.read_address_short, bytes([0x95, 0x92, 0x34]), st)
    # 17 bits: bit 16 of the previous address is replaced too
    assert isinstance(pkt, Address) and (pkt.address, pkt.pkt_bits) == (0xFFFE_6848, 17)
    pkt = read(rd.read_address_short, bytes([0x96, 0x12]), st)
    assert isinstance(pkt, Address) and (pkt.address, pkt.isa, pkt.pkt_bits) == (0xFFFE_6824, 1, 8)
    assert st.hist == ((0xFFFE_6824, 1, 8), (0xFFFE_6848, 0, 17), (0xFFFF_0048, 0, 9))
    pkt = read(rd.read_address_short, bytes([0xB4, 0x01]), ReaderState(ETE))
    assert isinstance(pkt, SourceAddress) and pkt.kind == P.SRC_ADDR_S_IS0


def test_address_long() -> None:
    st = ReaderState(ETM4)
    st.hist = ((0xFFFF_FFFF_0000_0000, 0, 64), (0, 0, 0), (0, 0, 0))
    data = bytes([0x9A, 0x1E, 0x2B, 0x34, 0x12])
    pkt = read(rd.read_address_long, data, st)
    # no AArch64 context yet: the upper half is cleared
    assert isinstance(pkt, Address) and (pkt.address, pkt.pkt_bits) == (0x12345678, 32)
    st.hist = ((0xFFFF_FFFF_0000_0000, 0, 64), (0, 0, 0), (0, 0, 0))
    st.ctx_valid = st.sf = True
    pkt = read(rd.read_address_long, data, st)
    assert isinstance(pkt, Address) and pkt.address == 0xFFFF_FFFF_1234_5678
    pkt = read(rd.read_address_long, enc.address_long(0x0000_8000_1234_5678), st)
    assert isinstance(pkt, Address) and pkt.kind == P.ADDR_L_64IS0
    assert (pkt.address, pkt.isa, pkt.pkt_bits) == (0x0000_8000_1234_5678, 0, 64)
    pkt = read(rd.read_address_long, enc.source_address_long(0x1235, 1, False), ReaderState(ETE))
    assert isinstance(pkt, SourceAddress) and pkt.kind == P.SRC_ADDR_L_32IS1
    assert (pkt.address, pkt.isa) == (0x1234, 1)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_address_match(index: int) -> None:
    st = ReaderState(ETM4)
    e = [(0x1000, 0, 64), (0x2000, 1, 32), (0x3000, 0, 9)]
    st.hist = (e[0], e[1], e[2])
    pkt = read(rd.read_address_match, bytes([0x90 | index]), st)
    assert isinstance(pkt, AddressMatch) and pkt.index == index
    assert (pkt.address, pkt.isa, pkt.pkt_bits) == e[index]
    assert st.hist == (e[index], e[0], e[1])
    pkt = read(rd.read_address_match, bytes([0xB0 | index]), ReaderState(ETE))
    assert isinstance(pkt, SourceAddressMatch)


def test_address_context() -> None:
    st = ReaderState(ETM4)
    data = bytes([0x85]) + enc.address_long(0xFFFF_0000_0040_0000)[1:] + bytes([0x80 | 0x11])
    data += (0x42).to_bytes(4, "little")
    pkt = read(rd.read_address_context, data, st)
    assert isinstance(pkt, AddressContext) and pkt.kind == P.ADDR_CTXT_L_64IS0
    assert (pkt.address, pkt.pkt_bits, pkt.el, pkt.sf) == (0xFFFF_0000_0040_0000, 64, 1, True)
    assert pkt.context_id == 0x42 and pkt.cid_updated and not pkt.vmid_updated
    # a 32-bit address with context keeps the upper half only if the context already was AArch64
    data = bytes([0x82, 0x1E, 0x2B, 0x34, 0x12, 0x00])
    pkt = read(rd.read_address_context, data, st)
    assert isinstance(pkt, AddressContext) and pkt.address == 0xFFFF_0000_1234_5678
    assert not pkt.sf and not st.sf


# -- Q -----------------------------------------------------------------------------------


def test_q() -> None:
    st = ReaderState(ETM43)
    st.hist = ((0x1000, 0, 64), (0x2000, 0, 64), (0x3000, 0, 64))
    pkt = read(rd.read_q, bytes([0xAC, 0x85, 0x01]), st)  # count only
    assert isinstance(pkt, Q) and pkt.count == 133 and not pkt.has_address
    assert pkt.address == 0x1000
    pkt = read(rd.read_q, bytes([0xAF]), st)  # no count
    assert isinstance(pkt, Q) and pkt.count is None
    pkt = read(rd.read_q, bytes([0xA1, 0x03]), st)  # exact match 1
    assert isinstance(pkt, Q) and pkt.addr_match and pkt.match_index == 1
    assert (pkt.count, pkt.address) == (3, 0x2000)
    assert [e[0] for e in st.hist] == [0x2000, 0x1000, 0x2000]
    pkt = read(rd.read_q, bytes([0xA5, 0x92, 0x34, 0x04]), st)  # short IS0, two bytes
    assert isinstance(pkt, Q) and pkt.has_address and not pkt.addr_match
    assert (pkt.address, pkt.pkt_bits, pkt.count) == (0x6848, 17, 4)
    pkt = read(rd.read_q, bytes([0xA6, 0x12, 0x05]), st)  # short IS1, one byte
    assert isinstance(pkt, Q) and (pkt.address, pkt.isa, pkt.pkt_bits) == (0x6824, 1, 8)
    pkt = read(rd.read_q, bytes([0xAA, 0x1E, 0x2B, 0x34, 0x12, 0x06]), st)  # 32-bit IS0
    assert isinstance(pkt, Q) and (pkt.address, pkt.pkt_bits, pkt.count) == (0x12345678, 32, 6)


# -- cycle counts, speculation -----------------------------------------------------------


def test_cycle_counts() -> None:
    # TRCIDR0.COMMOPT (bit 29) clear: formats 1 and 3 carry a commit count
    cfg = Etmv4Config(configr=0xC1, traceidr=0x10, idr0=0x08000EA1, idr1=0x4100F403,
                      idr2=0x488, core_name="Cortex-A57")  # fmt: skip
    st = ReaderState(cfg)
    st.cc_thr = 10
    assert not st.commit_opt1
    pkt = read(rd.read_cycle_count_f1, bytes([0x0E, 0x03, 0x85, 0x01]), st)
    assert isinstance(pkt, CycleCount) and pkt.kind == P.CCNT_F1
    assert (pkt.commit, pkt.count, pkt.count_unknown) == (3, 143, False)
    pkt = read(rd.read_cycle_count_f1, bytes([0x0F, 0x02]), st)  # count unknown
    assert isinstance(pkt, CycleCount) and pkt.count_unknown
    assert (pkt.commit, pkt.count) == (2, 0)
    pkt = read(rd.read_cycle_count_f2, bytes([0x0C, 0x34]), st)
    assert isinstance(pkt, CycleCount) and pkt.kind == P.CCNT_F2
    assert (pkt.commit, pkt.count) == (4, 14)
    # header bit 0: the commit count is relative to the maximum speculation depth
    pkt = read(rd.read_cycle_count_f2, bytes([0x0D, 0x35]), st)
    assert isinstance(pkt, CycleCount) and (pkt.commit, pkt.count) == (max(0, st.max_spec - 12), 15)
    pkt = read(rd.read_cycle_count_f2, bytes([0x0C, 0x35]), st)
    assert isinstance(pkt, CycleCount) and (pkt.commit, pkt.count) == (4, 15)
    pkt = read(rd.read_cycle_count_f3, bytes([0x16]), st)
    assert isinstance(pkt, CycleCount) and pkt.kind == P.CCNT_F3
    assert (pkt.commit, pkt.count) == (2, 12)


def test_cycle_count_commit_option_1() -> None:
    st = ReaderState(ETM4)  # Juno: TRCIDR0.COMMOPT set
    assert st.commit_opt1
    pkt = read(rd.read_cycle_count_f1, bytes([0x0E, 0x07]), st)  # no commit field
    assert isinstance(pkt, CycleCount) and (pkt.commit, pkt.count) == (None, 7)
    pkt = read(rd.read_cycle_count_f3, bytes([0x1D]), st)
    assert isinstance(pkt, CycleCount) and (pkt.commit, pkt.count) == (None, 1)


def test_speculation() -> None:
    pkt = read(rd.read_commit, bytes([0x2D, 0x81, 0x02]))
    assert isinstance(pkt, Commit) and pkt.count == 257
    pkt = read(rd.read_cancel_f1, bytes([0x2F, 0x04]))
    assert isinstance(pkt, Cancel) and pkt.kind == P.CANCEL_F1_MISPRED and pkt.count == 4
    assert pkt.mispredict
    pkt = read(rd.read_cancel_f1, bytes([0x2E, 0x04]))
    assert isinstance(pkt, Cancel) and pkt.kind == P.CANCEL_F1 and not pkt.mispredict
    pkt = read(rd.read_mispredict, bytes([0x32]))
    assert isinstance(pkt, Mispredict) and (pkt.atom_bits, pkt.atom_count) == (3, 2)
    pkt = read(rd.read_cancel_f2, bytes([0x35]))
    assert isinstance(pkt, Cancel) and pkt.kind == P.CANCEL_F2
    assert (pkt.count, pkt.atom_bits, pkt.atom_count) == (1, 1, 1)
    pkt = read(rd.read_cancel_f3, bytes([0x3D]))
    assert isinstance(pkt, Cancel) and pkt.kind == P.CANCEL_F3
    assert (pkt.count, pkt.atom_bits, pkt.atom_count) == (4, 1, 1)


# -- conditional trace -------------------------------------------------------------------


def test_conditional_instructions() -> None:
    st = ReaderState(ETM43)
    pkt = read(rd.read_cond_instr_f1, bytes([0x6C, 0x85, 0x01]), st)
    assert isinstance(pkt, CondInstr) and pkt.kind == P.COND_I_F1 and pkt.key == 133
    pkt = read(rd.read_cond_instr_f2, bytes([0x42]), st)
    assert isinstance(pkt, CondInstr) and (pkt.num_elements, pkt.key_incr) == (2, True)
    pkt = read(rd.read_cond_instr_f3, bytes([0x6D, 0x0B]), st)
    assert isinstance(pkt, CondInstr) and (pkt.num_elements, pkt.final) == (6, True)


def test_conditional_results() -> None:
    st = ReaderState(ETM43)
    # format 1, two payloads: (key 0x5 | 0x1 << 3, result 0x3), (key 2, result 1)
    pkt = read(rd.read_cond_result_f1, bytes([0x6B, 0xD3, 0x01, 0x21]), st)
    assert isinstance(pkt, CondResult) and pkt.kind == P.COND_RES_F1
    assert pkt.results == ((0xD, 0x3, 1), (2, 1, 1))
    pkt = read(rd.read_cond_result_f1, bytes([0x6E, 0x13]), st)  # one payload
    assert isinstance(pkt, CondResult) and pkt.results == ((1, 3, 0),)
    pkt = read(rd.read_cond_result_f2, bytes([0x4D]), st)
    assert isinstance(pkt, CondResult) and (pkt.key_incr, pkt.token) == (2, 1)
    pkt = read(rd.read_cond_result_f3, bytes([0x5A, 0xBC]), st)
    assert isinstance(pkt, CondResult) and pkt.tokens == 0xABC
    pkt = read(rd.read_cond_result_f4, bytes([0x46]), st)
    assert isinstance(pkt, CondResult) and pkt.kind == P.COND_RES_F4 and pkt.token == 2


# -- instrumentation, atoms --------------------------------------------------------------


def test_instrumentation() -> None:
    pkt = read(rd.read_instrumentation, enc.instrumentation(2, 0x1122_3344_5566_7788))
    assert isinstance(pkt, Instrumentation) and (pkt.el, pkt.value) == (2, 0x1122_3344_5566_7788)


def test_atom() -> None:
    pkt = read(rd.read_atom, bytes([0xDC]))
    assert isinstance(pkt, Atom) and pkt.kind == P.ATOM_F4 and (pkt.bits, pkt.count) == (0xE, 4)


# -- the contract as iter_packets applies it ---------------------------------------------


def _by_table(data: bytes, config: Etmv4Config) -> list[str]:
    """The packets after the leading A-sync, each read through the header table."""
    st = ReaderState(config)
    pos = 12
    out = []
    while pos < len(data):
        got = rd.read_packet(data, pos, len(data), pos, st)
        assert got is not None
        out.append(repr(got[0]))
        pos = got[1]
    return out


@pytest.mark.parametrize("seed", range(20))
def test_inlined_kinds_read_as_their_readers(seed: int) -> None:
    """iter_packets (with its inlined atoms and addresses) = the readers, one by one."""
    rnd = random.Random(seed)
    config = (ETM4, ETE)[seed % 2]
    addr = enc.AddressEncoder()
    makers = [
        lambda: enc.atom(rnd.choice(["E", "N", "EN", "ENE", "EEEN", "NENEN", "EEEEEEN"])),
        lambda: addr.encode(rnd.randrange(1 << 48) & ~3, rnd.randrange(2)),
        lambda: addr.encode(rnd.choice([0x1000, 0x1004, 0x2000, 0x1100])),
        lambda: enc.address_short(rnd.randrange(1 << 17), rnd.randrange(2), rnd.random() < 0.5),
        lambda: enc.address_long(rnd.randrange(1 << 32), rnd.randrange(2), False),
        lambda: enc.exact_match(rnd.randrange(3)),
        lambda: enc.context(rnd.randrange(4), True, True, context_id=rnd.randrange(1 << 32)),
        lambda: enc.timestamp(rnd.randrange(1 << 40)),
        lambda: enc.cycle_count_f3(rnd.randrange(4)),
    ]
    if config is ETE:
        makers.append(lambda: addr.encode(rnd.randrange(1 << 32) & ~3, source=True))
        makers.append(lambda: enc.source_exact_match(rnd.randrange(3)))
    data = enc.a_sync() + enc.trace_info()
    for _ in range(300):
        data += rnd.choice(makers)()
    got = [repr(p) for p in rd.iter_packets(Stream(1, data), config)]
    assert got[0].startswith("Async(")
    assert got[1:] == _by_table(data, config)


def test_bad_sequence_becomes_a_bad_packet(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader raising the internal bad-sequence error gives BadPacket(BAD_SEQUENCE)."""

    def bad_reader(
        data: bytes, pos: int, end: int, off: int, st: ReaderState
    ) -> tuple[Etmv4Packet, int] | None:
        raise rd._BadSequence(pos + 3)

    table = rd.header_table

    def patched(config: Etmv4Config) -> tuple[tuple[Reader, ...], tuple[PacketType, ...]]:
        readers, kinds = table(config)
        return (*readers[:0x2D], bad_reader, *readers[0x2E:]), kinds

    monkeypatch.setattr(rd, "header_table", patched)
    data = enc.a_sync() + enc.trace_info() + bytes([0x2D, 0x81, 0x01, 0xF7])
    pkts = list(rd.iter_packets(Stream(1, data), ETM4))
    bad, rest = pkts[2], pkts[3:]
    assert isinstance(bad, BadPacket) and bad.kind == P.BAD_SEQUENCE
    assert bad.err_kind == P.COMMIT and bad.raw == b"\x2d\x81\x01"
    assert bad.offset == len(enc.a_sync() + enc.trace_info())
    # reading goes on after the bytes the bad packet took
    assert [type(p) for p in rest] == [Atom]


def test_cut_async_is_reported_as_async() -> None:
    """A packet cut by the end of the trace keeps its kind; a cut A-sync is an A-sync."""
    sync = enc.a_sync() + enc.trace_info()
    pkts = list(rd.iter_packets(Stream(1, sync + b"\x00\x00\x00"), ETM4))
    assert isinstance(pkts[-1], BadPacket) and pkts[-1].kind == P.INCOMPLETE_EOT
    assert pkts[-1].err_kind == P.ASYNC and pkts[-1].raw == b"\x00\x00\x00"
    pkts = list(rd.iter_packets(Stream(1, sync + b"\x00"), ETM4))
    assert isinstance(pkts[-1], BadPacket) and pkts[-1].err_kind == P.EXTENSION
    pkts = list(rd.iter_packets(Stream(1, sync + b"\x9a\x01"), ETM4))
    assert isinstance(pkts[-1], BadPacket) and pkts[-1].err_kind == P.ADDR_L_32IS0
