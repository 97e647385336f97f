"""ITM encoder: ITM packets → the bytes an ITM/DWT would emit for them.

Input: :mod:`~cstrace.protocols.itm.packets` objects; output: ITM bytes
(ARMv7-M ARM, Appendix D4 "Debug ITM and DWT Packet Protocol"). This is the
inverse of :func:`cstrace.protocols.itm.reader.iter_packets`, used by the
round-trip tests and to build example traces::

    from cstrace.protocols.itm.encoder import encode_packets
    from cstrace.protocols.itm.packets import Async, Swit

    data = encode_packets([Async(0, b""), Swit(0, b"", 1, 0x41, 1)])
"""

from __future__ import annotations

from collections.abc import Iterable

from cstrace.protocols.itm.packets import (
    Async,
    Dwt,
    Extension,
    GlobalTs1,
    GlobalTs2,
    ItmPacket,
    LocalTs,
    Overflow,
    Swit,
)

__all__ = ["SYNC", "encode_packet", "encode_packets"]

SYNC = b"\x00\x00\x00\x00\x00\x80"
"""A synchronization packet: 47 zero bits, then a one."""

_SIZE_CODE = {1: 1, 2: 2, 4: 3}
_EXT_BYTES = {2: 0, 9: 1, 16: 2, 23: 3, 31: 4}


def _continuation(value: int, count: int) -> bytes:
    """``count`` bytes of 7 value bits each, low first; all but the last have bit 7 set."""
    out = bytearray()
    for i in range(count):
        b = (value >> (7 * i)) & 0x7F
        if i < count - 1:
            b |= 0x80
        out.append(b)
    return bytes(out)


def encode_packet(pkt: ItmPacket) -> bytes:
    """The bytes of one ITM packet."""
    match pkt:
        case Async():
            return SYNC
        case Overflow():
            return b"\x70"
        case Swit(src_id=src, value=value, size=size) | Dwt(src_id=src, value=value, size=size):
            hardware = 0x04 if isinstance(pkt, Dwt) else 0
            header = ((src & 0x1F) << 3) | hardware | _SIZE_CODE[size]
            return bytes([header]) + (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        case LocalTs(tc=tc, value=value, size=size, compact=compact):
            if compact:
                if not 0 < value < 7:
                    raise ValueError("a format 2 local timestamp holds 1 to 6")
                return bytes([value << 4])
            return bytes([0xC0 | ((tc & 3) << 4)]) + _continuation(value, size)
        case GlobalTs1(flags=flags, value=value, size=size):
            body = bytearray(_continuation(value, size))
            if size == 4:
                body[3] = (body[3] & 0x1F) | ((flags & 3) << 5)
            return b"\x94" + bytes(body)
        case GlobalTs2(value=value, size=size):
            return b"\xb4" + _continuation(value, size)
        case Extension(hardware=hw, nbits=nbits, value=value):
            count = _EXT_BYTES[nbits]
            header = 0x08 | (0x04 if hw else 0) | ((value & 7) << 4) | (0x80 if count else 0)
            return bytes([header]) + _continuation(value >> 3, count)
        case _:
            raise ValueError(f"cannot encode {type(pkt).__name__} packets")


def encode_packets(packets: Iterable[ItmPacket]) -> bytes:
    """The bytes of a sequence of ITM packets."""
    return b"".join(encode_packet(p) for p in packets)
