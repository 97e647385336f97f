"""Every program-flow protocol decodes hand-made packets with no snapshot and no files.

Each test makes the configuration from a dict of register values through the
protocol's ``from_registers`` (found by name with ``get_protocol``), the code
memory from bytes, and the trace with the protocol's encoder; then it decodes
through the protocol's reader and decoder and checks the program flow.
"""

from __future__ import annotations

from typing import Any

import pytest

from cstrace.capture import Stream
from cstrace.capture.etmport import CycleStream, cycles_from_text, pack_cycles
from cstrace.elements import Element, InstrRange, Isa, MemSpace
from cstrace.errors import ConfigError
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols import DecodeContext, DecodeOptions, ProtocolSpec, get_protocol
from cstrace.protocols.etmv1.config import etmcr
from cstrace.protocols.etmv3 import encoder as e3
from cstrace.protocols.etmv4 import encoder as e4
from cstrace.protocols.ptm import encoder as pe


def words(*ws: int) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in ws)


def spec(name: str) -> ProtocolSpec:
    found = get_protocol(name)
    assert found is not None, name
    return found


def decode(
    name: str, regs: dict[str, int], core: str, stream: Stream, memory: MemoryMap, version: str = ""
) -> tuple[Any, list[Element]]:
    proto = spec(name)
    config = proto.from_registers(regs, core, version)
    ctx = DecodeContext(config.trace_id, DecodeOptions(), memory)
    return config, list(proto.iter_elements(proto.iter_packets(stream, config, True), config, ctx))


def ranges(elems: list[Element]) -> list[tuple[int, int, int, bool]]:
    return [(e.start, e.end, e.num_instr, e.last_exec) for e in elems if isinstance(e, InstrRange)]


# A64 at 0x1000: nop; nop; b.eq 0x1018; bl 0x102c; ... 0x1018: nop; ret; 0x102c: nop; ret
NOP64, RET64 = 0xD503201F, 0xD65F03C0
A64 = words(NOP64, NOP64, 0x54000080, 0x94000008, NOP64, NOP64, NOP64, RET64)
A64 += words(NOP64, NOP64, NOP64, NOP64, RET64)

ETMV4_REGS = {
    "TRCCONFIGR": 0x1,
    "TRCTRACEIDR": 0x10,
    "TRCIDR0": 0x28000EA1,
    "TRCIDR1": 0x4100F403,
    "TRCIDR2": 0x00000488,
    "TRCIDR8": 0,
}


@pytest.mark.parametrize(
    ("name", "extra"), [("etmv4", {}), ("ete", {"TRCDEVARCH": 0x47735A13, "TRCIDR1": 0x4100FFF0})]
)
def test_etmv4_and_ete(name: str, extra: dict[str, int]) -> None:
    trace = (
        e4.a_sync()
        + e4.trace_info(0)
        + e4.trace_on()
        + e4.address_context(0x1000, el=1, sf=True, ns=True)
        + e4.atom("EE")  # b.eq taken to 0x1018, then ret taken: its target comes next
        + e4.address_long(0x1010)
        + e4.atom("E")  # from 0x1010 the next waypoint is the ret at 0x101c
    )
    mem = MemoryMap([MemoryRegion(0x1000, A64, MemSpace.ANY, "a64")])
    config, elems = decode(name, {**ETMV4_REGS, **extra}, "Cortex-A53", Stream(0x10, trace), mem)
    assert config.trace_id == 0x10 and config.is_ete == (name == "ete")
    assert ranges(elems) == [
        (0x1000, 0x100C, 3, True),  # nop, nop, b.eq -> 0x1018
        (0x1018, 0x1020, 2, True),  # nop, ret -> address packet
        (0x1010, 0x1020, 4, True),  # nop x3, ret
    ]


# A32 at 0x1000: nop; nop; b 0x1010; nop; 0x1010: nop; bx lr
MOV = 0xE1A00000
A32 = words(MOV, MOV, 0xEA000000, MOV, MOV, 0xE12FFF1E)


def test_ptm() -> None:
    regs = {"ETMCR": 0x10000000, "ETMCCER": 0x34C01AC2, "ETMIDR": 0x411CF312, "ETMTRACEIDR": 0x13}
    trace = pe.encode_async() + pe.encode_isync(0x1000, Isa.A32) + pe.encode_atoms([True, False])
    mem = MemoryMap([MemoryRegion(0x1000, A32, MemSpace.ANY, "a32")])
    config, elems = decode("ptm", regs, "Cortex-A15", Stream(0x13, trace), mem)
    assert config.trace_id == 0x13 and config.minor_rev == 1
    assert ranges(elems) == [(0x1000, 0x100C, 3, True), (0x1010, 0x1018, 2, False)]


def test_etmv3() -> None:
    regs = {"ETMCR": 0x10000000, "ETMCCER": 0x344008F2, "ETMIDR": 0x410CF250, "ETMTRACEIDR": 0x21}
    trace = e3.encode_async() + e3.encode_isync(0x1000, Isa.A32) + e3.encode_phdr("EEEE")
    mem = MemoryMap([MemoryRegion(0x1000, A32, MemSpace.ANY, "a32")])
    config, elems = decode("etmv3", regs, "Cortex-A7", Stream(0x21, trace), mem)
    assert config.trace_id == 0x21 and config.minor_rev == 5
    # ETMv3 atoms are per instruction: four executed, the branch taken to 0x1010
    got = ranges(elems)
    assert sum(n for _, _, n, _ in got) == 4
    assert [s for s, _, _, _ in got][:1] == [0x1000]
    assert got[-1][1] == 0x1014  # the fourth instruction is the nop at 0x1010


def test_etmv1_from_an_etmcr_value() -> None:
    cr = etmcr(width=8)
    text = """
    BE 80 S
    IE a0
    IE 80
    WT 80
    WT 10
    IE 00
    """  # trace enabled at 0x1000, then two instructions executed
    proto = spec("etmv1")
    config = proto.from_registers({"ETMCR": cr}, "ARM920T", "1.3")
    cycles = cycles_from_text(text, config.port)
    stream = CycleStream("etm_cycles", pack_cycles(cycles, "etm_cycles", config.port))
    mem = MemoryMap([MemoryRegion(0x1000, A32, MemSpace.ANY, "a32")])
    ctx = DecodeContext(0, DecodeOptions(), mem)
    elems = list(proto.iter_elements(proto.iter_packets(stream, config, True), config, ctx))
    starts = [e.start for e in elems if isinstance(e, InstrRange)]
    assert starts and starts[0] == 0x1000


@pytest.mark.parametrize(
    ("name", "regs", "missing"),
    [
        ("etmv4", {k: v for k, v in ETMV4_REGS.items() if k != "TRCIDR0"}, "TRCIDR0"),
        ("ptm", {"ETMCR": 0}, "ETMTRACEIDR"),
        ("etmv3", {"ETMCR": 0, "ETMIDR": 0, "ETMTRACEIDR": 0}, "ETMCCER"),
        ("stm", {}, "STMTCSR"),
        ("itm", {}, "ITMTCR"),
        ("etmv1", {}, "ETMCR"),
    ],
)
def test_a_missing_register_is_a_config_error(
    name: str, regs: dict[str, int], missing: str
) -> None:
    with pytest.raises(ConfigError, match=missing):
        spec(name).from_registers(regs, "Cortex-A53", "1.3")


def test_software_trace_and_classic_configs_from_registers() -> None:
    assert spec("stm").from_registers({"STMTCSR": 0x00A00007}, "", "").trace_id == 0x20
    itm = spec("itm").from_registers({"CONTROL_REGISTER": 0x00110119}, "", "")
    assert itm.trace_id == 0x11 and itm.ts_prescale == 4
    xs = spec("xscale").from_registers({"START_PC": 0x8001}, "", "")
    assert xs.start_pc == 0x8001
    assert spec("dcc").from_registers({}, "", "").trace_id == 0
    v2 = spec("etmv2").from_registers({"ETMCR": etmcr(width=4)}, "", "2.1")
    assert (v2.major, v2.minor) == (2, 1) and v2.port.width == 4
