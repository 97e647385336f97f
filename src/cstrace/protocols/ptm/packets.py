"""PTM (PFT 1.0/1.1) packets: one small slotted class per packet kind.

Input: nothing (plain records); produced by :mod:`cstrace.protocols.ptm.reader`
from the bytes of one trace ID, consumed by :mod:`cstrace.protocols.ptm.decoder`
and rendered by :mod:`cstrace.render.ocsd.ptm`.

Packet kinds are those of the Program Flow Trace Architecture Specification
(ARM IHI 0035B, §4.5, Table 4.1 "Packet formats"), plus the reader's own
records for bytes that are not packets: :class:`NotSync` (data before the first
A-sync), :class:`Reserved` (a reserved header), :class:`BadSequence` (a
malformed packet) and :class:`IncompleteEOT` (a packet cut off by the end of
the trace).

Some fields describe the reader's running state rather than the packet alone,
as the reference decoder's listing does: ``isa_changed`` (the instruction set
differs from the one before the packet), and for address packets the full
address value with ``valid_bits`` (address bits known so far) and
``pkt_bits`` (bits this packet updated).
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from cstrace.elements import Isa
from cstrace.protocols.base import Packet

__all__ = [
    "VMID",
    "ASync",
    "Atom",
    "BadSequence",
    "BranchAddress",
    "ContextID",
    "ExceptionReturn",
    "ISync",
    "ISyncReason",
    "Ignore",
    "IncompleteEOT",
    "NotSync",
    "PtmPacket",
    "PtmPacketType",
    "Reserved",
    "Timestamp",
    "Trigger",
    "WaypointUpdate",
]


class ISyncReason(IntEnum):
    """I-sync information byte bits [6:5] (IHI 0035B §4.5.2)."""

    PERIODIC = 0
    TRACE_ON = 1
    OVERFLOW = 2
    DEBUG_EXIT = 3


class PtmPacketType(IntEnum):
    """Packet kinds, named as in IHI 0035B Table 4.1, plus the reader's error records."""

    NOTSYNC = 0
    INCOMPLETE_EOT = 1
    A_SYNC = 2
    I_SYNC = 3
    ATOM = 4
    BRANCH_ADDRESS = 5
    WAYPOINT_UPDATE = 6
    TRIGGER = 7
    CONTEXT_ID = 8
    VMID = 9
    TIMESTAMP = 10
    EXCEPTION_RETURN = 11
    IGNORE = 12
    BAD_SEQUENCE = 13
    RESERVED = 14


class PtmPacket(Packet):
    """Base of all PTM packets: ``TYPE`` names the kind."""

    __slots__ = ()
    TYPE: ClassVar[PtmPacketType]


class NotSync(PtmPacket):
    """Bytes read while looking for the first A-sync.

    ``carried``: the 0x00 bytes that ended the previous block, reported again
    when they turn out not to start an A-sync (the reference lists them but does
    not pass them to its decoder).
    """

    __slots__ = ("carried",)
    TYPE = PtmPacketType.NOTSYNC

    def __init__(self, offset: int, raw: bytes, carried: bool = False) -> None:
        self.offset = offset
        self.raw = raw
        self.carried = carried


class IncompleteEOT(PtmPacket):
    """The bytes of a packet that the end of the trace cut short."""

    __slots__ = ()
    TYPE = PtmPacketType.INCOMPLETE_EOT


class ASync(PtmPacket):
    """A-sync: five or more 0x00 bytes then 0x80, the alignment synchronisation point."""

    __slots__ = ()
    TYPE = PtmPacketType.A_SYNC


class ISync(PtmPacket):
    """I-sync: full address, state, reason, and optional cycle count and context ID."""

    __slots__ = (
        "address",
        "alt_isa",
        "context_id",
        "cycle_count",
        "hyp",
        "isa",
        "isa_changed",
        "ns",
        "reason",
    )
    TYPE = PtmPacketType.I_SYNC

    def __init__(
        self,
        offset: int,
        raw: bytes,
        address: int,
        isa: Isa,
        reason: ISyncReason,
        ns: bool,
        hyp: bool = False,
        alt_isa: bool = False,
        context_id: int | None = None,
        cycle_count: int | None = None,
        isa_changed: bool = False,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.address = address
        self.isa = isa
        self.reason = reason
        self.ns = ns
        self.hyp = hyp
        self.alt_isa = alt_isa
        self.context_id = context_id
        self.cycle_count = cycle_count
        self.isa_changed = isa_changed


class Atom(PtmPacket):
    """Atoms: ``count`` E/N results, oldest in bit 0 of ``bits`` (1 = E, executed)."""

    __slots__ = ("bits", "count", "cycle_count")
    TYPE = PtmPacketType.ATOM

    def __init__(
        self, offset: int, raw: bytes, bits: int, count: int, cycle_count: int | None = None
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.bits = bits
        self.count = count
        self.cycle_count = cycle_count


class BranchAddress(PtmPacket):
    """Branch address: a taken branch's target, with exception information if an exception."""

    __slots__ = (
        "address",
        "cycle_count",
        "exception",
        "hyp",
        "isa",
        "isa_changed",
        "ns",
        "ns_updated",
        "pkt_bits",
        "valid_bits",
    )
    TYPE = PtmPacketType.BRANCH_ADDRESS

    def __init__(
        self,
        offset: int,
        raw: bytes,
        address: int,
        isa: Isa,
        valid_bits: int = 32,
        pkt_bits: int = 32,
        isa_changed: bool = False,
        exception: int | None = None,
        ns: bool = False,
        hyp: bool = False,
        ns_updated: bool = False,
        cycle_count: int | None = None,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.address = address
        self.isa = isa
        self.valid_bits = valid_bits
        self.pkt_bits = pkt_bits
        self.isa_changed = isa_changed
        self.exception = exception
        self.ns = ns
        self.hyp = hyp
        self.ns_updated = ns_updated
        self.cycle_count = cycle_count


class WaypointUpdate(PtmPacket):
    """Waypoint update: the address of the last waypoint executed, without a branch."""

    __slots__ = ("address", "isa", "isa_changed", "pkt_bits", "valid_bits")
    TYPE = PtmPacketType.WAYPOINT_UPDATE

    def __init__(
        self,
        offset: int,
        raw: bytes,
        address: int,
        isa: Isa,
        valid_bits: int = 32,
        pkt_bits: int = 32,
        isa_changed: bool = False,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.address = address
        self.isa = isa
        self.valid_bits = valid_bits
        self.pkt_bits = pkt_bits
        self.isa_changed = isa_changed


class Trigger(PtmPacket):
    """Trigger: the trigger event occurred."""

    __slots__ = ()
    TYPE = PtmPacketType.TRIGGER


class ContextID(PtmPacket):
    """Context ID: the new value of the Context ID register."""

    __slots__ = ("context_id",)
    TYPE = PtmPacketType.CONTEXT_ID

    def __init__(self, offset: int, raw: bytes, context_id: int) -> None:
        self.offset = offset
        self.raw = raw
        self.context_id = context_id


class VMID(PtmPacket):
    """VMID: the new virtual machine ID."""

    __slots__ = ("vmid",)
    TYPE = PtmPacketType.VMID

    def __init__(self, offset: int, raw: bytes, vmid: int) -> None:
        self.offset = offset
        self.raw = raw
        self.vmid = vmid


class Timestamp(PtmPacket):
    """Timestamp: the full value after this update, the bits updated, optional cycle count."""

    __slots__ = ("cycle_count", "timestamp", "update_bits")
    TYPE = PtmPacketType.TIMESTAMP

    def __init__(
        self,
        offset: int,
        raw: bytes,
        timestamp: int,
        update_bits: int,
        cycle_count: int | None = None,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.timestamp = timestamp
        self.update_bits = update_bits
        self.cycle_count = cycle_count


class ExceptionReturn(PtmPacket):
    """Exception return: the last branch was an exception return."""

    __slots__ = ()
    TYPE = PtmPacketType.EXCEPTION_RETURN


class Ignore(PtmPacket):
    """Ignore: no meaning; padding."""

    __slots__ = ()
    TYPE = PtmPacketType.IGNORE


class Reserved(PtmPacket):
    """A reserved header byte: the decoder loses synchronisation."""

    __slots__ = ()
    TYPE = PtmPacketType.RESERVED


class BadSequence(PtmPacket):
    """A malformed packet (``kind`` is what it started as), for example a broken A-sync."""

    __slots__ = ("kind",)
    TYPE = PtmPacketType.BAD_SEQUENCE

    def __init__(self, offset: int, raw: bytes, kind: PtmPacketType) -> None:
        self.offset = offset
        self.raw = raw
        self.kind = kind
