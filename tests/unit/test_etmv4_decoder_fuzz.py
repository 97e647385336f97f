"""The ETMv4/ETE decoder never raises: random, bit-flipped and structured packet streams.

Input: byte streams (random, corpus bytes with flipped bits, and random
sequences of well-formed packets from the encoder) decoded with several
configurations (speculation depth, return stack, ETE, Q elements). Output:
only generic elements, always ending with EO_TRACE.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture import Stream
from cstrace.elements import EoTrace, MemSpace
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.etmv4.decoder import iter_elements
from cstrace.protocols.etmv4.reader import iter_packets

# Code: a mix of A64 branches, returns, ERET and plain instructions, also read as
# T32 and A32 when the trace says so.
_WORDS = [0xD503201F, 0x54000040, 0x94000004, 0xD65F03C0, 0xD61F0000, 0xD69F03E0, 0x17FFFFFC]
_CODE = b"".join(random.Random(3).choice(_WORDS).to_bytes(4, "little") for _ in range(64))
_MEMORY = MemoryMap(
    [
        MemoryRegion(0x1000, _CODE, MemSpace.ANY),
        MemoryRegion(0x1100, _CODE[:64], MemSpace.EL1N),
    ]
)


def _config(variant: int) -> Etmv4Config:
    ete = variant & 1
    cfg = Etmv4Config(
        configr=(1 << 12) | (1 << 4) if variant & 2 else 0,
        traceidr=0x10,
        idr0=0x28000EA1 | (0x200 if variant & 2 else 0) | (0x18000 if variant & 4 else 0),
        idr2=0x00000488,
        idr8=8 if variant & 8 else 0,
        devarch=0x47735A13 if ete else None,
        core_name="Cortex-A53" if not variant & 16 else "Cortex-M55",
    )
    return cfg


def _decode(data: bytes, variant: int, complete: bool = True) -> None:
    cfg = _config(variant)
    ctx = DecodeContext(
        trace_id=cfg.trace_id,
        options=DecodeOptions(src_addr_n=bool(variant & 32)),
        memory=_MEMORY,
        complete=complete,
    )
    elems = list(iter_elements(iter_packets(Stream(cfg.trace_id, data), cfg, complete), cfg, ctx))
    if complete:
        assert isinstance(elems[-1], EoTrace)


_PACKETS: list[Callable[[random.Random], bytes]] = [
    lambda r: enc.a_sync(),
    lambda r: enc.trace_info(r.choice([0, 1, 0x40]), spec_depth=r.choice([None, 0, 2])),
    lambda r: enc.trace_on(),
    lambda r: enc.address_long(0x1000 + 4 * r.randrange(80), r.choice([0, 0, 1])),
    lambda r: enc.address_short(0x1000 + 4 * r.randrange(80)),
    lambda r: enc.exact_match(r.randrange(3)),
    lambda r: enc.address_context(
        0x1000 + 4 * r.randrange(80), el=r.randrange(4), sf=r.random() < 0.8, ns=r.random() < 0.8
    ),
    lambda r: enc.context(r.randrange(4), r.random() < 0.8, r.random() < 0.5),
    lambda r: enc.context_same(),
    lambda r: enc.atom("".join(r.choice("EN") for _ in range(r.randint(1, 3)))),
    lambda r: enc.atom("E" * r.randint(3, 10) + r.choice("EN")),
    lambda r: enc.exception(r.randrange(1, 32), r.choice([0, 1, 2])),
    lambda r: enc.exception_return(),
    lambda r: enc.commit(r.randint(1, 6)),
    lambda r: enc.cancel_f1(r.randint(1, 4), r.random() < 0.5),
    lambda r: enc.cancel_f3(r.randint(2, 5), r.random() < 0.5),
    lambda r: enc.mispredict(),
    lambda r: enc.cycle_count_f3(r.randrange(4)),
    lambda r: enc.timestamp(r.randrange(1 << 20)),
    lambda r: enc.timestamp_marker(),
    lambda r: enc.event(r.randrange(16)),
    lambda r: enc.overflow(),
    lambda r: enc.discard(),
    lambda r: enc.q(r.randint(0, 12), address=0x1000 + 4 * r.randrange(64), short=False),
    lambda r: enc.q(r.randint(0, 12)),
    lambda r: enc.source_address_long(0x1000 + 4 * r.randrange(80)),
    lambda r: enc.instrumentation(r.randrange(4), r.randrange(1 << 32)),
    lambda r: enc.trans_start(),
    lambda r: enc.trans_commit(),
    lambda r: enc.ignore(),
]


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=600), st.integers(0, 63), st.booleans())
def test_random_bytes_never_raise(data: bytes, variant: int, complete: bool) -> None:
    _decode(data, variant, complete)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 63))
def test_random_packet_sequences_never_raise(seed: int, variant: int) -> None:
    r = random.Random(seed)
    data = (
        enc.a_sync()
        + enc.trace_info(0)
        + b"".join(r.choice(_PACKETS)(r) for _ in range(r.randint(1, 60)))
    )
    _decode(data, variant)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 63))
def test_bit_flipped_streams_never_raise(seed: int, variant: int) -> None:
    r = random.Random(seed)
    good = bytearray(
        enc.a_sync() + enc.trace_info(0) + b"".join(r.choice(_PACKETS)(r) for _ in range(40))
    )
    for _ in range(r.randint(1, 8)):
        good[r.randrange(len(good))] ^= 1 << r.randrange(8)
    _decode(bytes(good), variant)
