"""The compact classification record the classifiers return and the caches keep.

Input: nothing (definitions only). Output: the :data:`Cls` tuple layout, the
classification levels derived from the architecture version, and ``sext``.

A ``Cls`` is ``(size, itype, subtype, is_cond, is_link, rel, align, switch, it_count)``:
``rel`` is ``None`` for anything but a direct branch; otherwise the branch
target of an instruction at ``address`` is ``((address & align) + rel)``
truncated to the address width (32 bits for A32/T32, 64 for A64), where ``rel``
already includes the PC offset of the ISA (+8 in A32, +4 in T32). ``switch``
is True for BLX (immediate), which changes between A32 and T32.
"""

from __future__ import annotations

from cstrace.elements import InstrSubtype, InstrType

__all__ = ["LEVEL_AA64", "LEVEL_BASE", "LEVEL_V8R3", "Cls", "sext"]

Cls = tuple[int, InstrType, InstrSubtype, bool, bool, int | None, int, bool, int]

LEVEL_BASE = 0
"""Before v8.3: no pointer-authentication branches."""
LEVEL_V8R3 = 1
"""v8.3: FEAT_PAuth branches and returns (and FEAT_PAuth_LR, TEXIT) are branches."""
LEVEL_AA64 = 2
"""Later AArch64 (the reference's ARCH_AA64): also WFET/WFIT and TSTART."""


def sext(value: int, bits: int) -> int:
    """Sign-extend the ``bits``-bit two's complement ``value``."""
    sign = 1 << (bits - 1)
    return (value ^ sign) - sign
