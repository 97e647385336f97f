"""STM reader: the bytes of one STM trace ID → :mod:`~cstrace.protocols.stm.packets`.

Input: a :class:`~cstrace.capture.stream.Stream` (one trace ID's bytes and the
capture index of each byte); output: STM packets with the index of their first
byte and their raw bytes, as the reference decoder (OpenCSD ``trc_pkt_lister``)
cuts and prints them.

STPv2 is nibble oriented (MIPI STPv2; CoreSight STM-500 TRM, "STPv2 packets"):
in each byte, bits [3:0] are the first nibble in protocol order and bits [7:4]
the second. An opcode is one nibble (``0``-``E``), two (``Fn``) or three
(``F0n``); payloads follow most significant nibble first; a timestamp is a
length nibble (``0``-``C`` nibbles, ``D`` = 14, ``E`` = 16) and that many
nibbles. ASYNC is at least 21 ``F`` nibbles followed by a ``0``.

How the reference cuts the stream, reproduced here:

* The stream is processed in the blocks the reference hands over: one per
  frame and trace ID (:meth:`Stream.chunks`), or 1024-byte reads of an
  unformatted capture (:func:`input_blocks`). A packet's index is the block
  index plus the number of bytes of the block consumed when its first nibble is
  read, so a packet that starts in the high nibble of a byte gets the index of
  the following byte.
* Raw bytes are whole bytes: a packet that starts in a high nibble is printed
  with that nibble alone as its first byte (``0xf0`` for an ``F``).
* Before the first ASYNC, each block's unsynchronised bytes form a NOTSYNC
  packet, then an ASYNC packet (printed as ``ff``x10 ``0f``) at the index of its
  first ``F`` nibble. The number of NOTSYNC bytes is computed from nibble
  counts kept in 8-bit counters, and may run past the end of the block; the
  bytes printed there are what the reference's deformatter holds in memory
  (see :class:`_PastBlock`).
* An invalid opcode or field gives a RESERVED or BAD_SEQUENCE packet, after
  which the reference stops decoding (its decoder reports a fatal error).

With :attr:`~cstrace.protocols.stm.config.StmConfig.decode_before_sync` set,
the reader does not wait for an ASYNC: it reads packets from the first
unambiguous packet boundary that :mod:`~cstrace.protocols.stm.boundary` finds
from the STPv2 grammar, after an
:class:`~cstrace.protocols.stm.packets.Unsynced` packet that says where that is
(or from the next ASYNC when there is no such boundary). Until a VERSION packet
says how timestamps are encoded, timestamped packets carry no timestamp
(``timestamp`` None) instead of being bad sequences. After a RESERVED or
BAD_SEQUENCE packet it looks for the next boundary the same way, from the
nibble after the bad packet's first one, instead of stopping.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator, Iterator
from typing import Any

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow, IndexCursor
from cstrace.protocols.base import DecodeContext
from cstrace.protocols.kit import READ_BLOCK, input_blocks, stream_rows, tapped
from cstrace.protocols.stm.boundary import HORIZON, SPAN, find_async, find_start, first_certain
from cstrace.protocols.stm.decoder import StmDecoder
from cstrace.protocols.stm.opcodes import (
    ACT_PACKET,
    ACT_RESERVED,
    ACT_VERSION,
    OPCODES_1N,
    OPCODES_2N,
    OPCODES_3N,
    TABLE_1N,
    TABLE_2N,
    TABLE_3N,
    TS_NIBBLES,
    OpRow,
)
from cstrace.protocols.stm.packets import (
    BadSequence,
    IncompleteEot,
    NotSync,
    Reserved,
    StmPacket,
    StmPktType,
    Unsynced,
)
from cstrace.tally import PacketCount

__all__ = [
    "OPCODES_1N",
    "OPCODES_2N",
    "OPCODES_3N",
    "READ_BLOCK",
    "OpRow",
    "bin_to_gray",
    "gray_to_bin",
    "input_blocks",
    "iter_packets",
    "iter_stream_rows",
    "read",
]

_P = StmPktType

_ASYNC_RAW = b"\xff" * 10 + b"\x0f"
_DATA_BITS = {_P.D4: 4, _P.D8: 8, _P.D16: 16, _P.D32: 32, _P.D64: 64}


def bin_to_gray(value: int) -> int:
    """Gray code of a 64-bit binary value."""
    value &= 0xFFFF_FFFF_FFFF_FFFF
    return value ^ (value >> 1)


def gray_to_bin(value: int) -> int:
    """Binary value of a 64-bit Gray code."""
    value &= 0xFFFF_FFFF_FFFF_FFFF
    shift = 1
    while shift < 64:
        value ^= value >> shift
        shift <<= 1
    return value


class _PastBlock:
    """The bytes the reference reads past the end of a block when it prints NOTSYNC.

    The reference copies NOTSYNC bytes from its input pointer by a count derived
    from nibble counters, which can exceed the block. Its deformatter keeps each
    frame's output in fixed slots (``index`` u32, ``id`` u8, ``data[15]``, ``valid``
    u32, ``used`` u32): past a block come the stale bytes of the slot from earlier
    frames, then the slot's ``valid`` and ``used`` counts, then the next slot.
    A stream that knows the frame layout may provide this as
    ``frame_tail(block_number, count)``; otherwise it is emulated assuming the
    trace ID used the first slot of each frame (true of single-source captures)
    and that the other slots are empty.
    """

    __slots__ = ("_framed", "_slot", "_tail")

    def __init__(self, stream: Stream) -> None:
        tail: Any = getattr(stream, "frame_tail", None)
        self._tail: Callable[[int, int], bytes] | None = tail if callable(tail) else None
        # Unformatted data comes in the reference lister's read buffer instead.
        self._framed = stream.trace_id is not None
        self._slot = bytearray(15 if self._framed else READ_BLOCK)

    def note(self, block: bytes) -> None:
        """Record a block as it enters the reader."""
        if self._tail is None and len(block) <= len(self._slot):
            self._slot[: len(block)] = block

    def read(self, number: int, block: bytes, count: int) -> bytes:
        """``count`` bytes after the end of ``block`` (block ``number`` of the stream)."""
        if count <= 0:
            return b""
        if self._tail is not None:
            got = self._tail(number, count)
            return (bytes(got) + bytes(count))[:count]
        out = bytes(self._slot[len(block) :])
        if self._framed:
            out += struct.pack("<II", len(block), 0)
        return (out + bytes(count))[:count]


def iter_packets(
    stream: Stream, config: object = None, complete: bool = True
) -> Iterator[StmPacket]:
    """Cut one STM trace ID's bytes into packets, as the reference decoder does.

    ``complete`` is False when the capture was cut short: then a packet in
    progress at the end is dropped instead of flushed as INCOMPLETE_EOT.
    When ``config`` says ``decode_before_sync``, packets before the first ASYNC
    are read too (module text). This is a tap on :func:`read`: the decoder's
    packet methods make packet objects instead of decoding them.
    """
    return tapped(read, StmDecoder(config), stream, config, complete)


def iter_stream_rows(
    stream: Stream,
    config: object,
    context: DecodeContext,
    count: PacketCount | None = None,
    size: int = 65536,
) -> Iterator[list[Any]]:
    """The elements of one STM trace ID's stream, read and decoded in one loop, as lists
    of element rows that each hold one :class:`~cstrace.batch.ElementBatch` of about
    ``size`` rows (:func:`cstrace.protocols.kit.stream_rows`)."""
    dec = StmDecoder(config, context.trace_id, context.reset, True, size)
    return stream_rows(read, dec, stream, config, context.complete, count)


def read(stream: Stream, config: object, complete: bool, dec: StmDecoder) -> Iterator[None]:
    """Read one STM trace ID's bytes into the decoder ``dec`` (the kit's reader contract,
    :mod:`cstrace.protocols.kit`): the packets of the synchronised stream as fields,
    to the decoder's method for their kind; the rare ones as objects.

    The stream is read block by block through a
    :class:`~cstrace.capture.window.BlockWindow`.
    """
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    sync = _SyncState()
    if getattr(config, "decode_before_sync", False):
        pos, as_reference = yield from _resync(win, 0, True, dec)
        if as_reference:
            # An ASYNC first: the reference's search finds it, and reads what precedes it.
            pos = yield from _search_async(stream, win, sync, dec)
        while pos >= 0:
            pos = yield from _read_synced(win, pos, sync, complete, True, dec)
            if pos >= 0:
                pos, _ = yield from _resync(win, pos, False, dec)
                sync.num_f = 0
                sync.sync_start = sync.is_sync = False
        return
    start = yield from _search_async(stream, win, sync, dec)
    if start >= 0:
        yield from _read_synced(win, start, sync, complete, False, dec)


def _other(dec: StmDecoder, pkt: StmPacket) -> None:
    """A packet made as an object: to the tap, or to the decoder."""
    tap = dec.tap
    if tap is not None:
        tap.append(pkt)
    else:
        dec.other(pkt)


class _SyncState:
    """The reference's ASYNC detector, run on every nibble (8-bit F counter), and what
    the synchronised reading keeps from window to window.

    When packets before ASYNC are decoded, it also keeps what must survive a
    resynchronisation: the timestamp encoding (0 until a VERSION).
    """

    def __init__(self) -> None:
        self.num_f = 0
        self.sync_start = False
        self.is_sync = False
        self.sync_index = 0
        self.ts_type = 0
        self.ts = 0
        """The timestamp (its bits updated by each timestamped packet)."""
        self.channel = 0
        """The channel as C8 packets update it (their low byte)."""
        self.cur_type = 0
        """The packet type of the packet last read (that of an incomplete one at the end)."""
        self.marker = False
        """Whether that packet has a marker."""
        self.cut = False
        """The packet at the position :func:`_synced_run` returned goes on past the window."""
        self.det = 0
        """The window nibble up to which the detector has run."""

    def step(self, ch: int) -> None:
        """Run the detector over one nibble ``ch``."""
        if ch == 15:
            self.num_f = (self.num_f + 1) & 0xFF
            self.sync_start = True
        elif self.sync_start:
            if ch == 0 and self.num_f >= 21:
                self.is_sync = True
            else:
                self.num_f = 0
                self.sync_start = False
                self.is_sync = False

    def detect(self, data: bytes, k: int, stop: int) -> None:
        """Run the detector over window nibbles ``[k, stop)``."""
        while k < stop:
            b = data[k >> 1]
            self.step(b >> 4 if k & 1 else b & 15)
            k += 1


_LOOKAHEAD = HORIZON // 2 + 1024
"""Bytes a search for a packet boundary looks at past where it begins (when the stream has them)."""


def _resync(
    win: BlockWindow, q: int, first: bool, dec: StmDecoder
) -> Generator[None, None, tuple[int, bool]]:
    """Find the first unambiguous boundary from window nibble ``q``: an UNSYNCED packet.

    Nibbles that no valid reading starts from, and those before the boundary,
    are skipped (in NOTSYNC packets when the window must move on first). When
    an ASYNC comes first, or the readings of the first nibbles do not meet,
    reading starts at the next ASYNC (no UNSYNCED packet then: the ASYNC
    synchronises). Returns the window nibble where packets start (-1 when the
    stream ends first), and True when nothing was read because the ``first``
    search of a stream found an ASYNC first: the caller then reads the start
    of the stream as the reference does.
    """
    final = False
    size = _LOOKAHEAD  # bytes examined from the byte of nibble q
    while True:
        data = win.data
        n = len(data)
        b0 = q >> 1
        if not final and n - b0 < size:
            if win.advance(b0):
                q &= 1
                continue
            final = True
        hx = data[b0 : b0 + size].translate(_SWAP).hex()
        at_end = final and b0 + size >= n
        k = q - 2 * b0
        s, settled = find_start(hx, k, at_end)
        if not at_end and (not settled or len(hx) - s < HORIZON + 2 * SPAN):
            # The reading from s needs more nibbles than the slice holds after it.
            if s > k:
                first = False  # what is read from now on is no longer the reference's
                _other(
                    dec,
                    NotSync(win.index_at((q + 1) >> 1), data[(q + 1) >> 1 : b0 + ((s + 1) >> 1)]),
                )
                yield None
                q = 2 * b0 + s
                size = _LOOKAHEAD
            else:
                size *= 2  # one packet longer than the slice (a long ASYNC)
            continue
        certain = first_certain(hx, s) if s < len(hx) else None
        start = find_async(hx, s)
        if start >= 0 and (certain is None or start <= certain):
            certain = None  # an ASYNC comes first: it synchronises
        elif certain is not None:
            start = certain
        if start < 0:
            if at_end:
                if len(hx) > k:
                    _other(dec, NotSync(win.index_at((q + 1) >> 1), data[(q + 1) >> 1 :]))
                return -1, False
            # Readings that never meet, and no ASYNC: skip what was searched (keeping
            # a margin for an ASYNC that goes on past the slice), then read on.
            skip = len(hx) - 2 * SPAN
            first = False
            _other(
                dec,
                NotSync(win.index_at((q + 1) >> 1), data[(q + 1) >> 1 : b0 + ((skip + 1) >> 1)]),
            )
            yield None
            q = 2 * b0 + skip
            continue
        at = b0 + ((start + 1) >> 1)  # the packet's index is that of this byte
        skipped = data[(q + 1) >> 1 : at]
        if certain is None:
            if first:
                return 2 * b0 + start, True
            _other(dec, NotSync(win.index_at((q + 1) >> 1), skipped))
        else:
            index = win.index_at(at)
            _other(dec, Unsynced(win.index_at((q + 1) >> 1), skipped, index, index))
        return 2 * b0 + start, False


def _search_async(
    stream: Stream, win: BlockWindow, sync: _SyncState, dec: StmDecoder
) -> Generator[None, None, int]:
    """Before the first ASYNC: NOTSYNC packets per block, then the ASYNC packet.

    The search goes block by block (the reference's blocks, see
    :func:`input_blocks`), computing indices inside a block from the block's
    index as the reference does. The last block of a window may go on in the
    next capture block: it is scanned with the next window. Returns the window
    nibble where the first packet after ASYNC starts, or -1 when the stream
    ends unsynchronised.
    """
    past = _PastBlock(stream)
    framed = stream.trace_id is not None
    raw = bytearray()
    num_f = sync.num_f
    sync_start = sync.sync_start
    is_sync = sync.is_sync
    sync_index = sync.sync_index
    number = -1  # block number, in the stream
    while True:
        data = win.data
        n = len(data)
        held = n  # bytes of the window done with: the rest is kept for the next one
        for s, e, blk in input_blocks(win, 0, framed):
            if e == n and not win.final:
                held = s
                break
            block = data[s:e]
            number += 1
            past.note(block)
            nibs = [x for b in block for x in (b & 15, b >> 4)]
            end = len(nibs)
            k = 0  # next nibble of the block; bytes consumed = (k + 1) >> 1
            while k < end:
                # One pass of the reference's search (waitForSync).
                start = (k + 1) >> 1
                pkt_index = blk + start
                nn = 22 if is_sync else num_f  # nibble counter (8 bits)
                got = True
                while not is_sync:
                    if k >= end:
                        got = False
                        break
                    nib = nibs[k]
                    k += 1
                    nn = (nn + 1) & 0xFF
                    if nib == 15:
                        num_f = (num_f + 1) & 0xFF
                        if not sync_start:
                            sync_start = True
                            sync_index = pkt_index + (((nn - 1) // 2) if nn else 0)
                    elif sync_start:
                        if nib == 0 and num_f >= 21:
                            is_sync = True
                        else:
                            num_f = 0
                            sync_start = False
                if nn == 0:
                    continue
                if not got or nn > 22:
                    count = (nn - (22 if is_sync else num_f)) & 0xFF
                    count = (count >> 1) + (count & 1)
                    take = block[start : start + count]
                    raw += take
                    if len(take) < count:
                        raw += past.read(number, block, count - len(take))
                    _other(dec, NotSync(pkt_index, bytes(raw)))
                    raw.clear()
                    if k & 1:
                        raw.append(block[k >> 1] & 0xF0)  # unused high nibble, as a byte
                    continue
                raw += _ASYNC_RAW
                dec.raw = bytes(raw)
                dec.async_packet(sync_index)
                sync.num_f = 0
                sync.sync_start = False
                sync.is_sync = False
                sync.sync_index = sync_index
                return 2 * s + k
        if dec.ready():
            yield None
        if not win.advance(held):
            return -1


# Stream bytes with their nibbles swapped, so that ``hex()`` lists nibbles in protocol order.
_SWAP = bytes(((b & 15) << 4) | (b >> 4) for b in range(256))


_ROWS = (*TABLE_1N, *TABLE_2N, *TABLE_3N)
"""The opcode rows: 1-nibble opcodes at 0-15, ``Fn`` at 16-31, ``F0n`` at 32-47 (the
prefix rows are never looked up). Their fields, one table each, for the compiled loop:"""
_OP_ACTION = bytes(row[3] for row in _ROWS)
_OP_PAYLOAD = bytes(row[4] for row in _ROWS)
_OP_MARKER = bytes(row[5] for row in _ROWS)
_OP_STAMPED = bytes(row[6] for row in _ROWS)
_OP_KIND = bytes(int(row[2]) for row in _ROWS)
_OP_BITS = bytes(_DATA_BITS.get(row[2], 0) for row in _ROWS)
_TS_LEN = bytes(n if n >= 0 else 255 for n in TS_NIBBLES)  # 255: invalid
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF

_D_FIRST = int(_P.D4)  # the kinds, as numbers for the compiled loop
_K_M8 = int(_P.M8)
_K_C8 = int(_P.C8)
_K_C16 = int(_P.C16)
_K_MERR = int(_P.MERR)
_K_GERR = int(_P.GERR)
_K_FLAG = int(_P.FLAG)
_K_TRIG = int(_P.TRIG)
_K_FREQ = int(_P.FREQ)
_K_NULL = int(_P.NULL)
_K_VERSION = int(_P.VERSION)
_K_RESERVED = int(_P.RESERVED)
_K_ASYNC = int(_P.ASYNC)
_A_PACKET = ACT_PACKET
_A_VERSION = ACT_VERSION
_A_RESERVED = ACT_RESERVED


def _nibbles(data: bytes, k: int, stop: int) -> int:
    """The value of window nibbles ``[k, stop)``, the first the most significant."""
    value = 0
    while k < stop:
        b = data[k >> 1]
        value = ((value << 4) | (b >> 4 if k & 1 else b & 15)) & _MASK64
        k += 1
    return value


def _raw(data: bytes, at: int, stop: int) -> bytes:
    """The bytes the reference prints for the packet at window nibbles ``[at, stop)``: whole
    bytes, a packet that starts in a high nibble with that nibble alone as its first."""
    raw = data[(at + 1) >> 1 : (stop + 1) >> 1]
    if at & 1:
        raw = bytes([data[at >> 1] & 0xF0]) + raw
    return raw


def _synced_run(
    dec: StmDecoder,
    sync: _SyncState,
    data: bytes,
    at: int,
    end: int,
    cur: IndexCursor,
    recover: bool,
) -> int:
    """Read packets from window nibble ``at`` on, once synchronised, into ``dec``; stop at
    the end of the window, at a packet cut by it (``sync.cut``), when the decoder has
    output to take, or after a RESERVED or BAD_SEQUENCE packet (``dec.fatal``).
    Returns the nibble reached (after a bad packet: its first nibble).

    The ASYNC detector is brought up to date lazily: ``sync.det`` is the nibble up to
    which it has run; an ASYNC opcode runs it to there first.
    """
    sync.cut = False
    while at < end:
        q = at >> 1
        # The reference's index: the block's index plus the bytes of the block
        # consumed, so a packet starting in a high nibble gets the next byte's.
        index = (cur.base if q < cur.limit else cur.at(q) - q) + ((at + 1) >> 1)
        k = at
        sync.marker = False
        b = data[k >> 1]
        row = b >> 4 if k & 1 else b & 15
        if row == 15:
            if k + 1 >= end:
                break
            b = data[(k + 1) >> 1]
            n1 = b >> 4 if (k + 1) & 1 else b & 15
            if n1:
                row = 16 + n1
            else:
                if k + 2 >= end:
                    break
                b = data[(k + 2) >> 1]
                row = 32 + (b >> 4 if (k + 2) & 1 else b & 15)
        h = 1 if row < 16 else (2 if row < 32 else 3)
        action = _OP_ACTION[row]
        kind = _OP_KIND[row]
        if action == _A_PACKET:
            sync.cur_type = kind
            marker = _OP_MARKER[row] != 0
            sync.marker = marker
            d_end = k + h + _OP_PAYLOAD[row]
            stop = d_end
            tslen = 0
            stamped = _OP_STAMPED[row] != 0
            if stamped:
                if d_end >= end:
                    break
                b = data[d_end >> 1]
                tslen = _TS_LEN[b >> 4 if d_end & 1 else b & 15]
                stop = d_end + 1 + tslen if tslen != 255 else d_end + 1
            if stop > end:
                break
            value = _nibbles(data, k + h, d_end)
            ts = 0
            has_ts = False
            tbits = 0
            if tslen == 255:
                _other(dec, BadSequence(index, _raw(data, at, stop), _P(kind), marker))
                dec.fatal = True
                return at
            if stamped:
                tbits = tslen * 4
                one = 1  # (a 64-bit one when compiled)
                mask = _MASK64 if tbits >= 64 else (one << tbits) - 1
                update = _nibbles(data, d_end + 1, stop)
                ts_type = sync.ts_type
                if ts_type == 3:
                    sync.ts = (sync.ts & ~mask & _MASK64) | (update & mask)
                elif ts_type == 4:
                    sync.ts = gray_to_bin(
                        (bin_to_gray(sync.ts) & ~mask & _MASK64) | (update & mask)
                    )
                elif not recover:
                    _other(dec, BadSequence(index, _raw(data, at, stop), _P(kind), marker))
                    dec.fatal = True
                    return at
                if ts_type:
                    ts = sync.ts
                    has_ts = True
            if dec.tap is not None:
                dec.raw = _raw(data, at, stop)
            if _OP_BITS[row]:  # a data packet
                dec.data(index, _OP_BITS[row], value, marker, ts, has_ts, tbits)
            elif kind == _K_NULL:
                dec.null(index, ts, has_ts, tbits)
            elif kind == _K_M8:
                sync.channel = 0
                dec.m8(index, value)
            elif kind == _K_C8:
                sync.channel = (sync.channel & 0xFF00) | value
                dec.c8(index, sync.channel)
            elif kind == _K_C16:
                sync.channel = value
                dec.c16(index, value)
            elif kind == _K_MERR:
                sync.channel = 0
                dec.merr(index, value)
            elif kind == _K_GERR:
                sync.channel = 0
                dec.gerr(index, value)
            elif kind == _K_FLAG:
                dec.flag(index, ts, has_ts, tbits)
            elif kind == _K_TRIG:
                dec.trig(index, value, ts, has_ts, tbits)
            else:
                dec.freq(index, value)
        elif action == _A_VERSION:
            sync.cur_type = _K_VERSION
            sync.marker = False
            if k + 3 >= end:
                break
            stop = k + 4
            b = data[(k + 3) >> 1]
            v = b >> 4 if (k + 3) & 1 else b & 15
            if v != 3 and v != 4:
                _other(dec, BadSequence(index, _raw(data, at, stop), _P.VERSION))
                dec.fatal = True
                return at
            sync.ts_type = v
            sync.channel = 0
            if dec.tap is not None:
                dec.raw = _raw(data, at, stop)
            dec.version(index, v)
        elif action == _A_RESERVED:
            sync.cur_type = _K_RESERVED
            sync.marker = False
            stop = k + h
            opcode = 0xF | ((row & 15) << (4 * (h - 1)))
            _other(dec, Reserved(index, _raw(data, at, stop), opcode))
            dec.fatal = True
            return at
        else:
            # ASYNC: F nibbles until the detector fires; any other nibble first is an error.
            sync.detect(data, sync.det, at)
            sync.det = at
            # (the detector's state up to here, kept for a packet cut by the window)
            num_f = sync.num_f
            sync_start = sync.sync_start
            is_sync = sync.is_sync
            i = k
            stop = -1
            bad = False
            while i < end:
                b = data[i >> 1]
                sync.step(b >> 4 if i & 1 else b & 15)
                i += 1
                if i - k > 2:
                    if sync.is_sync:
                        stop = i
                        break
                    if not sync.sync_start:
                        stop = i
                        bad = True
                        break
            if stop < 0 or bad:
                sync.num_f = num_f
                sync.sync_start = sync_start
                sync.is_sync = is_sync
            if stop < 0:
                break
            if bad:
                _other(dec, BadSequence(index, _raw(data, at, stop), _P(sync.cur_type)))
                dec.fatal = True
                return at
            sync.cur_type = _K_ASYNC
            sync.marker = False
            sync.num_f = 0
            sync.sync_start = False
            sync.is_sync = False
            sync.det = stop
            if dec.tap is not None:
                dec.raw = _raw(data, at, stop)
            dec.async_packet(index)
        at = stop
        if dec.ready():
            return at
    if at < end:
        sync.cut = True
    return at


def _read_synced(
    win: BlockWindow,
    start: int,
    sync: _SyncState,
    complete: bool,
    recover: bool,
    dec: StmDecoder,
) -> Generator[None, None, int]:
    """After the first ASYNC: packets one at a time from nibble ``start`` of the window
    (:func:`_synced_run`).

    Once synchronised, block boundaries only matter for packet indices (the
    block index plus the bytes of the block consumed), so the window is read as
    one nibble string; a packet cut by the end of the window is read again,
    whole, with the next one. Returns -1 at the end of the stream or after a
    RESERVED or BAD_SEQUENCE packet; with ``recover``, after such a packet, the
    window nibble after the packet's first one instead, and a timestamp whose
    encoding no VERSION gave is left unknown.
    """
    sync.ts = 0
    sync.channel = 0
    sync.cur_type = _K_ASYNC
    sync.marker = False
    sync.det = start
    at = start
    while True:
        data = win.data
        end = 2 * len(data)
        cur = win.cursor(at >> 1)
        while True:
            at = _synced_run(dec, sync, data, at, end, cur, recover)
            if dec.fatal:
                yield None
                if not recover:
                    return -1
                dec.fatal = False
                return at + 1
            if sync.cut or at >= end:
                break
            yield None
        if dec.ready():
            yield None
        # The window is used up, or the packet at ``at`` is cut by its end: keep
        # that packet's bytes and read it again, whole, with the next block.
        sync.detect(data, sync.det, at)
        if not win.advance(at >> 1):
            break
        at &= 1
        sync.det = at
    if at < end and complete:
        index = win.cursor(at >> 1).base + ((at + 1) >> 1)
        _other(dec, IncompleteEot(index, _raw(data, at, end), _P(sync.cur_type), sync.marker))
    return -1
