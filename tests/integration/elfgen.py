"""Small ELF files written by hand for tests: an executable, shared object or relocatable object.

Input: code bytes and where they go; output: the bytes of an ELF32 or ELF64
little-endian file with a loadable code segment (or, for a relocatable object,
an executable section), an optional read-only segment before the code, an
optional GNU build-ID note, and a section table that pyelftools reads.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

ET_REL = 1
ET_EXEC = 2
ET_DYN = 3
EM_ARM = 40
EM_AARCH64 = 183


@dataclass
class Section:
    """A section to write: name, type, flags, address, bytes, alignment."""

    name: str
    sh_type: int
    flags: int
    address: int
    data: bytes
    align: int = 4
    size: int | None = None
    """sh_size when it is not the data's (a SHT_NOBITS section)."""
    link: int = 0
    info: int = 0
    entsize: int = 0


@dataclass
class Segment:
    """A program header to write, pointing at one of the sections."""

    p_type: int
    flags: int
    section: str


@dataclass
class ElfSpec:
    """What goes in the file."""

    e_type: int = ET_EXEC
    machine: int = EM_ARM
    bits: int = 32
    entry: int = 0
    sections: list[Section] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)


SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_RELA = 4
SHT_NOTE = 7
SHT_NOBITS = 8
SHF_ALLOC = 2
SHF_EXECINSTR = 4
PT_LOAD = 1
PT_NOTE = 4
PF_X = 1
PF_R = 4


def build_id_note(build_id: bytes) -> bytes:
    """A GNU build-ID note (``NT_GNU_BUILD_ID``)."""
    name = b"GNU\x00"
    desc = build_id + bytes(-len(build_id) % 4)
    return struct.pack("<III", 4, len(build_id), 3) + name + desc


def write_elf(spec: ElfSpec) -> bytes:
    """The bytes of the ELF file ``spec`` describes."""
    is64 = spec.bits == 64
    ehsize = 64 if is64 else 52
    phentsize = 56 if is64 else 32
    shentsize = 64 if is64 else 40
    phnum = len(spec.segments)
    pos = ehsize + phnum * phentsize
    offsets: dict[str, int] = {}
    body = bytearray()
    for sec in spec.sections:
        pad = -(pos + len(body)) % max(sec.align, 1)
        body += bytes(pad)
        offsets[sec.name] = pos + len(body)
        body += sec.data
    names = b"\x00" + b"".join(s.name.encode() + b"\x00" for s in spec.sections) + b".shstrtab\x00"
    shstr_off = pos + len(body)
    body += names
    body += bytes(-(pos + len(body)) % 8)
    shoff = pos + len(body)
    shnum = len(spec.sections) + 2

    out = bytearray()
    ident = b"\x7fELF" + bytes([2 if is64 else 1, 1, 1]) + bytes(9)
    if is64:
        out += ident + struct.pack(
            "<HHIQQQIHHHHHH",
            spec.e_type,
            spec.machine,
            1,
            spec.entry,
            ehsize if phnum else 0,
            shoff,
            0,
            ehsize,
            phentsize,
            phnum,
            shentsize,
            shnum,
            shnum - 1,
        )
    else:
        out += ident + struct.pack(
            "<HHIIIIIHHHHHH",
            spec.e_type,
            spec.machine,
            1,
            spec.entry,
            ehsize if phnum else 0,
            shoff,
            0x05000000 if spec.machine == EM_ARM else 0,
            ehsize,
            phentsize,
            phnum,
            shentsize,
            shnum,
            shnum - 1,
        )
    by_name = {s.name: s for s in spec.sections}
    for seg in spec.segments:
        sec = by_name[seg.section]
        off = offsets[sec.name]
        size = len(sec.data)
        if is64:
            out += struct.pack(
                "<IIQQQQQQ", seg.p_type, seg.flags, off, sec.address, sec.address, size, size, 4
            )
        else:
            out += struct.pack(
                "<IIIIIIII", seg.p_type, off, sec.address, sec.address, size, size, seg.flags, 4
            )
    out += body
    # Section headers: null, the sections, .shstrtab.
    name_pos = 1
    headers = [bytes(shentsize)]
    for sec in spec.sections:
        fields = (
            name_pos,
            sec.sh_type,
            sec.flags,
            sec.address,
            offsets[sec.name],
            len(sec.data) if sec.size is None else sec.size,
            sec.link,
            sec.info,
            sec.align,
            sec.entsize,
        )
        fmt = "<IIQQQQIIQQ" if is64 else "<IIIIIIIIII"
        headers.append(struct.pack(fmt, *fields))
        name_pos += len(sec.name) + 1
    fields = (name_pos, SHT_STRTAB, 0, 0, shstr_off, len(names), 0, 0, 1, 0)
    headers.append(struct.pack("<IIQQQQIIQQ" if is64 else "<IIIIIIIIII", *fields))
    out += b"".join(headers)
    return bytes(out)


def executable(
    code: bytes,
    address: int,
    *,
    e_type: int = ET_EXEC,
    build_id: bytes | None = None,
    rodata_before: int = 0,
    bits: int = 32,
) -> bytes:
    """An executable or shared object with ``code`` at ``address``.

    ``rodata_before`` bytes of read-only data are loaded below the code (as in a
    position-independent executable whose first segment holds headers and data).
    """
    spec = ElfSpec(e_type=e_type, bits=bits, machine=EM_AARCH64 if bits == 64 else EM_ARM)
    spec.entry = address
    if rodata_before:
        spec.sections.append(
            Section(".rodata", SHT_PROGBITS, SHF_ALLOC, address - rodata_before, bytes(16))
        )
        spec.segments.append(Segment(PT_LOAD, PF_R, ".rodata"))
    spec.sections.append(Section(".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, address, code))
    spec.segments.append(Segment(PT_LOAD, PF_R | PF_X, ".text"))
    if build_id is not None:
        spec.sections.append(
            Section(".note.gnu.build-id", SHT_NOTE, SHF_ALLOC, 0, build_id_note(build_id))
        )
        spec.segments.append(Segment(PT_NOTE, PF_R, ".note.gnu.build-id"))
    return write_elf(spec)


def relocatable(texts: list[tuple[str, bytes, int]]) -> bytes:
    """A relocatable object (a kernel module): executable sections (name, bytes, alignment)."""
    spec = ElfSpec(e_type=ET_REL)
    spec.sections.append(Section(".data", SHT_PROGBITS, SHF_ALLOC, 0, b"\x01\x02\x03\x04"))
    for name, data, align in texts:
        spec.sections.append(Section(name, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0, data, align))
    return write_elf(spec)


R_AARCH64_CALL26 = 283


def kernel_module(
    text: bytes,
    *,
    text_align: int = 16,
    init_text: bytes = b"",
    calls: Sequence[str] = (),
    build_id: bytes | None = None,
    functions: dict[str, int] | None = None,
) -> bytes:
    """An AArch64 Linux kernel module as a compiler writes it (``ET_REL``): a ``.plt``
    and ``.text.ftrace_trampoline`` the loader sizes (``SHT_NOBITS``, 1 byte), ``.text``
    (aligned to ``text_align``), ``.init.text``, ``.modinfo``, and a ``R_AARCH64_CALL26``
    relocation in ``.text`` (at 0, 4, ...) to each undefined symbol named in ``calls``
    (repeated names are the same symbol); ``functions`` are defined in ``.text`` at their
    offsets."""
    ax = SHF_ALLOC | SHF_EXECINSTR
    names = list(dict.fromkeys(calls))
    defined = dict(functions or {})
    strtab = b"\x00" + b"".join(n.encode() + b"\x00" for n in [*names, *defined])
    syms = bytes(24)  # the null symbol
    where: dict[str, int] = {}
    pos = 1
    for k, n in enumerate(names):
        where[n] = k + 1
        # st_name, st_info (GLOBAL NOTYPE), st_other, st_shndx (UNDEF), value, size
        syms += struct.pack("<IBBHQQ", pos, 0x10, 0, 0, 0, 0)
        pos += len(n) + 1
    for n, value in defined.items():
        # GLOBAL FUNC in section 3 (.text)
        syms += struct.pack("<IBBHQQ", pos, 0x12, 0, 3, value, 4)
        pos += len(n) + 1
    relas = b"".join(
        struct.pack("<QQq", 4 * k, (where[n] << 32) | R_AARCH64_CALL26, 0)
        for k, n in enumerate(calls)
    )
    # Section indices: 0 null, then these in order.
    spec = ElfSpec(e_type=ET_REL, machine=EM_AARCH64, bits=64)
    spec.sections += [
        Section(".plt", SHT_NOBITS, ax, 0, b"", 16, size=1),  # 1
        Section(".text.ftrace_trampoline", SHT_NOBITS, ax, 0, b"", 1, size=1),  # 2
        Section(".text", SHT_PROGBITS, ax, 0, text, text_align),  # 3
        Section(".init.text", SHT_PROGBITS, ax, 0, init_text or bytes(4), 4),  # 4
        Section(".modinfo", SHT_PROGBITS, SHF_ALLOC, 0, b"license=GPL\x00", 1),  # 5
        Section(".symtab", SHT_SYMTAB, 0, 0, syms, 8, link=7, info=1, entsize=24),  # 6
        Section(".strtab", SHT_STRTAB, 0, 0, strtab, 1),  # 7
        Section(".rela.text", SHT_RELA, 0, 0, relas, 8, link=6, info=3, entsize=24),  # 8
    ]
    if build_id is not None:
        spec.sections.append(
            Section(".note.gnu.build-id", SHT_NOTE, SHF_ALLOC, 0, build_id_note(build_id))
        )
    return write_elf(spec)
