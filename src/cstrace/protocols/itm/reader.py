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

from collections.abc import Generator, Iterator

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow
from cstrace.protocols.itm.boundary import (
    HORIZON,
    INVALID,
    RUN,
    SPAN,
    find_start,
    first_certain,
    packet_end,
)
from cstrace.protocols.itm.packets import (
    Async,
    BadSequence,
    Dwt,
    Extension,
    GlobalTs1,
    GlobalTs2,
    IncompleteEot,
    ItmPacket,
    ItmPktType,
    LocalTs,
    NotSync,
    Overflow,
    Reserved,
    Swit,
    Unsynced,
)
from cstrace.protocols.stm.reader import input_blocks

__all__ = ["HEADERS", "HEADER_ROWS", "HeaderRow", "iter_packets"]

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

_PAYLOAD_SIZE = (0, 1, 2, 4)
_EXT_BITS = (2, 9, 16, 23, 31)  # payload bit length N (value is N:0) by packet length
_CONT_LIMIT = {_P.TS_LOCAL: 5, _P.TS_GLOBAL_1: 5, _P.TS_GLOBAL_2: 7, _P.EXTENSION: 5}


def _cont_value(raw: bytearray | bytes) -> int:
    """The value of the continuation bytes after the header, 7 bits each, low first."""
    value = 0
    shift = 0
    for b in raw[1:]:
        value |= (b & 0x7F) << shift
        shift += 7
    return value


def iter_packets(
    stream: Stream, config: object = None, complete: bool = True
) -> Iterator[ItmPacket]:
    """Cut one ITM trace ID's bytes into packets, as the reference decoder does.

    ``complete`` is False when the capture was cut short: then a packet in
    progress at the end is dropped instead of flushed as INCOMPLETE_EOT.
    The stream is read block by block through a
    :class:`~cstrace.capture.window.BlockWindow`. When ``config`` says
    ``decode_before_sync``, packets before the first synchronisation packet are
    read too (module text).
    """
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    if getattr(config, "decode_before_sync", False):
        pos = 0
        while pos >= 0:
            pos = yield from _resync(win, pos)
            if pos >= 0:
                pos = yield from _read_recovering(win, pos, complete)
        return
    start = yield from _search_sync(win, stream.trace_id is not None)
    if start >= 0:
        yield from _read_synced(win, start, complete)


_LOOKAHEAD = HORIZON + 1024
"""Bytes a search for the decode start looks at past where it begins (when the stream has them)."""


def _resync(win: BlockWindow, q: int) -> Generator[ItmPacket, None, int]:
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
                yield NotSync(win.index_at(q), data[q:s])
            q = s
            if not win.advance(q):
                final = True
            else:
                q = 0
            continue
        if s >= n:
            if s > q:
                yield NotSync(win.index_at(q), data[q:s])
            return -1
        certain = first_certain(data, s)
        yield Unsynced(
            win.index_at(q),
            data[q:s],
            win.index_at(s),
            None if certain is None else win.index_at(certain),
        )
        return s


BACK = 256
"""Bytes of packets held back, unsent, while reading without synchronisation: how far
back the reading can still switch to another boundary when it meets an invalid packet."""


def _read_recovering(
    win: BlockWindow, start: int, complete: bool
) -> Generator[ItmPacket, None, int]:
    """Packets from window position ``start`` when decoding without synchronisation.

    Packets are cut by the grammar of :func:`~cstrace.protocols.itm.boundary.packet_end`
    and held back for :data:`BACK` bytes. At an invalid packet the reading that
    led there went wrong somewhere (a byte lost, added or damaged on the line,
    after which payload bytes were read as headers): the reading switches to the
    earliest boundary, among the held-back bytes and the :data:`SPAN` bytes after
    the invalid one, from which packets read validly through the invalid place
    and :data:`RUN` packets beyond it. The held-back packets that overlap the
    switch are dropped: their bytes, and those up to the switch, go out as one
    BAD_SEQUENCE packet, followed by an UNSYNCED packet at the switch (the
    decoder reports the loss and resumes there). When no reading gets through,
    the invalid packet goes out and the decode start is searched for again from
    the byte after it (the return value: its window position; -1 at the end).
    """
    held: list[tuple[int, int, ItmPacket]] = []  # (window start, window end, packet)
    seen = bytearray(256)  # header bytes of the packets read so far
    p = start
    while True:
        data = win.data
        n = len(data)
        final = win.final
        while p < n:
            e = packet_end(data, p)
            if e == INVALID:
                lo = held[0][0] if held else p
                t = _switch(data, lo, p, final, seen)
                if t is None:
                    for _s, _e, pkt in held:
                        yield pkt
                    yield Reserved(win.index_at(p), data[p : p + 1])
                    return p + 1
                kept = 0
                while kept < len(held) and held[kept][1] <= t:
                    kept += 1
                for _s, _e, pkt in held[:kept]:
                    yield pkt
                cut = held[kept - 1][1] if kept else lo
                bad = held[kept][2].KIND if kept < len(held) else HEADERS[data[cut]]
                del held[:]
                if t > cut:
                    if cut == p and HEADERS[data[p]] == _P.RESERVED:
                        yield Reserved(win.index_at(cut), data[cut:t])
                    else:
                        yield BadSequence(win.index_at(cut), data[cut:t], bad)
                    at = win.index_at(t)
                    yield Unsynced(at, b"", at, at)
                p = t
                continue
            if e > n:
                break  # the packet goes on in the next block
            held.append((p, e, _packet(data[p:e], win.index_at(p))))
            seen[data[p]] = 1
            p = e
            while held and held[0][1] + BACK <= p:
                yield held.pop(0)[2]
        keep = held[0][0] if held else p
        if not win.advance(keep):
            for _s, _e, pkt in held:
                yield pkt
            if p < n and complete:
                yield IncompleteEot(win.index_at(p), data[p:], HEADERS[data[p]])
            return -1
        held = [(s - keep, e - keep, pkt) for s, e, pkt in held]
        p -= keep


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


def _packet(raw: bytes, index: int) -> ItmPacket:
    """The packet of the valid packet bytes ``raw`` (``packet_end`` says where it ends)."""
    hdr = raw[0]
    kind = HEADERS[hdr]
    if kind == _P.SWIT or kind == _P.DWT:
        value = int.from_bytes(raw[1:], "little")
        cls = Swit if kind == _P.SWIT else Dwt
        return cls(index, raw, (hdr >> 3) & 0x1F, value, len(raw) - 1)
    if kind == _P.ASYNC:
        return Async(index, raw)
    if kind == _P.OVERFLOW:
        return Overflow(index, raw)
    size = len(raw) - 1
    if kind == _P.TS_LOCAL:
        if not hdr & 0x80:
            return LocalTs(index, raw, 0, (hdr >> 4) & 7, 1, True)
        return LocalTs(index, raw, (hdr >> 4) & 3, _cont_value(raw), size)
    if kind == _P.TS_GLOBAL_1:
        flags = 0
        if size == 4:
            flags = (raw[4] >> 5) & 3
            raw = raw[:4] + bytes([raw[4] & 0x1F])
        return GlobalTs1(index, raw, flags, _cont_value(raw), size)
    if kind == _P.TS_GLOBAL_2:
        return GlobalTs2(index, raw, _cont_value(raw) & 0xFF_FFFF_FFFF, size)
    if not hdr & 0x80:
        return Extension(index, raw, bool(hdr & 4), 2, (hdr >> 4) & 7)
    value = ((_cont_value(raw) << 3) | ((hdr >> 4) & 7)) & 0xFFFF_FFFF
    return Extension(index, raw, bool(hdr & 4), _EXT_BITS[size], value)


def _search_sync(win: BlockWindow, framed: bool) -> Generator[ItmPacket, None, int]:
    """Before the first synchronization packet: NOTSYNC packets, then the ASYNC packet.

    This is the reference's search, block by block (its blocks, see
    :func:`~cstrace.protocols.stm.reader.input_blocks`), computing indices
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
                            yield Async(pkt_index, bytes(raw))
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
                            yield NotSync(pkt_index, bytes(raw[:dump]), not sent_notsync)
                        sent_notsync = True
                        del raw[:dump]
                        dump = 0
                        pkt_index = blk + pos - 1
                    else:
                        dump += 1
                        if dump >= 8:
                            yield NotSync(pkt_index, bytes(raw[:dump]), not sent_notsync)
                            sent_notsync = True
                            del raw[:dump]
                            dump = 0
            if not sync_start:
                if dump or not sent_notsync:
                    yield NotSync(pkt_index, bytes(raw[:dump]), not sent_notsync)
                sent_notsync = True
                del raw[:dump]
        if not win.advance(held):
            return -1


def _read_synced(
    win: BlockWindow, start: int, complete: bool, recover: bool = False
) -> Generator[ItmPacket, None, int]:
    """After the first synchronization packet: packets one at a time from window position ``start``.

    Once synchronised, a packet's index is that of its header byte, so block
    boundaries no longer matter: the window is read as one byte string, and a
    packet cut by its end is read again, whole, with the next window. Returns
    -1 at the end of the stream or after a RESERVED or BAD_SEQUENCE packet;
    with ``recover``, after such a packet, the window position of the byte after
    its header instead (where a search for the next decode start begins).
    """
    data = win.data
    n = len(data)
    # Capture indices come from the cursor: inside its current run the index of
    # position p is base + p, up to position run_end.
    cur = win.cursor(start)
    base = cur.base
    run_end = cur.limit
    headers = HEADERS
    p = start
    while True:
        while p < n:
            if p >= run_end:
                cur.at(p)
                base = cur.base
                run_end = cur.limit
            index = base + p
            hdr = data[p]
            kind = headers[hdr]
            out: ItmPacket | None = None
            stop = p + 1
            if kind == _P.SWIT or kind == _P.DWT:
                stop = p + 1 + _PAYLOAD_SIZE[hdr & 3]
                if stop <= n:
                    value = int.from_bytes(data[p + 1 : stop], "little")
                    cls = Swit if kind == _P.SWIT else Dwt
                    out = cls(index, data[p:stop], (hdr >> 3) & 0x1F, value, stop - p - 1)
            elif kind == _P.TS_LOCAL and not hdr & 0x80:
                out = LocalTs(index, data[p:stop], 0, (hdr >> 4) & 7, 1, True)
            elif kind == _P.OVERFLOW:
                out = Overflow(index, data[p:stop])
            elif kind == _P.EXTENSION and not hdr & 0x80:
                out = Extension(index, data[p:stop], bool(hdr & 4), 2, (hdr >> 4) & 7)
            elif kind == _P.RESERVED:
                yield Reserved(index, data[p:stop])
                return p + 1 if recover else -1
            elif kind == _P.ASYNC:
                i = p + 1
                bad = False
                while i < n and i < p + 5:
                    i += 1
                    if data[i - 1]:
                        bad = True
                        break
                while not bad and i < n:
                    b = data[i]
                    i += 1
                    if b == 0x80:
                        out = Async(index, data[p:i])
                        break
                    if b:
                        bad = True
                if bad:
                    yield BadSequence(index, data[p:i], kind)
                    return p + 1 if recover else -1
                stop = i
            else:
                # Continuation bytes: bit 7 set while more follow, up to a limit.
                limit = p + _CONT_LIMIT[kind]
                i = p + 1
                while i < limit and i < n and data[i] & 0x80:
                    i += 1
                if i < limit and i < n:
                    stop = i + 1
                    raw = data[p:stop]
                    size = stop - p - 1
                    if kind == _P.TS_LOCAL:
                        out = LocalTs(index, raw, (hdr >> 4) & 3, _cont_value(raw), size)
                    elif kind == _P.TS_GLOBAL_1:
                        flags = 0
                        if size == 4:
                            # The reference moves the ClkCh and Wrap bits out of the last
                            # byte, and prints the byte without them.
                            flags = (raw[4] >> 5) & 3
                            raw = raw[:4] + bytes([raw[4] & 0x1F])
                        out = GlobalTs1(index, raw, flags, _cont_value(raw), size)
                    elif kind == _P.TS_GLOBAL_2:
                        value = _cont_value(raw) & 0xFF_FFFF_FFFF  # 40 bits kept
                        out = GlobalTs2(index, raw, value, size)
                    else:
                        value = ((_cont_value(raw) << 3) | ((hdr >> 4) & 7)) & 0xFFFF_FFFF
                        out = Extension(index, raw, bool(hdr & 4), _EXT_BITS[size], value)
                elif i >= limit:
                    yield BadSequence(index, data[p:limit], kind)
                    return p + 1 if recover else -1
                else:
                    stop = n + 1
            if out is None:
                break  # the packet goes on past the window, or the stream ends inside it
            yield out
            p = stop
        # The window is used up, or the packet at ``p`` is cut by its end: keep
        # that packet's bytes and read it again, whole, with the next block.
        if not win.advance(p):
            if p < n and complete:
                yield IncompleteEot(index, data[p:], kind)
            return -1
        data = win.data
        n = len(data)
        p = 0
        cur = win.cursor()
        base = cur.base
        run_end = cur.limit
