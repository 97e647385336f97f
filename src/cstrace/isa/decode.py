"""Classify one instruction: the public ``decode`` and its per-opcode caches.

Input: an ISA, the instruction's address, its opcode (or the code bytes it is
read from) and :class:`~cstrace.isa.types.IsaOptions`. Output: an
:class:`~cstrace.isa.types.InstrInfo`.

The classification of an opcode does not depend on its address, so it is
computed once per (ISA, options, opcode) and kept in a dictionary; only the
branch target is computed per call.
"""

from __future__ import annotations

from collections.abc import Callable

from cstrace.elements import Isa
from cstrace.isa.a32 import classify_a32
from cstrace.isa.a64 import classify_a64
from cstrace.isa.cls import Cls
from cstrace.isa.t32 import classify_t32, is_wide
from cstrace.isa.types import InstrInfo, IsaOptions

__all__ = [
    "Buffer",
    "branch_target",
    "classify",
    "decode",
    "decode_at",
    "info_from_cls",
    "read_opcode",
]

Buffer = bytes | bytearray | memoryview
"""A code object: anything indexable by byte offset."""

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_CLS_KEY_MASK = 0xF  # the options bits that change the classification of an opcode

_ISAS = tuple(Isa)
_A32, _T32, _A64 = int(Isa.A32), int(Isa.T32), int(Isa.A64)
_CACHES: dict[tuple[Isa, int], tuple[dict[int, Cls], Callable[[int], Cls]]] = {}


def _classifier(isa: Isa, key: int) -> Callable[[int], Cls]:
    level = key & 3
    dsb = bool(key & 4)
    wfi = bool(key & 8)
    if isa == Isa.A64:
        return lambda w: classify_a64(w, level, dsb, wfi)
    if isa == Isa.A32:
        return lambda w: classify_a32(w, dsb, wfi)
    if isa == Isa.T32:
        return lambda w: classify_t32(w, dsb, wfi)
    raise ValueError(f"instructions of ISA {isa!r} cannot be classified")


def cls_cache(isa: Isa, opts: IsaOptions) -> tuple[dict[int, Cls], Callable[[int], Cls]]:
    """The opcode → :data:`Cls` cache for ``isa`` and ``opts``, and the classifier."""
    key = opts.key & _CLS_KEY_MASK
    found = _CACHES.get((isa, key))
    if found is None:
        found = _CACHES[(isa, key)] = ({}, _classifier(isa, key))
    return found


def classify(isa: Isa, opcode: int, opts: IsaOptions) -> Cls:
    """The cached classification record of ``opcode`` (see :mod:`cstrace.isa.cls`)."""
    cache, fn = cls_cache(isa, opts)
    if isa == Isa.T32 and not is_wide(opcode >> 16):
        opcode &= 0xFFFF0000  # the second halfword is not part of a 16-bit instruction
    c = cache.get(opcode)
    if c is None:
        c = cache[opcode] = fn(opcode)
    return c


def branch_target(isa: int, address: int, c: Cls) -> tuple[int | None, int]:
    """The direct branch target (None if not a direct branch) and the ISA after the branch.

    ``c`` is the record of the instruction at ``address``; the ISA is a plain
    int (BLX immediate switches between A32 and T32).
    """
    rel = c[5]
    if rel is None:
        return None, isa
    if isa == _A64:
        target = (address + rel) & _MASK64
    else:
        target = ((address & c[6]) + rel) & _MASK32 & ~1
    if c[7]:
        return target, _T32 if isa == _A32 else _A32
    return target, isa


def info_from_cls(isa: Isa, address: int, opcode: int, c: Cls) -> InstrInfo:
    """Build the :class:`InstrInfo` of the instruction at ``address`` from its record."""
    size, itype, subtype, is_cond, is_link, _rel, _align, _switch, it_count = c
    isa = _ISAS[isa]  # callers may pass a plain int
    target, after = branch_target(isa, address, c)
    next_isa = _ISAS[after]
    return InstrInfo(
        isa,
        address,
        opcode,
        size,
        itype,
        subtype,
        is_cond,
        is_link,
        target,
        next_isa,
        it_count,
    )


def decode(isa: Isa, address: int, opcode: int, opts: IsaOptions) -> InstrInfo:
    """Classify the instruction ``opcode`` at ``address`` in instruction set ``isa``.

    ``opcode`` is the 32-bit instruction word for A64 and A32; for T32 it is the
    first halfword in bits 31:16 and the following halfword in bits 15:0 (the
    second is ignored when the first is a 16-bit instruction). Raises
    ``ValueError`` for an ISA that has no instructions to classify (Jazelle,
    ThumbEE, custom, unknown), as the reference refuses them.
    """
    return info_from_cls(isa, address, opcode, classify(isa, opcode & _MASK32, opts))


def read_opcode(isa: Isa, code: Buffer, offset: int) -> int | None:
    """The opcode at byte ``offset`` of ``code`` in :func:`decode`'s convention.

    Reads 4 bytes, little-endian (for T32, two little-endian halfwords), as the
    reference does for every instruction; ``None`` if fewer than 4 are left.
    """
    if offset < 0 or offset + 4 > len(code):
        return None
    b = bytes(code[offset : offset + 4])
    if isa == Isa.T32:
        # (bytes, not shifts of the bytes' values: compiled, those would be C ints)
        return int.from_bytes(bytes((b[1], b[0], b[3], b[2])), "big")
    return int.from_bytes(b, "little")


def decode_at(
    isa: Isa, code: Buffer, base: int, address: int, opts: IsaOptions
) -> InstrInfo | None:
    """Classify the instruction at ``address`` of ``code`` (mapped at ``base``).

    ``None`` when fewer than 4 bytes of ``code`` are readable at ``address``.
    """
    op = read_opcode(isa, code, address - base)
    if op is None:
        return None
    return decode(isa, address, op, opts)
