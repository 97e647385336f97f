"""What the inputs say about the traced core before any trace is read: its architecture.

Input: the ELF images given with a raw capture (their machine and, for 32-bit
Arm, the ``Tag_CPU_arch`` and ``Tag_CPU_arch_profile`` of ``.ARM.attributes``,
Arm IHI 0045 "Addenda to, and Errata in, the ABI for the Arm Architecture")
and the core type the user named. Output: a :class:`Platform`: the
architecture profile (A, R or M) and version as far as they are known, and in
words what said so.

The platform bounds the trace units inference proposes (:mod:`.infer`), by
what the architecture allows, not by product lists:

- M profile: ETMv3 on Armv7-M (ETMv3.4 and later), ETMv4 on Armv8-M (M-profile
  exceptions, no context ID, no VMID); never PTM or ETE;
- R profile: ETMv3 on Armv7-R, ETMv4 on Armv8-R; never PTM or ETE;
- A profile: PTM or ETMv3 on Armv7-A; ETMv4 on Armv8-A; ETE from Armv9-A
  (an AArch64 image alone does not say which version, so both stay possible);
- nothing known: every protocol of the detected family stays possible.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cstrace.isa.cores import lookup
from cstrace.isa.types import ArchVersion, Profile
from cstrace.memory.elf import ElfImage

__all__ = ["Platform", "platform_of"]

# Tag_CPU_arch values → (architecture major version, profile when the tag implies one).
_CPU_ARCH: dict[int, tuple[int, Profile | None, str]] = {
    10: (7, None, "Armv7"),
    11: (6, Profile.M, "Armv6-M"),
    12: (6, Profile.M, "Armv6S-M"),
    13: (7, Profile.M, "Armv7E-M"),
    14: (8, Profile.A, "Armv8-A"),
    15: (8, Profile.R, "Armv8-R"),
    16: (8, Profile.M, "Armv8-M Baseline"),
    17: (8, Profile.M, "Armv8-M Mainline"),
    18: (8, Profile.A, "Armv8.1-A"),
    19: (8, Profile.A, "Armv8.2-A"),
    20: (8, Profile.A, "Armv8.3-A"),
    21: (8, Profile.M, "Armv8.1-M Mainline"),
    22: (9, Profile.A, "Armv9-A"),
}
_PROFILE_LETTER = {"A": Profile.A, "R": Profile.R, "M": Profile.M}
_LETTER = {Profile.A: "A", Profile.R: "R", Profile.M: "M"}


@dataclass(frozen=True)
class Platform:
    """The traced core's architecture as far as the inputs tell it (None: not known)."""

    profile: Profile | None = None
    arch: int | None = None
    """Architecture major version: 6, 7, 8 or 9."""
    aarch64: bool = False
    """An AArch64 image or core whose version is not known beyond "Armv8-A or later"."""
    core: str | None = None
    """The core type the user named."""
    name: str = ""
    """The architecture in words (``Armv7-R``, ``Armv8-M Mainline``), when known."""
    said_by: str = ""
    """What said so (``image r5.elf: Tag_CPU_arch 10, profile R``)."""

    @property
    def known(self) -> bool:
        """Whether anything is known."""
        return self.profile is not None or self.arch is not None

    def allows(self, protocol: str) -> bool:
        """Whether a trace unit of ``protocol`` (``ETE``, ``ETM4``, ``PTM``, ``ETM3``) can
        trace this platform's cores."""
        p, a = self.profile, self.arch
        if protocol == "ETE":
            return p in (None, Profile.A) and (a is None or a >= 9 or (a == 8 and self.aarch64))
        if protocol == "ETM4":
            return a is None or a >= 8
        if protocol == "PTM":
            return p in (None, Profile.A) and (a is None or a == 7)
        if protocol == "ETM3":
            return a is None or a <= 7
        return True

    def decode_core(self, family: str) -> str | None:
        """The core type to decode with: the user's, else an architecture name
        (``ARMv7-R``) the decoders know; None when nothing is known."""
        if self.core:
            return self.core
        if self.profile is None and self.arch is None:
            return None
        letter = _LETTER.get(self.profile or Profile.A, "A")
        if self.aarch64 or self.arch == 9:
            return "ARM-AA64"
        if self.arch == 8:
            return "ARMv8.1-M" if self.name.startswith("Armv8.1-M") else f"ARMv8-{letter}"
        if self.arch is not None and self.arch <= 7:
            return f"ARMv7-{letter}"
        return None

    def core_text(self) -> str:
        """The core in words, as far as it is known (``Cortex-R5 (Armv7-R)``, ``an Armv8-A
        core``)."""
        arch = self.name
        if self.core:
            return f"{self.core} ({arch})" if arch else self.core
        if arch:
            article = "an" if arch[0] in "AEIOU" else "a"
            return f"{article} {arch} core"
        return ""


def _from_core(core: str) -> tuple[Profile | None, int | None, bool, str]:
    """Profile, major version, whether the version may be later than it says (the
    decoders' ``AA64``: Armv8.4 or later), and the architecture in words."""
    found = lookup(core)
    if found is None:
        return None, None, False, ""
    arch, profile = found
    major = {ArchVersion.V7: 7, ArchVersion.V8: 8, ArchVersion.V8R3: 8}.get(arch)
    prof = profile if profile in (Profile.A, Profile.R, Profile.M) else None
    if major is None and arch == ArchVersion.AA64:
        major = 9 if core.startswith("ARMv9") else 8
    name = ""
    if major is not None and prof is not None:
        name = f"Armv{major}-{_LETTER[prof]}"
        if arch == ArchVersion.AA64 and major == 8:
            name = f"Armv8-{_LETTER[prof]} or later"
    return prof, major, arch == ArchVersion.AA64, name


def _from_image(image: ElfImage) -> tuple[Profile | None, int | None, bool, str]:
    if image.machine == "EM_AARCH64":
        return Profile.A, 8, True, "Armv8-A or later"
    if image.machine != "EM_ARM" or image.cpu_arch is None:
        return None, None, False, ""
    major, profile, name = _CPU_ARCH.get(image.cpu_arch, (0, None, ""))
    if not major:
        if image.cpu_arch < 10:
            return None, 6, False, "Armv6 or earlier"
        return None, None, False, ""
    letter = (image.cpu_profile or "").upper()
    if profile is None and letter in _PROFILE_LETTER:
        profile = _PROFILE_LETTER[letter]
        name = f"{name}-{letter}"
    return profile, major, False, name


def platform_of(images: Iterable[tuple[str, ElfImage]], core: str | None) -> Platform:
    """The platform the named ``images`` and the user's ``core`` describe.

    The user's core wins over the images. Images that disagree with each other
    (a 64-bit program and a 32-bit one) say nothing.
    """
    if core:
        profile, arch, later, name = _from_core(core)
        if profile is not None or arch is not None:
            return Platform(profile, arch, later, core, name, f"the core named ({core})")
        return Platform(core=core, said_by=f"the core named ({core}), not a known core")
    seen: set[tuple[Profile | None, int | None, bool, str]] = set()
    said: list[str] = []
    for label, image in images:
        got = _from_image(image)
        if got[0] is None and got[1] is None:
            continue
        seen.add(got)
        if image.machine == "EM_AARCH64":
            said.append(f"image {label}: AArch64 (e_machine EM_AARCH64)")
        else:
            said.append(
                f"image {label}: Tag_CPU_arch {image.cpu_arch}"
                + (f", profile {image.cpu_profile}" if image.cpu_profile else "")
            )
    if len(seen) != 1:
        return Platform()
    profile, arch, aarch64, name = next(iter(seen))
    return Platform(profile, arch, aarch64, None, name, "; ".join(dict.fromkeys(said)))
