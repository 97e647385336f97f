"""From the trace's timestamps to the event log's time, when the two count differently.

Input: the conversion a recording gives (perf's PERF_RECORD_TIME_CONV: the
shift, multiplier and zero point that turn the CPU's generic-timer count, which
the trace units timestamp with, into perf's clock in nanoseconds). Output: a
:class:`CounterClock` whose :meth:`~CounterClock.to_log_time` converts one
timestamp; the code memory applies it when a decoder reports trace time
(:meth:`cstrace.memory.spaces.AddressSpaces.advance`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CounterClock"]


@dataclass(frozen=True)
class CounterClock:
    """``log time = zero + (count >> shift) * mult + (((count & (2**shift - 1)) * mult) >> shift)``.

    With ``short`` (``cap_user_time_short``), the count is first widened from
    ``cycles`` with ``mask``, as perf does.
    """

    shift: int
    mult: int
    zero: int
    cycles: int = 0
    mask: int = 0
    short: bool = False

    def to_log_time(self, count: int) -> int:
        """The event-log time of trace timestamp ``count``."""
        if self.short:
            count = self.cycles + ((count - self.cycles) & self.mask)
        quot = count >> self.shift
        rem = count & ((1 << self.shift) - 1)
        return self.zero + quot * self.mult + ((rem * self.mult) >> self.shift)
