"""Address spaces across exec, fork + exec and threads, in recordings written by perfgen.

A process first runs one program (``tool``: what a recording tool looks like
before it execs the workload) and then, after a COMM record with the exec flag,
another (``app``) at the same addresses. The trace after the exec is the app's:
``decode`` reads the app's code, and ``profile`` attributes it to the app. A
child forked from the tool that execs the app gets the app's code, its parent
keeps the tool's, and a thread of the child sees its process's. Each case is
checked with and without record times (``perf record --per-thread`` writes none:
the records' order is then their time).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cstrace.protocols.etmv4 import encoder as e4
from tests.integration.elfgen import ET_DYN, executable
from tests.perfgen import (
    ETMV4_MAGIC,
    SAMPLE_TIME,
    SAMPLE_TYPE,
    PerfWriter,
    cs_etm_info,
    etmv4_params,
)
from tests.unit.test_perfdata import run_cli

NOP, RET = 0xD503201F, 0xD65F03C0
LOAD = 0x55_0000_0000
TOOL_ID = bytes.fromhex("11" * 20)
APP_ID = bytes.fromhex("22" * 20)


def _words(*ws: int) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in ws)


# Both at link 0x1000. The app: nop; nop; b.eq 0x1018; ...; 0x1018: nop; ret.
# The tool: straight-line nops to a ret at 0x1030.
APP_CODE = _words(NOP, NOP, 0x54000080, NOP, NOP, NOP, NOP, RET, NOP, NOP, NOP, NOP, RET)
TOOL_CODE = _words(*([NOP] * 12), RET)
APP = executable(APP_CODE, 0x1000, e_type=ET_DYN, build_id=APP_ID, rodata_before=0x1000, bits=64)
TOOL = executable(TOOL_CODE, 0x1000, e_type=ET_DYN, build_id=TOOL_ID, rodata_before=0x1000, bits=64)
APP_RANGE = f"{LOAD + 0x1000:#x}-{LOAD + 0x100C:#x}"  # to the b.eq, taken
TOOL_RANGE = f"{LOAD + 0x1000:#x}-{LOAD + 0x1034:#x}"  # to the ret


def trace_of(tid: int) -> bytes:
    """ETMv4 trace of thread ``tid`` from LOAD + 0x1000: one E atom, then another address."""
    return (
        e4.a_sync()
        + e4.trace_info(0)
        + e4.trace_on()
        + e4.address_context(LOAD + 0x1000, el=0, sf=True, ns=True, context_id=tid)
        + e4.atom("E")
        + e4.address_long(0x7000_0000)
    )


def _maps(w: PerfWriter, pid: int, path: str, time: int) -> None:
    w.mmap2(pid, pid, LOAD, 0x1000, 0, path, prot=1, time=time)
    w.mmap2(pid, pid, LOAD + 0x1000, 0x1000, 0x1000, path, time=time + 1)


def recording(case: str, timed: bool) -> bytes:
    """The recording of one case: ``exec``, ``fork-exec`` (child 200 of 100) or ``thread``
    (thread 201 of the child); the trace is of the thread named by the case."""
    w = PerfWriter(sample_type=SAMPLE_TYPE if timed else SAMPLE_TYPE & ~SAMPLE_TIME)
    w.build_ids = [(-1, TOOL_ID, "/bin/tool"), (-1, APP_ID, "/data/app")]
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10))]))
    w.comm(100, 100, "tool", exec_=True, time=10)
    _maps(w, 100, "/bin/tool", 11)
    traced = 100
    if case == "exec":
        w.comm(100, 100, "app", exec_=True, time=20)
        _maps(w, 100, "/data/app", 21)
    else:
        w.fork(200, 100, 200, 100, time=20)
        w.comm(200, 200, "app", exec_=True, time=21)
        _maps(w, 200, "/data/app", 22)
        traced = 200
        if case == "thread":
            w.fork(200, 200, 201, 200, time=30)
            traced = 201
    pieces = [trace_of(traced)]
    if case != "exec":
        pieces.append(trace_of(100))  # the parent, still the tool
    offset = 0
    for k, data in enumerate(pieces):
        w.aux(offset, len(data), 0x100, pid=100, tid=100, time=40 + k)
        padded = data + b"\0" * (-len(data) % 8)
        w.auxtrace(padded, offset=offset, cpu=0)
        offset += len(padded)
    return w.build()


@pytest.fixture()
def symdir(tmp_path: Path) -> Path:
    d = tmp_path / "symbols"
    (d / "bin").mkdir(parents=True)
    (d / "data").mkdir()
    (d / "bin" / "tool").write_bytes(TOOL)
    (d / "data" / "app").write_bytes(APP)
    return d


@pytest.mark.parametrize("timed", [True, False], ids=["timed", "untimed"])
@pytest.mark.parametrize("case", ["exec", "fork-exec", "thread"])
def test_after_an_exec_the_process_runs_the_new_program(
    tmp_path: Path, symdir: Path, case: str, timed: bool
) -> None:
    path = tmp_path / "rec.data"
    path.write_bytes(recording(case, timed))
    code, out, err = run_cli("decode", str(path), "--symdir", str(symdir), "--no-summary")
    assert code == 0 and "Traceback" not in err, err
    ranges = [
        ln.split("INSTR_RANGE")[1].split()[0] for ln in out.splitlines() if "INSTR_RANGE" in ln
    ]
    # The traced thread runs the app; the parent (cases with a child) still the tool.
    assert ranges == ([APP_RANGE] if case == "exec" else [APP_RANGE, TOOL_RANGE]), out
    code, out, err = run_cli("profile", str(path), "--symdir", str(symdir), "--format", "autofdo")
    assert code == 0, err
    blocks = {b.strip().splitlines()[-1]: b for b in out.split("\n\n") if b.strip()}
    assert "1000-1008:1" in blocks["// /data/app"]
    if case == "exec":
        assert set(blocks) == {"// /data/app"}, out
    else:
        assert set(blocks) == {"// /data/app", "// /bin/tool"}, out
        assert "1000-1030:1" in blocks["// /bin/tool"]
