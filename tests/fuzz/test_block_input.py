"""Block-wise readers: wherever the capture layer cuts a stream, the packets are the same.

A lazy capture stream hands a reader its trace ID's data one capture block at a
time (``Stream.blocks()``). For the ETMv4/ETE, PTM and ETMv3 readers, every
stream here (valid streams, with junk before the first sync, bit flips and
truncation; laid out as formatter runs or as one unformatted run) is read once
whole and again cut into blocks at random places, at every run and at every
byte: the packets (type, index, bytes and every field) must not change, with
the capture complete or not.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cstrace.capture.stream import Stream
from cstrace.protocols.etmv3 import iter_packets as etmv3_packets
from cstrace.protocols.etmv3.encoder import encode_async as etmv3_async
from cstrace.protocols.etmv4 import iter_packets as etmv4_packets
from cstrace.protocols.ptm import iter_packets as ptm_packets
from tests.blocks import SplitStream, frame_cuts, packet_fields, random_cuts
from tests.fuzz import test_etmv3_fuzz as e3
from tests.fuzz import test_etmv4_fuzz as e4
from tests.fuzz import test_ptm_fuzz as ptm

Reader = Callable[[Stream, Any, bool], Iterator[Any]]


def _case(proto: str, rng: random.Random) -> tuple[Reader, Any, bytes]:
    """A reader, a configuration and a plausible stream for it."""
    if proto == "etmv4":
        config: Any = rng.choice(e4.CONFIGS)
        return etmv4_packets, config, e4._valid_stream(rng)
    if proto == "ptm":
        config = rng.choice(ptm._CONFIGS)
        return ptm_packets, config, ptm.valid_stream(rng, config)
    config = rng.choice(e3._CONFIGS)
    return etmv3_packets, config, e3._valid_stream(rng.randrange(1 << 30))


def _damage(data: bytes, rng: random.Random) -> bytes:
    """Junk (with zero runs that may look like a sync) in front, bit flips, truncation."""
    junk = bytes(rng.choice((0, 0, 0, 0x80, rng.randrange(256))) for _ in range(rng.randrange(60)))
    out = bytearray(junk + data)
    for _ in range(rng.randrange(4)):
        j = rng.randrange(len(out))
        out[j] ^= 1 << rng.randrange(8)
    if rng.random() < 0.3:
        del out[rng.randrange(len(out) + 1) :]
    return bytes(out)


def _layout(data: bytes, single: bool, rng: random.Random) -> Stream:
    """Formatter-like runs (never with consecutive indices), or one unformatted run."""
    if single:
        return Stream(None, data, base=rng.choice((0, 7, 1000, 3 * 1024 + 5)))
    pos: list[int] = []
    idx: list[int] = []
    p = 0
    frame = 16 * rng.randrange(64)
    while p < len(data):
        start = rng.choice((0, 0, 1, 2, 4))
        pos.append(p)
        idx.append(frame + start)
        p += rng.randint(1, 15 - start)
        frame += 16 * rng.randint(1, 3)
    if not pos:
        pos, idx = [0], [0]
    return Stream(0x10, data, np.array(pos, dtype=np.int64), np.array(idx, dtype=np.int64))


@settings(max_examples=250, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from(("etmv4", "ptm", "etmv3")),
    st.booleans(),
    st.booleans(),
)
def test_cuts_do_not_change_packets(seed: int, proto: str, single: bool, complete: bool) -> None:
    rng = random.Random(seed)
    read, config, data = _case(proto, rng)
    stream = _layout(_damage(data, rng), single, rng)
    n = len(stream.data)
    whole = packet_fields(read(stream, config, complete))
    cuts = [
        random_cuts(n, rng.randint(1, 8), rng.randrange(1 << 30)),
        random_cuts(n, max(1, n // 5), rng.randrange(1 << 30)),
        frame_cuts(stream),
        list(range(1, n)),
    ]
    for c in cuts:
        assert packet_fields(read(SplitStream(stream, c), config, complete)) == whole, c


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(("etmv4", "ptm", "etmv3")), st.booleans())
def test_cuts_in_random_bytes(data: bytes, proto: str, single: bool) -> None:
    rng = random.Random(len(data))
    read, config, _ = _case(proto, rng)
    stream = _layout(data, single, rng)
    whole = packet_fields(read(stream, config, True))
    for c in (frame_cuts(stream), list(range(1, len(data)))):
        assert packet_fields(read(SplitStream(stream, c), config, True)) == whole


def test_etmv3_data_packet_that_never_completes_spans_every_block() -> None:
    # Normal data with an address and no data bytes: the reference never ends
    # the packet, so it takes the rest of the stream, across all blocks.
    config = replace(e3._BASE, ctrl=0x1000086C)  # data values and addresses traced
    data = etmv3_async() + bytes((0x80, 0x22, 0x85, 0x01)) + bytes(range(1, 200))
    for trace_id in (None, 0x10):
        stream = Stream(trace_id, data)
        for complete in (True, False):
            whole = packet_fields(etmv3_packets(stream, config, complete))
            assert len(whole) == (3 if complete else 2)
            for cuts in ([9], [12, 40, 100], list(range(1, len(data)))):
                got = etmv3_packets(SplitStream(stream, cuts), config, complete)
                assert packet_fields(got) == whole
