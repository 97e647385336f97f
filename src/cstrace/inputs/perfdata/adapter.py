"""A perf.data recording as a :class:`~cstrace.trace.Trace`: sources, AUX data, events, images.

Input: a perf.data file with CoreSight trace (``perf record -e cs_etm//``,
``simpleperf record -e cs-etm``) and where to look for the programs it ran
(:class:`~cstrace.inputs.symbols.SymbolPaths`). Output: a
:class:`PerfRecording` (what :func:`read_recording` found, for ``cstrace info``)
and its :class:`~cstrace.trace.Trace` (:func:`open_perf_data`):

- **sources**: one per CPU of the cs_etm AUXTRACE_INFO (:mod:`.csetm`), named
  ``cpuN``, with its registers and the core type perf and simpleperf give the
  decoder (``ARMv8-A`` for ETMv4, ``ARM-AA64`` for ETE, ``ARMv7-A`` for
  ETMv3/PTM). The trace ID is the metadata's, or the one an
  AUX_OUTPUT_HW_ID record gives for the CPU (newer kernels allocate them);
  with sink IDs (HW_ID version 0.1), a CPU's formatted data is decoded with
  the units that share its sink.
- **buffers**: one per PERF_RECORD_AUX with data, named ``cpuN.auxK`` (per
  thread: ``tidN.auxK``), holding exactly the bytes the record says are trace
  (the AUXTRACE buffers they lie in may be longer), read in place from the
  file. Each is decoded on its own, with the decoders reset, as perf
  (``cs_etm__queue_aux_fragment``) and simpleperf (``ETMDecoder::ProcessData``)
  do. Formatted data (an ETR: CoreSight frames) is ``coresight``; raw data
  (AUX flag 0x100, a TRBE) is ``source_data`` of the record's CPU. Each buffer
  carries who ran when its trace began (CPU, process, thread: the last
  ITRACE_START or context switch on its CPU, or the traced thread of a
  per-thread recording) and the AUX record's time, at which code is looked up.
  A file with AUXTRACE data but no AUX records gives one buffer per AUXTRACE
  record.
- **the event log**: MMAP and MMAP2 (executable mappings: each image at its
  load base, with its extent and build ID), COMM (an exec ends the old
  mappings), FORK (a new process inherits its parent's mappings; a new thread
  is declared), EXIT (1 ns after its time: the AUX data the kernel flushes as
  a task exits may carry the exit's time), ITRACE_START and context switches
  (threads of processes), in time order. Kernel mappings (pid -1) belong to process 0.
  Timestamps are perf's; a TIME_CONV record (with the trace units stamping
  the virtual counter, TS_SOURCE 1) becomes the trace's clock.
- **images**: each image a mapping names, found by build ID and name
  (:mod:`cstrace.inputs.symbols`), at its path on the traced system as its name.
  A kernel module (a relocatable ELF file, :class:`~cstrace.memory.elf.ModuleLayout`)
  has its memory at its mapping, laid out as the kernel lays it out, unless the
  recording says where its code was: simpleperf's FILE2 feature (how far into the
  module's memory a symbol of its ``.text`` was), or the kallsyms of a ``perf record
  --kcore`` folder (where the running kernel had one of its functions).
- **the kernel's code** from a kcore copy (:mod:`.kcore`: a ``perf record
  --kcore`` folder's ``kcore_dir/kcore``, or ``--kcore FILE``): its segments
  are memory at their kernel addresses in every process; the kernel, and each
  module whose mapping they hold, counts as found there unless a vmlinux or a
  module file was found for it.
- CONTEXTIDR convention: ``tid`` for ETMv4 and ETE (arm64 Linux writes the
  thread ID), ``vmid`` when TRCCONFIGR traces the process as the VMID
  (CONTEXTIDR_EL2, a kernel at EL2), ``pid`` for ETMv3 and PTM.

Problems are located :class:`~cstrace.errors.Issue` records: AUX data the
file does not hold (a warning per AUX record, with its CPU, AUX offset and
size; what is there is decoded, and a recording whose trace is all missing
gives a trace with no buffers and one more warning, as simpleperf's ``inject``
succeeds on it), a CPU without a trace ID, records cut short. What cannot be
read as CoreSight trace at all (no cs_etm metadata) is an
:class:`~cstrace.errors.InputError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cstrace.capture import FRAME_SIZE, demux_frames
from cstrace.errors import InputError, Issue, IssueKind, Severity
from cstrace.inputs.files import PathBlob, SliceBlob
from cstrace.inputs.perfdata.csetm import CS_ETM_AUXTRACE_TYPE, CsEtmInfo, parse_cs_etm_info
from cstrace.inputs.perfdata.kcore import (
    KernelCore,
    module_symbols,
    read_kcore,
    recording_files,
)
from cstrace.inputs.perfdata.records import (
    SIMPLEPERF_KERNEL_MODULE,
    AuxOutputHwIdRecord,
    AuxRecord,
    AuxtraceInfoRecord,
    AuxtraceRecord,
    CommRecord,
    ItraceStartRecord,
    MmapRecord,
    PerfFile,
    Record,
    SampleId,
    SwitchRecord,
    TaskRecord,
    TimeConvRecord,
    read_perf_file,
)
from cstrace.inputs.symbols import FoundImage, ImageSearch, SymbolPaths, trim_build_id
from cstrace.memory.clock import CounterClock
from cstrace.memory.elf import ElfImage, load_elf
from cstrace.memory.events import (
    Event,
    EventLog,
    LibraryEvent,
    ProcessEvent,
    State,
    ThreadEvent,
    format_event_log,
)
from cstrace.trace import Buffer, Dump, ExecContext, Image, Origin, Source, Trace

__all__ = [
    "AUXTRACE_TYPES",
    "AuxPiece",
    "PerfImage",
    "PerfRecording",
    "open_perf_data",
    "read_recording",
]

AUXTRACE_TYPES = {
    1: "Intel PT",
    2: "Intel BTS",
    3: "CoreSight ETM",
    4: "Arm SPE",
    5: "s390 CPU-MF",
    6: "HiSilicon PTT",
}
"""What each AUXTRACE_INFO type is."""

_ANONYMOUS = ("//anon", "[anon", "[stack", "[heap", "/dev/", "/memfd:", "[uprobes", "//")
_KERNEL_NAMES = ("[kernel.kallsyms]", "[guest.kernel.kallsyms]")
_REGISTER_NAMES = ("TS_SOURCE",)


@dataclass
class AuxPiece:
    """One piece of AUX data: a PERF_RECORD_AUX (or a whole AUXTRACE record) and its bytes."""

    buffer: str
    """The name of its trace buffer (empty when its data is missing)."""
    cpu: int | None
    tid: int | None
    """The traced thread of a per-thread recording's AUX area, else None."""
    size: int
    """Bytes of trace the record says."""
    present: int
    """Bytes of it the file holds."""
    flags: list[str]
    raw: bool
    record: Record
    time: int | None
    """The AUX record's time (perf time), at which its code is looked up."""
    slices: list[tuple[int, int]] = field(default_factory=list)
    """(file offset, length) of its bytes in the file, in order."""
    context: ExecContext | None = None
    """Who ran when its trace began."""
    trace_ids: dict[int, int] = field(default_factory=dict)
    """The trace IDs in its data, with their bytes (formatted data; raw data: its CPU's)."""


@dataclass
class PerfImage:
    """An image the recording maps as code: its name, build ID, processes, and the file found."""

    name: str
    build_id: str | None
    pids: set[int] = field(default_factory=set)
    found: FoundImage | None = None
    mismatches: list[tuple[Path, bytes | None]] = field(default_factory=list)


@dataclass
class PerfRecording:
    """What :func:`read_recording` found in a perf.data file (``cstrace info`` prints it)."""

    file: PerfFile
    etm: CsEtmInfo
    trace_ids: dict[int, int]
    """CPU → trace ID."""
    id_origin: dict[int, str]
    """CPU → where its trace ID came from (``metadata``, ``AUX_OUTPUT_HW_ID``)."""
    sinks: dict[int, int]
    """CPU → sink ID (AUX_OUTPUT_HW_ID version 0.1)."""
    pieces: list[AuxPiece]
    aux_records: list[AuxRecord]
    auxtrace: list[AuxtraceRecord]
    processes: dict[int, str]
    """pid → its last name (COMM)."""
    threads: dict[int, int]
    """tid → pid."""
    images: list[PerfImage]
    events: list[Event]
    mode: str
    clock: CounterClock | None
    per_thread: bool
    issues: list[Issue] = field(default_factory=list)
    kcore: KernelCore | None = None
    """The kernel's code copied by ``perf record --kcore`` (or given with ``--kcore``)."""


# --- reading -------------------------------------------------------------------------------


def _issue(severity: Severity, message: str, path: str, offset: int | None) -> Issue:
    return Issue(severity, IssueKind.INPUT, message, path, offset=offset)


def _etm_info(pf: PerfFile) -> CsEtmInfo:
    infos = [r for r in pf.records if isinstance(r, AuxtraceInfoRecord)]
    if not infos:
        stopped = [i for i in pf.issues if i.is_error]
        if stopped:
            # The file was cut (or damaged) before its metadata: say where reading stopped.
            raise InputError(
                f"no AUXTRACE_INFO record before the records stop: {stopped[0].message}",
                path=pf.path,
                offset=stopped[0].offset,
            )
        raise InputError(
            "a perf.data file without AUX area trace (no AUXTRACE_INFO record in its "
            "data section): nothing for cstrace to decode",
            path=pf.path,
            offset=pf.data_offset,
        )
    info = infos[0]
    if info.auxtrace_type != CS_ETM_AUXTRACE_TYPE:
        what = AUXTRACE_TYPES.get(info.auxtrace_type, f"type {info.auxtrace_type}")
        raise InputError(
            f"the AUX area trace is {what}, not CoreSight ETM", path=pf.path, offset=info.offset
        )
    return parse_cs_etm_info(info.priv, pf.path, info.priv_offset)


def _image_name(filename: str) -> str | None:
    """The name an executable mapping's image goes by; None for anonymous memory."""
    name = filename.removesuffix(" (deleted)")
    if not name or name.startswith(_ANONYMOUS):
        return None
    for k in _KERNEL_NAMES:
        if name.startswith(k):
            return k
    return name


class _Log:
    """Builds the event log from the records (see the module docstring)."""

    def __init__(
        self,
        bases: dict[tuple[str, str | None], ElfImage | None],
        placed: dict[str, tuple[int, int]] | None = None,
        kallsyms: dict[str, list[tuple[int, str]]] | None = None,
    ) -> None:
        self.events: list[Event] = []
        self.open: dict[int, dict[int, LibraryEvent | ProcessEvent]] = {}
        self.extent: dict[tuple[int, int], tuple[int, int]] = {}
        self.main: set[int] = set()
        self.threads: dict[int, int] = {}
        self.seen: dict[int, int] = {}
        """Every thread met, with its process (``threads`` forgets those that ended)."""
        self.declared: set[tuple[int, int]] = set()
        self.elfs = bases
        self.placed = placed or {}
        """Kernel module path -> (own address, its offset in the module's memory): where
        the recording says the module's code was (simpleperf's FILE2)."""
        self.kallsyms = kallsyms or {}
        """Module name -> (address, name) of its code symbols in the running kernel."""

    def end_maps(self, pid: int, time: int) -> None:
        for e in self.open.pop(pid, {}).values():
            cls = type(e)
            self.events.append(cls(time, 0, State.END, pid, e.base, e.image, e.uuid, e.size))
        self.main.discard(pid)

    def thread(self, tid: int, pid: int, time: int, state: State) -> None:
        if tid <= 0 or pid <= 0:
            return
        if state == State.END:
            if tid != pid and self.threads.get(tid) == pid:
                self.events.append(ThreadEvent(time, 0, State.END, tid, pid))
                del self.threads[tid]
                self.declared.discard((tid, pid))
            return
        self.threads[tid] = pid
        self.seen[tid] = pid
        if tid != pid and (tid, pid) not in self.declared:
            self.declared.add((tid, pid))
            self.events.append(ThreadEvent(time, 0, state, tid, pid))

    def mmap(self, r: MmapRecord, time: int, build_id: str | None) -> None:
        name = _image_name(r.filename)
        if name is None or not r.executable or r.length <= 0:
            return
        pid = 0 if r.pid < 0 else r.pid
        start, end = r.start, r.start + r.length
        elf = self.elfs.get((name, build_id))
        if name in _KERNEL_NAMES:
            base = start
        elif elf is not None and elf.module is not None:
            # A kernel module: its memory starts at the mapping, laid out as the kernel
            # lays it out, unless the recording says where its code went.
            base = start
            placed = self.placed.get(r.filename)
            if placed is not None:
                own, offset = placed
                base = start + offset - own + elf.link_base
            else:
                at = _kallsyms_place(elf, self.kallsyms.get(_module_key(name), []), start, end)
                if at is not None:
                    base = at
        elif elf is not None and elf.elf_type == "ET_EXEC":
            base = elf.link_base
        elif elf is not None:
            link = elf.link_address(r.pgoff)
            base = start - (link - elf.link_base) if link is not None else start - r.pgoff
        else:
            base = start - r.pgoff
        maps = self.open.setdefault(pid, {})
        # A new mapping replaces what it overlaps.
        for other_base, other in list(maps.items()):
            lo, hi = self.extent[(pid, other_base)]
            if other_base != base and lo < end and start < hi:
                cls = type(other)
                self.events.append(
                    cls(time, 0, State.END, pid, other.base, other.image, other.uuid, other.size)
                )
                del maps[other_base]
        old = maps.get(base)
        lo, hi = start, end
        if old is not None and (old.image, old.uuid) == (name, build_id):
            plo, phi = self.extent[(pid, base)]
            lo, hi = min(lo, plo), max(hi, phi)
            if (lo, hi) == (plo, phi):
                return
        size = max(hi - base, 1)  # from the load base to the end of the mapping
        is_main = old is not None and not isinstance(old, LibraryEvent)
        if old is None and pid not in self.main and pid != 0:
            is_main = True
            self.main.add(pid)
        cls = ProcessEvent if is_main else LibraryEvent
        e = cls(time, 0, State.START, pid, base, name, build_id, max(size, 1))
        maps[base] = e
        self.extent[(pid, base)] = (lo, hi)
        self.events.append(e)

    def fork(self, r: TaskRecord, time: int) -> None:
        if r.pid != r.tid:
            self.thread(r.tid, r.pid, time, State.START)
            return
        if r.pid <= 0:
            return
        self.end_maps(r.pid, time)
        for e in self.open.get(r.ppid, {}).values():
            cls = type(e)
            copy = cls(time, 0, State.START, r.pid, e.base, e.image, e.uuid, e.size)
            self.open.setdefault(r.pid, {})[e.base] = copy
            self.extent[(r.pid, e.base)] = self.extent[(r.ppid, e.base)]
            self.events.append(copy)
            if cls is ProcessEvent:
                self.main.add(r.pid)

    def exit(self, r: TaskRecord, time: int) -> None:
        # The kernel flushes a task's AUX data when it exits: that AUX record may carry
        # the exit's own time stamp. The exit takes effect 1 ns later, so that data
        # still sees the process (perf and simpleperf keep a dead task's maps too).
        time += 1
        if r.pid == r.tid and r.pid > 0:
            self.end_maps(r.pid, time)
            for tid, pid in list(self.threads.items()):
                if pid == r.pid:
                    self.thread(tid, pid, time, State.END)
        else:
            self.thread(r.tid, r.pid, time, State.END)


def _module_key(name: str) -> str:
    """The kernel's name of the module file ``name`` (``/x/rq-stats.ko`` or ``[rq_stats]``:
    ``rq_stats``)."""
    base = name.rsplit("/", 1)[-1].strip("[]")
    return base.removesuffix(".ko").replace("-", "_")


def _kallsyms_place(
    elf: ElfImage, symbols: list[tuple[int, str]], start: int, end: int
) -> int | None:
    """Where a module's first byte goes for its functions to be where the running
    kernel's symbol list has them: the first of its code symbols in the mapping that the
    file defines (None: none)."""
    if elf.module is None:
        return None
    own = dict(elf.module.functions)
    for address, name in symbols:
        if start <= address < end and name in own:
            return address - own[name] + elf.link_base
    return None


def _build_id_of(r: MmapRecord, by_name: dict[tuple[int, str], bytes]) -> str | None:
    raw = r.build_id
    if raw is None:
        raw = by_name.get((r.pid, r.filename)) or by_name.get((-1, r.filename))
        if raw is None and r.pid < 0:
            name = _image_name(r.filename)
            raw = by_name.get((-1, name or ""))
    if not raw or not any(raw):
        return None
    return trim_build_id(raw).hex()


def read_recording(path: str | Path, symbols: SymbolPaths | None = None) -> PerfRecording:
    """Read a perf.data file with CoreSight trace (or a ``perf record --kcore`` folder), and
    find the images it names."""
    symbols = symbols or SymbolPaths()
    data_path, kcore_path = recording_files(path, symbols.kcore)
    blob = PathBlob(data_path)
    if not blob.exists():
        raise InputError("no such file", path=str(data_path))
    kcore = read_kcore(kcore_path) if kcore_path is not None else None
    pf = read_perf_file(blob)
    etm = _etm_info(pf)
    name = pf.path
    issues = list(pf.issues)
    for text in etm.skipped:
        issues.append(_issue(Severity.WARNING, f"cs_etm metadata: {text}; skipped", name, None))
    # simpleperf keeps the maps of the processes that existed before the recording in
    # its INIT_MAP feature: they come first.
    records = [*pf.init_records, *pf.records]

    # Trace IDs: the metadata's, then what AUX_OUTPUT_HW_ID records say per CPU.
    trace_ids: dict[int, int] = {}
    origin: dict[int, str] = {}
    for c in etm.cpus:
        if c.trace_id is not None:
            trace_ids[c.cpu] = c.trace_id
            origin[c.cpu] = "metadata"
    sinks: dict[int, int] = {}
    hw_seen: set[int] = set()
    for r in records:
        if isinstance(r, AuxOutputHwIdRecord):
            cpu = r.sample.cpu
            if cpu is None:
                issues.append(
                    _issue(
                        Severity.WARNING,
                        "an AUX_OUTPUT_HW_ID record without a CPU (no sample_id); ignored",
                        name,
                        r.offset,
                    )
                )
                continue
            if r.major != 0:
                issues.append(
                    _issue(
                        Severity.WARNING,
                        f"AUX_OUTPUT_HW_ID version {r.major}.{r.minor} is not known; ignored",
                        name,
                        r.offset,
                    )
                )
                continue
            if cpu in hw_seen and trace_ids.get(cpu) != r.trace_id:
                issues.append(
                    _issue(
                        Severity.WARNING,
                        f"CPU {cpu} changes trace ID to {r.trace_id:#x}; the first one "
                        f"({trace_ids[cpu]:#x}) is used",
                        name,
                        r.offset,
                    )
                )
                continue
            hw_seen.add(cpu)
            trace_ids[cpu] = r.trace_id
            origin[cpu] = "AUX_OUTPUT_HW_ID"
            if r.sink is not None:
                sinks[cpu] = r.sink

    # Images: the executable file mappings, by (name, build ID), searched for once.
    by_name: dict[tuple[int, str], bytes] = {}
    for b in pf.build_ids:
        by_name.setdefault((b.pid, b.filename), b.build_id)
        by_name.setdefault((-1, b.filename), b.build_id)
    search = ImageSearch(symbols)
    images: dict[tuple[str, str | None], PerfImage] = {}
    elfs: dict[tuple[str, str | None], ElfImage | None] = {}
    for r in records:
        if isinstance(r, MmapRecord) and r.executable:
            iname = _image_name(r.filename)
            if iname is None:
                continue
            bid = _build_id_of(r, by_name)
            key = (iname, bid)
            img = images.get(key)
            if img is None:
                img = images[key] = PerfImage(iname, bid)
                look = "vmlinux" if iname in _KERNEL_NAMES else iname
                img.found = search.find(look, bytes.fromhex(bid) if bid else None)
                img.mismatches = list(search.mismatches.get(look, []))
                elfs[key] = _load(img.found)
            if (
                img.found is None
                and kcore is not None
                and r.pid < 0
                and kcore.covers(r.start, r.start + r.length)
            ):
                # The kernel, or a module, whose code the kcore copy holds.
                img.found = FoundImage(kcore.path, "kcore", None)
            img.pids.add(0 if r.pid < 0 else r.pid)

    # The event log, and who runs on each CPU over time.
    placed = {
        f.path: (f.min_vaddr, f.offset)
        for f in pf.simpleperf_files
        if f.type == SIMPLEPERF_KERNEL_MODULE and f.offset is not None
    }
    kallsyms = (
        module_symbols(kcore.kallsyms) if kcore is not None and kcore.kallsyms is not None else {}
    )
    log = _Log(elfs, placed, kallsyms)
    comms: dict[int, str] = {}
    running: dict[int, list[tuple[int, int, int, int]]] = {}  # cpu → (time, order, pid, tid)
    last_time = 0
    # A recording without time (no PERF_SAMPLE_TIME: perf record --per-thread) is in
    # the order things happened: that order is its time, so an exec still ends the
    # maps before it and the AUX data after it sees the new program.
    untimed = all(r.sample.time is None for r in records)
    times: dict[int, int] = {}
    for order, r in enumerate(records):
        t = order if untimed else r.sample.time
        time = last_time if t is None else t
        last_time = max(last_time, time)
        times[id(r)] = time
        if isinstance(r, MmapRecord):
            log.mmap(r, time, _build_id_of(r, by_name))
        elif isinstance(r, CommRecord):
            comms[r.pid] = r.comm
            if r.exec:
                log.end_maps(r.pid, time)
            log.thread(r.tid, r.pid, time, State.START)
        elif isinstance(r, TaskRecord):
            if r.exit:
                log.exit(r, time)
            else:
                log.fork(r, time)
        elif isinstance(r, ItraceStartRecord | SwitchRecord):
            who = _who(r)
            if who is not None:
                pid, tid = who
                log.thread(tid, pid, time, State.CURRENT)
                if r.sample.cpu is not None:
                    running.setdefault(r.sample.cpu, []).append((time, order, pid, tid))
    events = sorted(log.events, key=lambda e: e.timestamp)

    # The clock: perf's TIME_CONV, when the trace units stamp the virtual counter.
    clock = None
    conv = next((r for r in records if isinstance(r, TimeConvRecord)), None)
    virtual = bool(etm.cpus) and all(c.registers.get("TS_SOURCE") == 1 for c in etm.cpus)
    if conv is not None and conv.cap_user_time_zero and virtual:
        clock = CounterClock(
            conv.time_shift,
            conv.time_mult,
            conv.time_zero,
            conv.time_cycles,
            conv.time_mask,
            conv.cap_user_time_short,
        )

    protocols = {c.protocol for c in etm.cpus}
    if any(c.context_in_vmid for c in etm.cpus):
        mode = "vmid"
    elif protocols & {"etmv4", "ete"}:
        mode = "tid"
    else:
        mode = "pid"

    auxtrace = [r for r in records if isinstance(r, AuxtraceRecord)]
    aux = [r for r in records if isinstance(r, AuxRecord)]
    per_thread = any(r.cpu == -1 for r in auxtrace)
    rec = PerfRecording(
        pf,
        etm,
        trace_ids,
        origin,
        sinks,
        [],
        aux,
        auxtrace,
        comms,
        dict(log.seen),
        list(images.values()),
        events,
        mode,
        clock,
        per_thread,
        issues,
        kcore,
    )
    _pieces(rec, running, times if untimed else {})
    for piece in rec.pieces:
        if not piece.present:
            continue
        if piece.raw:
            own = trace_ids.get(piece.cpu) if piece.cpu is not None else None
            piece.trace_ids = {} if own is None else {own: piece.present}
        else:
            piece.trace_ids = _ids_in(blob, piece.slices)
    for c in etm.cpus:
        if c.cpu not in trace_ids:
            issues.append(
                _issue(
                    Severity.WARNING,
                    f"CPU {c.cpu} has no trace ID (the metadata leaves it to an "
                    "AUX_OUTPUT_HW_ID record, and there is none): its trace is not decoded",
                    name,
                    c.offset,
                )
            )
    return rec


def _load(found: FoundImage | None) -> ElfImage | None:
    """The ELF file found for an image (its segments place the image), if it reads."""
    if found is None:
        return None
    try:
        data = found.path.read_bytes()
        return load_elf(data, str(found.path)) if data[:4] == b"\x7fELF" else None
    except (OSError, InputError):
        return None


def _who(r: ItraceStartRecord | SwitchRecord) -> tuple[int, int] | None:
    """(pid, tid) of the thread that runs on the record's CPU after it (None: no thread, or
    -1, which names none)."""
    got = _who_raw(r)
    return None if got is None or min(got) < 0 else got


def _who_raw(r: ItraceStartRecord | SwitchRecord) -> tuple[int, int] | None:
    if isinstance(r, ItraceStartRecord):
        return r.pid, r.tid
    if r.out:
        if r.next_prev_pid is None or r.next_prev_tid is None:
            return None
        return r.next_prev_pid, r.next_prev_tid
    if r.sample.pid is None or r.sample.tid is None:
        return None
    return r.sample.pid, r.sample.tid


def _context_at(
    updates: list[tuple[int, int, int, int]], start: int | None, end: int | None
) -> tuple[int, int] | None:
    """(pid, tid) running when a piece of trace began: the last change at or before ``start``,
    else the first one before ``end``."""
    best: tuple[int, int] | None = None
    for time, _order, pid, tid in updates:
        if start is not None and time <= start:
            best = (pid, tid)
        elif best is None and (end is None or time <= end):
            return pid, tid
    return best


def _pieces(
    rec: PerfRecording,
    running: dict[int, list[tuple[int, int, int, int]]],
    times: dict[int, int],
) -> None:
    """The AUX pieces of the recording: where each one's bytes are in the file, who ran
    (``times``: the time of each record, by ``id``, for a recording whose records have
    none)."""
    name = rec.file.path
    queues: dict[tuple[str, int], list[AuxtraceRecord]] = {}
    for a in rec.auxtrace:
        key = ("tid", a.tid) if a.cpu == -1 else ("cpu", a.cpu)
        queues.setdefault(key, []).append(a)
    for lst in queues.values():
        lst.sort(key=lambda a: a.aux_offset)
    for updates in running.values():
        updates.sort()
    counters: dict[tuple[str, int], int] = {}
    previous: dict[tuple[str, int], int | None] = {}

    def label(key: tuple[str, int]) -> str:
        n = counters.get(key, 0)
        counters[key] = n + 1
        return f"{key[0]}{key[1]}.aux{n}"

    def who_ran(
        key: tuple[str, int], cpu: int | None, start: int | None, end: int | None
    ) -> ExecContext:
        if key[0] == "tid":
            tid = key[1]
            return ExecContext(cpu, rec.threads.get(tid, tid) if tid > 0 else None, tid)
        got = _context_at(running.get(cpu, []), start, end) if cpu is not None else None
        return ExecContext(cpu, *(got or (None, None)))

    with_data = [r for r in rec.aux_records if r.aux_size > 0]
    if not with_data:
        # No AUX records to split the data: each AUXTRACE buffer is one piece.
        for key, lst in queues.items():
            for a in lst:
                cpu = a.cpu if a.cpu >= 0 else None
                piece = AuxPiece(
                    label(key) if a.present else "",
                    cpu,
                    a.tid if a.cpu == -1 else None,
                    a.data_size,
                    a.present,
                    [],
                    False,
                    a,
                    None,
                    [(a.data_offset, a.present)] if a.present else [],
                    who_ran(key, cpu, None, None),
                )
                rec.pieces.append(piece)
        return
    only = next(iter(queues)) if len(queues) == 1 else None
    for r in with_data:
        cpu = r.sample.cpu
        if rec.per_thread:
            key = ("tid", r.sample.tid if r.sample.tid is not None else -1)
        else:
            key = ("cpu", cpu if cpu is not None else -1)
        if key not in queues and only is not None and r.sample == SampleId():
            # No sample_id to say whose data it is: the one AUX area there is.
            key = only
            cpu = key[1] if key[0] == "cpu" else None
        start = r.data_start
        end = start + r.aux_size
        slices: list[tuple[int, int]] = []
        covered = start
        for a in queues.get(key, []):
            lo, hi = a.aux_offset, a.aux_offset + a.data_size
            if hi <= covered:
                continue
            if lo > covered:
                break  # a gap: the data between is not in the file
            stop = min(hi, end)
            rel = covered - lo
            have = max(0, min(stop - covered, a.present - rel))
            if have:
                slices.append((a.data_offset + rel, have))
                covered += have
            if covered < stop or covered >= end:
                break
        present = covered - start
        time = times.get(id(r), r.sample.time)
        prev = previous.get(key)
        previous[key] = time if time is not None else prev
        piece = AuxPiece(
            label(key) if present else "",
            cpu,
            key[1] if key[0] == "tid" else None,
            r.aux_size,
            present,
            r.flag_names(),
            r.raw,
            r,
            time,
            slices,
            who_ran(key, cpu, prev, time),
        )
        if present < r.aux_size:
            where = f"CPU {cpu}" if key[0] == "cpu" else f"thread {key[1]}"
            rec.issues.append(
                _issue(
                    Severity.WARNING,
                    f"the AUX record of {where} says {r.aux_size} bytes of trace at AUX "
                    f"offset {start:#x}; {r.aux_size - present} of them are not in the file"
                    + ("; the rest is decoded" if present else ""),
                    name,
                    r.offset,
                )
            )
        rec.pieces.append(piece)


_SCAN_BLOCK = FRAME_SIZE << 16


def _ids_in(blob: PathBlob, slices: list[tuple[int, int]]) -> dict[int, int]:
    """The trace IDs in formatted AUX data, with how many bytes each has (block by block)."""
    out: dict[int, int] = {}
    carry = b""
    for off, n in slices:
        for k in range(0, n, _SCAN_BLOCK):
            data = carry + blob.read(off + k, min(_SCAN_BLOCK, n - k))
            whole = len(data) - len(data) % FRAME_SIZE
            carry = data[whole:]
            for tid, stream in demux_frames(data[:whole]).streams.items():
                # 0 is padding, 0x70 and up are reserved or triggers: no source has them.
                if 0 < tid < 0x70:
                    out[tid] = out.get(tid, 0) + len(stream)
    return out


def _sources(rec: PerfRecording) -> dict[int, Source]:
    """One source per CPU with a trace ID (its buffers are filled in later)."""
    out: dict[int, Source] = {}
    for c in rec.etm.cpus:
        tid = rec.trace_ids.get(c.cpu)
        if tid is None:
            continue
        regs = {
            k: v for k, v in c.registers.items() if k not in _REGISTER_NAMES and "PARAM" not in k
        }
        regs["ETMTRACEIDR" if c.magic_name == "ETMv3/PTM" else "TRCTRACEIDR"] = tid
        out[c.cpu] = Source(
            f"cpu{c.cpu}",
            c.protocol,
            c.source_type,
            regs,
            (),
            c.core,
            f"cpu{c.cpu}",
            Origin(rec.file.path),
            c.cpu,
        )
    return out


def open_perf_data(path: str | Path, symbols: SymbolPaths | None = None) -> Trace:
    """The :class:`~cstrace.trace.Trace` of a perf.data recording (see the module docstring)."""
    rec = read_recording(path, symbols)
    blob = PathBlob(rec.file.path)
    sources = _sources(rec)
    feeds: dict[int, list[str]] = {cpu: [] for cpu in sources}
    buffers: list[Buffer] = []
    for piece in rec.pieces:
        if not piece.buffer:
            continue
        if piece.raw:
            cpus = [piece.cpu] if piece.cpu in sources else []
            if not cpus:
                rec.issues.append(
                    _issue(
                        Severity.ERROR,
                        f"raw trace of CPU {piece.cpu}, which has no trace unit with a trace "
                        "ID; not decoded",
                        rec.file.path,
                        piece.record.offset,
                    )
                )
                continue
        else:
            # The CPUs whose trace IDs the data holds (those sharing the piece's sink,
            # when the IDs are allocated per sink).
            sink = rec.sinks.get(piece.cpu) if piece.cpu is not None else None
            group = [c for c in sources if sink is None or rec.sinks.get(c, sink) == sink]
            by_id = {rec.trace_ids[c]: c for c in group}
            cpus = sorted(by_id[t] for t in piece.trace_ids if t in by_id)
            unknown = sorted(t for t in piece.trace_ids if t not in by_id)
            if unknown:
                ids = ", ".join(f"{t:#04x}" for t in unknown)
                rec.issues.append(
                    _issue(
                        Severity.WARNING,
                        f"{piece.buffer}: trace ID(s) {ids} belong to no CPU of the "
                        "metadata; not decoded",
                        rec.file.path,
                        piece.record.offset,
                    )
                )
        for c in cpus:
            feeds[c].append(piece.buffer)
        buffers.append(
            Buffer(
                piece.buffer,
                "source_data" if piece.raw else "coresight",
                tuple(SliceBlob(blob, off, n) for off, n in piece.slices),
                Origin(rec.file.path),
                piece.context,
                piece.time,
            )
        )
    if not buffers:
        # Nothing to decode is a result (an empty one): say why, where the trace should
        # have been (the first AUX or AUXTRACE record, else the data section).
        first = next((r.offset for r in [*rec.aux_records, *rec.auxtrace]), rec.file.data_offset)
        rec.issues.append(
            _issue(
                Severity.WARNING,
                "no trace to decode: "
                + (
                    "the AUX records' data is not in the file"
                    if any(p.size for p in rec.pieces)
                    else "no AUX record has trace data"
                ),
                rec.file.path,
                first,
            )
        )
    final = [
        Source(
            s.name,
            s.protocol,
            s.source_type,
            s.registers,
            tuple(feeds[cpu]),
            s.core,
            s.core_name,
            s.origin,
            s.cpu,
        )
        for cpu, s in sorted(sources.items())
    ]
    images = [
        Image(PathBlob(img.found.path), img.name, uuid=img.build_id, origin=Origin(rec.file.path))
        for img in rec.images
        if img.found is not None and img.found.how != "kcore"
    ]
    dumps: list[Dump] = []
    if rec.kcore is not None:
        core = PathBlob(rec.kcore.path)
        dumps = [
            Dump(core, s.address, offset=s.offset, length=s.size, origin=Origin(str(core.name)))
            for s in rec.kcore.segments
        ]
    log_path = f"{rec.file.path} (its records)"
    text = format_event_log(
        rec.events,
        f"event log from the records of {Path(rec.file.path).name} (perf time, ns)",
    )
    cmd = " ".join(rec.file.cmdline)
    return Trace(
        buffers,
        final,
        dumps=dumps,
        images=images,
        events=EventLog(log_path, list(rec.events), text),
        contextidr=rec.mode,
        description=f"perf.data: {cmd}" if cmd else "perf.data recording",
        issues=list(rec.issues),
        clock=rec.clock,
    )
