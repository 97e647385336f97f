"""perf.data recordings made by ``tests/perfgen.py``: the reader, the trace it makes, decoding.

Each test writes a small recording (CoreSight metadata, memory maps, AUX data
made with the ETMv4 encoder) and checks what the reader finds, how the AUX
data becomes buffers (one per AUX record, only its bytes), the event log and
who ran each element, the images found by build ID, and that bad files give
located errors.
"""

from __future__ import annotations

import io
import struct
from contextlib import redirect_stderr, redirect_stdout, suppress
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

import cstrace
from cstrace.capture.encode import format_frames
from cstrace.cli import main
from cstrace.errors import InputError
from cstrace.inputs import RawOptions, is_perf_data, is_raw_capture, open_input
from cstrace.inputs.perfdata import open_perf_data, read_recording
from cstrace.inputs.perfdata.csetm import parse_cs_etm_info
from cstrace.inputs.symbols import (
    ImageSearch,
    SymbolPaths,
    read_build_id,
    same_build_id,
    trim_build_id,
)
from cstrace.memory.events import LibraryEvent, ProcessEvent, ThreadEvent
from cstrace.protocols.etmv4 import encoder as e4
from tests.integration.elfgen import ET_DYN, executable
from tests.perfgen import (
    AUX_OVERWRITE,
    AUX_RAW,
    ETE_MAGIC,
    ETMV3_MAGIC,
    ETMV4_MAGIC,
    PerfWriter,
    cs_etm_info,
    etmv4_params,
)

NOP, RET = 0xD503201F, 0xD65F03C0


def _words(*ws: int) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in ws)


# A64 at link 0x1000: nop; nop; b.eq 0x1018; bl 0x102c; nop x3; ret; 0x1020: nop x4; ret
CODE = _words(NOP, NOP, 0x54000080, 0x94000008, NOP, NOP, NOP, RET, NOP, NOP, NOP, NOP, RET)
BUILD_ID = bytes.fromhex("0c9a20bf9c009d0e4e8bbf9fad0300ae")
APP = executable(CODE, 0x1000, e_type=ET_DYN, build_id=BUILD_ID, rodata_before=0x1000, bits=64)
LOAD = 0x5500000000  # where the app's first byte is
LIBC = 0x7000000000


def _text_offset() -> int:
    sec = ELFFile(io.BytesIO(APP)).get_section_by_name(".text")
    assert sec is not None
    return int(sec["sh_offset"])


def program_trace(tid: int, *, libc: bool = False) -> bytes:
    """ETMv4 trace of the program at LOAD + 0x1000, thread ``tid`` in the context ID."""
    out = (
        e4.a_sync()
        + e4.trace_info(0)
        + e4.trace_on()
        + e4.address_context(LOAD + 0x1000, el=0, sf=True, ns=True, context_id=tid)
        + e4.atom("EE")  # b.eq taken to 0x1018, ret taken: its target follows
        + e4.address_long(LOAD + 0x1010)
        + e4.atom("E")
    )
    if libc:
        out += e4.address_long(LIBC + 0x40) + e4.atom("EN")
    return out


def recording(
    *,
    raw: bool = True,
    cpu: int = 1,
    tid: int = 101,
    libc: bool = False,
    per_thread: bool = False,
    info: list[int] | None = None,
) -> tuple[PerfWriter, bytes]:
    """A CPU-wide (or per-thread) recording of process 100, thread ``tid``, on ``cpu``."""
    w = PerfWriter()
    w.build_ids = [(-1, BUILD_ID, "/data/app"), (-1, bytes(range(16)), "/system/libc.so")]
    w.auxtrace_info(
        info
        or cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10)), (ETMV4_MAGIC, 1, etmv4_params(0x12))])
    )
    w.comm(100, 100, "app", exec_=True, time=10, cpu=cpu)
    w.mmap2(100, 100, LOAD, 0x1000, 0, "/data/app", prot=1, time=11, cpu=cpu)
    w.mmap2(100, 100, LOAD + 0x1000, 0x1000, _text_offset(), "/data/app", time=12, cpu=cpu)
    w.mmap2(100, 100, LIBC, 0x10000, 0, "/system/libc.so", time=13, cpu=cpu)
    w.fork(100, 100, 101, 100, time=14, cpu=cpu)
    w.itrace_start(100, tid, time=15, cpu=cpu)
    trace_id = 0x12 if cpu == 1 else 0x10
    data = program_trace(tid, libc=libc)
    if not raw:
        data = format_frames([(trace_id, data)])
    aux_cpu = -1 if per_thread else cpu
    w.aux(0, len(data), AUX_RAW if raw else 0, pid=100, tid=tid, time=20, cpu=cpu)
    w.exit(100, 1, 100, 1, time=30, cpu=cpu)
    w.auxtrace(data + b"\0" * 8, offset=0, idx=cpu, tid=tid if per_thread else -1, cpu=aux_cpu)
    return w, w.build()


def write(tmp_path: Path, blob: bytes, name: str = "rec.data") -> Path:
    p = tmp_path / name
    p.write_bytes(blob)
    return p


def symdir(tmp_path: Path) -> Path:
    d = tmp_path / "symbols" / "data"
    d.mkdir(parents=True)
    (d / "app").write_bytes(APP)
    return tmp_path / "symbols"


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# --- the reader ------------------------------------------------------------------------------


def test_a_recording_is_recognised_before_raw_captures(tmp_path: Path) -> None:
    p = write(tmp_path, recording()[1])
    assert is_perf_data(p) and not is_raw_capture(p)
    with pytest.raises(InputError, match="recording describes its own trace"):
        open_input(p, raw=RawOptions(protocols=["etmv4"]))


def test_records_and_sample_ids(tmp_path: Path) -> None:
    rec = read_recording(write(tmp_path, recording()[1]))
    names = [r.name for r in rec.file.records]
    assert names == [
        "AUXTRACE_INFO",
        "COMM",
        "MMAP2",
        "MMAP2",
        "MMAP2",
        "FORK",
        "ITRACE_START",
        "AUX",
        "EXIT",
        "AUXTRACE",
    ]
    aux = rec.aux_records[0]
    assert (aux.sample.pid, aux.sample.tid, aux.sample.time, aux.sample.cpu) == (100, 101, 20, 1)
    assert aux.raw and aux.flag_names() == ["raw"]
    assert rec.file.cmdline == ["perf", "record", "-e", "cs_etm//"]
    assert rec.file.nr_cpus == (2, 2)
    assert len(rec.file.auxtrace_index) == 1
    assert [(c.cpu, c.protocol, c.source_type) for c in rec.etm.cpus] == [
        (0, "etmv4", "ETM4.2"),
        (1, "etmv4", "ETM4.2"),
    ]
    assert rec.trace_ids == {0: 0x10, 1: 0x12}
    assert rec.threads == {100: 100, 101: 100}


def test_one_buffer_per_aux_record_with_only_its_bytes(tmp_path: Path) -> None:
    _w, blob = recording()
    trace = open_perf_data(write(tmp_path, blob))
    [buf] = trace.buffers
    assert (buf.name, buf.format, buf.size()) == (
        "cpu1.aux0",
        "source_data",
        len(program_trace(101)),
    )
    assert buf.read() == program_trace(101)  # not the padding after it
    assert buf.context == cstrace.ExecContext(1, 100, 101)
    assert buf.time == 20
    [src] = [s for s in trace.sources if s.buffers]
    assert (src.name, src.cpu, src.core, src.registers["TRCTRACEIDR"]) == (
        "cpu1",
        1,
        "ARMv8-A",
        0x12,
    )
    assert trace.contextidr == "tid"


def test_the_event_log(tmp_path: Path) -> None:
    trace = open_perf_data(write(tmp_path, recording()[1]))
    assert trace.events is not None
    got = [
        (type(e).__name__, e.timestamp, e.state.name, getattr(e, "image", None))
        for e in trace.events.events
        if isinstance(e, ProcessEvent | ThreadEvent)
    ]
    assert got == [
        ("ProcessEvent", 12, "START", "/data/app"),
        ("LibraryEvent", 13, "START", "/system/libc.so"),
        ("ThreadEvent", 14, "START", None),
        ("ProcessEvent", 31, "END", "/data/app"),  # the exit takes effect 1 ns later
        ("LibraryEvent", 31, "END", "/system/libc.so"),
        ("ThreadEvent", 31, "END", None),
    ]
    app = trace.events.events[0]
    assert isinstance(app, ProcessEvent)
    # Without the file the base assumes file offsets are link addresses.
    assert (app.base, app.uuid, app.size) == (
        LOAD + 0x1000 - _text_offset(),
        BUILD_ID.hex(),
        0x1000 + _text_offset(),
    )
    lib = trace.events.events[1]
    assert isinstance(lib, LibraryEvent) and lib.uuid == bytes(range(16)).hex()


def test_decoding_gives_ranges_in_the_app_with_who_ran(tmp_path: Path) -> None:
    path = write(tmp_path, recording()[1])
    trace = cstrace.open_trace(path, symdirs=[symdir(tmp_path)])
    app = trace.events.events[0] if trace.events else None
    assert isinstance(app, ProcessEvent) and app.base == LOAD  # exact, from the ELF's segments
    got = [
        (e.start, e.end, ctx)
        for _, e, ctx in cstrace.iter_elements_with_context(trace)
        if isinstance(e, cstrace.InstrRange)
    ]
    who = cstrace.ExecContext(1, 100, 101)
    assert got == [
        (LOAD + 0x1000, LOAD + 0x100C, who),
        (LOAD + 0x1018, LOAD + 0x1020, who),
        (LOAD + 0x1010, LOAD + 0x1020, who),
    ]


def test_the_locator_gives_file_offsets(tmp_path: Path) -> None:
    trace = cstrace.open_trace(write(tmp_path, recording()[1]), symdirs=[symdir(tmp_path)])
    session = cstrace.Session(trace)
    loc = session.locator().locate(100, LOAD + 0x1008, time=20)
    assert loc is not None
    assert (loc.image, loc.build_id, loc.address, loc.offset) == (
        "/data/app",
        BUILD_ID.hex(),
        0x1008,
        _text_offset() + 8,
    )
    assert loc.file is not None and loc.file.endswith("app")


def test_formatted_data_of_two_cpus_in_one_buffer(tmp_path: Path) -> None:
    w = PerfWriter()
    w.auxtrace_info(
        cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10)), (ETMV4_MAGIC, 1, etmv4_params(0x12))])
    )
    w.itrace_start(100, 100, time=1, cpu=0)
    first = format_frames([(0x10, e4.a_sync() + e4.trace_info(0))])
    second = format_frames(
        [(0x10, e4.a_sync() + e4.trace_info(0)), (0x12, e4.a_sync() + e4.trace_info(0))]
    )
    w.aux(0, len(first), time=5, cpu=0)
    w.aux(len(first), len(second), time=6, cpu=0)
    w.auxtrace(first + second, cpu=0)
    trace = open_perf_data(write(tmp_path, w.build()))
    assert [(b.name, b.format, b.size()) for b in trace.buffers] == [
        ("cpu0.aux0", "coresight", len(first)),
        ("cpu0.aux1", "coresight", len(second)),
    ]
    feeds = {s.name: s.buffers for s in trace.sources}
    assert feeds == {"cpu0": ("cpu0.aux0", "cpu0.aux1"), "cpu1": ("cpu0.aux1",)}
    # The decoder of a trace ID already met is reset for the next piece, as perf does.
    kinds = [
        (tid, type(e).__name__, getattr(e, "reason", None))
        for tid, e in cstrace.iter_elements(trace)
        if isinstance(e, cstrace.NoSync)
    ]
    assert [k[0] for k in kinds] == [0x10, 0x10, 0x12]
    assert [k[2].name for k in kinds] == ["INIT_DECODER", "RESET_DECODER", "INIT_DECODER"]


def test_aux_data_across_two_auxtrace_records_and_overwrite_mode(tmp_path: Path) -> None:
    data = program_trace(100)
    w = PerfWriter()
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10))]))
    w.aux(len(data), len(data), AUX_RAW | AUX_OVERWRITE, pid=100, tid=100, time=5, cpu=0)
    w.auxtrace(data[:10], offset=0, cpu=0)
    w.auxtrace(data[10:], offset=10, cpu=0)
    trace = open_perf_data(write(tmp_path, w.build()))
    [buf] = trace.buffers
    assert len(buf.files) == 2 and buf.read() == data


def test_per_thread_recording(tmp_path: Path) -> None:
    trace = open_perf_data(write(tmp_path, recording(per_thread=True)[1]))
    [buf] = trace.buffers
    assert buf.name == "tid101.aux0"
    assert buf.context == cstrace.ExecContext(1, 100, 101)
    rec = read_recording(tmp_path / "rec.data")
    assert rec.per_thread


def test_without_aux_records_each_auxtrace_buffer_is_one(tmp_path: Path) -> None:
    w = PerfWriter()
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10))]))
    frames = format_frames([(0x10, e4.a_sync() + e4.trace_info(0))])
    w.auxtrace(frames, cpu=0)
    trace = open_perf_data(write(tmp_path, w.build()))
    assert [(b.name, b.size()) for b in trace.buffers] == [("cpu0.aux0", len(frames))]


def test_missing_aux_data_is_a_warning_and_the_rest_decodes(tmp_path: Path) -> None:
    w = PerfWriter()
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10))]))
    data = program_trace(100)
    w.aux(0, len(data), AUX_RAW, pid=100, tid=100, time=5, cpu=0)
    lost = w.aux(0x1000, 0x40, AUX_RAW, pid=100, tid=100, time=6, cpu=0)
    w.auxtrace(data, cpu=0)
    path = write(tmp_path, w.build())
    trace = open_perf_data(path)
    assert [b.name for b in trace.buffers] == ["cpu0.aux0"]
    [issue] = trace.issues
    assert not issue.is_error and issue.offset == w.offsets[lost]
    assert "0x40 of them" not in issue.message and "64 of them are not in the file" in issue.message
    assert "CPU 0" in issue.message and "AUX offset 0x1000" in issue.message
    code, out, err = run_cli("decode", str(path), "--no-summary")
    # As simpleperf's inject: the missing piece is said, the rest decoded, success.
    assert code == 0 and "INSTR_RANGE" not in out  # no image: only what the trace says
    assert "ADDR_NACC" in out
    assert f"offset {w.offsets[lost]:#x}" in err and "Traceback" not in err


def test_no_trace_at_all_is_an_empty_result_with_warnings(tmp_path: Path) -> None:
    w = PerfWriter()
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10))]))
    w.aux(0, 0x40, AUX_RAW, time=5, cpu=0)
    path = write(tmp_path, w.build())
    assert open_perf_data(path).buffers == []
    code, out, err = run_cli("decode", str(path), "--no-summary")
    assert code == 0 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2 and all(x.startswith("cstrace: warning:") for x in lines), err
    assert f"offset {w.offsets[1]:#x}" in lines[0] and "64 of them are not in the file" in lines[0]
    assert "no trace to decode" in lines[1]
    for argv in (["info"], ["profile", "--format", "autofdo"], ["profile", "-f", "bolt"]):
        code, out, err = run_cli(*argv, str(path))
        assert code == 0 and "no trace to decode" in (out + err), (argv, err)


def test_not_coresight(tmp_path: Path) -> None:
    w = PerfWriter()
    w.auxtrace_info([0, 0], auxtrace_type=1)
    with pytest.raises(InputError, match="Intel PT"):
        open_perf_data(write(tmp_path, w.build()))
    w2 = PerfWriter()
    w2.comm(1, 1, "x")
    with pytest.raises(InputError, match="no AUXTRACE_INFO"):
        open_perf_data(write(tmp_path, w2.build(), "plain.data"))


def test_dynamic_trace_ids_and_sinks(tmp_path: Path) -> None:
    unused = 1 << 31
    w = PerfWriter()
    w.auxtrace_info(
        cs_etm_info(
            [
                (ETMV4_MAGIC, 0, etmv4_params(unused | 0x10)),
                (ETMV4_MAGIC, 1, etmv4_params(unused | 0x12)),
                (ETMV4_MAGIC, 2, etmv4_params(unused | 0x14)),
            ],
            version=2,
        )
    )
    w.hw_id(0x20, cpu=0, sink=1)
    w.hw_id(0x20, cpu=1, sink=2)  # the same ID in another sink
    w.hw_id(0x22, cpu=2, sink=1)
    frames = format_frames(
        [(0x20, e4.a_sync() + e4.trace_info(0)), (0x22, e4.a_sync() + e4.trace_info(0))]
    )
    w.aux(0, len(frames), time=5, cpu=0)
    w.auxtrace(frames, cpu=0)
    path = write(tmp_path, w.build())
    rec = read_recording(path)
    assert rec.trace_ids == {0: 0x20, 1: 0x20, 2: 0x22}
    assert rec.id_origin[0] == "AUX_OUTPUT_HW_ID" and rec.sinks == {0: 1, 1: 2, 2: 1}
    trace = open_perf_data(path)
    feeds = {s.name: (s.buffers, s.registers["TRCTRACEIDR"]) for s in trace.sources}
    # CPU 1 has ID 0x20 too, but in another sink: cpu0's data is not its.
    assert feeds == {
        "cpu0": (("cpu0.aux0",), 0x20),
        "cpu1": ((), 0x20),
        "cpu2": (("cpu0.aux0",), 0x22),
    }


def test_a_time_conversion_makes_the_trace_clock(tmp_path: Path) -> None:
    params = [*etmv4_params(0x10), 1]  # TS_SOURCE 1: the virtual counter
    w = PerfWriter()
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, params)]))
    w.time_conv(10, 1000, 5)
    w.aux(0, 8, AUX_RAW, time=5, cpu=0)
    w.auxtrace(e4.a_sync()[:8], cpu=0)
    trace = open_perf_data(write(tmp_path, w.build()))
    assert trace.clock is not None and trace.clock.to_log_time(1 << 10) == 5 + 1000
    assert "TS_SOURCE" not in trace.sources[0].registers


# --- the cs_etm metadata ---------------------------------------------------------------------


def test_metadata_version_0_has_no_parameter_counts() -> None:
    v4 = etmv4_params(0x10)
    v3 = [0x1000, 0x12, 0x34C01AC2, 0x411CF312]  # ETMCR, ETMTRACEIDR, ETMCCER, ETMIDR (PTM)
    info = parse_cs_etm_info(
        tuple(cs_etm_info([(ETMV4_MAGIC, 0, v4), (ETMV3_MAGIC, 1, v3)], version=0)), "f", 0
    )
    assert [(c.cpu, c.protocol, c.source_type, c.trace_id) for c in info.cpus] == [
        (0, "etmv4", "ETM4.2", 0x10),
        (1, "ptm", "PTM1.1", 0x12),
    ]
    assert info.cpus[1].registers["ETMCR"] == 0x1000 and info.cpus[1].core == "ARMv7-A"


def test_metadata_ete_etmv3_and_extra_parameters() -> None:
    ete = [*etmv4_params(0x10, 0x8080, ete=True), 0, 0x99]  # TS_SOURCE and one more
    v3 = [0x1000, 0x14, 0, 0x410CF250]  # an ETMv3.5
    info = parse_cs_etm_info(
        tuple(cs_etm_info([(ETE_MAGIC, 0, ete), (ETMV3_MAGIC, 1, v3)])), "f", 0
    )
    c0, c1 = info.cpus
    assert (c0.protocol, c0.core, c0.registers["TRCDEVARCH"], c0.context_in_vmid) == (
        "ete",
        "ARM-AA64",
        0x47715A13,
        True,
    )
    assert c0.registers["PARAM9"] == 0x99
    assert (c1.protocol, c1.source_type) == ("etmv3", "ETM3.5")


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ([1], "header needs 3"),
        ([3, 8 << 32 | 1, 0], "header version 3"),
        ([1, 8 << 32 | 0, 0], "0 CPUs"),
        ([1, 8 << 32 | 2, 0, ETMV4_MAGIC, 0, 7, *etmv4_params(0x10)], "blocks of 2 CPUs"),
        ([1, 8 << 32 | 1, 0, ETMV4_MAGIC, 0, 9, 1, 2], "goes past the end"),
        ([0, 8 << 32 | 1, 0, 0x1234, 0, 1, 2], "unknown magic"),
        ([1, 8 << 32 | 1, 0, ETMV4_MAGIC, 0, 2, 0x40, 0x10], "lacks TRCIDR0"),
    ],
)
def test_bad_metadata_is_located(words: list[int], message: str) -> None:
    with pytest.raises(InputError, match=message) as got:
        parse_cs_etm_info(tuple(words), "rec.data", 0x100)
    assert got.value.offset is not None and got.value.offset >= 0x100


def test_an_unknown_block_is_skipped_with_version_1() -> None:
    words = cs_etm_info([(0x6060606060606060, 0, [1, 2]), (ETMV4_MAGIC, 1, etmv4_params(0x12))])
    info = parse_cs_etm_info(tuple(words), "f", 0)
    assert [c.cpu for c in info.cpus] == [1] and "unknown magic" in info.skipped[0]


# --- images ----------------------------------------------------------------------------------


def test_build_ids() -> None:
    assert trim_build_id(BUILD_ID + bytes(4)) == BUILD_ID
    assert trim_build_id(bytes(range(1, 9)) + bytes(12)) == bytes(range(1, 9))
    assert trim_build_id(bytes(range(1, 21))) == bytes(range(1, 21))
    assert same_build_id(BUILD_ID, BUILD_ID + bytes(4)) and not same_build_id(BUILD_ID, b"x")


def test_images_are_found_by_build_id(tmp_path: Path) -> None:
    d = symdir(tmp_path)
    assert read_build_id(d / "data" / "app") == BUILD_ID
    other = tmp_path / "other"
    other.mkdir()
    (other / "app").write_bytes(executable(CODE, 0x1000, e_type=ET_DYN, build_id=b"\1" * 16))
    search = ImageSearch(SymbolPaths((str(other), str(d))))
    found = search.find("/data/app", BUILD_ID)
    assert found is not None and found.how == "symdir" and found.path == d / "data" / "app"
    assert search.mismatches["/data/app"][0][0] == other / "app"
    # Under another name, found by scanning for the build ID.
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    (renamed / "whatever.so").write_bytes(APP)
    got = ImageSearch(SymbolPaths((str(renamed),))).find("/data/app", BUILD_ID)
    assert got is not None and got.path.name == "whatever.so"
    # perf's build-ID cache: .build-id/0c/9a20... -> a folder holding elf.
    cache = tmp_path / "cache"
    (cache / "data" / "app" / BUILD_ID.hex()).mkdir(parents=True)
    (cache / "data" / "app" / BUILD_ID.hex() / "elf").write_bytes(APP)
    link = cache / ".build-id" / BUILD_ID.hex()[:2]
    link.mkdir(parents=True)
    (link / BUILD_ID.hex()[2:]).symlink_to(cache / "data" / "app" / BUILD_ID.hex())
    got = ImageSearch(SymbolPaths(buildid_dir=str(cache))).find("/data/app", BUILD_ID)
    assert got is not None and got.how == "build-id cache"
    # --symfs: the traced system's root.
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "app").write_bytes(APP)
    got = ImageSearch(SymbolPaths(symfs=str(root), buildid_dir=str(tmp_path))).find(
        "/data/app", BUILD_ID
    )
    assert got is not None and got.how == "symfs"
    assert ImageSearch(SymbolPaths(symfs=str(root))).find("/data/app", b"\2" * 16) is None


def test_image_option_still_adds_one(tmp_path: Path) -> None:
    (tmp_path / "app.elf").write_bytes(APP)
    trace = cstrace.open_trace(write(tmp_path, recording()[1]), images=[str(tmp_path / "app.elf")])
    ranges = [e for _, e in cstrace.iter_elements(trace) if isinstance(e, cstrace.InstrRange)]
    assert len(ranges) == 3


def test_missing_images_are_named_once_with_their_addresses(tmp_path: Path) -> None:
    path = write(tmp_path, recording(libc=True)[1])
    code, out, err = run_cli("decode", str(path), "--symdir", str(symdir(tmp_path)))
    assert code == 0
    lines = [x for x in err.splitlines() if "not found" in x]
    assert len(lines) == 1
    assert "/system/libc.so" in lines[0] and bytes(range(16)).hex() in lines[0]
    assert "1 trace address(es) fell in it" in lines[0]
    assert "   1     100     101  INSTR_RANGE" in out


# --- the command line ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "jsonl", "ocsd"])
def test_every_format(tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path, recording()[1])
    code, out, err = run_cli(
        "decode", str(path), "--symdir", str(symdir(tmp_path)), "-f", fmt, "--no-summary"
    )
    assert code == 0, err
    if fmt == "text":
        assert "CPU     PID     TID  ELEMENT" in out
        assert "   1     100     101  INSTR_RANGE      0x5500001000-0x550000100c" in out
    elif fmt == "jsonl":
        assert '"cpu":1,"pid":100,"tid":101,"type":"INSTR_RANGE"' in out
    else:
        assert "Using cpu1.aux0 as trace source" in out
        assert "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x5500001000:[0x550000100c]" in out


def test_info(tmp_path: Path) -> None:
    path = write(tmp_path, recording()[1])
    code, out, _ = run_cli("info", str(path), "--symdir", str(symdir(tmp_path)))
    assert code == 0
    assert "CPU 1: ETMv4 (ETM4.2), trace ID 0x12 (metadata)" in out
    assert f"binary /data/app, build ID {BUILD_ID.hex()}: found (symdir)" in out
    assert f"binary /system/libc.so, build ID {bytes(range(16)).hex()}: not found" in out
    assert "AUX data of CPU 1: 1 record(s) with data" in out and "raw (single source)" in out
    assert "process 100 'app': threads 100, 101" in out
    assert "what the trace lost" in out


def test_package_keeps_who_ran(tmp_path: Path) -> None:
    path = write(tmp_path, recording()[1])
    sym = str(symdir(tmp_path))
    out_zip = tmp_path / "rec.zip"
    assert run_cli("package", str(path), str(out_zip), "--symdir", sym)[0] == 0
    direct = run_cli("decode", str(path), "--symdir", sym, "--no-summary")[1]
    packaged = run_cli("decode", str(out_zip), "--no-summary")[1]
    assert packaged == direct and "   1     100     101  INSTR_RANGE" in packaged


# --- bad files -------------------------------------------------------------------------------


def test_bad_headers_are_located(tmp_path: Path) -> None:
    good = recording()[1]
    cases = {
        "short.data": good[:12],
        "bad_attr.data": good[:16] + struct.pack("<Q", 7) + good[24:],
        "attrs_beyond.data": good[:24] + struct.pack("<Q", 1 << 40) + good[32:],
        "data_beyond.data": good[:40] + struct.pack("<Q", 1 << 40) + good[48:],
        "swapped.data": b"2ELIFREP" + good[8:],
    }
    for name, blob in cases.items():
        code, _out, err = run_cli("decode", str(write(tmp_path, blob, name)))
        assert code == 2, name
        assert err.count("\n") == 1 and name in err and "offset 0x" in err, (name, err)


@pytest.mark.parametrize(
    ("cut_every", "flip_every"), [(31, 23), pytest.param(7, 5, marks=pytest.mark.slow)]
)
def test_truncated_and_corrupted_files_never_raise(
    tmp_path: Path, cut_every: int, flip_every: int
) -> None:
    """Cut the file anywhere, or change any byte: a located error or a decode, no traceback.
    (Every 31st cut and 23rd byte in the quick run; every 7th and 5th in the slow one.)"""
    good = recording(libc=True)[1]
    sym = str(symdir(tmp_path))
    blobs = [good[:n] for n in range(0, len(good), cut_every)]
    for k in range(0, len(good), flip_every):
        bad = bytearray(good)
        bad[k] ^= 0xA5
        blobs.append(bytes(bad))
    for n, blob in enumerate(blobs):
        path = write(tmp_path, blob, f"fuzz{n}.data")
        code, _out, err = run_cli("decode", str(path), "--symdir", sym, "--no-summary")
        assert code in (0, 2), (n, err)
        assert "Traceback" not in err
        if code == 2:
            errors = [x for x in err.splitlines() if x.startswith("cstrace: error:")]
            assert errors and all(str(path) in x or "cpu" in x or "buffer" in x for x in errors)
        code, _, err = run_cli("info", str(path), "--no-decode")
        assert code in (0, 2) and "Traceback" not in err


def test_without_sample_ids_the_one_aux_area_is_used(tmp_path: Path) -> None:
    w = PerfWriter(sample_id_all=False)
    w.auxtrace_info(cs_etm_info([(ETMV4_MAGIC, 0, etmv4_params(0x10))]))
    data = program_trace(100)
    w.mmap2(100, 100, LOAD + 0x1000, 0x1000, _text_offset(), "/data/app")
    w.aux(0, len(data), AUX_RAW)
    w.auxtrace(data, cpu=0)
    trace = open_perf_data(write(tmp_path, w.build()))
    [buf] = trace.buffers
    assert buf.read() == data and buf.context == cstrace.ExecContext(0, None, None)
    # No record has a time: each one's place among the records is its time (the AUX
    # record is the third), so the buffer sees the maps made before it.
    assert buf.time == 2


def test_simpleperfs_init_map_holds_the_maps_before_the_recording(tmp_path: Path) -> None:
    w, _ = recording()
    # The app's maps (records 2 to 4) move to the INIT_MAP feature, as newer simpleperf
    # versions write them.
    w.init_map = [w.records.pop(2) for _ in range(3)]
    path = write(tmp_path, w.build())
    rec = read_recording(path)
    assert [r.name for r in rec.file.init_records] == ["MMAP2", "MMAP2", "MMAP2"]
    got = [
        e.start
        for _, e in cstrace.iter_elements(cstrace.open_trace(path, symdirs=[symdir(tmp_path)]))
        if isinstance(e, cstrace.InstrRange)
    ]
    assert got == [LOAD + 0x1000, LOAD + 0x1018, LOAD + 0x1010]
    assert "INIT_MAP): 3 MMAP2" in run_cli("info", str(path), "--no-decode")[1]


def test_a_ptm_recording_decodes(tmp_path: Path) -> None:
    """ETMv3/PTM blocks configure their sources from ETMCR, ETMCCER, ETMIDR, ETMTRACEIDR."""
    from cstrace.elements import Isa
    from cstrace.protocols.ptm import encoder as pe

    mov = 0xE1A00000
    a32 = _words(mov, mov, 0xEA000000, mov, mov, 0xE12FFF1E)  # b over a nop, then bx lr
    ptm = [0x10000000, 0x12, 0x34C01AC2, 0x411CF312]  # ETMCR, ETMTRACEIDR, ETMCCER, ETMIDR
    w = PerfWriter()
    w.auxtrace_info(cs_etm_info([(ETMV3_MAGIC, 0, ptm)]))
    data = format_frames(
        [(0x12, pe.encode_async() + pe.encode_isync(0x8000, Isa.A32) + pe.encode_atoms([True]))]
    )
    w.aux(0, len(data), time=5, cpu=0)
    w.auxtrace(data, cpu=0)
    path = write(tmp_path, w.build())
    (tmp_path / "code.bin").write_bytes(a32)
    trace = cstrace.open_trace(path, images=[f"{tmp_path / 'code.bin'}@0x8000"])
    assert trace.contextidr == "pid" and trace.sources[0].protocol == "ptm"
    ranges = [
        (e.start, e.end)
        for _, e in cstrace.iter_elements(trace)
        if isinstance(e, cstrace.InstrRange)
    ]
    assert ranges == [(0x8000, 0x800C)]


def test_a_pipe_mode_file(tmp_path: Path) -> None:
    """``perf record -o -``: a 16-byte header, the attributes in HEADER_ATTR records."""
    w, _ = recording()
    attr = struct.pack("<IIQQQQQ", 8, 128, 0x4000, 1, w.sample_type, 0, 1 << 18).ljust(128, b"\0")
    body = attr + struct.pack("<Q", 7)
    header_attr = struct.pack("<IHH", 64, 0, 8 + len(body)) + body
    blob = b"PERFILE2" + struct.pack("<Q", 16) + header_attr + b"".join(w.records)
    rec = read_recording(write(tmp_path, blob))
    assert rec.file.pipe and len(rec.file.attrs) == 1
    assert rec.aux_records[0].sample.cpu == 1
    trace = open_perf_data(tmp_path / "rec.data")
    assert trace.buffers[0].read() == program_trace(101)


def test_a_recording_gives_profiles_its_binaries(tmp_path: Path) -> None:
    """``Trace.binaries`` (the profiles' seam) answers from the recording's memory maps."""
    path = write(tmp_path, recording()[1])
    symbols = symdir(tmp_path)
    trace = cstrace.open_trace(path, symdirs=[symbols])
    assert trace.binaries is not None
    for context in (101, 100, None):  # the thread, the process, no context traced
        m = trace.binaries.find(LOAD + 0x1008, context, 0x12)
        assert m is not None and m.binary.path == "/data/app"
        assert m.binary.build_id == BUILD_ID.hex() and m.binary_address(LOAD + 0x1008) == 0x1008
    lib = trace.binaries.find(LIBC + 0x1234, 101, 0x12)
    assert lib is not None and lib.binary.image is None  # not found: file offsets
    assert lib.binary_address(LIBC + 0x1234) == 0x1234
    assert trace.binaries.find(0x10, 101, 0x12) is None
    code, out, err = run_cli("profile", str(path), "--format", "autofdo", "--symdir", str(symbols))
    assert code == 0, err
    assert "1000-1008:1" in out and f"// build_id: 0x{BUILD_ID.hex()}" in out


def test_simpleperfs_file2_feature_damaged_anywhere_is_skipped_or_read() -> None:
    """The FILE2 reader (a small protobuf reader) on random damage: entries or a ValueError
    (the feature is then skipped with a warning), never another exception."""
    import random

    from cstrace.inputs.perfdata.records import _file2
    from tests.perfgen import _file2_entry

    good = _file2_entry("/vendor/lib/modules/m.ko", 1, 0x110, 0x1110) + _file2_entry(
        "/system/lib64/libc.so", 2, 0x1000, 0x1000
    )
    got = _file2(good)
    assert [(f.path, f.type, f.min_vaddr, f.offset) for f in got] == [
        ("/vendor/lib/modules/m.ko", 1, 0x110, 0x1110),
        ("/system/lib64/libc.so", 2, 0x1000, 0x1000),
    ]
    rng = random.Random(28)
    for _ in range(500):
        data = bytearray(good[: rng.randrange(len(good) + 1)])
        for _ in range(rng.randint(0, 6)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        with suppress(ValueError, struct.error):
            _file2(bytes(data))
