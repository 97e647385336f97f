"""The system event log (metadata requirements §5): processes, threads, libraries, patches.

Input: the text of an event log, one timestamped event per line::

    # timestamp  event(arguments)
    0x0       declare_process(CURRENT, 0, 0xffffff8008080000, "vmlinux")
    0x1200    declare_process(START, 1234, 0x400000, "app", "5f0c6a0e...")
    0x1210    declare_thread(START, 1240, 1234)
    0x1300    declare_library(START, 1234, 0x7f00000000, "libc.so.6")
    0x1400    declare_asid(START, 17, 1234)
    0x1500    patch_code(1234, 0x401000, 4, code=1f2003d5)
    0x2000    declare_process(END, 1234, 0x400000, "app")

(``docs/metadata.md``). Output: an :class:`EventLog`, its events in timestamp
order, each a small record (:class:`ProcessEvent`, :class:`LibraryEvent`,
:class:`ThreadEvent`, :class:`AsidEvent`, :class:`PatchEvent`,
:class:`TraceEvent`) with the line it came from. A malformed line is a located
:class:`~cstrace.errors.InputError`. :mod:`cstrace.memory.spaces` turns a log
into address spaces that change over trace time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum

from cstrace.errors import InputError
from cstrace.parsing import decode_text, parse_int

__all__ = [
    "CONTEXTIDR_MODES",
    "AsidEvent",
    "Event",
    "EventLog",
    "LibraryEvent",
    "PatchEvent",
    "ProcessEvent",
    "State",
    "ThreadEvent",
    "TraceEvent",
    "format_event",
    "format_event_log",
    "parse_event_log",
]

CONTEXTIDR_MODES = ("pid", "asid", "tid", "vmid")
"""How the trace identifies the address space: CONTEXTIDR bits 8..31, an ASID in bits 0..7,
bits 0..31, or the VMID (CONTEXTIDR_EL2 traced as the VMID, by a kernel running at EL2)."""

_MAX_LOG_BYTES = 256 * 1024 * 1024


class State(IntEnum):
    """The STATE parameter of an event (§5.5.1)."""

    START = 0
    END = 1
    CURRENT = 2


class Event:
    """One timestamped event of the log, with the line it came from."""

    __slots__ = ("line", "timestamp")

    def __init__(self, timestamp: int, line: int) -> None:
        self.timestamp = timestamp
        self.line = line


class ProcessEvent(Event):
    """``declare_process(STATE, pid, base, image, uuid, size=N)``: an address space (§5.5.2).

    ``size`` (an extension of §5.5.2, optional) is the extent of the image in
    the process: addresses ``base`` to ``base + size`` belong to it, whether
    its file is found or not (a recording's memory maps give it).
    """

    __slots__ = ("base", "image", "pid", "size", "state", "uuid")

    def __init__(
        self,
        timestamp: int,
        line: int,
        state: State,
        pid: int,
        base: int,
        image: str | None,
        uuid: str | None,
        size: int | None = None,
    ) -> None:
        super().__init__(timestamp, line)
        self.state = state
        self.pid = pid
        self.base = base
        self.image = image
        self.uuid = uuid
        self.size = size


class LibraryEvent(ProcessEvent):
    """``declare_library(STATE, pid, base, image, uuid, size=N)``: a shared object or module
    (§5.5.4)."""

    __slots__ = ()


class ThreadEvent(Event):
    """``declare_thread(STATE, tid, pid)``: a thread of a process (§5.5.3)."""

    __slots__ = ("pid", "state", "tid")

    def __init__(self, timestamp: int, line: int, state: State, tid: int, pid: int) -> None:
        super().__init__(timestamp, line)
        self.state = state
        self.tid = tid
        self.pid = pid


class AsidEvent(Event):
    """``declare_asid(STATE, asid, pid)``: the process an ASID stands for (§5.5.6)."""

    __slots__ = ("asid", "pid", "state")

    def __init__(self, timestamp: int, line: int, state: State, asid: int, pid: int) -> None:
        super().__init__(timestamp, line)
        self.state = state
        self.asid = asid
        self.pid = pid


class PatchEvent(Event):
    """``patch_code(pid, address, length, code|file|id)``: new code installed (§5.5.5)."""

    __slots__ = ("address", "code", "file", "ident", "length", "pid")

    def __init__(
        self,
        timestamp: int,
        line: int,
        pid: int,
        address: int,
        length: int,
        code: bytes | None = None,
        file: str | None = None,
        ident: str | None = None,
    ) -> None:
        super().__init__(timestamp, line)
        self.pid = pid
        self.address = address
        self.length = length
        self.code = code
        self.file = file
        self.ident = ident


class TraceEvent(Event):
    """``define_trace(STATE, trace_id, source, REG=value...)``: a configuration (§5.8)."""

    __slots__ = ("registers", "source", "state", "trace_id")

    def __init__(
        self,
        timestamp: int,
        line: int,
        state: State,
        trace_id: int,
        source: str,
        registers: dict[str, int],
    ) -> None:
        super().__init__(timestamp, line)
        self.state = state
        self.trace_id = trace_id
        self.source = source
        self.registers = registers


@dataclass
class EventLog:
    """A parsed event log: its events in timestamp order (file order for equal times)."""

    path: str
    events: list[Event] = field(default_factory=list)
    text: str = ""
    """The log as it was read (so that it can be written into a package again)."""

    @property
    def uses_asids(self) -> bool:
        """Whether the log maps ASIDs to processes (so CONTEXTIDR holds an ASID)."""
        return any(isinstance(e, AsidEvent) for e in self.events)


# --- parsing ------------------------------------------------------------------------------

_LINE = re.compile(r"^(\S+)\s+([A-Za-z_][A-Za-z_ ]*?)\s*\((.*)\)\s*(?:#.*)?$")
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", re.S)
_HEX = re.compile(r"^(?:0x)?([0-9a-fA-F]{2})+$")


class _Arg:
    __slots__ = ("key", "quoted", "text")

    def __init__(self, key: str | None, text: str, quoted: bool) -> None:
        self.key = key
        self.text = text
        self.quoted = quoted


def _split_args(text: str, path: str, line: int) -> list[_Arg]:
    args: list[_Arg] = []
    i = 0
    n = len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        key: str | None = None
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*", text[i:])
        if m:
            key = m.group(1)
            i += m.end()
        if i < n and text[i] == '"':
            j = i + 1
            buf: list[str] = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(text[j])
                j += 1
            if j >= n:
                raise InputError("unterminated string", path=path, line=line)
            args.append(_Arg(key, "".join(buf), True))
            i = j + 1
        else:
            j = i
            while j < n and text[j] != ",":
                if text[j] in '"()':
                    raise InputError(f"unexpected {text[j]!r} in arguments", path=path, line=line)
                j += 1
            value = text[i:j].strip()
            if not value and key is None and (args or j < n):
                raise InputError("empty argument", path=path, line=line)
            if value or key is not None:
                args.append(_Arg(key, value, False))
            i = j
        while i < n and text[i] in " \t":
            i += 1
        if i < n:
            if text[i] != ",":
                raise InputError(
                    f"expected ',' between arguments, found {text[i]!r}", path=path, line=line
                )
            i += 1
    return args


_SIGNATURES: dict[str, tuple[str, ...]] = {
    "declare_process": ("state", "pid", "base", "image", "uuid"),
    "declare_library": ("state", "pid", "base", "image", "uuid"),
    "declare_thread": ("state", "tid", "pid"),
    "declare_asid": ("state", "asid", "pid"),
    "patch_code": ("pid", "address", "length", "code"),
    "define_trace": ("state", "trace_id", "source"),
}
_OPTIONAL = {"image", "uuid", "code"}
_EXTRA_KEYS = {
    "patch_code": {"file", "id"},
    "declare_process": {"size"},
    "declare_library": {"size"},
}


def _bind(
    name: str, args: list[_Arg], path: str, line: int
) -> tuple[dict[str, _Arg], dict[str, _Arg]]:
    sig = _SIGNATURES[name]
    bound: dict[str, _Arg] = {}
    extra: dict[str, _Arg] = {}
    positional = True
    for k, a in enumerate(args):
        if a.key is None:
            if not positional:
                raise InputError(
                    f"{name}: positional argument after a keyword argument", path=path, line=line
                )
            if k >= len(sig):
                raise InputError(
                    f"{name}: too many arguments (expected {', '.join(sig)})", path=path, line=line
                )
            bound[sig[k]] = a
        else:
            positional = False
            key = a.key.lower()
            if key in sig:
                if key in bound:
                    raise InputError(f"{name}: {key} given twice", path=path, line=line)
                bound[key] = a
            elif name == "define_trace" or key in _EXTRA_KEYS.get(name, set()):
                extra[a.key] = a
            else:
                raise InputError(
                    f"{name}: unknown argument {a.key!r} (expected {', '.join(sig)})",
                    path=path,
                    line=line,
                )
    missing = [s for s in sig if s not in bound and s not in _OPTIONAL]
    if missing:
        raise InputError(f"{name}: missing {', '.join(missing)}", path=path, line=line)
    return bound, extra


def _state(a: _Arg, path: str, line: int) -> State:
    try:
        return State[a.text.strip().upper()]
    except KeyError:
        raise InputError(
            f"state {a.text!r} is not START, END or CURRENT", path=path, line=line
        ) from None


def _int(a: _Arg, what: str, path: str, line: int) -> int:
    value = parse_int(a.text, what=what, path=path, line=line)
    return value


def _opt_str(a: _Arg | None) -> str | None:
    if a is None:
        return None
    if not a.quoted and a.text.lower() in ("", "none", "-"):
        return None
    return a.text if a.text else None


def _hexbytes(a: _Arg, path: str, line: int) -> bytes:
    text = a.text.replace(" ", "").replace("_", "")
    if not _HEX.match(text):
        raise InputError(f"code {a.text!r} is not hex bytes", path=path, line=line)
    if text.lower().startswith("0x"):
        text = text[2:]
    return bytes.fromhex(text)


def _make_event(name: str, timestamp: int, args: list[_Arg], path: str, line: int) -> Event:
    b, extra = _bind(name, args, path, line)
    match name:
        case "declare_process" | "declare_library":
            cls = ProcessEvent if name == "declare_process" else LibraryEvent
            size = _int(extra["size"], "size", path, line) if "size" in extra else None
            if size is not None and size <= 0:
                raise InputError(f"{name}: size {size} is not positive", path=path, line=line)
            return cls(
                timestamp,
                line,
                _state(b["state"], path, line),
                _int(b["pid"], "pid", path, line),
                _int(b["base"], "base address", path, line),
                _opt_str(b.get("image")),
                _opt_str(b.get("uuid")),
                size,
            )
        case "declare_thread":
            return ThreadEvent(
                timestamp,
                line,
                _state(b["state"], path, line),
                _int(b["tid"], "tid", path, line),
                _int(b["pid"], "pid", path, line),
            )
        case "declare_asid":
            asid = _int(b["asid"], "asid", path, line)
            if not 0 <= asid <= 0xFFFF:
                raise InputError(f"asid {asid:#x} is out of range", path=path, line=line)
            return AsidEvent(
                timestamp,
                line,
                _state(b["state"], path, line),
                asid,
                _int(b["pid"], "pid", path, line),
            )
        case "patch_code":
            code: bytes | None = None
            file: str | None = None
            ident: str | None = None
            c = b.get("code")
            if c is not None:
                if c.quoted:
                    file = c.text
                elif c.text.lower() not in ("none", "-", ""):
                    code = _hexbytes(c, path, line)
            if "file" in extra:
                file = extra["file"].text
            if "id" in extra:
                ident = extra["id"].text
            length = _int(b["length"], "length", path, line)
            if code is not None and len(code) != length:
                raise InputError(
                    f"patch_code: {len(code)} code bytes given for length {length}",
                    path=path,
                    line=line,
                )
            return PatchEvent(
                timestamp,
                line,
                _int(b["pid"], "pid", path, line),
                _int(b["address"], "address", path, line),
                length,
                code,
                file,
                ident,
            )
        case _:
            regs = {
                k.upper(): parse_int(v.text, what=f"register {k}", path=path, line=line)
                for k, v in extra.items()
            }
            tid = _int(b["trace_id"], "trace ID", path, line)
            if not 0 <= tid <= 0x7F:
                raise InputError(f"trace ID {tid:#x} is out of range", path=path, line=line)
            return TraceEvent(
                timestamp, line, _state(b["state"], path, line), tid, b["source"].text, regs
            )


def parse_event_log(raw: bytes | str, path: str = "<event log>") -> EventLog:
    """Parse an event log; a located :class:`InputError` on the first malformed line."""
    text = decode_text(raw, path, what="event log", limit=_MAX_LOG_BYTES)
    log = EventLog(path, text=text)
    for number, raw_line in enumerate(text.splitlines(), start=1):
        s = raw_line.strip()
        if not s or s.startswith(("#", ";")):
            continue
        m = _LINE.match(s)
        if not m:
            raise InputError(
                f"expected 'TIMESTAMP event(arguments)', found {s[:60]!r}", path=path, line=number
            )
        ts = parse_int(m.group(1), what="timestamp", path=path, line=number)
        name = re.sub(r"[ _]+", "_", m.group(2).strip().lower())
        if name not in _SIGNATURES:
            raise InputError(
                f"unknown event {m.group(2)!r} (expected {', '.join(_SIGNATURES)})",
                path=path,
                line=number,
            )
        args = _split_args(m.group(3), path, number)
        log.events.append(_make_event(name, ts, args, path, number))
    log.events.sort(key=lambda e: e.timestamp)
    return log


# --- writing ------------------------------------------------------------------------------


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def format_event(e: Event) -> str:
    """One event as a line of the event log (without its timestamp)."""
    if isinstance(e, ProcessEvent):
        name = "declare_library" if isinstance(e, LibraryEvent) else "declare_process"
        args = [e.state.name, str(e.pid), f"{e.base:#x}"]
        if e.image is not None or e.uuid is not None:
            args.append("-" if e.image is None else _quote(e.image))
        if e.uuid is not None:
            args.append(_quote(e.uuid))
        if e.size is not None:
            args.append(f"size={e.size:#x}")
        return f"{name}({', '.join(args)})"
    if isinstance(e, ThreadEvent):
        return f"declare_thread({e.state.name}, {e.tid}, {e.pid})"
    if isinstance(e, AsidEvent):
        return f"declare_asid({e.state.name}, {e.asid:#x}, {e.pid})"
    if isinstance(e, PatchEvent):
        args = [str(e.pid), f"{e.address:#x}", str(e.length)]
        if e.code is not None:
            args.append(f"code={e.code.hex()}")
        if e.file is not None:
            args.append(f"file={_quote(e.file)}")
        if e.ident is not None:
            args.append(f"id={_quote(e.ident)}")
        return f"patch_code({', '.join(args)})"
    if isinstance(e, TraceEvent):
        regs = "".join(f", {k}={v:#x}" for k, v in e.registers.items())
        return f"define_trace({e.state.name}, {e.trace_id:#x}, {e.source}{regs})"
    raise TypeError(f"not an event: {e!r}")


def format_event_log(events: list[Event], comment: str = "") -> str:
    """The text of an event log holding ``events`` (in their order), which
    :func:`parse_event_log` reads back; ``comment`` lines go first, after ``#``."""
    lines = [f"# {c}" if c else "#" for c in comment.splitlines()]
    lines += [f"{e.timestamp:#x}  {format_event(e)}" for e in events]
    return "\n".join(lines) + "\n"
