"""What the trace lost: hand-made traces with known overflows, bad packets and missing code.

Each trace is built with the protocol's encoder (single-source buffers, so the
capture offset of a byte is its position; one test frames it, and checks the
offsets against the OpenCSD listing), decoded through a watched
:class:`~cstrace.decode.SourceRun`, and the :class:`~cstrace.analyses.LossReport`
must give the counts and offsets the trace was made with.
"""

from __future__ import annotations

import json
import re
from typing import get_args

import pytest

import cstrace
from cstrace.analyses import LossCounter, LossReport, SourceLoss, loss_report
from cstrace.analyses.loss import group_addresses
from cstrace.capture.encode import format_frames
from cstrace.elements import Isa, MemSpace
from cstrace.protocols import all_protocols
from cstrace.protocols.base import LossCategory
from cstrace.protocols.etmv3 import encoder as e3
from cstrace.protocols.etmv4 import encoder as e4
from cstrace.protocols.itm import packets as itm
from cstrace.protocols.itm.encoder import encode_packets as itm_bytes
from cstrace.protocols.ptm import encoder as pe
from cstrace.protocols.ptm.packets import ISyncReason
from cstrace.protocols.stm.encoder import StmMessage, encode_messages, pack_nibbles
from cstrace.render.loss import loss_lines
from cstrace.render.ocsd import listing_lines
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"


def words(*ws: int) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in ws)


# A64 at 0x1000: nop; nop; b.eq 0x1018; bl 0x102c; ... 0x1018: nop; ret; 0x102c: nop; ret
NOP64, RET64 = 0xD503201F, 0xD65F03C0
A64 = words(NOP64, NOP64, 0x54000080, 0x94000008, NOP64, NOP64, NOP64, RET64)
A64 += words(NOP64, NOP64, NOP64, NOP64, RET64)
# A32 at 0x1000: nop; nop; b 0x1010; nop; 0x1010: nop; bx lr
MOV = 0xE1A00000
A32 = words(MOV, MOV, 0xEA000000, MOV, MOV, 0xE12FFF1E)

ETMV4_REGS = {
    "TRCCONFIGR": 0x1,
    "TRCTRACEIDR": 0x10,
    "TRCIDR0": 0x28000EA1,
    "TRCIDR1": 0x4100F403,
    "TRCIDR2": 0x00000488,
    "TRCIDR8": 0,
}


def one_source(
    protocol: str,
    regs: dict[str, int],
    data: bytes,
    *,
    core: str = "",
    code: bytes | None = None,
    fmt: str = "source_data",
) -> cstrace.Trace:
    """A trace of one source in one buffer, with ``code`` at 0x1000 if given."""
    source = cstrace.Source("SRC_0", protocol, protocol.upper(), regs, ("raw",), core=core)
    buffer = cstrace.Buffer("raw", fmt, (cstrace.BytesBlob(data),))
    dumps = [cstrace.Dump(cstrace.BytesBlob(code), 0x1000)] if code is not None else []
    return cstrace.Trace([buffer], [source], dumps=dumps)


def only(report: LossReport) -> SourceLoss:
    assert len(report.sources) == 1, report
    return report.sources[0]


def at(pieces: list[bytes], index: int) -> int:
    """The offset of piece ``index`` in the concatenation of ``pieces``."""
    return sum(len(p) for p in pieces[:index])


# -- ETMv4: an overflow, a reserved header, code outside the image -----------------------------


def etmv4_pieces() -> list[bytes]:
    ctxt = {"el": 1, "sf": True, "ns": True}
    return [
        e4.a_sync(),  # 0: synchronisation
        e4.trace_info(0),
        e4.trace_on(),
        e4.timestamp(0x1000),
        e4.address_context(0x1000, **ctxt),
        e4.atom("EE"),
        e4.address_long(0x1010),
        e4.atom("E"),
        e4.overflow(),  # 8: an overflow
        e4.a_sync(),  # 9: synchronisation
        e4.trace_info(0),
        e4.address_context(0x9000, **ctxt),  # no image there
        e4.atom("E"),
        e4.address_long(0x9400),  # nor there (the same range)
        e4.atom("E"),
        e4.address_long(0x4000_0000),  # nor there (another range)
        e4.atom("E"),
        b"\x08",  # 17: a reserved header
        e4.a_sync(),  # 18: synchronisation
        e4.trace_info(0),
        e4.timestamp(0x2000),
        e4.address_context(0x1000, **ctxt),
        e4.atom("E"),
    ]


def test_etmv4_counts_and_offsets() -> None:
    pieces = etmv4_pieces()
    data = b"".join(pieces)
    trace = one_source("etmv4", ETMV4_REGS, data, core="Cortex-A53", code=A64)
    loss = only(loss_report(trace))
    packets = list(cstrace.Session(trace).open_buffer(trace.buffers[0]).runs[0].packets())
    elements = [e for _, e in cstrace.iter_elements(trace)]

    assert (loss.buffer, loss.source, loss.protocol, loss.trace_id) == (
        "raw",
        "SRC_0",
        "etmv4",
        0x10,
    )
    assert loss.bytes == len(data)
    assert loss.packets == len(packets)
    assert loss.elements == len(elements)
    assert loss.syncs.offsets == [at(pieces, 0), at(pieces, 9), at(pieces, 18)]
    assert loss.unsynced_bytes == 0
    assert loss.overflows.count == 1
    assert loss.overflows.first[0].offset == at(pieces, 8)
    assert loss.overflows.first[0].what == "OVERFLOW"
    # the reader's bad packet and the decoder's diagnostic about it count once
    assert [(o.offset, o.what) for o in loss.bad_packets.first] == [(at(pieces, 17), "RESERVED")]
    # resynchronisations: after the overflow, and at the next packet after the bad one
    assert [(o.offset, o.what) for o in loss.resyncs.first] == [
        (at(pieces, 8), "OVERFLOW"),
        (at(pieces, 18), "BAD_PACKET"),
    ]
    assert loss.truncated.count == 0 and not loss.diagnostics and loss.stopped_at is None
    assert (loss.timestamps, loss.first_timestamp, loss.last_timestamp) == (2, 0x1000, 0x2000)
    assert loss.nacc == 3 and loss.unreached_ranges == 2
    near, far = loss.unreached
    assert (near.start, near.last, near.hits, near.first_offset) == (
        0x9000,
        0x9400,
        2,
        at(pieces, 12),
    )
    assert near.mem_space == MemSpace.EL1N
    assert (far.start, far.last, far.hits) == (0x4000_0000, 0x4000_0000, 1)
    assert loss.lost_anything


def test_offsets_are_capture_offsets_in_formatted_buffers() -> None:
    """In CoreSight frames, offsets are those of the listing's packet lines."""
    pieces = etmv4_pieces()
    frames = format_frames([(0x10, b"".join(pieces))])
    trace = one_source("etmv4", ETMV4_REGS, frames, core="Cortex-A53", code=A64, fmt="coresight")
    counter = LossCounter()
    run = counter.watch(cstrace.Session(trace).open_buffer(trace.buffers[0]).runs[0])
    listing = list(listing_lines(run))
    loss = only(counter.report())

    def idx(mnemonic: str) -> list[int]:
        pattern = re.compile(r"Idx:(\d+); ID:10; \[[^\]]*\];\s*" + mnemonic + r"\b")
        return [int(m.group(1)) for line in listing for m in pattern.finditer(line)]

    assert loss.syncs.offsets == idx("I_ASYNC")
    assert loss.overflows.offsets == idx("I_OVERFLOW")
    assert loss.bad_packets.offsets == idx("I_RESERVED")
    assert loss.bytes == len(b"".join(pieces)) and loss.nacc == 3


def test_watching_changes_nothing_in_the_output() -> None:
    trace = cstrace.open_trace(EXAMPLES / "etm_demo")
    plain = cstrace.Session(trace)
    watched = cstrace.Session(trace)
    counter = LossCounter()
    for buffer in trace.buffers:
        for a, b in zip(
            plain.open_buffer(buffer).runs, watched.open_buffer(buffer).runs, strict=True
        ):
            assert list(listing_lines(a)) == list(listing_lines(counter.watch(b)))
    assert [s.trace_id for s in counter.report().sources] == [0x10, 0x20]
    batches = [counter.watch(r) for r in cstrace.Session(trace).open_buffer(trace.buffers[0]).runs]
    assert sum(len(b) for b in batches[0].batches()) == counter.report().sources[2].elements


# -- ITM: overflow packets and a reserved header -----------------------------------------------


def test_itm_overflows_and_reserved_header() -> None:
    pieces = [
        itm_bytes([itm.Async(0, b"")]),  # 0
        itm_bytes([itm.Swit(0, b"", 1, 0x41, 1)]),
        itm_bytes([itm.Overflow(0, b"")]),  # 2
        itm_bytes([itm.Swit(0, b"", 1, 0x42, 1)]),
        itm_bytes([itm.LocalTs(0, b"", 0, 5, 1)]),
        itm_bytes([itm.LocalTs(0, b"", 0, 3, 1)]),
        itm_bytes([itm.Overflow(0, b"")]),  # 6
        itm_bytes([itm.Swit(0, b"", 2, 0x4344, 2)]),
        b"\x44",  # 8: reserved: the reader and the decoder stop there
        itm_bytes([itm.Swit(0, b"", 1, 0x45, 1)]),
    ]
    data = b"".join(pieces)
    loss = only(loss_report(one_source("itm", {"ITMTCR": 0x10 << 16}, data)))
    assert loss.bytes == len(data)
    assert loss.syncs.offsets == [0]
    assert loss.overflows.offsets == [at(pieces, 2), at(pieces, 6)]
    assert [(o.offset, o.what) for o in loss.bad_packets.first] == [(at(pieces, 8), "RESERVED")]
    # no global timestamp: the local ones (deltas summed by the decoder) give the span
    assert (loss.timestamps, loss.first_timestamp, loss.last_timestamp) == (2, 5, 8)
    assert loss.timestamp_clock == "local"
    assert loss.stopped_at is None  # the reader stopped with the decoder


# -- STM: error packets; a decoder that refuses its configuration (ETMv3) ----------------------


def test_stm_error_packets_count_as_overflows() -> None:
    msgs = [StmMessage(0x40, 1, 0x11 + i, 32, False, 0x100 + i) for i in range(3)]
    good = encode_messages(msgs)
    merr = pack_nibbles([0x2, 0x0, 0x1, 0x0])  # MERR 0x10, then a NULL
    data = good + merr + good
    loss = only(loss_report(one_source("stm", {"STMTCSR": 0x20 << 16}, data)))
    assert loss.overflows.count == 1 and loss.overflows.first[0].what == "MERR"
    assert loss.overflows.first[0].offset == len(good)
    assert loss.syncs.offsets == [0, len(good) + len(merr)]
    assert (loss.timestamps, loss.first_timestamp, loss.last_timestamp) == (6, 0x100, 0x102)
    assert not loss.bad_packets.count and not loss.resyncs.count


def test_a_decoder_that_stops_early_leaves_packets_counted() -> None:
    """ETMv3 with data tracing: the decoder (as the reference) stops at the first packet."""
    pieces = [e3.encode_async(), e3.encode_isync(0x1000, Isa.A32), e3.encode_phdr("EEEE")]
    data = b"".join(pieces)
    regs = {"ETMCR": 0x10000004, "ETMCCER": 0x344008F2, "ETMIDR": 0x410CF250, "ETMTRACEIDR": 0x21}
    trace = one_source("etmv3", regs, data, core="Cortex-A7", code=A32)
    loss = only(loss_report(trace))
    assert loss.diagnostics["NO_CONFIG"].offsets == [0]
    assert loss.stopped_at == at(pieces, 1)
    assert loss.undecoded_packets == 2
    assert loss.undecoded_bytes == len(pieces[1]) + len(pieces[2])
    assert loss.packets == 3 and loss.bytes == len(data)
    lines = loss_lines(LossReport((loss,)))
    why = "(the decoder stops at a packet it cannot decode)"
    assert f"  decoding stopped at {at(pieces, 1)} {why}: 2 packets" in "\n".join(lines)
    assert "  decoder diagnostic no config: 1 at 0" in lines


def test_a_ptm_decoder_that_stops_leaves_packets_counted() -> None:
    """PTM with the return stack on: an E atom on an indirect branch with nothing pushed
    stops the decoder (as the reference does); the packets after it are counted as not
    decoded, on the element path that reads and decodes in one loop too."""
    code = words(MOV, MOV, 0xEA000000, MOV, MOV, 0xE12FFF1E)  # b +8, then bx lr
    pieces = [
        pe.encode_async(),
        pe.encode_isync(0x1000, Isa.A32, ISyncReason.TRACE_ON),
        pe.encode_atoms([True]),  # b
        pe.encode_atoms([True]),  # bx lr: the stack is empty
        pe.encode_atoms([True]),
        pe.encode_atoms([False]),
    ]
    regs = {"ETMCR": 1 << 29, "ETMCCER": 1 << 23, "ETMIDR": 0x411CF301, "ETMTRACEIDR": 0x10}
    trace = one_source("ptm", regs, b"".join(pieces), core="Cortex-A15", code=code)
    loss = only(loss_report(trace))
    assert loss.diagnostics["RETURN_STACK_OVERFLOW"].offsets == [at(pieces, 3)]
    assert loss.stopped_at == at(pieces, 4)
    assert (loss.undecoded_packets, loss.undecoded_bytes, loss.packets) == (2, 2, 6)


# -- PTM: an overflow told by an I-sync --------------------------------------------------------


def test_ptm_overflow_from_isync_reason() -> None:
    pieces = [
        pe.encode_async(),
        pe.encode_isync(0x1000, Isa.A32),
        pe.encode_atoms([True, False]),
        pe.encode_async(),
        pe.encode_isync(0x1000, Isa.A32, ISyncReason.OVERFLOW),  # 4: trace restarted
        pe.encode_atoms([True]),
    ]
    regs = {"ETMCR": 0x10000000, "ETMCCER": 0x34C01AC2, "ETMIDR": 0x411CF312, "ETMTRACEIDR": 0x13}
    trace = one_source("ptm", regs, b"".join(pieces), core="Cortex-A15", code=A32)
    loss = only(loss_report(trace))
    assert [(o.offset, o.what) for o in loss.overflows.first] == [(at(pieces, 4), "TRACE_ON")]
    assert loss.syncs.offsets == [0, at(pieces, 3)]
    assert loss.nacc == 0 and loss.lost_anything


def test_bytes_before_sync_and_a_packet_cut_by_the_end() -> None:
    pieces = [
        b"\x11\x22\x33",  # not synchronised yet
        e4.a_sync(),
        e4.trace_info(0),
        e4.address_context(0x1000, el=1, sf=True, ns=True),
        e4.atom("E"),
        e4.address_long(0x1010)[:4],  # cut by the end of the trace
    ]
    data = b"".join(pieces)
    trace = one_source("etmv4", ETMV4_REGS, data, core="Cortex-A53", code=A64)
    loss = only(loss_report(trace))
    assert loss.unsynced_bytes == 3 and loss.syncs.offsets == [3]
    assert [(o.offset, o.what) for o in loss.truncated.first] == [(at(pieces, 5), "INCOMPLETE_EOT")]
    assert loss.bad_packets.count == 0  # the decoder's diagnostic about it is not another one
    assert loss.bytes == len(data)
    text = "\n".join(loss_lines(LossReport((loss,))))
    assert "not synchronised: 3 bytes" in text and "cut by the end of the trace: 1" in text


# -- pieces ------------------------------------------------------------------------------------


def test_address_ranges() -> None:
    seen = {0x1000: [2, 50, 2], 0x1800: [1, 10, 4], 0x20_0000: [1, 70, 2], 0x10: [3, 90, 1]}
    got = group_addresses(seen, gap=0x1000)
    assert [(r.start, r.last, r.hits, r.first_offset, int(r.mem_space)) for r in got] == [
        (0x10, 0x1800, 6, 10, 7),
        (0x20_0000, 0x20_0000, 1, 70, 2),
    ]
    assert group_addresses({}) == []


def test_every_counted_packet_class_has_a_known_category() -> None:
    categories = set(get_args(LossCategory))
    counted_by = {p.name: p for p in all_protocols() if p.loss_packets}
    # the protocols whose packets the report counts (the classic ETMs: elements only)
    assert set(counted_by) == {"etmv4", "ete", "ptm", "etmv3", "stm", "itm", "dcc"}
    for protocol in counted_by.values():
        classes = {cls for cls, _, _ in protocol.loss_packets}
        for cls, category, _ in protocol.loss_packets:
            assert isinstance(cls, type), (protocol.name, cls)
            assert category in categories, (protocol.name, cls, category)
        assert {cls for cls, _ in protocol.reader_stops} <= classes, protocol.name


def test_a_clean_trace_says_nothing_was_lost() -> None:
    report = loss_report(cstrace.open_trace(EXAMPLES / "etm_demo"))
    etm, stm = report.sources
    assert not etm.lost_anything and not stm.lost_anything
    assert (etm.bytes, stm.bytes) == (102, 34)  # as cstrace info detects them
    text = loss_lines(report)
    # every byte of the capture: the two sources' 136, padding and the frames' own bytes
    assert text[0] == (
        "buffer ETB_0 (coresight): 160 bytes: 136 trace data decoded, 8 padding (trace ID "
        "0x00), 16 frame ID and flag bytes"
    )
    assert (
        text[1] == "buffer ETB_0, trace ID 0x10 (ETM_0, etmv4): 102 bytes, 23 packets, 31 elements"
    )
    assert "lost: nothing" in text[-1]
    json.dumps(report.to_dict())


@pytest.mark.parametrize(
    ("name", "packet_level", "sync_packets"),
    [("dcc", True, False), ("etmv1_etb", False, False), ("xscale", False, False)],
)
def test_protocols_without_sync_packets(name: str, packet_level: bool, sync_packets: bool) -> None:
    loss = only(loss_report(cstrace.open_trace(EXAMPLES / "classic" / name)))
    assert (loss.packet_level, loss.sync_packets) == (packet_level, sync_packets)
    assert loss.bytes > 0 and loss.packets > 0 and not loss.lost_anything
    assert not any(line.startswith("  synchronisation") for line in loss_lines(LossReport((loss,))))
