"""The kernel's code as ``perf record --kcore`` keeps it: a copy of ``/proc/kcore``'s text.

``perf record --kcore`` writes a folder instead of a file: ``perf.data/data``
(the recording) and ``perf.data/kcore_dir/`` holding ``kcore`` (an ELF core
file, ``ET_CORE``, whose ``PT_LOAD`` segments are the kernel text and module
areas perf copied from ``/proc/kcore``, at their kernel virtual addresses, the
extent chosen with ``/proc/kallsyms``), ``kallsyms`` and ``modules`` (the
running kernel's symbol and module lists when it was copied).

Input: a recording's path (a file, or such a folder) and, optionally, a kcore
file named by hand (``--kcore FILE``). Output: :func:`recording_files` (the
perf.data file to read and the kcore to use), and :func:`read_kcore`: a
:class:`KernelCore` with its loadable segments (kernel address, file offset,
size), which a trace maps as memory seen in every address space, and how many
symbols its ``kallsyms`` names; :func:`module_symbols` reads the code symbols
kallsyms gives loadable modules (``address t name [module]``), which say where
each module's code was. A file that is not an ELF core file with
loadable segments is an :class:`~cstrace.errors.InputError` naming it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from cstrace.errors import InputError

__all__ = ["KcoreSegment", "KernelCore", "module_symbols", "read_kcore", "recording_files"]

DATA_NAME = "data"
"""The recording's file inside a ``perf record --kcore`` folder."""
KCORE_DIR = "kcore_dir"
"""The folder of the kernel copy inside it."""


@dataclass(frozen=True)
class KcoreSegment:
    """One loadable segment of a kcore file: ``size`` bytes at ``offset``, at kernel ``address``."""

    address: int
    offset: int
    size: int
    executable: bool

    @property
    def end(self) -> int:
        """The first kernel address after the segment."""
        return self.address + self.size


@dataclass
class KernelCore:
    """A kcore file: its path and loadable segments, and the kallsyms beside it."""

    path: Path
    segments: list[KcoreSegment] = field(default_factory=list)
    kallsyms: Path | None = None
    """``kallsyms`` beside it (``perf record --kcore`` copies it), if there is one."""
    symbols: int = 0
    """How many symbols that kallsyms names."""

    def covers(self, start: int, end: int) -> bool:
        """Whether any segment holds bytes of the kernel addresses ``start`` to ``end``."""
        return any(s.address < end and start < s.end for s in self.segments)

    @property
    def size(self) -> int:
        """Bytes of kernel memory the segments hold."""
        return sum(s.size for s in self.segments)


def recording_files(path: str | Path, kcore: str | None = None) -> tuple[Path, Path | None]:
    """The perf.data file of ``path`` and the kcore to use with it.

    ``path`` is a perf.data file or a ``perf record --kcore`` folder (its
    ``data`` is read, and its ``kcore_dir/kcore`` taken unless ``kcore`` names
    another file).
    """
    p = Path(path)
    found: Path | None = Path(kcore) if kcore else None
    if p.is_dir():
        if found is None and (p / KCORE_DIR / "kcore").is_file():
            found = p / KCORE_DIR / "kcore"
        p = p / DATA_NAME
    return p, found


def _count_kallsyms(path: Path) -> int:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return sum(1 for line in f if len(line.split()) >= 3)
    except OSError:
        return 0


_MAX_KALLSYMS = 64 << 20


def module_symbols(path: Path) -> dict[str, list[tuple[int, str]]]:
    """Module name -> (address, name) of its code symbols (types ``t``/``T``) in a kallsyms
    file, in file order; {} when it cannot be read. Lines of other forms are skipped."""
    out: dict[str, list[tuple[int, str]]] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(_MAX_KALLSYMS)
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[1] not in ("t", "T") or not parts[3].startswith("["):
            continue
        try:
            address = int(parts[0], 16)
        except ValueError:
            continue
        out.setdefault(parts[3].strip("[]"), []).append((address, parts[2]))
    return out


def read_kcore(path: str | Path) -> KernelCore:
    """The loadable segments of the kcore file at ``path`` (and its kallsyms, if beside it)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    p = Path(path)
    core = KernelCore(p)
    try:
        with open(p, "rb") as f:
            if f.read(4) != b"\x7fELF":
                raise InputError(
                    "kcore: not an ELF file (no \\x7fELF magic)", path=str(p), offset=0
                )
            f.seek(0)
            elf = ELFFile(f)
            if elf["e_type"] != "ET_CORE":
                raise InputError(
                    f"kcore: an ELF file of type {elf['e_type']}, not a core file (ET_CORE)",
                    path=str(p),
                    offset=0x10,
                )
            size = p.stat().st_size
            for seg in elf.iter_segments():
                if seg["p_type"] != "PT_LOAD" or not seg["p_filesz"]:
                    continue
                off, filesz = int(seg["p_offset"]), int(seg["p_filesz"])
                if off + filesz > size:
                    raise InputError(
                        f"kcore: a segment of {filesz:#x} bytes at {off:#x} goes past the end "
                        "of the file",
                        path=str(p),
                        offset=off,
                    )
                core.segments.append(
                    KcoreSegment(int(seg["p_vaddr"]), off, filesz, bool(seg["p_flags"] & 1))
                )
    except OSError as exc:
        raise InputError(f"kcore: cannot read it ({exc.strerror})", path=str(p)) from None
    except (ELFError, ValueError, KeyError, struct.error) as exc:  # pyelftools on a damaged file
        raise InputError(f"kcore: malformed ELF file ({exc})", path=str(p)) from None
    if not core.segments:
        raise InputError("kcore: no loadable segment holds kernel code", path=str(p))
    kallsyms = p.parent / "kallsyms"
    if kallsyms.is_file():
        core.kallsyms = kallsyms
        core.symbols = _count_kallsyms(kallsyms)
    return core
