"""ETMv4 / ETE configuration from registers: decoded options, defaults, snapshot loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from cstrace.errors import ConfigError
from cstrace.isa.types import ArchVersion, Profile
from cstrace.protocols import get_protocol
from cstrace.protocols.etmv4.config import CondTraceMode, Etmv4Config, QSupport

JUNO = {
    "TRCCONFIGR": 0x000010C1,
    "TRCTRACEIDR": 0x10,
    "TRCIDR0": 0x28000EA1,
    "TRCIDR1": 0x4100F403,
    "TRCIDR2": 0x00000488,
    "TRCIDR8": 0,
}


def test_juno_etmv4_0() -> None:
    cfg = Etmv4Config.from_registers(JUNO, "Cortex-A57")
    assert cfg.trace_id == 0x10
    assert (cfg.major_version, cfg.minor_version, cfg.full_version) == (4, 0, 0x40)
    assert cfg.version_text == "ETMv4.0" and not cfg.is_ete
    assert (cfg.arch_version, cfg.core_profile) == (ArchVersion.V8, Profile.A)
    assert cfg.ia_size_max == 64 and cfg.cid_size == 32
    assert cfg.vmid_size == 8  # TRCIDR2.VMIDSIZE = 1
    assert cfg.cc_size == 12
    assert cfg.has_cycle_count and cfg.commit_opt1 and cfg.has_ret_stack
    assert cfg.timestamp_size == 64 and cfg.num_events == 4
    assert cfg.q_support == QSupport.NONE and not cfg.has_q_elements
    # TRCCONFIGR: context ID, VMID, return stack
    assert cfg.cid_enabled and cfg.vmid_enabled and cfg.ret_stack
    assert not cfg.cycle_counting and not cfg.timestamps and not cfg.branch_broadcast
    assert cfg.cond_trace == CondTraceMode.DISABLED and not cfg.cond_trace_valid
    assert not cfg.data_trace and cfg.max_spec_depth == 0


def test_missing_optional_registers_take_the_reference_defaults() -> None:
    regs = {k: v for k, v in JUNO.items() if k not in ("TRCIDR1", "TRCIDR8")}
    cfg = Etmv4Config.from_registers(regs, "Cortex-A53")
    assert cfg.idr1 == 0x4100F403 and cfg.full_version == 0x40
    assert cfg.idr8 == cfg.idr9 == cfg.idr13 == 0
    ete_cfg = Etmv4Config.from_registers(regs, "ARM-AA64", ete=True)
    assert ete_cfg.devarch == 0x47705A13 and ete_cfg.full_version == 0x50


@pytest.mark.parametrize("missing", ["TRCCONFIGR", "TRCTRACEIDR", "TRCIDR0", "TRCIDR2"])
def test_required_registers(missing: str) -> None:
    regs = {k: v for k, v in JUNO.items() if k != missing}
    with pytest.raises(ConfigError, match=missing):
        Etmv4Config.from_registers(regs, "Cortex-A57")


def test_versions_and_version_dependent_options() -> None:
    v43 = Etmv4Config(configr=0, traceidr=0, idr0=0, idr1=0x4100F433, idr2=0x80000800)
    assert v43.full_version == 0x43 and v43.wfi_wfe_branch and v43.vmid_size == 16
    v40 = Etmv4Config(configr=0, traceidr=0, idr0=0, idr1=0x4100F403, idr2=0x80000800)
    assert not v40.wfi_wfe_branch and v40.vmid_size == 0  # 16-bit VMID needs ETMv4.1+


def test_ete_options() -> None:
    cfg = Etmv4Config(
        configr=0x8019, traceidr=2, idr0=0x28000CA1, idr1=0x5100FFF0, idr2=0x40001088,
        idr8=0, devarch=0x47705A13, core_name="ARM-AA64",
    )  # fmt: skip
    assert cfg.is_ete and cfg.full_version == 0x50 and cfg.version_text == "ETE v1.0"
    assert cfg.commit_opt1 and cfg.cycle_counting and cfg.branch_broadcast
    assert cfg.arch_version == ArchVersion.AA64
    assert cfg.vmid_size == 32
    assert not cfg.ete_has_ts_marker
    marker = Etmv4Config(configr=1, traceidr=1, idr0=0x28800EA1, idr1=0x4100FFF0,
                         idr2=0xD0001088, devarch=0x47715A13)  # fmt: skip
    assert marker.ete_has_ts_marker


def test_m_profile() -> None:
    cfg = Etmv4Config(configr=1, traceidr=0, idr0=0x280006E1, idr1=0x4100F454, idr2=0x4,
                      idr12=1, core_name="Cortex-M55")  # fmt: skip
    assert cfg.is_m_profile and cfg.full_version == 0x45 and cfg.ia_size_max == 32
    assert cfg.cid_size == 0 and cfg.vmid_size == 0 and cfg.cond_key_max == 1
    assert cfg.q_support == QSupport.NONE


def test_q_and_conditional_support() -> None:
    cfg = Etmv4Config(configr=0x6700, traceidr=0, idr0=0x1C0C0, idr1=0x4100F443, idr2=0)
    assert cfg.q_support == QSupport.FULL and cfg.q_filter and cfg.q_enabled
    assert cfg.has_cond_trace and cfg.cond_trace == CondTraceMode.ALL and cfg.cond_trace_valid


def test_protocol_specs_configure_from_a_snapshot(corpus: Path) -> None:
    from cstrace.inputs import read_snapshot

    for name, kind, version in (("juno_r1_1", "etmv4", 0x40), ("ete_ip", "ete", 0x50)):
        trace = read_snapshot(corpus / "snapshots" / name)
        source = trace.sources_for(trace.buffers[0])[0]
        proto = get_protocol(source.protocol)
        assert proto is not None and proto.name == kind
        cfg = proto.from_registers(source.registers, source.core, source.version)
        assert isinstance(cfg, Etmv4Config) and cfg.full_version == version
