"""cstrace: decode ARM CoreSight trace into generic trace elements.

The public API::

    import cstrace

    for trace_id, elem in cstrace.iter_elements("path/to/snapshot"):
        ...

or, buffer by buffer and source by source::

    snap = cstrace.open_trace("path/to/snapshot_or_package.zip")
    session = cstrace.Session(snap)
    for run in session.open_buffer(snap.buffers[0]).runs:
        for elem in run.elements():
            ...

Everything not re-exported here is private and may change.
"""

from __future__ import annotations

__version__ = "0.1.0"

from cstrace.api import iter_elements, open_trace
from cstrace.capture import Demux, Stream, demux
from cstrace.decode import BufferDecode, Session, SourceRun
from cstrace.detect import detect_capture
from cstrace.elements import *  # noqa: F403 - the element model is public
from cstrace.elements import __all__ as _element_names
from cstrace.errors import (
    CaptureError,
    ConfigError,
    CstraceError,
    InputError,
    SnapshotError,
)
from cstrace.protocols import DecodeOptions
from cstrace.snapshot import Snapshot, read_snapshot

__all__ = [
    "BufferDecode",
    "CaptureError",
    "ConfigError",
    "CstraceError",
    "DecodeOptions",
    "Demux",
    "Session",
    "Snapshot",
    "InputError",
    "SnapshotError",
    "SourceRun",
    "Stream",
    "__version__",
    "demux",
    "detect_capture",
    "iter_elements",
    "open_trace",
    "read_snapshot",
    *_element_names,
]
