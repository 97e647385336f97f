"""The CoreSight (``cs_etm``) AUXTRACE_INFO of a perf.data file: one trace unit per CPU.

Input: the private words of a PERF_RECORD_AUXTRACE_INFO record of type 3, as
the kernel's ``tools/perf/util/cs-etm.h`` lays them out: a header (its version,
the PMU type and CPU count in one word, the snapshot flag), then one block per
CPU: a magic number (ETMv3/PTM, ETMv4 or ETE), the CPU, and the trace unit's
register values. Header version 0 has no parameter count in the blocks (the
register lists have fixed lengths); versions 1 and 2 give it, so blocks with
more registers than cstrace knows are read too. Version 2 says the trace IDs
come in PERF_RECORD_AUX_OUTPUT_HW_ID records; the ``...TRACEIDR`` values then
have bit 31 set.

Output: a :class:`CsEtmInfo` with a :class:`CpuTrace` per CPU: its protocol
(``etmv4``, ``ete``, ``etmv3`` or ``ptm``), source type (``ETM4.2``, ``ETE``,
``PTM1.1``...), registers named as the protocols' ``from_registers`` read
them, and the trace ID the metadata gives (None when it must come from the
records). A malformed block is a located :class:`~cstrace.errors.InputError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cstrace.errors import InputError

__all__ = [
    "CS_ETM_AUXTRACE_TYPE",
    "ETE_MAGIC",
    "ETMV3_MAGIC",
    "ETMV4_MAGIC",
    "CpuTrace",
    "CsEtmInfo",
    "parse_cs_etm_info",
]

CS_ETM_AUXTRACE_TYPE = 3
"""The AUXTRACE_INFO type of CoreSight ETM trace (``PERF_AUXTRACE_CS_ETM``)."""

ETMV3_MAGIC = 0x3030303030303030
"""The magic number of an ETMv3 or PTM block."""
ETMV4_MAGIC = 0x4040404040404040
"""The magic number of an ETMv4 block."""
ETE_MAGIC = 0x5050505050505050
"""The magic number of an ETE block."""

# The registers of each block, in their order (cs-etm.h); TS_SOURCE says where the
# timestamps come from (1: the virtual counter).
_V3_REGS = ("ETMCR", "ETMTRACEIDR", "ETMCCER", "ETMIDR")
_V4_REGS = (
    "TRCCONFIGR",
    "TRCTRACEIDR",
    "TRCIDR0",
    "TRCIDR1",
    "TRCIDR2",
    "TRCIDR8",
    "TRCAUTHSTATUS",
    "TS_SOURCE",
)
_ETE_REGS = (
    "TRCCONFIGR",
    "TRCTRACEIDR",
    "TRCIDR0",
    "TRCIDR1",
    "TRCIDR2",
    "TRCIDR8",
    "TRCAUTHSTATUS",
    "TRCDEVARCH",
    "TS_SOURCE",
)
# Version 0 blocks: fixed lengths, without TS_SOURCE (ETE did not exist yet).
_V0_COUNT = {ETMV3_MAGIC: 4, ETMV4_MAGIC: 7}

_TRACE_ID_UNUSED = 1 << 31
"""Bit 31 of a TRACEIDR value: the ID is not this value, it comes in a HW_ID record."""

_NAMES = {ETMV3_MAGIC: "ETMv3/PTM", ETMV4_MAGIC: "ETMv4", ETE_MAGIC: "ETE"}
_MAX_CPUS = 4096


@dataclass(frozen=True)
class CpuTrace:
    """The trace unit of one CPU: protocol, source type, registers and trace ID."""

    cpu: int
    magic: int
    protocol: str
    """``etmv4``, ``ete``, ``etmv3`` or ``ptm``."""
    source_type: str
    """``ETM4.2``, ``ETE``, ``ETM3.5``, ``PTM1.1``..."""
    registers: dict[str, int]
    """Register values by name (``TRCCONFIGR``...), plus ``TS_SOURCE`` when given."""
    trace_id: int | None
    """The trace ID the metadata gives; None when it is only in AUX_OUTPUT_HW_ID records."""
    offset: int
    """File offset of the block."""

    @property
    def magic_name(self) -> str:
        """``ETMv3/PTM``, ``ETMv4`` or ``ETE``."""
        return _NAMES.get(self.magic, f"{self.magic:#x}")

    @property
    def core(self) -> str:
        """The core type the decoders default to for this unit (as perf and simpleperf do).

        ETMv4: an Armv8-A core; ETE: AArch64 (Armv9-A); ETMv3 and PTM: Armv7-A.
        """
        if self.protocol == "ete":
            return "ARM-AA64"
        if self.protocol == "etmv4":
            return "ARMv8-A"
        return "ARMv7-A"

    @property
    def context_in_vmid(self) -> bool:
        """ETMv4/ETE: the process is traced as the VMID (CONTEXTIDR_EL2, a kernel at EL2).

        TRCCONFIGR.VMID or .VMIDOPT set, as perf and simpleperf read it.
        """
        if self.protocol not in ("etmv4", "ete"):
            return False
        return bool(self.registers.get("TRCCONFIGR", 0) & ((1 << 7) | (1 << 15)))


@dataclass
class CsEtmInfo:
    """The cs_etm AUXTRACE_INFO: header and one :class:`CpuTrace` per CPU."""

    version: int
    pmu_type: int
    num_cpu: int
    snapshot: bool
    cpus: list[CpuTrace] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Blocks that were skipped (an unknown magic number), described."""

    @property
    def dynamic_ids(self) -> bool:
        """Whether trace IDs come in AUX_OUTPUT_HW_ID records (version 2, or IDs marked unused)."""
        return self.version >= 2 or any(c.trace_id is None for c in self.cpus)


def _etmv4_type(idr1: int) -> str:
    major = (idr1 >> 8) & 0xF
    minor = (idr1 >> 4) & 0xF
    return f"ETM{major or 4}.{minor}"


def _etmv3_type(etmidr: int) -> tuple[str, str]:
    """(protocol, source type) of an ETMv3 block from ETMIDR (PTM when bits 11..8 are 3)."""
    major = (etmidr >> 8) & 0xF
    minor = (etmidr >> 4) & 0xF
    if major == 3:
        return "ptm", f"PTM1.{minor}"
    return "etmv3", f"ETM3.{minor}"


def _trace_id(value: int) -> int | None:
    if value & _TRACE_ID_UNUSED:
        return None
    tid = value & 0x7F
    return tid if 0 < tid < 0x70 else None


def parse_cs_etm_info(priv: tuple[int, ...], path: str, offset: int) -> CsEtmInfo:
    """The cs_etm AUXTRACE_INFO from its private words (at file ``offset`` of ``path``)."""

    def bad(message: str, at: int) -> InputError:
        return InputError(f"cs_etm AUXTRACE_INFO: {message}", path=path, offset=offset + 8 * at)

    if len(priv) < 3:
        raise bad(f"{len(priv)} words, the header needs 3", 0)
    version = priv[0]
    if version > 2:
        raise bad(f"header version {version} is not known (0, 1 and 2 are)", 0)
    pmu_type = priv[1] >> 32
    num_cpu = priv[1] & 0xFFFFFFFF
    if not 0 < num_cpu <= _MAX_CPUS:
        raise bad(f"{num_cpu} CPUs", 1)
    info = CsEtmInfo(version, pmu_type, num_cpu, bool(priv[2]))
    pos = 3
    for _ in range(num_cpu):
        if pos + 2 > len(priv):
            raise bad(f"the record ends before the blocks of {num_cpu} CPUs", pos)
        start = pos
        magic, cpu = priv[pos], priv[pos + 1]
        if version == 0:
            count = _V0_COUNT.get(magic)
            if count is None:
                raise bad(f"unknown magic number {magic:#x} in a version 0 block", pos)
            pos += 2
        else:
            if pos + 3 > len(priv):
                raise bad("a block ends before its parameter count", pos)
            count = priv[pos + 2]
            pos += 3
        if pos + count > len(priv):
            raise bad(f"a block of {count} parameters goes past the end of the record", start)
        values = priv[pos : pos + count]
        pos += count
        if magic not in _NAMES:
            info.skipped.append(f"CPU {cpu}: unknown magic number {magic:#x} ({count} parameters)")
            continue
        names = {ETMV3_MAGIC: _V3_REGS, ETMV4_MAGIC: _V4_REGS, ETE_MAGIC: _ETE_REGS}[magic]
        regs = {
            (names[k] if k < len(names) else f"PARAM{k}"): int(v) & 0xFFFFFFFF
            for k, v in enumerate(values)
        }
        needed = names[:4] if magic == ETMV3_MAGIC else names[:5]
        missing = [n for n in needed if n not in regs]
        if missing:
            raise bad(f"CPU {cpu}: the block lacks {', '.join(missing)}", start)
        if magic == ETMV3_MAGIC:
            protocol, source_type = _etmv3_type(regs["ETMIDR"])
            trace_id = _trace_id(int(values[1]))
        elif magic == ETMV4_MAGIC:
            protocol, source_type = "etmv4", _etmv4_type(regs["TRCIDR1"])
            trace_id = _trace_id(int(values[1]))
        else:
            protocol, source_type = "ete", "ETE"
            trace_id = _trace_id(int(values[1]))
        info.cpus.append(
            CpuTrace(int(cpu), magic, protocol, source_type, regs, trace_id, offset + 8 * start)
        )
    return info
