"""The state that crosses a cut (:mod:`cstrace.split`): every piece of it is compared.

A stream decoded in pieces is exact only if the cut states of the ETMv4/ETE
reader and decoder hold everything that decides what later packets give. So:
changing any attribute of a decoder (compiled or not) that is not declared a
constant changes its cut state, and the same for the reader's state; a window
of a stream has the bytes and capture indices of the stream from its start.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Any

import numpy as np
import pytest

from cstrace.capture.stream import Stream
from cstrace.elements import PEContextInfo
from cstrace.protocols import DecodeContext, DecodeOptions
from cstrace.protocols.etmv4.config import from_registers
from cstrace.protocols.etmv4.decoder import Etmv4Decoder
from cstrace.protocols.etmv4.reader import ReaderState
from cstrace.split import WindowStream

REGS = {
    "TRCCONFIGR": 0x000010C1,
    "TRCTRACEIDR": 0x10,
    "TRCIDR0": 0x28000EA1,
    "TRCIDR1": 0x4100F403,
    "TRCIDR2": 0x00000488,
    "TRCIDR8": 0,
}
"""A Juno Cortex-A57's ETMv4.0."""


def config() -> Any:
    return from_registers(REGS, "Cortex-A57", "")


def decoder() -> Etmv4Decoder:
    return Etmv4Decoder(config(), DecodeContext(0x10, DecodeOptions()))


def attributes(obj: object) -> set[str]:
    """The data attributes of ``obj``: its ``__dict__`` (pure Python), or the public
    attributes of a compiled extension type, or its slots."""
    names = set(getattr(obj, "__dict__", {}))
    for klass in type(obj).__mro__:
        names.update(getattr(klass, "__slots__", ()))
        for name, value in vars(klass).items():
            if type(value).__name__ in ("getset_descriptor", "member_descriptor"):
                names.add(name)
    return {n for n in names if not n.startswith("__")}


def changed(value: Any) -> Any:
    """A value of the same kind as ``value`` that differs from it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, enum.Enum):
        return next(m for m in type(value) if m != value)
    if isinstance(value, int):
        return value + 1
    if value is None:
        return 1
    if isinstance(value, (list, deque)):  # the P0 stack
        return type(value)([*value, [0, False, 0, 0, 0, 0]])
    if isinstance(value, tuple):
        return (*value, 1)
    if isinstance(value, PEContextInfo):
        other = value.copy()
        other.context_id += 1
        return other
    raise AssertionError(f"no change known for {value!r}")


def test_decoder_cut_state_covers_every_attribute() -> None:
    names = attributes(decoder()) - set(Etmv4Decoder.CUT_CONSTANTS)
    names.discard("CUT_CONSTANTS")
    assert {"state", "pe", "stack", "rs", "need_addr", "addr", "last_cc"} <= names
    for name in sorted(names):
        dec = decoder()
        before = dec.cut_state()
        if name == "rs":
            dec.rs.active = True
            dec.rs.push(0x1000, 0)
        elif name == "lone":
            dec.lone = (0x40, 0x1000, 0)  # a target address stacked alone
        elif name == "unsync_reason":
            dec.unsync_reason = changed(dec.unsync_reason)  # read while not synchronised
        else:
            setattr(dec, name, changed(getattr(dec, name)))
        assert dec.cut_state() != before, f"{name} is not in the decoder's cut state"


def test_decoder_cut_state_ignores_unsync_reason_when_synchronised() -> None:
    """Once decoding, the reason is always set again before it is read."""
    dec = decoder()
    dec.state = 3  # decoding (the decoder's _DECODE)
    before = dec.cut_state()
    dec.unsync_reason = changed(dec.unsync_reason)
    assert dec.cut_state() == before


def test_a_lone_target_address_compares_as_the_stack_entry_it_stands_for() -> None:
    """A target address the fast path keeps out of the P0 stack's list (``lone``) is the
    same cut state as that address on the stack, and the decoder is not settled."""
    kept = decoder()
    kept.state = 3  # decoding (the decoder's _DECODE)
    kept.need_addr = kept.need_ctxt = False
    assert kept.settled()
    kept.lone = (0x40, 0x1000, 1)
    assert not kept.settled()
    stacked = decoder()
    stacked.state = 3
    stacked.need_addr = stacked.need_ctxt = False
    stacked.lone = (0x40, 0x1000, 1)
    stacked._unlone()
    assert stacked.lone is None and len(stacked.stack) == 1
    assert stacked.stack[0][2:5] == [0x40, 0x1000, 1]
    assert kept.cut_state() == stacked.cut_state()
    other = decoder()
    other.state = 3
    other.need_addr = other.need_ctxt = False
    other.lone = (0x40, 0x1004, 1)
    assert other.cut_state() != kept.cut_state()


READER_CONFIG = {
    "readers",
    "kinds",
    "is_ete",
    "m_type",
    "cc_mask",
    "commit_opt1",
    "max_spec",
    "vmid_bytes",
    "cid_bytes",
}
"""ReaderState slots that come from the configuration."""


def test_reader_cut_state_covers_every_slot() -> None:
    names = attributes(ReaderState(config())) - READER_CONFIG
    assert {"a0", "i1", "b2", "cid", "ts", "cc_thr"} <= names
    for name in sorted(names):
        st = ReaderState(config())
        before = st.cut_state()
        if name == "hist":  # the address history as entries: a view of a0..b2
            st.hist = ((0x1000, 1, 32), *st.hist[1:])
        else:
            setattr(st, name, changed(getattr(st, name)))
        assert st.cut_state() != before, f"{name} is not in the reader's cut state"


@pytest.mark.parametrize("start", [0, 5, 9, 10, 17, 30, 39])
def test_window_is_the_stream_from_an_index(start: int) -> None:
    # Three runs of capture indices: 0-9, 100-119, 200-209; delivered in two blocks.
    data = bytes(range(40))
    whole = Stream(1, data, np.array([0, 10, 30]), np.array([0, 100, 200]))
    blocks = [
        Stream(1, data[:15], np.array([0, 10]), np.array([0, 100])),
        Stream(1, data[15:], np.array([0, 15]), np.array([105, 200])),
    ]

    class Blocks(Stream):
        def blocks(self) -> Any:
            return iter(blocks)

    source = Blocks(1, data, whole.run_pos, whole.run_idx)
    index = whole.offset_at(start)
    window = WindowStream(source, index)
    got = [(i, b) for block in window.blocks() for i, b in block.chunks()]
    expected = [(i, b) for i, b in whole.chunks()]
    # The expected window: the whole stream's chunks from ``index`` on.
    want: list[tuple[int, bytes]] = []
    for i, b in expected:
        if i + len(b) <= index:
            continue
        skip = max(0, index - i)
        want.append((i + skip, b[skip:]))
    merged = Stream.from_chunks(1, got)
    assert list(merged.chunks()) == list(Stream.from_chunks(1, want).chunks())
    assert window.data == data[start:]
    assert window.offset_at(0) == index
