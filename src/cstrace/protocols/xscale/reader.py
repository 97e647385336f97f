"""XScale reader: trace buffer dumps → messages.

Input: an ``xscale_tb`` capture: one or more fill records, each 259
little-endian 32-bit words: the 256 trace buffer entries oldest first (low
byte of each word), the checkpoint registers CHKPT0 and CHKPT1, and the PC when
the core entered debug state (the first 258 words are what the debug handler
returns, thesis §7.3; the PC is cstrace's addition so a file holds everything
the decode needs). A record cut short is decoded as far as its entries go.

Output: :class:`~cstrace.protocols.xscale.packets.Message` packets in buffer
order, each followed after the last entry of a record by a
:class:`~cstrace.protocols.xscale.packets.FillEnd`.

The buffer is parsed backwards to tell address entries from message bytes (the
newest entry is always a message; the four entries before an indirect-branch
message are its target address, most significant byte first), as the thesis
§7.2 describes. Leading zero entries that are not part of an address are
unused entries of a buffer that did not fill. An address cut by the start of a
wrapped buffer is unknown. Message kinds come from a 256-entry table built
from the rows of table 7.1.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from cstrace.capture.stream import Stream
from cstrace.protocols.base import Packet
from cstrace.protocols.xscale.config import XscaleConfig
from cstrace.protocols.xscale.packets import FillEnd, Message, MsgKind

__all__ = ["ENTRIES", "MESSAGE_ROWS", "MESSAGE_TABLE", "RECORD_WORDS", "iter_packets", "parse_fill"]

ENTRIES = 256
RECORD_WORDS = ENTRIES + 3

# (first byte, last byte, kind, source): thesis table 7.1 "XScale trace messages".
MESSAGE_ROWS: tuple[tuple[int, int, MsgKind, str], ...] = (
    (0x00, 0x7F, MsgKind.EXCEPTION, "table 7.1: exception b0VVVCCCC"),
    (0x80, 0x8F, MsgKind.DIRECT, "table 7.1: direct branch b1000CCCC"),
    (0x90, 0x9F, MsgKind.INDIRECT, "table 7.1: indirect branch b1001CCCC"),
    (0xA0, 0xBF, MsgKind.RESERVED, "reserved"),
    (0xC0, 0xCF, MsgKind.DIRECT_CHKPT, "table 7.1: checkpointed direct branch b1100CCCC"),
    (0xD0, 0xDF, MsgKind.INDIRECT_CHKPT, "table 7.1: checkpointed indirect branch b1101CCCC"),
    (0xE0, 0xFE, MsgKind.RESERVED, "reserved"),
    (0xFF, 0xFF, MsgKind.ROLLOVER, "table 7.1: roll-over b11111111"),
)


def _table() -> tuple[MsgKind, ...]:
    t: list[MsgKind | None] = [None] * 256
    for lo, hi, kind, _src in MESSAGE_ROWS:
        for b in range(lo, hi + 1):
            t[b] = kind
    return tuple(k if k is not None else MsgKind.RESERVED for k in t)


MESSAGE_TABLE = _table()
_INDIRECT = (MsgKind.INDIRECT, MsgKind.INDIRECT_CHKPT)


def parse_fill(entries: bytes, base: int = 0) -> list[Message]:
    """The messages of one buffer fill (entries oldest first), addresses attached."""
    n = len(entries)
    is_addr = [False] * n
    i = n - 1
    while i >= 0:
        if MESSAGE_TABLE[entries[i]] in _INDIRECT:
            for k in range(1, 5):
                if i - k >= 0:
                    is_addr[i - k] = True
            i -= 5
        else:
            i -= 1
    j = 0
    while j < n and entries[j] == 0 and not is_addr[j]:
        j += 1
    out: list[Message] = []
    table = MESSAGE_TABLE
    for i in range(j, n):
        if is_addr[i]:
            continue
        b = entries[i]
        kind = table[b]
        target = None
        if kind in _INDIRECT and i >= 4 and all(is_addr[i - k] for k in range(1, 5)):
            target = int.from_bytes(entries[i - 4 : i], "big")
        vector = ((b >> 4) & 7) << 2 if kind == MsgKind.EXCEPTION else 0
        out.append(Message(base + i, bytes([b]), kind, b & 0xF, vector, target))
    return out


def iter_packets(stream: Stream, config: XscaleConfig, complete: bool = True) -> Iterator[Packet]:
    """The messages of every fill record in an ``xscale_tb`` capture."""
    data = stream.data
    nwords = len(data) // 4
    words = np.frombuffer(data, dtype="<u4", count=nwords).tolist() if nwords else []
    rec = 0
    while rec * RECORD_WORDS < len(words):
        w = words[rec * RECORD_WORDS : (rec + 1) * RECORD_WORDS]
        base = rec * RECORD_WORDS * 4
        entries = bytes(x & 0xFF for x in w[:ENTRIES])
        msgs = parse_fill(entries, base // 4)
        yield from msgs
        if len(w) == RECORD_WORDS:
            nck = sum(1 for m in msgs if m.kind in (MsgKind.DIRECT_CHKPT, MsgKind.INDIRECT_CHKPT))
            raw = data[base + 4 * ENTRIES : base + 4 * RECORD_WORDS]
            yield FillEnd(base // 4 + ENTRIES, raw, w[ENTRIES], w[ENTRIES + 1], w[ENTRIES + 2], nck)
        rec += 1
