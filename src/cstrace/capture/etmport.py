"""Trace-port captures of the classic ETMs (ETMv1, ETMv2): cycles of PIPESTAT, TRACEPKT, TRACESYNC.

Input: the bytes of a capture and the port configuration (:class:`PortConfig`:
TRACEPKT width 4, 8 or 16 bits, port mode normal, multiplexed or demultiplexed,
and the PIPESTAT width: 3 bits for ETMv1, 4 bits for ETMv2). Output: the list of
trace-port cycles, each a *cycle word* (an ``int``)::

    bits [3:0]   PIPESTAT (ETMv1 uses bits [2:0])
    bit  4       TRACESYNC (ETMv1 only)
    bits [23:8]  TRACEPKT[15:0] (only the low 4 or 8 bits on narrower ports)

Capture formats (the ``format`` of a snapshot buffer in ``trace.ini``):

``etm_etb``
    An Embedded Trace Buffer RAM dump (thesis ``seeds/004`` §9.1, figure 9.2):
    one 24-bit entry per little-endian 32-bit word (bits [31:24] ignored). An
    entry holds three cycles of a 4-bit port, two of an 8-bit port or one of a
    16-bit port, the oldest cycle in the low bits. Each cycle field is
    PIPESTAT[2:0] in its low three bits, then TRACEPKT, then TRACESYNC in its top
    bit (ETMv2 has no TRACESYNC: the top bit carries PIPESTAT[3]). An ETB
    captures the port signals inside the chip, before any multiplexing onto
    pins, so the layout of multiplexed mode is that of normal mode; in
    demultiplexed mode (8-bit ports only) each entry holds the A and B cycles of
    one half-rate clock, A first.
``etm_cycles``
    The plain per-cycle format for trace-port analysers: one little-endian
    32-bit record per cycle, the cycle word above.
``etm_cycles_text``
    Its text form, for hand-made vectors: one cycle per line, ``PIPESTAT
    TRACEPKT [S] [*N]`` (mnemonic or number, hexadecimal packet value, ``S`` when
    TRACESYNC is high, ``*N`` to repeat the line N times); ``#`` starts a comment.
``etm_port``
    Raw samples of the trace-port pins as a logic analyser records them, which
    depend on the port mode. Each cycle's signals form a 20-bit vector
    (PIPESTAT[2:0], TRACESYNC or PIPESTAT[3], TRACEPKT[15:0], low bit first).
    Normal mode: one 32-bit sample per cycle holding the vector. Demultiplexed
    mode: one 64-bit sample per (half-rate) TRACECLK holding cycle A in bits
    [19:0] and cycle B in bits [51:32]. Multiplexed mode: two 16-bit samples per
    cycle, one per clock edge, holding bits [9:0] then bits [19:10] of the
    vector (which signal shares a pin with which is implementation defined; this
    is cstrace's convention).

Every format yields whole cycles only; trailing bytes that do not make a whole
record are reported as a :class:`~cstrace.capture.formatter.CaptureIssue`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from cstrace.capture.formatter import CaptureIssue
from cstrace.capture.stream import Stream
from cstrace.errors import CaptureError

__all__ = [
    "ETM_FORMATS",
    "CycleStream",
    "PortConfig",
    "PortMode",
    "cycle",
    "cycles_from_text",
    "cycles_to_text",
    "pack_cycles",
    "read_cycles",
]

ETM_FORMATS = ("etm_etb", "etm_cycles", "etm_cycles_text", "etm_port")

SYNC = 0x10
"""The TRACESYNC bit of a cycle word."""


class PortMode(IntEnum):
    """Trace port mode (ETMCR bits [17:16])."""

    NORMAL = 0
    MULTIPLEXED = 1
    DEMULTIPLEXED = 2


@dataclass(frozen=True)
class PortConfig:
    """How the trace port was set up: TRACEPKT width, port mode, PIPESTAT width."""

    width: int = 8
    mode: PortMode = PortMode.NORMAL
    pipestat_bits: int = 3

    def __post_init__(self) -> None:
        if self.width not in (4, 8, 16):
            raise CaptureError(f"trace port width must be 4, 8 or 16 bits, not {self.width}")
        if self.pipestat_bits not in (3, 4):
            raise CaptureError("PIPESTAT is 3 bits (ETMv1) or 4 bits (ETMv2)")


class CycleStream(Stream):
    """The raw bytes of a trace-port capture with its format (decoded by the protocol)."""

    __slots__ = ("fmt",)

    def __init__(self, fmt: str, data: bytes) -> None:
        super().__init__(None, data)
        self.fmt = fmt


def cycle(pipestat: int, tracepkt: int = 0, sync: bool = False) -> int:
    """The cycle word of one trace-port cycle."""
    return (pipestat & 0xF) | (SYNC if sync else 0) | ((tracepkt & 0xFFFF) << 8)


def _field_bits(cfg: PortConfig) -> int:
    return 4 + cfg.width


def _to_field(word: int, cfg: PortConfig) -> int:
    """Cycle word → the per-cycle field of the ETB and pin layouts."""
    top = (word >> 3) & 1 if cfg.pipestat_bits == 4 else (word >> 4) & 1
    pkt = (word >> 8) & ((1 << cfg.width) - 1)
    return (word & 7) | (pkt << 3) | (top << (3 + cfg.width))


def _from_field(field: int, cfg: PortConfig) -> int:
    """The per-cycle field of the ETB and pin layouts → cycle word."""
    w = cfg.width
    top = (field >> (3 + w)) & 1
    pkt = (field >> 3) & ((1 << w) - 1)
    if cfg.pipestat_bits == 4:
        return (field & 7) | (top << 3) | (pkt << 8)
    return (field & 7) | (top << 4) | (pkt << 8)


def _words(data: bytes, size: int) -> tuple[list[int], int]:
    n = len(data) // size
    dtype = {2: "<u2", 4: "<u4", 8: "<u8"}[size]
    arr = np.frombuffer(data, dtype=dtype, count=n)
    return [int(v) for v in arr.tolist()], len(data) - n * size


def read_cycles(
    data: bytes | bytearray | memoryview, fmt: str, cfg: PortConfig
) -> tuple[list[int], list[CaptureIssue]]:
    """Decode a capture in format ``fmt`` into cycle words, and any framing issues."""
    data = bytes(data)
    issues: list[CaptureIssue] = []
    out: list[int] = []
    fb = _field_bits(cfg)
    fmask = (1 << fb) - 1
    if fmt == "etm_etb":
        words, rest = _words(data, 4)
        per = 24 // fb if cfg.width != 16 else 1
        for w in words:
            for k in range(per):
                out.append(_from_field((w >> (k * fb)) & fmask, cfg))
        if rest:
            issues.append(CaptureIssue(len(data) - rest, "ETB dump ends inside an entry"))
    elif fmt == "etm_cycles":
        words, rest = _words(data, 4)
        out = [w & 0xFFFF1F for w in words]
        if rest:
            issues.append(CaptureIssue(len(data) - rest, "capture ends inside a cycle record"))
    elif fmt == "etm_cycles_text":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CaptureError(f"cycle text is not UTF-8 (byte {exc.start})") from exc
        out = cycles_from_text(text, cfg)
    elif fmt == "etm_port":
        if cfg.mode == PortMode.DEMULTIPLEXED:
            words, rest = _words(data, 8)
            for w in words:
                out.append(_from_field(w & fmask, cfg))
                out.append(_from_field((w >> 32) & fmask, cfg))
        elif cfg.mode == PortMode.MULTIPLEXED:
            words, rest = _words(data, 2)
            if len(words) % 2:
                rest += 2
                words.pop()
            half = 10
            for i in range(0, len(words), 2):
                vec = (words[i] & 0x3FF) | ((words[i + 1] & 0x3FF) << half)
                out.append(_from_field(vec & fmask, cfg))
        else:
            words, rest = _words(data, 4)
            out = [_from_field(w & fmask, cfg) for w in words]
        if rest:
            issues.append(CaptureIssue(len(data) - rest, "capture ends inside a port sample"))
    else:
        raise CaptureError(f"unknown trace-port capture format {fmt!r}")
    return out, issues


def pack_cycles(cycles: list[int], fmt: str, cfg: PortConfig) -> bytes:
    """Encode cycle words in format ``fmt`` (the inverse of :func:`read_cycles`).

    For ``etm_etb`` a last, partly filled entry is padded with TD cycles
    (PIPESTAT b111, TRACEPKT 0), as a stopped ETB would hold them.
    """
    fb = _field_bits(cfg)
    if fmt == "etm_etb":
        per = 24 // fb if cfg.width != 16 else 1
        pad = (-len(cycles)) % per
        seq = list(cycles) + [cycle(7)] * pad
        words = []
        for i in range(0, len(seq), per):
            w = 0
            for k in range(per):
                w |= _to_field(seq[i + k], cfg) << (k * fb)
            words.append(w)
        return np.array(words, dtype="<u4").tobytes()
    if fmt == "etm_cycles":
        return np.array([c & 0xFFFF1F for c in cycles], dtype="<u4").tobytes()
    if fmt == "etm_cycles_text":
        return cycles_to_text(cycles, cfg).encode()
    if fmt == "etm_port":
        fields = [_to_field(c, cfg) for c in cycles]
        if cfg.mode == PortMode.DEMULTIPLEXED:
            if len(fields) % 2:
                fields.append(_to_field(cycle(7), cfg))
            pairs = [fields[i] | (fields[i + 1] << 32) for i in range(0, len(fields), 2)]
            return np.array(pairs, dtype="<u8").tobytes()
        if cfg.mode == PortMode.MULTIPLEXED:
            halves: list[int] = []
            for f in fields:
                halves.append(f & 0x3FF)
                halves.append((f >> 10) & 0x3FF)
            return np.array(halves, dtype="<u2").tobytes()
        return np.array(fields, dtype="<u4").tobytes()
    raise CaptureError(f"unknown trace-port capture format {fmt!r}")


# Mnemonics of the text form. ETMv1: ARM IHI 0014 table 5.1; ETMv2: table 6.1.
V1_NAMES = ("IE", "ID", "IN", "WT", "BE", "BD", "TR", "TD")
V2_NAMES = (
    "IE",
    "DE",
    "IN",
    "DN",
    "WT",
    "DW",
    "TR",
    "TD",
    "PTIE",
    "PTDE",
    "PTIN",
    "PTDN",
    "PNIE",
    "PNDE",
    "PNIN",
    "PNDN",
)


def cycles_from_text(text: str, cfg: PortConfig) -> list[int]:
    """Parse the text form (see the module docstring); errors name the line."""
    names = V2_NAMES if cfg.pipestat_bits == 4 else V1_NAMES
    lookup = {n: i for i, n in enumerate(names)}
    if cfg.pipestat_bits == 3:
        lookup["ID"] = 1  # ETMv1 names
    out: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        repeat = 1
        if parts[-1].startswith("*"):
            try:
                repeat = int(parts.pop()[1:], 0)
            except ValueError:
                raise CaptureError(f"bad repeat count in {raw!r}", line=lineno) from None
        sync = False
        if len(parts) >= 3 and parts[-1].upper() in ("S", "1", "0"):
            sync = parts.pop().upper() in ("S", "1")
        if not 1 <= len(parts) <= 2:
            raise CaptureError(f"expected 'PIPESTAT TRACEPKT [S]', got {raw!r}", line=lineno)
        name = parts[0].upper()
        if name in lookup:
            ps = lookup[name]
        else:
            try:
                ps = int(name, 0)
            except ValueError:
                raise CaptureError(f"unknown PIPESTAT {parts[0]!r}", line=lineno) from None
            if not 0 <= ps < (1 << cfg.pipestat_bits):
                raise CaptureError(f"PIPESTAT {ps} out of range", line=lineno)
        pkt = 0
        if len(parts) == 2:
            try:
                pkt = int(parts[1], 16)
            except ValueError:
                raise CaptureError(
                    f"TRACEPKT {parts[1]!r} is not hexadecimal", line=lineno
                ) from None
            if pkt >> cfg.width:
                raise CaptureError(
                    f"TRACEPKT {parts[1]} wider than the {cfg.width}-bit port", line=lineno
                )
        out.extend([cycle(ps, pkt, sync)] * repeat)
    return out


def cycles_to_text(cycles: list[int], cfg: PortConfig) -> str:
    """The text form of cycle words (one line per cycle)."""
    names = V2_NAMES if cfg.pipestat_bits == 4 else V1_NAMES
    digits = cfg.width // 4
    lines = []
    for c in cycles:
        s = " S" if (c & SYNC and cfg.pipestat_bits == 3) else ""
        lines.append(f"{names[c & ((1 << cfg.pipestat_bits) - 1)]} {(c >> 8):0{digits}x}{s}")
    return "\n".join(lines) + "\n"
