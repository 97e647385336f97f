"""Trace packages (metadata requirements §6.4): folders, ZIP archives, safety, conversion."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from cstrace.errors import SnapshotError
from cstrace.inputs import Limits, ZipTree, open_trace_input, read_snapshot, write_package
from cstrace.memory.build import CodeMemories
from cstrace.memory.image import MemoryMap
from cstrace.trace import Trace


def static_map(trace: Trace, core: str | None) -> MemoryMap:
    """The dumps a core sees."""
    return CodeMemories(trace).static_map(core)


CONTENTS = """\
; a small package
[trace]
metadata = trace.ini
buffer0 = cluster0.data
buffer1 = cluster1.data
events = system-event-log

[buffer1]
name = ETB_1
format = source_data
metadata = single.ini

[memory_0]
file = mem/code.bin
address = 0x8000
space = N
core = cpu_0

[memory_1]
file = mem/shared.bin
address = 0x100000

[image_0]
file = app.bin
base = 0x400000

[image_1]
file = tool.bin
base = 0x500000
"""

TRACE_INI = """\
[buffer]
vendor: ARM
component: ETB
format: coresight

[trace_0x10]
format: PFT1.1
name: PTM_0
core: Cortex-A9
core_name: cpu_0
cyclecount: 0
context_id: 32
vmid: 0
timestamp_bits: 0
return_stack: 0
dmb_dsb_waypoints: 0

[trace_0x20]
format: STM
"""

SINGLE_INI = """\
[trace_0x7]
format: ITM
"""

EVENTS = '0 declare_process(CURRENT, 1, 0x8000, "app.bin")\n'


def make_package_dir(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "contents.ini").write_text(CONTENTS)
    (root / "trace.ini").write_text(TRACE_INI)
    (root / "single.ini").write_text(SINGLE_INI)
    (root / "cluster0.data").write_bytes(bytes(range(32)))
    (root / "cluster1.data").write_bytes(b"\x00\x00\x00\x00\x00\x80")
    (root / "mem").mkdir(exist_ok=True)
    (root / "mem" / "code.bin").write_bytes(b"\x01\x02\x03\x04")
    (root / "mem" / "shared.bin").write_bytes(b"\xaa" * 8)
    (root / "app.bin").write_bytes(b"\x00\xf0\x20\xe3")
    (root / "tool.bin").write_bytes(b"\x1e\xff\x2f\xe1")
    (root / "system-event-log").write_text(EVENTS)
    return root


def zip_folder(folder: Path, out: Path, prefix: str = "") -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, prefix + path.relative_to(folder).as_posix())
    return out


def check_package(pkg: object) -> None:
    assert isinstance(pkg, Trace)
    assert [b.name for b in pkg.buffers] == ["buffer0", "ETB_1"]
    assert [b.format for b in pkg.buffers] == ["coresight", "source_data"]
    assert pkg.buffers[0].read() == bytes(range(32))
    srcs = pkg.sources_for(pkg.buffers[0])
    assert [s.name for s in srcs] == ["PTM_0", "trace_0x20"]
    ptm = srcs[0]
    assert ptm.source_type == "PFT1.1" and ptm.protocol == "ptm"
    assert ptm.core == "Cortex-A9" and ptm.core_name == "cpu_0"
    assert ptm.registers["ETMCR"] >> 14 & 3 == 3
    assert ptm.registers["ETMTRACEIDR"] == 0x10
    assert [s.name for s in pkg.sources_for(pkg.buffers[1])] == ["trace_0x7"]
    mm = static_map(pkg, ptm.core_name)
    assert [(r.start, r.data) for r in mm.regions] == [
        (0x8000, b"\x01\x02\x03\x04"),
        (0x100000, b"\xaa" * 8),
    ]
    assert [i.base for i in pkg.images] == [0x400000, 0x500000]
    assert pkg.events is not None and len(pkg.events.events) == 1


def test_package_from_a_folder(tmp_path: Path) -> None:
    folder = make_package_dir(tmp_path / "pkg")
    check_package(open_trace_input(folder))
    check_package(open_trace_input(folder / "contents.ini"))


def test_package_from_a_zip(tmp_path: Path) -> None:
    folder = make_package_dir(tmp_path / "pkg")
    check_package(open_trace_input(zip_folder(folder, tmp_path / "p.zip")))
    # The same with everything inside one top folder of the archive.
    check_package(open_trace_input(zip_folder(folder, tmp_path / "q.zip", prefix="top/")))


def test_code_memory_adds_images_and_follows_the_log(tmp_path: Path) -> None:
    pkg = open_trace_input(make_package_dir(tmp_path / "pkg"))
    src = pkg.sources_for(pkg.buffers[0])[0]
    mem = CodeMemories(pkg).for_source(src)
    assert mem.read(0x500000, 4) == b"\x1e\xff\x2f\xe1"  # an image mapped everywhere
    assert mem.read(0x400000, 4) == b""  # app.bin is placed by the event log instead
    assert mem.read(0x8000, 4) == b"\x01\x02\x03\x04"  # dump
    mem.set_context(1 << 8)  # process 1 maps app.bin at 0x8000 over the dump
    assert mem.read(0x8000, 4) == b"\x00\xf0\x20\xe3"
    assert mem.read(0x500000, 4) == b"\x1e\xff\x2f\xe1"


def _patch_central_size(data: bytearray, name: bytes, size: int) -> None:
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        nlen = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46 : pos + 46 + nlen] == name:
            struct.pack_into("<I", data, pos + 24, size)
            return
        pos = data.find(b"PK\x01\x02", pos + 4)
    raise AssertionError("entry not found")


def _zip_with(tmp_path: Path, entries: list[tuple[str, bytes]]) -> Path:
    out = tmp_path / "hostile.zip"
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            zf.writestr(info, data)
    return out


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../evil.ini", "leads outside"),
        ("a/../../evil.ini", "leads outside"),
        ("..\\evil.ini", "leads outside"),
        ("/etc/passwd", "absolute path"),
        ("C:/windows/evil", "absolute path"),
        ("c:evil", "absolute path"),
    ],
)
def test_hostile_names_are_refused(tmp_path: Path, name: str, message: str) -> None:
    path = _zip_with(tmp_path, [("contents.ini", b"[trace]\n"), (name, b"x")])
    with pytest.raises(SnapshotError, match=message) as err:
        open_trace_input(path)
    assert str(path) in str(err.value)


def test_symbolic_link_entries_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "link.zip"
    with zipfile.ZipFile(out, "w") as zf:
        info = zipfile.ZipInfo("contents.ini")
        info.external_attr = (0o120777 << 16) | 0
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(SnapshotError, match="symbolic link"):
        ZipTree(out)


def test_huge_declared_size_is_refused(tmp_path: Path) -> None:
    path = _zip_with(tmp_path, [("contents.ini", b"[trace]\n"), ("big.bin", b"0123")])
    data = bytearray(path.read_bytes())
    _patch_central_size(data, b"big.bin", 0xFFFFFFFE)
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match=r"'big.bin' declares 4294967294 bytes"):
        open_trace_input(path)


def test_limits_on_total_size_and_entry_count(tmp_path: Path) -> None:
    path = _zip_with(tmp_path, [(f"f{k}.bin", bytes(40)) for k in range(5)])
    with pytest.raises(SnapshotError, match="in total"):
        ZipTree(path, limits=Limits(max_total_bytes=100))
    with pytest.raises(SnapshotError, match="5 entries"):
        ZipTree(path, limits=Limits(max_entries=4))
    with pytest.raises(SnapshotError, match="declares 40 bytes"):
        ZipTree(path, limits=Limits(max_entry_bytes=39))


def test_duplicate_entries_are_refused(tmp_path: Path) -> None:
    path = _zip_with(tmp_path, [("a.bin", b"1"), ("A.bin", b"2")])
    with pytest.raises(SnapshotError, match="twice"):
        ZipTree(path)


def test_malformed_archives(tmp_path: Path) -> None:
    folder = make_package_dir(tmp_path / "pkg")
    good = zip_folder(folder, tmp_path / "p.zip").read_bytes()
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises(SnapshotError) as err:
        open_trace_input(truncated)
    assert str(truncated) in str(err.value)
    # A member whose compressed bytes are damaged: a clear error when it is read.
    damaged = bytearray(good)
    start = damaged.find(b"cluster0.data") + len(b"cluster0.data")
    for k in range(start, start + 20):
        damaged[k] ^= 0x5A
    bad = tmp_path / "damaged.zip"
    bad.write_bytes(bytes(damaged))
    with pytest.raises(SnapshotError, match=r"damaged archive member|not found") as err2:
        pkg = open_trace_input(bad)
        pkg.buffers[0].read()
    assert "cluster0.data" in str(err2.value) or "damaged" in str(err2.value)
    not_zip = tmp_path / "x.zip"
    not_zip.write_bytes(b"PK\x03\x04 nothing else")
    with pytest.raises(SnapshotError, match="not a snapshot, trace package or ZIP"):
        open_trace_input(not_zip)


def test_zip_without_contents(tmp_path: Path) -> None:
    path = _zip_with(tmp_path, [("readme.txt", b"hello")])
    with pytest.raises(SnapshotError, match=r"no contents\.ini or snapshot\.ini"):
        open_trace_input(path)


def test_extract_to_stays_in_its_folder(tmp_path: Path) -> None:
    folder = make_package_dir(tmp_path / "pkg")
    tree = ZipTree(zip_folder(folder, tmp_path / "p.zip"))
    dest = tmp_path / "out"
    written = tree.extract_to(dest)
    assert (dest / "mem" / "code.bin").read_bytes() == b"\x01\x02\x03\x04"
    assert all(dest in p.parents for p in written)
    # A link planted in the destination cannot redirect an entry outside it.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    dest2 = tmp_path / "out2"
    dest2.mkdir()
    os.symlink(outside, dest2 / "mem")
    with pytest.raises(SnapshotError, match="outside"):
        tree.extract_to(dest2)
    assert not any(outside.iterdir())


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        ("[buffers]\n", r"no \[trace\] section"),
        ("[trace]\nmetadata = trace.ini\n", "names no buffer"),
        ("[trace]\nmetadata = ../trace.ini\nbuffer0 = a.bin\n", "outside the snapshot folder"),
        ("[trace]\nmetadata = nothere.ini\nbuffer0 = a.bin\n", "not found"),
        ("[trace]\nbuffer0 = a.bin\n", "missing item 'format'"),
        ("[trace]\nbuffer0 = a.bin\n[buffer0]\nformat = weird\n", "is not one of"),
        ("[trace]\nbuffer0 = /abs.bin\n[buffer0]\nformat = coresight\n", "absolute path"),
        (
            "[trace]\nbuffer0 = a.bin\n[buffer0]\nformat = coresight\n[memory_0]\nfile = m.bin\n",
            "no 'address'",
        ),
        (
            "[trace]\nbuffer0 = a.bin\nevents = log.txt\n[buffer0]\nformat = coresight\n",
            "event log 'log.txt' not found",
        ),
    ],
)
def test_contents_errors_name_file_and_line(tmp_path: Path, contents: str, message: str) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "contents.ini").write_text(contents)
    (folder / "trace.ini").write_text(TRACE_INI)
    (folder / "a.bin").write_bytes(b"")
    with pytest.raises(SnapshotError, match=message) as err:
        open_trace_input(folder)
    assert "contents.ini" in str(err.value)


DS5 = {
    "snapshot.ini": "[snapshot]\nversion=1.0\n[device_list]\ndevice0=cpu.ini\ndevice1=etm.ini\n"
    "device2=mem.ini\n[trace]\nmetadata=trace.ini\n",
    "cpu.ini": "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A15\n[regs]\nPC=0\n"
    "[dump1]\nfile=code.bin\naddress=0x80000000\nspace=S\n"
    "[dump2]\nfile=code.bin\naddress=0x90000000\noffset=2\nlength=2\n",
    "etm.ini": "[device]\nname=PTM_0\nclass=trace_source\ntype=PTM1.1\n[regs]\n"
    "ETMCR(0x000)=0x10001000\nETMIDR(0x079)=0x411CF312\nETMCCER(0x07A)=0x34C01AC2\n"
    "ETMTRACEIDR(0x080)=0x00000013\n",
    "mem.ini": "[device]\nname=ram\nclass=memory_space\ntype=\n"
    "[dump1]\nfile=ram.bin\naddress=0x0\n",
    "trace.ini": "[trace_buffers]\nbuffers=buffer1,buffer0\n[buffer0]\nname=B0\nfile=b0.bin\n"
    "format=coresight\n[buffer1]\nname=B1\nfile=b1.bin,b1b.bin\nformat=source_data\n"
    "[source_buffers]\nPTM_0=B0,B1\n[core_trace_sources]\ncpu_0=PTM_0\n",
    "code.bin": "ABCD",
    "ram.bin": "RAM!",
    "b0.bin": "0123456789abcdef",
    "b1.bin": "xy",
    "b1b.bin": "z",
}


def make_ds5(root: Path) -> Path:
    root.mkdir()
    for name, text in DS5.items():
        (root / name).write_text(text)
    return root


def test_write_package_keeps_everything_that_decoding_reads(tmp_path: Path) -> None:
    snap = read_snapshot(make_ds5(tmp_path / "snap"))
    summary = write_package(snap, tmp_path / "out.zip")
    assert summary.buffers == 2 and summary.sources == 1
    pkg = open_trace_input(tmp_path / "out.zip")
    assert {(b.name, b.format) for b in pkg.buffers} == {
        ("B1", "source_data"),
        ("B0", "coresight"),
    }
    assert [b.name for b in pkg.buffers] == [b.name for b in snap.buffers]
    for b1, b2 in zip(snap.buffers, pkg.buffers, strict=True):
        assert b1.read() == b2.read()
        s1, s2 = snap.sources_for(b1), pkg.sources_for(b2)
        assert [s.name for s in s1] == [s.name for s in s2]
        for x, y in zip(s1, s2, strict=True):
            assert x.source_type == y.source_type
            assert x.registers == y.registers
            assert x.core_name is not None
            assert (x.core_name, x.core) == (y.core_name, y.core)
            m1 = static_map(snap, x.core_name)
            m2 = static_map(pkg, y.core_name)
            assert [(r.start, r.data, r.space) for r in m1.regions] == [
                (r.start, r.data, r.space) for r in m2.regions
            ]


def test_package_of_a_package_keeps_images_and_log(tmp_path: Path) -> None:
    pkg = open_trace_input(make_package_dir(tmp_path / "pkg"))
    write_package(pkg, tmp_path / "again.zip")
    again = open_trace_input(tmp_path / "again.zip")
    check_package(again)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cstrace.cli", *args], capture_output=True, text=True, check=False
    )


def test_cli_package_and_bad_input(tmp_path: Path) -> None:
    snap = make_ds5(tmp_path / "snap")
    out = tmp_path / "p.zip"
    done = _cli("package", str(snap), str(out))
    assert done.returncode == 0, done.stderr
    assert "2 buffer(s), 1 trace source(s)" in done.stdout
    assert [b.name for b in open_trace_input(out).buffers] == ["B0", "B1"]  # section order
    hostile = _zip_with(tmp_path, [("contents.ini", b"[trace]\n"), ("../x", b"")])
    done = _cli("decode", str(hostile))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert str(hostile) in done.stderr and "refused" in done.stderr
    done = _cli("package", str(tmp_path / "missing"), str(out))
    assert done.returncode == 2 and "no such file" in done.stderr


def test_tree_reads_ranges(tmp_path: Path) -> None:
    folder = make_package_dir(tmp_path / "pkg")
    tree = ZipTree(zip_folder(folder, tmp_path / "p.zip"))
    rel = PurePosixPath("cluster0.data")
    assert tree.size(rel) == 32
    assert tree.read_bytes(rel, 4, 3) == bytes([4, 5, 6])
    assert tree.read_bytes(rel, 30) == bytes([30, 31])
    assert not tree.exists(PurePosixPath("nothing"))


def test_define_trace_adds_a_source_with_a_new_trace_id(tmp_path: Path) -> None:
    folder = make_package_dir(tmp_path / "pkg")
    (folder / "system-event-log").write_text(
        EVENTS + "100 define_trace(START, 0x12, PTM_0, ETMCR=0x10001000)\n"
    )
    pkg = open_trace_input(folder)
    names = [s.name for s in pkg.sources_for(pkg.buffers[0])]
    assert names == ["PTM_0", "PTM_0@0x12", "trace_0x20"]
    new = pkg.sources_for(pkg.buffers[0])[1]
    assert new.registers["ETMTRACEIDR"] == 0x12
    assert new.registers["ETMCR"] == 0x10001000
    assert new.core_name == "cpu_0"
    (folder / "system-event-log").write_text("5 define_trace(START, 0x12, NOPE)\n")
    with pytest.raises(SnapshotError, match="no trace source named 'NOPE'"):
        open_trace_input(folder)
