"""ITM packets: the ITM/DWT packet protocol of ARMv7-M and ARMv8-M, as the reader cuts it.

Input: nothing (these are the value classes); output: one small slotted class
per packet kind, each a :class:`~cstrace.protocols.packet.Packet` carrying its
capture index (``offset``) and raw bytes (``raw``).

Packet kinds (ARMv7-M ARM, Appendix D4 "Debug ITM and DWT Packet Protocol";
ARMv8-M ARM, "ITM and DWT packet protocol"): synchronization, overflow,
software source (instrumentation, SWIT), hardware source (DWT: event counter,
exception trace, PC sample, data trace), local timestamp (formats 1 and 2),
global timestamp (GTS1, GTS2) and extension. The reference decoder adds
NOTSYNC (bytes before the first synchronization packet), RESERVED,
BAD_SEQUENCE and INCOMPLETE_EOT; cstrace adds :class:`Unsynced`, which says
where decoding without synchronisation starts.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from cstrace.protocols.base import Packet

__all__ = [
    "Async",
    "BadSequence",
    "Dwt",
    "Extension",
    "GlobalTs1",
    "GlobalTs2",
    "IncompleteEot",
    "ItmPacket",
    "ItmPktType",
    "LocalTs",
    "NotSync",
    "Overflow",
    "Reserved",
    "Swit",
    "Unsynced",
]


class ItmPktType(IntEnum):
    """ITM packet kinds, named and numbered as the reference decoder does (``ITM_PKT_*``)."""

    NOTSYNC = 0
    INCOMPLETE_EOT = 1
    NO_ERR_TYPE = 2
    ASYNC = 3
    OVERFLOW = 4
    SWIT = 5
    DWT = 6
    TS_LOCAL = 7
    TS_GLOBAL_1 = 8
    TS_GLOBAL_2 = 9
    EXTENSION = 10
    BAD_SEQUENCE = 11
    RESERVED = 12


class ItmPacket(Packet):
    """Base class of the ITM packets."""

    __slots__ = ()
    KIND: ClassVar[ItmPktType] = ItmPktType.NO_ERR_TYPE


class NotSync(ItmPacket):
    """Bytes read before the first synchronization packet.

    ``decoded`` tells whether the reference also passed it to its decoder (only
    the first one is); the others are only printed.
    """

    __slots__ = ("decoded",)
    KIND = ItmPktType.NOTSYNC

    def __init__(self, offset: int, raw: bytes, decoded: bool = True) -> None:
        self.offset = offset
        self.raw = raw
        self.decoded = decoded


class Unsynced(ItmPacket):
    """Decoding goes on without a synchronisation packet (not a packet of the protocol).

    Read only when packets before synchronisation are decoded (``decode_before_sync``):
    ``raw`` holds the bytes skipped before the decode start (usually none), ``resume``
    is the capture index where packets start again, ``certain`` the capture index of
    the first unambiguous packet boundary, or None when none was found
    (:mod:`~cstrace.protocols.itm.boundary`). It is listed as a NOTSYNC packet.
    """

    __slots__ = ("certain", "resume")
    KIND = ItmPktType.NOTSYNC

    def __init__(self, offset: int, raw: bytes, resume: int, certain: int | None) -> None:
        self.offset = offset
        self.raw = raw
        self.resume = resume
        self.certain = certain


class Async(ItmPacket):
    """Synchronization packet: at least 47 zero bits then a one (``00 00 00 00 00 80``)."""

    __slots__ = ()
    KIND = ItmPktType.ASYNC


class Overflow(ItmPacket):
    """Overflow packet (``0x70``): packets were lost."""

    __slots__ = ()
    KIND = ItmPktType.OVERFLOW


class _Payload(ItmPacket):
    """A packet with a source or discriminator ID and a 1, 2 or 4 byte payload."""

    __slots__ = ("size", "src_id", "value")

    def __init__(self, offset: int, raw: bytes, src_id: int, value: int, size: int) -> None:
        self.offset = offset
        self.raw = raw
        self.src_id = src_id
        self.value = value
        self.size = size


class Swit(_Payload):
    """Software source (instrumentation) packet: stimulus port ``src_id`` (0-31), payload."""

    __slots__ = ()
    KIND = ItmPktType.SWIT


class Dwt(_Payload):
    """Hardware source (DWT) packet: discriminator ``src_id`` (0-31), payload.

    Discriminators: 0 event counter, 1 exception trace, 2 PC sample, 8-23 data
    trace (comparator = bits [2:1]; type 1 PC value or address, type 2 data
    value; bit 0 read/write).
    """

    __slots__ = ()
    KIND = ItmPktType.DWT


class LocalTs(ItmPacket):
    """Local timestamp: format 1 (``tc`` = TC bits, ``size`` 1-4 continuation bytes) or
    format 2 (``compact``: a 3-bit value in the header, ``tc`` 0, ``size`` 1)."""

    __slots__ = ("compact", "size", "tc", "value")
    KIND = ItmPktType.TS_LOCAL

    def __init__(
        self, offset: int, raw: bytes, tc: int, value: int, size: int, compact: bool = False
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.tc = tc
        self.value = value
        self.size = size
        self.compact = compact


class GlobalTs1(ItmPacket):
    """GTS1: global timestamp bits [25:0] (fewer when the upper bytes did not change).

    ``flags`` bit 0 is ClkCh (clock change), bit 1 Wrap (bits above 25 changed).
    """

    __slots__ = ("flags", "size", "value")
    KIND = ItmPktType.TS_GLOBAL_1

    def __init__(self, offset: int, raw: bytes, flags: int, value: int, size: int) -> None:
        self.offset = offset
        self.raw = raw
        self.flags = flags
        self.value = value
        self.size = size


class GlobalTs2(ItmPacket):
    """GTS2: global timestamp bits [47:26] (4 payload bytes) or [63:26] (6 payload bytes).

    ``size`` is the number of payload bytes (1-6). Like the reference, ``value``
    keeps at most 40 bits.
    """

    __slots__ = ("size", "value")
    KIND = ItmPktType.TS_GLOBAL_2

    def __init__(self, offset: int, raw: bytes, value: int, size: int) -> None:
        self.offset = offset
        self.raw = raw
        self.value = value
        self.size = size


class Extension(ItmPacket):
    """Extension packet: ``hardware`` source bit (SH), payload bit length ``nbits``, value.

    With SH = 0 and a 3-bit payload it is the stimulus port page number.
    """

    __slots__ = ("hardware", "nbits", "value")
    KIND = ItmPktType.EXTENSION

    def __init__(self, offset: int, raw: bytes, hardware: bool, nbits: int, value: int) -> None:
        self.offset = offset
        self.raw = raw
        self.hardware = hardware
        self.nbits = nbits
        self.value = value


class Reserved(ItmPacket):
    """A reserved header byte."""

    __slots__ = ()
    KIND = ItmPktType.RESERVED


class BadSequence(ItmPacket):
    """A packet with an invalid continuation or synchronization sequence; ``orig`` is its type."""

    __slots__ = ("orig",)
    KIND = ItmPktType.BAD_SEQUENCE

    def __init__(self, offset: int, raw: bytes, orig: ItmPktType) -> None:
        self.offset = offset
        self.raw = raw
        self.orig = orig


class IncompleteEot(ItmPacket):
    """A packet cut by the end of the trace; ``orig`` is its type."""

    __slots__ = ("orig",)
    KIND = ItmPktType.INCOMPLETE_EOT

    def __init__(self, offset: int, raw: bytes, orig: ItmPktType) -> None:
        self.offset = offset
        self.raw = raw
        self.orig = orig
