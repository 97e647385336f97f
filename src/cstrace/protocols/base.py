"""What every protocol provides: the packet base class and the protocol description.

Each protocol package (``cstrace.protocols.<name>``) exports ``PROTOCOL``, a
:class:`ProtocolSpec` whose functions form the pipeline of one trace source:

``from_registers(regs, core, version)``
    a plain mapping of register (or option) names to values, the type of the
    traced core (``Cortex-A53``, empty if unknown) and the version part of the
    source type (``1.3`` for ``ETM1.3``; most protocols read their version from
    registers) → a configuration object with a ``trace_id`` attribute. Where
    the registers came from (a snapshot, a package, perf.data) is not its
    business; a missing or impossible value raises
    :class:`~cstrace.errors.ConfigError`;
``iter_packets(stream, config, complete)``
    the bytes of one trace ID → packets (each with ``offset`` and ``raw``);
``iter_elements(packets, config, context)``
    packets → generic elements (:mod:`cstrace.elements`);
``with_options(config, options)`` (optional)
    the configuration with the :class:`DecodeOptions` that change how the
    protocol reads its packets applied (ITM and STM: ``decode_before_sync``);
    the session calls it after ``from_registers``.

``complete`` is False when the capture was cut short by a fatal framing error:
the reader and decoder then stop without end-of-trace processing, as the
reference decoder does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cstrace.capture.stream import Stream
from cstrace.elements import Element
from cstrace.errors import ConfigError
from cstrace.memory.code import CodeMemory
from cstrace.protocols.packet import Packet
from cstrace.tally import PacketCount

__all__ = [
    "DecodeContext",
    "DecodeOptions",
    "Packet",
    "ProtocolConfig",
    "ProtocolSpec",
    "Registers",
    "Setting",
    "idle_period",
    "register",
    "require",
]

Registers = Mapping[str, int]
"""Register (or option) values of a trace source by upper-case name (``{"TRCIDR0": 0x28}``)."""


def require(regs: Registers, name: str, what: str) -> int:
    """The value of register ``name``; a :class:`ConfigError` naming it when it is absent."""
    value = regs.get(name)
    if value is None:
        raise ConfigError(f"register {name} is required to decode {what} trace")
    return value


def idle_period(period: int) -> Callable[[Stream, Any], int]:
    """A ``ProtocolSpec.idle_zeros`` that gives ``period`` whatever the stream and
    configuration."""

    def idle_zeros(stream: Stream, config: Any) -> int:
        return period

    return idle_zeros


def register(regs: Registers, name: str, default: int) -> int:
    """The value of register ``name``, or ``default`` when it is absent."""
    value = regs.get(name)
    return default if value is None else value


@dataclass(frozen=True)
class Setting:
    """A setting of a trace source that configuration inference may have to choose.

    Each protocol's ``config.py`` lists its settings next to the register fields
    they stand for (``SETTINGS``), with a function that turns a choice of values
    into registers. ``values`` are the candidates in order of preference: the
    first is the one a trace unit most often has, or the one that decodes
    correctly whatever the truth where such a value exists. ``field`` names the
    register field that holds it; ``holds`` the register and option names that
    fix it when the user gives one; ``option`` the ``--set`` option that decides
    it (None when only a register, ``--core`` or ``--protocol`` does).
    """

    name: str
    values: tuple[Any, ...]
    field: str
    holds: tuple[str, ...]
    option: str | None = None


class ProtocolConfig(Protocol):
    """What the pipeline needs from every protocol configuration."""

    @property
    def trace_id(self) -> int:
        """The CoreSight trace ID of the source."""
        ...


@dataclass
class DecodeOptions:
    """User options that change how trace is decoded."""

    src_addr_n: bool = False
    """ETE: split source-address ranges on N atoms (OpenCSD's ``-src_addr_n``)."""
    overrides: dict[str, dict[str, int]] = field(default_factory=dict)
    """Register values that replace the sources' own, per protocol name
    (``{"etmv1": {"ETMCR": 0x1000}}``): the command line's ``--etmcr`` and ``--start-pc``."""
    decode_before_sync: bool = True
    """ITM and STM: decode the packets that come before the first synchronisation
    packet, where packet boundaries can be told from the bytes (True), or wait for
    synchronisation as the reference decoder does (False: what ``--format ocsd``
    uses, so that its listing diffs with the reference's). docs/protocols.md gives
    the rule that finds the first boundary."""


@dataclass
class DecodeContext:
    """Per-decoder run context handed to ``iter_elements``."""

    trace_id: int
    options: DecodeOptions
    memory: CodeMemory | None = None
    """The code memory of the traced core (:class:`~cstrace.memory.code.CodeMemory`), if any.

    The decoder drives it: ``set_context`` when the context changes, ``advance``
    when trace time moves."""
    reset: bool = False
    """True when this decoder already ran on an earlier buffer of the same run."""
    complete: bool = True
    """False when the capture stopped at a fatal framing error (no end of trace)."""
    state: dict[str, Any] = field(default_factory=dict)
    """Decoder state that survives a reset: the same dict for every run of a trace ID
    in one session (the reference resets its decoder between buffers, it does not
    rebuild it)."""


@dataclass(frozen=True)
class ProtocolSpec:
    """A trace protocol: its name and the functions of its pipeline."""

    name: str
    from_registers: Callable[[Registers, str, str], Any]
    iter_packets: Callable[[Stream, Any, bool], Iterator[Packet]]
    iter_elements: Callable[[Iterable[Packet], Any, DecodeContext], Iterator[Element]]
    uses_memory: bool = False
    with_options: Callable[[Any, DecodeOptions], Any] | None = None
    """The configuration with the decode options that concern the reader applied, if any."""
    iter_rows: Callable[[Iterable[Packet], Any, DecodeContext], Iterator[list[Any]]] | None = None
    """The elements as lists of element rows (:mod:`cstrace.rows`), when the decoder makes
    them: the way to columns without an object per ``INSTR_RANGE``."""
    iter_row_packets: Callable[[Stream, Any, bool], Iterator[Packet]] | None = None
    """The packets as ``iter_rows`` reads them best, when that differs from
    ``iter_packets``: the ETMv4/ETE reader groups atom packets in a row
    (:class:`~cstrace.protocols.etmv4.packets.AtomRun`)."""
    iter_stream_rows: (
        Callable[[Stream, Any, DecodeContext, PacketCount | None], Iterator[list[Any]]] | None
    ) = None
    """The element rows of a stream, read and decoded in one loop (no packet object for
    the hot kinds), when the protocol has it: the same lists as ``iter_rows`` of the
    ``iter_row_packets``; packets counted into the :class:`~cstrace.tally.PacketCount`
    given, if any, as :func:`cstrace.tally.counted` counts them."""
    idle_zeros: Callable[[Stream, Any], int] | None = None
    """Whether the element path may take the middle out of long runs of 0x00 in a stream
    (:mod:`cstrace.capture.idle`) for this configuration, and in multiples of how many
    bytes (the size of the pieces its reader cuts zeros into); 0 or None: never (a zero
    means something: the port formats of the classic ETMs)."""
