"""Profile text for compilers and optimisers: AutoFDO, llvm-profgen, BOLT, perf script.

Input: a :class:`~cstrace.analyses.profile.Profile` (counts per binary, in the
binaries' link-time addresses) or :class:`~cstrace.analyses.profile.BranchSample`
records; output: lines of text (without newlines) in each consumer's format:

- :func:`autofdo_lines`: the text that ``simpleperf inject --output autofdo``
  writes and ``create_llvm_prof --profiler text`` reads. Per binary: the
  number of ranges, then ``first-last:count`` lines; the number of address
  counts (none: trace gives ranges), then ``address:count`` lines; the number
  of branches, then ``from->to:count`` lines; then two comment lines with the
  build ID (``0x`` and 20 bytes, zero-padded) and the path, and an empty line.
  Addresses are hexadecimal, counted from the binary's first ``PT_LOAD``
  address (AutoFDO maps ``address = offset + first load address``); a branch
  target before it is written as ``0``.
- :func:`profgen_lines`: llvm-profgen's unsymbolized profile (its
  ``--skip-symbolization`` output, read back with ``--unsymbolized-profile``):
  the number of ranges and ``start-end:count`` lines (fall-through runs, from
  a branch target to the next taken branch), then the number of branches and
  ``from->to:count`` lines. Addresses are hexadecimal offsets from the page
  of the binary's first executable segment (llvm-profgen's ``--use-offset``).
  One binary only: the format has no way to name it.
- :func:`bolt_lines`: perf2bolt's pre-aggregated input (``perf2bolt -pa``):
  ``B from to count mispredictions`` for taken branches and ``F start end
  count`` for fall-through runs, in link-time addresses. With several
  binaries, each address is ``buildid:address`` (the binary's build ID; ``X``
  for one without), and branches between binaries are written too.
- :func:`perf_script_lines`: what ``perf script -F ip,brstack`` prints for
  the samples ``perf inject --itrace=il`` makes, character for character as
  Linux perf 6.1 prints them (the instruction address right-aligned in 16
  columns after a space, then each branch of the stack, newest first, as
  `` 0xFROM/0xTO/P/-/-/0/ ``: predicted, not in a transaction, not aborted, no
  cycle count, no branch type), preceded by one ``PERF_RECORD_MMAP2`` line per
  mapping of a binary's code (the page it starts in, with its page-aligned file
  offset), which readers such as llvm-profgen match to a binary's executable
  segment to place the run-time addresses.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from cstrace.analyses.profile import BinaryProfile, BranchSample, Profile
from cstrace.errors import CstraceError
from cstrace.memory.binaries import Binary, Mapping

__all__ = [
    "ProfileError",
    "autofdo_lines",
    "bolt_lines",
    "build_id_comment",
    "perf_script_lines",
    "profgen_lines",
]

_BUILD_ID_BYTES = 20
_PAGE = 0x1000


class ProfileError(CstraceError):
    """A profile that cannot be written in the format asked for (several binaries, none)."""


def build_id_comment(binary: Binary) -> str:
    """The build ID as simpleperf writes it: ``0x`` and 20 bytes, zero-padded (all zero if none)."""
    digits = (binary.build_id or "")[: 2 * _BUILD_ID_BYTES]
    return "0x" + digits.ljust(2 * _BUILD_ID_BYTES, "0")


def _one(profile: Profile, fmt: str) -> BinaryProfile:
    profs = profile.sorted_binaries()
    if not profs:
        raise ProfileError(f"{fmt}: no traced instruction fell in a known binary")
    if len(profs) > 1:
        names = ", ".join(p.binary.path for p in profs)
        raise ProfileError(
            f"{fmt}: the profile covers {len(profs)} binaries ({names}); "
            "choose one with --binary REGEX"
        )
    return profs[0]


def autofdo_lines(profile: Profile) -> Iterator[str]:
    """The AutoFDO text of every binary of ``profile`` (see the module doc)."""
    profs = profile.sorted_binaries()
    if len(profs) > 1:
        yield "// Please split this file. AutoFDO only accepts profile for one binary."
    for prof in profs:
        base = prof.binary.first_load_address
        ranges = sorted(
            (s - base, e - base, c) for (s, e), c in prof.ranges.items() if s >= base and e >= base
        )
        yield str(len(ranges))
        yield from (f"{s:x}-{e:x}:{c}" for s, e, c in ranges)
        yield "0"
        branches = sorted(
            (f - base, t - base if t >= base else 0, c)
            for (f, t), c in prof.branches.items()
            if f >= base
        )
        yield str(len(branches))
        yield from (f"{f:x}->{t:x}:{c}" for f, t, c in branches)
        yield f"// build_id: {build_id_comment(prof.binary)}"
        yield f"// {prof.binary.path}"
        yield ""


def profgen_lines(profile: Profile) -> Iterator[str]:
    """llvm-profgen's unsymbolized profile of the one binary of ``profile`` (see the module doc).

    Raises :class:`ProfileError` when the profile covers no binary or several.
    """
    prof = _one(profile, "profgen")
    base = prof.binary.text_base
    ranges = sorted(
        (s - base, e - base, c) for (s, e), c in prof.fallthroughs.items() if s >= base and e >= s
    )
    yield str(len(ranges))
    yield from (f"{s:x}-{e:x}:{c}" for s, e, c in ranges)
    branches = sorted(
        (f - base, t - base, c) for (f, t), c in prof.taken.items() if f >= base and t >= base
    )
    yield str(len(branches))
    yield from (f"{f:x}->{t:x}:{c}" for f, t, c in branches)


def bolt_lines(profile: Profile) -> Iterator[str]:
    """perf2bolt's pre-aggregated profile of ``profile`` (see the module doc).

    Raises :class:`ProfileError` when no traced instruction fell in a binary.
    """
    profs = profile.sorted_binaries()
    if not profs:
        raise ProfileError("bolt: no traced instruction fell in a known binary")
    several = len(profs) > 1
    ids = {p.binary.key: (p.binary.build_id or "X") for p in profile.binaries.values()}

    def loc(key: tuple[str, str | None], address: int) -> str:
        return f"{ids.get(key, 'X')}:{address:x}" if several else f"{address:x}"

    for prof in profs:
        key = prof.binary.key
        for (f, t), c in sorted(prof.taken.items()):
            yield f"B {loc(key, f)} {loc(key, t)} {c} 0"
        for (s, e), c in sorted(prof.fallthroughs.items()):
            yield f"F {loc(key, s)} {loc(key, e)} {c}"
    if several:
        keep = {p.binary.key for p in profs}
        for (fk, f, tk, t), c in sorted(profile.external.items(), key=lambda kv: str(kv[0])):
            if fk in keep or tk in keep:
                yield f"B {loc(fk, f)} {loc(tk, t)} {c} 0"


def perf_script_lines(
    samples: Iterable[BranchSample], mappings: Sequence[Mapping] = ()
) -> Iterator[str]:
    """``perf script -F ip,brstack`` text of ``samples``, after MMAP2 lines for ``mappings``."""
    for m in mappings:
        # Whole pages, as the kernel maps them: readers match the offset to a segment's.
        offset = m.binary.offset_of_address(m.binary_address(m.start))
        start = m.start - offset % _PAGE
        page_offset = offset - offset % _PAGE
        yield (
            f" PERF_RECORD_MMAP2 0/0: [{start:#x}({m.end - start:#x}) @ {page_offset:#x} "
            f"00:00 0 0]: r-xp {m.binary.path}"
        )
    for sample in samples:
        stack = "".join(f" {f:#x}/{t:#x}/P/-/-/0/ " for f, t in sample.branches)
        yield f" {sample.ip:16x}{stack}"
