"""The system event log (metadata requirements §5) and address spaces keyed by context ID."""

from __future__ import annotations

import pytest

from cstrace.elements import (
    MemSpace,
)
from cstrace.errors import SnapshotError
from cstrace.memory.elf import load_elf
from cstrace.memory.events import (
    AsidEvent,
    LibraryEvent,
    PatchEvent,
    ProcessEvent,
    State,
    ThreadEvent,
    TraceEvent,
    parse_event_log,
)
from cstrace.memory.image import MemoryMap, MemoryRegion
from cstrace.memory.spaces import AddressSpaces, StaticMapping, flatten_regions
from tests.integration.elfgen import executable

LOG = """\
# a system snapshot, then changes
0x0    declare_process(CURRENT, 0, 0xc0000000, "vmlinux")
0x10   declare_process(START, 100, 0x8000, "a.bin", "5f0c")
0x10   declare_thread(START, 101, 100)
0x20   declare_library(START, 100, 0x40000, "lib.bin")
0x30   declare_asid(START, 7, 100)
0x40   patch_code(100, 0x8004, 4, code=11223344)
0x50   define_trace(START, 0x12, ETM_0, TRCCONFIGR=0x1)
0x60   declare process (END, 100, 0x8000, "a.bin", "5f0c")   # spaces are allowed
"""


def test_every_event_parses() -> None:
    log = parse_event_log(LOG, "log.txt")
    kinds = [type(e) for e in log.events]
    assert kinds == [
        ProcessEvent,
        ProcessEvent,
        ThreadEvent,
        LibraryEvent,
        AsidEvent,
        PatchEvent,
        TraceEvent,
        ProcessEvent,
    ]
    p = log.events[1]
    assert isinstance(p, ProcessEvent)
    assert (p.state, p.pid, p.base, p.image, p.uuid, p.line) == (
        State.START,
        100,
        0x8000,
        "a.bin",
        "5f0c",
        3,
    )
    t = log.events[2]
    assert isinstance(t, ThreadEvent) and (t.tid, t.pid) == (101, 100)
    patch = log.events[5]
    assert isinstance(patch, PatchEvent) and patch.code == bytes.fromhex("11223344")
    tr = log.events[6]
    assert isinstance(tr, TraceEvent)
    assert (tr.trace_id, tr.source, tr.registers) == (0x12, "ETM_0", {"TRCCONFIGR": 1})
    assert log.uses_asids


def test_events_are_put_in_timestamp_order() -> None:
    log = parse_event_log(
        '20 declare_thread(START, 5, 4)\n10 declare_process(START, 4, 0, "x")\n'
        "20 declare_thread(END, 5, 4)\n",
        "log",
    )
    assert [(e.timestamp, e.line) for e in log.events] == [(10, 2), (20, 1), (20, 3)]


def test_keyword_arguments() -> None:
    log = parse_event_log(
        '5 declare_thread(CURRENT, pid=4, tid=9)\n6 patch_code(4, 0x100, 8, file="p.bin")\n'
        "7 patch_code(4, 0x200, 8, id=42)\n8 patch_code(4, 0x300, 8)\n",
        "log",
    )
    t = log.events[0]
    assert isinstance(t, ThreadEvent) and (t.tid, t.pid) == (9, 4)
    files = [(e.file, e.ident, e.code) for e in log.events[1:] if isinstance(e, PatchEvent)]
    assert files == [("p.bin", None, None), (None, "42", None), (None, None, None)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("declare_process(START, 1, 0)", "expected 'TIMESTAMP event"),
        ("5 declare_proces(START, 1, 0)", "unknown event"),
        ("5 declare_process(BEGIN, 1, 0)", "not START, END or CURRENT"),
        ("5 declare_process(START, 1)", "missing base"),
        ("5 declare_process(START, x, 0)", "pid: 'x' is not a number"),
        ('5 declare_process(START, 1, 0, "a", "b", "c")', "too many arguments"),
        ('5 declare_process(START, 1, 0, "unterminated)', "unterminated string"),
        ("5 declare_thread(START, tid=1, 2)", "positional argument after"),
        ("5 declare_thread(START, 1, 2, colour=3)", "unknown argument"),
        ("5 patch_code(1, 0x10, 3, code=1122)", "2 code bytes given for length 3"),
        ("5 patch_code(1, 0x10, 2, code=zz)", "not hex bytes"),
        ("5 define_trace(START, 0x90, ETM_0)", "out of range"),
        ("zz declare_thread(START, 1, 2)", "timestamp"),
    ],
)
def test_errors_name_file_and_line(line: str, message: str) -> None:
    with pytest.raises(SnapshotError, match=message) as err:
        parse_event_log(f"# header\n\n{line}\n", "events.log")
    assert str(err.value).startswith("events.log: line 3:")


def test_binary_log_is_refused() -> None:
    with pytest.raises(SnapshotError, match="NUL"):
        parse_event_log(b"0 declare\x00", "log")


# --- address spaces ------------------------------------------------------------------------

A_CODE = b"AAAA" * 4
B_CODE = b"BBBB" * 4
LIB = b"LLLL" * 2
KERNEL = b"KKKK"


def images(name: str | None, uuid: str | None, where: str, line: int) -> bytes | None:
    return {"a.bin": A_CODE, "b.bin": B_CODE, "lib.bin": LIB, "vmlinux": KERNEL}.get(name or "")


def spaces(
    log_text: str, mode: str | None = None, static: MemoryMap | None = None
) -> AddressSpaces:
    return AddressSpaces(static, parse_event_log(log_text, "log"), images, contextidr=mode)


TWO = """\
0 declare_process(CURRENT, 0, 0xc0000000, "vmlinux")
0 declare_process(CURRENT, 100, 0x8000, "a.bin")
0 declare_process(CURRENT, 200, 0x8000, "b.bin")
0 declare_thread(CURRENT, 201, 200)
0 declare_asid(CURRENT, 1, 100)
0 declare_asid(CURRENT, 2, 200)
"""


def test_pid_in_bits_8_to_31() -> None:
    sp = spaces(TWO, "pid")
    assert sp.read(0x8000, 4) == b""  # no context yet: only global mappings
    assert sp.read(0xC0000000, 4) == b"KKKK"
    sp.set_context((100 << 8) | 0x33)
    assert sp.pid == 100 and sp.read(0x8000, 4) == b"AAAA"
    assert sp.read(0xC0000000, 4) == b"KKKK"  # the kernel is in every address space
    sp.set_context(200 << 8)
    assert sp.read(0x8000, 4) == b"BBBB"
    sp.set_context(201 << 8)  # a thread of process 200
    assert sp.pid == 200 and sp.read(0x8000, 4) == b"BBBB"
    sp.set_context(300 << 8)
    assert sp.read(0x8000, 4) == b""


def test_asid_in_bits_0_to_7() -> None:
    sp = spaces(TWO)  # declare_asid events: the ASID convention is inferred
    assert sp.mode == "asid"
    sp.set_context(0xABCD01)
    assert sp.pid == 100 and sp.read(0x8000, 4) == b"AAAA"
    sp.set_context(2)
    assert sp.read(0x8000, 4) == b"BBBB"
    sp.set_context(3)
    assert sp.pid is None and sp.read(0x8000, 4) == b""


def test_whole_register_thread_id() -> None:
    sp = spaces(TWO, "tid")
    sp.set_context(201)
    assert sp.pid == 200 and sp.read(0x8000, 4) == b"BBBB"


def test_generation_changes_with_the_view_and_returns_with_it() -> None:
    sp = spaces(TWO, "pid")
    sp.set_context(100 << 8)
    ga = sp.generation
    sp.set_context(200 << 8)
    gb = sp.generation
    assert ga != gb
    sp.set_context(100 << 8)
    assert sp.generation == ga
    sp.set_context(100 << 8 | 5)  # same process, other ASID: same view
    assert sp.generation == ga


TIMED = """\
# the log starts mid-run: process 100's creation and thread 101's were lost
1000 declare_thread(END, 101, 100)
2000 declare_process(END, 100, 0x8000, "a.bin")
3000 declare_process(START, 100, 0x8000, "b.bin")
3500 patch_code(100, 0x8004, 4, code=50505050)
3600 declare_library(START, 100, 0x9000, "lib.bin")
4000 declare_library(END, 100, 0x9000, "lib.bin")
"""


def test_log_that_starts_mid_run_and_time_order() -> None:
    sp = spaces(TIMED, "pid")
    sp.set_context(101 << 8)
    sp.set_time(500)
    assert sp.pid == 100 and sp.read(0x8000, 4) == b"AAAA"  # reconstructed from END events
    sp.set_time(1500)
    assert sp.pid == 101 and sp.read(0x8000, 4) == b""  # the thread has ended
    sp.set_context(100 << 8)
    assert sp.read(0x8000, 4) == b"AAAA"
    sp.set_time(2500)
    assert sp.read(0x8000, 4) == b""  # process ended
    sp.set_time(3000)
    assert sp.read(0x8000, 8) == b"BBBBBBBB"  # a new process reuses the pid
    sp.set_time(3550)
    assert sp.read(0x8000, 16) == b"BBBB"  # a read stops at the patch
    assert sp.read(0x8004, 4) == b"PPPP"
    assert sp.read(0x8008, 4) == b"BBBB"
    sp.set_time(3700)
    assert sp.read(0x9000, 4) == b"LLLL"
    sp.set_time(4000)
    assert sp.read(0x9000, 4) == b""


def test_unknown_time_takes_each_entity_as_it_first_appears() -> None:
    sp = spaces(TIMED, "pid")
    sp.set_context(100 << 8)
    assert sp.read(0x8000, 4) == b"AAAA"
    sp.set_context(101 << 8)
    assert sp.pid == 100


def test_snapshot_at_the_end_covers_the_trace() -> None:
    sp = spaces('9000 declare_process(CURRENT, 100, 0x8000, "a.bin")\n', "pid")
    sp.set_context(100 << 8)
    sp.set_time(10)
    assert sp.read(0x8000, 4) == b"AAAA"


def test_static_memory_is_below_process_mappings() -> None:
    static = MemoryMap([MemoryRegion(0x8000, b"DDDDDDDD", MemSpace.ANY, "dump")])
    sp = spaces(TWO, "pid", static)
    assert sp.read(0x8000, 4) == b"DDDD"
    sp.set_context(100 << 8)
    assert sp.read(0x8000, 4) == b"AAAA"


def test_static_mappings_and_elf_images() -> None:
    elf = load_elf(
        executable(b"\x00\xf0\x20\xe3" * 2, 0x1000, e_type=3, rodata_before=0x1000), "lib.so"
    )

    def resolve(name: str | None, uuid: str | None, where: str, line: int) -> object:
        return elf if name == "lib.so" else None

    sp = AddressSpaces(
        None,
        None,
        resolve,  # type: ignore[arg-type]
        contextidr="pid",
        static_mappings=[StaticMapping(7, 0x40_0000, "lib.so")],
    )
    sp.set_context(7 << 8)
    assert sp.read(0x40_1000, 4) == b"\x00\xf0\x20\xe3"


def test_missing_images_are_warned_once_and_decoding_goes_on() -> None:
    sp = spaces('0 declare_process(CURRENT, 5, 0x8000, "gone.bin")\n', "pid")
    sp.set_context(5 << 8)
    sp.set_context(6 << 8)
    sp.set_context(5 << 8)
    assert sp.read(0x8000, 4) == b""
    assert len([w for w in sp.warnings if "gone.bin" in str(w)]) == 1


def test_advance_and_set_context_move_time_and_process() -> None:
    sp = spaces(TIMED, "pid")
    sp.advance(2500)
    sp.set_context(100 << 8)
    assert sp.pid == 100
    assert sp.read(0x8000, 4) == b""
    cur = sp.cursor()  # a new reader starts at the beginning again
    cur.set_context(100 << 8)
    assert cur.read(0x8000, 4) == b"AAAA"


def test_flatten_keeps_the_first_region_where_they_overlap() -> None:
    regions = [
        MemoryRegion(0x10, b"pp", MemSpace.ANY, "patch"),
        MemoryRegion(0x00, b"x" * 0x20, MemSpace.ANY, "image"),
        MemoryRegion(0x18, b"y" * 0x10, MemSpace.S, "secure"),
    ]
    out = [(r.start, r.data) for r in flatten_regions(regions)]
    assert out == [(0x10, b"pp"), (0x00, b"x" * 0x10), (0x12, b"x" * 0x0E), (0x20, b"y" * 8)]


def test_bad_mode() -> None:
    with pytest.raises(SnapshotError, match="contextidr"):
        AddressSpaces(contextidr="bogus")
