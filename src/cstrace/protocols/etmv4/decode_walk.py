"""Code walking for the ETMv4/ETE decoder: memory regions + the isa scanner + a block cache.

Input: the traced core's code memory (the ``find``/``generation``/``set_context``
interface of :mod:`cstrace.memory`), the memory space of the current exception
level and security state, an address and an instruction set. Output: compact
tuples describing a walk of the program image, as the decoder's reference
(OpenCSD's ``traceInstrToWP`` and friends) performs it:

- :meth:`CodeWalker.block`: from an address to the next waypoint (inclusive),
  or to the first address whose 4 opcode bytes are not readable. This is the
  per-atom walk: after the first time, one dictionary lookup.
- :meth:`CodeWalker.walk_to`: through waypoints until the next address is a
  given one (exception preferred return address).
- :meth:`CodeWalker.walk_count`: at most N instructions, stopping early at a
  branch (Q elements).
- :meth:`CodeWalker.instr_at`: classify one instruction (ETE source addresses).

Like the reference, every instruction needs 4 readable bytes in one memory
region (a short read means "not accessible"), and a walk continues into a
following region when the previous one ends exactly at the next instruction.
"""

from __future__ import annotations

from typing import Any

from cstrace.elements import InstrSubtype, InstrType, Isa, MemSpace
from cstrace.isa import IsaOptions, StopReason, scan_to_address, scan_to_waypoint
from cstrace.isa.decode import decode, read_opcode

__all__ = ["Block", "CodeWalker", "Last"]

Block = tuple[Any, ...]
"""``(found, count, end, itype, subtype, size, cond, link, target, next_isa, it_out, e, n)``.

``found``: the walk ended on a waypoint (else: the opcode at ``end`` is not
readable); ``count``: instructions walked; ``end``: the address after the last
one (or the unreadable address); then the last instruction's type, sub-type,
size, conditional and link flags, direct branch target (0 if none) and the ISA
after it when taken; ``it_out``: T32 IT-block instructions still to come;
``e`` / ``n``: the arguments of the ``INSTR_RANGE`` element (after its ``Idx``)
when the last instruction is executed / not executed.
"""

Last = tuple[int, int, int, bool, int]
"""``(size, itype, subtype, cond, next_isa)`` of the last instruction of a walk."""

_ISAS = tuple(Isa)
_NO_LAST: Last = (0, int(InstrType.OTHER), int(InstrSubtype.NONE), False, 0)
_BR = int(InstrType.BR)
_MAX_BLOCKS = 1 << 18  # per memory space and ISA
_BR_IND = int(InstrType.BR_INDIRECT)


def isa_options(config: Any) -> IsaOptions:
    """The instruction-classification options of an ETMv4/ETE configuration."""
    return IsaOptions(
        int(getattr(config, "arch_version", 0x0800)) or 0x0800,
        int(getattr(config, "core_profile", 3)) or 3,
        dsb_dmb_waypoints=False,
        wfi_wfe_branch=bool(getattr(config, "wfi_wfe_branch", False)),
        track_it_block=True,
    )


class _NoMemory:
    """Stands in for a missing code memory: nothing is mapped."""

    generation = 0

    def find(self, address: int, space: MemSpace | int = MemSpace.ANY) -> None:
        """Nothing is mapped."""
        return None

    def set_context(self, context_id: int | None, vmid: int | None = None) -> None:
        """No address spaces to select."""


class CodeWalker:
    """Walks the program image of one trace stream, caching blocks per memory space."""

    def __init__(self, memory: Any, config: Any) -> None:
        self.memory = memory if memory is not None else _NoMemory()
        self.opts = isa_options(config)
        self._generation = self.memory.generation
        self._caches: dict[int, list[dict[Any, Block]]] = {}
        self._by_generation = {self._generation: self._caches}

    def set_context(self, context_id: int | None, vmid: int | None) -> None:
        """The traced context changed: let the memory select its address space."""
        self.memory.set_context(context_id, vmid)
        self._check_generation()

    def _check_generation(self) -> None:
        # A generation names one view of the code memory: keep the blocks of the
        # last few views, so switching back and forth between processes is cheap.
        gen = self.memory.generation
        if gen != self._generation:
            self._generation = gen
            caches = self._by_generation.pop(gen, None)
            if caches is None:
                caches = {}
                if len(self._by_generation) >= 16:
                    del self._by_generation[next(iter(self._by_generation))]
            self._by_generation[gen] = caches
            self._caches = caches

    def cache_for(self, space: int) -> list[dict[Any, Block]]:
        """The block caches of a memory space, one per ISA (A32, T32, A64).

        Keys are the start address, or ``(address, it)`` when a T32 walk starts
        inside an IT block.
        """
        if self.memory.generation != self._generation:
            self._check_generation()
        c = self._caches.get(space)
        if c is None:
            c = self._caches[space] = [{}, {}, {}]
        return c

    def block(self, addr: int, isa: int, space: int, it: int = 0) -> Block:
        """Walk from ``addr`` to the next waypoint (cached)."""
        cache = self.cache_for(space)[isa]
        key: Any = (addr, it) if it else addr
        b = cache.get(key)
        if b is None:
            if len(cache) >= _MAX_BLOCKS:
                cache.clear()  # bound the memory a pathological trace can take
            b = cache[key] = self._walk_block(addr, isa, space, it)
        return b

    def _walk_block(self, addr: int, isa: int, space: int, it: int) -> Block:
        find = self.memory.find
        opts = self.opts
        isa_e = _ISAS[isa]
        count = 0
        a = addr
        last = None
        found = False
        while True:
            region = find(a, space)
            if region is None:
                break
            s = scan_to_waypoint(region.data, region.start, a, isa_e, opts, 0, it)
            if s.count == 0:
                break
            count += s.count
            a = s.end
            last = s.last
            it = s.it_state
            if s.reason == StopReason.WAYPOINT:
                found = True
                break
        if last is None:
            itype_e, subtype_e = InstrType.OTHER, InstrSubtype.NONE
            size, cond, link, target, next_isa = 0, False, False, 0, isa
        else:
            itype_e, subtype_e = last.itype, last.subtype
            size, cond, link = last.size, last.is_cond, last.is_link
            target, next_isa = last.target or 0, int(last.next_isa)
        common = (addr, a, count, isa_e)
        tail = (size, itype_e, subtype_e, cond)
        return (
            found,
            count,
            a,
            int(itype_e),
            int(subtype_e),
            size,
            cond,
            link,
            target,
            next_isa,
            it,
            (*common, True, *tail),
            (*common, False, *tail),
        )

    def walk_to(
        self, addr: int, isa: int, space: int, stop: int, it: int = 0
    ) -> tuple[bool, int, int, Last, int]:
        """Walk through waypoints until the next address is ``stop``.

        Returns ``(found, count, end, last, it_out)``; ``found`` is False when an
        opcode on the way was not readable (``end`` is then its address).
        """
        self.cache_for(space)
        find = self.memory.find
        opts = self.opts
        isa_e = _ISAS[isa]
        count = 0
        a = addr
        last: Last = _NO_LAST
        while True:
            region = find(a, space)
            if region is None:
                return False, count, a, last, it
            s = scan_to_address(region.data, region.start, a, isa_e, opts, stop, 0, it)
            if s.count == 0:
                return False, count, a, last, it
            count += s.count
            a = s.end
            it = s.it_state
            li = s.last
            assert li is not None
            last = (li.size, int(li.itype), int(li.subtype), li.is_cond, int(li.next_isa))
            if s.reason == StopReason.ADDRESS:
                return True, count, a, last, it

    def walk_count(
        self, addr: int, isa: int, space: int, n: int, it: int = 0
    ) -> tuple[int, int, Last, bool, int]:
        """Walk at most ``n`` instructions, stopping after a branch or before unreadable code.

        Returns ``(walked, end, last, ended_on_branch, it_out)``.
        """
        self.cache_for(space)
        find = self.memory.find
        opts = self.opts
        isa_e = _ISAS[isa]
        count = 0
        a = addr
        last: Last = _NO_LAST
        while count < n:
            region = find(a, space)
            if region is None:
                break
            s = scan_to_waypoint(region.data, region.start, a, isa_e, opts, n - count, it)
            if s.count == 0:
                break
            count += s.count
            a = s.end
            it = s.it_state
            li = s.last
            assert li is not None
            last = (li.size, int(li.itype), int(li.subtype), li.is_cond, int(li.next_isa))
            if s.reason == StopReason.WAYPOINT and last[1] in (_BR, _BR_IND):
                return count, a, last, True, it
        return count, a, last, False, it

    def instr_at(
        self, addr: int, isa: int, space: int
    ) -> tuple[int, int, int, bool, bool, int, int] | None:
        """``(size, itype, subtype, cond, link, target, next_isa)`` of one instruction, or None."""
        region = self.memory.find(addr, space)
        if region is None:
            return None
        isa_e = _ISAS[isa]
        op = read_opcode(isa_e, region.data, addr - region.start)
        if op is None:
            return None
        info = decode(isa_e, addr, op, self.opts)
        return (
            info.size,
            int(info.itype),
            int(info.subtype),
            info.is_cond,
            info.is_link,
            info.target or 0,
            int(info.next_isa),
        )
