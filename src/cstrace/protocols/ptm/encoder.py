"""PTM packet encoder: packet field values → PFT packet bytes.

Input: the fields of one packet (address, ISA, atoms, cycle count...); output:
its bytes, as a PTM would emit them (ARM IHI 0035B §4.5). The inverse of
:mod:`cstrace.protocols.ptm.reader`, used by the round-trip tests and to craft
trace for experiments. Nothing here is needed to decode trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from cstrace.elements import Isa
from cstrace.protocols.ptm.packets import ISyncReason

__all__ = [
    "encode_async",
    "encode_atom_ca",
    "encode_atoms",
    "encode_branch",
    "encode_context_id",
    "encode_cycle_count",
    "encode_exception_return",
    "encode_ignore",
    "encode_isync",
    "encode_timestamp",
    "encode_trigger",
    "encode_vmid",
    "encode_waypoint_update",
]


def encode_cycle_count(value: int, first: int = 0) -> bytes:
    """A cycle count field: 4 bits in bits [5:2] of the first byte (bit 6 = more),
    then 7 bits a byte (bit 7 = more), at most 5 bytes (32 bits).

    ``first`` supplies the other bits of the first byte (an atom header's).
    """
    value &= 0xFFFFFFFF
    out = bytearray()
    rest = value >> 4
    out.append(first | ((value & 0xF) << 2) | (0x40 if rest else 0))
    while rest:
        chunk = rest & 0x7F
        rest >>= 7
        if len(out) == 4:
            out.append((chunk | (rest << 7)) & 0xFF)
            break
        out.append(chunk | (0x80 if rest else 0))
    return bytes(out)


def encode_async(extra_zeros: int = 0) -> bytes:
    """A-sync: five (or more) 0x00 bytes then 0x80."""
    return bytes(5 + extra_zeros) + b"\x80"


def encode_isync(
    address: int,
    isa: Isa,
    reason: ISyncReason = ISyncReason.TRACE_ON,
    *,
    ns: bool = False,
    hyp: bool = False,
    cycle_count: int | None = None,
    context_id: int | None = None,
    ctxt_id_bytes: int = 0,
) -> bytes:
    """I-sync (IHI 0035B §4.5.2). Give ``cycle_count`` only when the PTM is cycle
    accurate and ``reason`` is not periodic; ``ctxt_id_bytes`` as configured."""
    thumb = isa in (Isa.T32, Isa.TEE)
    info = (int(reason) << 5) | (0x08 if ns else 0) | (0x04 if isa == Isa.TEE else 0)
    info |= 0x02 if hyp else 0
    out = bytearray(
        [
            0x08,
            (address & 0xFE) | (1 if thumb else 0),
            (address >> 8) & 0xFF,
            (address >> 16) & 0xFF,
            (address >> 24) & 0xFF,
            info,
        ]
    )
    if cycle_count is not None:
        out += encode_cycle_count(cycle_count)
    if ctxt_id_bytes:
        out += ((context_id or 0) & ((1 << (8 * ctxt_id_bytes)) - 1)).to_bytes(
            ctxt_id_bytes, "little"
        )
    return bytes(out)


def encode_atoms(atoms: Sequence[bool]) -> bytes:
    """A non-cycle-accurate atom packet of 1 to 5 atoms (True = E), in decode order."""
    n = len(atoms)
    if not 1 <= n <= 5:
        raise ValueError("an atom packet holds 1 to 5 atoms")
    header = (0x80, 0x88, 0x90, 0xA0, 0xC0)[n - 1]
    for i, executed in enumerate(atoms):
        if not executed:
            header |= 1 << (n - i)
    return bytes([header])


def encode_atom_ca(executed: bool, cycle_count: int) -> bytes:
    """A cycle-accurate atom packet: one atom and its cycle count."""
    return encode_cycle_count(cycle_count, 0x80 | (0 if executed else 0x02))


def _address_bytes(address: int, isa: Isa, nbytes: int, more_after: bool) -> bytearray:
    """The address section of a branch address or waypoint update packet.

    The first byte holds its bits in [6:1] (bit 7 = more, bit 0 left 0); a
    final byte before the fifth has 6 bits and bit 6 = ``more_after``; the fifth
    byte has the top bits and the instruction set (bits [5:4]: 00 ARM, 01 Thumb,
    1x Jazelle) and bit 6 = ``more_after``.
    """
    if isa == Isa.A32:
        first, base = (address >> 1) & 0x7E, 1
    elif isa == Isa.JAZELLE:
        first, base = (address << 1) & 0x7E, -1
    else:
        first, base = address & 0x7E, 0
    out = bytearray([first])
    for i in range(1, nbytes):
        part = address >> (7 * i + base)
        if i == 4:
            if isa == Isa.JAZELLE:
                b = 0x20 | (part & 0x1F)
            elif isa == Isa.A32:
                b = part & 0x07
            else:
                b = 0x10 | (part & 0x0F)
            out.append(b | (0x40 if more_after else 0))
        elif i == nbytes - 1:
            out.append((part & 0x3F) | (0x40 if more_after else 0))
        else:
            out.append(part & 0x7F)
    for i in range(nbytes - 1):
        out[i] |= 0x80
    return out


def encode_branch(
    address: int,
    isa: Isa,
    nbytes: int = 5,
    *,
    exception: int | None = None,
    ns: bool = False,
    hyp: bool | None = None,
    alt_isa: bool = False,
    cycle_count: int | None = None,
) -> bytes:
    """A branch address packet with ``nbytes`` (1-5) address bytes.

    Only 5 address bytes carry the instruction set; fewer keep the previous one
    and update the low address bits only. Exception information needs at least
    2 address bytes; ``hyp`` (not None) adds the second exception byte, which
    also carries bits [8:4] of the exception number.
    """
    if exception is not None and nbytes < 2:
        raise ValueError("exception information needs at least 2 address bytes")
    out = _address_bytes(address, isa, nbytes, exception is not None)
    out[0] |= 0x01
    if exception is not None:
        two = hyp is not None or exception > 0xF
        e1 = ((exception & 0xF) << 1) | (1 if ns else 0) | (0x40 if alt_isa else 0)
        out.append(e1 | (0x80 if two else 0))
        if two:
            out.append(((exception >> 4) & 0x1F) | (0x20 if hyp else 0))
    if cycle_count is not None:
        out += encode_cycle_count(cycle_count)
    return bytes(out)


def encode_waypoint_update(
    address: int, isa: Isa, nbytes: int = 5, *, alt_isa: bool | None = None
) -> bytes:
    """A waypoint update packet; ``alt_isa`` (not None, 5 address bytes) adds the info byte."""
    more = alt_isa is not None and nbytes == 5
    out = bytearray([0x72]) + _address_bytes(address, isa, nbytes, more)
    if more:
        out.append(0x40 if alt_isa else 0)
    return bytes(out)


def encode_timestamp(
    value: int, *, ts_64bit: bool = False, nbytes: int | None = None, cycle_count: int | None = None
) -> bytes:
    """A timestamp packet: the low ``7 * nbytes`` bits (all of them by default)."""
    max_bytes = 9 if ts_64bit else 7
    if nbytes is None:
        nbytes = max_bytes
        while nbytes > 1 and value >> (7 * (nbytes - 1)) == 0:
            nbytes -= 1
    out = bytearray([0x42])
    for i in range(nbytes):
        chunk = (value >> (7 * i)) & 0x7F
        if i == max_bytes - 1:
            chunk = (value >> (7 * i)) & (0xFF if ts_64bit else 0x3F)
            out.append(chunk)
            break
        out.append(chunk | (0x80 if i < nbytes - 1 else 0))
    if cycle_count is not None:
        out += encode_cycle_count(cycle_count)
    return bytes(out)


def encode_context_id(context_id: int, nbytes: int) -> bytes:
    """A context ID packet with ``nbytes`` (as configured) of context ID."""
    return b"\x6e" + (context_id & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little")


def encode_vmid(vmid: int) -> bytes:
    """A VMID packet."""
    return bytes([0x3C, vmid & 0xFF])


def encode_trigger() -> bytes:
    """A trigger packet."""
    return b"\x0c"


def encode_exception_return() -> bytes:
    """An exception return packet."""
    return b"\x76"


def encode_ignore() -> bytes:
    """An ignore packet."""
    return b"\x66"
