"""STM decoder: STM packets → generic ``SWTRACE`` elements.

Input: the packets of :mod:`cstrace.protocols.stm.reader`; output: the
elements of :mod:`cstrace.elements` the reference decoder produces for them:
``NO_SYNC`` before the first ASYNC, one ``SWTRACE`` per payload carrying packet
(data, flag, trigger, frequency, master and global errors, timestamped NULL),
and ``EO_TRACE`` at the end.

The decoder keeps the current master and channel (set by M8, C8, C16, VERSION,
MERR and GERR) and whether they are valid: until the first M8, and after a
GERR, elements print ``Ma:0x??; Ch:0x??``. A RESERVED or BAD_SEQUENCE packet is
a fatal error for the reference decoder: decoding stops there, without
``EO_TRACE``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.elements import Element, EoTrace, NoSync, SWTrace, UnsyncReason
from cstrace.protocols.base import DecodeContext, Packet
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
    MErr,
    Null,
    Reserved,
    Trig,
    Version,
)

__all__ = ["iter_elements"]

_NO_SYNC = 0
_WAIT_SYNC = 1
_DECODE = 2


def iter_elements(
    packets: Iterable[Packet], config: object, context: DecodeContext
) -> Iterator[Element]:
    """Decode STM packets into software-trace elements."""
    state = _NO_SYNC
    reason = UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER
    master = 0
    channel = 0
    id_valid = False
    last = 0
    for pkt in packets:
        last = pkt.offset
        if state == _NO_SYNC:
            yield NoSync(last, reason)
            state = _WAIT_SYNC
        if state == _WAIT_SYNC:
            if isinstance(pkt, Async):
                state = _DECODE
            continue
        match pkt:
            case Data(bits=bits, value=value, marker=marker, timestamp=ts):
                yield SWTrace(last, master, channel, id_valid, bits, value, marker, False, ts)
            case M8(master=m):
                master = m
                channel = 0
                id_valid = True
            case C8(channel=c) | C16(channel=c):
                channel = c
            case Flag(timestamp=ts):
                yield SWTrace(last, master, channel, id_valid, marker=True, timestamp=ts)
            case Trig(value=value, timestamp=ts):
                yield SWTrace(last, master, channel, id_valid, 8, value, trigger=True, timestamp=ts)
            case Null(timestamp=ts) if ts is not None:
                yield SWTrace(last, master, channel, id_valid, timestamp=ts)
            case Freq(value=value):
                yield SWTrace(last, master, channel, id_valid, 32, value, frequency=True)
            case MErr(value=value):
                channel = 0
                yield SWTrace(last, master, channel, id_valid, 8, value, master_err=True)
            case GErr(value=value):
                master = 0
                channel = 0
                id_valid = False
                yield SWTrace(last, master, channel, id_valid, 8, value, global_err=True)
            case Version():
                master = 0
                channel = 0
            case Reserved() | BadSequence():
                return  # the reference stops decoding on a bad packet
            case _:
                pass  # ASYNC, NULL, NOTSYNC, incomplete packet: nothing to output
    if context.complete:
        yield EoTrace(last, UnsyncReason.EOT)
