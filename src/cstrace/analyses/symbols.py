"""Function names and source lines of program addresses, from ELF symbol tables and DWARF.

Input: ELF program images (a path or the images a :class:`~cstrace.trace.Trace`
carries, each with its *bias*: run-time address minus link address). Output:
:class:`Symbols`, which answers, for a run-time address,

- :meth:`Symbols.function`: the :class:`Function` holding it (``STT_FUNC``
  symbols, names demangled, with where DWARF declares the function);
- :meth:`Symbols.line`: the :class:`SourceLine` of the DWARF line-table row
  covering it (rows cover ``[address, next row's address)`` of one sequence);
- :meth:`Symbols.name`: ``function+0x1c`` (or the address in hex);

and lists every function (:meth:`Symbols.functions`) and every source line
that has code (:meth:`Symbols.line_table`, so lines that never ran can be
reported), and reads source lines (:meth:`Symbols.source`).

Lookups bisect sorted arrays and are cached per address: a trace asks about
millions of addresses, mostly the same few thousand. Symbol tables are read
when an image is added; DWARF line tables when first needed (a kernel image's
take long, and a disassembly without ``file:line`` never needs them).

ARM specifics (ELF for the Arm Architecture, §5.5.3, §5.6.5): the mapping
symbols ``$a``, ``$t``, ``$x`` and ``$d`` (optionally ``$t.name``) mark where
A32, T32, A64 code and data start; they are not functions, and
:meth:`Symbols.isa` answers from them. Bit 0 of a 32-bit ARM ``STT_FUNC``
value says Thumb; the function starts at the value with bit 0 clear.

A recording whose processes map binaries at run time (perf.data) has a
:class:`~cstrace.memory.binaries.BinaryResolver`: addresses that no image
added here covers are looked up through it, with the traced context ID, and
answered from that binary's own tables.
"""

from __future__ import annotations

import bisect
import io
import os
import posixpath
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cstrace.elements import Isa
from cstrace.errors import CstraceError, SnapshotError
from cstrace.memory.binaries import Binary, BinaryResolver
from cstrace.trace import Blob, Origin, Trace

__all__ = ["Function", "SourceLine", "Symbols", "demangle"]

_MASK64 = (1 << 64) - 1
_MAX_SOURCE_BYTES = 16 << 20  # a source file larger than this is not read
_MAPPING_ISAS = {"a": Isa.A32, "t": Isa.T32, "x": Isa.A64}
_CLI = Origin("command line")  # what cstrace.inputs.extras gives the images it adds


@dataclass(frozen=True, slots=True)
class Function:
    """A function: ``[start, end)`` in run-time addresses, in one image.

    ``name`` is demangled (C++, Rust), ``raw_name`` as the symbol table has
    it; ``file`` and ``line`` are where DWARF declares it (None without
    DWARF).
    """

    name: str
    raw_name: str
    start: int
    end: int
    image: str
    file: str | None = None
    line: int | None = None

    def __contains__(self, address: object) -> bool:
        return isinstance(address, int) and self.start <= address < self.end


@dataclass(frozen=True, slots=True, order=True)
class SourceLine:
    """A line of a source file, the file's path as DWARF gives it (joined with its folder)."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# -- demangling ---------------------------------------------------------------------------
#
# pydemumble wraps demumble, which demangles Itanium C++, both Rust manglings (legacy, with
# its hash dropped, and v0) and Swift in-process: one library for the languages traced code
# is written in, and no process per name. Without it, binutils' c++filt (one process for
# all the names of an image; it knows C++ and Rust too); without either, names stay raw.


def _demangle_c_filt(names: Sequence[str]) -> list[str]:
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return list(names)
    try:
        done = subprocess.run(
            [tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return list(names)
    out = done.stdout.split("\n")
    return out[: len(names)] if len(out) >= len(names) else list(names)


def demangle(names: Sequence[str]) -> list[str]:
    """The demangled forms of ``names`` (a name that is not mangled is given back as it is)."""
    try:
        from pydemumble import demangle as one
    except ImportError:  # pragma: no cover - pydemumble is a dependency
        return _demangle_c_filt(names)
    out: list[str] = []
    for name in names:
        if name.startswith(("_Z", "_R", "__Z", "$s", "_$s")):
            got = one(name)
            out.append(got if got else name)
        else:
            out.append(name)
    return out


# -- one ELF file, in link addresses ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sym:
    start: int
    end: int
    raw: str
    binding: int  # 0 global, 1 weak, 2 local: the lower wins at one address


class _Lines:
    """The DWARF line table of one ELF file: sorted row starts, ends and lines."""

    __slots__ = ("decls", "ends", "lines", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.lines: list[SourceLine] = []
        self.decls: dict[int, SourceLine] = {}
        """Link address of a subprogram's entry → where DWARF declares it."""


class _ElfFile:
    """Symbols and (loaded on demand) line table of one ELF file, in link addresses."""

    def __init__(self, data: bytes, name: str) -> None:
        from elftools.elf.elffile import ELFFile

        self.name = name
        self._data = data
        try:
            elf = ELFFile(io.BytesIO(data))
            self.arm32 = elf["e_machine"] == "EM_ARM"
            self.link_base = min(
                (int(seg["p_vaddr"]) for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"),
                default=0,
            )
            self.syms, self.mapping = self._read_symbols(elf)
            self.has_dwarf = elf.has_dwarf_info()
        except CstraceError:
            raise
        except Exception as exc:  # pyelftools raises many kinds of errors on damaged files
            raise SnapshotError(
                f"malformed ELF file ({type(exc).__name__}: {exc})", path=name
            ) from None
        self._lines: _Lines | None = None
        self._lines_error: SnapshotError | None = None
        """Why the line table could not be read (given again to every later ask)."""

    def _read_symbols(self, elf: Any) -> tuple[list[_Sym], list[tuple[int, Isa | None]]]:
        from elftools.elf.sections import SymbolTableSection

        found: dict[int, _Sym] = {}
        mapping: list[tuple[int, Isa | None]] = []
        sections = [s for s in elf.iter_sections() if isinstance(s, SymbolTableSection)]
        # The full table when there is one; the dynamic one only for a stripped file.
        sections.sort(key=lambda s: s["sh_type"] != "SHT_SYMTAB")
        if sections and sections[0]["sh_type"] == "SHT_SYMTAB":
            sections = sections[:1]
        binding_rank = {"STB_GLOBAL": 0, "STB_WEAK": 1}
        for sec in sections:
            for sym in sec.iter_symbols():
                name = sym.name
                kind = sym["st_info"]["type"]
                shndx = sym["st_shndx"]
                if shndx == "SHN_UNDEF" or not name:
                    continue
                value = int(sym["st_value"])
                if name.startswith("$"):
                    # A mapping symbol: where code of one instruction set, or data, starts.
                    tag = name[1:2]
                    if len(name) == 2 or name[2] == ".":
                        mapping.append((value, _MAPPING_ISAS.get(tag)))
                    continue
                if kind not in ("STT_FUNC", "STT_GNU_IFUNC"):
                    continue
                if self.arm32:
                    value &= ~1
                rank = binding_rank.get(sym["st_info"]["bind"], 2)
                size = int(sym["st_size"])
                old = found.get(value)
                if old is None or (rank, -size, name) < (old.binding, old.start - old.end, old.raw):
                    found[value] = _Sym(value, value + size, name, rank)
        syms = sorted(found.values(), key=lambda s: s.start)
        # A function of size 0 reaches the next one (hand-written assembly often has no size).
        fixed: list[_Sym] = []
        for i, s in enumerate(syms):
            if s.end <= s.start:
                nxt = syms[i + 1].start if i + 1 < len(syms) else s.start + 4
                s = _Sym(s.start, max(nxt, s.start + 2), s.raw, s.binding)
            fixed.append(s)
        mapping.sort(key=lambda m: m[0])
        return fixed, mapping

    def lines(self) -> _Lines:
        """The line table, read from DWARF the first time it is asked for."""
        if self._lines_error is not None:
            raise self._lines_error
        if self._lines is None:
            self._lines = _Lines()
            if self.has_dwarf:
                where: list[tuple[str, int]] = []
                try:
                    self._read_lines(self._lines, where)
                except Exception as exc:  # pyelftools raises many kinds of errors on bad DWARF
                    section, offset = where[-1] if where else (".debug_info", 0)
                    self._lines_error = SnapshotError(
                        f"malformed DWARF in {section} at its offset {offset:#x} "
                        f"({type(exc).__name__}: {exc}); no source lines can be given",
                        path=self.name,
                        offset=self._file_offset(section, offset),
                    )
                    raise self._lines_error from None
        return self._lines

    def _file_offset(self, section: str, offset: int) -> int | None:
        """The file offset of ``offset`` in ``section``, or None when it cannot be found."""
        from elftools.elf.elffile import ELFFile

        try:
            sec = ELFFile(io.BytesIO(self._data)).get_section_by_name(section)
        except Exception:  # the offset is only a help in the message
            return None
        return None if sec is None else int(sec["sh_offset"]) + offset

    def _read_lines(self, out: _Lines, where: list[tuple[str, int]]) -> None:
        """Fill ``out``; ``where`` gets the section and offset being read, for messages."""
        from elftools.elf.elffile import ELFFile

        elf = ELFFile(io.BytesIO(self._data))
        dwarf = elf.get_dwarf_info()
        rows: list[tuple[int, int, SourceLine]] = []
        where.append((".debug_info", 0))
        for cu in dwarf.iter_CUs():
            where.append((".debug_info", int(cu.cu_offset)))
            top = cu.get_top_DIE()
            comp_dir = _text(top.attributes.get("DW_AT_comp_dir"))
            stmt = top.attributes.get("DW_AT_stmt_list")
            if stmt is not None:
                where.append((".debug_line", int(stmt.value)))
            program = dwarf.line_program_for_CU(cu)
            if program is None:
                continue
            files = _file_names(program, comp_dir)
            first = 0 if program.header["version"] >= 5 else 1
            prev: Any = None
            for entry in program.get_entries():
                state = entry.state
                if state is None:
                    continue
                if prev is not None and state.address > prev.address:
                    index = prev.file - first
                    if 0 <= index < len(files) and prev.line > 0:
                        line = SourceLine(files[index], prev.line)
                        rows.append((prev.address, state.address, line))
                prev = None if state.end_sequence else state
            where.append((".debug_info", int(cu.cu_offset)))
            for die in cu.iter_DIEs():
                if die.tag != "DW_TAG_subprogram":
                    continue
                low = die.attributes.get("DW_AT_low_pc")
                decl_file = die.attributes.get("DW_AT_decl_file")
                decl_line = die.attributes.get("DW_AT_decl_line")
                if low is None or decl_file is None or decl_line is None:
                    continue
                index = int(decl_file.value) - first
                if 0 <= index < len(files):
                    address = int(low.value) & (~1 if self.arm32 else _MASK64)
                    out.decls.setdefault(address, SourceLine(files[index], int(decl_line.value)))
        rows.sort(key=lambda r: (r[0], -r[1]))
        last_end = -1
        for start, end, line in rows:
            if start < last_end:
                continue  # overlapping rows (folded code): the first keeps the address
            out.starts.append(start)
            out.ends.append(end)
            out.lines.append(line)
            last_end = end


def _text(attr: Any) -> str:
    if attr is None:
        return ""
    value = attr.value
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _file_names(program: Any, comp_dir: str) -> list[str]:
    """The paths of a line program's files, in its own order (index 0 first)."""
    header = program.header
    version = int(header["version"])
    dirs = [
        d.decode("utf-8", "replace") if isinstance(d, bytes) else str(d)
        for d in header["include_directory"]
    ]
    out: list[str] = []
    for entry in header["file_entry"]:
        raw = entry.name
        name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        index = int(entry.dir_index)
        # Directory 0 is the compilation directory (DWARF 5 lists it, DWARF 4
        # implies it); the others are absolute or relative to it.
        if version >= 5:
            base = dirs[0] if dirs else comp_dir
            folder = dirs[index] if 0 < index < len(dirs) else ""
        else:
            base = comp_dir
            folder = dirs[index - 1] if 0 < index <= len(dirs) else ""
        out.append(posixpath.normpath(posixpath.join(base, folder, name)))
    return out


def _source_file(file: str, folder: str) -> Path | None:
    """Where source ``file`` is (relative: from here, else from ``folder``), if it is a
    readable file of at most :data:`_MAX_SOURCE_BYTES`."""
    candidates = [Path(file)]
    if not os.path.isabs(file) and folder:
        candidates.append(Path(folder) / file)
    for p in candidates:
        try:
            if p.is_file() and p.stat().st_size <= _MAX_SOURCE_BYTES and os.access(p, os.R_OK):
                return p
        except OSError:
            continue
    return None


def _read_source(file: str, folder: str) -> list[str] | None:
    """The lines of source ``file`` (relative: from here, else from ``folder``), or None."""
    p = _source_file(file, folder)
    if p is None:
        return None
    try:
        return p.read_bytes().decode("utf-8", "replace").splitlines()
    except OSError:
        return None


# -- many images, in run-time addresses ---------------------------------------------------


class _Placed:
    """One ELF file at a bias, in the merged tables."""

    __slots__ = ("bias", "elf")

    def __init__(self, elf: _ElfFile, bias: int) -> None:
        self.elf = elf
        self.bias = bias


class Symbols:
    """Functions and source lines of program images, by run-time address (module doc)."""

    def __init__(self) -> None:
        self._placed: list[_Placed] = []
        self._files: dict[str, _ElfFile] = {}
        self._resolver: BinaryResolver | None = None
        self._blobs: dict[str, Blob] = {}
        self._by_binary: dict[tuple[str, str | None], Symbols | None] = {}
        self._dirty = True
        self._fstarts: list[int] = []
        self._funcs: list[Function] = []
        self._lines_ready = False
        self._lines_error: CstraceError | None = None
        self._lstarts: list[int] = []
        self._lends: list[int] = []
        self._llines: list[SourceLine] = []
        self._mstarts: list[int] = []
        self._misas: list[Isa | None] = []
        self._fcache: dict[int, Function | None] = {}
        self._lcache: dict[int, SourceLine | None] = {}
        self._scache: dict[str, list[str] | None] = {}
        self._known_files: dict[str, str] | None = None
        self._table: dict[SourceLine, list[int]] | None = None
        self._ranges: dict[SourceLine, list[tuple[int, int]]] | None = None

    # -- adding images ---------------------------------------------------------------

    def add_elf(self, path: str | Path, bias: int = 0) -> None:
        """Add the ELF file at ``path``, its link addresses moved by ``bias`` (run-time minus
        link address); a located :class:`~cstrace.errors.SnapshotError` if it is missing or
        not an ELF file."""
        name = str(path)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise SnapshotError(f"cannot read the ELF file: {exc.strerror}", path=name) from None
        self.add_elf_bytes(data, name, bias)

    def add_elf_bytes(self, data: bytes, name: str, bias: int = 0) -> None:
        """Add an ELF file given by its contents (``name`` says which, in messages)."""
        if data[:4] != b"\x7fELF":
            raise SnapshotError("not an ELF file (no \\x7fELF magic)", path=name, offset=0)
        elf = self._files.get(name)
        if elf is None:
            elf = self._files[name] = _ElfFile(data, name)
        self._placed.append(_Placed(elf, bias))
        self._invalidate()

    def add_elf_at(self, path: str | Path, base: int) -> None:
        """Add the ELF file at ``path`` with its first loadable segment at ``base``."""
        self.add_elf(path, 0)
        placed = self._placed[-1]
        placed.bias = base - placed.elf.link_base
        self._invalidate()

    def _invalidate(self) -> None:
        self._dirty = True
        self._lines_ready = False
        self._lines_error = None
        self._fcache.clear()
        self._lcache.clear()
        self._known_files = None
        self._table = None
        self._ranges = None

    @classmethod
    def from_trace(cls, trace: Trace, images: Iterable[str] = ()) -> Symbols:
        """The symbols of ``trace``'s ELF images, placed as code memory places them, plus
        ``images`` (``FILE`` or ``FILE@BASE``, as ``--image`` takes them).

        Without an event log, images are placed at their link address or moved to their
        base; with one (a recording, a package with an event log), they are found
        through the trace's binary resolver (:class:`~cstrace.memory.locate.LogBinaries`
        by default) with the context of each lookup, except the images given on the
        command line with a base, which are placed there.
        Images whose files cannot be read are left out (decoding reports them);
        a bad file among ``images`` is an error.
        """
        from cstrace.inputs.extras import split_at
        from cstrace.memory.build import CodeMemories
        from cstrace.memory.locate import LogBinaries

        resolver = trace.binaries
        if resolver is None and trace.events is not None:
            # An event log places images per process and over time: as the profiles do.
            resolver = LogBinaries(CodeMemories(trace).locator())
        out = cls()
        placed_names: set[str] = set()
        for image in trace.images:
            if image.pid is not None or image.core is not None:
                continue
            if resolver is not None and (image.base is None or image.origin != _CLI):
                continue  # placed by the memory maps or the event log, per process
            # An image named on the command line must be good; the input's own are taken
            # where they can be read (decoding reports the others).
            strict = image.origin == _CLI
            try:
                if not image.file.exists():
                    continue
                data = image.file.read()
                if data[:4] != b"\x7fELF":
                    continue
                out.add_elf_bytes(data, image.file.name)
            except CstraceError:
                if strict:
                    raise
                continue
            placed = out._placed[-1]
            if image.base is not None:
                placed.bias = image.base - placed.elf.link_base
            placed_names.add(image.file.name)
        for text in images:
            name, base = split_at(text, "image")
            if name in placed_names:
                continue
            if base is None:
                out.add_elf(name)
            else:
                out.add_elf_at(name, base)
        if resolver is not None:
            out.add_resolver(resolver, [(i.uuid, i.file) for i in trace.images])
        out._invalidate()
        return out

    def add_resolver(
        self, resolver: BinaryResolver, files: Iterable[tuple[str | None, Blob]] = ()
    ) -> None:
        """Look up the addresses no image added covers through ``resolver`` (a recording's
        processes' memory maps), with the traced context ID.

        A binary's ELF file is the one of ``files`` (build ID or None, file) with its
        build ID or its name, else the file its ELF image was read from.
        """
        self._resolver = resolver
        for uuid, blob in files:
            if uuid:
                self._blobs[uuid.lower().replace("-", "")] = blob
            self._blobs[blob.name] = blob
        self._invalidate()

    # -- merged tables -----------------------------------------------------------------

    def _build(self) -> None:
        funcs: list[Function] = []
        mapping: list[tuple[int, Isa | None]] = []
        for placed in self._placed:
            elf, bias = placed.elf, placed.bias
            base = os.path.basename(elf.name)
            names = demangle([s.raw for s in elf.syms])
            for s, name in zip(elf.syms, names, strict=True):
                start, end = (s.start + bias) & _MASK64, (s.end + bias) & _MASK64
                funcs.append(Function(name, s.raw, start, end, base))
            mapping.extend(((a + bias) & _MASK64, isa) for a, isa in elf.mapping)
        funcs.sort(key=lambda f: f.start)
        kept: list[Function] = []
        for f in funcs:
            if kept and f.start < kept[-1].end:
                if f.start == kept[-1].start:
                    continue  # the same function in two images: the first added wins
                last = kept[-1]
                kept[-1] = Function(
                    last.name, last.raw_name, last.start, f.start, last.image, last.file, last.line
                )
            kept.append(f)
        mapping.sort(key=lambda m: m[0])
        self._funcs = kept
        self._fstarts = [f.start for f in kept]
        self._mstarts = [m[0] for m in mapping]
        self._misas = [m[1] for m in mapping]
        self._dirty = False

    def _build_lines(self) -> None:
        if self._dirty:
            self._build()
        rows: list[tuple[int, int, SourceLine]] = []
        decls: dict[int, SourceLine] = {}
        for placed in self._placed:
            table = placed.elf.lines()
            bias = placed.bias
            rows.extend(
                ((s + bias) & _MASK64, (e + bias) & _MASK64, ln)
                for s, e, ln in zip(table.starts, table.ends, table.lines, strict=True)
            )
            for a, ln in table.decls.items():
                decls.setdefault((a + bias) & _MASK64, ln)
        rows.sort(key=lambda r: r[0])
        self._lstarts = [r[0] for r in rows]
        self._lends = [r[1] for r in rows]
        self._llines = [r[2] for r in rows]
        if decls:
            self._funcs = [
                Function(f.name, f.raw_name, f.start, f.end, f.image, d.file, d.line)
                if (d := decls.get(f.start)) is not None
                else f
                for f in self._funcs
            ]
            self._fcache.clear()
        self._lines_ready = True

    # -- lookups ----------------------------------------------------------------------------

    def function(self, address: int, context_id: int | None = None) -> Function | None:
        """The function holding run-time ``address`` (``context_id``: the traced context, for
        a recording's per-process binaries), or None."""
        cache = self._fcache
        key = address if context_id is None else (context_id << 64) | address
        if key in cache:
            return cache[key]
        if not self._lines_ready:
            self._build_lines_quietly()
        funcs = self._funcs
        i = bisect.bisect_right(self._fstarts, address) - 1
        got: Function | None = None
        if i >= 0 and address < funcs[i].end:
            got = funcs[i]
        elif self._resolver is not None:
            got = self._via_resolver(address, context_id, lambda s, a: s.function(a))
        cache[key] = got
        return got

    def _build_lines_quietly(self) -> None:
        """Function declarations need DWARF; a damaged one leaves functions without them
        (and the source-line lookups give its error)."""
        try:
            self._build_lines()
        except CstraceError as exc:
            if self._dirty:
                self._build()
            self._lines_ready = True
            self._lines_error = exc

    def _lines_or_error(self) -> None:
        """Build the line tables; a damaged line table is an error for whoever needs lines."""
        if not self._lines_ready:
            self._build_lines()
        if self._lines_error is not None:
            raise self._lines_error

    def line(self, address: int, context_id: int | None = None) -> SourceLine | None:
        """The source line of the line-table row covering ``address``, or None."""
        cache = self._lcache
        key = address if context_id is None else (context_id << 64) | address
        if key in cache:
            return cache[key]
        self._lines_or_error()
        i = bisect.bisect_right(self._lstarts, address) - 1
        got: SourceLine | None = None
        if i >= 0 and address < self._lends[i]:
            got = self._llines[i]
        elif self._resolver is not None:
            got = self._via_resolver(address, context_id, lambda s, a: s.line(a))
        cache[key] = got
        return got

    def _via_resolver(self, address: int, context_id: int | None, ask: Any) -> Any:
        assert self._resolver is not None
        mapping = self._resolver.find(address, context_id, 0)
        if mapping is None:
            return None
        inner = self._for_binary(mapping.binary)
        if inner is None:
            return None
        got = ask(inner, mapping.binary_address(address))
        if isinstance(got, Function):
            d = mapping.delta
            return Function(
                got.name, got.raw_name, got.start + d, got.end + d, got.image, got.file, got.line
            )
        return got

    def _for_binary(self, binary: Binary) -> Symbols | None:
        key = binary.key
        if key in self._by_binary:
            return self._by_binary[key]
        found: Symbols | None = None
        blob = None
        if binary.build_id:
            blob = self._blobs.get(binary.build_id.lower())
        if blob is None and binary.image is not None:
            blob = self._blobs.get(binary.image.name)
        data: bytes | None = None
        name = binary.path
        try:
            if blob is not None and blob.exists():
                data = blob.read()
                name = blob.name
            elif binary.image is not None and os.path.isfile(binary.image.name):
                name = binary.image.name
                data = Path(name).read_bytes()
        except (OSError, CstraceError):
            data = None
        if data is not None and data[:4] == b"\x7fELF":
            found = Symbols()
            try:
                found.add_elf_bytes(data, name)
            except CstraceError:
                found = None
        self._by_binary[key] = found
        return found

    def isa(self, address: int) -> Isa | None:
        """The instruction set the ARM mapping symbols say ``address`` is in (None: data, or
        no mapping symbol before it)."""
        if self._dirty:
            self._build()
        i = bisect.bisect_right(self._mstarts, address) - 1
        return self._misas[i] if i >= 0 else None

    def name(self, address: int, context_id: int | None = None) -> str:
        """``function+0x1c`` (``function`` at its start), or the address in hex."""
        f = self.function(address, context_id)
        if f is None:
            return f"{address:#x}"
        off = address - f.start
        return f"{f.name}+{off:#x}" if off else f.name

    def functions(self) -> Sequence[Function]:
        """Every function of the images added, sorted by start address."""
        if not self._lines_ready:
            self._build_lines_quietly()
        return self._funcs

    def line_table(self) -> Mapping[SourceLine, Sequence[int]]:
        """Every source line that has code, with the run-time addresses of its rows."""
        self._lines_or_error()
        if self._table is None:
            out: dict[SourceLine, list[int]] = {}
            for start, line in zip(self._lstarts, self._llines, strict=True):
                out.setdefault(line, []).append(start)
            self._table = out
        return self._table

    def line_ranges(self) -> Mapping[SourceLine, Sequence[tuple[int, int]]]:
        """Every source line that has code, with the ``[start, end)`` address ranges of its
        rows."""
        self._lines_or_error()
        if self._ranges is None:
            out: dict[SourceLine, list[tuple[int, int]]] = {}
            for start, end, line in zip(self._lstarts, self._lends, self._llines, strict=True):
                out.setdefault(line, []).append((start, end))
            self._ranges = out
        return self._ranges

    def source(self, file: str, line: int) -> str | None:
        """The text of ``line`` (1-based) of source ``file``, without its line end; None when
        the file is not there or DWARF does not name it (nothing else is ever read).

        A relative path is looked for from the current folder, then from the folder of
        the ELF file whose DWARF names it (a build tree moved along with its program)."""
        lines = self._scache.get(file)
        if file not in self._scache:
            if self._known_files is None:
                self._lines_or_error()
                known: dict[str, str] = {}
                for placed in self._placed:
                    folder = os.path.dirname(placed.elf.name)
                    table = placed.elf.lines()
                    for ln in (*table.lines, *table.decls.values()):
                        known.setdefault(ln.file, folder)
                self._known_files = known
            lines = None
            where = self._known_files.get(file)
            if where is not None:
                lines = _read_source(file, where)
            self._scache[file] = lines
        if lines is None or not 1 <= line <= len(lines):
            return None
        return lines[line - 1]

    def source_path(self, file: str) -> str | None:
        """A path other programs can open source ``file`` by (the name DWARF gives when it
        opens from here, else the file next to the ELF that names it), or None when it is
        not on disk or DWARF does not name it."""
        if self._known_files is None:
            self.source(file, 1)  # builds the table of files DWARF names
        where = (self._known_files or {}).get(file)
        if where is None:
            return None
        found = _source_file(file, where)
        if found is None:
            return None
        return file if str(found) == file else str(found.resolve())

    def missing_sources(self) -> list[str]:
        """The source files :meth:`source` was asked for that DWARF names but that could not
        be read (missing, unreadable or too big), sorted."""
        known = self._known_files or {}
        return sorted(f for f, lines in self._scache.items() if lines is None and f in known)
