"""The test programs really exercise what the ground-truth tests claim to cover."""

from __future__ import annotations

import pytest

from cstrace.protocols.etmv1.encoder import ExecKind, step_of
from tests.classic.conftest import STEPS, program_run
from tests.classic.programs import PROGRAMS


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_coverage(name: str) -> None:
    r = program_run(name)
    instrs = [e for e in r.execs if e.kind == ExecKind.INSTR]
    assert len(instrs) >= STEPS
    kinds = {"thumb": 0, "arm": 0, "not_exec": 0, "direct": 0, "indirect": 0, "loads": 0}
    vectors: set[int] = set()
    for e in instrs:
        s = step_of(r.read, e.pc, e.thumb)
        kinds["thumb" if e.thumb else "arm"] += 1
        kinds["not_exec"] += not e.executed
        if e.vector is not None:
            vectors.add(e.vector)
        elif s.target is not None and e.executed:
            kinds["direct"] += 1
        elif s.is_branch and e.executed:
            kinds["indirect"] += 1
        kinds["loads"] += bool(e.data)
    irqs = sum(1 for e in r.execs if e.kind == ExecKind.INTERRUPT)
    assert all(v > 100 for v in kinds.values()), kinds
    assert irqs > 100
    assert 0x08 in vectors  # SWI
    if name != "copy":
        assert 0x04 in vectors  # undefined instruction
    if name != "copy":
        assert any(e.kind == ExecKind.CONTEXT for e in r.execs)
