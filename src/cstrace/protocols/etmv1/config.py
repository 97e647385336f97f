"""Classic ETM configuration (ETMv1.x, ETMv2.x): the trace options of one ETM, from ETMCR.

Input: the register values of an ``ETM1.x`` or ``ETM2.x`` trace source (ETMCR,
optionally ETMTRACEIDR) and its version; output: a :class:`ClassicEtmConfig`.

ETMCR fields (ARM IHI 0014Q §3.3.1 "Main Control Register"; thesis ``seeds/004``
§8.4): bit 1 monitor coprocessor register transfers, bits 3:2 data access
traced (bit 2 data values, bit 3 data addresses), bits 6:4 port size (b000 4-bit,
b001 8-bit, b010 16-bit), bit 8 branch output (every branch outputs its
address), bit 12 cycle-accurate tracing, bit 13 half-rate clocking, bits 15:14
context ID size (none, 8, 16 or 32 bits), bits 17:16 port mode (b00 normal, b01
multiplexed, b10 demultiplexed: IHI 0014Q §2.10.1 table 2.15; the thesis gives
b11 for demultiplexed, which the specification does not).
"""

from __future__ import annotations

from dataclasses import dataclass

from cstrace.capture.etmport import PortConfig, PortMode
from cstrace.errors import ConfigError
from cstrace.protocols.base import Registers, register, require

__all__ = ["ClassicEtmConfig", "etmcr", "from_registers"]

CTRL_MONITOR_CPRT = 1 << 1
CTRL_DATA_VALUE = 1 << 2
CTRL_DATA_ADDR = 1 << 3
CTRL_BRANCH_OUTPUT = 1 << 8
CTRL_CYCLE_ACC = 1 << 12
CTRL_HALF_RATE = 1 << 13

_CTXTID_BYTES = (0, 1, 2, 4)
_WIDTHS = {0: 4, 1: 8, 2: 16}


def etmcr(
    *,
    width: int = 8,
    mode: PortMode = PortMode.NORMAL,
    data_value: bool = False,
    data_addr: bool = False,
    ctxid_bytes: int = 0,
    cycle_accurate: bool = False,
    branch_output: bool = False,
    monitor_cprt: bool = False,
) -> int:
    """Build an ETMCR value from its fields (the inverse of :class:`ClassicEtmConfig`)."""
    size = {4: 0, 8: 1, 16: 2}[width]
    ctx = {0: 0, 1: 1, 2: 2, 4: 3}[ctxid_bytes]
    return (
        (CTRL_MONITOR_CPRT if monitor_cprt else 0)
        | (CTRL_DATA_VALUE if data_value else 0)
        | (CTRL_DATA_ADDR if data_addr else 0)
        | (size << 4)
        | (CTRL_BRANCH_OUTPUT if branch_output else 0)
        | (CTRL_CYCLE_ACC if cycle_accurate else 0)
        | (ctx << 14)
        | (int(mode) << 16)
    )


@dataclass(frozen=True)
class ClassicEtmConfig:
    """The static configuration of one ETMv1 or ETMv2 trace source."""

    ctrl: int
    """ETMCR, the main control register."""
    major: int = 1
    """Architecture major version: 1 (ETMv1.x) or 2 (ETMv2.x)."""
    minor: int = 3
    """The ``x`` of ETMv1.x / ETMv2.x."""
    traceidr: int = 0

    def __post_init__(self) -> None:
        if (self.ctrl >> 4) & 7 not in _WIDTHS:
            raise ConfigError(f"ETMCR {self.ctrl:#x}: port size {(self.ctrl >> 4) & 7} not 4/8/16")
        if (self.ctrl >> 16) & 3 == 3:
            raise ConfigError(f"ETMCR {self.ctrl:#x}: reserved port mode b11")

    @classmethod
    def from_registers(cls, regs: Registers, version: str = "1.3") -> ClassicEtmConfig:
        """The configuration from ETMCR (required) and ETMTRACEIDR (default 0).

        ``version`` is the ETM architecture version, ``1.x`` or ``2.x`` (an
        ``ETM`` prefix is accepted): classic ETMs have no register that says it.
        """
        major, minor = _version(version)
        ctrl = require(regs, "ETMCR", f"ETMv{major}")
        return cls(ctrl, major, minor, register(regs, "ETMTRACEIDR", 0))

    @property
    def trace_id(self) -> int:
        """The trace ID (classic ETMs have none on a trace port: 0 unless ETMTRACEIDR says)."""
        return self.traceidr & 0x7F

    @property
    def port(self) -> PortConfig:
        """Width and mode of the trace port, and the PIPESTAT width of this version."""
        return PortConfig(
            _WIDTHS[(self.ctrl >> 4) & 7],
            PortMode((self.ctrl >> 16) & 3),
            4 if self.major >= 2 else 3,
        )

    @property
    def data_value(self) -> bool:
        """Data values are traced (ETMCR bit 2)."""
        return bool(self.ctrl & CTRL_DATA_VALUE)

    @property
    def data_addr(self) -> bool:
        """Data addresses are traced (ETMCR bit 3)."""
        return bool(self.ctrl & CTRL_DATA_ADDR)

    @property
    def monitor_cprt(self) -> bool:
        """Coprocessor register transfers are traced as data (ETMCR bit 1)."""
        return bool(self.ctrl & CTRL_MONITOR_CPRT)

    @property
    def branch_output(self) -> bool:
        """Every branch outputs its address (ETMCR bit 8)."""
        return bool(self.ctrl & CTRL_BRANCH_OUTPUT)

    @property
    def cycle_accurate(self) -> bool:
        """Cycle-accurate tracing (ETMCR bit 12)."""
        return bool(self.ctrl & CTRL_CYCLE_ACC)

    @property
    def ctxid_bytes(self) -> int:
        """Bytes of context ID traced (ETMCR bits 15:14); ETMv1.0/1.1 have none."""
        if self.major == 1 and self.minor < 2:
            return 0
        return _CTXTID_BYTES[(self.ctrl >> 14) & 3]


def _version(version: str) -> tuple[int, int]:
    text = version.strip().upper()
    rest = text[3:] if text.startswith("ETM") else text
    major, _, minor = rest.partition(".")
    try:
        return int(major), int(minor or "0")
    except ValueError:
        raise ConfigError(f"ETM version {version!r}: expected 1.x or 2.x") from None


def from_registers(regs: Registers, core: str = "", version: str = "1.3") -> ClassicEtmConfig:
    """The ETMv1/ETMv2 configuration from register values and the version (``1.3``, ``2.0``)."""
    del core
    return ClassicEtmConfig.from_registers(regs, version)
