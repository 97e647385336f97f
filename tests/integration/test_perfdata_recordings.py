"""The two real perf.data recordings of ``../shared/perfdata`` (simpleperf's test data).

Checked against the facts of that folder's README (8 CPUs of ETMv4.2 with trace
IDs 0x10 + 2 x CPU, one AUXTRACE buffer on CPU 7 of 0x180 bytes split by 4 AUX
records; ETE through a TRBE with raw AUX data, 0x50 bytes of which the AUX
record's size is trace), against simpleperf's own result (``perf_inject.data``:
the executed ranges of ``etm_test_loop`` with their counts, which each
recording must give, in file offsets), and, where Debian's ``perf`` is
installed, against ``perf report -D``. Skipped without the recordings.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

import cstrace
from cstrace.cli import main
from cstrace.inputs.perfdata import open_perf_data, read_recording
from cstrace.inputs.symbols import SymbolPaths

ETM = "perf_etm.data"
ETE = "perf_with_unformatted_trace.data"
BUILD_ID = "0c9a20bf9c009d0e4e8bbf9fad0300ae"
APP = "/data/local/tmp/etm_test_loop"


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def inject_ranges(perfdata: Path) -> Counter[tuple[int, int]]:
    """The counted ranges of simpleperf's AutoFDO text: ``start-last:count`` lines."""
    lines = (perfdata / "perf_inject.data").read_text().splitlines()
    n = int(lines[0])
    out: Counter[tuple[int, int]] = Counter()
    for line in lines[1 : 1 + n]:
        span, count = line.split(":")
        a, b = span.split("-")
        out[(int(a, 16), int(b, 16))] += int(count)
    return out


def test_etmv4_recording_facts(perfdata: Path) -> None:
    rec = read_recording(perfdata / ETM)
    assert (rec.etm.version, rec.etm.num_cpu, rec.etm.pmu_type) == (1, 8, 8)
    assert [(c.cpu, c.protocol, c.source_type) for c in rec.etm.cpus] == [
        (cpu, "etmv4", "ETM4.2") for cpu in range(8)
    ]
    assert rec.trace_ids == {cpu: 0x10 + 2 * cpu for cpu in range(8)}
    [auxtrace] = rec.auxtrace
    assert (auxtrace.cpu, auxtrace.data_size, auxtrace.aux_offset) == (7, 0x180, 0)
    aux = [(r.aux_offset, r.aux_size, r.flags, r.sample.cpu) for r in rec.aux_records]
    assert aux == [(0, 0x50, 0, 7), (0x50, 0x50, 0, 7), (0xA0, 0x50, 0, 7), (0xF0, 0x90, 0, 7)]
    assert sum(r.aux_size for r in rec.aux_records) == 0x180
    assert rec.mode == "tid" and not rec.per_thread
    trace = open_perf_data(perfdata / ETM)
    assert [(b.name, b.format, b.size()) for b in trace.buffers] == [
        ("cpu7.aux0", "coresight", 0x50),
        ("cpu7.aux1", "coresight", 0x50),
        ("cpu7.aux2", "coresight", 0x50),
        ("cpu7.aux3", "coresight", 0x90),
    ]
    # Only CPU 7's trace ID is in the data: only its source has buffers.
    assert {s.name: len(s.buffers) for s in trace.sources if s.buffers} == {"cpu7": 4}


def test_ete_recording_facts(perfdata: Path) -> None:
    rec = read_recording(perfdata / ETE)
    assert [(c.cpu, c.protocol, c.registers["TRCDEVARCH"]) for c in rec.etm.cpus] == [
        (0, "ete", 0x47715A13),
        (1, "ete", 0x47715A13),
    ]
    [auxtrace] = rec.auxtrace
    assert (auxtrace.cpu, auxtrace.data_size) == (0, 0x50)
    assert all(r.flags == 0x100 and r.raw for r in rec.aux_records)
    assert [r.aux_size for r in rec.aux_records if r.aux_size] == [0x4C]
    assert rec.mode == "vmid"  # TRCCONFIGR.VMID and VMIDOPT: CONTEXTIDR_EL2 is traced
    trace = open_perf_data(perfdata / ETE)
    [buf] = trace.buffers
    assert (buf.name, buf.format, buf.size()) == ("cpu0.aux0", "source_data", 0x4C)
    assert buf.context == cstrace.ExecContext(0, 319, 319)


@pytest.mark.parametrize(("name", "who"), [(ETM, (7, 17235, 17235)), (ETE, (0, 319, 319))])
def test_decoding_gives_simpleperfs_ranges_with_who_ran(
    perfdata: Path, name: str, who: tuple[int, int, int]
) -> None:
    trace = cstrace.open_trace(perfdata / name, symdirs=[perfdata])
    session = cstrace.Session(trace)
    locator = session.locator()
    got: Counter[tuple[int, int]] = Counter()
    contexts = set()
    for buffer in trace.buffers:
        for run in session.open_buffer(buffer).runs:
            tracker = cstrace.tracker_for(session, run)
            for elem in run.elements():
                ctx = tracker.update(elem)
                contexts.add((ctx.cpu, ctx.pid, ctx.tid))
                if isinstance(elem, cstrace.InstrRange):
                    first = locator.locate(ctx.pid, elem.start, tracker.time)
                    last = locator.locate(ctx.pid, elem.end - 4, tracker.time)
                    assert first is not None and last is not None
                    assert (first.image, first.build_id) == (APP, BUILD_ID)
                    assert first.file is not None
                    assert 0x1000 <= first.offset <= last.offset < 0x10F0  # .text and .plt
                    got[(first.offset, last.offset)] += 1
    assert contexts == {who}
    assert got == inject_ranges(perfdata)
    assert sum(got.values()) == 208


def test_info_names_the_binary_as_found(perfdata: Path) -> None:
    for name in (ETM, ETE):
        code, out, err = run_cli("info", str(perfdata / name), "--symdir", str(perfdata))
        assert code == 0, err
        assert f"binary {APP}, build ID {BUILD_ID}: found (symdir): " in out
        assert "etm_test_loop" in out.split(f"binary {APP}")[1].splitlines()[0]
    code, out, _ = run_cli("info", str(perfdata / ETM), "--no-decode")
    assert "CPU 7: ETMv4 (ETM4.2), trace ID 0x1e (metadata)" in out
    assert "AUXTRACE data of CPU 7: 1 buffer(s), 384 bytes (0x180)" in out
    assert "AUX data of CPU 7: 4 record(s) with data, 384 bytes of trace" in out
    code, out, _ = run_cli("info", str(perfdata / ETE), "--no-decode")
    assert "AUX records: 7 (6 without data); flags: raw x7" in out
    assert "raw (single source)" in out


@pytest.mark.parametrize("name", [ETM, ETE])
@pytest.mark.parametrize("fmt", ["text", "jsonl", "ocsd"])
def test_every_format_decodes(perfdata: Path, name: str, fmt: str) -> None:
    code, out, err = run_cli(
        "decode", str(perfdata / name), "--symdir", str(perfdata), "-f", fmt, "--no-summary"
    )
    assert code == 0, err
    assert "error" not in err
    if fmt == "text":
        ranges = [x for x in out.splitlines() if "INSTR_RANGE" in x]
        assert len(ranges) == 208
        pid = "17235" if name == ETM else "319"
        assert all(re.search(rf"\s\d\s+{pid}\s+{pid}  INSTR_RANGE", x) for x in ranges)
    elif fmt == "jsonl":
        assert out.count('"type":"INSTR_RANGE"') == 208
    else:
        assert out.count("OCSD_GEN_TRC_ELEM_INSTR_RANGE") == 208


def test_a_package_of_a_recording_decodes_the_same(perfdata: Path, tmp_path: Path) -> None:
    zipped = tmp_path / "rec.zip"
    code, _, err = run_cli("package", str(perfdata / ETM), str(zipped), "--symdir", str(perfdata))
    assert code == 0, err
    direct = run_cli("decode", str(perfdata / ETM), "--symdir", str(perfdata), "--no-summary")
    packaged = run_cli("decode", str(zipped), "--no-summary")
    assert packaged[1] == direct[1] and packaged[0] == 0


def test_the_api(perfdata: Path) -> None:
    trace = cstrace.open_trace(perfdata / ETE, symdirs=[perfdata])
    kinds = Counter(type(e).__name__ for _, e, _ in cstrace.iter_elements_with_context(trace))
    assert kinds["InstrRange"] == 208


@pytest.mark.parametrize(
    ("cut_every", "flip_every"), [(499, 317), pytest.param(97, 61, marks=pytest.mark.slow)]
)
def test_cut_and_damaged_recordings(
    perfdata: Path, tmp_path: Path, cut_every: int, flip_every: int
) -> None:
    """Cut each real file at many points and damage some of its bytes: never a traceback.
    (Every 499th cut and 317th byte in the quick run; every 97th and 61st in the slow one.)"""
    for name in (ETM, ETE):
        good = (perfdata / name).read_bytes()
        cuts = [good[:n] for n in range(0, len(good), cut_every)]
        damaged = []
        for k in range(0, len(good), flip_every):
            bad = bytearray(good)
            bad[k] ^= 0xFF
            damaged.append(bytes(bad))
        for n, blob in enumerate(cuts + damaged):
            path = tmp_path / f"{n}.data"
            path.write_bytes(blob)
            code, _, err = run_cli(
                "decode", str(path), "--symdir", str(perfdata), "--no-summary", "-f", "jsonl"
            )
            assert code in (0, 2) and "Traceback" not in err, (name, n, err)


# --- a second opinion: perf report -D (Debian's linux-perf) -------------------------------------


def _perf_dump(path: Path) -> str:
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed (Debian package linux-perf)")
    got = subprocess.run(
        [perf, "report", "-D", "-i", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if "PERF_RECORD_AUXTRACE_INFO" not in got.stdout:
        pytest.skip(f"perf report -D did not run here: {got.stderr.strip()[:200]}")
    return got.stdout


@pytest.mark.parametrize("name", [ETM, ETE])
def test_perf_report_agrees(perfdata: Path, name: str) -> None:
    dump = _perf_dump(perfdata / name)
    rec = read_recording(perfdata / name)
    aux = [
        (int(m[1], 16), int(m[2], 16), int(m[3], 16))
        for m in re.finditer(r"PERF_RECORD_AUX offset: (\S+) size: (\S+) flags: (\S+)", dump)
    ]
    assert aux == [(r.aux_offset, r.aux_size, r.flags) for r in rec.aux_records]
    auxtrace = [
        (int(m[1], 16), int(m[2], 16), int(m[3]))
        for m in re.finditer(
            r"PERF_RECORD_AUXTRACE size: (\S+)\s+offset: (\S+).*cpu: (-?\d+)", dump
        )
    ]
    assert auxtrace == [(a.data_size, a.aux_offset, a.cpu) for a in rec.auxtrace]
    ids = [int(m[1], 16) for m in re.finditer(r"TRCTRACEIDR\s+(\S+)", dump)]
    assert ids == [c.registers["TRCTRACEIDR"] for c in rec.etm.cpus]
    counts = Counter(r.name for r in rec.file.records)
    assert dump.count("PERF_RECORD_MMAP2 ") == counts["MMAP2"]
    assert dump.count("PERF_RECORD_COMM") == counts["COMM"]
    assert len(re.findall(r"PERF_RECORD_ITRACE_START", dump)) == counts["ITRACE_START"]
    execs = [m[1] for m in re.finditer(r"PERF_RECORD_COMM exec: (\S+?):", dump)]
    assert execs == [r.comm for r in rec.file.records if getattr(r, "exec", False)]


def test_symbol_paths_without_the_binary(perfdata: Path, tmp_path: Path) -> None:
    """Without the binary nothing is decoded past the trace's own addresses, and the one
    image the trace enters is named once, with its build ID and the addresses in it."""
    code, out, err = run_cli("decode", str(perfdata / ETM), "--buildid-dir", str(tmp_path))
    assert code == 0
    missing = [x for x in err.splitlines() if "not found" in x]
    assert len(missing) == 1 and APP in missing[0] and BUILD_ID in missing[0]
    assert "trace address(es) fell in it" in missing[0]
    assert "INSTR_RANGE" not in out
    assert SymbolPaths() == SymbolPaths((), None, None)
