"""PTM (PFT 1.0/1.1) configuration from the trace source's ID and control registers.

Input: the register values of a trace source (``ETMCR``, ``ETMCCER``, ``ETMIDR``,
``ETMTRACEIDR``) and the traced core's type; output: a :class:`PtmConfig`.

Register fields follow the Program Flow Trace Architecture Specification
(ARM IHI 0035B), chapter 3, register descriptions (§3.16):

- ETMCR (main control register): bit 8 branch broadcast, bit 12 cycle accurate,
  bits [15:14] context ID size, bit 28 timestamp enable, bit 29 return stack
  enable, bit 30 VMID enable.
- ETMCCER (configuration code extension, §3.16.29): bit 22 timestamps
  implemented, bit 23 return stack implemented, bit 24 DMB/DSB are waypoints,
  bit 25 timestamps on DMB/DSB, bit 26 virtualization extensions, bit 28
  timestamps are natural binary (PFTv1.1), bit 29 64-bit timestamps (PFTv1.1).
- ETMIDR (ID register): bits [7:4] the minor revision, 0 = PFTv1.0
  and 1 = PFTv1.1. PFTv1.0 timestamps are always 48-bit and Gray coded.
- ETMTRACEIDR: bits [6:0] the CoreSight trace ID.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cstrace.protocols.base import Registers, Setting, register, require

__all__ = ["SETTINGS", "START", "PtmConfig", "from_registers", "inferred_registers"]

# ETMCR bits.
_CR_BRANCH_BCAST = 1 << 8
_CR_CYCLE_ACC = 1 << 12
_CR_TS_ENA = 1 << 28
_CR_RET_STACK_ENA = 1 << 29
_CR_VMID_ENA = 1 << 30
# ETMCCER bits.
_CCER_TS_IMPL = 1 << 22
_CCER_RET_STACK_IMPL = 1 << 23
_CCER_DMSB_WPT = 1 << 24
_CCER_TS_DMSB = 1 << 25
_CCER_VIRT_EXT = 1 << 26
_CCER_TS_BINARY = 1 << 28
_CCER_TS_64BIT = 1 << 29

_CTXT_ID_BYTES = (0, 1, 2, 4)

# ETMIDR reset value of a PFTv1.1 PTM, used when the snapshot omits the register.
_DEFAULT_IDR = 0x4100F310


@dataclass(frozen=True, slots=True)
class PtmConfig:
    """Static PTM configuration: raw registers and the fields the reader and decoder use."""

    trace_id: int
    etmcr: int = 0
    etmccer: int = 0
    etmidr: int = _DEFAULT_IDR
    core: str = ""
    """Name of the traced core (``Cortex-A9``...), empty if unknown."""

    @classmethod
    def from_registers(cls, regs: Registers, core: str = "") -> PtmConfig:
        """The configuration of a PTM from its registers and the traced core's type.

        ETMTRACEIDR and ETMCR are required; ETMCCER defaults to 0 and ETMIDR to
        a PFTv1.1 PTM's.
        """
        return cls(
            trace_id=require(regs, "ETMTRACEIDR", "PTM") & 0x7F,
            etmcr=require(regs, "ETMCR", "PTM"),
            etmccer=register(regs, "ETMCCER", 0),
            etmidr=register(regs, "ETMIDR", _DEFAULT_IDR),
            core=core,
        )

    @property
    def minor_rev(self) -> int:
        """PFT minor revision: 0 for PFTv1.0, 1 for PFTv1.1."""
        return (self.etmidr >> 4) & 0xF

    @property
    def cycle_accurate(self) -> bool:
        """Cycle-accurate tracing: atoms, branches and I-syncs carry cycle counts."""
        return bool(self.etmcr & _CR_CYCLE_ACC)

    @property
    def branch_broadcast(self) -> bool:
        """Branch broadcasting: every taken direct branch also gets an address packet."""
        return bool(self.etmcr & _CR_BRANCH_BCAST)

    @property
    def ctxt_id_bytes(self) -> int:
        """Size in bytes of the context ID field of I-sync and context ID packets."""
        return _CTXT_ID_BYTES[(self.etmcr >> 14) & 3]

    @property
    def timestamps(self) -> bool:
        """Timestamp packets are enabled."""
        return bool(self.etmcr & _CR_TS_ENA)

    @property
    def has_timestamps(self) -> bool:
        """The PTM implements timestamps."""
        return bool(self.etmccer & _CCER_TS_IMPL)

    @property
    def ts_64bit(self) -> bool:
        """Timestamps are 64-bit (PFTv1.1 only; PFTv1.0 timestamps are 48-bit)."""
        return self.minor_rev != 0 and bool(self.etmccer & _CCER_TS_64BIT)

    @property
    def ts_binary(self) -> bool:
        """Timestamps are natural binary (PFTv1.1 only); otherwise Gray coded."""
        return self.minor_rev != 0 and bool(self.etmccer & _CCER_TS_BINARY)

    @property
    def has_return_stack(self) -> bool:
        """The PTM implements a return stack."""
        return bool(self.etmccer & _CCER_RET_STACK_IMPL)

    @property
    def return_stack(self) -> bool:
        """Return stack in use: implemented and enabled, so some returns have no address."""
        return self.has_return_stack and bool(self.etmcr & _CR_RET_STACK_ENA)

    @property
    def vmid(self) -> bool:
        """VMID packets are enabled."""
        return bool(self.etmcr & _CR_VMID_ENA)

    @property
    def has_virt_ext(self) -> bool:
        """The processor implements the virtualization extensions."""
        return bool(self.etmccer & _CCER_VIRT_EXT)

    @property
    def dmb_dsb_waypoints(self) -> bool:
        """DMB and DSB instructions are waypoints."""
        return bool(self.etmccer & _CCER_DMSB_WPT)

    @property
    def dmb_dsb_timestamps(self) -> bool:
        """DMB and DSB instructions generate timestamps."""
        return bool(self.etmccer & _CCER_TS_DMSB)


def from_registers(regs: Registers, core: str = "", version: str = "") -> PtmConfig:
    """The PTM configuration from register values (see :meth:`PtmConfig.from_registers`)."""
    del version
    return PtmConfig.from_registers(regs, core)


# -- settings inference chooses (cstrace.inputs.infer) -----------------------------------

SETTINGS: tuple[Setting, ...] = (
    Setting("cyclecount", (False, True), "ETMCR.CycleAccurate (bit 12)", ("cyclecount", "ETMCR"),
            "cyclecount"),
    Setting("context_id", (0, 32, 8, 16), "ETMCR.ContextIDSize (bits 15:14)",
            ("context_id", "ETMCR"), "context_id"),
    Setting("vmid", (False, True), "ETMCR.VMIDEnable (bit 30)", ("vmid", "ETMCR"), "vmid"),
    Setting("timestamps", (False, True), "ETMCR.TimestampEnable (bit 28)",
            ("timestamp_bits", "ETMCR"), "timestamp_bits"),
    Setting("timestamp_bits", (64, 48), "ETMCCER bit 29 (64-bit timestamps)",
            ("timestamp_bits", "ETMCCER"), "timestamp_bits"),
    Setting("timestamp_gray", (False, True), "ETMCCER bit 28 (natural binary timestamps)",
            ("timestamp_gray", "ETMCCER"), "timestamp_gray"),
    Setting("return_stack", (False, True), "ETMCR.ReturnStackEnable (bit 29)",
            ("return_stack", "ETMCR"), "return_stack"),
    Setting("dmb_dsb_waypoints", (False, True), "ETMCCER bit 24 (DMB/DSB are waypoints)",
            ("dmb_dsb_waypoints", "ETMCCER"), "dmb_dsb_waypoints"),
    Setting("branch_broadcast", (False, True), "ETMCR.BranchBroadcast (bit 8)",
            ("branch_broadcast", "ETMCR"), "branch_broadcast"),
)  # fmt: skip
"""What inference searches, in order (IHI 0035B §3.16)."""

START: dict[str, Any] = {
    "protocol": "PTM",
    "cyclecount": False,
    "context_id": 0,
    "vmid": False,
    "timestamps": False,
    "timestamp_bits": 64,
    "timestamp_gray": False,
    "return_stack": False,
    "dmb_dsb_waypoints": False,
    "branch_broadcast": False,
    "core": "ARMv7-A",
}
"""The first candidate inference tries."""


def inferred_registers(c: Mapping[str, Any], trace_id: int) -> tuple[str, dict[str, int]]:
    """The source type and registers of a choice of :data:`SETTINGS` values (PFTv1.1)."""
    cr = {0: 0, 8: 1, 16: 2, 32: 3}[c["context_id"]] << 14
    ccer = 0
    if c["cyclecount"]:
        cr |= _CR_CYCLE_ACC
    if c["vmid"]:
        cr |= _CR_VMID_ENA
        ccer |= _CCER_VIRT_EXT
    if c["branch_broadcast"]:
        cr |= _CR_BRANCH_BCAST
    if c["timestamps"]:
        cr |= _CR_TS_ENA
        ccer |= _CCER_TS_IMPL
        if c["timestamp_bits"] == 64:
            ccer |= _CCER_TS_64BIT
        if not c["timestamp_gray"]:
            ccer |= _CCER_TS_BINARY
    if c["return_stack"]:
        cr |= _CR_RET_STACK_ENA
        ccer |= _CCER_RET_STACK_IMPL
    if c["dmb_dsb_waypoints"]:
        ccer |= _CCER_DMSB_WPT
    return "PTM1.1", {
        "ETMCR": cr,
        "ETMCCER": ccer,
        "ETMIDR": 0x411CF300 | (1 << 4),
        "ETMTRACEIDR": trace_id,
    }
