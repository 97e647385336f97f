"""ETE packets on hand-made bytes: the ETE-only packets and the ETMv4 ones ETE changes.

Layouts from the Arm ARM chapter D5 (ETE protocol); listing text as the
reference lister prints it for ETE sources.
"""

from __future__ import annotations

from cstrace.capture.stream import Stream
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.etmv4.packets import (
    AddressMatch,
    Async,
    BadPacket,
    Context,
    Etmv4Packet,
    Exception_,
    Instrumentation,
    PacketType,
    SourceAddress,
    SourceAddressMatch,
    TimestampMarker,
    TraceInfo,
    TransCommit,
    TransStart,
)
from cstrace.protocols.etmv4.reader import iter_packets
from cstrace.render.ocsd.ete import packet_text

P = PacketType


def ete(devarch: int = 0x47735A13, idr0: int = 0x28C1CEA1) -> Etmv4Config:
    """An ETE configuration (ETE 1.3 by default: TRCDEVARCH REVISION = 3)."""
    return Etmv4Config(
        configr=0x8001,
        traceidr=0x1,
        idr0=idr0,
        idr1=0x4100FFF0,
        idr2=0xD0001088,
        devarch=devarch,
        core_name="ARM-AA64",
    )


def after_sync(data: bytes, cfg: Etmv4Config | None = None) -> list[Etmv4Packet]:
    stream = Stream.from_chunks(1, [(0, enc.a_sync() + enc.trace_info() + data)])
    pkts = list(iter_packets(stream, cfg or ete(), True))
    assert isinstance(pkts[0], Async) and isinstance(pkts[1], TraceInfo)
    return pkts[2:]


def one(data: bytes, cfg: Etmv4Config | None = None) -> Etmv4Packet:
    pkts = after_sync(data, cfg)
    assert len(pkts) == 1 and pkts[0].raw == data, pkts
    return pkts[0]


def test_version_from_devarch() -> None:
    cfg = ete()
    assert (cfg.major_version, cfg.minor_version, cfg.full_version) == (5, 3, 0x53)
    assert cfg.is_ete and cfg.version_text == "ETE v1.3"


def test_trace_info_shows_transactional_state() -> None:
    ti = one(enc.trace_info(info=0x40))
    assert isinstance(ti, TraceInfo) and ti.in_trans_state
    assert packet_text(ti) == "I_TRACE_INFO : Trace Info.; INFO=0x40 { CC.0, TSTATE.1 }"


def test_transactions() -> None:
    assert isinstance(one(enc.trans_start()), TransStart)
    assert isinstance(one(enc.trans_commit()), TransCommit)
    assert packet_text(one(enc.trans_start())) == "I_TRANS_ST : Transaction Start."


def test_transaction_failure_and_pe_reset() -> None:
    # ETE: exception types 0x18 and 0 are three bytes long and push address 0
    fail = one(b"\x06\x30\x00")
    assert isinstance(fail, Exception_) and fail.kind == P.TRANS_FAIL
    assert packet_text(fail) == "I_TRANS_FAIL : Transaction Fail."
    pkts = after_sync(enc.address_long(0x1000, 0, True) + b"\x06\x00\x00" + enc.exact_match(0))
    assert isinstance(pkts[1], Exception_) and pkts[1].kind == P.PE_RESET
    assert isinstance(pkts[2], AddressMatch) and pkts[2].address == 0


def test_exception_return_is_reserved_in_ete() -> None:
    bad = one(enc.exception_return())
    assert isinstance(bad, BadPacket) and (bad.kind, bad.err_kind) == (P.RESERVED_CFG, P.EXCEPT_RTN)
    assert packet_text(bad) == (
        "I_RESERVED_CFG : Reserved header for current configuration.[I_EXCEPT_RTN]"
    )


def test_instrumentation_needs_ete_1_3() -> None:
    ite = one(enc.instrumentation(1, 0xFFFFF))
    assert isinstance(ite, Instrumentation) and (ite.el, ite.value) == (1, 0xFFFFF)
    assert packet_text(ite) == "I_ITE : Instrumentation; EL1; Payload=0xfffff"
    pkts = after_sync(enc.instrumentation(1, 5), ete(devarch=0x47705A13))
    assert isinstance(pkts[0], BadPacket) and pkts[0].kind == P.RESERVED


def test_source_addresses() -> None:
    data = enc.source_address_long(0x606C4, 0, False)
    data += enc.source_address_short(0x7E348, 0, True)
    data += enc.source_exact_match(1)
    pkts = after_sync(data)
    assert isinstance(pkts[0], SourceAddress) and pkts[0].address == 0x606C4
    assert packet_text(pkts[0]) == (
        "I_SCR_ADDR_L_32IS0 : Source Address, Long, 32 bit, IS0.; Addr=0x00000000000606C4; "
    )
    assert isinstance(pkts[1], SourceAddress) and pkts[1].address == 0x7E348
    assert packet_text(pkts[1]) == (
        "I_SRC_ADDR_S_IS0 : Source Address, Short, IS0.; Addr=0x000000000007E348 ~[0x1E348]"
    )
    assert isinstance(pkts[2], SourceAddressMatch) and pkts[2].address == 0x606C4


def test_timestamp_marker() -> None:
    m = one(enc.timestamp_marker())
    assert isinstance(m, TimestampMarker)
    assert packet_text(m) == "I_TS_MARKER : Timestamp Marker"


def test_context_security_state_with_nse() -> None:
    c = one(enc.context(2, True, True, nse=True))
    assert isinstance(c, Context) and c.nse and c.ns
    assert packet_text(c) == "I_CTXT : Context Packet.; Ctxt: AArch64,EL2, Realm; "


def test_ete_vmid_is_32_bits() -> None:
    # TRCIDR2.VMIDSIZE = 4 gives a 32-bit VMID for ETE (version above 4.0)
    cfg = ete()
    assert cfg.vmid_size == 32 and cfg.cid_size == 32
    c = one(enc.context(1, True, True, vmid=0x12345678, vmid_bytes=4))
    assert isinstance(c, Context) and c.vmid == 0x12345678
