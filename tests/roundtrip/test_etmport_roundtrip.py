"""Trace-port capture formats: cycles written in every format read back unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cstrace.capture import demux
from cstrace.capture.etmport import (
    CycleStream,
    PortConfig,
    PortMode,
    cycle,
    pack_cycles,
    read_cycles,
)
from cstrace.errors import CaptureError


@st.composite
def _port_and_cycles(draw: st.DrawFn) -> tuple[PortConfig, str, list[int]]:
    width = draw(st.sampled_from([4, 8, 16]))
    bits = draw(st.sampled_from([3, 4]))
    fmt = draw(st.sampled_from(["etm_etb", "etm_cycles", "etm_cycles_text", "etm_port"]))
    mode = draw(st.sampled_from(list(PortMode)))
    if fmt == "etm_etb" and mode == PortMode.DEMULTIPLEXED:
        width = 8  # the ETB demultiplexes 8-bit ports only
    cfg = PortConfig(width, mode, bits)
    n = draw(st.integers(0, 60))
    cycles = [
        cycle(
            draw(st.integers(0, (1 << bits) - 1)),
            draw(st.integers(0, (1 << width) - 1)),
            bits == 3 and draw(st.booleans()),
        )
        for _ in range(n)
    ]
    return cfg, fmt, cycles


@given(_port_and_cycles())
def test_round_trip(case: tuple[PortConfig, str, list[int]]) -> None:
    cfg, fmt, cycles = case
    data = pack_cycles(cycles, fmt, cfg)
    got, issues = read_cycles(data, fmt, cfg)
    assert not issues
    assert got[: len(cycles)] == cycles
    # Padding (a partly filled ETB entry, an odd demultiplexed sample) is TD.
    assert all(c & 0xF == 7 for c in got[len(cycles) :])


def test_etb_layouts_follow_the_thesis_figure() -> None:
    # Figure 9.2: 4-bit port: three 8-bit cycle fields, oldest in bits [7:0]:
    # PIPESTAT[2:0], TRACEPKT[3:0], TRACESYNC.
    word = (0b1_1010_100 << 0) | (0b0_0011_000 << 8) | (0b0_0000_111 << 16)
    got, _ = read_cycles(word.to_bytes(4, "little"), "etm_etb", PortConfig(4))
    assert got == [cycle(4, 0xA, True), cycle(0, 0x3), cycle(7, 0)]
    # 16-bit port: one cycle per entry, TRACESYNC in bit 19.
    word = 5 | (0xBEEF << 3) | (1 << 19)
    got, _ = read_cycles(word.to_bytes(4, "little"), "etm_etb", PortConfig(16))
    assert got == [cycle(5, 0xBEEF, True)]


def test_text_errors_name_the_line() -> None:
    with pytest.raises(CaptureError, match="line 2"):
        read_cycles(b"IE 00\nXX 00\n", "etm_cycles_text", PortConfig(8))
    with pytest.raises(CaptureError, match="wider"):
        read_cycles(b"IE 1ff\n", "etm_cycles_text", PortConfig(8))


def test_trailing_bytes_are_reported() -> None:
    _c, issues = read_cycles(b"\0" * 6, "etm_cycles", PortConfig(8))
    assert issues and issues[0].offset == 4


def test_demux_gives_one_cycle_stream() -> None:
    d = demux(b"\0" * 8, "etm_etb")
    (s,) = d.streams.values()
    assert isinstance(s, CycleStream) and s.fmt == "etm_etb"
