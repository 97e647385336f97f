"""ETMv3 configuration: the trace options of one ETM, from its ID and control registers.

Input: the register values of an ``ETM3.x`` trace source (ETMCR, ETMCCER,
ETMIDR, ETMTRACEIDR) and the type of the core it traces; output: an
:class:`Etmv3Config`.

Register fields (ARM IHI 0014Q, chapter 3 "Programmers' Model"):

- ETMCR (0x000): bit 2 data value trace, bit 3 data address trace, bit 12
  cycle-accurate tracing, bits 15:14 context ID size (0, 1, 2 or 4 bytes), bit 20
  data-only mode, bit 28 timestamp enable, bit 30 VMID trace enable;
- ETMCCER (0x07A): bit 22 timestamping implemented, bit 26 virtualisation
  extensions implemented, bit 29 timestamps are 64 bits (else 48);
- ETMIDR (0x079): bits 7:4 minor architecture revision (the ``x`` of ETMv3.x),
  bit 20 alternative branch packet encoding implemented (meaningful from ETMv3.4);
- ETMTRACEIDR (0x080): bits 6:0 the CoreSight trace ID.

The reference decoder needs all four registers and the core's architecture and
profile (Cortex-M cores are ARMv7-M: exception numbers are 9 bits wide).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cstrace.errors import ConfigError
from cstrace.isa.cores import arch_profile
from cstrace.isa.types import ArchVersion, Profile
from cstrace.protocols.base import Registers, Setting, require

__all__ = ["SETTINGS", "START", "Etmv3Config", "from_registers", "inferred_registers"]

# ETMCR bits.
CTRL_DATA_VALUE = 1 << 2
CTRL_DATA_ADDR = 1 << 3
CTRL_CYCLE_ACC = 1 << 12
CTRL_DATA_ONLY = 1 << 20
CTRL_TS_ENABLE = 1 << 28
CTRL_VMID_ENABLE = 1 << 30
# ETMCCER bits.
CCER_HAS_TS = 1 << 22
CCER_VIRT_EXT = 1 << 26
CCER_TS_64BIT = 1 << 29
# ETMIDR bits.
IDR_ALT_BRANCH = 1 << 20

_CTXTID_BYTES = (0, 1, 2, 4)


@dataclass(frozen=True)
class Etmv3Config:
    """The static configuration of one ETMv3 trace source."""

    ctrl: int
    """ETMCR, the main control register."""
    ccer: int
    """ETMCCER, the configuration code extension register."""
    idr: int
    """ETMIDR, the ID register."""
    traceidr: int
    """ETMTRACEIDR, the CoreSight trace ID register."""
    arch: ArchVersion = ArchVersion.V7
    """Architecture version of the traced core."""
    profile: Profile = Profile.A
    """Architecture profile of the traced core."""

    @classmethod
    def from_registers(cls, regs: Registers, core: str = "") -> Etmv3Config:
        """The configuration of an ETMv3 from its four registers and the traced core's type.

        An unknown core is a :class:`~cstrace.errors.ConfigError`: the
        architecture and profile decide how exceptions and branches are encoded.
        """
        ctrl = require(regs, "ETMCR", "ETMv3")
        idr = require(regs, "ETMIDR", "ETMv3")
        ccer = require(regs, "ETMCCER", "ETMv3")
        traceidr = require(regs, "ETMTRACEIDR", "ETMv3")
        arch, profile = arch_profile(core)
        if arch == ArchVersion.UNKNOWN:
            raise ConfigError(
                f"unrecognised core {core or '(none)'!r} for ETMv3 trace; "
                "cannot tell its architecture and profile"
            )
        return cls(ctrl, ccer, idr, traceidr, arch, profile)

    @property
    def trace_id(self) -> int:
        """The CoreSight trace ID (ETMTRACEIDR bits 6:0)."""
        return self.traceidr & 0x7F

    @property
    def minor_rev(self) -> int:
        """The ``x`` of ETMv3.x (ETMIDR bits 7:4)."""
        return (self.idr >> 4) & 0xF

    @property
    def cycle_accurate(self) -> bool:
        """Cycle-accurate tracing (ETMCR bit 12): P-headers carry W atoms."""
        return bool(self.ctrl & CTRL_CYCLE_ACC)

    @property
    def instr_trace(self) -> bool:
        """Instruction trace is present (ETMCR bit 20, data-only mode, is clear)."""
        return not self.ctrl & CTRL_DATA_ONLY

    @property
    def data_value_trace(self) -> bool:
        """Data values are traced (ETMCR bit 2)."""
        return bool(self.ctrl & CTRL_DATA_VALUE)

    @property
    def data_addr_trace(self) -> bool:
        """Data addresses are traced (ETMCR bit 3)."""
        return bool(self.ctrl & CTRL_DATA_ADDR)

    @property
    def data_trace(self) -> bool:
        """Data values or data addresses (or both) are traced."""
        return bool(self.ctrl & (CTRL_DATA_VALUE | CTRL_DATA_ADDR))

    @property
    def ctxtid_bytes(self) -> int:
        """Bytes of context ID in I-sync and context ID packets (ETMCR bits 15:14)."""
        return _CTXTID_BYTES[(self.ctrl >> 14) & 3]

    @property
    def alt_branch(self) -> bool:
        """Branch packets use the alternative address encoding (ETMIDR bit 20, ETMv3.4+)."""
        return bool(self.idr & IDR_ALT_BRANCH) and self.minor_rev >= 4

    @property
    def virt_ext(self) -> bool:
        """The core implements the virtualisation extensions (ETMCCER bit 26): Hyp bits."""
        return bool(self.ccer & CCER_VIRT_EXT)

    @property
    def vmid_trace(self) -> bool:
        """VMID tracing is enabled (ETMCR bit 30)."""
        return bool(self.ctrl & CTRL_VMID_ENABLE)

    @property
    def has_ts(self) -> bool:
        """Timestamps are implemented (ETMCCER bit 22)."""
        return bool(self.ccer & CCER_HAS_TS)

    @property
    def ts_enabled(self) -> bool:
        """Timestamps are enabled (ETMCR bit 28)."""
        return bool(self.ctrl & CTRL_TS_ENABLE)

    @property
    def ts_64bit(self) -> bool:
        """Timestamp packets carry 64 bits (ETMCCER bit 29), else 48."""
        return bool(self.ccer & CCER_TS_64BIT)

    @property
    def v7m(self) -> bool:
        """The traced core is ARMv7-M (extended exception numbers in branch packets)."""
        return self.arch == ArchVersion.V7 and self.profile == Profile.M

    @property
    def alt_isa_in_isync(self) -> bool:
        """The I-sync information byte carries the AltISA (ThumbEE) bit (ETMv3.3+)."""
        return self.minor_rev >= 3


def from_registers(regs: Registers, core: str = "", version: str = "") -> Etmv3Config:
    """The ETMv3 configuration from register values (see :meth:`Etmv3Config.from_registers`)."""
    del version
    return Etmv3Config.from_registers(regs, core)


# -- settings inference chooses (cstrace.inputs.infer) -----------------------------------

SETTINGS: tuple[Setting, ...] = (
    Setting("cyclecount", (False, True), "ETMCR.CycleAccurate (bit 12)", ("cyclecount", "ETMCR"),
            "cyclecount"),
    Setting("context_id", (0, 32, 8, 16), "ETMCR.ContextIDSize (bits 15:14)",
            ("context_id", "ETMCR"), "context_id"),
    Setting("alt_branch", (True, False), "ETMIDR bit 20 (alternative branch encoding, ETMv3.4+)",
            ("alt_branch", "ETMIDR"), "alt_branch"),
    Setting("data_address", (False, True), "ETMCR.DataAddress (bit 3)",
            ("data_address", "ETMCR"), "data_address"),
    Setting("data_value", (False, True), "ETMCR.DataValue (bit 2)", ("data_value", "ETMCR"),
            "data_value"),
    Setting("vmid", (False, True), "ETMCR.VMIDEnable (bit 30)", ("vmid", "ETMCR"), "vmid"),
    Setting("timestamps", (False, True), "ETMCR.TimestampEnable (bit 28)",
            ("timestamp_bits", "ETMCR"), "timestamp_bits"),
    Setting("timestamp_bits", (64, 48), "ETMCCER bit 29 (64-bit timestamps)",
            ("timestamp_bits", "ETMCCER"), "timestamp_bits"),
    Setting("timestamp_gray", (False, True), "ETMCCER bit 28 (natural binary timestamps)",
            ("timestamp_gray", "ETMCCER"), "timestamp_gray"),
    Setting("core", ("ARMv7-A", "ARMv7-M"), "the traced core's architecture", ("core",)),
    Setting("branch_broadcast", (False, True), "ETMCR.BranchOutput (bit 8)",
            ("branch_broadcast", "ETMCR"), "branch_broadcast"),
)  # fmt: skip
"""What inference searches, in order (IHI 0014Q chapter 3)."""

START: dict[str, Any] = {
    "protocol": "ETM3",
    "cyclecount": False,
    "context_id": 0,
    "alt_branch": True,
    "data_address": False,
    "data_value": False,
    "vmid": False,
    "timestamps": False,
    "timestamp_bits": 64,
    "timestamp_gray": False,
    "core": "ARMv7-A",
    "branch_broadcast": False,
}
"""The first candidate inference tries."""


def control_registers(c: Mapping[str, Any]) -> tuple[int, int]:
    """ETMCR and ETMCCER of the settings ETMv3 and PTM share."""
    cr = 0
    if c["cyclecount"]:
        cr |= CTRL_CYCLE_ACC
    cr |= {0: 0, 8: 1, 16: 2, 32: 3}[c["context_id"]] << 14
    if c["vmid"]:
        cr |= CTRL_VMID_ENABLE
    if c["timestamps"]:
        cr |= CTRL_TS_ENABLE
    if c.get("branch_broadcast"):
        cr |= 1 << 8
    ccer = 0
    if c["timestamps"]:
        ccer |= CCER_HAS_TS
        if c["timestamp_bits"] == 64:
            ccer |= CCER_TS_64BIT
        if not c["timestamp_gray"]:
            ccer |= 1 << 28
    if c["vmid"]:
        ccer |= CCER_VIRT_EXT
    return cr, ccer


def inferred_registers(c: Mapping[str, Any], trace_id: int) -> tuple[str, dict[str, int]]:
    """The source type and registers of a choice of :data:`SETTINGS` values: ``ETM3.5``,
    with or without the alternative branch encoding (an ETMv3.5 decodes the earlier
    minor versions' trace alike, the branch encoding apart)."""
    cr, ccer = control_registers(c)
    if c["data_value"]:
        cr |= CTRL_DATA_VALUE
    if c["data_address"]:
        cr |= CTRL_DATA_ADDR
    idr = 0x410CF250
    if c["alt_branch"]:
        idr |= IDR_ALT_BRANCH
    return "ETM3.5", {"ETMCR": cr, "ETMCCER": ccer, "ETMIDR": idr, "ETMTRACEIDR": trace_id}
