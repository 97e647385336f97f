"""What the trace lost: per trace source, counted while it decodes.

Input: the :class:`~cstrace.decode.SourceRun` objects of a session, watched by a
:class:`LossCounter` (``run = counter.watch(run)``), then decoded as usual;
output: a :class:`LossReport` with one :class:`SourceLoss` per run (and a
:class:`NotDecoded` per source that could not be decoded), each a frozen
dataclass with a ``to_dict()`` for JSON. Text is made by
:mod:`cstrace.render.loss`; nothing here prints.

Per run it counts:

- the bytes the reader took from the trace ID's stream, the packets it made and
  the elements the decoder made (diagnostics included);
- the alignment synchronisation packets (A-sync, ASYNC), and the bytes read
  while the reader was not synchronised (before the first one, or while it
  looked for the next one after a bad packet);
- overflows: the overflow packets of ETMv4/ETE and ITM, the error packets of
  STM (MERR, GERR: the STM dropped writes), and for the other protocols the
  ``TRACE_ON`` elements whose reason is an overflow (an I-sync or branch
  packet saying trace restarted after one);
- bad packets: reserved headers, malformed packets, and packets the decoder
  found out of sequence (a reader's bad packet and the decoder's diagnostic
  about it count once: they have the same offset);
- resynchronisations: ``NO_SYNC`` elements after the first (the decoder lost
  synchronisation: a bad packet, an overflow, a discard) with their reason;
- packets cut by the end of the trace, other decoder diagnostics by kind, and
  where a decoder stopped before the end of its stream (the reference stops
  there, so cstrace does too) with the packets it left;
- the first and last timestamp (any element carrying one);
- ``ADDR_NACC`` elements: code addresses no memory image covered, grouped
  into :class:`AddressRange` s (addresses less than :data:`RANGE_GAP` apart
  share a range).

Offsets are capture indices (``Idx``: byte offsets in the buffer). Long lists
keep the first ``limit`` items and the total count.

Counting wraps the run's packet and element iterators (a dictionary look-up on
the type of each packet and element); the stream is wrapped so that its bytes
are counted a block at a time. A run's iterators are counted each time they
are made: decode a watched run once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from cstrace.capture.stream import Stream, WrappedStream
from cstrace.decode import BufferDecode, Session, SourceRun
from cstrace.elements import (
    AddrNacc,
    Diagnostic,
    Element,
    ElemType,
    ITMPacketType,
    ITMTrace,
    MemSpace,
    NoSync,
    SWTrace,
    Timestamp,
    TraceOn,
    TraceOnReason,
    Unknown,
    UnsyncReason,
)
from cstrace.errors import DiagKind, Issue
from cstrace.protocols import DecodeOptions, Packet, ProtocolSpec
from cstrace.rows import scan
from cstrace.tally import PacketCount, counted
from cstrace.trace import Trace

if TYPE_CHECKING:
    from cstrace.batch import ElementBatch

__all__ = [
    "DEFAULT_LIMIT",
    "RANGE_GAP",
    "AddressRange",
    "CaptureAccount",
    "LossCounter",
    "LossReport",
    "NotDecoded",
    "Occurrence",
    "Occurrences",
    "SourceLoss",
    "loss_report",
    "merge_losses",
]

DEFAULT_LIMIT = 10
"""How many offsets (and address ranges) a list keeps by default."""

RANGE_GAP = 0x100000
"""Code addresses no image covered that are closer than this share an :class:`AddressRange`."""


# -- the result --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One event at a capture offset: ``what`` names it (a packet kind, a reason)."""

    offset: int
    what: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``{"offset": N}``, with ``"what"`` when it says something."""
        return {"offset": self.offset, "what": self.what} if self.what else {"offset": self.offset}


@dataclass(frozen=True, slots=True)
class Occurrences:
    """How many times something happened, and the first few times (in decode order)."""

    count: int = 0
    first: tuple[Occurrence, ...] = ()

    @property
    def offsets(self) -> list[int]:
        """The offsets of :attr:`first`."""
        return [o.offset for o in self.first]

    @property
    def more(self) -> int:
        """How many are counted but not listed in :attr:`first`."""
        return self.count - len(self.first)

    def to_dict(self) -> dict[str, Any]:
        """``{"count": N, "first": [...]}``."""
        return {"count": self.count, "first": [o.to_dict() for o in self.first]}


@dataclass(frozen=True, slots=True)
class AddressRange:
    """Code addresses no memory image covered, from ``start`` to ``last`` (both reached).

    ``hits`` is the number of ``ADDR_NACC`` elements in the range,
    ``first_offset`` the capture offset of the first, ``mem_space`` the memory
    spaces they named (OR-ed).
    """

    start: int
    last: int
    hits: int
    first_offset: int
    mem_space: MemSpace = MemSpace.NONE

    def to_dict(self) -> dict[str, Any]:
        """The range as JSON-able values (addresses as integers)."""
        return {
            "start": self.start,
            "last": self.last,
            "hits": self.hits,
            "first_offset": self.first_offset,
            "mem_space": int(self.mem_space),
        }


@dataclass(frozen=True)
class SourceLoss:
    """What one trace source of one buffer gave and lost."""

    buffer: str
    source: str
    protocol: str
    trace_id: int
    bytes: int
    """Bytes of the trace ID's stream the reader took."""
    packets: int
    elements: int
    """Elements the decoder made, diagnostics included."""
    packet_level: bool
    """Whether packets were told apart (ETMv4/ETE, PTM, ETMv3, STM, ITM, DCC): syncs,
    unsynchronised bytes, bad and cut packets. ETMv1, ETMv2 and XScale have no such
    packets: their losses are counted from the elements only."""
    sync_packets: bool
    """Whether the protocol has alignment synchronisation packets (ETMv4/ETE, PTM,
    ETMv3, STM, ITM)."""
    syncs: Occurrences
    """Alignment synchronisation packets."""
    unsynced_bytes: int
    """Bytes read while not synchronised (not decoded)."""
    overflows: Occurrences
    bad_packets: Occurrences
    resyncs: Occurrences
    """Where the decoder lost synchronisation after its start; ``what`` is the reason."""
    truncated: Occurrences
    """Packets cut by the end of the trace."""
    diagnostics: dict[str, Occurrences]
    """Other decoder diagnostics, by :class:`~cstrace.errors.DiagKind` name."""
    stopped_at: int | None
    """The offset of the first packet the decoder did not take, if it stopped early (or of
    the packet after which the reader stopped)."""
    undecoded_packets: int
    """Packets after :attr:`stopped_at` (not decoded)."""
    undecoded_bytes: int
    timestamps: int
    """Elements that carried a timestamp."""
    first_timestamp: int | None
    last_timestamp: int | None
    timestamp_clock: str
    """``global`` (the system timestamp), or ``local`` for an ITM stream with only local
    timestamps (deltas summed by the decoder, which starts again after an overflow)."""
    nacc: int
    """``ADDR_NACC`` elements: the trace reached code no image covered."""
    unreached: tuple[AddressRange, ...]
    """The first ranges of those addresses, in address order."""
    unreached_ranges: int
    """How many ranges there are in all."""
    stopped_why: str = ""
    """Why decoding stopped at :attr:`stopped_at`."""
    sync_wait_bytes: int = 0
    """Bytes of the packets the decoder skipped while it waited for synchronisation (after
    losing it, or before its first trace info): read, not decoded."""
    sync_waits: Occurrences = Occurrences()
    """Where each wait began (``what``: its bytes)."""
    idle_bytes: int = 0
    """Bytes of long runs of 0x00 (unused buffer space, padding) the element path skipped
    (:mod:`cstrace.capture.idle`): no trace, counted in :attr:`bytes`."""

    @property
    def lost_anything(self) -> bool:
        """True when something was lost: unsynchronised bytes after the first sync aside,
        any overflow, bad packet, resynchronisation, cut packet, diagnostic, early stop
        or code address no image covered."""
        return bool(
            self.overflows.count
            or self.bad_packets.count
            or self.resyncs.count
            or self.truncated.count
            or self.diagnostics
            or self.stopped_at is not None
            or self.nacc
            or self.sync_wait_bytes
        )

    def to_dict(self) -> dict[str, Any]:
        """The counts as JSON-able values (offsets and addresses as integers)."""
        return {
            "buffer": self.buffer,
            "source": self.source,
            "protocol": self.protocol,
            "trace_id": self.trace_id,
            "bytes": self.bytes,
            "packets": self.packets,
            "elements": self.elements,
            "packet_level": self.packet_level,
            "sync_packets": self.sync_packets,
            "syncs": self.syncs.to_dict(),
            "unsynced_bytes": self.unsynced_bytes,
            "overflows": self.overflows.to_dict(),
            "bad_packets": self.bad_packets.to_dict(),
            "resyncs": self.resyncs.to_dict(),
            "truncated": self.truncated.to_dict(),
            "diagnostics": {k: v.to_dict() for k, v in self.diagnostics.items()},
            "stopped_at": self.stopped_at,
            "stopped_why": self.stopped_why,
            "undecoded_packets": self.undecoded_packets,
            "undecoded_bytes": self.undecoded_bytes,
            "idle_bytes": self.idle_bytes,
            "sync_wait_bytes": self.sync_wait_bytes,
            "sync_waits": self.sync_waits.to_dict(),
            "timestamps": {
                "count": self.timestamps,
                "first": self.first_timestamp,
                "last": self.last_timestamp,
                "clock": self.timestamp_clock,
            },
            "no_image": {
                "count": self.nacc,
                "ranges": self.unreached_ranges,
                "first": [r.to_dict() for r in self.unreached],
            },
        }


@dataclass(frozen=True, slots=True)
class NotDecoded:
    """A trace source (or trace ID) that was not decoded, and why."""

    buffer: str
    reason: str
    trace_id: int | None = None
    source: str = ""
    bytes: int | None = None
    """The trace ID's bytes in the buffer, when known."""

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-able values."""
        return {
            "buffer": self.buffer,
            "trace_id": self.trace_id,
            "source": self.source,
            "bytes": self.bytes,
            "reason": self.reason,
        }


NULL_ID = 0x00
"""The trace ID of the formatter's padding (no source may have it)."""


def id_reason(trace_id: int) -> str:
    """Why bytes of ``trace_id`` in a capture were not decoded (it has no source)."""
    if trace_id >= 0x70:
        return "reserved trace ID (0x70-0x7f): no source may have it"
    return "no trace source has this trace ID"


@dataclass(frozen=True, slots=True)
class CaptureAccount:
    """Where every byte of a formatted capture went (the parts add up to :attr:`size`)."""

    buffer: str
    format: str
    size: int
    decoded: int
    """Data bytes of the trace IDs that have a source."""
    unsourced: int
    """Data bytes of trace IDs that have none (reserved IDs included; listed in the
    report's ``not_decoded``)."""
    padding: int
    """Data bytes of the null trace ID (0x00): the formatter's padding."""
    no_id: int
    """Data bytes before the first ID byte: they belong to no trace ID."""
    overhead: int
    """The frames' own bytes (ID and flag bytes; FSYNC and HSYNC patterns)."""
    after_stop: int
    """Bytes after the frame where the reference stops (not demultiplexed)."""
    trailing: int
    """Bytes after the last whole frame."""

    def to_dict(self) -> dict[str, Any]:
        """The counts as JSON-able values."""
        return {
            "buffer": self.buffer,
            "format": self.format,
            "size": self.size,
            "decoded": self.decoded,
            "unsourced": self.unsourced,
            "padding": self.padding,
            "no_id": self.no_id,
            "overhead": self.overhead,
            "after_stop": self.after_stop,
            "trailing": self.trailing,
        }


@dataclass(frozen=True)
class LossReport:
    """What a decode gave and lost: one entry per decoded run, what was not decoded, and
    the problems the session met (``Issue`` records: a capture cut short, a source that
    could not be configured, a missing image)."""

    sources: tuple[SourceLoss, ...] = ()
    not_decoded: tuple[NotDecoded, ...] = ()
    issues: tuple[Issue, ...] = ()
    captures: tuple[CaptureAccount, ...] = ()
    """Where the bytes of each formatted capture went."""

    def to_dict(self) -> dict[str, Any]:
        """``{"sources": [...], "not_decoded": [...], "issues": [...], "captures": [...]}``."""
        return {
            "sources": [s.to_dict() for s in self.sources],
            "captures": [c.to_dict() for c in self.captures],
            "not_decoded": [n.to_dict() for n in self.not_decoded],
            "issues": [
                {"severity": i.severity.name, "kind": i.kind.name, "message": str(i)}
                for i in self.issues
            ],
        }


# -- counting ----------------------------------------------------------------------------------


class _List:
    """A count and the first ``limit`` occurrences."""

    __slots__ = ("count", "first", "limit")

    def __init__(self, limit: int) -> None:
        self.count = 0
        self.first: list[Occurrence] = []
        self.limit = limit

    def add(self, offset: int, what: str = "") -> None:
        self.count += 1
        if len(self.first) < self.limit:
            self.first.append(Occurrence(offset, what))

    def add_many(self, count: int, offsets: list[int], what: str = "") -> None:
        """Count ``count`` occurrences, the first of which are at ``offsets``."""
        self.count += count
        room = self.limit - len(self.first)
        if room > 0:
            self.first.extend(Occurrence(o, what) for o in offsets[:room])

    def freeze(self) -> Occurrences:
        return Occurrences(self.count, tuple(self.first))


_DECODER_STOPS = "the decoder stops at a packet it cannot decode"
_BAD_DIAGNOSTICS = frozenset((DiagKind.BAD_PACKET, DiagKind.BAD_SEQUENCE))
_START_REASONS = frozenset((UnsyncReason.INIT_DECODER, UnsyncReason.RESET_DECODER))


def _packet_kinds(protocol: ProtocolSpec) -> dict[type, tuple[str, str]]:
    """The packet classes ``protocol`` has the loss report count: class -> (category, label)."""
    return {cls: (category, label) for cls, category, label in protocol.loss_packets}


def _add_hits(table: dict[int, list[int]], address: int, n: int, offset: int, space: int) -> None:
    """Count ``n`` hits of ``address`` (first seen at ``offset``, in memory ``space``) in
    ``table``: address -> [hits, first offset, memory spaces]."""
    seen = table.get(address)
    if seen is None:
        table[address] = [n, offset, space]
    else:
        seen[0] += n
        seen[2] |= space


class _Tally:
    """The counts of one run, updated by the wrappers of its iterators."""

    def __init__(self, run: SourceRun, limit: int) -> None:
        self.run = run
        self.limit = limit
        self.bytes = 0
        self._readers: list[list[int]] = []
        """Per counted packet iterator: packets passed (a packet that stands for several,
        ``grouped_types``, counts as those), and 1 once it reached its end."""
        self.elements = 0
        self.unsynced = 0
        self.syncs = _List(limit)
        self.overflows = _List(limit)
        self.bad = _List(limit)
        self.bad_at: set[int] = set()
        self.resyncs = _List(limit)
        self.truncated = _List(limit)
        self.diagnostics: dict[str, _List] = {}
        self.ts_count = 0
        self.ts_first: int | None = None
        self.ts_last: int | None = None
        self.local_ts: list[int] = []
        """ITM local timestamps: the first, the last and how many."""
        self.nacc: dict[int, list[int]] = {}
        """Address -> [hits, first offset, memory spaces]."""
        self.stopped_at: int | None = None
        self.undecoded_packets = 0
        self.undecoded_bytes = 0
        self.reader: Iterator[Packet] | None = None
        """The last counted packet iterator."""
        self.last_packet: list[Packet] = []
        """The last packet of the last counted packet iterator, once it ended."""
        self.stream_blocks: Iterator[Stream] | None = None
        """The blocks the reader pulls (to count what it left when it stopped early)."""
        self.last_block: Stream | None = None
        self.stopped_why = ""
        self.sync_wait = _List(limit)
        self.sync_wait_bytes = 0
        self.idle_streams: list[Any] = []
        """The streams the element path read (their ``skipped`` idle bytes)."""

        methods: dict[str, Callable[[Packet, str], None]] = {
            "unsynced": self._unsynced,
            "sync": self._sync,
            "overflow": self._overflow,
            "bad": self._bad_packet,
            "bad_kind": self._bad_kind,
            "truncated": self._truncated,
        }
        kinds = _packet_kinds(run.protocol)
        self.grouped_types = frozenset(c for c, (h, _) in kinds.items() if h == "grouped")
        """Packet classes that stand for ``len(raw)`` packets."""
        self.packet_handlers: dict[type, Callable[[Packet], None]] = {
            cls: _bind(methods[handler], label)
            for cls, (handler, label) in kinds.items()
            if handler != "grouped"
        }
        handlers: dict[type, Callable[[Any], None]] = {
            NoSync: self._nosync,
            Timestamp: self._timestamp,
            SWTrace: self._timestamp,
            ITMTrace: self._itm_timestamp,
            AddrNacc: self._nacc,
            Diagnostic: self._diagnostic,
            Unknown: self._unknown,
        }
        if not run.protocol.overflow_packets:
            handlers[TraceOn] = self._trace_on
        self.element_handlers = handlers
        self._handled_types = [int(cls.TYPE) for cls in handlers if issubclass(cls, Element)]
        """The element types (``ElemType``) of the classes with a handler."""

    # packets
    def _unsynced(self, p: Packet, label: str) -> None:
        # PTM: zeros carried from one block to the next are reported twice
        if not getattr(p, "carried", False):
            self.unsynced += len(p.raw)

    def _sync(self, p: Packet, label: str) -> None:
        self.syncs.add(p.offset)

    def _overflow(self, p: Packet, label: str) -> None:
        self.overflows.add(p.offset, label)

    def _bad(self, offset: int, what: str) -> None:
        if offset not in self.bad_at:
            self.bad_at.add(offset)
            self.bad.add(offset, what)

    def _bad_packet(self, p: Packet, label: str) -> None:
        self._bad(p.offset, label)

    def _bad_kind(self, p: Packet, label: str) -> None:
        kind = getattr(p, "kind", None)
        name = getattr(kind, "name", "BAD_PACKET")
        if name == "INCOMPLETE_EOT":
            self._truncated(p, name)
        else:
            self._bad(p.offset, name)

    def _truncated(self, p: Packet, label: str) -> None:
        # the decoder's diagnostic about this packet is not another bad packet
        self.bad_at.add(p.offset)
        self.truncated.add(p.offset, label)

    # elements
    def _nosync(self, e: NoSync) -> None:
        if e.reason not in _START_REASONS:
            self.resyncs.add(e.offset, e.reason.name)

    def _trace_on(self, e: TraceOn) -> None:
        if e.reason == TraceOnReason.OVERFLOW:
            self.overflows.add(e.offset, "TRACE_ON")

    def _timestamp(self, e: Timestamp | SWTrace | ITMTrace) -> None:
        ts = e.timestamp
        if ts is not None:
            if self.ts_first is None:
                self.ts_first = ts
            self.ts_last = ts
            self.ts_count += 1

    def _itm_timestamp(self, e: ITMTrace) -> None:
        ts = e.timestamp
        if ts is None:
            return
        if e.pkt_type == ITMPacketType.TS_GLOBAL:
            self._timestamp(e)
        elif self.local_ts:
            self.local_ts[1] = ts
            self.local_ts[2] += 1
        else:
            self.local_ts = [ts, ts, 1]

    def _nacc(self, e: AddrNacc) -> None:
        _add_hits(self.nacc, e.address, 1, e.offset, int(e.mem_space))

    def _diagnostic(self, e: Diagnostic) -> None:
        if e.kind == DiagKind.SYNC_WAIT:
            self.sync_wait.add(e.offset, f"{e.detail} bytes")
            self.sync_wait_bytes += e.detail
            return
        if e.kind in _BAD_DIAGNOSTICS:
            self._bad(e.offset, e.kind.name)
            return
        group = self.diagnostics.get(e.kind.name)
        if group is None:
            group = self.diagnostics[e.kind.name] = _List(self.limit)
        group.add(e.offset, e.code.name)

    def _unknown(self, e: Unknown) -> None:
        self._bad(e.offset, "UNKNOWN")

    # iterators
    def count_packets(self, source: Iterable[Packet]) -> Iterator[Packet]:
        """``source``, counted (through the compiled :func:`cstrace.tally.counted`)."""
        totals = [0, 0]
        self._readers.append(totals)
        self.last_packet = []
        return counted(source, self.packet_handlers, totals, self.grouped_types, self.last_packet)

    def packet_count(self) -> PacketCount:
        """Where a reader and decoder in one loop count their packets (as
        :meth:`count_packets` counts an iterator's)."""
        totals = [0, 0]
        self._readers.append(totals)
        lists = {"sync": self.syncs, "overflow": self.overflows}
        bulk: dict[str, Callable[[int, list[int]], None]] = {}
        for _cls, category, label in self.run.protocol.loss_packets:
            target = lists.get(category)
            if target is not None and category not in bulk:
                bulk[category] = partial(_add_many, target, label)
        count = PacketCount(self.packet_handlers, totals, bulk, self.limit)
        count.on_not_decoded = self._not_decoded
        self.last_packet = count.last
        return count

    def _not_decoded(self, offset: int, packets: int, size: int) -> None:
        """Packets a reader and decoder in one loop read after the decoder stopped."""
        if self.stopped_at is None:
            self.stopped_at = offset
            self.stopped_why = _DECODER_STOPS
        self.undecoded_packets += packets
        self.undecoded_bytes += size

    @property
    def packets(self) -> int:
        """Packets counted so far (a packet that stands for several counts as those)."""
        return sum(t[0] for t in self._readers)

    @property
    def reader_done(self) -> bool:
        """Whether the last counted packet iterator reached its end."""
        return bool(self._readers) and self._readers[-1][1] == 1

    def count_elements(self, source: Iterable[Element]) -> Iterator[Element]:
        """``source``, counted; when it ends before its packets do, the rest is counted too."""
        totals = [0, 0]
        try:
            yield from counted(source, self.element_handlers, totals)
        finally:
            self.elements += totals[0]
        self._count_rest()

    def count_rows(self, source: Iterable[list[Any]]) -> Iterator[list[Any]]:
        """``source`` (lists of element rows, :mod:`cstrace.rows`), counted as
        :meth:`count_elements` counts elements."""
        get = self.element_handlers.get
        # A decoder that writes columns gives lists of one ElementBatch (cstrace.batch,
        # not imported here when no decoder did).
        batch_type = getattr(sys.modules.get("cstrace.batch"), "ElementBatch", None)
        n = 0
        try:
            for items in source:
                if batch_type is None and "cstrace.batch" in sys.modules:
                    batch_type = sys.modules["cstrace.batch"].ElementBatch
                if len(items) == 1 and type(items[0]) is batch_type:
                    n += len(items[0])
                    self._count_batch(items[0])
                    yield items
                    continue
                objects: list[Any] = []
                n += scan(items, objects)
                for e in objects:
                    handler = get(type(e))
                    if handler is not None:
                        handler(e)
                yield items
        finally:
            self.elements += n
        self._count_rest()

    def _count_batch(self, batch: ElementBatch) -> None:
        """Count the elements of a batch of rows: ITM and STM timestamps from the columns
        (as the handlers of their element objects count them), the rows of the other
        element types through their handlers."""
        import numpy as np

        types = batch["type"]
        itm = types == ElemType.ITMTRACE
        if itm.any():
            stamped = itm & batch["timestamp_valid"]
            glob = stamped & (batch["pkt_type"] == ITMPacketType.TS_GLOBAL)
            ts = batch["timestamp"]
            values = ts[glob]
            if len(values):
                if self.ts_first is None:
                    self.ts_first = int(values[0])
                self.ts_last = int(values[-1])
                self.ts_count += len(values)
            values = ts[stamped & ~glob]
            if len(values):
                if self.local_ts:
                    self.local_ts[1] = int(values[-1])
                    self.local_ts[2] += len(values)
                else:
                    self.local_ts = [int(values[0]), int(values[-1]), len(values)]
        # SWTRACE and TIMESTAMP rows: their timestamps, as the handlers count them
        sw = (types == ElemType.SWTRACE) | (types == ElemType.TIMESTAMP)
        if sw.any():
            values = batch["timestamp"][sw & batch["timestamp_valid"]]
            if len(values):
                if self.ts_first is None:
                    self.ts_first = int(values[0])
                self.ts_last = int(values[-1])
                self.ts_count += len(values)
        counted = itm | sw
        if TraceOn in self.element_handlers:
            on = types == ElemType.TRACE_ON
            if on.any():
                overflow = on & (batch["reason"] == TraceOnReason.OVERFLOW)
                offsets = batch["offset"][overflow]
                if len(offsets):
                    self.overflows.add_many(
                        len(offsets), offsets[: self.limit].tolist(), "TRACE_ON"
                    )
                counted |= on
        nacc = types == ElemType.ADDR_NACC
        if nacc.any():
            table = self.nacc
            for address, offset, space in zip(
                batch["address"][nacc].tolist(),
                batch["offset"][nacc].tolist(),
                batch["mem_space"][nacc].tolist(),
                strict=True,
            ):
                _add_hits(table, address, 1, offset, space)
            counted |= nacc
        # Only the rows of the other types with a handler are made objects (most rows
        # are INSTR_RANGE, which has none).
        rest = np.flatnonzero(~counted & np.isin(types, self._handled_types))
        if len(rest):
            get = self.element_handlers.get
            for e in batch.take(rest):
                handler = get(type(e))
                if handler is not None:
                    handler(e)

    def _count_rest(self) -> None:
        """When the decoder stopped before its packets did (as the reference does): count
        what it left. When the reader stopped before its stream did: the same."""
        reader = self.reader
        if reader is not None and not self.reader_done:
            self.reader = None
            for p in reader:
                if self.stopped_at is None:
                    self.stopped_at = p.offset
                    self.stopped_why = _DECODER_STOPS
                self.undecoded_packets += len(p.raw) if type(p) in self.grouped_types else 1
                self.undecoded_bytes += len(p.raw)
        self._count_unread()

    def _count_unread(self) -> None:
        """After a reader that stopped at a packet (ITM and STM stop at a reserved header
        or a bad sequence while they wait for synchronisation, as the reference does):
        the bytes it did not read, after that packet."""
        blocks, self.stream_blocks = self.stream_blocks, None
        last = self.last_packet[-1] if self.last_packet else None
        stops = dict(self.run.protocol.reader_stops)
        if blocks is None or last is None or type(last) not in stops:
            return
        if not self.reader_done or self.stopped_at is not None:
            return
        block = self.last_block
        left = 0
        if block is not None:
            # the bytes after the packet in the block the reader last pulled
            pos = _position(block, last.offset)
            if pos is not None:
                left = max(0, len(block.data) - pos - len(last.raw))
        idle = self._idle()
        drained = sum(len(b.data) for b in blocks)
        self.bytes += drained
        left += drained + self._idle() - idle
        if left:
            self.stopped_at = last.offset
            self.stopped_why = f"reading stops after a {stops[type(last)]}"
            self.undecoded_bytes += left

    def _idle(self) -> int:
        """Idle bytes the element path skipped so far."""
        return sum(int(getattr(s, "skipped", 0)) for s in self.idle_streams)

    def result(self) -> SourceLoss:
        """The counts so far, as a :class:`SourceLoss`."""
        run = self.run
        ranges = group_addresses(self.nacc)
        clock = "global"
        ts_count, ts_first, ts_last = self.ts_count, self.ts_first, self.ts_last
        if not ts_count and self.local_ts:
            clock = "local"
            ts_first, ts_last, ts_count = self.local_ts
        idle = self._idle()
        return SourceLoss(
            buffer=run.buffer.name,
            source=run.source.name,
            protocol=run.protocol.name,
            trace_id=run.trace_id,
            bytes=self.bytes + idle,
            packets=self.packets,
            elements=self.elements,
            packet_level=bool(run.protocol.loss_packets),
            sync_packets=any(c == "sync" for _, c, _ in run.protocol.loss_packets),
            syncs=self.syncs.freeze(),
            unsynced_bytes=self.unsynced,
            overflows=self.overflows.freeze(),
            bad_packets=self.bad.freeze(),
            resyncs=self.resyncs.freeze(),
            truncated=self.truncated.freeze(),
            diagnostics={k: v.freeze() for k, v in self.diagnostics.items()},
            stopped_at=self.stopped_at,
            stopped_why=self.stopped_why,
            undecoded_packets=self.undecoded_packets,
            undecoded_bytes=self.undecoded_bytes,
            timestamps=ts_count,
            first_timestamp=ts_first,
            last_timestamp=ts_last,
            timestamp_clock=clock,
            nacc=sum(v[0] for v in self.nacc.values()),
            unreached=tuple(ranges[: self.limit]),
            unreached_ranges=len(ranges),
            idle_bytes=idle,
            sync_wait_bytes=self.sync_wait_bytes,
            sync_waits=self.sync_wait.freeze(),
        )


def _position(block: Stream, offset: int) -> int | None:
    """The position in ``block`` of the byte at capture index ``offset``, if it is there."""
    pos = 0
    for idx, piece in block.chunks():
        if idx <= offset < idx + len(piece):
            return pos + offset - idx
        pos += len(piece)
    return None


def _add_many(target: _List, label: str, count: int, offsets: list[int]) -> None:
    target.add_many(count, offsets, label)


def _bind(method: Callable[[Packet, str], None], label: str) -> Callable[[Packet], None]:
    def handler(p: Packet) -> None:
        method(p, label)

    return handler


def group_addresses(seen: dict[int, list[int]], gap: int = RANGE_GAP) -> list[AddressRange]:
    """Group ``address -> [hits, first offset, memory spaces]`` into ranges, in address order.

    An address less than ``gap`` after the last address of a range joins it.
    """
    out: list[AddressRange] = []
    start = last = hits = first = space = 0
    for address in sorted(seen):
        h, offset, sp = seen[address]
        if out or hits:
            if address - last < gap:
                last = address
                hits += h
                first = min(first, offset)
                space |= sp
                continue
            out.append(AddressRange(start, last, hits, first, MemSpace(space)))
        start = last = address
        hits, first, space = h, offset, sp
    if hits:
        out.append(AddressRange(start, last, hits, first, MemSpace(space)))
    return out


class _CountingStream(WrappedStream):
    """A stream that counts the bytes a reader takes from it (a block at a time)."""

    __slots__ = ("_tally",)

    def __init__(self, inner: Stream, tally: _Tally) -> None:
        super().__init__(inner)
        self._tally = tally

    def blocks(self) -> Iterator[Stream]:
        """The inner stream's blocks, counted (the tally can take the rest of them once the
        reader stopped: :meth:`_Tally._count_unread`)."""
        tally = self._tally
        source = self._inner.blocks()
        tally.stream_blocks = source
        for block in source:
            tally.bytes += len(block.data)
            tally.last_block = block
            yield block

    @property
    def data(self) -> bytes:
        """All the inner stream's bytes (counted once, however often asked)."""
        data = self._inner.data
        self._tally.bytes = len(data)
        return data

    @data.setter
    def data(self, value: bytes) -> None:
        self._inner.data = value


@dataclass
class _CountedRun(SourceRun):
    """A :class:`SourceRun` whose packets and elements are counted by a :class:`_Tally`."""

    tally: _Tally | None = field(default=None, repr=False)

    def packets(self) -> Iterator[Packet]:
        """The packets of this source's stream, counted."""
        return self._counted_reader(self.protocol.iter_packets)

    def row_packets(self) -> Iterator[Packet]:
        """The packets as the element rows read them (:meth:`SourceRun.row_packets`), counted."""
        read = self.protocol.iter_row_packets or self.protocol.iter_packets
        return self._counted_reader(read, self.row_stream())

    def row_stream(self) -> Stream:
        """The stream the element path reads (:meth:`SourceRun.row_stream`), its idle bytes
        counted."""
        stream = super().row_stream()
        assert self.tally is not None
        self.tally.idle_streams.append(stream)
        return stream

    def _counted_reader(
        self, read: Callable[[Stream, Any, bool], Iterator[Packet]], stream: Stream | None = None
    ) -> Iterator[Packet]:
        tally = self.tally
        assert tally is not None
        stream = _CountingStream(self.stream if stream is None else stream, tally)
        reader = tally.count_packets(read(stream, self.config, self.context.complete))
        tally.reader = reader
        return reader

    def elements(self, packets: Iterable[Packet] | None = None) -> Iterator[Element]:
        """The elements decoded from ``packets`` (by default ``packets()``), counted."""
        tally = self.tally
        assert tally is not None
        return tally.count_elements(super().elements(packets))

    def rows(self, packets: Iterable[Packet] | None = None) -> Iterator[list[Any]]:
        """The element rows decoded from ``packets`` (by default as :meth:`SourceRun.rows`
        reads the stream), counted."""
        tally = self.tally
        assert tally is not None
        fused = self.protocol.iter_stream_rows
        if packets is None and fused is not None:
            stream = _CountingStream(self.row_stream(), tally)
            rows = fused(stream, self.config, self.context, tally.packet_count())
        else:
            rows = super().rows(self.row_packets() if packets is None else packets)
        return tally.count_rows(rows)


@dataclass(frozen=True, slots=True)
class _Counted:
    """The counts of a run, counted elsewhere."""

    loss: SourceLoss

    def result(self) -> SourceLoss:
        """The counts."""
        return self.loss


class LossCounter:
    """Counts what the runs it watches give and lose; :meth:`report` says what it found.

    ``limit`` is how many offsets (and address ranges) each list keeps.
    """

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._tallies: list[_Tally | _Counted] = []
        self._not_decoded: list[NotDecoded] = []
        self._issues: list[Issue] = []
        self._captures: list[CaptureAccount] = []

    def watch(self, run: SourceRun) -> SourceRun:
        """A copy of ``run`` whose ``packets()``, ``elements()`` and ``batches()`` are counted."""
        tally = _Tally(run, self.limit)
        self._tallies.append(tally)
        return _CountedRun(**run.run_fields(), tally=tally)

    def address_hits(self) -> dict[int, list[int]]:
        """The code addresses no image covered in the last run watched: address -> [hits,
        first offset, memory spaces] (what :func:`merge_losses` needs of a piece)."""
        for tally in reversed(self._tallies):
            if isinstance(tally, _Tally):
                return {a: list(v) for a, v in tally.nacc.items()}
        return {}

    def add_result(self, loss: SourceLoss) -> None:
        """Record the counts of a run counted elsewhere (a worker process's own counter)."""
        self._tallies.append(_Counted(loss))

    def add_capture(self, decoded: BufferDecode) -> None:
        """Account for every byte of a buffer's capture: the trace IDs that have no run
        (their bytes are not decoded) and the rest (:meth:`BufferDecode.capture_bytes`)."""
        counted = decoded.capture_bytes()
        if counted is None:
            return
        ours = {run.trace_id for run in decoded.runs}
        name = decoded.buffer.name
        unsourced = 0
        for tid, size in sorted(counted.data.items()):
            if tid in ours or tid == NULL_ID:
                continue
            unsourced += size
            self._not_decoded.append(NotDecoded(name, id_reason(tid), tid, bytes=size))
        self._captures.append(
            CaptureAccount(
                name,
                decoded.buffer.format,
                counted.size,
                sum(n for t, n in counted.data.items() if t in ours),
                unsourced,
                counted.data.get(NULL_ID, 0) if NULL_ID not in ours else 0,
                counted.no_id,
                counted.overhead,
                counted.after_stop,
                counted.trailing,
            )
        )

    def not_decoded(self, entry: NotDecoded) -> None:
        """Record a source or trace ID that was not decoded."""
        self._not_decoded.append(entry)

    def add_issues(self, issues: Iterable[Issue]) -> None:
        """Record problems met: a buffer's issues, those of code memory (each once)."""
        for issue in issues:
            if issue not in self._issues:
                self._issues.append(issue)

    def report(self) -> LossReport:
        """What was counted so far."""
        return LossReport(
            tuple(t.result() for t in self._tallies),
            tuple(self._not_decoded),
            tuple(self._issues),
            tuple(self._captures),
        )


def _merge_occurrences(parts: Iterable[Occurrences], limit: int) -> Occurrences:
    first: list[Occurrence] = []
    count = 0
    for o in parts:
        count += o.count
        first.extend(o.first[: max(0, limit - len(first))])
    return Occurrences(count, tuple(first))


def merge_losses(
    parts: Sequence[tuple[SourceLoss, Mapping[int, Sequence[int]]]],
    size: int,
    limit: int = DEFAULT_LIMIT,
) -> SourceLoss:
    """The counts of one run decoded in consecutive pieces (:mod:`cstrace.split`), as if
    it had been decoded whole.

    Each part is a piece's counts with its code addresses no image covered
    (:meth:`LossCounter.address_hits`); ``size`` is the bytes of the run's stream
    (each piece's reader took more: its blocks overlap the next piece's).
    """
    losses = [loss for loss, _ in parts]
    head = losses[0]
    seen: dict[int, list[int]] = {}
    for _, hits in parts:
        for address, (n, offset, space) in hits.items():
            _add_hits(seen, address, n, offset, space)
    ranges = group_addresses(seen)
    kinds: dict[str, list[Occurrences]] = {}
    for loss in losses:
        for kind, occ in loss.diagnostics.items():
            kinds.setdefault(kind, []).append(occ)
    stamped = [loss for loss in losses if loss.timestamps]
    stopped = [loss.stopped_at for loss in losses if loss.stopped_at is not None]
    return replace(
        head,
        bytes=size,
        packets=sum(loss.packets for loss in losses),
        elements=sum(loss.elements for loss in losses),
        syncs=_merge_occurrences((loss.syncs for loss in losses), limit),
        unsynced_bytes=sum(loss.unsynced_bytes for loss in losses),
        overflows=_merge_occurrences((loss.overflows for loss in losses), limit),
        bad_packets=_merge_occurrences((loss.bad_packets for loss in losses), limit),
        resyncs=_merge_occurrences((loss.resyncs for loss in losses), limit),
        truncated=_merge_occurrences((loss.truncated for loss in losses), limit),
        diagnostics={k: _merge_occurrences(v, limit) for k, v in kinds.items()},
        stopped_at=stopped[0] if stopped else None,
        stopped_why=next((loss.stopped_why for loss in losses if loss.stopped_why), ""),
        undecoded_packets=sum(loss.undecoded_packets for loss in losses),
        undecoded_bytes=sum(loss.undecoded_bytes for loss in losses),
        timestamps=sum(loss.timestamps for loss in losses),
        first_timestamp=stamped[0].first_timestamp if stamped else None,
        last_timestamp=stamped[-1].last_timestamp if stamped else None,
        timestamp_clock=stamped[0].timestamp_clock if stamped else head.timestamp_clock,
        nacc=sum(v[0] for v in seen.values()),
        unreached=tuple(ranges[:limit]),
        unreached_ranges=len(ranges),
        idle_bytes=sum(loss.idle_bytes for loss in losses),
        sync_wait_bytes=sum(loss.sync_wait_bytes for loss in losses),
        sync_waits=_merge_occurrences((loss.sync_waits for loss in losses), limit),
    )


def loss_report(
    trace: Trace,
    buffers: Sequence[str] | None = None,
    options: DecodeOptions | None = None,
    *,
    limit: int = DEFAULT_LIMIT,
) -> LossReport:
    """Decode ``trace`` (the ``buffers`` named, default all) and say what it lost.

    Decodes every source of every buffer in one :class:`~cstrace.decode.Session`,
    as ``cstrace decode`` does, and discards the elements.
    """
    counter = LossCounter(limit)
    counter.add_issues(trace.issues)
    session = Session(trace, options)
    names = list(buffers) if buffers is not None else [b.name for b in trace.buffers]
    for name in names:
        decoded = session.open_buffer(trace.buffer(name))
        counter.add_issues(decoded.issues)
        counter.add_capture(decoded)
        for run in decoded.runs:
            for _ in counter.watch(run).elements():
                pass
            counter.add_issues(session.new_issues())
    return counter.report()
