"""The code-memory interface the program-flow decoders read opcodes through.

Input: nothing (an interface and a null implementation). Output:
:class:`CodeMemory`, what every code memory provides (a static
:class:`~cstrace.memory.image.MemoryMap` of dumps and images, or
:class:`~cstrace.memory.spaces.AddressSpaces` that follow the system event log),
and :data:`NO_MEMORY`, the memory of a core with no image at all.

The decoder drives it; nothing watches the decoder's output:

- ``find(address, space)`` / ``read(address, size, space)``: lookups by
  address in a memory space (an exception level and security state,
  :class:`~cstrace.elements.MemSpace`); a region never answers for an address
  outside itself, so a read never crosses from one image into the next;
- ``set_context(context_id, vmid)``: the traced context changed (a
  ``PE_CONTEXT`` with a context ID): the memory selects that process's
  address space;
- ``advance(time)``: trace time moved to ``time`` (a ``TIMESTAMP``): events
  of the log up to it apply;
- ``generation``: a number that changes whenever lookups may give different
  answers, so caches of walked code (:mod:`cstrace.isa.blocks`) know when to
  switch.
"""

from __future__ import annotations

from typing import Protocol

from cstrace.elements import MemSpace
from cstrace.memory.image import MemoryRegion

__all__ = ["NO_MEMORY", "CodeMemory", "NoMemory"]


class CodeMemory(Protocol):
    """What a program-flow decoder needs from the traced core's memory."""

    @property
    def generation(self) -> int:
        """Changes whenever :meth:`find` may answer differently."""
        ...

    def find(self, address: int, space: MemSpace | int = MemSpace.ANY) -> MemoryRegion | None:
        """The region holding ``address`` in a memory space overlapping ``space``, if any."""
        ...

    def read(self, address: int, size: int, space: MemSpace | int = MemSpace.ANY) -> bytes:
        """Up to ``size`` bytes at ``address`` from one region; empty if nothing is mapped."""
        ...

    def set_context(self, context_id: int | None, vmid: int | None = None) -> None:
        """The traced context changed: select its address space."""
        ...

    def advance(self, time: int) -> None:
        """Trace time moved to ``time``: apply what the event log says happened up to it."""
        ...


class NoMemory:
    """The code memory of a core with no image: nothing is mapped."""

    __slots__ = ()

    generation = 0

    def find(self, address: int, space: MemSpace | int = MemSpace.ANY) -> None:
        """Nothing is mapped."""
        return None

    def read(self, address: int, size: int, space: MemSpace | int = MemSpace.ANY) -> bytes:
        """Nothing is mapped: no bytes."""
        return b""

    def set_context(self, context_id: int | None, vmid: int | None = None) -> None:
        """No address spaces to select."""

    def advance(self, time: int) -> None:
        """Nothing changes with time."""


NO_MEMORY = NoMemory()
"""The shared empty code memory."""
