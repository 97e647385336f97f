"""ETMv3 fuzzing: random and bit-flipped streams give packets or resync, never an exception.

Every stream is read, decoded over a small code image and rendered as the
listing would be; the packets must account for every byte of the stream.
"""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture import Stream
from cstrace.elements import Diagnostic, Isa, MemSpace
from cstrace.isa import ArchVersion, Profile
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv3 import iter_elements, iter_packets
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.encoder import (
    encode_async,
    encode_branch,
    encode_context_id,
    encode_cycle_count,
    encode_isync,
    encode_timestamp,
    encode_vmid,
)
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.diagnostics import diagnostic_text
from cstrace.render.ocsd.etmv3 import packet_text

_RNG = random.Random(1234)
_CODE = bytes(_RNG.randrange(256) for _ in range(0x400)) + bytes([0x00, 0xBF] * 64)
_MEMORY = MemoryMap([MemoryRegion(0x8000, _CODE, MemSpace.ANY, "code")])

_BASE = Etmv3Config(ctrl=0x10001860, ccer=0x344008F2, idr=0x410CF250, traceidr=0x10)
_CONFIGS = [
    _BASE,
    replace(_BASE, ctrl=0x10000860),
    replace(_BASE, ctrl=0x10001860 | (3 << 14), idr=0x411CF250),  # 4-byte ctxid, alt branch
    replace(_BASE, ctrl=0x10000860 | (1 << 14), ccer=0x04400000, idr=0x410CF240),
    replace(_BASE, ctrl=0x1000086C),  # data values and addresses traced
    replace(_BASE, arch=ArchVersion.V7, profile=Profile.M, idr=0x411CF250),
    replace(_BASE, ctrl=0x10105860),  # no instruction trace (data only), 1-byte context ID
]


def _valid_stream(seed: int, alt: bool = False, ctxt: int = 0) -> bytes:
    rng = random.Random(seed)
    out = bytearray(encode_async())
    prev = 0
    for _ in range(rng.randint(1, 60)):
        r = rng.random()
        if r < 0.5:
            out.append(0x80 | (rng.randrange(64) << 1))
        elif r < 0.65:
            isa = rng.choice([Isa.T32, Isa.A32])
            addr = 0x8000 + rng.randrange(0, len(_CODE), 4)
            exc = rng.randrange(16) if rng.random() < 0.2 else None
            out += encode_branch(addr, isa, prev, alt=alt, exception=exc)
            prev = addr
        elif r < 0.75:
            prev = 0x8000 + rng.randrange(0, len(_CODE), 4)
            cc = rng.randrange(1 << 20) if rng.random() < 0.5 else None
            out += encode_isync(
                prev, rng.choice([Isa.T32, Isa.A32]), cycle_count=cc, ctxt_bytes=ctxt
            )
        elif r < 0.8:
            out += encode_cycle_count(rng.randrange(1 << 32))
        elif r < 0.85:
            out += encode_timestamp(rng.randrange(1 << 48))
        elif r < 0.9:
            if ctxt:
                out += encode_context_id(rng.randrange(1 << 32), ctxt)
        elif r < 0.95:
            out += encode_vmid(rng.randrange(256))
        else:
            out.append(rng.choice([0x0C, 0x66, 0x76, 0x7E]))
    return bytes(out)


def _run(data: bytes, cfg: Etmv3Config, complete: bool = True) -> None:
    stream = Stream.from_chunks(0x10, [(0, data[:37]), (50, data[37:])])
    pkts = list(iter_packets(stream, cfg, complete))
    for p in pkts:
        assert isinstance(packet_text(p), str)
    if complete:
        assert b"".join(p.raw for p in pkts) == data
    ctx = DecodeContext(0x10, DecodeOptions(), _MEMORY, complete=complete)
    for e in iter_elements(iter(pkts), cfg, ctx):
        assert diagnostic_text("etmv3", e) if isinstance(e, Diagnostic) else element_text(e)


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=0, max_size=400), st.sampled_from(_CONFIGS), st.booleans())
def test_random_bytes(data: bytes, cfg: Etmv3Config, complete: bool) -> None:
    _run(data, cfg, complete)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(_CONFIGS), st.integers(0, 10**6))
def test_bit_flipped_streams(seed: int, cfg: Etmv3Config, flip_seed: int) -> None:
    data = bytearray(_valid_stream(seed, cfg.alt_branch, cfg.ctxtid_bytes))
    rng = random.Random(flip_seed)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    _run(bytes(data), cfg)
    _run(bytes(data)[: rng.randrange(len(data) + 1)], cfg)


def test_valid_streams_decode_without_loss_of_sync() -> None:
    for seed in range(50):
        cfg = _CONFIGS[seed % 3]
        data = _valid_stream(seed, cfg.alt_branch, cfg.ctxtid_bytes)
        pkts = list(iter_packets(Stream(0x10, data), cfg, True))
        assert b"".join(p.raw for p in pkts) == data
        assert not any(type(p).__name__ in ("NotSync", "Reserved") for p in pkts)
