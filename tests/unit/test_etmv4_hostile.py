"""ETMv4/ETE decoder on damaged speculation fields: work bounded by the bytes read (issue 26).

A trace info packet carries the number of P0 elements the trace unit had not
traced yet (its speculation depth, up to 2^32 - 1 as read). The decoder keeps
them as one count that commit, cancel and mispredict take from, and reports a
depth beyond TRCIDR8.MAXSPEC; the excess is committed with the next packet, as
the reference does. So a trace info of depth 2^32 - 1 decodes exactly as one of
depth MAXSPEC, plus that diagnostic, and nothing on the way grows with the depth.
"""

from __future__ import annotations

from cstrace.capture import Stream
from cstrace.elements import Diagnostic, Element, InstrRange, MemSpace
from cstrace.errors import DiagKind
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols import DecodeContext, DecodeOptions, get_protocol
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.decoder import Etmv4Decoder
from tests.unit.test_etmv4_speculation_depth import BASE, CODE, MAXSPEC, REGS

# The ETE trace unit, its MAXSPEC and its program are those of the speculation-depth test.


def start(depth: int) -> bytes:
    return (
        enc.a_sync()
        + enc.trace_info(0, spec_depth=depth, cc_threshold=0)
        + enc.trace_on()
        + enc.address_context(BASE, el=1, sf=True, ns=True)
    )


def decode(data: bytes, regs: dict[str, int] | None = None) -> list[Element]:
    proto = get_protocol("ete")
    assert proto is not None
    config = proto.from_registers(regs or REGS, "Cortex-A710", "")
    memory = MemoryMap([MemoryRegion(BASE, CODE, MemSpace.ANY, "code")])
    ctx = DecodeContext(config.trace_id, DecodeOptions(), memory)
    packets = proto.iter_packets(Stream(config.trace_id, data), config, True)
    return list(proto.iter_elements(packets, config, ctx))


def kinds(out: list[Element]) -> list[DiagKind]:
    return [e.kind for e in out if isinstance(e, Diagnostic)]


def ranges(out: list[Element]) -> list[tuple[int, int, bool]]:
    return [(e.start, e.end, e.last_exec) for e in out if isinstance(e, InstrRange)]


def test_huge_depth_decodes_as_maxspec_with_a_diagnostic() -> None:
    # The first MAXSPEC commits take the unseen elements; the last commit the rest.
    body = enc.atom("E") * 200 + enc.commit(MAXSPEC)
    deep = decode(start(2**32 - 1) + body)
    assert kinds(deep) == [DiagKind.SPEC_DEPTH_EXCEEDED]
    diag = next(e for e in deep if isinstance(e, Diagnostic))
    assert diag.detail == 2**32 - 1
    at_max = decode(start(MAXSPEC) + body)
    assert kinds(at_max) == []
    assert ranges(deep) == ranges(at_max) == [(0x1000, 0x1008, True)] * 200


def test_depth_is_one_stack_entry() -> None:
    proto = get_protocol("ete")
    assert proto is not None
    config = proto.from_registers(REGS, "Cortex-A710", "")
    dec = Etmv4Decoder(config, DecodeContext(config.trace_id, DecodeOptions()))
    data = enc.a_sync() + enc.trace_info(0, spec_depth=100_000)
    for p in proto.iter_packets(Stream(0x10, data), config, True):
        dec.decode(p)
    assert dec.spec_depth == 100_000
    assert len(dec.stack) <= 2  # the unseen elements' count and the trace info


def test_cancel_and_commit_take_from_the_unseen_count() -> None:
    regs = {**REGS, "TRCIDR8": 8}
    # 5 unseen: cancel 3, commit 2, then one more commit runs short.
    ok = decode(start(5) + enc.cancel_f1(3) + enc.commit(2), regs)
    assert kinds(ok) == []
    short = decode(start(5) + enc.cancel_f1(3) + enc.commit(2) + enc.commit(1), regs)
    assert kinds(short) == [DiagKind.COMMIT_SHORT]


def test_mispredict_finds_the_unseen_elements() -> None:
    regs = {**REGS, "TRCIDR8": 8}
    assert kinds(decode(start(2) + enc.mispredict(), regs)) == []
    assert kinds(decode(start(0) + enc.mispredict(), regs)) == [DiagKind.MISPREDICT_NO_ATOM]
