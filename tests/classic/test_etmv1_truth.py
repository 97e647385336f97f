"""ETMv1 ground truth: emulated programs, encoded as an ETMv1 would trace them, decode exactly.

For each port width and mode, each of the three test programs (over 100,000
instructions each, see ``test_programs.py``) is encoded by
:func:`~cstrace.protocols.etmv1.encoder.encode_etmv1` (waits, data packets,
FIFO overflows, periodic synchronisation, context IDs, a trigger), written in a
capture format, read back and decoded with the program image; the decoded
instruction sequence must equal the traced one, instruction for instruction,
and so must the exceptions.
"""

from __future__ import annotations

import pytest

from cstrace.capture.etmport import CycleStream, PortMode, pack_cycles
from cstrace.elements import Custom, NoSync, TraceOn, TraceOnReason
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv1 import iter_elements, iter_packets
from cstrace.protocols.etmv1.config import ClassicEtmConfig, etmcr
from cstrace.protocols.etmv1.decoder import DataTransfer
from cstrace.protocols.etmv1.encoder import ExecKind, HwModel, encode_etmv1, step_of
from tests.classic.conftest import program_run
from tests.classic.programs import PROGRAMS
from tests.classic.truth import decoded, expected, memory_of

# (width, mode, capture format, data value, data address, context ID bytes, FIFO depth,
#  branch output)
CONFIGS = [
    (4, PortMode.NORMAL, "etm_etb", True, True, 4, 24, False),
    (8, PortMode.NORMAL, "etm_etb", True, False, 1, 40, False),
    (16, PortMode.NORMAL, "etm_etb", False, True, 2, 64, True),
    (8, PortMode.DEMULTIPLEXED, "etm_etb", True, True, 0, 32, False),
    (4, PortMode.DEMULTIPLEXED, "etm_port", False, False, 4, 16, False),
    (16, PortMode.DEMULTIPLEXED, "etm_port", True, True, 4, 48, False),
]
# Further variants, on one program: a multiplexed port, a small FIFO (many overflows).
EXTRA = [
    (8, PortMode.MULTIPLEXED, "etm_port", False, False, 0, 64, True),
    (16, PortMode.NORMAL, "etm_cycles", True, True, 4, 24, False),
]
CASES = [(p, *c) for c in CONFIGS for p in sorted(PROGRAMS)] + [("dispatch", *c) for c in EXTRA]


def _params() -> list[object]:
    """Every case; each configuration meets one program (in turn) in the quick run, the
    other pairs are marked slow (run by CI: python -m tests --slow)."""
    names = sorted(PROGRAMS)
    out: list[object] = []
    for c in CASES:
        k = CONFIGS.index(c[1:]) if c[1:] in CONFIGS else -1
        quick = k < 0 or c[0] == names[k % len(names)]
        out.append(
            pytest.param(
                *c,
                id=f"{c[0]}-{c[1]}bit-{c[2].name.lower()}-{c[3]}",
                marks=() if quick else pytest.mark.slow,
            )
        )
    return out


@pytest.mark.parametrize("program,width,mode,fmt,dv,da,ctx,depth,bo", _params())
def test_etmv1_decodes_execution(
    program: str,
    width: int,
    mode: PortMode,
    fmt: str,
    dv: bool,
    da: bool,
    ctx: int,
    depth: int,
    bo: bool,
) -> None:
    r = program_run(program)
    cfg = ClassicEtmConfig(
        etmcr(
            width=width,
            mode=mode,
            data_value=dv,
            data_addr=da,
            ctxid_bytes=ctx,
            branch_output=bo,
        ),
        1,
        3,
    )
    hw = HwModel(fifo_depth=depth, sync_period=500, long_stall_every=200, trigger_cycle=5000)
    cycles, traced = encode_etmv1(r.execs, cfg, r.read, hw)
    data = pack_cycles(cycles, fmt, cfg.port)
    stream = CycleStream(fmt, data)
    ctxt = DecodeContext(0, DecodeOptions(), memory_of(r.image, r.base))
    elements = list(iter_elements(iter_packets(stream, cfg), cfg, ctxt))
    got, exceptions = decoded(elements)
    want = expected(r.execs, traced)
    assert len(want) > 0.3 * len(r.execs)
    assert got == want
    # Every exception traced, with its number, in order.
    want_exc = []
    for e, t in zip(r.execs, traced, strict=True):
        if t and (e.kind == ExecKind.INTERRUPT or e.vector is not None):
            want_exc.append({0x04: 9, 0x08: 10, 0x18: 14}[e.vector or 0])
    assert [x.number for x in exceptions] == want_exc
    # A trace gap is announced by a TRACE_ON element (an overflow restart).
    overflows = sum(
        1 for el in elements if isinstance(el, TraceOn) and el.reason == TraceOnReason.OVERFLOW
    )
    assert overflows == (not all(traced)) * overflows
    assert not any(isinstance(el, NoSync) and el.offset > 0 for el in elements)
    # The traced data accesses: addresses and values as the emulator saw them.
    if dv or da:
        want_data = []
        for e, t in zip(r.execs, traced, strict=True):
            if t and e.kind == ExecKind.INSTR and e.data and step_of(r.read, e.pc, e.thumb).xfer:
                want_data.append(
                    (
                        e.pc,
                        e.data[0][0] if da else None,
                        b"".join(v for _a, v in e.data) if dv else None,
                    )
                )
        got_data = [
            (el.data.pc, el.data.address, el.data.data)
            for el in elements
            if isinstance(el, Custom) and isinstance(el.data, DataTransfer)
        ]
        assert got_data == want_data
