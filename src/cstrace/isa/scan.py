"""Walk code to the next waypoint, fast, with a block cache.

Input: a code object (``bytes``/``bytearray``/``memoryview``) mapped at address
``base``, a start address, an ISA and :class:`~cstrace.isa.types.IsaOptions`.
Output: a :class:`~cstrace.isa.types.Scan`: how many instructions were walked,
where the walk ended, the last instruction and why it stopped.

How it stays fast (DESIGN.md §4):

- every opcode is classified once per (ISA, options) and kept in a dictionary;
  a cheap table on the top byte skips opcodes that can never be waypoints;
- A64 and A32 instructions all have the same size, so for larger code objects
  the waypoint positions of a 16 KiB page are found once (NumPy pre-filter,
  then the exact classifier on the few candidates) and a walk is a binary
  search in that page's sorted list;
- T32 walks halfword by halfword inside one loop with locals;
- :class:`BlockCache` remembers whole walks: a repeated walk is one dictionary
  lookup and returns the same :class:`Scan` object.

Like the reference decoder, a walk needs 4 readable bytes for every
instruction, even a 16-bit one: when fewer are left the walk stops with
``StopReason.NO_BYTES`` so the caller can continue in the next memory region
(or report the address as not accessible).
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Callable
from typing import Protocol

import numpy as np

from cstrace.elements import InstrType, Isa
from cstrace.isa.cls import Cls
from cstrace.isa.decode import Buffer, cls_cache, info_from_cls
from cstrace.isa.t32 import is_wide
from cstrace.isa.types import IsaOptions, Scan, StopReason

__all__ = ["BlockCache", "scan_to_address", "scan_to_waypoint"]

_OTHER = InstrType.OTHER
_LITTLE = sys.byteorder == "little"

# Top-byte filters: an instruction whose top byte (A64, A32) or first halfword's
# top byte (T32) is not flagged can never be a waypoint, whatever the options.
_A64_CAND = bytes(
    1 if (b >> 2) & 7 == 5 else 0  # op0 = x101: branches, exception generation, system
    for b in range(256)
)
# A32: Rd/Rt = PC (bits 15:12 are checked separately), B/BL/BLX (bits 27:25 = 101),
# LDM (100), the unconditional space, and the CP15 barrier MCRs (1110 in 27:24).
_A32_TOP_CAND = bytes(
    1 if (b >> 4) == 0xF or (b >> 1) & 7 in (4, 5) or b & 0x0F == 0x0E else 0 for b in range(256)
)
# T32 first-halfword top byte: 0 = 16-bit, never a waypoint; 1 = 32-bit, never a
# waypoint; 2 = may be a waypoint, an IT, or a WFI/WFE: classify it.
_T32_KIND = bytearray(256)
for _b in range(256):
    if _b >= 0xE8:
        _T32_KIND[_b] = 1
for _b in (0x44, 0x46, 0x47, 0xB1, 0xB3, 0xB9, 0xBB, 0xBD, 0xBF, 0xE8, 0xE9, 0xEE):
    _T32_KIND[_b] = 2
for _b in [*range(0xD0, 0xE8), *range(0xF0, 0xF9)]:
    _T32_KIND[_b] = 2
_T32_KIND_B = bytes(_T32_KIND)

_A64_CAND_NP = np.frombuffer(_A64_CAND, dtype=np.uint8).astype(bool)
_A32_TOP_NP = np.frombuffer(_A32_TOP_CAND, dtype=np.uint8).astype(bool)

_PAGE_SHIFT = 12  # 4096 instructions (16 KiB) per page of the waypoint index
_INDEX_MIN_BYTES = 2048  # smaller code objects are walked directly
_INDEX_MAX = 256  # code objects with a waypoint index kept at once


class _HasGeneration(Protocol):
    generation: int


def _words(code: Buffer, off: int, count: int) -> memoryview | list[int]:
    """``count`` little-endian 32-bit words of ``code`` from byte ``off``."""
    raw = memoryview(code)[off : off + 4 * count]
    if _LITTLE:
        return raw.cast("B").cast("I")
    return [int.from_bytes(raw[i : i + 4], "little") for i in range(0, 4 * count, 4)]


def _halfwords(code: Buffer, off: int, count: int) -> memoryview | list[int]:
    """``count`` little-endian halfwords of ``code`` from byte ``off``."""
    raw = memoryview(code)[off : off + 2 * count]
    if _LITTLE:
        return raw.cast("B").cast("H")
    return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, 2 * count, 2)]


def _is_candidate_fn(isa: Isa) -> Callable[[int], bool]:
    if isa == Isa.A64:
        return lambda w: bool(_A64_CAND[w >> 24])
    return lambda w: bool(_A32_TOP_CAND[w >> 24]) or (w & 0xF000) == 0xF000


class _WordIndex:
    """Waypoint word positions of one fixed-size-ISA code object, page by page."""

    __slots__ = ("cache", "code", "fn", "isa", "n", "off", "pages")

    def __init__(self, code: Buffer, off: int, isa: Isa, opts: IsaOptions) -> None:
        self.code = code  # pinned: keeps id(code) valid while the index exists
        self.off = off  # byte offset of word 0 (the alignment phase)
        self.n = (len(code) - off) // 4
        self.isa = isa
        self.cache, self.fn = cls_cache(isa, opts)
        self.pages: dict[int, list[int]] = {}

    def page(self, p: int) -> list[int]:
        """Sorted word indices of the waypoints in page ``p``."""
        lo = p << _PAGE_SHIFT
        hi = min(self.n, lo + (1 << _PAGE_SHIFT))
        arr = np.frombuffer(self.code, dtype="<u4", count=hi - lo, offset=self.off + 4 * lo)
        top = arr >> 24
        if self.isa == Isa.A64:
            mask = _A64_CAND_NP[top]
        else:
            mask = _A32_TOP_NP[top] | ((arr & 0xF000) == 0xF000)
        idx = np.flatnonzero(mask)
        cache = self.cache
        fn = self.fn
        out: list[int] = []
        for i, w in zip(idx.tolist(), arr[idx].tolist(), strict=True):
            c = cache.get(w)
            if c is None:
                c = cache[w] = fn(w)
            if c[1] != _OTHER:
                out.append(lo + i)
        self.pages[p] = out
        return out

    def next_waypoint(self, i: int) -> int:
        """The index of the first waypoint at or after word ``i``, or ``n`` if none."""
        n = self.n
        pages = self.pages
        while i < n:
            p = i >> _PAGE_SHIFT
            wps = pages.get(p)
            if wps is None:
                wps = self.page(p)
            j = bisect_left(wps, i)
            if j < len(wps):
                return wps[j]
            i = (p + 1) << _PAGE_SHIFT
        return n


_INDEXES: dict[tuple[int, int, int, int], _WordIndex] = {}


def _word_index(code: Buffer, off: int, isa: Isa, opts: IsaOptions) -> _WordIndex:
    phase = off & 3
    key = (id(code), int(isa), opts.key & 0xF, phase)
    ix = _INDEXES.get(key)
    if ix is None or ix.code is not code:
        if len(_INDEXES) >= _INDEX_MAX:
            del _INDEXES[next(iter(_INDEXES))]
        ix = _INDEXES[key] = _WordIndex(code, phase, isa, opts)
    return ix


def _word_at(code: Buffer, off: int) -> int:
    return int.from_bytes(bytes(code[off : off + 4]), "little")


def _fixed_scan(
    code: Buffer, base: int, start: int, isa: Isa, opts: IsaOptions, max_instr: int
) -> Scan:
    """Walk A64 or A32 code (4-byte instructions)."""
    off = start - base
    avail = (len(code) - off) // 4 if off >= 0 else 0
    if avail <= 0:
        return Scan(isa, start, start, 0, None, StopReason.NO_BYTES)
    limit = avail if not max_instr or max_instr > avail else max_instr
    cache, fn = cls_cache(isa, opts)
    if len(code) >= _INDEX_MIN_BYTES:
        ix = _word_index(code, off, isa, opts)
        i0 = (off - ix.off) >> 2
        k = ix.next_waypoint(i0) - i0  # instructions before the waypoint
        if k < limit:
            count, reason = k + 1, StopReason.WAYPOINT
        else:
            count = limit
            reason = StopReason.COUNT if count == max_instr else StopReason.NO_BYTES
        w = _word_at(code, off + 4 * (count - 1))
        c = cache.get(w)
        if c is None:
            c = cache[w] = fn(w)
        return Scan(
            isa,
            start,
            start + 4 * count,
            count,
            info_from_cls(isa, start + 4 * (count - 1), w, c),
            reason,
        )
    words = _words(code, off, limit)
    cand = _A64_CAND if isa == Isa.A64 else _A32_TOP_CAND
    a64 = isa == Isa.A64
    count = 0
    c = None
    w = 0
    for w in words:
        count += 1
        if cand[w >> 24] or (not a64 and (w & 0xF000) == 0xF000):
            c = cache.get(w)
            if c is None:
                c = cache[w] = fn(w)
            if c[1] != _OTHER:
                return Scan(
                    isa,
                    start,
                    start + 4 * count,
                    count,
                    info_from_cls(isa, start + 4 * (count - 1), w, c),
                    StopReason.WAYPOINT,
                )
    c = cache.get(w)
    if c is None:
        c = cache[w] = fn(w)
    reason = StopReason.COUNT if count == max_instr else StopReason.NO_BYTES
    return Scan(
        isa,
        start,
        start + 4 * count,
        count,
        info_from_cls(isa, start + 4 * (count - 1), w, c),
        reason,
    )


def _t32_scan(
    code: Buffer,
    base: int,
    start: int,
    opts: IsaOptions,
    max_instr: int,
    stop_at: int | None,
    it_state: int = 0,
) -> Scan:
    """Walk T32 code halfword by halfword (also serves :func:`scan_to_address`)."""
    isa = Isa.T32
    off = start - base
    nhw = (len(code) - off) // 2 if off >= 0 else 0
    track_it = opts.track_it_block
    it_left = it_state if track_it else 0
    if nhw < 2:
        return Scan(isa, start, start, 0, None, StopReason.NO_BYTES, it_left)
    hws = _halfwords(code, off, nhw)
    cache, fn = cls_cache(isa, opts)
    kind = _T32_KIND_B
    to_addr = stop_at is not None
    stop_i = -1 if stop_at is None else stop_at - start  # in bytes from start
    limit = max_instr if max_instr > 0 else -1
    i = 0  # halfword index
    count = 0
    last_i = 0
    last_cond_it = False
    reason = StopReason.NO_BYTES
    c: Cls | None = None
    while i + 1 < nhw:
        h = hws[i]
        k = kind[h >> 8]
        last_i = i
        in_it = it_left > 0
        if in_it:
            it_left -= 1
        if k == 0:
            i += 1
            c = None
        elif k == 1:
            i += 2
            c = None
        else:
            key = (h << 16) | hws[i + 1] if is_wide(h) else h << 16
            c = cache.get(key)
            if c is None:
                c = cache[key] = fn(key)
            i += c[0] >> 1
            if track_it and c[8]:
                it_left = c[8]
        count += 1
        last_cond_it = in_it
        if c is not None and c[1] != _OTHER and not to_addr:
            reason = StopReason.WAYPOINT
            break
        if count == limit:
            reason = StopReason.COUNT
            break
        if 2 * i == stop_i:
            reason = StopReason.ADDRESS
            break
    if count == 0:
        return Scan(isa, start, start, 0, None, StopReason.NO_BYTES, it_left)
    h = hws[last_i]
    w = (h << 16) | hws[last_i + 1]
    key = w if is_wide(h) else h << 16
    c = cache.get(key)
    if c is None:
        c = cache[key] = fn(key)
    info = info_from_cls(isa, start + 2 * last_i, w, c)
    if last_cond_it:
        info.is_cond = True
    return Scan(isa, start, start + 2 * i, count, info, reason, it_left)


def _fixed_to_address(
    code: Buffer, base: int, start: int, isa: Isa, opts: IsaOptions, stop_at: int, max_instr: int
) -> Scan:
    off = start - base
    avail = (len(code) - off) // 4 if off >= 0 else 0
    if avail <= 0:
        return Scan(isa, start, start, 0, None, StopReason.NO_BYTES)
    want = stop_at - start
    if want > 0 and want % 4 == 0 and want // 4 <= avail:
        count, reason = want // 4, StopReason.ADDRESS
    else:
        count, reason = avail, StopReason.NO_BYTES
    if max_instr and max_instr <= count:
        if max_instr < count:
            reason = StopReason.COUNT
        count = max_instr
    cache, fn = cls_cache(isa, opts)
    w = _word_at(code, off + 4 * (count - 1))
    c = cache.get(w)
    if c is None:
        c = cache[w] = fn(w)
    info = info_from_cls(isa, start + 4 * (count - 1), w, c)
    return Scan(isa, start, start + 4 * count, count, info, reason)


def scan_to_waypoint(
    code: Buffer,
    base: int,
    start: int,
    isa: Isa,
    opts: IsaOptions,
    max_instr: int = 0,
    it_state: int = 0,
) -> Scan:
    """Walk from ``start`` to the first waypoint (inclusive).

    ``code`` holds the bytes mapped at address ``base``. The walk stops at the
    first waypoint (``StopReason.WAYPOINT``), after ``max_instr`` instructions
    if that is not 0 (``COUNT``; a waypoint that is also the ``max_instr``-th
    instruction gives ``WAYPOINT``), or when fewer than 4 bytes are left at the
    next address (``NO_BYTES``; ``count`` may then be 0). Raises ``ValueError``
    for an ISA other than A64, A32 and T32.

    T32 with ``opts.track_it_block``: ``it_state`` is the number of instructions
    of an IT block still to come at ``start`` (``Scan.it_state`` the number
    left after the walk); an instruction inside an IT block is conditional.
    """
    if isa == Isa.T32:
        return _t32_scan(code, base, start, opts, max_instr, None, it_state)
    if isa == Isa.A64 or isa == Isa.A32:
        return _fixed_scan(code, base, start, isa, opts, max_instr)
    raise ValueError(f"instructions of ISA {isa!r} cannot be walked")


def scan_to_address(
    code: Buffer,
    base: int,
    start: int,
    isa: Isa,
    opts: IsaOptions,
    stop_at: int,
    max_instr: int = 0,
    it_state: int = 0,
) -> Scan:
    """Walk from ``start``, through waypoints, until the next address is ``stop_at``.

    This is the reference's "trace to the next address match" walk (ETE source
    address packets): waypoints do not stop it. Stops with ``ADDRESS`` when the
    address after the last instruction walked equals ``stop_at``, ``COUNT``
    after ``max_instr`` instructions (if not 0), or ``NO_BYTES`` at the end of
    ``code`` (``stop_at`` not reached: behind ``start``, or beyond the code).
    """
    if isa == Isa.T32:
        return _t32_scan(code, base, start, opts, max_instr, stop_at, it_state)
    if isa == Isa.A64 or isa == Isa.A32:
        return _fixed_to_address(code, base, start, isa, opts, stop_at, max_instr)
    raise ValueError(f"instructions of ISA {isa!r} cannot be walked")


class BlockCache:
    """Remembers walks: a repeated walk of the same block is one dictionary lookup.

    A walk is identified by the code object (its identity), the ISA, the start
    address, the options and ``max_instr``; the same :class:`Scan` object is
    returned each time (do not modify it). Give the memory map (anything with a
    ``generation`` attribute) to drop everything whenever its generation
    changes, or call :meth:`clear`. ``max_entries`` bounds the memory used: the
    cache is emptied when it is reached.
    """

    __slots__ = ("_blocks", "_codes", "_generation", "_memory", "hits", "max_entries", "misses")

    def __init__(self, memory: _HasGeneration | None = None, max_entries: int = 1 << 20) -> None:
        self._memory = memory
        self._generation = None if memory is None else memory.generation
        self._blocks: dict[tuple[int, int, int, int, int, int], Scan] = {}
        self._codes: dict[int, Buffer] = {}
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        """Forget every walk."""
        self._blocks.clear()
        self._codes.clear()

    def __len__(self) -> int:
        return len(self._blocks)

    def scan(
        self,
        code: Buffer,
        base: int,
        start: int,
        isa: Isa,
        opts: IsaOptions,
        max_instr: int = 0,
        it_state: int = 0,
    ) -> Scan:
        """:func:`scan_to_waypoint`, remembered."""
        mem = self._memory
        if mem is not None and mem.generation != self._generation:
            self._generation = mem.generation
            self.clear()
        key = (start, isa, max_instr | (it_state << 40), opts.key, id(code), base)
        s = self._blocks.get(key)
        if s is not None:
            self.hits += 1
            return s
        self.misses += 1
        if len(self._blocks) >= self.max_entries:
            self.clear()
        # Pin the code object: while it is cached, its id cannot be reused.
        self._codes[id(code)] = code
        s = scan_to_waypoint(code, base, start, isa, opts, max_instr, it_state)
        self._blocks[key] = s
        return s
