"""ETMv3 packets: one small slotted class per packet kind of the ETMv3 signal protocol.

Input: nothing (definitions); output: the packet classes the reader produces and
the decoder and renderer consume. Names follow ARM IHI 0014Q chapter 7 ("ETMv3
Signal Protocol"), Table 7.1 "Header encodings".

Packets carry what the reference packet processor knows after reading them,
including state it keeps from packet to packet (the last full instruction
address, the instruction set, the security state, the context ID...): a
branch address packet holds the *whole* address after its compressed bits
were merged into the previous one. Every packet has ``offset`` (capture index
of its first byte) and ``raw`` (its bytes).
"""

from __future__ import annotations

from enum import IntEnum

from cstrace.elements import Isa
from cstrace.protocols.base import Packet

__all__ = [
    "VMID",
    "ASync",
    "BadSequence",
    "BadTraceMode",
    "BranchAddress",
    "ContextID",
    "CycleCount",
    "DataSuppressed",
    "ExceptionEntry",
    "ExceptionExit",
    "ISync",
    "ISyncReason",
    "Ignore",
    "NormalData",
    "NotSync",
    "OOOData",
    "OOOPlaceholder",
    "PHeader",
    "PHeaderFormat",
    "Reserved",
    "StoreFailed",
    "Timestamp",
    "Trigger",
    "ValueNotTraced",
]


class ISyncReason(IntEnum):
    """Why an I-sync packet was output (I-sync information byte bits 6:5)."""

    PERIODIC = 0
    TRACE_ENABLE = 1
    OVERFLOW = 2
    DEBUG_EXIT = 3


class PHeaderFormat(IntEnum):
    """P-header formats (IHI 0014Q §7.3.1, Tables 7.2 and 7.3).

    Numbered as the reference decoder numbers them. Without cycle accuracy,
    format 1 is 0-15 E atoms then 0-1 N atom and format 2 two E/N atoms. In
    cycle-accurate mode format 1 gives a W per atom, format 2 one W then two
    atoms, format 3 1-8 W then an optional E atom, and format 4 a single atom
    without a W.
    """

    NONE = 0
    FORMAT_1 = 1
    FORMAT_2 = 2
    FORMAT_3 = 3
    FORMAT_4 = 4


class NotSync(Packet):
    """Bytes read before the first A-sync: the stream is not synchronised yet.

    ``reserved`` marks bytes split off before any packet was typed: the
    reference lists those as a reserved packet.
    """

    __slots__ = ("reserved",)

    def __init__(self, offset: int, raw: bytes, reserved: bool = False) -> None:
        self.offset = offset
        self.raw = raw
        self.reserved = reserved


class ASync(Packet):
    """Alignment synchronisation: five or more 0x00 bytes then 0x80."""

    __slots__ = ()


class CycleCount(Packet):
    """Cycle count packet: the number of W atoms before the last non-periodic I-sync."""

    __slots__ = ("count",)

    def __init__(self, offset: int, raw: bytes, count: int) -> None:
        self.offset = offset
        self.raw = raw
        self.count = count


class ISync(Packet):
    """Instruction synchronisation (header 0x08, or 0x70 with a cycle count).

    ``address`` is the instruction address with the Thumb bit removed (for an
    I-sync with a load/store-in-progress address, the reference keeps that
    second address merged over the first). ``context_id`` is ``None`` when the
    packet carries none. ``complete`` is False for a packet cut short by the
    end of the trace: its fields then are the reference's stale values.
    """

    __slots__ = (
        "address",
        "complete",
        "context_id",
        "cycle_count",
        "hyp",
        "isa",
        "no_address",
        "ns",
        "reason",
    )

    def __init__(
        self,
        offset: int,
        raw: bytes,
        reason: ISyncReason,
        address: int,
        isa: Isa,
        ns: bool,
        hyp: bool,
        context_id: int | None = None,
        cycle_count: int | None = None,
        no_address: bool = False,
        complete: bool = True,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.reason = reason
        self.address = address
        self.isa = isa
        self.ns = ns
        self.hyp = hyp
        self.context_id = context_id
        self.cycle_count = cycle_count
        self.no_address = no_address
        self.complete = complete


class PHeader(Packet):
    """P-header: a run of atoms (E executed, N not executed) and, cycle-accurate, W cycles.

    ``atoms`` holds the E/N bits, oldest first in bit 0; ``count`` is the number
    of atoms; ``cycles`` the W count the reference prints (0 when not
    cycle-accurate). An invalid P-header (reserved cycle-accurate encodings) has
    ``count`` 0 and keeps the previous packet's ``fmt``, as in the reference.
    ``isa`` is the instruction set the last I-sync or branch packet gave.
    """

    __slots__ = ("atoms", "count", "cycles", "fmt", "isa", "valid")

    def __init__(
        self,
        offset: int,
        raw: bytes,
        fmt: int,
        count: int,
        atoms: int,
        cycles: int,
        valid: bool = True,
        isa: Isa = Isa.UNKNOWN,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.fmt = fmt
        self.count = count
        self.atoms = atoms
        self.cycles = cycles
        self.valid = valid
        self.isa = isa


class BranchAddress(Packet):
    """Branch address: the new instruction address, with optional exception information.

    ``address`` is the full address after merging the packet's ``bits`` low
    bits into the previous one; ``valid_bits`` how many bits are known since
    synchronisation. ``isa_changed`` tells whether the packet changed the
    instruction set. When exception bytes were present ``ctxt_updated`` is true
    and ``ns``/``hyp`` are the security and Hyp state they give;
    ``exception`` is the exception number (``None`` without exception
    information), ``cancel`` whether the last instruction traced was cancelled.
    """

    __slots__ = (
        "address",
        "bits",
        "cancel",
        "cm_type",
        "ctxt_updated",
        "exception",
        "hyp",
        "isa",
        "isa_changed",
        "ns",
        "resume",
        "valid_bits",
    )

    def __init__(
        self,
        offset: int,
        raw: bytes,
        address: int,
        bits: int,
        valid_bits: int,
        isa: Isa,
        isa_changed: bool = False,
        ctxt_updated: bool = False,
        ns: bool = False,
        hyp: bool = False,
        exception: int | None = None,
        cancel: bool = False,
        cm_type: bool = False,
        resume: int = 0,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.address = address
        self.bits = bits
        self.valid_bits = valid_bits
        self.isa = isa
        self.isa_changed = isa_changed
        self.ctxt_updated = ctxt_updated
        self.ns = ns
        self.hyp = hyp
        self.exception = exception
        self.cancel = cancel
        self.cm_type = cm_type
        self.resume = resume


class Trigger(Packet):
    """Trigger: the trigger event occurred."""

    __slots__ = ()


class Ignore(Packet):
    """Ignore packet: padding with no meaning."""

    __slots__ = ()


class ExceptionEntry(Packet):
    """Exception entry (ARMv7-M): marks the start of an exception's data transfers."""

    __slots__ = ()


class ExceptionExit(Packet):
    """Exception return (ARMv7-M style exception exit)."""

    __slots__ = ()


class ContextID(Packet):
    """Context ID change: the new CONTEXTIDR value (1, 2 or 4 bytes)."""

    __slots__ = ("context_id",)

    def __init__(self, offset: int, raw: bytes, context_id: int) -> None:
        self.offset = offset
        self.raw = raw
        self.context_id = context_id


class VMID(Packet):
    """VMID change (ETMv3.5): the new virtual machine ID."""

    __slots__ = ("vmid",)

    def __init__(self, offset: int, raw: bytes, vmid: int) -> None:
        self.offset = offset
        self.raw = raw
        self.vmid = vmid


class Timestamp(Packet):
    """Timestamp (ETMv3.5): ``timestamp`` after merging the packet's ``bits`` low bits."""

    __slots__ = ("bits", "timestamp")

    def __init__(self, offset: int, raw: bytes, timestamp: int, bits: int) -> None:
        self.offset = offset
        self.raw = raw
        self.timestamp = timestamp
        self.bits = bits


class StoreFailed(Packet):
    """Store failed: a store-exclusive did not write (data trace)."""

    __slots__ = ()


class DataSuppressed(Packet):
    """Data suppressed: data trace was dropped to avoid a FIFO overflow."""

    __slots__ = ()


class NormalData(Packet):
    """Normal data packet: an optional data address and an optional data value.

    ``address``/``bits`` is the address part (``None`` when absent), ``value``
    the data value (``None`` when the header says size 0 and no address).
    """

    __slots__ = ("address", "big_endian", "bits", "value")

    def __init__(
        self,
        offset: int,
        raw: bytes,
        address: int | None = None,
        bits: int = 0,
        value: int | None = None,
        big_endian: bool | None = None,
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.address = address
        self.bits = bits
        self.value = value
        self.big_endian = big_endian


class OOOData(Packet):
    """Out-of-order data value, matched to a placeholder by its tag."""

    __slots__ = ("tag", "value")

    def __init__(self, offset: int, raw: bytes, value: int, tag: int) -> None:
        self.offset = offset
        self.raw = raw
        self.value = value
        self.tag = tag


class OOOPlaceholder(Packet):
    """Out-of-order placeholder: the data value follows later with this tag."""

    __slots__ = ("address", "bits", "tag")

    def __init__(
        self, offset: int, raw: bytes, tag: int, address: int | None = None, bits: int = 0
    ) -> None:
        self.offset = offset
        self.raw = raw
        self.tag = tag
        self.address = address
        self.bits = bits


class ValueNotTraced(Packet):
    """Value not traced: a data transfer whose value was filtered out."""

    __slots__ = ("address", "bits")

    def __init__(self, offset: int, raw: bytes, address: int | None = None, bits: int = 0) -> None:
        self.offset = offset
        self.raw = raw
        self.address = address
        self.bits = bits


class BadSequence(Packet):
    """A malformed packet (an A-sync with a wrong byte); ``header`` names what it started as."""

    __slots__ = ("header",)

    def __init__(self, offset: int, raw: bytes, header: str) -> None:
        self.offset = offset
        self.raw = raw
        self.header = header


class BadTraceMode(Packet):
    """A data trace header while the ETM does not trace that kind of data."""

    __slots__ = ("header",)

    def __init__(self, offset: int, raw: bytes, header: str) -> None:
        self.offset = offset
        self.raw = raw
        self.header = header


class Reserved(Packet):
    """A reserved header encoding."""

    __slots__ = ("header",)

    def __init__(self, offset: int, raw: bytes, header: str = "") -> None:
        self.offset = offset
        self.raw = raw
        self.header = header
