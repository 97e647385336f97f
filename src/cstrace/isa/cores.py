"""Core names to architecture version and profile.

Input: the core name of a snapshot's core device (``Cortex-A57``, ``ARM-AA64``,
``ARMv8.2-A``...). Output: ``(ArchVersion, Profile)``, as the reference decoder's
core-name map gives them (so that the instruction classification matches it):

- known Arm cores by exact name (the reference's table, extended with a few
  later cores at the version the reference would give them);
- ``ARMv<major>[.<minor>]-<A|R|M>``: v7 → V7, v8.0-v8.2 → V8, v8.3 → V8R3,
  later (v8.4+, v9) → AA64;
- ``ARM-AA64`` or ``ARM-aa64``, optionally ``-A``/``-R``/``-M``: AA64.

A name that matches none of these is not an error in the reference: it gives
``(ArchVersion.UNKNOWN, Profile.UNKNOWN)``, and :func:`arch_profile` does the
same. Decoders then classify with the oldest rules (no pointer-authentication
branches): :func:`lookup` returns ``None`` instead for callers that want to
report the name.
"""

from __future__ import annotations

from cstrace.isa.types import ArchVersion, Profile

__all__ = ["CORES", "arch_profile", "lookup"]

_A = Profile.A
_R = Profile.R
_M = Profile.M
_V7 = ArchVersion.V7
_V8 = ArchVersion.V8
_V83 = ArchVersion.V8R3

CORES: dict[str, tuple[ArchVersion, Profile]] = {
    # Armv8-A and later application cores (the reference gives the A78 "V8").
    "Cortex-A78": (_V8, _A),
    "Cortex-A77": (_V83, _A),
    "Cortex-A76": (_V83, _A),
    "Cortex-A75": (_V83, _A),
    "Cortex-A73": (_V8, _A),
    "Cortex-A72": (_V8, _A),
    "Cortex-A65": (_V83, _A),
    "Cortex-A57": (_V8, _A),
    "Cortex-A55": (_V83, _A),
    "Cortex-A53": (_V8, _A),
    "Cortex-A35": (_V8, _A),
    "Cortex-A32": (_V8, _A),
    # Armv7-A.
    "Cortex-A17": (_V7, _A),
    "Cortex-A15": (_V7, _A),
    "Cortex-A12": (_V7, _A),
    "Cortex-A9": (_V7, _A),
    "Cortex-A8": (_V7, _A),
    "Cortex-A7": (_V7, _A),
    "Cortex-A5": (_V7, _A),
    # Real-time cores.
    "Cortex-R52": (_V8, _R),
    "Cortex-R8": (_V7, _R),
    "Cortex-R7": (_V7, _R),
    "Cortex-R5": (_V7, _R),
    "Cortex-R4": (_V7, _R),
    # Microcontrollers (v8-M and v8.1-M are both "V8" for the reference).
    "Cortex-M33": (_V8, _M),
    "Cortex-M55": (_V8, _M),
    "Cortex-M23": (_V8, _M),
    "Cortex-M0": (_V7, _M),
    "Cortex-M0+": (_V7, _M),
    "Cortex-M3": (_V7, _M),
    "Cortex-M4": (_V7, _M),
}

_PROFILE_LETTERS = {"A": Profile.A, "R": Profile.R, "M": Profile.M}


def _pattern(name: str) -> tuple[ArchVersion, Profile] | None:
    """``ARMvM[.m]-P`` and ``ARM-AA64[-P]`` names (the reference's pattern rules).

    Like the reference, the version characters are taken as ``char - '0'``
    without checking that they are digits.
    """
    if name.startswith("ARMv"):
        if len(name) < 5:
            return None
        major = ord(name[4]) - 48
        minor = 0
        dot = name.find(".")
        if dot == 5:
            if len(name) < 7:
                return None
            minor = ord(name[6]) - 48
            rest = name[7:]
        elif dot != -1:
            return None
        else:
            rest = name[5:]
        if major == 7:
            arch = ArchVersion.V7
        elif major >= 8:
            arch = ArchVersion.AA64
            if major == 8 and minor < 3:
                arch = ArchVersion.V8
            elif major == 8 and minor == 3:
                arch = ArchVersion.V8R3
        else:
            return None
        # the first '-' from index 4 must follow the version directly
        if name.find("-", 4) != len(name) - len(rest) or len(rest) < 2:
            return None
        profile = _PROFILE_LETTERS.get(rest[1])
        return None if profile is None else (arch, profile)
    if name.startswith("ARM-") and name[4:8] in ("aa64", "AA64"):
        profile = Profile.A
        if len(name) > 9 and name.find("-", 7) == 8:
            profile = {"R": Profile.R, "M": Profile.M}.get(name[9], Profile.A)
        return ArchVersion.AA64, profile
    return None


def lookup(name: str) -> tuple[ArchVersion, Profile] | None:
    """The architecture and profile of core ``name``, or ``None`` if it is not known."""
    known = CORES.get(name)
    if known is not None:
        return known
    return _pattern(name)


def arch_profile(name: str) -> tuple[ArchVersion, Profile]:
    """Like :func:`lookup`, with the reference's default for unknown names.

    Unknown names give ``(ArchVersion.UNKNOWN, Profile.UNKNOWN)``, as in the
    reference decoder.
    """
    found = lookup(name)
    return (ArchVersion.UNKNOWN, Profile.UNKNOWN) if found is None else found
