"""Program memory images: what the traced core executed, by address and memory space.

Input: memory dumps of a snapshot's core (and memory-space devices); output: a
:class:`MemoryMap` that the program-flow decoders read opcodes from.
"""

from __future__ import annotations

from cstrace.memory.code import NO_MEMORY, CodeMemory, NoMemory
from cstrace.memory.image import MemoryMap, MemoryRegion, mem_space_from_name

__all__ = [
    "NO_MEMORY",
    "CodeMemory",
    "MemoryMap",
    "MemoryRegion",
    "NoMemory",
    "mem_space_from_name",
]
