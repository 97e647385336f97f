"""ETMv4 / ETE packet reader: the bytes of one trace ID → :mod:`.packets`.

Input: a :class:`~cstrace.capture.Stream` (one trace ID's bytes and the
capture index of each) and an :class:`~.config.Etmv4Config`. Output: packets,
in stream order, each with the capture index of its first byte.

The stream is consumed block by block (``stream.blocks()``, through a
:class:`~cstrace.capture.window.BlockWindow`), so memory stays flat however long
the capture: a packet cut by the end of a block is read again, whole, with the
next block, and the packets are the same wherever the blocks are cut.

Headers are dispatched through a 256-entry table built from :data:`HEADER_ROWS`
(spec order, each row citing the packet's description: the ETE chapter of the
Arm ARM, D5.3, by packet name, or the ETMv4 specification IHI0064 chapter 6
for packets ETE does not have). Rows that
depend on the configuration (ETE-only packets, conditional trace, data trace,
Q elements, versions) become RESERVED / RESERVED_CFG entries when the
configuration does not allow them, as in the reference decoder.

Behaviour on imperfect trace matches the reference packet processor
(OpenCSD ``TrcPktProcEtmV4I``), so that packet boundaries, raw bytes and
indices agree with its listings:

* before the first alignment synchronisation, bytes are reported as
  ``NotSync`` pieces: a piece ends before each 0x00 byte (which may start an
  A-sync) or after 8 bytes (the next piece then carries the index just past
  that byte, even across a gap in capture indices); a run of more than eleven
  0x00 bytes sheds its first 0x00s as one-byte pieces (listed as I_ASYNC);
* a bad A-sync, a bad extension byte or an overrunning field gives a
  ``BadPacket(BAD_SEQUENCE)`` holding the bytes read so far; a reserved header
  a one-byte ``BadPacket(RESERVED)`` (``RESERVED_CFG`` when only this
  configuration forbids it); reading resumes at the next byte;
* a packet cut by the end of the stream becomes ``BadPacket(INCOMPLETE_EOT)``
  (not emitted when the capture is incomplete, ``complete=False``).

The reader never raises on trace content.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import NamedTuple, cast

from cstrace.capture.stream import Stream
from cstrace.capture.window import BlockWindow
from cstrace.protocols.etmv4.config import ArchVersion, Etmv4Config
from cstrace.protocols.etmv4.packets import (
    Address,
    AddressContext,
    AddressMatch,
    Async,
    Atom,
    BadPacket,
    Cancel,
    Commit,
    CondFlush,
    CondInstr,
    CondResult,
    Context,
    CycleCount,
    DataSyncMarker,
    Discard,
    Etmv4Packet,
    Event,
    Exception_,
    ExceptionReturn,
    FuncRet,
    Ignore,
    Instrumentation,
    Mispredict,
    NotSync,
    Overflow,
    PacketType,
    Q,
    SourceAddress,
    SourceAddressMatch,
    Timestamp,
    TimestampMarker,
    TraceInfo,
    TraceOn,
    TransCommit,
    TransStart,
)

__all__ = ["ATOMS", "HEADER_ROWS", "HeaderRow", "header_table", "iter_packets", "row_bytes"]

P = PacketType

# Handler codes of the header table (how the bytes after the header are read).
H_RESERVED = 0
H_RESERVED_CFG = 1
H_ATOM = 2
H_ADDR_SHORT = 3
H_ADDR_MATCH = 4
H_ADDR_LONG = 5
H_NO_PAYLOAD = 6
H_EXTENSION = 7
H_TRACE_INFO = 8
H_TIMESTAMP = 9
H_EXCEPT = 10
H_CCNT_F1 = 11
H_CCNT_F2 = 12
H_CCNT_F3 = 13
H_DSM = 14
H_SPEC_FIELD = 15  # commit, cancel format 1: one continuation field
H_MISPREDICT = 16  # mispredict, cancel format 2
H_CANCEL_F3 = 17
H_COND_INSTR = 18
H_COND_RESULT = 19
H_EVENT = 20
H_CTXT = 21
H_ADDR_CTXT = 22
H_Q = 23
H_ITE = 24

# Configuration conditions of header rows.
C_ALWAYS = 0
C_ETE = 1  # ETE (architecture major version 5 or later)
C_ETE_ITE = 2  # ETE with FEAT_ITE (ETE minor version 3 or later)
C_V8M_FUNC_RET = 3  # M profile, Armv8, ETMv4.2 or later
C_NOT_ETE = 4  # ETMv4 only (ETE: reserved for this configuration)
C_DATA_TRACE = 5  # data trace enabled
C_COND_TRACE = 6  # conditional instruction trace implemented and enabled
C_V43 = 7  # ETMv4.3 or later
C_V46 = 8  # ETMv4.6 / ETE 1.1 or later (version field >= 0x46)
C_Q = 9  # Q elements implemented (TRCIDR0.QSUPP != 0)
C_SRC_ADDR = 10  # ETE source address packets (version >= 0x50)


class HeaderRow(NamedTuple):
    """One row of the header table: a header bit pattern and what it starts."""

    pattern: str
    """Eight characters, most significant bit first; ``x`` matches 0 and 1."""
    kind: PacketType
    handler: int
    condition: int
    """C_*: when the configuration fails it, the header reads as RESERVED/RESERVED_CFG."""
    section: str


# The header rows in header-byte order, as in the spec's packet summary tables.
# "ETE D5.3" names the packet's description in the Arm ARM (chapter D5, ETE
# protocol, D5.3 alphabetical list of packets); "ETMv4 ch6" the ETMv4
# architecture specification (IHI0064) chapter 6 for packets ETE does not have.
_R = HeaderRow
HEADER_ROWS: tuple[HeaderRow, ...] = (
    _R(
        "00000000",
        P.EXTENSION,
        H_EXTENSION,
        C_ALWAYS,
        "ETE D5.3 Alignment Synchronization / Discard / Overflow (extension header)",
    ),
    _R("00000001", P.TRACE_INFO, H_TRACE_INFO, C_ALWAYS, "ETE D5.3 Trace Info"),
    _R("0000001x", P.TIMESTAMP, H_TIMESTAMP, C_ALWAYS, "ETE D5.3 Timestamp"),
    _R("00000100", P.TRACE_ON, H_NO_PAYLOAD, C_ALWAYS, "ETE D5.3 Trace On"),
    _R("00000101", P.FUNC_RET, H_NO_PAYLOAD, C_V8M_FUNC_RET, "ETMv4 ch6 Function Return (v8-M)"),
    _R(
        "00000110",
        P.EXCEPT,
        H_EXCEPT,
        C_ALWAYS,
        "ETE D5.3 Exception / PE Reset / Transaction Failure; ETMv4 ch6 Exception",
    ),
    _R("00000111", P.EXCEPT_RTN, H_NO_PAYLOAD, C_NOT_ETE, "ETMv4 ch6 Exception Return"),
    _R("00001000", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("00001001", P.ITE, H_ITE, C_ETE_ITE, "ETE D5.3 Instrumentation"),
    _R("00001010", P.TRANS_ST, H_NO_PAYLOAD, C_ETE, "ETE D5.3 Transaction Start"),
    _R("00001011", P.TRANS_COMMIT, H_NO_PAYLOAD, C_ETE, "ETE D5.3 Transaction Commit"),
    _R("0000110x", P.CCNT_F2, H_CCNT_F2, C_ALWAYS, "ETE D5.3 Cycle Count Format 2"),
    _R("0000111x", P.CCNT_F1, H_CCNT_F1, C_ALWAYS, "ETE D5.3 Cycle Count Format 1"),
    _R("0001xxxx", P.CCNT_F3, H_CCNT_F3, C_ALWAYS, "ETE D5.3 Cycle Count Format 3"),
    _R(
        "00100xxx",
        P.NUM_DS_MKR,
        H_DSM,
        C_DATA_TRACE,
        "ETMv4 ch6 Numbered Data Synchronization Marker",
    ),
    _R(
        "001010xx",
        P.UNNUM_DS_MKR,
        H_DSM,
        C_DATA_TRACE,
        "ETMv4 ch6 Unnumbered Data Synchronization Marker",
    ),
    _R(
        "00101100",
        P.UNNUM_DS_MKR,
        H_DSM,
        C_DATA_TRACE,
        "ETMv4 ch6 Unnumbered Data Synchronization Marker",
    ),
    _R("00101101", P.COMMIT, H_SPEC_FIELD, C_ALWAYS, "ETE D5.3 Commit"),
    _R("00101110", P.CANCEL_F1, H_SPEC_FIELD, C_ALWAYS, "ETE D5.3 Cancel Format 1"),
    _R(
        "00101111",
        P.CANCEL_F1_MISPRED,
        H_SPEC_FIELD,
        C_ALWAYS,
        "ETE D5.3 Cancel Format 1 (with Mispredict)",
    ),
    _R("001100xx", P.MISPREDICT, H_MISPREDICT, C_ALWAYS, "ETE D5.3 Mispredict"),
    _R("001101xx", P.CANCEL_F2, H_MISPREDICT, C_ALWAYS, "ETE D5.3 Cancel Format 2"),
    _R("00111xxx", P.CANCEL_F3, H_CANCEL_F3, C_ALWAYS, "ETE D5.3 Cancel Format 3"),
    _R(
        "0100000x",
        P.COND_I_F2,
        H_COND_INSTR,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Instruction Format 2",
    ),
    _R(
        "01000010",
        P.COND_I_F2,
        H_COND_INSTR,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Instruction Format 2",
    ),
    _R("01000011", P.COND_FLUSH, H_NO_PAYLOAD, C_COND_TRACE, "ETMv4 ch6 Conditional Flush"),
    _R(
        "0100010x",
        P.COND_RES_F4,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 4",
    ),
    _R(
        "01000110",
        P.COND_RES_F4,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 4",
    ),
    _R("01000111", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R(
        "0100100x",
        P.COND_RES_F2,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 2",
    ),
    _R(
        "01001010",
        P.COND_RES_F2,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 2",
    ),
    _R("01001011", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R(
        "0100110x",
        P.COND_RES_F2,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 2",
    ),
    _R(
        "01001110",
        P.COND_RES_F2,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 2",
    ),
    _R("01001111", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R(
        "0101xxxx",
        P.COND_RES_F3,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 3",
    ),
    _R("01100xxx", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R(
        "011010xx",
        P.COND_RES_F1,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 1",
    ),
    _R(
        "01101100",
        P.COND_I_F1,
        H_COND_INSTR,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Instruction Format 1",
    ),
    _R(
        "01101101",
        P.COND_I_F3,
        H_COND_INSTR,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Instruction Format 3",
    ),
    _R(
        "0110111x",
        P.COND_RES_F1,
        H_COND_RESULT,
        C_COND_TRACE,
        "ETMv4 ch6 Conditional Result Format 1",
    ),
    _R("01110000", P.IGNORE, H_NO_PAYLOAD, C_V43, "ETE D5.3 Ignore (ETMv4.3+)"),
    _R("01110001", P.EVENT, H_EVENT, C_ALWAYS, "ETE D5.3 Event"),
    _R("0111001x", P.EVENT, H_EVENT, C_ALWAYS, "ETE D5.3 Event"),
    _R("011101xx", P.EVENT, H_EVENT, C_ALWAYS, "ETE D5.3 Event"),
    _R("01111xxx", P.EVENT, H_EVENT, C_ALWAYS, "ETE D5.3 Event"),
    _R("1000000x", P.CTXT, H_CTXT, C_ALWAYS, "ETE D5.3 Context Same / Context"),
    _R(
        "10000010",
        P.ADDR_CTXT_L_32IS0,
        H_ADDR_CTXT,
        C_ALWAYS,
        "ETE D5.3 Target Address with Context 32-bit IS0",
    ),
    _R(
        "10000011",
        P.ADDR_CTXT_L_32IS1,
        H_ADDR_CTXT,
        C_ALWAYS,
        "ETE D5.3 Target Address with Context 32-bit IS1",
    ),
    _R("10000100", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R(
        "10000101",
        P.ADDR_CTXT_L_64IS0,
        H_ADDR_CTXT,
        C_ALWAYS,
        "ETE D5.3 Target Address with Context 64-bit IS0",
    ),
    _R(
        "10000110",
        P.ADDR_CTXT_L_64IS1,
        H_ADDR_CTXT,
        C_ALWAYS,
        "ETE D5.3 Target Address with Context 64-bit IS1",
    ),
    _R("10000111", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("10001000", P.TS_MARKER, H_NO_PAYLOAD, C_V46, "ETE D5.3 Timestamp Marker (ETE 1.1)"),
    _R("10001001", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("1000101x", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("100011xx", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("1001000x", P.ADDR_MATCH, H_ADDR_MATCH, C_ALWAYS, "ETE D5.3 Target Address Exact Match"),
    _R("10010010", P.ADDR_MATCH, H_ADDR_MATCH, C_ALWAYS, "ETE D5.3 Target Address Exact Match"),
    _R("10010011", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("10010100", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("10010101", P.ADDR_S_IS0, H_ADDR_SHORT, C_ALWAYS, "ETE D5.3 Target Address Short IS0"),
    _R("10010110", P.ADDR_S_IS1, H_ADDR_SHORT, C_ALWAYS, "ETE D5.3 Target Address Short IS1"),
    _R("10010111", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("1001100x", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("10011010", P.ADDR_L_32IS0, H_ADDR_LONG, C_ALWAYS, "ETE D5.3 Target Address 32-bit IS0"),
    _R("10011011", P.ADDR_L_32IS1, H_ADDR_LONG, C_ALWAYS, "ETE D5.3 Target Address 32-bit IS1"),
    _R("10011100", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("10011101", P.ADDR_L_64IS0, H_ADDR_LONG, C_ALWAYS, "ETE D5.3 Target Address 64-bit IS0"),
    _R("10011110", P.ADDR_L_64IS1, H_ADDR_LONG, C_ALWAYS, "ETE D5.3 Target Address 64-bit IS1"),
    _R("10011111", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("1010000x", P.Q, H_Q, C_Q, "ETE D5.3 Q with exact match address"),
    _R("10100010", P.Q, H_Q, C_Q, "ETE D5.3 Q with exact match address"),
    _R("10100011", P.Q, H_RESERVED, C_ALWAYS, "reserved Q type"),
    _R("10100100", P.Q, H_RESERVED, C_ALWAYS, "reserved Q type"),
    _R("10100101", P.Q, H_Q, C_Q, "ETE D5.3 Q with short address IS0"),
    _R("10100110", P.Q, H_Q, C_Q, "ETE D5.3 Q with short address IS1"),
    _R("10100111", P.Q, H_RESERVED, C_ALWAYS, "reserved Q type"),
    _R("1010100x", P.Q, H_RESERVED, C_ALWAYS, "reserved Q type"),
    _R("1010101x", P.Q, H_Q, C_Q, "ETE D5.3 Q with 32-bit address IS0 / IS1"),
    _R("10101100", P.Q, H_Q, C_Q, "ETE D5.3 Q with count"),
    _R("10101101", P.Q, H_RESERVED, C_ALWAYS, "reserved Q type"),
    _R("10101110", P.Q, H_RESERVED, C_ALWAYS, "reserved Q type"),
    _R("10101111", P.Q, H_Q, C_Q, "ETE D5.3 Q (no count)"),
    _R(
        "1011000x",
        P.SRC_ADDR_MATCH,
        H_ADDR_MATCH,
        C_SRC_ADDR,
        "ETE D5.3 Source Address Exact Match",
    ),
    _R(
        "10110010",
        P.SRC_ADDR_MATCH,
        H_ADDR_MATCH,
        C_SRC_ADDR,
        "ETE D5.3 Source Address Exact Match",
    ),
    _R("10110011", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("10110100", P.SRC_ADDR_S_IS0, H_ADDR_SHORT, C_SRC_ADDR, "ETE D5.3 Source Address Short IS0"),
    _R("10110101", P.SRC_ADDR_S_IS1, H_ADDR_SHORT, C_SRC_ADDR, "ETE D5.3 Source Address Short IS1"),
    _R(
        "10110110",
        P.SRC_ADDR_L_32IS0,
        H_ADDR_LONG,
        C_SRC_ADDR,
        "ETE D5.3 Source Address 32-bit IS0",
    ),
    _R(
        "10110111",
        P.SRC_ADDR_L_32IS1,
        H_ADDR_LONG,
        C_SRC_ADDR,
        "ETE D5.3 Source Address 32-bit IS1",
    ),
    _R(
        "10111000",
        P.SRC_ADDR_L_64IS0,
        H_ADDR_LONG,
        C_SRC_ADDR,
        "ETE D5.3 Source Address 64-bit IS0",
    ),
    _R(
        "10111001",
        P.SRC_ADDR_L_64IS1,
        H_ADDR_LONG,
        C_SRC_ADDR,
        "ETE D5.3 Source Address 64-bit IS1",
    ),
    _R("1011101x", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("101111xx", P.RESERVED, H_RESERVED, C_ALWAYS, "reserved"),
    _R("1100xxxx", P.ATOM_F6, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("110100xx", P.ATOM_F6, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("11010100", P.ATOM_F6, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("11010101", P.ATOM_F5, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 5.2"),
    _R("1101011x", P.ATOM_F5, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 5.2"),
    _R("110110xx", P.ATOM_F2, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 2"),
    _R("110111xx", P.ATOM_F4, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 4"),
    _R("1110xxxx", P.ATOM_F6, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("111100xx", P.ATOM_F6, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("11110100", P.ATOM_F6, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 6"),
    _R("11110101", P.ATOM_F5, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 5.1"),
    _R("1111011x", P.ATOM_F1, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 1"),
    _R("11111xxx", P.ATOM_F3, H_ATOM, C_ALWAYS, "ETE D5.3 Atom Format 3"),
)


def _condition_holds(condition: int, config: Etmv4Config) -> bool:
    """Whether a header row's configuration condition holds."""
    if condition == C_ALWAYS:
        return True
    if condition == C_ETE:
        return config.major_version >= 5
    if condition == C_ETE_ITE:
        return config.major_version >= 5 and config.minor_version >= 3
    if condition == C_V8M_FUNC_RET:
        v8 = ArchVersion.V8 <= config.arch_version <= ArchVersion.AA64
        return config.is_m_profile and v8 and config.full_version >= 0x42
    if condition == C_NOT_ETE:
        return config.major_version < 5
    if condition == C_DATA_TRACE:
        return config.data_trace
    if condition == C_COND_TRACE:
        return config.cond_trace_valid
    if condition == C_V43:
        return config.full_version >= 0x43
    if condition == C_V46:
        return config.full_version >= 0x46
    if condition == C_Q:
        return config.has_q_elements
    if condition == C_SRC_ADDR:
        return config.full_version >= 0x50
    raise ValueError(f"unknown header condition {condition}")


# What a header becomes when its row's condition fails: (handler, kind or None to keep).
_FALLBACK: dict[int, tuple[int, PacketType | None]] = {
    C_ETE: (H_RESERVED, P.RESERVED),
    C_ETE_ITE: (H_RESERVED, P.RESERVED),
    C_V43: (H_RESERVED, P.RESERVED),
    C_V46: (H_RESERVED, P.RESERVED),
    C_SRC_ADDR: (H_RESERVED, P.RESERVED),
    C_V8M_FUNC_RET: (H_RESERVED, None),
    C_Q: (H_RESERVED, None),
    C_NOT_ETE: (H_RESERVED_CFG, None),
    C_DATA_TRACE: (H_RESERVED_CFG, None),
    C_COND_TRACE: (H_RESERVED_CFG, None),
}


def row_bytes(pattern: str) -> list[int]:
    """Every byte value a header pattern such as ``0000001x`` matches."""
    values = [0]
    for ch in pattern:
        if ch == "x":
            values = [v << 1 for v in values] + [(v << 1) | 1 for v in values]
        else:
            values = [(v << 1) | int(ch) for v in values]
    return sorted(values)


def header_table(config: Etmv4Config) -> tuple[tuple[int, ...], tuple[PacketType, ...]]:
    """The header table for a configuration: per byte value, its handler code and packet kind."""
    handlers = [H_RESERVED] * 256
    kinds = [P.RESERVED] * 256
    for row in HEADER_ROWS:
        handler, kind = row.handler, row.kind
        if not _condition_holds(row.condition, config):
            handler, fallback = _FALLBACK[row.condition]
            kind = fallback if fallback is not None else kind
        for value in row_bytes(row.pattern):
            handlers[value] = handler
            kinds[value] = kind
    return tuple(handlers), tuple(kinds)


def _atom_table() -> tuple[tuple[PacketType, int, int] | None, ...]:
    """Per header byte, the (kind, E bits, count) of an atom packet (ETE D5.3 Atom formats)."""
    f4 = (0xE, 0x0, 0xA, 0x5)  # EEEN, NNNN, ENEN, NENE (bit 0 = oldest)
    f5 = {5: 0x1E, 1: 0x00, 2: 0x0A, 3: 0x15}  # EEEEN, NNNNN, NENEN, ENENE
    table: list[tuple[PacketType, int, int] | None] = [None] * 256
    for b in range(0xC0, 0x100):
        if 0xC0 <= b <= 0xD4 or 0xE0 <= b <= 0xF4:
            n = (b & 0x1F) + 3  # E atoms, then one E or N
            bits = (1 << n) - 1
            if not b & 0x20:
                bits |= 1 << n
            table[b] = (P.ATOM_F6, bits, n + 1)
        elif 0xD5 <= b <= 0xD7 or b == 0xF5:
            idx = ((b & 0x20) >> 3) | (b & 0x3)
            table[b] = (P.ATOM_F5, f5[idx], 5)
        elif 0xD8 <= b <= 0xDB:
            table[b] = (P.ATOM_F2, b & 0x3, 2)
        elif 0xDC <= b <= 0xDF:
            table[b] = (P.ATOM_F4, f4[b & 0x3], 4)
        elif 0xF6 <= b <= 0xF7:
            table[b] = (P.ATOM_F1, b & 0x1, 1)
        else:
            table[b] = (P.ATOM_F3, b & 0x7, 3)
    return tuple(table)


ATOMS = _atom_table()
_RAW1 = tuple(bytes((b,)) for b in range(256))
# Per header byte: (raw bytes, kind, E bits, count) of its atom packet, None if not an atom.
_ATOM_FIELDS: tuple[tuple[bytes, PacketType, int, int] | None, ...] = tuple(
    None if a is None else (_RAW1[b], *a) for b, a in enumerate(ATOMS)
)

# Simple packets of one header byte, by kind.
_SIMPLE: dict[PacketType, type[Etmv4Packet]] = {
    P.TRACE_ON: TraceOn,
    P.FUNC_RET: FuncRet,
    P.EXCEPT_RTN: ExceptionReturn,
    P.IGNORE: Ignore,
    P.TRANS_ST: TransStart,
    P.TRANS_COMMIT: TransCommit,
    P.TS_MARKER: TimestampMarker,
    P.COND_FLUSH: CondFlush,
}

# Trace info sections (first control byte bits) and the "control complete" flag.
_TI_INFO, _TI_KEY, _TI_SPEC, _TI_CYCT, _TI_WNDW, _TI_CTRL = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_TI_ALL_SECT = 0x1F
_TI_ALL = 0x3F

_MASK64 = (1 << 64) - 1


class _BadSequence(Exception):
    """A field ran past the packet's bytes (the reference's bad-sequence error)."""


def _cont_field(data: bytes, pos: int, end: int, limit: int) -> tuple[int, int]:
    """A continuation-coded field at ``pos`` (at most ``limit`` bytes, 7 bits each).

    Returns (value, bytes used); raises :class:`_BadSequence` past ``end``.
    The value keeps 32 bits, as the reference's field does.
    """
    value = 0
    i = 0
    while i < limit:
        if pos + i >= end:
            raise _BadSequence
        b = data[pos + i]
        value |= (b & 0x7F) << (7 * i)
        i += 1
        if not b & 0x80:
            break
    return value & 0xFFFFFFFF, i


def _cond_result_field(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """A conditional-result F1 payload: (key, result, bytes used) (ETMv4 ch6)."""
    key = 0
    result = 0
    shift = 0
    i = 0
    while i < 6:
        if pos + i >= end:
            raise _BadSequence
        b = data[pos + i]
        if i == 0:
            result = b & 0xF
            key = (b >> 4) & 0x7
            shift = 3
        else:
            key |= (b & 0x7F) << shift
            shift += 7
        i += 1
        if not b & 0x80:
            break
    return key & 0xFFFFFFFF, result, i


# Long address headers: (IS, 64-bit, source address).
_LONG: dict[int, tuple[int, bool, bool]] = {
    0x9A: (0, False, False),
    0x9B: (1, False, False),
    0x9D: (0, True, False),
    0x9E: (1, True, False),
    0xB6: (0, False, True),
    0xB7: (1, False, True),
    0xB8: (0, True, True),
    0xB9: (1, True, True),
}
# Address with context headers: (IS, 64-bit).
_ADDR_CTXT: dict[int, tuple[int, bool]] = {
    0x82: (0, False),
    0x83: (1, False),
    0x85: (0, True),
    0x86: (1, True),
}


def _long_address(data: bytes, p: int, isa: int, wide: bool) -> int:
    """The address field of a long address packet at ``p`` (IS0: bits [8:2] and [15:9] first)."""
    if isa == 0:
        value = ((data[p] & 0x7F) << 2) | ((data[p + 1] & 0x7F) << 9)
    else:
        value = ((data[p] & 0x7F) << 1) | (data[p + 1] << 8)
    value |= (data[p + 2] << 16) | (data[p + 3] << 24)
    if wide:
        value |= int.from_bytes(data[p + 4 : p + 8], "little") << 32
    return value


def _unsynced(win: BlockWindow, complete: bool) -> Generator[Etmv4Packet, None, int]:
    """The packets before the first A-sync; returns the window position after it (-1: none).

    Pieces run on across block boundaries: the window keeps the current piece's
    bytes when it moves to the next block, so pieces do not depend on where the
    capture layer cut the stream.
    """
    idx_of = win.index_at
    data = win.data
    n = len(data)
    pos = 0
    while True:
        if pos >= n:
            if not win.advance(n):
                return -1
            data = win.data
            n = len(data)
            pos = 0
        bstart = pos
        pkt_idx = idx_of(pos)
        state = 0  # 0 not synchronised, 1 after a 0x00 byte, 2 inside an A-sync
        typ = P.NOT_SYNC
        finished = False
        while True:
            if pos >= n:
                if not win.advance(bstart):
                    break
                pos -= bstart
                bstart = 0
                data = win.data
                n = len(data)
            b = data[pos]
            size = pos - bstart + 1
            last = pos == n - 1 and win.final
            if state == 0:
                if b == 0:
                    if size > 1:
                        if last:
                            pos += 1
                            break
                        yield NotSync(pkt_idx, data[bstart:pos])
                        bstart = pos
                    pkt_idx = idx_of(pos)
                    state = 1
                elif size >= 8:
                    if last:
                        pos += 1
                        break
                    yield NotSync(pkt_idx, data[bstart : pos + 1])
                    pkt_idx = idx_of(pos) + 1
                    bstart = pos + 1
            elif state == 1:
                if b == 0:
                    state = 2
                    typ = P.ASYNC
                else:
                    state = 0
            else:
                if b != 0:
                    if size != 12:
                        state = 0
                        typ = P.NOT_SYNC
                    else:
                        raw = data[bstart : pos + 1]
                        pos += 1
                        if b == 0x80:
                            yield Async(pkt_idx, raw)
                            return pos
                        yield BadPacket(pkt_idx, raw, P.BAD_SEQUENCE, P.ASYNC)
                        finished = True
                        break
                elif size == 12:
                    if last:
                        pos += 1
                        break
                    # the reference reports the extra leading 0x00 under the A-sync kind
                    yield NotSync(pkt_idx, data[bstart : bstart + 1], P.ASYNC)
                    bstart += 1
            pos += 1
        if not finished:
            # end of the stream inside unsynchronised bytes
            if complete and bstart < n:
                yield BadPacket(pkt_idx, data[bstart:n], P.INCOMPLETE_EOT, typ)
            return -1


def iter_packets(
    stream: Stream, config: Etmv4Config, complete: bool = True
) -> Iterator[Etmv4Packet]:
    """Read the ETMv4/ETE packets of one trace ID's stream (see the module docstring).

    The stream is read block by block (``stream.blocks()``) through a
    :class:`~cstrace.capture.window.BlockWindow`: a packet cut by the end of a
    block is read again, whole, from the start of the next window, so packets do
    not depend on block boundaries and memory does not grow with the stream.
    Within a window, one loop reads every packet, with the reader state in local
    variables.
    """
    win = BlockWindow(stream)
    if not win.advance(0):
        return
    pos = yield from _unsynced(win, complete)
    if pos < 0:
        return
    data = win.data
    n = len(data)
    rp = win.run_pos
    ri = win.run_idx
    nruns = len(rp)

    handlers, kinds = header_table(config)
    atom_fields = _ATOM_FIELDS
    new_obj = object.__new__
    raw1 = _RAW1
    is_ete = config.major_version >= 5
    m_type = config.is_m_profile
    cc_mask = (1 << config.cc_size) - 1
    commit_opt1 = config.commit_opt1
    max_spec = config.max_spec_depth
    vmid_bytes_cfg = config.vmid_size // 8
    cid_bytes_cfg = config.cid_size // 8

    # capture index bookkeeping: stream position -> Idx, by runs
    k = 0
    while k + 1 < nruns and rp[k + 1] <= pos:
        k += 1
    run_end = rp[k + 1] if k + 1 < nruns else n + 1
    delta = ri[k] - rp[k]

    # state carried across packets (the reference packet's "intra-packet" state)
    a0 = a1 = a2 = 0  # address history, newest first
    i0 = i1 = i2 = 0  # its instruction set bits
    b0 = b1 = b2 = 0  # its packet bit counts
    ctx_valid = False
    c_el = 0
    c_sf = c_ns = c_nse = False
    c_cid = c_vmid = 0
    ts = 0
    ts_valid = False
    seen_trace_info = False
    ti_info = 0
    cc_thr = 0

    while True:
        while pos < n:
            if pos >= run_end:
                while k + 1 < nruns and rp[k + 1] <= pos:
                    k += 1
                run_end = rp[k + 1] if k + 1 < nruns else n + 1
                delta = ri[k] - rp[k]
            off = pos + delta
            hdr = data[pos]
            h = handlers[hdr]

            if h == H_ATOM:
                # runs of atoms are most of the trace: stay in this loop while they last
                stop = run_end if run_end < n else n
                fields = atom_fields[hdr]
                while True:
                    # built without an __init__ call: this is the hottest line of the reader
                    pkt = new_obj(Atom)
                    pkt.offset = off
                    pkt.raw, pkt.kind, pkt.bits, pkt.count = fields  # type: ignore[misc]
                    yield pkt
                    pos += 1
                    if pos >= stop:
                        break
                    fields = atom_fields[data[pos]]
                    if fields is None:
                        break
                    off += 1
                continue

            kind = kinds[hdr]
            end = pos + 1  # exclusive end of the packet, extended by each reader below
            try:
                if h == H_ADDR_SHORT:
                    if end >= n:
                        break
                    isa = 1 if hdr in (0x96, 0xB5) else 0
                    c1 = data[end]
                    shift = 2 - isa
                    value = (c1 & 0x7F) << shift
                    nbits = 7 + shift
                    end += 1
                    if c1 & 0x80:
                        if end >= n:
                            break
                        value |= data[end] << (7 + shift)
                        nbits += 8
                        end += 1
                    mask = (1 << nbits) - 1
                    a2, i2, b2 = a1, i1, b1
                    a1, i1, b1 = a0, i0, b0
                    a0 = (a0 & ~mask) | (value & mask)
                    i0 = isa
                    b0 = nbits
                    apkt = cast(Address, new_obj(Address if hdr < 0xB0 else SourceAddress))
                    apkt.offset = off
                    apkt.raw = data[pos:end]
                    apkt.kind = kind
                    apkt.address = a0
                    apkt.isa = isa
                    apkt.pkt_bits = nbits
                    yield apkt

                elif h == H_ADDR_MATCH:
                    idx = hdr & 0x3
                    # the matched entry is copied to the front: [e_idx, e0, e1] (e2 drops out)
                    if idx == 1:
                        a0, a1, a2 = a1, a0, a1
                        i0, i1, i2 = i1, i0, i1
                        b0, b1, b2 = b1, b0, b1
                    elif idx == 2:
                        a0, a1, a2 = a2, a0, a1
                        i0, i1, i2 = i2, i0, i1
                        b0, b1, b2 = b2, b0, b1
                    else:
                        a2, i2, b2 = a1, i1, b1
                        a1, i1, b1 = a0, i0, b0
                    mpkt = cast(
                        AddressMatch, new_obj(AddressMatch if hdr < 0xB0 else SourceAddressMatch)
                    )
                    mpkt.offset = off
                    mpkt.raw = raw1[hdr]
                    mpkt.kind = kind
                    mpkt.index = idx
                    mpkt.address = a0
                    mpkt.isa = i0
                    mpkt.pkt_bits = b0
                    yield mpkt

                elif h == H_ADDR_LONG:
                    isa, wide, source = _LONG[hdr]
                    # check the length before touching the history: a packet cut by
                    # the end of a block is read again with the next one
                    end = pos + (9 if wide else 5)
                    if end > n:
                        break
                    a2, i2, b2 = a1, i1, b1
                    a1, i1, b1 = a0, i0, b0
                    if wide:
                        a0 = _long_address(data, pos + 1, isa, True)
                        b0 = 64
                    else:
                        if isa:
                            value = ((data[pos + 1] & 0x7F) << 1) | (data[pos + 2] << 8)
                        else:
                            value = ((data[pos + 1] & 0x7F) << 2) | ((data[pos + 2] & 0x7F) << 9)
                        value |= (data[pos + 3] << 16) | (data[pos + 4] << 24)
                        if ctx_valid and c_sf:
                            a0 = (a0 & ~0xFFFFFFFF) | value
                        else:
                            a0 = value
                        b0 = 32
                    i0 = isa
                    lpkt = cast(Address, new_obj(SourceAddress if source else Address))
                    lpkt.offset = off
                    lpkt.raw = data[pos:end]
                    lpkt.kind = kind
                    lpkt.address = a0
                    lpkt.isa = isa
                    lpkt.pkt_bits = b0
                    yield lpkt

                elif h == H_CCNT_F3:
                    commit = None if commit_opt1 else ((hdr >> 2) & 0x3) + 1
                    yield CycleCount(off, raw1[hdr], kind, cc_thr + (hdr & 0x3), commit)

                elif h == H_CCNT_F2:
                    if end >= n:
                        break
                    c1 = data[end]
                    end += 1
                    base = (max_spec - 15) if c1 & 0x1 else 1
                    commit = ((c1 >> 4) & 0xF) + base
                    yield CycleCount(off, data[pos:end], kind, cc_thr + (c1 & 0xF), commit)

                elif h == H_NO_PAYLOAD:
                    yield _SIMPLE[kind](off, raw1[hdr])

                elif h == H_EXCEPT:
                    if end >= n:
                        break
                    c1 = data[end]
                    size = 3
                    if not c1 & 0x80:
                        size = 2
                    if is_ete and ((c1 >> 1) & 0x1F) in (0x0, 0x18):
                        size = 3
                    end = pos + size
                    if end > n:
                        break
                    etype = (c1 >> 1) & 0x1F
                    interp = ((c1 & 0x40) >> 5) | (c1 & 0x1)
                    fault = False
                    if c1 & 0x80:
                        c2 = data[pos + 2]
                        etype |= (c2 & 0x1F) << 5
                        fault = bool((c2 >> 5) & 0x1)
                    ekind = P.EXCEPT
                    if is_ete and etype in (0x0, 0x18):
                        # PE reset / transaction failure: the address history gets 0 (64-bit IS0)
                        a2, i2, b2 = a1, i1, b1
                        a1, i1, b1 = a0, i0, b0
                        a0, i0, b0 = 0, 0, 64
                        ekind = P.TRANS_FAIL if etype == 0x18 else P.PE_RESET
                    yield Exception_(off, data[pos:end], ekind, etype, interp, fault, m_type)

                elif h == H_TIMESTAMP:
                    has_cc = hdr & 0x1
                    q = end
                    tsb = 0
                    ts_done = False
                    while q < n:
                        c = data[q]
                        q += 1
                        tsb += 1
                        if tsb == 9 or not c & 0x80:
                            ts_done = True
                            break
                    if not ts_done:
                        end = n
                        break
                    ts_end = q
                    if has_cc:
                        while q < n and data[q] & 0x80:
                            q += 1
                        if q >= n:
                            end = n
                            break
                        q += 1
                    end = q
                    value = 0
                    for i in range(tsb):
                        c = data[pos + 1 + i]
                        value |= (c if i == 8 else c & 0x7F) << (7 * i)
                    ts_bits = tsb * 7 if tsb < 9 else 64
                    if not ts_valid and seen_trace_info:
                        ts_bits = 64
                    mask = (1 << ts_bits) - 1
                    ts = ((ts & ~mask) | (value & mask)) & _MASK64
                    ts_valid = True
                    cc: int | None = None
                    if has_cc:
                        cc, _ = _cont_field(data, ts_end, end, 3)
                        cc &= cc_mask
                    yield Timestamp(off, data[pos:end], ts, ts_bits, cc)

                elif h == H_TRACE_INFO:
                    if end >= n:
                        break
                    ctrl = data[end]
                    end += 1
                    sect = (~ctrl) & _TI_ALL_SECT
                    if not ctrl & 0x80:
                        sect |= _TI_CTRL
                    ctrl_bytes = 1
                    while sect != _TI_ALL:
                        if end >= n:
                            break
                        c = data[end]
                        end += 1
                        done = not c & 0x80
                        if not sect & _TI_CTRL:
                            if done:
                                sect |= _TI_CTRL
                            ctrl_bytes += 1
                        elif not sect & _TI_INFO:
                            if done:
                                sect |= _TI_INFO
                        elif not sect & _TI_KEY:
                            if done:
                                sect |= _TI_KEY
                        elif not sect & _TI_SPEC:
                            if done:
                                sect |= _TI_SPEC
                        elif not sect & _TI_CYCT:
                            if done:
                                sect |= _TI_CYCT
                        elif done:
                            sect |= _TI_WNDW
                    if sect != _TI_ALL:
                        break
                    present = ctrl & _TI_ALL_SECT
                    q = pos + 1 + ctrl_bytes
                    key = spec = cyct = None
                    if present & _TI_INFO and q < end:
                        ti_info, used = _cont_field(data, q, end, 5)
                        q += used
                    if present & _TI_KEY and q < end:
                        key, used = _cont_field(data, q, end, 5)
                        q += used
                    if present & _TI_SPEC and q < end:
                        spec, used = _cont_field(data, q, end, 5)
                        q += used
                    if present & _TI_CYCT and q < end:
                        cyct, used = _cont_field(data, q, end, 5)
                        q += used
                    if present & _TI_WNDW and q < end:
                        _cont_field(data, q, end, 5)  # commit window: read, unused
                    ts_valid = False
                    cc_thr = 0 if cyct is None else cyct
                    yield TraceInfo(
                        off, data[pos:end], ti_info, key, spec, cyct, not seen_trace_info
                    )
                    seen_trace_info = True

                elif h == H_CTXT:
                    if hdr == 0x80:
                        ctx_valid = True
                        yield Context(
                            off,
                            raw1[hdr],
                            False,
                            c_el,
                            c_sf,
                            c_ns,
                            c_nse,
                            c_cid,
                            c_vmid,
                            False,
                            False,
                        )
                    else:
                        if end >= n:
                            break
                        info = data[end]
                        end += 1
                        nv = nc = 0
                        if info & 0xC0:
                            nv = vmid_bytes_cfg if info & 0x40 else 0
                            nc = cid_bytes_cfg if info & 0x80 else 0
                            end += max(1, nv + nc)
                            if end > n:
                                end = n
                                break
                        ctx_valid = True
                        c_el = info & 0x3
                        c_sf = bool(info & 0x10)
                        c_ns = bool(info & 0x20)
                        c_nse = bool(info & 0x08)
                        q = pos + 2
                        if nv:
                            c_vmid = int.from_bytes(data[q : q + nv], "little")
                            q += nv
                        if nc:
                            c_cid = int.from_bytes(data[q : q + nc], "little")
                        yield Context(
                            off,
                            data[pos:end],
                            True,
                            c_el,
                            c_sf,
                            c_ns,
                            c_nse,
                            c_cid,
                            c_vmid,
                            nc > 0,
                            nv > 0,
                        )

                elif h == H_ADDR_CTXT:
                    isa, wide = _ADDR_CTXT[hdr]
                    q = pos + (9 if wide else 5)
                    if q >= n:
                        end = n
                        break
                    info = data[q]
                    nv = vmid_bytes_cfg if info & 0x40 else 0
                    nc = cid_bytes_cfg if info & 0x80 else 0
                    end = q + 1 + nv + nc
                    if end > n:
                        end = n
                        break
                    value = _long_address(data, pos + 1, isa, wide)
                    a2, i2, b2 = a1, i1, b1
                    a1, i1, b1 = a0, i0, b0
                    if wide:
                        a0 = value
                        b0 = 64
                    else:
                        if not (ctx_valid and c_sf):
                            a0 &= 0xFFFFFFFF
                        a0 = (a0 & ~0xFFFFFFFF) | value
                        b0 = 32
                    i0 = isa
                    ctx_valid = True
                    c_el = info & 0x3
                    c_sf = bool(info & 0x10)
                    c_ns = bool(info & 0x20)
                    c_nse = bool(info & 0x08)
                    q += 1
                    if nv:
                        c_vmid = int.from_bytes(data[q : q + nv], "little")
                        q += nv
                    if nc:
                        c_cid = int.from_bytes(data[q : q + nc], "little")
                    yield AddressContext(
                        off,
                        data[pos:end],
                        kind,
                        a0,
                        isa,
                        b0,
                        c_el,
                        c_sf,
                        c_ns,
                        c_nse,
                        c_cid,
                        c_vmid,
                        nc > 0,
                        nv > 0,
                    )

                elif h == H_EXTENSION:
                    if end >= n:
                        break
                    c1 = data[end]
                    end += 1
                    if c1 == 0x03:
                        yield Discard(off, data[pos:end])
                    elif c1 == 0x05:
                        yield Overflow(off, data[pos:end])
                    elif c1 == 0x00:
                        kind = P.ASYNC
                        async_done = False
                        while end < n:
                            c = data[end]
                            end += 1
                            size = end - pos
                            if c != 0:
                                if size == 12 and c == 0x80:
                                    yield Async(off, data[pos:end])
                                else:
                                    yield BadPacket(off, data[pos:end], P.BAD_SEQUENCE, P.ASYNC)
                                async_done = True
                                break
                            if size == 12:
                                yield BadPacket(off, data[pos:end], P.BAD_SEQUENCE, P.ASYNC)
                                async_done = True
                                break
                        if not async_done:
                            break
                    else:
                        yield BadPacket(off, data[pos:end], P.BAD_SEQUENCE, P.EXTENSION)

                elif h == H_SPEC_FIELD:
                    while end < n and data[end] & 0x80:
                        end += 1
                    if end >= n:
                        end = n
                        break
                    end += 1
                    value, _ = _cont_field(data, pos + 1, end, 5)
                    if kind == P.COMMIT:
                        yield Commit(off, data[pos:end], value)
                    else:
                        yield Cancel(off, data[pos:end], kind, value)

                elif h == H_MISPREDICT:
                    sel = hdr & 0x3
                    abits, acount = ((0, 0), (1, 1), (3, 2), (0, 1))[sel]
                    if kind == P.MISPREDICT:
                        yield Mispredict(off, raw1[hdr], abits, acount)
                    else:
                        yield Cancel(off, raw1[hdr], kind, 1, abits, acount)

                elif h == H_CANCEL_F3:
                    yield Cancel(off, raw1[hdr], kind, ((hdr >> 1) & 0x3) + 2, hdr & 0x1, hdr & 0x1)

                elif h == H_CCNT_F1:
                    has_count = not hdr & 0x1
                    commit_done = commit_opt1
                    count_done = not has_count
                    while not (commit_done and count_done):
                        if end >= n:
                            break
                        c = data[end]
                        end += 1
                        if not commit_done:
                            commit_done = not c & 0x80
                        else:
                            count_done = not c & 0x80
                    if not (commit_done and count_done):
                        break
                    q = pos + 1
                    commit = None
                    if not commit_opt1:
                        commit, used = _cont_field(data, q, end, 5)
                        q += used
                    if has_count:
                        count, _ = _cont_field(data, q, end, 3)
                        yield CycleCount(off, data[pos:end], kind, count + cc_thr, commit)
                    else:
                        yield CycleCount(off, data[pos:end], kind, 0, commit, True)

                elif h == H_EVENT:
                    yield Event(off, raw1[hdr], hdr & 0xF)

                elif h == H_Q:
                    qtype = hdr & 0xF
                    has_addr = addr_match = False
                    addr_short = True
                    q_is = 1
                    nab = 0
                    count_done = False
                    if qtype <= 2:
                        has_addr = addr_match = True
                    elif qtype == 0x5 or qtype == 0x6:
                        has_addr = True
                        nab = 2
                        q_is = 0 if qtype == 0x5 else 1
                    elif qtype == 0xA or qtype == 0xB:
                        has_addr = True
                        addr_short = False
                        nab = 4
                        q_is = 0 if qtype == 0xA else 1
                    elif qtype == 0xF:
                        count_done = True
                    while nab > 0 or not count_done:
                        if end >= n:
                            break
                        c = data[end]
                        end += 1
                        if nab > 0:
                            if addr_short and nab == 2 and not c & 0x80:
                                nab -= 1
                            nab -= 1
                        else:
                            count_done = not c & 0x80
                    if nab > 0 or not count_done:
                        break
                    q = pos + 1
                    qidx = 0
                    if has_addr:
                        if addr_match:
                            qidx = qtype & 0x3
                            if qidx == 1:
                                a0, a1, a2 = a1, a0, a1
                                i0, i1, i2 = i1, i0, i1
                                b0, b1, b2 = b1, b0, b1
                            elif qidx == 2:
                                a0, a1, a2 = a2, a0, a1
                                i0, i1, i2 = i2, i0, i1
                                b0, b1, b2 = b2, b0, b1
                            else:
                                a2, i2, b2 = a1, i1, b1
                                a1, i1, b1 = a0, i0, b0
                        else:
                            a2, i2, b2 = a1, i1, b1
                            a1, i1, b1 = a0, i0, b0
                            if addr_short:
                                c1 = data[q]
                                shift = 2 - q_is
                                value = (c1 & 0x7F) << shift
                                nbits = 7 + shift
                                q += 1
                                if c1 & 0x80:
                                    value |= data[q] << (7 + shift)
                                    nbits += 8
                                    q += 1
                                mask = (1 << nbits) - 1
                                a0 = (a0 & ~mask) | (value & mask)
                                b0 = nbits
                            else:
                                value = _long_address(data, q, q_is, False)
                                q += 4
                                if not (ctx_valid and c_sf):
                                    a0 &= 0xFFFFFFFF
                                a0 = (a0 & ~0xFFFFFFFF) | value
                                b0 = 32
                            i0 = q_is
                    qcount: int | None = None
                    if qtype != 0xF:
                        qcount, _ = _cont_field(data, q, end, 5)
                    yield Q(
                        off, data[pos:end], qtype, qcount, has_addr, addr_match, qidx, a0, i0, b0
                    )

                elif h == H_RESERVED:
                    yield BadPacket(off, raw1[hdr], P.RESERVED, kind)

                elif h == H_RESERVED_CFG:
                    yield BadPacket(off, raw1[hdr], P.RESERVED_CFG, kind)

                elif h == H_DSM:
                    yield DataSyncMarker(off, raw1[hdr], kind, hdr & 0x7)

                elif h == H_ITE:
                    end = pos + 10
                    if end > n:
                        break
                    value = int.from_bytes(data[pos + 2 : end], "little")
                    yield Instrumentation(off, data[pos:end], data[pos + 1], value)

                elif h == H_COND_INSTR:
                    if kind == P.COND_I_F2:
                        sel = hdr & 0x3
                        num = 2 if sel == 2 else 1
                        yield CondInstr(off, raw1[hdr], kind, 0, num, sel != 1)
                    elif kind == P.COND_I_F3:
                        if end >= n:
                            break
                        c1 = data[end]
                        end += 1
                        num = ((c1 >> 1) & 0x3F) + (c1 & 0x1)
                        yield CondInstr(off, data[pos:end], kind, 0, num, False, bool(c1 & 0x1))
                    else:
                        while end < n and data[end] & 0x80:
                            end += 1
                        if end >= n:
                            end = n
                            break
                        end += 1
                        ckey, _ = _cont_field(data, pos + 1, end, 5)
                        yield CondInstr(off, data[pos:end], kind, ckey)

                elif h == H_COND_RESULT:
                    if kind == P.COND_RES_F2:
                        yield CondResult(
                            off, raw1[hdr], kind, key_incr=2 if hdr & 0x4 else 1, token=hdr & 0x3
                        )
                    elif kind == P.COND_RES_F4:
                        yield CondResult(off, raw1[hdr], kind, token=hdr & 0x3)
                    elif kind == P.COND_RES_F3:
                        if end >= n:
                            break
                        end += 1
                        tokens = data[pos + 1] | ((hdr & 0xF) << 8)
                        yield CondResult(off, data[pos:end], kind, tokens=tokens)
                    else:
                        two = (hdr & 0xFC) != 0x6C
                        p1 = False
                        p2 = not two
                        while not (p1 and p2):
                            if end >= n:
                                break
                            c = data[end]
                            end += 1
                            if not p1:
                                p1 = not c & 0x80
                            else:
                                p2 = not c & 0x80
                        if not (p1 and p2):
                            break
                        key0, res0, used = _cond_result_field(data, pos + 1, end)
                        results = [(key0, res0, hdr & 0x1)]
                        if two:
                            key1, res1, _ = _cond_result_field(data, pos + 1 + used, end)
                            results.append((key1, res1, (hdr >> 1) & 0x1))
                        yield CondResult(off, data[pos:end], kind, results=tuple(results))

                else:  # pragma: no cover - every handler code is listed above
                    raise AssertionError(f"no reader for handler {h}")
            except _BadSequence:
                yield BadPacket(off, data[pos:end], P.BAD_SEQUENCE, kind)
            pos = end
        # The window is used up (pos == n), or the packet at ``pos`` is cut by its
        # end: keep that packet's bytes and read it again with the next block.
        if not win.advance(pos):
            if pos < n and complete:
                yield BadPacket(off, data[pos:n], P.INCOMPLETE_EOT, kind)
            return
        data = win.data
        n = len(data)
        rp = win.run_pos
        ri = win.run_idx
        nruns = len(rp)
        pos = k = 0
        run_end = rp[1] if nruns > 1 else n + 1
        delta = ri[0] - rp[0]
