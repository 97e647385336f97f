"""The error and diagnostic vocabulary shared by every layer of cstrace.

Two kinds of trouble, kept apart:

- **Exceptions** are for input that cannot be used at all: bad metadata, a file
  that is missing or malformed, register values that describe no decodable
  configuration. They derive from :class:`CstraceError` and know where the
  problem is (file, line or byte offset), so the CLI prints one line that
  points at the cause. Anything else escaping the library is a bug.
- **Diagnostics are data.** Bad trace never raises: a decoder yields a
  :class:`~cstrace.elements.Diagnostic` in its element stream (capture offset,
  trace ID, a :class:`DiagCode` and detail values) and carries on, and the
  session reports what it met on the way as :class:`Issue` records (an empty
  buffer, a truncated capture, a memory dump that is missing). Text is made at
  the edge: ``cstrace.render`` words diagnostics (the OpenCSD listing in the
  reference's words), the CLI prints issues.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "CaptureError",
    "ConfigError",
    "CstraceError",
    "DiagCode",
    "DiagKind",
    "InputError",
    "Issue",
    "IssueKind",
    "Severity",
    "SnapshotError",
    "bounded",
    "located",
]


MESSAGE_LIMIT = 500
"""The most characters of a message an error shows (an input can make one of any length)."""


def bounded(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """``message`` on one line and at most about ``limit`` characters: a message that quotes
    an input (a line of a metadata file, a name) stays one readable line whatever the input."""
    one = " ".join(message.splitlines())
    if len(one) <= limit:
        return one
    return f"{one[:limit]}... ({len(one) - limit} more characters)"


def located(message: str, path: str | None, line: int | None, offset: int | None) -> str:
    """``path: line N: offset 0xN: message``, with the parts that are known; the message is
    :func:`bounded`."""
    message = bounded(message)
    where = []
    if path is not None:
        where.append(path)
    if line is not None:
        where.append(f"line {line}")
    if offset is not None:
        where.append(f"offset {offset:#x}")
    return f"{': '.join(where)}: {message}" if where else message


class CstraceError(Exception):
    """Base class of every error raised by cstrace."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.offset = offset

    def __str__(self) -> str:
        return located(self.message, self.path, self.line, self.offset)


class InputError(CstraceError):
    """An input (snapshot, package, metadata, capture, option) is missing, malformed or unsafe."""


SnapshotError = InputError
"""The name :class:`InputError` had before inputs other than snapshots existed."""


class ConfigError(CstraceError):
    """Register values or options do not describe a decodable configuration."""


class CaptureError(CstraceError):
    """Capture settings (port width, PIPESTAT size, a text capture's encoding) are unusable."""


class Severity(IntEnum):
    """How bad a diagnostic or issue is."""

    WARNING = 1
    """Decoding went on and its output is complete as far as the trace allows."""
    ERROR = 2
    """Something was lost: trace not decoded, a decoder stopped or dropped elements."""


class DiagCode(IntEnum):
    """The class of a decoder diagnostic, numbered as the reference's error codes (``ocsd_err_t``).

    The numbers let a listing quote the reference's code; :class:`DiagKind`
    says precisely what happened.
    """

    NONE = 0x00
    """Not an error: a note on how the trace was decoded (decoding before synchronisation)."""
    NOT_INIT = 0x03
    """The decoder has no usable configuration for this trace."""
    BAD_PACKET_SEQ = 0x13
    """A packet came where the protocol does not allow it."""
    UNSUPPORTED_ISA = 0x16
    """The program runs in an instruction set the decoder cannot follow."""
    HW_CFG_UNSUPP = 0x17
    """The trace unit's configuration is not supported by the decoder."""
    UNSUPP_DECODE_PKT = 0x18
    """A valid packet the decoder does not support."""
    BAD_DECODE_PKT = 0x19
    """A reserved or unknown packet."""
    COMMIT_PKT_OVERRUN = 0x1A
    """Speculation resolution asked for more elements than were waiting."""
    RET_STACK_OVERFLOW = 0x1C
    """The return stack was popped more often than it was pushed."""


class DiagKind(IntEnum):
    """What exactly a decoder diagnostic reports (``detail`` values depend on it)."""

    NO_CONFIG = 1
    """The decoder refused its configuration (ETMv3 data trace) and decoded nothing."""
    COMMIT_SHORT = 2
    """A commit asked for more P0 elements than the speculation stack held."""
    CANCEL_SHORT = 3
    """A cancel asked for more P0 elements than the speculation stack held."""
    MISPREDICT_NO_ATOM = 4
    """A mispredict found no atom to correct."""
    RETURN_STACK_OVERFLOW = 5
    """An address was taken from an empty return stack."""
    EXCEPTION_NO_ADDRESS = 6
    """An exception packet without its address."""
    Q_NO_ADDRESS = 7
    """A Q element without the address it needs."""
    BAD_PACKET = 8
    """A reserved, unknown or unsupported packet; ``detail`` is the packet type number."""
    UNSUPPORTED_ISA = 9
    """Code in an instruction set the decoder cannot walk (Jazelle, ThumbEE); ``detail``
    names the packet being processed (protocol-specific)."""
    BAD_SEQUENCE = 10
    """A packet out of sequence; ``detail`` is the packet type number."""
    DATA_TRACE = 11
    """Data trace packets, which the decoder does not decode; ``detail`` is the packet type."""
    UNSYNCED_START = 12
    """ITM and STM: packets decoded before any synchronisation packet, from ``offset``
    on; ``detail`` is the capture index of the first unambiguous packet boundary (every
    reading of the start of the stream agrees from there)."""
    UNSYNCED_AMBIGUOUS = 13
    """ITM: packets decoded before any synchronisation packet, from ``offset`` on, with no
    unambiguous packet boundary found near the start (readings of the stream that begin at
    different bytes do not meet); ``detail`` is 0."""
    SYNC_WAIT = 15
    """Packets the decoder skipped while it waited for synchronisation (an A-sync, then a
    trace info or I-sync) after losing it or before its first trace info: ``detail`` is
    their bytes, ``offset`` the first one's index. A count, not a listing line (the
    reference skips them silently)."""
    SPEC_DEPTH_EXCEEDED = 14
    """ETMv4/ETE: a trace info packet gave a speculation depth (``detail``) beyond the
    configured maximum (TRCIDR8.MAXSPEC); the excess is committed with the next packet, as
    the reference does."""


class IssueKind(IntEnum):
    """What a session-level :class:`Issue` is about."""

    EMPTY_BUFFER = 1
    CAPTURE = 2
    """Framing or size problems of the capture itself."""
    CAPTURE_STOP = 3
    """The capture ends early where the reference stops (an empty frame block)."""
    NO_SOURCE = 4
    """A buffer with no trace source associated."""
    NOT_DECODED = 5
    """A protocol cstrace does not decode."""
    SOURCE_CONFIG = 6
    """A source whose configuration is unusable: it is skipped."""
    MEMORY = 7
    """Memory dumps or images missing, overlapping or not matching."""
    INPUT = 8
    """Anything else about the inputs (metadata oddities, guessed formats)."""


@dataclass(frozen=True, slots=True)
class Issue:
    """A warning or error about a decode as a whole, with where it was found.

    ``str(issue)`` is the located one-line message the CLI prints.
    """

    severity: Severity
    kind: IssueKind
    message: str
    path: str | None = None
    line: int | None = None
    offset: int | None = None
    """Byte offset in the file ``path`` (or the capture when ``path`` is a buffer name)."""

    def __str__(self) -> str:
        return located(self.message, self.path, self.line, self.offset)

    @property
    def is_error(self) -> bool:
        """True for errors (exit status 2), False for warnings."""
        return self.severity >= Severity.ERROR
