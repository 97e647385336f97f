"""The snapshot reader: INI parsing, registers, dumps, topology, and every corpus snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from cstrace.elements import MemSpace
from cstrace.errors import SnapshotError
from cstrace.inputs import read_snapshot
from cstrace.inputs.files import DirTree
from cstrace.inputs.ini import parse_ini
from cstrace.inputs.snapshot import load_snapshot
from tests.snapshots import Buffer, Core, Source, make_snapshot


def test_ini_keeps_duplicates_and_lines() -> None:
    ini = parse_ini("; comment\n[core_trace_sources]\ncpu_0=A\ncpu_0 = B \n\n[x]\nk=v\n", "t.ini")
    sec = ini.section("CORE_TRACE_SOURCES")
    assert sec is not None
    assert [(e.key, e.value, e.line) for e in sec.entries] == [("cpu_0", "A", 3), ("cpu_0", "B", 4)]
    assert sec.get("cpu_0") == "B"


@pytest.mark.parametrize(
    ("text", "line"),
    [("[a]\nno equals sign\n", 2), ("k=v\n", 1), ("[a\n", 1), ("[a]\n=v\n", 2)],
)
def test_ini_errors_name_the_line(text: str, line: int) -> None:
    with pytest.raises(SnapshotError) as info:
        parse_ini(text, "bad.ini")
    assert info.value.line == line
    assert str(info.value).startswith(f"bad.ini: line {line}: ")


def test_registers_parsed_lazily_with_location(tmp_path: Path) -> None:
    src = Source(
        "ETM_0",
        "ETM4",
        {"TRCCONFIGR(0x004)": 0xC1, "TRCIDR0(id:0x78,size:32)": "0x28000EA1", "WEIRD": "banana"},
    )
    root = make_snapshot(tmp_path, [src], [Buffer("ETB", bytes(16), ["ETM_0"])])
    snap = load_snapshot(DirTree(root))
    dev = snap.device("etm_0")
    assert dev is not None
    assert dev.require("trcconfigr") == 0xC1
    reg = dev.register("TRCIDR0")
    assert reg is not None and reg.reg_id == 0x78 and reg.value == 0x28000EA1
    assert dev.reg("TRCIDR8", 7) == 7
    with pytest.raises(SnapshotError) as info:
        dev.require("WEIRD")
    assert info.value.line is not None and "ETM_0.ini" in str(info.value)
    with pytest.raises(SnapshotError):
        dev.require("TRCIDR13")
    # In the trace model, registers are numbers: a malformed one is a located error.
    with pytest.raises(SnapshotError, match="WEIRD") as info:
        read_snapshot(root)
    assert info.value.line is not None and "ETM_0.ini" in str(info.value)


def test_topology_and_dumps(tmp_path: Path) -> None:
    cores = [Core("cpu_0", dumps=[("code.bin", 0x8000, b"\x00" * 64, "EL1N")])]
    sources = [
        Source("ETM_0", "ETM4.2", {"TRCTRACEIDR": 0x10}, core="cpu_0"),
        Source("STM_0", "STM", {"STMTCSR": 0x00A00007}),
    ]
    bufs = [Buffer("ETB_0", bytes(16), ["ETM_0"]), Buffer("ETB_1", bytes(16), ["STM_0"])]
    snap = read_snapshot(make_snapshot(tmp_path, sources, bufs, cores))
    assert [b.name for b in snap.buffers] == ["ETB_0", "ETB_1"]
    (etm,) = snap.sources_for(snap.buffer("ETB_0"))
    assert etm.protocol == "etmv4" and etm.version == "4.2" and etm.core_name == "cpu_0"
    assert etm.registers == {"TRCTRACEIDR": 0x10}
    (stm,) = snap.sources_for(snap.buffer("ETB_1"))
    assert stm.core_name is None and stm.protocol == "stm"
    (dump,) = snap.dumps
    assert dump.address == 0x8000 and dump.length == 64 and dump.space == MemSpace.EL1N
    assert dump.core == "cpu_0"
    assert snap.buffer("ETB_1").read() == bytes(16)


def test_every_corpus_snapshot_loads(corpus: Path) -> None:
    names = sorted(p.name for p in (corpus / "snapshots").iterdir())
    assert len(names) >= 30
    for name in names:
        snap = read_snapshot(corpus / "snapshots" / name)
        assert snap.buffers, name
        for buffer in snap.buffers:
            assert snap.sources_for(buffer), (name, buffer.name)
    # A missing dump is a warning, not an error.
    snap = read_snapshot(corpus / "snapshots" / "juno-ret-stck")
    assert any("kernel_dump.bin" in str(w) for w in snap.issues)


def test_buffers_in_section_order(tmp_path: Path) -> None:
    src = [Source("STM_0", "STM", {"STMTCSR": 0x00A00007})]
    bufs = [Buffer("ETB_A", bytes(16), ["STM_0"]), Buffer("ETB_B", bytes(16), ["STM_0"])]
    root = make_snapshot(tmp_path, src, bufs)
    text = (root / "trace.ini").read_text()
    # Put [buffer1] (ETB_B) before [buffer0] (ETB_A) in the file; list them the other way.
    head, rest = text.split("[buffer0]", 1)
    b0, after = rest.split("[buffer1]", 1)
    b1, tail = after.split("[source_buffers]", 1)
    text = head + "[buffer1]" + b1 + "[buffer0]" + b0 + "[source_buffers]" + tail
    (root / "trace.ini").write_text(text)
    snap = read_snapshot(root)
    assert [b.name for b in snap.buffers] == ["ETB_B", "ETB_A"]
