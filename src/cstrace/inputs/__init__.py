"""Input adapters: every container a trace arrives in, turned into one Trace.

- :mod:`.snapshot`: DS-5 snapshots (a folder with ``snapshot.ini``);
- :mod:`.package`: trace packages (metadata requirements §6.4), folders or ZIPs
  (:mod:`.zipfiles` reads archives safely), and ZIPs of snapshots;
- :mod:`.raw`: raw captures with no metadata, described by detection
  (:mod:`.detect`) and the user's options, through the §6.3.1 items of
  :mod:`.metadata`;
- :mod:`.perfdata`: perf.data recordings (Linux perf, Android simpleperf) with
  CoreSight trace: the trace units, the AUX data, the event log the records
  make and the images they name (found by :mod:`.symbols`);
- :mod:`.extras`: images, memory and an event log named on the command line,
  added to any of them.

:func:`open_input` picks the adapter for a path. :mod:`.package_write` writes
any trace as a package. Nothing outside this package knows which container a
trace came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cstrace.errors import SnapshotError

# The adapters are imported on first use (PEP 562, :mod:`cstrace._lazy`): decoding a
# snapshot does not load the perf.data reader, raw-capture inference or the package writer.
# Type checkers see plain imports.
if TYPE_CHECKING:
    from cstrace.inputs.detect import CaptureGuess, StreamGuess, detect_capture
    from cstrace.inputs.extras import Extras, add_extras
    from cstrace.inputs.package import open_trace_input, read_package
    from cstrace.inputs.package_write import PackageSummary, write_package
    from cstrace.inputs.perfdata import is_perf_data, open_perf_data, read_recording
    from cstrace.inputs.raw import RawOptions, open_raw
    from cstrace.inputs.snapshot import read_snapshot
    from cstrace.inputs.symbols import SymbolPaths
    from cstrace.inputs.zipfiles import Limits, ZipTree
    from cstrace.trace import Trace

_LAZY_FROM: dict[str, tuple[str, ...]] = {
    "cstrace.inputs.detect": ("CaptureGuess", "StreamGuess", "detect_capture"),
    "cstrace.inputs.extras": ("Extras", "add_extras"),
    "cstrace.inputs.package": ("open_trace_input", "read_package"),
    "cstrace.inputs.package_write": ("PackageSummary", "write_package"),
    "cstrace.inputs.perfdata": ("is_perf_data", "open_perf_data", "read_recording"),
    "cstrace.inputs.raw": ("RawOptions", "open_raw"),
    "cstrace.inputs.snapshot": ("read_snapshot",),
    "cstrace.inputs.symbols": ("SymbolPaths",),
    "cstrace.inputs.zipfiles": ("Limits", "ZipTree"),
}
"""The public names imported on first use, by the module that defines them."""

__all__ = [
    "CaptureGuess",
    "Extras",
    "Limits",
    "PackageSummary",
    "RawOptions",
    "StreamGuess",
    "SymbolPaths",
    "ZipTree",
    "add_extras",
    "detect_capture",
    "is_perf_data",
    "is_raw_capture",
    "open_input",
    "open_perf_data",
    "open_raw",
    "open_trace_input",
    "read_package",
    "read_recording",
    "read_snapshot",
    "write_package",
]


def is_raw_capture(path: str | Path) -> bool:
    """Whether ``path`` names a raw capture: a file that is not an ini file, a ZIP or a
    perf.data recording."""
    p = Path(path)
    if not p.is_file() or p.name.lower().endswith(".ini"):
        return False
    from cstrace.inputs.perfdata import is_perf_data
    from cstrace.inputs.zipfiles import is_zip

    return not is_zip(p) and not is_perf_data(p)


def open_input(
    path: str | Path,
    extras: Extras | None = None,
    raw: RawOptions | None = None,
    symbols: SymbolPaths | None = None,
) -> Trace:
    """A snapshot, a package, a perf.data recording or a raw capture, with extra images,
    memory and events.

    A file that starts with ``PERFILE2`` is a perf.data recording; any other
    file that is neither an ini file nor a ZIP is a raw capture, described by
    ``raw``; for the others, ``raw`` must be empty (they describe their own
    trace). ``symbols`` says where to look for the program images that a
    recording or an event log names (by build ID and name).
    """
    from dataclasses import replace

    from cstrace.inputs.extras import add_extras, split_at
    from cstrace.inputs.package import open_trace_input
    from cstrace.inputs.perfdata import is_perf_data
    from cstrace.inputs.raw import RawOptions
    from cstrace.inputs.symbols import SymbolPaths, add_found_images

    raw = raw or RawOptions()
    symbols = symbols or SymbolPaths()
    if is_raw_capture(path):
        from cstrace.inputs.raw import open_raw

        trace = open_raw(path, raw, extras)
        return add_found_images(trace, symbols) if symbols else trace
    if raw.given():
        raise SnapshotError(
            "options that describe a raw capture (metadata, protocol, core, registers, "
            "settings, capture format) do not apply: the "
            + ("recording" if is_perf_data(path) else "snapshot or package")
            + " describes its own trace",
            path=str(path),
        )
    if is_perf_data(path):
        # Images given without a base are the recording's own binaries: found by build ID
        # (and placed where its memory maps say), not mapped in every address space.
        if extras is not None and extras.images:
            plain = [t for t in extras.images if split_at(t, "image")[1] is None]
            for t in plain:
                if not Path(t).is_file():
                    raise SnapshotError("image file not found", path=t)
            symbols = replace(symbols, files=(*symbols.files, *plain))
            extras = replace(extras, images=[t for t in extras.images if t not in plain])
        from cstrace.inputs.perfdata import open_perf_data

        trace = open_perf_data(path, symbols)
    else:
        trace = open_trace_input(path)
    trace = add_extras(trace, extras) if extras else trace
    trace = add_found_images(trace, symbols) if symbols else trace
    if trace.binaries is None and trace.has_exec_context and trace.events is not None:
        # A recording (or its package) knows where each process mapped its binaries.
        from cstrace.memory.build import CodeMemories
        from cstrace.memory.locate import LogBinaries

        trace = replace(trace, binaries=LogBinaries(CodeMemories(trace).locator()))
    return trace


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    from cstrace._lazy import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY_FROM, __all__)
