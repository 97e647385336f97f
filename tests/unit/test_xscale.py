"""XScale trace buffer: message table, backward parse, and the thesis's worked example."""

from __future__ import annotations

from cstrace.capture.etmport import CycleStream
from cstrace.elements import Isa, MemSpace
from cstrace.memory import MemoryMap
from cstrace.memory.image import MemoryRegion
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.xscale import iter_elements, iter_packets
from cstrace.protocols.xscale.config import XscaleConfig
from cstrace.protocols.xscale.packets import MsgKind
from cstrace.protocols.xscale.reader import MESSAGE_ROWS, MESSAGE_TABLE, parse_fill
from tests.classic.truth import decoded


def test_message_rows_cover_every_byte_once() -> None:
    seen = [0] * 256
    for lo, hi, _kind, _src in MESSAGE_ROWS:
        for b in range(lo, hi + 1):
            seen[b] += 1
    assert seen == [1] * 256
    assert MESSAGE_TABLE[0x97] == MsgKind.INDIRECT
    assert MESSAGE_TABLE[0xFF] == MsgKind.ROLLOVER
    assert MESSAGE_TABLE[0x6C] == MsgKind.EXCEPTION


def test_backward_parse_tells_addresses_from_messages() -> None:
    # An address byte equal to a message byte (0x90) must not be read as a message.
    entries = bytes([0x83, 0x00, 0x90, 0x88, 0x90, 0x92, 0xFF])
    msgs = parse_fill(entries)
    assert [m.kind for m in msgs] == [MsgKind.DIRECT, MsgKind.INDIRECT, MsgKind.ROLLOVER]
    assert msgs[1].target == 0x00908890 and msgs[1].count == 2
    # A wrapped buffer that starts inside an address: the target is unknown.
    cut = parse_fill(entries[2:])
    assert cut[0].kind == MsgKind.INDIRECT and cut[0].target is None


def _thesis_image() -> MemoryMap:
    """The code of the thesis's PXA250 example (§7.2): what its listing shows."""
    arm = bytearray()
    for addr in range(0x8800, 0x89F8, 4):
        op = 0xE1A00000  # NOP for the instructions the listing leaves out
        op = {
            0x8800: 0xE59F0944,
            0x8804: 0xE3E01000,
            0x8808: 0xE5801000,
            0x88D4: 0xEE120F10,
            0x88DC: 0xE24FF004,
            0x88F0: 0xE3E00000,
            0x89EC: 0xE5932000,
            0x89F0: 0xE1540002,
            0x89F4: 0xCAFFFFFC,
        }.get(addr, op)
        arm += op.to_bytes(4, "little")
    return MemoryMap(
        [
            MemoryRegion(0x2000, (0xEA0019FE).to_bytes(4, "little"), MemSpace.ANY),
            MemoryRegion(0x8800, bytes(arm), MemSpace.ANY),
        ]
    )


def test_thesis_pxa250_example() -> None:
    """Entries 1-19 as listed, then direct branches with a count of two, then debug entry."""
    entries = [0x00, 0x00, 0x20, 0x00, 0x90, 0x80, 0xFF, 0xFF, 0xFF]
    entries += [0x00, 0x00, 0x88, 0xE0, 0x97, 0xFF, 0xFF, 0xFF, 0xFF, 0x85]
    entries += [0x82] * 26
    record = [0] * (256 - len(entries)) + entries + [0, 0, 0x89F0]
    data = b"".join(w.to_bytes(4, "little") for w in record)
    cfg = XscaleConfig(None)
    ctx = DecodeContext(0, DecodeOptions(), _thesis_image())
    els = list(iter_elements(iter_packets(CycleStream("xscale_tb", data), cfg), cfg, ctx))
    got, exc = decoded(els)
    addrs = [a for a, thumb in got]
    assert not exc and not any(thumb for _a, thumb in got)
    # The numbering of the thesis listing: instruction 1 is the branch at 0x2000.
    assert len(addrs) == 206
    assert addrs[0] == 0x2000
    assert addrs[1:4] == [0x8800, 0x8804, 0x8808]
    assert addrs[55] == 0x88D8 and addrs[56] == 0x88DC  # instructions 56, 57
    assert addrs[57:62] == [0x88E0, 0x88E4, 0x88E8, 0x88EC, 0x88F0]  # 58-62
    assert addrs[200:206] == [0x89F0, 0x89F4, 0x89EC, 0x89F0, 0x89F4, 0x89EC]  # 201-206
    assert all(el.isa == Isa.A32 for el in els if hasattr(el, "num_instr"))


def test_synchronisation_on_a_checkpointed_direct_branch() -> None:
    """No start address, no indirect branch: the checkpoint register gives the target."""
    code = (0xE1A00000).to_bytes(4, "little") + (0xEAFFFFFD).to_bytes(4, "little")
    mem = MemoryMap([MemoryRegion(0x3000, code, MemSpace.ANY)])
    # Two checkpointed branches: the older one's target is in CHKPT1.
    entries = [0x83, 0xC2, 0x81, 0xC1, 0x81]
    record = [0] * (256 - len(entries)) + entries + [0x3000, 0x3000, 0x3000]
    data = b"".join(w.to_bytes(4, "little") for w in record)
    cfg = XscaleConfig(None)
    ctx = DecodeContext(0, DecodeOptions(), mem)
    els = list(iter_elements(iter_packets(CycleStream("xscale_tb", data), cfg), cfg, ctx))
    got, _exc = decoded(els)
    assert [a for a, _t in got] == [0x3000, 0x3004] * 3
