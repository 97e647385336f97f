"""What a perf.data recording holds, as the lines ``cstrace info`` prints.

Input: a :class:`~cstrace.inputs.perfdata.PerfRecording`. Output: text lines:
how it was recorded, the trace unit of each CPU (protocol, trace ID and where
it came from, the registers), the AUX data per CPU (records, bytes, flags,
the trace IDs in it), the processes, and each binary mapped as code with its
build ID and whether (and where) its file was found::

    perf_etm.data: perf.data recording (12321 bytes)
      recorded with: /data/local/tmp/simpleperf64 record -e cs-etm:u ...
      CPU 7: ETMv4 (ETM4.2), trace ID 0x1e (metadata): TRCCONFIGR=0x40 ...
      AUX data of CPU 7: 4 records, 384 bytes of trace in the file; trace IDs 0x1e (...)
      binary /data/local/tmp/etm_test_loop, build ID 0c9a...: found (symdir): ...
"""

from __future__ import annotations

from collections import Counter

from cstrace.inputs.perfdata import PerfRecording
from cstrace.inputs.perfdata.adapter import AUXTRACE_TYPES
from cstrace.inputs.perfdata.csetm import CS_ETM_AUXTRACE_TYPE

__all__ = ["perf_info_lines"]

_SHOWN_META = ("simpleperf_version", "android_version", "product_props", "clockid")


def _regs(values: dict[str, int]) -> str:
    return " ".join(f"{k}={v:#x}" for k, v in values.items())


def perf_info_lines(rec: PerfRecording) -> list[str]:
    """The lines of ``cstrace info`` for a perf.data recording (see the module docstring)."""
    pf = rec.file
    out = [f"{pf.path}: perf.data recording ({pf.size} bytes{', pipe mode' if pf.pipe else ''})"]
    if pf.cmdline:
        out.append(f"  recorded with: {' '.join(pf.cmdline)}")
    system = [x for x in (pf.arch, pf.osrelease, pf.hostname) if x]
    if system:
        out.append(f"  system: {', '.join(system)}")
    meta = [f"{k}={pf.meta_info[k]}" for k in _SHOWN_META if k in pf.meta_info]
    if meta:
        out.append(f"  simpleperf: {', '.join(meta)}")
    if pf.nr_cpus is not None:
        out.append(f"  CPUs: {pf.nr_cpus[0]} online, {pf.nr_cpus[1]} available")
    out.append(f"  features: {', '.join(pf.feature_names()) or 'none'}")
    counts = Counter(r.name for r in pf.records)
    out.append("  records: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    if pf.init_records:
        init = Counter(r.name for r in pf.init_records)
        out.append(
            "  records of the maps before the recording (INIT_MAP): "
            + ", ".join(f"{n} {k}" for k, n in sorted(init.items()))
        )
    etm = rec.etm
    kind = AUXTRACE_TYPES.get(CS_ETM_AUXTRACE_TYPE, "")
    out.append(
        f"  {kind} metadata: header version {etm.version}, PMU type {etm.pmu_type}, "
        f"{etm.num_cpu} CPU(s), snapshot mode {'on' if etm.snapshot else 'off'}; "
        + ("per-thread" if rec.per_thread else "CPU-wide")
        + " recording"
    )
    for c in etm.cpus:
        tid = rec.trace_ids.get(c.cpu)
        ident = (
            f"trace ID {tid:#04x} ({rec.id_origin.get(c.cpu, '?')})"
            if tid is not None
            else "no trace ID"
        )
        sink = rec.sinks.get(c.cpu)
        where = f", sink {sink:#x}" if sink is not None else ""
        out.append(
            f"  CPU {c.cpu}: {c.magic_name} ({c.source_type}), {ident}{where}: {_regs(c.registers)}"
        )
    for text in etm.skipped:
        out.append(f"  skipped: {text}")
    out.extend(_aux_lines(rec))
    out.append(f"  CONTEXTIDR convention: {rec.mode}")
    if rec.clock is not None:
        out.append("  clock: trace timestamps converted to perf time (TIME_CONV)")
    for pid, comm in sorted(rec.processes.items()):
        threads = sorted(t for t, p in rec.threads.items() if p == pid)
        listed = ", ".join(str(t) for t in threads) or str(pid)
        out.append(f"  process {pid} {comm!r}: threads {listed}")
    if rec.kcore is not None:
        k = rec.kcore
        syms = f", kallsyms with {k.symbols} symbol(s)" if k.kallsyms is not None else ""
        out.append(
            f"  kernel code (kcore): {k.path}: {len(k.segments)} segment(s), {k.size} bytes{syms}"
        )
    for img in sorted(rec.images, key=lambda i: (i.found is None, i.name)):
        head = f"  binary {img.name}, build ID {img.build_id or 'unknown'}"
        if img.found is not None:
            out.append(f"{head}: found ({img.found.how}): {img.found.path}")
        else:
            why = "not found"
            if img.mismatches:
                p, have = img.mismatches[0]
                why += f" ({p} has build ID {have.hex() if have else 'none'})"
            out.append(f"{head}: {why}")
    for issue in rec.issues:
        label = "error" if issue.is_error else "warning"
        out.append(f"  {label}: {issue}")
    return out


def _aux_lines(rec: PerfRecording) -> list[str]:
    out: list[str] = []
    queues: dict[str, list[int]] = {}
    for a in rec.auxtrace:
        who = f"thread {a.tid}" if a.cpu == -1 else f"CPU {a.cpu}"
        queues.setdefault(who, []).append(a.data_size)
    for who, sizes in queues.items():
        out.append(
            f"  AUXTRACE data of {who}: {len(sizes)} buffer(s), {sum(sizes)} bytes "
            f"({', '.join(f'{n:#x}' for n in sizes)})"
        )
    per: dict[str, list[int]] = {}
    for k, piece in enumerate(rec.pieces):
        who = f"thread {piece.tid}" if piece.tid is not None else f"CPU {piece.cpu}"
        per.setdefault(who, []).append(k)
    for who, idx in per.items():
        pieces = [rec.pieces[k] for k in idx]
        size = sum(p.size for p in pieces)
        present = sum(p.present for p in pieces)
        fmt = {("raw (single source)" if p.raw else "formatted (CoreSight frames)") for p in pieces}
        ids: Counter[int] = Counter()
        for p in pieces:
            ids.update(p.trace_ids)
        listed = ", ".join(f"{t:#04x} ({n} bytes)" for t, n in sorted(ids.items())) or "none"
        out.append(
            f"  AUX data of {who}: {len(pieces)} record(s) with data, {size} bytes of trace"
            + (f" ({size - present} not in the file)" if present < size else "")
            + f", {' and '.join(sorted(fmt))}; trace IDs {listed}"
        )
        names = [p.buffer for p in pieces if p.buffer]
        if names:
            out.append(f"    buffers: {', '.join(names)}")
    flags: Counter[str] = Counter()
    empty = 0
    for r in rec.aux_records:
        flags.update(r.flag_names() or ["none"])
        if not r.aux_size:
            empty += 1
    if rec.aux_records:
        out.append(
            f"  AUX records: {len(rec.aux_records)} ({empty} without data); flags: "
            + ", ".join(f"{k} x{n}" for k, n in sorted(flags.items()))
        )
    else:
        out.append("  AUX records: none (each AUXTRACE buffer is decoded whole)")
    return out
