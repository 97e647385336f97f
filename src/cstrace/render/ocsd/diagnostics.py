"""Decoder diagnostics in the words of the reference decoder's error log.

Input: a :class:`~cstrace.elements.Diagnostic` and the protocol of the source
that produced it; output: the line OpenCSD's error logger writes for the same
problem, e.g.::

    DCD_ETMV4_0016 : 0x001a (OCSD_ERR_COMMIT_PKT_OVERRUN) [Overrun in commit packet
    stack - tried to commit more than available]; TrcIdx=1234; CS ID=10; Not enough
    elements to commit

(one line). ``trc_pkt_lister`` prints it without a newline, so it runs into the
next line of the listing; :func:`cstrace.render.ocsd.listing_lines` does the same.
The words, including the reference's spelling, are kept so that listings compare.
"""

from __future__ import annotations

from cstrace.elements import Diagnostic
from cstrace.errors import DiagCode, DiagKind
from cstrace.protocols import get_protocol
from cstrace.protocols.etmv4.packets import PacketType as Etmv4Packet
from cstrace.protocols.ptm.packets import PtmPacketType

__all__ = ["diagnostic_text"]

# The reference's name and description of each error class (``ocsd_err_t``).
_CODES: dict[DiagCode, tuple[str, str]] = {
    DiagCode.NONE: ("OCSD_OK", "No Error."),
    DiagCode.NOT_INIT: ("OCSD_ERR_NOT_INIT", "Component not initialised."),
    DiagCode.BAD_PACKET_SEQ: ("OCSD_ERR_BAD_PACKET_SEQ", "Bad packet sequence"),
    DiagCode.UNSUPPORTED_ISA: ("OCSD_ERR_UNSUPPORTED_ISA", "ISA not supported in decoder"),
    DiagCode.HW_CFG_UNSUPP: (
        "OCSD_ERR_HW_CFG_UNSUPP",
        "Programmed trace configuration not supported by decodUer.",
    ),
    DiagCode.UNSUPP_DECODE_PKT: ("OCSD_ERR_UNSUPP_DECODE_PKT", "Packet not supported in decoder"),
    DiagCode.BAD_DECODE_PKT: ("OCSD_ERR_BAD_DECODE_PKT", "Reserved or unknown packet in decoder."),
    DiagCode.COMMIT_PKT_OVERRUN: (
        "OCSD_ERR_COMMIT_PKT_OVERRUN",
        "Overrun in commit packet stack - tried to commit more than available",
    ),
    DiagCode.RET_STACK_OVERFLOW: (
        "OCSD_ERR_RET_STACK_OVERFLOW",
        "Internal return stack overflow checks failed - popped more than we pushed.",
    ),
}

# Reference decoders whose diagnostics are worded apart (ProtocolSpec.reference_decoder).
_PTM = "DCD_PTM"
_ETMV3 = "DCD_ETMV3"

_ETMV4_BAD = {
    int(Etmv4Packet.BAD_SEQUENCE): "Bad byte sequence in packet.",
    int(Etmv4Packet.BAD_TRACEMODE): "Invalid packet type for trace mode.",
    int(Etmv4Packet.RESERVED): "Reserved packet header",
}
_PTM_PACKET = {
    int(PtmPacketType.BRANCH_ADDRESS): "BranchAddr",
    int(PtmPacketType.WAYPOINT_UPDATE): "WP update",
}


def _reason(decoder: str, diag: Diagnostic) -> str:
    """The reference's explanation after the error class, as the reference ``decoder``
    (``DCD_PTM``...) words it."""
    kind = diag.kind
    if kind == DiagKind.COMMIT_SHORT:
        return "Not enough elements to commit"
    if kind == DiagKind.CANCEL_SHORT:
        return "Not enough elements to cancel"
    if kind == DiagKind.MISPREDICT_NO_ATOM:
        return "Not found mispredict atom"
    if kind == DiagKind.RETURN_STACK_OVERFLOW:
        if decoder == _PTM:
            return "Return stack error processing atom packet."
        return "Trace Return Stack Overflow."
    if kind == DiagKind.EXCEPTION_NO_ADDRESS:
        return "Address missing in exception packet."
    if kind == DiagKind.Q_NO_ADDRESS:
        return "Address missing in Q packet."
    if kind == DiagKind.UNSUPPORTED_ISA:
        what = _PTM_PACKET.get(diag.detail, "atom")
        return f"Warning: unsupported instruction set processing {what} packet."
    if kind == DiagKind.DATA_TRACE:
        if decoder == _ETMV3:
            return "Invalid packet type : Data Tracing decode not supported."
        return "Data trace related, unsupported packet type."
    if kind == DiagKind.BAD_PACKET:
        if decoder == _ETMV3:
            return "Reserved or unknown packet ID."
        return _ETMV4_BAD.get(diag.detail, "Unknown packet type.")
    if kind == DiagKind.BAD_SEQUENCE:
        if decoder == _ETMV3:
            return "Bad Packet sequence."
        return _ETMV4_BAD.get(diag.detail, "Unknown packet type.")
    if kind == DiagKind.NO_CONFIG:
        return "No decoder configuration information"
    # cstrace's own notes (the reference waits for synchronisation instead).
    if kind == DiagKind.UNSYNCED_START:
        return (
            "Decoded before any synchronisation packet; "
            f"packet boundaries certain from TrcIdx={diag.detail}."
        )
    if kind == DiagKind.UNSYNCED_AMBIGUOUS:
        return "Decoded before any synchronisation packet; packet boundaries uncertain."
    if kind == DiagKind.SYNC_WAIT:
        return f"{diag.detail} bytes of packets skipped waiting for synchronisation."
    if kind == DiagKind.SPEC_DEPTH_EXCEEDED:
        return f"Trace info speculation depth {diag.detail} beyond the maximum (TRCIDR8)."
    return kind.name.replace("_", " ").capitalize()  # pragma: no cover - every kind is above


def diagnostic_text(protocol: str, diag: Diagnostic) -> str:
    """The reference's log line for ``diag`` from a source of ``protocol`` (``etmv4``...)."""
    tid = diag.trace_id
    name, text = _CODES.get(diag.code, (f"OCSD_ERR_{diag.code.name}", diag.code.name))
    spec = get_protocol(protocol)
    decoder = spec.reference_decoder if spec is not None else ""
    decoder = decoder or "DCD_" + protocol.upper()
    head = f"{decoder}_{tid:04d} : "
    head += f"0x{int(diag.code):04x} ({name}) [{text}]; "
    if diag.kind == DiagKind.NO_CONFIG:
        # Logged before any packet is decoded: no index, no trace ID.
        return head + _reason(decoder, diag)
    return f"{head}TrcIdx={diag.offset}; CS ID={tid:02x}; {_reason(decoder, diag)}"
