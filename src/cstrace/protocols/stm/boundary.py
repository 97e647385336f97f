"""STM packet boundaries without an ASYNC packet, found from the STPv2 grammar.

Input: STM data as a string of hexadecimal nibble digits in protocol order (the
first nibble of a byte is its bits [3:0]); output: where to start reading
packets, and from which packet boundary on that reading is certain. Used by the
reader when :attr:`~cstrace.protocols.stm.config.StmConfig.decode_before_sync`
is set.

The rule is the one of :mod:`cstrace.protocols.unsynced`, on nibbles: runs of
:data:`RUN` packets, readings that start within :data:`SPAN` nibbles (the
longest packet, D64TS with a 16-nibble timestamp) and a :data:`HORIZON` in
nibbles. Unlike ITM, nearly every nibble string is valid STPv2: a packet is
invalid only when its opcode is reserved (``F1``, ``F02``-``F05``,
``F09``-``F0F``), its timestamp length nibble is ``F``, a VERSION is other than
3 or 4, or an ``FF`` opcode does not begin an ASYNC (21 or more ``F`` nibbles
then ``0``). So the start of the data is no evidence of a packet boundary, and
the reader decodes STM only from the first unambiguous boundary, where the
readings of the first nibbles meet; when they do not meet, it waits for an
ASYNC as the reference does.
"""

from __future__ import annotations

import re

from cstrace.protocols import unsynced
from cstrace.protocols.stm.opcodes import (
    ACT_ASYNC,
    ACT_PACKET,
    ACT_VERSION,
    TABLE_1N,
    TABLE_2N,
    TABLE_3N,
    TS_NIBBLES,
    OpRow,
)
from cstrace.protocols.unsynced import INVALID

__all__ = [
    "HORIZON",
    "INVALID",
    "RUN",
    "SPAN",
    "find_async",
    "find_start",
    "first_certain",
    "packet_end",
]

RUN = 16
"""Packets that must read validly in a row from the decode start."""
SPAN = 35
"""The longest STM packet other than ASYNC, in nibbles (D64TS: 2 + 16 + 1 + 16)."""
HORIZON = 4096
"""Nibbles after the decode start within which the readings of its first nibbles must meet."""

_DIGITS = "0123456789abcdef"
_ROW1 = dict(zip(_DIGITS, TABLE_1N, strict=True))
_ROW2 = dict(zip(_DIGITS, TABLE_2N, strict=True))
_ROW3 = dict(zip(_DIGITS, TABLE_3N, strict=True))
_TSLEN = dict(zip(_DIGITS, TS_NIBBLES, strict=True))
_F_RUN_END = unsynced.RunEnd(re.compile("f{21,}"), re.compile("[^f]"), 21)
"""The end of a run of ``f`` nibbles (an ASYNC has at least 21)."""
_ASYNC_END = "f" * 21 + "0"


def packet_end(hx: str, k: int) -> int:
    """End (exclusive) of the packet whose opcode starts at nibble ``hx[k]``.

    :data:`INVALID` when it is not a valid packet (see the module text), and
    ``len(hx) + 1`` when the data ends before the packet does.
    """
    n = len(hx)
    c = hx[k]
    row: OpRow
    if c != "f":
        row = _ROW1[c]
        h = 1
    elif k + 1 >= n:
        return n + 1
    elif hx[k + 1] != "0":
        row = _ROW2[hx[k + 1]]
        h = 2
    elif k + 2 >= n:
        return n + 1
    else:
        row = _ROW3[hx[k + 2]]
        h = 3
    action = row[3]
    if action == ACT_PACKET:
        end = k + h + row[4]
        if row[6]:  # a timestamp follows: a length nibble, then that many nibbles
            if end >= n:
                return n + 1
            length = _TSLEN[hx[end]]
            if length < 0:
                return INVALID
            end += 1 + length
        return end if end <= n else n + 1
    if action == ACT_VERSION:
        if k + 3 >= n:
            return n + 1
        return k + 4 if hx[k + 3] in "34" else INVALID
    if action == ACT_ASYNC:
        i = _F_RUN_END(hx, k)
        if i >= n:
            return n + 1
        return i + 1 if hx[i] == "0" and i - k >= 21 else INVALID
    return INVALID  # reserved opcode


def find_start(hx: str, q: int, final: bool) -> tuple[int, bool]:
    """The decode start at or after nibble ``hx[q]``, and whether it is settled
    (:func:`cstrace.protocols.unsynced.find_start`)."""
    return unsynced.find_start(hx, q, final, packet_end, RUN)


def first_certain(hx: str, s: int) -> int | None:
    """The first unambiguous packet boundary of the reading from nibble ``hx[s]``, if any
    (:func:`cstrace.protocols.unsynced.first_certain`)."""
    return unsynced.first_certain(hx, s, packet_end, SPAN, HORIZON)


def find_async(hx: str, q: int) -> int:
    """The nibble where the first ASYNC at or after ``hx[q]`` starts, or -1."""
    i = hx.find(_ASYNC_END, q)
    if i < 0:
        return -1
    while i > q and hx[i - 1] == "f":  # the ASYNC starts where its run of F does
        i -= 1
    return i
