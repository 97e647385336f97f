"""Instruction classification and code walking for A64, A32 and T32.

Input: opcodes (or code bytes mapped at an address), the instruction set and
the classification options of the traced PE. Output: what the program-flow
decoders (ETMv4/ETE, PTM, ETMv3) need: whether an instruction is a waypoint,
its type and sub-type as the reference decoder prints them, its size, whether
it is conditional or a call, its direct branch target and the ISA after it; and
fast walks of code to the next waypoint, and ONE block walker and cache shared
by all decoders (:mod:`cstrace.isa.blocks`).

Typical use in a decoder::

    from cstrace.isa import BlockCache, IsaOptions, arch_profile

    arch, profile = arch_profile(core_name)
    opts = IsaOptions(arch, profile, wfi_wfe_branch=True)
    blocks = BlockCache.shared(memory, opts)  # follows memory.generation by itself
    blk = blocks.block(address, isa, space)   # cached: one dict lookup the next time
    if blk.found:                             # the walk ended on a waypoint
        ...                                   # blk.itype, blk.target, blk.link, blk.range_e...
    else:
        ...                                   # the opcode at blk.end is in no image: ADDR_NACC

In a hot loop, ``blocks.tables(space)[isa].get(address)`` is that lookup itself.

Lower levels: :func:`scan_to_waypoint` / :func:`scan_to_address` on one code
object, :class:`Walker` (one code object), and :func:`decode` for a single
opcode.

Classification follows the Arm ARM encodings and replicates the reference
decoder's (OpenCSD's) choices; see :mod:`cstrace.isa.a64`,
:mod:`cstrace.isa.a32` and :mod:`cstrace.isa.t32`.
"""

from __future__ import annotations

from cstrace.isa.blocks import Block, BlockCache
from cstrace.isa.cores import CORES, arch_profile, lookup
from cstrace.isa.decode import classify, decode, decode_at, read_opcode
from cstrace.isa.scan import Walker, scan_to_address, scan_to_waypoint
from cstrace.isa.t32 import is_wide
from cstrace.isa.types import ArchVersion, InstrInfo, IsaOptions, Profile, Scan, StopReason

__all__ = [
    "CORES",
    "ArchVersion",
    "Block",
    "BlockCache",
    "InstrInfo",
    "IsaOptions",
    "Profile",
    "Scan",
    "StopReason",
    "Walker",
    "arch_profile",
    "classify",
    "decode",
    "decode_at",
    "is_wide",
    "lookup",
    "read_opcode",
    "scan_to_address",
    "scan_to_waypoint",
]
