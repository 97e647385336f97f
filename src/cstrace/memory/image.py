"""Memory regions keyed by address and memory space, built from snapshot dumps.

A region answers reads for addresses inside it when its memory space overlaps
the space asked for (the reference decoder's rule: the two space bit sets share
a bit). Regions are searched in the order they were added; the first match wins.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from cstrace.elements import MemSpace
from cstrace.snapshot.model import Device, Snapshot

__all__ = ["MemoryMap", "MemoryRegion", "mem_space_from_name"]

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
    """The memory space of a dump's ``space`` key (``EL1N``, ``S``, ``N``...); ANY if empty."""
    text = name.strip()
    if not text:
        return MemSpace.ANY
    return _SPACE_NAMES.get(text, _SPACE_NAMES.get(text.upper(), MemSpace.ANY))


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

    The interface the program-flow decoders use (any code memory provides it):
    ``find(address, space)``, ``read(address, size, space)``, ``set_context(ctxid, vmid)``
    (called when the traced context changes) and ``generation``, a number that
    changes whenever what ``find`` would return may have changed (so caches of
    decoded code can be dropped).
    """

    def __init__(self, regions: list[MemoryRegion] | None = None) -> None:
        self.regions: list[MemoryRegion] = []
        self._starts: list[int] = []
        self._order: list[MemoryRegion] = []
        self.generation = 0
        for r in regions or []:
            self.add(r)

    def add(self, region: MemoryRegion) -> None:
        """Map a region (later regions lose to earlier ones where they overlap)."""
        if not region.data:
            return
        self.regions.append(region)
        self._order = sorted(self.regions, key=lambda r: r.start)
        self._starts = [r.start for r in self._order]
        self.generation += 1

    def find(self, address: int, space: MemSpace | int = MemSpace.ANY) -> MemoryRegion | None:
        """The first-added region holding ``address`` in a space overlapping ``space``."""
        best: MemoryRegion | None = None
        best_rank = len(self.regions)
        k = bisect_right(self._starts, address)
        for r in reversed(self._order[:k]):
            if r.start <= address < r.end and (int(r.space) & int(space)):
                rank = self.regions.index(r)
                if rank < best_rank:
                    best, best_rank = r, rank
        return best

    def read(self, address: int, size: int, space: MemSpace | int = MemSpace.ANY) -> bytes:
        """Up to ``size`` bytes at ``address``; empty if the address is not mapped."""
        r = self.find(address, space)
        if r is None:
            return b""
        off = address - r.start
        return r.data[off : off + size]

    def set_context(self, context_id: int | None, vmid: int | None = None) -> None:
        """Select the address space of a context; a static map has only one, so no-op."""

    def __len__(self) -> int:
        return len(self.regions)

    @classmethod
    def from_devices(
        cls, snapshot: Snapshot, devices: list[Device], warnings: list[str] | None = None
    ) -> MemoryMap:
        """Map the dumps of ``devices``; missing files are noted in ``warnings`` and skipped."""
        mm = cls()
        for dev in devices:
            for d in dev.dumps:
                tree = snapshot.tree
                if not tree.exists(d.file):
                    if warnings is not None:
                        warnings.append(
                            f"{d.path}: line {d.line}: memory dump {tree.display(d.file)} "
                            "not found; decoding continues without it"
                        )
                    continue
                data = tree.read_bytes(d.file, d.offset, d.length)
                mm.add(
                    MemoryRegion(
                        d.address, data, mem_space_from_name(d.space), tree.display(d.file)
                    )
                )
        return mm
