"""ETMv2 ground truth: emulated programs, encoded as an ETMv2 would trace them, decode exactly.

Each of the three test programs (over 100,000 instructions) is encoded by
:func:`~cstrace.protocols.etmv2.encoder.encode_etmv2` for 4- and 8-bit ports
(and a 16-bit one): data packets with C bits, branch addresses, context IDs,
TFOs at trace start, after FIFO overflows and periodically, odd-nibble TFOs with
their gap nibbles on 4-bit ports, a trigger; with data values traced, loads
that miss in the data cache (Load Miss occurred, then the value in a Load Miss
data packet some instructions later); without data trace, periodic TFOs that
fall on a load/store multiple in progress. The reader must find every packet
from the TFOs and the decoder the exact instruction sequence and every value.
"""

from __future__ import annotations

from collections import Counter

import pytest

from cstrace.capture.etmport import CycleStream, PortMode, pack_cycles
from cstrace.elements import Custom
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv1.config import ClassicEtmConfig, etmcr
from cstrace.protocols.etmv1.decoder import DataTransfer
from cstrace.protocols.etmv1.encoder import ExecKind, HwModel, step_of
from cstrace.protocols.etmv2 import iter_elements, iter_packets
from cstrace.protocols.etmv2.encoder import encode_etmv2
from tests.classic.conftest import program_run
from tests.classic.programs import PROGRAMS
from tests.classic.truth import decoded, expected, memory_of

# (width, mode, format, data value, data address, context ID bytes, FIFO depth,
#  one load in N misses in the data cache)
CONFIGS = [
    (4, PortMode.NORMAL, "etm_cycles", True, True, 4, 40, 4),
    (4, PortMode.NORMAL, "etm_etb", False, False, 1, 24, 0),
    (8, PortMode.NORMAL, "etm_etb", True, False, 2, 48, 0),
    (8, PortMode.DEMULTIPLEXED, "etm_port", False, True, 0, 32, 0),
    (16, PortMode.NORMAL, "etm_cycles_text", True, True, 4, 64, 3),
]


def _params() -> list[object]:
    """Every configuration with every program; each configuration meets one program (in
    turn) in the quick run, the other pairs are marked slow (run by CI)."""
    names = sorted(PROGRAMS)
    out: list[object] = []
    for k, c in enumerate(CONFIGS):
        cid = f"{c[0]}bit-{c[1].name.lower()}-{c[2]}" + ("-misses" if c[7] else "")
        for program in names:
            quick = program == names[k % len(names)]
            out.append(
                pytest.param(
                    program, *c, id=f"{cid}-{program}", marks=() if quick else pytest.mark.slow
                )
            )
    return out


@pytest.mark.parametrize("program,width,mode,fmt,dv,da,ctx,depth,miss", _params())
def test_etmv2_decodes_execution(
    program: str,
    width: int,
    mode: PortMode,
    fmt: str,
    dv: bool,
    da: bool,
    ctx: int,
    depth: int,
    miss: int,
) -> None:
    r = program_run(program)
    cfg = ClassicEtmConfig(
        etmcr(width=width, mode=mode, data_value=dv, data_addr=da, ctxid_bytes=ctx), 2, 1
    )
    hw = HwModel(
        fifo_depth=depth,
        sync_period=400,
        long_stall_every=150,
        trigger_cycle=7000,
        load_miss_every=miss,
    )
    stats: dict[str, int] = {}
    lost: list[int] = []
    cycles, traced = encode_etmv2(r.execs, cfg, r.read, hw, stats, lost)
    assert stats["tfos"] > 50
    if width == 4:
        assert stats["gaps"] > 5  # TFOs between the nibbles of a byte
    if miss:
        assert stats["load_misses"] > 500 and len(lost) < stats["load_misses"] // 5
    if not dv and not da:
        assert stats["lsip"] > 20  # periodic TFOs on an LSM in progress
    stream = CycleStream(fmt, pack_cycles(cycles, fmt, cfg.port))
    ctxt = DecodeContext(0, DecodeOptions(), memory_of(r.image, r.base))
    elements = list(iter_elements(iter_packets(stream, cfg), cfg, ctxt))
    got, exceptions = decoded(elements)
    want = expected(r.execs, traced)
    assert len(want) > 0.3 * len(r.execs)
    assert got == want
    want_exc = [
        {0x04: 9, 0x08: 10, 0x18: 14}[e.vector or 0]
        for e, t in zip(r.execs, traced, strict=True)
        if t and (e.kind == ExecKind.INTERRUPT or e.vector is not None)
    ]
    assert [x.number for x in exceptions] == want_exc
    if dv:
        lost_set = set(lost)
        want_vals = [
            (e.pc, b"".join(v for _a, v in e.data))
            for k, (e, t) in enumerate(zip(r.execs, traced, strict=True))
            if t
            and e.kind == ExecKind.INSTR
            and e.data
            and step_of(r.read, e.pc, e.thumb).xfer
            and k not in lost_set
        ]
        got_vals = [
            (el.data.pc, el.data.data)
            for el in elements
            if isinstance(el, Custom) and isinstance(el.data, DataTransfer)
        ]
        if miss:
            # A missed load's value comes later, in the order the values return.
            assert Counter(got_vals) == Counter(want_vals)
        else:
            assert got_vals == want_vals


def test_trigger_between_the_nibbles_of_a_tfo() -> None:
    # 4-bit port: a trigger on the cycle after a TFO's TD delays the TFO's high
    # nibble; the packets that trigger cycle's real status placed follow the TFO
    # packet in the FIFO.
    r = program_run("sort")
    cfg = ClassicEtmConfig(etmcr(width=4, data_value=True, data_addr=True), 2, 1)
    hw = HwModel(fifo_depth=40, sync_period=400)
    cycles, _ = encode_etmv2(r.execs, cfg, r.read, hw)
    places = {0x1, 0x3, 0x5, 0x9, 0xB, 0xD, 0xF}
    t = next(
        t
        for t in range(1000, len(cycles) - 1)
        if cycles[t] & 0xF == 7 and (cycles[t] >> 8) & 1 and cycles[t + 1] & 0xF in places
    )
    hw.trigger_cycle = t + 1
    cycles, traced = encode_etmv2(r.execs, cfg, r.read, hw)
    assert cycles[t + 1] & 0xF == 6  # TR
    stream = CycleStream("etm_cycles", pack_cycles(cycles, "etm_cycles", cfg.port))
    ctxt = DecodeContext(0, DecodeOptions(), memory_of(r.image, r.base))
    got, _ = decoded(iter_elements(iter_packets(stream, cfg), cfg, ctxt))
    assert got == expected(r.execs, traced)
