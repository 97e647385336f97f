"""ELF program images: code at the link address or a load base, build ID as UUID, bad files."""

from __future__ import annotations

import contextlib

import pytest

from cstrace.elements import MemSpace
from cstrace.errors import SnapshotError
from cstrace.memory.elf import format_uuid, load_elf, normalize_uuid, uuid_matches
from tests.integration.elfgen import ET_DYN, executable, kernel_module, relocatable

NOP = bytes.fromhex("00f020e3")  # A32 NOP
CODE = NOP * 3 + bytes.fromhex("feffffea")  # ... b .
BUILD_ID = bytes.fromhex("5f0c6a0e91f7c2d3a4b5c6d7e8f90a1b2c3d4e5f")


def test_executable_at_its_link_address() -> None:
    img = load_elf(executable(CODE, 0x8000, build_id=BUILD_ID), "app.elf")
    assert img.elf_type == "ET_EXEC"
    assert img.machine == "EM_ARM" and img.bits == 32
    assert img.entry == 0x8000
    regions = img.regions()
    assert [(r.start, r.data) for r in regions] == [(0x8000, CODE)]
    assert regions[0].space == MemSpace.ANY
    assert "app.elf" in regions[0].name


def test_executable_moved_to_a_base() -> None:
    img = load_elf(executable(CODE, 0x8000), "app.elf")
    regions = img.regions(0x10_0000, MemSpace.N)
    assert [(r.start, r.data, r.space) for r in regions] == [(0x10_0000, CODE, MemSpace.N)]
    assert img.load_offset(0x10_0000) == 0x10_0000 - 0x8000


def test_shared_object_base_is_its_load_bias() -> None:
    # Linked at 0: read-only data at 0, code at 0x1000; loaded with bias 0x7f00_0000.
    img = load_elf(executable(CODE, 0x1000, e_type=ET_DYN, rodata_before=0x1000), "lib.so")
    assert img.relocatable and img.link_base == 0
    assert [r.start for r in img.regions(0x7F00_0000)] == [0x7F00_1000]
    assert [r.start for r in img.regions()] == [0x1000]


def test_kernel_module_sections_are_laid_out_from_the_base() -> None:
    img = load_elf(relocatable([(".text", CODE, 4), (".init.text", NOP * 2, 16)]), "mod.ko")
    assert img.elf_type == "ET_REL"
    starts = [(r.start, len(r.data)) for r in img.regions(0xBF00_0000)]
    assert starts == [(0xBF00_0000, 16), (0xBF00_0010, 8)]


def test_a_kernel_module_is_laid_out_as_the_kernel_lays_it_out() -> None:
    # Two distinct symbols called from .text: two PLT veneers and the one the loader adds,
    # 12 bytes each, aligned to 64; the ftrace trampoline (one veneer) at 64; then .text.
    text = bytes(range(32))
    img = load_elf(kernel_module(text, calls=["printk", "printk", "other"]), "mod.ko")
    assert img.module is not None and img.module.veneers == 2
    assert img.module.core == (
        (".plt", 0, 36),
        (".text.ftrace_trampoline", 64, 12),
        (".text", 80, 32),
    )
    assert img.module.init == ((".init.text", 0, 4),)  # apart: freed after the module's init
    assert (img.module.anchor, img.module.anchor_offset) == (".text", 80)
    # The module's own addresses are .text's: .text at 0, the module's first byte before it.
    assert [(s.address, s.data) for s in img.segments] == [(0, text)]
    assert img.link_base == -80
    assert [(r.start, r.data) for r in img.regions(0xFFFF_8000_0100_0000)] == [
        (0xFFFF_8000_0100_0050, text)
    ]
    # A page-aligned .text (as with CFI) goes to the next page whatever the veneers.
    paged = load_elf(kernel_module(text, text_align=0x1000, calls=["a", "b"]), "mod.ko")
    assert paged.module is not None and paged.module.anchor_offset == 0x1000


def test_64_bit_image() -> None:
    img = load_elf(executable(NOP * 2, 0x40_0000, bits=64, build_id=bytes(range(16))), "a64")
    assert img.bits == 64 and img.machine == "EM_AARCH64"
    assert img.uuid == bytes(range(16)).hex()
    assert format_uuid(bytes(range(16))) == "00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_build_id_is_the_uuid() -> None:
    img = load_elf(executable(CODE, 0x8000, build_id=BUILD_ID), "app.elf")
    assert img.uuid == BUILD_ID.hex()
    assert uuid_matches(BUILD_ID.hex().upper(), img.uuid)
    assert uuid_matches(format_uuid(BUILD_ID), img.uuid)  # first 16 bytes, as a UUID
    assert not uuid_matches("00" * 20, img.uuid)
    assert not uuid_matches(BUILD_ID.hex(), None)
    assert normalize_uuid("{5F0C6A0E-91F7}") == "5f0c6a0e91f7"
    assert load_elf(executable(CODE, 0x8000), "x").uuid is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"MZ\x90\x00", "no \\\\x7fELF magic"),
        (b"\x7fELF\x01\x01\x01" + bytes(20), "malformed"),
    ],
)
def test_not_elf(data: bytes, message: str) -> None:
    with pytest.raises(SnapshotError, match=message) as err:
        load_elf(data, "bad.elf")
    assert str(err.value).startswith("bad.elf")


def test_truncated_file_is_an_error_not_a_crash() -> None:
    good = executable(CODE, 0x8000, build_id=BUILD_ID)
    for cut in (60, 100, len(good) - 40):
        with pytest.raises(SnapshotError):
            load_elf(good[:cut], "cut.elf")


def test_random_damage_never_escapes_as_another_exception() -> None:
    import random

    good = bytearray(executable(CODE, 0x8000, build_id=BUILD_ID))
    rng = random.Random(5)
    for _ in range(200):
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(4, len(data))] = rng.randrange(256)
        with contextlib.suppress(SnapshotError):
            load_elf(bytes(data), "fuzz.elf")


def test_random_damage_to_a_kernel_module_never_escapes_as_another_exception() -> None:
    import random

    good = bytearray(kernel_module(bytes(64), calls=["a", "b", "a"], build_id=BUILD_ID))
    rng = random.Random(28)
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(4, len(data))] = rng.randrange(256)
        with contextlib.suppress(SnapshotError):
            load_elf(bytes(data), "fuzz.ko")
