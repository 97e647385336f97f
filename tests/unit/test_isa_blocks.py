"""The shared block walker and cache (:mod:`cstrace.isa.blocks`) on hand-made code.

A64, A32 and T32 (with IT blocks) code placed in memory regions: blocks to the
next waypoint, walks to an address, through an instruction, of N
instructions, single instructions; regions that end at an instruction
boundary (the walk goes on) or inside an opcode (not readable); memory
spaces; generation switches; the bounds of the tables; and a comparison with
a plain instruction-by-instruction walk on random code.
"""

from __future__ import annotations

import gc
import struct
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.elements import InstrRange, InstrSubtype, InstrType, Isa, MemSpace
from cstrace.isa import ArchVersion, Block, BlockCache, IsaOptions, StopReason, decode
from cstrace.isa.decode import read_opcode
from cstrace.memory import NO_MEMORY, MemoryMap, MemoryRegion

OPTS = IsaOptions(ArchVersion.AA64, wfi_wfe_branch=True, track_it_block=True)
EL1N = int(MemSpace.EL1N)

# A64
NOP64 = 0xD503201F
RET64 = 0xD65F03C0
BL64 = 0x94000010  # BL +0x40
B64 = 0x14000002  # B +8
CBZ64 = 0xB4000040  # CBZ x0, +8
ISB64 = 0xD5033FDF
# A32
NOP32 = 0xE320F000
BX_LR = 0xE12FFF1E
BLX_IMM = 0xFA000000  # BLX +8 (to T32)
BEQ32 = 0x0A000000  # BEQ +8
# T32 halfwords
T_NOP = 0xBF00
T_BX_LR = 0x4770
T_ITE_EQ = 0xBF0C
T_MOV = 0x4608  # MOV r0, r1


def words(*w: int) -> bytes:
    return struct.pack(f"<{len(w)}I", *w)


def halves(*h: int) -> bytes:
    return struct.pack(f"<{len(h)}H", *h)


def memory(*regions: tuple[int, bytes], space: MemSpace = MemSpace.ANY) -> MemoryMap:
    return MemoryMap([MemoryRegion(start, data, space) for start, data in regions])


def shape(b: Block) -> tuple[int, int, StopReason, int]:
    return b.count, b.end, b.reason, b.itype


def test_a64_block_and_its_record() -> None:
    mem = memory((0x1000, words(NOP64, NOP64, BL64, NOP64, RET64)))
    bc = BlockCache(mem, OPTS)
    b = bc.block(0x1000, Isa.A64, EL1N)
    assert shape(b) == (3, 0x100C, StopReason.WAYPOINT, InstrType.BR)
    assert b.found and b.link and b.size == 4 and not b.cond
    assert b.target == 0x1008 + 0x40 and b.next_isa == Isa.A64 and b.isa == Isa.A64
    assert b.last_address == 0x1008 and b.it_out == 0
    assert b.range_e == (
        0x1000,
        0x100C,
        3,
        Isa.A64,
        True,
        4,
        InstrType.BR,
        InstrSubtype.BR_LINK,
        False,
    )
    assert b.range_n[4] is False and b.range_n[:4] == b.range_e[:4]
    r = InstrRange(7, *b.range_e)
    assert (r.start, r.end, r.num_instr, r.last_type) == (0x1000, 0x100C, 3, InstrType.BR)
    # cached: the same record, found in the table the hot loops read
    assert bc.block(0x1000, Isa.A64, EL1N) is b
    assert bc.tables(EL1N)[Isa.A64][0x1000] is b
    b = bc.block(0x100C, Isa.A64, EL1N)
    assert shape(b) == (2, 0x1014, StopReason.WAYPOINT, InstrType.BR_INDIRECT)
    assert b.subtype == InstrSubtype.V8_RET
    assert "A64 0x100c..0x1014" in repr(b)


def test_a32_blocks_and_isa_switch() -> None:
    mem = memory((0x8000, words(NOP32, BEQ32, NOP32, BLX_IMM, NOP32, BX_LR)))
    bc = BlockCache(mem, OPTS)
    b = bc.block(0x8000, Isa.A32, EL1N)
    assert shape(b) == (2, 0x8008, StopReason.WAYPOINT, InstrType.BR)
    assert b.cond and b.target == 0x8004 + 8
    b = bc.block(0x8008, Isa.A32, EL1N)
    assert shape(b) == (2, 0x8010, StopReason.WAYPOINT, InstrType.BR)
    assert b.link and b.next_isa == Isa.T32 and b.target == 0x800C + 8


def test_t32_it_blocks() -> None:
    # ITE EQ; MOVEQ r0, r1; BXNE LR; NOP
    mem = memory((0x2000, halves(T_ITE_EQ, T_MOV, T_BX_LR, T_NOP, T_NOP, T_NOP)))
    bc = BlockCache(mem, OPTS)
    b = bc.block(0x2000, Isa.T32, EL1N)
    assert shape(b) == (3, 0x2006, StopReason.WAYPOINT, InstrType.BR_INDIRECT)
    assert b.cond and b.size == 2 and b.it_out == 0
    # starting inside the IT block: a separate entry, keyed with the IT state
    inside = bc.block(0x2002, Isa.T32, EL1N, it=2)
    assert shape(inside) == (2, 0x2006, StopReason.WAYPOINT, InstrType.BR_INDIRECT)
    assert inside.cond
    assert bc.tables(EL1N)[Isa.T32][(0x2002, 2)] is inside
    outside = bc.block(0x2002, Isa.T32, EL1N)
    assert outside is not inside and not outside.cond
    # a walk of N instructions that stops inside the block says what is left
    w = bc.walk_count(0x2000, Isa.T32, EL1N, 2)
    assert (w.count, w.end, w.reason, w.it_out) == (2, 0x2004, StopReason.COUNT, 1)
    assert w.cond  # MOVEQ
    # without IT tracking the condition comes from the opcode alone
    plain = BlockCache(mem, IsaOptions(ArchVersion.V8))
    assert not plain.block(0x2000, Isa.T32, EL1N).cond


def test_regions_ending_at_an_instruction_boundary_are_walked_on() -> None:
    mem = memory(
        (0x1000, words(NOP64, NOP64)),
        (0x1008, words(NOP64, RET64)),
        # ITE EQ; MOV.W r0, #0 | next region: BXNE LR (the IT state carries over)
        (0x2000, halves(T_ITE_EQ, 0xF04F, 0x0000)),
        (0x2006, halves(T_BX_LR, T_NOP)),
    )
    bc = BlockCache(mem, OPTS)
    b = bc.block(0x1000, Isa.A64, EL1N)
    assert shape(b) == (4, 0x1010, StopReason.WAYPOINT, InstrType.BR_INDIRECT)
    b = bc.block(0x2000, Isa.T32, EL1N)
    assert shape(b) == (3, 0x2008, StopReason.WAYPOINT, InstrType.BR_INDIRECT)
    assert b.cond and b.last_address == 0x2006


def test_unreadable_code() -> None:
    mem = memory(
        (0x1000, words(NOP64) + b"\x1f\x20"),  # half an opcode at 0x1004
        (0x1008, words(RET64)),
        (0x5000, halves(T_NOP, T_NOP, T_BX_LR)),  # a 16-bit opcode needs 4 bytes too
    )
    bc = BlockCache(mem, OPTS)
    b = bc.block(0x1000, Isa.A64, EL1N)
    assert (b.count, b.end, b.reason, b.found) == (1, 0x1004, StopReason.NO_BYTES, False)
    assert b.itype == InstrType.OTHER and b.range_e[:3] == (0x1000, 0x1004, 1)
    b = bc.block(0x3000, Isa.A64, EL1N)  # nothing mapped
    assert (b.count, b.end, b.found, b.size, b.next_isa) == (0, 0x3000, False, 0, Isa.A64)
    assert b.last_address is None
    b = bc.block(0x5000, Isa.T32, EL1N)
    assert (b.count, b.end, b.found) == (2, 0x5004, False)
    assert not bc.readable(0x1004, EL1N) and bc.readable(0x1000, EL1N)
    assert not bc.readable(0x5004, EL1N) and not bc.readable(0x3000, EL1N)
    assert not bc.instr(0x1004, Isa.A64, EL1N).found


def test_memory_spaces() -> None:
    mem = MemoryMap(
        [
            MemoryRegion(0x1000, words(NOP64, RET64), MemSpace.EL1N),
            MemoryRegion(0x1000, words(BL64, NOP64), MemSpace.EL2),
        ]
    )
    bc = BlockCache(mem, OPTS)
    assert bc.block(0x1000, Isa.A64, EL1N).count == 2
    assert bc.block(0x1000, Isa.A64, int(MemSpace.EL2)).count == 1
    assert not bc.block(0x1000, Isa.A64, int(MemSpace.EL3)).found


def test_walk_to_and_through() -> None:
    mem = memory((0x1000, words(NOP64, BL64, NOP64, RET64, NOP64)))
    bc = BlockCache(mem, OPTS)
    # through waypoints until the next address is 0x100C
    b = bc.walk_to(0x1000, Isa.A64, EL1N, 0x100C)
    assert shape(b) == (3, 0x100C, StopReason.ADDRESS, InstrType.OTHER)
    # an address that is never reached: on to the end of the readable code
    b = bc.walk_to(0x1000, Isa.A64, EL1N, 0x100E)
    assert (b.count, b.end, b.found) == (5, 0x1014, False)
    # through the instruction at 0x100C, inclusive
    b = bc.walk_through(0x1000, Isa.A64, EL1N, 0x100C)
    assert shape(b) == (4, 0x1010, StopReason.ADDRESS, InstrType.BR_INDIRECT)
    assert b.range_e[:3] == (0x1000, 0x1010, 4)
    b = bc.walk_through(0x100C, Isa.A64, EL1N, 0x100C)
    assert shape(b) == (1, 0x1010, StopReason.ADDRESS, InstrType.BR_INDIRECT)
    assert b.start == 0x100C
    # the instruction at the address is not readable: stop before it
    mem2 = memory((0x1000, words(NOP64, NOP64)))
    b = BlockCache(mem2, OPTS).walk_through(0x1000, Isa.A64, EL1N, 0x1008)
    assert (b.count, b.end, b.found, b.itype) == (2, 0x1008, False, InstrType.OTHER)
    b = BlockCache(mem2, OPTS).walk_through(0x1008, Isa.A64, EL1N, 0x1008)
    assert (b.count, b.end, b.found) == (0, 0x1008, False)
    # T32: an address inside a 32-bit instruction is never an instruction boundary
    tmem = memory((0x100, halves(0xF04F, 0x0000, T_NOP, T_BX_LR, T_NOP)))
    b = BlockCache(tmem, OPTS).walk_to(0x100, Isa.T32, EL1N, 0x102)
    assert (b.count, b.end, b.found) == (3, 0x108, False)  # the last NOP has 2 bytes only
    b = BlockCache(tmem, OPTS).walk_to(0x100, Isa.T32, EL1N, 0x106)
    assert (b.count, b.end, b.reason) == (2, 0x106, StopReason.ADDRESS)


def test_walk_count() -> None:
    mem = memory((0x1000, words(NOP64, ISB64, NOP64, B64, NOP64, NOP64)))
    bc = BlockCache(mem, OPTS)
    # other waypoints (ISB) do not stop it; a branch does
    b = bc.walk_count(0x1000, Isa.A64, EL1N, 10)
    assert shape(b) == (4, 0x1010, StopReason.WAYPOINT, InstrType.BR)
    b = bc.walk_count(0x1000, Isa.A64, EL1N, 2)
    assert shape(b) == (2, 0x1008, StopReason.COUNT, InstrType.ISB)
    b = bc.walk_count(0x1000, Isa.A64, EL1N, 4)
    assert (b.count, b.reason) == (4, StopReason.WAYPOINT)
    b = bc.walk_count(0x1010, Isa.A64, EL1N, 5)
    assert (b.count, b.end, b.reason) == (2, 0x1018, StopReason.NO_BYTES)


def test_instr() -> None:
    # A64: NOP; CBZ | T32: BL (32-bit); NOP; NOP | T32 NOP whose 4 bytes are not all mapped
    mem = memory(
        (0x1000, words(NOP64, CBZ64)),
        (0x2000, halves(0xF000, 0xF800, T_NOP, T_BX_LR, T_NOP)),
        (0x3000, halves(T_NOP)),
    )
    bc = BlockCache(mem, OPTS)
    i = bc.instr(0x1004, Isa.A64, EL1N)
    assert (i.found, i.size, i.end, i.itype, i.cond, i.target) == (
        True,
        4,
        0x1008,
        InstrType.BR,
        True,
        0x100C,
    )
    assert i.is_waypoint and i.next_isa == Isa.A64
    assert i.tail == (4, InstrType.BR, InstrSubtype.NONE, True)
    r = InstrRange(3, i.address, i.end, 1, Isa.A64, True, *i.tail)
    assert (r.last_size, r.last_type, r.last_cond) == (4, InstrType.BR, True)
    assert bc.instr(0x1004, Isa.A64, EL1N) is i
    assert bc.instr_tables(EL1N)[Isa.A64][0x1004] is i
    n = bc.instr(0x1000, Isa.A64, EL1N)
    assert (n.found, n.itype, n.is_waypoint) == (True, InstrType.OTHER, False)
    assert n.tail is bc.instr(0x1000, Isa.A64, int(MemSpace.EL2)).tail  # tails are shared
    bl = bc.instr(0x2000, Isa.T32, EL1N)
    assert (bl.size, bl.link, bl.target, bl.end) == (4, True, 0x2004, 0x2004)
    ref = decode(Isa.T32, 0x2000, 0xF000F800, OPTS)
    assert (bl.itype, bl.subtype) == (ref.itype, ref.subtype)
    # a miss classifies the run to the next waypoint (BX LR at 0x2006), no further
    t32 = bc.instr_tables(EL1N)[Isa.T32]
    assert sorted(t32) == [0x2000]  # the BL is a waypoint: its run is itself
    bc.instr(0x2004, Isa.T32, EL1N)
    assert sorted(t32) == [0x2000, 0x2004, 0x2006]
    assert bc.instr(0x2006, Isa.T32, EL1N).itype == InstrType.BR_INDIRECT
    # not readable: the last NOP has 2 bytes after it only; nothing at all mapped
    assert not bc.instr(0x2008, Isa.T32, EL1N).found
    u = bc.instr(0x3000, Isa.T32, EL1N)
    assert (u.found, u.size, u.end) == (False, 0, 0x3000)
    assert "not readable" in repr(u) and "BR" in repr(i)


def test_generations_are_kept_and_switched() -> None:
    class Views:
        """Two views of the same addresses, each with its own generation number."""

        def __init__(self) -> None:
            self.maps = {
                7: memory((0x1000, words(NOP64, RET64))),
                9: memory((0x1000, words(BL64, NOP64))),
            }
            self.generation = 7
            self.contexts: list[int | None] = []
            self.times: list[int] = []

        def find(self, address: int, space: MemSpace | int = MemSpace.ANY) -> MemoryRegion | None:
            return self.maps[self.generation].find(address, space)

        def read(self, address: int, size: int, space: MemSpace | int = MemSpace.ANY) -> bytes:
            return self.maps[self.generation].read(address, size, space)

        def set_context(self, context_id: int | None, vmid: int | None = None) -> None:
            self.contexts.append(context_id)

        def advance(self, time: int) -> None:
            self.times.append(time)

    views = Views()
    bc = BlockCache(views, OPTS)
    a = bc.block(0x1000, Isa.A64, EL1N)
    assert a.count == 2
    t7 = bc.tables(EL1N)
    views.generation = 9
    b = bc.block(0x1000, Isa.A64, EL1N)
    assert b.count == 1
    assert bc.tables(EL1N) is not t7
    views.generation = 7
    assert bc.block(0x1000, Isa.A64, EL1N) is a
    assert bc.tables(EL1N) is t7
    assert len(bc) == 2
    # only the last few generations are kept
    for g in range(100, 140):
        views.maps[g] = views.maps[7]
        views.generation = g
        bc.block(0x1000, Isa.A64, EL1N)
    views.generation = 7
    assert bc.block(0x1000, Isa.A64, EL1N) is not a
    bc.clear()
    assert len(bc) == 0
    assert bc.block(0x1000, Isa.A64, EL1N).count == 2


def test_a_changed_map_is_a_new_generation() -> None:
    mem = memory((0x1000, words(NOP64, NOP64)))
    bc = BlockCache(mem, OPTS)
    assert not bc.block(0x1000, Isa.A64, EL1N).found
    mem.add(MemoryRegion(0x1008, words(RET64), MemSpace.ANY))
    b = bc.block(0x1000, Isa.A64, EL1N)
    assert (b.count, b.found) == (3, True)


def test_tables_are_bounded() -> None:
    mem = memory((0x1000, words(*([NOP64] * 64), RET64)))
    bc = BlockCache(mem, OPTS, max_blocks=4)
    for k in range(20):
        bc.block(0x1000 + 4 * k, Isa.A64, EL1N)
        bc.instr(0x1000 + 4 * k, Isa.A64, EL1N)
    assert len(bc.tables(EL1N)[Isa.A64]) <= 4
    assert len(bc.instr_tables(EL1N)[Isa.A64]) <= 4
    assert len(bc) <= 8


def test_no_memory_and_sharing() -> None:
    bc = BlockCache(None, OPTS)
    assert bc.memory is NO_MEMORY
    b = bc.block(0x1000, Isa.A64, EL1N)
    assert (b.count, b.found) == (0, False)
    mem = memory((0x1000, words(RET64)))
    one = BlockCache.shared(mem, OPTS)
    other = BlockCache.shared(mem, OPTS)
    b = one.block(0x1000, Isa.A64, EL1N)
    assert other.block(0x1000, Isa.A64, EL1N) is b  # the decoders of one memory share blocks
    assert BlockCache.shared(mem, IsaOptions(ArchVersion.V8)).block(0x1000, Isa.A64, EL1N) is not b
    assert BlockCache.shared(memory(), OPTS).block(0x1000, Isa.A64, EL1N) is not b
    # NO_MEMORY cannot be weakly referenced: blocks of its own each time
    assert BlockCache.shared(None, OPTS).memory is NO_MEMORY
    # the shared blocks do not keep the memory alive
    gone = weakref.ref(mem)
    del mem, one, other
    gc.collect()
    assert gone() is None


def test_unwalkable_isa() -> None:
    mem = memory((0x1000, words(NOP32, NOP32)))
    with pytest.raises(ValueError):
        BlockCache(mem, OPTS).walk_to(0x1000, Isa.JAZELLE, EL1N, 0x1004)


# ---------------------------------------------------------------------------
# against a plain walk, one instruction at a time, across regions
# ---------------------------------------------------------------------------


def naive_block(mem: MemoryMap, address: int, isa: Isa) -> tuple[int, int, bool, int | None]:
    """(count, end, found, last address) of a walk to the next waypoint."""
    count = 0
    last = None
    a = address
    while True:
        region = mem.find(a, MemSpace.ANY)
        op = None if region is None else read_opcode(isa, region.data, a - region.start)
        if op is None:
            return count, a, False, last
        info = decode(isa, a, op, OPTS)
        count += 1
        last = a
        a += info.size
        if info.itype != InstrType.OTHER:
            return count, a, True, last


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(min_size=8, max_size=96),
    cut=st.integers(0, 96),
    gap=st.sampled_from([0, 0, 2, 4]),
    isa=st.sampled_from([Isa.A64, Isa.A32, Isa.T32]),
    start=st.integers(0, 48),
)
def test_blocks_match_a_plain_walk(data: bytes, cut: int, gap: int, isa: Isa, start: int) -> None:
    cut = min(cut, len(data))
    regions = [(0x4000, data[:cut]), (0x4000 + cut + gap, data[cut:])]
    mem = memory(*[(s, d) for s, d in regions if d])
    step = 2 if isa == Isa.T32 else 4
    address = 0x4000 + (start // step) * step
    b = BlockCache(mem, IsaOptions(ArchVersion.AA64, wfi_wfe_branch=True)).block(address, isa, EL1N)
    assert (b.count, b.end, b.found, b.last_address) == naive_block(mem, address, isa)
