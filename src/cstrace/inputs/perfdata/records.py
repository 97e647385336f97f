"""perf.data files: the header, the event attributes, the feature sections and the records.

Input: a perf.data file as Linux ``perf record`` and Android ``simpleperf
record`` write it (the ``PERFILE2`` layout of the kernel's
``tools/perf/Documentation/perf.data-file-format.txt``; records as
``include/uapi/linux/perf_event.h`` defines them), read through a
:class:`~cstrace.trace.Blob`. Output: a :class:`PerfFile`:

- the header's sections, the event attributes (with the ``sample_type`` and
  ``sample_id_all`` that say which ``sample_id`` fields end each record);
- the feature sections cstrace uses (build IDs, command line, CPU count, OS
  release, architecture, the AUX area index, simpleperf's ``meta_info`` and
  ``init_map``, whose records are the maps of processes that existed when the
  recording began, and ``file2``, where simpleperf says where each file's
  lowest code address was in memory: for a kernel module, how far into the
  module's memory its ``.text`` was), others are kept as (offset, size) and
  skipped;
- the records, in file order, each a small named record with its file offset
  and its ``sample_id`` trailer (:class:`SampleId`): MMAP and MMAP2, COMM,
  FORK, EXIT, AUX, ITRACE_START, SWITCH and SWITCH_CPU_WIDE,
  AUX_OUTPUT_HW_ID, LOST, AUXTRACE_INFO, AUXTRACE (whose data follows the
  record and is not read here: :attr:`AuxtraceRecord.data_offset` says where
  it is), TIME_CONV and FINISHED_ROUND; any other type is an
  :class:`OtherRecord`.

A header that cannot be read (not perf.data, sections outside the file, bad
sizes) is an :class:`~cstrace.errors.InputError` naming the file and the byte
offset. A data section that ends early (a truncated file, a record whose size
is impossible) stops the reading there: the records before it are kept and
:attr:`PerfFile.issues` says where and why. Pipe-mode files (a 16-byte header,
attributes in ``HEADER_ATTR`` records) are read too. Only little-endian files
are read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from cstrace.errors import InputError, Issue, IssueKind, Severity
from cstrace.trace import Blob

__all__ = [
    "AUX_FLAG_COLLISION",
    "AUX_FLAG_OVERWRITE",
    "AUX_FLAG_PARTIAL",
    "AUX_FLAG_RAW_FORMAT",
    "AUX_FLAG_TRUNCATED",
    "FEATURE_NAMES",
    "MAGIC",
    "RECORD_NAMES",
    "SIMPLEPERF_KERNEL_MODULE",
    "AuxOutputHwIdRecord",
    "AuxRecord",
    "AuxtraceInfoRecord",
    "AuxtraceRecord",
    "BuildIdEntry",
    "CommRecord",
    "EventAttr",
    "FinishedRoundRecord",
    "ItraceStartRecord",
    "LostRecord",
    "MmapRecord",
    "OtherRecord",
    "PerfFile",
    "Record",
    "SampleId",
    "SimpleperfFile",
    "SwitchRecord",
    "TaskRecord",
    "TimeConvRecord",
    "read_perf_file",
]

MAGIC = b"PERFILE2"
_MAGIC_SWAPPED = b"2ELIFREP"

# Record types (perf_event.h, and perf's own from 64 on).
_MMAP = 1
_LOST = 2
_COMM = 3
_EXIT = 4
_FORK = 7
_SAMPLE = 9
_MMAP2 = 10
_AUX = 11
_ITRACE_START = 12
_SWITCH = 14
_SWITCH_CPU_WIDE = 15
_AUX_OUTPUT_HW_ID = 21
_HEADER_ATTR = 64
_FINISHED_ROUND = 68
_AUXTRACE_INFO = 70
_AUXTRACE = 71
_TIME_CONV = 79
_USER_TYPES = 64

RECORD_NAMES: dict[int, str] = {
    1: "MMAP",
    2: "LOST",
    3: "COMM",
    4: "EXIT",
    5: "THROTTLE",
    6: "UNTHROTTLE",
    7: "FORK",
    8: "READ",
    9: "SAMPLE",
    10: "MMAP2",
    11: "AUX",
    12: "ITRACE_START",
    13: "LOST_SAMPLES",
    14: "SWITCH",
    15: "SWITCH_CPU_WIDE",
    16: "NAMESPACES",
    17: "KSYMBOL",
    18: "BPF_EVENT",
    19: "CGROUP",
    20: "TEXT_POKE",
    21: "AUX_OUTPUT_HW_ID",
    64: "HEADER_ATTR",
    65: "HEADER_EVENT_TYPE",
    66: "HEADER_TRACING_DATA",
    67: "HEADER_BUILD_ID",
    68: "FINISHED_ROUND",
    69: "ID_INDEX",
    70: "AUXTRACE_INFO",
    71: "AUXTRACE",
    72: "AUXTRACE_ERROR",
    73: "THREAD_MAP",
    74: "CPU_MAP",
    75: "STAT_CONFIG",
    76: "STAT",
    77: "STAT_ROUND",
    78: "EVENT_UPDATE",
    79: "TIME_CONV",
    80: "HEADER_FEATURE",
    81: "COMPRESSED",
    82: "FINISHED_INIT",
}
"""Names of the record types, without the ``PERF_RECORD_`` prefix."""

FEATURE_NAMES: dict[int, str] = {
    1: "TRACING_DATA",
    2: "BUILD_ID",
    3: "HOSTNAME",
    4: "OSRELEASE",
    5: "VERSION",
    6: "ARCH",
    7: "NRCPUS",
    8: "CPUDESC",
    9: "CPUID",
    10: "TOTAL_MEM",
    11: "CMDLINE",
    12: "EVENT_DESC",
    13: "CPU_TOPOLOGY",
    14: "NUMA_TOPOLOGY",
    15: "BRANCH_STACK",
    16: "PMU_MAPPINGS",
    17: "GROUP_DESC",
    18: "AUXTRACE",
    19: "STAT",
    20: "CACHE",
    21: "SAMPLE_TIME",
    22: "MEM_TOPOLOGY",
    23: "CLOCKID",
    24: "DIR_FORMAT",
    25: "BPF_PROG_INFO",
    26: "BPF_BTF",
    27: "COMPRESSED",
    28: "CPU_PMU_CAPS",
    29: "CLOCK_DATA",
    30: "HYBRID_TOPOLOGY",
    31: "PMU_CAPS",
    128: "FILE (simpleperf)",
    129: "META_INFO (simpleperf)",
    130: "DEBUG_UNWIND (simpleperf)",
    131: "DEBUG_UNWIND_FILE (simpleperf)",
    132: "FILE2 (simpleperf)",
    133: "ETM_BRANCH_LIST (simpleperf)",
    134: "INIT_MAP (simpleperf)",
}
"""Names of the feature sections (bits of the header's feature bitmap)."""

_FEAT_BUILD_ID = 2
_FEAT_HOSTNAME = 3
_FEAT_OSRELEASE = 4
_FEAT_VERSION = 5
_FEAT_ARCH = 6
_FEAT_NRCPUS = 7
_FEAT_CPUDESC = 8
_FEAT_CMDLINE = 11
_FEAT_AUXTRACE = 18
_FEAT_META_INFO = 129
_FEAT_FILE2 = 132
_FEAT_INIT_MAP = 134

SIMPLEPERF_KERNEL_MODULE = 1
"""simpleperf's file type of a kernel module (``DSO_KERNEL_MODULE``)."""
_MAX_FILE2_ENTRIES = 1 << 16

# sample_type bits (perf_event.h), in the order their fields end a non-sample record.
_SAMPLE_TID = 1 << 1
_SAMPLE_TIME = 1 << 2
_SAMPLE_ID = 1 << 6
_SAMPLE_CPU = 1 << 7
_SAMPLE_STREAM_ID = 1 << 9
_SAMPLE_IDENTIFIER = 1 << 16

# misc bits.
_MISC_COMM_EXEC = 1 << 13
_MISC_SWITCH_OUT = 1 << 13
_MISC_SWITCH_OUT_PREEMPT = 1 << 14
_MISC_MMAP_BUILD_ID = 1 << 14
_MISC_MMAP_DATA = 1 << 13

# PERF_RECORD_AUX flags.
AUX_FLAG_TRUNCATED = 0x01
"""The AUX data was cut: the buffer was full (perf_event.h ``PERF_AUX_FLAG_TRUNCATED``)."""
AUX_FLAG_OVERWRITE = 0x02
"""Snapshot (overwrite) mode: ``aux_offset`` is the end of the data, not its start."""
AUX_FLAG_PARTIAL = 0x04
"""The record holds a partial sample."""
AUX_FLAG_COLLISION = 0x08
"""The sample collided with another one."""
AUX_FLAG_RAW_FORMAT = 0x0100
"""CoreSight: the data is raw single-source trace (a TRBE), not formatter frames."""
_AUX_FORMAT_MASK = 0xFF00

_PROT_EXEC = 0x4

_WINDOW = 1 << 20
_FILE_HEADER_SIZE = 104
_PIPE_HEADER_SIZE = 16
_ATTR_MIN = 64  # PERF_ATTR_SIZE_VER0


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SampleId:
    """The ``sample_id`` fields that end a record when ``sample_id_all`` is set (None: absent)."""

    pid: int | None = None
    tid: int | None = None
    time: int | None = None
    id: int | None = None
    cpu: int | None = None


_NO_SAMPLE = SampleId()


@dataclass(frozen=True, slots=True)
class Record:
    """A record of the data section: its type, ``misc`` bits, size and file offset."""

    type: int
    misc: int
    size: int
    offset: int
    """File offset of the record's header."""
    sample: SampleId
    """The ``sample_id`` trailer (all fields None when the file has none)."""

    @property
    def name(self) -> str:
        """The record type's name (``MMAP2``), or ``TYPE_<n>`` for an unknown type."""
        return RECORD_NAMES.get(self.type, f"TYPE_{self.type}")

    @property
    def time(self) -> int | None:
        """The record's time (its ``sample_id`` time), if the file gives one."""
        return self.sample.time


@dataclass(frozen=True, slots=True)
class MmapRecord(Record):
    """MMAP or MMAP2: ``length`` bytes of ``filename`` from file offset ``pgoff`` at ``start``.

    ``pid`` -1 is the kernel. ``prot`` (MMAP2 only, else None) has the
    ``PROT_*`` bits; ``build_id`` is the one an MMAP2 record carries itself
    (newer kernels), else None.
    """

    pid: int
    tid: int
    start: int
    length: int
    pgoff: int
    filename: str
    prot: int | None
    build_id: bytes | None

    @property
    def executable(self) -> bool:
        """Whether the mapping holds code (PROT_EXEC; for MMAP, not a data mapping)."""
        if self.prot is not None:
            return bool(self.prot & _PROT_EXEC)
        return not (self.misc & _MISC_MMAP_DATA)


@dataclass(frozen=True, slots=True)
class CommRecord(Record):
    """COMM: thread ``tid`` of process ``pid`` is named ``comm`` (``exec``: after an exec)."""

    pid: int
    tid: int
    comm: str

    @property
    def exec(self) -> bool:
        """Whether the name changed because the process executed a new program."""
        return bool(self.misc & _MISC_COMM_EXEC)


@dataclass(frozen=True, slots=True)
class TaskRecord(Record):
    """FORK or EXIT: thread ``tid`` of process ``pid`` (parent ``ppid``/``ptid``) began or ended."""

    pid: int
    ppid: int
    tid: int
    ptid: int
    task_time: int

    @property
    def exit(self) -> bool:
        """True for EXIT, False for FORK."""
        return self.type == _EXIT


@dataclass(frozen=True, slots=True)
class AuxRecord(Record):
    """AUX: ``aux_size`` bytes of trace at ``aux_offset`` of the AUX area, with ``flags``."""

    aux_offset: int
    aux_size: int
    flags: int

    @property
    def truncated(self) -> bool:
        """The buffer filled up: trace was lost after this data."""
        return bool(self.flags & AUX_FLAG_TRUNCATED)

    @property
    def overwrite(self) -> bool:
        """Snapshot mode: ``aux_offset`` is where the data ends."""
        return bool(self.flags & AUX_FLAG_OVERWRITE)

    @property
    def partial(self) -> bool:
        """A partial record."""
        return bool(self.flags & AUX_FLAG_PARTIAL)

    @property
    def collision(self) -> bool:
        """A collision with another record."""
        return bool(self.flags & AUX_FLAG_COLLISION)

    @property
    def raw(self) -> bool:
        """CoreSight: raw single-source trace (format 0x100), not formatter frames."""
        return bool(self.flags & AUX_FLAG_RAW_FORMAT)

    @property
    def data_start(self) -> int:
        """Where the data begins in the AUX area (``aux_offset``, less the size in overwrite
        mode)."""
        return self.aux_offset - self.aux_size if self.overwrite else self.aux_offset

    def flag_names(self) -> list[str]:
        """The flags in words: ``truncated``, ``overwrite``, ``partial``, ``collision``,
        ``raw`` (and ``format 0x..`` for another PMU format)."""
        out = [
            name
            for bit, name in (
                (AUX_FLAG_TRUNCATED, "truncated"),
                (AUX_FLAG_OVERWRITE, "overwrite"),
                (AUX_FLAG_PARTIAL, "partial"),
                (AUX_FLAG_COLLISION, "collision"),
            )
            if self.flags & bit
        ]
        fmt = self.flags & _AUX_FORMAT_MASK
        if fmt == AUX_FLAG_RAW_FORMAT:
            out.append("raw")
        elif fmt:
            out.append(f"format {fmt:#x}")
        return out


@dataclass(frozen=True, slots=True)
class ItraceStartRecord(Record):
    """ITRACE_START: instruction tracing started for thread ``tid`` of process ``pid``."""

    pid: int
    tid: int


@dataclass(frozen=True, slots=True)
class SwitchRecord(Record):
    """SWITCH or SWITCH_CPU_WIDE: a context switch on the record's CPU.

    ``out`` says the sampled thread (the record's ``sample_id`` pid/tid) was
    switched out (else in). SWITCH_CPU_WIDE also names the other thread:
    ``next_prev_pid``/``next_prev_tid`` (the next one when switching out, the
    previous one when switching in); None for SWITCH.
    """

    next_prev_pid: int | None
    next_prev_tid: int | None

    @property
    def out(self) -> bool:
        """Whether the thread was switched out (else in)."""
        return bool(self.misc & _MISC_SWITCH_OUT)

    @property
    def preempt(self) -> bool:
        """Switched out while runnable (preempted)."""
        return bool(self.misc & _MISC_SWITCH_OUT_PREEMPT)


@dataclass(frozen=True, slots=True)
class AuxOutputHwIdRecord(Record):
    """AUX_OUTPUT_HW_ID: the hardware ID of the AUX data of the record's CPU.

    For CoreSight (``include/linux/coresight-pmu.h``): bits 7..0 are the trace
    ID, bits 39..8 the sink ID (minor version 1 and later), bits 59..56 the
    minor and 63..60 the major version.
    """

    hw_id: int

    @property
    def trace_id(self) -> int:
        """The CoreSight trace ID."""
        return self.hw_id & 0xFF

    @property
    def major(self) -> int:
        """The major version of the layout."""
        return (self.hw_id >> 60) & 0xF

    @property
    def minor(self) -> int:
        """The minor version of the layout."""
        return (self.hw_id >> 56) & 0xF

    @property
    def sink(self) -> int | None:
        """The sink ID (minor version 1 and later), else None."""
        return (self.hw_id >> 8) & 0xFFFFFFFF if self.minor >= 1 else None


@dataclass(frozen=True, slots=True)
class LostRecord(Record):
    """LOST: ``lost`` records of event ``id`` were lost."""

    id: int
    lost: int


@dataclass(frozen=True, slots=True)
class AuxtraceInfoRecord(Record):
    """AUXTRACE_INFO: the AUX area's type (3: CoreSight) and its private words."""

    auxtrace_type: int
    priv: tuple[int, ...]
    priv_offset: int
    """File offset of the first private word."""


@dataclass(frozen=True, slots=True)
class AuxtraceRecord(Record):
    """AUXTRACE: ``data_size`` bytes of AUX area data, at ``data_offset`` in the file.

    ``aux_offset`` is where the data was in the AUX area (the space of the AUX
    records' offsets); ``idx`` the AUX area's index; ``cpu`` the CPU of a
    CPU-wide recording (-1 per thread, then ``tid`` is the traced thread).
    """

    data_size: int
    aux_offset: int
    reference: int
    idx: int
    tid: int
    cpu: int
    data_offset: int
    present: int
    """How many of the data bytes the file holds (fewer than ``data_size`` when it was cut)."""


@dataclass(frozen=True, slots=True)
class TimeConvRecord(Record):
    """TIME_CONV: how to turn the CPU counter (the trace's timestamps) into perf time.

    ``perf_time = time_zero + (count >> time_shift) * time_mult +
    (((count & mask) * time_mult) >> time_shift)``; with ``cap_user_time_short``
    the count is first widened from ``time_cycles`` with ``time_mask``.
    """

    time_shift: int
    time_mult: int
    time_zero: int
    time_cycles: int
    time_mask: int
    cap_user_time_zero: bool
    cap_user_time_short: bool


@dataclass(frozen=True, slots=True)
class FinishedRoundRecord(Record):
    """FINISHED_ROUND: no record after this one is older than those before it."""


@dataclass(frozen=True, slots=True)
class OtherRecord(Record):
    """A record type cstrace does not read (samples, throttling, ...): skipped."""


# --- header and features ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventAttr:
    """One event attribute (``perf_event_attr``): what a record's trailer holds, and its IDs."""

    type: int
    """The PMU type (the cs_etm PMU's number for CoreSight)."""
    config: int
    sample_type: int
    read_format: int
    flags: int
    ids: tuple[int, ...]
    offset: int

    @property
    def sample_id_all(self) -> bool:
        """Whether every record (not only samples) ends with the ``sample_id`` fields."""
        return bool(self.flags & (1 << 18))

    def trailer_size(self) -> int:
        """Size in bytes of the ``sample_id`` trailer of a non-sample record."""
        if not self.sample_id_all:
            return 0
        bits = (
            _SAMPLE_TID,
            _SAMPLE_TIME,
            _SAMPLE_ID,
            _SAMPLE_STREAM_ID,
            _SAMPLE_CPU,
            _SAMPLE_IDENTIFIER,
        )
        return 8 * sum(1 for b in bits if self.sample_type & b)


@dataclass(frozen=True, slots=True)
class BuildIdEntry:
    """An entry of the BUILD_ID feature: the build ID of ``filename`` (``pid`` -1: any)."""

    pid: int
    build_id: bytes
    filename: str
    kernel: bool
    """The file is kernel code (the kernel or a module)."""


@dataclass(frozen=True, slots=True)
class SimpleperfFile:
    """An entry of simpleperf's ``file2`` feature: a file the recording's samples fell in.

    ``type`` is simpleperf's file type (0 kernel, 1 kernel module, 2 ELF file,
    3 dex file, ...); ``min_vaddr`` the lowest code address of the file (for a
    kernel module, the address of a symbol of its ``.text``); ``offset`` where
    that address was: in the file (an ELF file's ``file_offset_of_min_vaddr``) or,
    for a kernel module, in the module's memory (``memory_offset_of_min_vaddr``);
    None when the entry does not say.
    """

    path: str
    type: int
    min_vaddr: int
    offset: int | None


@dataclass
class PerfFile:
    """A perf.data file as read: header facts, attributes, features and records."""

    path: str
    size: int
    pipe: bool
    attrs: list[EventAttr]
    data_offset: int
    data_size: int
    features: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Each feature present: (file offset, size) of its section."""
    build_ids: list[BuildIdEntry] = field(default_factory=list)
    cmdline: list[str] = field(default_factory=list)
    hostname: str | None = None
    osrelease: str | None = None
    version: str | None = None
    arch: str | None = None
    cpudesc: str | None = None
    nr_cpus: tuple[int, int] | None = None
    """(online, available) from NRCPUS."""
    auxtrace_index: list[tuple[int, int]] = field(default_factory=list)
    """The AUXTRACE feature: (file offset, size) of each AUXTRACE record."""
    meta_info: dict[str, str] = field(default_factory=dict)
    """simpleperf's META_INFO feature (``simpleperf_version``, ``clockid``...)."""
    simpleperf_files: list[SimpleperfFile] = field(default_factory=list)
    """simpleperf's FILE2 feature (symbols are not kept)."""
    records: list[Record] = field(default_factory=list)
    init_records: list[Record] = field(default_factory=list)
    """simpleperf's INIT_MAP feature: the memory maps and names of the processes that
    existed when the recording began (MMAP, MMAP2 and COMM records)."""
    issues: list[Issue] = field(default_factory=list)
    """What could not be read (the reading stopped or skipped there)."""

    def feature_names(self) -> list[str]:
        """The names of the features present, in bit order."""
        return [FEATURE_NAMES.get(b, f"feature {b}") for b in sorted(self.features)]


# --- reading ---------------------------------------------------------------------------------


class _Window:
    """Reads a blob through a sliding window, so records are not read one call at a time."""

    def __init__(self, blob: Blob, size: int) -> None:
        self.blob = blob
        self.size = size
        self.start = 0
        self.data = b""

    def get(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer at the end of the file)."""
        end = offset + length
        if offset < self.start or end > self.start + len(self.data):
            want = max(length, _WINDOW)
            self.data = self.blob.read(offset, min(want, max(0, self.size - offset)))
            self.start = offset
        rel = offset - self.start
        return self.data[rel : rel + length]


def _cstr(raw: bytes) -> str:
    """A NUL-terminated string (the bytes before the first NUL), decoded leniently."""
    end = raw.find(b"\0")
    return (raw if end < 0 else raw[:end]).decode("utf-8", "replace")


class _Parser:
    def __init__(self, blob: Blob) -> None:
        self.blob = blob
        self.path = blob.name
        self.size = blob.size()
        self.win = _Window(blob, self.size)

    def fail(self, message: str, offset: int | None) -> InputError:
        return InputError(message, path=self.path, offset=offset)

    def read_exact(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self.fail(
                f"{what} ({length} bytes at {offset:#x}) goes past the end of the file "
                f"({self.size} bytes)",
                offset,
            )
        return self.blob.read(offset, length)

    # -- header --

    def header(self) -> PerfFile:
        head = self.read_exact(0, 16, "perf.data header") if self.size >= 16 else b""
        if len(head) < 16 or head[:8] not in (MAGIC, _MAGIC_SWAPPED):
            raise self.fail("not a perf.data file (no PERFILE2 magic)", 0)
        if head[:8] == _MAGIC_SWAPPED:
            raise self.fail("a big-endian perf.data file; only little-endian ones are read", 0)
        (hsize,) = struct.unpack_from("<Q", head, 8)
        if hsize == _PIPE_HEADER_SIZE:
            return PerfFile(self.path, self.size, True, [], 16, self.size - 16)
        if hsize < _FILE_HEADER_SIZE:
            raise self.fail(
                f"header size {hsize} is neither {_FILE_HEADER_SIZE} (a file) nor "
                f"{_PIPE_HEADER_SIZE} (a pipe)",
                8,
            )
        raw = self.read_exact(0, _FILE_HEADER_SIZE, "perf.data header")
        attr_size, a_off, a_size, d_off, d_size = struct.unpack_from("<QQQQQ", raw, 16)
        bits = raw[72:104]
        if attr_size < _ATTR_MIN + 16 or attr_size % 8:
            raise self.fail(f"attribute size {attr_size} is impossible", 16)
        if a_size % attr_size:
            raise self.fail(
                f"attribute section size {a_size} is not a multiple of the attribute size "
                f"{attr_size}",
                32,
            )
        self.check_section(a_off, a_size, "attribute section", 24)
        pf = PerfFile(self.path, self.size, False, [], d_off, d_size)
        if d_off < _FILE_HEADER_SIZE or d_off > self.size:
            raise self.fail(f"data section offset {d_off:#x} is outside the file", 40)
        if d_size == 0 or d_off + d_size > self.size:
            what = "0" if d_size == 0 else f"{d_size:#x}, past the end of the file"
            pf.issues.append(
                Issue(
                    Severity.WARNING,
                    IssueKind.INPUT,
                    f"the data section's size is {what} (was the recording stopped "
                    "properly?); the records up to the end of the file are read",
                    self.path,
                    offset=48,
                )
            )
            pf.data_size = self.size - d_off
            present: list[int] = []
        else:
            present = [b for b in range(256) if bits[b // 8] >> (b % 8) & 1]
        for k in range(a_size // attr_size):
            pf.attrs.append(self.attr(a_off + k * attr_size, attr_size))
        if present:
            self.features(pf, d_off + d_size, present)
        return pf

    def check_section(self, offset: int, size: int, what: str, at: int) -> None:
        if offset + size > self.size:
            raise self.fail(
                f"{what} ({size} bytes at {offset:#x}) goes past the end of the file "
                f"({self.size} bytes)",
                at,
            )

    def attr(self, offset: int, attr_size: int) -> EventAttr:
        raw = self.read_exact(offset, attr_size, "event attribute")
        typ, _size, config, _period, stype, rfmt, flags = struct.unpack_from("<IIQQQQQ", raw, 0)
        ids_off, ids_size = struct.unpack_from("<QQ", raw, attr_size - 16)
        ids: tuple[int, ...] = ()
        if ids_size:
            if ids_size % 8 or ids_off + ids_size > self.size:
                raise self.fail(f"the IDs of an event attribute ({ids_size} bytes) are bad", offset)
            data = self.blob.read(ids_off, ids_size)
            ids = struct.unpack(f"<{ids_size // 8}Q", data)
        return EventAttr(typ, config, stype, rfmt, flags, ids, offset)

    # -- features --

    def features(self, pf: PerfFile, offset: int, present: list[int]) -> None:
        table = self.read_exact(offset, 16 * len(present), "feature section table")
        for k, bit in enumerate(present):
            f_off, f_size = struct.unpack_from("<QQ", table, 16 * k)
            at = offset + 16 * k
            if f_off + f_size > self.size:
                pf.issues.append(
                    Issue(
                        Severity.WARNING,
                        IssueKind.INPUT,
                        f"feature section {FEATURE_NAMES.get(bit, bit)} ({f_size} bytes at "
                        f"{f_off:#x}) goes past the end of the file; skipped",
                        self.path,
                        offset=at,
                    )
                )
                continue
            pf.features[bit] = (f_off, f_size)
            try:
                self.feature(pf, bit, f_off, f_size)
            except (struct.error, ValueError, IndexError):
                pf.issues.append(
                    Issue(
                        Severity.WARNING,
                        IssueKind.INPUT,
                        f"feature section {FEATURE_NAMES.get(bit, bit)} is malformed; skipped",
                        self.path,
                        offset=f_off,
                    )
                )

    def feature(self, pf: PerfFile, bit: int, offset: int, size: int) -> None:
        if bit not in (
            _FEAT_BUILD_ID,
            _FEAT_HOSTNAME,
            _FEAT_OSRELEASE,
            _FEAT_VERSION,
            _FEAT_ARCH,
            _FEAT_CPUDESC,
            _FEAT_NRCPUS,
            _FEAT_CMDLINE,
            _FEAT_AUXTRACE,
            _FEAT_META_INFO,
            _FEAT_INIT_MAP,
            _FEAT_FILE2,
        ):
            return
        data = self.blob.read(offset, size)
        if bit == _FEAT_BUILD_ID:
            pf.build_ids = _build_ids(data)
        elif bit == _FEAT_CMDLINE:
            (n,) = struct.unpack_from("<I", data, 0)
            pos = 4
            for _ in range(min(n, 4096)):
                (length,) = struct.unpack_from("<I", data, pos)
                if pos + 4 + length > len(data):
                    raise ValueError("string past the section")
                pf.cmdline.append(_cstr(data[pos + 4 : pos + 4 + length]))
                pos += 4 + length
        elif bit == _FEAT_NRCPUS:
            online, avail = struct.unpack_from("<II", data, 0)
            pf.nr_cpus = (online, avail)
        elif bit == _FEAT_AUXTRACE:
            pf.auxtrace_index = _auxtrace_index(data)
        elif bit == _FEAT_INIT_MAP:
            pf.init_records = self.records_in(pf, data, offset)
        elif bit == _FEAT_FILE2:
            pf.simpleperf_files = _file2(data)
        elif bit == _FEAT_META_INFO:
            parts = data.split(b"\0")
            for k in range(0, len(parts) - 1, 2):
                key = parts[k].decode("utf-8", "replace")
                if key:
                    pf.meta_info[key] = parts[k + 1].decode("utf-8", "replace")
        else:
            (length,) = struct.unpack_from("<I", data, 0)
            if 4 + length > len(data):
                raise ValueError("string past the section")
            text = _cstr(data[4 : 4 + length])
            if bit == _FEAT_HOSTNAME:
                pf.hostname = text
            elif bit == _FEAT_OSRELEASE:
                pf.osrelease = text
            elif bit == _FEAT_VERSION:
                pf.version = text
            elif bit == _FEAT_ARCH:
                pf.arch = text
            else:
                pf.cpudesc = text

    # -- records --

    def records(self, pf: PerfFile) -> None:
        end = min(pf.data_offset + pf.data_size, self.size)
        off = pf.data_offset
        while off < end:
            if off + 8 > end:
                self.stop(pf, off, f"{end - off} stray bytes at the end of the data section")
                return
            typ, misc, size = struct.unpack("<IHH", self.win.get(off, 8))
            if size < 8:
                self.stop(pf, off, f"a record of type {typ} has the impossible size {size}")
                return
            if off + size > end:
                self.stop(
                    pf,
                    off,
                    f"a {RECORD_NAMES.get(typ, f'type {typ}')} record of {size} bytes goes "
                    f"past the end of the {'file' if end == self.size else 'data section'}",
                )
                return
            raw = self.win.get(off, size)
            if typ == _HEADER_ATTR:
                self.header_attr(pf, raw, off)
            rec = self.record(pf, typ, misc, size, off, raw)
            if rec is None:
                return
            pf.records.append(rec)
            off += size
            if isinstance(rec, AuxtraceRecord):
                off += rec.data_size
                if off > end:
                    cut = end - rec.data_offset
                    pf.records[-1] = _replace_size(rec, cut)
                    self.stop(
                        pf,
                        rec.offset,
                        f"the AUXTRACE record's {rec.data_size} bytes of trace go past the end "
                        f"of the {'file' if end == self.size else 'data section'}: "
                        f"{max(cut, 0)} are there",
                    )
                    return

    def records_in(self, pf: PerfFile, data: bytes, base: int) -> list[Record]:
        """Records held whole in ``data`` (a feature section at file offset ``base``)."""
        out: list[Record] = []
        pos = 0
        while pos + 8 <= len(data):
            typ, misc, size = struct.unpack_from("<IHH", data, pos)
            if size < 8 or pos + size > len(data):
                raise ValueError("bad record size")
            raw = data[pos : pos + size]
            sid = self.sample_id(pf, raw) if typ < _USER_TYPES and typ != _SAMPLE else _NO_SAMPLE
            out.append(_make((typ, misc, size, base + pos, sid), raw, base + pos))
            pos += size
        return out

    def stop(self, pf: PerfFile, offset: int, why: str) -> None:
        pf.issues.append(
            Issue(
                Severity.ERROR,
                IssueKind.INPUT,
                f"{why}; the records after it are not read",
                self.path,
                offset=offset,
            )
        )

    def header_attr(self, pf: PerfFile, raw: bytes, off: int) -> None:
        """A pipe-mode attribute record: ``perf_event_attr`` then its IDs."""
        if len(raw) < 8 + _ATTR_MIN:
            return
        (attr_size,) = struct.unpack_from("<I", raw, 12)
        attr_size = attr_size or _ATTR_MIN
        if 8 + attr_size > len(raw):
            return
        typ, _s, config, _p, stype, rfmt, flags = struct.unpack_from("<IIQQQQQ", raw, 8)
        rest = raw[8 + attr_size :]
        ids = struct.unpack(f"<{len(rest) // 8}Q", rest[: len(rest) // 8 * 8])
        pf.attrs.append(EventAttr(typ, config, stype, rfmt, flags, ids, off))

    def sample_id(self, pf: PerfFile, raw: bytes) -> SampleId:
        attr = _attr_of(pf, raw)
        if attr is None:
            return _NO_SAMPLE
        n = attr.trailer_size()
        if not n or n > len(raw) - 8:
            return _NO_SAMPLE
        pos = len(raw) - n
        st = attr.sample_type
        pid = tid = time = ident = cpu = None
        if st & _SAMPLE_TID:
            pid, tid = struct.unpack_from("<ii", raw, pos)
            pos += 8
        if st & _SAMPLE_TIME:
            (time,) = struct.unpack_from("<Q", raw, pos)
            pos += 8
        if st & _SAMPLE_ID:
            (ident,) = struct.unpack_from("<Q", raw, pos)
            pos += 8
        if st & _SAMPLE_STREAM_ID:
            pos += 8
        if st & _SAMPLE_CPU:
            (cpu,) = struct.unpack_from("<I", raw, pos)
            pos += 8
        if st & _SAMPLE_IDENTIFIER:
            (ident,) = struct.unpack_from("<Q", raw, pos)
        return SampleId(pid, tid, time, ident, cpu)

    def record(
        self, pf: PerfFile, typ: int, misc: int, size: int, off: int, raw: bytes
    ) -> Record | None:
        sid = self.sample_id(pf, raw) if typ < _USER_TYPES and typ != _SAMPLE else _NO_SAMPLE
        head = (typ, misc, size, off, sid)
        try:
            return _make(head, raw, off)
        except struct.error:
            self.stop(pf, off, f"a {RECORD_NAMES.get(typ, f'type {typ}')} record is too short")
            return None


def _replace_size(rec: AuxtraceRecord, available: int) -> AuxtraceRecord:
    """``rec`` with only ``available`` bytes of data (the file was cut)."""
    return AuxtraceRecord(
        rec.type,
        rec.misc,
        rec.size,
        rec.offset,
        rec.sample,
        rec.data_size,
        rec.aux_offset,
        rec.reference,
        rec.idx,
        rec.tid,
        rec.cpu,
        rec.data_offset,
        max(available, 0),
    )


def _attr_of(pf: PerfFile, raw: bytes) -> EventAttr | None:
    """The attribute whose ``sample_id`` layout ends this record."""
    attrs = pf.attrs
    if not attrs:
        return None
    first = attrs[0]
    if len(attrs) == 1 or all(
        a.sample_type == first.sample_type and a.sample_id_all == first.sample_id_all for a in attrs
    ):
        return first
    if all(a.sample_type & _SAMPLE_IDENTIFIER for a in attrs) and len(raw) >= 16:
        (ident,) = struct.unpack_from("<Q", raw, len(raw) - 8)
        for a in attrs:
            if ident in a.ids:
                return a
    return first


def _make(head: tuple[int, int, int, int, SampleId], raw: bytes, off: int) -> Record:
    typ = head[0]
    if typ in (_MMAP, _MMAP2):
        pid, tid, start, length, pgoff = struct.unpack_from("<iiQQQ", raw, 8)
        prot: int | None = None
        build_id: bytes | None = None
        if typ == _MMAP2:
            misc = head[1]
            if misc & _MISC_MMAP_BUILD_ID:
                bsize = raw[40]
                build_id = bytes(raw[44 : 44 + min(bsize, 20)])
            prot, _flags = struct.unpack_from("<II", raw, 64)
            name = _cstr(raw[72:])
        else:
            name = _cstr(raw[40:])
        return MmapRecord(*head, pid, tid, start, length, pgoff, name, prot, build_id)
    if typ == _COMM:
        pid, tid = struct.unpack_from("<ii", raw, 8)
        return CommRecord(*head, pid, tid, _cstr(raw[16:]))
    if typ in (_FORK, _EXIT):
        pid, ppid, tid, ptid, t = struct.unpack_from("<iiiiQ", raw, 8)
        return TaskRecord(*head, pid, ppid, tid, ptid, t)
    if typ == _AUX:
        a_off, a_size, flags = struct.unpack_from("<QQQ", raw, 8)
        return AuxRecord(*head, a_off, a_size, flags)
    if typ == _ITRACE_START:
        pid, tid = struct.unpack_from("<ii", raw, 8)
        return ItraceStartRecord(*head, pid, tid)
    if typ == _SWITCH:
        return SwitchRecord(*head, None, None)
    if typ == _SWITCH_CPU_WIDE:
        npid, ntid = struct.unpack_from("<ii", raw, 8)
        return SwitchRecord(*head, npid, ntid)
    if typ == _AUX_OUTPUT_HW_ID:
        (hw_id,) = struct.unpack_from("<Q", raw, 8)
        return AuxOutputHwIdRecord(*head, hw_id)
    if typ == _LOST:
        ident, lost = struct.unpack_from("<QQ", raw, 8)
        return LostRecord(*head, ident, lost)
    if typ == _AUXTRACE_INFO:
        (atype,) = struct.unpack_from("<I", raw, 8)
        words = (len(raw) - 16) // 8
        priv = struct.unpack_from(f"<{words}Q", raw, 16)
        return AuxtraceInfoRecord(*head, atype, priv, off + 16)
    if typ == _AUXTRACE:
        size, a_off, ref, idx, tid, cpu = struct.unpack_from("<QQQIiI", raw, 8)
        return AuxtraceRecord(
            *head, size, a_off, ref, idx, tid, _signed32(cpu), off + head[2], size
        )
    if typ == _TIME_CONV:
        shift, mult, zero = struct.unpack_from("<QQQ", raw, 8)
        cycles = mask = 0
        zero_cap = short_cap = False
        if len(raw) >= 8 + 40 + 2:
            cycles, mask = struct.unpack_from("<QQ", raw, 32)
            zero_cap, short_cap = bool(raw[48]), bool(raw[49])
        else:
            zero_cap = True  # the older record: time_zero is always given
        return TimeConvRecord(*head, shift, mult, zero, cycles, mask, zero_cap, short_cap)
    if typ == _FINISHED_ROUND:
        return FinishedRoundRecord(*head)
    return OtherRecord(*head)


def _signed32(value: int) -> int:
    return value - (1 << 32) if value & (1 << 31) else value


def _build_ids(data: bytes) -> list[BuildIdEntry]:
    """The BUILD_ID feature: ``build_id_event`` records, one after another."""
    out: list[BuildIdEntry] = []
    pos = 0
    while pos + 36 <= len(data):
        _typ, misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 36 or pos + size > len(data):
            raise ValueError("bad build ID record")
        (pid,) = struct.unpack_from("<i", data, pos + 8)
        raw_id = data[pos + 12 : pos + 32]
        if misc & (1 << 15):  # PERF_RECORD_MISC_BUILD_ID_SIZE: the size is given
            raw_id = raw_id[: min(data[pos + 32], 20)]
        name = _cstr(data[pos + 36 : pos + size])
        kernel = (misc & 0x7) in (1, 3)  # PERF_RECORD_MISC_KERNEL, GUEST_KERNEL
        out.append(BuildIdEntry(pid, bytes(raw_id), name, kernel))
        pos += size
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A protobuf varint at ``pos``: its value and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("varint past the end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _fields(data: bytes) -> dict[int, list[int | bytes]]:
    """The fields of one protobuf message: number -> values (varints and length-delimited
    bytes; fixed-width ones are skipped)."""
    out: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("field past the end")
            value, pos = data[pos : pos + length], pos + length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            continue
        else:
            raise ValueError(f"wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _file2(data: bytes) -> list[SimpleperfFile]:
    """simpleperf's FILE2 feature: (u32 size, ``FileFeature`` message) per file.

    ``FileFeature`` (simpleperf's ``record_file.proto``): 1 path, 2 type, 3
    min_vaddr, 4 symbols, 6 ELF file (1: file_offset_of_min_vaddr), 7 kernel module
    (1: memory_offset_of_min_vaddr).
    """
    out: list[SimpleperfFile] = []
    pos = 0
    while pos + 4 <= len(data) and len(out) < _MAX_FILE2_ENTRIES:
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if pos + size > len(data):
            raise ValueError("file entry past the section")
        msg = _fields(data[pos : pos + size])
        pos += size
        raw_path = msg.get(1, [b""])[0]
        path = _cstr(raw_path) if isinstance(raw_path, bytes) else ""
        kind = msg.get(2, [0])[0]
        low = msg.get(3, [0])[0]
        offset: int | None = None
        for number in (6, 7):
            for sub in msg.get(number, []):
                if isinstance(sub, bytes):
                    got = _fields(sub).get(1, [0])[0]
                    offset = got if isinstance(got, int) else None
        out.append(
            SimpleperfFile(
                path,
                kind if isinstance(kind, int) else 0,
                low if isinstance(low, int) else 0,
                offset,
            )
        )
    return out


def _auxtrace_index(data: bytes) -> list[tuple[int, int]]:
    """The AUXTRACE feature: (offset, size) pairs; perf puts a count first, simpleperf does not."""
    words = len(data) // 8
    vals = struct.unpack_from(f"<{words}Q", data, 0)
    start = 0
    if words % 2 == 1:
        start = 1  # perf's leading entry count
    return [(vals[k], vals[k + 1]) for k in range(start, words - 1, 2)]


def read_perf_file(blob: Blob) -> PerfFile:
    """Read a perf.data file: header, attributes, features and every record (not the AUX data).

    Raises a located :class:`~cstrace.errors.InputError` when the header cannot
    be read; problems further on end the reading there and are in
    :attr:`PerfFile.issues`.
    """
    parser = _Parser(blob)
    pf = parser.header()
    parser.records(pf)
    return pf
