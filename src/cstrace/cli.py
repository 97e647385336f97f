"""The ``cstrace`` command line.

``cstrace decode INPUT`` decodes the trace buffers of an input and writes
the decoded elements (``--format text``, the default), the OpenCSD-compatible
listing of packets and elements (``--format ocsd``) or JSON Lines
(``--format jsonl``). ``cstrace profile INPUT...`` sums the executed ranges and
branches of one or more inputs per program binary and writes them for AutoFDO,
llvm-profgen, BOLT or as perf script branch stacks. Bad input gives one line on
stderr naming the file and line or offset, and exit status 2.
"""

from __future__ import annotations

import argparse
import gc
import io
import itertools
import os
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from cstrace import __version__, compiled
from cstrace.errors import CstraceError, Issue, IssueKind, Severity, SnapshotError

# The rest of cstrace is imported by the commands that use it: `cstrace --help`, `--version`
# and a small decode start without loading the analyses, pyelftools or the other input adapters.
if TYPE_CHECKING:
    from cstrace.analyses.loss import LossCounter, LossReport, SourceLoss
    from cstrace.analyses.profile import Profile
    from cstrace.decode import Session, SourceRun
    from cstrace.elements import Element
    from cstrace.execution import ContextTracker
    from cstrace.inputs import SymbolPaths
    from cstrace.parallel import ParallelDecode, RunWork
    from cstrace.parquet import ParquetSink
    from cstrace.protocols import DecodeOptions, ProtocolSpec
    from cstrace.split import SplitPlan
    from cstrace.trace import Buffer, Trace

__all__ = ["main"]

_FORMATS = ("text", "ocsd", "jsonl", "null", "parquet")
_PROFILE_FORMATS = ("autofdo", "profgen", "bolt", "perf-script")
_COVERAGE_FORMATS = ("lcov", "cobertura", "html", "text")
_CALL_FORMATS = ("functions", "callgrind", "folded", "flamegraph")


def add_input_options(dec: argparse.ArgumentParser) -> None:
    """Options for packages, program images and raw captures (metadata requirements §5, §6)."""
    mem = dec.add_argument_group("program images and address spaces")
    mem.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="FILE[@BASE]",
        help="an ELF (or raw binary) program image, at its link address or with its first "
        "loadable segment at BASE (repeatable)",
    )
    mem.add_argument(
        "--memory",
        action="append",
        default=[],
        metavar="FILE@ADDRESS",
        help="raw memory contents at ADDRESS (repeatable)",
    )
    mem.add_argument("--events", metavar="LOG", help="system event log (docs/metadata.md)")
    mem.add_argument(
        "--symdir",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder (searched recursively) holding the programs and libraries a recording "
        "or an event log names, found by build ID and file name (repeatable)",
    )
    mem.add_argument(
        "--symfs",
        metavar="ROOT",
        help="a folder the traced system's files are under: ROOT/path/of/the/file",
    )
    mem.add_argument(
        "--vmlinux",
        metavar="FILE",
        help="the kernel image of a recording (an ELF vmlinux), used when its build ID is "
        "the recorded one",
    )
    mem.add_argument(
        "--kcore",
        metavar="FILE",
        help="the kernel text a recording's perf record --kcore copied (kcore_dir/kcore, an ELF "
        "core file; a perf record --kcore folder's own is used without this option)",
    )
    mem.add_argument(
        "--buildid-dir",
        metavar="DIR",
        help="perf's build-ID cache (default: $PERF_BUILDID_DIR or ~/.debug)",
    )
    mem.add_argument(
        "--contextidr",
        choices=("pid", "asid", "tid", "vmid"),
        help="how CONTEXTIDR names the process: pid (bits 8..31), asid (bits 0..7, mapped by "
        "declare_asid events), tid (bits 0..31) or vmid (the VMID does: CONTEXTIDR_EL2 "
        "traced, a kernel at EL2)",
    )
    raw = dec.add_argument_group(
        "raw captures (INPUT is a trace file with no metadata)",
        "ID is a trace ID (0x10); without it an option applies to every source.",
    )
    raw.add_argument(
        "--capture-format",
        choices=("coresight", "dstream_coresight", "tpiu", "source_data"),
        help="do not guess the capture format",
    )
    raw.add_argument("--metadata", metavar="FILE", help="INI trace metadata for the capture")
    raw.add_argument(
        "--protocol",
        action="append",
        default=[],
        metavar="[ID=]NAME",
        help="protocol of a source: etmv4, ete, ptm, etmv3, stm, itm or a format such as "
        "ETM4.2; ID=none leaves that trace ID out",
    )
    raw.add_argument(
        "--core", action="append", default=[], metavar="[ID=]TYPE", help="core type (Cortex-A53)"
    )
    raw.add_argument(
        "--trace-id",
        type=_int_arg,
        metavar="ID",
        help="the trace ID that labels a single-source capture (its data does not carry one)",
    )
    raw.add_argument(
        "--reg",
        action="append",
        default=[],
        metavar="[ID:]NAME=VALUE",
        help="a register value of a trace source (TRCCONFIGR=0x1)",
    )
    raw.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="[ID:]ITEM=VALUE",
        help="an individual option of a trace source (cyclecount=1, context_id=32)",
    )


def open_from_args(args: argparse.Namespace, path: str | None = None) -> Trace:
    """The snapshot, package or raw capture named on the command line (or ``path``), with
    extra files."""
    from cstrace.inputs import Extras, RawOptions, open_input

    extras = Extras(args.image, args.memory, args.events, args.contextidr)
    raw = RawOptions(
        args.capture_format,
        args.metadata,
        list(args.protocol or []),
        list(args.core or []),
        list(args.reg or []),
        list(args.set or []),
        args.trace_id,
    )
    return open_input(args.snapshot if path is None else path, extras, raw, symbol_paths(args))


def symbol_paths(args: argparse.Namespace) -> SymbolPaths:
    """Where ``--symdir``, ``--symfs``, ``--buildid-dir`` and ``--vmlinux`` say to look for
    images."""
    from cstrace.inputs import SymbolPaths

    return SymbolPaths(
        tuple(getattr(args, "symdir", None) or ()),
        getattr(args, "symfs", None),
        getattr(args, "buildid_dir", None),
        vmlinux=getattr(args, "vmlinux", None),
        kcore=getattr(args, "kcore", None),
    )


def _int_arg(text: str) -> int:
    """An integer option value, decimal or ``0x`` hexadecimal."""
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _warn(issues: Iterable[Issue], err: TextIO) -> None:
    for issue in issues:
        label = "error" if issue.is_error else "warning"
        print(f"cstrace: {label}: {issue}", file=err)


def package_command(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace package INPUT OUTPUT.zip`` (with the input options of ``decode``)."""
    from cstrace.inputs import write_package

    trace = open_from_args(args)
    summary = write_package(trace, args.output)
    _warn([*trace.issues, *summary.warnings], err)
    print(
        f"wrote {summary.output}: {summary.buffers} buffer(s), {summary.sources} trace "
        f"source(s), {summary.files} file(s), {summary.bytes} bytes"
    )
    return 0


def _info_loss(
    args: argparse.Namespace,
    path: Path,
    streams: list[tuple[int | None, int]],
    opened: Trace | None = None,
) -> None:
    """The loss report of ``cstrace info``: decode the input and say what it lost.

    ``opened`` is the trace when it was opened already. A raw capture whose
    configuration is not known gets, per trace ID (``streams``: ID and bytes),
    its size and why it was not decoded.
    """
    from cstrace.analyses.loss import LossReport, NotDecoded, loss_report
    from cstrace.inputs import is_raw_capture
    from cstrace.render.loss import loss_lines

    try:
        report = loss_report(opened if opened is not None else open_from_args(args, str(path)))
    except CstraceError as exc:
        if not is_raw_capture(path):
            raise
        # Decode what can be: each trace ID on its own, the others left out.
        parts: list[LossReport] = []
        for tid, size in streams:
            alone = argparse.Namespace(**vars(args))
            others = [f"{t:#x}=none" for t, _ in streams if t != tid and t is not None]
            alone.protocol = [*(args.protocol or []), *others]
            try:
                if tid is None:
                    raise exc
                parts.append(loss_report(open_from_args(alone, str(path))))
            except CstraceError as why:
                gone = NotDecoded(path.name, f"cannot be configured: {why}", tid, bytes=size)
                parts.append(LossReport(not_decoded=(gone,)))
        # A trace ID decoded on its own in one part has no source in the others: it is
        # listed once, as decoded or with the reason it could not be configured.
        decoded = {(s.buffer, s.trace_id) for p in parts for s in p.sources}
        failed = [n for p in parts for n in p.not_decoded if n.reason.startswith("cannot be")]
        explained = decoded | {(n.buffer, n.trace_id) for n in failed}
        listed = failed + [
            n
            for p in parts
            for n in p.not_decoded
            if n not in failed and (n.buffer, n.trace_id) not in explained
        ]
        report = LossReport(
            tuple(s for p in parts for s in p.sources),
            tuple(dict.fromkeys(listed)),
            tuple(i for p in parts for i in p.issues),
        )
    print("what the trace lost (decoded):")
    for line in loss_lines(report):
        print(f"  {line}")


def _perf_info(args: argparse.Namespace, path: Path) -> int:
    """``cstrace info`` of a perf.data recording: what it holds, then what its trace lost."""
    from cstrace.inputs import read_recording
    from cstrace.render.perfinfo import perf_info_lines

    for line in perf_info_lines(read_recording(path, symbol_paths(args))):
        print(line)
    if not args.no_decode:
        _info_loss(args, path, [])
    return 0


def info_command(args: argparse.Namespace) -> int:
    """``cstrace info FILE``: print what was detected in a capture, snapshot or package."""
    from cstrace.inputs import detect_capture, is_perf_data, is_raw_capture, open_trace_input

    path = Path(args.file)
    if not path.exists():
        raise SnapshotError("no such file or folder", path=str(path))
    if is_perf_data(path):
        return _perf_info(args, path)
    items: list[tuple[str, bytes]] = []
    if not is_raw_capture(path):
        trace = open_trace_input(path)
        for b in trace.buffers:
            names = ", ".join(f.name for f in b.files)
            items.append((f"buffer {b.name} ({names})", b.read()))
    else:
        try:
            items.append((str(path), path.read_bytes()))
        except OSError as exc:
            raise SnapshotError(f"cannot read: {exc.strerror}", path=str(path)) from None
    streams: list[tuple[int | None, int]] = []
    for title, data in items:
        guess = detect_capture(data, args.capture_format)
        streams = [(g.trace_id, g.size) for g in guess.identified]
        print(f"{title}: {guess.size} bytes")
        print(f"  format: {guess.format} (confidence {guess.confidence:.2f}): {guess.evidence}")
        for name, score in guess.alternatives:
            print(f"  alternative: {name} (score {score:.2f})")
        ids = [g for g in guess.streams if g.family is not None]
        if guess.format != "source_data":
            listed = ", ".join(f"{g.trace_id:#04x}" for g in ids) or "none"
            print(f"  trace IDs with a recognised protocol: {listed}")
        for g in guess.streams:
            if g.family is None and guess.format != "source_data" and g.size < 64:
                continue
            tid = "single source" if g.trace_id is None else f"trace ID {g.trace_id:#04x}"
            print(
                f"  {tid}: {g.size} bytes: {g.protocol} (confidence {g.confidence:.2f}): "
                f"{g.evidence}"
            )
        quiet = [g for g in guess.streams if g.family is None and g.size < 64]
        if quiet and guess.format != "source_data":
            print(
                f"  {len(quiet)} other ID(s) with under 64 bytes and no sync "
                f"({sum(g.size for g in quiet)} bytes; noise or unused buffer space)"
            )
    opened = _print_configuration(args) if is_raw_capture(path) else None
    if not args.no_decode:
        _info_loss(args, path, streams, opened)
    return 0


def _print_configuration(args: argparse.Namespace) -> Trace | None:
    """The configuration of each source of a raw capture: given, or inferred and how surely.

    Returns the trace opened (None when it cannot be), for the loss report to decode.
    """
    from cstrace.inputs.metadata import trace_id_of

    try:
        trace = open_from_args(args, args.file)
    except CstraceError as exc:
        print(f"  configuration: not found: {exc}")
        return None
    inferred = {i.trace_id: i for i in trace.inferred}
    for source in trace.sources:
        tid = trace_id_of(source)
        got = inferred.get(tid) if tid is not None else None
        label = "single source" if tid is None else f"trace ID {tid:#04x}"
        if got is None:
            print(f"  {label}: configuration given: {source.source_type}")
            continue
        print(
            f"  {label}: configuration inferred (confidence {got.confidence:.2f}): "
            f"{got.label or got.protocol + ' on ' + got.core}"
        )
        print(f"    decoded as {got.protocol} on {got.core}: " + ", ".join(
            f"{k}={v}" for k, v in got.settings.items()))  # fmt: skip
        for line in got.undecided:
            print(f"    undecided: {line}")
        if got.same:
            print("    does not matter (other values decode the same): " + "; ".join(got.same))
        print(f"    evidence: {got.evidence}")
    return trace


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cstrace",
        description="Decode ARM CoreSight trace (ETMv4/ETE, PTM, ETMv3, STM, ITM).",
    )
    mode = "compiled" if compiled() else "pure Python"  # see cstrace._native
    parser.add_argument("--version", action="version", version=f"cstrace {__version__} ({mode})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    dec = sub.add_parser(
        "decode",
        help="decode the trace of a snapshot, package, perf.data recording or raw capture",
        description=(
            "Decode every trace buffer of INPUT, one after another in the order its "
            "metadata gives (a snapshot's trace.ini, a package's contents, a recording's "
            "AUX data), or only the buffers given with --buffer, and write the decoded "
            "elements."
        ),
    )
    dec.add_argument(
        "snapshot",
        nargs="+",
        metavar="INPUT",
        help="snapshot folder (or its snapshot.ini), trace package (folder or ZIP), perf.data "
        "recording, or a raw trace capture; with several, -o names a folder that gets one "
        "output per input",
    )
    dec.add_argument(
        "-b",
        "--buffer",
        action="append",
        metavar="NAME",
        help="decode only this trace buffer (repeatable; decoded in the order given)",
    )
    dec.add_argument(
        "-f",
        "--format",
        choices=_FORMATS,
        default="text",
        help="text: one readable line per element (default); ocsd: packets and elements "
        "in the OpenCSD trc_pkt_lister format; jsonl: one JSON object per element; null: "
        "decode everything and write nothing; parquet: one row per element with typed "
        "columns (needs -o FILE and pyarrow)",
    )
    dec.add_argument(
        "-j",
        "--jobs",
        type=int,
        metavar="N",
        help="decode the trace IDs on N processes, a long ETMv4/ETE stream cut into N pieces "
        "at synchronisation points, the output identical to a serial decode "
        "(default: the number of CPUs, for captures of 256 KiB or more; 1: serial)",
    )
    dec.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="decode each input as a task on the Dask distributed scheduler at ADDRESS "
        "(needs -o: a folder, shared with the workers)",
    )
    dec.add_argument(
        "--no-packets",
        action="store_true",
        help="with --format ocsd, list decoded elements only",
    )
    dec.add_argument(
        "--no-summary",
        action="store_true",
        help="leave out the summary of what the trace lost (on stderr; with --format jsonl, "
        'the closing {"summary": ...} object)',
    )
    dec.add_argument(
        "--no-strings",
        action="store_true",
        help="text and jsonl: give software-trace (STM, ITM, DCC) byte writes one per line, "
        "as decoded, instead of grouping the ones that spell text into strings",
    )
    dec.add_argument(
        "--src-addr-n",
        action="store_true",
        help="ETE: split source-address instruction ranges at N atoms",
    )
    dec.add_argument(
        "--before-sync",
        choices=("decode", "wait"),
        help="ITM and STM: decode the packets before the first synchronisation packet where "
        "packet boundaries can be told from the bytes (decode), or wait for synchronisation "
        "as OpenCSD does (wait). Default: wait with --format ocsd, decode otherwise",
    )
    dec.add_argument(
        "--etmcr",
        type=lambda t: int(t, 0),
        metavar="VALUE",
        help="ETMv1/ETMv2: the ETM control register (port size and mode, data and context "
        "ID tracing) when the snapshot has none",
    )
    dec.add_argument(
        "--start-pc",
        type=lambda t: int(t, 0),
        metavar="ADDR",
        help="XScale: where tracing started (bit 0 set for Thumb), for a fill-once buffer",
    )
    dec.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    add_input_options(dec)

    pkg = sub.add_parser(
        "package",
        help="write a snapshot or raw capture as a trace package (ZIP)",
        description=(
            "Write INPUT (a DS-5 snapshot folder, a trace package, or a raw capture with "
            "the options that describe it) as a trace package: a ZIP with contents.ini, the "
            "INI trace metadata, the trace buffers and memory contents, plus any program "
            "images, memory and event log given as options. The package decodes like its "
            "input, with the same buffer names."
        ),
    )
    pkg.add_argument(
        "snapshot",
        metavar="INPUT",
        help="snapshot, package, perf.data recording or raw capture to convert",
    )
    pkg.add_argument("output", metavar="OUTPUT.zip", help="the package file to write")
    add_input_options(pkg)

    info = sub.add_parser(
        "info",
        help="say what a capture, snapshot or package holds",
        description=(
            "Detect, from the bytes alone, whether a capture is CoreSight formatted or a "
            "single source, which trace IDs it holds and the protocol of each, with how "
            "sure the guess is. For a snapshot or package, each buffer is examined. For "
            "a raw capture, the configuration of each program-flow source is inferred "
            "(images and memory given with --image/--memory make it surer) and printed "
            "with its confidence. For a perf.data recording: the trace unit of each CPU, "
            "its AUX data, the processes, and the programs with their build IDs and "
            "whether --symdir/--symfs/--buildid-dir found them."
        ),
    )
    info.add_argument(
        "file", metavar="FILE", help="raw capture, snapshot, package or perf.data recording"
    )
    info.add_argument(
        "--no-decode",
        action="store_true",
        help="detect only: do not decode to say what the trace lost",
    )
    add_input_options(info)

    prof = sub.add_parser(
        "profile",
        help="count executed ranges and branches per binary, for AutoFDO, llvm-profgen or BOLT",
        description=(
            "Decode every input (snapshots, packages, raw captures with --image/--memory; the "
            "input options apply to each) and sum, per program binary, the executed address "
            "ranges and taken branches, in the binary's own addresses. Formats: autofdo (the "
            "text simpleperf inject writes and create_llvm_prof --profiler text reads), "
            "profgen (llvm-profgen's unsymbolized profile), bolt (perf2bolt's pre-aggregated "
            "profile, -pa), perf-script (perf script -F ip,brstack text of the samples perf "
            "inject --itrace=il would make)."
        ),
    )
    prof.add_argument("inputs", nargs="+", metavar="INPUT", help="trace inputs, summed")
    prof.add_argument(
        "-f",
        "--format",
        choices=_PROFILE_FORMATS + _CALL_FORMATS,
        required=True,
        help="the profile format; functions (a table per function and exception: calls, "
        "instructions, time per call), callgrind (for callgrind_annotate and KCacheGrind), "
        "folded (collapsed stacks for flame graphs) and flamegraph (an SVG flame graph) "
        "follow calls and returns, with the symbols of the images",
    )
    prof.add_argument(
        "--table",
        choices=("text", "csv", "json"),
        default="text",
        help="functions: the form of the table (default text)",
    )
    prof.add_argument(
        "--binary",
        metavar="REGEX",
        help="only binaries whose path matches this regular expression",
    )
    prof.add_argument(
        "--period",
        type=int,
        default=100_000,
        metavar="N",
        help="perf-script: an instruction sample every N instructions (default 100000)",
    )
    prof.add_argument(
        "--last-branch",
        type=int,
        default=64,
        metavar="N",
        help="perf-script: branches in each sample's branch stack (default 64)",
    )
    prof.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    prof.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="count each input as a task on the Dask distributed scheduler at ADDRESS and sum "
        "the profiles here (not with perf-script)",
    )
    add_input_options(prof)

    view = sub.add_parser(
        "view",
        help="browse a trace in a web page: instructions, source, data and time",
        description=(
            "Decode the input once and serve a page (on 127.0.0.1) that lists every executed "
            "instruction with its function and source line, and shows the source, the "
            "function's disassembly, the data and software messages near the selected point, "
            "a timeline and what the trace lost. Give program images with --image for "
            "function names and source lines. Stop with Ctrl-C."
        ),
    )
    view.add_argument(
        "snapshot", metavar="INPUT", help="snapshot, package, raw capture or perf.data"
    )
    view.add_argument(
        "--port",
        type=int,
        default=8040,
        metavar="N",
        help="port to serve on (0: any; default 8040)",
    )
    view.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    view.add_argument(
        "--no-open", action="store_true", help="do not open the page in a web browser"
    )
    add_input_options(view)
    _add_timeline_parser(sub)
    _add_query_parser(sub)
    _add_disasm_parser(sub)
    _add_coverage_parser(sub)
    return parser


def view_command(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace view INPUT``: decode once, then serve the viewer page until interrupted."""
    import contextlib
    import importlib.util
    import threading
    import time

    from cstrace.viewer import TraceStore, make_server

    missing = [m for m in ("duckdb", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        print(
            f"cstrace: error: cstrace view needs {' and '.join(missing)}: "
            "pip install 'cstrace[view]'",
            file=err,
        )
        return 2
    # The port first: a busy one is said before a decode that can take minutes.
    try:
        server = make_server(None, args.host, args.port)
    except OSError as exc:
        print(f"cstrace: error: cannot serve on {args.host}:{args.port}: {exc.strerror}", file=err)
        return 2
    with contextlib.ExitStack() as stack:
        stack.callback(server.server_close)
        trace = open_from_args(args)
        _warn(trace.issues, err)
        began = time.perf_counter()
        store = TraceStore.build(
            trace,
            name=str(args.snapshot),
            images=list(args.image or []),
            progress=lambda what: print(f"cstrace: {what}", file=err, flush=True),
        )
        _warn(store.issues, err)
        print(
            f"cstrace: decoded {len(store.batch)} elements ({store.total_rows} rows) in "
            f"{time.perf_counter() - began:.2f} s",
            file=err,
            flush=True,
        )
        server.attach(store)
        stack.pop_all()
    print(f"cstrace view: serving {server.url} (Ctrl-C to stop)", flush=True)
    # The first text search and the timeline need every executed instruction: made now.
    threading.Thread(target=store.warm, daemon=True).start()
    if not args.no_open:
        import webbrowser

        webbrowser.open(server.url)
    # Ctrl-C is how the viewer is stopped: not an interruption.
    with server, contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


def _add_query_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``cstrace query INPUT SQL``."""
    q = sub.add_parser(
        "query",
        help="run SQL (DuckDB) over tables of elements, instructions, functions and messages",
        description=(
            "Decode the input and run one SQL query (DuckDB) over the tables elements "
            "(one row per element; element_types names the type numbers), instructions (one "
            "row per instruction executed, with its function and source line from --image), "
            "functions (calls and instructions per function) and messages (software trace: "
            "strings and values written). Only the tables the query names are built. INPUT "
            "may also be a Parquet file of cstrace decode --format parquet: its rows are the "
            "elements table."
        ),
    )
    q.add_argument("snapshot", metavar="INPUT", help="snapshot, package, recording, capture")
    q.add_argument("sql", metavar="SQL", help="the query")
    q.add_argument(
        "-f",
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="table: aligned columns (default); csv; json: one JSON object per row",
    )
    q.add_argument(
        "-b", "--buffer", action="append", metavar="NAME", help="only this buffer (repeatable)"
    )
    q.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    add_input_options(q)


def _add_timeline_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``cstrace timeline INPUT -o FILE``."""
    tl = sub.add_parser(
        "timeline",
        help="write a Perfetto trace: function calls, exceptions, software-trace messages",
        description=(
            "Decode the input and write a Perfetto trace (protobuf; open it in the Perfetto "
            "UI): a track per trace source with function slices from call/return tracking "
            "(names from the ELF images: --image), exception slices, trace on/off and "
            "overflow markers, software-trace strings as instants and other values written "
            "as counters. Times are the trace's timestamps, else its cycle counts, else "
            "instruction counts (or element order); each track's name says which."
        ),
    )
    tl.add_argument("snapshot", metavar="INPUT", help="snapshot, package, recording or capture")
    tl.add_argument("-o", "--output", metavar="FILE", required=True, help="the trace to write")
    tl.add_argument(
        "-f",
        "--format",
        choices=("perfetto", "svg"),
        help="perfetto: a Perfetto trace (protobuf); svg: a picture of it for a browser. "
        "Default: svg when FILE ends in .svg, else perfetto",
    )
    tl.add_argument(
        "--max-slices",
        type=int,
        default=2_000_000,
        metavar="N",
        help="keep the first N function slices (default 2000000); later calls are counted "
        "in the track's description",
    )
    tl.add_argument(
        "-b",
        "--buffer",
        action="append",
        metavar="NAME",
        help="only this trace buffer (repeatable)",
    )
    add_input_options(tl)


def _options(args: argparse.Namespace) -> DecodeOptions:
    """Decode options from the command line: ``--src-addr-n``, ``--etmcr``, ``--start-pc``,
    ``--before-sync`` (by default, the OpenCSD listing waits for synchronisation as the
    reference does, and the other formats decode what comes before it)."""
    from cstrace.protocols import DecodeOptions

    overrides: dict[str, dict[str, int]] = {}
    given = {o: getattr(args, o) for o in ("etmcr", "start_pc") if getattr(args, o) is not None}
    if given:
        from cstrace.protocols import all_protocols

        for spec in all_protocols():
            for option, register in spec.option_registers:
                if option in given:
                    overrides.setdefault(spec.name, {})[register] = given[option]
    before = args.before_sync or ("wait" if args.format == "ocsd" else "decode")
    return DecodeOptions(
        src_addr_n=args.src_addr_n, overrides=overrides, decode_before_sync=before == "decode"
    )


def _run_lines(
    run: SourceRun, args: argparse.Namespace, tracker: ContextTracker | None
) -> Iterator[str]:
    """The output lines of one run of ``decode`` (none for ``null``: the run is decoded)."""
    tid = run.trace_id
    if args.format == "null":
        # Decoded into the decoder's element rows (cstrace.rows), which nothing writes.
        deque(run.rows(), maxlen=0)
        return
    from cstrace.render.ocsd import listing_lines
    from cstrace.render.text import HEADER, HEADER_CONTEXT, json_line, text_line

    if args.format == "ocsd":
        if tracker is not None:
            run = tracker.watch(run)
        # (in items of many lines: the writer joins them without a frame per line)
        yield from listing_lines(run, packets=not args.no_packets, chunk=_CHUNK)
        yield f"ID:{run.packet_id:x}\tEND OF TRACE DATA"
    elif args.format == "jsonl":
        name = run.buffer.name
        if _strings(args, run.protocol):
            yield from _message_lines(run.elements(), tid, tracker, name)
        elif tracker is None:
            for elem in run.elements():
                yield json_line(tid, elem, name)
        else:
            update = tracker.update
            for elem in run.elements():
                yield json_line(tid, elem, name, update(elem))
    else:
        yield f"# source {run.source.name} ({run.protocol.name}), trace ID {tid:#x}"
        if _strings(args, run.protocol):
            yield HEADER if tracker is None else HEADER_CONTEXT
            yield from _message_lines(run.elements(), tid, tracker)
        elif tracker is None:
            yield HEADER
            for elem in run.elements():
                yield text_line(tid, elem)
        else:
            yield HEADER_CONTEXT
            update = tracker.update
            for elem in run.elements():
                yield text_line(tid, elem, update(elem))


@dataclass(frozen=True, slots=True)
class _RunCounts:
    """What a worker counted while decoding a run: its losses and the addresses that fell in
    images not found (by image name and build ID)."""

    loss: SourceLoss | None
    missing: Counter[tuple[str, str | None]]
    hits: dict[int, list[int]] | None = None
    """For a piece of a run: the code addresses no image covered (to merge its counts)."""


def _merge_counts(parts: Sequence[object], plan: SplitPlan) -> object:
    """The counts of a run cut into pieces (:mod:`cstrace.split`), from its pieces' counts."""
    from cstrace.analyses.loss import merge_losses

    counts = [p for p in parts if isinstance(p, _RunCounts)]
    missing: Counter[tuple[str, str | None]] = Counter()
    for c in counts:
        missing.update(c.missing)
    losses = [(c.loss, c.hits or {}) for c in counts if c.loss is not None]
    return _RunCounts(merge_losses(losses, plan.size) if losses else None, missing)


def _piece_lines(lines: Iterator[str], run: SourceRun, args: argparse.Namespace) -> Iterator[str]:
    """``lines`` of a run, or of a piece of a cut run (:mod:`cstrace.split`): a piece after
    the first leaves out the run's header (text), one that does not end the run its end
    of trace line (listing)."""
    from cstrace.split import piece_of

    piece = piece_of(run)
    if piece is None:
        yield from lines
        return
    if args.format == "text" and not piece.first:
        # "# source ..." and the column header come before any element.
        next(lines, None)
        next(lines, None)
    if args.format != "ocsd":
        yield from lines
        return
    held = next(lines, None)
    for line in lines:
        assert held is not None
        yield held
        held = line
    if held is not None and piece.at_end:
        yield held


def _run_work(args: argparse.Namespace, who: bool, count: bool) -> RunWork:
    """What a worker process does with a run: decode it into a file, return its counts."""
    from cstrace.analyses.loss import LossCounter
    from cstrace.execution import tracker_for
    from cstrace.parallel import watch_progress

    def work(
        session: Session, run: SourceRun, path: str, progress: Callable[[int], None]
    ) -> object:
        run = watch_progress(run, progress)
        counter = LossCounter() if count else None
        if counter is not None:
            run = counter.watch(run)
        tracker = tracker_for(session, run) if who else None
        missing = session.memories.locator().missing if who else None
        before = Counter(missing) if missing is not None else None
        if args.format == "parquet":
            from cstrace.parquet import ParquetSink

            with ParquetSink(path) as sink:
                sink.write_run(run)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as out:
                _write(_piece_lines(_run_lines(run, args, tracker), run, args), out)
        loss = counter.report().sources[0] if counter is not None else None
        grew = missing - before if missing is not None and before is not None else Counter()
        hits = counter.address_hits() if counter is not None else None
        return _RunCounts(loss, grew, hits)

    return work


class _Progress:
    """A progress bar (rich) on stderr for a decode that lasts more than ``delay`` seconds.

    ``sizes[i]`` is the size of run ``i``'s buffer: a run is done when its reader
    has been through it. Nothing is shown before ``delay`` has passed.
    """

    def __init__(self, err: TextIO, sizes: Sequence[int], delay: float = 1.0) -> None:
        import time

        self._clock = time.monotonic
        self._start = self._clock()
        self._err = err
        self._sizes = list(sizes)
        self._total = max(1, sum(self._sizes))
        self._finished = 0
        self._partial: dict[int, int] = {}
        self._delay = delay
        self._bar: Any = None
        self._task: Any = None

    def run(self, index: int) -> Callable[[int], None]:
        """The progress callback of run ``index`` (bytes of its buffer done)."""

        def update(done: int) -> None:
            self.update(index, done)

        return update

    def update(self, index: int, done: int) -> None:
        """Run ``index`` has been through ``done`` bytes of its buffer."""
        self._partial[index] = min(done, self._sizes[index])
        self._show()

    def finished(self, index: int) -> None:
        """Run ``index`` is done."""
        self._partial.pop(index, None)
        self._finished += self._sizes[index]
        self._show()

    def _show(self) -> None:
        if self._bar is None:
            if self._clock() - self._start < self._delay:
                return
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TimeRemainingColumn

            self._bar = Progress(
                "decoding",
                BarColumn(),
                TaskProgressColumn(),
                TimeRemainingColumn(),
                console=Console(file=self._err),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("decode", total=self._total)
        done = self._finished + sum(self._partial.values())
        self._bar.update(self._task, completed=done)

    def close(self) -> None:
        """Take the bar off the terminal."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _plan(trace: Trace, buffers: Sequence[Buffer], options: DecodeOptions) -> list[tuple[int, int]]:
    """(trace ID, buffer size) of every run of a decode, in order; configuration only."""
    from cstrace.decode import Session

    session = Session(trace, options)
    return [(tid, b.size()) for b in buffers for tid in session.run_ids(b)]


def _ids_with_data(trace: Trace, buffers: Sequence[Buffer], args: argparse.Namespace) -> set[int]:
    """The trace IDs of the decode that can have data: those an ETB/ETR capture's frames
    name (one quick pass), every configured one in the other formats. One busy trace ID
    among several configured (``bugfix-exact-match``: one of six) needs no pool."""
    from cstrace.decode import Session

    session = Session(trace, _options(args))
    found: set[int] = set()
    for b in buffers:
        named = session.ids_with_data(b)
        found.update(session.run_ids(b) if named is None else named)
    return found


def _parallel(
    trace: Trace,
    args: argparse.Namespace,
    buffers: Sequence[Buffer],
    plan: Sequence[tuple[int, int]],
    count: bool,
) -> ParallelDecode | None:
    """The pool that decodes the runs with ``--jobs`` (None: decode serially)."""
    jobs = args.jobs
    if jobs is None:
        # By default, only captures where the pool pays for itself.
        if sum({b.name: b.size() for b in buffers}.values()) < 256 * 1024:
            return None
        jobs = os.cpu_count() or 1
    if jobs < 1:
        raise CstraceError(f"--jobs {jobs}: must be at least 1")
    if jobs == 1:
        return None
    # A long run is cut at synchronisation points (not for Parquet, whose row groups
    # would follow the pieces, nor when who ran is followed from element to element).
    # By default only for the listing: for the other formats a cut costs more than it
    # saves (docs/performance.md), but for protocols whose pieces decode as the whole
    # run does (CutPoints.every_format); CSTRACE_SPLIT_MIN asks for cuts in every format.
    split_min = _split_min()
    wanted = args.format == "ocsd" or split_min is not None
    from cstrace.split import cut_in_every_format

    everywhere = not wanted and cut_in_every_format(trace)
    size = split_min if split_min is not None else _SPLIT_MIN if wanted else _SPLIT_MIN_ELEMENTS
    cut = (
        (wanted or everywhere)
        and args.format != "parquet"
        and not trace.has_exec_context
        and any(b.size() >= size for b in buffers)  # (a stream is no longer than its buffer)
    )

    def one_busy_id() -> bool:
        # (asked once at most: the second test is a pass over the capture)
        return len({tid for tid, _ in plan}) < 2 or len(_ids_with_data(trace, buffers, args)) < 2

    if not cut and one_busy_id():
        return None  # one trace ID with data, not cut: no pool to start
    # Imported only now: a serial decode does without multiprocessing.
    from cstrace.parallel import ParallelDecode, can_fork, lanes_of, split_plans

    if not can_fork():
        return None
    splits = {}
    if cut:
        splits = split_plans(trace, buffers, _options(args), jobs, size, not wanted)
        if not splits and one_busy_id():
            return None  # nothing to cut after all, and one trace ID with data
    # None: two runs of one trace ID in a buffer would share a decoder; serial then.
    lanes = lanes_of(trace, buffers, _options(args))
    if lanes is None:
        return None
    reopen = None
    path = Path(args.snapshot)
    from cstrace.inputs.zipfiles import is_zip

    if path.is_file() and is_zip(path):
        # A package keeps its ZIP file open: each worker opens its own.
        def reopen() -> Trace:
            return open_from_args(args)

    return ParallelDecode(
        trace,
        buffers,
        _options(args),
        _run_work(args, trace.has_exec_context, count),
        lanes,
        jobs,
        reopen=reopen,
        splits=splits,
        merge=_merge_counts,
    )


_SPLIT_MIN = 256 * 1024
"""Bytes a run's stream needs to be cut into pieces with ``--jobs``, by default, for the
listing."""
_SPLIT_MIN_ELEMENTS = 4 << 20
"""The same for the other formats, whose decode is several times faster than the
listing: a piece costs a worker's start and a pass over the stream before its cut,
which a stream of a few megabytes does not pay back (docs/performance.md)."""


def _split_min() -> int | None:
    """The environment's ``CSTRACE_SPLIT_MIN`` (bytes a run's stream needs to be cut into
    pieces with ``--jobs``, in every output format but Parquet); None when not set."""
    value = os.environ.get("CSTRACE_SPLIT_MIN", "")
    try:
        return int(value) if value else None
    except ValueError:
        raise CstraceError(f"CSTRACE_SPLIT_MIN={value!r}: not a number of bytes") from None


@dataclass(frozen=True, slots=True)
class _Prepared:
    """The runs of a decode, (trace ID, buffer size) each in order, and the pool that decodes
    them (None: serially)."""

    runs: list[tuple[int, int]]
    pool: ParallelDecode | None


def _prepare(trace: Trace, args: argparse.Namespace, count: bool) -> _Prepared:
    """What a decode will do; a buffer that does not exist gives a serial plan (the decode
    then reports it where a serial decode does)."""
    try:
        buffers = [trace.buffer(n) for n in args.buffer or [b.name for b in trace.buffers]]
    except CstraceError:
        return _Prepared([], None)
    plan = _plan(trace, buffers, _options(args))
    return _Prepared(plan, _parallel(trace, args, buffers, plan, count))


def _lines(
    trace: Trace,
    args: argparse.Namespace,
    err: TextIO,
    errors: list[Issue],
    counter: LossCounter | None = None,
    sink: ParquetSink | None = None,
    prepared: _Prepared | None = None,
) -> Iterator[str]:
    """The output lines of ``decode``; buffer errors are printed and kept in ``errors``.

    With a ``counter``, each run is counted (and JSON Lines end with the summary).
    With ``--format parquet`` the rows go to ``sink``. With ``--jobs``, runs are
    decoded by worker processes and their outputs read back in order.
    """
    from cstrace.decode import Session
    from cstrace.execution import tracker_for

    _warn(trace.issues, err)
    errors.extend(i for i in trace.issues if i.is_error)
    # A recording says who ran: each element then gives its CPU, process and thread.
    who = trace.has_exec_context
    if counter is not None:
        counter.add_issues(trace.issues)
    for inf in trace.inferred:
        if args.format == "jsonl":
            from cstrace.render.text import inferred_line

            yield inferred_line(inf)
        elif args.format == "text":
            yield f"# configuration {inf.describe()}"
            for note in inf.notes():
                yield f"# {note}"
        else:
            # The OpenCSD listing stays the reference's text: the note goes to stderr.
            print(f"cstrace: note: configuration {inf.describe()}", file=err)
            for note in inf.notes():
                print(f"cstrace: note: {note}", file=err)
    names = args.buffer or [b.name for b in trace.buffers]
    buffers = [trace.buffer(n) for n in names]
    options = _options(args)
    if prepared is None:
        prepared = _prepare(trace, args, counter is not None)
    plan, pool = prepared.runs, prepared.pool
    tty = getattr(err, "isatty", None)
    progress = _Progress(err, [size for _, size in plan]) if tty is not None and tty() else None
    if progress is not None:
        from cstrace.parallel import watch_progress
    with ExitStack() as stack:
        if pool is not None:
            stack.enter_context(pool)
        if progress is not None:
            stack.callback(progress.close)
        session = Session(trace, options)
        reported: set[Issue] = set()
        index = 0
        for buffer in buffers:
            decoded = session.open_buffer(buffer)
            _warn(decoded.warnings, err)
            _warn(decoded.errors, err)
            errors.extend(decoded.errors)
            if counter is not None:
                counter.add_issues(decoded.issues)
                counter.add_capture(decoded)
            if args.format == "ocsd":
                yield f"Using {buffer.name} as trace source"
                for error in decoded.errors:
                    yield f"ERROR: {error}"
            elif args.format == "text":
                yield f"# buffer {buffer.name} ({buffer.format})"
                for error in decoded.errors:
                    yield f"# error: {error}"
            for run in decoded.runs:
                if pool is not None:
                    told = progress.update if progress else None
                    if sink is not None or args.format == "null":
                        done = pool.wait(index, run.trace_id, told)
                        if sink is not None:
                            sink.append_file(done.path)
                    else:
                        # The lines as the worker writes them (the first run's at once).
                        done = yield from pool.follow(index, run.trace_id, told)
                    os.unlink(done.path)
                    got = done.result
                    assert isinstance(got, _RunCounts)
                    if counter is not None and got.loss is not None:
                        counter.add_result(got.loss)
                    if got.missing:
                        session.memories.locator().missing.update(got.missing)
                    session.new_issues()  # the parent's own: the workers say what they met
                    met = [i for i in done.issues if i not in reported]
                    reported.update(met)
                else:
                    if progress is not None:
                        run = watch_progress(run, progress.run(index))
                    if counter is not None:
                        run = counter.watch(run)
                    tracker = tracker_for(session, run) if who else None
                    if sink is not None:
                        sink.write_run(run)
                    else:
                        yield from _run_lines(run, args, tracker)
                    # Problems met while decoding (images missing, build IDs that differ...).
                    met = session.new_issues()
                if progress is not None:
                    progress.finished(index)
                index += 1
                _warn(met, err)
                if counter is not None:
                    counter.add_issues(met)
    if who:
        # Images not found, named once, with the trace addresses that fell in them.
        missing = [
            Issue(
                Severity.WARNING,
                IssueKind.MEMORY,
                f"image {m.image}"
                + (f" (build ID {m.build_id})" if m.build_id else "")
                + f" not found: {m.addresses} trace address(es) fell in it "
                "(give it with --symdir, --symfs or --image)",
            )
            for m in session.memories.locator().missing_images()
        ]
        missing += [
            Issue(
                Severity.WARNING,
                IssueKind.MEMORY,
                f"image {m.image}"
                + (f" (build ID {m.build_id})" if m.build_id else "")
                + f", found as {m.file}: {m.addresses} trace address(es) in its mapping "
                "are in none of its code as placed (misplaced, or code the loader wrote)",
            )
            for m in session.memories.locator().missed_images()
        ]
        _warn(missing, err)
        if counter is not None:
            counter.add_issues(missing)
    if counter is not None and args.format == "jsonl":
        import json

        yield json.dumps({"summary": counter.report().to_dict()}, separators=(",", ":"))


def _strings(args: argparse.Namespace, protocol: ProtocolSpec) -> bool:
    """Whether a source's byte writes that spell text are shown as strings."""
    return protocol.software_trace and not getattr(args, "no_strings", False)


def _message_lines(
    elements: Iterable[Element],
    trace_id: int,
    tracker: ContextTracker | None,
    buffer: str | None = None,
) -> Iterator[str]:
    """Text (``buffer`` None) or JSON lines of a software-trace source, strings grouped."""
    from cstrace.analyses.swtext import TextMessage, group_text
    from cstrace.render.text import json_line, message_json, message_line, text_line

    for item in group_text(elements):
        context = None
        if isinstance(item, TextMessage):
            if tracker is not None:
                # Every write is followed; the string is shown with the first one's context.
                contexts = [tracker.update(e) for e in item.elements]
                context = contexts[0]
            if buffer is None:
                yield message_line(trace_id, item, context)
            else:
                yield message_json(trace_id, item, buffer, context)
            continue
        if tracker is not None:
            context = tracker.update(item)
        yield (
            text_line(trace_id, item, context)
            if buffer is None
            else json_line(trace_id, item, buffer, context)
        )


def _summary(counter: LossCounter, err: TextIO) -> None:
    """The summary of a decode on ``err`` (its issues were printed as they came)."""
    from cstrace.render.loss import loss_lines

    print("summary:", file=err)
    for line in loss_lines(counter.report(), issues=False):
        print(f"  {line}", file=err)


def _emit(
    lines: Iterator[str],
    output: str | None,
    err: TextIO,
    write: Callable[[Iterator[str], TextIO], None] | None = None,
) -> bool:
    """Write ``lines`` to the file ``output``, or to standard output (``\\n`` line ends
    either way); False, with the error said on ``err``, when the file cannot be made."""
    write = write or _write
    if output:
        try:
            out_file = open(output, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
        except OSError as exc:
            print(f"cstrace: error: {output}: {exc.strerror}", file=err)
            return False
        with out_file:
            write(lines, out_file)
        return True
    stdout = sys.stdout
    if isinstance(stdout, io.TextIOWrapper):
        stdout.reconfigure(newline="\n")
    write(lines, stdout)
    stdout.flush()
    return True


_CHUNK = 256
"""Lines per item of the listing that ``decode`` writes (:func:`listing_lines`)."""


def _write(lines: Iterator[str], out: TextIO) -> None:
    """Write ``lines`` (items of one or more lines, without their last newline) in
    batches of about 4096 items or 1 MB."""
    batch: list[str] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if len(batch) >= 4096 or size >= 1 << 20:
            out.write("\n".join(batch))
            out.write("\n")
            batch.clear()
            size = 0
    if batch:
        out.write("\n".join(batch))
        out.write("\n")


def _write_now(lines: Iterator[str], out: TextIO) -> None:
    """Write each line (or piece of lines) as it comes, flushed: the output of a parallel
    decode, whose runs come in large pieces as their workers write them."""
    for line in lines:
        out.write(line)
        out.write("\n")
        out.flush()


def _profile_traces(args: argparse.Namespace, err: TextIO) -> Iterator[Trace]:
    """Each input of ``profile``, opened with the input options and the symbol folder."""
    from cstrace.analyses.profile import with_symdir

    for path in args.inputs:
        args.snapshot = path
        # --symdir (an input option) finds a recording's binaries as it is opened, and
        # here the images a package names but does not hold.
        trace = open_from_args(args)
        for folder in args.symdir or ():
            trace = with_symdir(trace, folder)
        _warn(trace.issues, err)
        for inf in trace.inferred:
            print(f"cstrace: note: {path}: configuration {inf.describe()}", file=err)
        yield trace


def _profile_lines(args: argparse.Namespace, err: TextIO, errors: list[Issue]) -> Iterator[str]:
    """The output lines of ``profile``."""
    import re

    from cstrace.analyses.profile import BranchSampler, Profile, resolver_for
    from cstrace.decode import Session
    from cstrace.memory.binaries import Mapping
    from cstrace.protocols import DecodeOptions
    from cstrace.render.profiles import (
        autofdo_lines,
        bolt_lines,
        perf_script_lines,
        profgen_lines,
    )

    try:
        pattern = re.compile(args.binary) if args.binary else None
    except re.error as exc:
        raise CstraceError(f"--binary {args.binary!r}: {exc}") from None
    options = DecodeOptions()
    if args.format in _CALL_FORMATS:
        yield from _call_lines(args, err, errors)
        return
    if args.format == "perf-script":
        if args.dask:
            raise CstraceError("--dask sums profiles: not with --format perf-script")
        if args.period < 1 or args.last_branch < 1:
            raise CstraceError("--period and --last-branch must be positive")
        sampler = BranchSampler(args.period, args.last_branch)
        all_paths: dict[str, None] = {}
        matched = False
        for trace in _profile_traces(args, err):
            resolver = resolver_for(trace)
            mappings: list[Mapping] = list(getattr(resolver, "mappings", []))
            all_paths.update((m.binary.path, None) for m in mappings)
            if pattern is not None:
                mappings = [m for m in mappings if pattern.search(m.binary.path)]
            matched = matched or bool(mappings)
            yield from perf_script_lines((), mappings)
            session = Session(trace, options)
            for buffer in trace.buffers:
                decoded = session.open_buffer(buffer)
                _warn(decoded.issues, err)
                errors.extend(decoded.errors)
                for run in decoded.runs:
                    samples = sampler.samples(run.trace_id, run.elements())
                    if pattern is not None:
                        samples = (s for s in samples if _in_binaries(s, mappings))
                    yield from perf_script_lines(samples)
                    _warn(session.new_issues(), err)
        if pattern is not None and not matched:
            _note_no_binary(args.binary, list(all_paths), err, "mapped")
        return
    total = Profile()
    if args.dask:
        from cstrace.fleet import map_on_dask

        calls = [(args, path) for path in args.inputs]
        for path, (worker, (profile, text, failed)) in zip(
            args.inputs, map_on_dask(args.dask, profile_one, calls, "profile"), strict=True
        ):
            err.write(text)
            print(f"cstrace: note: {path}: counted on {worker}", file=err)
            errors.extend(failed)
            total.add(profile)
    else:
        for trace in _profile_traces(args, err):
            total.add(_profile_of(trace, err, errors))
    if total.unmapped:
        print(
            f"cstrace: note: {total.unmapped} instruction range(s) fell in no known binary "
            "(give the images with --image)",
            file=err,
        )
    chosen = total.select(args.binary)
    if not chosen.sorted_binaries():
        # An empty profile is a result: say why it is empty, and write an empty one.
        traced = [p.binary.path for p in total.sorted_binaries()]
        _note_no_binary(args.binary, traced, err)
        if args.format == "profgen":
            yield from ("0", "0")  # no ranges, no branches
        return
    writers = {"autofdo": autofdo_lines, "profgen": profgen_lines, "bolt": bolt_lines}
    yield from writers[args.format](chosen)


def _note_no_binary(
    pattern: str | None, paths: Sequence[str], err: TextIO, what: str = "traced"
) -> None:
    """Say why a profile has no binary: ``--binary`` matched none of ``paths`` (the binaries
    ``what``: traced, mapped), or nothing traced fell in a known binary."""
    if pattern and paths:
        shown = ", ".join(list(paths)[:8]) + (", ..." if len(paths) > 8 else "")
        print(
            f"cstrace: note: --binary {pattern!r} matches none of the {len(paths)} "
            f"binaries {what} ({shown}): nothing written",
            file=err,
        )
    else:
        print("cstrace: note: no traced instruction fell in a known binary", file=err)


def _call_lines(args: argparse.Namespace, err: TextIO, errors: list[Issue]) -> Iterator[str]:
    """The output lines of ``profile --format functions|callgrind|folded|flamegraph``."""
    from cstrace.analyses.calls import CallProfile, CallTracker, memory_reader
    from cstrace.analyses.symbols import Symbols
    from cstrace.decode import Session
    from cstrace.protocols import DecodeOptions
    from cstrace.render.calls import (
        callgrind_lines,
        flamegraph_svg,
        folded_lines,
        function_lines,
    )

    if args.binary:
        print(f"cstrace: note: --binary does not apply to --format {args.format}", file=err)
    total = CallProfile()
    for trace in _profile_traces(args, err):
        symbols = Symbols.from_trace(trace)
        tracker = CallTracker(symbols)
        session = Session(trace, DecodeOptions())
        for buffer in trace.buffers:
            decoded = session.open_buffer(buffer)
            _warn(decoded.issues, err)
            errors.extend(decoded.errors)
            for run in decoded.runs:
                tracker.read = memory_reader(session, run)
                tracker.feed(run.trace_id, run.elements())
                _warn(session.new_issues(), err)
        total.add(tracker.profile())
    if not total.instructions:
        print("cstrace: note: no instructions were traced", file=err)
    names = " ".join(Path(p).name for p in args.inputs)
    if args.format == "functions":
        yield from function_lines(total, args.table)
    elif args.format == "callgrind":
        yield from callgrind_lines(total, f"cstrace profile {names}")
    elif args.format == "folded":
        yield from folded_lines(total)
    else:
        yield flamegraph_svg(total, f"Flame graph of {names}").rstrip("\n")


def _profile_of(trace: Trace, err: TextIO, errors: list[Issue]) -> Profile:
    """The profile of one opened input of ``profile``; buffer errors printed and kept."""
    from cstrace.analyses.profile import ProfileCounter, resolver_for
    from cstrace.decode import Session
    from cstrace.protocols import DecodeOptions

    counter = ProfileCounter(resolver_for(trace))
    session = Session(trace, DecodeOptions())
    for buffer in trace.buffers:
        decoded = session.open_buffer(buffer)
        _warn(decoded.issues, err)
        errors.extend(decoded.errors)
        for run in decoded.runs:
            counter.feed(run.trace_id, run.elements(), run.buffer.time)
            _warn(session.new_issues(), err)
    return counter.profile()


def profile_one(args: argparse.Namespace, path: str) -> tuple[Profile, str, list[Issue]]:
    """The profile of one input of ``profile`` with the options of ``args`` (a Dask task):
    the profile, what it printed on stderr and the errors met."""
    one = argparse.Namespace(**vars(args))
    one.inputs = [path]
    err = io.StringIO()
    errors: list[Issue] = []
    for trace in _profile_traces(one, err):
        return _profile_of(trace, err, errors), err.getvalue(), errors
    raise AssertionError("one input gives one trace")


def _in_binaries(sample: object, mappings: Sequence[object]) -> bool:
    """Whether a branch sample touches one of ``mappings`` (its IP or a branch end)."""
    from cstrace.analyses.profile import BranchSample
    from cstrace.memory.binaries import Mapping

    assert isinstance(sample, BranchSample)
    addresses = [sample.ip, *(a for pair in sample.branches for a in pair)]
    return any(a in m for m in mappings if isinstance(m, Mapping) for a in addresses)


def profile_command(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace profile INPUT... --format F``: profiles for compilers and optimisers."""
    errors: list[Issue] = []
    lines = _profile_lines(args, err, errors)
    if args.output:
        # Count everything before creating the file: a failure leaves no half-written profile.
        lines = iter(list(lines))
    if not _emit(lines, args.output, err):
        return 2
    return 2 if errors else 0


def timeline_command(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace timeline INPUT -o FILE``: the decode as a Perfetto trace."""
    from cstrace.analyses.timeline import trace_timeline
    from cstrace.render.perfetto import write_perfetto

    trace = open_from_args(args)
    _warn(trace.issues, err)
    for inf in trace.inferred:
        print(f"cstrace: note: configuration {inf.describe()}", file=err)
    issues: list[Issue] = []
    if args.max_slices < 0:
        raise CstraceError("--max-slices must not be negative")
    timeline = trace_timeline(trace, buffers=args.buffer, issues=issues, max_slices=args.max_slices)
    _warn(issues, err)
    svg = args.format == "svg" or (args.format is None and args.output.endswith(".svg"))
    try:
        if svg:
            from cstrace.render.timeline_svg import svg_lines

            with open(args.output, "w", encoding="utf-8", newline="\n") as text_file:
                _write(svg_lines(timeline), text_file)
            packets = 0
        else:
            with open(args.output, "wb") as out_file:
                packets = write_perfetto(timeline, out_file)
    except OSError as exc:
        print(f"cstrace: error: {args.output}: {exc.strerror}", file=err)
        return 2
    print(
        f"wrote {args.output}: {len(timeline.tracks)} tracks, {len(timeline.slices)} slices, "
        f"{len(timeline.instants)} instants, {len(timeline.counters)} counter values"
        + ("" if svg else f" ({packets} packets)"),
        file=err,
    )
    return 2 if any(i.is_error for i in issues) else 0


def _is_parquet(path: str) -> bool:
    """Whether ``path`` is a Parquet file (its first bytes say so)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PAR1"
    except OSError:
        return False


def query_command(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace query INPUT SQL``: a DuckDB query over the tables of a decode."""
    from cstrace.analyses.query import (
        build_tables,
        connect,
        parquet_tables,
        run_query,
        tables_named,
    )
    from cstrace.render.query import csv_lines, json_lines, table_lines

    issues: list[Issue] = []
    if _is_parquet(args.snapshot):
        tables = parquet_tables(args.snapshot)
    else:
        trace = open_from_args(args)
        _warn(trace.issues, err)
        for inf in trace.inferred:
            print(f"cstrace: note: configuration {inf.describe()}", file=err)
        want = tables_named(args.sql)
        tables = build_tables(trace, want, buffers=args.buffer, issues=issues)
        _warn(issues, err)
    result = run_query(connect(tables), args.sql)
    writers = {"table": table_lines, "csv": csv_lines, "json": json_lines}
    lines = writers[args.format](result)
    if not _emit(lines, args.output, err):
        return 2
    return 2 if any(i.is_error for i in issues) else 0


_EXTENSIONS = {"text": "txt", "ocsd": "ppl", "jsonl": "jsonl", "null": "null", "parquet": "parquet"}


def _outputs_per_input(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(input, output file) of each input of a ``decode`` with several inputs or ``--dask``:
    the output folder ``-o`` gets ``<input's name>.<format>`` for each."""
    inputs: list[str] = args.snapshot
    if not args.output:
        raise CstraceError("several inputs or --dask: give an output folder with -o")
    folder = Path(args.output)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CstraceError(f"{folder}: {exc.strerror}") from None
    out: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for path in inputs:
        name = f"{Path(path).name}.{_EXTENSIONS[args.format]}"
        if name in seen:
            raise CstraceError(f"{path}: two inputs would both write {folder / name}")
        seen.add(name)
        out.append((path, None if args.format == "null" else str(folder / name)))
    return out


def decode_one(args: argparse.Namespace, path: str, output: str | None) -> tuple[int, str]:
    """``cstrace decode`` of one input with the options of ``args``, written to ``output``
    (a Dask task, say): the exit status and what it printed on stderr."""
    one = argparse.Namespace(**vars(args))
    one.snapshot, one.output, one.dask = path, output, None
    err = io.StringIO()
    try:
        status = decode_command(one, err)
    except CstraceError as exc:
        print(f"cstrace: error: {exc}", file=err)
        status = 2
    return status, err.getvalue()


def _decode_many(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace decode`` of several inputs (or with ``--dask``): one output per input."""
    work = _outputs_per_input(args)
    status = 0
    if args.dask:
        from cstrace.fleet import map_on_dask

        # Workers run one input each, serially: the cluster is the parallelism (and a Dask
        # worker's daemonic process may not start a pool of its own).
        args.jobs = 1
        results = map_on_dask(args.dask, decode_one, [(args, p, o) for p, o in work], "decode")
        for (path, _), (worker, (code, text)) in zip(work, results, strict=True):
            err.write(text)
            print(f"cstrace: note: {path}: decoded on {worker}", file=err)
            status = max(status, code)
        return status
    for path, output in work:
        code, text = decode_one(args, path, output)
        err.write(text)
        status = max(status, code)
    return status


def decode_command(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace decode INPUT...``: decode and write elements, listings or rows."""
    from cstrace.analyses.loss import LossCounter

    if isinstance(args.snapshot, list):
        if len(args.snapshot) > 1 or args.dask:
            return _decode_many(args, err)
        args.snapshot = args.snapshot[0]
    if args.format == "parquet" and not args.output:
        raise CstraceError("--format parquet writes a file: give it with -o FILE")
    trace = open_from_args(args)
    errors: list[Issue] = []
    counter = None if args.no_summary else LossCounter()
    if args.format == "parquet":
        from cstrace.parquet import ParquetSink

        try:
            sink = ParquetSink(args.output)
        except OSError as exc:
            print(f"cstrace: error: {args.output}: {exc.strerror or exc}", file=err)
            return 2
        with sink:
            for _ in _lines(trace, args, err, errors, counter, sink):
                pass
    elif args.format == "null":
        for _ in _lines(trace, args, err, errors, counter):
            pass
    else:
        prepared = _prepare(trace, args, counter is not None)
        lines = _lines(trace, args, err, errors, counter, prepared=prepared)
        # In parallel, the runs come as large pieces: each is written at once.
        write = _write if prepared.pool is None else _write_now
        if not _emit(lines, args.output, err, write):
            return 2
    if counter is not None and args.format != "jsonl":
        _summary(counter, err)
    return 2 if errors else 0


# -- cstrace disasm ------------------------------------------------------------------------


def _add_disasm_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dis = sub.add_parser(
        "disasm",
        help="list every executed instruction with its function, text and source line",
        description=(
            "Decode INPUT and list every instruction it executed, once per execution, in "
            "trace order (each trace source after the other): address, function+offset, "
            "opcode, the instruction's text (capstone) and the source file:line (DWARF), "
            "with exceptions, trace gaps, context changes, timestamps and software-trace "
            "messages in line. Symbols and line tables come from the ELF images given with "
            "--image (which work with every input, a snapshot whose memory dumps hold the "
            "code included) and from those the input names."
        ),
    )
    dis.add_argument(
        "snapshot",
        metavar="INPUT",
        help="snapshot, trace package, perf.data recording or raw trace capture",
    )
    dis.add_argument(
        "--source", action="store_true", help="interleave the source lines with the code"
    )
    dis.add_argument(
        "--range",
        metavar="START:END",
        help="only instructions at addresses from START up to END (excluded)",
    )
    dis.add_argument("--function", metavar="NAME", help="only instructions of this function")
    dis.add_argument(
        "--last",
        type=int,
        metavar="N",
        help="only the last N instructions of each trace source (what ran before the end)",
    )
    dis.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    add_input_options(dis)


def _add_coverage_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``cstrace coverage``: its options (docs/coverage.md)."""
    cov = sub.add_parser(
        "coverage",
        help="code coverage from the trace: lines, functions, branches, instructions",
        description=(
            "Decode the input and report which instructions, source lines, functions and "
            "conditional branch outcomes (taken, not taken) the trace shows executed, over "
            "the symbols and DWARF line tables of its ELF images (and --image). Code that "
            "never ran is listed with zero. Formats: lcov (an lcov tracefile for genhtml), "
            "cobertura (Cobertura XML for CI services), html (one self-contained page), "
            "text (a table of functions)."
        ),
    )
    cov.add_argument("snapshot", metavar="INPUT", help="the trace input")
    cov.add_argument(
        "-f", "--format", choices=_COVERAGE_FORMATS, default="text", help="report format"
    )
    cov.add_argument("--test-name", default="", metavar="NAME", help="lcov: the TN: name")
    cov.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    add_input_options(cov)


def _disasm_range(text: str | None) -> tuple[int | None, int | None]:
    if text is None:
        return None, None
    first, sep, second = text.partition(":")
    try:
        start = int(first, 0) if first else None
        end = int(second, 0) if second else None
    except ValueError:
        start = end = None
        sep = ""
    if not sep or (start is not None and end is not None and end <= start):
        raise CstraceError(f"--range {text!r}: give START:END, two addresses with START < END")
    return start, end


def _disasm_lines(args: argparse.Namespace, err: TextIO, errors: list[Issue]) -> Iterator[str]:
    """The output lines of ``disasm``."""
    from cstrace.analyses.instructions import Disassembler, walk_run
    from cstrace.analyses.symbols import Symbols
    from cstrace.decode import Session
    from cstrace.protocols import DecodeOptions
    from cstrace.render.disasm import DisasmOptions, disasm_lines

    start, end = _disasm_range(args.range)
    if args.last is not None and args.last < 1:
        raise CstraceError("--last must be a positive number of instructions")
    trace = open_from_args(args)
    _warn(trace.issues, err)
    for text in args.image:
        name = text.rpartition("@")[0] or text
        with open(name, "rb") as f:
            if f.read(4) != b"\x7fELF":
                print(
                    f"cstrace: warning: {name}: not an ELF file: its bytes are code, "
                    "with no symbols or source lines",
                    file=err,
                )
    symbols = Symbols.from_trace(trace)
    if args.function is not None and not any(
        args.function in (f.name, f.raw_name) for f in symbols.functions()
    ):
        raise CstraceError(
            f"--function {args.function!r}: no function of that name in the images "
            "(give the program with --image)"
        )
    options = DisasmOptions(args.source, start, end, args.function, args.last)
    disassembler = Disassembler()
    session = Session(trace, DecodeOptions())
    for buffer in trace.buffers:
        decoded = session.open_buffer(buffer)
        _warn(decoded.issues, err)
        errors.extend(decoded.errors)
        for run in decoded.runs:
            yield f"# source {run.source.name} ({run.protocol.name}), trace ID {run.trace_id:#x}"
            yield from disasm_lines(walk_run(session, run), symbols, disassembler, options)
            _warn(session.new_issues(), err)
    if args.source:
        _note_missing_sources(symbols, err)


def disasm_command(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace disasm INPUT``: the executed instructions, symbolised."""
    errors: list[Issue] = []
    lines = _disasm_lines(args, err, errors)
    if args.output:
        first = next(lines, None)  # the input is opened and checked before the file is made
        if first is not None:
            lines = itertools.chain((first,), lines)
    if not _emit(lines, args.output, err):
        return 2
    return 2 if errors else 0


def _note_missing_sources(symbols: Any, err: TextIO) -> None:
    """One note naming the source files DWARF names that could not be read (not one per
    line that needed them)."""
    missing = symbols.missing_sources()
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        print(
            f"cstrace: note: {len(missing)} source file(s) not found or unreadable "
            f"({', '.join(missing[:3])}{more}): their lines are shown without text",
            file=err,
        )


def _note_left_out(missing: list[str], err: TextIO) -> None:
    """One note naming the source files left out of an lcov file (not on disk: genhtml
    could not read them)."""
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        print(
            f"cstrace: note: {len(missing)} source file(s) left out of the lcov file, not "
            f"found on disk ({', '.join(missing[:3])}{more}); --format text lists every file",
            file=err,
        )


def _coverage_lines(args: argparse.Namespace, err: TextIO, errors: list[Issue]) -> list[str]:
    """The report of ``coverage``, made whole before anything is written."""
    import time

    from cstrace.analyses.coverage import CodeReader, CoverageCounter, count_run
    from cstrace.analyses.symbols import Symbols
    from cstrace.decode import Session
    from cstrace.protocols import DecodeOptions
    from cstrace.render.coverage import cobertura_xml, html_report, lcov_lines, text_lines

    trace = open_from_args(args)
    _warn(trace.issues, err)
    for inf in trace.inferred:
        print(f"cstrace: note: {args.snapshot}: configuration {inf.describe()}", file=err)
    symbols = Symbols.from_trace(trace)  # --image files are among the trace's images
    session = Session(trace, DecodeOptions())
    counter = CoverageCounter()
    read: CodeReader | None = None
    for buffer in trace.buffers:
        decoded = session.open_buffer(buffer)
        _warn(decoded.issues, err)
        errors.extend(decoded.errors)
        for run in decoded.runs:
            read = count_run(counter, session, run)
            _warn(session.new_issues(), err)
    coverage = counter.coverage(symbols, read)
    if not coverage.files:
        print(
            "cstrace: note: no source lines: give ELF images with DWARF (--image FILE[@BASE])",
            file=err,
        )
    if args.format == "lcov":
        lines = list(lcov_lines(coverage, args.test_name, symbols.source_path))
        _note_left_out(sorted(f for f in coverage.files if symbols.source_path(f) is None), err)
        return lines
    if args.format == "cobertura":
        return list(cobertura_xml(coverage, f"cstrace {__version__}", int(time.time() * 1000)))
    if args.format == "html":

        def source(path: str) -> list[str] | None:
            first = symbols.source(path, 1)
            if first is None:
                return None
            out = [first]
            while (text := symbols.source(path, len(out) + 1)) is not None:
                out.append(text)
            return out

        page = list(html_report(coverage, source, str(args.snapshot)))
        _note_missing_sources(symbols, err)
        return page
    return list(text_lines(coverage))


def coverage_command(args: argparse.Namespace, err: TextIO) -> int:
    """``cstrace coverage INPUT --format F``: code coverage from the trace."""
    errors: list[Issue] = []
    lines = _coverage_lines(args, err, errors)
    if not _emit(iter(lines), args.output, err):
        return 2
    return 2 if errors else 0


def _check_output_path(output: str | None) -> None:
    """A located error, before any input is decoded, when ``-o FILE`` cannot be made: its
    folder is missing, or FILE is a folder (the file itself is opened after decoding)."""
    if not output or output == "-":
        return
    path = Path(output)
    if path.is_dir():
        raise CstraceError("the output is a folder, not a file", path=output)
    folder = path.parent
    if not folder.is_dir():
        raise CstraceError(f"no folder {str(folder)!r} to write the output in", path=output)


_ANALYSES = ("profile", "timeline", "query", "disasm", "coverage")
"""The commands that decode to answer a question rather than to list the elements."""


def _analysis(args: argparse.Namespace, err: TextIO) -> int:
    """Run an analysis command, counting what the trace lost while it decodes: corrupt
    trace is resynchronised by the decoders and said here, after the results."""
    from cstrace.analyses.loss import LossCounter
    from cstrace.decode import watching

    commands = {
        "profile": profile_command,
        "timeline": timeline_command,
        "query": query_command,
        "disasm": disasm_command,
        "coverage": coverage_command,
    }
    counter = LossCounter()
    with watching(counter.watch):
        status = commands[args.command](args, err)
    _lost_note(counter.report(), err)
    return status


def _lost_note(report: LossReport, err: TextIO) -> None:
    """What the trace lost (bad packets, resynchronisations, overflows, a source cut
    short, packets skipped while waiting for synchronisation, a decode that stopped), per
    source, on ``err``; nothing when it lost nothing."""
    from cstrace.render.loss import source_lines

    seen: set[tuple[str, int]] = set()
    for loss in report.sources:
        lost = (
            loss.bad_packets.count
            or loss.resyncs.count
            or loss.overflows.count
            or loss.truncated.count
            or loss.sync_wait_bytes
            or loss.stopped_at is not None
        )
        key = (loss.buffer, loss.trace_id)
        if not lost or key in seen:
            continue  # a source decoded twice (by two analyses of one command) is said once
        seen.add(key)
        lines = source_lines(loss)
        print(f"cstrace: note: the trace lost data, left out of the results: {lines[0]}", file=err)
        for line in lines[1:]:
            print(f"cstrace: note: {line}", file=err)


def _one_blas_thread() -> None:
    """Ask NumPy's BLAS for one thread, unless the user's environment says otherwise.

    OpenBLAS starts a pool of worker threads (one per CPU) when NumPy is first
    imported, and they spin while waiting: ``perf`` showed ``blas_thread_server``
    at about 5% of a decode's CPU. cstrace does no linear algebra, so the pool
    only costs. The variables must be set before NumPy is imported (OpenBLAS
    reads them when it loads), which is why ``import cstrace`` and this module do
    not import NumPy. A user's own setting wins (``setdefault``). Only the
    command line does this: a library must not change its host's environment.
    Worker processes (``--jobs``) inherit the setting.
    """
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    _one_blas_thread()
    parser = _build_parser()
    args = parser.parse_args(argv)
    err = sys.stderr
    # A decode makes millions of short-lived objects and next to no reference cycles:
    # let the cycle collector run less often, and never over what start-up made.
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    try:
        if args.command in _ANALYSES:
            _check_output_path(args.output)
            return _analysis(args, err)
        if args.command == "package":
            return package_command(args, err)
        if args.command == "info":
            return info_command(args)
        if args.command == "view":
            return view_command(args, err)
        if args.command == "decode":
            return decode_command(args, err)
        return 0
    except CstraceError as exc:
        print(f"cstrace: error: {exc}", file=err)
        return 2
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


def run() -> NoReturn:
    """The ``cstrace`` command: :func:`main`, then the process ends at once.

    Everything :func:`main` opened is closed when it returns (outputs, worker
    pools, temporary folders: all in ``with`` blocks), so what is left is the
    interpreter's own teardown: freeing every object of the decode one by one
    (block caches, modules), about 50 ms after a one-second decode. The standard
    streams are flushed first; then the process exits with :func:`os._exit`.
    """
    code = main()
    # A reader that went away is not an error (as in main); a closed stream has nothing.
    for stream in (sys.stdout, sys.stderr):
        with suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
