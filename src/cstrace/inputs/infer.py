"""Configuration inference for raw captures: the settings of a trace source, found from its trace.

Input: the stream of one trace ID of a raw capture, the protocol family that
detection (:mod:`.detect`) recognised, what the user said about the source
(registers and options, which always win) and the code memory of the capture
(memory dumps and images given with it, possibly none). Output: an
:class:`Inference`: the registers to configure the source with, the settings
chosen in words, a confidence and the evidence.

How. Some settings are written in the trace itself and are read from its
packets: an ETMv4/ETE trace-info packet says whether cycle counting and
conditional tracing are on and whether the trace unit speculates; packets that
only one protocol version has (timestamp markers, transactions, instrumentation
packets) name the version. The rest change how packets split or how program
flow is followed, and are found by decoding the start of the stream with
candidate configurations and scoring how consistent each decode is:

- packets that do not parse (reserved headers, bad sequences) cost most;
- decoder diagnostics and resynchronisations cost next;
- addresses that no memory dump or image covers, and timestamps that go
  backwards, cost one each;
- with no images every candidate misses memory alike, so the score rests on the
  packets alone.

The search changes one setting at a time from a starting configuration, keeps a
change that lowers the cost and goes round again until nothing improves
(coordinate descent). Settings the trace cannot tell apart keep their first
candidate, which is the one that decodes correctly whatever the truth is where
such a value exists (for example the widest cycle counter, the latest
architecture of a profile); docs/usage.md lists them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cstrace.capture import Stream
from cstrace.elements import ElemType
from cstrace.errors import CstraceError, DiagKind, Severity
from cstrace.memory.code import CodeMemory
from cstrace.protocols import DecodeContext, DecodeOptions, Packet, get_protocol

__all__ = ["PREFIX_BYTES", "Inference", "infer_source"]

PREFIX_BYTES = 24 * 1024
"""Bytes at the start of a stream decoded for each candidate configuration."""

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
    """The core type chosen (an architecture name such as ``ARM-AA64``)."""
    registers: dict[str, int]
    settings: dict[str, str]
    """Each inferred setting and its value, in words (``cyclecount``: ``1``)."""
    confidence: float
    evidence: str
    family: str = ""
    """The protocol family searched (``etm4``, ``ptm``, ``etm3``)."""
    candidate: dict[str, Any] = field(default_factory=dict)
    """The chosen settings under their internal names (a start for sibling sources)."""


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
    missed: float = 1.0
    """The share of program-flow steps that found no code (1.0 when nothing was walked)."""

    def text(self) -> str:
        return (
            f"{self.packets} packets, {self.bad_packets} unparsable, {self.diagnostics} "
            f"decoder diagnostics, {self.resyncs} resyncs, {self.nacc} addresses without code, "
            f"{self.instructions} instructions"
        )


# -- candidate registers per family ----------------------------------------------------

Candidate = dict[str, Any]


@dataclass(frozen=True)
class _Dim:
    """A setting searched over: its name, its values in order of preference, and which
    registers or options hold it (a user who gave one of those fixes the setting)."""

    name: str
    values: tuple[Any, ...]
    holds: tuple[str, ...]


def _vmid_bits(c: Candidate) -> int:
    """The VMID size of a candidate; ``usual`` is what the version's cores have
    (8 bits for ETMv4 on Armv8.0 cores, 32 for ETE)."""
    v = c["vmid"]
    if v == "usual":
        return 32 if c["protocol"] == "ETE" else 8
    return int(v)


def _etm4_registers(c: Candidate, trace_id: int) -> tuple[str, dict[str, int]]:
    ete = c["protocol"] == "ETE"
    idr0 = 0x1 | 0x20 | 0x40 | 0x80 | 0x200 | (3 << 10) | (8 << 24)
    if c["q"]:
        idr0 |= 3 << 15
    if c["commit_opt1"]:
        idr0 |= 1 << 29
    if not c["comm_trans_p0"]:
        idr0 |= 1 << 30
    if c["ts_marker"]:
        idr0 |= 1 << 23
    if c["data"]:
        idr0 |= 0x18
    vmid = {8: 1, 16: 2, 32: 4}[_vmid_bits(c)]
    idr2 = 0x8 | (4 << 5) | (vmid << 10) | (8 << 25)
    if c["wfi_wfe"]:
        idr2 |= 1 << 31
    configr = 0x1 | (1 << 6) | (1 << 7) | (1 << 11)
    if c["cyclecount"]:
        configr |= 1 << 4
    configr |= c["conditional"] << 8
    if c["return_stack"]:
        configr |= 1 << 12
    if c["q"]:
        configr |= 3 << 13
    if c["data"]:
        configr |= (1 << 1) | (3 << 16)
    regs = {
        "TRCCONFIGR": configr,
        "TRCTRACEIDR": trace_id,
        "TRCIDR0": idr0,
        "TRCIDR2": idr2,
        "TRCIDR8": c["max_spec"],
    }
    if ete:
        regs["TRCIDR1"] = 0x4100FFF0
        regs["TRCDEVARCH"] = 0x47705A13 | (3 << 16)
        return "ETE", regs
    regs["TRCIDR1"] = 0x4100F400 | (4 << 8) | (6 << 4)
    return "ETM4.6", regs


def _etm3_registers(c: Candidate, trace_id: int) -> tuple[str, dict[str, int]]:
    ptm = c["protocol"] == "PTM"
    cr = 0
    if c["cyclecount"]:
        cr |= 1 << 12
    cr |= {0: 0, 8: 1, 16: 2, 32: 3}[c["context_id"]] << 14
    if c["vmid"]:
        cr |= 1 << 30
    if c["timestamps"]:
        cr |= 1 << 28
    if c.get("branch_broadcast"):
        cr |= 1 << 8
    ccer = 0
    if c["timestamps"]:
        ccer |= 1 << 22
        if c["timestamp_bits"] == 64:
            ccer |= 1 << 29
        if not c["timestamp_gray"]:
            ccer |= 1 << 28
    if c["vmid"]:
        ccer |= 1 << 26
    if ptm:
        if c["return_stack"]:
            cr |= 1 << 29
            ccer |= 1 << 23
        if c["dmb_dsb_waypoints"]:
            ccer |= 1 << 24
        idr = 0x411CF300 | (1 << 4)
        return "PTM1.1", {
            "ETMCR": cr,
            "ETMCCER": ccer,
            "ETMIDR": idr,
            "ETMTRACEIDR": trace_id,
        }
    if c["data_value"]:
        cr |= 1 << 2
    if c["data_address"]:
        cr |= 1 << 3
    idr = 0x410CF250
    if c["alt_branch"]:
        idr |= 1 << 20
    return "ETM3.5", {"ETMCR": cr, "ETMCCER": ccer, "ETMIDR": idr, "ETMTRACEIDR": trace_id}


_ETM4_DIMS = (
    _Dim("protocol", ("ETE", "ETM4"), ("TRCDEVARCH", "TRCIDR1")),
    _Dim("vmid", ("usual", 8, 16, 32), ("vmid", "TRCIDR2")),
    _Dim("commit_opt1", (False, True), ("commit_opt", "TRCIDR0")),
    _Dim("core", ("ARM-AA64", "ARMv8-M", "ARMv7-M"), ("core",)),
    _Dim("return_stack", (False, True), ("return_stack", "TRCCONFIGR")),
    _Dim("wfi_wfe", (True, False), ("TRCIDR2",)),
    _Dim("comm_trans_p0", (True, False), ("TRCIDR0",)),
    _Dim("data", (False, True), ("TRCIDR0", "TRCCONFIGR")),
)
_ETM4_START: Candidate = {
    "protocol": "ETE",
    "vmid": "usual",
    "commit_opt1": False,
    "core": "ARM-AA64",
    "return_stack": False,
    "wfi_wfe": True,
    "comm_trans_p0": True,
    "data": False,
    "q": True,
    "cyclecount": False,
    "conditional": 0,
    "max_spec": 0,
    "ts_marker": False,
}

_PTM_DIMS = (
    _Dim("cyclecount", (False, True), ("cyclecount", "ETMCR")),
    _Dim("context_id", (0, 32, 8, 16), ("context_id", "ETMCR")),
    _Dim("vmid", (False, True), ("vmid", "ETMCR")),
    _Dim("timestamps", (False, True), ("timestamp_bits", "ETMCR")),
    _Dim("timestamp_bits", (64, 48), ("timestamp_bits", "ETMCCER")),
    _Dim("timestamp_gray", (False, True), ("timestamp_gray", "ETMCCER")),
    _Dim("return_stack", (False, True), ("return_stack", "ETMCR")),
    _Dim("dmb_dsb_waypoints", (False, True), ("dmb_dsb_waypoints", "ETMCCER")),
    _Dim("branch_broadcast", (False, True), ("branch_broadcast", "ETMCR")),
)
_ETM3_DIMS = (
    _Dim("cyclecount", (False, True), ("cyclecount", "ETMCR")),
    _Dim("context_id", (0, 32, 8, 16), ("context_id", "ETMCR")),
    _Dim("alt_branch", (True, False), ("alt_branch", "ETMIDR")),
    _Dim("data_address", (False, True), ("data_address", "ETMCR")),
    _Dim("data_value", (False, True), ("data_value", "ETMCR")),
    _Dim("vmid", (False, True), ("vmid", "ETMCR")),
    _Dim("timestamps", (False, True), ("timestamp_bits", "ETMCR")),
    _Dim("timestamp_bits", (64, 48), ("timestamp_bits", "ETMCCER")),
    _Dim("timestamp_gray", (False, True), ("timestamp_gray", "ETMCCER")),
    _Dim("core", ("ARMv7-A", "ARMv7-M"), ("core",)),
    _Dim("branch_broadcast", (False, True), ("branch_broadcast", "ETMCR")),
)
_ETM3_START: Candidate = {
    "protocol": "ETM3",
    "cyclecount": False,
    "context_id": 0,
    "alt_branch": True,
    "data_address": False,
    "data_value": False,
    "vmid": False,
    "timestamps": False,
    "timestamp_bits": 64,
    "timestamp_gray": False,
    "core": "ARMv7-A",
    "branch_broadcast": False,
}
_PTM_START: Candidate = {
    "protocol": "PTM",
    "cyclecount": False,
    "context_id": 0,
    "vmid": False,
    "timestamps": False,
    "timestamp_bits": 64,
    "timestamp_gray": False,
    "return_stack": False,
    "dmb_dsb_waypoints": False,
    "branch_broadcast": False,
    "core": "ARMv7-A",
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


def _decode_cost(
    proto_name: str,
    regs: Mapping[str, int],
    core: str,
    version: str,
    stream: Stream,
    memory: CodeMemory | None,
    trace_id: int,
) -> _Score:
    """Decode ``stream`` with a candidate configuration and score its consistency."""
    score = _Score()
    spec = get_protocol(proto_name)
    if spec is None:
        score.cost = math.inf
        return score
    try:
        config = spec.from_registers(dict(regs), core, version)
    except CstraceError:
        score.cost = math.inf
        return score
    ctx = DecodeContext(trace_id, DecodeOptions(), memory, complete=False)
    packets = _count_packets(spec.iter_packets(stream, config, False), score)
    synced = False
    last_ts = -1
    try:
        for e in spec.iter_elements(packets, config, ctx):
            t = e.TYPE
            if t == ElemType.INSTR_RANGE:
                score.instructions += int(getattr(e, "num_instr", 0) or 0)
                score.ranges += 1
            elif t == ElemType.ADDR_NACC:
                score.nacc += 1
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
    score.cost = (
        10.0 * score.bad_packets
        + 5.0 * score.diagnostics
        + 5.0 * score.resyncs
        + 1.0 * score.backwards
        + _MISS_WEIGHT * score.missed
    )
    return score


# -- evidence read from packets --------------------------------------------------------


def _etm4_evidence(stream: Stream, trace_id: int, start: Candidate) -> tuple[Candidate, list[str]]:
    """Settings an ETMv4/ETE trace states in its own packets."""
    fmt, regs = _etm4_registers(start, trace_id)
    spec = get_protocol("ete" if fmt == "ETE" else "etmv4")
    assert spec is not None
    config = spec.from_registers(regs, str(start["core"]), "")
    found = dict(start)
    read: list[str] = []
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
    read.append("cyclecount")
    found["conditional"] = {0: 0, 1: 1, 2: 2, 3: 3}.get(cond_bits, 7) if info_cond else 0
    read.append("conditional")
    speculates = spec_depth or bool(
        kinds & {"COMMIT", "CANCEL_F1", "CANCEL_F2", "CANCEL_F3", "MISPREDICT"}
    )
    if not speculates:
        found["max_spec"] = 0
    elif not start.get("max_spec"):
        found["max_spec"] = 255
    read.append("max_speculation")
    found["ts_marker"] = "TS_MARKER" in kinds
    read.append("timestamp_markers")
    found["q"] = True
    if kinds & {"TS_MARKER", "ITE", "TRANS_ST", "TRANS_COMMIT", "TRANS_FAIL", "SRC_ADDR_MATCH"}:
        found["protocol"] = "ETE"
    return found, read


def _etm3_evidence(stream: Stream, trace_id: int, start: Candidate) -> tuple[Candidate, list[str]]:
    """Settings an ETMv3 trace states in its own packets: an I-sync with a cycle count
    (header 0x70) or a cycle-count packet exists only when cycle accuracy is on."""
    spec = get_protocol("etmv3")
    assert spec is not None
    _, regs = _etm3_registers(start, trace_id)
    found = dict(start)
    try:
        config = spec.from_registers(regs, str(start["core"]), "3.5")
        for n, p in enumerate(spec.iter_packets(stream, config, False)):
            if getattr(p, "cycle_count", None) is not None and _kind_name(p) in (
                "ISYNC",
                "CYCLECOUNT",
            ):
                found["cyclecount"] = True
                return found, ["cyclecount"]
            if n > 20000:
                break
    except CstraceError:
        pass
    return found, []


# -- the search ------------------------------------------------------------------------

Builder = Callable[[Candidate, int], tuple[str, dict[str, int]]]
Completer = Callable[[str, dict[str, int], str], tuple[dict[str, int], str, str] | None]
"""``(format, registers, core)`` → ``(registers, core, version)`` with the user's items
applied, or None when the user's items make the candidate invalid."""


def _settings_text(c: Candidate) -> dict[str, str]:
    """The settings of a candidate in words, under the names docs/usage.md uses."""
    out: dict[str, str] = {}
    for key, value in c.items():
        if key in ("protocol", "core"):
            continue
        if key == "vmid" and value == "usual":
            value = _vmid_bits(c)
        name = _DISPLAY.get(key, key)
        if isinstance(value, bool):
            out[name] = "1" if value else "0"
        else:
            out[name] = str(value)
    return out


def _search(
    start: Candidate,
    dims: tuple[_Dim, ...],
    fixed: set[str],
    build: Builder,
    complete: Completer,
    stream: Stream,
    memory: Callable[[str], CodeMemory | None],
    trace_id: int,
    proto_of: Callable[[str], str],
    joint: tuple[str, ...] = (),
) -> tuple[Candidate, _Score]:
    """Coordinate descent over ``dims`` from ``start``: the best candidate and its score."""
    cache: dict[tuple[Any, ...], _Score] = {}

    def cost(c: Candidate) -> _Score:
        key = tuple(sorted(c.items()))
        got = cache.get(key)
        if got is None:
            fmt, regs = build(c, trace_id)
            done = complete(fmt, regs, str(c["core"]))
            if done is None:
                got = _Score(cost=math.inf)
            else:
                full, core, version = done
                got = _decode_cost(
                    proto_of(fmt), full, core, version, stream, memory(core), trace_id
                )
            cache[key] = got
        return got

    best = dict(start)
    best_score = cost(best)
    # Settings that only show together (a context packet's VMID size and the protocol
    # version whose headers follow it) are tried in every combination first.
    joint_dims = [d for d in dims if d.name in joint and d.name not in fixed]
    if joint_dims:
        for values in itertools.product(*(d.values for d in joint_dims)):
            trial = dict(best)
            trial.update({d.name: v for d, v in zip(joint_dims, values, strict=True)})
            s = cost(trial)
            if _better(s, best_score):
                best, best_score = trial, s
    for _ in range(3):
        improved = False
        for dim in dims:
            if dim.name in fixed:
                continue
            for value in dim.values:
                if value == best[dim.name]:
                    continue
                trial = dict(best)
                trial[dim.name] = value
                s = cost(trial)
                if _better(s, best_score):
                    best, best_score, improved = trial, s, True
        if not improved:
            break
    if best.get("max_spec") and "max_spec" not in fixed:
        best, best_score = _least_speculation(best, best_score, cost)
    return best, best_score


def _better(new: _Score, old: _Score) -> bool:
    """Whether ``new`` is clearly better than ``old``.

    Fewer packets that do not parse, diagnostics or resynchronisations always
    count. Then a decode that walked some program flow beats one that walked
    none. Then fewer addresses without code count, when they are clearly fewer
    (a tenth, and at least :data:`_NACC_MARGIN`): settings such as the return
    stack move that count a little either way when the memory given covers
    only part of the code, and the first candidate (the common setting) should
    keep it then. Last, a tenth more instructions walked with no more
    addresses missed counts.
    """
    sn, so = _structural(new), _structural(old)
    if sn != so:
        return sn < so
    if (new.ranges > 0) != (old.ranges > 0):
        return new.ranges > 0
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


def _confidence(best: _Score, has_code: bool) -> float:
    """How sure the choice is: a clean decode, of enough packets, whose program flow
    found code (when code was given), scores near 1."""
    if best.packets == 0 or math.isinf(best.cost):
        return 0.0
    clean = 1.0 / (1.0 + 20.0 * _structural(best) / best.packets)
    size = 0.5 + 0.5 * min(1.0, best.packets / 200)
    if not has_code:
        flow = 0.7  # packets only: program flow could not be checked against code
    elif best.ranges == 0:
        flow = 0.5
    else:
        flow = 0.6 + 0.4 * (1.0 - best.missed)
    return round(max(0.01, min(0.99, clean * size * flow)), 2)


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
    protocol family the user named (``ete`` or ``etm4``), which is kept.
    """
    prefix = _prefix(stream, PREFIX_BYTES)
    results: list[tuple[_Score, Inference]] = []
    for fam in (family, *candidates):
        if fam in ("etm4", "ete"):
            start = dict((prefer or {}).get("etm4", _ETM4_START))
            if core_given:
                start["core"] = core_given
            start, read = _etm4_evidence(prefix, trace_id, start)
            dims: tuple[_Dim, ...] = _ETM4_DIMS
            build: Builder = _etm4_registers

            def proto_of(fmt: str) -> str:
                return "ete" if fmt == "ETE" else "etmv4"

        elif fam in ("ptm", "etm3"):
            start = dict((prefer or {}).get(fam, _PTM_START if fam == "ptm" else _ETM3_START))
            if core_given:
                start["core"] = core_given
            read = []
            if fam == "etm3":
                start, read = _etm3_evidence(prefix, trace_id, start)
            dims = _PTM_DIMS if fam == "ptm" else _ETM3_DIMS
            build = _etm3_registers

            def proto_of(fmt: str) -> str:
                return "ptm" if fmt.startswith("PTM") else "etmv3"

        else:
            continue
        fixed_dims = {d.name for d in dims if any(h in fixed for h in d.holds)}
        if protocol_given in ("ete", "etm4") and fam in ("etm4", "ete"):
            start["protocol"] = "ETE" if protocol_given == "ete" else "ETM4"
            fixed_dims.add("protocol")
        if fam == "etm3":
            fixed_dims.update(read)
        if core_given:
            fixed_dims.add("core")
        if "max_speculation" in fixed or "TRCIDR8" in fixed:
            fixed_dims.add("max_spec")
        joint = ("protocol", "vmid") if fam in ("etm4", "ete") else ("cyclecount", "context_id")
        best, score = _search(
            start, dims, fixed_dims, build, complete, prefix, memory, trace_id, proto_of, joint
        )
        if fam in ("etm4", "ete"):
            # What the packets say, read again with the configuration found (the first
            # reading may have split packets wrongly), and searched again if it differs.
            again, read = _etm4_evidence(prefix, trace_id, best)
            if again != best:
                best, score = _search(
                    again,
                    dims,
                    fixed_dims,
                    build,
                    complete,
                    prefix,
                    memory,
                    trace_id,
                    proto_of,
                    (),
                )
        fmt, regs = build(best, trace_id)
        done = complete(fmt, regs, str(best["core"]))
        if done is None:
            continue
        full, core, _ = done
        inf = Inference(
            trace_id=trace_id,
            protocol=fmt,
            core=core,
            registers=full,
            settings=_settings_text(best),
            confidence=_confidence(score, has_code),
            evidence=f"start of the stream ({len(prefix)} bytes) decoded: {score.text()}",
            family="etm4" if fam in ("etm4", "ete") else fam,
            candidate=best,
        )
        results.append((score, inf))
    if not results:
        raise ValueError(f"no configuration can be tried for protocol family {family!r}")
    chosen_score, chosen = results[0]
    for score, inf in results[1:]:
        if _better(score, chosen_score):
            chosen_score, chosen = score, inf
    return chosen


def _prefix(stream: Stream, size: int) -> Stream:
    """The first ``size`` bytes of ``stream``, with their capture offsets."""
    data = stream.data
    if len(data) <= size:
        return stream
    keep = stream.run_pos < size
    return Stream(stream.trace_id, bytes(data[:size]), stream.run_pos[keep], stream.run_idx[keep])
