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
"""

from __future__ import annotations

from collections.abc import Iterator

from cstrace.capture.stream import Stream
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
)

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
    """
    synced = False
    raw = bytearray()
    pkt_index = 0
    # Search for the first synchronization packet.
    sync_start = False
    sent_notsync = False
    dump = 0
    # Packet in progress (synchronised): its type and header, or None.
    kind: ItmPktType | None = None
    hdr = 0
    need = 0

    for blk, block in stream.chunks():
        pos = 0
        end = len(block)
        while pos < end:
            if not synced:
                # The reference's waitForSync, once per block (or after ASYNC).
                dump = 0
                if not sync_start:
                    pkt_index = blk + pos
                while pos < end:
                    if sync_start:
                        err = False
                        found = False
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
                                found = True
                                break
                            if b:
                                err = True
                        if found:
                            synced = True
                            break
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
                if synced:
                    yield Async(pkt_index, bytes(raw))
                    raw.clear()
                elif not sync_start:
                    if dump or not sent_notsync:
                        yield NotSync(pkt_index, bytes(raw[:dump]), not sent_notsync)
                    sent_notsync = True
                    del raw[:dump]
                    dump = 0
                continue

            out: ItmPacket | None = None
            fatal = False
            if kind is None:
                # Header byte.
                pkt_index = blk + pos
                hdr = block[pos]
                pos += 1
                raw.append(hdr)
                kind = HEADERS[hdr]
                if kind == _P.SWIT or kind == _P.DWT:
                    need = 1 + _PAYLOAD_SIZE[hdr & 3]
                elif kind == _P.OVERFLOW:
                    out = Overflow(pkt_index, bytes(raw))
                elif kind == _P.TS_LOCAL and not hdr & 0x80:
                    out = LocalTs(pkt_index, bytes(raw), 0, (hdr >> 4) & 7, 1, True)
                elif kind == _P.EXTENSION and not hdr & 0x80:
                    out = Extension(pkt_index, bytes(raw), bool(hdr & 4), 2, (hdr >> 4) & 7)
                elif kind == _P.RESERVED:
                    out = Reserved(pkt_index, bytes(raw))
                    fatal = True
                if out is None and pos >= end:
                    continue
            if out is None:
                if kind == _P.SWIT or kind == _P.DWT:
                    take = min(need - len(raw), end - pos)
                    raw += block[pos : pos + take]
                    pos += take
                    if len(raw) < need:
                        continue
                    value = int.from_bytes(raw[1:], "little")
                    cls = Swit if kind == _P.SWIT else Dwt
                    out = cls(pkt_index, bytes(raw), (hdr >> 3) & 0x1F, value, need - 1)
                elif kind == _P.ASYNC:
                    err = False
                    found = False
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
                            found = True
                            break
                        if b:
                            err = True
                    if found:
                        out = Async(pkt_index, bytes(raw))
                    elif err:
                        out = BadSequence(pkt_index, bytes(raw), kind)
                        fatal = True
                    else:
                        continue
                else:
                    assert kind is not None
                    limit = _CONT_LIMIT[kind]
                    last = False
                    while len(raw) < limit and pos < end:
                        b = block[pos]
                        pos += 1
                        raw.append(b)
                        if not b & 0x80:
                            last = True
                            break
                    if not last:
                        if len(raw) == limit:
                            out = BadSequence(pkt_index, bytes(raw), kind)
                            fatal = True
                        else:
                            continue
                    else:
                        size = len(raw) - 1
                        if kind == _P.TS_LOCAL:
                            tc = (hdr >> 4) & 3
                            out = LocalTs(pkt_index, bytes(raw), tc, _cont_value(raw), size)
                        elif kind == _P.TS_GLOBAL_1:
                            flags = 0
                            if size == 4:
                                # The reference moves the ClkCh and Wrap bits out of the
                                # last byte, and prints the byte without them.
                                flags = (raw[4] >> 5) & 3
                                raw[4] &= 0x1F
                            out = GlobalTs1(pkt_index, bytes(raw), flags, _cont_value(raw), size)
                        elif kind == _P.TS_GLOBAL_2:
                            value = _cont_value(raw) & 0xFF_FFFF_FFFF  # 40 bits kept
                            out = GlobalTs2(pkt_index, bytes(raw), value, size)
                        else:
                            value = ((_cont_value(raw) << 3) | ((hdr >> 4) & 7)) & 0xFFFF_FFFF
                            nbits = _EXT_BITS[size]
                            out = Extension(pkt_index, bytes(raw), bool(hdr & 4), nbits, value)
            yield out
            if fatal:
                return
            raw.clear()
            kind = None

    if complete and synced and kind is not None:
        yield IncompleteEot(pkt_index, bytes(raw), kind)
