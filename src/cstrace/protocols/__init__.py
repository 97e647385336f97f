"""Trace protocols, found by the name a snapshot gives the trace source type.

``find_protocol("ETM4")`` returns the :class:`ProtocolSpec` of a protocol, or
``None`` when cstrace does not decode it (yet). Protocol packages are imported
only when used.
"""

from __future__ import annotations

import importlib

from cstrace.protocols.base import (
    DecodeContext,
    DecodeOptions,
    Packet,
    ProtocolConfig,
    ProtocolSpec,
)

__all__ = [
    "MODULES",
    "DecodeContext",
    "DecodeOptions",
    "Packet",
    "ProtocolConfig",
    "ProtocolSpec",
    "find_protocol",
]

# Trace source type (snapshot ``type`` before the '.') → protocol package.
MODULES: dict[str, str] = {
    "ETM4": "etmv4",
    "ETE": "ete",
    "ETM3": "etmv3",
    "PTM1": "ptm",
    "PFT1": "ptm",
    "PTM": "ptm",
    "PFT": "ptm",
    "STM": "stm",
    "ITM": "itm",
    "ETM1": "etmv1",
    "ETM2": "etmv2",
    "XSCALE": "xscale",
    "DCC": "dcc",
}


def find_protocol(source_type: str) -> ProtocolSpec | None:
    """The protocol for a trace source type such as ``ETM4.2`` or ``PTM1.1``, if decoded."""
    key = source_type.split(".", 1)[0].strip().upper()
    module = MODULES.get(key)
    if module is None:
        return None
    try:
        mod = importlib.import_module(f"cstrace.protocols.{module}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith(f"cstrace.protocols.{module}"):
            return None
        raise
    spec = getattr(mod, "PROTOCOL", None)
    return spec if isinstance(spec, ProtocolSpec) else None
