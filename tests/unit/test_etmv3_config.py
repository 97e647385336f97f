"""ETMv3 configuration: register fields (ARM IHI 0014Q chapter 3) and the traced core."""

from __future__ import annotations

import pytest

from cstrace.errors import ConfigError
from cstrace.isa import ArchVersion, Profile
from cstrace.protocols.etmv3.config import Etmv3Config

TC2_REGS = {"ETMCR": 0x10001860, "ETMIDR": 0x410CF250, "ETMCCER": 0x344008F2, "ETMTRACEIDR": 0x10}


def test_tc2_cortex_a7() -> None:
    cfg = Etmv3Config.from_registers(TC2_REGS, "Cortex-A7")
    assert cfg.trace_id == 0x10 and cfg.minor_rev == 5
    assert cfg.cycle_accurate and cfg.instr_trace and not cfg.data_trace
    assert cfg.ctxtid_bytes == 0 and not cfg.alt_branch and cfg.virt_ext
    assert cfg.has_ts and cfg.ts_enabled and cfg.ts_64bit and not cfg.vmid_trace
    assert (cfg.arch, cfg.profile) == (ArchVersion.V7, Profile.A) and not cfg.v7m


@pytest.mark.parametrize(("bits", "size"), [(0, 0), (1, 1), (2, 2), (3, 4)])
def test_context_id_size(bits: int, size: int) -> None:
    assert Etmv3Config(bits << 14, 0, 0x410CF250, 0x10).ctxtid_bytes == size


def test_options() -> None:
    cfg = Etmv3Config(0x4000000C | (1 << 20), 0, 0x411CF240, 0x93)
    assert cfg.data_value_trace and cfg.data_addr_trace and not cfg.instr_trace
    assert cfg.vmid_trace and cfg.alt_branch and cfg.trace_id == 0x13
    assert not Etmv3Config(0, 0, 0x411CF230, 0x10).alt_branch  # only from ETMv3.4
    assert not Etmv3Config(0, 0, 0x410CF220, 0x10).alt_isa_in_isync


def test_cortex_m3_is_v7m() -> None:
    cfg = Etmv3Config.from_registers(TC2_REGS, "Cortex-M3")
    assert cfg.v7m


def test_missing_register_and_unknown_core() -> None:
    regs = dict(TC2_REGS)
    del regs["ETMCCER"]
    with pytest.raises(ConfigError, match="ETMCCER"):
        Etmv3Config.from_registers(regs, "Cortex-A7")
    with pytest.raises(ConfigError, match="NotACore"):
        Etmv3Config.from_registers(TC2_REGS, "NotACore")
