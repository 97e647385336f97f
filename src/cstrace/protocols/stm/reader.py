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

* The stream is processed in the blocks the deformatter hands over (one per
  frame and trace ID: :meth:`Stream.chunks`). A packet's index is the block
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
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from cstrace.capture.stream import Stream
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
    StmTsType,
    Trig,
    Version,
)

__all__ = [
    "OPCODES_1N",
    "OPCODES_2N",
    "OPCODES_3N",
    "OpRow",
    "bin_to_gray",
    "gray_to_bin",
    "iter_packets",
]

# Actions of an opcode row.
ACT_PACKET = 0  # fixed number of payload nibbles, then an optional timestamp
ACT_PREFIX_F = 1  # opcode continues with a second nibble (Fn)
ACT_PREFIX_F0 = 2  # opcode continues with a third nibble (F0n)
ACT_ASYNC = 3  # F nibbles up to the terminating 0
ACT_VERSION = 4  # one nibble: the protocol version
ACT_RESERVED = 5  # not used by CoreSight STM

# An opcode row: (opcode nibble, spec name, packet type, action, payload nibbles,
# marker, timestamp).
OpRow = tuple[int, str, StmPktType, int, int, bool, bool]

_P = StmPktType

# STPv2 one-nibble opcodes (MIPI STPv2 opcode table; CoreSight STM-500 TRM,
# table "STPv2 packets"), in opcode order.
OPCODES_1N: tuple[OpRow, ...] = (
    (0x0, "NULL", _P.NULL, ACT_PACKET, 0, False, False),
    (0x1, "M8", _P.M8, ACT_PACKET, 2, False, False),
    (0x2, "MERR", _P.MERR, ACT_PACKET, 2, False, False),
    (0x3, "C8", _P.C8, ACT_PACKET, 2, False, False),
    (0x4, "D8", _P.D8, ACT_PACKET, 2, False, False),
    (0x5, "D16", _P.D16, ACT_PACKET, 4, False, False),
    (0x6, "D32", _P.D32, ACT_PACKET, 8, False, False),
    (0x7, "D64", _P.D64, ACT_PACKET, 16, False, False),
    (0x8, "D8MTS", _P.D8, ACT_PACKET, 2, True, True),
    (0x9, "D16MTS", _P.D16, ACT_PACKET, 4, True, True),
    (0xA, "D32MTS", _P.D32, ACT_PACKET, 8, True, True),
    (0xB, "D64MTS", _P.D64, ACT_PACKET, 16, True, True),
    (0xC, "D4", _P.D4, ACT_PACKET, 1, False, False),
    (0xD, "D4MTS", _P.D4, ACT_PACKET, 1, True, True),
    (0xE, "FLAG_TS", _P.FLAG, ACT_PACKET, 0, False, True),
    (0xF, "(Fn)", _P.NO_ERR_TYPE, ACT_PREFIX_F, 0, False, False),
)

# STPv2 two-nibble opcodes Fn.
OPCODES_2N: tuple[OpRow, ...] = (
    (0x0, "(F0n)", _P.NO_ERR_TYPE, ACT_PREFIX_F0, 0, False, False),
    (0x1, "(reserved F1)", _P.RESERVED, ACT_RESERVED, 0, False, False),
    (0x2, "GERR", _P.GERR, ACT_PACKET, 2, False, False),
    (0x3, "C16", _P.C16, ACT_PACKET, 4, False, False),
    (0x4, "D8TS", _P.D8, ACT_PACKET, 2, False, True),
    (0x5, "D16TS", _P.D16, ACT_PACKET, 4, False, True),
    (0x6, "D32TS", _P.D32, ACT_PACKET, 8, False, True),
    (0x7, "D64TS", _P.D64, ACT_PACKET, 16, False, True),
    (0x8, "D8M", _P.D8, ACT_PACKET, 2, True, False),
    (0x9, "D16M", _P.D16, ACT_PACKET, 4, True, False),
    (0xA, "D32M", _P.D32, ACT_PACKET, 8, True, False),
    (0xB, "D64M", _P.D64, ACT_PACKET, 16, True, False),
    (0xC, "D4TS", _P.D4, ACT_PACKET, 1, False, True),
    (0xD, "D4M", _P.D4, ACT_PACKET, 1, True, False),
    (0xE, "FLAG", _P.FLAG, ACT_PACKET, 0, False, False),
    (0xF, "ASYNC", _P.ASYNC, ACT_ASYNC, 0, False, False),
)

# STPv2 three-nibble opcodes F0n. USER, TIME, FREQ_TS and XSYNC (F02-F05, F09-)
# are not emitted by CoreSight STM; like the reference, they are reserved here.
OPCODES_3N: tuple[OpRow, ...] = (
    (0x0, "VERSION", _P.VERSION, ACT_VERSION, 0, False, False),
    (0x1, "NULL_TS", _P.NULL, ACT_PACKET, 0, False, True),
    *((n, f"(reserved F0{n:X})", _P.RESERVED, ACT_RESERVED, 0, False, False) for n in (2, 3, 4, 5)),
    (0x6, "TRIG", _P.TRIG, ACT_PACKET, 2, False, False),
    (0x7, "TRIG_TS", _P.TRIG, ACT_PACKET, 2, False, True),
    (0x8, "FREQ", _P.FREQ, ACT_PACKET, 8, False, False),
    *(
        (n, f"(reserved F0{n:X})", _P.RESERVED, ACT_RESERVED, 0, False, False)
        for n in range(0x9, 0x10)
    ),
)


def _table(rows: tuple[OpRow, ...]) -> tuple[OpRow, ...]:
    """Index rows by opcode nibble (every nibble exactly once)."""
    table: list[OpRow | None] = [None] * 16
    for row in rows:
        if table[row[0]] is not None:
            raise ValueError(f"opcode {row[0]:X} defined twice")
        table[row[0]] = row
    if any(r is None for r in table):
        raise ValueError("opcode table does not cover every nibble")
    return tuple(r for r in table if r is not None)


_T1 = _table(OPCODES_1N)
_T2 = _table(OPCODES_2N)
_T3 = _table(OPCODES_3N)

# Reader states and packet phases.
_WAIT_SYNC = 0
_PH_HDR = 1
_PH_F = 2
_PH_F0 = 3
_PH_DATA = 4
_PH_VERSION = 5
_PH_TSLEN = 6
_PH_TS = 7
_PH_ASYNC = 8

_ASYNC_RAW = b"\xff" * 10 + b"\x0f"
_TS_NIBBLES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, -1)
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

    __slots__ = ("_slot", "_tail")

    def __init__(self, stream: Stream) -> None:
        tail: Any = getattr(stream, "frame_tail", None)
        self._tail: Callable[[int, int], bytes] | None = tail if callable(tail) else None
        self._slot = bytearray(15)

    def note(self, block: bytes) -> None:
        """Record a block as it enters the reader."""
        if self._tail is None and len(block) <= 15:
            self._slot[: len(block)] = block

    def read(self, number: int, block: bytes, count: int) -> bytes:
        """``count`` bytes after the end of ``block`` (block ``number`` of the stream)."""
        if count <= 0:
            return b""
        if self._tail is not None:
            got = self._tail(number, count)
            return (bytes(got) + bytes(count))[:count]
        if len(block) > 15:
            return bytes(count)
        out = bytes(self._slot[len(block) :]) + struct.pack("<II", len(block), 0)
        return (out + bytes(count))[:count]


def iter_packets(
    stream: Stream, config: object = None, complete: bool = True
) -> Iterator[StmPacket]:
    """Cut one STM trace ID's bytes into packets, as the reference decoder does.

    ``complete`` is False when the capture was cut short: then a packet in
    progress at the end is dropped instead of flushed as INCOMPLETE_EOT.
    """
    past = _PastBlock(stream)

    synced = False
    state = _WAIT_SYNC
    raw = bytearray()
    nn = 0  # nibbles of the current packet (8-bit counter)
    pkt_index = 0
    # ASYNC detection, run on every nibble (8-bit F counter).
    num_f = 0
    sync_start = False
    is_sync = False
    sync_index = 0
    # State the reference keeps in its packet object across packets.
    channel = 0
    ts = 0
    ts_type = StmTsType.UNKNOWN
    cur_type = _P.NOTSYNC
    # Current packet.
    row: OpRow = _T1[0]
    marker = False
    data_end = 0
    val = 0
    ts_req = 0
    ts_got = 0
    ts_val = 0
    done: StmPacket | None = None
    fatal = False

    for number, (blk, block) in enumerate(stream.chunks()):
        past.note(block)
        nibs = [x for b in block for x in (b & 15, b >> 4)]
        end = len(nibs)
        k = 0  # next nibble; bytes consumed = (k + 1) >> 1
        while True:
            if state == _WAIT_SYNC:
                if k >= end:
                    break
                # One pass of the reference's search for ASYNC (waitForSync).
                start = (k + 1) >> 1
                pkt_index = blk + start
                nn = 22 if is_sync else num_f
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
                    cur_type = _P.NOTSYNC
                    done = NotSync(pkt_index, bytes(raw))
                else:
                    cur_type = _P.ASYNC
                    synced = True
                    num_f = 0
                    sync_start = False
                    is_sync = False
                    pkt_index = sync_index
                    raw += _ASYNC_RAW
                    done = Async(pkt_index, bytes(raw))
            else:
                # Synchronised: read one nibble of the current packet.
                if k >= end:
                    break
                if state == _PH_HDR:
                    pkt_index = blk + ((k + 1) >> 1)
                nib = nibs[k]
                if not k & 1:
                    raw.append(block[k >> 1])
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
                        is_sync = False

                if state in (_PH_HDR, _PH_F, _PH_F0):
                    row = (_T1 if state == _PH_HDR else _T2 if state == _PH_F else _T3)[nib]
                    action = row[3]
                    if action == ACT_PACKET:
                        cur_type = row[2]
                        marker = row[5]
                        val = 0
                        data_end = nn + row[4]
                        if row[4]:
                            state = _PH_DATA
                            continue
                        if row[6]:
                            state = _PH_TSLEN
                            continue
                        state = _PH_DATA  # no payload, no timestamp: complete
                    elif action == ACT_PREFIX_F:
                        state = _PH_F
                        continue
                    elif action == ACT_PREFIX_F0:
                        state = _PH_F0
                        continue
                    elif action == ACT_ASYNC:
                        state = _PH_ASYNC
                        continue
                    elif action == ACT_VERSION:
                        cur_type = _P.VERSION
                        state = _PH_VERSION
                        continue
                    else:
                        cur_type = _P.RESERVED
                        if state == _PH_HDR:
                            opcode = nib
                        elif state == _PH_F:
                            opcode = 0xF | nib << 4
                        else:
                            opcode = 0xF | nib << 8
                        done = Reserved(pkt_index, bytes(raw), opcode)
                        fatal = True
                elif state == _PH_DATA:
                    val = (val << 4) | nib
                    if nn != data_end:
                        continue
                elif state == _PH_VERSION:
                    if nib == 3 or nib == 4:
                        ts_type = StmTsType(nib)
                        channel = 0
                        done = Version(pkt_index, bytes(raw), nib)
                    else:
                        done = BadSequence(pkt_index, bytes(raw), cur_type, marker)
                        fatal = True
                elif state == _PH_TSLEN:
                    ts_req = _TS_NIBBLES[nib]
                    if ts_req < 0:
                        done = BadSequence(pkt_index, bytes(raw), cur_type, marker)
                        fatal = True
                    elif ts_req:
                        ts_got = 0
                        ts_val = 0
                        state = _PH_TS
                        continue
                elif state == _PH_TS:
                    ts_val = (ts_val << 4) | nib
                    ts_got += 1
                    if ts_got != ts_req:
                        continue
                elif state == _PH_ASYNC:
                    if is_sync:
                        cur_type = _P.ASYNC
                        num_f = 0
                        sync_start = False
                        is_sync = False
                        done = Async(pkt_index, bytes(raw))
                    elif not sync_start:
                        done = BadSequence(pkt_index, bytes(raw), cur_type, marker)
                        fatal = True
                    else:
                        continue

                if done is None:
                    # Payload complete (state _PH_DATA), or timestamp complete.
                    if state == _PH_DATA and row[6]:
                        state = _PH_TSLEN
                        continue
                    stamp: int | None = None
                    bits = 0
                    if row[6]:
                        bits = ts_req * 4 if state == _PH_TS else 0
                        update = ts_val if state == _PH_TS else 0
                        mask = (1 << bits) - 1
                        if ts_type == StmTsType.NATBINARY:
                            ts = (ts & ~mask) | (update & mask)
                        elif ts_type == StmTsType.GREY:
                            gray = bin_to_gray(ts)
                            ts = gray_to_bin((gray & ~mask) | (update & mask))
                        else:
                            done = BadSequence(pkt_index, bytes(raw), cur_type, marker)
                            fatal = True
                        stamp = ts
                    if done is None:
                        kind = row[2]
                        r = bytes(raw)
                        if kind in _DATA_BITS:
                            done = Data(pkt_index, r, _DATA_BITS[kind], val, marker, stamp, bits)
                        elif kind == _P.M8:
                            channel = 0
                            done = M8(pkt_index, r, val)
                        elif kind == _P.C8:
                            channel = (channel & 0xFF00) | val
                            done = C8(pkt_index, r, channel)
                        elif kind == _P.C16:
                            channel = val
                            done = C16(pkt_index, r, val)
                        elif kind == _P.MERR:
                            channel = 0
                            done = MErr(pkt_index, r, val)
                        elif kind == _P.GERR:
                            channel = 0
                            done = GErr(pkt_index, r, val)
                        elif kind == _P.FLAG:
                            done = Flag(pkt_index, r, stamp, bits)
                        elif kind == _P.TRIG:
                            done = Trig(pkt_index, r, val, stamp, bits)
                        elif kind == _P.FREQ:
                            done = Freq(pkt_index, r, val)
                        else:
                            done = Null(pkt_index, r, stamp, bits)

            # Output the finished packet (the reference's outputPacket).
            if done is not None:
                yield done
                done = None
                if fatal:
                    return
                raw.clear()
                nn = 0
                marker = False
                if k & 1:
                    raw.append(block[k >> 1] & 0xF0)  # unused high nibble, printed as a byte
                state = _PH_HDR if synced else _WAIT_SYNC

    if complete and nn > 0 and state != _WAIT_SYNC:
        yield IncompleteEot(pkt_index, bytes(raw), cur_type, marker)
