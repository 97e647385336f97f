"""ETMv1 reader: trace-port capture bytes → one :class:`PipeStat` per cycle.

Input: a :class:`~cstrace.capture.etmport.CycleStream` (capture bytes and their
format) and the ETM configuration. Output: :class:`PipeStat` packets in cycle
order. Consecutive trace-disabled cycles become one packet with a count, since
they carry nothing (IHI 0014Q §5.1: TD cycles may even be dropped by the
capture device). A trigger cycle (TR) is reported with the real status it
carries on TRACEPKT[2:0] (§5.1, "Trigger PIPESTAT signals").

The status of each PIPESTAT value is looked up in a table built from rows in
spec order (table 5.1); a unit test checks that the rows cover every value once.
"""

from __future__ import annotations

from collections.abc import Iterator

from cstrace.capture.etmport import read_cycles
from cstrace.capture.stream import Stream
from cstrace.protocols.etmv1.config import ClassicEtmConfig
from cstrace.protocols.etmv1.packets import PipeStat, V1Status

__all__ = ["PIPESTAT_ROWS", "PIPESTAT_TABLE", "iter_packets"]

# (value, status, IHI 0014Q section): table 5.1 "PIPESTAT messages".
PIPESTAT_ROWS: tuple[tuple[int, V1Status, str], ...] = (
    (0b000, V1Status.IE, "5.1 table 5.1"),
    (0b001, V1Status.ID, "5.1 table 5.1"),
    (0b010, V1Status.IN, "5.1 table 5.1"),
    (0b011, V1Status.WT, "5.1 table 5.1"),
    (0b100, V1Status.BE, "5.1 table 5.1"),
    (0b101, V1Status.BD, "5.1 table 5.1"),
    (0b110, V1Status.TR, "5.1 table 5.1; 5.1.2 trigger"),
    (0b111, V1Status.TD, "5.1 table 5.1"),
)

PIPESTAT_TABLE: tuple[V1Status, ...] = tuple(r[1] for r in sorted(PIPESTAT_ROWS))

_TD = int(V1Status.TD)
_TR = int(V1Status.TR)


def iter_packets(
    stream: Stream, config: ClassicEtmConfig, complete: bool = True
) -> Iterator[PipeStat]:
    """The pipeline-status packets of a trace-port capture."""
    fmt = getattr(stream, "fmt", "etm_cycles")
    cycles, _issues = read_cycles(stream.data, fmt, config.port)
    table = PIPESTAT_TABLE
    n = len(cycles)
    i = 0
    while i < n:
        c = cycles[i]
        ps = int(table[c & 7])
        if ps == _TD:
            j = i + 1
            while j < n and (cycles[j] & 7) == _TD:
                j += 1
            yield PipeStat(i, c.to_bytes(4, "little"), _TD, c >> 8, bool(c & 0x10), False, j - i)
            i = j
            continue
        trig = ps == _TR
        if trig:
            ps = (c >> 8) & 7
        yield PipeStat(i, c.to_bytes(4, "little"), ps, c >> 8, bool(c & 0x10), trig)
        i += 1
