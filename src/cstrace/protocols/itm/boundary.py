"""ITM packet boundaries without a synchronisation packet, found from the packet grammar.

Input: ITM bytes (one trace ID's); output: where to start reading packets, and
from which packet boundary on that reading is certain. Used by the reader when
:attr:`~cstrace.protocols.itm.config.ItmConfig.decode_before_sync` is set, and
by :func:`cstrace.inputs.detect.identify_stream` to recognise ITM without sync.

Every ITM header says how long its packet is (ARMv7-M ARM, Appendix D4; ARMv8-M
ARM, "ITM and DWT packet protocol"), so a stream can be cut into packets from
any byte; what the bytes cannot say outright is which byte a packet starts on.
The rule (:mod:`cstrace.protocols.unsynced`, with runs of :data:`RUN` packets,
readings that start within :data:`SPAN` bytes and a :data:`HORIZON` in bytes):
the **decode start** is the first byte from which :data:`RUN` packets in a row
read as valid packets (or all the packets up to the end of the data), so a
capture that begins on a packet boundary, as a capture started with the trace
usually does, is read from its first byte, as independent ITM decoders read
it; the **first unambiguous boundary** is the first packet boundary of that
reading that every valid reading starting on one of the next ``SPAN - 1`` bytes
also reaches. A capture that begins inside a packet has its first real boundary
among those bytes (no packet other than a synchronisation packet is longer than
:data:`SPAN` bytes), so from this boundary on the packets are the same whichever
byte the capture really began on.

A packet is invalid when its header is reserved (``0bxxxx0100`` other than the
global timestamp headers, and ``0b10xx0000``, which the reference decoder reads
as a local timestamp); when its continuation bytes run past the packet's
longest length; when a zero byte does not begin a synchronisation packet (five
or more zero bytes, then ``0x80``); when a hardware source packet's payload size
does not fit its discriminator (event counter: 1 byte, exception trace: 2,
periodic PC sample: 1 or 4); or when an exception trace packet has function 0
(reserved).
"""

from __future__ import annotations

import re

from cstrace.protocols import unsynced
from cstrace.protocols.unsynced import INVALID

__all__ = ["HORIZON", "INVALID", "RUN", "SPAN", "find_start", "first_certain", "packet_end", "scan"]

RUN = 16
"""Packets that must read validly in a row from the decode start."""
SPAN = 7
"""The longest ITM packet other than synchronisation (GTS2: header and 6 bytes)."""
HORIZON = 2048
"""Bytes after the decode start within which the readings of its first bytes must meet."""

_ZEROS_END = unsynced.RunEnd(re.compile(b"\x00{4,}"), re.compile(b"[^\x00]"), 4)
"""The end of the zero bytes after a zero header (four or more make a synchronisation
packet's run of at least five)."""

_SHORT_ZEROS = 32
"""Zero bytes after a zero header looked at one by one; a longer run is measured by
``_ZEROS_END`` (once per data, however many of its bytes are tried as a packet start)."""

# Longest packet (header included) of the packets with continuation bytes, by header.
_CONTINUED = {0x94: 5, 0xB4: 7}


def packet_end(data: bytes, p: int) -> int:
    """End (exclusive) of the packet that starts at ``data[p]``.

    :data:`INVALID` when it is not a valid packet (see the module text), and
    ``len(data) + 1`` when the data ends before the packet does.
    """
    n = len(data)
    h = data[p]
    low = h & 3
    if low:  # software (instrumentation) or hardware source: 1, 2 or 4 payload bytes
        size = 4 if low == 3 else low
        if h & 4:
            disc = h >> 3
            if (disc == 0 and size != 1) or (disc == 1 and size != 2) or (disc == 2 and size == 2):
                return INVALID
            if disc == 1 and p + 2 < n and not data[p + 2] & 0x30:
                return INVALID  # exception trace function 0 is reserved
        end = p + 1 + size
        return end if end <= n else n + 1
    if h == 0:  # synchronisation: at least five zero bytes, then 0x80
        i = p + 1
        short = min(n, p + _SHORT_ZEROS)
        while i < short and not data[i]:
            i += 1
        if i == short:
            i = _ZEROS_END(data, i)  # (a long run of zeros measured once)
        if i >= n:
            return n + 1
        return i + 1 if data[i] == 0x80 and i - p >= 5 else INVALID
    if h == 0x70:  # overflow
        return p + 1
    nib = h & 0x0F
    if nib == 0:  # local timestamp
        if not h & 0x80:
            return p + 1  # format 2: the value is in the header
        if not h & 0x40:
            return INVALID  # 0b10xx0000 is reserved
        longest = 5
    elif nib & 0x0B == 0x08:  # extension: 0bCppp1S00
        if not h & 0x80:
            return p + 1
        longest = 5
    else:
        longest = _CONTINUED.get(h, 0)
        if not longest:
            return INVALID  # reserved 0bxxxx0100
    i = p + 1
    limit = p + longest
    while i < limit and i < n and data[i] & 0x80:
        i += 1
    if i >= limit:
        return INVALID
    return i + 1 if i < n else n + 1


def find_start(data: bytes, q: int, final: bool) -> tuple[int, bool]:
    """The decode start at or after ``data[q]``, and whether it is settled
    (:func:`cstrace.protocols.unsynced.find_start`).

    A synchronisation packet is a certain start: one that comes before the
    start a run of valid packets gives (a bad packet soon after it, say) is
    the start.
    """
    # The first synchronisation packet first (at memory speed): only the bytes before it
    # are tried as starts of a run of valid packets, so that a stream that loses
    # synchronisation again and again costs what its bytes cost.
    k = data.find(_SYNC_TAIL, q)
    if k >= 0:
        while k > q and data[k - 1] == 0:
            k -= 1
        s, settled = unsynced.find_start(data, q, final, packet_end, RUN, k)
        return (k, True) if s >= k else (s, settled)
    return unsynced.find_start(data, q, final, packet_end, RUN)


_SYNC_TAIL = b"\x00\x00\x00\x00\x00\x80"
"""The end of an ITM synchronisation packet: at least 47 zero bits, then a one."""


def first_certain(data: bytes, s: int) -> int | None:
    """The first unambiguous packet boundary of the reading from ``data[s]``, if any
    (:func:`cstrace.protocols.unsynced.first_certain`)."""
    return unsynced.first_certain(data, s, packet_end, SPAN, HORIZON)


def scan(data: bytes) -> tuple[int, int, int, int]:
    """Read ``data`` as ITM from its decode start, starting again after each invalid packet.

    Returns (decode start, valid packets, invalid packets, bytes in valid
    packets): the evidence that ``data`` is ITM when it holds no sync.
    """
    return unsynced.scan(data, packet_end, RUN)
