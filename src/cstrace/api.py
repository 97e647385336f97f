"""The short way in: open a trace and iterate its decoded elements.

Input: a path to a DS-5 snapshot (folder or ``snapshot.ini``), a trace package
(folder or ZIP), a raw capture, or a :class:`~cstrace.trace.Trace` opened with
:func:`open_trace`; output: ``(trace ID, element)`` pairs, buffer by buffer and
source by source::

    import cstrace

    for trace_id, elem in cstrace.iter_elements("path/to/snapshot"):
        match elem:
            case cstrace.InstrRange(start=start, end=end):
                print(f"{trace_id:#x}: {start:#x}-{end:#x}")
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from cstrace.decode import Session
from cstrace.elements import Element
from cstrace.inputs import Extras, RawOptions, open_input
from cstrace.protocols import DecodeOptions
from cstrace.trace import Trace

__all__ = ["iter_elements", "open_trace"]


def open_trace(
    path: str | Path,
    *,
    images: Sequence[str] = (),
    memory: Sequence[str] = (),
    events: str | Path | None = None,
    contextidr: str | None = None,
    capture_format: str | None = None,
    metadata: str | Path | None = None,
    protocols: Sequence[str] = (),
    cores: Sequence[str] = (),
    registers: Sequence[str] = (),
    settings: Sequence[str] = (),
    trace_id: int | None = None,
) -> Trace:
    """Open a snapshot, a trace package (folder or ZIP) or a raw capture for decoding.

    The keyword arguments are the command line's options, in the same syntax
    (docs/usage.md): ``images`` (``FILE`` or ``FILE@BASE``), ``memory``
    (``FILE@ADDRESS``), ``events`` (an event log) and ``contextidr`` (``pid`` or
    ``asid``) add to any trace; ``capture_format``, ``metadata``, ``protocols``
    (``[ID=]NAME``), ``cores`` (``[ID=]TYPE``), ``registers`` (``[ID:]NAME=VALUE``)
    and ``settings`` (``[ID:]ITEM=VALUE``) describe a raw capture, which is any
    file that is not an ini file or a ZIP; ``trace_id`` labels a single-source
    one. What a raw capture's program-flow sources need and nobody gave is
    inferred from the trace (``Trace.inferred`` says what and how surely).
    """
    extras = Extras(list(images), list(memory), None if events is None else str(events), contextidr)
    raw = RawOptions(
        capture_format,
        None if metadata is None else str(metadata),
        list(protocols),
        list(cores),
        list(registers),
        list(settings),
        trace_id,
    )
    return open_input(path, extras, raw)


def iter_elements(
    trace: str | Path | Trace,
    buffers: Sequence[str] | None = None,
    *,
    src_addr_n: bool = False,
    decode_before_sync: bool = True,
) -> Iterator[tuple[int, Element]]:
    """Decode ``trace`` and yield ``(trace ID, element)`` for every element.

    ``buffers`` names the trace buffers to decode, in order (default: all, in
    trace.ini order). Each trace ID's elements come in the order they were
    decoded; trace IDs follow one another. ``decode_before_sync`` (ITM and
    STM): decode what comes before the first synchronisation packet where
    packet boundaries can be told from the bytes; False waits for
    synchronisation, as the reference decoder does.
    """
    opened = trace if isinstance(trace, Trace) else open_trace(trace)
    options = DecodeOptions(src_addr_n=src_addr_n, decode_before_sync=decode_before_sync)
    session = Session(opened, options)
    names = list(buffers) if buffers is not None else [b.name for b in opened.buffers]
    for name in names:
        for run in session.open_buffer(opened.buffer(name)).runs:
            tid = run.trace_id
            for elem in run.elements():
                yield tid, elem
