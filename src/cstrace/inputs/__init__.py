"""Input adapters: every container a trace arrives in, turned into one Trace.

- :mod:`.snapshot`: DS-5 snapshots (a folder with ``snapshot.ini``);
- :mod:`.package`: trace packages (metadata requirements §6.4), folders or ZIPs
  (:mod:`.zipfiles` reads archives safely), and ZIPs of snapshots;
- :mod:`.raw`: raw captures with no metadata, described by detection
  (:mod:`.detect`) and the user's options, through the §6.3.1 items of
  :mod:`.metadata`;
- :mod:`.extras`: images, memory and an event log named on the command line,
  added to any of them.

:func:`open_input` picks the adapter for a path. :mod:`.package_write` writes
any trace as a package. Nothing outside this package knows which container a
trace came from.
"""

from __future__ import annotations

from pathlib import Path

from cstrace.errors import SnapshotError
from cstrace.inputs.detect import CaptureGuess, StreamGuess, detect_capture
from cstrace.inputs.extras import Extras, add_extras
from cstrace.inputs.package import open_trace_input, read_package
from cstrace.inputs.package_write import PackageSummary, write_package
from cstrace.inputs.raw import RawOptions, open_raw
from cstrace.inputs.snapshot import read_snapshot
from cstrace.inputs.zipfiles import Limits, ZipTree, is_zip
from cstrace.trace import Trace

__all__ = [
    "CaptureGuess",
    "Extras",
    "Limits",
    "PackageSummary",
    "RawOptions",
    "StreamGuess",
    "ZipTree",
    "add_extras",
    "detect_capture",
    "is_raw_capture",
    "open_input",
    "open_raw",
    "open_trace_input",
    "read_package",
    "read_snapshot",
    "write_package",
]


def is_raw_capture(path: str | Path) -> bool:
    """Whether ``path`` names a raw capture: a file that is neither an ini file nor a ZIP."""
    p = Path(path)
    return p.is_file() and not p.name.lower().endswith(".ini") and not is_zip(p)


def open_input(
    path: str | Path, extras: Extras | None = None, raw: RawOptions | None = None
) -> Trace:
    """A snapshot, a package or a raw capture, with extra images, memory and events.

    A file that is neither an ini file nor a ZIP is a raw capture, described by
    ``raw``; for a snapshot or package, ``raw`` must be empty (they describe
    their own trace).
    """
    raw = raw or RawOptions()
    if is_raw_capture(path):
        return open_raw(path, raw, extras)
    else:
        if raw.given():
            raise SnapshotError(
                "options that describe a raw capture (metadata, protocol, core, registers, "
                "settings, capture format) do not apply: the snapshot or package describes "
                "its own trace",
                path=str(path),
            )
        trace = open_trace_input(path)
    return add_extras(trace, extras) if extras else trace
