"""ETMv3 per-kind readers on hand-made bytes: ``read_<kind>(data, pos, end, index, state)``.

Each reader returns its packet (``len(raw)`` is its size) and updates the
state, returns None, leaving the state alone, when the packet goes on past
``end``, or False for the one packet that never ends. The reading loop's own
copy of the P-header reader and its dispatch table are checked against the
readers here.
"""

from __future__ import annotations

import random
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
    ISync,
    ISyncReason,
    NormalData,
    OOOData,
    OOOPlaceholder,
    PHeader,
    Reserved,
    Timestamp,
    ValueNotTraced,
)
from cstrace.protocols.etmv3.reader import (
    HEADER_KIND,
    Header,
    ReaderState,
    iter_packets,
    read_async,
    read_bad_trace_mode,
    read_branch,
    read_context_id,
    read_cycle_count,
    read_isync,
    read_isync_cycle,
    read_normal_data,
    read_ooo_data,
    read_ooo_placeholder,
    read_pheader,
    read_reserved,
    read_timestamp,
    read_value_not_traced,
    read_vmid,
    reader_table,
)
from tests.blocks import SplitStream, packet_fields

# TC2's Cortex-A7 ETMs: ETMv3.5, cycle-accurate, timestamps (64-bit), no context ID.
CFG = Etmv3Config(ctrl=0x10001860, ccer=0x344008F2, idr=0x410CF250, traceidr=0x10)
PLAIN = replace(CFG, ctrl=0x10000860)  # not cycle-accurate
DATA = replace(CFG, ctrl=0x1000086C)  # data values and addresses traced
CTXT4 = replace(PLAIN, ctrl=PLAIN.ctrl | (3 << 14))  # four context ID bytes
ASYNC = b"\x00\x00\x00\x00\x00\x80"


def slots(st: ReaderState) -> dict[str, object]:
    return {name: getattr(st, name) for name in ReaderState.__slots__}


# ---- the dispatch table


def test_reader_table_follows_the_header_table() -> None:
    table = reader_table(DATA)
    assert table[0x08] is read_isync and table[0x70] is read_isync_cycle
    assert table[0x04] is read_cycle_count and table[0x00] is read_async
    assert all(table[b] is read_branch for b in range(1, 256, 2))
    assert all(table[b] is read_pheader for b in range(0x80, 256, 2))
    assert table[0x02] is read_normal_data and table[0x2C] is read_ooo_data
    for b in range(256):
        if HEADER_KIND[b] is Header.RESERVED:
            assert table[b] is read_reserved


def test_reader_table_without_data_trace_gives_bad_trace_mode() -> None:
    table = reader_table(CFG)
    for b in range(256):
        if HEADER_KIND[b] in (Header.OOO_DATA, Header.NORMAL_DATA, Header.VALUE_NOT_TRACED):
            assert table[b] is read_bad_trace_mode
    st = ReaderState(CFG)
    st.last = "P_HDR"
    p = table[0x54](b"\x54", 0, 1, 3, st)  # a placeholder names itself, not the P-header
    assert isinstance(p, BadTraceMode) and p.header == "OOO_ADDR_PLC"
    assert st.last == "BAD_TRACEMODE"


@pytest.mark.parametrize("cfg", [CFG, PLAIN])
def test_pheaders_in_the_loop_match_read_pheader(cfg: Etmv3Config) -> None:
    # Every P-header byte after sync, read by the loop (inlined) and by read_pheader.
    data = bytes(range(0x80, 0x100, 2))
    got = list(iter_packets(Stream(0x10, ASYNC + data), cfg))[1:]
    st = ReaderState(cfg)
    st.last = "A_SYNC"
    want = [read_pheader(data, i, len(data), 6 + i, st) for i in range(len(data))]
    assert packet_fields(got) == packet_fields(want)


def test_table_alone_reads_what_the_loop_reads() -> None:
    # After an A-sync, reading with the table only (no inlined P-headers) gives the
    # packets iter_packets gives, over random bytes, in several configurations.
    rng = random.Random(5)
    for cfg in (CFG, PLAIN, DATA, CTXT4):
        for _ in range(40):
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
            got = packet_fields(iter_packets(Stream(0x10, ASYNC + body), cfg, False))
            table = reader_table(cfg)
            st = ReaderState(cfg)
            st.last = "A_SYNC"
            want = [repr(ASync(0, ASYNC))]
            p = 0
            while p < len(body):
                pkt = table[body[p]](body, p, len(body), 6 + p, st)
                if not pkt:
                    break
                want.append(repr(pkt))
                p += len(pkt.raw)
            assert got == want


# ---- the contract: None (state untouched) until the whole packet is there


def _contract(cfg: Etmv3Config, data: bytes) -> None:
    """Given ``data[:end]`` for growing ``end``, a reader returns None (state untouched)
    until it returns the packet it returns for the whole of ``data``.
    """
    read = reader_table(cfg)[data[0]]
    whole = read(data, 0, len(data), 0, ReaderState(cfg))
    for end in range(1, len(data) + 1):
        st = ReaderState(cfg)
        before = slots(st)
        pkt = read(data[:end], 0, end, 0, st)
        if pkt is None:
            assert slots(st) == before
            continue
        assert repr(pkt) == repr(whole)
        if pkt is False:  # never ends, whatever follows
            return
        assert pkt.raw == data[: len(pkt.raw)] and len(pkt.raw) <= end
        return
    assert whole is None


@pytest.mark.parametrize("cfg", [CFG, PLAIN, DATA, CTXT4, replace(CTXT4, ctrl=0x0011D06C)])
def test_readers_need_only_their_bytes(cfg: Etmv3Config) -> None:
    rng = random.Random(cfg.ctrl)
    for header in range(256):
        for _ in range(8):
            _contract(cfg, bytes([header, *(rng.randrange(256) for _ in range(14))]))


# ---- hand-made packets


def test_isync_cycle_from_tc2() -> None:
    raw = bytes([0x70, 0x8F, 0x3C, 0x21, 0x99, 0xF6, 0x04, 0xC0])
    st = ReaderState(CFG)
    p = read_isync_cycle(raw + b"\xaa", 0, 9, 100, st)
    assert isinstance(p, ISync) and p.raw == raw and p.offset == 100
    assert p.cycle_count == 7695 and p.address == 0xC004F698 and p.isa is Isa.T32
    assert p.reason is ISyncReason.TRACE_ENABLE
    assert (st.addr, st.isa, st.valid_bits, st.last) == (0xC004F698, Isa.T32, 32, "I_SYNC_CYCLE")


def test_isync_context_id() -> None:
    raw = bytes([0x08, 0x78, 0x56, 0x34, 0x12, 0x08, 0x00, 0x20, 0x00, 0x80])
    st = ReaderState(CTXT4)
    p = read_isync(raw, 0, len(raw), 0, st)
    assert isinstance(p, ISync) and p.context_id == st.ctxid == 0x12345678
    assert p.ns and p.isa is Isa.A32 and p.address == 0x80002000


def test_isync_data_only_with_cycle_count_and_context_id_is_bad() -> None:
    # Without instruction trace the reference sizes this packet without its cycle
    # count (header, cycle count, 1 byte): the context ID and information byte do
    # not fit. It used to be read past the packet's end (or raise IndexError).
    cfg = replace(CFG, ctrl=CFG.ctrl | (1 << 20) | (1 << 14))  # data only, 1 ctxt byte
    st = ReaderState(cfg)
    p = read_isync_cycle(bytes([0x70, 0x05, 0x11, 0x20]), 0, 4, 0, st)
    assert isinstance(p, BadSequence) and p.raw == b"\x70\x05\x11" and p.header == "I_SYNC_CYCLE"
    data = ASYNC + bytes([0x70, 0x05, 0x11, 0x70, 0x85, 0x03, 0x44, 0x84])
    for trace_id in (None, 0x10):
        stream = Stream(trace_id, data)
        whole = packet_fields(iter_packets(stream, cfg))
        kinds = [f.split("(")[0] for f in whole]
        assert kinds == ["ASync", "BadSequence", "BadSequence", "PHeader"]
        for cut in range(1, len(data)):
            assert packet_fields(iter_packets(SplitStream(stream, [cut]), cfg)) == whole


def test_isync_data_only_without_cycle_count() -> None:
    cfg = replace(CFG, ctrl=CFG.ctrl | (1 << 20) | (1 << 14))
    p = read_isync(bytes([0x08, 0x42, 0x68]), 0, 3, 0, ReaderState(cfg))
    assert isinstance(p, ISync) and p.no_address and p.context_id == 0x42
    assert p.reason is ISyncReason.DEBUG_EXIT and p.ns


def test_branch_one_byte_keeps_the_high_bits() -> None:
    st = ReaderState(CFG)
    st.addr, st.isa, st.valid_bits = 0xC0001000, Isa.A32, 32
    p = read_branch(b"\x21", 0, 1, 9, st)
    assert isinstance(p, BranchAddress) and p.bits == 8
    assert p.address == st.addr == 0xC0001040 and not p.isa_changed


def test_branch_five_bytes_with_exception() -> None:
    # Address bytes then byte 5 (b0001xxxx: Thumb, bit 6: exception follows), then
    # exception byte 0x09 (NS, exception 4).
    raw = bytes([0x81, 0x80, 0x80, 0x80, 0x50, 0x09])
    st = ReaderState(CFG)
    p = read_branch(raw, 0, len(raw), 0, st)
    assert isinstance(p, BranchAddress) and p.raw == raw
    assert p.isa is Isa.T32 and p.isa_changed and p.exception == 4 and p.ns
    assert p.ctxt_updated and st.ns
    assert read_branch(raw, 0, 5, 0, ReaderState(CFG)) is None


def test_cycle_count_and_its_fifth_byte() -> None:
    st = ReaderState(CFG)
    p = read_cycle_count(bytes([0x04, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x77]), 0, 7, 0, st)
    assert isinstance(p, CycleCount) and len(p.raw) == 6 and p.count == 0xFFFFFFFF
    assert st.last == "CYCLE_COUNT"


def test_timestamp_merges_low_bits() -> None:
    st = ReaderState(CFG)
    st.timestamp = 0x123456789
    p = read_timestamp(bytes([0x42, 0x81, 0x02]), 0, 3, 0, st)
    assert isinstance(p, Timestamp) and p.bits == 14
    assert p.timestamp == st.timestamp == 0x123454101  # 14 low bits: 0x0101


def test_async_extra_zeros_keep_the_first_index() -> None:
    data = bytes(7) + b"\x80"
    st = ReaderState(CFG)
    out: list[Packet] = []
    p = 0
    while p < len(data):
        pkt = read_async(data, p, len(data), 50 + 2 * p, st)  # indices not consecutive
        assert pkt
        out.append(pkt)
        p += len(pkt.raw)
    assert [type(x) for x in out] == [BadSequence, BadSequence, ASync]
    assert [x.offset for x in out] == [50, 51, 52]  # counted on from the first zero
    assert st.async_index == -1 and st.last == "A_SYNC"


def test_async_broken_by_another_byte() -> None:
    st = ReaderState(CFG)
    p = read_async(b"\x00\x00\x00\x80", 0, 4, 0, st)
    assert isinstance(p, BadSequence) and p.raw == b"\x00\x00\x00"
    assert read_async(b"\x00\x00\x00", 0, 3, 0, st) is None


def test_context_id_and_vmid() -> None:
    st = ReaderState(CTXT4)
    p = read_context_id(bytes([0x6E, 1, 2, 3, 4]), 0, 5, 0, st)
    assert isinstance(p, ContextID) and p.context_id == st.ctxid == 0x04030201
    v = read_vmid(b"\x3c\x07", 0, 2, 0, st)
    assert isinstance(v, VMID) and v.vmid == st.vmid == 7


def test_data_packets() -> None:
    st = ReaderState(DATA)
    o = read_ooo_data(bytes([0x2C, 0x11, 0x22, 0x33, 0x44]), 0, 5, 0, st)
    assert isinstance(o, OOOData) and o.value == 0x44332211 and o.tag == 1
    ph = read_ooo_placeholder(bytes([0x74, 0x05]), 0, 2, 0, st)  # tag 1 with an address
    assert isinstance(ph, OOOPlaceholder) and ph.address == 5 and ph.tag == 1
    v = read_value_not_traced(bytes([0x4A]), 0, 1, 0, st)
    assert isinstance(v, ValueNotTraced) and v.address is None
    d = read_normal_data(bytes([0x26, 0x83, 0x01, 0xAB]), 0, 4, 0, st)  # address, 1 byte
    assert isinstance(d, NormalData) and d.address == 3 and len(d.raw) == 4
    assert read_normal_data(bytes([0x22, 0x05]), 0, 2, 0, st) is False  # never ends


def test_reserved_names_the_packet_before() -> None:
    st = ReaderState(CFG)
    st.last = "TIMESTAMP"
    r = read_reserved(b"\x12", 0, 1, 0, st)
    assert isinstance(r, Reserved) and r.header == "TIMESTAMP" and st.last == "RESERVED"


def test_pheader_formats() -> None:
    st = ReaderState(PLAIN)
    p = read_pheader(b"\x84", 0, 1, 0, st)  # format 1, one E
    assert isinstance(p, PHeader) and (p.fmt, p.count, p.atoms) == (1, 1, 1)
    st = ReaderState(CFG)
    st.fmt = 3
    p = read_pheader(b"\xa2", 0, 1, 0, st)  # invalid in cycle-accurate mode: keeps the format
    assert isinstance(p, PHeader) and not p.valid and p.fmt == 3
