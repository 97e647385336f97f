"""ETMv4 / ETE round trips: encode packets from random field values, read them back.

The encoder (:mod:`cstrace.protocols.etmv4.encoder`) lays packets out as the
spec describes; the reader must give back exactly the fields, the packet
boundaries and the resolved values (full addresses through the address
history, timestamps, counts with the threshold).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture.stream import Stream
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.etmv4.packets import (
    Address,
    AddressContext,
    AddressMatch,
    Atom,
    Cancel,
    Commit,
    Context,
    CycleCount,
    Etmv4Packet,
    Event,
    Exception_,
    Instrumentation,
    Mispredict,
    Q,
    SourceAddress,
    SourceAddressMatch,
    Timestamp,
    TraceInfo,
)
from cstrace.protocols.etmv4.reader import iter_packets

# ETE 1.3, 64-bit addresses, 32-bit context ID and VMID, Q elements, COMMOPT = 0
CONFIG = Etmv4Config(
    configr=0x80C1,
    traceidr=1,
    idr0=0x0801CEA1,
    idr1=0x4100FFF0,
    idr2=0xD0001088,
    idr8=16,
    devarch=0x47735A13,
    core_name="ARM-AA64",
)
THRESHOLD = 0x20

# A packet to encode: (bytes, check of the packet read back).
Case = tuple[bytes, Callable[[Etmv4Packet], bool]]


def _is(cls: type, **fields: Any) -> Callable[[Etmv4Packet], bool]:
    def check(p: Etmv4Packet) -> bool:
        return isinstance(p, cls) and all(getattr(p, k) == v for k, v in fields.items())

    return check


ATOM_STRINGS = ["E", "N", "EN", "NN", "EEN", "NEN", "NEEE", "NENE", "ENEN", "NEEEE", "ENENE"]
ATOM_STRINGS += ["E" * k + "N" for k in range(3, 24)] + ["E" * k for k in range(4, 25)]


@st.composite
def cases(draw: st.DrawFn, addr: enc.AddressEncoder, state: dict[str, int]) -> Case:
    """One packet, its bytes and what reading it must give."""
    kind = draw(st.integers(0, 14))
    if kind == 0:
        atoms = draw(st.sampled_from(ATOM_STRINGS))
        bits = sum(1 << i for i, a in enumerate(atoms) if a == "E")
        return enc.atom(atoms), _is(Atom, bits=bits, count=len(atoms))
    if kind in (1, 2):
        near = draw(st.booleans())
        value = draw(st.integers(0, (1 << 20) - 1)) if near else draw(st.integers(0, 2**64 - 1))
        value = (state["last"] & ~((1 << 20) - 1)) | value if near else value
        isa = draw(st.integers(0, 1))
        value &= ~(3 >> isa)
        source = kind == 2
        data = addr.encode(value, isa, source=source)
        state["last"] = value
        if data[0] in (0x90, 0x91, 0x92, 0xB0, 0xB1, 0xB2):
            cls = SourceAddressMatch if source else AddressMatch
        else:
            cls = SourceAddress if source else Address
        return data, _is(cls, address=value, isa=isa)
    if kind == 3:
        el, sf, ns = draw(st.integers(0, 3)), draw(st.booleans()), draw(st.booleans())
        vmid = draw(st.none() | st.integers(0, 2**32 - 1))
        cid = draw(st.none() | st.integers(0, 2**32 - 1))
        data = enc.context(el, sf, ns, vmid=vmid, context_id=cid, vmid_bytes=4)
        fields: dict[str, Any] = dict(el=el, sf=sf, ns=ns, vmid_updated=vmid is not None,
                                      cid_updated=cid is not None)  # fmt: skip
        if vmid is not None:
            fields["vmid"] = vmid
        if cid is not None:
            fields["context_id"] = cid
        addr.context_64bit = sf
        return data, _is(Context, **fields)
    if kind == 4:
        value = draw(st.integers(0, 2**64 - 1))
        cc = draw(st.none() | st.integers(0, 0xFFF))
        return enc.timestamp(value, nbytes=9, cycle_count=cc), _is(
            Timestamp, timestamp=value, cycle_count=cc
        )
    if kind == 5:
        etype = draw(st.integers(1, 0x3FF).filter(lambda t: t != 0x18))
        interp = draw(st.integers(0, 2))
        return enc.exception(etype, interp), _is(
            Exception_, exception_type=etype, addr_interp=interp
        )
    if kind == 6:
        count = draw(st.integers(0, 0xFFF))
        commit = draw(st.integers(0, 2**20))
        return enc.cycle_count_f1(count, commit), _is(
            CycleCount, count=(count + THRESHOLD), commit=commit
        )
    if kind == 7:
        count, commit = draw(st.integers(0, 3)), draw(st.integers(1, 4))
        return enc.cycle_count_f3(count, commit), _is(
            CycleCount, count=count + THRESHOLD, commit=commit
        )
    if kind == 8:
        n = draw(st.integers(0, 2**32 - 1))
        return enc.commit(n), _is(Commit, count=n)
    if kind == 9:
        n, mis = draw(st.integers(0, 2**32 - 1)), draw(st.booleans())
        return enc.cancel_f1(n, mis), _is(Cancel, count=n, mispredict=mis)
    if kind == 10:
        bits, count = draw(st.sampled_from([(0, 0), (1, 1), (3, 2), (0, 1)]))
        if draw(st.booleans()):
            return enc.mispredict(bits, count), _is(Mispredict, atom_bits=bits, atom_count=count)
        return enc.cancel_f2(bits, count), _is(Cancel, count=1, atom_bits=bits, atom_count=count)
    if kind == 11:
        events = draw(st.integers(1, 15))
        return enc.event(events), _is(Event, events=events)
    if kind == 12:
        el, value = draw(st.integers(0, 3)), draw(st.integers(0, 2**64 - 1))
        return enc.instrumentation(el, value), _is(Instrumentation, el=el, value=value)
    if kind == 13:
        count = draw(st.none() | st.integers(0, 2**32 - 1))
        return enc.q(count), _is(Q, count=count, has_address=False)
    value = draw(st.integers(0, 2**64 - 1)) & ~3
    data = enc.address_context(value, 0, True, el=2, context_id=5, vmid=9, vmid_bytes=4)
    addr.history = [(value, 0), *addr.history[:2]]
    addr.context_64bit = True
    state["last"] = value
    return data, _is(AddressContext, address=value, el=2, context_id=5, vmid=9)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_round_trip(data: st.DataObject) -> None:
    addr = enc.AddressEncoder()
    state = {"last": 0}
    # a 64-bit context first, so that 32-bit address updates keep the upper half
    stream = enc.a_sync() + enc.trace_info(info=1, cc_threshold=THRESHOLD)
    stream += enc.context(1, True, True)
    expected: list[Case] = []
    for _ in range(data.draw(st.integers(1, 40))):
        case = data.draw(cases(addr, state))
        expected.append(case)
        stream += case[0]
    packets = list(iter_packets(Stream.from_chunks(1, [(0, stream)]), CONFIG, True))
    assert isinstance(packets[1], TraceInfo) and isinstance(packets[2], Context)
    body = packets[3:]
    assert [p.raw for p in body] == [c[0] for c in expected]
    for p, (_, check) in zip(body, expected, strict=True):
        assert check(p), p
