"""Snapshots, packages and raw captures reach the decoders through the same ``from_registers``.

The example ``examples/etm_demo`` is opened three ways: as its DS-5 snapshot,
as a trace package written from it, and as its raw ETB dump described on the
command line's terms (settings, core, memory). Each way, every source is
configured by its protocol's ``from_registers`` from a plain register mapping;
the configurations and the decoded elements are the same. The raw-capture
adapter builds no INI objects to get there.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import cstrace
from cstrace import protocols
from cstrace.decode import Session
from cstrace.inputs import write_package
from tests.conftest import ROOT

DEMO = ROOT / "examples" / "etm_demo"
RAW_SETTINGS = [
    "0x10:cyclecount=0",
    "0x10:context_id=32",
    "0x10:vmid=0",
    "0x10:timestamp_bits=64",
    "0x10:return_stack=0",
    "0x10:conditional=none",
    "0x10:commit_opt=0",
]


def configured(trace: cstrace.Trace, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(protocol, config repr) of every source, recording that from_registers made each."""
    calls: list[tuple[str, dict[str, int]]] = []
    real = protocols.get_protocol

    def spying(name: str) -> protocols.ProtocolSpec | None:
        spec = real(name)
        if spec is None:
            return None
        inner: Callable[[Mapping[str, int], str, str], Any] = spec.from_registers

        def from_registers(regs: Mapping[str, int], core: str, version: str) -> Any:
            assert isinstance(regs, Mapping) and all(isinstance(v, int) for v in regs.values())
            calls.append((spec.name, dict(regs)))
            return inner(regs, core, version)

        return protocols.ProtocolSpec(
            spec.name, from_registers, spec.iter_packets, spec.iter_elements, spec.uses_memory
        )

    monkeypatch.setattr("cstrace.decode.get_protocol", spying)
    session = Session(trace)
    out = []
    for buffer in trace.buffers:
        for run in session.open_buffer(buffer).runs:
            out.append((run.protocol.name, repr(run.config)))
    assert [name for name, _ in calls] == [name for name, _ in out]
    return out


def test_snapshot_package_and_raw_capture_configure_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = cstrace.open_trace(DEMO)
    write_package(snapshot, tmp_path / "demo.zip")
    package = cstrace.open_trace(tmp_path / "demo.zip")
    raw = cstrace.open_trace(
        DEMO / "etb_0.bin",
        memory=[f"{DEMO}/user.bin@0x400000", f"{DEMO}/kernel.bin@0xffffffc000080400"],
        cores=["Cortex-A53"],
        settings=RAW_SETTINGS,
    )
    want = configured(snapshot, monkeypatch)
    assert [name for name, _ in want] == ["etmv4", "stm"]
    assert configured(package, monkeypatch) == want
    # The raw capture's ETMv4 comes from settings, so only the decoded options must agree.
    got = configured(raw, monkeypatch)
    assert [name for name, _ in got] == ["etmv4", "stm"]
    elements = [list(cstrace.iter_elements(t)) for t in (snapshot, package, raw)]
    assert elements[0] == elements[1] == elements[2]


def test_the_raw_adapter_builds_no_ini() -> None:
    path = ROOT / "src" / "cstrace" / "inputs" / "raw.py"
    names = {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Name | ast.Attribute)
    }
    assert not names & {"IniSection", "IniEntry", "IniFile", "parse_ini", "metadata_from_ini"}
