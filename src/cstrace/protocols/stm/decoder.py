"""STM decoder: STM packets → generic ``SWTRACE`` elements.

Input: the fields of each STM packet, handed over by the reader's loop
(:func:`cstrace.protocols.stm.reader.read`), or packet objects
(:func:`iter_elements`); output: the elements of :mod:`cstrace.elements` the
reference decoder produces for them:
``NO_SYNC`` before the first ASYNC, one ``SWTRACE`` per payload carrying packet
(data, flag, trigger, frequency, master and global errors, timestamped NULL),
and ``EO_TRACE`` at the end.

One decoder, :class:`StmDecoder`, with one method per packet kind, built on
the protocol kit's :class:`~cstrace.protocols.kit.ElementSink` (element
objects for the listing, element columns with no object per element for the
rest; packet objects only for a tap: :mod:`cstrace.protocols.kit`).

The decoder keeps the current master and channel (set by M8, C8, C16, VERSION,
MERR and GERR) and whether they are valid: until the first M8, and after a
GERR, elements print ``Ma:0x??; Ch:0x??``. A RESERVED or BAD_SEQUENCE packet is
a fatal error for the reference decoder: decoding stops there, without
``EO_TRACE``.

When packets before synchronisation are decoded (``decode_before_sync``), an
UNSYNCED packet starts decoding as an ASYNC would, and the first element
decoded after it comes after a warning ``DIAGNOSTIC``
(:attr:`~cstrace.errors.DiagKind.UNSYNCED_START`, whose ``detail`` is the
capture index of the first unambiguous packet boundary); an ASYNC read before
any element makes that warning moot, and it is not given. The master is not
known until an M8 (``id_valid`` False). A RESERVED or BAD_SEQUENCE packet then
gives an error ``DIAGNOSTIC`` and a ``NO_SYNC`` (bad packet), master and channel
become unknown, and decoding goes on from the reader's next UNSYNCED or ASYNC
packet.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.elements import Diagnostic, Element, SWTrace
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.kit import ElementSink, elements_of
from cstrace.protocols.stm.config import StmConfig
from cstrace.protocols.stm.packets import (
    C8,
    C16,
    M8,
    Async,
    BadSequence,
    Data,
    Flag,
    Freq,
    GErr,
    MErr,
    Null,
    Reserved,
    Trig,
    Unsynced,
    Version,
)

__all__ = ["COLUMNS", "StmDecoder", "iter_elements"]

_SWTRACE = 14  # ElemType.SWTRACE

COLUMNS = (
    ("type", "uint8"),
    ("offset", "int64"),
    ("master", "uint16"),
    ("channel", "uint16"),
    ("id_valid", "uint8"),
    ("payload_bits", "uint8"),
    ("payload", "uint64"),
    ("marker", "uint8"),
    ("trigger", "uint8"),
    ("frequency", "uint8"),
    ("master_err", "uint8"),
    ("global_err", "uint8"),
    ("timestamp", "uint64"),
    ("timestamp_valid", "uint8"),
)
"""The element columns the decoder writes (``SWTRACE`` rows; booleans as bytes)."""

# SWTRACE flags, as the reader and :meth:`StmDecoder._sw` pass them.
_MARKER = 1
_TRIGGER = 2
_FREQUENCY = 4
_MASTER_ERR = 8
_GLOBAL_ERR = 16


class StmDecoder(ElementSink):
    """The STM decoder: master, channel and one method per packet kind (module text).

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
        self.recover = isinstance(config, StmConfig) and config.decode_before_sync
        self.master = 0
        self.channel = 0
        self.id_valid = False
        super().__init__(trace_id, reset, columns, size, COLUMNS)

    def bind_columns(self) -> None:
        """Typed views of the columns."""
        arrays = self.arrays
        self.c_type = arrays["type"]
        self.c_offset = arrays["offset"]
        self.c_master = arrays["master"]
        self.c_channel = arrays["channel"]
        self.c_id_valid = arrays["id_valid"]
        self.c_bits = arrays["payload_bits"]
        self.c_payload = arrays["payload"]
        self.c_marker = arrays["marker"]
        self.c_trigger = arrays["trigger"]
        self.c_freq = arrays["frequency"]
        self.c_merr = arrays["master_err"]
        self.c_gerr = arrays["global_err"]
        self.c_ts = arrays["timestamp"]
        self.c_tsv = arrays["timestamp_valid"]

    def _sw(self, offset: int, bits: int, payload: int, flags: int, ts: int, has_ts: bool) -> None:
        """Output a ``SWTRACE`` element (after the warning that waited for one)."""
        if self.pending is not None:
            self.flush_pending()
        if not self.as_columns:
            self.objects.append(
                SWTrace(
                    offset,
                    self.master,
                    self.channel,
                    self.id_valid,
                    bits,
                    payload,
                    (flags & _MARKER) != 0,
                    (flags & _TRIGGER) != 0,
                    ts if has_ts else None,
                    (flags & _FREQUENCY) != 0,
                    (flags & _MASTER_ERR) != 0,
                    (flags & _GLOBAL_ERR) != 0,
                )
            )
            return
        r = self.next_row()
        self.c_type[r] = _SWTRACE
        self.c_offset[r] = offset
        self.c_master[r] = self.master
        self.c_channel[r] = self.channel
        self.c_id_valid[r] = self.id_valid
        self.c_bits[r] = bits
        self.c_payload[r] = payload
        self.c_marker[r] = (flags & _MARKER) != 0
        self.c_trigger[r] = (flags & _TRIGGER) != 0
        self.c_freq[r] = (flags & _FREQUENCY) != 0
        self.c_merr[r] = (flags & _MASTER_ERR) != 0
        self.c_gerr[r] = (flags & _GLOBAL_ERR) != 0
        self.c_ts[r] = ts
        self.c_tsv[r] = has_ts

    # ---------------------------------------------------------------- packets

    def data(
        self,
        offset: int,
        bits: int,
        value: int,
        marker: bool,
        ts: int,
        has_ts: bool,
        ts_bits: int,
    ) -> None:
        """A data packet (D4 to D64, with or without marker and timestamp)."""
        if self.tap is not None:
            self.tap.append(
                Data(offset, self.raw, bits, value, marker, ts if has_ts else None, ts_bits)
            )
            return
        if not self.decodes(offset, False):
            return
        self._sw(offset, bits, value, _MARKER if marker else 0, ts, has_ts)

    def m8(self, offset: int, master: int) -> None:
        """M8: a new master (its channel 0)."""
        if self.tap is not None:
            self.tap.append(M8(offset, self.raw, master))
            return
        if not self.decodes(offset, False):
            return
        self.master = master
        self.channel = 0
        self.id_valid = True

    def c8(self, offset: int, channel: int) -> None:
        """C8: a new channel (the reader gives it whole: its high byte from before)."""
        if self.tap is not None:
            self.tap.append(C8(offset, self.raw, channel))
            return
        if not self.decodes(offset, False):
            return
        self.channel = channel

    def c16(self, offset: int, channel: int) -> None:
        """C16: a new channel."""
        if self.tap is not None:
            self.tap.append(C16(offset, self.raw, channel))
            return
        if not self.decodes(offset, False):
            return
        self.channel = channel

    def merr(self, offset: int, value: int) -> None:
        """MERR: a master error (the channel becomes 0)."""
        pkt = MErr(offset, self.raw, value)
        if self.tap is not None:
            self.tap.append(pkt)
            return
        self.report(pkt)
        if not self.decodes(offset, False):
            return
        self.channel = 0
        self._sw(offset, 8, value, _MASTER_ERR, 0, False)

    def gerr(self, offset: int, value: int) -> None:
        """GERR: a global error (master and channel unknown)."""
        pkt = GErr(offset, self.raw, value)
        if self.tap is not None:
            self.tap.append(pkt)
            return
        self.report(pkt)
        if not self.decodes(offset, False):
            return
        self.master = 0
        self.channel = 0
        self.id_valid = False
        self._sw(offset, 8, value, _GLOBAL_ERR, 0, False)

    def flag(self, offset: int, ts: int, has_ts: bool, ts_bits: int) -> None:
        """FLAG, with or without timestamp."""
        if self.tap is not None:
            self.tap.append(Flag(offset, self.raw, ts if has_ts else None, ts_bits))
            return
        if not self.decodes(offset, False):
            return
        self._sw(offset, 0, 0, _MARKER, ts, has_ts)

    def trig(self, offset: int, value: int, ts: int, has_ts: bool, ts_bits: int) -> None:
        """TRIG, with or without timestamp."""
        if self.tap is not None:
            self.tap.append(Trig(offset, self.raw, value, ts if has_ts else None, ts_bits))
            return
        if not self.decodes(offset, False):
            return
        self._sw(offset, 8, value, _TRIGGER, ts, has_ts)

    def freq(self, offset: int, value: int) -> None:
        """FREQ: the timestamp frequency."""
        if self.tap is not None:
            self.tap.append(Freq(offset, self.raw, value))
            return
        if not self.decodes(offset, False):
            return
        self._sw(offset, 32, value, _FREQUENCY, 0, False)

    def null(self, offset: int, ts: int, has_ts: bool, ts_bits: int) -> None:
        """NULL, or NULL_TS (an element only with its timestamp)."""
        if self.tap is not None:
            self.tap.append(Null(offset, self.raw, ts if has_ts else None, ts_bits))
            return
        if not self.decodes(offset, False):
            return
        if has_ts:
            self._sw(offset, 0, 0, 0, ts, True)

    def version(self, offset: int, version: int) -> None:
        """VERSION: the timestamp encoding (master and channel become 0)."""
        if self.tap is not None:
            self.tap.append(Version(offset, self.raw, version))
            return
        if not self.decodes(offset, False):
            return
        self.master = 0
        self.channel = 0

    def async_packet(self, offset: int) -> None:
        """ASYNC."""
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
        if not self.gate(pkt.offset, isinstance(pkt, Unsynced)):
            if isinstance(pkt, Unsynced):
                certain = pkt.resume if pkt.certain is None else pkt.certain
                self.pending = Diagnostic(
                    pkt.resume,
                    self.trace_id,
                    DiagCode.NONE,
                    DiagKind.UNSYNCED_START,
                    certain,
                    Severity.WARNING,
                )
            return
        if isinstance(pkt, (Reserved, BadSequence)):
            if self.bad_packet(pkt, isinstance(pkt, Reserved), int(pkt.KIND)):
                self.master = self.channel = 0
                self.id_valid = False

    def packet(self, pkt: Packet) -> None:
        """Decode one packet object (what the reader would have handed over as fields)."""
        match pkt:
            case Data(bits=bits, value=value, marker=marker, timestamp=ts, ts_bits=tb):
                self.data(pkt.offset, bits, value, marker, ts or 0, ts is not None, tb or 0)
            case M8(master=m):
                self.m8(pkt.offset, m)
            case C8(channel=c):
                self.c8(pkt.offset, c)
            case C16(channel=c):
                self.c16(pkt.offset, c)
            case MErr(value=value):
                self.merr(pkt.offset, value)
            case GErr(value=value):
                self.gerr(pkt.offset, value)
            case Flag(timestamp=ts, ts_bits=tb):
                self.flag(pkt.offset, ts or 0, ts is not None, tb or 0)
            case Trig(value=value, timestamp=ts, ts_bits=tb):
                self.trig(pkt.offset, value, ts or 0, ts is not None, tb or 0)
            case Freq(value=value):
                self.freq(pkt.offset, value)
            case Null(timestamp=ts, ts_bits=tb):
                self.null(pkt.offset, ts or 0, ts is not None, tb or 0)
            case Version(version=v):
                self.version(pkt.offset, v)
            case Async():
                self.async_packet(pkt.offset)
            case _:
                self.other(pkt)


def iter_elements(
    packets: Iterable[Packet], config: object, context: DecodeContext
) -> Iterator[Element]:
    """Decode STM packet objects into software-trace elements (those of each packet
    before the next packet is read)."""
    return elements_of(StmDecoder(config, context.trace_id, context.reset), packets, context)
