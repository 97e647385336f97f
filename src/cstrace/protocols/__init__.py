"""Trace protocols, found by name or by the source type an input gives.

``get_protocol("etmv4")`` and ``find_protocol("ETM4.2")`` return the
:class:`ProtocolSpec` of a protocol, or ``None`` when cstrace does not decode
it (yet); ``protocol_name("PTM1.1")`` gives the package name (``ptm``).
Protocol packages are imported only when used.
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
    "all_protocols",
    "find_protocol",
    "get_protocol",
    "named_protocol",
    "protocol_name",
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


def protocol_name(source_type: str) -> str | None:
    """The protocol package name (``etmv4``, ``ptm``...) of a source type such as ``ETM4.2``."""
    return MODULES.get(source_type.split(".", 1)[0].strip().upper())


def get_protocol(name: str) -> ProtocolSpec | None:
    """The protocol named ``name`` (``etmv4``, ``ptm``...), or None when it is not decoded."""
    if name not in MODULES.values():
        return None
    return _load(name)


def find_protocol(source_type: str) -> ProtocolSpec | None:
    """The protocol for a trace source type such as ``ETM4.2`` or ``PTM1.1``, if decoded."""
    module = protocol_name(source_type)
    if module is None:
        return None
    return _load(module)


def all_protocols() -> list[ProtocolSpec]:
    """Every protocol cstrace decodes, in the order of :data:`MODULES` (imports them all)."""
    found = []
    for module in dict.fromkeys(MODULES.values()):
        spec = _load(module)
        if spec is not None:
            found.append(spec)
    return found


def named_protocol(word: str) -> ProtocolSpec | None:
    """The protocol a user names ``word`` (its name or one of its ``aliases``, any case),
    or None."""
    word = word.strip().lower()
    for spec in all_protocols():
        if word == spec.name or word in spec.aliases:
            return spec
    return None


def _load(module: str) -> ProtocolSpec | None:
    try:
        mod = importlib.import_module(f"cstrace.protocols.{module}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith(f"cstrace.protocols.{module}"):
            return None
        raise
    spec = getattr(mod, "PROTOCOL", None)
    return spec if isinstance(spec, ProtocolSpec) else None
