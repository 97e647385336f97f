"""The test perf.data writer (:mod:`tests.perfdata_writer`), read back by a parse of its own.

The parse below is written from the file format (``perf.data-file-format.txt``,
``perf_event.h``, ``cs-etm.h``), not from the writer: header and section
sizes, the attribute and its IDs, every record of the data section with its
``sample_id`` trailer, the feature table, the AUXTRACE index and the cs_etm
AUXTRACE_INFO. The trace is built in memory, so no corpus is needed.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field

import pytest

from cstrace.inputs.files import BytesBlob
from cstrace.trace import Buffer, Dump, Source, Trace
from tests.perfdata_writer import encode_perf_data, plan

ETMV4 = {
    "TRCCONFIGR": 0x1,
    "TRCIDR0": 0x28000EA1,
    "TRCIDR1": 0x4100F403,
    "TRCIDR2": 0x488,
    "TRCIDR8": 0,
    "TRCAUTHSTATUS": 0xCC,
}
ETE = {
    "TRCCONFIGR": 0x8001,
    "TRCTRACEIDR": 0x14,
    "TRCIDR0": 0x2801CEA1,
    "TRCIDR1": 0x4100FFF0,
    "TRCIDR2": 0xD0001088,
    "TRCIDR8": 0,
    "TRCDEVARCH": 0x47705A13,
}
FRAMES = bytes(range(64))  # four 16-byte frames; their content does not matter here
RAW1 = bytes(range(100, 113))  # 13 bytes: padded to 16 in the AUXTRACE record
RAW2 = b"\x01\x02\x03\x04\x05"


def _trace() -> Trace:
    code_a = BytesBlob(b"\x1f\x20\x03\xd5" * 4, "/snap/a/code.bin")
    code_b = BytesBlob(b"\xc0\x03\x5f\xd6" * 2, "/snap/b/code.bin")
    return Trace(
        buffers=[
            Buffer("etb", "coresight", (BytesBlob(FRAMES),)),
            Buffer("trbe", "source_data", (BytesBlob(RAW1),)),
            Buffer("stm_etb", "coresight", (BytesBlob(bytes(16)),)),
            Buffer("trbe2", "source_data", (BytesBlob(RAW2),)),
        ],
        sources=[
            Source(
                "etm_a",
                "etmv4",
                "ETM4",
                {**ETMV4, "TRCTRACEIDR": 0x10},
                ("etb",),
                "Cortex-A53",
                "cpu_2",
            ),
            Source(
                "etm_b",
                "etmv4",
                "ETM4",
                {**ETMV4, "TRCTRACEIDR": 0x12},
                ("etb",),
                "Cortex-A53",
                "cpu_5",
            ),
            Source("stm", "stm", "STM", {"STMTCSR": 5}, ("stm_etb",)),
            Source("ete_s1", "ete", "ETE", ETE, ("trbe",), "ARM-AA64", "cpu_7"),
            Source("ete_s2", "ete", "ETE", ETE, ("trbe2",), "ARM-AA64", "cpu_7"),
        ],
        dumps=[
            Dump(code_a, 0x400000, core="cpu_2"),
            Dump(code_a, 0x400000, core="cpu_5"),  # the same memory seen by another core
            Dump(code_b, 0x500000, offset=4, length=4),
        ],
    )


# -- a small perf.data parser of the test's own -------------------------------------------------


@dataclass
class Parsed:
    attr_size: int
    attrs: list[tuple[bytes, list[int]]]
    records: list[tuple[int, int, int, bytes, bytes]] = field(default_factory=list)
    """(file offset, type, misc, body after the header, AUXTRACE payload)."""
    features: dict[int, bytes] = field(default_factory=dict)


def parse(data: bytes) -> Parsed:
    assert data[:8] == b"PERFILE2"
    size, attr_size, a_off, a_size, d_off, d_size, t_off, t_size = struct.unpack_from(
        "<8Q", data, 8
    )
    assert size == 104
    assert (t_off, t_size) == (0, 0)
    bits = int.from_bytes(data[72:104], "little")
    attrs = []
    for at in range(a_off, a_off + a_size, attr_size):
        attr = data[at : at + attr_size - 16]
        ids_off, ids_size = struct.unpack_from("<QQ", data, at + attr_size - 16)
        attrs.append((attr, list(struct.unpack_from(f"<{ids_size // 8}Q", data, ids_off))))
    out = Parsed(attr_size, attrs)
    at = d_off
    while at < d_off + d_size:
        kind, misc, rsize = struct.unpack_from("<IHH", data, at)
        assert rsize >= 8 and rsize % 8 == 0, (at, kind, rsize)
        body = data[at + 8 : at + rsize]
        payload = b""
        if kind == 71:  # AUXTRACE: the data follows the record, outside its size
            (psize,) = struct.unpack_from("<Q", body)
            payload = data[at + rsize : at + rsize + psize]
            assert len(payload) == psize
        out.records.append((at, kind, misc, body, payload))
        at += rsize + len(payload)
    assert at == d_off + d_size, "records overrun the data section"
    table = d_off + d_size  # the feature table follows the data section
    for i, bit in enumerate(b for b in range(256) if bits >> b & 1):
        f_off, f_size = struct.unpack_from("<QQ", data, table + 16 * i)
        assert f_off + f_size <= len(data)
        out.features[bit] = data[f_off : f_off + f_size]
    return out


def trailer(body: bytes) -> tuple[int, int, int, int, int]:
    """pid, tid, time, cpu, id: the sample_id of TID | TIME | CPU | IDENTIFIER."""
    pid, tid, time, cpu, _res, ident = struct.unpack_from("<IIQIIQ", body, len(body) - 32)
    return pid, tid, time, cpu, ident


def header_string(blob: bytes, at: int = 0) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", blob, at)
    return blob[at + 4 : at + 4 + n].split(b"\0")[0].decode(), at + 4 + n


# -- the tests -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def parsed() -> Parsed:
    return parse(encode_perf_data(_trace(), pmu_type=0x1E, pid=42, comm="prog"))


def test_header_attribute_and_ids(parsed: Parsed) -> None:
    assert parsed.attr_size == 128 + 16
    [(attr, ids)] = parsed.attrs
    a_type, a_size, _config, period, sample_type, _read, flags = struct.unpack_from(
        "<IIQQQQQ", attr
    )
    assert (a_type, a_size, period) == (0x1E, 128, 1)
    # IP (as perf record sets it; no non-sample record carries it) TID TIME CPU IDENTIFIER
    assert sample_type == 1 | (1 << 1) | (1 << 2) | (1 << 7) | (1 << 16)
    assert flags >> 18 & 1  # sample_id_all
    assert len(ids) == 3 == len(set(ids))  # one per CPU


def test_record_counts(parsed: Parsed) -> None:
    counts = Counter(kind for _, kind, _, _, _ in parsed.records)
    assert counts == {
        79: 1,  # TIME_CONV
        70: 1,  # AUXTRACE_INFO
        3: 1,  # COMM
        10: 2,  # MMAP2: the dump seen by two cores once
        68: 2,  # FINISHED_ROUND
        12: 2,  # ITRACE_START: CPUs 2 and 7
        11: 3,  # AUX: the formatted buffer and the two raw ones
        71: 3,  # AUXTRACE
    }


def test_auxtrace_info_is_cs_etm_version_1(parsed: Parsed) -> None:
    [body] = [b for _, kind, _, b, _ in parsed.records if kind == 70]
    kind, _ = struct.unpack_from("<II", body)
    assert kind == 3  # PERF_AUXTRACE_CS_ETM
    words = list(struct.unpack_from(f"<{(len(body) - 8) // 8}Q", body, 8))
    version, pmu_cpus, snapshot = words[:3]
    assert (version, pmu_cpus >> 32, pmu_cpus & 0xFFFFFFFF, snapshot) == (1, 0x1E, 3, 0)
    blocks = []
    at = 3
    while at < len(words):
        magic, cpu, n = words[at : at + 3]
        blocks.append((magic, cpu, words[at + 3 : at + 3 + n]))
        at += 3 + n
    etmv4 = [0x1, 0x10, 0x28000EA1, 0x4100F403, 0x488, 0, 0xCC]
    assert blocks == [
        (0x4040404040404040, 2, etmv4),
        (0x4040404040404040, 5, [0x1, 0x12, *etmv4[2:]]),
        # ETE: the ETMv4 list, TRCAUTHSTATUS (absent: 0), then TRCDEVARCH
        (
            0x5050505050505050,
            7,
            [0x8001, 0x14, 0x2801CEA1, 0x4100FFF0, 0xD0001088, 0, 0, 0x47705A13],
        ),
    ]


def test_aux_records_and_auxtrace_data(parsed: Parsed) -> None:
    aux = []
    for _, kind, _, body, _ in parsed.records:
        if kind == 11:
            offset, size, flags = struct.unpack_from("<QQQ", body)
            aux.append((trailer(body)[3], offset, size, flags))
    assert aux == [(2, 0, 64, 0), (7, 0, 13, 0x100), (7, 16, 5, 0x100)]
    traces = []
    for _, kind, _, body, payload in parsed.records:
        if kind == 71:
            size, offset, _ref, idx, tid, cpu, _ = struct.unpack_from("<QQQIIII", body)
            traces.append((cpu, idx, tid, offset, size, payload))
    assert traces == [
        (2, 2, 0xFFFFFFFF, 0, 64, FRAMES),
        (7, 7, 0xFFFFFFFF, 0, 16, RAW1 + bytes(3)),  # padded to 8, the AUX record says 13
        (7, 7, 0xFFFFFFFF, 16, 8, RAW2 + bytes(3)),
    ]


def test_trailers_comm_and_mmaps(parsed: Parsed) -> None:
    times = [trailer(b)[2] for _, kind, _, b, _ in parsed.records if kind in (3, 10, 11, 12)]
    assert times == sorted(times) and len(set(times)) == len(times)
    [(_, _, _, comm, _)] = [r for r in parsed.records if r[1] == 3]
    assert struct.unpack_from("<II", comm) == (42, 42)
    assert comm[8:].split(b"\0")[0] == b"prog"
    maps = []
    for _, kind, misc, body, _ in parsed.records:
        if kind == 10:
            pid, _tid, addr, length, pgoff = struct.unpack_from("<IIQQQ", body)
            name = body[64:].split(b"\0")[0].decode()
            maps.append((misc & 7, pid, addr, length, pgoff, name))
    assert maps == [
        (2, 42, 0x400000, 16, 0, "a/code.bin"),
        (2, 42, 0x500000, 4, 4, "b/code.bin"),
    ]


def test_features(parsed: Parsed) -> None:
    f = parsed.features
    assert struct.unpack("<II", f[7]) == (8, 8)  # NRCPUS: up to CPU 7
    assert header_string(f[6])[0] == "aarch64"
    nr, pmu_type = struct.unpack_from("<II", f[16])
    assert (nr, pmu_type, header_string(f[16], 8)[0]) == (1, 0x1E, "cs_etm")
    # AUXTRACE: the index of the AUXTRACE records
    (n,) = struct.unpack_from("<Q", f[18])
    entries = [struct.unpack_from("<QQ", f[18], 8 + 16 * i) for i in range(n)]
    assert entries == [(at, 0x30) for at, kind, _, _, _ in parsed.records if kind == 71]


def test_plan_says_what_was_left_out() -> None:
    layout = plan(_trace())
    assert layout.skipped_sources == ("stm",)
    assert layout.skipped_buffers == ("stm_etb",)
    assert [b.trace_id for b in layout.cpus] == [0x10, 0x12, 0x14]
    assert layout.cpu_of("ete_s2") == 7


def test_cpu_numbers_from_names_order_or_by_hand() -> None:
    t = _trace()
    assert [b.cpu for b in plan(t, cpus={"cpu_2": 0, "cpu_5": 1, "cpu_7": 3}).cpus] == [0, 1, 3]
    same = [
        Source(s.name, s.protocol, s.source_type, s.registers, s.buffers, s.core, "core")
        if s.core_name == "cpu_5"
        else s
        for s in t.sources
    ]
    t.sources = [*same, Source("x", "ete", "ETE", ETE, (), "ARM-AA64", "other")]
    # 'core' and 'other' have no number: every core is numbered in order of appearance
    assert [(b.cpu, b.sources) for b in plan(t).cpus] == [
        (0, ("etm_a",)),
        (1, ("etm_b",)),
        (2, ("ete_s1", "ete_s2")),
        (3, ("x",)),
    ]


def test_what_cannot_be_written() -> None:
    t = _trace()
    t.buffers[0] = Buffer("etb", "dstream_coresight", (BytesBlob(FRAMES),))
    with pytest.raises(ValueError, match="dstream_coresight"):
        plan(t)
    t = _trace()
    t.sources[4] = Source(
        "ete_s2", "ete", "ETE", {**ETE, "TRCCONFIGR": 0}, ("trbe2",), "ARM-AA64", "cpu_7"
    )
    with pytest.raises(ValueError, match="different registers"):
        plan(t)
    t = _trace()
    t.sources = [s for s in t.sources if s.protocol == "stm"]
    with pytest.raises(ValueError, match="nothing for cs_etm"):
        plan(t)
