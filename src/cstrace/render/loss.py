"""What the trace lost, as text: the summary of ``cstrace decode`` and ``cstrace info``.

Input: a :class:`~cstrace.analyses.loss.LossReport`; output: text lines, one
heading per trace source and indented lines for what it gave and lost::

    buffer ETB_0, trace ID 0x10 (ETM_0, etmv4): 102 bytes, 23 packets, 31 elements
      synchronisation: 1 at 0
      timestamps: 3, first 0x1250, last 0x18f0
      lost: nothing (no overflow, bad packet, resynchronisation or missing code)

Offsets are capture indices (the ``Idx`` of the listings), in decimal;
addresses and timestamps are in hexadecimal. JSON comes from the report's own
``to_dict()``.
"""

from __future__ import annotations

from cstrace.analyses.loss import (
    CaptureAccount,
    LossReport,
    NotDecoded,
    Occurrence,
    Occurrences,
    SourceLoss,
)
from cstrace.render.spaces import mem_space_name

__all__ = ["capture_line", "loss_lines", "not_decoded_line", "occurrences_text", "source_lines"]


def _words(name: str) -> str:
    """``BAD_PACKET`` -> ``bad packet``."""
    return name.lower().replace("_", " ")


def occurrences_text(occ: Occurrences, *, kinds: bool = True) -> str:
    """``3 at 10, 20 and 30``; with ``kinds``, each one's ``what`` in brackets (once
    when they are all the same)."""
    if not occ.count:
        return "none"
    if not kinds:
        occ = Occurrences(occ.count, tuple(Occurrence(o.offset) for o in occ.first))
    kinds_seen = {o.what for o in occ.first}
    same = len(kinds_seen) == 1
    places = [
        f"{o.offset}" if same or not o.what else f"{o.offset} ({_words(o.what)})" for o in occ.first
    ]
    head = f"{occ.count}"
    if same and next(iter(kinds_seen)):
        head += f" ({_words(next(iter(kinds_seen)))})"
    if occ.more:
        places.append(f"{occ.more} more")
    if len(places) == 1:
        listed = places[0]
    else:
        listed = ", ".join(places[:-1]) + " and " + places[-1]
    return f"{head} at {listed}"


def source_lines(loss: SourceLoss) -> list[str]:
    """The lines for one trace source of one buffer."""
    out = [
        f"buffer {loss.buffer}, trace ID {loss.trace_id:#x} ({loss.source}, {loss.protocol}): "
        f"{loss.bytes} bytes, {loss.packets} packets, {loss.elements} elements"
    ]
    add = out.append
    if not loss.bytes and not loss.packets:
        out[0] += ": no trace for this source"
        return out
    if loss.sync_packets:
        add(f"  synchronisation: {occurrences_text(loss.syncs)}")
    if loss.packet_level:
        if loss.unsynced_bytes:
            add(
                f"  not synchronised: {loss.unsynced_bytes} bytes not decoded (before the "
                "first synchronisation, or while looking for the next)"
            )
    if loss.sync_wait_bytes:
        waits = occurrences_text(loss.sync_waits, kinds=False)
        add(
            f"  skipped waiting for synchronisation: {loss.sync_wait_bytes} bytes of packets "
            f"read but not decoded (waits: {waits})"
        )
    if loss.idle_bytes:
        add(f"  idle: {loss.idle_bytes} bytes of 0x00 in long runs skipped (no trace)")
    if loss.overflows.count:
        add(f"  overflows: {occurrences_text(loss.overflows)}")
    if loss.bad_packets.count:
        add(f"  bad packets: {occurrences_text(loss.bad_packets)}")
    if loss.resyncs.count:
        add(f"  resynchronisations: {occurrences_text(loss.resyncs)}")
    if loss.truncated.count:
        add(f"  cut by the end of the trace: {occurrences_text(loss.truncated)}")
    for kind, occ in loss.diagnostics.items():
        # the reference's error code (``what``) is in the JSON; the kind says more
        add(f"  decoder diagnostic {_words(kind)}: {occurrences_text(occ, kinds=False)}")
    if loss.stopped_at is not None:
        why = f" ({loss.stopped_why})" if loss.stopped_why else ""
        if loss.undecoded_packets:
            after = f"{loss.undecoded_packets} packets ({loss.undecoded_bytes} bytes)"
        else:
            after = f"{loss.undecoded_bytes} bytes"
        add(f"  decoding stopped at {loss.stopped_at}{why}: {after} after it not decoded")
    if loss.timestamps:
        clock = " (local)" if loss.timestamp_clock == "local" else ""
        add(
            f"  timestamps{clock}: {loss.timestamps}, first {loss.first_timestamp or 0:#x}, "
            f"last {loss.last_timestamp or 0:#x}"
        )
    else:
        add("  timestamps: none")
    if loss.nacc:
        add(
            f"  no memory image: {loss.nacc} ADDR_NACC elements at code addresses in "
            f"{loss.unreached_ranges} range(s) (add an image that covers them: --image, --memory):"
        )
        for r in loss.unreached:
            where = f"{r.start:#x}" if r.start == r.last else f"{r.start:#x}-{r.last:#x}"
            times = "1 time" if r.hits == 1 else f"{r.hits} times"
            space = f"  {mem_space_name(int(r.mem_space))}" if r.mem_space else ""
            add(f"    {where}  {times}, first at {r.first_offset}{space}")
        if loss.unreached_ranges > len(loss.unreached):
            add(f"    and {loss.unreached_ranges - len(loss.unreached)} more range(s)")
    if not loss.lost_anything:
        add("  lost: nothing (no overflow, bad packet, resynchronisation or missing code)")
    return out


def not_decoded_line(entry: NotDecoded) -> str:
    """One line for a source or trace ID that was not decoded."""
    who = f"trace ID {entry.trace_id:#x}" if entry.trace_id is not None else "a source"
    if entry.source:
        who += f" ({entry.source})"
    size = f": {entry.bytes} bytes" if entry.bytes is not None else ""
    return f"buffer {entry.buffer}, {who}{size}, not decoded: {entry.reason}"


def capture_line(c: CaptureAccount) -> str:
    """Where the bytes of one formatted capture went, in one line."""
    parts = [f"{c.decoded} trace data decoded"]
    for size, what in (
        (c.unsourced, "on trace IDs with no source (below)"),
        (c.padding, "padding (trace ID 0x00)"),
        (c.overhead, "frame ID and flag bytes"),
        (c.no_id, "before the first ID byte (no trace ID)"),
        (c.after_stop, "after the frame where decoding stops"),
        (c.trailing, "after the last whole frame"),
    ):
        if size:
            parts.append(f"{size} {what}")
    return f"buffer {c.buffer} ({c.format}): {c.size} bytes: " + ", ".join(parts)


def loss_lines(report: LossReport, *, issues: bool = True) -> list[str]:
    """The whole report: each source, then what was not decoded, then the problems met
    (with ``issues`` False, only how many: the command line printed them as they came)."""
    # Per buffer, in order: where its bytes went, its sources, the IDs not decoded.
    order: list[str] = []
    for name in [c.buffer for c in report.captures] + [s.buffer for s in report.sources]:
        if name not in order:
            order.append(name)
    out: list[str] = []
    for name in order:
        out.extend(capture_line(c) for c in report.captures if c.buffer == name)
        for loss in report.sources:
            if loss.buffer == name:
                out.extend(source_lines(loss))
        out.extend(_not_decoded_lines([e for e in report.not_decoded if e.buffer == name]))
    out.extend(_not_decoded_lines([e for e in report.not_decoded if e.buffer not in order]))
    if issues:
        for issue in report.issues:
            label = "error" if issue.is_error else "warning"
            out.append(f"{label}: {issue}")
    elif report.issues:
        errors = sum(1 for i in report.issues if i.is_error)
        warnings = len(report.issues) - errors
        out.append(f"issues: {_count(errors, 'error')} and {_count(warnings, 'warning')} (above)")
    return out


_LISTED_IDS = 8
"""Trace IDs with no source listed one by one per buffer (the largest); the rest in a sum."""


def _not_decoded_lines(entries: list[NotDecoded]) -> list[str]:
    """One line per entry, the trace IDs with no source beyond the largest few summed up."""
    sized = [e for e in entries if e.trace_id is not None and e.bytes is not None]
    if len(sized) <= _LISTED_IDS:
        return [not_decoded_line(e) for e in entries]
    keep = sorted(sized, key=lambda e: -(e.bytes or 0))[:_LISTED_IDS]
    rest = [e for e in sized if e not in keep]
    out = [not_decoded_line(e) for e in entries if e not in rest]
    total = sum(e.bytes or 0 for e in rest)
    out.append(
        f"buffer {rest[0].buffer}: {len(rest)} more trace IDs with no source: {total} bytes, "
        "not decoded"
    )
    return out


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"
