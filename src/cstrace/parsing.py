"""Small helpers for every reader of text inputs: C-style integers, text files with limits.

Input: text (a number as written in a metadata file, the bytes of a text file);
output: an ``int`` or ``str``, or a located :class:`~cstrace.errors.InputError`.
Shared by the input adapters (:mod:`cstrace.inputs`) and the event-log parser
(:mod:`cstrace.memory.events`).
"""

from __future__ import annotations

import re

from cstrace.errors import InputError

__all__ = ["decode_text", "parse_int"]

_INT = re.compile(r"^[+]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)[uUlL]*$")


def parse_int(text: str, *, what: str, path: str, line: int | None) -> int:
    """Parse a C-style integer (``0x1F``, ``31``, ``037``) or raise a located error."""
    t = text.strip().replace("_", "")
    if not _INT.match(t):
        raise InputError(f"{what}: {text!r} is not a number", path=path, line=line)
    t = t.lstrip("+").rstrip("uUlL")
    if t.lower().startswith("0x"):
        return int(t, 16)
    if len(t) > 1 and t.startswith("0"):
        return int(t, 8)
    return int(t, 10)


def decode_text(raw: bytes | str, name: str, *, what: str, limit: int) -> str:
    """The text of a metadata file: UTF-8, else Latin-1; refused if too large or binary."""
    if isinstance(raw, str):
        return raw
    if len(raw) > limit:
        raise InputError(f"{what} too large ({len(raw)} bytes)", path=name)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputError("not a text file (NUL byte)", path=name, offset=nul)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")
