"""STM packets: the STPv2 packets a CoreSight STM emits, as the reader cuts them.

Input: nothing (these are the value classes); output: one small slotted class
per packet kind, each a :class:`~cstrace.protocols.packet.Packet` carrying its
capture index (``offset``) and raw bytes (``raw``).

The packet set is the STPv2 set CoreSight STM uses (MIPI STPv2 opcode table;
CoreSight STM-500 TRM, "STPv2 packets"): ASYNC, VERSION, NULL, M8, MERR, GERR,
C8, C16, D4/D8/D16/D32/D64 (with marker and/or timestamp), FLAG, TRIG, FREQ.
The reference decoder adds marker packets for states of the reader: NOTSYNC
(bytes before the first ASYNC), RESERVED (unsupported opcode), BAD_SEQUENCE
(invalid field inside a packet) and INCOMPLETE_EOT (packet cut by the end of
the trace); cstrace adds :class:`Unsynced`, which says where decoding without
an ASYNC starts.

Timestamps: ``timestamp`` is the full timestamp value after the packet's update
was applied (``None`` when the packet has none) and ``ts_bits`` the number of
low-order bits the packet updated (the reader always sets it; in packets built
for the encoder, ``None`` lets the encoder send the fewest nibbles).
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from cstrace.protocols.base import Packet

__all__ = [
    "C8",
    "C16",
    "M8",
    "Async",
    "BadSequence",
    "Data",
    "Flag",
    "Freq",
    "GErr",
    "IncompleteEot",
    "MErr",
    "NotSync",
    "Null",
    "Reserved",
    "StmPacket",
    "StmPktType",
    "StmTsType",
    "Trig",
    "Unsynced",
    "Version",
]


class StmPktType(IntEnum):
    """STM packet kinds, named as the reference decoder names them (``STM_PKT_*``)."""

    NOTSYNC = 0
    INCOMPLETE_EOT = 1
    NO_ERR_TYPE = 2
    ASYNC = 3
    VERSION = 4
    FREQ = 5
    NULL = 6
    TRIG = 7
    GERR = 8
    MERR = 9
    M8 = 10
    C8 = 11
    C16 = 12
    FLAG = 13
    D4 = 14
    D8 = 15
    D16 = 16
    D32 = 17
    D64 = 18
    BAD_SEQUENCE = 19
    RESERVED = 20


class StmTsType(IntEnum):
    """Timestamp encoding announced by the VERSION packet (STPv2: 3 natural binary, 4 Gray)."""

    UNKNOWN = 0
    NATBINARY = 3
    GREY = 4


class StmPacket(Packet):
    """Base class of the STM packets."""

    __slots__ = ()
    KIND: ClassVar[StmPktType] = StmPktType.NO_ERR_TYPE


class NotSync(StmPacket):
    """Bytes read before the stream is synchronised (no ASYNC seen yet)."""

    __slots__ = ()
    KIND = StmPktType.NOTSYNC


class Unsynced(StmPacket):
    """Decoding goes on without an ASYNC (not a packet of the protocol).

    Read only when packets before synchronisation are decoded (``decode_before_sync``):
    ``raw`` holds the bytes skipped before the first unambiguous packet boundary,
    whose capture index is ``resume`` (and ``certain``: the STM reader starts
    decoding there, :mod:`~cstrace.protocols.stm.boundary`). It is listed as a
    NOTSYNC packet.
    """

    __slots__ = ("certain", "resume")
    KIND = StmPktType.NOTSYNC

    def __init__(self, offset: int, raw: bytes, resume: int, certain: int | None) -> None:
        self.offset = offset
        self.raw = raw
        self.resume = resume
        self.certain = certain


class Async(StmPacket):
    """ASYNC: alignment synchronisation (21 or more 0xF nibbles, then 0x0)."""

    __slots__ = ()
    KIND = StmPktType.ASYNC


class Version(StmPacket):
    """VERSION (opcode F00): protocol version; selects the timestamp encoding."""

    __slots__ = ("version",)
    KIND = StmPktType.VERSION

    def __init__(self, offset: int, raw: bytes, version: int) -> None:
        self.offset = offset
        self.raw = raw
        self.version = version


class _Stamped(StmPacket):
    """A packet that may carry a timestamp."""

    __slots__ = ("timestamp", "ts_bits")

    def __init__(
        self, offset: int, raw: bytes, timestamp: int | None, ts_bits: int | None = None
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.timestamp = timestamp
        self.ts_bits = ts_bits


class Null(_Stamped):
    """NULL (opcode 0), or NULL_TS (opcode F01) when ``timestamp`` is set."""

    __slots__ = ()
    KIND = StmPktType.NULL


class M8(StmPacket):
    """M8 (opcode 1): set the current master; the channel becomes 0."""

    __slots__ = ("master",)
    KIND = StmPktType.M8

    def __init__(self, offset: int, raw: bytes, master: int) -> None:
        self.offset = offset
        self.raw = raw
        self.master = master


class MErr(StmPacket):
    """MERR (opcode 2): error in the current master; the channel becomes 0."""

    __slots__ = ("value",)
    KIND = StmPktType.MERR

    def __init__(self, offset: int, raw: bytes, value: int) -> None:
        self.offset = offset
        self.raw = raw
        self.value = value


class GErr(StmPacket):
    """GERR (opcode F2): global error; master and channel become 0."""

    __slots__ = ("value",)
    KIND = StmPktType.GERR

    def __init__(self, offset: int, raw: bytes, value: int) -> None:
        self.offset = offset
        self.raw = raw
        self.value = value


class C8(StmPacket):
    """C8 (opcode 3): set the low 8 bits of the channel; ``channel`` is the full result."""

    __slots__ = ("channel",)
    KIND = StmPktType.C8

    def __init__(self, offset: int, raw: bytes, channel: int) -> None:
        self.offset = offset
        self.raw = raw
        self.channel = channel


class C16(StmPacket):
    """C16 (opcode F3): set the 16-bit channel."""

    __slots__ = ("channel",)
    KIND = StmPktType.C16

    def __init__(self, offset: int, raw: bytes, channel: int) -> None:
        self.offset = offset
        self.raw = raw
        self.channel = channel


class Data(_Stamped):
    """D4/D8/D16/D32/D64 data, optionally with marker (M) and timestamp (TS)."""

    __slots__ = ("bits", "marker", "value")

    def __init__(
        self,
        offset: int,
        raw: bytes,
        bits: int,
        value: int,
        marker: bool = False,
        timestamp: int | None = None,
        ts_bits: int | None = None,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.timestamp = timestamp
        self.ts_bits = ts_bits
        self.bits = bits
        self.value = value
        self.marker = marker

    @property
    def kind(self) -> StmPktType:
        """The reference packet type for this data size."""
        return _DATA_KINDS[self.bits]


_DATA_KINDS = {
    4: StmPktType.D4,
    8: StmPktType.D8,
    16: StmPktType.D16,
    32: StmPktType.D32,
    64: StmPktType.D64,
}


class Flag(_Stamped):
    """FLAG (opcode FE), or FLAG_TS (opcode E) when ``timestamp`` is set."""

    __slots__ = ()
    KIND = StmPktType.FLAG


class Trig(_Stamped):
    """TRIG (opcode F06) or TRIG_TS (F07): trigger event with an 8-bit value."""

    __slots__ = ("value",)
    KIND = StmPktType.TRIG

    def __init__(
        self,
        offset: int,
        raw: bytes,
        value: int,
        timestamp: int | None = None,
        ts_bits: int | None = None,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.timestamp = timestamp
        self.ts_bits = ts_bits
        self.value = value


class Freq(StmPacket):
    """FREQ (opcode F08): timestamp frequency in Hz."""

    __slots__ = ("value",)
    KIND = StmPktType.FREQ

    def __init__(self, offset: int, raw: bytes, value: int) -> None:
        self.offset = offset
        self.raw = raw
        self.value = value


class Reserved(StmPacket):
    """An opcode CoreSight STM does not use; ``opcode`` holds its nibbles (first in bits 3:0)."""

    __slots__ = ("opcode",)
    KIND = StmPktType.RESERVED

    def __init__(self, offset: int, raw: bytes, opcode: int) -> None:
        self.offset = offset
        self.raw = raw
        self.opcode = opcode


class BadSequence(StmPacket):
    """A packet with an invalid field; ``orig`` is the type the reader had set for it."""

    __slots__ = ("marker", "orig")
    KIND = StmPktType.BAD_SEQUENCE

    def __init__(self, offset: int, raw: bytes, orig: StmPktType, marker: bool = False) -> None:
        self.offset = offset
        self.raw = raw
        self.orig = orig
        self.marker = marker


class IncompleteEot(StmPacket):
    """A packet cut by the end of the trace; ``orig`` is the type the reader had set for it."""

    __slots__ = ("marker", "orig")
    KIND = StmPktType.INCOMPLETE_EOT

    def __init__(self, offset: int, raw: bytes, orig: StmPktType, marker: bool = False) -> None:
        self.offset = offset
        self.raw = raw
        self.orig = orig
        self.marker = marker
