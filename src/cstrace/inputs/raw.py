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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cstrace.capture import demux
from cstrace.errors import CstraceError, Issue, IssueKind, Severity, SnapshotError
from cstrace.inputs.extras import Extras, add_extras
from cstrace.inputs.files import PathBlob
from cstrace.inputs.metadata import (
    BUFFER_FORMATS,
    Item,
    TraceSpec,
    describe_source,
    family_of,
    knows_option,
    parse_metadata_text,
)
from cstrace.memory.build import CodeMemories
from cstrace.parsing import decode_text, parse_int
from cstrace.protocols import named_protocol, protocol_name
from cstrace.trace import Buffer, Inferred, Origin, Source, Trace

if TYPE_CHECKING:
    from cstrace.inputs.infer import Inference
    from cstrace.memory.elf import ElfImage

__all__ = ["RawOptions", "open_raw"]

_CLI = "command line"
_DETECTED = "detected"
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
    trace_id: int | None = None
    """The trace ID that labels the source of a single-source capture (its data does
    not say it); 0 when not given."""

    def given(self) -> bool:
        """Whether any option was given."""
        return self != RawOptions()


def _source_type(word: str) -> str:
    """The source type of a protocol as the user names it (``--protocol ID=etm4``): that
    of the protocol with that name or alias, else the word itself (``ETM4.2``)."""
    spec = named_protocol(word)
    if spec is None or spec.raw_source_type is None:
        return word
    return spec.raw_source_type


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


def open_raw(path: str | Path, raw: RawOptions, extras: Extras | None = None) -> Trace:
    """The :class:`~cstrace.trace.Trace` of a raw capture file and what the user said about it.

    Single-source data gives one source whose trace ID comes from the metadata,
    an ``ID=`` option, ``--trace-id``, or 0. Formatted data gives one source per
    trace ID whose protocol was recognised or named by the user. ``extras``
    (images, memory) are added before the configuration of program-flow sources
    that the user did not fully describe is inferred (:mod:`.infer`).
    """
    # Detection and inference are imported here: RawOptions, given to every input, stays light.
    from cstrace.inputs.detect import detect_capture

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
        ids = sorted(set(described.items) | explicit) or [raw.trace_id or 0]
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
    pending: list[_Pending] = []
    for tid in ids:
        items = described.section(tid)

        def for_id(kind: str, tid: int = tid) -> list[tuple[str, str]]:
            return per_id.get(kind, {}).get(None, []) + per_id.get(kind, {}).get(tid, [])

        for _, value in for_id("protocol"):
            word = value.strip()
            items.append(Item("format", _source_type(word), _CLI))
        if not any(i.key.strip().lower() == "format" for i in items):
            g = detected.get(None if single else tid)
            if g is None or g.family is None:
                raise SnapshotError(
                    f"trace ID {tid:#x}: protocol not recognised; name it with "
                    f"--protocol {tid:#x}=PROTOCOL (etmv4, ete, ptm, etmv3, stm, itm)",
                    path=str(capture),
                )
            items.append(Item("format", _FAMILY_FORMAT[g.family], _DETECTED))
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
            family = family_of(source_type)
            if "cannot be decoded without" not in exc.message or family not in _INFERRED:
                raise _located(exc) from None
            pending.append(_Pending(tid, family, items, path, line))
    if unplaced:
        raise SnapshotError(
            f"--set {sorted(unplaced)[0]!r}: no trace source of this capture has that option"
        )
    trace = _trace(capture, blob, fmt, specs, guess.confidence, raw.capture_format is None)
    if extras:
        trace = add_extras(trace, extras)
    if pending:
        trace = _infer(trace, pending, single, raw.trace_id)
    return trace


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


# Program-flow families whose configuration is inferred when the user does not give it.
_INFERRED = ("etm4", "ete", "ptm", "etm3")
_INFER_CAPTURE_BYTES = 1 << 20
"""Bytes at the start of a capture read for the inference (a whole number of frames)."""
_OTHER_FAMILY = {"etm3": ("ptm",), "ptm": ("etm3",)}


@dataclass
class _Pending:
    """A source whose description lacks items that decoding needs: inferred later."""

    trace_id: int
    family: str
    items: list[Item]
    path: str
    line: int | None


def _user_keys(items: list[Item]) -> tuple[set[str], str | None, bool]:
    """Register and option names the user gave, their core type, and whether they named
    the protocol (the detected protocol is given as an item with path ``detected``)."""
    keys: set[str] = set()
    core = None
    named = False
    for item in items:
        low = item.key.strip().lower()
        if low == "format":
            named = named or item.path != _DETECTED
        elif low == "core":
            core = item.value.strip() or None
        else:
            keys.add(item.key.strip() if item.key.strip().isupper() else low)
    return keys, core, named


def _infer(trace: Trace, pending: list[_Pending], single: bool, label: int | None) -> Trace:
    """``trace`` with a source for each pending one, configured by inference."""
    from cstrace.inputs.infer import infer_source
    from cstrace.inputs.platform import platform_of

    buffer = trace.buffers[0]
    data = bytearray()
    for block in buffer.blocks():
        data += block
        if len(data) >= _INFER_CAPTURE_BYTES:
            break
    whole = len(data) < _INFER_CAPTURE_BYTES
    del data[_INFER_CAPTURE_BYTES:]
    streams = demux(bytes(data), buffer.format).streams
    memory = CodeMemories(trace).for_source(Source("infer", "", "", {}, (), core_name=None))
    images = _elf_images(trace)
    sources = list(trace.sources)
    inferred: list[Inferred] = list(trace.inferred)
    has_code = bool(trace.dumps or trace.images)
    chosen: dict[str, dict[str, Any]] = {}
    # The longest streams first: their settings are the start for the shorter ones
    # (the sources of one capture are usually configured alike).
    order = sorted(pending, key=lambda q: -len(streams.get(0 if single else q.trace_id) or b""))
    for p in order:
        stream = streams.get(0 if single else p.trace_id)
        keys, core, named = _user_keys(p.items)
        if named:
            keys.add("format")

        def complete(
            fmt: str, regs: dict[str, int], cand_core: str, p: _Pending = p
        ) -> tuple[dict[str, int], str, str] | None:
            items = [Item("format", fmt, _CLI), Item("core", cand_core, _CLI)]
            items += [Item(k, f"{v:#x}", _CLI) for k, v in regs.items()]
            items += [i for i in p.items if i.path != _DETECTED]
            try:
                spec = describe_source(f"trace_{p.trace_id:#04x}", items, p.path, p.line)
                regs_out = {r.name: r.value for r in spec.device.registers.values()}
            except SnapshotError:
                return None
            version = Source("", "", spec.device.device_type, {}, ()).version
            return regs_out, spec.core_type or cand_core, version

        if stream is None or not len(stream):
            raise SnapshotError(
                f"trace ID {p.trace_id:#x}: no trace data to infer its configuration from; "
                "describe it with --reg/--set",
                path=buffer.origin.path or None,
            )
        family = p.family
        others = () if named else _OTHER_FAMILY.get(family, ())
        result: Inference = infer_source(
            family,
            stream,
            p.trace_id,
            keys,
            core,
            complete,
            lambda _core: memory,
            others,
            chosen,
            has_code,
            p.family if named else None,
            platform_of(images, core),
            single,
            whole,
        )
        chosen.setdefault(result.family, result.candidate)
        # The inference's registers and core already carry the user's items.
        regs, core_type = result.registers, result.core
        sources.append(
            Source(
                name=f"trace_{p.trace_id:#04x}",
                protocol=protocol_name(result.protocol) or "",
                source_type=result.protocol,
                registers=regs,
                buffers=(buffer.name,),
                core=core_type,
                core_name=f"core_{p.trace_id:#04x}",
                origin=Origin("inferred"),
            )
        )
        inferred.append(
            Inferred(
                trace_id=p.trace_id,
                protocol=result.protocol,
                core=core_type,
                settings=dict(result.settings),
                confidence=result.confidence,
                evidence=result.evidence,
                label=result.label,
                undecided=tuple(result.undecided),
                same=tuple(result.same),
            )
        )
    sources.sort(key=lambda s: _trace_id_of(s))
    return replace(trace, sources=sources, inferred=inferred)


def _elf_images(trace: Trace) -> list[tuple[str, ElfImage]]:
    """The ELF images given with the capture, read (for what they say about the core).

    An image that is not an ELF file, or that cannot be read, says nothing here
    (decoding reports it).
    """
    from cstrace.memory.elf import load_elf

    out: list[tuple[str, ElfImage]] = []
    for image in trace.images:
        try:
            data = image.file.read()
        except (OSError, CstraceError):
            continue
        if data[:4] != b"\x7fELF":
            continue
        try:
            out.append((image.name, load_elf(data, image.name)))
        except CstraceError:
            continue
    return out


def _trace_id_of(source: Source) -> int:
    """The trace ID a raw capture's source was made for (its name says it)."""
    try:
        return int(source.name.rsplit("_", 1)[-1], 16)
    except ValueError:
        return 0
