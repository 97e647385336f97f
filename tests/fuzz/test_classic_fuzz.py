"""Random and bit-flipped captures of the classic formats never raise (ETMv1, ETMv2, XScale, DCC).

Each reader and decoder gets random bytes and real captures with flipped
bits; it must produce packets, elements and resynchronisation, and nothing but
packets and elements.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture.etmport import CycleStream, PortMode, pack_cycles
from cstrace.elements import Element
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.dcc import DccConfig
from cstrace.protocols.dcc import iter_elements as dcc_elements
from cstrace.protocols.dcc import iter_packets as dcc_packets
from cstrace.protocols.etmv1 import iter_elements as v1_elements
from cstrace.protocols.etmv1 import iter_packets as v1_packets
from cstrace.protocols.etmv1.config import ClassicEtmConfig, etmcr
from cstrace.protocols.etmv1.encoder import HwModel, encode_etmv1
from cstrace.protocols.etmv2 import iter_elements as v2_elements
from cstrace.protocols.etmv2 import iter_packets as v2_packets
from cstrace.protocols.etmv2.encoder import encode_etmv2
from cstrace.protocols.xscale import iter_elements as xs_elements
from cstrace.protocols.xscale import iter_packets as xs_packets
from cstrace.protocols.xscale.config import XscaleConfig
from cstrace.protocols.xscale.encoder import encode_xscale
from tests.classic.programs import sort_program
from tests.classic.truth import memory_of

FORMATS = ("etm_etb", "etm_cycles", "etm_port")
_IMAGE, _BASE, _ENTRY = sort_program()
_MEM = memory_of(_IMAGE, _BASE)


def _cfg(major: int, width: int, mode: int, bits: int) -> ClassicEtmConfig:
    return ClassicEtmConfig(
        etmcr(
            width=width,
            mode=PortMode(mode),
            data_value=bool(bits & 1),
            data_addr=bool(bits & 2),
            ctxid_bytes=(0, 1, 2, 4)[(bits >> 2) & 3],
        ),
        major,
        3 if major == 1 else 1,
    )


def _run_all(major: int, cfg: ClassicEtmConfig, fmt: str, data: bytes) -> list[Element]:
    stream = CycleStream(fmt, data)
    ctx = DecodeContext(0, DecodeOptions(), _MEM)
    if major == 1:
        return list(v1_elements(v1_packets(stream, cfg), cfg, ctx))
    return list(v2_elements(v2_packets(stream, cfg), cfg, ctx))


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([1, 2]),
    st.sampled_from([4, 8, 16]),
    st.sampled_from([0, 1, 2]),
    st.integers(0, 15),
    st.sampled_from(FORMATS),
    st.binary(max_size=600),
)
def test_random_trace_port_captures(
    major: int, width: int, mode: int, bits: int, fmt: str, data: bytes
) -> None:
    _run_all(major, _cfg(major, width, mode, bits), fmt, data)


_EXECS: list[object] = []


def _execs() -> list[object]:
    if not _EXECS:
        pytest.importorskip("unicorn")
        from tests.classic.emu import run

        _EXECS.extend(run(_IMAGE, _BASE, _ENTRY, 3000, irq_every=97).execs)
    return _EXECS


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([1, 2]), st.sampled_from([4, 8, 16]), st.integers(0, 2**32 - 1))
def test_bit_flipped_trace_port_captures(major: int, width: int, seed: int) -> None:
    cfg = _cfg(major, width, 0, seed & 15)
    execs = _execs()
    read = memory_of(_IMAGE, _BASE).read
    hw = HwModel(fifo_depth=32, sync_period=200)
    if major == 1:
        cycles, _t = encode_etmv1(execs, cfg, read, hw)  # type: ignore[arg-type]
    else:
        cycles, _t = encode_etmv2(execs, cfg, read, hw)  # type: ignore[arg-type]
    data = bytearray(pack_cycles(cycles[:4000], "etm_cycles", cfg.port))
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 40)):
        i = rng.randrange(len(data) * 8)
        data[i // 8] ^= 1 << (i % 8)
    _run_all(major, cfg, "etm_cycles", bytes(data))


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=3000), st.booleans())
def test_random_xscale_buffers(data: bytes, start: bool) -> None:
    cfg = XscaleConfig(0x8000 if start else None)
    ctx = DecodeContext(0, DecodeOptions(), _MEM)
    list(xs_elements(xs_packets(CycleStream("xscale_tb", data), cfg), cfg, ctx))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bit_flipped_xscale_buffers(seed: int) -> None:
    data = bytearray(encode_xscale(_execs(), memory_of(_IMAGE, _BASE).read, "fill")[0])  # type: ignore[arg-type]
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 60)):
        i = rng.randrange(len(data) * 8)
        data[i // 8] ^= 1 << (i % 8)
    cfg = XscaleConfig(None)
    ctx = DecodeContext(0, DecodeOptions(), _MEM)
    list(xs_elements(xs_packets(CycleStream("xscale_tb", bytes(data)), cfg), cfg, ctx))


@given(st.binary(max_size=400))
def test_random_dcc_words(data: bytes) -> None:
    cfg = DccConfig()
    ctx = DecodeContext(0, DecodeOptions())
    list(dcc_elements(dcc_packets(CycleStream("dcc_words", data), cfg), cfg, ctx))
