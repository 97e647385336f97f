"""Blocks of code between waypoints: walked once per view of code memory, then looked up.

Input: the traced core's code memory (:class:`~cstrace.memory.code.CodeMemory`:
``find`` by address and memory space, ``generation``), the classification
options of the traced PE (:class:`~cstrace.isa.types.IsaOptions`), and walk
requests by memory space, instruction set and address. Output: :class:`Block`
records, one per walk, and :class:`Instr` records, one per instruction, as the
program-flow decoders (ETMv4/ETE, PTM, ETMv3) consume them.

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
- :meth:`BlockCache.instr`: one instruction, an :class:`Instr` record (cached;
  ETMv3 atoms, ETE source addresses) and :meth:`BlockCache.readable`.

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
from cstrace.isa.decode import branch_target, cls_cache
from cstrace.isa.scan import Walker
from cstrace.isa.types import InstrInfo, IsaOptions, StopReason
from cstrace.memory.code import NO_MEMORY, CodeMemory
from cstrace.memory.image import MemoryRegion

__all__ = [
    "GENERATIONS",
    "MAX_BLOCKS",
    "Block",
    "BlockCache",
    "BlockKey",
    "Instr",
    "RangeArgs",
    "RangeTail",
]

GENERATIONS = 16
"""Views of code memory (generation values) whose tables are kept."""
MAX_BLOCKS = 1 << 18
"""Blocks kept per memory space, ISA and generation (a full table is emptied)."""
_MAX_WALKERS = 4096  # code objects (regions) with a walker kept at once
_RUN = 64  # instructions classified at most by one miss of BlockCache.instr
_INT = tuple(range(64))  # enum member -> plain int, by indexing

_ISAS = tuple(Isa)
_A32, _T32, _A64 = int(Isa.A32), int(Isa.T32), int(Isa.A64)
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

RangeTail = tuple[int, InstrType, InstrSubtype, bool]
"""``(last_size, last_type, last_subtype, last_cond)``: the end of :data:`RangeArgs`."""
_TAILS: dict[int, RangeTail] = {}  # the shared tails, by size, type, sub-type and condition

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
    - ``next_e`` / ``next_n``: links a decoder sets, to the block it walked
      next when the last instruction was executed (a direct branch or another
      waypoint) / not executed, or None. They stand for a lookup in the same
      tables (the next address, ISA and IT state follow from the block), so
      they hold only for walks in the table the block came from: a decoder
      follows them only from a block it looked up or reached through them.

    ``isa``, ``next_isa``, ``itype`` and ``subtype`` hold the plain int values
    of :class:`~cstrace.elements.Isa`, :class:`~cstrace.elements.InstrType` and
    :class:`~cstrace.elements.InstrSubtype` (the decoders' hot loops index and
    compare them: exact ints are faster there), and the constructor takes them
    so (:meth:`of_walk` converts the fields of an
    :class:`~cstrace.isa.types.InstrInfo`); ``range_e``/``range_n`` hold the
    enum members the elements carry.

    Blocks are shared through the cache: treat them as read-only, but for
    the links.
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
        "next_e",
        "next_isa",
        "next_n",
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
    next_e: Block | None
    next_n: Block | None

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
        # Plain ints only (see the class docstring): the producers convert enums.
        self.start = start
        self.isa = isa
        self.count = count
        self.end = end
        self.reason = reason
        self.found = reason is not _NO_BYTES
        self.it_out = it_out
        self.itype = itype
        self.subtype = subtype
        self.size = size
        self.cond = cond
        self.link = link
        self.target = target
        self.next_isa = isa if next_isa is None else next_isa
        isa_e = _ISAS[isa]
        itype_e = _ITYPES[itype]
        subtype_e = _ISUBS[subtype]
        self.range_e = (start, end, count, isa_e, True, size, itype_e, subtype_e, cond)
        self.range_n = (start, end, count, isa_e, False, size, itype_e, subtype_e, cond)
        self.next_e = None
        self.next_n = None

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
        isa = int(isa)
        if last is None:
            return cls(start, isa, count, end, reason, it_out)
        return cls(
            start,
            isa,
            count,
            end,
            reason,
            it_out,
            int(last.itype),
            int(last.subtype),
            last.size,
            last.is_cond,
            last.is_link,
            last.target or 0,
            int(last.next_isa),
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


class Instr:
    """One instruction, classified at its address: :meth:`BlockCache.instr`.

    For the decoders that follow single instructions (ETMv3 traces each one;
    ETE source addresses name one). ``found``: its 4 opcode bytes are readable
    (if not, the other fields are 0 / False / ``OTHER``). ``end`` is
    ``address + size``; ``itype``, ``subtype``, ``cond``, ``link``,
    ``target`` (0 when not a direct branch) and ``next_isa`` are as for the
    last instruction of a :class:`Block` (plain ints; no IT state: ``cond`` is
    the opcode's own condition). ``tail`` is ``(size, InstrType,
    InstrSubtype, cond)``, the end of the arguments of
    :class:`~cstrace.elements.InstrRange`, one shared tuple per distinct value:
    ``InstrRange(offset, address, end, 1, isa, executed, *instr.tail)``.

    There are many of these (one per instruction executed, for ETMv3): the
    record holds no tuple of its own. Shared through the cache: read-only.
    """

    __slots__ = (
        "address",
        "cond",
        "end",
        "found",
        "isa",
        "itype",
        "link",
        "next_isa",
        "size",
        "subtype",
        "tail",
        "target",
    )

    address: int
    isa: int
    found: bool
    size: int
    end: int
    itype: int
    subtype: int
    cond: bool
    link: bool
    target: int
    next_isa: int
    tail: RangeTail

    def __init__(
        self,
        address: int,
        isa: int,
        found: bool,
        size: int = 0,
        itype: int = _OTHER,
        subtype: int = _NONE,
        cond: bool = False,
        link: bool = False,
        target: int = 0,
        next_isa: int | None = None,
    ) -> None:
        # Plain ints only, as for Block.
        self.address = address
        self.isa = isa
        self.found = found
        self.size = size
        self.end = address + size
        self.itype = itype
        self.subtype = subtype
        self.cond = cond
        self.link = link
        self.target = target
        self.next_isa = isa if next_isa is None else next_isa
        key = (size << 16) | (itype << 12) | (subtype << 1) | cond
        tail = _TAILS.get(key)
        if tail is None:
            tail = _TAILS[key] = (size, _ITYPES[itype], _ISUBS[subtype], cond)
        self.tail = tail

    @property
    def is_waypoint(self) -> bool:
        """The instruction ends a block (any type but ``OTHER``)."""
        return self.itype != _OTHER

    def __repr__(self) -> str:
        if not self.found:
            return f"Instr({_ISAS[self.isa].name} 0x{self.address:x} not readable)"
        return (
            f"Instr({_ISAS[self.isa].name} 0x{self.address:x} size={self.size} "
            f"{_ITYPES[self.itype].name}/{_ISUBS[self.subtype].name} cond={self.cond} "
            f"link={self.link} target=0x{self.target:x} next_isa={_ISAS[self.next_isa].name})"
        )


class _View:
    """The tables of one generation of code memory: per memory space, one dict per ISA."""

    __slots__ = ("blocks", "instrs")

    def __init__(self) -> None:
        self.blocks: dict[int, list[dict[BlockKey, Block]]] = {}
        self.instrs: dict[int, list[dict[int, Instr]]] = {}

    def size(self) -> int:
        """Blocks and instructions held."""
        n = sum(len(t) for ts in self.blocks.values() for t in ts)
        return n + sum(len(t) for ts in self.instrs.values() for t in ts)


class _Store:
    """What the caches of one code memory and one set of options share.

    The tables of the last :data:`GENERATIONS` generations (oldest first) and
    the walkers of the regions' code. It holds no reference to the memory, so
    a memory shared through :meth:`BlockCache.shared` can still be freed.
    """

    __slots__ = ("views", "walkers")

    def __init__(self) -> None:
        self.views: dict[int, _View] = {}
        self.walkers: dict[tuple[int, int, int], Walker] = {}

    def view(self, generation: int) -> _View:
        """The tables of ``generation``, now the most recently used."""
        views = self.views
        view = views.pop(generation, None)
        if view is None:
            view = _View()
            while len(views) >= GENERATIONS:
                del views[next(iter(views))]
        views[generation] = view
        return view


_SHARED: weakref.WeakKeyDictionary[Any, dict[IsaOptions, _Store]] = weakref.WeakKeyDictionary()


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

    __slots__ = (
        "_cls",
        "_generation",
        "_last",
        "_store",
        "max_blocks",
        "memory",
        "opts",
        "view",
    )

    def __init__(
        self,
        memory: CodeMemory | None,
        opts: IsaOptions,
        max_blocks: int = MAX_BLOCKS,
        *,
        _store: _Store | None = None,
    ) -> None:
        self.memory: CodeMemory = NO_MEMORY if memory is None else memory
        self.opts = opts
        self.max_blocks = max_blocks
        self._store = _Store() if _store is None else _store
        self._generation = self.memory.generation
        self.view = self._store.view(self._generation)
        """The tables of the current generation."""
        self._cls = [cls_cache(_ISAS[isa], opts) for isa in (_A32, _T32, _A64)]
        self._last: tuple[MemoryRegion, int, Walker] | None = None
        """The region, ISA and walker :meth:`_walker` gave last (walks follow each other
        through the same code)."""

    @classmethod
    def shared(cls, memory: CodeMemory | None, opts: IsaOptions) -> BlockCache:
        """A block cache of ``memory`` and ``opts`` sharing its blocks with every other one.

        Blocks depend only on the memory's contents (its generation), the
        memory space, ISA and address, and the options: the decoders of the
        trace IDs and buffers of one session reading the same memory share
        their walks. The blocks live as long as the memory. A memory that
        cannot be weakly referenced gets blocks of its own.
        """
        if memory is None:
            memory = NO_MEMORY
        try:
            per = _SHARED.get(memory)
            if per is None:
                per = _SHARED[memory] = {}
        except TypeError:
            return cls(memory, opts)
        store = per.get(opts)
        if store is None:
            store = per[opts] = _Store()
        return cls(memory, opts, _store=store)

    # -- generations -------------------------------------------------------------

    def _check_generation(self) -> None:
        """Take up the tables of the memory's current generation (keeping the last few)."""
        gen = self.memory.generation
        if gen != self._generation:
            self._generation = gen
            self.view = self._store.view(gen)

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

    def instr_tables(self, space: int) -> list[dict[int, Instr]]:
        """The one-instruction tables of ``space`` (see :meth:`instr`), indexed by ISA."""
        if self.memory.generation != self._generation:
            self._check_generation()
        t = self.view.instrs.get(space)
        if t is None:
            t = self.view.instrs[space] = [{}, {}, {}]
        return t

    def clear(self) -> None:
        """Forget every block (of every generation)."""
        self._store.views.clear()
        self._store.walkers.clear()
        self._last = None
        self.view = self._store.view(self._generation)

    def __len__(self) -> int:
        return sum(v.size() for v in self._store.views.values())

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

    def instr(self, address: int, isa: int, space: int) -> Instr:
        """The instruction at ``address`` (cached); ``found`` is False if unreadable.

        On a miss the instructions that follow, up to the next waypoint, are
        classified too (ETMv3 executes them next): one memory lookup for the run.
        """
        if self.memory.generation != self._generation:
            self._check_generation()
        tables = self.view.instrs.get(space)
        if tables is None:
            tables = self.view.instrs[space] = [{}, {}, {}]
        table = tables[isa]
        i = table.get(address)
        if i is None:
            if len(table) >= self.max_blocks:
                table.clear()
            room = min(_RUN, self.max_blocks - len(table))
            i = self._instrs(table, address, int(isa), space, room)
        return i

    def readable(self, address: int, space: int) -> bool:
        """True when the 4 opcode bytes at ``address`` are in one mapped region."""
        region = self.memory.find(address, space)
        return region is not None and region.start + len(region.data) - address >= 4

    # -- walks ------------------------------------------------------------------------

    def _walker(self, region: MemoryRegion, isa: int) -> Walker:
        """The (kept) walker of one region's code."""
        last = self._last
        if last is not None and last[0] is region and last[1] == isa:
            return last[2]
        code = region.data
        key = (id(code), region.start, isa)
        walkers = self._store.walkers
        w = walkers.get(key)
        if w is None or w.code is not code:
            if len(walkers) >= _MAX_WALKERS:
                walkers.clear()
            w = walkers[key] = Walker(code, region.start, _ISAS[isa], self.opts, 0)
        self._last = (region, isa, w)
        return w

    def _walk_block(self, address: int, isa: int, space: int, it: int) -> Block:
        find = self.memory.find
        region = find(address, space)
        if region is not None and not it:
            # Most walks: A64/A32 code with a waypoint index, the waypoint in the same region.
            got = self._walker(region, isa).waypoint(address)
            if got is not None:
                count, c = got
                isa = int(isa)
                wp = address + 4 * (count - 1)  # the waypoint's address
                target, after = branch_target(isa, wp, c)
                return Block(
                    address,
                    isa,
                    count,
                    wp + 4,
                    _WAYPOINT,
                    0,
                    _INT[c[1]],
                    _INT[c[2]],
                    c[0],
                    c[3],
                    c[4],
                    target or 0,
                    after,
                )
        count = 0
        a = address
        last = None
        reason = _NO_BYTES
        while region is not None:
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
            region = find(a, space)
        return Block.of_walk(address, isa, count, a, reason, last, it)

    def _instrs(
        self, table: dict[int, Instr], address: int, isa: int, space: int, room: int
    ) -> Instr:
        """Classify the instructions from ``address`` to the next waypoint into ``table``.

        Returns the one at ``address``. Goes on only while the following
        instructions are readable from the same region, not yet in the table,
        and fewer than ``room`` (at least 1) have been classified.
        """
        region = self.memory.find(address, space)
        if region is None:
            i = table[address] = Instr(address, isa, False)
            return i
        data = region.data
        base = region.start
        last = len(data) - 4  # the last offset with the 4 bytes the reference fetches
        cache, fn = self._cls[isa]
        t32 = isa == _T32
        a = address
        if address - base > last:  # not readable from this region
            i = table[address] = Instr(address, isa, False)
            return i
        first = None
        for _ in range(room):
            off = a - base
            if off > last:
                break  # the next one is for another lookup (perhaps in the next region)
            if t32:
                op = (data[off + 1] << 24) | (data[off] << 16)
                if (op >> 27) >= 0x1D:  # 32-bit: the second halfword is part of it
                    op |= (data[off + 3] << 8) | data[off + 2]
            else:
                op = int.from_bytes(data[off : off + 4], "little")
            c = cache.get(op)
            if c is None:
                c = cache[op] = fn(op)
            size, itype = c[0], c[1]
            target, next_isa = 0, isa
            if c[5] is not None:  # a direct branch
                t, next_isa = branch_target(isa, a, c)
                target = 0 if t is None else t
            i = Instr(a, isa, True, size, _INT[itype], _INT[c[2]], c[3], c[4], target, next_isa)
            table[a] = i
            if first is None:
                first = i
            a += size
            if itype != _OTHER or a in table:
                break
        assert first is not None
        return first

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
