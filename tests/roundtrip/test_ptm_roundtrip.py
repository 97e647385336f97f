"""PTM round trips: encode random packet sequences, read them back, compare every field.

The expected values come from a small model of the PFT rules (address and
timestamp compression keep the bits a packet does not send), not from the reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture import Stream
from cstrace.elements import Isa
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.encoder import (
    encode_async,
    encode_atom_ca,
    encode_atoms,
    encode_branch,
    encode_context_id,
    encode_exception_return,
    encode_ignore,
    encode_isync,
    encode_timestamp,
    encode_trigger,
    encode_vmid,
    encode_waypoint_update,
)
from cstrace.protocols.ptm.packets import (
    VMID,
    ASync,
    Atom,
    BranchAddress,
    ContextID,
    ExceptionReturn,
    Ignore,
    ISync,
    ISyncReason,
    Timestamp,
    Trigger,
    WaypointUpdate,
)
from cstrace.protocols.ptm.reader import iter_packets

# address bits sent by 1-4 address bytes (5 bytes send all 32), per instruction set
_BITS = {Isa.A32: (8, 14, 21, 28), Isa.T32: (7, 13, 20, 27), Isa.JAZELLE: (6, 12, 19, 26)}
_ALIGN = {Isa.A32: ~3, Isa.T32: ~1, Isa.TEE: ~1, Isa.JAZELLE: ~0}


@dataclass
class Model:
    """What the reader should report: running address, ISA and timestamp."""

    config: PtmConfig
    address: int = 0
    isa: Isa = Isa.UNKNOWN
    timestamp: int = 0
    data: bytearray = field(default_factory=bytearray)
    expected: list[tuple[type, dict[str, object]]] = field(default_factory=list)

    def add(self, raw: bytes, kind: type, **fields: object) -> None:
        self.data += raw
        self.expected.append((kind, fields))


@st.composite
def configs(draw: st.DrawFn) -> PtmConfig:
    etmcr = (draw(st.booleans()) << 12) | (draw(st.integers(0, 3)) << 14)
    ccer = draw(st.booleans()) << 29
    return PtmConfig(trace_id=0x10, etmcr=etmcr, etmccer=ccer, etmidr=0x411CF312)


def isync(draw: st.DrawFn, m: Model) -> None:
    isa = draw(st.sampled_from([Isa.A32, Isa.T32, Isa.TEE]))
    address = draw(st.integers(0, 0xFFFFFFFF)) & _ALIGN[isa]
    reason = draw(st.sampled_from(list(ISyncReason)))
    ns = draw(st.booleans())
    cc = None
    if m.config.cycle_accurate and reason != ISyncReason.PERIODIC:
        cc = draw(st.integers(0, 0xFFFFFFFF))
    nctxt = m.config.ctxt_id_bytes
    ctxt = draw(st.integers(0, (1 << (8 * nctxt)) - 1)) if nctxt else None
    raw = encode_isync(
        address, isa, reason, ns=ns, cycle_count=cc, context_id=ctxt, ctxt_id_bytes=nctxt
    )
    m.address, m.isa = address, isa
    m.add(
        raw, ISync, address=address, isa=isa, reason=reason, ns=ns, cycle_count=cc, context_id=ctxt
    )


def branch(draw: st.DrawFn, m: Model, waypoint: bool) -> None:
    nbytes = draw(st.integers(1, 5))
    if nbytes == 5 or m.isa not in _BITS:
        nbytes = 5
        isa = draw(st.sampled_from([Isa.A32, Isa.T32, Isa.JAZELLE]))
    else:
        isa = m.isa
    address = draw(st.integers(0, 0xFFFFFFFF)) & _ALIGN[isa]
    bits = 32 if nbytes == 5 else _BITS[isa][nbytes - 1]
    mask = (1 << bits) - 1
    expect = (m.address & ~mask) | (address & mask)
    m.address, m.isa = expect, isa
    if waypoint:
        m.add(
            encode_waypoint_update(address, isa, nbytes),
            WaypointUpdate,
            address=expect,
            isa=isa,
            pkt_bits=bits,
        )
        return
    exception = None
    if nbytes >= 2 and draw(st.booleans()):
        exception = draw(st.integers(0, 0x1FF))
    cc = draw(st.integers(0, 0xFFFFFFFF)) if m.config.cycle_accurate else None
    raw = encode_branch(address, isa, nbytes, exception=exception, cycle_count=cc)
    m.add(
        raw,
        BranchAddress,
        address=expect,
        isa=isa,
        pkt_bits=bits,
        exception=exception,
        cycle_count=cc,
    )


def timestamp(draw: st.DrawFn, m: Model) -> None:
    ts64 = m.config.ts_64bit
    nbytes = draw(st.integers(1, 9 if ts64 else 7))
    value = draw(st.integers(0, (1 << 64) - 1))
    bits = (64 if ts64 else 48) if nbytes == (9 if ts64 else 7) else 7 * nbytes
    mask = (1 << bits) - 1
    m.timestamp = (m.timestamp & ~mask) | (value & mask)
    cc = draw(st.integers(0, 0xFFFFFFFF)) if m.config.cycle_accurate else None
    raw = encode_timestamp(value, ts_64bit=ts64, nbytes=nbytes, cycle_count=cc)
    m.add(raw, Timestamp, timestamp=m.timestamp, update_bits=bits, cycle_count=cc)


@st.composite
def streams(draw: st.DrawFn) -> Model:
    m = Model(draw(configs()))
    m.add(encode_async(draw(st.integers(0, 6))), ASync)
    isync(draw, m)
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            isync(draw, m)
        elif kind in (1, 2):
            branch(draw, m, waypoint=False)
        elif kind == 3:
            branch(draw, m, waypoint=True)
        elif kind == 4:
            timestamp(draw, m)
        elif kind == 5:
            if m.config.cycle_accurate:
                e = draw(st.booleans())
                cc = draw(st.integers(0, 0xFFFFFFFF))
                m.add(encode_atom_ca(e, cc), Atom, bits=int(e), count=1, cycle_count=cc)
            else:
                atoms = draw(st.lists(st.booleans(), min_size=1, max_size=5))
                bits = sum(1 << i for i, a in enumerate(atoms) if a)
                m.add(encode_atoms(atoms), Atom, bits=bits, count=len(atoms))
        elif kind == 6:
            n = m.config.ctxt_id_bytes
            cid = draw(st.integers(0, (1 << (8 * n)) - 1)) if n else 0
            m.add(encode_context_id(cid, n), ContextID, context_id=cid)
        elif kind == 7:
            vmid = draw(st.integers(0, 255))
            m.add(encode_vmid(vmid), VMID, vmid=vmid)
        elif kind == 8:
            m.add(encode_async(draw(st.integers(0, 3))), ASync)
        else:
            single = draw(st.sampled_from([Trigger, ExceptionReturn, Ignore]))
            raw = {Trigger: encode_trigger, ExceptionReturn: encode_exception_return}.get(
                single, encode_ignore
            )()
            m.add(raw, single)
    return m


@settings(max_examples=300, deadline=None)
@given(streams(), st.integers(1, 40))
def test_packets_read_back(m: Model, cut: int) -> None:
    # split the bytes into runs, as a deformatter would, with gaps in the indices
    chunks = [(2 * i, bytes(m.data[i : i + cut])) for i in range(0, len(m.data), cut)]
    stream = Stream.from_chunks(0x10, chunks)
    pkts = list(iter_packets(stream, m.config, True))
    assert len(pkts) == len(m.expected)
    pos = 0
    for pkt, (kind, fields) in zip(pkts, m.expected, strict=True):
        assert type(pkt) is kind
        assert pkt.raw == bytes(m.data[pos : pos + len(pkt.raw)])
        assert pkt.offset == 2 * (pos - pos % cut) + pos % cut
        pos += len(pkt.raw)
        for name, value in fields.items():
            assert getattr(pkt, name) == value, (name, pkt)
    assert pos == len(m.data)
