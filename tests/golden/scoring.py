"""Scoring a listing against a reference listing, with the rules of ``ocsd_score.py``.

Element lines (``OCSD_GEN_TRC_ELEM_...``) are compared exactly; packet lines on
index, trace ID, raw bytes and mnemonic; both per trace ID and in order. A listing
is exact when every expected element line is kept and none is added, which is
the same as the element lines of each trace ID being identical.
"""

from __future__ import annotations

import difflib
import lzma
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

LINE = re.compile(r"^Idx:(\d+); ID:([0-9a-fA-F]+); (.*)$")
MNEMONIC = re.compile(r"[A-Za-z0-9_]*")


def read_listing(path: Path) -> list[str]:
    raw = path.read_bytes()
    if path.suffix == ".xz":
        raw = lzma.decompress(raw)
    return raw.decode("utf-8", errors="replace").splitlines()


def split(lines: list[str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per trace ID: element lines and normalised packet lines."""
    elems: dict[str, list[str]] = defaultdict(list)
    pkts: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        m = LINE.match(line.rstrip())
        if not m:
            continue
        idx, tid, rest = m.group(1), m.group(2).lower(), m.group(3)
        if rest.startswith("OCSD_GEN_TRC_ELEM_"):
            elems[tid].append(f"{idx};{rest.strip()}")
        elif rest.startswith("["):
            close = rest.find("]")
            raw = " ".join(rest[1:close].split()) if close > 0 else ""
            tail = rest[close + 1 :].lstrip("; \t")
            m2 = MNEMONIC.match(tail)
            name = m2.group(0) if m2 else ""
            pkts[tid].append(f"{idx};[{raw}];{name}")
    return elems, pkts


def _kept(a: list[str], b: list[str]) -> int:
    if a == b:
        return len(a)
    if not a or not b:
        return 0
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(block.size for block in sm.get_matching_blocks())


@dataclass
class Score:
    elem_exp: int = 0
    elem_kept: int = 0
    elem_extra: int = 0
    pkt_exp: int = 0
    pkt_kept: int = 0
    pkt_extra: int = 0
    first_diff: str = ""

    @property
    def exact(self) -> bool:
        return self.elem_kept == self.elem_exp and self.elem_extra == 0

    @property
    def packets_complete(self) -> bool:
        return self.pkt_kept == self.pkt_exp

    def summary(self) -> str:
        return (
            f"elements {self.elem_kept}/{self.elem_exp} extra {self.elem_extra}; "
            f"packets {self.pkt_kept}/{self.pkt_exp} extra {self.pkt_extra}"
        )


def score(expected: list[str], actual: list[str]) -> Score:
    exp_e, exp_p = split(expected)
    act_e, act_p = split(actual)
    s = Score()
    for kind, exp, act in (("elem", exp_e, act_e), ("pkt", exp_p, act_p)):
        for tid in sorted(set(exp) | set(act)):
            a, b = exp.get(tid, []), act.get(tid, [])
            k = _kept(a, b)
            setattr(s, f"{kind}_exp", getattr(s, f"{kind}_exp") + len(a))
            setattr(s, f"{kind}_kept", getattr(s, f"{kind}_kept") + k)
            setattr(s, f"{kind}_extra", getattr(s, f"{kind}_extra") + len(b) - k)
            if a != b and not s.first_diff:
                for i, (x, y) in enumerate(zip(a, b, strict=False)):
                    if x != y:
                        s.first_diff = f"ID {tid} {kind} line {i}:\n  expected {x}\n  actual   {y}"
                        break
                else:
                    s.first_diff = f"ID {tid} {kind}: expected {len(a)} lines, got {len(b)}"
    return s
