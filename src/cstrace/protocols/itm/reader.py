"""ITM reader: the bytes of one ITM trace ID → :mod:`~cstrace.protocols.itm.packets`.

Input: a :class:`~cstrace.capture.stream.Stream` (one trace ID's bytes and the
capture index of each byte); output: ITM packets with the index of their first
byte and their raw bytes, cut as the reference decoder (OpenCSD
``trc_pkt_lister``) cuts them.

Headers are classified through a 256-entry table (:data:`HEADERS`) built from
the rows of :data:`HEADER_ROWS`, which follow the packet encodings of the
ARMv7-M ARM, Appendix D4 "Debug ITM and DWT Packet Protocol" (ARMv8-M ARM,
"ITM and DWT packet protocol" adds nothing the decoder needs). Payloads of
software and hardware source packets are 1, 2 or 4 little-endian bytes;
timestamps and extensions use continuation bytes (bit 7 set: more follow,
7 payload bits each).

Before the first synchronization packet the reference prints the bytes it skips
as NOTSYNC packets: the bytes before each candidate ``0x00``, at most 8 at a
time, and the rest of each block; the index of a NOTSYNC packet is that of the
block or of the last candidate ``0x00`` (reproduced here, block by block). An
invalid header or sequence gives a RESERVED or BAD_SEQUENCE packet, after which
the reference stops decoding (its decoder reports a fatal error).

With :attr:`~cstrace.protocols.itm.config.ItmConfig.decode_before_sync` set,
the reader does not wait for a synchronisation packet: it reads packets from
the decode start that :mod:`~cstrace.protocols.itm.boundary` finds from the
packet grammar, after an :class:`~cstrace.protocols.itm.packets.Unsynced`
packet saying where that is and from where the reading is certain; after a
RESERVED or BAD_SEQUENCE packet it looks for the next decode start the same
way, from the byte after the bad header, instead of stopping.
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Iterator
from typing import Any

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow, IndexCursor
from cstrace.protocols.base import DecodeContext
from cstrace.protocols.itm.boundary import (
    HORIZON,
    INVALID,
    RUN,
    SPAN,
    find_start,
    first_certain,
    packet_end,
)
from cstrace.protocols.itm.decoder import ItmDecoder
from cstrace.protocols.itm.packets import (
    Async,
    BadSequence,
    IncompleteEot,
    ItmPacket,
    ItmPktType,
    NotSync,
    Reserved,
    Unsynced,
)
from cstrace.protocols.kit import input_blocks, stream_rows, tapped
from cstrace.tally import PacketCount

__all__ = [
    "HEADERS",
    "HEADER_ROWS",
    "KINDS",
    "HeaderRow",
    "iter_packets",
    "iter_stream_rows",
    "read",
]

_P = ItmPktType


def _matching(mask: int, value: int, exclude: tuple[int, ...] = ()) -> tuple[int, ...]:
    return tuple(b for b in range(256) if b & mask == value and b not in exclude)


# A header row: (packet type, header byte values, where the encoding is defined).
HeaderRow = tuple[ItmPktType, tuple[int, ...], str]

HEADER_ROWS: tuple[HeaderRow, ...] = (
    (_P.ASYNC, (0x00,), "D4.2.1 Synchronization packet: 0b00000000 (47+ zero bits, then 1)"),
    (_P.OVERFLOW, (0x70,), "D4.2.3 Overflow packet: 0b01110000"),
    (
        _P.TS_LOCAL,
        _matching(0x8F, 0x00, (0x00, 0x70)),
        "D4.2.4 Local timestamp packet format 2: 0b0TTT0000, TS in the header",
    ),
    (
        _P.TS_LOCAL,
        _matching(0xCF, 0xC0),
        "D4.2.4 Local timestamp packet format 1: 0b11TC0000 + 1-4 continuation bytes",
    ),
    (
        _P.TS_LOCAL,
        _matching(0xCF, 0x80),
        "0b10xx0000: reserved encoding; the reference reads it as local timestamp format 1",
    ),
    (_P.TS_GLOBAL_1, (0x94,), "D4.2.5 Global timestamp packet GTS1: 0b10010100"),
    (_P.TS_GLOBAL_2, (0xB4,), "D4.2.5 Global timestamp packet GTS2: 0b10110100"),
    (_P.RESERVED, _matching(0x0F, 0x04, (0x94, 0xB4)), "D4.2 reserved encodings 0bxxxx0100"),
    (_P.EXTENSION, _matching(0x0B, 0x08), "D4.2.2 Extension packet: 0bCppp1S00"),
    (
        _P.SWIT,
        _matching(0x07, 0x01) + _matching(0x07, 0x02) + _matching(0x07, 0x03),
        "D4.2.6 Instrumentation (software source) packet: 0bAAAAA0SS, SS != 00",
    ),
    (
        _P.DWT,
        _matching(0x07, 0x05) + _matching(0x07, 0x06) + _matching(0x07, 0x07),
        "D4.2.7 Hardware source packet: 0bAAAAA1SS, SS != 00",
    ),
)


def _build(rows: tuple[HeaderRow, ...]) -> tuple[ItmPktType, ...]:
    table: list[ItmPktType | None] = [None] * 256
    for kind, values, _cite in rows:
        for v in values:
            if table[v] is not None:
                raise ValueError(f"header 0x{v:02x} defined twice")
            table[v] = kind
    missing = [f"0x{b:02x}" for b, k in enumerate(table) if k is None]
    if missing:
        raise ValueError(f"headers not covered: {', '.join(missing)}")
    return tuple(k for k in table if k is not None)


HEADERS: tuple[ItmPktType, ...] = _build(HEADER_ROWS)
"""Packet type of every header byte."""
KINDS = bytes(HEADERS)
"""The same, as numbers (for the reader's loop)."""
_KINDS = KINDS  # (a C global when compiled)

_SWIT = 5  # the ItmPktType numbers, for the compiled loop
_DWT = 6
_ASYNC = 3
_OVERFLOW = 4
_TS_LOCAL = 7
_TS_GLOBAL_1 = 8
_TS_GLOBAL_2 = 9
_EXTENSION = 10
_RESERVED = 12

_PAYLOAD_SIZE = bytes((0, 1, 2, 4))
_EXT_BITS = bytes((2, 9, 16, 23, 31))  # payload bit length N (value is N:0) by packet length
# The longest packet (header included) of each kind with continuation bytes, by kind number.
_CONT_LIMIT = bytes(
    {_P.TS_LOCAL: 5, _P.TS_GLOBAL_1: 5, _P.TS_GLOBAL_2: 7, _P.EXTENSION: 5}.get(k, 0) for k in _P
)


def iter_packets(
    stream: Stream, config: object = None, complete: bool = True
) -> Iterator[ItmPacket]:
    """Cut one ITM trace ID's bytes into packets, as the reference decoder does.

    ``complete`` is False when the capture was cut short: then a packet in
    progress at the end is dropped instead of flushed as INCOMPLETE_EOT.
    When ``config`` says ``decode_before_sync``, packets before the first
    synchronisation packet are read too (module text). This is a tap on
    :func:`read`: the decoder's packet methods make packet objects instead of
    decoding them.
    """
    return tapped(read, ItmDecoder(config), stream, config, complete)


def iter_stream_rows(
    stream: Stream,
    config: object,
    context: DecodeContext,
    count: PacketCount | None = None,
    size: int = 65536,
) -> Iterator[list[Any]]:
    """The elements of one ITM trace ID's stream, read and decoded in one loop, as lists
    of element rows that each hold one :class:`~cstrace.batch.ElementBatch` of about
    ``size`` rows (:func:`cstrace.protocols.kit.stream_rows`)."""
    dec = ItmDecoder(config, context.trace_id, context.reset, True, size)
    return stream_rows(read, dec, stream, config, context.complete, count)


def read(stream: Stream, config: object, complete: bool, dec: ItmDecoder) -> Iterator[None]:
    """Read one ITM trace ID's bytes into the decoder ``dec``: each packet is handed
    to the decoder's method for its kind, as fields (or, for the rare kinds, as an
    object: :meth:`~cstrace.protocols.itm.decoder.ItmDecoder.other`).

    The stream is read block by block through a
    :class:`~cstrace.capture.window.BlockWindow`. Yields (None) whenever the
    decoder has output to take (:meth:`~cstrace.protocols.itm.decoder.ItmDecoder.ready`).
    """
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    if getattr(config, "decode_before_sync", False):
        pos = 0
        while pos >= 0:
            pos = yield from _resync(win, pos, dec)
            if pos >= 0:
                pos = yield from _read_recovering(win, pos, complete, dec)
        return
    start = yield from _search_sync(win, stream.trace_id is not None, dec)
    if start >= 0:
        yield from _read_synced(win, start, complete, dec)


def _other(dec: ItmDecoder, pkt: ItmPacket) -> None:
    """A packet of a rare kind, made as an object: to the tap, or to the decoder."""
    tap = dec.tap
    if tap is not None:
        tap.append(pkt)
    else:
        dec.other(pkt)


def _cont(data: bytes, p: int, e: int) -> int:
    """The value of the continuation bytes ``data[p:e]``, 7 bits each, low first."""
    value = 0
    shift = 0
    while p < e:
        b = data[p] & 0x7F
        value |= b << shift
        shift += 7
        p += 1
    return value


def _emit(dec: ItmDecoder, data: bytes, p: int, e: int, index: int) -> None:
    """Hand the valid packet ``data[p:e]`` (its header at capture index ``index``) to the
    decoder's method for its kind, as fields: the one place packet bytes become fields."""
    if dec.tap is not None:
        dec.raw = data[p:e]
    hdr = data[p]
    kind = _KINDS[hdr]
    size = e - p - 1
    if kind in (_SWIT, _DWT):
        value = 0
        shift = 0
        i = p + 1
        while i < e:
            b = data[i]
            value |= b << shift
            shift += 8
            i += 1
        if kind == _SWIT:
            dec.swit(index, (hdr >> 3) & 0x1F, value, size)
        else:
            dec.dwt(index, (hdr >> 3) & 0x1F, value, size)
    elif kind == _TS_LOCAL:
        if not hdr & 0x80:
            dec.local_timestamp(index, 0, (hdr >> 4) & 7, 1, True)
        else:
            dec.local_timestamp(index, (hdr >> 4) & 3, _cont(data, p + 1, e), size, False)
    elif kind == _OVERFLOW:
        dec.overflow_packet(index)
    elif kind == _ASYNC:
        dec.async_packet(index)
    elif kind == _TS_GLOBAL_1:
        flags = 0
        if size == 4:
            # The reference moves the ClkCh and Wrap bits out of the last byte.
            flags = (data[p + 4] >> 5) & 3
            value = _cont(data, p + 1, p + 4) | ((data[p + 4] & 0x1F) << 21)
        else:
            value = _cont(data, p + 1, e)
        dec.global_timestamp1(index, flags, value, size)
    elif kind == _TS_GLOBAL_2:
        dec.global_timestamp2(index, _cont(data, p + 1, e) & 0xFF_FFFF_FFFF, size)  # 40 bits
    elif not hdr & 0x80:  # extension with the value in the header
        dec.extension(index, (hdr & 4) != 0, 2, (hdr >> 4) & 7)
    else:
        value = ((_cont(data, p + 1, e) << 3) | ((hdr >> 4) & 7)) & 0xFFFF_FFFF
        dec.extension(index, (hdr & 4) != 0, _EXT_BITS[size], value)


_LOOKAHEAD = HORIZON + 1024
"""Bytes a search for the decode start looks at past where it begins (when the stream has them)."""


def _resync(win: BlockWindow, q: int, dec: ItmDecoder) -> Generator[None, None, int]:
    """Find the decode start from window position ``q``: an UNSYNCED packet, and its position.

    Bytes that no valid reading starts from are skipped (in NOTSYNC packets when
    the window must move on before the decode start is found). Returns the
    window position of the decode start, or -1 when the stream ends first.
    """
    final = False
    while True:
        data = win.data
        n = len(data)
        if not final and n - q < _LOOKAHEAD:
            if win.advance(q):
                q = 0
                continue
            final = True
        s, settled = find_start(data, q, final)
        if not final and (not settled or n - s < _LOOKAHEAD):
            # The reading from s needs more bytes: move on to s, then read on.
            if s > q:
                _other(dec, NotSync(win.index_at(q), data[q:s]))
                yield None
            q = s
            if not win.advance(q):
                final = True
            else:
                q = 0
            continue
        if s >= n:
            if s > q:
                _other(dec, NotSync(win.index_at(q), data[q:s]))
            return -1
        certain = first_certain(data, s)
        _other(
            dec,
            Unsynced(
                win.index_at(q),
                data[q:s],
                win.index_at(s),
                None if certain is None else win.index_at(certain),
            ),
        )
        return s


BACK = 256
"""Bytes of packets held back, unsent, while reading without synchronisation: how far
back the reading can still switch to another boundary when it meets an invalid packet."""


_BACK = BACK
_HELD = 3 * 1024
"""Room for the integers of held packets (three each; a packet has at least one byte,
so :data:`BACK` bytes hold at most that many packets, and a few more until released)."""


class _Held:
    """The packets a reading without synchronisation holds back (:func:`_read_recovering`):
    window start, window end and capture index of each, three integers per packet in
    ``items[first:end]``; and the header bytes the stream has used so far."""

    def __init__(self) -> None:
        self.items = array("q", bytes(8 * _HELD))
        self.first = 0
        self.end = 0
        self.seen = bytearray(256)
        self.invalid = False

    def release(self, dec: ItmDecoder, data: bytes, upto: int) -> None:
        """Hand the held packets that end at or before window position ``upto`` to ``dec``."""
        items = self.items
        h = self.first
        n = self.end
        while h < n and items[h + 1] <= upto:
            _emit(dec, data, items[h], items[h + 1], items[h + 2])
            h += 3
        self.first = h

    def item(self, i: int) -> int:
        """``items[i]``."""
        return self.items[i]

    def start(self, p: int) -> int:
        """Window position of the first held packet (``p`` when none is held)."""
        return int(self.items[self.first]) if self.first < self.end else p

    def clear(self) -> None:
        """Forget the held packets."""
        self.first = self.end = 0

    def shift(self, keep: int) -> None:
        """The window dropped its first ``keep`` bytes."""
        items = self.items
        for i in range(self.first, self.end, 3):
            items[i] -= keep
            items[i + 1] -= keep

    def run(self, dec: ItmDecoder, data: bytes, p: int, n: int, cur: IndexCursor) -> int:
        """Read packets from window position ``p`` on, holding each back for :data:`BACK`
        bytes; stop at an invalid packet (:attr:`invalid`), at a packet cut by the end
        of the window, or when the decoder has output to take. Returns the position."""
        items = self.items
        seen = self.seen
        self.invalid = False
        while p < n:
            e = packet_end(data, p)
            if e < 0:  # INVALID
                self.invalid = True
                return p
            if e > n:
                return p  # the packet goes on in the next block
            k = self.end
            if k + 3 > _HELD:
                # move the held packets to the front (at most BACK bytes' worth are held)
                held = 0
                for k in range(self.first, self.end):
                    items[held] = items[k]
                    held += 1
                self.first = 0
                k = self.end = held
            items[k] = p
            items[k + 1] = e
            items[k + 2] = cur.base + p if p < cur.limit else cur.at(p)
            self.end = k + 3
            seen[data[p]] = 1
            p = e
            if items[self.first + 1] + _BACK <= p:
                self.release(dec, data, p - _BACK)
                if dec.ready():
                    return p
        return p


def _read_recovering(
    win: BlockWindow, start: int, complete: bool, dec: ItmDecoder
) -> Generator[None, None, int]:
    """Packets from window position ``start`` when decoding without synchronisation.

    Packets are cut by the grammar of :func:`~cstrace.protocols.itm.boundary.packet_end`
    and held back for :data:`BACK` bytes (:class:`_Held`). At an invalid packet the
    reading that led there went wrong somewhere (a byte lost, added or damaged on the
    line, after which payload bytes were read as headers): the reading switches to the
    earliest boundary, among the held-back bytes and the :data:`SPAN` bytes after
    the invalid one, from which packets read validly through the invalid place
    and :data:`RUN` packets beyond it. The held-back packets that overlap the
    switch are dropped: their bytes, and those up to the switch, go out as one
    BAD_SEQUENCE packet, followed by an UNSYNCED packet at the switch (the
    decoder reports the loss and resumes there). When no reading gets through,
    the invalid packet goes out and the decode start is searched for again from
    the byte after it (the return value: its window position; -1 at the end).
    """
    held = _Held()
    p = start
    while True:
        data = win.data
        n = len(data)
        final = win.final
        cur = win.cursor(p)
        while p < n:
            p = held.run(dec, data, p, n, cur)
            if dec.ready():
                yield None
            if not held.invalid:
                if p < n and not dec.ready() and packet_end(data, p) > n:
                    break  # the packet goes on in the next block
                continue
            lo = held.start(p)
            t = _switch(data, lo, p, final, held.seen)
            if t is None:
                held.release(dec, data, n)
                _other(dec, Reserved(win.index_at(p), data[p : p + 1]))
                yield None
                return p + 1
            first = held.first
            held.release(dec, data, t)
            h = held.first
            cut = held.item(h - 2) if h > first else lo
            bad = HEADERS[data[held.item(h)]] if h < held.end else HEADERS[data[cut]]
            held.clear()
            if t > cut:
                if cut == p and HEADERS[data[p]] == _P.RESERVED:
                    _other(dec, Reserved(win.index_at(cut), data[cut:t]))
                else:
                    _other(dec, BadSequence(win.index_at(cut), data[cut:t], bad))
                at = win.index_at(t)
                _other(dec, Unsynced(at, b"", at, at))
            p = t
            cur = win.cursor(p)
            if dec.ready():
                yield None
        keep = held.start(p)
        if not win.advance(keep):
            held.release(dec, data, n)
            if p < n and complete:
                _other(dec, IncompleteEot(win.index_at(p), data[p:], HEADERS[data[p]]))
            return -1
        held.shift(keep)
        p -= keep
        if dec.ready():
            yield None


def _switch(data: bytes, lo: int, bad: int, final: bool, seen: bytearray) -> int | None:
    """Where to switch to at an invalid packet at window position ``bad``: of the positions
    in ``[lo, bad + SPAN)`` from which packets read validly past ``bad`` and :data:`RUN`
    packets beyond (or to the end of a final window), the one whose reading has the
    fewest headers the stream has not used so far (a damaged byte read as a header is
    usually one the stream never uses: an extension packet that changes the stimulus
    port page, a port no other packet names), then the earliest. None when none reads
    through.

    Each position's result is worked out once (readings that meet share the rest), so
    the work is linear in the bytes looked at.
    """
    n = len(data)
    # Per position: None when the reading from it fails, else its count of novel headers.
    done: dict[int, int | None] = {}
    best: tuple[int, int] | None = None
    for t in range(lo, min(bad + SPAN, n)):
        path: list[int] = []
        q = t
        tail: int | None
        while True:
            if q in done:
                tail = done[q]
                break
            if q > bad:
                tail = _reads_on(data, q, final, seen)
                done[q] = tail
                break
            e = packet_end(data, q)
            if e == INVALID or (e > n and not final):
                tail = None
                done[q] = None
                break
            path.append(q)
            if e > n:
                tail = 0
                break
            q = e
        for q in reversed(path):
            if tail is not None and not seen[data[q]]:
                tail += 1
            done[q] = tail
        got = done.get(t)
        if got is not None and (best is None or got < best[0]):
            best = (got, t)
            if got == 0:
                break
    return None if best is None else best[1]


def _reads_on(data: bytes, q: int, final: bool, seen: bytearray) -> int | None:
    """The novel headers of :data:`RUN` packets read validly from ``data[q]`` (or of every
    packet up to the end of a final window); None when they do not read validly."""
    n = len(data)
    novel = 0
    for _ in range(RUN):
        if q >= n:
            return novel if final else None
        e = packet_end(data, q)
        if e == INVALID:
            return None
        if e > n:
            return novel if final else None
        novel += 0 if seen[data[q]] else 1
        q = e
    return novel


def _search_sync(win: BlockWindow, framed: bool, dec: ItmDecoder) -> Generator[None, None, int]:
    """Before the first synchronization packet: NOTSYNC packets, then the ASYNC packet.

    This is the reference's search, block by block (its blocks, see
    :func:`~cstrace.protocols.kit.input_blocks`), computing indices
    inside a block from the block's index as the reference does. The last block
    of a window may go on in the next capture block: it is scanned with the
    next window. Returns the window position after the ASYNC packet, or -1 when
    the stream ends unsynchronised.
    """
    raw = bytearray()
    pkt_index = 0
    sync_start = False
    sent_notsync = False
    while True:
        data = win.data
        n = len(data)
        held = n  # bytes of the window done with: the rest is kept for the next one
        for s, e, blk in input_blocks(win, 0, framed):
            if e == n and not win.final:
                held = s
                break
            block = data[s:e]
            pos = 0
            end = len(block)
            dump = 0
            if not sync_start:
                pkt_index = blk
            while pos < end:
                if sync_start:
                    err = False
                    while len(raw) < 5 and pos < end:
                        b = block[pos]
                        pos += 1
                        raw.append(b)
                        if b:
                            err = True
                            break
                    while not err and len(raw) >= 5 and pos < end:
                        b = block[pos]
                        pos += 1
                        raw.append(b)
                        if b == 0x80:
                            if dec.tap is not None:
                                dec.tap.append(Async(pkt_index, bytes(raw)))
                            else:
                                dec.async_packet(pkt_index)
                            return s + pos
                        if b:
                            err = True
                    if err:
                        dump = len(raw)
                        sync_start = False
                if not sync_start:
                    if pos >= end:
                        break
                    b = block[pos]
                    pos += 1
                    raw.append(b)
                    if b == 0:
                        sync_start = True
                        if dump or not sent_notsync:
                            _other(dec, NotSync(pkt_index, bytes(raw[:dump]), not sent_notsync))
                        sent_notsync = True
                        del raw[:dump]
                        dump = 0
                        pkt_index = blk + pos - 1
                    else:
                        dump += 1
                        if dump >= 8:
                            _other(dec, NotSync(pkt_index, bytes(raw[:dump]), not sent_notsync))
                            sent_notsync = True
                            del raw[:dump]
                            dump = 0
            if not sync_start:
                if dump or not sent_notsync:
                    _other(dec, NotSync(pkt_index, bytes(raw[:dump]), not sent_notsync))
                sent_notsync = True
                del raw[:dump]
        if dec.ready():
            yield None
        if not win.advance(held):
            return -1


def _synced_run(dec: ItmDecoder, data: bytes, p: int, n: int, cur: IndexCursor) -> int:
    """Read packets from window position ``p`` on, once synchronised, into ``dec``; stop
    at the end of the window, at a packet cut by it, when the decoder has output to
    take, or after a RESERVED or BAD_SEQUENCE packet (``dec.fatal``: the reference
    stops reading there). Returns the position reached."""
    while p < n:
        index = cur.base + p if p < cur.limit else cur.at(p)
        hdr = data[p]
        kind = _KINDS[hdr]
        stop = p + 1
        if kind in (_SWIT, _DWT):
            stop = p + 1 + _PAYLOAD_SIZE[hdr & 3]
            if stop > n:
                return p  # the packet goes on past the window
        elif kind == _RESERVED:
            _other(dec, Reserved(index, data[p:stop]))
            dec.fatal = True
            return stop
        elif kind == _ASYNC:
            i = p + 1
            bad = False
            while i < n and i < p + 5:
                i += 1
                if data[i - 1]:
                    bad = True
                    break
            found = False
            while not bad and i < n:
                b = data[i]
                i += 1
                if b == 0x80:
                    found = True
                    break
                if b:
                    bad = True
            if bad:
                _other(dec, BadSequence(index, data[p:i], _P.ASYNC))
                dec.fatal = True
                return i
            if not found:
                return p
            stop = i
        elif kind == _OVERFLOW or (not hdr & 0x80 and kind in (_TS_LOCAL, _EXTENSION)):
            pass  # one byte: the value, if any, is in the header
        else:
            # Continuation bytes: bit 7 set while more follow, up to a limit.
            limit = p + _CONT_LIMIT[kind]
            i = p + 1
            while i < limit and i < n and data[i] & 0x80:
                i += 1
            if i >= limit:
                _other(dec, BadSequence(index, data[p:limit], HEADERS[hdr]))
                dec.fatal = True
                return limit
            if i >= n:
                return p
            stop = i + 1
        _emit(dec, data, p, stop, index)
        p = stop
        if dec.ready():
            return p
    return p


def _read_synced(
    win: BlockWindow, start: int, complete: bool, dec: ItmDecoder
) -> Generator[None, None, int]:
    """After the first synchronization packet: packets one at a time from window position
    ``start`` (:func:`_synced_run`).

    Once synchronised, a packet's index is that of its header byte, so block
    boundaries no longer matter: the window is read as one byte string, and a
    packet cut by its end is read again, whole, with the next window. Returns
    -1 at the end of the stream or after a RESERVED or BAD_SEQUENCE packet (the
    reference stops there).
    """
    p = start
    while True:
        data = win.data
        n = len(data)
        cur = win.cursor(p)
        while True:
            p = _synced_run(dec, data, p, n, cur)
            if dec.fatal:
                yield None
                return -1
            if not dec.ready():
                break
            yield None
        # The window is used up, or the packet at ``p`` is cut by its end: keep
        # that packet's bytes and read it again, whole, with the next block.
        if not win.advance(p):
            if p < n and complete:
                _other(dec, IncompleteEot(win.index_at(p), data[p:], HEADERS[data[p]]))
            return -1
        p = 0
