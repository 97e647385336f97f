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
from cstrace.capture.window import BlockWindow
from cstrace.protocols.kit import READ_BLOCK, input_blocks
from cstrace.protocols.stm.boundary import HORIZON, SPAN, find_async, find_start, first_certain
from cstrace.protocols.stm.opcodes import (
    ACT_PACKET,
    ACT_PREFIX_F,
    ACT_PREFIX_F0,
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
    C8,
    C16,
    M8,
    Async,
    BadSequence,
    Data,
    Flag,
    Freq,
    GErr,
    IncompleteEot,
    MErr,
    NotSync,
    Null,
    Reserved,
    StmPacket,
    StmPktType,
    Trig,
    Unsynced,
    Version,
)

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
    The stream is read block by block through a
    :class:`~cstrace.capture.window.BlockWindow`. When ``config`` says
    ``decode_before_sync``, packets before the first ASYNC are read too
    (module text).
    """
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    sync = _SyncState()
    if getattr(config, "decode_before_sync", False):
        pos, as_reference = yield from _resync(win, 0, True)
        if as_reference:
            # An ASYNC first: the reference's search finds it, and reads what precedes it.
            pos = yield from _search_async(stream, win, sync)
        while pos >= 0:
            pos = yield from _read_synced(win, pos, sync, complete, True)
            if pos >= 0:
                pos, _ = yield from _resync(win, pos, False)
                sync.num_f = 0
                sync.sync_start = sync.is_sync = False
        return
    start = yield from _search_async(stream, win, sync)
    if start >= 0:
        yield from _read_synced(win, start, sync, complete)


class _SyncState:
    """The reference's ASYNC detector, run on every nibble (8-bit F counter).

    When packets before ASYNC are decoded, it also keeps what must survive a
    resynchronisation: the timestamp encoding (0 until a VERSION), and the
    nibble string of the window last read (``hx`` of ``hx_data``).
    """

    __slots__ = ("hx", "hx_data", "is_sync", "num_f", "sync_index", "sync_start", "ts_type")

    def __init__(self) -> None:
        self.num_f = 0
        self.sync_start = False
        self.is_sync = False
        self.sync_index = 0
        self.ts_type = 0
        self.hx_data = b""
        self.hx = ""


_LOOKAHEAD = HORIZON // 2 + 1024
"""Bytes a search for a packet boundary looks at past where it begins (when the stream has them)."""


def _resync(win: BlockWindow, q: int, first: bool) -> Generator[StmPacket, None, tuple[int, bool]]:
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
                yield NotSync(win.index_at((q + 1) >> 1), data[(q + 1) >> 1 : b0 + ((s + 1) >> 1)])
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
                    yield NotSync(win.index_at((q + 1) >> 1), data[(q + 1) >> 1 :])
                return -1, False
            # Readings that never meet, and no ASYNC: skip what was searched (keeping
            # a margin for an ASYNC that goes on past the slice), then read on.
            skip = len(hx) - 2 * SPAN
            first = False
            yield NotSync(win.index_at((q + 1) >> 1), data[(q + 1) >> 1 : b0 + ((skip + 1) >> 1)])
            q = 2 * b0 + skip
            continue
        at = b0 + ((start + 1) >> 1)  # the packet's index is that of this byte
        skipped = data[(q + 1) >> 1 : at]
        if certain is None:
            if first:
                return 2 * b0 + start, True
            yield NotSync(win.index_at((q + 1) >> 1), skipped)
        else:
            index = win.index_at(at)
            yield Unsynced(win.index_at((q + 1) >> 1), skipped, index, index)
        return 2 * b0 + start, False


def _search_async(
    stream: Stream, win: BlockWindow, sync: _SyncState
) -> Generator[StmPacket, None, int]:
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
                    yield NotSync(pkt_index, bytes(raw))
                    raw.clear()
                    if k & 1:
                        raw.append(block[k >> 1] & 0xF0)  # unused high nibble, as a byte
                    continue
                raw += _ASYNC_RAW
                yield Async(sync_index, bytes(raw))
                sync.num_f = 0
                sync.sync_start = False
                sync.is_sync = False
                sync.sync_index = sync_index
                return 2 * s + k
        if not win.advance(held):
            return -1


# Stream bytes with their nibbles swapped, so that ``hex()`` lists nibbles in protocol order.
_SWAP = bytes(((b & 15) << 4) | (b >> 4) for b in range(256))
_HEX = {c: int(c, 16) for c in "0123456789abcdef"}
_TSLEN = {f"{n:x}": length for n, length in enumerate(TS_NIBBLES)}
_F21 = "f" * 21

# What the synchronised reader builds for each packet type.
_EMIT = {
    _P.D4: 0,
    _P.D8: 0,
    _P.D16: 0,
    _P.D32: 0,
    _P.D64: 0,
    _P.M8: 1,
    _P.C8: 2,
    _P.C16: 3,
    _P.MERR: 4,
    _P.GERR: 5,
    _P.FLAG: 6,
    _P.TRIG: 7,
    _P.FREQ: 8,
    _P.NULL: 9,
}

# A whole opcode (1, 2 or 3 nibbles as hex digits) → (action, opcode nibbles,
# payload nibbles, timestamp, marker, packet type, what to build, data bits).
_Spec = tuple[int, int, int, bool, bool, StmPktType, int, int]


def _specs() -> dict[str, _Spec]:
    out: dict[str, _Spec] = {}
    for prefix, rows in (("", TABLE_1N), ("f", TABLE_2N), ("f0", TABLE_3N)):
        for n, (_code, _name, kind, action, nibs, marker, stamped) in enumerate(rows):
            if action in (ACT_PREFIX_F, ACT_PREFIX_F0):
                continue
            key = f"{prefix}{n:x}"
            out[key] = (
                action,
                len(key),
                nibs,
                stamped,
                marker,
                kind,
                _EMIT.get(kind, -1),
                _DATA_BITS.get(kind, 0),
            )
    return out


_SPECS = _specs()
# Every 3-nibble string → the spec of the opcode it starts with (most packets are
# longer than 3 nibbles, so one slice and one lookup find the opcode).
_SPECS3 = {
    a + b + c: specs
    for a in "0123456789abcdef"
    for b in "0123456789abcdef"
    for c in "0123456789abcdef"
    if (specs := _SPECS.get(a) or _SPECS.get(a + b) or _SPECS.get(a + b + c)) is not None
}
_HIGH = tuple(bytes([b & 0xF0]) for b in range(256))


def _detect(num_f: int, sync_start: bool, is_sync: bool, span: str) -> tuple[int, bool, bool]:
    """Run the reference's ASYNC detector over a nibble string; return its new state.

    Bulk string operations when it cannot fire (no run of 21 F nibbles),
    nibble by nibble otherwise.
    """
    if not span:
        return num_f, sync_start, is_sync
    if not is_sync:
        lead = len(span) - len(span.lstrip("f"))
        if lead == len(span):
            return (num_f + lead) & 0xFF, sync_start or lead > 0, False
        if num_f + lead < 21 and _F21 not in span:
            trail = len(span) - len(span.rstrip("f"))
            return trail, trail > 0, False
    for ch in span:
        if ch == "f":
            num_f = (num_f + 1) & 0xFF
            sync_start = True
        elif sync_start:
            if ch == "0" and num_f >= 21:
                is_sync = True
            else:
                num_f = 0
                sync_start = False
                is_sync = False
    return num_f, sync_start, is_sync


def _read_synced(
    win: BlockWindow, start: int, sync: _SyncState, complete: bool, recover: bool = False
) -> Generator[StmPacket, None, int]:
    """After the first ASYNC: packets one at a time from nibble ``start`` of the window.

    Once synchronised, block boundaries only matter for packet indices (the
    block index plus the bytes of the block consumed), so the window is read as
    one nibble string; a packet cut by the end of the window is read again,
    whole, with the next one. The ASYNC detector, which only matters when an
    ASYNC opcode comes, is brought up to date lazily. Returns -1 at the end of
    the stream or after a RESERVED or BAD_SEQUENCE packet; with ``recover``,
    after such a packet, the window nibble after the packet's first one
    instead, and a timestamp whose encoding no VERSION gave is left unknown.
    """
    data = win.data
    if sync.hx_data is data:
        hx = sync.hx
    else:
        hx = data.translate(_SWAP).hex()
        sync.hx_data = data
        sync.hx = hx
    end = len(hx)
    # Capture indices come from the cursor: inside its current run the index of
    # byte q is base + q, up to byte run_end.
    cur = win.cursor(start >> 1)
    base = cur.base
    run_end = cur.limit

    detector = (sync.num_f, sync.sync_start, sync.is_sync)
    det = start  # nibble up to which ``detector`` is up to date
    channel = 0
    ts = 0
    ts_type = sync.ts_type  # StmTsType value: unknown (0) until VERSION
    cur_type = _P.ASYNC
    specs = _SPECS3
    tslens = _TSLEN
    high = _HIGH

    at = start
    pkt_index = 0
    spec: _Spec | None = None
    while True:
        while at < end:
            q = at >> 1
            if q >= run_end:
                cur.at(q)
                base = cur.base
                run_end = cur.limit
            # The reference's index: the block's index plus the bytes of the block
            # consumed, so a packet starting in a high nibble gets the next byte's.
            first = (at + 1) >> 1  # first byte the packet reads from the stream
            pkt_index = base + first
            k = at
            out: StmPacket | None = None
            fatal = False
            stop = -1  # window nibble after the packet's last one

            spec = specs.get(hx[k : k + 3])
            if spec is None and k + 3 > end:
                spec = _SPECS.get(hx[k : k + 1]) or _SPECS.get(hx[k : k + 2])
            if spec is not None:
                action, h, d, stamped, marker, kind, emit, bits = spec
                if action == ACT_PACKET:
                    cur_type = kind
                    stop = d_end = k + h + d
                    tslen = 0
                    if stamped:
                        if d_end >= end:
                            stop = end + 1
                        else:
                            tslen = tslens[hx[d_end]]
                            stop = d_end + 1 + tslen if tslen >= 0 else d_end + 1
                    if stop <= end:
                        val = int(hx[k + h : d_end], 16) if d else 0
                        stamp: int | None = None
                        tbits = 0
                        if tslen < 0:
                            out = BadSequence(pkt_index, b"", kind, marker)
                            fatal = True
                        elif stamped:
                            tbits = tslen * 4
                            mask = (1 << tbits) - 1
                            update = int(hx[d_end + 1 : stop], 16) if tslen else 0
                            if ts_type == 3:
                                ts = (ts & ~mask) | (update & mask)
                            elif ts_type == 4:
                                ts = gray_to_bin((bin_to_gray(ts) & ~mask) | (update & mask))
                            elif not recover:
                                out = BadSequence(pkt_index, b"", kind, marker)
                                fatal = True
                            stamp = ts if ts_type else None
                        if out is None:
                            if emit == 0:
                                out = Data(pkt_index, b"", bits, val, marker, stamp, tbits)
                            elif emit == 1:
                                channel = 0
                                out = M8(pkt_index, b"", val)
                            elif emit == 2:
                                channel = (channel & 0xFF00) | val
                                out = C8(pkt_index, b"", channel)
                            elif emit == 3:
                                channel = val
                                out = C16(pkt_index, b"", val)
                            elif emit == 4:
                                channel = 0
                                out = MErr(pkt_index, b"", val)
                            elif emit == 5:
                                channel = 0
                                out = GErr(pkt_index, b"", val)
                            elif emit == 6:
                                out = Flag(pkt_index, b"", stamp, tbits)
                            elif emit == 7:
                                out = Trig(pkt_index, b"", val, stamp, tbits)
                            elif emit == 8:
                                out = Freq(pkt_index, b"", val)
                            else:
                                out = Null(pkt_index, b"", stamp, tbits)
                elif action == ACT_VERSION:
                    cur_type = _P.VERSION
                    if k + 3 < end:
                        stop = k + 4
                        v = _HEX[hx[k + 3]]
                        if v == 3 or v == 4:
                            ts_type = v
                            channel = 0
                            out = Version(pkt_index, b"", v)
                        else:
                            out = BadSequence(pkt_index, b"", cur_type)
                            fatal = True
                elif action == ACT_RESERVED:
                    cur_type = _P.RESERVED
                    stop = k + h
                    opcode = 0xF | _HEX[hx[k + h - 1]] << (4 * (h - 1)) if h > 1 else _HEX[hx[k]]
                    out = Reserved(pkt_index, b"", opcode)
                    fatal = True
                else:
                    # ASYNC: F nibbles until the detector fires; any other nibble first is an error.
                    detector = _detect(*detector, hx[det:k])
                    det = at
                    num_f, sync_start, is_sync = detector
                    i = k
                    while i < end:
                        ch = hx[i]
                        i += 1
                        if ch == "f":
                            num_f = (num_f + 1) & 0xFF
                            sync_start = True
                        elif sync_start:
                            if ch == "0" and num_f >= 21:
                                is_sync = True
                            else:
                                num_f = 0
                                sync_start = False
                                is_sync = False
                        if i - k > 2:
                            if is_sync:
                                cur_type = _P.ASYNC
                                out = Async(pkt_index, b"")
                                stop = i
                                detector = (0, False, False)
                                det = stop
                                break
                            if not sync_start:
                                out = BadSequence(pkt_index, b"", cur_type)
                                fatal = True
                                stop = i
                                break

            if out is None:
                break  # the packet goes on past the window, or the stream ends inside it
            raw = data[first : (stop + 1) >> 1]
            if at & 1:
                raw = high[data[q]] + raw
            out.raw = raw
            yield out
            if fatal:
                sync.ts_type = ts_type
                return at + 1 if recover else -1
            at = stop
        # The window is used up, or the packet at ``at`` is cut by its end: keep
        # that packet's bytes and read it again, whole, with the next block.
        detector = _detect(*detector, hx[det:at])
        if not win.advance(at >> 1):
            break
        data = win.data
        hx = data.translate(_SWAP).hex()
        sync.hx_data = data
        sync.hx = hx
        end = len(hx)
        at &= 1
        det = at
        cur = win.cursor()
        base = cur.base
        run_end = cur.limit
    if at < end and complete:
        raw = data[(at + 1) >> 1 :]
        if at & 1:
            raw = high[data[at >> 1]] + raw
        marker = spec is not None and spec[0] == ACT_PACKET and spec[4]
        yield IncompleteEot(pkt_index, raw, cur_type, marker)
    return -1
