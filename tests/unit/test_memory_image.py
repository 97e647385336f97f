"""Memory images from snapshot dumps: memory spaces, overlaps, region-local reads, missing files."""

from __future__ import annotations

from pathlib import Path

from cstrace.elements import MemSpace
from cstrace.inputs import read_snapshot
from cstrace.memory import MemoryMap, MemoryRegion, mem_space_from_name
from cstrace.memory.build import CodeMemories


def test_space_names_as_the_reference() -> None:
    assert mem_space_from_name("EL1N") == MemSpace.EL1N
    assert mem_space_from_name("EL2") == MemSpace.EL2
    assert mem_space_from_name("EL2N") == MemSpace.EL2
    assert mem_space_from_name("S") == MemSpace.S
    assert mem_space_from_name("N") == MemSpace.N
    assert mem_space_from_name("ROOT") == MemSpace.ROOT
    assert mem_space_from_name("H") == MemSpace.EL2
    assert mem_space_from_name("") == MemSpace.ANY
    # the names are matched exactly: anything else is "any space"
    assert mem_space_from_name("el1n") == MemSpace.ANY
    assert mem_space_from_name("bogus") == MemSpace.ANY


def test_find_matches_overlapping_spaces() -> None:
    mm = MemoryMap(
        [
            MemoryRegion(0x1000, b"\x01" * 16, MemSpace.EL1N),
            MemoryRegion(0x1000, b"\x02" * 16, MemSpace.EL1S),
        ]
    )
    assert len(mm) == 2  # same addresses, disjoint spaces: both kept
    assert mm.read(0x1000, 1, MemSpace.EL1N) == b"\x01"
    assert mm.read(0x1000, 1, MemSpace.N) == b"\x01"
    assert mm.read(0x1000, 1, MemSpace.EL1S) == b"\x02"
    assert mm.read(0x1000, 1, MemSpace.EL2) == b""
    assert mm.find(0x100F, MemSpace.ANY) is not None
    assert mm.find(0x1010, MemSpace.ANY) is None


def test_overlap_in_the_same_space_is_rejected() -> None:
    mm = MemoryMap()
    first = MemoryRegion(0x1000, b"\xaa" * 16, MemSpace.ANY)
    second = MemoryRegion(0x1008, b"\xbb" * 16, MemSpace.EL1N)
    assert mm.add(first)
    gen = mm.generation
    assert not mm.add(second)
    assert mm.rejected == [second]
    assert mm.generation == gen  # nothing changed for lookups
    assert mm.read(0x1010, 4, MemSpace.EL1N) == b""  # the rejected bytes are not mapped


def test_reads_stop_at_the_region_end() -> None:
    mm = MemoryMap(
        [
            MemoryRegion(0x2000, b"\x11" * 6, MemSpace.ANY),
            MemoryRegion(0x2006, b"\x22" * 6, MemSpace.ANY),
        ]
    )
    # two bytes before the end of the first region: a 4-byte read gives 2 bytes
    assert mm.read(0x2004, 4) == b"\x11\x11"
    assert mm.read(0x2006, 4) == b"\x22" * 4


def test_generation_changes_when_regions_are_added() -> None:
    mm = MemoryMap()
    g0 = mm.generation
    mm.add(MemoryRegion(0, b"\x00", MemSpace.ANY))
    assert mm.generation != g0
    assert not mm.add(MemoryRegion(0x10, b"", MemSpace.ANY))  # empty: nothing mapped


def test_snapshot_dumps_with_space_and_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "code.bin").write_bytes(bytes(range(32)))
    (tmp_path / "snapshot.ini").write_text(
        "[snapshot]\nversion=1.0\n\n[device_list]\ndevice0=cpu.ini\n"
    )
    (tmp_path / "cpu.ini").write_text(
        "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A53\n\n"
        "[dump1]\nfile=code.bin\naddress=0x8000\nspace=EL2\n\n"
        "[dump2]\nfile=missing.bin\naddress=0x9000\n\n"
        "[dump3]\nfile=code.bin\naddress=0xA000\noffset=0x10\nlength=8\n"
    )
    trace = read_snapshot(tmp_path)
    mm = CodeMemories(trace).static_map("cpu_0")
    assert len(mm) == 2
    assert any("missing.bin" in str(w) for w in trace.issues)
    assert mm.read(0x8000, 4, MemSpace.EL2) == bytes(range(4))
    assert mm.read(0x8000, 4, MemSpace.EL1N) == b""
    assert mm.read(0xA000, 16, MemSpace.EL1N) == bytes(range(0x10, 0x18))


def test_a_dump_longer_than_its_file_is_cut_to_the_file() -> None:
    # A length far beyond the file must not allocate it: the bytes there are used.
    from cstrace.inputs.files import BytesBlob
    from cstrace.trace import Dump, Trace

    dump = Dump(BytesBlob(b"abcdefgh", "d.bin"), 0x1000, offset=2, length=0xFFFFFFFFFFFF)
    memories = CodeMemories(Trace([], [], dumps=[dump]))
    mm = memories.static_map(None)
    assert mm.read(0x1000, 16) == b"cdefgh"
    (issue,) = memories.issues
    assert "d.bin" in str(issue) and "beyond" in str(issue)
