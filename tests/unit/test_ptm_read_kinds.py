"""PTM per-kind readers on hand-made bytes: ``read_<kind>(dec, data, pos, end, index, state)``.

Each reader hands its packet to the decoder (here a tap, which makes the packet
object: ``len(raw)`` is the size the reader returns) after updating the state,
or returns -1, leaving the state alone, when the packet goes on past ``end``.
The reading loop's dispatch table is checked against the readers here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from cstrace.capture import Stream
from cstrace.elements import Isa
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.ptm import reader as _reader
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.decoder import PtmDecoder
from cstrace.protocols.ptm.encoder import (
    encode_async,
    encode_branch,
    encode_cycle_count,
    encode_isync,
    encode_timestamp,
    encode_waypoint_update,
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
    ISync,
    ISyncReason,
    PtmPacketType,
    Reserved,
    Timestamp,
    Trigger,
    WaypointUpdate,
)
from cstrace.protocols.ptm.reader import HEADER_TABLE, ReaderState, iter_packets
from tests.blocks import packet_fields

Read = Callable[[bytes, int, int, int, ReaderState], Any]


def tapped(read: Any) -> Read:
    """A per-kind reader as a function of the bytes: its packet object (from a tap on
    the decoder), or None when it says the packet is cut."""

    def call(data: bytes, pos: int, end: int, index: int, st: ReaderState) -> Any:
        dec = PtmDecoder(PtmConfig(trace_id=0x10), DecodeContext(0x10, DecodeOptions()))
        dec.tap = []
        after = read(dec, data, pos, end, index, st)
        if after < 0:
            assert not dec.tap
            return None
        assert len(dec.tap) == 1 and len(dec.tap[0].raw) == after - pos
        return dec.tap[0]

    return call


read_async = tapped(_reader.read_async)
read_atom = tapped(_reader.read_atom)
read_branch = tapped(_reader.read_branch)
read_context_id = tapped(_reader.read_context_id)
read_exception_return = tapped(_reader.read_exception_return)
read_ignore = tapped(_reader.read_ignore)
read_isync = tapped(_reader.read_isync)
read_reserved = tapped(_reader.read_reserved)
read_timestamp = tapped(_reader.read_timestamp)
read_trigger = tapped(_reader.read_trigger)
read_vmid = tapped(_reader.read_vmid)
read_waypoint_update = tapped(_reader.read_waypoint_update)
READERS = tuple(tapped(r) for r in _reader.READERS)

PLAIN = PtmConfig(trace_id=0x10)
CA = PtmConfig(trace_id=0x10, etmcr=1 << 12)
# Cycle-accurate, 4 context ID bytes, 64-bit timestamps (PFTv1.1).
FULL = PtmConfig(trace_id=0x10, etmcr=(1 << 12) | (3 << 14), etmccer=1 << 29, etmidr=0x411CF312)
CONFIGS = [PLAIN, CA, FULL, PtmConfig(trace_id=0x10, etmcr=1 << 14)]


def sync(config: PtmConfig) -> bytes:
    """An A-sync and an I-sync (A32 at 0x1000)."""
    isync = encode_isync(0x1000, Isa.A32, ISyncReason.PERIODIC, ctxt_id_bytes=config.ctxt_id_bytes)
    return encode_async() + isync


def slots(st: ReaderState) -> dict[str, object]:
    """The reader state (but ``cc``, where a reader leaves the cycle count it read)."""
    return {name: getattr(st, name) for name in ReaderState.__slots__ if name != "cc"}


def synced_state(config: PtmConfig) -> ReaderState:
    """The state after the I-sync of ``sync(config)``."""
    st = ReaderState(config)
    st.isa, st.address, st.valid_bits = Isa.A32, 0x1000, 32
    return st


# ---- the dispatch table


def test_readers_follow_the_header_table() -> None:
    r = _reader
    by_kind = {
        PtmPacketType.A_SYNC: r.read_async,
        PtmPacketType.I_SYNC: r.read_isync,
        PtmPacketType.ATOM: r.read_atom,
        PtmPacketType.BRANCH_ADDRESS: r.read_branch,
        PtmPacketType.WAYPOINT_UPDATE: r.read_waypoint_update,
        PtmPacketType.TRIGGER: r.read_trigger,
        PtmPacketType.CONTEXT_ID: r.read_context_id,
        PtmPacketType.VMID: r.read_vmid,
        PtmPacketType.TIMESTAMP: r.read_timestamp,
        PtmPacketType.EXCEPTION_RETURN: r.read_exception_return,
        PtmPacketType.IGNORE: r.read_ignore,
        PtmPacketType.RESERVED: r.read_reserved,
    }
    assert [by_kind[k] for k in HEADER_TABLE] == list(r.READERS)
    assert list(r.KINDS) == [int(k) for k in HEADER_TABLE]


def test_table_alone_reads_what_the_loop_reads() -> None:
    # After the sync, reading with READERS only (no inlined atoms) gives the
    # packets iter_packets gives, over random bytes, in several configurations.
    rng = random.Random(3)
    for config in CONFIGS:
        for _ in range(40):
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
            head = sync(config)
            got = packet_fields(iter_packets(Stream(0x10, head + body), config, False))[2:]
            st = synced_state(config)
            want = []
            p = 0
            while p < len(body):
                pkt = READERS[body[p]](body, p, len(body), len(head) + p, st)
                if pkt is None:
                    break
                want.append(repr(pkt))
                p += len(pkt.raw)
            assert got == want


# ---- the contract: None (state untouched) until the whole packet is there


def _contract(config: PtmConfig, data: bytes) -> None:
    """Given ``data[:end]`` for growing ``end``, a reader returns None (state untouched)
    until it returns the packet it returns for the whole of ``data``.
    """
    read = READERS[data[0]]
    whole = read(data, 0, len(data), 0, synced_state(config))
    for end in range(1, len(data) + 1):
        st = synced_state(config)
        before = slots(st)
        pkt = read(data[:end], 0, end, 0, st)
        if pkt is None:
            assert slots(st) == before
            continue
        assert repr(pkt) == repr(whole) and pkt.raw == data[:end]
        return
    assert whole is None


@pytest.mark.parametrize("config", CONFIGS)
def test_readers_need_only_their_bytes(config: PtmConfig) -> None:
    rng = random.Random(config.etmcr)
    for header in range(256):
        for _ in range(8):
            tail = [rng.choice((0, 0x80, 0xFF, rng.randrange(256))) for _ in range(16)]
            _contract(config, bytes([header, *tail]))


# ---- hand-made packets


def test_isync_with_cycle_count_and_context_id() -> None:
    raw = encode_isync(
        0x8000_1234, Isa.T32, ISyncReason.OVERFLOW, ns=True, hyp=True, cycle_count=300,
        context_id=0xCAFE, ctxt_id_bytes=4,
    )  # fmt: skip
    st = ReaderState(FULL)
    p = read_isync(raw + b"\x80", 0, len(raw) + 1, 77, st)
    assert isinstance(p, ISync) and p.raw == raw and p.offset == 77
    assert (p.address, p.isa, p.reason, p.ns, p.hyp) == (
        0x8000_1234, Isa.T32, ISyncReason.OVERFLOW, True, True,
    )  # fmt: skip
    assert p.cycle_count == 300 and p.context_id == 0xCAFE and p.isa_changed
    assert (st.address, st.isa, st.valid_bits, st.ns, st.hyp) == (0x8000_1234, Isa.T32, 32, 1, 1)


def test_periodic_isync_has_no_cycle_count() -> None:
    raw = encode_isync(0x2000, Isa.A32, ISyncReason.PERIODIC)
    p = read_isync(raw, 0, len(raw), 0, ReaderState(CA))
    assert isinstance(p, ISync) and p.cycle_count is None and len(p.raw) == 6


def test_branch_short_keeps_the_high_bits_and_the_isa() -> None:
    st = synced_state(PLAIN)
    raw = encode_branch(0x1040, Isa.A32, 1)
    p = read_branch(raw, 0, len(raw), 5, st)
    assert isinstance(p, BranchAddress) and p.raw == raw
    assert p.address == st.address == 0x1040 and p.isa is Isa.A32 and not p.isa_changed
    assert p.pkt_bits == 8 and p.valid_bits == 32 and p.exception is None


def test_branch_full_with_exception_and_cycle_count() -> None:
    st = synced_state(CA)
    raw = encode_branch(0x0800_0102, Isa.T32, 5, exception=0x12, ns=True, hyp=True, cycle_count=9)
    p = read_branch(raw, 0, len(raw), 0, st)
    assert isinstance(p, BranchAddress) and p.raw == raw
    assert p.address == 0x0800_0102 and p.isa is Isa.T32 and p.isa_changed
    assert (p.exception, p.ns, p.hyp, p.ns_updated, p.cycle_count) == (0x12, True, True, True, 9)
    assert st.isa == Isa.T32 and st.ns and st.hyp
    assert read_branch(raw, 0, len(raw) - 1, 0, synced_state(CA)) is None


def test_branch_alt_isa_bit_makes_thumbee() -> None:
    st = synced_state(PLAIN)
    raw = encode_branch(0x3000, Isa.T32, 5, exception=1, alt_isa=True)
    p = read_branch(raw, 0, len(raw), 0, st)
    assert isinstance(p, BranchAddress) and p.isa is Isa.TEE and st.alt_isa_exc == 1


def test_waypoint_update() -> None:
    st = synced_state(PLAIN)
    raw = encode_waypoint_update(0x4000_0010, Isa.T32, 5, alt_isa=False)
    p = read_waypoint_update(raw, 0, len(raw), 0, st)
    assert isinstance(p, WaypointUpdate) and p.raw == raw
    assert p.address == st.address == 0x4000_0010 and p.isa is Isa.T32 and p.isa_changed


@pytest.mark.parametrize(("config", "ts64"), [(PLAIN, False), (FULL, True)])
def test_timestamp_full_width(config: PtmConfig, ts64: bool) -> None:
    value = (1 << (64 if ts64 else 48)) - 3
    cc = 5 if config.cycle_accurate else None
    raw = encode_timestamp(value, ts_64bit=ts64, cycle_count=cc)
    st = ReaderState(config)
    p = read_timestamp(raw, 0, len(raw), 0, st)
    assert isinstance(p, Timestamp) and p.raw == raw
    assert p.timestamp == st.timestamp == value and p.update_bits == (64 if ts64 else 48)
    assert p.cycle_count == cc


def test_timestamp_updates_low_bits() -> None:
    st = ReaderState(PLAIN)
    st.timestamp = 0xABCDEF
    p = read_timestamp(bytes([0x42, 0x05]), 0, 2, 0, st)
    assert isinstance(p, Timestamp) and p.timestamp == 0xABCD85 and p.update_bits == 7


def test_async_good_and_bad() -> None:
    st = ReaderState(PLAIN)
    assert isinstance(read_async(encode_async(2), 0, 8, 0, st), ASync)
    bad = read_async(b"\x00\x00\x00\x00\x00\x01", 0, 6, 0, st)
    assert isinstance(bad, BadSequence) and len(bad.raw) == 6 and bad.kind is PtmPacketType.A_SYNC
    zeros = read_async(bytes(20), 0, 20, 0, st)
    assert isinstance(zeros, BadSequence) and len(zeros.raw) == 16
    assert read_async(bytes(15), 0, 15, 0, st) is None


def test_cycle_accurate_atom_with_long_cycle_count() -> None:
    raw = encode_cycle_count(0xFFFFFFFF, 0x80)
    p = read_atom(raw + b"\x80", 0, len(raw) + 1, 0, ReaderState(CA))
    assert isinstance(p, Atom) and p.raw == raw and len(raw) == 5
    assert (p.bits, p.count, p.cycle_count) == (1, 1, 0xFFFFFFFF)


def test_context_id_vmid_and_one_byte_packets() -> None:
    st = ReaderState(FULL)
    c = read_context_id(bytes([0x6E, 1, 2, 3, 4]), 0, 5, 0, st)
    assert isinstance(c, ContextID) and c.context_id == 0x04030201
    assert read_context_id(bytes([0x6E, 1, 2, 3]), 0, 4, 0, st) is None
    v = read_vmid(b"\x3c\x09", 0, 2, 0, st)
    assert isinstance(v, VMID) and v.vmid == 9
    for reader, header, kind in (
        (read_trigger, 0x0C, Trigger),
        (read_exception_return, 0x76, ExceptionReturn),
        (read_ignore, 0x66, Ignore),
        (read_reserved, 0x02, Reserved),
    ):
        pkt = reader(bytes([header]), 0, 1, 3, st)
        assert type(pkt) is kind and pkt.raw == bytes([header]) and pkt.offset == 3
