"""The protocol kit: what every protocol's reader and decoder share.

Input: nothing of its own; the protocols build on it. Output: the pieces that
were once written again in each protocol's folder.

- :class:`ElementSink`, the base of a decoder class: the synchronisation state
  (``NO_SYNC`` → waiting → decoding, :meth:`ElementSink.gate`), the warning held
  back for the first element decoded without synchronisation
  (:attr:`ElementSink.pending`), the counts the loss report wants of the
  packets read (:meth:`ElementSink.count_sync`, :meth:`ElementSink.count_overflow`),
  and the two sinks for the elements it outputs: element objects
  (:attr:`ElementSink.objects`, one packet's at a time, for the listing), or
  element columns (:meth:`ElementSink.take` gives them as an
  :class:`~cstrace.batch.ElementBatch`, no object per element). A decoder
  class writes its own element type's columns (its ``bind_columns`` types
  them) and hands any other element to :meth:`ElementSink.element`.
- The **reader contract**. A reader is a generator ``read(stream, config,
  complete, dec)`` that cuts the stream into packets and hands each to the
  decoder ``dec``: the common kinds as fields, to one method per packet kind;
  the rare ones as packet objects (``dec.other(packet)``). It yields (None)
  whenever ``dec.ready()`` says there is output to take. Packet objects are
  made only for a tap: when ``dec.tap`` is a list, the decoder's packet
  methods append packet objects to it instead of decoding (``dec.raw`` holds
  the packet's bytes), which is how ``iter_packets`` (the listing, ``--format
  packets``) is made from the same loop.
- :func:`stream_rows` and :func:`elements_of`, the two ways out of that one
  loop: element rows for a whole stream (``ProtocolSpec.iter_stream_rows``),
  and element objects from packet objects (``ProtocolSpec.iter_elements``).
- :func:`input_blocks`: the blocks the reference hands a packet reader.
- :class:`ReturnStack`: the trace return stack of the program-flow protocols
  (PTM, ETMv4/ETE), as the reference keeps it.

ITM, STM and ETMv3 are built on the kit (:mod:`cstrace.protocols.itm`,
:mod:`cstrace.protocols.stm`, :mod:`cstrace.protocols.etmv3`);
``docs/architecture.md`` says how a protocol is put together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow
from cstrace.elements import Diagnostic, Element, EoTrace, NoSync, UnsyncReason
from cstrace.errors import DiagCode, DiagKind
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.tally import PacketCount

__all__ = [
    "DECODE",
    "NEVER",
    "NO_SYNC",
    "READ_BLOCK",
    "SINK_FIELDS",
    "WAIT_SYNC",
    "ElementSink",
    "KitCut",
    "ReturnStack",
    "elements_of",
    "input_blocks",
    "stream_rows",
    "tapped",
]

NO_SYNC = 0
"""Synchronisation state: nothing read yet (the next packet first gives a ``NO_SYNC``)."""
WAIT_SYNC = 1
"""Synchronisation state: waiting for a synchronisation packet."""
DECODE = 2
"""Synchronisation state: decoding."""

NEVER = 1 << 62
"""A capture index no capture reaches."""

SINK_FIELDS = frozenset(
    (
        "trace_id", "recover", "last", "fatal", "pending", "objects", "tap", "raw",
        "last_other", "packets", "limit", "syncs", "sync_at", "overflows", "overflow_at",
        "handlers", "as_columns", "size", "capacity", "rows", "specs", "arrays",
        "undecoded", "undecoded_bytes", "stop_at", "pause_at",
    )
)  # fmt: skip
"""The attributes of :class:`ElementSink` that are not state crossing a cut of a stream
(:mod:`cstrace.split`): what the configuration sets, the sink (its output and
columns, taken between packets) and the counts of the loss report (those of a piece
are merged with the others'). A decoder class's ``CUT_CONSTANTS`` include them."""

_NO_SYNC = NO_SYNC  # (C copies when compiled)
_WAIT_SYNC = WAIT_SYNC
_DECODE = DECODE

READ_BLOCK = 1024
"""The reference lister reads a buffer file in blocks of this size; without
formatter frames, these are the blocks its packet readers see."""


class ElementSink:
    """The base of a decoder class (module text): synchronisation state, loss counts,
    and the element sink, objects or columns.

    ``columns``: the names and NumPy dtypes of the columns the decoder writes
    itself (with ``as_columns``); the other columns of the batch schema are 0.
    """

    def __init__(
        self,
        trace_id: int,
        reset: bool,
        as_columns: bool,
        size: int,
        columns: tuple[tuple[str, str], ...],
    ) -> None:
        self.trace_id = trace_id
        self.recover: bool
        """Packets before synchronisation are decoded, and decoding goes on after a bad
        packet (set by the decoder class, from its configuration, before this runs)."""
        self.state = _NO_SYNC
        self.reason = UnsyncReason.RESET_DECODER if reset else UnsyncReason.INIT_DECODER
        self.last = 0
        """Capture index of the last packet decoded (where ``EO_TRACE`` is)."""
        self.stopped = False
        """The decoder stopped at a bad packet, as the reference does."""
        self.fatal = False
        """The reader stopped at a bad packet, as the reference does."""
        self.pending: Diagnostic | None = None
        """The warning for elements decoded before any synchronisation packet, given
        before the first of them."""
        self.objects: list[Any] = []
        """Element objects (without ``as_columns``), or ``(row, element)`` pairs of the
        rows that are not the decoder's own element type (with it)."""
        self.tap: list[Packet] | None = None
        self.raw = b""
        """With a tap: the bytes of the packet whose fields the reader hands over."""
        self.last_other: Packet | None = None
        """The last packet given to ``other`` (the one the reader stopped at, if it did)."""
        self.packets = 0
        self.limit = 0
        self.syncs = 0
        self.sync_at: list[int] = []
        self.overflows = 0
        self.overflow_at: list[int] = []
        self.undecoded = 0
        """Packets read after the decoder stopped (:meth:`after_stop`)."""
        self.undecoded_bytes = 0
        self.stop_at = -1
        """Capture index of the first packet read after the decoder stopped."""
        self.pause_at = NEVER
        """With columns: the decoder is :meth:`ready` once it decoded a packet at this
        capture index or after it (where a decode started at a cut goes quiet no more:
        :func:`stream_rows`)."""
        self.handlers: dict[type, Any] = {}
        self.as_columns = as_columns
        self.size = size
        """Rows per batch: the sink is ready to be taken from once it holds this many."""
        self.capacity = size
        """Rows the columns hold (more than :attr:`size` when the packet that filled
        them wrote more rows; back to :attr:`size` after :meth:`take`)."""
        self.rows = 0
        self.specs = columns
        self.arrays: dict[str, Any] = {}
        if as_columns:
            self.new_columns()

    # ---------------------------------------------------------------- the sink

    def new_columns(self) -> None:
        """Fresh columns for :attr:`size` rows."""
        self.capacity = self.size
        self.arrays = {name: np.zeros(self.size, dtype) for name, dtype in self.specs}
        self.rows = 0
        self.bind_columns()

    def bind_columns(self) -> None:
        """Take typed views of :attr:`arrays` (a decoder class does, for its own columns)."""

    def ready(self) -> bool:
        """Whether there is output to take: a packet object in the tap, element objects,
        or full columns."""
        if self.tap is not None:
            return len(self.tap) > 0
        if self.as_columns:
            return self.rows >= self.size or self.last >= self.pause_at
        return len(self.objects) > 0

    def element(self, elem: Element) -> None:
        """Output an element object (in the column sink: in its own row, filled by
        :meth:`take`)."""
        if self.as_columns:
            row = self.next_row()
            self.objects.append((row, elem))
        else:
            self.objects.append(elem)

    def next_row(self) -> int:
        """The number of a new row of the columns (more room made when they are full)."""
        row = self.rows
        if row >= self.capacity:
            # (A packet's rows go on past a full batch: room for them, until the
            # batch is taken; the batch size stays the same.)
            old = self.arrays
            self.capacity *= 2
            self.arrays = {name: np.zeros(self.capacity, dtype) for name, dtype in self.specs}
            for name, col in old.items():
                self.arrays[name][:row] = col
            self.bind_columns()
        self.rows = row + 1
        return row

    def flush_pending(self) -> None:
        """Before an element: the warning that waited for one, if any."""
        if self.pending is not None:
            self.element(self.pending)
            self.pending = None

    def take(self) -> Any:
        """The rows written so far as an :class:`~cstrace.batch.ElementBatch` (None when
        there are none); the columns start again empty."""
        n = self.rows
        if not n:
            return None
        from cstrace.batch import SCHEMA, ElementBatch

        arrays = self.arrays
        columns: dict[str, Any] = {}
        for spec in SCHEMA:
            col = arrays.get(spec.name)
            if col is None:
                columns[spec.name] = np.zeros(n, spec.dtype)
            elif col.dtype != spec.dtype:
                columns[spec.name] = col[:n].view(spec.dtype)
            else:
                columns[spec.name] = col[:n]
        columns["trace_id"].fill(self.trace_id)
        columns["obj"].fill(-1)
        objects: list[object] = []
        if self.objects:
            rows = [r for r, _ in self.objects]
            sub = ElementBatch.from_elements([e for _, e in self.objects], self.trace_id)
            where = np.array(rows, np.intp)
            for name, col in sub.columns.items():
                columns[name][where] = col
            objects = sub.objects
            self.objects = []
        self.new_columns()
        return ElementBatch._trusted(columns, objects)

    def forget(self) -> None:
        """Drop the rows written and the packets counted so far (a decode started at a
        cut, at the end of the packets it decodes in silence); the state stays."""
        self.objects = []
        self.new_columns()
        self.packets = self.syncs = self.overflows = 0
        self.sync_at = []
        self.overflow_at = []
        self.undecoded = self.undecoded_bytes = 0
        self.stop_at = -1
        self.last_other = None

    # ---------------------------------------------------------------- state

    def gate(self, offset: int, syncs: bool) -> bool:
        """Before a packet at capture index ``offset``: True when it is to be decoded.

        The first packet gives a ``NO_SYNC``; while waiting, a packet that
        synchronises (``syncs``) starts decoding with the next packet.
        """
        self.last = offset
        state = self.state
        if state == _DECODE:
            return True
        if state == _NO_SYNC:
            self.element(NoSync(offset, self.reason))
            self.state = _WAIT_SYNC
        if syncs:
            self.state = _DECODE
        return False

    def decodes(self, offset: int, syncs: bool) -> bool:
        """Count one packet handed over as fields; True when it is to be decoded (the
        decoder has not stopped, and is synchronised: :meth:`gate`)."""
        self.packets += 1
        return not self.stopped and self.gate(offset, syncs)

    def count_sync(self, offset: int) -> None:
        """Count a synchronisation packet (for the loss report)."""
        self.syncs += 1
        if len(self.sync_at) < self.limit:
            self.sync_at.append(offset)

    def count_overflow(self, offset: int) -> None:
        """Count an overflow packet (for the loss report)."""
        self.overflows += 1
        if len(self.overflow_at) < self.limit:
            self.overflow_at.append(offset)

    def after_stop(self, offset: int, size: int) -> None:
        """Count a packet of ``size`` bytes read after the decoder stopped (a reader that
        reads on to the end: the loss report counts them as not decoded)."""
        if not self.undecoded:
            self.stop_at = offset
        self.undecoded += 1
        self.undecoded_bytes += size

    def report(self, pkt: Packet) -> None:
        """Show a packet object to its loss report handler, if it has one."""
        handler = self.handlers.get(type(pkt))
        if handler is not None:
            handler(pkt)

    def count_other(self, pkt: Packet) -> None:
        """Count a packet given as an object (its loss report handler, if any, sees it)."""
        self.packets += 1
        self.last_other = pkt
        self.report(pkt)

    def bad_packet(self, pkt: Packet, reserved: bool, kind_number: int) -> bool:
        """At a RESERVED (``reserved``) or BAD_SEQUENCE packet met while decoding
        (``kind_number``: its packet kind, the diagnostic's detail).

        Returns False when decoding stops there, as the reference's does (a
        fatal error for it). When packets before synchronisation are decoded
        (:attr:`recover`), gives an error ``DIAGNOSTIC`` (the packet's kind in
        its detail) and a ``NO_SYNC`` (bad packet), waits for synchronisation
        again and returns True: the decoder then forgets its own state.
        """
        if not self.recover:
            self.stopped = True
            return False
        kind = DiagKind.BAD_PACKET if reserved else DiagKind.BAD_SEQUENCE
        self.element(
            Diagnostic(pkt.offset, self.trace_id, DiagCode.BAD_DECODE_PKT, kind, kind_number)
        )
        self.element(NoSync(pkt.offset, UnsyncReason.BAD_PACKET))
        self.state = _WAIT_SYNC
        self.pending = None
        return True

    def finish(self, complete: bool) -> None:
        """At the end of the stream: ``EO_TRACE`` (when the capture is complete and the
        decoder did not stop at a bad packet)."""
        if complete and not self.stopped:
            self.element(EoTrace(self.last, UnsyncReason.EOT))


Reader = Callable[[Stream, Any, bool, Any], Iterator[None]]
"""A reader (module text): ``read(stream, config, complete, decoder)``."""


def stream_rows(
    read: Reader,
    dec: ElementSink,
    stream: Stream,
    config: object,
    complete: bool,
    count: PacketCount | None = None,
    *,
    quiet_to: int = -1,
    at_quiet: Callable[[], None] | None = None,
    finish: bool = True,
) -> Iterator[list[Any]]:
    """The element rows of one stream, read by ``read`` into the column sink of ``dec``,
    as lists of element rows (:mod:`cstrace.rows`) that each hold one
    :class:`~cstrace.batch.ElementBatch`.

    ``count``, when given, counts the packets as :func:`cstrace.tally.counted` would
    have counted packet objects (synchronisation and overflow packets by their
    offsets, the others through their handlers).

    A piece of a stream cut at synchronisation points (:class:`KitCut`) starts at a
    cut: the packets up to the one at capture index ``quiet_to`` (when not -1) are
    decoded in silence, nothing output or counted, and ``at_quiet`` is called right
    after that packet; and it may end before the stream does (``finish`` False: no
    end of trace).
    """
    quiet = quiet_to >= 0
    if count is not None:
        dec.limit = count.limit
        if not quiet:
            dec.handlers = count.handlers
    if quiet:
        dec.pause_at = quiet_to
    size = dec.size
    done = False
    try:
        for _ in read(stream, config, complete, dec):
            if quiet:
                if dec.last < quiet_to:
                    continue
                quiet = False
                dec.pause_at = NEVER
                if at_quiet is not None:
                    at_quiet()
                dec.forget()
                if count is not None:
                    dec.handlers = count.handlers
            elif dec.rows >= size:
                yield [dec.take()]
        done = True
        if quiet:
            dec.forget()  # (the stream ended before the decode went quiet no more)
        elif finish:
            dec.finish(complete)
        batch = dec.take()
        if batch is not None:
            yield [batch]
    finally:
        if count is not None:
            if dec.fatal and dec.last_other is not None:
                count.last.append(dec.last_other)
            count.occurred("sync", dec.syncs, dec.sync_at)
            count.occurred("overflow", dec.overflows, dec.overflow_at)
            if dec.undecoded:
                count.not_decoded(dec.stop_at, dec.undecoded, dec.undecoded_bytes)
            count.add(dec.packets, done)


def tapped(
    read: Reader, dec: ElementSink, stream: Stream, config: object, complete: bool
) -> Iterator[Any]:
    """The packet objects of one stream: ``read`` with a tap on ``dec`` (its packet
    methods make packet objects instead of decoding), each packet given as soon as the
    reader yields after it."""
    tap: list[Packet] = []
    dec.tap = tap
    for _ in read(stream, config, complete, dec):
        yield from tap
        tap.clear()
    yield from tap


def elements_of(
    dec: ElementSink, packets: Iterable[Packet], context: DecodeContext
) -> Iterator[Element]:
    """The element objects of packet objects, through ``dec.packet`` (those of each
    packet before the next is read); stops where the decoder stops."""
    out = dec.objects
    decode = dec.packet  # type: ignore[attr-defined]
    for pkt in packets:
        decode(pkt)
        if out:
            yield from out
            out.clear()
        if dec.stopped:
            return  # the reference stops decoding on a bad packet (reading no further)
    dec.finish(context.complete)
    yield from out
    out.clear()


class KitCut:
    """A kit protocol's reader and decoder as :mod:`cstrace.split` drives them
    (:class:`~cstrace.protocols.base.CutDecoder`): packet objects from a tap on the
    reader (with this cut's reader state), decoded one at a time, for the listing; or
    the reader's one loop into the decoder's columns (:meth:`rows`), for the element
    formats. A protocol's ``cut.py`` derives from it and says when a decoder started
    at a cut is settled."""

    __slots__ = ("config", "context", "decoder", "make", "out", "read", "reader")

    def __init__(
        self, config: Any, context: DecodeContext, make: Any, reader: Any, read: Any
    ) -> None:
        """``make``: the protocol's decoder class, ``make(config, context, as_columns,
        size)``; ``reader``: its fresh reader state; ``read``: its reader,
        ``read(stream, config, complete, decoder, state)``."""
        self.config = config
        self.context = context
        self.make = make
        self.decoder = make(config, context, False, 0)
        self.reader = reader
        self.read = read
        self.out: list[Any] = self.decoder.objects

    @property
    def last_idx(self) -> int:
        """The capture index of the last packet decoded."""
        return int(self.decoder.last)

    @property
    def halted(self) -> bool:
        """Whether the decoder stopped for good (at a packet it cannot decode)."""
        return bool(self.decoder.stopped)

    def packets(self, stream: Stream, complete: bool) -> Iterator[Packet]:
        """The packets of ``stream``, read with this reader state (a tap on the reader)."""
        dec = self.make(self.config, self.context, False, 0)
        return tapped(self._read, dec, stream, self.config, complete)

    def _read(self, stream: Stream, config: Any, complete: bool, dec: Any) -> Iterator[None]:
        reading: Iterator[None] = self.read(stream, config, complete, dec, self.reader)
        return reading

    def decode(self, pkt: Packet) -> list[Any]:
        """The elements of one packet (the list is reused by the next call)."""
        out = self.out
        out.clear()
        self.decoder.packet(pkt)
        return out

    def finish(self) -> list[Any]:
        """The elements of the end of the trace."""
        out = self.out
        out.clear()
        self.decoder.finish(self.context.complete)
        return out

    def rows(
        self,
        stream: Stream,
        complete: bool,
        count: PacketCount | None,
        quiet_to: int,
        at_quiet: Callable[[], None] | None,
        finish: bool,
        size: int = 65536,
    ) -> Iterator[list[Any]]:
        """The element rows of ``stream``, read and decoded in the reader's one loop with
        this cut's reader state, into a fresh decoder's columns (which becomes
        :attr:`decoder`): :func:`stream_rows`, whose ``quiet_to``, ``at_quiet`` and
        ``finish`` these are."""
        dec = self.decoder = self.make(self.config, self.context, True, size)
        return stream_rows(
            self._read,
            dec,
            stream,
            self.config,
            complete,
            count,
            quiet_to=quiet_to,
            at_quiet=at_quiet,
            finish=finish,
        )

    def cut_state(self) -> tuple[object, ...]:
        """The reader's and the decoder's cut states."""
        return (self.reader.cut_state(), self.decoder.cut_state())


def input_blocks(win: BlockWindow, first: int, framed: bool) -> Iterator[tuple[int, int, int]]:
    """The blocks the reference hands to a packet reader, in a window's bytes.

    Formatted captures: the data of one trace ID in one frame (a run of the
    window). Unformatted (single-source) data: the lister's 1024-byte reads of
    the buffer file, aligned on capture indices. Yields ``(start, end, capture
    index)`` of each block from window position ``first``; the last one may go
    on in the window's next block.
    """
    n = len(win.data)
    cur = win.cursor(first)
    start = first
    while start < n:
        index = cur.at(start)
        end = cur.limit if cur.limit < n else n
        if not framed:
            cut = start + READ_BLOCK - index % READ_BLOCK
            if cut < end:
                end = cut
        yield start, end, index
        start = end


class ReturnStack:
    """The trace return stack (PTM: IHI 0035B §2.3.6; ETMv4: IHI 0064 §4.4.6), as the
    reference keeps it: 16 entries, the oldest lost when a seventeenth is pushed.

    A branch with link that is taken pushes its return address; an atom on an
    indirect branch, when the trace unit leaves its address out, pops it. A pop
    from the empty stack returns None and leaves :attr:`num` negative
    (:attr:`overflow`): the decoders report an error there. ``active`` is the
    trace unit's return stack option: when off, nothing is pushed or popped.
    ``pop_pending`` and ``tinfo_wait`` are ETMv4's (a pop decided by an atom and
    done at the next address or atom; no push while waiting for the address that
    follows a trace info packet).
    """

    __slots__ = ("active", "entries", "head", "num", "pop_pending", "tinfo_wait")

    def __init__(self, active: bool) -> None:
        self.active = active
        self.entries: list[tuple[int, int]] = [(0, 0)] * 16
        """A ring: ``entries[head]`` is the newest of the ``num`` entries held."""
        self.head = 0
        self.num = 0
        self.pop_pending = False
        self.tinfo_wait = False

    def push(self, address: int, isa: int) -> None:
        """Remember a return address and its ISA (a branch with link was taken)."""
        if self.active and not self.tinfo_wait:
            head = (self.head + 1) & 0xF
            self.head = head
            self.entries[head] = (address, isa)
            if self.num < 16:
                self.num += 1
            self.pop_pending = False

    def pop(self) -> tuple[int, int] | None:
        """The newest return address and its ISA, or None when the stack is empty (or
        off); an empty stack is left overflowed."""
        self.pop_pending = False
        if not self.active:
            return None
        if self.num > 0:
            self.num -= 1
            head = self.head
            self.head = (head - 1) & 0xF
            return self.entries[head]
        self.num = -1
        return None

    @property
    def overflow(self) -> bool:
        """True after a pop from the empty stack (until the next push or flush)."""
        return self.num < 0

    def flush(self) -> None:
        """Forget every entry and a pending pop (a synchronisation)."""
        self.num = 0
        self.pop_pending = False

    def cut_state(self) -> tuple[object, ...]:
        """What decides later pops, as one comparable value (:mod:`cstrace.split`): the
        flags, the count and the live entries, newest first (the others are never read
        again)."""
        entries = self.entries
        head = self.head
        live = tuple(entries[(head - i) & 0xF] for i in range(max(self.num, 0)))
        return (self.active, self.num, live, self.pop_pending, self.tinfo_wait)
