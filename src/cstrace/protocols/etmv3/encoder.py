"""ETMv3 packet encoder: packet fields → bytes, for tests and trace synthesis.

Input: the fields of one packet (and, for compressed branch addresses, the
previous address); output: the bytes of the packet in the ETMv3 signal protocol
(ARM IHI 0014Q chapter 7). :mod:`cstrace.protocols.etmv3.reader` reads them
back to the same fields.
"""

from __future__ import annotations

from cstrace.elements import Isa

__all__ = [
    "encode_async",
    "encode_branch",
    "encode_context_id",
    "encode_cycle_count",
    "encode_isync",
    "encode_phdr",
    "encode_timestamp",
    "encode_vmid",
]

_SHIFT = {Isa.A32: 2, Isa.T32: 1, Isa.TEE: 1, Isa.JAZELLE: 0}


def encode_async() -> bytes:
    """An A-sync packet: five zeros then 0x80 (§7.4.1)."""
    return b"\x00\x00\x00\x00\x00\x80"


def _continued(value: int, count: int, bits: int = 7) -> list[int]:
    out = []
    for i in range(count):
        b = (value >> (bits * i)) & ((1 << bits) - 1)
        if i < count - 1:
            b |= 0x80
        out.append(b)
    return out


def encode_cycle_count(count: int) -> bytes:
    """A cycle count packet (§7.3.2): 7 bits per byte, at most 32 bits."""
    count &= 0xFFFFFFFF
    n = 1
    while n < 5 and count >> (7 * n):
        n += 1
    return bytes([0x04, *_continued(count, n)])


def encode_timestamp(timestamp: int, ts64: bool = True, *, header: int = 0x42) -> bytes:
    """A timestamp packet: 7 bits per byte, the last possible byte holding the rest."""
    max_bytes = 9 if ts64 else 7
    n = 1
    while n < max_bytes and timestamp >> (7 * n):
        n += 1
    out = [header]
    for i in range(n):
        if i == max_bytes - 1:
            b = (timestamp >> (7 * i)) & (0xFF if ts64 else 0x3F)
        else:
            b = (timestamp >> (7 * i)) & 0x7F
            if i < n - 1:
                b |= 0x80
        out.append(b)
    return bytes(out)


def encode_context_id(context_id: int, size: int) -> bytes:
    """A context ID packet with ``size`` (1, 2 or 4) bytes of context ID."""
    return bytes([0x6E]) + (context_id & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def encode_vmid(vmid: int) -> bytes:
    """A VMID packet."""
    return bytes([0x3C, vmid & 0xFF])


def encode_isync(
    address: int,
    isa: Isa,
    *,
    reason: int = 0,
    ns: bool = False,
    hyp: bool = False,
    context_id: int = 0,
    ctxt_bytes: int = 0,
    cycle_count: int | None = None,
) -> bytes:
    """An I-sync packet (§7.4.2); with ``cycle_count`` the 0x70 form."""
    out: list[int] = []
    if cycle_count is None:
        out.append(0x08)
    else:
        out.append(0x70)
        cycle_count &= 0xFFFFFFFF
        n = 1
        while n < 5 and cycle_count >> (7 * n):
            n += 1
        out += _continued(cycle_count, n)
    if ctxt_bytes:
        out += list((context_id & ((1 << (8 * ctxt_bytes)) - 1)).to_bytes(ctxt_bytes, "little"))
    info = (reason & 3) << 5
    if isa == Isa.JAZELLE:
        info |= 0x10
    if isa == Isa.TEE:
        info |= 0x04
    if ns:
        info |= 0x08
    if hyp:
        info |= 0x02
    out.append(info)
    a = address & ~1
    if isa in (Isa.T32, Isa.TEE):
        a |= 1
    out += list((a & 0xFFFFFFFF).to_bytes(4, "little"))
    return bytes(out)


def encode_phdr(atoms: str, cycle_accurate: bool = False) -> bytes:
    """One P-header for an atom string such as ``"EEEN"``, ``"NE"``, ``"WWE"`` or ``"WEWE"``.

    Without cycle accuracy: up to 15 E then at most one N (format 1), or two
    atoms (format 2). Cycle-accurate: ``W``/``WE``/``WN`` runs (format 1),
    ``W`` + two atoms (format 2), 1-8 W then an optional E (format 3) or one
    atom without W (format 4). Raises ValueError for other strings.
    """
    if not cycle_accurate:
        e = len(atoms) - len(atoms.lstrip("E"))
        rest = atoms[e:]
        if rest in ("", "N") and e <= 15:
            return bytes([0x80 | (e << 2) | (0x40 if rest else 0)])
        if len(atoms) == 2 and set(atoms) <= {"E", "N"}:
            return bytes([0x82 | (8 if atoms[0] == "N" else 0) | (4 if atoms[1] == "N" else 0)])
        raise ValueError(f"atoms {atoms!r} do not fit one P-header")
    if len(atoms) == 1 and atoms in "EN":
        return bytes([0x92 | (4 if atoms == "N" else 0)])
    if len(atoms) == 3 and atoms[0] == "W" and set(atoms[1:]) <= {"E", "N"}:
        return bytes([0x82 | (8 if atoms[1] == "N" else 0) | (4 if atoms[2] == "N" else 0)])
    ws = len(atoms) - len(atoms.lstrip("W"))
    tail = atoms[ws:]
    if 1 <= ws <= 8 and tail in ("", "E"):
        return bytes([0xA0 | ((ws - 1) << 2) | (0x40 if tail else 0)])
    pairs = [atoms[i : i + 2] for i in range(0, len(atoms), 2)]
    if pairs and all(p in ("WE", "WN") for p in pairs):
        e = 0
        while e < len(pairs) and pairs[e] == "WE":
            e += 1
        n = len(pairs) - e
        if e <= 7 and n <= 1 and e + n > 0:
            return bytes([0x80 | (e << 2) | (0x40 if n else 0)])
    raise ValueError(f"atoms {atoms!r} do not fit one cycle-accurate P-header")


def encode_branch(
    address: int,
    isa: Isa,
    previous: int | None = None,
    *,
    alt: bool = False,
    full: bool = False,
    exception: int | None = None,
    ns: bool = False,
    cancel: bool = False,
    hyp: bool | None = None,
) -> bytes:
    """A branch address packet (§7.3.3).

    Compressed against ``previous`` (the address the reader holds) unless
    ``full``, an exception is given or ``previous`` is None; a full packet
    carries the instruction set. ``alt`` selects the alternative encoding
    (ETMv3.4+). Exception information bytes (security state, exception number
    0-15, cancel flag, optional Hyp byte) follow the address when ``exception``
    is not None.
    """
    shift = _SHIFT.get(isa, 2)
    value = (address & 0xFFFFFFFF) >> shift
    exc: list[int] = []
    if exception is not None:
        e0 = (1 if ns else 0) | ((exception & 0xF) << 1) | (0x20 if cancel else 0)
        if isa == Isa.TEE:
            e0 |= 0x40
        if hyp is not None:
            exc = [e0 | 0x80, 0x20 if hyp else 0]
        else:
            exc = [e0]
    if previous is not None and not full and exception is None:
        prev = (previous & 0xFFFFFFFF) >> shift
        for n, bits in ((1, 6), (2, 13), (3, 20), (4, 27)):
            if alt and n > 1:
                bits -= 1  # the last byte carries 6 bits
            if value >> bits == prev >> bits:
                out = []
                done = 0
                for i in range(n):
                    width = 6 if i == 0 or (alt and i == n - 1) else 7
                    b = (value >> done) & ((1 << width) - 1)
                    done += width
                    if i == 0:
                        b = (b << 1) | 1
                    if i < n - 1:
                        b |= 0x80
                    out.append(b)
                return bytes(out)
    out = [((value & 0x3F) << 1) | 0x81]
    out += [((value >> (6 + 7 * i)) & 0x7F) | 0x80 for i in range(3)]
    top = value >> 27
    if isa == Isa.A32:
        last = 0x08 | (top & 0x7)
    elif isa in (Isa.T32, Isa.TEE):
        last = 0x10 | (top & 0xF)
    else:
        last = 0x20 | (top & 0x1F)
    if exc:
        last |= 0x40
    return bytes([*out, last, *exc])
