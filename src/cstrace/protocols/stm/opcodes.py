"""The STPv2 opcodes a CoreSight STM emits: one table row per opcode nibble.

Input: nothing (tables); output: the opcode rows the STM reader
(:mod:`~cstrace.protocols.stm.reader`) and the boundary search
(:mod:`~cstrace.protocols.stm.boundary`) cut packets with. An opcode is one
nibble (``0``-``E``), two (``Fn``) or three (``F0n``); a row gives the packet
type, what follows the opcode (payload nibbles, an optional timestamp) and
whether the packet has a marker.
"""

from __future__ import annotations

from cstrace.protocols.stm.packets import StmPktType

__all__ = [
    "ACT_ASYNC",
    "ACT_PACKET",
    "ACT_PREFIX_F",
    "ACT_PREFIX_F0",
    "ACT_RESERVED",
    "ACT_VERSION",
    "OPCODES_1N",
    "OPCODES_2N",
    "OPCODES_3N",
    "TABLE_1N",
    "TABLE_2N",
    "TABLE_3N",
    "TS_NIBBLES",
    "OpRow",
]

# Actions of an opcode row.
ACT_PACKET = 0  # fixed number of payload nibbles, then an optional timestamp
ACT_PREFIX_F = 1  # opcode continues with a second nibble (Fn)
ACT_PREFIX_F0 = 2  # opcode continues with a third nibble (F0n)
ACT_ASYNC = 3  # F nibbles up to the terminating 0
ACT_VERSION = 4  # one nibble: the protocol version
ACT_RESERVED = 5  # not used by CoreSight STM

# An opcode row: (opcode nibble, spec name, packet type, action, payload nibbles,
# marker, timestamp).
OpRow = tuple[int, str, StmPktType, int, int, bool, bool]

_P = StmPktType

# STPv2 one-nibble opcodes (MIPI STPv2 opcode table; CoreSight STM-500 TRM,
# table "STPv2 packets"), in opcode order.
OPCODES_1N: tuple[OpRow, ...] = (
    (0x0, "NULL", _P.NULL, ACT_PACKET, 0, False, False),
    (0x1, "M8", _P.M8, ACT_PACKET, 2, False, False),
    (0x2, "MERR", _P.MERR, ACT_PACKET, 2, False, False),
    (0x3, "C8", _P.C8, ACT_PACKET, 2, False, False),
    (0x4, "D8", _P.D8, ACT_PACKET, 2, False, False),
    (0x5, "D16", _P.D16, ACT_PACKET, 4, False, False),
    (0x6, "D32", _P.D32, ACT_PACKET, 8, False, False),
    (0x7, "D64", _P.D64, ACT_PACKET, 16, False, False),
    (0x8, "D8MTS", _P.D8, ACT_PACKET, 2, True, True),
    (0x9, "D16MTS", _P.D16, ACT_PACKET, 4, True, True),
    (0xA, "D32MTS", _P.D32, ACT_PACKET, 8, True, True),
    (0xB, "D64MTS", _P.D64, ACT_PACKET, 16, True, True),
    (0xC, "D4", _P.D4, ACT_PACKET, 1, False, False),
    (0xD, "D4MTS", _P.D4, ACT_PACKET, 1, True, True),
    (0xE, "FLAG_TS", _P.FLAG, ACT_PACKET, 0, False, True),
    (0xF, "(Fn)", _P.NO_ERR_TYPE, ACT_PREFIX_F, 0, False, False),
)

# STPv2 two-nibble opcodes Fn.
OPCODES_2N: tuple[OpRow, ...] = (
    (0x0, "(F0n)", _P.NO_ERR_TYPE, ACT_PREFIX_F0, 0, False, False),
    (0x1, "(reserved F1)", _P.RESERVED, ACT_RESERVED, 0, False, False),
    (0x2, "GERR", _P.GERR, ACT_PACKET, 2, False, False),
    (0x3, "C16", _P.C16, ACT_PACKET, 4, False, False),
    (0x4, "D8TS", _P.D8, ACT_PACKET, 2, False, True),
    (0x5, "D16TS", _P.D16, ACT_PACKET, 4, False, True),
    (0x6, "D32TS", _P.D32, ACT_PACKET, 8, False, True),
    (0x7, "D64TS", _P.D64, ACT_PACKET, 16, False, True),
    (0x8, "D8M", _P.D8, ACT_PACKET, 2, True, False),
    (0x9, "D16M", _P.D16, ACT_PACKET, 4, True, False),
    (0xA, "D32M", _P.D32, ACT_PACKET, 8, True, False),
    (0xB, "D64M", _P.D64, ACT_PACKET, 16, True, False),
    (0xC, "D4TS", _P.D4, ACT_PACKET, 1, False, True),
    (0xD, "D4M", _P.D4, ACT_PACKET, 1, True, False),
    (0xE, "FLAG", _P.FLAG, ACT_PACKET, 0, False, False),
    (0xF, "ASYNC", _P.ASYNC, ACT_ASYNC, 0, False, False),
)

# STPv2 three-nibble opcodes F0n. USER, TIME, FREQ_TS and XSYNC (F02-F05, F09-)
# are not emitted by CoreSight STM; like the reference, they are reserved here.
OPCODES_3N: tuple[OpRow, ...] = (
    (0x0, "VERSION", _P.VERSION, ACT_VERSION, 0, False, False),
    (0x1, "NULL_TS", _P.NULL, ACT_PACKET, 0, False, True),
    *((n, f"(reserved F0{n:X})", _P.RESERVED, ACT_RESERVED, 0, False, False) for n in (2, 3, 4, 5)),
    (0x6, "TRIG", _P.TRIG, ACT_PACKET, 2, False, False),
    (0x7, "TRIG_TS", _P.TRIG, ACT_PACKET, 2, False, True),
    (0x8, "FREQ", _P.FREQ, ACT_PACKET, 8, False, False),
    *(
        (n, f"(reserved F0{n:X})", _P.RESERVED, ACT_RESERVED, 0, False, False)
        for n in range(0x9, 0x10)
    ),
)


def _table(rows: tuple[OpRow, ...]) -> tuple[OpRow, ...]:
    """Index rows by opcode nibble (every nibble exactly once)."""
    table: list[OpRow | None] = [None] * 16
    for row in rows:
        if table[row[0]] is not None:
            raise ValueError(f"opcode {row[0]:X} defined twice")
        table[row[0]] = row
    if any(r is None for r in table):
        raise ValueError("opcode table does not cover every nibble")
    return tuple(r for r in table if r is not None)


TABLE_1N = _table(OPCODES_1N)
"""The one-nibble opcode rows, indexed by opcode nibble."""
TABLE_2N = _table(OPCODES_2N)
"""The ``Fn`` opcode rows, indexed by their second nibble."""
TABLE_3N = _table(OPCODES_3N)
"""The ``F0n`` opcode rows, indexed by their third nibble."""

TS_NIBBLES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, -1)
"""Timestamp nibbles by the value of the length nibble (-1: invalid)."""
