"""Which program binary a trace address falls into, and where in that binary.

Input: the program images and memory dumps of a :class:`~cstrace.trace.Trace`
(or, for a recording that knows its processes' mappings, whatever the input
adapter provides); output: :class:`Mapping` records that turn an address the
trace gives (a run-time address in some process) into an address of a
:class:`Binary` (its link-time virtual address, which is what profile formats
and compilers speak).

The seam is :class:`BinaryResolver`: one method, ``find(address, context_id,
trace_id, time)``, returning the :class:`Mapping` that holds ``address`` in the
address space the trace is in (``context_id`` is the traced CONTEXTIDR value,
which Linux sets to the thread ID; ``trace_id`` tells which trace source, hence
which CPU, asked; ``time``, when known, the event-log time the code ran at, for
inputs whose address spaces change: after an exec the same address is another
program), or None. An input adapter that knows the processes' memory
maps (perf.data's MMAP2 records) makes its mappings with
:meth:`Mapping.from_file_offset` from (start, end, file offset of start, binary)
and answers ``find`` from them; :func:`image_resolver` answers it from a
trace's images and dumps, which are the same in every context.

A :class:`Binary` knows its path, its build ID and, when its ELF file is
available, its ``PT_LOAD`` program headers (to turn file offsets into link-time
addresses, and to give the bases that profile formats subtract) and its code
(to read the instruction at an address).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cstrace.memory.elf import ElfImage, load_elf, normalize_uuid

__all__ = [
    "Binary",
    "BinaryResolver",
    "Mapping",
    "StaticResolver",
    "find_by_build_id",
]

_PAGE = 0x1000


class Binary:
    """A program binary (executable, library, kernel image or raw memory) named in a profile.

    ``path`` is how the recording or the command line named it, ``build_id``
    its GNU build ID as lower-case hex digits (None if unknown), ``image`` its
    ELF contents when the file was read, and ``reader`` a function reading
    ``size`` bytes at a binary address for binaries that are not ELF files
    (memory dumps, raw images).
    """

    __slots__ = ("build_id", "image", "path", "reader")

    def __init__(
        self,
        path: str,
        build_id: str | None = None,
        image: ElfImage | None = None,
        reader: Callable[[int, int], bytes] | None = None,
    ) -> None:
        self.path = path
        self.build_id = normalize_uuid(build_id) if build_id else None
        if self.build_id is None and image is not None and image.uuid:
            self.build_id = image.uuid
        self.image = image
        self.reader = reader

    @property
    def key(self) -> tuple[str, str | None]:
        """What identifies the binary when profiles of several inputs are summed."""
        return (self.path, self.build_id)

    @property
    def first_load_address(self) -> int:
        """The link address of the first ``PT_LOAD`` header in file order (0 if none).

        AutoFDO's text format counts addresses from it (``vaddr = offset + base``).
        """
        if self.image is not None and self.image.loads:
            return self.image.loads[0].vaddr
        return 0

    @property
    def text_base(self) -> int:
        """The page-aligned link address of the first executable ``PT_LOAD`` (0 if none).

        llvm-profgen's unsymbolized profile counts addresses from it.
        """
        if self.image is not None:
            for load in self.image.loads:
                if load.executable:
                    return load.vaddr & ~(_PAGE - 1)
        return 0

    def address_of_offset(self, offset: int) -> int:
        """The link address of the byte at file ``offset`` (the offset itself without headers)."""
        if self.image is not None:
            for load in self.image.loads:
                if load.offset <= offset < load.offset + max(load.filesz, 1):
                    return offset - load.offset + load.vaddr
            if self.image.loads:
                # Past every header (page rounding of a mapping): follow the nearest before.
                before = [ld for ld in self.image.loads if ld.offset <= offset]
                if before:
                    load = before[-1]
                    return offset - load.offset + load.vaddr
        return offset

    def offset_of_address(self, address: int) -> int:
        """The file offset of link address ``address`` (the address itself without headers)."""
        if self.image is not None:
            for load in self.image.loads:
                if load.vaddr <= address < load.vaddr + max(load.filesz, 1):
                    return address - load.vaddr + load.offset
        return address

    def read(self, address: int, size: int) -> bytes:
        """Up to ``size`` bytes of code at link address ``address`` (empty if unknown)."""
        if self.image is not None:
            for seg in self.image.segments:
                off = address - seg.address
                if 0 <= off < len(seg.data):
                    return seg.data[off : off + size]
            return b""
        if self.reader is not None:
            return self.reader(address, size)
        return b""

    def __repr__(self) -> str:
        return f"Binary({self.path!r}, build_id={self.build_id!r})"


@dataclass(frozen=True, slots=True)
class Mapping:
    """``[start, end)`` of an address space holds part of ``binary``.

    The binary's link address of a run-time ``address`` in it is
    ``address - delta``.
    """

    start: int
    end: int
    binary: Binary
    delta: int

    @classmethod
    def from_file_offset(cls, start: int, end: int, file_offset: int, binary: Binary) -> Mapping:
        """The mapping of ``binary`` whose first byte, at ``start``, is the file's ``file_offset``.

        This is what a process memory map (``/proc/PID/maps``, perf's MMAP2
        records) says; the binary's program headers turn the file offset into
        a link address (without them, file offsets are taken as link addresses).
        """
        return cls(start, end, binary, start - binary.address_of_offset(file_offset))

    def binary_address(self, address: int) -> int:
        """The link address in :attr:`binary` of the run-time ``address``."""
        return address - self.delta

    def __contains__(self, address: object) -> bool:
        return isinstance(address, int) and self.start <= address < self.end


class BinaryResolver(Protocol):
    """Finds the binary mapped at an address of a traced address space (see the module doc)."""

    def find(
        self, address: int, context_id: int | None, trace_id: int, time: int | None = None
    ) -> Mapping | None:
        """The mapping holding ``address`` for the context ``context_id`` seen by ``trace_id``
        (at event-log ``time``; None: unknown)."""
        ...


class StaticResolver:
    """A :class:`BinaryResolver` over fixed mappings, global or for one context ID each.

    Mappings that overlap an earlier one (for the same context) are left out,
    as code memory does with overlapping images.
    """

    def __init__(
        self, mappings: Iterable[Mapping] = (), per_context: Iterable[tuple[int, Mapping]] = ()
    ) -> None:
        self._global = _Sorted(mappings)
        by_context: dict[int, list[Mapping]] = {}
        for context_id, mapping in per_context:
            by_context.setdefault(context_id, []).append(mapping)
        self._contexts = {cid: _Sorted(maps) for cid, maps in by_context.items()}

    @property
    def mappings(self) -> list[Mapping]:
        """Every mapping kept (global ones first), for listing."""
        out = list(self._global.maps)
        for sorted_maps in self._contexts.values():
            out.extend(sorted_maps.maps)
        return out

    def find(
        self, address: int, context_id: int | None, trace_id: int, time: int | None = None
    ) -> Mapping | None:
        """The mapping holding ``address``: the context's own first, then the global ones
        (the same at every ``time``)."""
        if context_id is not None and self._contexts:
            own = self._contexts.get(context_id)
            if own is not None:
                got = own.find(address)
                if got is not None:
                    return got
        return self._global.find(address)


class _Sorted:
    """Non-overlapping mappings sorted by start, found by bisection."""

    __slots__ = ("_starts", "maps")

    def __init__(self, mappings: Iterable[Mapping]) -> None:
        kept: list[Mapping] = []
        for m in mappings:
            if m.end <= m.start:
                continue
            if any(k.start < m.end and m.start < k.end for k in kept):
                continue
            kept.append(m)
        kept.sort(key=lambda m: m.start)
        self.maps = kept
        self._starts = [m.start for m in kept]

    def find(self, address: int) -> Mapping | None:
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0:
            m = self.maps[i]
            if address < m.end:
                return m
        return None


def find_by_build_id(folder: str | Path, build_id: str) -> Path | None:
    """The first ELF file under ``folder`` (searched recursively) whose build ID is ``build_id``.

    A build ID written with 16 bytes matches a longer one that starts with it
    (simpleperf pads build IDs to 20 bytes with zeros: those are ignored too).
    """
    want = normalize_uuid(build_id).rstrip("0")
    if not want:
        return None
    for path in _elf_files(Path(folder)):
        got = _read_build_id(path)
        if got is not None and got.rstrip("0").startswith(want):
            return path
    return None


def _elf_files(folder: Path) -> Iterator[Path]:
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            path = Path(root) / name
            try:
                with path.open("rb") as f:
                    if f.read(4) == b"\x7fELF":
                        yield path
            except OSError:
                continue


def _read_build_id(path: Path) -> str | None:
    from cstrace.errors import CstraceError

    try:
        return load_elf(path.read_bytes(), str(path)).uuid
    except (OSError, CstraceError):
        return None
