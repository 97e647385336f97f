"""Walk one code object to the next waypoint (or to an address), fast.

Input: a code object (``bytes``/``bytearray``/``memoryview``) mapped at address
``base``, a start address, an ISA and :class:`~cstrace.isa.types.IsaOptions`.
Output: a :class:`~cstrace.isa.types.Scan`: how many instructions were walked,
where the walk ended, the last instruction and why it stopped.

How it stays fast (DESIGN.md §4):

- every opcode is classified once per (ISA, options) and kept in a dictionary;
  a cheap table on the top byte skips opcodes that can never be waypoints;
- A64 and A32 instructions all have the same size, so for larger code objects
  the waypoint candidates of a 16 KiB page are found once (NumPy pre-filter)
  and a walk is a binary search in that page's sorted list, then the exact
  classifier on the candidates it reaches (cached per opcode);
- T32 walks halfword by halfword inside one loop with locals.

Walks of a whole code memory (regions, memory spaces, generations), and the
cache of their blocks the decoders use, are :mod:`cstrace.isa.blocks`.

Like the reference decoder, a walk needs 4 readable bytes for every
instruction, even a 16-bit one: when fewer are left the walk stops with
``StopReason.NO_BYTES`` so the caller can continue in the next memory region
(or report the address as not accessible).
"""

from __future__ import annotations

import sys
from typing import Literal

import numpy as np

from cstrace.elements import InstrType, Isa
from cstrace.isa.cls import Cls
from cstrace.isa.decode import Buffer, cls_cache, info_from_cls
from cstrace.isa.types import InstrInfo, IsaOptions, Scan, StopReason

__all__ = ["Walker", "scan_to_address", "scan_to_waypoint"]

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
# A32 BX/BLX/BXJ (register): the classifier, as the reference's, ignores their
# should-be-one bits 19:8, so bits 15:12 need not be 1111 there.
_A32_BX_MASK = 0x0FF00000
_A32_BX_BITS = 0x01200000
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


class _Page:
    """The waypoint candidates of one page of a :class:`_WordIndex`, in address order.

    ``where`` holds their word indices, ``words`` their opcodes, ``recs`` what
    is known of each: None until a walk first reaches it, then its
    classification record if it is a waypoint, else False.
    """

    __slots__ = ("recs", "where", "words")

    def __init__(self, where: list[int], words: list[int]) -> None:
        self.where = where
        self.words = words
        self.recs: list[Cls | Literal[False] | None] = [None] * len(where)


class _WordIndex:
    """Waypoint candidates of one fixed-size-ISA code object, page by page.

    A page holds the positions and words of its candidates (the NumPy top-byte
    pre-filter); a candidate is classified when a walk first reaches it, so
    the waypoints of code that never runs are never classified.
    """

    __slots__ = ("cache", "code", "fn", "isa", "n", "off", "pages", "rec")

    def __init__(self, code: Buffer, off: int, isa: Isa, opts: IsaOptions) -> None:
        self.code = code  # pinned: keeps id(code) valid while the index exists
        self.off = off  # byte offset of word 0 (the alignment phase)
        self.n = (len(code) - off) // 4
        self.isa = isa
        self.cache, self.fn = cls_cache(isa, opts)
        self.pages: dict[int, _Page] = {}
        self.rec: Cls | None = None
        """The classification record of the waypoint the last :meth:`next_waypoint` found
        (None when it found none)."""

    def page(self, p: int) -> _Page:
        """The candidates of page ``p`` (found on first use)."""
        lo = p << _PAGE_SHIFT
        hi = min(self.n, lo + (1 << _PAGE_SHIFT))
        arr = np.frombuffer(self.code, dtype="<u4", count=hi - lo, offset=self.off + 4 * lo)
        top = arr >> 24
        if self.isa == Isa.A64:
            mask = _A64_CAND_NP[top]
        else:
            mask = (
                _A32_TOP_NP[top]
                | ((arr & 0xF000) == 0xF000)
                | ((arr & _A32_BX_MASK) == _A32_BX_BITS)
            )
        idx = np.flatnonzero(mask)
        got = self.pages[p] = _Page((idx + lo).tolist(), arr[idx].tolist())
        return got

    def next_waypoint(self, i: int) -> int:
        """The index of the first waypoint at or after word ``i``, or ``n`` if none;
        :attr:`rec` says what it is."""
        n = self.n
        pages = self.pages
        cache = self.cache
        while i < n:
            p = i >> _PAGE_SHIFT
            got = pages.get(p)
            if got is None:
                got = self.page(p)
            where = got.where
            recs = got.recs
            # the first candidate at or after i (a binary search)
            lo = 0
            hi = len(where)
            while lo < hi:
                mid = (lo + hi) >> 1
                at = where[mid]
                if at < i:
                    lo = mid + 1
                else:
                    hi = mid
            j = lo
            m = len(where)
            while j < m:
                rec = recs[j]
                if rec is None:
                    w = got.words[j]
                    c = cache.get(w)
                    if c is None:
                        c = cache[w] = self.fn(w)
                    rec = recs[j] = c if c[1] != _OTHER else False
                if rec is not False:
                    self.rec = rec
                    return where[j]
                j += 1
            i = (p + 1) << _PAGE_SHIFT
        self.rec = None
        return n


def _word_at(code: Buffer, off: int) -> int:
    return int.from_bytes(bytes(code[off : off + 4]), "little")


class Walker:
    """Walks one code object, in one ISA, with one set of options; remembers its walks.

    ``code`` is mapped at ``base`` (``end`` = ``base + len(code)``). :meth:`scan`
    is :func:`scan_to_waypoint` with a cache keyed by the start address (and
    ``max_instr``/``it_state`` when they are not 0): a repeated walk costs one
    dictionary lookup and returns the same :class:`Scan`. :meth:`walk` and
    :meth:`walk_to` do not cache. The code must not change while a walker
    uses it. ``max_blocks`` bounds the cache (it is emptied when full).
    """

    __slots__ = (
        "_cache",
        "_extra",
        "_fn",
        "_hws",
        "_indexed",
        "_ix",
        "base",
        "blocks",
        "code",
        "end",
        "isa",
        "max_blocks",
        "opts",
    )

    def __init__(
        self, code: Buffer, base: int, isa: Isa, opts: IsaOptions, max_blocks: int = 1 << 18
    ) -> None:
        if isa not in (Isa.A64, Isa.A32, Isa.T32):
            raise ValueError(f"instructions of ISA {isa!r} cannot be walked")
        isa = Isa(isa)
        self.code = code
        self.base = base
        self.end = base + len(code)
        self.isa = isa
        self.opts = opts
        self.max_blocks = max_blocks
        self.blocks: dict[int, Scan] = {}
        self._extra: dict[tuple[int, int, int], Scan] = {}
        self._cache, self._fn = cls_cache(isa, opts)
        self._ix: dict[int, _WordIndex] = {}
        self._hws: memoryview | list[int] | None = None
        self._indexed = isa != Isa.T32 and len(code) >= _INDEX_MIN_BYTES

    def scan(self, start: int, max_instr: int = 0, it_state: int = 0) -> Scan:
        """:meth:`walk`, remembered (do not modify the result)."""
        if not max_instr and not it_state:
            s = self.blocks.get(start)
            if s is None:
                if len(self.blocks) >= self.max_blocks:
                    self.blocks.clear()
                s = self.blocks[start] = self.walk(start)
            return s
        key = (start, max_instr, it_state)
        s = self._extra.get(key)
        if s is None:
            if len(self._extra) >= self.max_blocks:
                self._extra.clear()
            s = self._extra[key] = self.walk(start, max_instr, it_state)
        return s

    def __len__(self) -> int:
        return len(self.blocks) + len(self._extra)

    def clear(self) -> None:
        """Forget the remembered walks."""
        self.blocks.clear()
        self._extra.clear()

    def walk(self, start: int, max_instr: int = 0, it_state: int = 0) -> Scan:
        """Walk to the first waypoint: see :func:`scan_to_waypoint`."""
        if self.isa == Isa.T32:
            return self._walk_t32(start, max_instr, None, it_state)
        return self._walk_fixed(start, max_instr)

    def waypoint(self, start: int) -> tuple[int, Cls] | None:
        """The walk from ``start`` to the next waypoint, when an index finds it in this code.

        A64 or A32 code of at least 2 KiB (the waypoint index): ``(count,
        record)``, the instructions walked and the classification record of
        the last one, the waypoint. None where :meth:`walk` is needed (T32,
        small code, ``start`` outside the code, no waypoint before its end).
        """
        rel = start - self.base
        size = len(self.code)
        if not self._indexed or rel < 0 or size - rel < 4:
            return None
        off = rel
        i0 = off >> 2
        ix = self._index(off & 3)
        k = ix.next_waypoint(i0) - i0
        if k >= (size - off) // 4:
            return None
        rec = ix.rec
        assert rec is not None
        return k + 1, rec

    def walk_to(self, start: int, stop_at: int, max_instr: int = 0, it_state: int = 0) -> Scan:
        """Walk through waypoints to ``stop_at``: see :func:`scan_to_address`."""
        if self.isa == Isa.T32:
            return self._walk_t32(start, max_instr, stop_at, it_state)
        return self._fixed_to_address(start, stop_at, max_instr)

    def _record(self, w: int) -> Cls:
        """The classification record of the 4-byte opcode ``w`` (cached)."""
        cache = self._cache
        c = cache.get(w)
        if c is None:
            c = cache[w] = self._fn(w)
        return c

    def _last(self, address: int, w: int) -> InstrInfo:
        """The :class:`InstrInfo` of the 4-byte instruction ``w`` at ``address``."""
        return info_from_cls(self.isa, address, w, self._record(w))

    def _index(self, phase: int) -> _WordIndex:
        """The waypoint index of the words at byte offsets ``phase`` + 4k."""
        ix = self._ix.get(phase)
        if ix is None:
            ix = self._ix[phase] = _WordIndex(self.code, phase, self.isa, self.opts)
        return ix

    def _before_waypoint(self, off: int) -> int:
        """Indexed code: instructions from byte ``off`` before the next waypoint (the
        instructions left to the end of the code when there is none)."""
        i0 = off >> 2
        return self._index(off & 3).next_waypoint(i0) - i0

    def _walk_fixed(self, start: int, max_instr: int) -> Scan:
        """A64 or A32: all instructions are 4 bytes."""
        isa = self.isa
        code = self.code
        off = start - self.base
        avail = (len(code) - off) // 4 if off >= 0 else 0
        if avail <= 0:
            return Scan(isa, start, start, 0, None, StopReason.NO_BYTES)
        limit = avail if not max_instr or max_instr > avail else max_instr
        if self._indexed:
            k = self._before_waypoint(off)
            if k < limit:
                count, reason = k + 1, StopReason.WAYPOINT
            else:
                count = limit
                reason = StopReason.COUNT if count == max_instr else StopReason.NO_BYTES
            last = start + 4 * (count - 1)
            return Scan(
                isa,
                start,
                last + 4,
                count,
                self._last(last, _word_at(code, off + 4 * (count - 1))),
                reason,
            )
        cache = self._cache
        fn = self._fn
        cand = _A64_CAND if isa == Isa.A64 else _A32_TOP_CAND
        a32 = isa == Isa.A32
        count = 0
        w = 0
        for w in _words(code, off, limit):
            count += 1
            if cand[w >> 24] or (
                a32 and ((w & 0xF000) == 0xF000 or (w & _A32_BX_MASK) == _A32_BX_BITS)
            ):
                c = cache.get(w)
                if c is None:
                    c = cache[w] = fn(w)
                if c[1] != _OTHER:
                    last = start + 4 * (count - 1)
                    info = info_from_cls(isa, last, w, c)
                    return Scan(isa, start, last + 4, count, info, StopReason.WAYPOINT)
        reason = StopReason.COUNT if count == max_instr else StopReason.NO_BYTES
        last = start + 4 * (count - 1)
        return Scan(isa, start, last + 4, count, self._last(last, w), reason)

    def _fixed_to_address(self, start: int, stop_at: int, max_instr: int) -> Scan:
        isa = self.isa
        off = start - self.base
        avail = (len(self.code) - off) // 4 if off >= 0 else 0
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
        last = start + 4 * (count - 1)
        info = self._last(last, _word_at(self.code, off + 4 * (count - 1)))
        return Scan(isa, start, last + 4, count, info, reason)

    def _walk_t32(self, start: int, max_instr: int, stop_at: int | None, it_state: int) -> Scan:
        """T32: halfword by halfword; also serves :meth:`walk_to`."""
        isa = Isa.T32
        off = start - self.base
        track_it = self.opts.track_it_block
        it_left = it_state if track_it else 0
        if off < 0 or off + 4 > len(self.code):
            return Scan(isa, start, start, 0, None, StopReason.NO_BYTES, it_left)
        hws: memoryview | list[int]
        if off & 1:
            hws = _halfwords(self.code, off, (len(self.code) - off) // 2)
            i = 0
        else:
            cached = self._hws
            if cached is None:
                cached = self._hws = _halfwords(self.code, 0, len(self.code) // 2)
            hws = cached
            i = off >> 1
        i0 = i
        nhw = len(hws)
        cache = self._cache
        fn = self._fn
        kind = _T32_KIND_B
        to_addr = stop_at is not None
        stop_i = -1 if stop_at is None else i0 + ((stop_at - start) >> 1)
        if stop_at is not None and (stop_at - start) & 1:
            stop_i = -1
        limit = max_instr if max_instr > 0 else -1
        count = 0
        last_i = i
        last_in_it = False
        reason = StopReason.NO_BYTES
        while i + 1 < nhw:
            h = hws[i]
            k = kind[h >> 8]
            last_i = i
            last_in_it = it_left > 0
            if last_in_it:
                it_left -= 1
            count += 1
            if k == 0:
                i += 1
            elif k == 1:
                i += 2
            else:
                key = (h << 16) | hws[i + 1] if (h & 0xF800) >= 0xE800 else h << 16
                c = cache.get(key)
                if c is None:
                    c = cache[key] = fn(key)
                i += c[0] >> 1
                if track_it and c[8]:
                    it_left = c[8]
                if c[1] != _OTHER and not to_addr:
                    reason = StopReason.WAYPOINT
                    break
            if count == limit:
                reason = StopReason.COUNT
                break
            if i == stop_i:
                reason = StopReason.ADDRESS
                break
        if count == 0:
            return Scan(isa, start, start, 0, None, StopReason.NO_BYTES, it_left)
        h = hws[last_i]
        w = (h << 16) | hws[last_i + 1]
        key = w if (h & 0xF800) >= 0xE800 else h << 16
        c = cache.get(key)
        if c is None:
            c = cache[key] = fn(key)
        info = info_from_cls(isa, start + 2 * (last_i - i0), w, c)
        if last_in_it:
            info.is_cond = True
        return Scan(isa, start, start + 2 * (i - i0), count, info, reason, it_left)


_WALKERS: dict[tuple[int, int, Isa, int], Walker] = {}
_WALKERS_MAX = 256  # code objects kept (pinned) by the module-level functions


def _walker(code: Buffer, base: int, isa: Isa, opts: IsaOptions) -> Walker:
    """A shared walker for the pure functions (keeps large code objects' indexes)."""
    if len(code) < _INDEX_MIN_BYTES:
        return Walker(code, base, isa, opts)
    key = (id(code), base, isa, opts.key)
    w = _WALKERS.get(key)
    if w is None or w.code is not code:
        if len(_WALKERS) >= _WALKERS_MAX:
            del _WALKERS[next(iter(_WALKERS))]
        w = _WALKERS[key] = Walker(code, base, isa, opts)
    return w


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
    return _walker(code, base, isa, opts).walk(start, max_instr, it_state)


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
    return _walker(code, base, isa, opts).walk_to(start, stop_at, max_instr, it_state)
