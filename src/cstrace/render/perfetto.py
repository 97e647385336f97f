"""A timeline as a Perfetto trace: the protobuf the Perfetto UI and trace processor read.

Input: a :class:`cstrace.analyses.timeline.Timeline`; output: ``TracePacket``
messages of Perfetto's trace schema (the ``perfetto`` package's protobuf
classes), written one by one with its ``StreamingTraceProtoBuilder``:

- one ``TrackDescriptor`` per track (a child track names its parent; a
  counter track has a ``CounterDescriptor``), its description saying which
  clock its times are in;
- ``TrackEvent`` slices as ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` pairs,
  properly nested, instants as ``TYPE_INSTANT`` and counter values as
  ``TYPE_COUNTER``, with their category and their values as debug
  annotations; events in time order on one packet sequence.

This is the one binary output of :mod:`cstrace.render`; it needs the
``perfetto`` package (``pip install perfetto``).
"""

from __future__ import annotations

from typing import Any, BinaryIO

from cstrace.analyses.timeline import Args, Slice, Timeline
from cstrace.errors import CstraceError

__all__ = ["SEQUENCE_ID", "perfetto_events", "write_perfetto"]

SEQUENCE_ID = 1
"""The ``trusted_packet_sequence_id`` of every packet written."""

_BEGIN, _END, _INSTANT, _COUNTER = 1, 2, 3, 4
_INT64_MAX = (1 << 63) - 1


def _builder(out: BinaryIO) -> Any:
    try:
        from perfetto.trace_builder.proto_builder import (  # type: ignore[import-untyped]
            StreamingTraceProtoBuilder,
        )
    except ImportError:
        raise CstraceError(
            "writing a Perfetto trace needs the perfetto package (pip install perfetto)"
        ) from None
    return StreamingTraceProtoBuilder(out)


Event = tuple[int, int, int, str, str, Args, int]
"""(time, kind, track, name, category, args, counter value) of one track event."""


def _slice_events(slices: list[Slice]) -> list[Event]:
    """Begin and end events of the slices of one track, given parents first (by start,
    longer first), each end clamped so that no event goes back in time."""
    out: list[Event] = []
    stack: list[Slice] = []

    def close(until: int | None) -> None:
        top = stack.pop()
        end = top.end if until is None else min(top.end, until)
        if out and end < out[-1][0]:
            end = out[-1][0]
        out.append((end, _END, top.track, "", "", (), 0))

    for s in slices:
        while stack and not (stack[-1].start <= s.start and s.end <= stack[-1].end):
            close(s.start)
        stack.append(s)
        out.append((s.start, _BEGIN, s.track, s.name, s.category, s.args, 0))
    while stack:
        close(None)
    return out


def perfetto_events(timeline: Timeline) -> list[Event]:
    """Every track event of ``timeline``, in time order (slices nested per track)."""
    per_track: dict[int, list[Slice]] = {}
    for s in timeline.slices:
        per_track.setdefault(s.track, []).append(s)
    events: list[Event] = []
    for slices in per_track.values():
        events.extend(_slice_events(slices))
    events.extend(
        (i.at, _INSTANT, i.track, i.name, i.category, i.args, 0) for i in timeline.instants
    )
    events.extend((c.at, _COUNTER, c.track, "", "", (), c.value) for c in timeline.counters)
    events.sort(key=lambda e: e[0])  # stable: each track's order is kept at equal times
    return events


def _annotate(event: Any, args: Args) -> None:
    for key, value in args:
        ann = event.debug_annotations.add()
        ann.name = key
        if isinstance(value, str):
            ann.string_value = value
        elif isinstance(value, float):
            ann.double_value = value
        else:
            ann.int_value = value


def write_perfetto(timeline: Timeline, out: BinaryIO) -> int:
    """Write ``timeline`` to ``out`` as a Perfetto trace; returns the packets written."""
    builder = _builder(out)
    count = 0
    for track in timeline.tracks:
        packet = builder.create_packet()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        if count == 0:
            packet.sequence_flags = 1  # SEQ_INCREMENTAL_STATE_CLEARED
        desc = packet.track_descriptor
        desc.uuid = track.uid
        desc.name = track.name
        desc.description = track.description
        if track.parent is not None:
            desc.parent_uuid = track.parent
        if track.counter:
            desc.counter.SetInParent()
        builder.write_packet(packet)
        count += 1
    for at, kind, track_uid, name, category, args, value in perfetto_events(timeline):
        packet = builder.create_packet()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        packet.timestamp = at
        event = packet.track_event
        event.type = kind
        event.track_uuid = track_uid
        if kind == _COUNTER:
            if value > _INT64_MAX:
                event.double_counter_value = float(value)
            else:
                event.counter_value = value
        elif kind != _END:
            event.name = name
            event.categories.append(category)
            _annotate(event, args)
        builder.write_packet(packet)
        count += 1
    return count
