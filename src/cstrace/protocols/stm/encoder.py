"""STM encoder: STM packets or software messages → an STPv2 byte stream.

Input: :mod:`~cstrace.protocols.stm.packets` objects, or :class:`StmMessage`
records (master, channel, payload, marker, timestamp); output: the bytes a
CoreSight STM would emit for them (MIPI STPv2 opcodes, payloads most
significant nibble first, two nibbles per byte with the first in bits [3:0]).
This is the inverse of :func:`cstrace.protocols.stm.reader.iter_packets`, used
by the round-trip tests and to build example traces::

    from cstrace.protocols.stm.encoder import StmMessage, encode_messages

    data = encode_messages([StmMessage(0x41, 0, 0x10000000, marker=True)])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cstrace.protocols.stm.packets import (
    C8,
    C16,
    M8,
    Async,
    Data,
    Flag,
    Freq,
    GErr,
    MErr,
    Null,
    StmPacket,
    StmTsType,
    Trig,
    Version,
)
from cstrace.protocols.stm.reader import bin_to_gray

__all__ = ["StmEncoder", "StmMessage", "encode_messages", "encode_packets", "pack_nibbles"]

# Timestamp lengths the length nibble can give (0x0-0xC, then 0xD = 14, 0xE = 16).
_TS_LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16)
_DATA_OPCODE = {
    # (bits, marker, timestamp) -> opcode nibbles
    (4, False, False): (0xC,),
    (8, False, False): (0x4,),
    (16, False, False): (0x5,),
    (32, False, False): (0x6,),
    (64, False, False): (0x7,),
    (4, True, True): (0xD,),
    (8, True, True): (0x8,),
    (16, True, True): (0x9,),
    (32, True, True): (0xA,),
    (64, True, True): (0xB,),
    (4, False, True): (0xF, 0xC),
    (8, False, True): (0xF, 0x4),
    (16, False, True): (0xF, 0x5),
    (32, False, True): (0xF, 0x6),
    (64, False, True): (0xF, 0x7),
    (4, True, False): (0xF, 0xD),
    (8, True, False): (0xF, 0x8),
    (16, True, False): (0xF, 0x9),
    (32, True, False): (0xF, 0xA),
    (64, True, False): (0xF, 0xB),
}


def _nibbles(value: int, count: int) -> list[int]:
    """``count`` nibbles of ``value``, most significant first."""
    return [(value >> (4 * i)) & 0xF for i in range(count - 1, -1, -1)]


def pack_nibbles(nibbles: Iterable[int], pad: int = 0x0) -> bytes:
    """Pack nibbles two per byte, the first in bits [3:0]; an odd count is padded with ``pad``."""
    nibs = list(nibbles)
    if len(nibs) % 2:
        nibs.append(pad)
    return bytes(nibs[i] | (nibs[i + 1] << 4) for i in range(0, len(nibs), 2))


@dataclass(frozen=True)
class StmMessage:
    """One software trace write: master, channel, payload of ``bits`` bits, marker, timestamp."""

    master: int
    channel: int
    payload: int
    bits: int = 32
    marker: bool = False
    timestamp: int | None = None


class StmEncoder:
    """Stateful packet encoder: tracks the timestamp encoding and the last timestamp sent."""

    def __init__(self, ts_type: StmTsType = StmTsType.NATBINARY) -> None:
        self.ts_type = ts_type
        self.ts = 0

    def ts_nibbles(self, timestamp: int, bits: int | None = None) -> list[int]:
        """Length nibble and value nibbles updating the timestamp to ``timestamp``.

        ``bits`` is the number of low-order bits to send (a multiple of 4 among the
        lengths STPv2 allows); by default, the fewest that reach ``timestamp``.
        """
        timestamp &= 0xFFFF_FFFF_FFFF_FFFF
        grey = self.ts_type == StmTsType.GREY
        old = bin_to_gray(self.ts) if grey else self.ts
        new = bin_to_gray(timestamp) if grey else timestamp
        if bits is None:
            count = next(n for n in _TS_LENGTHS if (old >> (4 * n)) == (new >> (4 * n)))
        else:
            count = bits // 4
            if count not in _TS_LENGTHS:
                raise ValueError(f"an STM timestamp cannot update {bits} bits")
        self.ts = timestamp
        length = count if count <= 12 else (0xD if count == 14 else 0xE)
        return [length, *_nibbles(new, count)]

    def packet_nibbles(self, pkt: StmPacket) -> list[int]:
        """The nibbles of one packet."""
        match pkt:
            case Async():
                return [0xF] * 21 + [0x0]
            case Version(version=v):
                if v in (StmTsType.NATBINARY, StmTsType.GREY):
                    self.ts_type = StmTsType(v)
                return [0xF, 0x0, 0x0, v & 0xF]
            case Data(bits=bits, value=value, marker=marker, timestamp=ts, ts_bits=tb):
                out = [*_DATA_OPCODE[(bits, marker, ts is not None)], *_nibbles(value, bits // 4)]
                if ts is not None:
                    out += self.ts_nibbles(ts, tb)
                return out
            case M8(master=m):
                return [0x1, *_nibbles(m, 2)]
            case MErr(value=v):
                return [0x2, *_nibbles(v, 2)]
            case C8(channel=c):
                return [0x3, *_nibbles(c, 2)]
            case C16(channel=c):
                return [0xF, 0x3, *_nibbles(c, 4)]
            case GErr(value=v):
                return [0xF, 0x2, *_nibbles(v, 2)]
            case Flag(timestamp=ts, ts_bits=tb):
                if ts is None:
                    return [0xF, 0xE]
                return [0xE, *self.ts_nibbles(ts, tb)]
            case Null(timestamp=ts, ts_bits=tb):
                if ts is None:
                    return [0x0]
                return [0xF, 0x0, 0x1, *self.ts_nibbles(ts, tb)]
            case Trig(value=v, timestamp=ts, ts_bits=tb):
                if ts is None:
                    return [0xF, 0x0, 0x6, *_nibbles(v, 2)]
                return [0xF, 0x0, 0x7, *_nibbles(v, 2), *self.ts_nibbles(ts, tb)]
            case Freq(value=v):
                return [0xF, 0x0, 0x8, *_nibbles(v, 8)]
            case _:
                raise ValueError(f"cannot encode {type(pkt).__name__} packets")


def encode_packets(packets: Iterable[StmPacket], ts_type: StmTsType = StmTsType.NATBINARY) -> bytes:
    """Encode packets into STM bytes (an odd nibble count is padded with a NULL)."""
    enc = StmEncoder(ts_type)
    nibs: list[int] = []
    for pkt in packets:
        nibs += enc.packet_nibbles(pkt)
    return pack_nibbles(nibs)


def encode_messages(
    messages: Iterable[StmMessage], *, version: int = 3, sync_every: int = 0
) -> bytes:
    """Encode software messages into an STM stream that starts with ASYNC and VERSION.

    Master and channel packets are emitted when they change (C8 when only the low
    8 bits of the channel change, C16 otherwise); timestamps update only the
    nibbles that changed. With ``sync_every`` > 0, ASYNC and VERSION are repeated
    every that many messages (after which master and channel are sent again).
    """
    enc = StmEncoder(StmTsType(version) if version in (3, 4) else StmTsType.NATBINARY)
    nibs: list[int] = []
    master = channel = -1
    for n, msg in enumerate(messages):
        if n == 0 or (sync_every and n % sync_every == 0):
            nibs += enc.packet_nibbles(Async(0, b""))
            nibs += enc.packet_nibbles(Version(0, b"", version))
            master = channel = -1
        if msg.master != master:
            nibs += enc.packet_nibbles(M8(0, b"", msg.master & 0xFF))
            master = msg.master
            channel = 0
        if msg.channel != channel:
            if (msg.channel ^ channel) & 0xFF00 or channel < 0:
                nibs += enc.packet_nibbles(C16(0, b"", msg.channel & 0xFFFF))
            else:
                nibs += enc.packet_nibbles(C8(0, b"", msg.channel & 0xFFFF))
            channel = msg.channel
        value = msg.payload & ((1 << msg.bits) - 1)
        nibs += _DATA_OPCODE[(msg.bits, msg.marker, msg.timestamp is not None)]
        nibs += _nibbles(value, msg.bits // 4)
        if msg.timestamp is not None:
            nibs += enc.ts_nibbles(msg.timestamp)
    return pack_nibbles(nibs)
