"""Trace metadata: DS-5 snapshots (and, later, INI metadata and trace packages).

Input: a folder (or ``snapshot.ini``); output: a :class:`Snapshot` describing
devices, registers, memory dumps, trace buffers and which source feeds which
buffer and traces which core.
"""

from __future__ import annotations

from cstrace.snapshot.files import DirTree, FileTree, safe_relative
from cstrace.snapshot.ini import IniFile, IniSection, parse_ini
from cstrace.snapshot.model import (
    Device,
    MemoryDump,
    Register,
    Snapshot,
    TraceBuffer,
    TraceSource,
    parse_int,
)
from cstrace.snapshot.reader import load_snapshot, read_snapshot

__all__ = [
    "Device",
    "DirTree",
    "FileTree",
    "IniFile",
    "IniSection",
    "MemoryDump",
    "Register",
    "Snapshot",
    "TraceBuffer",
    "TraceSource",
    "load_snapshot",
    "parse_ini",
    "parse_int",
    "read_snapshot",
    "safe_relative",
]
