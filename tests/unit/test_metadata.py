"""The INI trace metadata format (metadata requirements §6.3.1): options, registers, errors."""

from __future__ import annotations

import pytest

from cstrace.errors import SnapshotError
from cstrace.inputs.metadata import (
    family_of,
    format_metadata,
    parse_metadata,
    source_trace_id,
)
from cstrace.trace import Source

SEED_EXAMPLE = """\
[buffer]
vendor: ARM
component: ETB
format: coresight

[trace_1]
format: ETM3.5
ETMCR: 0x12345678
cyclecount: 1
timestamp_bits: 48
timestamp_gray: 0
context_id: 32
"""


def regs(text: str, trace_id: int = 1) -> dict[str, int]:
    meta = parse_metadata(text, "meta.ini")
    spec = meta.trace(trace_id)
    assert spec is not None
    return {k: r.value for k, r in spec.device.registers.items()}


def test_seed_example_parses_and_options_override_etmcr() -> None:
    meta = parse_metadata(SEED_EXAMPLE, "meta.ini")
    assert meta.buffer.vendor == "ARM"
    assert meta.buffer.component == "ETB"
    assert meta.buffer.format == "coresight"
    spec = meta.trace(1)
    assert spec is not None
    assert spec.device.device_type == "ETM3.5"
    r = {k: v.value for k, v in spec.device.registers.items()}
    etmcr = r["ETMCR"]
    assert etmcr & (1 << 12)  # cyclecount: 1
    assert (etmcr >> 14) & 3 == 3  # context_id: 32
    assert etmcr & (1 << 28)  # timestamps on (48 bits)
    # Bits the options do not touch keep the register's value.
    assert etmcr & ~((1 << 12) | (3 << 14) | (1 << 28)) == 0x12345678 & ~(
        (1 << 12) | (3 << 14) | (1 << 28)
    )
    assert not r["ETMCCER"] & (1 << 29)  # 48-bit
    assert r["ETMCCER"] & (1 << 28)  # timestamp_gray: 0, so natural binary (bit 28 set)
    assert r["ETMTRACEIDR"] == 1
    assert (r["ETMIDR"] >> 4) & 0xF == 5 and (r["ETMIDR"] >> 8) & 0xF == 2


def test_option_clears_a_register_bit() -> None:
    text = "[trace_0x10]\nformat = PFT1.1\nETMCR = 0x10001000\nETMCCER = 0x34C01AC2\n"
    before = regs(text, 0x10)
    assert before["ETMCR"] & (1 << 12)
    after = regs(text + "cyclecount = 0\n", 0x10)
    assert not after["ETMCR"] & (1 << 12)
    assert after["ETMCR"] == before["ETMCR"] & ~(1 << 12)


def test_etmv4_options_build_every_register() -> None:
    text = """[trace_0x22]
format: ETM4.2
core: Cortex-A53
cyclecount: 1
context_id: 32
vmid: 8
timestamp_bits: 64
return_stack: 1
conditional: all
commit_opt: 1
max_speculation: 4
"""
    r = regs(text, 0x22)
    cfg = r["TRCCONFIGR"]
    assert cfg & (1 << 4) and cfg & (1 << 6) and cfg & (1 << 7) and cfg & (1 << 11)
    assert cfg & (1 << 12) and (cfg >> 8) & 7 == 7
    assert (r["TRCIDR0"] >> 24) & 0x1F == 8
    assert r["TRCIDR0"] & (1 << 29) and r["TRCIDR0"] & (1 << 9) and r["TRCIDR0"] & (1 << 7)
    assert (r["TRCIDR2"] >> 5) & 0x1F == 4
    assert (r["TRCIDR2"] >> 10) & 0x1F == 1
    assert r["TRCIDR8"] == 4
    assert r["TRCTRACEIDR"] == 0x22
    assert (r["TRCIDR1"] >> 8) & 0xF == 4 and (r["TRCIDR1"] >> 4) & 0xF == 2
    spec = parse_metadata(text, "m.ini").trace(0x22)
    assert spec is not None and spec.core_type == "Cortex-A53"


def test_ete_gets_devarch() -> None:
    text = (
        "[trace_2]\nformat: ETE\ncyclecount: 0\ncontext_id: 0\nvmid: 0\ntimestamp_bits: 0\n"
        "return_stack: 0\nconditional: none\ncommit_opt: 0\n"
    )
    r = regs(text, 2)
    assert r["TRCDEVARCH"] & 0xFFFF == 0x5A13
    assert r["TRCTRACEIDR"] == 2


def test_missing_items_are_all_named_with_file_and_line() -> None:
    text = "[buffer]\nformat: coresight\n\n[trace_0x10]\nformat: ETM4.2\ncyclecount: 1\n"
    with pytest.raises(SnapshotError) as err:
        parse_metadata(text, "meta.ini")
    msg = str(err.value)
    assert msg.startswith("meta.ini: line 4: [trace_0x10]")
    for item in ("context_id", "vmid", "timestamp_bits", "return_stack", "conditional"):
        assert item in msg
    assert "cyclecount" not in msg.split("without", 1)[1]


def test_registers_satisfy_required_items() -> None:
    text = (
        "[trace_0x10]\nformat: ETM4\nTRCCONFIGR: 0x1\nTRCIDR0: 0x28000EA1\nTRCIDR2: 0x8\n"
        "TRCTRACEIDR: 0x10\n"
    )
    r = regs(text, 0x10)
    assert r["TRCCONFIGR"] == 0x1


def test_timestamp_gray_needed_only_with_timestamps() -> None:
    base = "[trace_3]\nformat: PTM1.1\ncyclecount: 0\ncontext_id: 0\nvmid: 0\n"
    base += "return_stack: 0\ndmb_dsb_waypoints: 1\n"
    regs(base + "timestamp_bits: 0\n", 3)
    with pytest.raises(SnapshotError, match="timestamp_gray"):
        parse_metadata(base + "timestamp_bits: 64\n", "m.ini")
    r = regs(base + "timestamp_bits: 64\ntimestamp_gray: no\n", 3)
    assert r["ETMCCER"] & (1 << 28) and r["ETMCCER"] & (1 << 29)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("cyclecount: maybe", "not a boolean"),
        ("context_id: 12", "not one of"),
        ("colour: blue", "unknown item 'colour'"),
        ("ETMCR: 0xZZ", "not a number"),
        ("ETMTRACEIDR: 0x11", "trace ID 0x11"),
    ],
)
def test_bad_items_name_the_line(line: str, message: str) -> None:
    text = f"[trace_0x10]\nformat: ETM3.5\nETMCR: 0\nETMCCER: 0\n{line}\n"
    with pytest.raises(SnapshotError, match=message) as err:
        parse_metadata(text, "m.ini")
    assert "line 5" in str(err.value)


def test_structure_errors() -> None:
    with pytest.raises(SnapshotError, match="missing item 'format'"):
        parse_metadata("[trace_1]\ncyclecount: 1\n", "m.ini")
    with pytest.raises(SnapshotError, match="unknown section"):
        parse_metadata("[tracing]\nformat: STM\n", "m.ini")
    with pytest.raises(SnapshotError, match="described twice"):
        parse_metadata("[trace_1]\nformat: STM\n[trace_0x1]\nformat: ITM\n", "m.ini")
    with pytest.raises(SnapshotError, match="outside"):
        parse_metadata("[trace_0x80]\nformat: STM\n", "m.ini")
    with pytest.raises(SnapshotError, match="format 'weird'"):
        parse_metadata("[buffer]\nformat: weird\n", "m.ini")
    with pytest.raises(SnapshotError, match="NUL"):
        parse_metadata(b"[buffer]\x00", "m.ini")


def test_stm_and_itm_need_only_their_id() -> None:
    r = regs("[trace_0x20]\nformat: STM\n", 0x20)
    assert (r["STMTCSR"] >> 16) & 0x7F == 0x20
    r = regs("[trace_0x21]\nformat: ITM\n", 0x21)
    assert (r["ITMTCR"] >> 16) & 0x7F == 0x21


@pytest.mark.parametrize(
    ("fmt", "family"),
    [
        ("ETM3.5", "etm3"),
        ("ETMv3.4", "etm3"),
        ("PFT1.1", "ptm"),
        ("PTM1.0", "ptm"),
        ("ETM4", "etm4"),
        ("ETMv4.2", "etm4"),
        ("ETE", "ete"),
        ("STM", "stm"),
        ("ITM", "itm"),
        ("XScale", "other"),
    ],
)
def test_families(fmt: str, family: str) -> None:
    assert family_of(fmt) == family


def test_format_names_are_normalised() -> None:
    text = (
        "[trace_4]\nformat: ETMv4.3\ncyclecount: 0\ncontext_id: 0\nvmid: 0\n"
        "timestamp_bits: 0\nreturn_stack: 0\nconditional: none\ncommit_opt: 0\n"
    )
    spec = parse_metadata(text, "m.ini").trace(4)
    assert spec is not None and spec.device.device_type == "ETM4.3"


def test_written_metadata_reads_back_the_same_registers() -> None:
    regs = {"TRCCONFIGR": 0x8001, "TRCTRACEIDR": 0x10, "TRCIDR0": 0x1, "TRCIDR2": 0x8}
    src = Source("ETM_0", "etmv4", "ETM4.1", regs, ("ETB_0",), "Cortex-A57", "cpu_0")
    text = format_metadata("coresight", [(src, ["ETB_0"])])
    meta = parse_metadata(text, "m.ini")
    spec = meta.trace(0x10)
    assert spec is not None
    assert source_trace_id(spec.device) == 0x10
    assert spec.device.name == "ETM_0" and spec.device.device_type == "ETM4.1"
    assert spec.core_type == "Cortex-A57" and spec.core_name == "cpu_0"
    assert spec.buffers == ["ETB_0"]
    assert {k: r.value for k, r in spec.device.registers.items()} == regs


def test_writer_refuses_a_source_without_trace_id() -> None:
    src = Source("ETM_0", "etmv4", "ETM4", {}, ())
    with pytest.raises(SnapshotError, match="TRCTRACEIDR"):
        format_metadata("coresight", [(src, None)])
