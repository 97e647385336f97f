"""ITM decoder: ITM packet fields → generic ``ITMTRACE`` elements.

Input: the fields of each ITM packet, handed over by the reader's loop
(:func:`cstrace.protocols.itm.reader.read`; its
:func:`~cstrace.protocols.itm.reader.iter_stream_rows` gives the element rows) or
taken from packet objects (:func:`iter_elements`), and the ITM configuration (local timestamp
prescaler); output: the elements of :mod:`cstrace.elements` the reference
decoder produces: ``NO_SYNC`` before the first synchronization packet, one
``ITMTRACE`` per software or hardware source payload, local timestamp and
complete global timestamp, and ``EO_TRACE`` at the end.

One decoder, :class:`ItmDecoder`, with one method per packet kind, built on
the protocol kit's :class:`~cstrace.protocols.kit.ElementSink` (synchronisation
state, loss counts, and the two sinks: element objects for a consumer that
wants them one packet at a time, as the listing does, or element columns with
no object per element: ``--format null``, Parquet, the loss report). The
reader's loop calls the decoder's methods with packet fields, and makes packet
objects only for a tap that asks for them (the listing, ``--format packets``),
so the element path has no object per packet either.

State kept across packets: the stimulus port page (extension packet with
SH = 0 and a 3-bit payload: channel = page * 32 + port), the sum of local
timestamp deltas times the prescaler (reset by an overflow packet), the global
timestamp (GTS1 sets its low bits; GTS2 its high bits; after a GTS1 with the
Wrap bit, the timestamp is held back until the next GTS2), the clock change
flag, and an overflow that marks the next element. A RESERVED or BAD_SEQUENCE
packet is a fatal error for the reference decoder: decoding stops there,
without ``EO_TRACE``.

When packets before synchronisation are decoded (``decode_before_sync``), an
UNSYNCED packet starts decoding as a synchronisation packet would, and the
first element decoded after it comes after a warning ``DIAGNOSTIC``
(:attr:`~cstrace.errors.DiagKind.UNSYNCED_START`, whose ``detail`` is the
capture index of the first unambiguous packet boundary, or
:attr:`~cstrace.errors.DiagKind.UNSYNCED_AMBIGUOUS`); a synchronisation packet
read before any element makes that warning moot, and it is not given. A
RESERVED or BAD_SEQUENCE packet then gives an error ``DIAGNOSTIC`` and a
``NO_SYNC`` (bad packet), the state is reset, and decoding goes on from the
reader's next UNSYNCED or synchronisation packet.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.elements import (
    Diagnostic,
    Element,
    ITMPacketType,
    ITMTrace,
)
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.itm.config import ItmConfig
from cstrace.protocols.itm.packets import (
    Async,
    BadSequence,
    Dwt,
    Extension,
    GlobalTs1,
    GlobalTs2,
    LocalTs,
    NotSync,
    Overflow,
    Reserved,
    Swit,
    Unsynced,
)
from cstrace.protocols.kit import NO_SYNC, ElementSink, elements_of

__all__ = ["COLUMNS", "ItmDecoder", "iter_elements"]

_TS_GLOBAL = 6  # ITMPacketType.TS_GLOBAL
_ITMTRACE = 18  # ElemType.ITMTRACE
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_MASK26 = 0x3FF_FFFF
_PKT_TYPES = tuple(ITMPacketType)

COLUMNS = (
    ("type", "uint8"),
    ("offset", "int64"),
    ("pkt_type", "uint8"),
    ("src_id", "uint8"),
    ("payload_size", "uint8"),
    ("value", "uint64"),
    ("timestamp", "uint64"),
    ("timestamp_valid", "uint8"),
    ("overflow", "uint8"),
    ("ts_freq_change", "uint8"),
)
"""The element columns the decoder writes (``ITMTRACE`` rows; booleans as bytes)."""


class ItmDecoder(ElementSink):
    """The ITM decoder: its state and one method per packet kind (module text).

    ``columns``: write elements as column rows (:meth:`~ElementSink.take`);
    otherwise as element objects in :attr:`~ElementSink.objects`.
    """

    def __init__(
        self,
        config: object,
        trace_id: int = 0,
        reset: bool = False,
        columns: bool = False,
        size: int = 65536,
    ) -> None:
        self.prescale = config.ts_prescale if isinstance(config, ItmConfig) else 1
        self.recover = isinstance(config, ItmConfig) and config.decode_before_sync
        self.local_ts = 0
        self.global_ts = 0
        self.page = 0
        self.need_gts2 = True
        self.freq_change = False
        self.overflow = False
        super().__init__(trace_id, reset, columns, size, COLUMNS)

    def bind_columns(self) -> None:
        """Typed views of the columns."""
        arrays = self.arrays
        self.c_type = arrays["type"]
        self.c_offset = arrays["offset"]
        self.c_value = arrays["value"]
        self.c_ts = arrays["timestamp"]
        self.c_pkt = arrays["pkt_type"]
        self.c_src = arrays["src_id"]
        self.c_size = arrays["payload_size"]
        self.c_tsv = arrays["timestamp_valid"]
        self.c_ovf = arrays["overflow"]
        self.c_freq = arrays["ts_freq_change"]

    def _itm(
        self,
        offset: int,
        pkt_type: int,
        src: int,
        size: int,
        value: int,
        ts: int,
        has_ts: bool,
        freq: bool,
    ) -> None:
        """Output an ``ITMTRACE`` element (after the warning that waited for one)."""
        if self.pending is not None:
            self.flush_pending()
        overflow = self.overflow
        self.overflow = False
        if not self.as_columns:
            self.objects.append(
                ITMTrace(
                    offset,
                    _PKT_TYPES[pkt_type],
                    src,
                    size,
                    value,
                    overflow,
                    ts if has_ts else None,
                    freq,
                )
            )
            return
        r = self.next_row()
        self.c_type[r] = _ITMTRACE
        self.c_offset[r] = offset
        self.c_pkt[r] = pkt_type
        self.c_src[r] = src
        self.c_size[r] = size
        self.c_value[r] = value
        self.c_ts[r] = ts
        self.c_tsv[r] = has_ts
        self.c_ovf[r] = overflow
        self.c_freq[r] = freq

    def _reset(self) -> None:
        self.local_ts = self.global_ts = self.page = 0
        self.need_gts2 = True
        self.freq_change = self.overflow = False

    # ---------------------------------------------------------------- packets

    def swit(self, offset: int, src: int, value: int, size: int) -> None:
        """A software source (instrumentation) packet: stimulus port ``src``."""
        if self.tap is not None:
            self.tap.append(Swit(offset, self.raw, src, value, size))
            return
        if not self.decodes(offset, False):
            return
        channel = (src & 0x1F) | ((self.page << 5) & 0xFF)
        self._itm(offset, 0, channel, size, value, 0, False, False)

    def dwt(self, offset: int, src: int, value: int, size: int) -> None:
        """A hardware source packet: discriminator ``src``."""
        if self.tap is not None:
            self.tap.append(Dwt(offset, self.raw, src, value, size))
            return
        if not self.decodes(offset, False):
            return
        self._itm(offset, 1, src, size, value, 0, False, False)

    def local_timestamp(self, offset: int, tc: int, value: int, size: int, compact: bool) -> None:
        """A local timestamp packet (TC bits ``tc``, delta ``value``; ``compact``: format 2)."""
        if self.tap is not None:
            self.tap.append(LocalTs(offset, self.raw, tc, value, size, compact))
            return
        if not self.decodes(offset, False):
            return
        ts = (self.local_ts + value * self.prescale) & _MASK64
        self.local_ts = ts
        self._itm(offset, 2 + (tc & 3), 0, size, value, ts, True, False)

    def global_timestamp1(self, offset: int, flags: int, value: int, size: int) -> None:
        """A GTS1 packet: the low bits of the global timestamp (``flags``: Wrap, ClkCh)."""
        if self.tap is not None:
            raw = self.raw
            if size == 4:  # printed without the ClkCh and Wrap bits
                raw = raw[:4] + bytes([raw[4] & 0x1F])
            self.tap.append(GlobalTs1(offset, raw, flags, value, size))
            return
        if not self.decodes(offset, False):
            return
        if flags & 2:
            self.need_gts2 = True
        if flags & 1:
            self.freq_change = True
        bits = 26 if size >= 4 else 7 * size  # the bits a GTS1 of this size replaces
        self.global_ts = (self.global_ts & ~((1 << bits) - 1) & _MASK64) | value
        if not self.need_gts2:
            freq = self.freq_change
            self.freq_change = False
            self._itm(offset, _TS_GLOBAL, 0, 0, 0, self.global_ts, True, freq)

    def global_timestamp2(self, offset: int, value: int, size: int) -> None:
        """A GTS2 packet: the high bits of the global timestamp."""
        if self.tap is not None:
            self.tap.append(GlobalTs2(offset, self.raw, value, size))
            return
        if not self.decodes(offset, False):
            return
        self.global_ts = ((self.global_ts & _MASK26) | (value << 26)) & _MASK64
        freq = self.freq_change
        self.freq_change = False
        self.need_gts2 = False
        self._itm(offset, _TS_GLOBAL, 0, 0, 0, self.global_ts, True, freq)

    def extension(self, offset: int, hardware: bool, nbits: int, value: int) -> None:
        """An extension packet (a stimulus port page when SH = 0 with 2 bits)."""
        if self.tap is not None:
            self.tap.append(Extension(offset, self.raw, hardware, nbits, value))
            return
        if not self.decodes(offset, False):
            return
        if not hardware and nbits == 2:
            self.page = value & 0xFF

    def overflow_packet(self, offset: int) -> None:
        """An overflow packet: the local timestamp restarts; the next element is marked."""
        if self.tap is not None:
            self.tap.append(Overflow(offset, self.raw))
            return
        self.count_overflow(offset)
        if not self.decodes(offset, False):
            return
        self.local_ts = 0
        self.overflow = True

    def async_packet(self, offset: int) -> None:
        """A synchronization packet."""
        if self.tap is not None:
            self.tap.append(Async(offset, self.raw))
            return
        self.count_sync(offset)
        if not self.decodes(offset, True):
            return
        self.pending = None  # synchronised before anything was decoded without it

    def other(self, pkt: Packet) -> None:
        """Any other packet, as an object: NOTSYNC, UNSYNCED, RESERVED, BAD_SEQUENCE,
        INCOMPLETE_EOT (rare: the loss report's handler for its class is called too)."""
        self.count_other(pkt)
        if self.stopped:
            return
        if isinstance(pkt, NotSync) and not pkt.decoded:
            return  # printed by the reference, not passed to its decoder
        if not self.gate(pkt.offset, isinstance(pkt, Unsynced)):
            if isinstance(pkt, Unsynced):
                self.pending = _unsynced_note(pkt, self.trace_id)
            return
        if isinstance(pkt, (Reserved, BadSequence)):
            if self.bad_packet(pkt, isinstance(pkt, Reserved), int(pkt.KIND)):
                self._reset()
        elif isinstance(pkt, NotSync):
            # Not expected once synchronised; the reference starts over.
            self.state = NO_SYNC
            self._reset()

    def packet(self, pkt: Packet) -> None:
        """Decode one packet object (what the reader would have handed over as fields)."""
        match pkt:
            case Swit(src_id=src, value=value, size=size):
                self.swit(pkt.offset, src, value, size)
            case Dwt(src_id=src, value=value, size=size):
                self.dwt(pkt.offset, src, value, size)
            case LocalTs(tc=tc, value=value, size=size, compact=compact):
                self.local_timestamp(pkt.offset, tc, value, size, compact)
            case GlobalTs1(flags=flags, value=value, size=size):
                self.global_timestamp1(pkt.offset, flags, value, size)
            case GlobalTs2(value=value, size=size):
                self.global_timestamp2(pkt.offset, value, size)
            case Extension(hardware=hw, nbits=nbits, value=value):
                self.extension(pkt.offset, hw, nbits, value)
            case Overflow():
                self.overflow_packet(pkt.offset)
            case Async():
                self.async_packet(pkt.offset)
            case _:
                self.other(pkt)


def iter_elements(
    packets: Iterable[Packet], config: object, context: DecodeContext
) -> Iterator[Element]:
    """Decode ITM packet objects into ITM trace elements (those of each packet before the
    next packet is read)."""
    return elements_of(ItmDecoder(config, context.trace_id, context.reset), packets, context)


def _unsynced_note(pkt: Unsynced, trace_id: int) -> Diagnostic:
    """The warning that elements were decoded without a synchronisation packet."""
    if pkt.certain is None:
        return Diagnostic(
            pkt.resume, trace_id, DiagCode.NONE, DiagKind.UNSYNCED_AMBIGUOUS, 0, Severity.WARNING
        )
    return Diagnostic(
        pkt.resume, trace_id, DiagCode.NONE, DiagKind.UNSYNCED_START, pkt.certain, Severity.WARNING
    )
