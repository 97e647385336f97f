"""The trace metadata INI format (metadata requirements §4.6 and §6.3.1) → trace source devices.

Input: the text of a metadata file: a ``[buffer]`` section (``vendor``,
``component``, ``format``) and one ``[trace_N]`` section per trace source ID
``N`` (decimal or ``0x`` hex) holding the source's ``format`` (``ETM3.5``,
``PFT1.1``, ``ETM4.2``, ``ETE``, ``STM``, ``ITM``...), register values
(``ETMCR: 0x12345678``) and individual options (``cyclecount: 1``). Entries may
be written ``key: value`` (as in §6.3.1) or ``key = value``.

Output: a :class:`TraceMetadata` whose :class:`TraceSpec` items carry a
:class:`~cstrace.inputs.devices.Device` with the registers the protocol
decoders read. Individual options override the registers that hold the same
setting (§6.3.1 recommends supplying them); a register that is absent but needed
to hold an option is made from a documented baseline. There are no defaults for
what decoding needs: when an item is given neither as an option nor through its
register, :func:`parse_metadata` raises a :class:`SnapshotError` naming every
missing item, the section and the file.

:func:`source_trace_id` and :func:`format_metadata` go the other way, from a
snapshot's devices to metadata text (used to write trace packages).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cstrace.errors import SnapshotError
from cstrace.inputs.devices import Device, Register, parse_int
from cstrace.inputs.ini import IniFile, parse_ini
from cstrace.parsing import decode_text
from cstrace.trace import Source

__all__ = [
    "BUFFER_FORMATS",
    "BufferSpec",
    "Item",
    "TraceMetadata",
    "TraceSpec",
    "describe_source",
    "family_of",
    "format_metadata",
    "metadata_from_ini",
    "parse_metadata",
    "parse_metadata_text",
    "source_trace_id",
    "trace_id_of",
    "trace_id_register",
]

BUFFER_FORMATS: dict[str, str] = {
    "coresight": "coresight",
    "formatted": "coresight",
    "dstream_coresight": "dstream_coresight",
    "tpiu": "tpiu",
    "source_data": "source_data",
    "unformatted": "source_data",
    "raw": "source_data",
}
"""Buffer ``format`` values (lower case) → the capture format of :mod:`cstrace.capture`."""

_MAX_METADATA_BYTES = 4 * 1024 * 1024

# Protocol families and the device type each ``format`` stands for.
_FAMILY_PATTERNS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^ETM(?:V)?3(?:\.(\d+))?$"), "etm3", "ETM3.{0}"),
    (re.compile(r"^(?:PFT|PTM)(?:V)?1?(?:\.(\d+))?$"), "ptm", "PTM1.{0}"),
    (re.compile(r"^ETM(?:V)?4(?:\.(\d+))?$"), "etm4", "ETM4.{0}"),
    (re.compile(r"^ETE(?:V)?(?:1?\.(\d+))?$"), "ete", "ETE"),
    (re.compile(r"^(?:STM|STP|STPV2)(?:\d*)(?:\.(\d+))?$"), "stm", "STM"),
    (re.compile(r"^ITM(?:\.(\d+))?$"), "itm", "ITM"),
)
# Device types a DS-5 snapshot uses; a format already written this way is kept verbatim.
_NATIVE_PREFIXES = ("ETM3", "ETM4", "ETE", "PTM1", "PFT1", "PTM", "PFT", "STM", "ITM")

_TRACE_ID_REGISTERS: dict[str, tuple[str, int]] = {
    "etm3": ("ETMTRACEIDR", 0),
    "ptm": ("ETMTRACEIDR", 0),
    "etm4": ("TRCTRACEIDR", 0),
    "ete": ("TRCTRACEIDR", 0),
    "stm": ("STMTCSR", 16),
    "itm": ("ITMTCR", 16),
}

# Keys of a [trace_N] section that are neither registers nor decode options.
_DESCRIPTIVE = {"format", "name", "core", "core_name", "buffers", "description", "cpu"}


def family_of(device_type: str) -> str:
    """The protocol family of a device type or format: ``etm3``, ``ptm``, ``etm4``, ``ete``...

    Unknown formats give ``other``.
    """
    text = device_type.strip().upper().replace(" ", "")
    for pattern, family, _ in _FAMILY_PATTERNS:
        if pattern.match(text):
            return family
    return "other"


def _device_type(fmt: str) -> str:
    """The snapshot device type for a metadata ``format`` (``ETMv4.2`` → ``ETM4.2``)."""
    text = fmt.strip()
    up = text.upper().replace(" ", "")
    if up.split(".", 1)[0] in _NATIVE_PREFIXES:
        return text
    for pattern, _, template in _FAMILY_PATTERNS:
        m = pattern.match(up)
        if m:
            minor = m.group(1) or "0"
            return template.format(minor)
    return text


def trace_id_register(family: str) -> tuple[str, int] | None:
    """The register holding a family's trace ID and the ID field's bit position."""
    return _TRACE_ID_REGISTERS.get(family)


def source_trace_id(device: Device) -> int | None:
    """The CoreSight trace ID of a trace source device, from its trace ID register."""
    where = _TRACE_ID_REGISTERS.get(family_of(device.device_type))
    if where is None:
        return None
    value = device.reg(where[0])
    if value is None:
        return None
    return (value >> where[1]) & 0x7F


@dataclass
class BufferSpec:
    """The ``[buffer]`` section: who captured the trace and how it is formatted."""

    vendor: str = ""
    component: str = ""
    format: str | None = None
    name: str | None = None
    line: int = 0


@dataclass
class TraceSpec:
    """One ``[trace_N]`` section, resolved into a trace source device."""

    trace_id: int
    device: Device
    core_type: str | None
    core_name: str | None
    buffers: list[str] | None
    line: int


@dataclass
class TraceMetadata:
    """A parsed metadata file."""

    path: str
    buffer: BufferSpec
    traces: list[TraceSpec] = field(default_factory=list)

    def trace(self, trace_id: int) -> TraceSpec | None:
        """The source with trace ID ``trace_id``, if described."""
        for t in self.traces:
            if t.trace_id == trace_id:
                return t
        return None


# --- individual options -------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One item describing a trace source: a register, an option or a descriptive key.

    From a ``[trace_N]`` section of a metadata file, or from the command line
    (``--set``, ``--reg``, ``--protocol``, ``--core``; ``path`` is then
    ``command line`` and ``line`` None).
    """

    key: str
    value: str
    path: str
    line: int | None = None


class _Regs:
    """Register values being assembled for one source, remembering what changed."""

    def __init__(self, given: dict[str, Register], baseline: Callable[[str], int]) -> None:
        self.given = given
        self.values: dict[str, int] = {}
        self.changed: dict[str, int | None] = {}  # register → line of the option that set it
        self._baseline = baseline

    def get(self, name: str) -> int:
        if name not in self.values:
            reg = self.given.get(name)
            self.values[name] = reg.value if reg is not None else self._baseline(name)
        return self.values[name]

    def has(self, name: str) -> bool:
        return name in self.given

    def put(self, name: str, mask: int, value: int, line: int | None) -> None:
        old = self.get(name)
        new = (old & ~mask) | (value & mask)
        if new != old or name not in self.given:
            self.values[name] = new
            self.changed.setdefault(name, line)

    def flag(self, name: str, bit: int, on: bool, line: int | None) -> None:
        self.put(name, 1 << bit, (1 << bit) if on else 0, line)

    def field(self, name: str, lsb: int, width: int, value: int, line: int | None) -> None:
        mask = ((1 << width) - 1) << lsb
        self.put(name, mask, value << lsb, line)


_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f", "none"}


def _bool(entry: Item, path: str) -> bool:
    v = entry.value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise SnapshotError(
        f"{entry.key}: {entry.value!r} is not a boolean (use 1/0, true/false)",
        path=path,
        line=entry.line,
    )


def _choice(entry: Item, path: str, allowed: Iterable[int]) -> int:
    options = tuple(allowed)
    value = parse_int(entry.value, what=entry.key, path=path, line=entry.line)
    if value not in options:
        raise SnapshotError(
            f"{entry.key}: {value} is not one of {', '.join(str(o) for o in options)}",
            path=path,
            line=entry.line,
        )
    return value


_COND_MODES = {"none": 0, "load": 1, "store": 2, "loadstore": 3, "all": 7}
_COND_ALIASES = {"0": "none", "off": "none", "false": "none", "ls": "loadstore", "1": "all"}


def _conditional(entry: Item, path: str) -> int:
    text = entry.value.strip().lower().replace("_", "").replace("-", "").replace("/", "")
    text = _COND_ALIASES.get(text, text)
    if text not in _COND_MODES:
        raise SnapshotError(
            f"{entry.key}: {entry.value!r} is not one of {', '.join(_COND_MODES)}",
            path=path,
            line=entry.line,
        )
    return _COND_MODES[text]


_Apply = Callable[[_Regs, Item, str], None]


@dataclass(frozen=True)
class _Item:
    """An individual option: how it sets registers, and which registers can stand for it."""

    apply: _Apply
    satisfied: Callable[[_Regs], bool]
    required: bool = False


def _has_all(*names: str) -> Callable[[_Regs], bool]:
    return lambda r: all(r.has(n) for n in names)


# ETMv3 and PTM: ETMCR, ETMCCER and ETMIDR (ETM IHI0014Q §3.4; PFT IHI0035B §3.2).


def _etm3_cyclecount(r: _Regs, e: Item, p: str) -> None:
    r.flag("ETMCR", 12, _bool(e, p), e.line)


def _etm3_context_id(r: _Regs, e: Item, p: str) -> None:
    size = _choice(e, p, (0, 8, 16, 32))
    r.field("ETMCR", 14, 2, {0: 0, 8: 1, 16: 2, 32: 3}[size], e.line)


def _etm3_vmid(r: _Regs, e: Item, p: str) -> None:
    size = _choice(e, p, (0, 8))
    r.flag("ETMCR", 30, size == 8, e.line)
    if size:
        r.flag("ETMCCER", 26, True, e.line)


def _etm3_timestamp_bits(r: _Regs, e: Item, p: str) -> None:
    size = _choice(e, p, (0, 48, 64))
    r.flag("ETMCR", 28, size != 0, e.line)
    if size:
        r.flag("ETMCCER", 22, True, e.line)
        r.flag("ETMCCER", 29, size == 64, e.line)


def _etm3_timestamp_gray(r: _Regs, e: Item, p: str) -> None:
    # ETMCCER bit 28 set means natural binary timestamps; clear means Gray-coded.
    r.flag("ETMCCER", 28, not _bool(e, p), e.line)


def _etm3_timestamp_ok(r: _Regs) -> bool:
    if not r.has("ETMCR"):
        return False
    return not (r.get("ETMCR") >> 28) & 1 or r.has("ETMCCER")


def _etm3_gray_needed(r: _Regs) -> bool:
    return bool((r.get("ETMCR") >> 28) & 1)


def _etm3_bit(register: str, bit: int, also: tuple[str, int] | None = None) -> _Apply:
    def apply(r: _Regs, e: Item, p: str) -> None:
        on = _bool(e, p)
        r.flag(register, bit, on, e.line)
        if also is not None and on:
            r.flag(also[0], also[1], True, e.line)

    return apply


_ETM3_ITEMS: dict[str, _Item] = {
    "cyclecount": _Item(_etm3_cyclecount, _has_all("ETMCR"), True),
    "context_id": _Item(_etm3_context_id, _has_all("ETMCR"), True),
    "vmid": _Item(_etm3_vmid, _has_all("ETMCR"), True),
    "timestamp_bits": _Item(_etm3_timestamp_bits, _etm3_timestamp_ok, True),
    "timestamp_gray": _Item(_etm3_timestamp_gray, _has_all("ETMCCER")),
    "data_value": _Item(_etm3_bit("ETMCR", 2), _has_all("ETMCR"), True),
    "data_address": _Item(_etm3_bit("ETMCR", 3), _has_all("ETMCR"), True),
    "data_only": _Item(_etm3_bit("ETMCR", 20), _has_all("ETMCR")),
    "branch_broadcast": _Item(_etm3_bit("ETMCR", 8), _has_all("ETMCR")),
    "alt_branch": _Item(_etm3_bit("ETMIDR", 20), _has_all("ETMIDR")),
}

_PTM_ITEMS: dict[str, _Item] = {
    "cyclecount": _Item(_etm3_cyclecount, _has_all("ETMCR"), True),
    "context_id": _Item(_etm3_context_id, _has_all("ETMCR"), True),
    "vmid": _Item(_etm3_vmid, _has_all("ETMCR"), True),
    "timestamp_bits": _Item(_etm3_timestamp_bits, _etm3_timestamp_ok, True),
    "timestamp_gray": _Item(_etm3_timestamp_gray, _has_all("ETMCCER")),
    "return_stack": _Item(_etm3_bit("ETMCR", 29, ("ETMCCER", 23)), _has_all("ETMCR"), True),
    "dmb_dsb_waypoints": _Item(_etm3_bit("ETMCCER", 24), _has_all("ETMCCER"), True),
    "branch_broadcast": _Item(_etm3_bit("ETMCR", 8), _has_all("ETMCR")),
}

# ETMv4 and ETE: TRCCONFIGR, TRCIDR0, TRCIDR2, TRCIDR8 (ETMv4 IHI0064, Arm ARM ETE chapter).


def _e4_cyclecount(r: _Regs, e: Item, p: str) -> None:
    on = _bool(e, p)
    r.flag("TRCCONFIGR", 4, on, e.line)
    if on:
        r.flag("TRCIDR0", 7, True, e.line)


def _e4_context_id(r: _Regs, e: Item, p: str) -> None:
    size = _choice(e, p, (0, 32))
    r.flag("TRCCONFIGR", 6, size != 0, e.line)
    if size:
        r.field("TRCIDR2", 5, 5, 4, e.line)


def _e4_vmid(r: _Regs, e: Item, p: str) -> None:
    size = _choice(e, p, (0, 8, 16, 32))
    r.flag("TRCCONFIGR", 7, size != 0, e.line)
    if size:
        r.field("TRCIDR2", 10, 5, {8: 1, 16: 2, 32: 4}[size], e.line)


def _e4_timestamp_bits(r: _Regs, e: Item, p: str) -> None:
    size = _choice(e, p, (0, 48, 64))
    r.flag("TRCCONFIGR", 11, size != 0, e.line)
    if size:
        r.field("TRCIDR0", 24, 5, 6 if size == 48 else 8, e.line)


def _e4_return_stack(r: _Regs, e: Item, p: str) -> None:
    on = _bool(e, p)
    r.flag("TRCCONFIGR", 12, on, e.line)
    if on:
        r.flag("TRCIDR0", 9, True, e.line)


def _e4_conditional(r: _Regs, e: Item, p: str) -> None:
    mode = _conditional(e, p)
    r.field("TRCCONFIGR", 8, 3, mode, e.line)
    if mode:
        r.flag("TRCIDR0", 6, True, e.line)


def _e4_commit(r: _Regs, e: Item, p: str) -> None:
    r.flag("TRCIDR0", 29, bool(_choice(e, p, (0, 1))), e.line)


def _e4_branch_broadcast(r: _Regs, e: Item, p: str) -> None:
    on = _bool(e, p)
    r.flag("TRCCONFIGR", 3, on, e.line)
    if on:
        r.flag("TRCIDR0", 5, True, e.line)


def _e4_address_bits(r: _Regs, e: Item, p: str) -> None:
    size = _choice(e, p, (32, 64))
    r.field("TRCIDR2", 0, 5, 4 if size == 32 else 8, e.line)


def _e4_max_speculation(r: _Regs, e: Item, p: str) -> None:
    r.put("TRCIDR8", 0xFFFFFFFF, parse_int(e.value, what=e.key, path=p, line=e.line), e.line)


def _e4_needs(config_bit: int, idr: str | None) -> Callable[[_Regs], bool]:
    """Satisfied by TRCCONFIGR, plus the ID register when the feature is enabled."""

    def ok(r: _Regs) -> bool:
        if not r.has("TRCCONFIGR"):
            return False
        if idr is None or not (r.get("TRCCONFIGR") >> config_bit) & 1:
            return True
        return r.has(idr)

    return ok


_E4_ITEMS: dict[str, _Item] = {
    "cyclecount": _Item(_e4_cyclecount, _has_all("TRCCONFIGR"), True),
    "context_id": _Item(_e4_context_id, _e4_needs(6, "TRCIDR2"), True),
    "vmid": _Item(_e4_vmid, _e4_needs(7, "TRCIDR2"), True),
    "timestamp_bits": _Item(_e4_timestamp_bits, _e4_needs(11, "TRCIDR0"), True),
    "return_stack": _Item(_e4_return_stack, _has_all("TRCCONFIGR"), True),
    "conditional": _Item(_e4_conditional, _has_all("TRCCONFIGR"), True),
    "commit_opt": _Item(_e4_commit, _has_all("TRCIDR0"), True),
    "branch_broadcast": _Item(_e4_branch_broadcast, _has_all("TRCCONFIGR")),
    "address_bits": _Item(_e4_address_bits, _has_all("TRCIDR2")),
    "max_speculation": _Item(_e4_max_speculation, _has_all("TRCIDR8")),
}

_ITEMS: dict[str, dict[str, _Item]] = {
    "etm3": _ETM3_ITEMS,
    "ptm": _PTM_ITEMS,
    "etm4": _E4_ITEMS,
    "ete": _E4_ITEMS,
    "stm": {},
    "itm": {},
    "other": {},
}

# Other spellings accepted for option names.
_ALIASES = {
    "cycle_count": "cyclecount",
    "cycle_accurate": "cyclecount",
    "contextid": "context_id",
    "context_id_bits": "context_id",
    "vmid_bits": "vmid",
    "vmid_size": "vmid",
    "timestamp_size": "timestamp_bits",
    "timestamp_grey": "timestamp_gray",
    "returnstack": "return_stack",
    "conditional_trace": "conditional",
    "commit": "commit_opt",
    "commopt": "commit_opt",
    "dmb_dsb_waypoint": "dmb_dsb_waypoints",
}


def _minor(device_type: str) -> int:
    m = re.search(r"\.(\d+)", device_type)
    return int(m.group(1)) if m else 0


def _baseline(family: str, fmt: str, trace_id: int) -> Callable[[str], int]:
    """Values for registers that are needed but were not given (documented in docs/metadata.md)."""
    minor = _minor(fmt)

    def value(name: str) -> int:
        match family, name:
            case ("etm3", "ETMIDR"):
                return 0x41000000 | (2 << 8) | ((minor & 0xF) << 4)
            case ("ptm", "ETMIDR"):
                return 0x41000000 | (3 << 8) | ((minor & 0xF) << 4)
            case ("etm3" | "ptm", "ETMTRACEIDR"):
                return trace_id
            case ("etm4", "TRCIDR1"):
                return 0x41000000 | (4 << 8) | ((minor & 0xF) << 4)
            case ("ete", "TRCIDR1"):
                return 0x4100FFF0
            case ("ete", "TRCDEVARCH"):
                return 0x47705A13 | ((minor & 0xF) << 16)
            case ("etm4" | "ete", "TRCIDR0" | "TRCCONFIGR"):
                return 0x1
            case ("etm4" | "ete", "TRCIDR2"):
                return 0x8
            case ("etm4" | "ete", "TRCTRACEIDR"):
                return trace_id
            case ("stm", "STMTCSR") | ("itm", "ITMTCR"):
                return trace_id << 16
        return 0

    return value


# Registers every source of a family gets, so that decoders find them.
_ALWAYS: dict[str, tuple[str, ...]] = {
    "etm3": ("ETMCR", "ETMIDR", "ETMCCER", "ETMTRACEIDR"),
    "ptm": ("ETMCR", "ETMIDR", "ETMCCER", "ETMTRACEIDR"),
    "etm4": ("TRCCONFIGR", "TRCTRACEIDR", "TRCIDR0", "TRCIDR1", "TRCIDR2", "TRCIDR8"),
    "ete": (
        "TRCCONFIGR",
        "TRCTRACEIDR",
        "TRCDEVARCH",
        "TRCIDR0",
        "TRCIDR1",
        "TRCIDR2",
        "TRCIDR8",
    ),
    "stm": ("STMTCSR",),
    "itm": ("ITMTCR",),
    "other": (),
}

_REG_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)\s*(?:\((.*)\))?$")
_OPTION_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def _parse_trace_id(text: str, path: str, line: int | None) -> int:
    value = parse_int(text, what="trace source ID", path=path, line=line)
    if not 0 <= value <= 0x7F:
        raise SnapshotError(
            f"trace source ID {value:#x} is outside 0x00..0x7f", path=path, line=line
        )
    return value


def _register_entry(entry: Item, path: str) -> Register:
    m = _REG_KEY.match(entry.key.strip())
    if not m:
        raise SnapshotError(f"malformed register name {entry.key!r}", path=path, line=entry.line)
    name = m.group(1).upper()
    size = 32
    reg_id: int | None = None
    extra = m.group(2)
    if extra:
        for item in extra.split(","):
            k, sep, v = item.strip().partition(":")
            if not sep:
                k, v = "id", k
            if k.strip().lower() == "size":
                size = parse_int(v, what=f"register {name} size", path=path, line=entry.line)
            elif k.strip().lower() == "id" and v.strip():
                reg_id = parse_int(v, what=f"register {name} id", path=path, line=entry.line)
    reg = Register(name, entry.value.strip(), path, entry.line or 0, reg_id, size)
    _ = reg.value  # a located error now rather than when a decoder reads it
    return reg


def knows_option(device_type: str, key: str) -> bool:
    """Whether ``key`` (an option such as ``cyclecount``) applies to this trace source type."""
    low = key.strip().lower()
    return _ALIASES.get(low, low) in _ITEMS.get(family_of(_device_type(device_type)), {})


def _is_register_key(key: str, family: str) -> bool:
    """Register names are upper case (``ETMCR``, ``TRCIDR0``); options are lower case."""
    base = key.split("(", 1)[0].strip()
    return bool(base) and base == base.upper() and any(c.isalpha() for c in base)


def describe_source(section: str, items: list[Item], path: str, line: int | None) -> TraceSpec:
    """Resolve the items of one trace source (a ``[trace_N]`` section) into a trace source device.

    ``section`` is ``trace_N`` (N the trace ID); ``path`` and ``line`` say
    where the section is, for errors about the section as a whole. Registers
    (upper case) are used as given, options (lower case) set the bits of the
    registers that hold them, and what decoding needs but nobody gave is an
    :class:`~cstrace.errors.InputError` naming every missing item.
    """
    suffix = section[len("trace_") :].strip() if section.lower().startswith("trace_") else ""
    trace_id = _parse_trace_id(suffix, path, line)
    fmt_entry = next((e for e in reversed(items) if e.key.strip().lower() == "format"), None)
    if fmt_entry is None or not fmt_entry.value.strip():
        raise SnapshotError(
            f"[{section}]: missing item 'format' (the trace source architecture, "
            "e.g. ETM3.5, PFT1.1, ETM4.2, ETE, STM, ITM)",
            path=path,
            line=line,
        )
    device_type = _device_type(fmt_entry.value)
    family = family_of(device_type)
    given: dict[str, Register] = {}
    options: list[tuple[str, Item]] = []
    known = _ITEMS[family]
    for e in items:
        low = e.key.strip().lower()
        if low in _DESCRIPTIVE:
            continue
        if _is_register_key(e.key, family):
            reg = _register_entry(e, e.path)
            given[reg.name] = reg
            continue
        name = _ALIASES.get(low, low)
        if name in known:
            options.append((name, e))
        elif _OPTION_KEY.match(low):
            choices = ", ".join(sorted(known)) or "none"
            raise SnapshotError(
                f"[{section}]: unknown item {e.key!r} for {device_type} trace "
                f"(options: {choices}; registers are written in upper case)",
                path=e.path,
                line=e.line,
            )
        else:
            raise SnapshotError(f"[{section}]: malformed item {e.key!r}", path=e.path, line=e.line)

    id_reg = _TRACE_ID_REGISTERS.get(family)
    if id_reg is not None and id_reg[0] in given:
        reg = given[id_reg[0]]
        reg_id = (reg.value >> id_reg[1]) & 0x7F
        if reg_id != trace_id:
            raise SnapshotError(
                f"[{section}]: register {reg.name} gives trace ID {reg_id:#x}, "
                f"but the section is for trace ID {trace_id:#x}",
                path=path,
                line=reg.line,
            )

    regs = _Regs(given, _baseline(family, fmt_entry.value, trace_id))
    seen: set[str] = set()
    for name, e in options:
        known[name].apply(regs, e, e.path)
        seen.add(name)

    missing = [
        name
        for name, item in known.items()
        if item.required and name not in seen and not item.satisfied(regs)
    ]
    if (
        family in ("etm3", "ptm")
        and "timestamp_gray" not in seen
        and not _ETM3_ITEMS["timestamp_gray"].satisfied(regs)
        and "timestamp_bits" not in missing
        and _etm3_gray_needed(regs)
    ):
        missing.append("timestamp_gray")
    if missing:
        needs = ", ".join(missing)
        raise SnapshotError(
            f"[{section}]: {device_type} trace cannot be decoded without "
            f"{'item' if len(missing) == 1 else 'items'} {needs} "
            f"(give {'it' if len(missing) == 1 else 'them'} as "
            f"{'an option' if len(missing) == 1 else 'options'} or through the "
            f"{'register that holds it' if len(missing) == 1 else 'registers that hold them'})",
            path=path,
            line=line,
        )

    # Registers given alone are used as they are (a snapshot converted to metadata keeps
    # its exact configuration); with options, or with no registers at all, the registers
    # the family's decoders read are completed from the baseline.
    registers: dict[str, Register] = dict(given)
    names = list(given)
    complete = _ALWAYS[family] if (seen or not given) else ()
    if id_reg is not None and id_reg[0] not in names:
        names.append(id_reg[0])
    for name in complete:
        if name not in names:
            names.append(name)
    for name in regs.changed:
        if name not in names:
            names.append(name)
    for name in names:
        if name in given and name not in regs.changed:
            continue
        reg_line = regs.changed.get(name, line)
        old = given.get(name)
        registers[name] = Register(
            name,
            f"0x{regs.get(name):08X}",
            path,
            reg_line or 0,
            old.reg_id if old else None,
            old.size if old else 32,
        )

    def get(key: str) -> str | None:
        found = [e for e in items if e.key.strip().lower() == key]
        return found[-1].value if found else None

    dev_name = (get("name") or "").strip() or section
    cpu_entry = [e for e in items if e.key.strip().lower() == "cpu"]
    cpu = (
        parse_int(cpu_entry[-1].value, what="cpu", path=path, line=cpu_entry[-1].line)
        if cpu_entry
        else None
    )
    device = Device(
        name=dev_name,
        device_class="trace_source",
        device_type=device_type,
        location="",
        path=path,
        registers=registers,
        cpu=cpu,
    )
    core_type = (get("core") or "").strip() or None
    core_name = (get("core_name") or "").strip() or None
    buffers_text = get("buffers")
    buffers = (
        [b.strip() for b in buffers_text.split(",") if b.strip()]
        if buffers_text is not None
        else None
    )
    return TraceSpec(trace_id, device, core_type, core_name, buffers, line or 0)


def parse_metadata_text(text: str, path: str = "<metadata>") -> IniFile:
    """Parse metadata INI text, accepting ``key: value`` as well as ``key = value``."""
    lines = text.splitlines()
    out: list[str] = []
    for raw in lines:
        s = raw.strip()
        if s and s[0] not in ";#[":
            colon = s.find(":")
            equal = s.find("=")
            paren = s.find("(")
            # ``key: value`` unless an '=' comes first, or the colon sits inside a
            # register annotation such as ``PC(size:64)=0``.
            if colon >= 0 and (equal < 0 or colon < equal) and not (0 <= paren < colon):
                raw = s[:colon] + "=" + s[colon + 1 :]
        out.append(raw)
    return parse_ini("\n".join(out), path)


def parse_metadata(raw: bytes | str, path: str = "<metadata>") -> TraceMetadata:
    """Parse a §6.3.1 metadata file into buffer information and trace source devices."""
    text = decode_text(raw, path, what="metadata file", limit=_MAX_METADATA_BYTES)
    return metadata_from_ini(parse_metadata_text(text, path))


def metadata_from_ini(ini: IniFile) -> TraceMetadata:
    """Resolve a parsed metadata file (see :func:`parse_metadata`)."""
    path = ini.path
    meta = TraceMetadata(path, BufferSpec())
    sec = ini.section("buffer")
    if sec is not None:
        fmt = sec.entry("format")
        fmt_value: str | None = None
        if fmt is not None:
            key = fmt.value.strip().lower()
            if key not in BUFFER_FORMATS:
                raise SnapshotError(
                    f"[buffer] format {fmt.value!r} is not one of {', '.join(BUFFER_FORMATS)}",
                    path=path,
                    line=fmt.line,
                )
            fmt_value = BUFFER_FORMATS[key]
        meta.buffer = BufferSpec(
            vendor=(sec.get("vendor") or "").strip(),
            component=(sec.get("component") or "").strip(),
            format=fmt_value,
            name=(sec.get("name") or "").strip() or None,
            line=sec.line,
        )
    names: dict[str, int] = {}
    for s in ini.sections:
        low = s.name.lower()
        if low == "buffer":
            continue
        if not low.startswith("trace_"):
            raise SnapshotError(
                f"unknown section [{s.name}] (expected [buffer] or [trace_N])",
                path=path,
                line=s.line,
            )
        entries = [Item(e.key, e.value, path, e.line) for e in s.entries]
        spec = describe_source(s.name, entries, path, s.line)
        if meta.trace(spec.trace_id) is not None:
            raise SnapshotError(
                f"trace source ID {spec.trace_id:#x} is described twice; use one "
                "metadata file per buffer when IDs are reused",
                path=path,
                line=s.line,
            )
        if spec.device.name in names:
            raise SnapshotError(
                f"trace source name {spec.device.name!r} is used twice "
                f"(first at line {names[spec.device.name]})",
                path=path,
                line=s.line,
            )
        names[spec.device.name] = s.line
        meta.traces.append(spec)
    return meta


# --- writing ------------------------------------------------------------------------------


def trace_id_of(source: Source) -> int | None:
    """The CoreSight trace ID of a trace source, from its trace ID register (None if unknown)."""
    where = _TRACE_ID_REGISTERS.get(family_of(source.source_type))
    if where is None:
        return None
    value = source.registers.get(where[0])
    if value is None:
        return None
    return (value >> where[1]) & 0x7F


def format_metadata(
    buffer_format: str,
    sources: list[tuple[Source, list[str] | None]],
    *,
    vendor: str = "",
    component: str = "",
    comment: str = "",
) -> str:
    """Metadata text for ``sources``: (trace source, the buffers it feeds or None for all).

    Every register of each source is written as it is, so that the metadata
    describes exactly its configuration. Sources whose trace ID cannot be found
    from their registers are refused.
    """
    lines: list[str] = []
    if comment:
        lines.extend(f"; {c}" for c in comment.splitlines())
        lines.append("")
    lines.append("[buffer]")
    if vendor:
        lines.append(f"vendor: {vendor}")
    if component:
        lines.append(f"component: {component}")
    lines.append(f"format: {buffer_format}")
    for src, buffers in sources:
        tid = trace_id_of(src)
        if tid is None:
            where = trace_id_register(family_of(src.source_type))
            what = f"register {where[0]}" if where else "a known trace ID register"
            raise SnapshotError(
                f"trace source {src.name!r} ({src.source_type}) has no {what}: "
                "its trace ID is unknown",
                path=src.origin.path or None,
            )
        lines.append("")
        lines.append(f"[trace_{tid:#04x}]")
        lines.append(f"format: {src.source_type}")
        lines.append(f"name: {src.name}")
        if src.core_name is not None:
            lines.append(f"core: {src.core}")
            lines.append(f"core_name: {src.core_name}")
        if src.cpu is not None:
            lines.append(f"cpu: {src.cpu}")
        if buffers is not None:
            lines.append(f"buffers: {', '.join(buffers)}")
        for name, value in src.registers.items():
            lines.append(f"{name} = 0x{value:08X}")
    return "\n".join(lines) + "\n"
