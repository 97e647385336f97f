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

When packets before synchronisation are decoded (``decode_before_sync``), an
UNSYNCED packet starts decoding as an ASYNC would, and the first element
decoded after it comes after a warning ``DIAGNOSTIC``
(:attr:`~cstrace.errors.DiagKind.UNSYNCED_START`, whose ``detail`` is the
capture index of the first unambiguous packet boundary); an ASYNC read before
any element makes that warning moot, and it is not given. The master is not
known until an M8 (``id_valid`` False). A RESERVED or BAD_SEQUENCE packet then
gives an error ``DIAGNOSTIC`` and a ``NO_SYNC`` (bad packet), master and channel
become unknown, and decoding goes on from the reader's next UNSYNCED or ASYNC
packet.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.elements import Diagnostic, Element, EoTrace, NoSync, SWTrace, UnsyncReason
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.stm.config import StmConfig
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
    Unsynced,
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
    recover = isinstance(config, StmConfig) and config.decode_before_sync
    tid = context.trace_id
    pending: Diagnostic | None = None  # the warning for elements decoded before any ASYNC
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
            elif isinstance(pkt, Unsynced):
                state = _DECODE
                pending = Diagnostic(
                    pkt.resume,
                    tid,
                    DiagCode.NONE,
                    DiagKind.UNSYNCED_START,
                    pkt.resume if pkt.certain is None else pkt.certain,
                    Severity.WARNING,
                )
            continue
        if pending is not None:
            if isinstance(pkt, Async):
                pending = None  # synchronised before anything was decoded without it
            elif isinstance(pkt, Data | Flag | Trig | Freq | MErr | GErr) or (
                isinstance(pkt, Null) and pkt.timestamp is not None
            ):
                yield pending  # this packet gives the first element
                pending = None
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
                if not recover:
                    return  # the reference stops decoding on a bad packet
                kind = DiagKind.BAD_PACKET if isinstance(pkt, Reserved) else DiagKind.BAD_SEQUENCE
                yield Diagnostic(last, tid, DiagCode.BAD_DECODE_PKT, kind, int(pkt.KIND))
                yield NoSync(last, UnsyncReason.BAD_PACKET)
                state = _WAIT_SYNC
                master = channel = 0
                id_valid = False
                pending = None
            case _:
                pass  # ASYNC, NULL, NOTSYNC, incomplete packet: nothing to output
    if context.complete:
        yield EoTrace(last, UnsyncReason.EOT)
