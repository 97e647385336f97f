"""The error vocabulary shared by every layer of cstrace.

All errors derive from :class:`CstraceError`; anything else escaping the
library is a bug. Each error knows where it happened (file, line or byte
offset, trace ID) so that the CLI can print one line that points at the cause.
"""

from __future__ import annotations

__all__ = [
    "CaptureError",
    "ConfigError",
    "CstraceError",
    "DecodeError",
    "SnapshotError",
]


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
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.offset is not None:
            where.append(f"offset {self.offset:#x}")
        return f"{': '.join(where)}: {self.message}" if where else self.message


class SnapshotError(CstraceError):
    """A snapshot, package or metadata file is missing, malformed or unsafe."""


class ConfigError(CstraceError):
    """Register values or options do not describe a decodable configuration."""


class CaptureError(CstraceError):
    """The captured trace bytes cannot be framed or demultiplexed."""


class DecodeError(CstraceError):
    """Trace data for one trace ID is truncated or invalid at an offset."""

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        trace_id: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message, path=path, offset=offset)
        self.trace_id = trace_id
