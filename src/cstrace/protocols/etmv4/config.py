"""ETMv4 / ETE static configuration, computed from the trace unit's ID and control registers.

Input: the register values of a trace source (``TRCCONFIGR``,
``TRCTRACEIDR``, ``TRCIDR0/1/2/8..13`` and, for ETE, ``TRCDEVARCH``) and the
core type it traces (``Cortex-A57``, ``ARM-AA64``, ...). Output: an
:class:`Etmv4Config` holding the raw registers and every option the packet
reader and the program-flow decoder need, already decoded into plain
attributes.

Field positions follow the register descriptions of the Arm Embedded Trace
Macrocell Architecture Specification ETMv4 (IHI0064, chapter 7, "Register
descriptions": TRCIDR0, TRCIDR1, TRCIDR2, TRCIDR8-13, TRCCONFIGR, TRCTRACEIDR)
and, for ETE, the trace unit register descriptions of the Arm ARM (TRCDEVARCH:
ARCHVER is the major version, REVISION the minor one; ETE reports major 5).
The core's architecture and profile come from :func:`cstrace.isa.cores.arch_profile`.

The reference decoder's snapshot loader needs TRCCONFIGR, TRCTRACEIDR, TRCIDR0
and TRCIDR2, and uses defaults for the others (TRCIDR1 = 0x4100F403, i.e.
ETMv4.0; TRCIDR8..13 = 0; TRCDEVARCH = 0x47705A13, i.e. ETE 1.0): we do the
same.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any

from cstrace.isa.cores import arch_profile
from cstrace.isa.types import ArchVersion, Profile
from cstrace.protocols.base import Registers, Setting, register, require

__all__ = [
    "SETTINGS",
    "START",
    "ArchVersion",
    "CondTraceMode",
    "Etmv4Config",
    "Profile",
    "QSupport",
    "ete_from_registers",
    "from_registers",
    "inferred_registers",
    "setting_values",
]

# Defaults the reference snapshot loader uses for registers a snapshot omits.
DEFAULT_TRCIDR1 = 0x4100F403
DEFAULT_TRCDEVARCH = 0x47705A13


class QSupport(IntEnum):
    """TRCIDR0.QSUPP: which Q elements the trace unit can generate."""

    NONE = 0
    ICOUNT_ONLY = 1
    NO_ICOUNT_ONLY = 2
    FULL = 3


class CondTraceMode(IntEnum):
    """TRCCONFIGR.COND: which conditional instructions are traced (ETMv4 A/R only)."""

    DISABLED = 0
    LOADS = 1
    STORES = 2
    LOADS_STORES = 3
    ALL = 7


class Etmv4Config:
    """Decoded static configuration of one ETMv4 or ETE trace unit.

    The raw registers are kept (``configr``, ``idr0`` ...); every option the
    reader and decoder use is an attribute computed once here. ``is_ete`` is
    True for an ETE source; its version then comes from TRCDEVARCH (major 5).
    """

    __slots__ = (
        "arch_version",
        "branch_broadcast",
        "cc_size",
        "cid_enabled",
        "cid_size",
        "comm_trans_p0",
        "commit_opt1",
        "cond_key_max",
        "cond_spec_key_max",
        "cond_trace",
        "configr",
        "core_name",
        "core_profile",
        "cycle_counting",
        "data_address_trace",
        "data_trace",
        "data_value_trace",
        "devarch",
        "ete_has_ts_marker",
        "full_version",
        "has_branch_broadcast",
        "has_cond_trace",
        "has_cycle_count",
        "has_data_trace",
        "has_ret_stack",
        "has_trc_excp_data",
        "ia_size_max",
        "idr0",
        "idr1",
        "idr2",
        "idr8",
        "idr9",
        "idr10",
        "idr11",
        "idr12",
        "idr13",
        "is_ete",
        "lsp0_type",
        "major_version",
        "max_spec_depth",
        "minor_version",
        "num_events",
        "p0_key_max",
        "p1_key_max",
        "p1_special_key_max",
        "q_enabled",
        "q_filter",
        "q_support",
        "ret_stack",
        "timestamp_size",
        "timestamps",
        "trace_id",
        "traceidr",
        "vmid_enabled",
        "vmid_opt",
        "vmid_size",
        "wfi_wfe_branch",
    )

    def __init__(
        self,
        *,
        configr: int,
        traceidr: int,
        idr0: int,
        idr2: int,
        idr1: int = DEFAULT_TRCIDR1,
        idr8: int = 0,
        idr9: int = 0,
        idr10: int = 0,
        idr11: int = 0,
        idr12: int = 0,
        idr13: int = 0,
        devarch: int | None = None,
        core_name: str = "",
        arch_version: ArchVersion | None = None,
        core_profile: Profile | None = None,
    ) -> None:
        self.configr = configr
        self.traceidr = traceidr
        self.idr0 = idr0
        self.idr1 = idr1
        self.idr2 = idr2
        self.idr8 = idr8
        self.idr9 = idr9
        self.idr10 = idr10
        self.idr11 = idr11
        self.idr12 = idr12
        self.idr13 = idr13
        self.devarch = devarch
        self.is_ete = devarch is not None
        self.core_name = core_name
        arch, profile = arch_profile(core_name)
        self.arch_version = arch if arch_version is None else arch_version
        self.core_profile = profile if core_profile is None else core_profile

        # Version: TRCIDR1.TRCARCHMAJ/MIN, or TRCDEVARCH.ARCHVER/REVISION for ETE.
        if devarch is not None:
            self.major_version = (devarch >> 12) & 0xF
            self.minor_version = (devarch >> 16) & 0xF
        else:
            self.major_version = (idr1 >> 8) & 0xF
            self.minor_version = (idr1 >> 4) & 0xF
        self.full_version = (self.major_version << 4) | self.minor_version

        # TRCTRACEIDR.TRACEID
        self.trace_id = traceidr & 0x7F

        # TRCIDR0
        self.has_data_trace = (idr0 & 0x18) == 0x18
        self.has_branch_broadcast = bool(idr0 & 0x20)
        self.has_cond_trace = bool(idr0 & 0x40)
        self.has_cycle_count = bool(idr0 & 0x80)
        self.has_ret_stack = bool(idr0 & 0x200)
        self.num_events = ((idr0 >> 10) & 0x3) + 1
        self.q_support = QSupport((idr0 >> 15) & 0x3)
        self.q_filter = bool(idr0 & 0x4000) and self.q_support != QSupport.NONE
        self.has_trc_excp_data = bool(idr0 & 0x20000)
        ts_size = (idr0 >> 24) & 0x1F
        self.timestamp_size = 48 if ts_size == 0x6 else 64 if ts_size == 0x8 else 0
        self.commit_opt1 = bool(idr0 & 0x20000000) and self.has_cycle_count
        self.comm_trans_p0 = not (idr0 & 0x40000000)
        # ETE: TRCIDR0.TSMARK, timestamp markers (ETE 1.1 and later)
        self.ete_has_ts_marker = self.full_version >= 0x51 and bool(idr0 & 0x800000)

        # TRCIDR2
        self.ia_size_max = 64 if (idr2 & 0x1F) == 0x8 else 32
        self.cid_size = 32 if ((idr2 >> 5) & 0x1F) == 0x4 else 0
        vmidsz = (idr2 >> 10) & 0x1F
        vmid_size = 0
        if vmidsz == 1:
            vmid_size = 8
        elif self.full_version > 0x40:
            vmid_size = 16 if vmidsz == 2 else 32 if vmidsz == 4 else 0
        self.vmid_size = vmid_size
        self.cc_size = ((idr2 >> 25) & 0xF) + 12
        self.vmid_opt = bool(idr2 & 0x20000000) and self.full_version > 0x40
        self.wfi_wfe_branch = bool(idr2 & 0x80000000) and self.full_version >= 0x43

        # TRCIDR8..13
        self.max_spec_depth = idr8 & 0xFFFFFFFF  # MAXSPEC, bits [31:0]
        self.p0_key_max = 1 if idr9 == 0 else idr9
        self.p1_key_max = idr10
        self.p1_special_key_max = idr11
        self.cond_key_max = idr12
        self.cond_spec_key_max = idr13

        # TRCCONFIGR
        self.lsp0_type = (configr >> 1) & 0x3
        lsp0 = self.lsp0_type != 0
        self.data_address_trace = self.has_data_trace and lsp0 and bool(configr & (1 << 16))
        self.data_value_trace = self.has_data_trace and lsp0 and bool(configr & (1 << 17))
        self.data_trace = self.data_address_trace or self.data_value_trace
        self.branch_broadcast = bool(configr & (1 << 3))
        self.cycle_counting = bool(configr & (1 << 4))
        self.cid_enabled = bool(configr & (1 << 6))
        self.vmid_enabled = bool(configr & (1 << 7))
        cond = (configr >> 8) & 0x7
        self.cond_trace = CondTraceMode(cond) if cond in (0, 1, 2, 3, 7) else CondTraceMode.DISABLED
        self.timestamps = bool(configr & (1 << 11))
        self.ret_stack = bool(configr & (1 << 12))
        self.q_enabled = bool(configr & (0x3 << 13))

    @classmethod
    def from_registers(cls, regs: Registers, core: str = "", *, ete: bool = False) -> Etmv4Config:
        """The configuration of an ETMv4 (or, with ``ete``, ETE) trace unit.

        ``regs`` maps register names (``TRCCONFIGR``, ``TRCIDR0``...) to values;
        ``core`` is the traced core's type (``Cortex-A57``), which gives the
        architecture version and profile.
        """
        what = "ETE" if ete else "ETMv4"
        return cls(
            configr=require(regs, "TRCCONFIGR", what),
            traceidr=require(regs, "TRCTRACEIDR", what),
            idr0=require(regs, "TRCIDR0", what),
            idr2=require(regs, "TRCIDR2", what),
            idr1=register(regs, "TRCIDR1", DEFAULT_TRCIDR1),
            idr8=register(regs, "TRCIDR8", 0),
            idr9=0 if ete else register(regs, "TRCIDR9", 0),
            idr10=0 if ete else register(regs, "TRCIDR10", 0),
            idr11=0 if ete else register(regs, "TRCIDR11", 0),
            idr12=0 if ete else register(regs, "TRCIDR12", 0),
            idr13=0 if ete else register(regs, "TRCIDR13", 0),
            devarch=register(regs, "TRCDEVARCH", DEFAULT_TRCDEVARCH) if ete else None,
            core_name=core,
        )

    # -- convenience -----------------------------------------------------------------

    @property
    def is_m_profile(self) -> bool:
        """True when the traced core is an M-profile core (M-profile exception encodings)."""
        return self.core_profile == Profile.M

    @property
    def has_q_elements(self) -> bool:
        """TRCIDR0.QSUPP is not zero: Q packet headers are valid."""
        return self.q_support != QSupport.NONE

    @property
    def cond_trace_valid(self) -> bool:
        """Conditional instruction trace packets are valid headers in this configuration."""
        return self.has_cond_trace and self.cond_trace != CondTraceMode.DISABLED

    @property
    def version_text(self) -> str:
        """The protocol and version, e.g. ``ETMv4.3`` or ``ETE v1.3`` (ETE 1.x is major 5)."""
        if self.is_ete:
            return f"ETE v{self.major_version - 4}.{self.minor_version}"
        return f"ETMv{self.major_version}.{self.minor_version}"

    def __repr__(self) -> str:
        return (
            f"Etmv4Config({self.version_text}, trace_id={self.trace_id:#x}, "
            f"core={self.core_name!r}, configr={self.configr:#x}, idr0={self.idr0:#x}, "
            f"idr1={self.idr1:#x}, idr2={self.idr2:#x}, idr8={self.idr8:#x})"
        )


def from_registers(regs: Registers, core: str = "", version: str = "") -> Etmv4Config:
    """The ETMv4 configuration of a trace unit from its register values and its core type.

    TRCCONFIGR, TRCTRACEIDR, TRCIDR0 and TRCIDR2 are required (a
    :class:`~cstrace.errors.ConfigError` naming the missing one); the others
    take the reference's defaults. ``version`` is not used: TRCIDR1 tells it.
    """
    del version
    return Etmv4Config.from_registers(regs, core)


def ete_from_registers(regs: Registers, core: str = "", version: str = "") -> Etmv4Config:
    """The ETE configuration of a trace unit: the ETMv4 registers plus TRCDEVARCH.

    The reference's ETE configuration reads no TRCIDR9..13: they stay 0.
    """
    del version
    return Etmv4Config.from_registers(regs, core, ete=True)


# -- settings inference chooses (cstrace.inputs.infer) -----------------------------------

SETTINGS: tuple[Setting, ...] = (
    Setting("protocol", ("ETE", "ETM4"), "TRCDEVARCH (ETE) or TRCIDR1 (ETMv4)",
            ("TRCDEVARCH", "TRCIDR1")),
    Setting("vmid", ("usual", 8, 16, 32), "TRCIDR2.VMIDSIZE (bits 14:10)", ("vmid", "TRCIDR2"),
            "vmid"),
    Setting("commit_opt1", (False, True), "TRCIDR0.COMMOPT (bit 29)", ("commit_opt", "TRCIDR0"),
            "commit_opt"),
    Setting("core", ("ARM-AA64", "ARMv8-M", "ARMv7-M"), "the traced core's architecture",
            ("core",)),
    Setting("return_stack", (False, True), "TRCCONFIGR.RS (bit 12)",
            ("return_stack", "TRCCONFIGR"), "return_stack"),
    Setting("wfi_wfe", (True, False), "TRCIDR2.WFXMODE (bit 31)", ("TRCIDR2",)),
    Setting("comm_trans_p0", (True, False), "TRCIDR0.COMMTRANSP0 (bit 30)", ("TRCIDR0",)),
    Setting("data", (False, True), "TRCIDR0.TRCDATA and TRCCONFIGR.DA/DV",
            ("TRCIDR0", "TRCCONFIGR")),
)  # fmt: skip
"""What inference searches, in order; ``vmid`` ``usual`` is the size the version's
cores have (8 bits for ETMv4 on Armv8.0, 32 for ETE). Settings an ETMv4/ETE trace
states in its trace-info packets (cycle counting, conditional tracing, speculation)
are read from them instead (``START`` holds their defaults)."""

START: dict[str, Any] = {
    "protocol": "ETE",
    "vmid": "usual",
    "commit_opt1": False,
    "core": "ARM-AA64",
    "return_stack": False,
    "wfi_wfe": True,
    "comm_trans_p0": True,
    "data": False,
    "q": True,
    "cyclecount": False,
    "conditional": 0,
    "max_spec": 0,
    "ts_marker": False,
}
"""The first candidate inference tries."""


def setting_values(name: str, profile: Profile | None) -> tuple[Any, ...] | None:
    """The candidate values of setting ``name`` a core of ``profile`` can have (None: all of
    :data:`SETTINGS`'). M-profile trace units trace no VMID and no ETE packets."""
    if profile == Profile.M:
        if name == "protocol":
            return ("ETM4",)
        if name == "vmid":
            return ("usual",)
    if profile == Profile.R and name == "protocol":
        return ("ETM4",)
    return None


def vmid_bits(c: Mapping[str, Any]) -> int:
    """The VMID size of a candidate (``usual``: 32 for ETE, else 8)."""
    v = c["vmid"]
    if v == "usual":
        return 32 if c["protocol"] == "ETE" else 8
    return int(v)


def inferred_registers(c: Mapping[str, Any], trace_id: int) -> tuple[str, dict[str, int]]:
    """The source type and registers of a choice of :data:`SETTINGS` values (and of the
    settings read from trace-info packets): ``ETE`` or ``ETM4.6`` (ETMv4's latest
    minor version, whose rules decode the earlier versions' trace alike)."""
    ete = c["protocol"] == "ETE"
    idr0 = 0x1 | 0x20 | 0x40 | 0x80 | 0x200 | (3 << 10) | (8 << 24)
    if c["q"]:
        idr0 |= 3 << 15
    if c["commit_opt1"]:
        idr0 |= 1 << 29
    if not c["comm_trans_p0"]:
        idr0 |= 1 << 30
    if c["ts_marker"]:
        idr0 |= 1 << 23
    if c["data"]:
        idr0 |= 0x18
    vmid = {8: 1, 16: 2, 32: 4}[vmid_bits(c)]
    idr2 = 0x8 | (4 << 5) | (vmid << 10) | (8 << 25)
    if c["wfi_wfe"]:
        idr2 |= 1 << 31
    configr = 0x1 | (1 << 6) | (1 << 7) | (1 << 11)
    if c["cyclecount"]:
        configr |= 1 << 4
    configr |= c["conditional"] << 8
    if c["return_stack"]:
        configr |= 1 << 12
    if c["q"]:
        configr |= 3 << 13
    if c["data"]:
        configr |= (1 << 1) | (3 << 16)
    regs = {
        "TRCCONFIGR": configr,
        "TRCTRACEIDR": trace_id,
        "TRCIDR0": idr0,
        "TRCIDR2": idr2,
        "TRCIDR8": c["max_spec"],
    }
    if ete:
        regs["TRCIDR1"] = 0x4100FFF0
        regs["TRCDEVARCH"] = 0x47705A13 | (3 << 16)
        return "ETE", regs
    regs["TRCIDR1"] = 0x4100F400 | (4 << 8) | (6 << 4)
    return "ETM4.6", regs
