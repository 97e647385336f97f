"""Which image holds an address: the event log's extents, file offsets, threads, missing images.

Also the pieces the locator stands on: ``size=`` in the event log (read and
written back), the ``vmid`` convention of the address spaces, the clock that
turns trace timestamps into log time, and ELF file offsets.
"""

from __future__ import annotations

import io

import pytest
from elftools.elf.elffile import ELFFile

from cstrace.errors import InputError
from cstrace.memory.clock import CounterClock
from cstrace.memory.elf import ElfImage, load_elf
from cstrace.memory.events import (
    LibraryEvent,
    ProcessEvent,
    State,
    ThreadEvent,
    format_event_log,
    parse_event_log,
)
from cstrace.memory.locate import ImageLocator
from cstrace.memory.spaces import AddressSpaces
from tests.integration.elfgen import ET_DYN, executable

BUILD_ID = bytes.fromhex("0c9a20bf9c009d0e4e8bbf9fad0300ae")
CODE = bytes.fromhex("1f2003d5") * 8  # NOPs
APP = executable(CODE, 0x1000, e_type=ET_DYN, build_id=BUILD_ID, rodata_before=0x1000, bits=64)

LOG = f"""\
0x0    declare_process(START, 100, 0x5500000000, "/data/app", "{BUILD_ID.hex()}", size=0x2000)
0x0    declare_thread(START, 101, 100)
0x10   declare_library(START, 100, 0x7000000000, "/system/lib64/libc.so", "aa55", size=0x10000)
0x20   declare_library(START, 0, 0xffffffc010000000, "[kernel.kallsyms]", size=0x1000)
0x90   declare_library(END, 100, 0x7000000000, "/system/lib64/libc.so", "aa55", size=0x10000)
"""


def _text_offset(data: bytes) -> int:
    elf = ELFFile(io.BytesIO(data))
    sec = elf.get_section_by_name(".text")
    assert sec is not None
    return int(sec["sh_offset"])


def _resolver(name: str | None, uuid: str | None, where: str, line: int) -> ElfImage | None:
    return load_elf(APP, "app.elf") if name == "/data/app" else None


def test_size_is_read_and_written_back() -> None:
    log = parse_event_log(LOG, "log")
    p = log.events[0]
    assert isinstance(p, ProcessEvent) and p.size == 0x2000
    again = parse_event_log(format_event_log(log.events, "again"), "again")
    assert [(type(e), e.timestamp) for e in again.events] == [
        (type(e), e.timestamp) for e in log.events
    ]
    lib = again.events[2]
    assert isinstance(lib, LibraryEvent)
    assert (lib.pid, lib.base, lib.image, lib.uuid, lib.size) == (
        100,
        0x7000000000,
        "/system/lib64/libc.so",
        "aa55",
        0x10000,
    )


def test_a_size_must_be_positive() -> None:
    with pytest.raises(InputError, match="size"):
        parse_event_log('0 declare_library(START, 1, 0x1000, "x", size=0)', "log")


def test_elf_file_offsets() -> None:
    elf = load_elf(APP, "app.elf")
    assert elf.file_offset(0x1000) == _text_offset(APP)
    assert elf.link_address(_text_offset(APP) + 4) == 0x1004
    assert elf.file_offset(0x9000000) is None


def test_an_address_in_a_found_image() -> None:
    loc = ImageLocator(parse_event_log(LOG, "log"), _resolver, mode="tid")
    got = loc.locate(100, 0x5500001008, time=0x30)
    assert got is not None
    assert (got.image, got.build_id, got.address, got.base, got.file) == (
        "/data/app",
        "0c9a20bf9c009d0e4e8bbf9fad0300ae",
        0x1008,
        0x5500000000,
        "app.elf",
    )
    assert got.offset == _text_offset(APP) + 8


def test_an_address_in_a_missing_image_has_an_offset_from_its_base() -> None:
    loc = ImageLocator(parse_event_log(LOG, "log"), _resolver, mode="tid")
    got = loc.locate(100, 0x7000001234, time=0x30)
    assert got is not None
    assert (got.image, got.offset, got.address, got.file) == (
        "/system/lib64/libc.so",
        0x1234,
        None,
        None,
    )
    # Gone after its END; the kernel is in every process; nothing outside the images.
    assert loc.locate(100, 0x7000001234, time=0x100) is None
    kernel = loc.locate(100, 0xFFFFFFC010000010, time=0x30)
    assert kernel is not None and kernel.image == "[kernel.kallsyms]"
    assert loc.locate(100, 0x1234, time=0x30) is None
    assert loc.locate(999, 0x5500001008, time=0x30) is None


def test_missing_images_are_counted() -> None:
    loc = ImageLocator(parse_event_log(LOG, "log"), _resolver, mode="tid")
    assert loc.count_missing(100, 0x7000000010, 0x30)
    assert loc.count_missing(100, 0x7000000020, 0x30)
    assert not loc.count_missing(100, 0x5500001000, 0x30)  # found: not missing
    assert not loc.count_missing(100, 0x10, 0x30)  # in no image
    [m] = loc.missing_images()
    assert (m.image, m.build_id, m.addresses) == ("/system/lib64/libc.so", "aa55", 2)


@pytest.mark.parametrize(
    ("mode", "cid", "vmid", "expected"),
    [
        ("tid", 101, None, (100, 101)),
        ("tid", 100, None, (100, 100)),
        ("pid", 101 << 8 | 0x12, None, (100, 101)),
        ("vmid", None, 101, (100, 101)),
        ("vmid", 101, None, (None, None)),
        ("tid", None, None, (None, None)),
    ],
)
def test_threads_by_convention(
    mode: str, cid: int | None, vmid: int | None, expected: tuple[int | None, int | None]
) -> None:
    loc = ImageLocator(parse_event_log(LOG, "log"), _resolver, mode=mode)
    assert loc.thread_of(cid, vmid, 0x30) == expected


def test_vmid_names_the_process_in_address_spaces() -> None:
    log = parse_event_log(LOG, "log")
    spaces = AddressSpaces(None, log, _resolver, contextidr="vmid")
    spaces.set_time(0x30)
    spaces.set_context(None, 101)
    assert spaces.pid == 100
    assert spaces.read(0x5500001000, 4) == CODE[:4]
    spaces.set_context(0x1234, 101)  # the context ID does not matter in this mode
    assert spaces.pid == 100


def test_a_clock_converts_timestamps_before_the_log_is_consulted() -> None:
    clock = CounterClock(shift=1, mult=3, zero=0x10)
    assert clock.to_log_time(0) == 0x10
    assert clock.to_log_time(4) == 0x10 + 6
    assert clock.to_log_time(5) == 0x10 + 7  # the remainder is scaled too
    short = CounterClock(shift=0, mult=1, zero=0, cycles=0x100, mask=0xFF, short=True)
    assert short.to_log_time(0x05) == 0x105
    log = parse_event_log(LOG, "log")
    spaces = AddressSpaces(None, log, _resolver, contextidr="tid", clock=lambda t: t * 0x100)
    spaces.set_context(100)
    spaces.advance(1)  # log time 0x100: libc has ended, the app is there
    assert spaces.read(0x5500001000, 4) == CODE[:4]


def test_threads_end() -> None:
    text = format_event_log(
        [
            ProcessEvent(0, 0, State.START, 5, 0x1000, "x", None, 0x10),
            ThreadEvent(1, 0, State.START, 6, 5),
            ThreadEvent(9, 0, State.END, 6, 5),
        ]
    )
    loc = ImageLocator(parse_event_log(text, "log"), _resolver, mode="tid")
    assert loc.process_of(6, 5) == 5
    assert loc.process_of(6, 10) == 6
