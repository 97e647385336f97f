"""DCC target-request messages: reader, decoder and encoder (see the package docstring).

Input: ``dcc_words`` capture bytes (or packets); output: :class:`TracePoint`,
:class:`DebugMessage` and :class:`UnknownWord` packets, then ``SWTRACE``
elements. An unknown command word, or a message cut by the end of the capture,
gives an :class:`UnknownWord` packet and an ``UNKNOWN`` element; the reader
resynchronises on the next word.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from cstrace.capture.stream import Stream
from cstrace.elements import Element, EoTrace, NoSync, SWTrace, Unknown, UnsyncReason
from cstrace.protocols.base import DecodeContext, Packet, Registers

__all__ = [
    "COMMANDS",
    "DccConfig",
    "DebugMessage",
    "MsgType",
    "TracePoint",
    "UnknownWord",
    "encode_dcc",
    "from_registers",
    "iter_elements",
    "iter_packets",
]


class MsgType(IntEnum):
    """Debug message item types (bits [15:8] of the command word)."""

    ASCII = 0
    BYTES = 1
    HALFWORDS = 2
    WORDS = 4


# Command byte → name (thesis §6.3).
COMMANDS = {0x00: "trace message", 0x01: "debug message"}
_ITEM_BYTES = {MsgType.ASCII: 1, MsgType.BYTES: 1, MsgType.HALFWORDS: 2, MsgType.WORDS: 4}


@dataclass(frozen=True)
class DccConfig:
    """DCC software trace needs no configuration."""

    @classmethod
    def from_registers(cls, regs: Registers) -> DccConfig:
        """The (empty) configuration: DCC has no registers to read."""
        del regs
        return cls()

    @property
    def trace_id(self) -> int:
        """DCC data has no trace ID: 0."""
        return 0


def from_registers(regs: Registers, core: str = "", version: str = "") -> DccConfig:
    """The (empty) configuration of a DCC software-trace source."""
    del core, version
    return DccConfig.from_registers(regs)


class TracePoint(Packet):
    """A trace message: the program reached trace point ``number`` (24 bits)."""

    __slots__ = ("number",)

    def __init__(self, offset: int, raw: bytes, number: int) -> None:
        self.offset = offset
        self.raw = raw
        self.number = number


class DebugMessage(Packet):
    """A debug message: ``items`` of type ``mtype`` (characters for ASCII)."""

    __slots__ = ("items", "mtype")

    def __init__(self, offset: int, raw: bytes, mtype: MsgType, items: tuple[int, ...]) -> None:
        self.offset = offset
        self.raw = raw
        self.mtype = mtype
        self.items = items

    @property
    def text(self) -> str:
        """The items of an ASCII message as a string."""
        return bytes(self.items).decode("latin-1")


class UnknownWord(Packet):
    """A word that starts no known message, or a message cut short."""

    __slots__ = ("reason",)

    def __init__(self, offset: int, raw: bytes, reason: str) -> None:
        self.offset = offset
        self.raw = raw
        self.reason = reason


def iter_packets(stream: Stream, config: DccConfig, complete: bool = True) -> Iterator[Packet]:
    """The messages of a ``dcc_words`` capture (offsets are byte offsets)."""
    data = stream.data
    n = len(data) // 4
    words = [int.from_bytes(data[4 * i : 4 * i + 4], "little") for i in range(n)]
    i = 0
    while i < n:
        w = words[i]
        cmd = w & 0xFF
        if cmd == 0x00:
            yield TracePoint(4 * i, data[4 * i : 4 * i + 4], w >> 8)
            i += 1
            continue
        if cmd == 0x01:
            t = (w >> 8) & 0xFF
            count = w >> 16
            if t in _ITEM_BYTES.values() or t == 0:
                mtype = MsgType(t)
                size = _ITEM_BYTES[mtype]
                nwords = (count * size + 3) // 4
                if i + 1 + nwords <= n:
                    body = data[4 * (i + 1) : 4 * (i + 1 + nwords)]
                    items = tuple(
                        int.from_bytes(body[k * size : (k + 1) * size], "little")
                        for k in range(count)
                    )
                    yield DebugMessage(4 * i, data[4 * i : 4 * (i + 1 + nwords)], mtype, items)
                    i += 1 + nwords
                    continue
                yield UnknownWord(4 * i, data[4 * i : 4 * i + 4], "debug message cut short")
                i += 1
                continue
        yield UnknownWord(4 * i, data[4 * i : 4 * i + 4], f"unknown command {cmd:#04x}")
        i += 1
    if len(data) % 4:
        yield UnknownWord(4 * n, data[4 * n :], "capture ends inside a word")


def iter_elements(
    packets: Iterable[Packet], config: DccConfig, context: DecodeContext
) -> Iterator[Element]:
    """Software-trace elements of DCC messages."""
    yield NoSync(0, UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER)
    last = 0
    for p in packets:
        last = p.offset
        match p:
            case TracePoint(number=num):
                yield SWTrace(p.offset, 0, 0, True, 24, num, marker=True)
            case DebugMessage(mtype=mt, items=items):
                bits = 8 * _ITEM_BYTES[mt]
                for k, v in enumerate(items):
                    yield SWTrace(p.offset, 1, int(mt), True, bits, v, marker=k == len(items) - 1)
            case _:
                yield Unknown(p.offset)
    if context.complete:
        yield EoTrace(last)


def encode_dcc(messages: Iterable[tuple[int, int] | tuple[str | MsgType, object]]) -> bytes:
    """Encode messages: ``("tp", number)``, ``(MsgType.X, items)`` or ``("text", "hello")``."""
    out = bytearray()
    for kind, value in messages:
        if kind == "tp":
            assert isinstance(value, int)
            out += (((value & 0xFFFFFF) << 8) | 0x00).to_bytes(4, "little")
            continue
        if kind == "text":
            assert isinstance(value, str)
            mtype = MsgType.ASCII
            items: list[int] = list(value.encode("latin-1"))
        else:
            mtype = MsgType(int(kind))
            items = list(value)  # type: ignore[call-overload]
        size = _ITEM_BYTES[mtype]
        out += ((len(items) << 16) | (int(mtype) << 8) | 0x01).to_bytes(4, "little")
        body = b"".join(v.to_bytes(size, "little") for v in items)
        body += bytes((-len(body)) % 4)
        out += body
    return bytes(out)
