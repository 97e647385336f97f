"""Blocks of code between waypoints: walked once per view of code memory, then looked up.

Input: the traced core's code memory (:class:`~cstrace.memory.code.CodeMemory`:
``find`` by address and memory space, ``generation``), the classification
options of the traced PE (:class:`~cstrace.isa.types.IsaOptions`), and walk
requests by memory space, instruction set and address. Output: :class:`Block`
records, one per walk, as the program-flow decoders (ETMv4/ETE, PTM, ETMv3)
consume them.

A program-flow trace says only what happened at *waypoints* (branches and the
other instructions that end a block, IHI0064 §6.1, IHI0035 §2.3): the decoder
follows the program image from the current address to the next waypoint and
applies the atom there. DESIGN.md §4: that walk is done once per memory
space, ISA and start address, and the next time it is one dictionary lookup
(:meth:`BlockCache.tables` hands the decoders the dictionaries themselves).

The walks, after the reference decoder's (OpenCSD ``TrcPktDecodeEtmV4I`` and
``TrcPktDecodePtm``) ``traceInstrToWP`` family:

- :meth:`BlockCache.block`: to the next waypoint, inclusive (cached);
- :meth:`BlockCache.walk_to`: through waypoints until the next address is a
  given one (ETMv4 exception return addresses);
- :meth:`BlockCache.walk_through`: through waypoints until the instruction at
  a given address has been walked (PTM waypoint updates);
- :meth:`BlockCache.walk_count`: at most N instructions, stopping after a
  branch (ETMv4 Q elements);
- :meth:`BlockCache.instr`: one instruction (cached; ETMv3 atoms, ETE source
  addresses) and :meth:`BlockCache.readable`.

Rules every walk follows, as the reference does: each instruction needs its 4
opcode bytes (even a 16-bit one) readable from one memory region; a walk
continues into the region mapped at the next address when a region ends
exactly at an instruction boundary; otherwise it stops and :attr:`Block.found`
is False (the decoder reports ``ADDR_NACC`` at :attr:`Block.end`).

The cache follows ``memory.generation``: the tables of the last
:data:`GENERATIONS` generations are kept, so a memory that gives each view
(process, point in time) its own generation number switches back cheaply.
Every table is bounded (emptied when full).
"""

from __future__ import annotations

import weakref
from typing import Any

from cstrace.elements import InstrSubtype, InstrType, Isa
from cstrace.isa.decode import decode, read_opcode
from cstrace.isa.scan import Walker
from cstrace.isa.types import InstrInfo, IsaOptions, StopReason
from cstrace.memory.code import NO_MEMORY, CodeMemory
from cstrace.memory.image import MemoryRegion

__all__ = ["GENERATIONS", "MAX_BLOCKS", "Block", "BlockCache", "BlockKey", "RangeArgs"]

GENERATIONS = 16
"""Views of code memory (generation values) whose tables are kept."""
MAX_BLOCKS = 1 << 18
"""Blocks kept per memory space, ISA and generation (a full table is emptied)."""
_MAX_WALKERS = 4096  # code objects (regions) with a walker kept at once

_ISAS = tuple(Isa)
_ITYPES = tuple(InstrType)
_ISUBS = tuple(InstrSubtype)
_OTHER = int(InstrType.OTHER)
_NONE = int(InstrSubtype.NONE)
_BRANCHES = (int(InstrType.BR), int(InstrType.BR_INDIRECT))
_WAYPOINT = StopReason.WAYPOINT
_COUNT = StopReason.COUNT
_NO_BYTES = StopReason.NO_BYTES
_ADDRESS = StopReason.ADDRESS

RangeArgs = tuple[int, int, int, Isa, bool, int, InstrType, InstrSubtype, bool]
"""The arguments of :class:`~cstrace.elements.InstrRange` after its ``offset``:
``(start, end, num_instr, isa, last_exec, last_size, last_type, last_subtype, last_cond)``."""

BlockKey = int | tuple[int, int]
"""A block table key: the start address, or ``(address, it)`` for a T32 walk that
starts with ``it`` instructions of an IT block still to come."""


class Block:
    """One walk of code: ``count`` instructions of ``isa`` from ``start`` up to ``end``.

    - ``reason`` (:class:`~cstrace.isa.types.StopReason`): why the walk
      stopped: ``WAYPOINT`` (the last instruction is a waypoint; for
      :meth:`BlockCache.walk_count`, a branch), ``ADDRESS`` (the requested
      address was reached), ``COUNT`` (the requested number of instructions
      was walked) or ``NO_BYTES`` (the opcode at ``end`` is not readable).
    - ``found``: the walk ended where it was asked to (``reason`` is not
      ``NO_BYTES``); when False the decoder reports ``ADDR_NACC`` at ``end``.
    - ``end``: the address after the last instruction walked (when not
      ``found``: the address that could not be read).
    - The last instruction walked: ``itype``/``subtype`` (the reference's
      instruction type and sub-type), ``size`` (2 or 4), ``cond``
      (conditional, including inside a T32 IT block when tracked), ``link``
      (branch with link), ``target`` (destination of a direct branch, 0
      otherwise) and ``next_isa`` (the ISA after it when taken: only BLX
      immediate changes it). With ``count`` 0: ``OTHER``, size 0, ``isa``.
    - ``it_out``: T32 with IT tracking, the instructions of an IT block still
      to come at ``end`` (else 0).
    - ``range_e`` / ``range_n``: the ``INSTR_RANGE`` of the walk when its last
      instruction is executed / not executed, as the arguments of
      :class:`~cstrace.elements.InstrRange` after its offset (:data:`RangeArgs`),
      so a decoder writes ``InstrRange(offset, *block.range_e)``.

    ``isa``, ``next_isa``, ``itype`` and ``subtype`` hold the plain int values
    of :class:`~cstrace.elements.Isa`, :class:`~cstrace.elements.InstrType` and
    :class:`~cstrace.elements.InstrSubtype` (the decoders' hot loops index and
    compare them: exact ints are faster there); ``range_e``/``range_n`` hold the
    enum members the elements carry.

    Blocks are shared through the cache: treat them as read-only.
    """

    __slots__ = (
        "cond",
        "count",
        "end",
        "found",
        "isa",
        "it_out",
        "itype",
        "link",
        "next_isa",
        "range_e",
        "range_n",
        "reason",
        "size",
        "start",
        "subtype",
        "target",
    )

    start: int
    isa: int
    count: int
    end: int
    reason: StopReason
    found: bool
    itype: int
    subtype: int
    size: int
    cond: bool
    link: bool
    target: int
    next_isa: int
    it_out: int
    range_e: RangeArgs
    range_n: RangeArgs

    def __init__(
        self,
        start: int,
        isa: int,
        count: int,
        end: int,
        reason: StopReason,
        it_out: int = 0,
        itype: int = _OTHER,
        subtype: int = _NONE,
        size: int = 0,
        cond: bool = False,
        link: bool = False,
        target: int = 0,
        next_isa: int | None = None,
    ) -> None:
        isa = int(isa)
        self.start = start
        self.isa = isa
        self.count = count
        self.end = end
        self.reason = reason
        self.found = reason != _NO_BYTES
        self.it_out = it_out
        self.itype = itype = int(itype)
        self.subtype = subtype = int(subtype)
        self.size = size
        self.cond = cond
        self.link = link
        self.target = target
        self.next_isa = isa if next_isa is None else int(next_isa)
        tail = (size, _ITYPES[itype], _ISUBS[subtype], cond)
        self.range_e = (start, end, count, _ISAS[isa], True, *tail)
        self.range_n = (start, end, count, _ISAS[isa], False, *tail)

    @classmethod
    def of_walk(
        cls,
        start: int,
        isa: int,
        count: int,
        end: int,
        reason: StopReason,
        last: InstrInfo | None,
        it_out: int = 0,
    ) -> Block:
        """The block of a walk whose last instruction is ``last`` (None: none walked)."""
        if last is None:
            return cls(start, isa, count, end, reason, it_out)
        return cls(
            start,
            isa,
            count,
            end,
            reason,
            it_out,
            last.itype,
            last.subtype,
            last.size,
            last.is_cond,
            last.is_link,
            last.target or 0,
            last.next_isa,
        )

    def ending(self, start: int, count: int, reason: StopReason) -> Block:
        """A walk from ``start`` of ``count`` instructions ending as this one does."""
        return Block(
            start,
            self.isa,
            count,
            self.end,
            reason,
            self.it_out,
            self.itype,
            self.subtype,
            self.size,
            self.cond,
            self.link,
            self.target,
            self.next_isa,
        )

    @property
    def last_address(self) -> int | None:
        """The address of the last instruction walked (None when none was)."""
        return self.end - self.size if self.count else None

    def __repr__(self) -> str:
        return (
            f"Block({_ISAS[self.isa].name} 0x{self.start:x}..0x{self.end:x} count={self.count} "
            f"{self.reason.name} last={_ITYPES[self.itype].name}/{_ISUBS[self.subtype].name} "
            f"size={self.size} cond={self.cond} link={self.link} target=0x{self.target:x} "
            f"next_isa={_ISAS[self.next_isa].name} it_out={self.it_out})"
        )


class _View:
    """The tables of one generation of code memory: per memory space, one dict per ISA."""

    __slots__ = ("blocks", "instrs")

    def __init__(self) -> None:
        self.blocks: dict[int, list[dict[BlockKey, Block]]] = {}
        self.instrs: dict[int, list[dict[int, Block]]] = {}

    def size(self) -> int:
        """Blocks and instructions held."""
        n = sum(len(t) for ts in self.blocks.values() for t in ts)
        return n + sum(len(t) for ts in self.instrs.values() for t in ts)


_SHARED: weakref.WeakKeyDictionary[Any, dict[IsaOptions, BlockCache]] = weakref.WeakKeyDictionary()


class BlockCache:
    """Walks the code memory of one traced core, in one set of options, and remembers the blocks.

    ``memory`` is the code memory (``None``: nothing mapped); ``opts`` the
    classification options. ``isa`` arguments are :class:`~cstrace.elements.Isa`
    values A32, T32 or A64 (plain ints are accepted); ``space`` a
    :class:`~cstrace.elements.MemSpace` value, passed to ``memory.find``.

    The cache notices ``memory.generation`` changes by itself. A decoder that
    holds the dictionaries of :meth:`tables` (or :meth:`instr_tables`) must
    fetch them again when the generation may have changed (after
    ``memory.set_context`` or ``memory.advance``).
    """

    __slots__ = ("_generation", "_views", "_walkers", "max_blocks", "memory", "opts", "view")

    def __init__(
        self, memory: CodeMemory | None, opts: IsaOptions, max_blocks: int = MAX_BLOCKS
    ) -> None:
        self.memory: CodeMemory = NO_MEMORY if memory is None else memory
        self.opts = opts
        self.max_blocks = max_blocks
        self._generation = self.memory.generation
        self.view = _View()
        """The tables of the current generation."""
        self._views: dict[int, _View] = {self._generation: self.view}
        self._walkers: dict[tuple[int, int, int], Walker] = {}

    @classmethod
    def shared(cls, memory: CodeMemory | None, opts: IsaOptions) -> BlockCache:
        """The block cache of ``memory`` and ``opts`` shared by every decoder that asks.

        Blocks depend only on the memory's contents (its generation), the
        memory space, ISA and address, and the options: the decoders of the
        trace IDs and buffers of one session reading the same memory can share
        their walks. A memory that cannot be weakly referenced gets a new cache.
        """
        if memory is None:
            memory = NO_MEMORY
        try:
            per = _SHARED.get(memory)
            if per is None:
                per = _SHARED[memory] = {}
        except TypeError:
            return cls(memory, opts)
        found = per.get(opts)
        if found is None:
            found = per[opts] = cls(memory, opts)
        return found

    # -- generations -------------------------------------------------------------

    def _check_generation(self) -> None:
        """Take up the tables of the memory's current generation (keeping the last few)."""
        gen = self.memory.generation
        if gen == self._generation:
            return
        self._generation = gen
        views = self._views
        view = views.pop(gen, None)
        if view is None:
            view = _View()
            while len(views) >= GENERATIONS:
                del views[next(iter(views))]
        views[gen] = view
        self.view = view

    def tables(self, space: int) -> list[dict[BlockKey, Block]]:
        """The block tables of memory ``space`` in the current generation, indexed by ISA.

        ``tables(space)[isa].get(key)`` is the block :meth:`block` returns for
        that key (see :data:`BlockKey`), or None when it was not walked yet.
        """
        if self.memory.generation != self._generation:
            self._check_generation()
        t = self.view.blocks.get(space)
        if t is None:
            t = self.view.blocks[space] = [{}, {}, {}]
        return t

    def instr_tables(self, space: int) -> list[dict[int, Block]]:
        """The one-instruction tables of ``space`` (see :meth:`instr`), indexed by ISA."""
        if self.memory.generation != self._generation:
            self._check_generation()
        t = self.view.instrs.get(space)
        if t is None:
            t = self.view.instrs[space] = [{}, {}, {}]
        return t

    def clear(self) -> None:
        """Forget every block (of every generation)."""
        self._views.clear()
        self.view = self._views[self._generation] = _View()
        self._walkers.clear()

    def __len__(self) -> int:
        return sum(v.size() for v in self._views.values())

    # -- cached walks ---------------------------------------------------------------

    def block(self, address: int, isa: int, space: int, it: int = 0) -> Block:
        """The block from ``address`` to the next waypoint, inclusive (cached).

        ``it``: T32, the instructions of an IT block still to come at
        ``address``. Stops with ``WAYPOINT`` or ``NO_BYTES``.
        """
        table = self.tables(space)[isa]
        key: BlockKey = (address, it) if it else address
        b = table.get(key)
        if b is None:
            if len(table) >= self.max_blocks:
                table.clear()  # bound the memory a pathological trace can take
            b = table[key] = self._walk_block(address, isa, space, it)
        return b

    def instr(self, address: int, isa: int, space: int) -> Block:
        """The single instruction at ``address`` (cached); ``found`` is False if unreadable.

        ``reason`` is ``WAYPOINT`` when the instruction is a waypoint, else
        ``COUNT``. No IT state: ``cond`` is the opcode's own condition.
        """
        table = self.instr_tables(space)[isa]
        b = table.get(address)
        if b is None:
            if len(table) >= self.max_blocks:
                table.clear()
            b = table[address] = self._instr(address, isa, space)
        return b

    def readable(self, address: int, space: int) -> bool:
        """True when the 4 opcode bytes at ``address`` are in one mapped region."""
        region = self.memory.find(address, space)
        return region is not None and region.start + len(region.data) - address >= 4

    # -- walks ------------------------------------------------------------------------

    def _walker(self, region: MemoryRegion, isa: int) -> Walker:
        """The (kept) walker of one region's code."""
        code = region.data
        key = (id(code), region.start, isa)
        w = self._walkers.get(key)
        if w is None or w.code is not code:
            if len(self._walkers) >= _MAX_WALKERS:
                self._walkers.clear()
            w = self._walkers[key] = Walker(code, region.start, _ISAS[isa], self.opts, 0)
        return w

    def _walk_block(self, address: int, isa: int, space: int, it: int) -> Block:
        find = self.memory.find
        count = 0
        a = address
        last = None
        reason = _NO_BYTES
        while True:
            region = find(a, space)
            if region is None:
                break
            s = self._walker(region, isa).walk(a, 0, it)
            if s.count == 0:
                break
            count += s.count
            a = s.end
            last = s.last
            it = s.it_state
            if s.reason == _WAYPOINT:
                reason = _WAYPOINT
                break
        return Block.of_walk(address, isa, count, a, reason, last, it)

    def _instr(self, address: int, isa: int, space: int) -> Block:
        region = self.memory.find(address, space)
        op = (
            None if region is None else read_opcode(_ISAS[isa], region.data, address - region.start)
        )
        if op is None:
            return Block(address, _ISAS[isa], 0, address, _NO_BYTES)
        info = decode(_ISAS[isa], address, op, self.opts)
        reason = _COUNT if info.itype == _OTHER else _WAYPOINT
        return Block.of_walk(address, isa, 1, address + info.size, reason, info)

    def walk_to(self, address: int, isa: int, space: int, stop: int, it: int = 0) -> Block:
        """Walk through waypoints until the next address is ``stop`` (not cached).

        Stops with ``ADDRESS``, or ``NO_BYTES`` at the first unreadable opcode
        (``stop`` behind ``address`` or not on an instruction boundary: the
        walk goes on to the end of the readable code).
        """
        find = self.memory.find
        count = 0
        a = address
        last = None
        reason = _NO_BYTES
        while True:
            region = find(a, space)
            if region is None:
                break
            s = self._walker(region, isa).walk_to(a, stop, 0, it)
            if s.count == 0:
                break
            count += s.count
            a = s.end
            it = s.it_state
            last = s.last
            if s.reason == _ADDRESS:
                reason = _ADDRESS
                break
        return Block.of_walk(address, isa, count, a, reason, last, it)

    def walk_through(self, address: int, isa: int, space: int, match: int, it: int = 0) -> Block:
        """Walk through waypoints until the instruction at ``match`` is walked, inclusive.

        Stops with ``ADDRESS`` (``end`` is after the instruction at ``match``),
        or ``NO_BYTES`` (unreadable code first; ``match`` missed: to the end of
        the readable code).
        """
        if address == match:
            one = self.walk_count(match, isa, space, 1, it)
            return one.ending(address, one.count, _ADDRESS) if one.found else one
        head = self.walk_to(address, isa, space, match, it)
        if not head.found:
            return head
        one = self.walk_count(match, isa, space, 1, head.it_out)
        if not one.found:
            return head.ending(address, head.count, _NO_BYTES)  # stopped before ``match``
        return one.ending(address, head.count + 1, _ADDRESS)

    def walk_count(self, address: int, isa: int, space: int, n: int, it: int = 0) -> Block:
        """Walk at most ``n`` instructions, stopping after a branch (not cached).

        Stops with ``WAYPOINT`` after a branch (direct or indirect; other
        waypoints do not stop it), ``COUNT`` after ``n`` instructions, or
        ``NO_BYTES`` before an unreadable opcode.
        """
        find = self.memory.find
        count = 0
        a = address
        last = None
        reason = _COUNT
        while count < n:
            region = find(a, space)
            if region is None:
                reason = _NO_BYTES
                break
            s = self._walker(region, isa).walk(a, n - count, it)
            if s.count == 0:
                reason = _NO_BYTES
                break
            count += s.count
            a = s.end
            it = s.it_state
            last = s.last
            if s.reason == _WAYPOINT and last is not None and last.itype in _BRANCHES:
                reason = _WAYPOINT
                break
        return Block.of_walk(address, isa, count, a, reason, last, it)
