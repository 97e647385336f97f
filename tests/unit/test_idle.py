"""Long runs of idle zeros are skipped on the element path, and the elements stay the same.

For every protocol, streams with runs of 0x00 (before the first sync, between
packets, inside a packet, at the end, followed by an A-sync's 0x80 or by
anything) decode to the same elements, with the same capture indices, whether
the reader sees every byte or the stream with the middle of the long runs taken
out (:class:`cstrace.capture.idle.IdleSkipped`). And a source whose buffer is
nothing but zeros decodes at memory speed: its idle bytes are reported, not lost.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cstrace.capture import Stream
from cstrace.capture.idle import IDLE_KEEP, IDLE_MIN, IdleSkipped
from cstrace.elements import Diagnostic
from cstrace.errors import DiagKind
from cstrace.protocols import DecodeContext, DecodeOptions, get_protocol
from cstrace.render.ocsd import element_text
from cstrace.render.ocsd.diagnostics import diagnostic_text
from tests.fuzz import test_etmv3_fuzz, test_etmv4_fuzz, test_itm_fuzz, test_ptm_fuzz, test_stm_fuzz
from tests.snapshots import Buffer, Core, Source, make_snapshot

IDLE_PERIOD = 12

REGS: dict[str, tuple[dict[str, int], str]] = {
    "etmv4": ({"TRCCONFIGR": 0xC1, "TRCTRACEIDR": 0x10, "TRCIDR0": 0x28000EA1,
               "TRCIDR1": 0x4100F403, "TRCIDR2": 0x488}, "Cortex-A57"),
    "ete": ({"TRCCONFIGR": 0x8001, "TRCTRACEIDR": 0x1, "TRCIDR0": 0x28C1CEA1,
             "TRCIDR1": 0x4100FFF0, "TRCIDR2": 0xD0001088, "TRCDEVARCH": 0x47735A13,
             "TRCIDR8": 0x10}, "ARM-AA64"),
    "ptm": ({"ETMCR": 0x10001000, "ETMIDR": 0x411CF312, "ETMCCER": 0x34C01AC2,
             "ETMTRACEIDR": 0x13}, "Cortex-A15"),
    "etmv3": ({"ETMCR": 0x10001860, "ETMIDR": 0x410CF250, "ETMCCER": 0x344008F2,
               "ETMTRACEIDR": 0x10}, "Cortex-A7"),
    "stm": ({"STMTCSR": 0x00200000}, ""),
    "itm": ({"ITMTCR": 0x00200310}, ""),
}  # fmt: skip


def valid(protocol: str, config: Any, rng: random.Random) -> bytes:
    if protocol in ("etmv4", "ete"):
        return test_etmv4_fuzz._valid_stream(rng)
    if protocol == "ptm":
        return test_ptm_fuzz.valid_stream(rng, config)
    if protocol == "etmv3":
        return test_etmv3_fuzz._valid_stream(rng.randrange(1000))
    if protocol == "stm":
        return test_stm_fuzz._VALID
    return test_itm_fuzz._VALID


def with_zeros(rng: random.Random, data: bytes) -> bytes:
    """``data`` with a few long runs of zeros, some ending in 0x80 (an A-sync's end)."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.choice((0, len(out), rng.randrange(len(out) + 1)))
        run = bytes(rng.choice((IDLE_MIN, IDLE_MIN + 1, IDLE_MIN + 600, 2 * IDLE_MIN + 7)))
        tail = rng.choice((b"", b"\x80", b"\x80", bytes((rng.randrange(256),))))
        out[at:at] = run + tail
    return bytes(out)


def chunked(rng: random.Random, tid: int, data: bytes, framed: bool) -> Stream:
    """``data`` in runs of capture indices, as from frames (gaps) or as one run."""
    if not framed:
        return Stream.from_chunks(tid, [(0, data)])
    chunks = []
    pos = idx = 0
    while pos < len(data):
        n = rng.randint(1, 14) if rng.random() < 0.5 else rng.randint(1000, 9000)
        chunks.append((idx, data[pos : pos + n]))
        idx += n + 1 + (n // 15)
        pos += n
    return Stream.from_chunks(tid, chunks)


class Blocked(Stream):
    """A stream delivered in blocks of ``size`` bytes, as a lazy capture stream is."""

    __slots__ = ("size",)

    def __init__(self, inner: Stream, size: int) -> None:
        super().__init__(inner.trace_id, inner.data, inner.run_pos, inner.run_idx)
        self.size = size

    def blocks(self) -> Iterator[Stream]:
        for at in range(0, len(self.data), self.size):
            end = min(at + self.size, len(self.data))
            chunks = []
            pos = 0
            for idx, piece in self.chunks():
                s, e = max(at, pos), min(end, pos + len(piece))
                if e > s:
                    chunks.append((idx + s - pos, piece[s - pos : e - pos]))
                pos += len(piece)
            yield Stream.from_chunks(self.trace_id, chunks)


def decoded(protocol: str, config: Any, stream: Stream, before_sync: bool) -> list[str]:
    proto = get_protocol(protocol)
    assert proto is not None
    ctx = DecodeContext(config.trace_id, DecodeOptions(decode_before_sync=before_sync))
    if proto.with_options is not None:
        config = proto.with_options(config, ctx.options)
    read = proto.iter_row_packets or proto.iter_packets
    out = []
    for e in proto.iter_elements(read(stream, config, True), config, ctx):
        if isinstance(e, Diagnostic) and e.kind == DiagKind.SYNC_WAIT:
            # a count of the bytes skipped: without the idle ones, which are counted apart
            out.append(f"{e.offset}: skipped")
            continue
        text = diagnostic_text(protocol, e) if isinstance(e, Diagnostic) else element_text(e)
        out.append(f"{e.offset}: {text}")
    return out


@pytest.mark.parametrize("protocol", sorted(REGS))
@pytest.mark.parametrize("framed", [True, False])
@pytest.mark.parametrize("before_sync", [True, False])
def test_same_elements_without_the_middle_of_long_zero_runs(
    protocol: str, framed: bool, before_sync: bool
) -> None:
    proto = get_protocol(protocol)
    assert proto is not None
    regs, core = REGS[protocol]
    config = proto.from_registers(regs, core, "")
    if proto.with_options is not None:
        config = proto.with_options(config, DecodeOptions(decode_before_sync=before_sync))
    assert proto.idle_zeros is not None
    total = tried = 0
    for seed in range(8):
        rng = random.Random(f"{protocol}{framed}{before_sync}{seed}")
        data = with_zeros(rng, valid(protocol, config, rng) + valid(protocol, config, rng))
        stream = chunked(rng, config.trace_id if framed else None, data, framed)
        if seed % 2:
            stream = Blocked(stream, rng.choice((1000, 4096, 5000)))
        if not proto.idle_zeros(stream, config):
            continue  # (the protocol does not allow it here: the element path reads all)
        skipped = IdleSkipped(stream, proto.idle_zeros(stream, config))
        whole = decoded(protocol, config, stream, before_sync)
        assert decoded(protocol, config, skipped, before_sync) == whole, seed
        total += skipped.skipped
        tried += 1
    assert total > 0 or not tried


def test_runs_keep_their_ends_and_indices() -> None:
    data = b"\x01" * 10 + bytes(IDLE_MIN + 100) + b"\x80\x02"
    stream = Stream.from_chunks(7, [(1000, data)])
    skipped = IdleSkipped(stream, IDLE_PERIOD)
    (block,) = list(skipped.blocks())
    dropped = (IDLE_MIN + 100 - 2 * IDLE_KEEP) // IDLE_PERIOD * IDLE_PERIOD
    assert skipped.skipped == dropped
    assert block.data == b"\x01" * 10 + bytes(IDLE_MIN + 100 - dropped) + b"\x80\x02"
    assert block.offset_at(len(block.data) - 2) == 1000 + len(data) - 2
    # short runs are left alone: the block is the same object
    short = Stream.from_chunks(7, [(0, bytes(IDLE_MIN - 1) + b"\x80")])
    assert list(IdleSkipped(short, 12).blocks()) == [short]


@pytest.mark.parametrize("protocol", sorted(REGS))
def test_a_buffer_of_zeros_is_idle_not_lost(tmp_path: Path, protocol: str) -> None:
    from cstrace.analyses.loss import loss_report
    from cstrace.inputs import read_snapshot

    regs, core = REGS[protocol]
    kind = {"etmv4": "ETM4", "ete": "ETE", "ptm": "PTM1.1", "etmv3": "ETM3.5", "stm": "STM",
            "itm": "ITM"}[protocol]  # fmt: skip
    proto = get_protocol(protocol)
    assert proto is not None and proto.idle_zeros is not None
    config = proto.from_registers(regs, core, "")
    if proto.with_options is not None:
        config = proto.with_options(config, DecodeOptions())
    allowed = proto.idle_zeros(Stream(None, b""), config)
    size = 4 << 20 if allowed else 2 * IDLE_MIN
    snap = make_snapshot(
        tmp_path / "s",
        [Source("src", kind, dict(regs), "cpu_0" if core else None)],
        [Buffer("b", bytes(size), ["src"], "source_data")],
        [Core("cpu_0", core)] if core else [],
    )
    (loss,) = loss_report(read_snapshot(snap)).sources
    assert loss.bytes == size
    if allowed:
        assert loss.idle_bytes > size - 8 * IDLE_MIN
    else:
        assert loss.idle_bytes == 0


def test_zero_run_ends_are_found_exactly() -> None:
    from cstrace.capture.idle import zero_end, zero_start

    rng = random.Random(26)
    for _ in range(300):
        data = bytearray(rng.choice((0, 1, 50, 5000, 70000)))
        for _ in range(rng.randint(0, 4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(1, 256)
        data = bytes(data)
        pos = rng.randint(0, len(data))
        end = pos
        while end < len(data) and data[end] == 0:
            end += 1
        assert zero_end(data, pos) == end
        start = pos
        while start > 0 and data[start - 1] == 0:
            start -= 1
        assert zero_start(data, pos) == start
