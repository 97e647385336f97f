"""The ``cstrace`` command line.

``cstrace decode SNAPSHOT`` decodes the trace buffers of a snapshot and writes
the decoded elements (``--format text``, the default), the OpenCSD-compatible
listing of packets and elements (``--format ocsd``) or JSON Lines
(``--format jsonl``). Bad input gives one line on stderr naming the file and
line or offset, and exit status 2.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TextIO

from cstrace import __version__
from cstrace.decode import Session
from cstrace.detect import info_command
from cstrace.errors import CstraceError
from cstrace.protocols import DecodeOptions
from cstrace.snapshot import Snapshot
from cstrace.snapshot.package import add_input_options, open_from_args, package_command

__all__ = ["main"]

_FORMATS = ("text", "ocsd", "jsonl")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cstrace",
        description="Decode ARM CoreSight trace (ETMv4/ETE, PTM, ETMv3, STM, ITM).",
    )
    parser.add_argument("--version", action="version", version=f"cstrace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    dec = sub.add_parser(
        "decode",
        help="decode the trace buffers of a snapshot",
        description=(
            "Decode every trace buffer named in the snapshot's trace.ini, one after "
            "another in trace.ini order, or only the buffers given with --buffer."
        ),
    )
    dec.add_argument(
        "snapshot",
        metavar="SNAPSHOT",
        help="snapshot folder (or its snapshot.ini), trace package (folder or ZIP), or a raw "
        "trace capture",
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
        "in the OpenCSD trc_pkt_lister format; jsonl: one JSON object per element",
    )
    dec.add_argument(
        "--no-packets",
        action="store_true",
        help="with --format ocsd, list decoded elements only",
    )
    dec.add_argument(
        "--src-addr-n",
        action="store_true",
        help="ETE: split source-address instruction ranges at N atoms",
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
            "Write SNAPSHOT (a DS-5 snapshot folder, a trace package, or a raw capture with "
            "the options that describe it) as a trace package: a ZIP with contents.ini, the "
            "INI trace metadata, the trace buffers and memory contents, plus any program "
            "images, memory and event log given as options. The package decodes like its "
            "input, with the same buffer names."
        ),
    )
    pkg.add_argument(
        "snapshot", metavar="SNAPSHOT", help="snapshot, package or raw capture to convert"
    )
    pkg.add_argument("output", metavar="OUTPUT.zip", help="the package file to write")
    add_input_options(pkg)

    info = sub.add_parser(
        "info",
        help="say what a capture, snapshot or package holds",
        description=(
            "Detect, from the bytes alone, whether a capture is CoreSight formatted or a "
            "single source, which trace IDs it holds and the protocol of each, with how "
            "sure the guess is. For a snapshot or package, each buffer is examined."
        ),
    )
    info.add_argument("file", metavar="FILE", help="raw capture, snapshot or package")
    info.add_argument(
        "--capture-format",
        choices=("coresight", "dstream_coresight", "tpiu", "source_data"),
        help="do not guess the capture format",
    )
    return parser


def _lines(
    snapshot: Snapshot, args: argparse.Namespace, err: TextIO, errors: list[str]
) -> Iterator[str]:
    """The output lines of ``decode``; buffer errors are printed and kept in ``errors``."""
    from cstrace.render.ocsd import listing_lines
    from cstrace.render.text import HEADER, json_line, text_line

    for warning in snapshot.warnings:
        print(f"cstrace: warning: {warning}", file=err)
    shown = len(snapshot.warnings)
    names = args.buffer or [b.name for b in snapshot.buffers]
    buffers = [snapshot.buffer(n) for n in names]
    extra = {k: v for k, v in (("etmcr", args.etmcr), ("start_pc", args.start_pc)) if v is not None}
    session = Session(snapshot, DecodeOptions(src_addr_n=args.src_addr_n, extra=extra))
    for buffer in buffers:
        decoded = session.open_buffer(buffer)
        for notice in decoded.notices:
            print(f"cstrace: warning: {notice}", file=err)
        for error in decoded.errors:
            print(f"cstrace: error: {error}", file=err)
        errors.extend(decoded.errors)
        if args.format == "ocsd":
            yield f"Using {buffer.name} as trace source"
            for error in decoded.errors:
                yield f"ERROR: {error}"
        elif args.format == "text":
            yield f"# buffer {buffer.name} ({buffer.format})"
            for error in decoded.errors:
                yield f"# error: {error}"
        for run in decoded.runs:
            if args.format == "ocsd":
                yield from listing_lines(run, packets=not args.no_packets)
                yield f"ID:{run.packet_id:x}\tEND OF TRACE DATA"
            elif args.format == "jsonl":
                tid = run.trace_id
                for elem in run.elements():
                    yield json_line(tid, elem, buffer.name)
            else:
                tid = run.trace_id
                yield (
                    f"# source {run.source.device.name} ({run.protocol.name}), trace ID {tid:#x}"
                )
                yield HEADER
                for elem in run.elements():
                    yield text_line(tid, elem)
            # Problems met while decoding (images missing, build IDs that differ...).
            for warning in snapshot.warnings[shown:]:
                print(f"cstrace: warning: {warning}", file=err)
            shown = len(snapshot.warnings)


def _write(lines: Iterator[str], out: TextIO) -> None:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= 4096:
            out.write("\n".join(batch))
            out.write("\n")
            batch.clear()
    if batch:
        out.write("\n".join(batch))
        out.write("\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    err = sys.stderr
    try:
        if args.command == "package":
            return package_command(args)
        if args.command == "info":
            return info_command(args)
        if args.command == "decode":
            snapshot = open_from_args(args)
            errors: list[str] = []
            if args.output:
                try:
                    out_file = open(args.output, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
                except OSError as exc:
                    print(f"cstrace: error: {args.output}: {exc.strerror}", file=err)
                    return 2
                with out_file:
                    _write(_lines(snapshot, args, err, errors), out_file)
            else:
                stdout = sys.stdout
                if isinstance(stdout, io.TextIOWrapper):
                    stdout.reconfigure(newline="\n")
                _write(_lines(snapshot, args, err, errors), stdout)
                stdout.flush()
            return 2 if errors else 0
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


if __name__ == "__main__":
    sys.exit(main())
