"""ELF program images → memory regions at their link address or at a load base.

Input: the bytes of an ELF file (executable, shared object, or relocatable
object such as a Linux kernel module); output: an :class:`ElfImage` whose
:meth:`~ElfImage.regions` are the :class:`~cstrace.memory.MemoryRegion` s of its
executable code, placed at the link address or moved as a whole to a given base
(ASLR, shared libraries, modules): the first loadable byte lands on the base.

Executables and shared objects contribute their executable ``PT_LOAD``
segments (file bytes only: zero-filled memory is not code). Relocatable objects
have no segments: their executable sections are laid out one after another
from address 0 with their alignment, as a loader would place them; relocations
are not applied.

A Linux kernel module (a relocatable object with a ``.modinfo`` or
``.gnu.linkonce.this_module`` section) is laid out as the kernel's module
loader lays out its core memory (``layout_sections`` in ``kernel/module``):
the executable sections first, in section-table order, each at the next
multiple of its alignment, leaving out those whose name starts with ``.init``
(they go to a separate allocation, freed after the module's init: they are
kept in :attr:`ModuleLayout.init` and not mapped). The sections the loader sizes
itself are given the size it gives them: on AArch64 the ``.plt`` holds one
12-byte veneer per distinct branch (``R_AARCH64_CALL26``/``JUMP26``) to a
symbol outside the branch's section, plus one, aligned to 64 bytes, and
``.text.ftrace_trampoline`` one veneer (``module_frob_arch_sections``, with
KASLR). A module's addresses are its own: the addresses its symbols have,
``.text``'s being offsets in ``.text`` (simpleperf's ``inject`` speaks of a
module in these): the whole layout is moved so that ``.text`` (the *anchor*)
is at its section address, and :attr:`ElfImage.link_base` is where the module's
first byte then is (before ``.text``, so below 0 for a module whose ``.text`` is
at 0). :class:`ModuleLayout` says where each section went.

An image is identified by its GNU build ID (the ``NT_GNU_BUILD_ID`` note),
which serves as the UUID of the metadata requirements §5.5.2 ("some kind of
unique identifier or hash that can be assumed to change if the image contents
change"): :attr:`ElfImage.uuid` is its lower-case hex digits, and
:func:`uuid_matches` compares it with what metadata expects.

Parsing uses pyelftools. Anything wrong with the file is a
:class:`~cstrace.errors.SnapshotError` naming the file.
"""

from __future__ import annotations

import io
import uuid as uuid_mod
from dataclasses import dataclass, field
from typing import Any

from cstrace.elements import MemSpace
from cstrace.errors import SnapshotError
from cstrace.memory.image import MemoryRegion

__all__ = [
    "ElfImage",
    "ElfSegment",
    "LoadSegment",
    "ModuleLayout",
    "format_uuid",
    "load_elf",
    "normalize_uuid",
    "uuid_matches",
]

_MAGIC = b"\x7fELF"
_PF_X = 0x1
_SHF_ALLOC = 0x2
_SHF_EXECINSTR = 0x4
_MODULE_MARKS = (".modinfo", ".gnu.linkonce.this_module")
_INIT_PREFIX = ".init"
_A64_VENEER = 12  # struct plt_entry: adrp x16; add x16, x16; br x16
_A64_PLT_ALIGN = 64  # L1_CACHE_BYTES
_R_AARCH64_JUMP26 = 282
_R_AARCH64_CALL26 = 283
_MAX_RELOCATIONS = 1 << 22


@dataclass(frozen=True)
class ElfSegment:
    """Executable bytes of an image at their link address."""

    address: int
    data: bytes
    name: str


@dataclass(frozen=True)
class LoadSegment:
    """One ``PT_LOAD`` program header: where a piece of the file goes in memory."""

    offset: int
    """``p_offset``: where the piece starts in the file."""
    vaddr: int
    """``p_vaddr``: its link-time address."""
    filesz: int
    memsz: int
    executable: bool
    """``PF_X`` is set."""


@dataclass(frozen=True)
class ModuleLayout:
    """Where a kernel module's executable sections go in its memory (see the module doc).

    Offsets are from the start of the module's core memory (what ``/proc/modules``
    and a recording's MMAP record give as its address), or, for :attr:`init`, of
    its init memory.
    """

    anchor: str
    """The section the module's own addresses follow (``.text``)."""
    anchor_offset: int
    """Where the anchor lies in the core memory, as laid out here."""
    anchor_address: int
    """The anchor's section address (``sh_addr``, 0 in a module)."""
    core: tuple[tuple[str, int, int], ...]
    """(name, offset, size) of each executable section of the core memory, in order."""
    init: tuple[tuple[str, int, int], ...]
    """(name, offset, size) of the ``.init`` executable sections, in their own memory."""
    veneers: int | None
    """The AArch64 PLT veneers counted for ``.plt`` (None: not an AArch64 module)."""
    functions: tuple[tuple[str, int], ...] = ()
    """(name, own address) of the functions defined in the anchor section: a running
    kernel's symbol list (kallsyms) places the module by any of them."""


@dataclass
class ElfImage:
    """The code of an ELF file, with what identifies it."""

    name: str
    elf_type: str
    """``ET_EXEC``, ``ET_DYN`` or ``ET_REL``."""
    machine: str
    bits: int
    entry: int
    build_id: bytes | None
    segments: list[ElfSegment] = field(default_factory=list)
    load_base: int | None = None
    """Lowest link address of any loadable part of the file (code or not)."""
    loads: list[LoadSegment] = field(default_factory=list)
    """The ``PT_LOAD`` program headers in file order (none for a relocatable object)."""
    module: ModuleLayout | None = None
    """A kernel module's layout (None for anything else)."""
    cpu_arch: int | None = None
    """32-bit Arm: ``Tag_CPU_arch`` of the ``.ARM.attributes`` section (10 for Armv7, 13
    for Armv7E-M, 14 for Armv8-A, 15 Armv8-R, 16/17 Armv8-M Baseline/Mainline, 21
    Armv8.1-M Mainline...; Arm IHI 0045, "Addenda to the ABI"), when the file says it."""
    cpu_profile: str | None = None
    """32-bit Arm: ``Tag_CPU_arch_profile``: ``A``, ``R``, ``M`` or ``S`` (A or R), when
    the file says it."""

    def file_offset(self, address: int) -> int | None:
        """The file offset of link ``address`` (None when no file bytes of a ``PT_LOAD``
        hold it)."""
        for part in self.loads:
            if part.vaddr <= address < part.vaddr + part.filesz:
                return part.offset + (address - part.vaddr)
        return None

    def link_address(self, offset: int) -> int | None:
        """The link address file ``offset`` is loaded at (None when no ``PT_LOAD`` holds it)."""
        for part in self.loads:
            if part.offset <= offset < part.offset + part.filesz:
                return part.vaddr + (offset - part.offset)
        return None

    @property
    def uuid(self) -> str | None:
        """The build ID as lower-case hex digits (the image's UUID), if the file has one."""
        return None if self.build_id is None else self.build_id.hex()

    @property
    def relocatable(self) -> bool:
        """Whether the image is meant to be loaded at a base chosen at run time."""
        return self.elf_type in ("ET_DYN", "ET_REL")

    @property
    def link_base(self) -> int:
        """The lowest link address of the image's loadable parts (0 if it has none)."""
        if self.load_base is not None:
            return self.load_base
        return min((s.address for s in self.segments), default=0)

    @property
    def code_size(self) -> int:
        """Total bytes of executable code."""
        return sum(len(s.data) for s in self.segments)

    def load_offset(self, base: int | None) -> int:
        """What is added to link addresses when the image's first loadable byte is at ``base``."""
        return 0 if base is None else base - self.link_base

    def regions(
        self, base: int | None = None, space: MemSpace = MemSpace.ANY
    ) -> list[MemoryRegion]:
        """Memory regions of the code, at the link address or moved so the image starts at ``base``.

        ``base`` is where the first loadable segment goes: for a shared library or
        a position-independent executable linked at 0 it is the load bias, the
        address ``/proc/PID/maps`` shows for the file's first mapping.
        """
        delta = self.load_offset(base)
        mask = (1 << 64) - 1
        return [
            MemoryRegion((s.address + delta) & mask, s.data, space, f"{self.name}:{s.name}")
            for s in self.segments
        ]


def normalize_uuid(text: str) -> str:
    """Lower-case hex digits of a UUID or build ID written with or without dashes/braces."""
    return "".join(c for c in text.strip().lower() if c in "0123456789abcdef")


def format_uuid(build_id: bytes) -> str:
    """A build ID written as a UUID (first 16 bytes, dashed) when it is at least 16 bytes long."""
    if len(build_id) >= 16:
        return str(uuid_mod.UUID(bytes=build_id[:16]))
    return build_id.hex()


def uuid_matches(expected: str, actual: str | None) -> bool:
    """Whether an image UUID ``actual`` is the ``expected`` one.

    Both are compared as hex digits; a 32-digit UUID also matches a longer build
    ID (such as a 20-byte SHA-1) that it is the start of.
    """
    if actual is None:
        return False
    e = normalize_uuid(expected)
    a = normalize_uuid(actual)
    if not e:
        return True
    return e == a or (len(e) == 32 and a.startswith(e))


def _bad(name: str, message: str, offset: int | None = None) -> SnapshotError:
    return SnapshotError(f"ELF image: {message}", path=name, offset=offset)


def load_elf(data: bytes, name: str = "<elf>") -> ElfImage:
    """Read the executable code and build ID of the ELF file ``data`` (named ``name``)."""
    if data[:4] != _MAGIC:
        raise _bad(name, "not an ELF file (no \\x7fELF magic)", 0)
    try:
        from elftools.elf.elffile import ELFFile
    except ImportError:  # pragma: no cover - pyelftools is a dependency
        raise SnapshotError(
            "reading ELF images needs pyelftools (pip install pyelftools)", path=name
        ) from None
    try:
        elf = ELFFile(io.BytesIO(data))
        elf_type = str(elf["e_type"])
        image = ElfImage(
            name=name,
            elf_type=elf_type,
            machine=str(elf["e_machine"]),
            bits=int(elf.elfclass),
            entry=int(elf["e_entry"]),
            build_id=_build_id(elf),
        )
        if image.machine == "EM_ARM":
            image.cpu_arch, image.cpu_profile = _arm_attributes(elf)
        if elf_type in ("ET_EXEC", "ET_DYN"):
            _load_segments(elf, image, len(data))
        elif elf_type == "ET_REL":
            names = {sec.name for sec in elf.iter_sections()}
            if names & set(_MODULE_MARKS):
                _load_module(elf, image, len(data))
            else:
                _load_sections(elf, image, len(data))
        else:
            raise _bad(name, f"type {elf_type} has no code to load")
    except SnapshotError:
        raise
    except Exception as exc:  # pyelftools raises many kinds of errors on damaged files
        raise _bad(name, f"malformed file ({type(exc).__name__}: {exc})") from None
    return image


def _arm_attributes(elf: object) -> tuple[int | None, str | None]:
    """``Tag_CPU_arch`` and ``Tag_CPU_arch_profile`` of the ``aeabi`` attributes, if any.

    A damaged attributes section says nothing (it only narrows what inference tries).
    """
    from elftools.elf.elffile import ELFFile

    assert isinstance(elf, ELFFile)
    arch: int | None = None
    profile: str | None = None
    try:
        sec = elf.get_section_by_name(".ARM.attributes")
        if sec is None or not hasattr(sec, "iter_subsections"):
            return None, None
        for sub in sec.iter_subsections():
            for subsub in sub.iter_subsubsections():
                for attr in subsub.iter_attributes():
                    if not isinstance(attr.value, int):
                        continue
                    if str(attr.tag) == "TAG_CPU_ARCH":
                        arch = attr.value
                    elif str(attr.tag) == "TAG_CPU_ARCH_PROFILE" and 0 < attr.value < 128:
                        profile = chr(attr.value)
    except Exception:  # pyelftools raises many kinds of errors on damaged sections
        return arch, profile
    return arch, profile


def _load_segments(elf: object, image: ElfImage, size: int) -> None:
    from elftools.elf.elffile import ELFFile

    assert isinstance(elf, ELFFile)
    for index, seg in enumerate(elf.iter_segments()):
        if seg["p_type"] != "PT_LOAD":
            continue
        vaddr = int(seg["p_vaddr"])
        if image.load_base is None or vaddr < image.load_base:
            image.load_base = vaddr
        off = int(seg["p_offset"])
        filesz = int(seg["p_filesz"])
        executable = bool(int(seg["p_flags"]) & _PF_X)
        image.loads.append(LoadSegment(off, vaddr, filesz, int(seg["p_memsz"]), executable))
        if not executable:
            continue
        if filesz == 0:
            continue
        if off + filesz > size:
            raise _bad(
                image.name,
                f"segment {index} ends at {off + filesz:#x}, past the end of the file",
                off,
            )
        image.segments.append(ElfSegment(vaddr, bytes(seg.data()), f"segment{index}"))


def _load_sections(elf: object, image: ElfImage, size: int) -> None:
    from elftools.elf.elffile import ELFFile

    assert isinstance(elf, ELFFile)
    address = 0
    image.load_base = 0
    for sec in elf.iter_sections():
        flags = int(sec["sh_flags"])
        if sec["sh_type"] != "SHT_PROGBITS" or (flags & (_SHF_ALLOC | _SHF_EXECINSTR)) != (
            _SHF_ALLOC | _SHF_EXECINSTR
        ):
            continue
        length = int(sec["sh_size"])
        off = int(sec["sh_offset"])
        if length == 0:
            continue
        if off + length > size:
            raise _bad(image.name, f"section {sec.name} ends past the end of the file", off)
        align = max(int(sec["sh_addralign"]), 1)
        address = (address + align - 1) // align * align
        image.segments.append(ElfSegment(address, bytes(sec.data()), sec.name))
        address += length


def _veneers(elf: object, text_sections: set[int]) -> int:
    """AArch64 PLT veneers a module's core code needs: its ``CALL26``/``JUMP26``
    relocations to a symbol outside the section they patch, distinct (symbol, addend)
    pairs counted once per section (``count_plts`` of the kernel's ``module-plts.c``)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection

    assert isinstance(elf, ELFFile)
    total = 0
    seen = 0
    for sec in elf.iter_sections():
        if not isinstance(sec, RelocationSection) or not sec.is_RELA():
            continue
        target = int(sec["sh_info"])
        if target not in text_sections:
            continue
        symtab: Any = elf.get_section(int(sec["sh_link"]))
        pairs: set[tuple[int, int]] = set()
        for rel in sec.iter_relocations():
            seen += 1
            if seen > _MAX_RELOCATIONS:
                return total
            if int(rel["r_info_type"]) not in (_R_AARCH64_JUMP26, _R_AARCH64_CALL26):
                continue
            index = int(rel["r_info_sym"])
            try:
                shndx = symtab.get_symbol(index)["st_shndx"]
            except (AttributeError, IndexError, KeyError):
                continue
            if shndx == target:
                continue  # within the section: the branch reaches it
            addend = int(rel["r_addend"])
            if addend != 0:
                total += 1
            elif (index, addend) not in pairs:
                pairs.add((index, addend))
                total += 1
    return total


def _load_module(elf: object, image: ElfImage, size: int) -> None:
    """Lay a kernel module's executable sections out as the kernel's loader does."""
    from elftools.elf.elffile import ELFFile

    assert isinstance(elf, ELFFile)
    execs = []
    core_indices: set[int] = set()
    for index, sec in enumerate(elf.iter_sections()):
        flags = int(sec["sh_flags"])
        if (flags & (_SHF_ALLOC | _SHF_EXECINSTR)) != (_SHF_ALLOC | _SHF_EXECINSTR):
            continue
        execs.append((index, sec))
        if not sec.name.startswith(_INIT_PREFIX):
            core_indices.add(index)
    a64 = image.machine == "EM_AARCH64"
    veneers = _veneers(elf, core_indices) if a64 else None
    init_veneers = _veneers(elf, {i for i, _ in execs} - core_indices) if a64 else None

    def sized(sec: Any) -> tuple[int, int]:
        """(size, alignment) the loader gives a section."""
        length = int(sec["sh_size"])
        align = max(int(sec["sh_addralign"]), 1)
        if a64 and sec["sh_type"] == "SHT_NOBITS":
            if sec.name == ".plt":
                return ((veneers or 0) + 1) * _A64_VENEER, _A64_PLT_ALIGN
            if sec.name == ".init.plt":
                return ((init_veneers or 0) + 1) * _A64_VENEER, _A64_PLT_ALIGN
            if sec.name == ".text.ftrace_trampoline":
                return _A64_VENEER, _A64_PLT_ALIGN
        return length, align

    core: list[tuple[str, int, int, Any, int]] = []
    init: list[tuple[str, int, int, Any, int]] = []
    ends = {"core": 0, "init": 0}
    for index, sec in execs:
        part = "core" if index in core_indices else "init"
        length, align = sized(sec)
        at = (ends[part] + align - 1) // align * align
        ends[part] = at + length
        (core if part == "core" else init).append((sec.name, at, length, sec, index))
    code = [c for c in core if c[3]["sh_type"] == "SHT_PROGBITS" and c[2] > 0]
    anchor = next((c for c in code if c[0] == ".text"), code[0] if code else None)
    if anchor is None:
        image.load_base = 0
        image.module = ModuleLayout("", 0, 0, (), (), veneers)
        return
    anchor_address = int(anchor[3]["sh_addr"])
    shift = anchor_address - anchor[1]  # layout offset -> the module's own address
    for name, at, length, sec, _index in code:
        off = int(sec["sh_offset"])
        if off + length > size:
            raise _bad(image.name, f"section {name} ends past the end of the file", off)
        image.segments.append(ElfSegment(at + shift, bytes(sec.data()), name))
    image.load_base = shift
    image.module = ModuleLayout(
        anchor[0],
        anchor[1],
        anchor_address,
        tuple((n, at, ln) for n, at, ln, _, _ in core),
        tuple((n, at, ln) for n, at, ln, _, _ in init),
        veneers,
        _functions_in(elf, anchor[4], anchor_address),
    )


def _functions_in(elf: object, section: int, address: int) -> tuple[tuple[str, int], ...]:
    """(name, address) of the functions a relocatable object defines in ``section``, which
    is at ``address`` (their values are offsets in it)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    assert isinstance(elf, ELFFile)
    out: dict[str, int] = {}
    for sec in elf.iter_sections():
        if not isinstance(sec, SymbolTableSection):
            continue
        for sym in sec.iter_symbols():
            if sym["st_shndx"] == section and sym["st_info"]["type"] == "STT_FUNC" and sym.name:
                out.setdefault(sym.name, address + int(sym["st_value"]))
    return tuple(out.items())


def _build_id(elf: object) -> bytes | None:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import NoteSection

    assert isinstance(elf, ELFFile)
    for sec in elf.iter_sections():
        if isinstance(sec, NoteSection):
            for note in sec.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    desc = note["n_desc"]
                    return bytes.fromhex(desc) if isinstance(desc, str) else bytes(desc)
    from elftools.elf.segments import NoteSegment

    for seg in elf.iter_segments():
        if isinstance(seg, NoteSegment):
            for note in seg.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    desc = note["n_desc"]
                    return bytes.fromhex(desc) if isinstance(desc, str) else bytes(desc)
    return None
