"""Corpus self-check of the instruction classifier (skipped without the corpus).

For the INSTR_RANGE elements of the reference listings, the last instruction of
each range is read from the snapshot's memory dumps and classified; its size,
type, sub-type and conditional flag must be what the reference printed.
"""

from __future__ import annotations

import lzma
import re
from collections.abc import Iterator

import pytest

from cstrace.elements import InstrSubtype, InstrType, Isa
from cstrace.inputs.devices import to_trace
from cstrace.inputs.files import DirTree
from cstrace.inputs.snapshot import load_snapshot
from cstrace.isa import IsaOptions, arch_profile, decode_at
from cstrace.memory import MemoryMap
from cstrace.memory.build import CodeMemories
from tests.conftest import corpus_dir

CORPUS = corpus_dir()

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(CORPUS is None, reason="reference corpus not found"),
]

_RANGE = re.compile(
    r"INSTR_RANGE\(exec range=0x([0-9a-f]+):\[0x([0-9a-f]+)\] num_i\((\d+)\) "
    r"last_sz\((\d)\) \(ISA=(\w+)\) ([EN]) (.*)\)$"
)
_TYPES = {
    "---": InstrType.OTHER,
    "BR": InstrType.BR,
    "iBR": InstrType.BR_INDIRECT,
    "ISB": InstrType.ISB,
    "DSB.DMB": InstrType.DSB_DMB,
    "WFI.WFE": InstrType.WFI_WFE,
    "TSTART": InstrType.TSTART,
}
_SUBTYPES = {
    "b+link": InstrSubtype.BR_LINK,
    "A64:ret": InstrSubtype.V8_RET,
    "A64:eret": InstrSubtype.V8_ERET,
    "V7:impl ret": InstrSubtype.V7_IMPLIED_RET,
}
_ISAS = {"A64": Isa.A64, "A32": Isa.A32, "T32": Isa.T32}

# Listings whose ranges are checked: ETMv4, ETE, PTM and ETMv3 captures with code images.
LISTINGS = [
    "001-ack_test",
    "Snowball",
    "TC2",
    "a57_single_step",
    "armv8_1m_branches",
    "bugfix-exact-match",
    "ete-bc-instr",
    "ete-ite-instr",
    "ete-wfet",
    "ete_ip",
    "ete_mem",
    "ete_spec_1",
    "ete_spec_2",
    "feat_cmpbr",
    "infrastructure",
    "juno_r1_1",
    "maxspec0_commopt1",
    "pauth_lr",
    "q_elem",
    "s_9001",
    "src_addr",
    "ss_ib_el1ns",
    "tme_simple",
    "tme_test",
    "trace_cov_a15",
    "trace_file_vmid",
    "ts_bit64_set",
    "ts_marker",
]


def parse_range(text: str) -> tuple[int, int, int, Isa, InstrType, InstrSubtype, bool] | None:
    """``(start, end, last_size, isa, type, subtype, cond)`` of an INSTR_RANGE line."""
    m = _RANGE.search(text)
    if m is None:
        return None
    rest = re.sub(r"\s*\[CC=\d+\];\s*", " ", m.group(7)).strip()
    cond = "<cond>" in rest
    rest = rest.replace("<cond>", "").strip()
    itype = None
    for name, t in sorted(_TYPES.items(), key=lambda kv: -len(kv[0])):
        if rest.startswith(name):
            itype = t
            rest = rest[len(name) :].strip()
            break
    assert itype is not None, text
    subtype = _SUBTYPES[rest] if rest else InstrSubtype.NONE
    return (
        int(m.group(1), 16),
        int(m.group(2), 16),
        int(m.group(4)),
        _ISAS[m.group(5)],
        itype,
        subtype,
        cond,
    )


def expected_ranges(
    name: str, limit: int = 3000
) -> Iterator[tuple[int, int, int, Isa, InstrType, InstrSubtype, bool]]:
    """Distinct (last instruction, printed classification) pairs of a listing."""
    assert CORPUS is not None
    seen: set[tuple[int, int, InstrType, InstrSubtype, bool]] = set()
    with lzma.open(CORPUS / "expected" / f"{name}.ppl.xz", "rt") as f:
        for line in f:
            if "INSTR_RANGE" not in line:
                continue
            r = parse_range(line.rstrip("\n"))
            if r is None:
                continue
            key = (r[1] - r[2], r[3], r[4], r[5], r[6])
            if key in seen:
                continue
            seen.add(key)
            yield r
            if len(seen) >= limit:
                return


def snapshot_setup(name: str) -> tuple[list[MemoryMap], IsaOptions, bool]:
    """The code images of every core of a snapshot, the options, and whether WFx are branches."""
    assert CORPUS is not None
    snap = load_snapshot(DirTree(CORPUS / "snapshots" / name))
    memories = CodeMemories(to_trace(snap))
    cores = [d for d in snap.devices.values() if d.device_class == "core"]
    maps = [memories.static_map(c.name) for c in cores]
    arch, profile = arch_profile(cores[0].device_type) if cores else arch_profile("")
    protocols = {d.protocol for d in snap.devices.values() if d.device_class == "trace_source"}
    if "ETE" in protocols:
        arch, profile = max(arch, type(arch).AA64), profile
    wfx = bool(protocols & {"ETM4", "ETE"})
    return maps, IsaOptions(arch, profile, wfi_wfe_branch=wfx), wfx


def check_listing(name: str) -> tuple[int, list[str]]:
    """Classify the last instruction of the ranges of listing ``name``; the mismatches."""
    maps, opts, _ = snapshot_setup(name)
    checked = 0
    bad: list[str] = []
    for start, end, size, isa, itype, subtype, cond in expected_ranges(name):
        addr = end - size
        info = None
        for mm in maps:
            region = mm.find(addr)
            if region is not None:
                info = decode_at(isa, region.data, region.start, addr, opts)
                if info is not None:
                    break
        if info is None:
            continue  # not in the dumps (or the last 2 bytes of a region)
        checked += 1
        got = (info.size, info.itype, info.subtype, info.is_cond)
        want = (size, itype, subtype, cond)
        if got != want:
            bad.append(f"{name}: 0x{addr:x} range 0x{start:x}: want {want} got {info}")
    return checked, bad


@pytest.mark.parametrize("name", LISTINGS)
def test_last_instruction_of_ranges(name: str) -> None:
    assert CORPUS is not None
    if not (CORPUS / "expected" / f"{name}.ppl.xz").exists():
        pytest.skip(f"{name} not in the corpus")
    checked, bad = check_listing(name)
    assert not bad, "\n".join(bad[:20])
    assert checked > 0
