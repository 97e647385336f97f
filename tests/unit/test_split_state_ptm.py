"""The state that crosses a cut of a PTM stream (:mod:`cstrace.protocols.ptm.cut`).

A PTM stream decoded in pieces is exact only if the cut states of its reader
and decoder hold everything that decides what later packets give: changing any
attribute of the decoder (compiled or not) or of the reader's state that is
not declared a constant changes its cut state. And a fresh decoder started at
an A-sync is settled after the I-sync that follows (and a whole timestamp when
timestamps are traced), not before.
"""

from __future__ import annotations

from typing import Any

from cstrace.capture.stream import Stream
from cstrace.protocols import DecodeContext, DecodeOptions
from cstrace.protocols.kit import DECODE
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.cut import CUTS, PtmCut
from cstrace.protocols.ptm.decoder import PtmDecoder
from cstrace.protocols.ptm.reader import ReaderState
from tests.unit.test_split_state import attributes, changed

TS_ON = 0x10000000
"""ETMCR bit 28: timestamps traced."""


def config(etmcr: int = 0) -> PtmConfig:
    return PtmConfig(trace_id=0x10, etmcr=etmcr, core="Cortex-A9")


def decoder() -> PtmDecoder:
    return PtmDecoder(config(), DecodeContext(0x10, DecodeOptions()))


def test_decoder_cut_state_covers_every_attribute() -> None:
    names = attributes(decoder()) - set(PtmDecoder.CUT_CONSTANTS)
    names.discard("CUT_CONSTANTS")
    assert {"state", "pe_addr", "pe_isa", "ctxt", "stack", "elem_isa", "need_isync"} <= names
    for name in sorted(names):
        dec = decoder()
        dec.pe_valid = True  # (the address is compared while it is known)
        dec.waited = 1  # (and where the waiting started while there is some)
        before = dec.cut_state()
        if name == "stack":
            dec.stack.active = True
            dec.stack.push(0x1000, 0)
        elif name == "pe_valid":
            dec.pe_valid = False
        elif name == "waited":
            dec.waited = 2
        else:
            setattr(dec, name, changed(getattr(dec, name)))
        assert dec.cut_state() != before, f"{name} is not in the decoder's cut state"


def test_return_stack_compares_its_live_entries_only() -> None:
    """Entries below the count are never read again; the live ones, in order, are."""
    a = decoder().stack
    b = decoder().stack
    a.active = b.active = True
    a.push(0x1000, 0)
    a.flush()
    assert a.cut_state() == b.cut_state()
    a.push(0x2000, 1)
    b.push(0x2000, 1)
    assert a.cut_state() == b.cut_state()
    b.push(0x3000, 1)
    assert a.cut_state() != b.cut_state()


def test_decoder_cut_state_ignores_what_is_not_read_again() -> None:
    """An unknown address, where a wait that is over began, and the reason for losing
    sync once synchronised are not compared."""
    dec = decoder()
    dec.state = DECODE
    before = dec.cut_state()
    dec.pe_addr = 0x1234
    dec.waited_at = 99
    dec.reason = changed(dec.reason)
    assert dec.cut_state() == before


READER_CONFIG = set(ReaderState.CUT_CONSTANTS)
"""ReaderState slots that come from the configuration."""


def test_reader_cut_state_covers_every_slot() -> None:
    names = attributes(ReaderState(config())) - READER_CONFIG
    names.discard("CUT_CONSTANTS")
    assert {"address", "isa", "timestamp", "alt_isa_exc", "ts_bits"} <= names
    for name in sorted(names):
        st = ReaderState(config())
        before = st.cut_state()
        if name == "ts_bits":  # compared as: a whole timestamp was given
            st.ts_bits = st.ts_full
        else:
            setattr(st, name, changed(getattr(st, name)))
        assert st.cut_state() != before, f"{name} is not in the reader's cut state"


def isync(address: int) -> bytes:
    """An I-sync packet (no cycle count, no context ID): ARM state, periodic, secure."""
    return bytes((0x08, *address.to_bytes(4, "little"), 0x00))


def timestamp() -> bytes:
    """A whole 64-bit-wide timestamp packet (PTM 1.0: 48 bits, 7 bytes)."""
    return bytes((0x42, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x07))


def settled_after(data: bytes, etmcr: int) -> list[bool]:
    """For each packet of ``data`` read by a fresh cut decoder: settled after it?"""
    dec = PtmCut(config(etmcr), DecodeContext(0x10, DecodeOptions()))
    out = []
    for pkt in dec.packets(Stream.from_chunks(0x10, [(0, data)]), True):
        dec.decode(pkt)
        out.append(dec.settled())
    return out


A_SYNC = b"\x00" * 5 + b"\x80"


def test_settled_after_the_isync() -> None:
    assert settled_after(A_SYNC + isync(0x8000) + b"\x0c", 0) == [False, True, True]


def test_settled_after_a_whole_timestamp_when_timestamps_are_traced() -> None:
    data = A_SYNC + isync(0x8000) + timestamp() + b"\x0c"
    assert settled_after(data, TS_ON) == [False, False, True, True]
    # a timestamp of a few bits only (compressed) does not settle the reader
    assert settled_after(A_SYNC + isync(0x8000) + b"\x42\x05", TS_ON) == [False, False, False]


def test_a_cut_starts_at_the_first_zero_of_an_async() -> None:
    data = b"\x80\x01" + b"\x00" * 8 + b"\x80"
    at = data.find(CUTS.sync)
    assert CUTS.start_of is not None
    assert CUTS.start_of(data, at) == 2
    # at most 15 zeros: more make a bad sequence once synchronised
    data = b"\x01" + b"\x00" * 20 + b"\x80"
    assert CUTS.start_of(data, data.find(CUTS.sync)) == 21 - 15


def test_cut_decoder_shapes() -> None:
    dec: Any = PtmCut(config(), DecodeContext(0x10, DecodeOptions()))
    assert not dec.halted
    assert dec.finish()[-1].offset == 0  # end of trace
