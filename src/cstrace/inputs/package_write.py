"""Writing a trace as a trace package ZIP (metadata requirements §6.4).

Input: a :class:`~cstrace.trace.Trace` (from a snapshot, a package or a raw
capture with its options). Output: a ZIP at the path given, holding
``contents.ini``, INI trace metadata (:func:`~cstrace.inputs.metadata.format_metadata`),
the buffers, memory dumps, program images and the event log, that decodes to
the same listing (:func:`write_package`). The archive is written to a temporary
file beside the output and moved into place when complete.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cstrace.errors import Issue, IssueKind, Severity, SnapshotError
from cstrace.inputs.files import TreeBlob
from cstrace.inputs.metadata import format_metadata, trace_id_of
from cstrace.inputs.package import CONTENTS
from cstrace.memory.image import mem_space_to_name
from cstrace.trace import Blob, Buffer, Source, Trace

__all__ = ["PackageSummary", "write_package"]

_STEP = 16 << 20


@dataclass
class PackageSummary:
    """What :func:`write_package` wrote."""

    output: Path
    buffers: int = 0
    sources: int = 0
    files: int = 0
    bytes: int = 0
    metadata_files: list[str] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)


def _ini_value(text: str) -> str:
    if "\n" in text or "\r" in text:
        raise SnapshotError(f"value {text!r} cannot be written to an INI file")
    return text


class _Files:
    """The files to store, by their name in the archive (one name per distinct file)."""

    def __init__(self) -> None:
        self.by_name: dict[str, Blob] = {}
        self._names: dict[str, str] = {}

    def add(self, blob: Blob) -> str:
        """Store ``blob``; returns its name in the archive."""
        known = self._names.get(blob.name)
        if known is not None:
            return known
        # A file of the input's tree keeps its relative path; a file named on the
        # command line goes under files/.
        rel = (
            blob.rel
            if isinstance(blob, TreeBlob)
            else PurePosixPath("files") / Path(blob.name).name
        )
        name = str(rel)
        if name.lower() == CONTENTS or name.lower().startswith("metadata") or name == "events.log":
            name = f"data/{name}"
        stem, dot, ext = name.rpartition(".")
        k = 1
        while name in self.by_name:
            name = f"{stem}_{k}.{ext}" if dot else f"{name}_{k}"
            k += 1
        self.by_name[name] = blob
        self._names[blob.name] = name
        return name


def _sources_by_buffer(trace: Trace) -> list[tuple[Buffer, list[Source]]]:
    return [(b, trace.sources_for(b)) for b in trace.buffers]


def write_package(
    trace: Trace, output: str | Path, *, compression: int = zipfile.ZIP_DEFLATED
) -> PackageSummary:
    """Write ``trace`` as a trace package ZIP at ``output`` that decodes to the same listing.

    The metadata keeps every register of the trace sources, with the name,
    core and buffers of each source; buffers keep their names, order and
    formats; memory dumps keep their addresses, spaces and order; images, the
    event log and the CONTEXTIDR convention are carried over.
    """
    out = Path(output)
    summary = PackageSummary(out)
    files = _Files()
    per_buffer = _sources_by_buffer(trace)
    # One metadata file for the whole package when each trace ID names one source.
    by_id: dict[int, str] = {}
    shared = True
    for _, sources in per_buffer:
        for s in sources:
            tid = trace_id_of(s)
            if tid is None or by_id.setdefault(tid, s.name) != s.name:
                shared = False
    all_names = [b.name for b in trace.buffers]

    contents: list[str] = [
        "; cstrace trace package (metadata requirements §6.4)",
        "",
        "[package]",
        "format = cstrace-package 1",
    ]
    if trace.description:
        contents.append(f"description = {_ini_value(trace.description)}")
    # Settings found by inference are kept as the sources' registers below; how they
    # were found is said here for the reader.
    contents += [f"; configuration {inf.describe()}" for inf in trace.inferred]
    contents += ["", "[trace]"]
    metadata_texts: dict[str, str] = {}
    if shared:
        seen: dict[str, tuple[Source, list[str]]] = {}
        for b, sources in per_buffer:
            for s in sources:
                seen.setdefault(s.name, (s, []))[1].append(b.name)
        items: list[tuple[Source, list[str] | None]] = [
            (src, None if bufs == all_names else bufs) for src, bufs in seen.values()
        ]
        fmt = trace.buffers[0].format if trace.buffers else "coresight"
        metadata_texts["metadata.ini"] = format_metadata(
            fmt, items, comment="trace source metadata (metadata requirements §6.3.1)"
        )
        contents.append("metadata = metadata.ini")
        summary.sources = len(items)
    if trace.events is not None:
        contents.append("events = events.log")
    if trace.contextidr:
        contents.append(f"contextidr = {trace.contextidr}")
    if trace.clock is not None:
        c = trace.clock
        contents += [
            f"clock_shift = {c.shift}",
            f"clock_mult = {c.mult}",
            f"clock_zero = {c.zero:#x}",
            f"clock_cycles = {c.cycles:#x}",
            f"clock_mask = {c.mask:#x}",
            f"clock_short = {int(c.short)}",
        ]
    sections: list[str] = []
    for k, (b, sources) in enumerate(per_buffer):
        key = f"buffer{k}"
        names = [files.add(f) for f in b.files]
        contents.append(f"{key} = {', '.join(names)}")
        sections += ["", f"[{key}]", f"name = {_ini_value(b.name)}", f"format = {b.format}"]
        # Who ran when the buffer's trace began, and the log time of its code (recordings).
        if b.context is not None:
            for item, value in (
                ("cpu", b.context.cpu),
                ("pid", b.context.pid),
                ("tid", b.context.tid),
            ):
                if value is not None:
                    sections.append(f"{item} = {value}")
        if b.time is not None:
            sections.append(f"time = {b.time:#x}")
        if not shared:
            mname = f"metadata_{k}.ini"
            metadata_texts[mname] = format_metadata(
                b.format,
                [(s, None) for s in sources],
                comment=f"trace source metadata of buffer {b.name}",
            )
            sections.append(f"metadata = {mname}")
            summary.sources += len(sources)
    contents += sections

    # Memory: the dumps of the traced cores, then those every core sees.
    cores = {s.core_name for _, sources in per_buffer for s in sources if s.core_name}
    dumps = [d for d in trace.dumps if d.core is not None and d.core in cores]
    dumps += [d for d in trace.dumps if d.core is None]
    for mem_index, d in enumerate(x for x in dumps if _present(x.file, x.origin, summary)):
        name = files.add(d.file)
        contents += ["", f"[memory_{mem_index}]", f"file = {name}", f"address = {d.address:#x}"]
        if d.offset:
            contents.append(f"offset = {d.offset:#x}")
        if d.length is not None:
            contents.append(f"length = {d.length:#x}")
        contents.append(f"space = {mem_space_to_name(d.space)}")
        if d.core is not None:
            contents.append(f"core = {d.core}")

    for k, image in enumerate(trace.images):
        name = files.add(image.file)
        contents += ["", f"[image_{k}]", f"file = {name}", f"name = {_ini_value(image.name)}"]
        if image.base is not None:
            contents.append(f"base = {image.base:#x}")
        if image.uuid:
            contents.append(f"uuid = {image.uuid}")
        if image.core:
            contents.append(f"core = {image.core}")
        if image.pid is not None:
            contents.append(f"pid = {image.pid}")
        contents.append(f"space = {mem_space_to_name(image.space)}")

    summary.buffers = len(per_buffer)
    summary.metadata_files = sorted(metadata_texts)
    _write_zip(out, compression, contents, metadata_texts, trace, files, summary)
    return summary


def _present(blob: Blob, origin: object, summary: PackageSummary) -> bool:
    """Whether a memory file is there; a warning in the summary when it is not."""
    if blob.exists():
        return True
    summary.warnings.append(
        Issue(
            Severity.WARNING,
            IssueKind.MEMORY,
            f"memory dump {blob.name} not found; left out of the package",
            str(origin) or None,
        )
    )
    return False


def _write_zip(
    out: Path,
    compression: int,
    contents: list[str],
    metadata_texts: dict[str, str],
    trace: Trace,
    files: _Files,
    summary: PackageSummary,
) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".cstrace-", suffix=".zip", dir=str(out.parent))
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with zipfile.ZipFile(tmp, "w", compression=compression, allowZip64=True) as zf:
            zf.writestr(CONTENTS, "\n".join(contents) + "\n")
            for mname, text in metadata_texts.items():
                zf.writestr(mname, text)
            if trace.events is not None:
                zf.writestr("events.log", trace.events.text)
            for name, blob in files.by_name.items():
                size = blob.size()
                with zf.open(name, "w", force_zip64=size > (1 << 31)) as dst:
                    for chunk in blob.blocks(_STEP):
                        dst.write(chunk)
                summary.files += 1
                summary.bytes += size
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it private; give it the usual mode
        os.replace(tmp, out)
    except OSError as exc:
        raise SnapshotError(f"cannot write: {exc.strerror or exc}", path=str(out)) from None
    finally:
        if tmp.exists():
            tmp.unlink()
