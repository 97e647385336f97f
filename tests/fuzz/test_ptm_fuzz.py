"""PTM fuzzing: random and bit-flipped streams give packets or resync, never an exception.

Every stream is read, decoded against a small program image and rendered as the
listing would be; all bytes must be accounted for by the packets.
"""

from __future__ import annotations

import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture import Stream
from cstrace.elements import Diagnostic, Isa, MemSpace
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.ptm import iter_elements, iter_packets
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.encoder import (
    encode_async,
    encode_atom_ca,
    encode_atoms,
    encode_branch,
    encode_context_id,
    encode_isync,
    encode_timestamp,
    encode_vmid,
    encode_waypoint_update,
)
from cstrace.protocols.ptm.packets import ISyncReason, NotSync
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.diagnostics import diagnostic_text
from cstrace.render.ocsd.ptm import packet_text

_CODE = struct.pack(
    "<12I",
    0xE1A00000,
    0xEA000001,
    0xE1A00000,
    0xE1A00000,
    0xEB000002,
    0xE12FFF1E,
    0x0AFFFFF8,
    0xE1A00000,
    0xE2800001,
    0xE12FFF1E,
    0x0AFFFFF4,
    0xE1A00000,
) + struct.pack("<8H", 0x2001, 0xF000, 0xF805, 0x4770, 0xD1FC, 0x4798, 0xBF00, 0xBF00)
_MEMORY = MemoryMap([MemoryRegion(0x1000, _CODE, MemSpace.ANY, "code")])

_CONFIGS = [
    PtmConfig(trace_id=0x10, core="Cortex-A9"),
    PtmConfig(trace_id=0x10, etmcr=0x10001000, etmccer=0x8EA, etmidr=0x411CF301),
    PtmConfig(
        trace_id=0x10,
        etmcr=0x10001000 | (3 << 14) | (1 << 29) | (1 << 30),
        etmccer=0x34C01AC2 | (1 << 24),
        etmidr=0x411CF312,
        core="Cortex-A15",
    ),
    PtmConfig(trace_id=0x10, etmcr=(1 << 14) | (1 << 29), etmccer=1 << 23, core="bogus"),
]


def run(data: bytes, config: PtmConfig, cut: int = 0, complete: bool = True) -> None:
    """Read, decode and render ``data``; check that packets cover every byte once."""
    if cut:
        chunks = [(3 * i, data[i : i + cut]) for i in range(0, len(data), cut)]
    else:
        chunks = [(0, data)]
    stream = Stream.from_chunks(0x10, chunks)
    packets = list(iter_packets(stream, config, complete))
    for p in packets:
        assert packet_text(p)
    if complete and not any(isinstance(p, NotSync) for p in packets):
        # once synchronised, packets account for every byte exactly once
        assert b"".join(p.raw for p in packets) == data
    context = DecodeContext(0x10, DecodeOptions(), _MEMORY, complete=complete)
    for elem in iter_elements(iter(packets), config, context):
        (diagnostic_text("ptm", elem) if isinstance(elem, Diagnostic) else element_text(elem))


def valid_stream(rng: random.Random, config: PtmConfig) -> bytes:
    """A plausible stream: syncs, atoms, branches and the rest, in random order."""
    ca = config.cycle_accurate
    n = config.ctxt_id_bytes
    out = bytearray(encode_async())
    for _ in range(rng.randint(1, 60)):
        k = rng.randint(0, 9)
        addr = 0x1000 + 2 * rng.randint(0, 40)
        isa = rng.choice([Isa.A32, Isa.T32, Isa.JAZELLE, Isa.TEE])
        if k == 0:
            reason = rng.choice(list(ISyncReason))
            cc = rng.randint(0, 1 << 20) if ca and reason else None
            out += encode_isync(
                addr,
                isa if isa != Isa.JAZELLE else Isa.A32,
                reason,
                cycle_count=cc,
                context_id=rng.randint(0, 255),
                ctxt_id_bytes=n,
            )
        elif k <= 3:
            out += (
                encode_atom_ca(rng.random() < 0.5, rng.randint(0, 5000))
                if ca
                else encode_atoms([rng.random() < 0.6 for _ in range(rng.randint(1, 5))])
            )
        elif k <= 5:
            exc = rng.randint(0, 0x1FF) if rng.random() < 0.2 else None
            out += encode_branch(
                addr,
                isa if isa != Isa.TEE else Isa.T32,
                rng.randint(2, 5),
                exception=exc,
                cycle_count=rng.randint(0, 99) if ca else None,
            )
        elif k == 6:
            out += encode_waypoint_update(addr, Isa.A32, rng.randint(1, 5))
        elif k == 7:
            out += encode_timestamp(rng.getrandbits(48), cycle_count=1 if ca else None)
        elif k == 8:
            out += encode_context_id(rng.getrandbits(32), n) + encode_vmid(rng.getrandbits(8))
        else:
            out += encode_async(rng.randint(0, 12))
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=400),
    st.sampled_from(_CONFIGS),
    st.integers(0, 20),
    st.booleans(),
)
def test_random_bytes(data: bytes, config: PtmConfig, cut: int, complete: bool) -> None:
    run(data, config, cut, complete)


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300).map(lambda b: encode_async() + b),
    st.sampled_from(_CONFIGS),
)
def test_random_bytes_after_sync(data: bytes, config: PtmConfig) -> None:
    run(data, config)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(_CONFIGS), st.integers(0, 16))
def test_bit_flipped_streams(seed: int, config: PtmConfig, cut: int) -> None:
    rng = random.Random(seed)
    data = bytearray(valid_stream(rng, config))
    run(bytes(data), config, cut)
    for _ in range(rng.randint(1, 8)):
        pos = rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)
    run(bytes(data), config, cut)
    # truncated anywhere
    run(bytes(data[: rng.randrange(len(data) + 1)]), config, cut)
