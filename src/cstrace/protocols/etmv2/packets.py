"""ETMv2 packets: per-cycle pipeline status with the FIFO packets it placed.

Input: nothing (definitions). Output: :class:`V2Status` (the 4-bit PIPESTAT
encodings), the trace packets that travel through the FIFO (:class:`BranchAddr`,
:class:`NormalData`, :class:`LoadMissOccurred`, :class:`LoadMissData`,
:class:`ContextIdPkt`, :class:`ValueNotTraced`, :class:`TfoPacket`,
:class:`ReservedPkt`) and :class:`Cycle2`, the packet of the
ETMv2 reader: one trace-port cycle, with the group of FIFO packets that its
PIPESTAT placed (found later on TRACEPKT, see :mod:`.reader`).

References: ARM IHI 0014Q chapter 6 ("ETMv2 signal protocol": §6.1 PIPESTAT,
§6.2 packet headers, §6.5 trace FIFO offsets) and ``seeds/002``. The stored copy
of the specification lost the tables of PIPESTAT values, TFO headers and branch
address layouts; the values used here are documented in ``docs/classic.md``.
"""

from __future__ import annotations

from enum import IntEnum

from cstrace.protocols.base import Packet

__all__ = [
    "BranchAddr",
    "ContextIdPkt",
    "Cycle2",
    "FifoPacket",
    "LoadMissData",
    "LoadMissOccurred",
    "NormalData",
    "ReservedPkt",
    "TfoPacket",
    "V2Status",
    "ValueNotTraced",
]


class V2Status(IntEnum):
    """ETMv2 PIPESTAT[3:0] encodings (mnemonics of IHI 0014Q §6.1)."""

    IE = 0
    DE = 1
    IN = 2
    DN = 3
    WT = 4
    DW = 5
    TR = 6
    TD = 7
    PTIE = 8
    PTDE = 9
    PTIN = 10
    PTDN = 11
    PNIE = 12
    PNDE = 13
    PNIN = 14
    PNDN = 15


class FifoPacket:
    """Base of the packets that travel through the ETMv2 FIFO."""

    __slots__ = ()


class BranchAddr(FifoPacket):
    """A branch address: 1-5 bytes, the first with bit 0 set (IHI 0014Q §6.2)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"BranchAddr({self.data.hex()})"


class NormalData(FifoPacket):
    """A normal data packet: header bC0A0SS10, optional address bytes, value bytes."""

    __slots__ = ("addr", "first", "value")

    def __init__(self, first: bool, addr: bytes, value: bytes) -> None:
        self.first = first
        self.addr = addr
        self.value = value

    def __repr__(self) -> str:
        return f"NormalData(first={self.first}, addr={self.addr.hex()}, value={self.value.hex()})"


class LoadMissOccurred(FifoPacket):
    """A load that missed in the data cache: header bC1A1TT00, optional address bytes.

    Placed in the cycle of the load instruction instead of a Normal Data
    packet; ``tag`` (TT) names the miss, whose value comes later in a
    :class:`LoadMissData` packet with the same tag. ``first`` is the A bit
    (the first data packet of its instruction: a data address follows when
    data addresses are traced).
    """

    __slots__ = ("addr", "first", "tag")

    def __init__(self, tag: int, first: bool, addr: bytes) -> None:
        self.tag = tag
        self.first = first
        self.addr = addr

    def __repr__(self) -> str:
        return f"LoadMissOccurred(tag={self.tag}, first={self.first}, addr={self.addr.hex()})"


class LoadMissData(FifoPacket):
    """The value of an earlier load miss: header bCTT0SS00 and the value bytes.

    ``tag`` (TT) matches the :class:`LoadMissOccurred` packet of the load;
    ``value`` holds 1, 2 or 4 bytes (SS) when data values are traced.
    """

    __slots__ = ("tag", "value")

    def __init__(self, tag: int, value: bytes) -> None:
        self.tag = tag
        self.value = value

    def __repr__(self) -> str:
        return f"LoadMissData(tag={self.tag}, value={self.value.hex()})"


class ContextIdPkt(FifoPacket):
    """A context ID packet: header bC1101110 and the context ID bytes."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"ContextIdPkt({self.value:#x})"


class ValueNotTraced(FifoPacket):
    """A value-not-traced packet: header bC1101010."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ValueNotTraced()"


class ReservedPkt(FifoPacket):
    """A reserved header byte: the stream cannot be followed past it."""

    __slots__ = ("header",)

    def __init__(self, header: int) -> None:
        self.header = header

    def __repr__(self) -> str:
        return f"ReservedPkt({self.header:#04x})"


class TfoPacket(FifoPacket):
    """The packet a TFO places in the FIFO: header (reason), context ID, full address.

    An LSM-in-progress TFO packet (``lsip``) also gives ``lsm_address``, the
    address of the load/store multiple instruction still transferring data
    (bit 0 Thumb), whose execution the packet implies; ``address`` is then
    where execution goes on (see ``docs/classic.md`` for this layout).
    """

    __slots__ = ("address", "context_id", "jazelle", "lsip", "lsm_address", "reason")

    def __init__(
        self,
        reason: int,
        address: int,
        context_id: int | None,
        lsip: bool,
        jazelle: bool,
        lsm_address: int | None = None,
    ) -> None:
        self.reason = reason
        self.address = address
        self.context_id = context_id
        self.lsip = lsip
        self.jazelle = jazelle
        self.lsm_address = lsm_address

    def __repr__(self) -> str:
        lsm = "" if self.lsm_address is None else f", lsm_address={self.lsm_address:#x}"
        return f"TfoPacket(reason={self.reason}, address={self.address:#x}{lsm})"


class Cycle2(Packet):
    """One ETMv2 trace-port cycle and what its PIPESTAT placed in the FIFO.

    ``status`` is the real pipeline status (for a trigger cycle the one carried
    on TRACEPKT[3:0], with ``trigger`` set). ``tfo`` is the trace FIFO offset
    output in this cycle, if it is a TFO cycle. ``group`` holds the packets the
    cycle placed in the FIFO (read later from TRACEPKT), ``None`` while the
    reader is not synchronised, and ``()`` when nothing was placed.
    """

    __slots__ = ("group", "status", "tfo", "tracepkt", "trigger")

    def __init__(
        self,
        offset: int,
        raw: bytes,
        status: int,
        tracepkt: int,
        trigger: bool = False,
        tfo: int | None = None,
        group: tuple[FifoPacket, ...] | None = None,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.status = status
        self.tracepkt = tracepkt
        self.trigger = trigger
        self.tfo = tfo
        self.group = group
