"""ETMv4 / ETE packet encoder: field values → packet bytes, for tests and synthetic trace.

Input: the fields of one packet (addresses, counts, atoms ...); output: its
bytes, laid out as in the ETE packet descriptions of the Arm ARM (chapter D5)
and the ETMv4 specification (IHI0064, chapter 6). The inverse of
:mod:`cstrace.protocols.etmv4.reader` for well-formed trace: reading the
concatenated output of these functions gives back the fields.

Each function returns ``bytes``; a stream is their concatenation, normally
starting with :func:`a_sync` and :func:`trace_info`. Compressed forms (short
addresses, exact match) are the caller's choice: :class:`AddressEncoder`
picks the shortest form as a trace unit would.
"""

from __future__ import annotations

__all__ = [
    "AddressEncoder",
    "a_sync",
    "address_context",
    "address_long",
    "address_short",
    "atom",
    "cancel_f1",
    "cancel_f2",
    "cancel_f3",
    "commit",
    "cont_field",
    "context",
    "context_same",
    "cycle_count_f1",
    "cycle_count_f2",
    "cycle_count_f3",
    "discard",
    "event",
    "exact_match",
    "exception",
    "exception_return",
    "ignore",
    "instrumentation",
    "mispredict",
    "overflow",
    "q",
    "source_address_long",
    "source_address_short",
    "source_exact_match",
    "timestamp",
    "timestamp_marker",
    "trace_info",
    "trace_on",
    "trans_commit",
    "trans_start",
]


def cont_field(value: int, max_bytes: int = 9) -> bytes:
    """A continuation-coded field: 7 bits a byte, low bits first, bit 7 set on all but the last."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value and len(out) + 1 < max_bytes:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def a_sync() -> bytes:
    """Alignment synchronisation: eleven 0x00 bytes then 0x80."""
    return bytes(11) + b"\x80"


def discard() -> bytes:
    """Discard (extension packet 0x00 0x03)."""
    return b"\x00\x03"


def overflow() -> bytes:
    """Overflow (extension packet 0x00 0x05)."""
    return b"\x00\x05"


def trace_info(
    info: int | None = 0,
    p0_key: int | None = None,
    spec_depth: int | None = None,
    cc_threshold: int | None = None,
) -> bytes:
    """Trace info with the sections that are not None (one PLCTL byte)."""
    present = 0
    body = b""
    for bit, value in ((0x1, info), (0x2, p0_key), (0x4, spec_depth), (0x8, cc_threshold)):
        if value is not None:
            present |= bit
            body += cont_field(value, 5)
    return bytes((0x01, present)) + body


def trace_on() -> bytes:
    """Trace on."""
    return b"\x04"


def timestamp(value: int, nbytes: int | None = None, cycle_count: int | None = None) -> bytes:
    """Timestamp: the low ``7 * nbytes`` bits of ``value`` (9 bytes carry all 64 bits).

    ``nbytes`` defaults to the fewest bytes that hold ``value``.
    """
    if nbytes is None:
        nbytes = max(1, min(9, (value.bit_length() + 6) // 7))
        if value.bit_length() > 56:
            nbytes = 9
    out = bytearray()
    for i in range(nbytes):
        if i == 8:
            out.append((value >> 56) & 0xFF)
            break
        b = (value >> (7 * i)) & 0x7F
        out.append(b | (0x80 if i < nbytes - 1 else 0))
    header = 0x02
    if cycle_count is not None:
        header |= 0x1
        out += cont_field(cycle_count, 3)
    return bytes((header,)) + bytes(out)


def timestamp_marker() -> bytes:
    """Timestamp marker (ETE 1.1)."""
    return b"\x88"


def exception(exception_type: int, addr_interp: int = 1, m_fault_pending: bool = False) -> bytes:
    """Exception: type (5 bits, or 10 with the extension byte) and address interpretation."""
    b1 = ((exception_type & 0x1F) << 1) | (addr_interp & 0x1) | ((addr_interp & 0x2) << 5)
    if exception_type > 0x1F or m_fault_pending:
        b2 = ((exception_type >> 5) & 0x1F) | (0x20 if m_fault_pending else 0)
        return bytes((0x06, b1 | 0x80, b2))
    return bytes((0x06, b1))


def exception_return() -> bytes:
    """Exception return (ETMv4)."""
    return b"\x07"


def cycle_count_f1(count: int | None, commit: int | None = None) -> bytes:
    """Cycle count format 1: optional commit field (absent under COMMOPT=1), count or unknown."""
    out = bytes((0x0E if count is not None else 0x0F,))
    if commit is not None:
        out += cont_field(commit, 5)
    if count is not None:
        out += cont_field(count, 3)
    return out


def cycle_count_f2(count: int, commit: int, max_spec: int | None = None) -> bytes:
    """Cycle count format 2: 4-bit count above the threshold and a commit.

    Without ``max_spec`` the small form (header bit 0 clear) commits 1-16
    elements. With it (TRCIDR8.MAXSPEC) the large form (header bit 0 set)
    commits ``max_spec - 15`` to ``max_spec`` elements. Raises ``ValueError``
    for a commit the chosen form cannot express.
    """
    if max_spec is None:
        if not 1 <= commit <= 16:
            raise ValueError(f"format 2 small form commits 1-16 elements, not {commit}")
        return bytes((0x0C, (commit - 1) << 4 | (count & 0xF)))
    field = commit - (max_spec - 15)
    if not 0 <= field <= 15:
        raise ValueError(f"format 2 large form commits {max_spec - 15}-{max_spec}, not {commit}")
    return bytes((0x0D, field << 4 | (count & 0xF)))


def cycle_count_f3(count: int, commit: int = 1) -> bytes:
    """Cycle count format 3: 2-bit count above the threshold, commit 1..4."""
    return bytes((0x10 | ((commit - 1) & 0x3) << 2 | (count & 0x3),))


def commit(count: int) -> bytes:
    """Commit ``count`` elements."""
    return b"\x2d" + cont_field(count, 5)


def cancel_f1(count: int, mispredict: bool = False) -> bytes:
    """Cancel format 1 (with a mispredict when ``mispredict``)."""
    return bytes((0x2F if mispredict else 0x2E,)) + cont_field(count, 5)


_SPEC_ATOMS = {(0, 0): 0, (1, 1): 1, (3, 2): 2, (0, 1): 3}


def mispredict(atom_bits: int = 0, atom_count: int = 0) -> bytes:
    """Mispredict with no atom, E, EE or N (``atom_bits``, ``atom_count``)."""
    return bytes((0x30 | _SPEC_ATOMS[(atom_bits, atom_count)],))


def cancel_f2(atom_bits: int = 0, atom_count: int = 0) -> bytes:
    """Cancel format 2: no atom, E, EE or N, then cancel one element and mispredict."""
    return bytes((0x34 | _SPEC_ATOMS[(atom_bits, atom_count)],))


def cancel_f3(count: int, e_atom: bool = False) -> bytes:
    """Cancel format 3: optional E atom, cancel 2-5 elements, mispredict."""
    return bytes((0x38 | ((count - 2) & 0x3) << 1 | int(e_atom),))


def ignore() -> bytes:
    """Ignore (ETMv4.3+)."""
    return b"\x70"


def event(events: int) -> bytes:
    """Event packet for the events in the 4-bit mask ``events`` (1-15)."""
    return bytes((0x70 | (events & 0xF),))


def instrumentation(el: int, value: int) -> bytes:
    """Instrumentation (ETE FEAT_ITE): EL byte and 64-bit payload."""
    return bytes((0x09, el & 0xFF)) + (value & ((1 << 64) - 1)).to_bytes(8, "little")


def trans_start() -> bytes:
    """Transaction start (ETE)."""
    return b"\x0a"


def trans_commit() -> bytes:
    """Transaction commit (ETE)."""
    return b"\x0b"


def _context_payload(
    el: int, sf: bool, ns: bool, nse: bool, vmid: int | None, vmid_bytes: int,
    context_id: int | None, cid_bytes: int,
) -> bytes:  # fmt: skip
    info = (el & 0x3) | (0x08 if nse else 0) | (0x10 if sf else 0) | (0x20 if ns else 0)
    body = b""
    if vmid is not None:
        info |= 0x40
        body += vmid.to_bytes(vmid_bytes, "little")
    if context_id is not None:
        info |= 0x80
        body += context_id.to_bytes(cid_bytes, "little")
    return bytes((info,)) + body


def context(
    el: int,
    sf: bool,
    ns: bool,
    *,
    nse: bool = False,
    vmid: int | None = None,
    context_id: int | None = None,
    vmid_bytes: int = 1,
    cid_bytes: int = 4,
) -> bytes:
    """Context packet (header 0x81) with an optional VMID and context ID of the given sizes."""
    return b"\x81" + _context_payload(el, sf, ns, nse, vmid, vmid_bytes, context_id, cid_bytes)


def context_same() -> bytes:
    """Context same (header 0x80)."""
    return b"\x80"


def _long_field(address: int, isa: int, wide: bool) -> bytes:
    if isa == 0:
        first = bytes(((address >> 2) & 0x7F, (address >> 9) & 0x7F))
    else:
        first = bytes(((address >> 1) & 0x7F, (address >> 8) & 0xFF))
    rest = (address >> 16).to_bytes(6 if wide else 2, "little", signed=False)
    return first + rest[: 6 if wide else 2]


def address_long(address: int, isa: int = 0, wide: bool = True) -> bytes:
    """Target address, 32-bit (``wide`` False) or 64-bit, IS0 or IS1."""
    header = (0x9D if wide else 0x9A) + isa
    mask = (1 << (64 if wide else 32)) - 1
    return bytes((header,)) + _long_field(address & mask, isa, wide)


def source_address_long(address: int, isa: int = 0, wide: bool = True) -> bytes:
    """ETE source address, 32-bit or 64-bit, IS0 or IS1."""
    header = (0xB8 if wide else 0xB6) + isa
    mask = (1 << (64 if wide else 32)) - 1
    return bytes((header,)) + _long_field(address & mask, isa, wide)


def _short_field(address: int, isa: int, two_bytes: bool) -> bytes:
    shift = 2 - isa
    b1 = (address >> shift) & 0x7F
    if two_bytes:
        return bytes((b1 | 0x80, (address >> (7 + shift)) & 0xFF))
    return bytes((b1,))


def address_short(address: int, isa: int = 0, two_bytes: bool = True) -> bytes:
    """Target address short form: the low 9/17 (IS0) or 8/16 (IS1) bits of ``address``."""
    return bytes((0x95 + isa,)) + _short_field(address, isa, two_bytes)


def source_address_short(address: int, isa: int = 0, two_bytes: bool = True) -> bytes:
    """ETE source address short form."""
    return bytes((0xB4 + isa,)) + _short_field(address, isa, two_bytes)


def exact_match(index: int) -> bytes:
    """Target address exact match: entry ``index`` (0-2) of the address history."""
    return bytes((0x90 | (index & 0x3),))


def source_exact_match(index: int) -> bytes:
    """ETE source address exact match."""
    return bytes((0xB0 | (index & 0x3),))


def address_context(
    address: int,
    isa: int = 0,
    wide: bool = True,
    *,
    el: int = 1,
    sf: bool = True,
    ns: bool = True,
    nse: bool = False,
    vmid: int | None = None,
    context_id: int | None = None,
    vmid_bytes: int = 1,
    cid_bytes: int = 4,
) -> bytes:
    """Target address with context, 32-bit or 64-bit, IS0 or IS1."""
    header = (0x85 if wide else 0x82) + isa
    mask = (1 << (64 if wide else 32)) - 1
    return (
        bytes((header,))
        + _long_field(address & mask, isa, wide)
        + _context_payload(el, sf, ns, nse, vmid, vmid_bytes, context_id, cid_bytes)
    )


def q(
    count: int | None,
    *,
    address: int | None = None,
    isa: int = 0,
    match: int | None = None,
    short: bool = True,
) -> bytes:
    """Q packet: count (None: unknown), the next address (short or 32-bit) or an exact match."""
    if count is None:
        return b"\xaf"
    if match is not None:
        return bytes((0xA0 | (match & 0x3),)) + cont_field(count, 5)
    if address is None:
        return b"\xac" + cont_field(count, 5)
    if short:
        return bytes((0xA5 + isa,)) + _short_field(address, isa, True) + cont_field(count, 5)
    return bytes((0xAA + isa,)) + _long_field(address, isa, False) + cont_field(count, 5)


def atom(atoms: str) -> bytes:
    """One atom packet for an E/N string the formats can express (oldest atom first).

    Formats: 1 (E|N), 2 (two atoms), 3 (three), 4 (NEEE, NNNN, NENE, ENEN),
    5 (NEEEE, NNNNN, NENEN, ENENE), 6 (3-23 E then E or N). Raises
    ``ValueError`` for other strings.
    """
    bits = sum(1 << i for i, a in enumerate(atoms) if a == "E")
    n = len(atoms)
    if n == 1:
        return bytes((0xF6 | bits,))
    if n == 2:
        return bytes((0xD8 | bits,))
    if n == 3:
        return bytes((0xF8 | bits,))
    if n == 4 and atoms in _F4:
        return bytes((0xDC | _F4[atoms],))
    if n == 5 and atoms in _F5:
        return bytes((_F5[atoms],))
    if 4 <= n <= 24 and atoms[:-1] == "E" * (n - 1):
        # format 6: header bits [4:0] = number of E atoms - 3, bit 5 set when the last is N
        return bytes((0xC0 | (n - 4) | (0x20 if atoms[-1] == "N" else 0),))
    raise ValueError(f"no atom packet format for {atoms!r}")


# Formats 4 and 5 (atoms oldest first, as the reference reads them).
_F4 = {"NEEE": 0, "NNNN": 1, "NENE": 2, "ENEN": 3}
_F5 = {"NEEEE": 0xF5, "NNNNN": 0xD5, "NENEN": 0xD6, "ENENE": 0xD7}


class AddressEncoder:
    """Chooses address packets as a trace unit does: exact match, short, or long form.

    Keeps the three-entry address history the reader keeps, so the packets it
    returns read back as the addresses given. Set ``context_64bit`` to False
    while the traced context is AArch32 (a 32-bit address update then clears
    the upper half of the address).
    """

    def __init__(self) -> None:
        self.history: list[tuple[int, int]] = [(0, 0), (0, 0), (0, 0)]
        self.context_64bit = True

    def encode(self, address: int, isa: int = 0, *, source: bool = False) -> bytes:
        """The shortest packet that reads back as ``address`` with instruction set ``isa``."""
        for i, entry in enumerate(self.history):
            if entry == (address, isa):
                # the matched entry is pushed again: [e_i, e0, e1]
                self.history = [entry, *self.history[:2]]
                return source_exact_match(i) if source else exact_match(i)
        last, _ = self.history[0]
        self.history = [(address, isa), *self.history[:2]]
        shift = 2 - isa
        short = source_address_short if source else address_short
        long = source_address_long if source else address_long
        for nbits, two in ((7 + shift, False), (15 + shift, True)):
            if address >> nbits == last >> nbits:
                return short(address, isa, two)
        # a 32-bit update keeps the upper half only in a 64-bit context
        upper = last >> 32 if self.context_64bit else 0
        return long(address, isa, address >> 32 != upper)
