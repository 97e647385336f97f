"""Who ran each decoded element: the CPU, the process and the thread.

Input: a :class:`~cstrace.decode.SourceRun` (one trace source in one buffer)
and the :class:`~cstrace.memory.locate.ImageLocator` of its session. Output:
:class:`ContextTracker`, which follows the run's elements and gives the
:class:`~cstrace.trace.ExecContext` of each (the same object for as long as
nothing changes), and :func:`with_context`, the elements paired with it.

- The CPU is the source's (a recording says which CPU each trace unit
  traces), else the buffer's.
- The process and the thread start as the buffer says (a recording knows
  who ran when each piece of trace began); each ``PE_CONTEXT`` element that
  carries the traced context then names them, as the trace's convention says
  (:attr:`~cstrace.trace.Trace.contextidr`: ``tid``, the context ID is the
  thread, as arm64 Linux writes it; ``vmid``, the VMID is, for a kernel
  running at EL2; ``pid``, bits 8..31 of the context ID; ``asid``, the
  process through the event log's ASIDs, the thread unknown). The process of
  a thread comes from the event log at the current time.
- Time: the buffer's event-log time, then each ``TIMESTAMP`` (converted with
  the trace's clock when it has one).

The tracker also counts the addresses the decoder could not read
(``ADDR_NACC``) against the image whose file was not found
(:meth:`~cstrace.memory.locate.ImageLocator.count_missing`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cstrace.decode import Session, SourceRun, element_lists
from cstrace.elements import AddrNacc, Element, PEContext, Timestamp
from cstrace.protocols import Packet
from cstrace.trace import ExecContext

if TYPE_CHECKING:
    from cstrace.memory.locate import ImageLocator

__all__ = ["ContextTracker", "tracker_for", "with_context"]


class ContextTracker:
    """Follows the elements of one run and says who ran each (see the module docstring).

    ``clock`` converts trace timestamps to event-log time (the trace's clock);
    with ``count``, addresses that could not be read are counted against
    missing images.
    """

    __slots__ = ("_clock", "_count", "context", "locator", "time")

    def __init__(
        self,
        run: SourceRun,
        locator: ImageLocator | None = None,
        clock: Callable[[int], int] | None = None,
        *,
        count: bool = True,
    ) -> None:
        buffer = run.buffer
        start = buffer.context or ExecContext()
        cpu = run.source.cpu if run.source.cpu is not None else start.cpu
        if cpu == start.cpu:
            self.context = ExecContext(cpu, start.pid, start.tid)
        else:
            # Another CPU's trace in this buffer: who ran there is for its trace to say.
            self.context = ExecContext(cpu)
        """Who runs now: the context of the last element given to :meth:`update`."""
        self.time: int | None = buffer.time
        """The event-log time now (None: before any)."""
        self.locator = locator
        self._clock = clock
        self._count = count and locator is not None

    def update(self, elem: Element) -> ExecContext:
        """The context of ``elem``, after what it says (a new context, a timestamp)."""
        if isinstance(elem, PEContext):
            ctx = elem.context
            if self.locator is not None:
                pid, tid = self.locator.thread_of(
                    ctx.context_id if ctx.ctxt_id_valid else None,
                    ctx.vmid if ctx.vmid_valid else None,
                    self.time,
                )
                cur = self.context
                if (pid is not None or tid is not None) and (pid, tid) != (cur.pid, cur.tid):
                    self.context = ExecContext(cur.cpu, pid, tid)
        elif isinstance(elem, Timestamp):
            ts = elem.timestamp
            self.time = self._clock(ts) if self._clock is not None else ts
        elif isinstance(elem, AddrNacc) and self._count:
            assert self.locator is not None
            self.locator.count_missing(self.context.pid, elem.address, self.time)
        return self.context

    def watch(self, run: SourceRun) -> SourceRun:
        """A copy of ``run`` (itself possibly a watched run) whose elements update this
        tracker as they are decoded, for consumers that take a run (the OpenCSD listing)."""
        return _TrackedRun(**run.run_fields(), inner=run, tracker=self)


@dataclass
class _TrackedRun(SourceRun):
    """A run whose elements pass through a :class:`ContextTracker` (see ``watch``)."""

    inner: SourceRun | None = field(default=None, repr=False)
    tracker: ContextTracker | None = field(default=None, repr=False)

    def packets(self) -> Iterator[Packet]:
        """The packets of the run watched."""
        assert self.inner is not None
        return self.inner.packets()

    def elements(self, packets: Iterable[Packet] | None = None) -> Iterator[Element]:
        """The elements of the run watched, each given to the tracker."""
        assert self.inner is not None and self.tracker is not None
        update = self.tracker.update
        for elem in self.inner.elements(packets):
            update(elem)
            yield elem

    def rows(self, packets: Iterable[Packet] | None = None) -> Iterator[list[Any]]:
        """The elements of the run watched in lists, each given to the tracker."""
        return element_lists(self.elements(packets))


def tracker_for(session: Session, run: SourceRun, *, count: bool = True) -> ContextTracker:
    """A :class:`ContextTracker` for ``run`` with its session's locator and trace clock."""
    clock = session.trace.clock
    return ContextTracker(
        run,
        session.memories.locator(),
        clock.to_log_time if clock is not None else None,
        count=count,
    )


def with_context(session: Session, run: SourceRun) -> Iterator[tuple[Element, ExecContext]]:
    """The elements of ``run`` (a run of ``session``), each with who ran it."""
    update = tracker_for(session, run).update
    for elem in run.elements():
        yield elem, update(elem)
