"""ETMv4 / ETE reader fuzzing: random and bit-flipped streams give packets, never an exception.

For every stream, under several configurations (ETMv4.0 A-profile, ETMv4.3 with
data, conditional and Q trace, ETE 1.3, ETMv4.5 M-profile), and with the bytes
split over runs of capture indices: the reader must not raise, every packet
must render, and the packets must account for every byte exactly once (a
prefix of them when the capture is incomplete).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture.stream import Stream
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.etmv4.packets import BadPacket, PacketType
from cstrace.protocols.etmv4.reader import iter_packets
from cstrace.render.ocsd.ete import packet_text as ete_text
from cstrace.render.ocsd.etmv4 import packet_text as etmv4_text

CONFIGS = [
    Etmv4Config(configr=0xC1, traceidr=0x10, idr0=0x28000EA1, idr1=0x4100F403, idr2=0x488,
                core_name="Cortex-A57"),
    Etmv4Config(configr=0x67C7 | 0x30000, traceidr=0x10, idr0=0x280DCEFF, idr1=0x4100F443,
                idr2=0x20001088, idr8=8, core_name="Cortex-A55"),
    Etmv4Config(configr=0x8001, traceidr=0x1, idr0=0x28C1CEA1, idr1=0x4100FFF0,
                idr2=0xD0001088, devarch=0x47735A13, core_name="ARM-AA64"),
    Etmv4Config(configr=0x1, traceidr=0x0, idr0=0x280006E1, idr1=0x4100F454, idr2=0x4,
                idr12=1, core_name="Cortex-M55"),
]  # fmt: skip


def _valid_stream(rnd: random.Random) -> bytes:
    """A plausible stream: sync, trace info, then a mix of well-formed packets."""
    out = bytearray(enc.a_sync() + enc.trace_info(info=rnd.randrange(2), cc_threshold=3))
    addr = enc.AddressEncoder()
    makers = [
        lambda: enc.atom(rnd.choice(["E", "N", "EN", "ENE", "EEEN", "NENEN", "EEEEEEN"])),
        lambda: addr.encode(rnd.randrange(1 << 48) & ~3),
        lambda: addr.encode(rnd.choice([0x1000, 0x1004, 0x2000])),
        lambda: enc.context(rnd.randrange(4), True, True, context_id=rnd.randrange(1 << 32)),
        lambda: enc.timestamp(rnd.randrange(1 << 64), cycle_count=rnd.choice([None, 7])),
        lambda: enc.exception(rnd.randrange(32), rnd.randrange(3)),
        lambda: enc.cycle_count_f3(rnd.randrange(4)),
        lambda: enc.commit(rnd.randrange(1, 300)),
        lambda: enc.q(rnd.randrange(100), address=0x1234),
        lambda: enc.trace_on(),
        lambda: enc.a_sync(),
    ]
    for _ in range(rnd.randrange(1, 60)):
        out += rnd.choice(makers)()
    return bytes(out)


def check(data: bytes, config: Etmv4Config, cut: int = 0, complete: bool = True) -> None:
    """Read ``data``; every packet renders and the packets cover the bytes once, in order."""
    if cut:
        chunks = [(5 * i, data[i : i + cut]) for i in range(0, len(data), cut)]
    else:
        chunks = [(0, data)]
    stream = Stream.from_chunks(0x10, chunks)
    packets = list(iter_packets(stream, config, complete))
    text = ete_text if config.is_ete else etmv4_text
    for p in packets:
        assert text(p)
        assert p.raw
    joined = b"".join(p.raw for p in packets)
    if complete:
        assert joined == data
    else:
        assert data.startswith(joined)
        assert not any(
            isinstance(p, BadPacket) and p.kind == PacketType.INCOMPLETE_EOT for p in packets
        )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, len(CONFIGS) - 1), st.integers(0, 9))
def test_random_bytes(data: bytes, which: int, cut: int) -> None:
    check(data, CONFIGS[which], cut)
    check(enc.a_sync() + data, CONFIGS[which], cut, complete=False)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, len(CONFIGS) - 1), st.integers(0, 9))
def test_bit_flipped_streams(seed: int, which: int, cut: int) -> None:
    rnd = random.Random(seed)
    data = bytearray(_valid_stream(rnd))
    for _ in range(rnd.randrange(0, 8)):
        data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    if rnd.random() < 0.3:
        data = data[: rnd.randrange(len(data))]
    check(bytes(data), CONFIGS[which], cut)


def test_every_header_byte_at_the_end_and_before_garbage() -> None:
    for config in CONFIGS:
        for header in range(256):
            check(enc.a_sync() + bytes((header,)), config)
            check(enc.a_sync() + bytes((header,)) + b"\xff" * 12 + b"\x00", config, cut=3)
