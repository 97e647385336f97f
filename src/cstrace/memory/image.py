"""Memory regions keyed by address and memory space.

Input: :class:`MemoryRegion` records (bytes at an address in a memory space,
from memory dumps and program images; :mod:`cstrace.memory.build` makes them
from a trace). Output: a :class:`MemoryMap` answering "which bytes are at this
address in this memory space" for the program-flow decoders.

The rules follow the OpenCSD memory-accessor mapper that produced the corpus
listings:

- a region answers for an address inside it when its memory space and the space
  asked for share a bit (``EL1N`` matches ``N`` and ``ANY``, not ``EL2``);
- a region that overlaps an earlier one in an overlapping space is rejected
  (the earlier one wins), so lookups are "first added that matches";
- a read never crosses from one region into the next: asking for 4 bytes two
  bytes before a region's end gives 2 bytes, even if another region follows.
  The decoders rely on this, since the reference fetches 4 bytes per
  instruction and treats a short read as inaccessible memory;
- the ``space`` key is matched exactly against the names the reference knows
  (``EL1N``, ``EL2``, ``S``, ``N``, ``ANY``...); anything else means ANY.
"""

from __future__ import annotations

from dataclasses import dataclass

from cstrace.elements import MemSpace

__all__ = ["MemoryMap", "MemoryRegion", "mem_space_from_name", "mem_space_to_name"]

# Names of the ``space`` key of a snapshot dump (DS-5 snapshot specification,
# "memory space" names, plus the older H/P/NP/SP forms), exact and case-sensitive.
_SPACE_NAMES: dict[str, MemSpace] = {
    "EL1S": MemSpace.EL1S,
    "EL1N": MemSpace.EL1N,
    "EL1R": MemSpace.EL1R,
    "EL2S": MemSpace.EL2S,
    "EL2": MemSpace.EL2,
    "EL2N": MemSpace.EL2,
    "EL2R": MemSpace.EL2R,
    "EL3": MemSpace.EL3,
    "ROOT": MemSpace.ROOT,
    "S": MemSpace.S,
    "N": MemSpace.N,
    "R": MemSpace.R,
    "ANY": MemSpace.ANY,
    "H": MemSpace.EL2,
    "P": MemSpace.EL1N,
    "NP": MemSpace.EL1N,
    "SP": MemSpace.EL1S,
}


def mem_space_from_name(name: str) -> MemSpace:
    """The memory space of a dump's ``space`` key (``EL1N``, ``S``, ``N``...); ANY otherwise."""
    return _SPACE_NAMES.get(name.strip(), MemSpace.ANY)


def mem_space_to_name(space: MemSpace | int) -> str:
    """The ``space`` key that stands for ``space`` (the inverse of :func:`mem_space_from_name`)."""
    for name, value in _SPACE_NAMES.items():
        if value == space:
            return name
    return "ANY"


@dataclass(frozen=True)
class MemoryRegion:
    """``data`` mapped at ``start`` in memory space ``space``; ``name`` says where it came from."""

    start: int
    data: bytes
    space: MemSpace
    name: str = ""

    @property
    def end(self) -> int:
        """First address after the region."""
        return self.start + len(self.data)


class MemoryMap:
    """A set of memory regions; reads return bytes, or fewer/none where nothing is mapped.

    A static :class:`~cstrace.memory.code.CodeMemory`: ``find``, ``read``,
    ``set_context`` and ``advance`` (no-ops: one address space, no time) and
    ``generation``, which changes when a region is added.
    """

    def __init__(self, regions: list[MemoryRegion] | None = None) -> None:
        self.regions: list[MemoryRegion] = []
        self.rejected: list[MemoryRegion] = []
        """Regions not mapped because they overlap an earlier one (as the reference does)."""
        self.generation = 0
        self._spans: list[tuple[int, int, int, MemoryRegion]] = []
        """(start, end, space bits, region) of each region, in order: what :meth:`find` reads
        (plain integers, not the region's attributes and its ``end`` property)."""
        self._last: tuple[int, int, int, MemoryRegion] | None = None
        for r in regions or []:
            self.add(r)

    def add(self, region: MemoryRegion) -> bool:
        """Map a region; False (and nothing mapped) if it overlaps an earlier one in its space."""
        if not region.data:
            return False
        space = int(region.space)
        for r in self.regions:
            if r.start < region.end and region.start < r.end and (int(r.space) & space):
                self.rejected.append(region)
                return False
        self.regions.append(region)
        self._spans.append((region.start, region.end, space, region))
        self._last = None
        self.generation += 1
        return True

    def find(self, address: int, space: MemSpace | int = MemSpace.ANY) -> MemoryRegion | None:
        """The region holding ``address`` in a space overlapping ``space``, if any."""
        sp = int(space)
        last = self._last
        if last is not None and last[0] <= address < last[1] and last[2] & sp:
            return last[3]
        for span in self._spans:
            if span[0] <= address < span[1] and span[2] & sp:
                self._last = span
                return span[3]
        return None

    def read(self, address: int, size: int, space: MemSpace | int = MemSpace.ANY) -> bytes:
        """Up to ``size`` bytes at ``address``, from one region; empty if nothing is mapped."""
        r = self.find(address, space)
        if r is None:
            return b""
        off = address - r.start
        return r.data[off : off + size]

    def set_context(self, context_id: int | None, vmid: int | None = None) -> None:
        """Select the address space of a context; a static map has only one, so no-op."""

    def advance(self, time: int) -> None:
        """Trace time moved; a static map does not change with time, so no-op."""

    def __len__(self) -> int:
        return len(self.regions)
