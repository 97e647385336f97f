"""XScale ground truth: emulated programs encoded as XScale trace buffer fills decode exactly.

Fill-once mode, as OpenOCD's "fill n times": the core stops whenever the
256-entry buffer is full, the debugger reads it (entries, checkpoint registers,
PC) and resumes; the fills of a whole 100,000-instruction run decode to exactly
the executed sequence. Wrap-around mode: only the newest 256 entries remain;
decoding starts at the first indirect branch or checkpoint and must give the
tail of the executed sequence up to the PC at debug entry.
"""

from __future__ import annotations

import pytest

from cstrace.capture.etmport import CycleStream
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv1.encoder import ExecKind
from cstrace.protocols.xscale import iter_elements, iter_packets
from cstrace.protocols.xscale.config import XscaleConfig
from cstrace.protocols.xscale.encoder import encode_xscale
from tests.classic.conftest import program_run
from tests.classic.programs import PROGRAMS
from tests.classic.truth import decoded, expected, memory_of


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_xscale_fill_once(program: str) -> None:
    r = program_run(program)
    data, start = encode_xscale(r.execs, r.read, "fill")
    assert len(data) // (259 * 4) > 50  # many fills
    cfg = XscaleConfig(start)
    ctx = DecodeContext(0, DecodeOptions(), memory_of(r.image, r.base))
    elements = list(iter_elements(iter_packets(CycleStream("xscale_tb", data), cfg), cfg, ctx))
    got, exceptions = decoded(elements)
    assert got == expected(r.execs, [True] * len(r.execs))
    want_exc = [
        {0x04: 9, 0x08: 10, 0x18: 14}[e.vector or 0]
        for e in r.execs
        if e.kind == ExecKind.INTERRUPT or (e.kind == ExecKind.INSTR and e.vector is not None)
    ]
    assert [x.number for x in exceptions] == want_exc


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("steps", [20_000, 20_337, 20_811])
def test_xscale_wrap_around(program: str, steps: int) -> None:
    r = program_run(program)
    cut = 0
    n = 0
    for cut, e in enumerate(r.execs):  # noqa: B007
        n += e.kind == ExecKind.INSTR
        if n == steps:
            break
    execs = r.execs[: cut + 1]
    data, _start = encode_xscale(execs, r.read, "wrap")
    cfg = XscaleConfig(None)
    ctx = DecodeContext(0, DecodeOptions(), memory_of(r.image, r.base))
    elements = list(iter_elements(iter_packets(CycleStream("xscale_tb", data), cfg), cfg, ctx))
    got, _exc = decoded(elements)
    want = expected(execs, [True] * len(execs))
    assert len(got) > 100
    assert got == want[len(want) - len(got) :]
