"""The code scanner (one code object), and random opcodes that must never raise.

The scanner is checked against a plain instruction-by-instruction walk built
on :func:`cstrace.isa.decode_at`, on hand-made code and on random bytes (small
code objects take the direct path, large ones the paged waypoint index).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.elements import InstrType, Isa
from cstrace.isa import (
    ArchVersion,
    IsaOptions,
    Scan,
    StopReason,
    Walker,
    decode,
    decode_at,
    scan_to_address,
    scan_to_waypoint,
)

OPTS = IsaOptions(ArchVersion.AA64, wfi_wfe_branch=True)
ALL_OPTS = [
    IsaOptions(ArchVersion.V7),
    IsaOptions(ArchVersion.V8, dsb_dmb_waypoints=True),
    IsaOptions(ArchVersion.V8R3, wfi_wfe_branch=True),
    OPTS,
    IsaOptions(ArchVersion.AA64, wfi_wfe_branch=True, track_it_block=True),
]
ISAS = [Isa.A64, Isa.A32, Isa.T32]

NOP64 = 0xD503201F
RET64 = 0xD65F03C0
BL64 = 0x94000010


def a64(*words: int) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


def t32(*halfwords: int) -> bytes:
    return struct.pack(f"<{len(halfwords)}H", *halfwords)


def naive(
    code: bytes,
    base: int,
    start: int,
    isa: Isa,
    opts: IsaOptions,
    max_instr: int = 0,
    stop_at: int | None = None,
) -> tuple[int, int, int | None, StopReason]:
    """Walk one instruction at a time: (count, end, last address, reason)."""
    addr = start
    count = 0
    last = None
    while True:
        info = decode_at(isa, code, base, addr, opts)
        if info is None:
            return count, addr, last, StopReason.NO_BYTES
        count += 1
        last = addr
        addr += info.size
        if stop_at is None and info.itype != InstrType.OTHER:
            return count, addr, last, StopReason.WAYPOINT
        if count == max_instr:
            return count, addr, last, StopReason.COUNT
        if stop_at is not None and addr == stop_at:
            return count, addr, last, StopReason.ADDRESS


def summary(s: Scan) -> tuple[int, int, int | None, StopReason]:
    return s.count, s.end, s.last_address, s.reason


def test_a64_walks() -> None:
    code = a64(NOP64, NOP64, 0x91000400, BL64, NOP64, RET64)
    s = scan_to_waypoint(code, 0x1000, 0x1000, Isa.A64, OPTS)
    assert (s.count, s.end, s.reason) == (4, 0x1010, StopReason.WAYPOINT)
    assert s.last is not None and s.last.is_link and s.last.target == 0x100C + 0x40
    s = scan_to_waypoint(code, 0x1000, 0x1010, Isa.A64, OPTS)
    assert (s.count, s.end, s.reason) == (2, 0x1018, StopReason.WAYPOINT)
    assert s.last is not None and s.last.itype == InstrType.BR_INDIRECT
    s = scan_to_waypoint(code, 0x1000, 0x1000, Isa.A64, OPTS, max_instr=2)
    assert (s.count, s.end, s.reason) == (2, 0x1008, StopReason.COUNT)
    s = scan_to_waypoint(code, 0x1000, 0x1000, Isa.A64, OPTS, max_instr=4)
    assert (s.count, s.end, s.reason) == (4, 0x1010, StopReason.WAYPOINT)
    s = scan_to_waypoint(code, 0x1000, 0x1018, Isa.A64, OPTS)
    assert (s.count, s.end, s.last, s.reason) == (0, 0x1018, None, StopReason.NO_BYTES)
    s = scan_to_waypoint(code, 0x1000, 0xFFC, Isa.A64, OPTS)
    assert (s.count, s.reason) == (0, StopReason.NO_BYTES)


def test_a64_runs_out_of_bytes() -> None:
    code = a64(NOP64, NOP64) + b"\x1f\x20"  # 2 whole instructions and half of one
    s = scan_to_waypoint(code, 0, 0, Isa.A64, OPTS)
    assert (s.count, s.end, s.reason) == (2, 8, StopReason.NO_BYTES)
    assert s.last is not None and s.last.address == 4


def test_t32_walk_needs_four_bytes_even_for_16_bit() -> None:
    code = t32(0xBF00, 0xBF00, 0x4770)  # NOP; NOP; BX LR (at the last 2 bytes)
    s = scan_to_waypoint(code, 0x2000, 0x2000, Isa.T32, OPTS)
    assert (s.count, s.end, s.reason) == (2, 0x2004, StopReason.NO_BYTES)
    code = t32(0xBF00, 0xBF00, 0x4770, 0x0000)
    s = scan_to_waypoint(code, 0x2000, 0x2000, Isa.T32, OPTS)
    assert (s.count, s.end, s.reason) == (3, 0x2006, StopReason.WAYPOINT)
    assert s.last is not None and s.last.size == 2


def test_t32_mixed_sizes() -> None:
    # MOV.W r0,#0; ADDS r0,#1; BL +0; NOP
    code = t32(0xF04F, 0x0000, 0x3001, 0xF000, 0xF800, 0xBF00, 0xBF00)
    s = scan_to_waypoint(code, 0x100, 0x100, Isa.T32, OPTS)
    assert (s.count, s.end, s.reason) == (3, 0x10A, StopReason.WAYPOINT)
    assert s.last is not None and s.last.is_link and s.last.target == 0x10A
    assert s.last.address == 0x106 and s.last.size == 4


def test_t32_it_tracking() -> None:
    opts = IsaOptions(ArchVersion.V8, track_it_block=True)
    # ITE EQ; MOVEQ r0, r1; BXNE LR
    code = t32(0xBF0C, 0x4608, 0x4770, 0xBF00)
    s = scan_to_waypoint(code, 0, 0, Isa.T32, opts)
    assert (s.count, s.reason, s.it_state) == (3, StopReason.WAYPOINT, 0)
    assert s.last is not None and s.last.is_cond
    plain = scan_to_waypoint(code, 0, 0, Isa.T32, IsaOptions(ArchVersion.V8))
    assert plain.last is not None and not plain.last.is_cond
    # stopping inside the block reports what is left; passing it back continues it
    s = scan_to_waypoint(code, 0, 0, Isa.T32, opts, max_instr=2)
    assert (s.count, s.reason, s.it_state) == (2, StopReason.COUNT, 1)
    assert s.last is not None and s.last.is_cond
    s2 = scan_to_waypoint(code, 0, s.end, Isa.T32, opts, it_state=s.it_state)
    assert s2.last is not None and s2.last.is_cond and s2.it_state == 0
    s3 = scan_to_waypoint(code, 0, s.end, Isa.T32, opts)
    assert s3.last is not None and not s3.last.is_cond


def test_scan_to_address() -> None:
    code = a64(NOP64, BL64, NOP64, RET64, NOP64)
    s = scan_to_address(code, 0x1000, 0x1000, Isa.A64, OPTS, 0x1010)
    assert (s.count, s.end, s.reason) == (4, 0x1010, StopReason.ADDRESS)
    assert s.last is not None and s.last.itype == InstrType.BR_INDIRECT
    s = scan_to_address(code, 0x1000, 0x1000, Isa.A64, OPTS, 0x2000)
    assert (s.count, s.end, s.reason) == (5, 0x1014, StopReason.NO_BYTES)
    s = scan_to_address(code, 0x1000, 0x1000, Isa.A64, OPTS, 0x1010, max_instr=2)
    assert (s.count, s.end, s.reason) == (2, 0x1008, StopReason.COUNT)
    tc = t32(0xBF00, 0x4770, 0xF000, 0xF800, 0xBF00, 0xBF00)
    s = scan_to_address(tc, 0, 0, Isa.T32, OPTS, 8)
    assert (s.count, s.end, s.reason) == (3, 8, StopReason.ADDRESS)


def test_a32_bx_without_its_should_be_one_bits_is_a_waypoint() -> None:
    # BXEQ r0 with bits 19:8 clear: the classifier (as the reference's) ignores them,
    # so the scanner's pre-filter must not skip it, in small and in large code.
    nop, bx = 0xE320F000, 0x01200010
    assert decode(Isa.A32, 0, bx, OPTS).itype == InstrType.BR_INDIRECT
    for body in ([nop, bx, nop], [nop] * 1000 + [bx] + [nop] * 10):
        code = struct.pack(f"<{len(body)}I", *body)
        s = scan_to_waypoint(code, 0, 0, Isa.A32, OPTS)
        assert (s.count, s.reason) == (len(body) - body[::-1].index(bx), StopReason.WAYPOINT)


def test_unsupported_isa() -> None:
    with pytest.raises(ValueError):
        scan_to_waypoint(b"\0" * 8, 0, 0, Isa.UNKNOWN, OPTS)
    with pytest.raises(ValueError):
        scan_to_address(b"\0" * 8, 0, 0, Isa.TEE, OPTS, 4)


def test_large_code_uses_the_index_consistently() -> None:
    body = [NOP64] * 5000 + [RET64] + [NOP64] * 3000 + [BL64] + [NOP64] * 10
    code = a64(*body)
    for start_i in (0, 1, 4095, 4096, 4999, 5000, 5001, 8000, 8001, 8011):
        start = 0x40000 + 4 * start_i
        got = summary(scan_to_waypoint(code, 0x40000, start, Isa.A64, OPTS))
        assert got == naive(code, 0x40000, start, Isa.A64, OPTS), start_i
        for m in (1, 7, 4097):
            got = summary(scan_to_waypoint(code, 0x40000, start, Isa.A64, OPTS, m))
            assert got == naive(code, 0x40000, start, Isa.A64, OPTS, m), (start_i, m)


def test_walker_cache() -> None:
    code = a64(NOP64, BL64, NOP64, RET64)
    w = Walker(code, 0x1000, Isa.A64, OPTS)
    s1 = w.scan(0x1000)
    assert w.scan(0x1000) is s1 and (w.base, w.end) == (0x1000, 0x1010)
    assert w.scan(0x1000, max_instr=1) is not s1
    assert w.scan(0x1000, max_instr=1).count == 1
    assert len(w) == 2
    w.clear()
    assert len(w) == 0
    small = Walker(code, 0x1000, Isa.A64, OPTS, max_blocks=2)
    for start in (0x1000, 0x1004, 0x1008):
        small.scan(start)
    assert len(small) <= 2
    with pytest.raises(ValueError):
        Walker(code, 0, Isa.JAZELLE, OPTS)


# ---------------------------------------------------------------------------
# random input
# ---------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(
    op=st.integers(0, 0xFFFFFFFF),
    addr=st.integers(0, (1 << 64) - 2),
    isa=st.sampled_from(ISAS),
    opts=st.sampled_from(ALL_OPTS),
)
def test_random_opcodes_never_raise(op: int, addr: int, isa: Isa, opts: IsaOptions) -> None:
    addr &= ~1 if isa == Isa.T32 else ~3
    if isa != Isa.A64:
        addr &= 0xFFFFFFFF
    i = decode(isa, addr, op, opts)
    assert i.size in ((2, 4) if isa == Isa.T32 else (4,))
    assert (i.target is not None) == (i.itype == InstrType.BR)
    if i.target is not None:
        assert 0 <= i.target < (1 << (64 if isa == Isa.A64 else 32))
    assert i.next_isa == isa or (i.is_link and i.itype == InstrType.BR)
    assert i.subtype == 0 or i.itype in (InstrType.BR, InstrType.BR_INDIRECT)


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=600),
    isa=st.sampled_from(ISAS),
    opts=st.sampled_from(ALL_OPTS),
    start=st.integers(0, 600),
    max_instr=st.integers(0, 40),
)
def test_scan_matches_naive_walk_small(
    data: bytes, isa: Isa, opts: IsaOptions, start: int, max_instr: int
) -> None:
    start &= ~1 if isa == Isa.T32 else ~3
    base = 0x8000
    got = scan_to_waypoint(data, base, base + start, isa, opts, max_instr)
    assert summary(got) == naive(data, base, base + start, isa, opts, max_instr)
    stop = base + start + 4 * max_instr
    got = scan_to_address(data, base, base + start, isa, opts, stop)
    assert summary(got) == naive(data, base, base + start, isa, opts, 0, stop)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.binary(min_size=64, max_size=64),
    isa=st.sampled_from([Isa.A64, Isa.A32]),
    opts=st.sampled_from(ALL_OPTS),
    starts=st.lists(st.integers(0, 20000), min_size=1, max_size=8),
    max_instr=st.integers(0, 5000),
)
def test_scan_matches_naive_walk_large(
    seed: bytes, isa: Isa, opts: IsaOptions, starts: list[int], max_instr: int
) -> None:
    # Mostly non-waypoint words with a sprinkling of random ones, 80 KiB: the paged index.
    import random

    rng = random.Random(seed)
    filler = 0xE1A00000 if isa == Isa.A32 else NOP64
    words = [rng.getrandbits(32) if rng.random() < 0.002 else filler for _ in range(20480)]
    code = struct.pack(f"<{len(words)}I", *words)
    for s in starts:
        start = 0x100000 + 4 * s
        got = scan_to_waypoint(code, 0x100000, start, isa, opts, max_instr)
        assert summary(got) == naive(code, 0x100000, start, isa, opts, max_instr)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=4, max_size=400), flips=st.lists(st.integers(0, 3199)))
def test_bit_flipped_code_never_raises(data: bytes, flips: list[int]) -> None:
    buf = bytearray(data)
    for f in flips:
        if f // 8 < len(buf):
            buf[f // 8] ^= 1 << (f % 8)
    for isa in ISAS:
        for opts in ALL_OPTS:
            s = scan_to_waypoint(buf, 0, 0, isa, opts)
            assert s.count == 0 or s.last is not None
