"""Memory spaces by name, as the reference prints them (``EL1N``, ``Any NS``, ``EL1S,EL2N``).

Input: a :class:`~cstrace.elements.MemSpace` value (or a combination of spaces).
Output: its name. The OpenCSD listing, the text format and the summary of what a
trace lost all name memory spaces this way; this module is kept apart so that
printing the summary does not load the listing's renderers.
"""

from __future__ import annotations

from cstrace.elements import MemSpace

__all__ = ["mem_space_name"]

_NAMES = {
    MemSpace.NONE: "None",
    MemSpace.EL1S: "EL1S",
    MemSpace.EL1N: "EL1N",
    MemSpace.EL2: "EL2N",
    MemSpace.EL3: "EL3",
    MemSpace.EL2S: "EL2S",
    MemSpace.EL1R: "EL1R",
    MemSpace.EL2R: "EL2R",
    MemSpace.ROOT: "Root",
    MemSpace.S: "Any S",
    MemSpace.N: "Any NS",
    MemSpace.R: "Any R",
    MemSpace.ANY: "Any",
}
_SINGLE_SPACES = (
    MemSpace.EL1S,
    MemSpace.EL1N,
    MemSpace.EL2,
    MemSpace.EL3,
    MemSpace.EL2S,
    MemSpace.EL1R,
    MemSpace.EL2R,
    MemSpace.ROOT,
)


def mem_space_name(space: int) -> str:
    """Name a memory space as the reference does: ``EL1N``, ``Any NS``, ``EL1S,EL2N``..."""
    name = _NAMES.get(MemSpace(space & 0xFF))
    if name is not None:
        return name
    return ",".join(_NAMES[s] for s in _SINGLE_SPACES if space & s)
