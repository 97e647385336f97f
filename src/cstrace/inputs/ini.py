"""A small INI reader that keeps line numbers and repeated keys.

Snapshot and metadata files are INI files written by many tools; some repeat a
key (two cores mapped to trace sources under the same name), some have trailing
commas or spaces. :func:`parse_ini` keeps every entry in file order with its
line number, so errors can point at the line that caused them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cstrace.errors import SnapshotError
from cstrace.parsing import decode_text

__all__ = [
    "IniEntry",
    "IniFile",
    "IniSection",
    "decode_ini",
    "decode_text",
    "parse_ini",
    "read_ini",
]

_MAX_INI_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class IniEntry:
    """One ``key=value`` line."""

    key: str
    value: str
    line: int


@dataclass
class IniSection:
    """One ``[name]`` section and its entries in file order."""

    name: str
    line: int
    entries: list[IniEntry] = field(default_factory=list)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of the last entry named ``key`` (case-insensitive), or ``default``."""
        entry = self.entry(key)
        return default if entry is None else entry.value

    def entry(self, key: str) -> IniEntry | None:
        """The last entry named ``key`` (case-insensitive)."""
        low = key.lower()
        for e in reversed(self.entries):
            if e.key.lower() == low:
                return e
        return None


@dataclass
class IniFile:
    """A parsed INI file."""

    path: str
    sections: list[IniSection]

    def section(self, name: str) -> IniSection | None:
        """The first section named ``name`` (case-insensitive)."""
        low = name.lower()
        for s in self.sections:
            if s.name.lower() == low:
                return s
        return None

    def sections_starting(self, prefix: str) -> list[IniSection]:
        """All sections whose name starts with ``prefix`` (case-insensitive)."""
        low = prefix.lower()
        return [s for s in self.sections if s.name.lower().startswith(low)]

    def error(self, message: str, line: int | None = None) -> SnapshotError:
        """An error about this file, at ``line`` if known."""
        return SnapshotError(message, path=self.path, line=line)


def _quoted(line: str, limit: int = 60) -> str:
    """A line of the file as an error quotes it: its start, and how long it is when longer."""
    if len(line) <= limit:
        return repr(line)
    return f"{line[:limit]!r}... ({len(line)} characters)"


def parse_ini(text: str, path: str = "<string>") -> IniFile:
    """Parse INI text; ``path`` names the file in error messages."""
    sections: list[IniSection] = []
    current: IniSection | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise SnapshotError(
                    f"malformed section header {_quoted(line)}", path=path, line=number
                )
            current = IniSection(line[1:-1].strip(), number)
            sections.append(current)
            continue
        if "=" not in line:
            raise SnapshotError(
                f"expected 'key=value' or '[section]', found {_quoted(line)}",
                path=path,
                line=number,
            )
        if current is None:
            raise SnapshotError("entry before the first [section]", path=path, line=number)
        key, _, value = line.partition("=")
        key = key.strip()
        if not key:
            raise SnapshotError("entry with an empty key", path=path, line=number)
        current.entries.append(IniEntry(key, value.strip(), number))
    return IniFile(path, sections)


def decode_ini(raw: bytes, name: str) -> IniFile:
    """Decode the bytes of an INI file (UTF-8, else Latin-1) and parse them."""
    return parse_ini(decode_text(raw, name, what="INI file", limit=_MAX_INI_BYTES), name)


def read_ini(path: Path, shown: str | None = None) -> IniFile:
    """Read and parse the INI file at ``path``; errors name it as ``shown``."""
    name = shown or str(path)
    try:
        size = path.stat().st_size
        if size > _MAX_INI_BYTES:
            raise SnapshotError(f"INI file too large ({size} bytes)", path=name)
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SnapshotError("file not found", path=name) from None
    except IsADirectoryError:
        raise SnapshotError("is a directory, expected an INI file", path=name) from None
    except OSError as exc:
        raise SnapshotError(f"cannot read: {exc.strerror}", path=name) from None
    return decode_ini(raw, name)
