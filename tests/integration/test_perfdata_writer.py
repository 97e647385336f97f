"""perf.data files written from corpus snapshots, judged by Linux perf (``perf report -D``).

:func:`tests.perfdata_writer.write_perf_data` turns a snapshot into a CPU-wide
``cs_etm`` recording; Debian's ``linux-perf`` dumps it. The dump must come
without an error or warning, show the AUXTRACE_INFO with one block per CPU
and the registers :func:`~tests.perfdata_writer.plan` put there, the AUXTRACE
buffers and the AUX records over them. perf decodes the AUX data with OpenCSD
as it dumps it: the packets it lists are those of the corpus's expected
listing (the reference lister on the snapshot, every session of a
multi-session one), which shows the registers and the data reached the
decoder intact.

Snapshots: ``juno_r1_1`` (ETMv4, six CPUs in one ETB, an STM left out),
``ete_ip`` (ETE, raw single-source data as from TRBE), ``s_9001`` (ETE, two
sessions of one CPU: two buffers one after the other in its AUX area),
``Snowball`` (PTM) and ``TC2`` (ETMv3 and PTM in one ETB). Skips, saying why,
without the corpus or without perf.
"""

from __future__ import annotations

import lzma
import os
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from cstrace.inputs import read_snapshot
from tests.perfdata_writer import DEFAULT_PMU_TYPE, Layout, plan, write_perf_data

pytestmark = pytest.mark.corpus


@dataclass(frozen=True)
class Case:
    snapshot: str
    decode_errors: frozenset[int] = frozenset()
    """Trace IDs whose packets perf's decoder is expected to get wrong (see TC2)."""


CASES = [
    Case("juno_r1_1"),
    Case("ete_ip"),
    Case("s_9001"),
    Case("Snowball"),
    # perf passes OpenCSD only ETMCR and ETMTRACEIDR of an ETMv3/PTM block, not
    # ETMCCER: the PTM of trace ID 0x13 has 64-bit timestamps (ETMCCER bit 29), which
    # OpenCSD then reads as 48-bit ones and loses sync. The ETMv3 IDs are exact.
    Case("TC2", decode_errors=frozenset({0x13})),
]

# What perf prints that is not about the file: perf report has no TIME_CONV handler.
NOT_ABOUT_THE_FILE = re.compile(r"^: unhandled!$")
COMPLAINT = re.compile(r"error|warning|fail|fuzzed|corrupt|invalid|unknown|bad", re.IGNORECASE)
PACKET = re.compile(r"^\tIdx:(\d+); ID:([0-9a-f]+);\t(\S+)")
OCSD_ERROR = re.compile(r"^\t\S+ : 0x[0-9a-f]+ \(OCSD_ERR_\w+\).*CS ID=([0-9a-f]+);")


@pytest.fixture(scope="module")
def perf() -> str:
    exe = shutil.which("perf")
    if exe is None:
        pytest.skip("perf not installed (Debian: linux-perf)")
    done = subprocess.run([exe, "version"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"perf does not run here: {done.stderr.strip() or done.stdout.strip()}")
    return exe


@dataclass(frozen=True)
class Dumped:
    layout: Layout
    registers: dict[str, dict[str, int]]
    """Each trace source's registers, as the snapshot gives them."""
    stdout: str
    stderr: str
    returncode: int
    header: subprocess.CompletedProcess[str]


def run_perf(perf: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "LC_ALL": "C"}
    return subprocess.run(
        [perf, "report", *args], capture_output=True, text=True, env=env, check=False
    )


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.snapshot)
def dumped(
    request: pytest.FixtureRequest,
    corpus: Path,
    perf: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Case, Dumped]:
    case: Case = request.param
    tmp = tmp_path_factory.mktemp(case.snapshot)
    trace = read_snapshot(corpus / "snapshots" / case.snapshot)
    path = tmp / "perf.data"
    write_perf_data(trace, path)
    done = run_perf(perf, tmp, "-D", "-i", str(path))
    header = run_perf(perf, tmp, "--header-only", "-i", str(path))
    registers = {s.name: dict(s.registers) for s in trace.sources}
    return case, Dumped(plan(trace), registers, done.stdout, done.stderr, done.returncode, header)


def test_perf_reads_the_file_without_complaint(dumped: tuple[Case, Dumped]) -> None:
    case, d = dumped
    assert d.returncode == 0, d.stderr
    assert d.stderr.strip() == "", d.stderr
    complaints = [
        line
        for line in d.stdout.splitlines()
        if COMPLAINT.search(line)
        and not NOT_ABOUT_THE_FILE.match(line)
        and not PACKET.match(line)  # packet names such as BAD_SEQUENCE are the trace's
        and not OCSD_ERROR.match(line)  # the decoder's, checked below
        and not line.startswith(". ")  # a record's bytes, and their ASCII
    ]
    assert complaints == []
    decoder_errors = {
        int(m.group(1), 16) for m in map(OCSD_ERROR.match, d.stdout.splitlines()) if m
    }
    assert decoder_errors <= case.decode_errors


def test_auxtrace_info_has_each_cpu_and_its_registers(dumped: tuple[Case, Dumped]) -> None:
    _, d = dumped
    lines = d.stdout.splitlines()
    [start] = [i for i, line in enumerate(lines) if "PERF_RECORD_AUXTRACE_INFO type: 3" in line]
    printed = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        name, value = line.strip().rsplit(None, 1)
        printed.append((name.strip(), int(value, 16)))
    ncpus = len(d.layout.cpus)
    expected = [
        ("Header version", 1),
        ("PMU type/num cpus", (DEFAULT_PMU_TYPE << 32) | ncpus),
        ("Snapshot", 0),
    ]
    for block in d.layout.cpus:
        expected += [("Magic number", block.magic), ("CPU", block.cpu)]
        expected += [("NR_TRC_PARAMS", len(block.params)), *block.params]
    assert printed == expected
    # and, by the names perf gives them, the values are the snapshot's
    at = 3
    for block in d.layout.cpus:
        n = printed[at + 2][1]
        for source in block.sources:
            regs = d.registers[source]
            for reg, val in printed[at + 3 : at + 3 + n]:
                assert val == regs.get(reg, val), f"{source} {reg}"
        at += 3 + n


def test_auxtrace_buffers_and_aux_records(dumped: tuple[Case, Dumped]) -> None:
    _, d = dumped
    auxtrace = [
        (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3)))
        for m in re.finditer(
            r"PERF_RECORD_AUXTRACE size: (0x[0-9a-f]+|0)\s+offset: (0x[0-9a-f]+|0)\s+"
            r"ref: \S+\s+idx: \d+\s+tid: -1\s+cpu: (\d+)",
            d.stdout,
        )
    ]
    chunks = d.layout.chunks
    assert auxtrace == [(c.size + (-c.size % 8), c.offset, c.cpu) for c in chunks]
    data_sizes = re.findall(r"CoreSight \S+ Trace data: size (0x[0-9a-f]+) bytes", d.stdout)
    assert [int(s, 16) for s in data_sizes] == [c.size for c in chunks]
    aux = [
        (int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16))
        for m in re.finditer(
            r"^(\d+) \d+ 0x[0-9a-f]+ \[0x[0-9a-f]+\]: PERF_RECORD_AUX "
            r"offset: (0x[0-9a-f]+|0) size: (0x[0-9a-f]+|0) flags: (0x[0-9a-f]+|0)",
            d.stdout,
            re.MULTILINE,
        )
    ]
    assert aux == [(c.cpu, c.offset, c.size, 0x100 if c.raw else 0) for c in chunks]


def test_header_names_the_cpus_and_the_cs_etm_event(dumped: tuple[Case, Dumped]) -> None:
    _, d = dumped
    h = d.header
    assert h.returncode == 0 and h.stderr.strip() == "", h.stderr
    ncpus = max(b.cpu for b in d.layout.cpus) + 1
    assert f"# nrcpus avail : {ncpus}" in h.stdout
    assert f"# pmu mappings: cs_etm = {DEFAULT_PMU_TYPE}" in h.stdout
    assert "# event : name = cs_etm//u, , id = { " in h.stdout
    assert "# contains AUX area data" in h.stdout


def _listing(path: Path, raw_id: int | None) -> dict[int, list[tuple[int, str]]]:
    """The packets of an expected listing per trace ID (index, name), without NOTSYNC runs."""
    out: dict[int, list[tuple[int, str]]] = defaultdict(list)
    with lzma.open(path, "rt") as f:
        for line in f:
            m = re.match(r"Idx:(\d+); ID:([0-9a-f]+); \[[^\]]*\];\t(\S+)", line)
            if m and "NOT_SYNC" not in m.group(3) and "NOTSYNC" not in m.group(3):
                tid = int(m.group(2), 16)
                key = raw_id if tid == 0 and raw_id is not None else tid
                out[key].append((int(m.group(1)), m.group(3)))
    return out


def _perf_packets(d: Dumped) -> dict[int, list[tuple[int, str]]]:
    """The packets perf lists per trace ID (index in its buffer, name), without NOTSYNC runs.

    perf numbers a buffer's bytes from its offset in the CPU's AUX area; the
    index here is from the buffer's start, as the reference lister counts.
    """
    got: dict[int, list[tuple[int, str]]] = defaultdict(list)
    chunk = -1
    for line in d.stdout.splitlines():
        if re.search(r"CoreSight \S+ Trace data: size", line):
            chunk += 1
        m = PACKET.match(line)
        # perf prints a run of unsynchronised data once, the reference lister per frame
        if m and "NOT_SYNC" not in m.group(3) and "NOTSYNC" not in m.group(3):
            index = int(m.group(1)) - d.layout.chunks[chunk].offset
            got[int(m.group(2), 16)].append((index, m.group(3)))
    return got


def test_perf_lists_the_packets_of_the_corpus_listing(
    dumped: tuple[Case, Dumped], corpus: Path
) -> None:
    case, d = dumped
    if "OpenCSD is not linked in" in d.stdout + d.stderr:
        pytest.skip("this perf cannot decode CoreSight trace (built without OpenCSD)")
    got = _perf_packets(d)
    raw = [c for c in d.layout.chunks if c.raw]
    raw_id = next(b.trace_id for b in d.layout.cpus if b.cpu == raw[0].cpu) if raw else None
    # every buffer of a multi-session snapshot, one after the other, where the corpus has it
    listing = corpus / "expected" / f"{case.snapshot}@multi_session.ppl.xz"
    if not listing.exists():
        listing = corpus / "expected" / f"{case.snapshot}.ppl.xz"
    expected = _listing(listing, raw_id)
    ids = (set(expected) | set(got)) - case.decode_errors
    assert ids, "no packets to compare"
    for tid in sorted(ids):
        assert got[tid] == expected[tid], f"trace ID {tid:#x}"
