"""ITM decoder: ITM packets → generic ``ITMTRACE`` elements.

Input: the packets of :mod:`cstrace.protocols.itm.reader` and the ITM
configuration (local timestamp prescaler); output: the elements of
:mod:`cstrace.elements` the reference decoder produces: ``NO_SYNC`` before
the first synchronization packet, one ``ITMTRACE`` per software or hardware
source payload, local timestamp and complete global timestamp, and
``EO_TRACE`` at the end.

State kept across packets: the stimulus port page (extension packet with
SH = 0 and a 3-bit payload: channel = page * 32 + port), the sum of local
timestamp deltas times the prescaler (reset by an overflow packet), the global
timestamp (GTS1 sets its low bits; GTS2 its high bits; after a GTS1 with the
Wrap bit, the timestamp is held back until the next GTS2), the clock change
flag, and an overflow that marks the next element. A RESERVED or BAD_SEQUENCE
packet is a fatal error for the reference decoder: decoding stops there,
without ``EO_TRACE``.

When packets before synchronisation are decoded (``decode_before_sync``), an
UNSYNCED packet starts decoding as a synchronisation packet would, and the
first element decoded after it comes after a warning ``DIAGNOSTIC``
(:attr:`~cstrace.errors.DiagKind.UNSYNCED_START`, whose ``detail`` is the
capture index of the first unambiguous packet boundary, or
:attr:`~cstrace.errors.DiagKind.UNSYNCED_AMBIGUOUS`); a synchronisation packet
read before any element makes that warning moot, and it is not given. A
RESERVED or BAD_SEQUENCE packet then gives an error ``DIAGNOSTIC`` and a
``NO_SYNC`` (bad packet), the state is reset, and decoding goes on from the
reader's next UNSYNCED or synchronisation packet.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.elements import (
    Diagnostic,
    Element,
    EoTrace,
    ITMPacketType,
    ITMTrace,
    NoSync,
    UnsyncReason,
)
from cstrace.errors import DiagCode, DiagKind, Severity
from cstrace.protocols.base import DecodeContext, Packet
from cstrace.protocols.itm.config import ItmConfig
from cstrace.protocols.itm.packets import (
    Async,
    BadSequence,
    Dwt,
    Extension,
    GlobalTs1,
    GlobalTs2,
    LocalTs,
    NotSync,
    Overflow,
    Reserved,
    Swit,
    Unsynced,
)

__all__ = ["iter_elements"]

_NO_SYNC = 0
_WAIT_SYNC = 1
_DECODE = 2

_LOCAL_TS_TYPES = (
    ITMPacketType.TS_SYNC,
    ITMPacketType.TS_DELAY,
    ITMPacketType.TS_PKT_DELAY,
    ITMPacketType.TS_PKT_TS_DELAY,
)
# Global timestamp bits replaced by a GTS1 of 1, 2, 3 or 4 payload bytes.
_GTS1_MASK = (0x7F, 0x3FFF, 0x1F_FFFF, 0x3FF_FFFF)
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF


def iter_elements(
    packets: Iterable[Packet], config: object, context: DecodeContext
) -> Iterator[Element]:
    """Decode ITM packets into ITM trace elements."""
    prescale = config.ts_prescale if isinstance(config, ItmConfig) else 1
    recover = isinstance(config, ItmConfig) and config.decode_before_sync
    tid = context.trace_id
    pending: Diagnostic | None = None  # the warning for elements decoded before any sync
    state = _NO_SYNC
    reason = UnsyncReason.RESET_DECODER if context.reset else UnsyncReason.INIT_DECODER
    last = 0
    local_ts = 0
    global_ts = 0
    page = 0
    need_gts2 = True
    freq_change = False
    overflow = False
    for pkt in packets:
        if isinstance(pkt, NotSync) and not pkt.decoded:
            continue  # printed by the reference, not passed to its decoder
        last = pkt.offset
        if state == _NO_SYNC:
            yield NoSync(last, reason)
            state = _WAIT_SYNC
        if state == _WAIT_SYNC:
            if isinstance(pkt, Async):
                state = _DECODE
            elif isinstance(pkt, Unsynced):
                state = _DECODE
                pending = _unsynced_note(pkt, tid)
            continue
        elem: ITMTrace | None = None
        match pkt:
            case Swit(src_id=src, value=value, size=size):
                channel = (src & 0x1F) | ((page << 5) & 0xFF)
                elem = ITMTrace(last, ITMPacketType.SWIT, channel, size, value)
            case Dwt(src_id=src, value=value, size=size):
                elem = ITMTrace(last, ITMPacketType.DWT, src, size, value)
            case LocalTs(tc=tc, value=value, size=size):
                local_ts = (local_ts + value * prescale) & _MASK64
                elem = ITMTrace(last, _LOCAL_TS_TYPES[tc & 3], 0, size, value, timestamp=local_ts)
            case GlobalTs1(flags=flags, value=value, size=size):
                need_gts2 = need_gts2 or bool(flags & 2)
                freq_change = freq_change or bool(flags & 1)
                global_ts = (global_ts & ~_GTS1_MASK[size - 1] & _MASK64) | value
                if not need_gts2:
                    elem = ITMTrace(
                        last,
                        ITMPacketType.TS_GLOBAL,
                        timestamp=global_ts,
                        ts_freq_change=freq_change,
                    )
                    freq_change = False
            case GlobalTs2(value=value):
                global_ts = ((global_ts & _GTS1_MASK[3]) | (value << 26)) & _MASK64
                elem = ITMTrace(
                    last, ITMPacketType.TS_GLOBAL, timestamp=global_ts, ts_freq_change=freq_change
                )
                freq_change = False
                need_gts2 = False
            case Extension(hardware=hw, nbits=nbits, value=value):
                if not hw and nbits == 2:
                    page = value & 0xFF
            case Overflow():
                local_ts = 0
                overflow = True
            case Reserved() | BadSequence():
                if not recover:
                    return  # the reference stops decoding on a bad packet
                kind = DiagKind.BAD_PACKET if isinstance(pkt, Reserved) else DiagKind.BAD_SEQUENCE
                yield Diagnostic(last, tid, DiagCode.BAD_DECODE_PKT, kind, int(pkt.KIND))
                yield NoSync(last, UnsyncReason.BAD_PACKET)
                state = _WAIT_SYNC
                local_ts = global_ts = page = 0
                need_gts2 = True
                freq_change = overflow = False
                pending = None
            case Async():
                pending = None  # synchronised before anything was decoded without it
            case NotSync():
                # Not expected once synchronised; the reference starts over.
                state = _NO_SYNC
                local_ts = global_ts = page = 0
                need_gts2 = True
                freq_change = overflow = False
            case _:
                pass  # ASYNC, incomplete packet: nothing to output
        if elem is not None:
            if pending is not None:
                yield pending
                pending = None
            if overflow:
                elem.overflow = True
                overflow = False
            yield elem
    if context.complete:
        yield EoTrace(last, UnsyncReason.EOT)


def _unsynced_note(pkt: Unsynced, trace_id: int) -> Diagnostic:
    """The warning that elements were decoded without a synchronisation packet."""
    if pkt.certain is None:
        return Diagnostic(
            pkt.resume, trace_id, DiagCode.NONE, DiagKind.UNSYNCED_AMBIGUOUS, 0, Severity.WARNING
        )
    return Diagnostic(
        pkt.resume, trace_id, DiagCode.NONE, DiagKind.UNSYNCED_START, pkt.certain, Severity.WARNING
    )
