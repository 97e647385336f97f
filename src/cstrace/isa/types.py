"""Types shared by the instruction classifier and the code scanner.

Input: nothing (definitions only). Output: the architecture/profile enums
(``ocsd_arch_version_t`` and ``ocsd_core_profile_t`` of the reference decoder),
the classification options (:class:`IsaOptions`), the per-instruction result
(:class:`InstrInfo`) and the per-block result of a scan (:class:`Scan`).
"""

from __future__ import annotations

from enum import IntEnum

from cstrace.elements import InstrSubtype, InstrType, Isa

__all__ = [
    "ArchVersion",
    "InstrInfo",
    "IsaOptions",
    "Profile",
    "Scan",
    "StopReason",
]


class ArchVersion(IntEnum):
    """Architecture version of the traced PE, with the reference decoder's values.

    ``AA64`` stands for "v8.3 or later plus further AArch64 features" (v8.4+ and
    v9): the reference's ``ARCH_AA64``. Comparisons are by value, so
    ``arch >= ArchVersion.V8R3`` means "has pointer authentication".
    """

    UNKNOWN = 0x0000
    CUSTOM = 0x0001
    V7 = 0x0700
    V8 = 0x0800
    V8R3 = 0x0803
    AA64 = 0x0864


class Profile(IntEnum):
    """Architecture profile of the traced PE (``ocsd_core_profile_t``)."""

    UNKNOWN = 0
    M = 1
    R = 2
    A = 3
    CUSTOM = 4


class IsaOptions:
    """What changes the classification of an instruction.

    - ``arch``, ``profile``: the PE's architecture (see :mod:`cstrace.isa.cores`).
      v8.3 and later classify the pointer-authentication branches (and the
      FEAT_PAuth_LR returns, TEXIT) as branches; ``ArchVersion.AA64`` also makes
      WFIT/WFET waypoints (with ``wfi_wfe_branch``) and TSTART a waypoint.
    - ``dsb_dmb_waypoints``: DSB and DMB end a block (a PTM/ETMv3 option).
    - ``wfi_wfe_branch``: WFI/WFE (and WFIT/WFET) are waypoints (ETMv4.3+, ETE).
    - ``track_it_block``: the scanner marks the instructions inside a T32 IT
      block as conditional (state kept within one scan only).

    Instances are immutable and compare/hash by value; ``key`` is a small int
    that identifies the options in caches.
    """

    __slots__ = (
        "_level",
        "arch",
        "dsb_dmb_waypoints",
        "key",
        "profile",
        "track_it_block",
        "wfi_wfe_branch",
    )

    arch: ArchVersion
    profile: Profile
    dsb_dmb_waypoints: bool
    wfi_wfe_branch: bool
    track_it_block: bool
    key: int
    _level: int

    def __init__(
        self,
        arch: ArchVersion | int = ArchVersion.V8,
        profile: Profile | int = Profile.A,
        *,
        dsb_dmb_waypoints: bool = False,
        wfi_wfe_branch: bool = False,
        track_it_block: bool = False,
    ) -> None:
        a = int(arch)
        try:
            arch_e = ArchVersion(a)
        except ValueError:
            arch_e = ArchVersion.AA64 if a > ArchVersion.AA64 else ArchVersion.UNKNOWN
            if ArchVersion.V8 <= a < ArchVersion.V8R3:
                arch_e = ArchVersion.V8
            elif ArchVersion.V8R3 <= a < ArchVersion.AA64:
                arch_e = ArchVersion.V8R3
            elif ArchVersion.V7 <= a < ArchVersion.V8:
                arch_e = ArchVersion.V7
        level = 2 if arch_e >= ArchVersion.AA64 else 1 if arch_e >= ArchVersion.V8R3 else 0
        sset = object.__setattr__
        sset(self, "arch", arch_e)
        sset(self, "profile", Profile(int(profile)))
        sset(self, "dsb_dmb_waypoints", bool(dsb_dmb_waypoints))
        sset(self, "wfi_wfe_branch", bool(wfi_wfe_branch))
        sset(self, "track_it_block", bool(track_it_block))
        sset(self, "_level", level)
        # The classification depends on the level, the two waypoint options and
        # (in the scanner only) IT tracking; the profile is kept for callers.
        sset(
            self,
            "key",
            level
            | (int(bool(dsb_dmb_waypoints)) << 2)
            | (int(bool(wfi_wfe_branch)) << 3)
            | (int(bool(track_it_block)) << 4),
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("IsaOptions is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IsaOptions):
            return NotImplemented
        return (self.key, self.arch, self.profile) == (other.key, other.arch, other.profile)

    def __hash__(self) -> int:
        return hash((self.key, self.arch, self.profile))

    def __repr__(self) -> str:
        return (
            f"IsaOptions(arch={self.arch.name}, profile={self.profile.name}, "
            f"dsb_dmb_waypoints={self.dsb_dmb_waypoints}, "
            f"wfi_wfe_branch={self.wfi_wfe_branch}, track_it_block={self.track_it_block})"
        )


class InstrInfo:
    """What the trace decoders need to know about one instruction.

    - ``address``, ``opcode``: as given to :func:`cstrace.isa.decode` (T32
      opcodes are ``first_halfword << 16 | second_halfword``).
    - ``size``: 2 or 4 bytes.
    - ``itype``/``subtype``: the reference's instruction type and sub-type
      (what the listing prints as ``BR``, ``iBR``, ``b+link``, ``A64:ret``...).
    - ``is_cond``: the reference's "conditional" flag (B<c>, CBZ, TBZ... and,
      in A32, every instruction whose condition field is not AL/NV).
    - ``is_link``: branch with link.
    - ``target``: the destination of a direct branch, else ``None``.
    - ``next_isa``: the ISA after the branch is taken: BLX (immediate) switches
      between A32 and T32; for every other instruction, including indirect
      branches (whose target ISA only the trace can tell), the current ISA.
    - ``it_count``: for a T32 IT instruction, how many following instructions it
      makes conditional (1-4), else 0.
    """

    __slots__ = (
        "address",
        "is_cond",
        "is_link",
        "isa",
        "it_count",
        "itype",
        "next_isa",
        "opcode",
        "size",
        "subtype",
        "target",
    )

    def __init__(
        self,
        isa: Isa,
        address: int,
        opcode: int,
        size: int,
        itype: InstrType,
        subtype: InstrSubtype = InstrSubtype.NONE,
        is_cond: bool = False,
        is_link: bool = False,
        target: int | None = None,
        next_isa: Isa | None = None,
        it_count: int = 0,
    ) -> None:
        self.isa = isa
        self.address = address
        self.opcode = opcode
        self.size = size
        self.itype = itype
        self.subtype = subtype
        self.is_cond = is_cond
        self.is_link = is_link
        self.target = target
        self.next_isa = isa if next_isa is None else next_isa
        self.it_count = it_count

    @property
    def is_waypoint(self) -> bool:
        """True when the instruction ends a block (any type but ``OTHER``)."""
        return self.itype != InstrType.OTHER

    @property
    def next_address(self) -> int:
        """The address of the following instruction when no branch is taken."""
        return self.address + self.size

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InstrInfo):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in InstrInfo.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        tgt = "None" if self.target is None else f"0x{self.target:x}"
        return (
            f"InstrInfo({self.isa.name} 0x{self.address:x}: {self.opcode:#010x} size={self.size} "
            f"{self.itype.name}/{self.subtype.name} cond={self.is_cond} link={self.is_link} "
            f"target={tgt} next_isa={self.next_isa.name} it={self.it_count})"
        )


class StopReason(IntEnum):
    """Why a scan stopped."""

    WAYPOINT = 0
    """The last instruction walked is a waypoint (``last.itype != OTHER``)."""
    COUNT = 1
    """``max_instr`` instructions were walked without reaching a waypoint."""
    NO_BYTES = 2
    """Fewer than 4 bytes are left in the code at ``end``: the next opcode is
    not readable from this code object (the reference fetches 4 bytes per
    instruction, whatever its size)."""
    ADDRESS = 3
    """:func:`cstrace.isa.scan_to_address` reached the requested address."""


class Scan:
    """The result of walking one block of instructions.

    ``start``: address of the first instruction; ``end``: address after the
    last one walked; ``count``: instructions walked (0 when the first opcode is
    not readable); ``last``: the last instruction (``None`` when ``count`` is 0);
    ``reason``: a :class:`StopReason`; ``it_state``: T32 with IT tracking, the
    number of instructions of an IT block still to come at ``end`` (else 0).

    Scans may be shared through a block cache: treat them as read-only.
    """

    __slots__ = ("count", "end", "isa", "it_state", "last", "reason", "start")

    def __init__(
        self,
        isa: Isa,
        start: int,
        end: int,
        count: int,
        last: InstrInfo | None,
        reason: StopReason,
        it_state: int = 0,
    ) -> None:
        self.isa = isa
        self.start = start
        self.end = end
        self.count = count
        self.last = last
        self.reason = reason
        self.it_state = it_state

    @property
    def last_address(self) -> int | None:
        """The address of the last instruction walked, or ``None``."""
        return None if self.last is None else self.last.address

    def __repr__(self) -> str:
        return (
            f"Scan({self.isa.name} 0x{self.start:x}..0x{self.end:x} count={self.count} "
            f"reason={self.reason.name} last={self.last!r})"
        )
