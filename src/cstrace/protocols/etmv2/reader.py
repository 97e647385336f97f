"""ETMv2 reader: trace-port cycles → cycles with the FIFO packets each one placed.

Input: a :class:`~cstrace.capture.etmport.CycleStream` (4-bit PIPESTAT) and the
ETM configuration. Output: one :class:`~cstrace.protocols.etmv2.packets.Cycle2`
per cycle, in order.

ETMv2 packets carry headers, so the FIFO byte stream can be cut without the
code image (IHI 0014Q §6.2): a byte with bit 0 set starts a branch address
(1-5 bytes, bit 7 = more), any other byte is a header looked up in a 256-entry
table built from the rows of table 6.2 (normal data, load miss occurred, load
miss data, value not traced, context ID); the C bit (bit 7) of a header says
that more packets were placed in the same cycle, and a branch address is always
the last. Cycles whose PIPESTAT carries a "D" place one such group; the groups
leave the FIFO in order.

Synchronisation (``seeds/002``; IHI 0014Q §6.5): a TD cycle with TRACEPKT[0]
set outputs a trace FIFO offset (TFO): the number of bytes in the FIFO in front
of the TFO packet that the cycle places. TRACEPKT[7:4] = TFO[3:0],
TRACEPKT[3] = !TFO[6], TRACEPKT[2:1] = TFO[5:4]; b0111 is a cycle-accurate TD and
b0101 is reserved. On a 4-bit port the TFO takes the TD cycle (low nibble) and
the next one (high nibble), and a TFO that falls between the two nibbles of a
byte is followed by a gap nibble (b0110) so that the byte count stays whole. A
trigger replaces the PIPESTAT with TR and moves its status to TRACEPKT[3:0];
the TFO of a trigger cycle follows in the next cycles. From a TFO the reader
knows the FIFO occupancy exactly: the TRACEPKT pins carry FIFO bytes in every
cycle other than TR and TFO/gap cycles while, and only while, the FIFO holds
bytes placed in earlier cycles (two per cycle on a 16-bit port when it holds
two, half a byte on a 4-bit port).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from enum import IntEnum

from cstrace.capture.etmport import read_cycles
from cstrace.capture.stream import Stream
from cstrace.protocols.etmv1.config import ClassicEtmConfig
from cstrace.protocols.etmv2.packets import (
    BranchAddr,
    ContextIdPkt,
    Cycle2,
    FifoPacket,
    LoadMissData,
    LoadMissOccurred,
    NormalData,
    ReservedPkt,
    TfoPacket,
    V2Status,
    ValueNotTraced,
)

__all__ = [
    "HEADER_ROWS",
    "HEADER_TABLE",
    "PIPESTAT_ROWS",
    "HeaderKind",
    "iter_packets",
    "places_packets",
    "tfo_decode",
    "tfo_encode",
]

_TD = int(V2Status.TD)
_TR = int(V2Status.TR)


class HeaderKind(IntEnum):
    """What a FIFO byte that starts a packet is (IHI 0014Q table 6.2)."""

    BRANCH = 0
    NORMAL_DATA = 1
    VALUE_NOT_TRACED = 2
    CONTEXT_ID = 3
    RESERVED = 4
    LOAD_MISS = 5
    """Load Miss occurred (bC1A1TT00): a load missed; its value follows later, tagged TT."""
    LOAD_MISS_DATA = 6
    """Load Miss data (bCTT0SS00): the value of the load miss tagged TT, SS its size."""


# (value, mask, kind, source), in the order of table 6.2.
HEADER_ROWS: tuple[tuple[int, int, HeaderKind, str], ...] = (
    (0b00000010, 0b01010011, HeaderKind.NORMAL_DATA, "6.2 table 6.2: bC0A0SS10"),
    (0b01101010, 0b01111111, HeaderKind.VALUE_NOT_TRACED, "6.2 table 6.2: bC1101010"),
    (0b01101110, 0b01111111, HeaderKind.CONTEXT_ID, "6.2 table 6.2: bC1101110"),
    (0b01010000, 0b01010011, HeaderKind.LOAD_MISS, "6.2 table 6.2: bC1A1TT00"),
    (0b00000000, 0b00010011, HeaderKind.LOAD_MISS_DATA, "6.2 table 6.2: bCTT0SS00"),
    (0b00000001, 0b00000001, HeaderKind.BRANCH, "6.2: branch addresses cXXXXXX1"),
)

# (PIPESTAT value, status, places packets, source): §6.1 table 6.1.
PIPESTAT_ROWS: tuple[tuple[int, V2Status, bool, str], ...] = tuple(
    (int(s), s, bool(int(s) & 1) and s != V2Status.TD, "6.1 table 6.1") for s in V2Status
)


def _header_table() -> tuple[HeaderKind, ...]:
    out = []
    for b in range(256):
        kind = HeaderKind.RESERVED
        for value, mask, k, _src in HEADER_ROWS:
            if b & mask == value:
                kind = k
                break
        out.append(kind)
    return tuple(out)


HEADER_TABLE = _header_table()
_PLACES = tuple(r[2] for r in PIPESTAT_ROWS)


def places_packets(status: int) -> bool:
    """A PIPESTAT that places packets in the FIFO (its mnemonic has a D)."""
    return _PLACES[status & 0xF]


def tfo_encode(value: int) -> int:
    """The TRACEPKT[7:0] of a TFO value (0-95)."""
    return ((value & 0xF) << 4) | ((0 if value & 0x40 else 1) << 3) | (((value >> 4) & 3) << 1) | 1


def tfo_decode(pkt: int) -> int | None:
    """The TFO value of a TD cycle's TRACEPKT[7:0], or None if it is not a TFO."""
    low = pkt & 0xF
    if not low & 1 or low in (0b0111, 0b0101):
        return None
    return ((pkt >> 4) & 0xF) | (((pkt >> 1) & 3) << 4) | ((0 if pkt & 8 else 1) << 6)


_DATA_SIZES = (1, 2, 4, 0)


class _Parser:
    """Cuts FIFO bytes into packet groups, one byte at a time."""

    def __init__(self, cfg: ClassicEtmConfig) -> None:
        self.cfg = cfg
        self.units: deque[list[object]] = deque()  # [kind, cycle index, state...]
        self.buf = bytearray()
        self.pkts: list[FifoPacket] = []
        self.need = 0  # bytes still expected for the packet being cut
        # 0 header, 1 branch, 2 data address, 3 data value, 4 ctxid, 6 value not
        # traced, 7 load miss address, 8 load miss value
        self.mode = 0
        self.first = False
        self.broken = False
        self.addr_end = 1

    def add(self, kind: str, cycle: int, skip: int = 0) -> None:
        self.units.append([kind, cycle, skip])

    def pending(self) -> bool:
        return bool(self.units)

    def feed(self, b: int, done: dict[int, tuple[FifoPacket, ...]]) -> None:
        """Take one FIFO byte; completed groups go to ``done`` by placing cycle."""
        u = self.units[0]
        kind = u[0]
        if kind == "skip":
            u[2] = int(u[2]) - 1  # type: ignore[call-overload]
            if u[2] <= 0:  # type: ignore[operator]
                self.units.popleft()
            return
        cfg = self.cfg
        buf = self.buf
        buf.append(b)
        if kind == "tfo":
            if len(buf) == 1:
                self.need = cfg.ctxid_bytes + 4 + (4 if b & 0x80 else 0)
                return
            if len(buf) - 1 < self.need:
                return
            h = buf[0]
            c = cfg.ctxid_bytes
            ctx = int.from_bytes(buf[1 : 1 + c], "little") if c else None
            addr = int.from_bytes(buf[1 + c : 5 + c], "little")
            lsip = bool(h & 0x80)
            lsm = int.from_bytes(buf[5 + c : 9 + c], "little") if lsip else None
            pkt = TfoPacket((h >> 5) & 3, addr, ctx, lsip, bool(h & 0x10), lsm)
            self._finish_group(u, [pkt], done)
            return
        # A group of trace packets.
        if len(buf) == 1:
            hk = HEADER_TABLE[b]
            if hk == HeaderKind.BRANCH:
                self.mode = 1
                if not b & 0x80:
                    self._end_packet(done)
                return
            if hk == HeaderKind.NORMAL_DATA:
                size = _DATA_SIZES[(b >> 2) & 3]
                if size == 0:
                    self._reserved(b, done)
                    return
                self.first = bool(b & 0x20)
                self.mode = 2 if (self.first and cfg.data_addr) else 3
                self.need = size if cfg.data_value else 0
                if self.mode == 3 and self.need == 0:
                    self._end_packet(done)
                return
            if hk == HeaderKind.LOAD_MISS:
                self.first = bool(b & 0x20)
                self.mode = 7
                if not (self.first and cfg.data_addr):
                    self._end_packet(done)
                return
            if hk == HeaderKind.LOAD_MISS_DATA:
                size = _DATA_SIZES[(b >> 2) & 3]
                if size == 0:
                    self._reserved(b, done)
                    return
                self.mode = 8
                self.need = size if cfg.data_value else 0
                if self.need == 0:
                    self._end_packet(done)
                return
            if hk == HeaderKind.VALUE_NOT_TRACED:
                self.mode = 6
                self._end_packet(done)
                return
            if hk == HeaderKind.CONTEXT_ID:
                self.mode = 4
                self.need = cfg.ctxid_bytes
                if not self.need:
                    self._end_packet(done)
                return
            self._reserved(b, done)
            return
        if self.mode == 1:
            if not b & 0x80 or len(buf) == 5:
                self._end_packet(done)
            return
        if self.mode == 2:
            if not b & 0x80 or len(buf) == 6:
                self.addr_end = len(buf)
                self.mode = 3
                if self.need == 0:
                    self._end_packet(done)
            return
        if self.mode == 3:
            start = self.addr_end if self.first and cfg.data_addr else 1
            if len(buf) - start >= self.need:
                self._end_packet(done)
            return
        if self.mode == 4 and len(buf) - 1 >= self.need:
            self._end_packet(done)
            return
        if self.mode == 7:
            if not b & 0x80 or len(buf) == 6:
                self.addr_end = len(buf)
                self._end_packet(done)
            return
        if self.mode == 8 and len(buf) - 1 >= self.need:
            self._end_packet(done)

    def _reserved(self, b: int, done: dict[int, tuple[FifoPacket, ...]]) -> None:
        u = self.units[0]
        self._finish_group(u, [*self.pkts, ReservedPkt(b)], done)
        self.broken = True

    def _end_packet(self, done: dict[int, tuple[FifoPacket, ...]]) -> None:
        buf = bytes(self.buf)
        mode = self.mode
        last = True
        if mode == 1:
            pkt: FifoPacket = BranchAddr(buf)
        else:
            last = not buf[0] & 0x80
            if mode in (2, 3):
                a_end = self.addr_end if self.first and self.cfg.data_addr else 1
                pkt = NormalData(self.first, buf[1:a_end], buf[a_end:])
            elif mode == 4:
                pkt = ContextIdPkt(int.from_bytes(buf[1:], "little"))
            elif mode == 7:
                pkt = LoadMissOccurred((buf[0] >> 2) & 3, self.first, buf[1 : self.addr_end])
            elif mode == 8:
                pkt = LoadMissData((buf[0] >> 5) & 3, buf[1:])
            else:
                pkt = ValueNotTraced()
        self.pkts.append(pkt)
        self.buf.clear()
        self.addr_end = 1
        self.mode = 0
        self.need = 0
        if last:
            self._finish_group(self.units[0], self.pkts, done)

    def _finish_group(
        self, u: list[object], pkts: list[FifoPacket], done: dict[int, tuple[FifoPacket, ...]]
    ) -> None:
        done[int(u[1])] = tuple(pkts)  # type: ignore[call-overload]
        self.units.popleft()
        self.pkts = []
        self.buf.clear()
        self.mode = 0
        self.need = 0


def iter_packets(
    stream: Stream, config: ClassicEtmConfig, complete: bool = True
) -> Iterator[Cycle2]:
    """The cycles of an ETMv2 trace-port capture, with the packets each one placed."""
    fmt = getattr(stream, "fmt", "etm_cycles")
    cycles, _issues = read_cycles(stream.data, fmt, config.port)
    n = len(cycles)
    width = config.port.width
    status = [0] * n
    trig = [False] * n
    for i, c in enumerate(cycles):
        s = c & 0xF
        if s == _TR:
            trig[i] = True
            s = (c >> 8) & 0xF
        status[i] = s
    done: dict[int, tuple[FifoPacket, ...]] = {}
    tfo_at: dict[int, int] = {}
    p = _Parser(config)
    synced = False
    tfo_parts: list[int] = []  # TRACEPKT nibbles/bytes still owed to a TFO value
    tfo_cycle = -1
    # Cycles that placed packets while a TFO value was still being output (a
    # trigger cycle between its two nibbles): their groups follow the TFO packet.
    held: list[int] = []
    gap_owed = False
    half: int | None = None  # 4-bit: the low nibble of a byte being output
    sync_from = n
    for t in range(n):
        c = cycles[t]
        pkt = c >> 8
        st = status[t]
        is_tfo = False
        if (
            st == _TD
            and not trig[t]
            and tfo_decode(pkt & 0xFF if width != 4 else pkt & 0xF) is not None
        ):
            is_tfo = True
        elif st == _TD and trig[t]:
            is_tfo = True  # the offset follows in the next cycles
        if is_tfo:
            tfo_cycle = t
            tfo_parts = []
            if not trig[t]:
                tfo_parts.append(pkt & (0xF if width == 4 else 0xFF))
            need_parts = 2 if width == 4 else 1
            if len(tfo_parts) >= need_parts:
                _tfo_complete(t, tfo_parts, width, p, tfo_at, half is not None and synced)
                if half is not None and synced:
                    gap_owed = True
                tfo_parts = []
                tfo_cycle = -1
                if not synced:
                    synced = True
                    sync_from = t
            continue
        if trig[t]:
            if synced and places_packets(st):
                if tfo_cycle >= 0:
                    held.append(t)
                else:
                    p.add("grp", t)
            continue
        if tfo_cycle >= 0:
            tfo_parts.append(pkt & (0xF if width == 4 else 0xFF))
            if len(tfo_parts) >= (2 if width == 4 else 1):
                mid = half is not None and synced
                _tfo_complete(tfo_cycle, tfo_parts, width, p, tfo_at, mid)
                for h in held:
                    p.add("grp", h)
                held.clear()
                if mid:
                    gap_owed = True
                if not synced:
                    synced = True
                    sync_from = tfo_cycle
                tfo_parts = []
                tfo_cycle = -1
            if synced and places_packets(st):
                p.add("grp", t)
            continue
        if synced and not p.broken:
            if width == 4:
                if gap_owed:
                    gap_owed = False
                elif half is not None:
                    p.feed(half | ((pkt & 0xF) << 4), done)
                    half = None
                elif p.pending():
                    half = pkt & 0xF
            else:
                if p.pending():
                    p.feed(pkt & 0xFF, done)
                    if width == 16 and p.pending() and not p.broken:
                        p.feed((pkt >> 8) & 0xFF, done)
            if places_packets(st):
                p.add("grp", t)
        if p.broken:
            # A reserved header: wait for the next TFO.
            synced = False
            p = _Parser(config)
            half = None
            gap_owed = False
    for t in range(n):
        st = status[t]
        g: tuple[FifoPacket, ...] | None
        if t < sync_from:
            g = None
        else:
            g = done.get(t, ())
        yield Cycle2(
            t, cycles[t].to_bytes(4, "little"), st, cycles[t] >> 8, trig[t], tfo_at.get(t), g
        )


def _tfo_complete(
    t: int, parts: list[int], width: int, p: _Parser, tfo_at: dict[int, int], mid: bool
) -> None:
    """A TFO value is complete: queue what it says is in the FIFO, then the TFO packet."""
    raw = parts[0] | (parts[1] << 4) if width == 4 else parts[0]
    value = tfo_decode(raw)
    if value is None:
        return
    tfo_at[t] = value
    if value and not p.units:
        p.add("skip", t, value)  # bytes of groups placed before the reader synchronised
    p.add("tfo", t)
