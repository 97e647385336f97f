"""Raw captures: a trace file with no metadata, described by detection and the user's options.

Input: a capture file (an ETB/ETR dump, a TPIU or DSTREAM capture, the trace of
one source) and :class:`RawOptions`: the capture format, an optional metadata
file (§6.3.1), and per-trace-ID items from the command line (``--protocol``,
``--core``, ``--reg``, ``--set``, each ``ID=...`` / ``ID:...`` or for every
source). Output: a :class:`~cstrace.trace.Trace` with one buffer (the file)
and one source per trace ID (:func:`open_raw`).

What the user does not say is found from the bytes (:mod:`.detect`): whether
the capture is formatted, which trace IDs it holds and the protocol of each.
Each source is described by the same items a metadata file's ``[trace_N]``
section holds, resolved by :func:`~cstrace.inputs.metadata.describe_source`:
registers as given, options setting the bits of the registers that hold them,
and a located error naming whatever decoding needs and nobody gave.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cstrace.errors import Issue, IssueKind, Severity, SnapshotError
from cstrace.inputs.detect import detect_capture
from cstrace.inputs.files import PathBlob
from cstrace.inputs.metadata import (
    BUFFER_FORMATS,
    Item,
    TraceSpec,
    describe_source,
    knows_option,
    parse_metadata_text,
)
from cstrace.parsing import decode_text, parse_int
from cstrace.protocols import protocol_name
from cstrace.trace import Buffer, Origin, Source, Trace

__all__ = ["RawOptions", "open_raw"]

_CLI = "command line"
_MAX_METADATA_BYTES = 4 * 1024 * 1024


@dataclass
class RawOptions:
    """What the user says about a raw capture that detection cannot tell."""

    capture_format: str | None = None
    metadata: str | None = None
    """A metadata file (§6.3.1) describing the capture's trace sources."""
    protocols: list[str] = field(default_factory=list)
    """``NAME`` or ``ID=NAME`` (``etmv4``, ``ptm``, ``ETM3.5``...)."""
    cores: list[str] = field(default_factory=list)
    """``TYPE`` or ``ID=TYPE`` (``Cortex-A53``)."""
    registers: list[str] = field(default_factory=list)
    """``NAME=VALUE`` or ``ID:NAME=VALUE``."""
    settings: list[str] = field(default_factory=list)
    """``ITEM=VALUE`` or ``ID:ITEM=VALUE`` (individual options such as ``cyclecount=1``)."""

    def given(self) -> bool:
        """Whether any option was given."""
        return self != RawOptions()


_PROTOCOL_WORDS = {
    "etmv4": "ETM4",
    "etm4": "ETM4",
    "ete": "ETE",
    "ptm": "PTM1.1",
    "pft": "PTM1.1",
    "etmv3": "ETM3.5",
    "etm3": "ETM3.5",
    "stm": "STM",
    "itm": "ITM",
}
_FAMILY_FORMAT = {"etm4": "ETM4", "ptm": "PTM1.1", "etm3": "ETM3.5", "stm": "STM", "itm": "ITM"}


def _per_id(text: str, sep: str, what: str) -> tuple[int | None, str]:
    """``ID<sep>REST`` → (ID, REST); without a leading ID → (None, text)."""
    head, s, rest = text.partition(sep)
    if s and re.fullmatch(r"\s*(0[xX][0-9a-fA-F]+|\d+)\s*", head):
        tid = parse_int(head, what=f"{what} trace ID", path=_CLI, line=None)
        if not 0 <= tid <= 0x7F:
            raise SnapshotError(f"{what} {text!r}: trace ID {tid:#x} is outside 0x00..0x7f")
        return tid, rest
    return None, text


class _Described:
    """The items of each trace ID: from the metadata file, then from the command line."""

    def __init__(self) -> None:
        self.items: dict[int, list[Item]] = {}
        self.where: dict[int, tuple[str, int | None]] = {}

    def section(self, tid: int) -> list[Item]:
        if tid not in self.items:
            self.items[tid] = []
            self.where[tid] = (_CLI, None)
        return self.items[tid]


def _metadata(raw: RawOptions) -> tuple[str | None, _Described]:
    """The buffer format and the per-ID items of the metadata file, if one was given."""
    described = _Described()
    if raw.metadata is None:
        return None, described
    blob = PathBlob(raw.metadata)
    if not blob.exists():
        raise SnapshotError("metadata file not found", path=raw.metadata)
    text = decode_text(blob.read(), raw.metadata, what="metadata file", limit=_MAX_METADATA_BYTES)
    ini = parse_metadata_text(text, raw.metadata)
    fmt = None
    bsec = ini.section("buffer")
    if bsec is not None and bsec.get("format"):
        fmt = BUFFER_FORMATS.get((bsec.get("format") or "").strip().lower())
    for sec in ini.sections:
        low = sec.name.lower()
        if low == "buffer":
            continue
        if not low.startswith("trace_"):
            raise SnapshotError(
                f"unknown section [{sec.name}] (expected [buffer] or [trace_N])",
                path=raw.metadata,
                line=sec.line,
            )
        tid = parse_int(sec.name[6:], what="trace source ID", path=raw.metadata, line=sec.line)
        described.items[tid] = [Item(e.key, e.value, raw.metadata, e.line) for e in sec.entries]
        described.where[tid] = (raw.metadata, sec.line)
    return fmt, described


def _located(exc: SnapshotError) -> SnapshotError:
    """An error about an item given on the command line says so."""
    if exc.path == _CLI and exc.line in (0, None):
        exc.line = None
    if "cannot be decoded without" in exc.message and exc.path == _CLI:
        exc.message += "; on the command line: --set [ID:]ITEM=VALUE or --reg [ID:]NAME=VALUE"
        exc.args = (exc.message,)
    return exc


def open_raw(path: str | Path, raw: RawOptions) -> Trace:
    """The :class:`~cstrace.trace.Trace` of a raw capture file and what the user said about it.

    Single-source data gives one source whose trace ID comes from the metadata,
    an ``ID=`` option, or 0. Formatted data gives one source per trace ID whose
    protocol was recognised or named by the user.
    """
    capture = Path(path)
    blob = PathBlob(capture)
    if not blob.exists():
        raise SnapshotError("no such file", path=str(capture))
    meta_fmt, described = _metadata(raw)
    fmt = raw.capture_format or meta_fmt
    if fmt is not None and fmt not in BUFFER_FORMATS.values():
        raise SnapshotError(f"capture format {fmt!r} is not one of {', '.join(BUFFER_FORMATS)}")
    guess = detect_capture(blob.read(), fmt)
    fmt = guess.format
    single = fmt == "source_data"

    per_id: dict[str, dict[int | None, list[tuple[str, str]]]] = {}
    for kind, texts, sep in (
        ("protocol", raw.protocols, "="),
        ("core", raw.cores, "="),
        ("reg", raw.registers, ":"),
        ("set", raw.settings, ":"),
    ):
        for text in texts:
            tid, rest = _per_id(text, sep, f"--{kind}")
            per_id.setdefault(kind, {}).setdefault(tid, []).append((text, rest))

    explicit = {t for kind in per_id.values() for t in kind if t is not None}
    if single:
        ids = sorted(set(described.items) | explicit) or [0]
        if len(ids) > 1:
            raise SnapshotError(
                "the capture holds a single source, but several trace IDs are described: "
                + ", ".join(f"{t:#x}" for t in ids)
            )
    else:
        found = {g.trace_id for g in guess.identified if g.trace_id is not None}
        ids = sorted(found | set(described.items) | explicit)
    if not ids:
        raise SnapshotError(
            "no trace source found in the capture: name one with --protocol ID=PROTOCOL",
            path=str(capture),
        )
    # "--protocol ID=none" leaves a detected trace ID out.
    for drop, entries in per_id.get("protocol", {}).items():
        if drop is not None and any(v.strip().lower() == "none" for _, v in entries):
            if drop in ids:
                ids.remove(drop)
            described.items.pop(drop, None)
    if not ids:
        raise SnapshotError("every trace source was left out with --protocol ID=none")

    # Options given without an ID apply to the sources whose protocol knows them.
    unplaced = {text for text, _ in per_id.get("set", {}).get(None, [])}
    detected = {g.trace_id: g for g in guess.streams}
    specs: list[TraceSpec] = []
    for tid in ids:
        items = described.section(tid)

        def for_id(kind: str, tid: int = tid) -> list[tuple[str, str]]:
            return per_id.get(kind, {}).get(None, []) + per_id.get(kind, {}).get(tid, [])

        for _, value in for_id("protocol"):
            word = value.strip()
            items.append(Item("format", _PROTOCOL_WORDS.get(word.lower(), word), _CLI))
        if not any(i.key.strip().lower() == "format" for i in items):
            g = detected.get(None if single else tid)
            if g is None or g.family is None:
                raise SnapshotError(
                    f"trace ID {tid:#x}: protocol not recognised; name it with "
                    f"--protocol {tid:#x}=PROTOCOL (etmv4, ete, ptm, etmv3, stm, itm)",
                    path=str(capture),
                )
            items.append(Item("format", _FAMILY_FORMAT[g.family], _CLI))
        for _, value in for_id("core"):
            items.append(Item("core", value.strip(), _CLI))
        source_type = [i.value for i in items if i.key.strip().lower() == "format"][-1]
        shared = per_id.get("set", {}).get(None, []) + per_id.get("reg", {}).get(None, [])
        for kind in ("reg", "set"):
            for text, rest in for_id(kind):
                key, eq, value = rest.partition("=")
                if not eq or not key.strip():
                    raise SnapshotError(f"--{kind} {text!r}: expected NAME=VALUE")
                key = key.strip().upper() if kind == "reg" else key.strip().lower()
                if kind == "set" and (text, rest) in shared:
                    if not knows_option(source_type, key):
                        continue
                    unplaced.discard(text)
                items.append(Item(key, value.strip(), _CLI))
        path, line = described.where[tid]
        try:
            specs.append(describe_source(f"trace_{tid:#04x}", items, path, line))
        except SnapshotError as exc:
            raise _located(exc) from None
    if unplaced:
        raise SnapshotError(
            f"--set {sorted(unplaced)[0]!r}: no trace source of this capture has that option"
        )
    return _trace(capture, blob, fmt, specs, guess.confidence, raw.capture_format is None)


def _trace(
    capture: Path,
    blob: PathBlob,
    fmt: str,
    specs: list[TraceSpec],
    confidence: float,
    guessed: bool,
) -> Trace:
    buffer = Buffer(capture.name, fmt, (blob,), Origin(str(capture)))
    sources: list[Source] = []
    for spec in specs:
        dev = spec.device
        try:
            regs = {r.name: r.value for r in dev.registers.values()}
        except SnapshotError as exc:
            raise _located(exc) from None
        has_core = bool(spec.core_type or spec.core_name)
        sources.append(
            Source(
                name=dev.name,
                protocol=protocol_name(dev.device_type) or "",
                source_type=dev.device_type,
                registers=regs,
                buffers=(buffer.name,),
                core=spec.core_type or "",
                core_name=(spec.core_name or f"core_{spec.trace_id:#04x}") if has_core else None,
                origin=Origin(dev.path),
            )
        )
    issues: list[Issue] = []
    if confidence < 0.5 and guessed:
        issues.append(
            Issue(
                Severity.WARNING,
                IssueKind.INPUT,
                f"capture format {fmt} guessed with low confidence ({confidence:.2f}); "
                "give --capture-format if it is wrong",
                str(capture),
            )
        )
    return Trace([buffer], sources, description="raw capture", issues=issues)
