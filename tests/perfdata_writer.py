"""Writes a cstrace :class:`~cstrace.trace.Trace` as a Linux ``perf.data`` file, for the tests.

Input: a trace with CoreSight sources (ETMv4, ETE, ETMv3, PTM), their buffers
and memory dumps, typically from :func:`cstrace.inputs.read_snapshot`.
Output: a ``perf.data`` file (:func:`write_perf_data`, or the bytes from
:func:`encode_perf_data`) of a CPU-wide ``cs_etm`` recording that Linux
``perf report -D`` reads, and that a perf.data reader can turn back into the
same sources, buffers and memory. :func:`plan` says how the trace is laid out
(which source became which CPU, which buffer which AUX data), so tests can
check a reader against it.

The layout follows the kernel's ``tools/perf/Documentation/perf.data-file-format.txt``,
``include/uapi/linux/perf_event.h`` and ``tools/perf/util/cs-etm.h``::

    file header (PERFILE2, 104 bytes)
    the attribute's sample IDs (u64 each, one per CPU)
    the attribute: perf_event_attr (PERF_ATTR_SIZE_VER7, 128 bytes) + where its IDs are
    data section:
      TIME_CONV                  identity conversion (CoreSight timestamps are perf time)
      AUXTRACE_INFO              cs_etm, header version 1: version, PMU type << 32 | CPUs,
                                 snapshot mode, then per CPU: magic, CPU, parameter count,
                                 the registers in cs-etm.h order
      COMM                       the one process the trace is attributed to
      MMAP2 per memory dump      a file mapping of the dump's bytes at its address
      FINISHED_ROUND
      per CPU with trace:        ITRACE_START, then one AUX record per buffer
      AUXTRACE per buffer        the buffer's bytes, in its CPU's AUX area
      FINISHED_ROUND
    feature section table, then the features: BUILD_ID (when build IDs are given),
    HOSTNAME, VERSION, ARCH, NRCPUS, CMDLINE, EVENT_DESC, PMU_MAPPINGS, AUXTRACE
    (the index of the AUXTRACE records)

Choices, where a snapshot does not say what a recording would:

- **CPUs**: each trace source that perf describes (``etmv4``, ``ete``,
  ``etmv3``, ``ptm``) is a CPU; its number is the trailing number of its core
  name (``cpu_3``, ``Cortex-A57_0``) when those are distinct across core names,
  else the core names' order; ``cpus`` maps core names to numbers by hand.
  Several sources of one core (the sessions of a multi-session capture) share
  the CPU and must have the same registers. STM and ITM sources are left out:
  the ``cs_etm`` metadata has no block for them, and a buffer that holds only
  their trace is not written.
- **Registers**: the per-CPU block holds the values the protocol's
  ``from_registers`` would decode with (its defaults for registers the source
  omits); ``TRCAUTHSTATUS``, which cstrace does not use, is 0 when absent.
  The trace ID in the block is the one the registers give.
- **Buffers**: a CoreSight-formatted buffer (``coresight``: 16-byte frames,
  as an ETB or ETR holds them) is AUX data in the default format, on the lowest
  CPU among its sources (perf decodes every trace ID in every CPU's formatted
  data, so one copy is enough); a single-source buffer (``source_data``) is raw
  AUX data (flag ``PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW``, as from TRBE) on its
  source's CPU. Each buffer is one AUXTRACE record (``idx`` = the CPU, ``tid``
  = -1, ``reference`` = its number) and one AUX record over the same bytes. As
  ``perf record`` does, the AUXTRACE data is padded with zeros to a multiple of
  8 bytes and its ``size`` counts the padding, while the AUX record gives the
  true size: a reader must take the AUX record's. Several buffers of one CPU
  follow each other in its AUX area, each at the padded end of the one before.
  Other capture formats (with FSYNC/HSYNC, port formats) raise ``ValueError``.
- **Memory**: each distinct dump (file, offset, length, address) is a
  ``PERF_RECORD_MMAP2`` of a named file (the dump's path relative to the folder
  that holds all dumps) with ``pgoff`` = the dump's offset in its file, in the
  one process ``pid`` named ``comm``, readable and executable. Dumps for
  different cores are not told apart (perf maps memory per process, not per
  CPU). No build IDs, since dumps have none, unless ``build_ids`` gives them by
  mapping name (the dump of an ELF file's segments then names that file, found
  by its build ID): they go in the BUILD_ID feature.
- **Time**: records are stamped 1 ns apart from ``1 s`` in file order (perf
  orders by time); TIME_CONV is the identity.
- **Attribute**: ``type`` = ``pmu_type`` (the same as in AUXTRACE_INFO);
  ``sample_type`` = IP | TID | TIME | CPU | IDENTIFIER (IP as ``perf record`` sets it;
  it ends no non-sample record) with ``sample_id_all``,
  so every non-sample record ends with (pid, tid, time, cpu, id), the id one
  per CPU as listed with the attribute; ``config`` carries the ``cs_etm``
  format bits (cycacc 12, contextid 14, timestamp 28, retstack 29) that the
  first source's TRCCONFIGR or ETMCR enables. The event is ``cs_etm//u``
  (``exclude_kernel``, ``exclude_hv``): the recording has no kernel map, and
  perf warns of missing kernel symbols for an event that counts the kernel.
  Memory at kernel addresses (juno's kernel dump) is still mapped into the
  process, where a reader finds it; perf's own decoder would look for it in
  the kernel's maps instead.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.trace import Buffer, Source, Trace

__all__ = [
    "ATTR_SIZE",
    "DEFAULT_PMU_TYPE",
    "ETE_MAGIC",
    "ETMV3_MAGIC",
    "ETMV4_MAGIC",
    "AuxChunk",
    "CpuBlock",
    "Layout",
    "MapEntry",
    "encode_perf_data",
    "plan",
    "write_perf_data",
]

# -- numbers from the kernel headers (facts, not code) -----------------------------------

MAGIC = b"PERFILE2"
FILE_HEADER_SIZE = 104  # magic, size, attr_size, 3 sections of 16, 256 feature bits
ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7
DEFAULT_PMU_TYPE = 8  # cs_etm's type is dynamic; 8 is what the real recordings hold

# record types
REC_COMM = 3
REC_MMAP2 = 10
REC_AUX = 11
REC_ITRACE_START = 12
REC_FINISHED_ROUND = 68
REC_AUXTRACE_INFO = 70
REC_AUXTRACE = 71
REC_TIME_CONV = 79
REC_HEADER_BUILD_ID = 67  # the record type of the BUILD_ID feature's entries

# perf_event_header.misc
MISC_USER = 2

# sample_type bits
SAMPLE_IP = 1 << 0
SAMPLE_TID = 1 << 1
SAMPLE_TIME = 1 << 2
SAMPLE_CPU = 1 << 7
SAMPLE_IDENTIFIER = 1 << 16
SAMPLE_TYPE = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_IDENTIFIER

# perf_event_attr flag bits
ATTR_EXCLUDE_KERNEL = 1 << 5
ATTR_EXCLUDE_HV = 1 << 6
ATTR_MMAP = 1 << 8
ATTR_COMM = 1 << 9
ATTR_SAMPLE_ID_ALL = 1 << 18
ATTR_MMAP2 = 1 << 23

# PERF_RECORD_AUX flags
AUX_FLAG_RAW = 0x0100  # PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW

# feature bits (tools/perf/util/header.h)
FEAT_BUILD_ID = 2
FEAT_HOSTNAME = 3
FEAT_VERSION = 5
FEAT_ARCH = 6
FEAT_NRCPUS = 7
FEAT_CMDLINE = 11
FEAT_EVENT_DESC = 12
FEAT_PMU_MAPPINGS = 16
FEAT_AUXTRACE = 18

# cs_etm AUXTRACE_INFO (cs-etm.h)
AUXTRACE_CS_ETM = 3  # PERF_AUXTRACE_CS_ETM
CS_HEADER_VERSION = 1
ETMV3_MAGIC = 0x3030303030303030
ETMV4_MAGIC = 0x4040404040404040
ETE_MAGIC = 0x5050505050505050
ETMV3_PARAMS = ("ETMCR", "ETMTRACEIDR", "ETMCCER", "ETMIDR")
ETMV4_PARAMS = (
    "TRCCONFIGR",
    "TRCTRACEIDR",
    "TRCIDR0",
    "TRCIDR1",
    "TRCIDR2",
    "TRCIDR8",
    "TRCAUTHSTATUS",
)
ETE_PARAMS = (*ETMV4_PARAMS, "TRCDEVARCH")

# cs_etm PMU format bits (the kernel's ETM_OPT_*)
OPT_CYCACC = 12
OPT_CTXTID = 14
OPT_TS = 28
OPT_RETSTK = 29

PROT_READ_EXEC = 0x1 | 0x4
MAP_PRIVATE = 0x2
START_TIME = 1_000_000_000
FORMATTED = "coresight"
RAW = "source_data"


@dataclass(frozen=True)
class CpuBlock:
    """The cs_etm metadata of one CPU: magic number and parameters in ``cs-etm.h`` order."""

    cpu: int
    magic: int
    params: tuple[tuple[str, int], ...]
    """(register name, value), in the order the kernel's ``cs-etm.h`` lists them."""
    sources: tuple[str, ...]
    """The trace sources (names in the trace) this CPU stands for."""

    @property
    def trace_id(self) -> int:
        """The CoreSight trace ID the block's registers give."""
        name = "ETMTRACEIDR" if self.magic == ETMV3_MAGIC else "TRCTRACEIDR"
        return dict(self.params)[name] & 0x7F


@dataclass(frozen=True)
class AuxChunk:
    """One buffer as AUX data: its CPU, where it lies in that CPU's AUX area, its format."""

    buffer: str
    cpu: int
    offset: int
    size: int
    raw: bool
    """Raw single-source trace (AUX flag 0x100) rather than CoreSight frames."""


@dataclass(frozen=True)
class MapEntry:
    """One memory dump as a file mapping of the process."""

    filename: str
    address: int
    length: int
    pgoff: int


@dataclass(frozen=True)
class Layout:
    """How a trace is laid out in perf.data: CPUs, AUX data and mappings, and what was left out."""

    cpus: tuple[CpuBlock, ...]
    chunks: tuple[AuxChunk, ...]
    maps: tuple[MapEntry, ...]
    skipped_sources: tuple[str, ...]
    """Sources with no cs_etm metadata (STM, ITM, ...)."""
    skipped_buffers: tuple[str, ...]
    """Buffers that hold no trace of a described source."""

    def cpu_of(self, source: str) -> int:
        """The CPU standing for trace source ``source``."""
        for block in self.cpus:
            if source in block.sources:
                return block.cpu
        raise KeyError(source)


# -- planning --------------------------------------------------------------------------------


def _trailing_number(name: str) -> int | None:
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else None


def _cpu_numbers(core_names: Sequence[str], given: Mapping[str, int] | None) -> dict[str, int]:
    """A CPU number for each core name: given, else trailing numbers, else their order."""
    if given is not None:
        missing = [c for c in core_names if c not in given]
        if missing:
            raise ValueError(f"no CPU number given for core(s) {', '.join(missing)}")
        numbers = {c: given[c] for c in core_names}
    else:
        trailing = {c: _trailing_number(c) for c in core_names}
        values = list(trailing.values())
        if None not in values and len(set(values)) == len(values):
            numbers = {c: n for c, n in trailing.items() if n is not None}
        else:
            numbers = {c: i for i, c in enumerate(core_names)}
    if len(set(numbers.values())) != len(numbers):
        raise ValueError(f"two cores share a CPU number: {numbers}")
    return numbers


def _params(source: Source) -> tuple[int, tuple[tuple[str, int], ...]]:
    """The magic number and metadata parameters of ``source``, as its decoder configures it."""
    regs = source.registers
    match source.protocol:
        case "etmv4" | "ete":
            ete = source.protocol == "ete"
            c = Etmv4Config.from_registers(regs, source.core, ete=ete)
            values = {
                "TRCCONFIGR": c.configr,
                "TRCTRACEIDR": c.traceidr,
                "TRCIDR0": c.idr0,
                "TRCIDR1": c.idr1,
                "TRCIDR2": c.idr2,
                "TRCIDR8": c.idr8,
                "TRCAUTHSTATUS": regs.get("TRCAUTHSTATUS", 0),
                "TRCDEVARCH": c.devarch or 0,
            }
            names = ETE_PARAMS if ete else ETMV4_PARAMS
            return (ETE_MAGIC if ete else ETMV4_MAGIC), tuple((n, values[n]) for n in names)
        case "etmv3":
            e3 = Etmv3Config.from_registers(regs, source.core)
            values = {
                "ETMCR": e3.ctrl,
                "ETMTRACEIDR": e3.traceidr,
                "ETMCCER": e3.ccer,
                "ETMIDR": e3.idr,
            }
        case "ptm":
            p = PtmConfig.from_registers(regs, source.core)
            values = {
                "ETMCR": p.etmcr,
                "ETMTRACEIDR": regs["ETMTRACEIDR"],  # required by from_registers
                "ETMCCER": p.etmccer,
                "ETMIDR": p.etmidr,
            }
        case _:
            raise ValueError(f"no cs_etm metadata for protocol {source.protocol!r}")
    return ETMV3_MAGIC, tuple((n, values[n]) for n in ETMV3_PARAMS)


def _described(source: Source) -> bool:
    return source.protocol in ("etmv4", "ete", "etmv3", "ptm") and bool(source.core_name)


def _maps(trace: Trace) -> tuple[MapEntry, ...]:
    """The distinct memory dumps as mappings, named relative to the folder holding them all."""
    seen: dict[tuple[str, int, int, int], None] = {}
    for d in trace.dumps:
        length = d.length if d.length is not None else d.file.size() - d.offset
        if length > 0:
            seen.setdefault((d.file.name, d.offset, length, d.address), None)
    if not seen:
        return ()
    names = [k[0] for k in seen]
    root = os.path.commonpath([os.path.dirname(n) or "." for n in names])
    return tuple(
        MapEntry(os.path.relpath(name, root) if root else name, address, length, offset)
        for name, offset, length, address in seen
    )


def plan(trace: Trace, *, cpus: Mapping[str, int] | None = None) -> Layout:
    """How :func:`write_perf_data` lays ``trace`` out (see the module's docstring).

    ``cpus`` maps core names to CPU numbers (default: from the names). A
    ``ValueError`` says why a trace cannot be written: no source perf can
    describe, two sources of one CPU with different registers, a buffer in a
    format perf.data does not carry; a :class:`~cstrace.errors.ConfigError`
    that a source lacks a register its protocol requires.
    """
    described = [s for s in trace.sources if _described(s)]
    skipped_sources = tuple(s.name for s in trace.sources if not _described(s))
    if not described:
        raise ValueError("no ETMv4, ETE, ETMv3 or PTM source with a core: nothing for cs_etm")
    core_names = list(dict.fromkeys(s.core_name or "" for s in described))
    numbers = _cpu_numbers(core_names, cpus)

    blocks: dict[int, CpuBlock] = {}
    for s in described:
        cpu = numbers[s.core_name or ""]
        magic, params = _params(s)
        old = blocks.get(cpu)
        if old is not None and (old.magic, old.params) != (magic, params):
            raise ValueError(
                f"sources {', '.join(old.sources)} and {s.name} trace CPU {cpu} "
                "with different registers; cs_etm has one block per CPU"
            )
        srcs = (*old.sources, s.name) if old else (s.name,)
        blocks[cpu] = CpuBlock(cpu, magic, params, srcs)

    cpu_of_source = {name: b.cpu for b in blocks.values() for name in b.sources}
    aux_end: dict[int, int] = {}
    chunks: list[AuxChunk] = []
    skipped_buffers: list[str] = []
    for buf in trace.buffers:
        owners = sorted(
            {cpu_of_source[s.name] for s in trace.sources_for(buf) if s.name in cpu_of_source}
        )
        if not owners:
            skipped_buffers.append(buf.name)
            continue
        chunks.append(_chunk(buf, owners, aux_end))
    if not chunks:
        raise ValueError("no buffer holds trace of an ETMv4, ETE, ETMv3 or PTM source")
    return Layout(
        cpus=tuple(blocks[c] for c in sorted(blocks)),
        chunks=tuple(chunks),
        maps=_maps(trace),
        skipped_sources=skipped_sources,
        skipped_buffers=tuple(skipped_buffers),
    )


def _chunk(buf: Buffer, owners: Sequence[int], aux_end: dict[int, int]) -> AuxChunk:
    if buf.format == FORMATTED:
        raw = False
    elif buf.format == RAW:
        if len(owners) != 1:
            raise ValueError(f"single-source buffer {buf.name} is claimed by CPUs {owners}")
        raw = True
    else:
        raise ValueError(
            f"buffer {buf.name} is in format {buf.format!r}; perf.data AUX data is "
            f"CoreSight frames ({FORMATTED!r}) or raw single-source trace ({RAW!r})"
        )
    cpu = owners[0]
    offset = aux_end.get(cpu, 0)
    size = buf.size()
    aux_end[cpu] = offset + size + _padding(size)
    return AuxChunk(buf.name, cpu, offset, size, raw)


def _padding(size: int) -> int:
    """The zero bytes after ``size`` bytes of AUX data up to a multiple of 8."""
    return -size % 8


# -- encoding --------------------------------------------------------------------------------


def _pad8(data: bytes) -> bytes:
    """``data`` NUL-terminated and padded to a multiple of 8 bytes."""
    data += b"\0"
    return data + b"\0" * (-len(data) % 8)


def _record(kind: int, body: bytes, misc: int = 0) -> bytes:
    size = 8 + len(body)
    if size % 8 or size > 0xFFFF:
        raise ValueError(f"record of type {kind} has size {size}")
    return struct.pack("<IHH", kind, misc, size) + body


def _header_string(text: str) -> bytes:
    """A perf_header_string: u32 length, then the NUL-terminated text padded to 64 bytes."""
    raw = text.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 64)
    return struct.pack("<I", len(raw)) + raw


def _config(block: CpuBlock) -> int:
    """The cs_etm PMU ``config`` bits that ``block``'s control register enables."""
    regs = dict(block.params)
    if block.magic == ETMV3_MAGIC:
        cr = regs["ETMCR"]
        bits = {OPT_CYCACC: 1 << 12, OPT_CTXTID: 3 << 14, OPT_TS: 1 << 28}
        return sum(1 << opt for opt, mask in bits.items() if cr & mask)
    cfg = regs["TRCCONFIGR"]
    bits = {OPT_CYCACC: 1 << 4, OPT_CTXTID: 1 << 6, OPT_TS: 1 << 11, OPT_RETSTK: 1 << 12}
    return sum(1 << opt for opt, mask in bits.items() if cfg & mask)


def _attr(pmu_type: int, config: int, timeless: bool = False) -> bytes:
    """A perf_event_attr (PERF_ATTR_SIZE_VER7) for the cs_etm event (per thread: without
    ``PERF_SAMPLE_TIME``, as ``perf record --per-thread`` leaves it out for cs_etm)."""
    flags = ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV | ATTR_MMAP | ATTR_COMM
    flags |= ATTR_SAMPLE_ID_ALL | ATTR_MMAP2
    head = struct.pack(
        "<IIQQQQQ",
        pmu_type,
        ATTR_SIZE,
        config,
        1,  # sample_period
        SAMPLE_TYPE & ~SAMPLE_TIME if timeless else SAMPLE_TYPE,
        0,  # read_format
        flags,
    )
    out = head + b"\0" * (ATTR_SIZE - len(head))
    assert len(out) == ATTR_SIZE
    return out


def _auxtrace_info(pmu_type: int, blocks: Sequence[CpuBlock]) -> bytes:
    words = [CS_HEADER_VERSION, (pmu_type << 32) | len(blocks), 0]
    for b in blocks:
        words += [b.magic, b.cpu, len(b.params), *(v for _, v in b.params)]
    body = struct.pack("<II", AUXTRACE_CS_ETM, 0) + struct.pack(f"<{len(words)}Q", *words)
    return _record(REC_AUXTRACE_INFO, body)


@dataclass
class _Clock:
    """Hands out increasing record times and builds sample_id trailers."""

    pid: int
    time: int = START_TIME
    timed: bool = True
    """Whether records carry their time (not in a per-thread recording)."""

    def trailer(self, cpu: int) -> bytes:
        """The sample_id of the next record on ``cpu``: pid, tid, time, cpu, res, identifier."""
        self.time += 1
        if not self.timed:
            return struct.pack("<IIIIQ", self.pid, self.pid, cpu, 0, _sample_id(cpu))
        return struct.pack("<IIQIIQ", self.pid, self.pid, self.time, cpu, 0, _sample_id(cpu))


def _sample_id(cpu: int) -> int:
    """The sample ID of ``cpu``'s event (perf record gets one per CPU from the kernel)."""
    return 0x100 + cpu


def _features(
    layout: Layout,
    attr: bytes,
    pmu_type: int,
    arch: str,
    cmdline: Sequence[str],
    auxtrace_offsets: Sequence[int],
    build_ids: Mapping[str, bytes],
) -> dict[int, bytes]:
    ncpus = max(b.cpu for b in layout.cpus) + 1
    ids = [_sample_id(b.cpu) for b in layout.cpus]
    event_desc = (
        struct.pack("<II", 1, ATTR_SIZE)
        + attr
        + struct.pack("<I", len(ids))
        + _header_string("cs_etm//u")
        + struct.pack(f"<{len(ids)}Q", *ids)
    )
    index = struct.pack("<Q", len(auxtrace_offsets)) + b"".join(
        struct.pack("<QQ", off, 0x30) for off in auxtrace_offsets
    )
    feats: dict[int, bytes] = {}
    if build_ids:
        entries = b""
        for name, bid in build_ids.items():
            # build_id_event: header, pid (-1: the host), the ID in 24 bytes, the file name
            body = struct.pack("<i", -1) + bid[:20].ljust(24, b"\0") + _pad8(name.encode())
            entries += struct.pack("<IHH", REC_HEADER_BUILD_ID, MISC_USER, 8 + len(body)) + body
        feats[FEAT_BUILD_ID] = entries
    return feats | {
        FEAT_HOSTNAME: _header_string("cstrace-tests"),
        FEAT_VERSION: _header_string("cstrace perfdata_writer"),
        FEAT_ARCH: _header_string(arch),
        FEAT_NRCPUS: struct.pack("<II", ncpus, ncpus),
        FEAT_CMDLINE: struct.pack("<I", len(cmdline))
        + b"".join(_header_string(a) for a in cmdline),
        FEAT_EVENT_DESC: event_desc,
        FEAT_PMU_MAPPINGS: struct.pack("<II", 1, pmu_type) + _header_string("cs_etm"),
        FEAT_AUXTRACE: index,
    }


def _default_arch(layout: Layout) -> str:
    """``aarch64`` for ETMv4 and ETE (Armv8 and later), ``armv7l`` for ETMv3 and PTM."""
    return "armv7l" if all(b.magic == ETMV3_MAGIC for b in layout.cpus) else "aarch64"


def encode_perf_data(
    trace: Trace,
    *,
    pmu_type: int = DEFAULT_PMU_TYPE,
    pid: int = 1000,
    comm: str = "cstrace-trace",
    cpus: Mapping[str, int] | None = None,
    arch: str | None = None,
    cmdline: Iterable[str] = ("perf", "record", "-e", "cs_etm//u"),
    build_ids: Mapping[str, bytes] | None = None,
    timeless: bool = False,
) -> bytes:
    """The bytes of the perf.data file :func:`write_perf_data` writes (same arguments)."""
    layout = plan(trace, cpus=cpus)
    by_name = {b.name: b for b in trace.buffers}
    clock = _Clock(pid, timed=not timeless)
    first_cpu = layout.cpus[0].cpu
    config = _config(layout.cpus[0])
    attr = _attr(pmu_type, config, timeless)
    chunks = layout.chunks

    records: list[bytes] = []
    # time_shift, time_mult, time_zero, time_cycles, time_mask, cap_user_time_zero/short
    records.append(_record(REC_TIME_CONV, struct.pack("<QQQQQBB6x", 0, 1, 0, 0, 0, 1, 0)))
    records.append(_auxtrace_info(pmu_type, layout.cpus))
    comm_body = struct.pack("<II", pid, pid) + _pad8(comm.encode()[:15])
    records.append(_record(REC_COMM, comm_body + clock.trailer(first_cpu)))
    for m in layout.maps:
        body = struct.pack(
            "<IIQQQIIQQII",
            pid,
            pid,
            m.address,
            m.length,
            m.pgoff,
            0,  # maj
            0,  # min
            0,  # ino
            0,  # ino_generation
            PROT_READ_EXEC,
            MAP_PRIVATE,
        )
        body += _pad8(m.filename.encode())
        records.append(_record(REC_MMAP2, body + clock.trailer(first_cpu), MISC_USER))
    records.append(_record(REC_FINISHED_ROUND, b""))
    started: set[int] = set()
    for ch in chunks:
        if ch.cpu not in started:
            started.add(ch.cpu)
            body = struct.pack("<II", pid, pid) + clock.trailer(ch.cpu)
            records.append(_record(REC_ITRACE_START, body))
        flags = AUX_FLAG_RAW if ch.raw else 0
        body = struct.pack("<QQQ", ch.offset, ch.size, flags) + clock.trailer(ch.cpu)
        records.append(_record(REC_AUX, body))

    data_offset_in_section = sum(len(r) for r in records)
    auxtrace_at: list[int] = []  # offsets from the start of the data section
    for ref, ch in enumerate(chunks):
        payload = by_name[ch.buffer].read()
        if len(payload) != ch.size:
            raise ValueError(f"buffer {ch.buffer} changed size while being written")
        pad = _padding(ch.size)
        head = struct.pack(
            "<QQQIIII",
            ch.size + pad,  # the padding counts, as in perf record; the AUX record does not
            ch.offset,
            ref,  # reference: unique per AUXTRACE record
            ch.cpu,  # idx: the CPU's AUX area
            pid if timeless else 0xFFFFFFFF,  # tid: the traced thread, or -1 (any)
            ch.cpu,
            0,
        )
        auxtrace_at.append(data_offset_in_section)
        rec = _record(REC_AUXTRACE, head) + payload + b"\0" * pad
        records.append(rec)
        data_offset_in_section += len(rec)
    records.append(_record(REC_FINISHED_ROUND, b""))
    data = b"".join(records)

    ids = [_sample_id(b.cpu) for b in layout.cpus]
    ids_offset = FILE_HEADER_SIZE
    ids_blob = struct.pack(f"<{len(ids)}Q", *ids)
    attrs_offset = ids_offset + len(ids_blob)
    attrs_blob = attr + struct.pack("<QQ", ids_offset, len(ids_blob))
    data_offset = attrs_offset + len(attrs_blob)

    feats = _features(
        layout,
        attr,
        pmu_type,
        arch or _default_arch(layout),
        list(cmdline),
        [data_offset + a for a in auxtrace_at],
        build_ids or {},
    )
    table_offset = data_offset + len(data)
    body_offset = table_offset + 16 * len(feats)
    table = b""
    bodies = b""
    for bit in sorted(feats):
        table += struct.pack("<QQ", body_offset + len(bodies), len(feats[bit]))
        bodies += feats[bit]
    bitmap = sum(1 << bit for bit in feats)

    header = MAGIC + struct.pack(
        "<QQQQQQQQ",
        FILE_HEADER_SIZE,
        len(attrs_blob),  # attr_size: one perf_event_attr and its IDs section
        attrs_offset,
        len(attrs_blob),
        data_offset,
        len(data),
        0,  # event_types: unused
        0,
    )
    header += bitmap.to_bytes(32, "little")
    assert len(header) == FILE_HEADER_SIZE
    return header + ids_blob + attrs_blob + data + table + bodies


def write_perf_data(
    trace: Trace,
    path: str | Path,
    *,
    pmu_type: int = DEFAULT_PMU_TYPE,
    pid: int = 1000,
    comm: str = "cstrace-trace",
    cpus: Mapping[str, int] | None = None,
    arch: str | None = None,
    cmdline: Iterable[str] = ("perf", "record", "-e", "cs_etm//u"),
    build_ids: Mapping[str, bytes] | None = None,
    timeless: bool = False,
) -> None:
    """Write ``trace`` to ``path`` as a CPU-wide ``cs_etm`` perf.data recording.

    ``pmu_type``: the cs_etm PMU's type number (attribute and AUXTRACE_INFO);
    ``pid`` and ``comm``: the process the trace and memory are attributed to;
    ``cpus``: core name to CPU number (default: from the core names, see
    :func:`plan`); ``arch``: the HEADER_ARCH string (default ``aarch64``, or
    ``armv7l`` when every source is ETMv3 or PTM); ``cmdline``: HEADER_CMDLINE;
    ``build_ids``: mapping name (as :func:`plan` names the dumps) to build ID;
    ``timeless``: no ``PERF_SAMPLE_TIME`` (records carry no time) and each AUXTRACE
    record names the thread ``pid`` (``tid``), so that ``perf script`` decodes
    without timestamps, attributing trace that names no thread to ``pid`` (with
    time, perf decodes nothing before the trace's first timestamp, and corpus
    traces often have none).
    The layout and its choices are in the module's docstring; a ``ValueError``
    says why a trace cannot be written.
    """
    Path(path).write_bytes(
        encode_perf_data(
            trace,
            pmu_type=pmu_type,
            pid=pid,
            comm=comm,
            cpus=cpus,
            arch=arch,
            cmdline=cmdline,
            build_ids=build_ids,
            timeless=timeless,
        )
    )
