"""Readable one-line-per-element text and JSON Lines renderings.

Input: generic elements (with their trace ID); output: text lines. The text form
is the CLI's default: index, trace ID, element type, then the element's fields as
``name=value`` (addresses in hex, absent optional fields left out).
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from cstrace.elements import Element, PEContextInfo

__all__ = ["element_fields", "json_line", "text_line"]

_HEX_FIELDS = frozenset(
    {"start", "end", "address", "return_address", "context_id", "vmid", "payload", "value"}
)


def element_fields(elem: Element) -> dict[str, Any]:
    """The fields of an element other than ``offset``, with optional ones left out when absent."""
    out: dict[str, Any] = {}
    for klass in reversed(type(elem).__mro__):
        for name in getattr(klass, "__slots__", ()):
            if name == "offset":
                continue
            value = getattr(elem, name)
            if value is None:
                continue
            out[name] = value
    return out


def _text_value(name: str, value: Any) -> str:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) and name in _HEX_FIELDS:
        return f"{value:#x}"
    if isinstance(value, PEContextInfo):
        parts = []
        if value.el_valid:
            parts.append(f"EL{int(value.exception_level)}")
        parts.append(value.security_level.name.lower())
        parts.append("64-bit" if value.bits64 else "32-bit")
        if value.vmid_valid:
            parts.append(f"vmid={value.vmid:#x}")
        if value.ctxt_id_valid:
            parts.append(f"ctxtid={value.context_id:#x}")
        return ",".join(parts)
    return str(value)


def text_line(trace_id: int, elem: Element) -> str:
    """``   offset   id  TYPE  field=value ...`` for one element."""
    fields = " ".join(
        f"{k}={_text_value(k, v)}"
        for k, v in element_fields(elem).items()
        if not (isinstance(v, bool) and not v)
    )
    return f"{elem.offset:>10} {trace_id:>4x}  {elem.TYPE.name:<15} {fields}".rstrip()


def _json_value(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, PEContextInfo):
        return {s: _json_value(getattr(value, s)) for s in PEContextInfo.__slots__}
    if isinstance(value, bytes):
        return value.hex()
    return value


def json_line(trace_id: int, elem: Element) -> str:
    """One JSON object for one element: ``idx``, ``id``, ``type`` and the element's fields."""
    obj: dict[str, Any] = {"idx": elem.offset, "id": trace_id, "type": elem.TYPE.name}
    for k, v in element_fields(elem).items():
        obj[k] = _json_value(v)
    return json.dumps(obj, separators=(",", ":"))
