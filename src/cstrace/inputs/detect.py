"""What a raw trace capture holds, found from the bytes alone: formatting, trace IDs, protocols.

Input: the bytes of a capture with no snapshot metadata. Output: a
:class:`CaptureGuess`: whether the data is CoreSight formatted (16-byte frames
carrying several trace IDs, metadata requirements §4.3; as stored by an ETB/ETR,
or with FSYNC/HSYNC padding from a DSTREAM or TPIU port) or the unformatted
stream of a single source, and for each stream (:class:`StreamGuess`) the
protocol its synchronisation packets point to, with a confidence between 0 and
1 and the evidence in words.

Protocols are told apart by their synchronisation sequences:

- ETMv4 and ETE: A-sync, eleven ``0x00`` then ``0x80`` (ETMv4 IHI0064 §6.4.1);
  ETE uses the same packet format, so both are one family here;
- STM (STPv2): ASYNC, twenty-one ``0xF`` nibbles then a ``0x0`` nibble;
- ETMv3, PTM and ITM share a shorter sync, five ``0x00`` then ``0x80``. What
  follows tells them apart: ETMv3 and PTM resynchronise with an I-sync packet
  (header ``0x08``; ``0x70`` is an ETMv3 I-sync with cycle count), ITM packets
  parse cleanly with the ITM grammar. The I-sync layout separates PTM (address
  then information byte, IHI0035B §4.5.2) from ETMv3 (information byte then
  address, IHI0014Q §7.10.5): the interpretation under which successive I-sync
  addresses agree in their top byte and whose information bytes look right wins.

A stream with no synchronisation sequence at all can still be ITM: software
trace often runs without ITM sync packets (SWO captures of Cortex-M). ITM is
then recognised by its packet grammar (:mod:`cstrace.protocols.itm.boundary`):
read from its decode start, nearly every byte of random or other trace meets a
reserved header or an impossible packet within a few dozen packets, while ITM
reads cleanly to the end. STM without ASYNC is not recognised this way: nearly
every nibble string is valid STPv2.

This is evidence, not proof: options (``--protocol``, ``--capture-format``)
override it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cstrace.capture import Stream, demux
from cstrace.protocols import ProtocolSpec, find_protocol
from cstrace.protocols.itm import boundary as itm_boundary

__all__ = [
    "PROTOCOL_NAMES",
    "CaptureGuess",
    "StreamGuess",
    "detect_capture",
    "identify_stream",
]

PROTOCOL_NAMES: dict[str, str] = {
    "etm4": "ETMv4/ETE",
    "ptm": "PTM (PFT)",
    "etm3": "ETMv3",
    "stm": "STM (STPv2)",
    "itm": "ITM",
}
"""Display names of the protocol families :func:`identify_stream` reports."""

_A11 = re.compile(b"\x00{11}\x80")
_A5 = re.compile(b"\x00{5}\x80")
_STP = re.compile(
    b"\xff{10}\x0f|[\xf0-\xff]\xff{10}[\x00\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0]"
)
_FSYNC = b"\xff\xff\xff\x7f"
_SCAN_LIMIT = 4 << 20
"""Bytes of each stream examined (syncs repeat, so the start of a stream is enough)."""


@dataclass
class StreamGuess:
    """One stream: its trace ID (None when single-source), size and likely protocol."""

    trace_id: int | None
    size: int
    family: str | None
    confidence: float
    evidence: str
    syncs: int = 0

    @property
    def protocol(self) -> str:
        """Display name of the protocol, or ``unknown``."""
        return PROTOCOL_NAMES.get(self.family or "", "unknown")


@dataclass
class CaptureGuess:
    """A capture: its format, how sure we are, and its streams."""

    format: str
    confidence: float
    evidence: str
    size: int
    streams: list[StreamGuess] = field(default_factory=list)
    alternatives: list[tuple[str, float]] = field(default_factory=list)

    @property
    def identified(self) -> list[StreamGuess]:
        """Streams whose protocol was recognised."""
        return [s for s in self.streams if s.family is not None]


# --- per-stream identification -------------------------------------------------------------


def _itm_score(data: bytes, start: int) -> tuple[int, int]:
    """Parse ITM packets from ``start``: (bytes in valid packets, reserved headers met)."""
    good = 0
    bad = 0
    i = start
    n = len(data)
    while i < n and bad < 8:
        h = data[i]
        if h == 0x00:
            j = i
            while j < n and data[j] == 0x00:
                j += 1
            if j < n and data[j] == 0x80 and j - i >= 5:
                good += j + 1 - i
                i = j + 1
                continue
            bad += 1
            i = j
            continue
        if h == 0x70:
            good += 1
            i += 1
            continue
        low = h & 0x3
        if low:
            size = 4 if low == 3 else low
            good += 1 + size
            i += 1 + size
            continue
        if h & 0xF == 0:  # local timestamp
            j = i + 1
            if h & 0x80:
                while j < n and data[j] & 0x80 and j - i < 5:
                    j += 1
                j += 1
            good += j - i
            i = j
            continue
        if h & 0xC == 0x8:  # extension
            j = i + 1
            if h & 0x80:
                while j < n and data[j] & 0x80 and j - i < 5:
                    j += 1
                j += 1
            good += j - i
            i = j
            continue
        if h in (0x94, 0xB4):  # global timestamp
            j = i + 1
            while j < n and data[j] & 0x80 and j - i < 8:
                j += 1
            j += 1
            good += j - i
            i = j
            continue
        bad += 1
        i += 1
    return good, bad


def _isync_votes(data: bytes, syncs: list[int]) -> tuple[float, float, int, int]:
    """Votes for PTM and ETMv3 from the I-sync packets that follow A-syncs, the number of
    those I-syncs, and the number of A-syncs followed at once by a 0x70 byte (an ETMv3
    I-sync with a cycle count, or an ITM local timestamp)."""
    ptm_top: list[int] = []
    e3_top: dict[int, list[int]] = {n: [] for n in range(5)}
    ptm_info = 0
    e3_cc = 0
    e3_cc_first = 0
    count = 0
    for end in syncs:
        # The I-sync usually follows within a few packets of the A-sync.
        window = data[end : end + 24]
        k = window.find(b"\x08")
        k70 = window.find(b"\x70")
        if 0 <= k70 < 8 and (k < 0 or k70 < k):
            e3_cc += 1
            if k70 == 0:
                e3_cc_first += 1
        if k < 0 or k > 16 or end + k + 6 > len(data):
            continue
        p = end + k
        count += 1
        if data[p + 5] & 0x81 == 0x01:
            ptm_info += 1
        ptm_top.append(data[p + 4])
        for nctx in range(5):
            if p + 5 + nctx < len(data):
                e3_top[nctx].append(data[p + 5 + nctx])

    def agreement(tops: list[int]) -> float:
        if len(tops) < 2:
            return 0.0
        most = max(tops.count(t) for t in set(tops))
        return most / len(tops)

    ptm = ptm_info / count if count else 0.0
    ptm += agreement(ptm_top)
    e3 = max(agreement(v) for v in e3_top.values())
    e3 += (1.0 - ptm_info / count) if count else 0.0
    if e3_cc:
        e3 += 1.0
    return ptm, e3, count, e3_cc_first


def identify_stream(data: bytes, trace_id: int | None = None) -> StreamGuess:
    """The protocol of one trace ID's bytes (or a single-source capture), from its syncs."""
    size = len(data)
    view = data[:_SCAN_LIMIT]
    a11 = [m.end() for m in _A11.finditer(view)]
    stp = [m.end() for m in _STP.finditer(view)]
    a5 = [m.end() for m in _A5.finditer(view)]
    short = [e for e in a5 if e not in set(a11)]

    if a11 and len(a11) >= len(stp):
        follows = sum(1 for e in a11 if e < len(view) and view[e] == 0x01)
        conf = 0.95 if len(a11) >= 2 or follows else 0.75
        ev = f"{len(a11)} ETMv4 A-sync sequence(s)"
        if follows:
            ev += f", {follows} followed by a trace-info packet"
        return StreamGuess(trace_id, size, "etm4", conf, ev, len(a11))
    if stp:
        conf = 0.95 if len(stp) >= 2 else 0.8
        return StreamGuess(
            trace_id, size, "stm", conf, f"{len(stp)} STPv2 ASYNC sequence(s)", len(stp)
        )
    if not short:
        itm = _itm_without_sync(view, trace_id, size)
        if itm is not None:
            return itm
        return StreamGuess(trace_id, size, None, 0.0, "no synchronisation sequence found", 0)

    first = short[0] - 6
    while first > 0 and view[first - 1] == 0:
        first -= 1
    good, bad = _itm_score(view, first)
    span = len(view) - first
    itm_fit = good / span if span else 0.0
    ptm, e3, isyncs, cc_isyncs = _isync_votes(view, short)
    # Parsing with the real readers settles most cases: the wrong protocol's packet
    # boundaries drift and meet reserved headers and bad sequences.
    ptm_fit, e3_fit = _trials(view[first:])
    if ptm_fit is not None and e3_fit is not None:
        ptm += 4.0 * ptm_fit
        e3 += 4.0 * e3_fit
    n = len(short)
    if isyncs == 0 and cc_isyncs * 2 > n and e3_fit is not None and e3_fit > 0.99 and bad:
        # Cycle-accurate ETMv3: its I-syncs (0x70) parse cleanly, while as ITM they don't.
        isyncs = cc_isyncs
    if isyncs == 0 or (bad == 0 and itm_fit > 0.9 and isyncs * 2 < n):
        conf = min(0.95, 0.5 + 0.45 * itm_fit) if bad == 0 else 0.4
        ev = f"{n} sync sequence(s); ITM packets parse cleanly over {itm_fit:.0%} of the data"
        if bad:
            ev = f"{n} sync sequence(s); no I-sync packets; {bad} unexpected ITM header(s)"
        return StreamGuess(trace_id, size, "itm", conf, ev, n)
    if ptm > e3:
        family, margin = "ptm", ptm - e3
    else:
        family, margin = "etm3", e3 - ptm
    conf = min(0.95, 0.55 + 0.2 * margin + (0.1 if isyncs >= 3 else 0.0))
    if isyncs < 2:
        conf = min(conf, 0.45)  # one I-sync says little: its layout fits either protocol
    ev = f"{n} A-sync sequence(s), {isyncs} I-sync packet(s)"
    if ptm_fit is not None and e3_fit is not None:
        ev += f"; packets parse cleanly as PTM {ptm_fit:.0%}, as ETMv3 {e3_fit:.0%}"
    ev += f"; votes PTM {ptm:.2f} / ETMv3 {e3:.2f}"
    return StreamGuess(trace_id, size, family, conf, ev, n)


_GRAMMAR_BYTES = 1 << 16
"""Bytes of a stream without sync read with the ITM grammar."""


def _itm_without_sync(data: bytes, trace_id: int | None, size: int) -> StreamGuess | None:
    """ITM recognised by its packet grammar alone (no sync in ``data``), or None.

    Read from its decode start (at most :data:`~cstrace.protocols.itm.boundary.SPAN`
    bytes in), at least 48 packets must read validly, covering 95% of the bytes,
    with at most one invalid packet per 256 valid ones. (A random byte is an
    invalid ITM header about one time in ten, so random data reads 48 clean
    packets in a row about once in 200 tries.) Confidence grows with the number
    of packets, up to 0.9 from 256 on.
    """
    sample = data[:_GRAMMAR_BYTES]
    start, good, bad, covered = itm_boundary.scan(sample)
    fit = covered / len(sample) if sample else 0.0
    if good < 48 or start >= itm_boundary.SPAN or fit < 0.95 or bad * 256 > good:
        return None
    conf = 0.5 + 0.4 * min(1.0, good / 256) * fit
    if bad:
        conf -= 0.1
    ev = (
        f"no synchronisation sequence; {good} packets read as ITM by their grammar "
        f"from byte {start}, covering {fit:.0%} of the data"
    )
    if bad:
        ev += f", {bad} invalid"
    return StreamGuess(trace_id, size, "itm", round(conf, 2), ev, 0)


_TRIAL_BYTES = 1 << 12
_BAD_PACKETS = {"NotSync", "BadSequence", "Reserved", "BadTraceMode", "IncompleteEOT"}


def _trial_variants(family: str) -> list[tuple[str, dict[str, int]]]:
    """Register sets to try when parsing with a protocol's reader: the packet-format choices."""
    out: list[tuple[str, dict[str, int]]] = []
    for ctx in (0, 1, 3):  # no context ID, 8-bit, 32-bit
        for ca in (0, 1):
            etmcr = (ctx << 14) | (ca << 12) | (1 << 28)
            if family == "ptm":
                for ts64 in (0, 1):
                    ccer = (1 << 22) | (1 << 28) | (ts64 << 29)
                    regs = {"ETMCR": etmcr, "ETMCCER": ccer, "ETMIDR": 0x411CF310}
                    out.append(("PTM1.1", regs))
            else:
                for alt in (0, 1):
                    regs = {
                        "ETMCR": etmcr,
                        "ETMCCER": 1 << 22,
                        "ETMIDR": 0x410CF250 | (alt << 20),
                    }
                    out.append(("ETM3.5", regs))
    return out


def _fit(
    spec: ProtocolSpec, regs: dict[str, int], sample: bytes, bound: float | None
) -> float | None:
    """Share of ``sample``'s bytes in valid packets under one variant; None when the bad
    bytes read so far keep it at or below ``bound`` even if every byte left parsed (the
    read stops there), or when nothing was read."""
    n = len(sample)
    good = bad = 0
    try:
        cfg = spec.from_registers({**regs, "ETMTRACEIDR": 0x10}, "Cortex-A9", "")
        for pkt in spec.iter_packets(Stream(0x10, sample), cfg, True):
            size = len(pkt.raw) or 1
            if type(pkt).__name__ in _BAD_PACKETS:
                if good:
                    bad += size
                    if bound is not None:
                        rest = max(0, n - good - bad)
                        if (good + rest) / (good + rest + bad) <= bound:
                            return None
            else:
                good += size
    except Exception:  # a guess must not fail on another module's bug
        return None
    return good / (good + bad) if good + bad else None


def _trials(data: bytes) -> tuple[float | None, float | None]:
    """How well the start of ``data`` parses as PTM and as ETMv3: the share of bytes in
    valid packets under the best of each protocol's packet-format variants (None: no
    reader).

    The cheap question first: each protocol's first variant (no context ID, no cycle
    counts) is read over the sample. The other variants only matter if they do better
    than both protocols' best so far, so each stops as soon as its bad bytes rule that
    out (for the protocol that is not the stream's, usually at its first bad packet),
    and a protocol that parses every byte is tried no further.
    """
    sample = data[:_TRIAL_BYTES]
    found: dict[str, tuple[ProtocolSpec, list[dict[str, int]]]] = {}
    for family in ("ptm", "etm3"):
        variants = _trial_variants(family)
        spec = find_protocol(variants[0][0])
        if spec is not None:
            found[family] = (spec, [regs for _, regs in variants])
    best: dict[str, float | None] = {
        family: _fit(spec, sets[0], sample, None) for family, (spec, sets) in found.items()
    }
    for family, (spec, sets) in found.items():
        for regs in sets[1:]:
            if best[family] == 1.0:
                break
            known = [v for v in best.values() if v is not None]
            fit = _fit(spec, regs, sample, max(known) if known else None)
            if fit is not None:
                mine = best[family]
                best[family] = fit if mine is None else max(mine, fit)
    return best.get("ptm"), best.get("etm3")


# --- capture format -----------------------------------------------------------------------


def _id_concentration(data: bytes) -> tuple[float, int, float]:
    """ID bytes of would-be frames: (share of the 8 commonest IDs, distinct IDs, reserved share).

    Real frames repeat a few IDs and never use the reserved IDs 0x70..0x7F.
    """
    counts: dict[int, int] = {}
    nframes = min(len(data) // 16, 1 << 16)
    for f in range(nframes):
        base = f * 16
        for k in range(0, 15, 2):
            b = data[base + k]
            if b & 1:
                counts[b >> 1] = counts.get(b >> 1, 0) + 1
    total = sum(counts.values())
    if total == 0:
        return 0.0, 0, 0.0
    top = sorted(counts.values(), reverse=True)[:8]
    reserved = sum(v for k, v in counts.items() if k >= 0x70)
    return sum(top) / total, len(counts), reserved / total


def _streams_of(data: bytes, fmt: str) -> tuple[list[StreamGuess], float]:
    result = demux(data, fmt)
    guesses: list[StreamGuess] = []
    total = 0
    known = 0
    for key, stream in sorted(result.streams.items()):
        if not stream.data:
            continue
        tid = stream.trace_id if stream.trace_id is not None else key
        if fmt != "source_data" and not 0 < tid < 0x70:
            continue  # ID 0 pads frames; 0x70 and above are reserved
        g = identify_stream(stream.data, tid)
        guesses.append(g)
        total += g.size
        if g.family is not None:
            known += g.size
    return guesses, (known / total if total else 0.0)


def detect_capture(data: bytes, fmt: str | None = None) -> CaptureGuess:
    """Find the format of a capture (unless ``fmt`` is given) and identify its streams.

    The capture is read both ways, as one unformatted stream and as formatter
    frames (with FSYNC/HSYNC padding when those patterns occur). Frames win when
    they put recognised synchronisation sequences in a few trace IDs that the
    single-stream reading does not explain, or explains only because whole
    sequences happen to sit inside frames.
    """
    size = len(data)
    if fmt is not None:
        if fmt == "source_data":
            g = identify_stream(data)
            return CaptureGuess(fmt, 1.0, "format given", size, [g])
        streams, _ = _streams_of(data, fmt)
        return CaptureGuess(fmt, 1.0, "format given", size, streams)

    single = identify_stream(data)
    single_ev = f"as one stream: {single.evidence}"
    if size < 16:
        return CaptureGuess("source_data", single.confidence, single_ev, size, [single])
    fsyncs = data.count(_FSYNC)
    conc, distinct, reserved = _id_concentration(data)
    framed = conc > 0.95 and distinct <= 16 and reserved < 0.02
    if fsyncs and fsyncs >= max(1, size // (1 << 16)):
        hsyncs = data.count(b"\xff\x7f") - 2 * fsyncs
        name = "tpiu" if hsyncs > fsyncs // 4 else "dstream_coresight"
        padded = "with FSYNC and HSYNC padding" if name == "tpiu" else "with FSYNC padding"
    else:
        name = "coresight"
        padded = "aligned"
    streams, known = _streams_of(data, name)
    found = [g for g in streams if g.family is not None]
    frame_ev = (
        f"{padded} 16-byte frames: {len(found)} recognised stream(s) holding {known:.0%} "
        f"of the data; {distinct} distinct ID(s), the 8 commonest carry {conc:.0%} of ID bytes"
    )
    if name != "coresight":
        frame_ev = f"{fsyncs} FSYNC pattern(s); " + frame_ev
    alternatives: list[tuple[str, float]] = []
    if found and (single.family is None or framed or name != "coresight"):
        conf = 0.6 + 0.35 * max(known, conc if framed else 0.0)
        if single.family is not None and not framed:
            conf -= 0.2
        alternatives.append(("source_data", round(single.confidence * (0.5 if found else 1), 2)))
        return CaptureGuess(name, round(min(conf, 0.95), 2), frame_ev, size, streams, alternatives)
    if single.family is not None:
        conf = single.confidence * (0.8 if found else 1.0)
        if found:
            alternatives.append((name, round(0.6 * known, 2)))
        return CaptureGuess("source_data", round(conf, 2), single_ev, size, [single], alternatives)
    return CaptureGuess(
        "source_data", 0.0, "no synchronisation sequence found either way", size, [single]
    )
