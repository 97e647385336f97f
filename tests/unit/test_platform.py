"""What the images and the core named say about the traced core (cstrace.inputs.platform)."""

from __future__ import annotations

import pytest

from cstrace.inputs.platform import Platform, platform_of
from cstrace.isa.types import Profile
from cstrace.memory.elf import ElfImage


def _elf(machine: str, arch: int | None = None, profile: str | None = None) -> ElfImage:
    return ElfImage("prog.elf", "ET_EXEC", machine, 32, 0, None, cpu_arch=arch, cpu_profile=profile)


@pytest.mark.parametrize(
    ("image", "profile", "name", "allowed", "core"),
    [
        (_elf("EM_ARM", 10, "R"), Profile.R, "Armv7-R", {"ETM3"}, "ARMv7-R"),
        (_elf("EM_ARM", 10, "M"), Profile.M, "Armv7-M", {"ETM3"}, "ARMv7-M"),
        (_elf("EM_ARM", 13), Profile.M, "Armv7E-M", {"ETM3"}, "ARMv7-M"),
        (_elf("EM_ARM", 17, "M"), Profile.M, "Armv8-M Mainline", {"ETM4"}, "ARMv8-M"),
        (_elf("EM_ARM", 21, "M"), Profile.M, "Armv8.1-M Mainline", {"ETM4"}, "ARMv8.1-M"),
        (_elf("EM_ARM", 10, "A"), Profile.A, "Armv7-A", {"ETM3", "PTM"}, "ARMv7-A"),
        (_elf("EM_ARM", 14, "A"), Profile.A, "Armv8-A", {"ETM4"}, "ARMv8-A"),
        (_elf("EM_AARCH64"), Profile.A, "Armv8-A or later", {"ETM4", "ETE"}, "ARM-AA64"),
    ],
)
def test_images_bound_the_trace_units(
    image: ElfImage, profile: Profile, name: str, allowed: set[str], core: str
) -> None:
    p = platform_of([("prog.elf", image)], None)
    assert (p.profile, p.name) == (profile, name)
    assert {u for u in ("ETE", "ETM4", "PTM", "ETM3") if p.allows(u)} == allowed
    assert p.decode_core("etm4") == core
    assert "prog.elf" in p.said_by


def test_the_core_named_wins_and_is_named() -> None:
    p = platform_of([("prog.elf", _elf("EM_AARCH64"))], "Cortex-M33")
    assert p.profile == Profile.M and not p.allows("ETE") and p.allows("ETM4")
    assert p.core_text() == "Cortex-M33 (Armv8-M)"
    assert p.decode_core("etm4") == "Cortex-M33"
    a53 = platform_of([], "Cortex-A53")
    assert not a53.allows("ETE") and a53.allows("ETM4")


def test_nothing_known_allows_everything() -> None:
    for p in (platform_of([], None), platform_of([("x", _elf("EM_ARM"))], None), Platform()):
        assert not p.known
        assert all(p.allows(u) for u in ("ETE", "ETM4", "PTM", "ETM3"))
        assert p.decode_core("etm4") is None


def test_images_that_disagree_say_nothing() -> None:
    images = [("a", _elf("EM_AARCH64")), ("b", _elf("EM_ARM", 10, "M"))]
    assert not platform_of(images, None).known
