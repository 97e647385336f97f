"""The base class of every protocol packet (a hot module: compiled, an extension type).

Input: nothing (a plain record). Every packet has ``offset``, the capture index
of its first byte, and ``raw``, its bytes; each protocol's packet classes
(``cstrace.protocols.*.packets``) add their fields as ``__slots__``. Compiled,
``packet.pxd`` makes this class an extension type, so that the compiled readers
that build the hot packet kinds of ETMv4/ETE (``protocols/etmv4/packets.pxd``)
write their fields into a C struct. :mod:`cstrace.protocols.base` re-exports it.
"""

from __future__ import annotations

__all__ = ["Packet"]


class Packet:
    """Base class of all protocol packets: capture index of the first byte, and raw bytes."""

    __slots__ = ("offset", "raw")

    def __init__(self, offset: int, raw: bytes) -> None:
        self.offset = offset
        self.raw = raw

    def __repr__(self) -> str:
        fields = []
        for klass in type(self).__mro__:
            for name in getattr(klass, "__slots__", ()):
                if name not in ("offset", "raw"):
                    fields.append(f"{name}={getattr(self, name)!r}")
        extra = (", " + ", ".join(fields)) if fields else ""
        return f"{type(self).__name__}(offset={self.offset}, raw={self.raw.hex()}{extra})"
