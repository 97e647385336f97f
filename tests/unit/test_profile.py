"""Profiles counted from hand-made element streams, and the text each format writes for them.

The streams are small enough that every count is known: which ranges ran,
which branches were taken to where, where trace gaps cut the links, and what
an exception changes (perf's view) or does not change (simpleperf's).
"""

from __future__ import annotations

import pytest

from cstrace.analyses.profile import (
    BranchSample,
    BranchSampler,
    PerfBranch,
    PerfBranches,
    Profile,
    ProfileCounter,
)
from cstrace.batch import iter_batches
from cstrace.elements import (
    Element,
    EoTrace,
    Exception_,
    ExceptionRet,
    InstrRange,
    InstrSubtype,
    InstrType,
    Isa,
    NoSync,
    PEContext,
    PEContextInfo,
    TraceOn,
)
from cstrace.memory.binaries import Binary, Mapping, StaticResolver
from cstrace.memory.elf import ElfImage, ElfSegment, LoadSegment
from cstrace.render.profiles import (
    ProfileError,
    autofdo_lines,
    bolt_lines,
    build_id_comment,
    perf_script_lines,
    profgen_lines,
)

BASE = 0x7000_0000  # where the binary is loaded; its link addresses start at 0x1000
LINK = 0x1000
DELTA = BASE - LINK


def b(offset: int) -> bytes:
    return (0x14000000 | ((offset >> 2) & 0x3FFFFFF)).to_bytes(4, "little")


def nop() -> bytes:
    return (0xD503201F).to_bytes(4, "little")


# Link addresses 0x1000..0x1040: a B to +0x20 sits at 0x1014 (target 0x1034).
CODE = nop() * 5 + b(0x20) + nop() * 10


def program() -> Binary:
    elf = ElfImage(
        "prog",
        "ET_DYN",
        "EM_AARCH64",
        64,
        0,
        bytes.fromhex("0c9a20bf9c009d0e4e8bbf9fad0300ae"),
        [ElfSegment(LINK, CODE, "segment1")],
        0,
        [
            LoadSegment(0, 0, 0x100, 0x100, False),
            LoadSegment(LINK, LINK, len(CODE), len(CODE), True),
        ],
    )
    return Binary("/data/local/tmp/prog", image=elf)


def resolver(binary: Binary | None = None) -> StaticResolver:
    binary = binary or program()
    return StaticResolver([Mapping(BASE, BASE + len(CODE), binary, DELTA)])


def rng(
    start: int,
    end: int,
    *,
    taken: bool = False,
    itype: InstrType = InstrType.BR,
    subtype: InstrSubtype = InstrSubtype.NONE,
) -> InstrRange:
    """A range of run-time addresses ``[start, end)`` (link address + DELTA)."""
    return InstrRange(
        0, start + DELTA, end + DELTA, (end - start) // 4, Isa.A64, taken, 4, itype, subtype
    )


def ctx(context_id: int) -> PEContext:
    return PEContext(0, PEContextInfo(context_id=context_id, ctxt_id_valid=True), Isa.A64)


def count(elements: list[Element], trace_id: int = 0x10) -> Profile:
    counter = ProfileCounter(resolver())
    counter.feed(trace_id, elements)
    return counter.profile()


# A loop at 0x1000..0x100c (B.cond back, taken twice, then not taken), a call through
# an indirect branch at 0x1010 to 0x1020, and a ret at 0x1028 back to 0x1014.
LOOP = [
    TraceOn(0),
    rng(0x1000, 0x1010, taken=True),  # b.cond at 0x100c -> 0x1000
    rng(0x1000, 0x1010, taken=True),
    rng(0x1000, 0x1010, taken=False),  # not taken: on to 0x1010
    rng(0x1010, 0x1014, taken=True, itype=InstrType.BR_INDIRECT, subtype=InstrSubtype.BR_LINK),
    rng(0x1020, 0x102C, taken=True, itype=InstrType.BR_INDIRECT, subtype=InstrSubtype.V8_RET),
    rng(0x1014, 0x1018, taken=True),  # the B at 0x1014 -> 0x1034
    rng(0x1034, 0x1038, taken=False, itype=InstrType.OTHER),
    EoTrace(0),
]


def test_simpleperf_view_counts_every_range_and_follows_direct_branches_only() -> None:
    prof = count(LOOP).binaries[program().key]
    assert prof.ranges == {
        (0x1000, 0x100C): 3,
        (0x1010, 0x1010): 1,
        (0x1020, 0x1028): 1,
        (0x1014, 0x1014): 1,
        (0x1034, 0x1034): 1,
    }
    # direct: to the next range's start; indirect: 0
    assert prof.branches == {
        (0x100C, 0x1000): 2,
        (0x1010, 0): 1,
        (0x1028, 0): 1,
        (0x1014, 0x1034): 1,
    }


def test_perf_view_links_taken_branches_and_runs_through_not_taken_ones() -> None:
    prof = count(LOOP).binaries[program().key]
    assert prof.taken == {
        (0x100C, 0x1000): 2,
        (0x1010, 0x1020): 1,
        (0x1028, 0x1014): 1,
        (0x1014, 0x1034): 1,
    }
    # the third pass runs on through the not-taken b.cond to the call at 0x1010
    assert prof.fallthroughs == {
        (0x1000, 0x100C): 2,
        (0x1000, 0x1010): 1,
        (0x1020, 0x1028): 1,
        (0x1014, 0x1014): 1,
        (0x1034, 0x1034): 1,
    }


def test_a_direct_branch_with_no_next_range_goes_to_its_encoded_target() -> None:
    prof = count([TraceOn(0), rng(0x1008, 0x1018, taken=True), NoSync(0)])
    binary = prof.binaries[program().key]
    # B at 0x1014 encodes +0x20: simpleperf reads the target from the instruction
    assert binary.branches == {(0x1014, 0x1034): 1}
    assert binary.taken == {}  # perf records no branch without a next range
    assert binary.fallthroughs == {(0x1008, 0x1014): 1}


def test_gaps_cut_the_links() -> None:
    for gap in (NoSync(0), TraceOn(0), EoTrace(0)):
        prof = count([rng(0x1000, 0x1010, taken=True), gap, rng(0x1000, 0x1010)])
        binary = prof.binaries[program().key]
        assert binary.taken == {}, gap
        # the direct branch's target comes from its encoding (a b.cond is not decodable
        # from nops: 0), not from the range after the gap
        assert binary.branches == {(0x100C, 0): 1}, gap
        assert binary.ranges == {(0x1000, 0x100C): 2}, gap


def test_an_exception_makes_perf_link_the_ranges_but_not_simpleperf() -> None:
    stream = [
        TraceOn(0),
        rng(0x1000, 0x1008),
        Exception_(0, 2, 0x1008 + DELTA),
        rng(0x1020, 0x1028),
    ]
    binary = count(stream).binaries[program().key]
    assert binary.taken == {(0x1004, 0x1020): 1}
    assert binary.branches == {}
    assert binary.fallthroughs == {(0x1000, 0x1004): 1, (0x1020, 0x1024): 1}


def test_ranges_outside_every_binary_are_counted_apart() -> None:
    far = InstrRange(0, 0x10, 0x18, 2, Isa.A64, True, 4, InstrType.BR)
    prof = count([TraceOn(0), far, rng(0x1000, 0x1008), far])
    assert prof.unmapped == 2
    binary = prof.binaries[program().key]
    assert binary.ranges == {(0x1000, 0x1004): 1}
    assert binary.taken == {}


def test_trace_ids_are_linked_apart_and_feeding_in_pieces_is_the_same() -> None:
    whole = ProfileCounter(resolver())
    whole.feed(0x10, LOOP)
    pieces = ProfileCounter(resolver())
    for i in range(0, len(LOOP), 2):
        pieces.feed(0x10, LOOP[i : i + 2])
        pieces.feed(0x12, [rng(0x1020, 0x102C)])  # another source in between
    a, c = whole.profile(), pieces.profile()
    pa, pc = a.binaries[program().key], c.binaries[program().key]
    assert pa.taken == pc.taken and pa.branches == pc.branches
    assert pc.ranges[(0x1020, 0x1028)] == pa.ranges[(0x1020, 0x1028)] + (len(LOOP) + 1) // 2


def test_batches_count_as_their_elements() -> None:
    counter = ProfileCounter(resolver())
    for batch in iter_batches(LOOP, 0x10, size=3):
        counter.feed_batch(batch)
    got, want = counter.profile().binaries[program().key], count(LOOP).binaries[program().key]
    assert (got.ranges, got.branches, got.fallthroughs, got.taken) == (
        want.ranges,
        want.branches,
        want.fallthroughs,
        want.taken,
    )


def test_context_ids_choose_per_process_mappings() -> None:
    binary = Binary("/bin/a")
    other = Binary("/bin/b")
    res = StaticResolver(
        [Mapping(BASE, BASE + 0x100, binary, DELTA)],
        [(7, Mapping(BASE, BASE + 0x100, other, BASE))],
    )
    counter = ProfileCounter(res)
    counter.feed(0x10, [TraceOn(0), rng(0x1000, 0x1008), ctx(7), rng(0x1000, 0x1008)])
    # after a decoder reset the context is unknown again until the trace gives it
    counter.feed(0x10, [NoSync(0), TraceOn(0), rng(0x1000, 0x1008)])
    prof = counter.profile()
    assert prof.binaries[binary.key].ranges == {(0x1000, 0x1004): 2}
    assert prof.binaries[other.key].ranges == {(0x1000 + DELTA - BASE, 0x1004 + DELTA - BASE): 1}


def test_profiles_of_several_inputs_sum_by_binary() -> None:
    total = Profile()
    total.add(count(LOOP))
    total.add(count(LOOP))
    binary = total.binaries[program().key]
    assert binary.ranges[(0x1000, 0x100C)] == 6
    assert binary.taken[(0x100C, 0x1000)] == 4


def test_mappings_from_file_offsets_use_the_program_headers() -> None:
    binary = program()
    m = Mapping.from_file_offset(0x5555_0000, 0x5555_1000, LINK, binary)
    assert m.binary_address(0x5555_0004) == LINK + 4
    assert binary.first_load_address == 0 and binary.text_base == LINK
    assert binary.offset_of_address(LINK + 8) == LINK + 8


# -- writers --------------------------------------------------------------------------


def test_autofdo_text_is_simpleperfs() -> None:
    lines = list(autofdo_lines(count(LOOP)))
    assert lines == [
        "5",
        "1000-100c:3",
        "1010-1010:1",
        "1014-1014:1",
        "1020-1028:1",
        "1034-1034:1",
        "0",
        "4",
        "100c->1000:2",
        "1010->0:1",
        "1014->1034:1",
        "1028->0:1",
        "// build_id: 0x0c9a20bf9c009d0e4e8bbf9fad0300ae00000000",
        "// /data/local/tmp/prog",
        "",
    ]


def test_autofdo_counts_from_the_first_load_segment_and_asks_to_split() -> None:
    moved = program()
    assert moved.image is not None
    moved.image.loads[0] = LoadSegment(0, 0x800, 0x100, 0x100, False)
    res = StaticResolver(
        [
            Mapping(BASE, BASE + len(CODE), moved, DELTA),
            Mapping(0x10, 0x20, Binary("/lib/other.so"), 0),
        ]
    )
    counter = ProfileCounter(res)
    far = InstrRange(0, 0x10, 0x18, 2, Isa.A64, False, 4, InstrType.OTHER)
    counter.feed(0x10, [*LOOP, far])
    lines = list(autofdo_lines(counter.profile()))
    assert lines[0].startswith("// Please split this file")
    assert "800-80c:3" in lines and "80c->800:2" in lines and "810->0:1" in lines
    assert lines[-3:] == ["// build_id: 0x" + "0" * 40, "// /lib/other.so", ""]


def test_build_ids_are_written_as_20_bytes() -> None:
    assert build_id_comment(Binary("x", "ab" * 20)) == "0x" + "ab" * 20
    assert build_id_comment(Binary("x", "12")) == "0x12" + "0" * 38


def test_profgen_text_counts_from_the_text_page_and_wants_one_binary() -> None:
    assert list(profgen_lines(count(LOOP))) == [
        "5",
        "0-c:2",
        "0-10:1",
        "14-14:1",
        "20-28:1",
        "34-34:1",
        "4",
        "c->0:2",
        "10->20:1",
        "14->34:1",
        "28->14:1",
    ]
    with pytest.raises(ProfileError, match="no traced instruction"):
        list(profgen_lines(Profile()))
    two = count(LOOP)
    two.add(count([TraceOn(0), rng(0x1000, 0x1008)]))
    two.binary(Binary("/lib/b.so")).ranges[(1, 2)] = 1
    with pytest.raises(ProfileError, match="--binary"):
        list(profgen_lines(two))
    assert next(profgen_lines(two.select("prog$"))) == "6"


def test_bolt_text_names_build_ids_only_when_several_binaries() -> None:
    lines = list(bolt_lines(count(LOOP)))
    assert "B 100c 1000 2 0" in lines and "F 1000 1010 1" in lines
    assert all(":" not in line for line in lines)
    two = count(LOOP)
    other = Binary("/lib/b.so", "beef")
    two.binary(other).ranges[(1, 2)] = 1
    two.binary(other).fallthroughs[(1, 2)] = 1
    two.external[(program().key, 0x1028, other.key, 0x10)] = 3
    lines = list(bolt_lines(two))
    bid = program().build_id
    assert f"B {bid}:100c {bid}:1000 2 0" in lines
    assert "F beef:1 beef:2 1" in lines
    assert f"B {bid}:1028 beef:10 3 0" in lines


def test_perf_script_lines_are_perfs() -> None:
    samples = [BranchSample(0x10, None, 0x400010, ((0x400008, 0x400000), (0x400004, 0x40000C)))]
    mapping = Mapping(BASE, BASE + len(CODE), program(), DELTA)
    lines = list(perf_script_lines(samples, [mapping]))
    assert lines[0] == (
        f" PERF_RECORD_MMAP2 0/0: [{BASE:#x}({len(CODE):#x}) @ 0x1000 00:00 0 0]: "
        "r-xp /data/local/tmp/prog"
    )
    # As perf 6.1 prints them: a space, the address in 16 columns, each branch "/"-ended.
    assert lines[1] == ("           400010 0x400008/0x400000/P/-/-/0/  0x400004/0x40000c/P/-/-/0/ ")


def test_branch_samples_are_taken_every_period_and_at_gaps() -> None:
    sampler = BranchSampler(period=5, depth=2)
    samples = list(sampler.samples(0x10, LOOP))
    # 4+4+4+1+3+1+1 = 18 instructions: samples after 5, 10 and 15, then one at the end
    assert [s.ip - DELTA for s in samples] == [0x1000, 0x1004, 0x1024, 0x1034]
    assert samples[0].branches == ((0x100C + DELTA, 0x1000 + DELTA),)
    assert len(samples[2].branches) == 2  # the newest two only
    assert samples[2].branches[0] == (0x1010 + DELTA, 0x1020 + DELTA)
    with pytest.raises(ValueError):
        BranchSampler(period=0)


def test_perf_branch_samples_as_perf_makes_them() -> None:
    """perf's cs_etm rules (tools/perf/util/cs-etm.c), on hand-made elements: trace start
    and end, the branch kinds, an SVC and its return, an interrupt; EO_TRACE is not a
    discontinuity (perf never flushes the decoder at the end of the data)."""
    svc, nop = (0xD4000001).to_bytes(4, "little"), (0xD503201F).to_bytes(4, "little")

    def read(address: int, size: int) -> bytes:
        return svc if address == 0x200C + DELTA else nop

    def at(x: int) -> int:
        return x + DELTA

    elements: list[Element] = [
        NoSync(0),
        TraceOn(0),
        rng(0x1000, 0x1010, taken=True),  # b
        rng(0x1020, 0x1028, taken=True, subtype=InstrSubtype.BR_LINK),  # bl
        rng(0x1100, 0x1104, taken=True, itype=InstrType.BR_INDIRECT, subtype=InstrSubtype.V8_RET),
        rng(0x2000, 0x2010, itype=InstrType.OTHER),  # ends in the svc at 0x200c
        Exception_(0, 2, at(0x2010)),  # call: the instruction before is an svc
        rng(0x3000, 0x3008, itype=InstrType.OTHER),
        ExceptionRet(0),  # eret back after the svc
        rng(0x2010, 0x2014, itype=InstrType.OTHER),
        Exception_(0, 14, at(0x2014)),  # IRQ
        rng(0x4000, 0x4004, itype=InstrType.BR),  # a conditional branch, not taken
        EoTrace(0),
    ]
    elements[11].last_cond = True  # type: ignore[attr-defined]
    got = [(b.name, b.ip, b.addr) for b in PerfBranches("etmv4").samples(elements, read)]
    assert got == [
        ("tr strt", 0, at(0x1000)),
        ("jmp", at(0x100C), at(0x1020)),
        ("call", at(0x1024), at(0x1100)),
        ("return", at(0x1100), at(0x2000)),
        ("syscall", at(0x200C), at(0x3000)),
        ("sysret", at(0x3004), at(0x2010)),
        ("hw int", at(0x2010), at(0x4000)),
    ]
    # A new buffer: its NO_SYNC ends the last one's trace, a jcc that was not taken.
    more = list(PerfBranches("etmv4").samples([*elements, NoSync(0)], read))
    assert (more[-1].name, more[-1].ip, more[-1].addr) == ("tr end jcc", at(0x4000), 0)
    # ETE: perf 6.1 gives its exceptions no kind; ETMv3 numbers its SVC 10.
    ete = [b.name for b in PerfBranches("ete").samples(elements, read)]
    assert ete[4] == "" and ete[6] == ""
    assert PerfBranch(0, 0, 0x1 | 0x2 | 0x200).name == "tr end call"
