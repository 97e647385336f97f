"""Small perf.data files written for tests: a header, one event attribute, records, features.

Input: records added one by one (MMAP2, COMM, FORK, EXIT, ITRACE_START,
SWITCH_CPU_WIDE, AUX, AUX_OUTPUT_HW_ID, AUXTRACE_INFO, AUXTRACE with its data,
TIME_CONV, FINISHED_ROUND), each with its ``sample_id`` trailer (pid, tid, time,
id, cpu). Output: the bytes of a little-endian ``PERFILE2`` file with the
BUILD_ID, CMDLINE, NRCPUS and AUXTRACE features (and simpleperf's INIT_MAP and
FILE2),
laid out as the kernel's
``perf.data-file-format.txt`` describes. ``cs_etm_info`` makes the private
words of a CoreSight AUXTRACE_INFO record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

ETMV3_MAGIC = 0x3030303030303030
ETMV4_MAGIC = 0x4040404040404040
ETE_MAGIC = 0x5050505050505050

SAMPLE_TID = 1 << 1
SAMPLE_TIME = 1 << 2
SAMPLE_ID = 1 << 6
SAMPLE_CPU = 1 << 7
SAMPLE_TYPE = SAMPLE_TID | SAMPLE_TIME | SAMPLE_ID | SAMPLE_CPU | 1 | (1 << 8)

AUX_TRUNCATED = 0x1
AUX_OVERWRITE = 0x2
AUX_RAW = 0x100


def _pad8(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


def _string(text: str) -> bytes:
    raw = _pad8(text.encode() + b"\0")
    return struct.pack("<I", len(raw)) + raw


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _file2_entry(path: str, kind: int, min_vaddr: int, offset: int) -> bytes:
    """One FILE2 entry: u32 size, then simpleperf's ``FileFeature`` message (1 path, 2 type,
    3 min_vaddr, 6 ELF file or 7 kernel module, each holding the offset as field 1)."""
    raw = path.encode()
    msg = b"\x0a" + _varint(len(raw)) + raw + b"\x10" + _varint(kind)
    msg += b"\x18" + _varint(min_vaddr)
    inner = b"\x08" + _varint(offset)
    msg += (b"\x3a" if kind == 1 else b"\x32") + _varint(len(inner)) + inner
    return struct.pack("<I", len(msg)) + msg


def cs_etm_info(
    cpus: list[tuple[int, int, list[int]]],
    *,
    version: int = 1,
    pmu_type: int = 8,
    snapshot: int = 0,
) -> list[int]:
    """The private words of a cs_etm AUXTRACE_INFO: (magic, cpu, parameters) per CPU.

    Version 0 writes no parameter count.
    """
    words = [version, pmu_type << 32 | len(cpus), snapshot]
    for magic, cpu, params in cpus:
        words += [magic, cpu]
        if version >= 1:
            words.append(len(params))
        words += params
    return words


def etmv4_params(trace_id: int, configr: int = 0x40, ete: bool = False) -> list[int]:
    """TRCCONFIGR, TRCTRACEIDR, TRCIDR0/1/2/8, TRCAUTHSTATUS (and TRCDEVARCH for ETE)."""
    idr1 = 0x4100FFF0 if ete else 0x4100F422
    params = [configr, trace_id, 0x28000EA1, idr1, 0x20001088, 0, 0x8C]
    if ete:
        params.append(0x47715A13)
    return params


@dataclass
class PerfWriter:
    """Collects records and features; :meth:`build` gives the file's bytes."""

    sample_type: int = SAMPLE_TYPE
    sample_id_all: bool = True
    pmu_type: int = 8
    ids: tuple[int, ...] = (7,)
    records: list[bytes] = field(default_factory=list)
    build_ids: list[tuple[int, bytes, str]] = field(default_factory=list)
    cmdline: list[str] = field(default_factory=lambda: ["perf", "record", "-e", "cs_etm//"])
    nr_cpus: tuple[int, int] | None = (2, 2)
    index: bool = True
    init_map: list[bytes] = field(default_factory=list)
    """Records for simpleperf's INIT_MAP feature (move them there from :attr:`records`)."""
    files: list[tuple[str, int, int, int]] = field(default_factory=list)
    """simpleperf's FILE2 feature: (path, file type, min_vaddr, offset of min_vaddr) per
    file (type 1, a kernel module: the offset is in the module's memory)."""
    offsets: list[int] = field(default_factory=list)
    """File offset of each record added, in order (known after :meth:`build`)."""

    def _trailer(self, pid: int, tid: int, time: int, cpu: int) -> bytes:
        if not self.sample_id_all:
            return b""
        out = b""
        if self.sample_type & SAMPLE_TID:
            out += struct.pack("<ii", pid, tid)
        if self.sample_type & SAMPLE_TIME:
            out += struct.pack("<Q", time)
        if self.sample_type & SAMPLE_ID:
            out += struct.pack("<Q", self.ids[0])
        if self.sample_type & SAMPLE_CPU:
            out += struct.pack("<II", cpu, 0)
        return out

    def _add(
        self, rtype: int, misc: int, body: bytes, trailer: bytes = b"", data: bytes = b""
    ) -> int:
        payload = body + trailer
        self.records.append(struct.pack("<IHH", rtype, misc, 8 + len(payload)) + payload + data)
        return len(self.records) - 1

    def raw(self, rtype: int, body: bytes, misc: int = 0) -> int:
        """Any record, as given."""
        return self._add(rtype, misc, body)

    def mmap2(
        self,
        pid: int,
        tid: int,
        start: int,
        length: int,
        pgoff: int,
        name: str,
        *,
        prot: int = 5,
        time: int = 0,
        cpu: int = 0,
        build_id: bytes | None = None,
    ) -> int:
        """An MMAP2 record (prot 5: r-x), with a build ID of its own when given."""
        head = struct.pack("<iiQQQ", pid, tid, start, length, pgoff)
        misc = 2  # PERF_RECORD_MISC_USER
        if build_id is not None:
            misc |= 1 << 14
            ident = struct.pack("<BBH", len(build_id), 0, 0) + build_id.ljust(20, b"\0")
        else:
            ident = struct.pack("<IIQQ", 0xFD, 0x19, 1385, 0)
        body = head + ident + struct.pack("<II", prot, 2) + _pad8(name.encode() + b"\0")
        return self._add(10, misc, body, self._trailer(pid, tid, time, cpu))

    def comm(
        self, pid: int, tid: int, comm: str, *, exec_: bool = False, time: int = 0, cpu: int = 0
    ) -> int:
        """A COMM record (``exec_``: after an exec)."""
        body = struct.pack("<ii", pid, tid) + _pad8(comm.encode() + b"\0")
        return self._add(3, (1 << 13) if exec_ else 0, body, self._trailer(pid, tid, time, cpu))

    def fork(self, pid: int, ppid: int, tid: int, ptid: int, *, time: int = 0, cpu: int = 0) -> int:
        """A FORK record."""
        body = struct.pack("<iiiiQ", pid, ppid, tid, ptid, time)
        return self._add(7, 0, body, self._trailer(pid, tid, time, cpu))

    def exit(self, pid: int, ppid: int, tid: int, ptid: int, *, time: int = 0, cpu: int = 0) -> int:
        """An EXIT record."""
        body = struct.pack("<iiiiQ", pid, ppid, tid, ptid, time)
        return self._add(4, 0, body, self._trailer(pid, tid, time, cpu))

    def itrace_start(self, pid: int, tid: int, *, time: int = 0, cpu: int = 0) -> int:
        """An ITRACE_START record."""
        return self._add(12, 0, struct.pack("<ii", pid, tid), self._trailer(pid, tid, time, cpu))

    def switch_cpu_wide(
        self,
        out: bool,
        pid: int,
        tid: int,
        other_pid: int,
        other_tid: int,
        *,
        time: int = 0,
        cpu: int = 0,
    ) -> int:
        """A SWITCH_CPU_WIDE record: ``pid``/``tid`` switched out (or in); the other thread."""
        body = struct.pack("<ii", other_pid, other_tid)
        return self._add(15, (1 << 13) if out else 0, body, self._trailer(pid, tid, time, cpu))

    def aux(
        self,
        offset: int,
        size: int,
        flags: int = 0,
        *,
        pid: int = 0,
        tid: int = 0,
        time: int = 0,
        cpu: int = 0,
    ) -> int:
        """A PERF_RECORD_AUX."""
        body = struct.pack("<QQQ", offset, size, flags)
        return self._add(11, 0, body, self._trailer(pid, tid, time, cpu))

    def hw_id(self, trace_id: int, *, cpu: int, time: int = 0, sink: int | None = None) -> int:
        """An AUX_OUTPUT_HW_ID record (version 0.0, or 0.1 with a sink)."""
        value = trace_id
        if sink is not None:
            value |= (sink << 8) | (1 << 56)
        return self._add(21, 0, struct.pack("<Q", value), self._trailer(0, 0, time, cpu))

    def auxtrace_info(self, words: list[int], auxtrace_type: int = 3) -> int:
        """An AUXTRACE_INFO record."""
        body = struct.pack("<II", auxtrace_type, 0) + struct.pack(f"<{len(words)}Q", *words)
        return self._add(70, 0, body)

    def auxtrace(
        self, data: bytes, *, offset: int = 0, idx: int = 0, tid: int = -1, cpu: int = 0
    ) -> int:
        """An AUXTRACE record followed by its data (cpu -1: a per-thread AUX area)."""
        body = struct.pack("<QQQIiiI", len(data), offset, 0, idx, tid, cpu, 0)
        return self._add(71, 0, body, b"", data)

    def time_conv(self, shift: int, mult: int, zero: int) -> int:
        """A TIME_CONV record (with ``cap_user_time_zero``)."""
        body = struct.pack("<QQQQQBB6x", shift, mult, zero, 0, 0, 1, 0)
        return self._add(79, 0, body)

    def finished_round(self) -> int:
        """A FINISHED_ROUND record."""
        return self._add(68, 0, b"")

    def build(self) -> bytes:
        """The perf.data file."""
        attr_size = 128 + 16
        attr = struct.pack(
            "<IIQQQQQ",
            self.pmu_type,
            128,
            0x4000,
            1,
            self.sample_type,
            0,
            (1 << 18) if self.sample_id_all else 0,
        ).ljust(128, b"\0")
        ids = struct.pack(f"<{len(self.ids)}Q", *self.ids)
        header_size = 104
        ids_at = header_size
        attrs_at = ids_at + len(ids)
        data_at = attrs_at + attr_size
        data = b""
        self.offsets = []
        auxtrace_index: list[tuple[int, int]] = []
        for rec in self.records:
            self.offsets.append(data_at + len(data))
            if struct.unpack_from("<I", rec)[0] == 71:
                auxtrace_index.append((data_at + len(data), 48))
            data += rec
        features: list[tuple[int, bytes]] = []
        if self.build_ids:
            blob = b""
            for pid, bid, name in self.build_ids:
                body = struct.pack("<i", pid) + bid.ljust(24, b"\0") + _pad8(name.encode() + b"\0")
                blob += struct.pack("<IHH", 67, 2, 8 + len(body)) + body
            features.append((2, blob))
        if self.nr_cpus is not None:
            features.append((7, struct.pack("<II", *self.nr_cpus)))
        if self.cmdline:
            features.append(
                (11, struct.pack("<I", len(self.cmdline)) + b"".join(map(_string, self.cmdline)))
            )
        if self.index and auxtrace_index:
            words = [len(auxtrace_index)] + [w for pair in auxtrace_index for w in pair]
            features.append((18, struct.pack(f"<{len(words)}Q", *words)))
        if self.init_map:
            features.append((134, b"".join(self.init_map)))
        if self.files:
            features.append((132, b"".join(_file2_entry(*f) for f in self.files)))
        feat_at = data_at + len(data)
        table_size = 16 * len(features)
        table = b""
        body = b""
        for _bit, blob in features:
            table += struct.pack("<QQ", feat_at + table_size + len(body), len(blob))
            body += blob
        bits = bytearray(32)
        for bit, _ in features:
            bits[bit // 8] |= 1 << (bit % 8)
        header = b"PERFILE2" + struct.pack(
            "<QQQQQQQQ",
            header_size,
            attr_size,
            attrs_at,
            attr_size,
            data_at,
            len(data),
            0,
            0,
        )
        header += bytes(bits)
        assert len(header) == header_size
        attr_entry = attr + struct.pack("<QQ", ids_at, len(ids))
        return header + ids + attr_entry + data + table + body
