"""The short way in: open a trace and iterate its decoded elements.

Input: a path to a DS-5 snapshot (folder or ``snapshot.ini``), a trace package
(folder or ZIP), a perf.data recording, a raw capture, or a
:class:`~cstrace.trace.Trace` opened with :func:`open_trace`; output:
``(trace ID, element)`` pairs, buffer by buffer and source by source
(:func:`iter_elements_with_context` adds who ran each: CPU, process, thread)::

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
from cstrace.execution import tracker_for
from cstrace.inputs import Extras, RawOptions, SymbolPaths, open_input
from cstrace.protocols import DecodeOptions
from cstrace.trace import ExecContext, Trace

__all__ = ["iter_elements", "iter_elements_with_context", "open_trace"]


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
    symdirs: Sequence[str | Path] = (),
    symfs: str | Path | None = None,
    buildid_dir: str | Path | None = None,
    vmlinux: str | Path | None = None,
    kcore: str | Path | None = None,
) -> Trace:
    """Open a snapshot, a trace package (folder or ZIP), a perf.data recording or a raw
    capture for decoding.

    The keyword arguments are the command line's options, in the same syntax
    (docs/usage.md): ``images`` (``FILE`` or ``FILE@BASE``), ``memory``
    (``FILE@ADDRESS``), ``events`` (an event log) and ``contextidr`` (``pid`` or
    ``asid``) add to any trace; ``capture_format``, ``metadata``, ``protocols``
    (``[ID=]NAME``), ``cores`` (``[ID=]TYPE``), ``registers`` (``[ID:]NAME=VALUE``)
    and ``settings`` (``[ID:]ITEM=VALUE``) describe a raw capture, which is any
    file that is not an ini file or a ZIP; ``trace_id`` labels a single-source
    one. What a raw capture's program-flow sources need and nobody gave is
    inferred from the trace (``Trace.inferred`` says what and how surely).
    ``symdirs`` (searched recursively), ``symfs`` (the traced system's root)
    and ``buildid_dir`` (perf's build-ID cache, default ``~/.debug``) say
    where the programs a recording or an event log names are, found by build
    ID and name (``--symdir``, ``--symfs``, ``--buildid-dir``); ``vmlinux`` is
    the kernel image of a recording (``--vmlinux``), ``kcore`` the kernel text
    ``perf record --kcore`` copied (``--kcore``; a ``perf record --kcore``
    folder's own is used without it).
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
    symbols = SymbolPaths(
        tuple(str(d) for d in symdirs),
        None if symfs is None else str(symfs),
        None if buildid_dir is None else str(buildid_dir),
        vmlinux=None if vmlinux is None else str(vmlinux),
        kcore=None if kcore is None else str(kcore),
    )
    return open_input(path, extras, raw, symbols)


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
    for run in session.runs(buffers):
        tid = run.trace_id
        for elem in run.elements():
            yield tid, elem


def iter_elements_with_context(
    trace: str | Path | Trace,
    buffers: Sequence[str] | None = None,
    *,
    src_addr_n: bool = False,
    decode_before_sync: bool = True,
) -> Iterator[tuple[int, Element, ExecContext]]:
    """Like :func:`iter_elements`, with who ran each element: ``(trace ID, element, context)``.

    The :class:`~cstrace.trace.ExecContext` gives the CPU, process and thread
    (None where the input does not say; a perf.data recording says all three):
    the source's CPU, the process and thread the buffer began with, then those
    each ``PE_CONTEXT`` names (:mod:`cstrace.execution`). The same object is
    given for as long as nothing changes.
    """
    opened = trace if isinstance(trace, Trace) else open_trace(trace)
    options = DecodeOptions(src_addr_n=src_addr_n, decode_before_sync=decode_before_sync)
    session = Session(opened, options)
    for run in session.runs(buffers):
        tid = run.trace_id
        update = tracker_for(session, run).update
        for elem in run.elements():
            yield tid, elem, update(elem)
