"""Program images, memory contents and an event log named on the command line, added to a trace.

Input: a :class:`~cstrace.trace.Trace` from any adapter and :class:`Extras`
(``--image FILE[@BASE]``, ``--memory FILE@ADDRESS``, ``--events LOG``,
``--contextidr pid|asid|tid``). Output: the same trace with those added
(:func:`add_extras`): images are mapped for every core, memory contents are
seen by every core, the event log replaces any the trace had.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from cstrace.errors import SnapshotError
from cstrace.inputs.files import PathBlob
from cstrace.parsing import parse_int
from cstrace.trace import Dump, Image, Origin, Trace

__all__ = ["Extras", "add_extras", "split_at"]

_CLI = Origin("command line")


@dataclass
class Extras:
    """Images, memory, event log and CONTEXTIDR convention named on the command line."""

    images: list[str] = field(default_factory=list)
    """``FILE`` or ``FILE@BASE``."""
    memory: list[str] = field(default_factory=list)
    """``FILE@ADDRESS``."""
    events: str | None = None
    contextidr: str | None = None

    def __bool__(self) -> bool:
        return bool(self.images or self.memory or self.events or self.contextidr)


def split_at(text: str, what: str) -> tuple[str, int | None]:
    """``FILE@ADDRESS`` → (FILE, ADDRESS); the address is optional."""
    name, sep, addr = text.rpartition("@")
    if not sep or not name:
        return text, None
    return name, parse_int(addr, what=f"{what} address", path="command line", line=None)


_ARM_MACHINES = ("EM_ARM", "EM_AARCH64")


def _check_machine(name: str) -> None:
    """A located error when the file at ``name`` is an ELF file for a machine other than
    ARM or AArch64 (a host program given by mistake): its bytes are not code the traced
    cores ran. Files that are not ELF, or whose header pyelftools cannot read, are left to
    the image loader, which says what is wrong with them."""
    from elftools.elf.elffile import ELFFile

    try:
        with open(name, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return
            f.seek(0)
            machine = str(ELFFile(f)["e_machine"])
    except Exception:  # damaged headers: the loader says what is wrong
        return
    if machine not in _ARM_MACHINES:
        raise SnapshotError(
            f"ELF image for machine {machine}, not ARM or AArch64: "
            "not a program of the traced cores",
            path=name,
            offset=0x12,  # e_machine
        )


def add_extras(trace: Trace, extras: Extras) -> Trace:
    """``trace`` with the images, memory and event log of ``extras`` added."""
    if not extras:
        return trace
    from cstrace.memory.events import CONTEXTIDR_MODES, parse_event_log

    images = list(trace.images)
    for text in extras.images:
        name, base = split_at(text, "image")
        blob = PathBlob(name)
        if not blob.exists():
            what = "a folder, not an image file" if Path(name).is_dir() else "image file not found"
            raise SnapshotError(what, path=name)
        _check_machine(name)
        images.append(Image(blob, Path(name).name, base, origin=_CLI))
    dumps = list(trace.dumps)
    for text in extras.memory:
        name, address = split_at(text, "memory")
        if address is None:
            raise SnapshotError(
                f"--memory {text!r}: give the address the contents go to, as FILE@ADDRESS"
            )
        blob = PathBlob(name)
        if not blob.exists():
            raise SnapshotError("memory file not found", path=name)
        dumps.append(Dump(blob, address, origin=_CLI))
    events = trace.events
    if extras.events is not None:
        blob = PathBlob(extras.events)
        if not blob.exists():
            raise SnapshotError("event log not found", path=extras.events)
        events = parse_event_log(blob.read(), extras.events)
    contextidr = trace.contextidr
    if extras.contextidr is not None:
        if extras.contextidr not in CONTEXTIDR_MODES:
            raise SnapshotError(
                f"contextidr {extras.contextidr!r} is not one of {', '.join(CONTEXTIDR_MODES)}"
            )
        contextidr = extras.contextidr
    return replace(trace, images=images, dumps=dumps, events=events, contextidr=contextidr)
