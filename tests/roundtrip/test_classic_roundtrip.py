"""Classic trace packets: encode then read back (ETMv2 branch addresses, TFO values, headers)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cstrace.elements import Isa
from cstrace.protocols.etmv2.decoder import decode_branch, encode_branch
from cstrace.protocols.etmv2.reader import (
    HEADER_ROWS,
    HEADER_TABLE,
    PIPESTAT_ROWS,
    HeaderKind,
    tfo_decode,
    tfo_encode,
)

_ISAS = st.sampled_from([Isa.A32, Isa.T32, Isa.JAZELLE])
_ALIGN = {Isa.A32: ~3, Isa.T32: ~1, Isa.JAZELLE: ~0}


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), _ISAS, _ISAS)
def test_branch_address_round_trip(addr: int, prev: int, isa: Isa, prev_isa: Isa) -> None:
    addr &= _ALIGN[isa] & 0xFFFFFFFF
    prev &= _ALIGN[prev_isa] & 0xFFFFFFFF
    data = encode_branch(addr, prev, isa, prev_isa)
    assert 1 <= len(data) <= 5 and data[0] & 1
    assert all(b & 0x80 for b in data[:-1]) and not data[-1] & 0x80
    assert decode_branch(data, prev, prev_isa) == (addr, isa)
    if isa != prev_isa:
        assert len(data) == 5


@given(st.integers(0, 95))
def test_tfo_value_round_trip(value: int) -> None:
    enc = tfo_encode(value)
    assert enc & 1
    assert tfo_decode(enc) == value


def test_tfo_encoding_table() -> None:
    # seeds/002 example 6.1: a TFO of 1 is output as 00011001.
    assert tfo_encode(1) == 0b00011001
    assert tfo_decode(0b0111) is None  # cycle-accurate TD
    assert tfo_decode(0b0101) is None  # reserved
    assert tfo_decode(0b0000) is None  # plain TD


def test_header_rows_do_not_overlap() -> None:
    for b in range(256):
        hits = [r for r in HEADER_ROWS if b & r[1] == r[0]]
        assert len(hits) <= 1
        assert HEADER_TABLE[b] == (hits[0][2] if hits else HeaderKind.RESERVED)
    assert sorted(r[0] for r in PIPESTAT_ROWS) == list(range(16))


def test_fifth_branch_byte_names_the_state_as_etmv3_original_encoding() -> None:
    # ARM b0x001AAA (A[31:29]), Thumb b0x01AAAA (A[31:28]), Jazelle b0x1AAAAA (A[31:27])
    assert encode_branch(0xE0000000, 0, Isa.A32, Isa.T32)[4] == 0x08 | 0x7
    assert encode_branch(0xF0000000, 0, Isa.T32, Isa.A32)[4] == 0x10 | 0xF
    assert encode_branch(0xF8000000, 0, Isa.JAZELLE, Isa.A32)[4] == 0x20 | 0x1F
    # bit 6 is not looked at; a byte that names no state keeps the current one
    full = bytes((0x81, 0x80, 0x80, 0x80))
    assert decode_branch(full + bytes((0x48,)), 0, Isa.T32) == (0x00000000, Isa.A32)
    assert decode_branch(full + bytes((0x13,)), 0, Isa.A32) == (0x30000000, Isa.T32)
    assert decode_branch(full + bytes((0x00,)), 0, Isa.T32) == (0x00000000, Isa.T32)
