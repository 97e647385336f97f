"""The state that crosses a cut of an ETMv3 stream (:mod:`cstrace.protocols.etmv3.cut`).

An ETMv3 stream decoded in pieces is exact only if the cut states of its reader
and decoder hold everything that decides what later packets give: changing any
attribute of the decoder (compiled or not) or of the reader's state that is
not declared a constant changes its cut state. A fresh decoder started at an
A-sync is settled once it decoded the I-sync, a P-header, and a range in every
record of its output ring, not before. (That a cut at every A-sync of the
corpus's ETMv3 streams gives the serial output:
tests/integration/test_split_decode.py::test_etmv3_cut_forced_at_every_sync.)
"""

from __future__ import annotations

from typing import Any

from cstrace.capture.stream import Stream
from cstrace.elements import Isa, MemSpace
from cstrace.memory.image import MemoryMap, MemoryRegion
from cstrace.protocols import DecodeContext, DecodeOptions
from cstrace.protocols.etmv3 import encoder as e3
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.cut import A_SYNC, CUTS, Etmv3Cut
from cstrace.protocols.etmv3.decoder import Etmv3Decoder
from cstrace.protocols.etmv3.reader import ReaderState
from tests.unit.test_split_state import attributes, changed

CONFIG = Etmv3Config(ctrl=0, ccer=0x344008F2, idr=0x410CF250, traceidr=0x10)
"""Instruction trace, no cycle accuracy, no timestamps, no context ID."""

CODE = bytes.fromhex("0000a0e1") * 64  # A32 NOPs (mov r0, r0)


def context() -> DecodeContext:
    memory = MemoryMap([MemoryRegion(0x8000, CODE, MemSpace.ANY)])
    return DecodeContext(0x10, DecodeOptions(), memory)


def decoder() -> Etmv3Decoder:
    return Etmv3Decoder(CONFIG, context())


RING = {"slots", "first", "used", "pend"}
"""The output ring: tested on its own (its records are compared from the oldest)."""


def test_decoder_cut_state_covers_every_attribute() -> None:
    names = attributes(decoder()) - set(Etmv3Decoder.CUT_CONSTANTS) - RING
    names.discard("CUT_CONSTANTS")
    assert {"sync", "iaddr", "need_addr", "sec", "ctxid", "vmid", "follower_isa"} <= names
    for name in sorted(names):
        dec = decoder()
        dec.need_addr = False  # (the address is compared while it is known)
        before = dec.cut_state()
        if name == "need_addr":
            dec.need_addr = True
        else:
            setattr(dec, name, changed(getattr(dec, name)))
        assert dec.cut_state() != before, f"{name} is not in the decoder's cut state"


def test_decoder_cut_state_compares_the_ring_from_its_oldest_record() -> None:
    """Where the ring starts does not matter; what its records keep, and in which order
    from the oldest, does."""
    a, b = decoder(), decoder()
    for dec in (a, b):
        dec.alloc()  # (eight records)
        dec.first = dec.used = 0
    assert a.cut_state() == b.cut_state()
    b.first = 3  # the same records (all alike), from another place
    assert a.cut_state() == b.cut_state()
    b.slots[5].isa = int(Isa.T32)
    assert a.cut_state() != b.cut_state()
    b.slots[5].isa = a.slots[5].isa
    b.slots[2].l_end = 0x8004
    assert a.cut_state() != b.cut_state()
    b.slots[2].l_end = 0
    b.used = b.pend = 1  # an element held back
    assert a.cut_state() != b.cut_state()


READER_CONFIG = set(ReaderState.CUT_CONSTANTS)
"""ReaderState slots that come from the configuration, or that hold the last packet read."""


def test_reader_cut_state_covers_every_slot() -> None:
    names = attributes(ReaderState(CONFIG)) - READER_CONFIG
    names.discard("CUT_CONSTANTS")
    assert {"addr", "isa", "timestamp", "ts_full", "fmt", "ctxid"} <= names
    for name in sorted(names):
        st = ReaderState(CONFIG)
        before = st.cut_state()
        value = getattr(st, name)
        setattr(st, name, value + "x" if isinstance(value, str) else changed(value))
        assert st.cut_state() != before, f"{name} is not in the reader's cut state"


def settled_after(data: bytes) -> list[bool]:
    """For each packet of ``data`` read by a fresh cut decoder: settled after it?"""
    dec = Etmv3Cut(CONFIG, context())
    out = []
    for pkt in dec.packets(Stream.from_chunks(0x10, [(0, data)]), True):
        dec.decode(pkt)
        out.append(dec.settled())
    return out


def test_settled_once_every_ring_record_held_a_range() -> None:
    head = e3.encode_async() + e3.encode_isync(0x8000, Isa.A32)
    # eight records in the ring: after the I-sync's TRACE_ON and PE_CONTEXT, a range in
    # every one of them
    got = settled_after(head + e3.encode_phdr("EEEE") + e3.encode_phdr("EEEE"))
    assert got == [False, False, False, True]


def test_a_cut_is_at_an_async() -> None:
    assert e3.encode_async() == A_SYNC
    assert CUTS.start_of is None
    assert CUTS.every_format  # (a piece of the element formats runs the one loop)


def test_cut_decoder_shapes() -> None:
    dec: Any = Etmv3Cut(CONFIG, context())
    assert not dec.halted
    assert dec.finish()[-1].offset == 0  # end of trace
