"""cstrace: decode ARM CoreSight trace into generic trace elements.

The public API::

    import cstrace

    for trace_id, elem in cstrace.iter_elements("path/to/snapshot"):
        ...

or, buffer by buffer and source by source::

    trace = cstrace.open_trace("path/to/snapshot_or_package.zip")
    session = cstrace.Session(trace)
    for run in session.open_buffer(trace.buffers[0]).runs:
        for elem in run.elements():
            ...

Everything not re-exported here is private and may change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

# cstrace._native comes first: importing it chooses compiled or pure-Python hot modules.
from cstrace._native import compiled, compiled_modules
from cstrace.elements import *  # noqa: F403 - the element model is public
from cstrace.elements import __all__ as _element_names
from cstrace.errors import (
    CaptureError,
    ConfigError,
    CstraceError,
    DiagCode,
    DiagKind,
    InputError,
    Issue,
    IssueKind,
    Severity,
    SnapshotError,
)

# The rest of the API is imported on first use (PEP 562 ``__getattr__`` below), so that
# ``import cstrace`` (and every ``cstrace`` command's start) does not load NumPy, the
# input adapters and the analyses before something asks for them. Type checkers see
# plain imports.
if TYPE_CHECKING:
    from cstrace.analyses.loss import (
        AddressRange,
        LossCounter,
        LossReport,
        NotDecoded,
        Occurrence,
        Occurrences,
        SourceLoss,
        loss_report,
    )
    from cstrace.api import iter_elements, iter_elements_with_context, open_trace
    from cstrace.batch import BatchBuilder, ElementBatch, iter_batches
    from cstrace.capture import Demux, Stream, demux
    from cstrace.decode import BufferDecode, Session, SourceRun
    from cstrace.execution import ContextTracker, tracker_for, with_context
    from cstrace.inputs.detect import detect_capture
    from cstrace.inputs.files import BytesBlob, PathBlob
    from cstrace.inputs.snapshot import read_snapshot
    from cstrace.memory.locate import ImageLocator, Location, MissingImage
    from cstrace.protocols import DecodeOptions
    from cstrace.trace import (
        Blob,
        Buffer,
        Dump,
        ExecContext,
        Image,
        Inferred,
        Origin,
        Source,
        Trace,
    )

_LAZY_FROM: dict[str, tuple[str, ...]] = {
    "cstrace.analyses.loss": (
        "AddressRange",
        "LossCounter",
        "LossReport",
        "NotDecoded",
        "Occurrence",
        "Occurrences",
        "SourceLoss",
        "loss_report",
    ),
    "cstrace.api": ("iter_elements", "iter_elements_with_context", "open_trace"),
    "cstrace.batch": ("BatchBuilder", "ElementBatch", "iter_batches"),
    "cstrace.capture": ("Demux", "Stream", "demux"),
    "cstrace.decode": ("BufferDecode", "Session", "SourceRun"),
    "cstrace.execution": ("ContextTracker", "tracker_for", "with_context"),
    "cstrace.inputs.detect": ("detect_capture",),
    "cstrace.inputs.files": ("BytesBlob", "PathBlob"),
    "cstrace.inputs.snapshot": ("read_snapshot",),
    "cstrace.memory.locate": ("ImageLocator", "Location", "MissingImage"),
    "cstrace.protocols": ("DecodeOptions",),
    "cstrace.trace": (
        "Blob",
        "Buffer",
        "Dump",
        "ExecContext",
        "Image",
        "Inferred",
        "Origin",
        "Source",
        "Trace",
    ),
}
"""The public names imported on first use, by the module that defines them."""

__all__ = [
    "compiled",
    "compiled_modules",
    "AddressRange",
    "BatchBuilder",
    "Blob",
    "Buffer",
    "BytesBlob",
    "BufferDecode",
    "CaptureError",
    "ConfigError",
    "CstraceError",
    "DecodeOptions",
    "Demux",
    "DiagCode",
    "DiagKind",
    "Dump",
    "ElementBatch",
    "Origin",
    "PathBlob",
    "Session",
    "Severity",
    "Image",
    "Inferred",
    "ContextTracker",
    "ExecContext",
    "ImageLocator",
    "InputError",
    "Issue",
    "IssueKind",
    "LossCounter",
    "Location",
    "LossReport",
    "MissingImage",
    "NotDecoded",
    "Occurrence",
    "Occurrences",
    "SnapshotError",
    "Source",
    "SourceLoss",
    "SourceRun",
    "Stream",
    "tracker_for",
    "with_context",
    "Trace",
    "__version__",
    "demux",
    "detect_capture",
    "iter_batches",
    "iter_elements",
    "iter_elements_with_context",
    "loss_report",
    "open_trace",
    "read_snapshot",
    *_element_names,
]


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    from cstrace._lazy import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY_FROM, __all__)
