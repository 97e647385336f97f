"""ETE with a deep speculation window: every speculative element is decoded once committed.

A trace unit with TRCIDR8.MAXSPEC = 78 may hold up to 78 P0 elements
uncommitted; with TRCIDR0.COMMOPT == 0 it commits them with Commit packets and
with the commit field of cycle-count packets. Format 2 cycle counts have two
commit forms, chosen by bit 0 of the header: 1-16 elements, or MAXSPEC - 15
to MAXSPEC elements. Reading that bit from the payload (the low bit of the
cycle count) turned an odd cycle count into a commit of 63 or more elements,
and decoding stopped with "Not enough elements to commit".

The trace is built with the project's encoder from a known list of atoms, so
the decoded ranges are known by construction; the same atoms committed one by
one give the same ranges.
"""

from __future__ import annotations

import random

from cstrace.capture import Stream
from cstrace.elements import Diagnostic, Element, InstrRange, MemSpace
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols import DecodeContext, DecodeOptions, get_protocol
from cstrace.protocols.etmv4 import encoder as enc

MAXSPEC = 78

# ETE 1.3: TRCIDR0 with cycle counting, no COMMOPT (bit 29 clear); cycle counting on.
REGS = {
    "TRCCONFIGR": 0x11,
    "TRCTRACEIDR": 0x10,
    "TRCDEVARCH": 0x47735A13,
    "TRCIDR0": 0x0801CEA1,
    "TRCIDR1": 0x4100FFF0,
    "TRCIDR2": 0x00000488,
    "TRCIDR8": MAXSPEC,
}

# A64 at 0x1000: nop; b.eq 0x1000; b 0x1000
NOP, BEQ_BACK, B_BACK = 0xD503201F, 0x54FFFFE0, 0x17FFFFFE
CODE = b"".join(w.to_bytes(4, "little") for w in (NOP, BEQ_BACK, B_BACK))
BASE = 0x1000


def program_atoms(rng: random.Random, n: int) -> str:
    """``n`` atoms the program can give: after an N at the b.eq comes the b (E)."""
    atoms = ""
    while len(atoms) < n:
        atoms += "E" if rng.random() < 0.7 else "NE"
    return atoms[:n] if atoms[n - 1 : n + 1] != "NE" else atoms[: n - 1] + "E"


def expected_ranges(atoms: str) -> list[tuple[int, int, int, bool]]:
    """The ranges the atoms give, walked by hand."""
    out = []
    at_b = False
    for a in atoms:
        if at_b:
            out.append((0x1008, 0x100C, 1, True))
            at_b = False
        else:
            out.append((0x1000, 0x1008, 2, a == "E"))
            at_b = a == "N"
    return out


def commits(rng: random.Random, total: int) -> list[bytes]:
    """Packets that commit ``total`` elements, in every form COMMOPT 0 has.

    Large amounts go first to format 2's large form (MAXSPEC - 15 to MAXSPEC)
    and the Commit packet; the rest to format 1, the small form of format 2 (odd
    cycle counts: bit 0 of its payload set) and format 3.
    """
    out: list[bytes] = []
    left = total
    while left:
        if left >= MAXSPEC - 15:
            n = rng.randint(MAXSPEC - 15, min(left, MAXSPEC))
            out.append(enc.cycle_count_f2(rng.randrange(16), n, max_spec=MAXSPEC))
        elif left > 16:
            n = rng.randint(17, left)
            out.append(enc.commit(n) if rng.random() < 0.5 else enc.cycle_count_f1(9, n))
        else:
            n = rng.randint(1, left)
            if n <= 4 and rng.random() < 0.5:
                out.append(enc.cycle_count_f3(rng.randrange(4), n))
            else:
                out.append(enc.cycle_count_f2(2 * rng.randrange(8) + 1, n))  # odd count
        left -= n
    return out


def start() -> bytes:
    return (
        enc.a_sync()
        + enc.trace_info(0, cc_threshold=0)
        + enc.trace_on()
        + enc.address_context(BASE, el=1, sf=True, ns=True)
    )


def speculative_trace(atoms: str, rng: random.Random) -> bytes:
    """Atoms sent in runs that leave up to MAXSPEC elements uncommitted, then committed."""
    data = start()
    i = 0
    while i < len(atoms):
        run = atoms[i : i + rng.randint(MAXSPEC - 15, MAXSPEC)]
        i += len(run)
        for a in run:
            data += enc.atom(a)
        # commit all but a few, which the next run's commits take along
        keep = 0 if i >= len(atoms) else rng.randint(0, 3)
        data += b"".join(commits(rng, len(run) - keep))
        if keep:
            data += enc.commit(keep)
    return data


def prompt_trace(atoms: str) -> bytes:
    """The same atoms, each committed at once."""
    return start() + b"".join(enc.atom(a) + enc.commit(1) for a in atoms)


def decode(data: bytes) -> tuple[list[Element], list[Diagnostic]]:
    proto = get_protocol("ete")
    assert proto is not None
    config = proto.from_registers(REGS, "Cortex-A710", "")
    assert config.max_spec_depth == MAXSPEC and not config.commit_opt1
    memory = MemoryMap([MemoryRegion(BASE, CODE, MemSpace.ANY, "code")])
    ctx = DecodeContext(config.trace_id, DecodeOptions(), memory)
    packets = proto.iter_packets(Stream(config.trace_id, data), config, True)
    out = list(proto.iter_elements(packets, config, ctx))
    return [e for e in out if not isinstance(e, Diagnostic)], [
        e for e in out if isinstance(e, Diagnostic)
    ]


def ranges(elems: list[Element]) -> list[tuple[int, int, int, bool]]:
    return [(e.start, e.end, e.num_instr, e.last_exec) for e in elems if isinstance(e, InstrRange)]


def test_deep_speculation_commits_every_element() -> None:
    rng = random.Random(78)
    atoms = program_atoms(rng, 2000)
    elems, diags = decode(speculative_trace(atoms, rng))
    assert diags == []  # no "Not enough elements to commit"
    assert ranges(elems) == expected_ranges(atoms)
    prompt, prompt_diags = decode(prompt_trace(atoms))
    assert prompt_diags == []
    assert ranges(prompt) == ranges(elems)


def test_large_and_small_format_2_commits() -> None:
    # 70 elements outstanding, committed by one large format 2 (66), then one
    # small format 2 with an odd cycle count (4): the old reading took the
    # large form for the second packet and ran out of elements.
    atoms = "E" * 70
    data = start() + b"".join(enc.atom(a) for a in atoms)
    data += enc.cycle_count_f2(3, 66, max_spec=MAXSPEC) + enc.cycle_count_f2(5, 4)
    elems, diags = decode(data)
    assert diags == []
    assert ranges(elems) == expected_ranges(atoms)


def test_nothing_committed_beyond_maxspec() -> None:
    # MAXSPEC elements stay speculative; one more commits the oldest at once.
    data = start() + enc.atom("E") * MAXSPEC
    elems, _ = decode(data)
    assert ranges(elems) == []  # dropped uncommitted at the end of the trace
    elems, _ = decode(data + enc.atom("N"))
    assert ranges(elems) == [(0x1000, 0x1008, 2, True)]
