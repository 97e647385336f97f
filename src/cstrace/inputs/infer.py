"""Configuration inference for raw captures: the settings of a trace source, found from its trace.

Input: the stream of one trace ID of a raw capture, the protocol family that
detection (:mod:`.detect`) recognised, what the user said about the source
(registers and options, which always win), what the images and the user say
about the traced core (a :class:`~cstrace.inputs.platform.Platform`) and the
code memory of the capture (memory dumps and images given with it, possibly
none). Output: an :class:`Inference`: the registers to configure the source
with, the settings chosen in words, the protocol and core in words as far as
the evidence goes, a confidence, and what the evidence could not decide.

How, in four steps.

1. **Constraints first.** The platform bounds the candidates: an M- or
   R-profile core is never traced by PTM or ETE, ETE needs Armv9-A (or an
   AArch64 core whose version is not known), PTM an Armv7-A core; an M-profile
   core has M-profile exceptions and no VMID. A packet that only one protocol
   has decides the protocol: an ETE-only header (timestamp marker, ITE,
   transaction, source address) that ETMv4 reads as reserved, or an
   ETMv4-only one (exception return, v8-M function return) that ETE reads as
   reserved. Each protocol's candidate values come from its ``config.py``
   (``SETTINGS``, next to the register fields they stand for).
2. **Settings the trace states** are read from its packets: an ETMv4/ETE
   trace-info packet says whether cycle counting and conditional tracing are
   on and whether the unit speculates; in ETMv3, the I-sync that follows an
   A-sync has a cycle count (header 0x70) exactly when cycle-accurate tracing
   is on, which is counted over the whole stream (its boundaries are certain
   after an A-sync, whatever the other settings).
3. **Search.** The other settings change how packets split or how program flow
   is followed. The start of the stream is decoded with candidate
   configurations and each decode is scored by its inconsistencies: packets
   that do not parse, decoder diagnostics and resynchronisations, I-syncs of
   the wrong kind for the cycle-count setting, and program flow that does not
   walk the code consistently (a range that continues elsewhere than its last
   instruction leads with no branch or exception to explain it, an atom the
   decoder has no address for, addresses that no image or dump covers). The
   search changes one setting at a time from a starting configuration (those
   that only show together are tried in every combination first) and keeps a
   change that clearly lowers the inconsistencies.
4. **Calibration.** Every other value of every searched setting is decoded
   once more around the choice. A value that decodes the start of the stream
   to exactly the same elements does not matter (said so, and the plainer
   choice is named: ETMv4 rather than ETE). A value that decodes differently is
   a rival: the confidence is the margin between the choice and its closest
   rival, in inconsistencies weighed against those the choice has itself,
   times how clean the choice's own decode is. A rival that decodes no worse
   leaves the setting undecided: it is reported with its register field, the
   ``--set`` (or ``--reg``, ``--core``, ``--protocol``) option that decides it,
   and what each value gives, and the confidence stays at 0.5 or below.

docs/usage.md ("Decode your own dump") shows the output.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cstrace.capture import Stream
from cstrace.elements import ElemType, InstrType
from cstrace.errors import CstraceError, DiagKind, Severity
from cstrace.inputs.platform import Platform
from cstrace.isa.types import Profile
from cstrace.memory.code import CodeMemory
from cstrace.protocols import DecodeContext, DecodeOptions, Packet, get_protocol
from cstrace.protocols.base import Setting
from cstrace.protocols.etmv3 import config as etmv3_config
from cstrace.protocols.etmv4 import config as etmv4_config
from cstrace.protocols.ptm import config as ptm_config

__all__ = ["PREFIX_BYTES", "Inference", "infer_source"]

PREFIX_BYTES = 24 * 1024
"""Bytes at the start of a stream decoded for each candidate configuration."""
_SCAN_BYTES = 256 * 1024
"""Bytes of a stream read at packet level for what the whole stream says (protocol-only
packets, the kind of ETMv3 I-syncs)."""

_BAD_PACKET_WORDS = ("BAD", "RESERVED", "INCOMPLETE")
_MISS_WEIGHT = 20.0
_NACC_MARGIN = 2
"""Cost of a decode none of whose program flow found code (scaled by the share missed)."""


@dataclass
class Inference:
    """The configuration inferred for one trace source."""

    trace_id: int
    protocol: str
    """The source type given to the decoder (``ETE``, ``ETM4.6``, ``PTM1.1``, ``ETM3.5``)."""
    core: str
    """The core type decoded with (a core or an architecture name such as ``ARMv7-R``)."""
    registers: dict[str, int]
    settings: dict[str, str]
    """Each inferred setting and its value, in words (``cyclecount``: ``1``)."""
    confidence: float
    evidence: str
    family: str = ""
    """The protocol family searched (``etm4``, ``ptm``, ``etm3``)."""
    candidate: dict[str, Any] = field(default_factory=dict)
    """The chosen settings under their internal names (a start for sibling sources)."""
    label: str = ""
    """The protocol and core in words, as far as the evidence goes (``ETMv4 (minor version
    not seen) on an Armv8-A core``)."""
    undecided: list[str] = field(default_factory=list)
    """Settings the evidence does not decide: field, deciding option, what each value gives."""
    same: list[str] = field(default_factory=list)
    """Settings whose other values decode the stream the same (the choice does not matter)."""


@dataclass
class _Score:
    cost: float = 0.0
    packets: int = 0
    bad_packets: int = 0
    diagnostics: int = 0
    resyncs: int = 0
    nacc: int = 0
    backwards: int = 0
    instructions: int = 0
    ranges: int = 0
    jumps: int = 0
    """Ranges that continue elsewhere than where their last instruction leads, unexplained."""
    unknown: int = 0
    """Atoms the decoder had no address for (``ADDR_UNKNOWN``)."""
    against: int = 0
    """Packets whose kind the candidate's settings rule out (an ETMv3 I-sync of the wrong
    kind for its cycle-count setting)."""
    missed: float = 1.0
    """The share of program-flow steps that found no code (1.0 when nothing was walked)."""
    signature: int = 0
    """A hash of every element decoded: equal signatures, equal decodes."""

    @property
    def errors(self) -> int:
        """Inconsistencies other than addresses without code."""
        return (
            self.bad_packets
            + self.diagnostics
            + self.resyncs
            + self.backwards
            + self.jumps
            + self.unknown
            + self.against
        )

    def text(self) -> str:
        out = (
            f"{self.packets} packets, {self.bad_packets} unparsable, {self.diagnostics} "
            f"decoder diagnostics, {self.resyncs} resyncs, {self.nacc} addresses without code, "
            f"{self.instructions} instructions"
        )
        if self.jumps or self.unknown:
            out += f", {self.jumps + self.unknown} steps of program flow unexplained"
        return out


Candidate = dict[str, Any]
Builder = Callable[[Mapping[str, Any], int], tuple[str, dict[str, int]]]
Completer = Callable[[str, dict[str, int], str], tuple[dict[str, int], str, str] | None]
"""``(format, registers, core)`` → ``(registers, core, version)`` with the user's items
applied, or None when the user's items make the candidate invalid."""


@dataclass(frozen=True)
class _Family:
    """What inference needs of one protocol family: its settings and register builder."""

    name: str
    settings: tuple[Setting, ...]
    start: Mapping[str, Any]
    build: Builder
    joint: tuple[str, ...]
    """Settings that only show together: tried in every combination first."""

    def proto_of(self, fmt: str) -> str:
        if fmt == "ETE":
            return "ete"
        if fmt.startswith("ETM4"):
            return "etmv4"
        return "ptm" if fmt.startswith("PTM") else "etmv3"


_FAMILIES = {
    "etm4": _Family(
        "etm4",
        etmv4_config.SETTINGS,
        etmv4_config.START,
        etmv4_config.inferred_registers,
        ("protocol", "vmid"),
    ),
    "etm3": _Family(
        "etm3",
        etmv3_config.SETTINGS,
        etmv3_config.START,
        etmv3_config.inferred_registers,
        ("cyclecount", "context_id", "alt_branch"),
    ),
    "ptm": _Family(
        "ptm",
        ptm_config.SETTINGS,
        ptm_config.START,
        ptm_config.inferred_registers,
        ("cyclecount", "context_id"),
    ),
}


# -- scoring ---------------------------------------------------------------------------


def _kind_name(p: Packet) -> str:
    """The packet's kind in upper-case words (``TRACE_INFO``, ``BAD_SEQUENCE``...)."""
    kind = getattr(p, "kind", None)
    if kind is not None:
        return str(getattr(kind, "name", kind)).upper()
    return type(p).__name__.upper()


def _count_packets(packets: Iterable[Packet], score: _Score) -> Iterator[Packet]:
    for p in packets:
        score.packets += 1
        if any(w in _kind_name(p) for w in _BAD_PACKET_WORDS):
            score.bad_packets += 1
        yield p


_EXPLAINS = frozenset(
    {
        ElemType.NO_SYNC,
        ElemType.TRACE_ON,
        ElemType.EO_TRACE,
        ElemType.PE_CONTEXT,
        ElemType.ADDR_NACC,
        ElemType.ADDR_UNKNOWN,
        ElemType.EXCEPTION,
        ElemType.EXCEPTION_RET,
        ElemType.DIAGNOSTIC,
    }
)
"""Elements after which a range may start anywhere."""
_BRANCHES = (InstrType.BR, InstrType.BR_INDIRECT)


def _element_key(e: Any) -> tuple[Any, ...]:
    """What identifies an element's content, for the decode signature."""
    ctx = getattr(e, "context", None)
    if ctx is not None:
        ctx = (
            ctx.context_id, ctx.vmid, int(ctx.exception_level), int(ctx.security_level),
            ctx.bits64, ctx.ctxt_id_valid, ctx.vmid_valid,
        )  # fmt: skip
    return (
        int(e.TYPE),
        e.offset,
        getattr(e, "start", None),
        getattr(e, "end", None),
        getattr(e, "num_instr", None),
        getattr(e, "last_exec", None),
        getattr(e, "cycle_count", None),
        getattr(e, "number", None),
        getattr(e, "address", None),
        getattr(e, "return_address", None),
        getattr(e, "timestamp", None),
        ctx,
    )


def _decode_cost(
    proto_name: str,
    regs: Mapping[str, int],
    core: str,
    version: str,
    stream: Stream,
    memory: CodeMemory | None,
    trace_id: int,
    against: int = 0,
    whole: bool = False,
) -> _Score:
    """Decode ``stream`` with a candidate configuration and score its consistency
    (``whole``: the stream is not cut short, its end is the end of the trace)."""
    score = _Score(against=against)
    spec = get_protocol(proto_name)
    if spec is None:
        score.cost = math.inf
        return score
    try:
        config = spec.from_registers(dict(regs), core, version)
    except CstraceError:
        score.cost = math.inf
        return score
    ctx = DecodeContext(trace_id, DecodeOptions(), memory, complete=whole)
    packets = _count_packets(spec.iter_packets(stream, config, whole), score)
    synced = False
    last_ts = -1
    prev: Any = None
    explained = True
    sig = 0
    try:
        for e in spec.iter_elements(packets, config, ctx):
            t = e.TYPE
            sig = hash((sig, _element_key(e)))
            if t == ElemType.INSTR_RANGE:
                score.instructions += int(getattr(e, "num_instr", 0) or 0)
                score.ranges += 1
                if (
                    not explained
                    and prev is not None
                    and getattr(e, "start", None) != prev.end
                    and not (prev.last_exec and prev.last_type in _BRANCHES)
                ):
                    score.jumps += 1
                prev, explained = e, False
                continue
            if t in _EXPLAINS:
                explained = True
            if t == ElemType.ADDR_NACC:
                score.nacc += 1
            elif t == ElemType.ADDR_UNKNOWN:
                score.unknown += 1
            elif t == ElemType.DIAGNOSTIC:
                if getattr(e, "kind", None) == DiagKind.NO_CONFIG:
                    score.cost = math.inf  # the decoder refused the configuration
                    return score
                if getattr(e, "severity", Severity.ERROR) == Severity.ERROR:
                    score.diagnostics += 1
            elif t == ElemType.NO_SYNC:
                if synced:
                    score.resyncs += 1
            elif t == ElemType.TRACE_ON:
                synced = True
            elif t == ElemType.TIMESTAMP:
                ts = int(getattr(e, "timestamp", 0) or 0)
                if ts < last_ts:
                    score.backwards += 1
                last_ts = ts
    except CstraceError:
        score.diagnostics += 100
    except (IndexError, ValueError, KeyError, AssertionError, TypeError):
        # A decoder that trips on a nonsensical configuration: the worst of scores.
        score.diagnostics += 1000
    walked = score.ranges + score.nacc
    score.missed = score.nacc / walked if walked else 1.0
    score.signature = sig
    score.cost = (
        10.0 * score.bad_packets
        + 5.0 * score.diagnostics
        + 5.0 * score.resyncs
        + 1.0 * score.backwards
        + 10.0 * score.against
        + _MISS_WEIGHT * score.missed
    )
    return score


# -- what the whole stream says --------------------------------------------------------

_A5 = re.compile(b"\x00{5}\x80")


def _etm3_isync_votes(data: bytes) -> tuple[int, int]:
    """I-syncs that directly follow an ETMv3 A-sync: (with a cycle count, without).

    IHI 0014Q §7.4.2: an ETM that traces cycle-accurately outputs the I-sync with
    cycle count (header 0x70); otherwise the plain I-sync (0x08). The byte after
    an A-sync is a packet boundary whatever the other settings.
    """
    cc = plain = 0
    for m in _A5.finditer(data[:_SCAN_BYTES]):
        end = m.end()
        if end < len(data):
            if data[end] == 0x70:
                cc += 1
            elif data[end] == 0x08:
                plain += 1
    return cc, plain


_ETE_ONLY = frozenset(
    {"TS_MARKER", "ITE", "TRANS_ST", "TRANS_COMMIT", "SRC_ADDR_MATCH", "SRC_ADDR_S_IS0",
     "SRC_ADDR_S_IS1", "SRC_ADDR_L_32IS0", "SRC_ADDR_L_32IS1", "SRC_ADDR_L_64IS0",
     "SRC_ADDR_L_64IS1"}
)  # fmt: skip
_ETM4_ONLY = frozenset({"EXCEPT_RTN", "FUNC_RET"})


def _packet_offsets(
    proto: str, regs: Mapping[str, int], core: str, stream: Stream
) -> tuple[dict[int, str], set[int]]:
    """Packet kinds by offset, and the offsets of bad packets, of ``stream`` read with
    a configuration."""
    spec = get_protocol(proto)
    kinds: dict[int, str] = {}
    bad: set[int] = set()
    if spec is None:
        return kinds, bad
    try:
        config = spec.from_registers(dict(regs), core, "")
        for p in spec.iter_packets(stream, config, False):
            name = _kind_name(p)
            kinds[p.offset] = name
            if any(w in name for w in _BAD_PACKET_WORDS):
                bad.add(p.offset)
    except CstraceError:
        pass
    return kinds, bad


def _etm4_protocol_proof(stream: Stream, trace_id: int, start: Candidate) -> tuple[str, str]:
    """The protocol packets only one of ETE and ETMv4 has prove (``ETE``, ``ETM4`` or
    ``""``), and the evidence in words.

    A kind counts where the other protocol reads a bad packet at the same place.
    """
    ete_regs = etmv4_config.inferred_registers(dict(start, protocol="ETE"), trace_id)[1]
    e4_regs = etmv4_config.inferred_registers(dict(start, protocol="ETM4"), trace_id)[1]
    core = str(start["core"])
    ete_kinds, ete_bad = _packet_offsets("ete", ete_regs, core, stream)
    e4_kinds, e4_bad = _packet_offsets("etmv4", e4_regs, core, stream)
    ete_only = sorted({k for o, k in ete_kinds.items() if k in _ETE_ONLY and o in e4_bad})
    e4_only = sorted({k for o, k in e4_kinds.items() if k in _ETM4_ONLY and o in ete_bad})
    if ete_only and not e4_only:
        return "ETE", f"packets only ETE has ({', '.join(ete_only)})"
    if e4_only and not ete_only:
        return "ETM4", f"packets only ETMv4 has ({', '.join(e4_only)})"
    return "", ""


def _etm4_evidence(stream: Stream, trace_id: int, start: Candidate) -> Candidate:
    """``start`` with the settings an ETMv4/ETE trace states in its own packets (its
    trace-info packets, its speculation and timestamp-marker packets)."""
    fmt, regs = etmv4_config.inferred_registers(start, trace_id)
    spec = get_protocol("ete" if fmt == "ETE" else "etmv4")
    assert spec is not None
    config = spec.from_registers(regs, str(start["core"]), "")
    found = dict(start)
    kinds: set[str] = set()
    info_cc = info_cond = False
    cond_bits = 0
    spec_depth = False
    try:
        for p in spec.iter_packets(stream, config, False):
            name = _kind_name(p)
            kinds.add(name)
            if name == "TRACE_INFO":
                info = int(getattr(p, "info", 0) or 0)
                if info & 1:
                    info_cc = True
                if (info >> 1) & 7:
                    info_cond = True
                    cond_bits |= (info >> 1) & 7
                if getattr(p, "spec_depth", None):
                    spec_depth = True
    except CstraceError:
        pass
    found["cyclecount"] = info_cc
    found["conditional"] = {0: 0, 1: 1, 2: 2, 3: 3}.get(cond_bits, 7) if info_cond else 0
    speculates = spec_depth or bool(
        kinds & {"COMMIT", "CANCEL_F1", "CANCEL_F2", "CANCEL_F3", "MISPREDICT"}
    )
    if not speculates:
        found["max_spec"] = 0
    elif not start.get("max_spec"):
        found["max_spec"] = 255
    found["ts_marker"] = "TS_MARKER" in kinds and found["protocol"] == "ETE"
    found["q"] = True
    return found


# -- the search ------------------------------------------------------------------------


def _settings_text(c: Candidate) -> dict[str, str]:
    """The settings of a candidate in words, under the names docs/usage.md uses."""
    out: dict[str, str] = {}
    for key, value in c.items():
        if key in ("protocol", "core"):
            continue
        if key == "vmid" and value == "usual":
            value = etmv4_config.vmid_bits(c)
        name = _DISPLAY.get(key, key)
        if isinstance(value, bool):
            out[name] = "1" if value else "0"
        else:
            out[name] = str(value)
    return out


class _Evaluator:
    """Decodes candidates of one family (each once) and scores them."""

    def __init__(
        self,
        family: _Family,
        complete: Completer,
        stream: Stream,
        memory: Callable[[str], CodeMemory | None],
        trace_id: int,
        votes: tuple[int, int] | None = None,
        whole: bool = False,
    ) -> None:
        self.whole = whole
        self.family = family
        self.complete = complete
        self.stream = stream
        self.memory = memory
        self.trace_id = trace_id
        self.votes = votes
        self.cache: dict[tuple[Any, ...], _Score] = {}

    def __call__(self, c: Candidate, whole: bool = False) -> _Score:
        """The score of candidate ``c``; with ``whole``, of a decode to the end of the trace
        when the stream holds all of it (end-of-trace elements included)."""
        whole = whole and self.whole
        key = (whole, *sorted(c.items()))
        got = self.cache.get(key)
        if got is None:
            fmt, regs = self.family.build(c, self.trace_id)
            done = self.complete(fmt, regs, str(c["core"]))
            if done is None:
                got = _Score(cost=math.inf)
            else:
                full, core, version = done
                against = 0
                if self.votes is not None:
                    with_cc, plain = self.votes
                    against = plain if c.get("cyclecount") else with_cc
                got = _decode_cost(
                    self.family.proto_of(fmt),
                    full,
                    core,
                    version,
                    self.stream,
                    self.memory(core),
                    self.trace_id,
                    against,
                    whole,
                )
            self.cache[key] = got
        return got


def _search(
    start: Candidate,
    space: Mapping[str, tuple[Any, ...]],
    cost: Callable[[Candidate], _Score],
    joint: tuple[str, ...] = (),
    least_speculation: bool = True,
) -> tuple[Candidate, _Score]:
    """Coordinate descent over the settings of ``space`` from ``start``: the best
    candidate and its score."""
    best = dict(start)
    best_score = cost(best)
    # Settings that only show together (a context packet's VMID size and the protocol
    # version whose headers follow it) are tried in every combination first.
    joint_dims = [(n, space[n]) for n in joint if n in space]
    if joint_dims:
        for values in itertools.product(*(v for _, v in joint_dims)):
            trial = dict(best)
            trial.update({n: v for (n, _), v in zip(joint_dims, values, strict=True)})
            s = cost(trial)
            if _better(s, best_score):
                best, best_score = trial, s
    for _ in range(3):
        improved = False
        for name, values in space.items():
            for value in values:
                if value == best[name]:
                    continue
                trial = dict(best)
                trial[name] = value
                s = cost(trial)
                if _better(s, best_score):
                    best, best_score, improved = trial, s, True
        if not improved:
            break
    if least_speculation and best.get("max_spec"):
        best, best_score = _least_speculation(best, best_score, cost)
    return best, best_score


def _better(new: _Score, old: _Score) -> bool:
    """Whether ``new`` is clearly better than ``old``.

    Fewer packets that do not parse, diagnostics, resynchronisations or packets
    of a kind the settings rule out always count. Then a decode that walked some
    program flow beats one that walked none. Then fewer steps of program flow
    left unexplained, and fewer addresses without code, count when they are
    clearly fewer (a tenth, and at least :data:`_NACC_MARGIN`): settings such as
    the return stack move these counts a little either way when the memory given
    covers only part of the code, and the first candidate (the common setting)
    should keep it then. Last, a tenth more instructions walked with no more
    addresses missed counts.
    """
    sn, so = _structural(new), _structural(old)
    if sn != so:
        return sn < so
    if (new.ranges > 0) != (old.ranges > 0):
        return new.ranges > 0
    fn, fo = new.jumps + new.unknown, old.jumps + old.unknown
    if fn < fo - max(_NACC_MARGIN, fo // 10):
        return True
    if fo < fn - max(_NACC_MARGIN, fn // 10):
        return False
    if new.nacc < old.nacc - max(_NACC_MARGIN, old.nacc // 10):
        return True
    # A decoder waiting for an address the trace never sends (a return stack off
    # when the trace unit used one) walks less: more instructions, no more misses.
    return new.nacc <= old.nacc and new.instructions > old.instructions * 11 // 10 + 1


def _structural(s: _Score) -> float:
    return s.cost - _MISS_WEIGHT * s.missed


def _least_speculation(
    best: Candidate, best_score: _Score, cost: Callable[[Candidate], _Score]
) -> tuple[Candidate, _Score]:
    """The smallest speculation depth that decodes as cleanly as the deepest.

    A trace unit commits its oldest element without a commit packet once more
    than its maximum are uncommitted, so the depth matters: too small and later
    commits ask for elements already committed (diagnostics), too large and
    elements stay uncommitted. The trace shows only the lower bound: the
    smallest clean depth is taken (exact whenever the trace reached its
    maximum at least once).
    """
    deepest = dict(best, max_spec=255)
    target = cost(deepest)
    lo, hi = 1, 255
    while lo < hi:
        mid = (lo + hi) // 2
        if cost(dict(best, max_spec=mid)).cost <= target.cost:
            hi = mid
        else:
            lo = mid + 1
    chosen = dict(best, max_spec=lo)
    return chosen, cost(chosen)


def _quality(best: _Score, has_code: bool) -> float:
    """How clean the choice's own decode is: a clean decode, of enough packets, whose
    program flow found code (when code was given), scores near 1."""
    if best.packets == 0 or math.isinf(best.cost):
        return 0.0
    bad = _structural(best) + best.jumps + best.unknown
    clean = 1.0 / (1.0 + 20.0 * bad / best.packets)
    size = 0.5 + 0.5 * min(1.0, best.packets / 200)
    if not has_code:
        flow = 0.7  # packets only: program flow could not be checked against code
    elif best.ranges == 0:
        flow = 0.5
    else:
        flow = 0.6 + 0.4 * (1.0 - best.missed)
    return clean * size * flow


def _gap(best: _Score, rival: _Score) -> float:
    """How far the rival is behind the choice, about in standard deviations of noise.

    The evidence is weighed in the order :func:`_better` weighs it: packets and
    decoder errors first, then program flow left unexplained, then addresses
    without code. The first kind that differs decides the sign (a rival with more
    packet errors is behind, however much code it walked); the later kinds add to
    the gap only where they point the same way. Each difference counts against
    the choice's own count of the same kind.
    """
    if math.isinf(rival.cost):
        return math.inf
    if (rival.ranges > 0) != (best.ranges > 0):
        return 10.0 if best.ranges else -10.0
    sb = best.errors - best.jumps - best.unknown
    fb = best.jumps + best.unknown
    tiers = (
        ((rival.errors - rival.jumps - rival.unknown) - sb, sb),
        ((rival.jumps + rival.unknown) - fb, fb),
        (rival.nacc - best.nacc, best.nacc),
    )
    gap = 0.0
    for diff, own in tiers:
        step = diff / math.sqrt(1.0 + own)
        if gap == 0.0:
            gap = step
        elif step > 0:
            gap += step if gap > 0 else 0.0
    return gap


def _margin(gap: float) -> float:
    """Confidence that the choice beats a rival ``gap`` apart (0.5 for a tie)."""
    if gap <= 0:
        return 0.5 if gap == 0 else max(0.05, 0.5 * math.exp(gap))
    return 1.0 - 0.5 * math.exp(-gap)


_DISPLAY = {
    "commit_opt1": "commit_opt",
    "max_spec": "max_speculation",
    "wfi_wfe": "wfi_wfe_branch",
    "q": "q_elements",
    "data": "data_trace",
    "comm_trans_p0": "transactions_p0",
    "ts_marker": "timestamp_markers",
    "timestamps": "timestamps",
}


def _value_text(name: str, value: Any, c: Candidate) -> str:
    if name == "protocol":
        return {"ETM4": "ETMv4", "ETM3": "ETMv3"}.get(str(value), str(value))
    if name == "vmid" and value == "usual":
        value = etmv4_config.vmid_bits(c)
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _decides(s: Setting, tid: str, values: list[str]) -> str:
    """The option that decides setting ``s``, for trace ID ``tid`` (``""``: every source)."""
    pre = f"{tid}:" if tid else ""
    eq = f"{tid}=" if tid else ""
    if s.name == "protocol":
        return f"--protocol {eq}etmv4 or --protocol {eq}ete decides"
    if s.name == "core":
        return f"--core {eq}CORE (the traced core) decides"
    if s.option:
        return " or ".join(f"--set {pre}{s.option}={v}" for v in values) + " decides"
    return f"--reg {pre}REGISTER=VALUE with {s.field} decides"


@dataclass
class _Judgement:
    confidence: float
    same: list[str]
    undecided: list[str]
    best: Candidate
    score: _Score


def _judge(
    best: Candidate,
    best_score: _Score,
    space: Mapping[str, tuple[Any, ...]],
    settings: tuple[Setting, ...],
    cost: Callable[[Candidate], _Score],
    has_code: bool,
    tid: str,
) -> _Judgement:
    """Decode every other value of every searched setting around ``best`` (step 4 of the
    module text): the confidence, what does not matter, what is undecided."""
    by_name = {s.name: s for s in settings}
    for _ in range(3):
        restart = False
        same: list[str] = []
        undecided: list[str] = []
        worst = 1.0
        for name, values in space.items():
            s = by_name.get(name)
            if s is None:
                continue
            rivals: list[tuple[Any, _Score]] = []
            alike: list[Any] = []
            for value in values:
                if _value_text(name, value, best) == _value_text(name, best[name], best):
                    continue
                trial = dict(best, **{name: value})
                sc = cost(trial)
                if math.isinf(sc.cost):
                    continue
                if _better(sc, best_score):
                    best, best_score, restart = trial, sc, True
                    break
                if sc.signature == best_score.signature:
                    alike.append(value)
                else:
                    rivals.append((value, sc))
            if restart:
                break
            if alike:
                same.append(
                    f"{_DISPLAY.get(name, name)}: "
                    + ", ".join(_value_text(name, v, best) for v in alike)
                )
            for value, sc in rivals:
                gap = _gap(best_score, sc)
                worst = min(worst, _margin(gap))
                if gap <= 0:
                    chosen = _value_text(name, best[name], best)
                    other = _value_text(name, value, best)
                    undecided.append(
                        f"{_DISPLAY.get(name, name)} ({s.field}): {chosen} gives "
                        f"{best_score.instructions} instructions with {best_score.errors} "
                        f"inconsistencies, {other} gives {sc.instructions} with {sc.errors}; "
                        f"the trace does not tell them apart: " + _decides(s, tid, [chosen, other])
                    )
        if not restart:
            break
    confidence = min(0.99, _quality(best_score, has_code) * worst)
    return _Judgement(round(max(0.01, confidence), 2), same, undecided, best, best_score)


def _space(
    family: _Family, fixed: set[str], platform: Platform, core: str | None
) -> dict[str, tuple[Any, ...]]:
    """The values searched per setting: the family's, less what the user fixed and what the
    platform rules out."""
    space: dict[str, tuple[Any, ...]] = {}
    for s in family.settings:
        if s.name in fixed:
            continue
        values = s.values
        if family.name == "etm4":
            narrowed = etmv4_config.setting_values(s.name, platform.profile)
            if narrowed is not None:
                values = narrowed
            if s.name == "protocol":
                values = tuple(v for v in values if platform.allows(v)) or values
        if s.name == "core" and core is not None:
            values = (core,)
        if len(values) > 1:
            space[s.name] = values
    return space


def infer_source(
    family: str,
    stream: Stream,
    trace_id: int,
    fixed: set[str],
    core_given: str | None,
    complete: Completer,
    memory: Callable[[str], CodeMemory | None],
    candidates: tuple[str, ...] = (),
    prefer: Mapping[str, Candidate] | None = None,
    has_code: bool = True,
    protocol_given: str | None = None,
    platform: Platform | None = None,
    single: bool = False,
    whole_stream: bool = False,
) -> Inference:
    """Infer the configuration of one trace source (see the module docstring).

    ``family`` is the detected family (``etm4``, ``ptm`` or ``etm3``); ``fixed``
    the option and register names the user gave (settings they hold are not
    searched); ``core_given`` the user's core type; ``complete`` applies the
    user's items to a candidate's registers; ``memory`` gives the code memory
    for a core type; ``candidates`` other families worth trying (``ptm`` for a
    stream detected as ``etm3``, say); ``prefer`` the settings chosen for
    another source of the same family in the capture, which this one keeps
    unless its own trace clearly says otherwise; ``has_code`` whether any
    memory or image was given (for the confidence); ``protocol_given`` the
    protocol family the user named (``ete``, ``etm4``, ``ptm``, ``etm3``),
    which is kept; ``platform`` what the images and the user say about the
    core; ``single`` whether the capture holds one source (options then need
    no trace ID); ``whole_stream`` whether ``stream`` holds all of the source's
    trace (then a stream short enough is decoded to its end, end-of-trace
    elements included).
    """
    platform = platform or Platform(core=core_given)
    whole = whole_stream and len(stream.data) <= PREFIX_BYTES
    stream = _without_padding(stream)
    prefix = _prefix(stream, PREFIX_BYTES)
    tid = "" if single else f"{trace_id:#x}"
    families = [f for f in (family, *candidates) if f in _FAMILIES or f == "ete"]
    allowed = [f for f in families if _family_allowed(f, platform)]
    conflict = ""
    if allowed:
        families = allowed
    elif platform.known:
        # The trace's synchronisation sequences name a protocol no core of this
        # architecture has: the images (or the core named) are not this source's.
        conflict = (
            f"{platform.said_by} says {platform.name or 'an architecture'}, whose cores have "
            f"no {_FAMILY_WORDS.get(family, family)}: not used"
        )
        platform = Platform(core=core_given)
    results: list[tuple[_Score, Inference, _Evaluator, dict[str, tuple[Any, ...]]]] = []
    for fam_name in families:
        fam = _FAMILIES["etm4" if fam_name == "ete" else fam_name]
        start = dict((prefer or {}).get(fam.name, fam.start))
        core = core_given or platform.decode_core(fam.name)
        if core:
            start["core"] = core
        fixed_dims = {s.name for s in fam.settings if any(h in fixed for h in s.holds)}
        notes: list[str] = []
        votes: tuple[int, int] | None = None
        if fam.name == "etm4":
            if protocol_given in ("ete", "etm4"):
                start["protocol"] = "ETE" if protocol_given == "ete" else "ETM4"
                fixed_dims.add("protocol")
            elif not platform.allows("ETE"):
                start["protocol"] = "ETM4"
                fixed_dims.add("protocol")
            else:
                proof, why = _etm4_protocol_proof(_prefix(stream, _SCAN_BYTES), trace_id, start)
                if proof:
                    start["protocol"] = proof
                    fixed_dims.add("protocol")
                    notes.append(why)
            start = _etm4_evidence(prefix, trace_id, start)
            if "max_speculation" in fixed or "TRCIDR8" in fixed:
                fixed_dims.add("max_spec")
        elif fam.name == "etm3" and "cyclecount" not in fixed_dims:
            votes = _etm3_isync_votes(stream.data)
            if votes[0] or votes[1]:
                notes.append(
                    f"{votes[0] + votes[1]} I-sync(s) after an A-sync: {votes[0]} with a cycle "
                    f"count (cycle-accurate), {votes[1]} without"
                )
        space = _space(fam, fixed_dims, platform, core)
        cost = _Evaluator(fam, complete, prefix, memory, trace_id, votes, whole)
        best, score = _search(start, space, cost, fam.joint, "max_spec" not in fixed_dims)
        if fam.name == "etm4":
            # What the packets say, read again with the configuration found (the first
            # reading may have split packets wrongly), and searched again if it differs.
            again = _etm4_evidence(prefix, trace_id, best)
            if again != best:
                best, score = _search(again, space, cost, (), "max_spec" not in fixed_dims)
        fmt, regs = fam.build(best, trace_id)
        done = complete(fmt, regs, str(best["core"]))
        if done is None:
            continue
        inf = Inference(
            trace_id=trace_id,
            protocol=fmt,
            core=done[1],
            registers=done[0],
            settings={},
            confidence=0.0,
            evidence="",
            family=fam.name,
            candidate=best,
        )
        inf.evidence = "; ".join(notes)
        results.append((score, inf, cost, space))
    if not results:
        raise ValueError(f"no configuration can be tried for protocol family {family!r}")
    chosen_score, chosen, cost, space = results[0]
    for score, inf, ev, sp in results[1:]:
        if _better(score, chosen_score):
            chosen_score, chosen, cost, space = score, inf, ev, sp
    fam = _FAMILIES[chosen.family]
    judged = _judge(chosen.candidate, chosen_score, space, fam.settings, cost, has_code, tid)
    best = judged.best
    confidence = judged.confidence
    same = judged.same
    if fam.name == "etm4" and best["protocol"] == "ETE" and "protocol" in space:
        # ETE and ETMv4 decode this trace alike: name the protocol Armv8 cores have.
        vmid: Any = etmv4_config.vmid_bits(best)
        if any(x.startswith("vmid:") for x in same):
            vmid = "usual"  # the size does not matter: ETMv4's usual one
        plain = dict(best, protocol="ETM4", vmid=vmid)
        if cost(plain, True).signature == cost(best, True).signature:
            best = plain
            others = ", ".join(
                v for v in ("8", "16", "32") if v != _value_text("vmid", vmid, plain)
            )
            same = [
                "protocol: ETE"
                if x.startswith("protocol:")
                else (f"vmid: {others}" if x.startswith("vmid:") else x)
                for x in same
            ]
    for score, inf, _ev, _sp in results:
        if inf is not chosen and score.signature != judged.score.signature:
            other = _quality(judged.score, has_code) * _margin(_gap(judged.score, score))
            confidence = min(confidence, round(other, 2))
    fmt, regs = fam.build(best, trace_id)
    done = complete(fmt, regs, str(best["core"]))
    if done is None:  # pragma: no cover - the search only keeps completed candidates
        raise ValueError("the inferred configuration cannot be completed")
    full, core_type, _ = done
    decided_core = "core" in space and not any(x.startswith("core") for x in same)
    label = _label(
        fam.name, best, platform, same, core_type if decided_core else "", judged.undecided
    )
    settings = _settings_text(best)
    if fam.name == "etm4" and platform.profile == Profile.M:
        settings.pop("vmid", None)  # M-profile cores have no VMID
    evidence = f"start of the stream ({len(prefix)} bytes) decoded: {judged.score.text()}"
    if chosen.evidence:
        evidence += "; " + chosen.evidence
    if platform.said_by:
        evidence += f"; {platform.said_by}"
    if conflict:
        evidence += f"; {conflict}"
    return Inference(
        trace_id=trace_id,
        protocol=fmt,
        core=core_type,
        registers=full,
        settings=settings,
        confidence=confidence,
        evidence=evidence,
        family=fam.name,
        candidate=best,
        label=label,
        undecided=judged.undecided,
        same=same,
    )


_FAMILY_WORDS = {"etm4": "ETMv4 or ETE", "ete": "ETE", "ptm": "PTM", "etm3": "ETMv3"}


def _family_allowed(family: str, platform: Platform) -> bool:
    if family in ("etm4", "ete"):
        return platform.allows("ETM4") or platform.allows("ETE")
    if family == "ptm":
        return platform.allows("PTM")
    if family == "etm3":
        return platform.allows("ETM3")
    return True


def _label(
    family: str,
    c: Candidate,
    platform: Platform,
    same: list[str],
    core: str,
    undecided: list[str],
) -> str:
    """The protocol and core in words, naming versions only as far as the evidence goes."""
    if family == "etm4":
        if any(u.startswith("protocol") for u in undecided):
            proto = "ETE or ETMv4 (the trace does not tell)"
        elif c["protocol"] == "ETE":
            proto = "ETE"
        else:
            proto = "ETMv4 (minor version not seen)"
            wide = etmv4_config.vmid_bits(c) > 8 and not any(s.startswith("vmid:") for s in same)
            if wide:
                proto = "ETMv4.1 or later (VMIDs wider than 8 bits)"
            if any(s.startswith("protocol:") for s in same):
                proto = proto[:-1] + "; ETE would decode it the same)"
    elif family == "ptm":
        proto = "PTM (PFT)"
    else:
        proto = "ETMv3 (minor version not seen)"
    where = platform.core_text()
    if not where:
        where = _core_words(core)
    return f"{proto} on {where}"


def _core_words(core: str) -> str:
    """A decode core name in words, when nothing but the trace said it (``""``: the trace
    did not say it either)."""
    if not core:
        return "a core not known (no image or core named, and the trace does not tell)"
    if core == "ARM-AA64":
        return "an A-profile core (from the trace; Armv8-A or later assumed)"
    if core.startswith("ARMv"):
        m = re.match(r"ARMv(\d+(?:\.\d+)?)-([ARM])", core)
        if m:
            return f"an Armv{m.group(1)}-{m.group(2)} core (from the trace)"
    return core


_PADDING = 32
"""Zero bytes at the end of a stream from which on they are taken as unused buffer space."""


def _without_padding(stream: Stream) -> Stream:
    """``stream`` without the zero bytes that end it (an unfilled DMA buffer or ETB): they
    are no trace, and would count against every candidate alike."""
    data = bytes(stream.data)
    end = len(data.rstrip(b"\x00"))
    if len(data) - end < _PADDING:
        return stream
    return _prefix(stream, end)


def _prefix(stream: Stream, size: int) -> Stream:
    """The first ``size`` bytes of ``stream``, with their capture offsets."""
    data = stream.data
    if len(data) <= size:
        return stream
    keep = stream.run_pos < size
    return Stream(stream.trace_id, bytes(data[:size]), stream.run_pos[keep], stream.run_idx[keep])
