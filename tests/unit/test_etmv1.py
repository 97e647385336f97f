"""ETMv1: PIPESTAT table, and the thesis's LPC3180 trace (``seeds/004`` §8.5) decoded.

The LPC3180 listings print, per cycle, PIPESTAT (``PI``, with a trigger cycle's
real status), TRACEPKT[15:0] and flags (TRACESYNC); the OCR of the thesis drops
some leading ``f`` digits of TRACEPKT, restored here from the addresses and data
the text explains. The trace was taken on a 16-bit port in normal mode with data
addresses and values traced and cycle-accurate tracing (TD cycles with
TRACEPKT[0] set).
"""

from __future__ import annotations

from cstrace.capture.etmport import CycleStream, PortConfig, cycles_from_text, pack_cycles
from cstrace.elements import (
    Custom,
    Event,
    EventType,
    Exception_,
    InstrRange,
    MemSpace,
    TraceOn,
)
from cstrace.memory import MemoryMap
from cstrace.memory.image import MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv1 import iter_elements, iter_packets
from cstrace.protocols.etmv1.config import ClassicEtmConfig, etmcr
from cstrace.protocols.etmv1.decoder import DataTransfer
from cstrace.protocols.etmv1.packets import V1Status
from cstrace.protocols.etmv1.reader import PIPESTAT_ROWS, PIPESTAT_TABLE
from tests.classic.truth import decoded

CFG = ClassicEtmConfig(etmcr(width=16, data_value=True, data_addr=True, cycle_accurate=True), 1, 3)


def test_pipestat_rows_cover_every_value_once() -> None:
    assert sorted(r[0] for r in PIPESTAT_ROWS) == list(range(8))
    assert [int(s) for s in PIPESTAT_TABLE] == list(range(8))
    assert PIPESTAT_TABLE[0b100] == V1Status.BE


def _image(words: dict[int, int]) -> MemoryMap:
    regions = []
    for addr, op in sorted(words.items()):
        regions.append(MemoryRegion(addr, op.to_bytes(4, "little"), MemSpace.ANY))
    return MemoryMap(regions)


def _decode(text: str, image: MemoryMap) -> list[object]:
    cycles = cycles_from_text(text, CFG.port)
    stream = CycleStream("etm_cycles", pack_cycles(cycles, "etm_cycles", CFG.port))
    ctx = DecodeContext(0, DecodeOptions(), image)
    return list(iter_elements(iter_packets(stream, CFG), CFG, ctx))


LPC_START = """
# cycles 12-24 and 36-40 of the thesis listing (25-35: TD, stripped there)
TD ea01
IE ea00            # cycle 13: before the first full address, not decodable
TD 14e9
BE 8ffc S          # 15: tracing enabled at 0x800007fc (fc 8f 80 80 18: reason 1)
IE 8080            # 16: APO1 = 0
IE 1418            # 17: APO2 = 0; 0x14 unused (a branch address follows)
TD 0011
BE 11b8 S          # 19: BX lr at 0x800007fc; address b8 11 = 0x08b8 (14 bits)
IE e599            # 20, 21: APO = 0
IE e599
IE e599            # 22: MOV r3, #0x28000
IE e599            # 23: ADD r3, r3, #0x40000008
TD e599 *13        # 24-36
IE e599            # 37: MOV r2, #0x80
ID 8088            # 38: STR r2, [r3]: address 88 80 8a 80 04, data 80 00 00 00
IE 808a            # 39
IE 8004            # 40
WT 0000            # (the text: the remaining data bytes are output next)
WT 0000
"""


def test_lpc3180_trace_start() -> None:
    image = _image(
        {
            0x800007FC: 0xE12FFF1E,
            0x800008B8: 0xE3A0390A,
            0x800008BC: 0xE2833121,
            0x800008C0: 0xE3A02080,
            0x800008C4: 0xE5832000,
            0x800008C8: 0xE3A03902,
            0x800008CC: 0xE2833004,
        }
    )
    els = _decode(LPC_START, image)
    got, _exc = decoded(els)  # type: ignore[arg-type]
    assert [a for a, _t in got] == [
        0x800007FC,
        0x800008B8,
        0x800008BC,
        0x800008C0,
        0x800008C4,
        0x800008C8,
        0x800008CC,
    ]
    assert any(isinstance(e, TraceOn) for e in els)
    # Cycle-accurate: the BX took the cycles from trace start (15) to 19, the
    # next range those up to the last instruction's PIPESTAT (40).
    assert [e.cycle_count for e in els if isinstance(e, InstrRange)] == [4, 21]
    data = [e.data for e in els if isinstance(e, Custom)]  # type: ignore[attr-defined]
    assert data == [DataTransfer(0x800008C4, 0x40028008, bytes([0x80, 0, 0, 0]))]


LPC_ABORT = """
# a full address for 0x80000910 (not in the listing, which starts mid-run)
BE 9290 S
IE 8080
IE 0018
# cycles 1704-1928
TD 0401
IE 0400            # 1705: CMP r2, #0
TD 8001
IN 8001            # 1707: BEQ not executed
TD 8001
IE 8001            # 1709: MVN r2, #0x21400000
TD 8001
IE 8001            # 1711: SUB
TD 8001
IE 8001            # 1713: SUB
TD 8001
IE 8001            # 1715: MOV r3, #0xba00000
TD 8001
IE 8001            # 1717: ADD
TD 8001 *41        # 1718-1758
IE 8001            # 1759: ADD r3, r3, #0xde
WT fdef            # 1760-1763: the STR's data, long before its PIPESTAT
WT f5b6
WT de0d
WT adc0
TD 0009 *80        # 1764-1843
TR 000b            # 1844: trigger; the real status (WT) on TRACEPKT[2:0]
BD 900b            # 1845: STR r3, [r2] aborts: data, then a branch to 0x10
IE 8090 S          # 1846: APO1, address 90 80 80 80 00
IE 8080            # 1847: APO2
TD 1801 *71        # 1848-1918
BE 9c00            # 1919: LDR pc, [pc, #0x14] at the abort vector
IE 939c S          # 1920
IE 8080            # 1921
WT f408            # 1922
ID ffff            # 1923: STR r12, [r13, #-4]!
IE 088f            # 1924: MOV r12, r13
WT ff3c
WT 81ff
WT 6864
ID ffff            # 1928: STMDB (its data is cut by the end of the listing)
"""


def test_lpc3180_data_abort_and_trigger() -> None:
    words = {
        0x80000910: 0xE3520000,
        0x80000914: 0x0AFFFFC5,
        0x80000918: 0xE3E02585,
        0x8000091C: 0xE2422949,
        0x80000920: 0xE2422E11,
        0x80000924: 0xE3A036BA,
        0x80000928: 0xE2833937,
        0x8000092C: 0xE28330DE,
        0x80000930: 0xE5823000,
        0x00000010: 0xE59FF014,
        0x8000099C: 0xE52DC004,
        0x800009A0: 0xE1A0C00D,
        0x800009A4: 0xE92DD800,
    }
    els = _decode(LPC_ABORT, _image(words))
    got, exc = decoded(els)  # type: ignore[arg-type]
    assert [a for a, _t in got] == [
        *range(0x80000910, 0x80000934, 4),
        0x10,
        0x8000099C,
        0x800009A0,
        0x800009A4,
    ]
    assert [(x.number, x.return_address) for x in exc] == [(12, 0x80000930)]  # data abort
    assert next(e for e in els if isinstance(e, Event)).event_type == EventType.TRIGGER
    data = [e.data for e in els if isinstance(e, Custom)]  # type: ignore[attr-defined]
    assert data[0] == DataTransfer(0x80000930, 0xDEADBEEF, (0x0BADC0DE).to_bytes(4, "little"))
    assert data[1] == DataTransfer(0x8000099C, 0x81FFFFF4, (0x81FFFF3C).to_bytes(4, "little"))
    assert isinstance(exc[0], Exception_)


def test_text_form_round_trip() -> None:
    port = PortConfig(16)
    cycles = cycles_from_text(LPC_ABORT, port)
    assert cycles_from_text(pack_cycles(cycles, "etm_cycles_text", port).decode(), port) == cycles


LPC_FIFO = """
# a full address for 0x8000083c (not in the listing, which starts mid-run)
BE 90bc S
IE 8080
IE 0018
# cycles 115-133: load/store packets fill the FIFO, two branch addresses come late
IE 8001            # 115: MOV r2, #4
ID 8084            # 116: STR r2, [r3]: address 84 80 8a 80 04, data 04 00 00 00
WT 808a
WT 0404
IE 0000            # 119: MOV r0, #0x80000000
WT 8000            # 120: the STR's last byte, then the LDMIA's address begins
WT 8080
WT 0880
ID 000d            # 123: LDMIA r0, {r1-r4}: four words
BE ea00            # 124: SUB pc, pc, #4; APO 0 (cycles 125, 126)
IE f014
IE e59f
BE f014            # 127: SUB pc, pc, #4; APO 1 (cycles 128, 129): the second TRACESYNC
ID e59f
IE f014
WT e59f
WT 10d0 S          # 131: 124's address d0 10 = 0x0850 (14 bits)
IE 0054 S          # 132: 127's address 0x54 (7 bits); BL 0x800007b4
TD 0001
"""


def test_lpc3180_late_branch_addresses() -> None:
    words = {
        0x8000083C: 0xE3A02004,
        0x80000840: 0xE5832000,
        0x80000844: 0xE3A00102,
        0x80000848: 0xE890001E,
        0x8000084C: 0xE24FF004,
        0x80000850: 0xE24FF004,
        0x80000854: 0xEBFFFFD6,
    }
    els = _decode(LPC_FIFO, _image(words))
    got, exc = decoded(els)  # type: ignore[arg-type]
    assert not exc
    assert [a for a, _t in got] == list(range(0x8000083C, 0x80000858, 4))
    data = [e.data for e in els if isinstance(e, Custom)]  # type: ignore[attr-defined]
    ldm = bytes.fromhex("0d0000ea" + "14f09fe5" * 3)
    assert data == [
        DataTransfer(0x80000840, 0x40028004, bytes([4, 0, 0, 0])),
        DataTransfer(0x80000848, 0x80000000, ldm),
    ]


def test_abandoned_branch() -> None:
    """A BE in the APO cycles of another (IHI 0014Q §5.6.1): the first address is still output."""
    cfg = ClassicEtmConfig(etmcr(width=8), 1, 3)
    text = """
    BE 80 S       # trace enabled at 0x1000: 80 a0 80 80 10
    IE a0
    IE 80
    WT 80
    WT 10
    BE 80 S       # BX r0 at 0x1000 to 0x2000: 80 40
    BE 40         # an IRQ in the first APO cycle abandons that branch's offset
    IE 98 S       # the IRQ's APO: 0, 0; its address 98 00 = 0x18
    IE 00
    IE 00         # the first instruction of the handler
    """
    cycles = cycles_from_text(text, cfg.port)
    stream = CycleStream("etm_cycles", pack_cycles(cycles, "etm_cycles", cfg.port))
    ctx = DecodeContext(0, DecodeOptions(), _image({0x1000: 0xE12FFF10, 0x18: 0xE1A00000}))
    els = list(iter_elements(iter_packets(stream, cfg), cfg, ctx))
    got, exc = decoded(els)
    assert [a for a, _t in got] == [0x1000, 0x18]
    assert [(x.number, x.return_address) for x in exc] == [(14, 0x2000)]
