"""Small bit-manipulation helpers shared by the protocol readers and decoders."""

from __future__ import annotations

__all__ = ["bit", "field", "hexbytes", "sign_extend"]


def field(value: int, hi: int, lo: int) -> int:
    """Return bits ``hi..lo`` (inclusive) of ``value``."""
    return (value >> lo) & ((1 << (hi - lo + 1)) - 1)


def bit(value: int, n: int) -> int:
    """Return bit ``n`` of ``value`` as 0 or 1."""
    return (value >> n) & 1


def sign_extend(value: int, width: int) -> int:
    """Interpret the low ``width`` bits of ``value`` as a two's complement number."""
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def hexbytes(data: bytes) -> str:
    """Render bytes as the reference lister does: ``0x12 0x34 `` (each followed by a space)."""
    return "0x" + data.hex(" ").replace(" ", " 0x") + " " if data else ""
