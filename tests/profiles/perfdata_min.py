"""Just enough of a perf.data file to check profiles against simpleperf's, until the reader lands.

Input: a perf.data recording of ``cs_etm`` trace with one AUXTRACE buffer
(``../shared/perfdata``); output: a :class:`~cstrace.trace.Trace` built by
hand: one buffer per PERF_RECORD_AUX record (simpleperf resets its decoder at
each), the trace source of the buffer's CPU configured from the AUXTRACE_INFO
registers (ETMv4 or ETE), and the traced program as an image at the address
the process mapped it (from its PERF_RECORD_MMAP2 records).

This is test scaffolding, not a perf.data reader: no feature sections, no
per-thread or CPU-wide queues, no build-ID cache, one AUXTRACE buffer. The
project's reader (issue 12, part 1) replaces it; the tests that use it check
the counting, which does not depend on how the trace was read.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import cstrace

_AUX = 11
_MMAP2 = 10
_AUXTRACE_INFO = 70
_AUXTRACE = 71
_ETMV4_MAGIC = 0x4040404040404040
_ETE_MAGIC = 0x5050505050505050
_AUX_RAW = 0x100  # PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW
_ETMV4_REGS = ("TRCCONFIGR", "TRCTRACEIDR", "TRCIDR0", "TRCIDR1", "TRCIDR2", "TRCIDR8")
_ETE_REGS = (*_ETMV4_REGS, "TRCAUTHSTATUS", "TRCDEVARCH")


def perfdata_dir() -> Path | None:
    """``$CSTRACE_PERFDATA``, or ``perfdata`` beside the corpus or the checkout's ``../shared``."""
    env = os.environ.get("CSTRACE_PERFDATA")
    candidates = [Path(env)] if env else []
    corpus = os.environ.get("CSTRACE_CORPUS")
    if corpus:
        candidates.append(Path(corpus).parent / "perfdata")
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "perfdata")
    for c in candidates:
        if (c / "perf_etm.data").is_file():
            return c
    return None


@dataclass
class Recording:
    """What the tests need of a recording."""

    aux: list[tuple[int, int, int]]
    """(offset, size, flags) of each PERF_RECORD_AUX."""
    data: bytes
    """The AUXTRACE buffer's bytes."""
    cpu: int
    info: tuple[int, ...]
    mmaps: list[tuple[int, int, int, str]]
    """(address, length, file offset, path) of each PERF_RECORD_MMAP2."""


def read(path: Path) -> Recording:
    """The records of ``path`` that make a profile."""
    raw = path.read_bytes()
    if raw[:8] != b"PERFILE2":
        raise ValueError(f"{path}: not a perf.data file")
    data_offset, data_size = struct.unpack_from("<QQ", raw, 40)
    pos, end = data_offset, data_offset + data_size
    rec = Recording([], b"", 0, (), [])
    while pos < end:
        rtype, _misc, size = struct.unpack_from("<IHH", raw, pos)
        body = raw[pos + 8 : pos + size]
        if rtype == _AUXTRACE:
            length, _offset, _ref, _idx, _tid, cpu = struct.unpack_from("<QQQIII", body)
            rec.data = raw[pos + size : pos + size + length]
            rec.cpu = cpu
            pos += size + length
            continue
        if rtype == _AUX:
            rec.aux.append(struct.unpack_from("<QQQ", body))
        elif rtype == _AUXTRACE_INFO:
            rec.info = struct.unpack_from(f"<{(len(body) - 8) // 8}Q", body, 8)
        elif rtype == _MMAP2:
            _pid, _tid, addr, length, pgoff = struct.unpack_from("<IIQQQ", body)
            name = body[64:].split(b"\0")[0].decode(errors="replace")
            rec.mmaps.append((addr, length, pgoff, name))
        pos += size
    return rec


def trace(path: Path, program: Path) -> cstrace.Trace:
    """The trace of ``path`` with ``program`` placed where the recording mapped its namesake."""
    rec = read(path)
    info = rec.info
    i = 3  # after the header: version, PMU type and CPU count, snapshot mode
    regs: dict[str, int] = {}
    protocol = ""
    while i + 3 <= len(info):
        magic, cpu, count = info[i : i + 3]
        values = info[i + 3 : i + 3 + count]
        i += 3 + count
        if cpu != rec.cpu:
            continue
        names = _ETMV4_REGS if magic == _ETMV4_MAGIC else _ETE_REGS
        protocol = "etmv4" if magic == _ETMV4_MAGIC else "ete"
        regs = dict(zip(names, values, strict=False))
    fmt = "source_data" if any(f & _AUX_RAW for _, _, f in rec.aux) else "coresight"
    buffers = [
        cstrace.Buffer(f"aux{k}", fmt, (cstrace.BytesBlob(rec.data[off : off + size]),))
        for k, (off, size, _f) in enumerate(a for a in rec.aux if a[1])
    ]
    source = cstrace.Source(
        "ETM",
        protocol,
        "ETM4.2" if protocol == "etmv4" else "ETE",
        regs,
        tuple(b.name for b in buffers),
        core="ARM-AA64",
    )
    name = program.name
    base = min(a for a, _, off, n in rec.mmaps if n.endswith("/" + name) and off == 0)
    device_path = next(n for _, _, _, n in rec.mmaps if n.endswith("/" + name))
    image = cstrace.Image(cstrace.PathBlob(program), device_path, base=base)
    return cstrace.Trace(buffers, [source], images=[image])
