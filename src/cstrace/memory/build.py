"""The code memory of each traced core, built from a trace's dumps, images and event log.

Input: a :class:`~cstrace.trace.Trace` (its :class:`~cstrace.trace.Dump` and
:class:`~cstrace.trace.Image` records, event log and CONTEXTIDR convention)
and a trace source. Output: the :class:`~cstrace.memory.code.CodeMemory` its
decoder reads opcodes from:

- the core's own dumps, then the dumps every core sees, in the order given,
  as one :class:`~cstrace.memory.image.MemoryMap`; a dump that overlaps an
  earlier one in the same memory space is left out, as the reference does;
- program images that no event log places and that belong to no process,
  mapped on top (an ELF at its link address or moved to ``base``; other files
  as raw bytes at ``base``);
- with an event log or per-process images, :class:`~cstrace.memory.spaces.AddressSpaces`
  over that static memory, one cursor per source (each source's trace starts
  at the beginning of time, or at the time its buffer gives);
- an :class:`~cstrace.memory.locate.ImageLocator` over the same log and
  images (:meth:`CodeMemories.locator`): which image and file offset an
  address of a process is at.

Problems (overlapping dumps, a dump shorter than its declared length, an image
whose build ID differs from the one expected, images the log names but nobody
supplied) are :class:`~cstrace.errors.Issue` records in
:attr:`CodeMemories.issues`. A dump whose file is missing is left out; the
input adapters report those when they read the trace's description.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from cstrace.errors import Issue, IssueKind, Severity
from cstrace.memory.code import CodeMemory
from cstrace.memory.image import MemoryMap, MemoryRegion
from cstrace.trace import Dump, Image, Source, Trace

# ELF images, event logs and per-process address spaces are loaded by the inputs
# that have them: a snapshot of memory dumps decodes without them.
if TYPE_CHECKING:
    from cstrace.memory.elf import ElfImage
    from cstrace.memory.locate import ImageLocator
    from cstrace.memory.spaces import AddressSpaces

__all__ = ["CodeMemories"]


class CodeMemories:
    """Builds, once per core, the code memory of a trace's sources (see the module docstring)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.issues: list[Issue] = []
        """Problems met so far, in the order they were met."""
        self._static: dict[str, MemoryMap] = {}
        self._spaces: dict[str, AddressSpaces | MemoryMap] = {}
        self._loaded: dict[str, ElfImage | bytes] = {}
        self._locator: ImageLocator | None = None

    def _warn(self, message: str, where: object = None) -> None:
        path = None if where is None else str(where)
        self.issues.append(Issue(Severity.WARNING, IssueKind.MEMORY, message, path))

    # -- dumps -------------------------------------------------------------------------

    def _dump_bytes(self, d: Dump) -> bytes | None:
        if not d.file.exists():
            return None  # the input adapter reported it when it read the description
        size = d.file.size()
        offset = min(d.offset, size)
        length = size - offset if d.length is None else min(d.length, size - offset)
        if d.length is not None and d.length > size - offset:
            self._warn(
                f"memory dump {d.file.name}: length {d.length:#x} from offset {d.offset:#x} "
                f"goes beyond the file's {size} bytes; the {length} bytes there are used",
                d.origin,
            )
        return d.file.read(offset, length)

    def static_map(self, core: str | None) -> MemoryMap:
        """The dumps ``core`` sees (its own first, then the shared ones), as one map (cached)."""
        key = core or ""
        mm = self._static.get(key)
        if mm is not None:
            return mm
        mm = MemoryMap()
        dumps = [d for d in self.trace.dumps if d.core is not None and d.core == core]
        dumps += [d for d in self.trace.dumps if d.core is None]
        for d in dumps:
            data = self._dump_bytes(d)
            if data is None:
                continue
            region = MemoryRegion(d.address, data, d.space, d.file.name)
            if not mm.add(region) and data:
                self._warn(
                    f"memory dump {d.file.name} at {d.address:#x} overlaps an earlier dump "
                    "in the same memory space; ignored",
                    d.origin,
                )
        self._static[key] = mm
        return mm

    # -- images ------------------------------------------------------------------------

    def load_image(self, image: Image) -> ElfImage | bytes:
        """The contents of ``image``: an ELF image, or raw bytes for any other file (cached)."""
        got = self._loaded.get(image.file.name)
        if got is None:
            from cstrace.memory.elf import ElfImage, format_uuid, load_elf, uuid_matches

            data = image.file.read()
            got = load_elf(data, image.file.name) if data[:4] == b"\x7fELF" else data
            if isinstance(got, ElfImage) and image.uuid and not uuid_matches(image.uuid, got.uuid):
                have = format_uuid(got.build_id) if got.build_id else "no build ID"
                self._warn(
                    f"image {got.name} has {have} but {image.uuid} is expected; "
                    "decoding may be wrong",
                    image.origin,
                )
            self._loaded[image.file.name] = got
        return got

    def _in_log(self, image: Image) -> bool:
        """Whether the event log names this image (by name, file name or build ID)."""
        events = self.trace.events
        if events is None:
            return False
        from cstrace.memory.elf import uuid_matches
        from cstrace.memory.events import PatchEvent, ProcessEvent

        base_name = image.file.name.replace("\\", "/").rsplit("/", 1)[-1]
        names = {image.name, image.file.name, base_name}
        for e in events.events:
            if isinstance(e, ProcessEvent):
                if e.image is not None:
                    base = e.image.replace("\\", "/").rsplit("/", 1)[-1]
                    if e.image in names or base in names:
                        return True
                if e.uuid and image.uuid and uuid_matches(e.uuid, image.uuid):
                    return True
            elif isinstance(e, PatchEvent):
                if (e.file or e.ident) in names:
                    return True
        return False

    def resolve(
        self, name: str | None, uuid: str | None, where: str, line: int
    ) -> ElfImage | bytes | None:
        """The image an event names, by build ID, then by name or file name, then in the input."""
        from cstrace.memory.elf import ElfImage, uuid_matches

        images = self.trace.images
        if uuid:
            for image in images:
                if image.uuid and uuid_matches(uuid, image.uuid):
                    return self.load_image(image)
            for image in images:
                got = self.load_image(image)
                if isinstance(got, ElfImage) and uuid_matches(uuid, got.uuid):
                    return got
        if not name:
            return None
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        for image in images:
            file_base = image.file.name.replace("\\", "/").rsplit("/", 1)[-1]
            if name in (image.name, image.file.name) or base in (image.name, file_base):
                return self.load_image(image)
        find = self.trace.find_file
        found = find(name) if find is not None else None
        if found is not None and found.exists():
            return self.load_image(Image(found, name))
        return None

    # -- code memory -------------------------------------------------------------------

    def for_source(
        self, source: Source, time: int | None = None, pid: int | None = None
    ) -> CodeMemory:
        """The code memory the decoder of ``source`` reads: a fresh cursor for each call.

        ``time`` (event-log time) is where the cursor starts; None: before any
        event, each process and image taken as it first appears. ``pid`` is the
        process whose memory is read while the trace names none (a recording's
        buffer says who ran when its trace began).
        """
        core = source.core_name
        key = core or ""
        got = self._spaces.get(key)
        if got is None:
            got = self._build(core)
            self._spaces[key] = got
        if isinstance(got, MemoryMap):
            return got
        cursor = got.cursor()
        if time is not None:
            cursor.set_time(time)
        if pid is not None:
            cursor.set_default_process(pid)
        return cursor

    def mode(self) -> str:
        """How the trace names processes: its CONTEXTIDR convention, or the log's default."""
        events = self.trace.events
        return self.trace.contextidr or (
            "asid" if events is not None and events.uses_asids else "pid"
        )

    def locator(self) -> ImageLocator:
        """Which image (and file offset) holds an address of a process (built once)."""
        if self._locator is None:
            from cstrace.memory.locate import GlobalImage, ImageLocator
            from cstrace.memory.spaces import StaticMapping

            trace = self.trace
            per_process = [
                StaticMapping(i.pid, i.base, i.name or i.file.name, i.uuid)
                for i in trace.images
                if i.pid is not None
            ]
            everywhere = [
                GlobalImage(i.name, i.uuid, i.base, partial(self.load_image, i))
                for i in trace.images
                if i.pid is None and i.core is None and not self._in_log(i)
            ]
            self._locator = ImageLocator(
                trace.events,
                self.resolve,
                mode=self.mode(),
                static_mappings=per_process,
                images=everywhere,
            )
        return self._locator

    def _build(self, core: str | None) -> AddressSpaces | MemoryMap:
        static = self.static_map(core)
        trace = self.trace
        images = [i for i in trace.images if i.core is None or i.core == core]
        # Images the event log places are mapped where it says, not everywhere.
        global_images = [i for i in images if i.pid is None and not self._in_log(i)]
        per_process = [i for i in images if i.pid is not None]
        if not global_images and not per_process and trace.events is None:
            return static
        from cstrace.memory.elf import ElfImage
        from cstrace.memory.spaces import AddressSpaces, StaticMapping, flatten_regions

        base = static
        if global_images:
            pieces = list(static.regions)
            for image in global_images:
                got = self.load_image(image)
                if isinstance(got, ElfImage):
                    if not got.segments:
                        self._warn(f"{got.name}: no executable code in the image")
                    pieces.extend(got.regions(image.base, image.space))
                else:
                    pieces.append(MemoryRegion(image.base or 0, got, image.space, image.file.name))
            base = MemoryMap()
            for r in flatten_regions(pieces):
                base.add(r)
        if trace.events is None and not per_process:
            return base
        mappings = [
            StaticMapping(i.pid, i.base, i.name or i.file.name, i.uuid)
            for i in per_process
            if i.pid is not None
        ]
        return AddressSpaces(
            base,
            trace.events,
            self.resolve,
            contextidr=trace.contextidr,
            static_mappings=mappings,
            warnings=self.issues,
            clock=trace.clock.to_log_time if trace.clock is not None else None,
        )
