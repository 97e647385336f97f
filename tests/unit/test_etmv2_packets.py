"""ETMv2 load-miss packets and LSM-in-progress TFOs: encoder → reader → decoder, and by hand.

Load Miss occurred (bC1A1TT00) and Load Miss data (bCTT0SS00) are the two data
headers of IHI 0014Q table 6.2 for a load that misses in the data cache: the
load's cycle places the first (with the data address), a later cycle the
second (with the value), both under the same tag. A TFO packet with a
load/store multiple in progress implies that the LSM executed (§7.14.2).
The programs here are written by hand (no emulator): a few ARM words and the
records of their execution.
"""

from __future__ import annotations

from collections import Counter

from cstrace.capture.etmport import CycleStream, pack_cycles
from cstrace.elements import Custom, Element, InstrRange, MemSpace, TraceOn
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv1.config import ClassicEtmConfig, etmcr
from cstrace.protocols.etmv1.decoder import DataTransfer
from cstrace.protocols.etmv1.encoder import Exec, ExecKind, HwModel
from cstrace.protocols.etmv2 import iter_elements, iter_packets
from cstrace.protocols.etmv2.encoder import access_kind, encode_etmv2
from cstrace.protocols.etmv2.packets import (
    Cycle2,
    LoadMissData,
    LoadMissOccurred,
    NormalData,
    TfoPacket,
    V2Status,
)
from cstrace.protocols.etmv2.reader import HEADER_TABLE, HeaderKind

BASE = 0x1000
# ldr r1,[r0]; ldrb r2,[r0,#4]; ldrh r3,[r0,#6]
LDR, LDRB, LDRH = 0xE5901000, 0xE5D02004, 0xE1D030B6
ADD, STR = 0xE2844001, 0xE5804008  # add r4,r4,#1; str r4,[r0,#8]
LDM = 0xE8900006  # ldmia r0,{r1,r2}
B_BACK = 0xEAFFFFF8  # b 0x1000 (from 0x1018)
CODE = [LDR, LDRB, LDRH, ADD, STR, LDM, B_BACK]
IMAGE = b"".join(w.to_bytes(4, "little") for w in CODE)


def read(address: int, size: int) -> bytes:
    off = address - BASE
    return IMAGE[off : off + size] if 0 <= off < len(IMAGE) else b""


def memory() -> MemoryMap:
    return MemoryMap([MemoryRegion(BASE, IMAGE, MemSpace.ANY, "code")])


def execution(loops: int, first: int = 0) -> list[Exec]:
    """``loops`` passes of the program from instruction ``first``, with their data accesses."""
    out = []
    for i in range(loops):
        base = 0x20000 + 0x40 * i  # r0 moves on each pass
        word = (0x11223344 + i).to_bytes(4, "little")
        data = {
            LDR: ((base, word),),
            LDRB: ((base + 4, bytes([i & 0xFF])),),
            LDRH: ((base + 6, (0x5A00 + i).to_bytes(2, "little")),),
            STR: ((base + 8, (i + 1).to_bytes(4, "little")),),
            LDM: ((base, word), (base + 4, bytes(4))),
        }
        for k, op in enumerate(CODE):
            if i == 0 and k < first:
                continue
            pc = BASE + 4 * k
            nxt = BASE if op == B_BACK else pc + 4
            out.append(Exec(ExecKind.INSTR, pc, next_pc=nxt, data=data.get(op, ())))
    return out


def decode(cycles: list[int], cfg: ClassicEtmConfig) -> tuple[list[Cycle2], list[Element]]:
    stream = CycleStream("etm_cycles", pack_cycles(cycles, "etm_cycles", cfg.port))
    packets = list(iter_packets(stream, cfg))
    ctx = DecodeContext(0, DecodeOptions(), memory())
    return packets, list(iter_elements(packets, cfg, ctx))


def executed(elements: list[Element]) -> list[int]:
    return [
        e.start + 4 * k for e in elements if isinstance(e, InstrRange) for k in range(e.num_instr)
    ]


def transfers(elements: list[Element]) -> list[DataTransfer]:
    return [e.data for e in elements if isinstance(e, Custom) and isinstance(e.data, DataTransfer)]


def test_header_table_reads_the_load_miss_headers() -> None:
    # bC1A1TT00: occurred, A and a tag; bCTT0SS00: data, a tag and a size
    for tag in (1, 2, 3):
        for a in (0, 1):
            for c in (0, 1):
                assert HEADER_TABLE[c << 7 | 0x50 | a << 5 | tag << 2] == HeaderKind.LOAD_MISS
        for ss in (0, 1, 2, 3):
            assert HEADER_TABLE[tag << 5 | ss << 2] == HeaderKind.LOAD_MISS_DATA
    assert HEADER_TABLE[0x10] == HeaderKind.RESERVED  # bX0X1XX00


def test_access_kinds() -> None:
    assert [access_kind(read, BASE + 4 * k, False) for k in range(len(CODE))] == [
        "load", "load", "load", "", "", "lsm", "",
    ]  # fmt: skip


def test_load_misses_round_trip() -> None:
    # Every single load misses: its value comes up to 3 instructions later.
    cfg = ClassicEtmConfig(etmcr(width=8, data_value=True, data_addr=True), 2, 1)
    execs = execution(40)
    hw = HwModel(
        fifo_depth=400, sync_period=10_000, max_wait=8, load_miss_every=1, load_miss_delay=3
    )
    stats: dict[str, int] = {}
    lost: list[int] = []
    cycles, traced = encode_etmv2(execs, cfg, read, hw, stats, lost)
    assert all(traced) and not lost and stats["load_misses"] == 3 * 40
    packets, elements = decode(cycles, cfg)
    placed = [pk for c in packets for pk in (c.group or ())]
    occurred = [pk for pk in placed if isinstance(pk, LoadMissOccurred)]
    values = [pk for pk in placed if isinstance(pk, LoadMissData)]
    assert len(occurred) == len(values) == 3 * 40
    assert {pk.tag for pk in occurred} <= {1, 2, 3} and all(pk.first for pk in occurred)
    assert sorted(len(pk.value) for pk in values) == [1] * 40 + [2] * 40 + [4] * 40
    # Stores and LDMs still place Normal Data packets.
    assert sum(isinstance(pk, NormalData) for pk in placed) == 40 + 2 * 40
    # Each value follows its miss, under a tag no other miss holds meanwhile.
    open_tags: set[int] = set()
    for pk in placed:
        if isinstance(pk, LoadMissOccurred):
            assert pk.tag not in open_tags
            open_tags.add(pk.tag)
        elif isinstance(pk, LoadMissData):
            open_tags.remove(pk.tag)
    assert not open_tags
    # The decoder gives every transfer its instruction, address and value.
    assert executed(elements) == [e.pc for e in execs]
    want = Counter((e.pc, e.data[0][0], b"".join(v for _a, v in e.data)) for e in execs if e.data)
    got = Counter((t.pc, t.address, t.data) for t in transfers(elements))
    assert got == want


def test_load_miss_without_data_addresses() -> None:
    cfg = ClassicEtmConfig(etmcr(width=4, data_value=True), 2, 1)
    execs = execution(12)
    hw = HwModel(fifo_depth=400, sync_period=10_000, load_miss_every=2, load_miss_delay=5)
    stats: dict[str, int] = {}
    cycles, _ = encode_etmv2(execs, cfg, read, hw, stats)
    assert stats["load_misses"] > 5
    packets, elements = decode(cycles, cfg)
    assert all(
        pk.addr == b""
        for c in packets
        for pk in (c.group or ())
        if isinstance(pk, LoadMissOccurred)
    )
    want = Counter((e.pc, b"".join(v for _a, v in e.data)) for e in execs if e.data)
    assert Counter((t.pc, t.data) for t in transfers(elements)) == want
    assert all(t.address is None for t in transfers(elements))


def _tfo_cycle(offset: int, pkt: TfoPacket) -> Cycle2:
    return Cycle2(offset, bytes(4), int(V2Status.TD), 0, tfo=0, group=(pkt,))


def _cycle(offset: int, status: V2Status) -> Cycle2:
    return Cycle2(offset, bytes(4), int(status), 0, group=())


def test_lsm_in_progress_tfo_implies_the_lsm_by_hand() -> None:
    # Trace starts (reason 1) while the LDM at 0x1014 is in progress: the LDM
    # executed, then execution goes on at the branch (0x1018) and round the loop.
    cfg = ClassicEtmConfig(etmcr(width=8), 2, 1)
    lsm = BASE + 0x14
    tfo = TfoPacket(1, BASE + 0x18, None, True, False, lsm_address=lsm)
    cycles = [_tfo_cycle(0, tfo), _cycle(1, V2Status.IE), _cycle(2, V2Status.IE)]
    ctx = DecodeContext(0, DecodeOptions(), memory())
    elements = list(iter_elements(cycles, cfg, ctx))
    assert isinstance(elements[1], TraceOn)
    assert executed(elements) == [lsm, BASE + 0x18, BASE]
    # Without the LSM-in-progress flag the first instruction traced is the branch.
    tfo = TfoPacket(1, BASE + 0x18, None, False, False)
    elements = list(iter_elements([_tfo_cycle(0, tfo), *cycles[1:]], cfg, ctx))
    assert executed(elements) == [BASE + 0x18, BASE]


def test_periodic_lsm_in_progress_tfo_stands_for_the_lsm() -> None:
    cfg = ClassicEtmConfig(etmcr(width=8), 2, 1)
    cycles = [
        _tfo_cycle(0, TfoPacket(1, BASE + 0x10, None, False, False)),
        _cycle(1, V2Status.IE),  # str at 0x1010
        _tfo_cycle(2, TfoPacket(0, BASE + 0x18, None, True, False, lsm_address=BASE + 0x14)),
        _cycle(3, V2Status.IE),  # b 0x1000
        _cycle(4, V2Status.IE),  # ldr at 0x1000
    ]
    ctx = DecodeContext(0, DecodeOptions(), memory())
    elements = list(iter_elements(cycles, cfg, ctx))
    assert executed(elements) == [BASE + 0x10, BASE + 0x14, BASE + 0x18, BASE]


def test_lsm_in_progress_tfos_round_trip() -> None:
    # No data trace: periodic TFOs that fall on the LDM, and a trace start on it.
    cfg = ClassicEtmConfig(etmcr(width=8, ctxid_bytes=2), 2, 1)
    execs = execution(300, first=5)  # the record list starts at the LDM
    hw = HwModel(fifo_depth=64, sync_period=20)
    stats: dict[str, int] = {}
    cycles, traced = encode_etmv2(execs, cfg, read, hw, stats)
    assert all(traced)
    assert stats["lsip"] > 5
    packets, elements = decode(cycles, cfg)
    tfos = [pk for c in packets for pk in (c.group or ()) if isinstance(pk, TfoPacket)]
    assert tfos[0].reason == 1 and tfos[0].lsm_address == BASE + 0x14
    assert tfos[0].address == BASE + 0x18
    assert sum(t.lsm_address is not None for t in tfos) == stats["lsip"]
    assert executed(elements) == [e.pc for e in execs]
