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
from typing import Any, Literal, Protocol

from cstrace.capture.stream import Stream
from cstrace.elements import Element
from cstrace.errors import ConfigError
from cstrace.memory.code import CodeMemory
from cstrace.protocols.packet import Packet
from cstrace.tally import PacketCount

__all__ = [
    "CutDecoder",
    "CutPoints",
    "DecodeContext",
    "DecodeOptions",
    "LossCategory",
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


class CutDecoder(Protocol):
    """A reader and decoder of one stream as :mod:`cstrace.split` drives them, packet by
    packet, to decode a stream in pieces cut at synchronisation points."""

    @property
    def last_idx(self) -> int:
        """The capture index of the last packet decoded."""
        ...

    @property
    def halted(self) -> bool:
        """Whether decoding stopped for good (a fatal error, whose diagnostic ends the
        output of the packet: no more packets are read)."""
        ...

    def packets(self, stream: Stream, complete: bool) -> Iterator[Packet]:
        """The packets of ``stream``, read with this decoder's reader state."""
        ...

    def decode(self, pkt: Packet) -> list[Any]:
        """The element rows (:mod:`cstrace.rows`) of one packet, diagnostics where the
        reference logs them; the list is reused by the next call."""
        ...

    def finish(self) -> list[Any]:
        """The element rows of the end of the trace (as :meth:`decode`)."""
        ...

    def rows(
        self,
        stream: Stream,
        complete: bool,
        count: PacketCount | None,
        quiet_to: int,
        at_quiet: Callable[[], None] | None,
        finish: bool,
    ) -> Iterator[list[Any]]:
        """The element rows of ``stream`` read and decoded in the protocol's one loop
        (``ProtocolSpec.iter_stream_rows``'s path) with this reader state, by a fresh
        decoder that then is the one :meth:`cut_state` and :attr:`last_idx` describe;
        the packets up to capture index ``quiet_to`` decoded in silence (nothing output
        or counted; ``at_quiet`` called after the one there), the end of trace given
        only when ``finish``."""
        ...

    def settled(self) -> bool:
        """Whether a decode started at a cut knows all it will ever know of what came
        before it (synchronised, its addresses and context given since the cut)."""
        ...

    def cut_state(self) -> tuple[object, ...]:
        """The reader's and decoder's state, everything that decides what later packets
        give, as one comparable value."""
        ...


@dataclass(frozen=True)
class CutPoints:
    """Where a stream of a protocol may be cut and decoded in pieces (``ProtocolSpec.cuts``).

    A cut starts at a synchronisation packet; each protocol's ``cut.py`` makes one.
    """

    sync: bytes
    """The bytes every synchronisation packet where a cut may start ends with (found
    with ``bytes.find``)."""
    decoder: Callable[[Any, DecodeContext], CutDecoder]
    """A fresh reader and decoder for a configuration and decode context."""
    opens: Callable[[Packet], bool]
    """Whether the first packet a fresh decoder reads at a cut is the synchronisation
    packet it should be."""
    start_of: Callable[[bytes, int], int] | None = None
    """Where, in the data, the synchronisation packet whose ``sync`` bytes were found at
    the position given starts (None: there)."""
    every_format: bool = False
    """Whether cutting pays in every output format, not only for the listing: the pieces
    decode their elements about as fast as the whole run does (no faster path of the
    whole run is lost in a piece)."""


LossCategory = Literal["unsynced", "sync", "overflow", "bad", "bad_kind", "truncated", "grouped"]
"""What a packet means to the loss report (:mod:`cstrace.analyses.loss`), named in each
protocol's ``ProtocolSpec.loss_packets``:

``unsynced``
    bytes read while waiting for synchronisation (a packet flagged ``carried``, bytes
    the reader reports again from the previous block, is not counted twice);
``sync``
    a synchronisation packet;
``overflow``
    the trace unit's buffer overflowed (the label names the packet);
``bad``
    a packet the reader could not make sense of (the label names the reason);
``bad_kind``
    the same, the reason being the ``kind`` of the packet (``INCOMPLETE_EOT`` counted
    as ``truncated``);
``truncated``
    a packet cut short by the end of the trace;
``grouped``
    a packet that stands for ``len(raw)`` packets (counted, not otherwise handled).
"""


@dataclass(frozen=True)
class ProtocolSpec:
    """A trace protocol: its name, its traits and the functions of its pipeline.

    Code outside :mod:`cstrace.protocols` asks the spec about a protocol (is it
    software trace? which packets does the loss report count?) rather than testing
    its name: tests/test_architecture.py checks that no protocol name or alias is
    written there.
    """

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
    software_trace: bool = False
    """Software trace (messages written by a program: STM, ITM, DCC) rather than program
    flow: the text outputs group its byte writes into strings, ``cstrace query`` makes
    its ``messages`` table."""
    aliases: tuple[str, ...] = ()
    """Other lower-case spellings by which a user (``--protocol``) may name the protocol
    besides ``name`` (``etm4`` for ``etmv4``, ``pft`` for ``ptm``)."""
    raw_source_type: str | None = None
    """The source type (``PTM1.1``) a source of a raw capture gets when the user names
    the protocol with ``--protocol``; None when the protocol is not named that way."""
    cuts: CutPoints | None = None
    """How a busy stream can be cut between synchronisation points and decoded in pieces
    by several workers (:mod:`cstrace.split`); None: it cannot."""
    loss_packets: tuple[tuple[type, LossCategory, str], ...] = ()
    """The packet classes the loss report counts, each with its category (see
    :data:`LossCategory`) and label. Empty: the report counts elements only, not
    packets."""
    overflow_packets: bool = False
    """Whether an overflow is a packet (counted through ``loss_packets``); otherwise the
    loss report counts the decoder's ``TRACE_ON`` (overflow) elements."""
    reference_decoder: str = ""
    """The name the reference decoder (OpenCSD) of the protocol has in its log
    (``DCD_ETMV4``), which also tells the OpenCSD listing which decoder's wording its
    diagnostics take; empty: ``DCD_`` and the upper-case name."""
    option_registers: tuple[tuple[str, str], ...] = ()
    """Registers a command-line option sets for every source of the protocol: (option,
    register), the option named as in :class:`argparse.Namespace` (``("etmcr", "ETMCR")``:
    ``--etmcr`` replaces the ETMCR of the sources; see ``DecodeOptions.overrides``)."""
    reader_stops: tuple[tuple[type, str], ...] = ()
    """Packet classes after which the reader may stop reading while it waits for
    synchronisation (ITM and STM, as the reference does), each with the words the loss
    report names it by ("reading stops after a reserved header"): the report counts the
    bytes left unread after such a packet."""

    @property
    def splittable(self) -> bool:
        """Whether a busy stream can be cut and decoded in pieces (``cuts`` is given)."""
        return self.cuts is not None
