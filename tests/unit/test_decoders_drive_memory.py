"""The program-flow decoders drive code memory themselves: ``set_context`` and ``advance(time)``.

No observer of the element stream is involved: the decoders are run directly
on a code memory whose code changes at a trace time, and which records the
calls it receives. The code walked before and after a timestamp shows when
the time reached the memory:

- PTM: as the ``TIMESTAMP`` element goes out;
- ETMv3: as the ``TIMESTAMP`` element leaves the output ring;
- ETMv4/ETE: after the packet whose resolution output the ``TIMESTAMP`` (the
  elements of one packet go out together): an atom committed by that same
  packet still walks the code of the time before.
"""

from __future__ import annotations

from cstrace.capture import Stream
from cstrace.elements import AddrNacc, Element, InstrRange, Isa, MemSpace, Timestamp
from cstrace.memory import MemoryMap, MemoryRegion
from cstrace.protocols import etmv3, etmv4, ptm
from cstrace.protocols.base import DecodeContext, DecodeOptions
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.encoder import encode_isync as v3_isync
from cstrace.protocols.etmv3.encoder import encode_timestamp as v3_timestamp
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.encoder import encode_async, encode_atoms, encode_isync
from cstrace.protocols.ptm.encoder import encode_timestamp as ptm_timestamp

SWITCH = 0x500  # the trace time at which the code changes


class ClockedMemory:
    """Code memory showing ``before`` until trace time ``SWITCH``, ``after`` from then on."""

    def __init__(self, before: MemoryMap, after: MemoryMap) -> None:
        self.before = before
        self.after = after
        self.time: int | None = None
        self.calls: list[tuple[str, int | None]] = []

    def _map(self) -> MemoryMap:
        return self.after if self.time is not None and self.time >= SWITCH else self.before

    @property
    def generation(self) -> int:
        return 2 if self._map() is self.after else 1

    def find(self, address: int, space: MemSpace | int = MemSpace.ANY) -> MemoryRegion | None:
        return self._map().find(address, space)

    def read(self, address: int, size: int, space: MemSpace | int = MemSpace.ANY) -> bytes:
        return self._map().read(address, size, space)

    def set_context(self, context_id: int | None, vmid: int | None = None) -> None:
        self.calls.append(("context", context_id))

    def advance(self, time: int) -> None:
        self.calls.append(("time", time))
        self.time = time


def words(*w: int) -> bytes:
    return b"".join(x.to_bytes(4, "little") for x in w)


def image(start: int, data: bytes) -> MemoryMap:
    return MemoryMap([MemoryRegion(start, data, MemSpace.ANY)])


def flow(elems: list[Element]) -> list[tuple[str, int, int]]:
    """The ranges (start, count), unreadable addresses and timestamps, in order."""
    out: list[tuple[str, int, int]] = []
    for e in elems:
        if isinstance(e, InstrRange):
            out.append(("range", e.start, e.num_instr))
        elif isinstance(e, AddrNacc):
            out.append(("nacc", e.address, 0))
        elif isinstance(e, Timestamp):
            out.append(("time", e.timestamp, 0))
    return out


# -- ETMv4 ---------------------------------------------------------------------------------

NOP64, RET64 = 0xD503201F, 0xD65F03C0


def etmv4_decode(data: bytes, memory: ClockedMemory) -> list[Element]:
    cfg = Etmv4Config(
        configr=0, traceidr=0x10, idr0=0x28000EA1, idr2=0x00000488, idr8=0, core_name="Cortex-A53"
    )
    ctx = DecodeContext(cfg.trace_id, DecodeOptions(), memory)
    packets = etmv4.iter_packets(Stream(cfg.trace_id, data), cfg, True)
    return list(etmv4.iter_elements(packets, cfg, ctx))


def test_etmv4_time_moves_after_the_packet_of_the_timestamp() -> None:
    mem = ClockedMemory(
        image(0x1000, words(NOP64, NOP64, RET64)), image(0x1000, words(NOP64, RET64))
    )
    data = (
        enc.a_sync()
        + enc.trace_info(0)
        + enc.trace_on()
        + enc.address_context(0x1000, el=1, sf=True, ns=True, context_id=0x42)
        + enc.atom("E")  # before the timestamp: 3 instructions to the RET
        + enc.timestamp(SWITCH)  # held until the next packet resolves it
        + enc.address_long(0x1000)
        + enc.atom("E")  # resolved with the timestamp: still the old code
        + enc.address_long(0x1000)
        + enc.atom("E")  # a later packet: the new code, 2 instructions
    )
    elems = etmv4_decode(data, mem)
    assert flow(elems) == [
        ("range", 0x1000, 3),
        ("time", SWITCH, 0),
        ("range", 0x1000, 3),
        ("range", 0x1000, 2),
    ]
    assert mem.calls == [("context", 0x42), ("time", SWITCH)]


# -- PTM -----------------------------------------------------------------------------------

NOP32, BX_LR = 0xE320F000, 0xE12FFF1E


def test_ptm_time_moves_with_the_timestamp_element() -> None:
    mem = ClockedMemory(image(0x8000, words(NOP32, NOP32, BX_LR)), image(0x8000, words(BX_LR)))
    cfg = PtmConfig(trace_id=0x10, etmcr=(1 << 28) | (3 << 14), core="Cortex-A15")
    data = (
        encode_async()
        + encode_isync(0x8000, Isa.A32, context_id=0x77, ctxt_id_bytes=4)
        + encode_atoms([True])
        + ptm_timestamp(SWITCH)
        + encode_isync(0x8000, Isa.A32, context_id=0x77, ctxt_id_bytes=4)
        + encode_atoms([True])
    )
    ctx = DecodeContext(0x10, DecodeOptions(), mem)
    packets = ptm.iter_packets(Stream.from_chunks(0x10, [(0, data)]), cfg, True)
    elems = list(ptm.iter_elements(packets, cfg, ctx))
    assert flow(elems) == [("range", 0x8000, 3), ("time", SWITCH, 0), ("range", 0x8000, 1)]
    assert ("time", SWITCH) in mem.calls and mem.calls[0] == ("context", 0x77)


# -- ETMv3 ---------------------------------------------------------------------------------


def test_etmv3_time_moves_when_the_timestamp_leaves_the_ring() -> None:
    thumb_nops = bytes([0x00, 0xBF] * 16)
    mem = ClockedMemory(image(0x1000, thumb_nops), MemoryMap())  # no code from SWITCH on
    cfg = Etmv3Config(
        ctrl=0x10000860 | (1 << 28) | (3 << 14), ccer=0x344008F2, idr=0x410CF250, traceidr=0x10
    )
    data = (
        b"\x00\x00\x00\x00\x00\x80"
        + v3_isync(0x1000, Isa.T32, context_id=0x5, ctxt_bytes=4)
        + bytes([0x84])  # one E atom
        + v3_timestamp(SWITCH)
        + bytes([0x84])  # after the timestamp: nothing mapped
    )
    ctx = DecodeContext(0x10, DecodeOptions(), mem)
    packets = etmv3.iter_packets(Stream(0x10, data), cfg, True)
    elems = list(etmv3.iter_elements(packets, cfg, ctx))
    assert flow(elems) == [("range", 0x1000, 1), ("time", SWITCH, 0), ("nacc", 0x1002, 0)]
    assert mem.calls == [("context", 0x5), ("time", SWITCH)]
