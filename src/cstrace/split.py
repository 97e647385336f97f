"""One long trace stream cut at synchronisation points and decoded in pieces, exactly.

Input: a :class:`~cstrace.decode.SourceRun` of a protocol that can be cut
(its ``ProtocolSpec.cuts``: ETMv4, ETE, PTM, ETMv3) and the number of pieces
wanted.
Output: a :class:`SplitPlan` (:func:`plan_split`), then one run per piece
(:func:`piece_run`) whose packets and elements, put end to end, are exactly
those of the whole run decoded serially.

Where a piece starts. A synchronisation packet (an ETMv4 A-sync followed by
a trace info, a PTM A-sync followed by an I-sync) is where the trace unit lets
a decoder start. A piece is decoded from such a point (a *cut*) by a fresh
reader and decoder. The serial decode reaches the same point with state of its
own: the reader's address history and context, the decoder's PE context, code
address, ISA, return stack... The protocol's folder says where its cuts may be
and what its state is (``ProtocolSpec.cuts``, a
:class:`~cstrace.protocols.base.CutPoints` from the protocol's ``cut.py``,
whose :class:`~cstrace.protocols.base.CutDecoder` gives ``cut_state`` and
``settled``); this module knows no protocol. The fresh decode first says
NO_SYNC, waits for the packets that give its address and context; its state
then becomes that of the serial decode in the common case, but not always (an
ETMv4 address history entry from before the cut lives on until three
addresses have been given since).

So a cut carries a *gate*: the first packet after the A-sync after which the
fresh decode is settled (synchronised, its address and context known, nothing
stacked, its whole address history given since the cut), and the fresh
state there. The planner finds gates by decoding a few packets from each
candidate point (:func:`plan_split`); a candidate whose decode does not
settle soon is passed over for the next A-sync.

How pieces join. Packets are shared out by capture index: piece ``k`` gives
the elements (and listing lines) of the packets after the gate of cut ``k - 1``
up to and including the gate of cut ``k``. Elements are attributed to the
packet whose decoding output them, so nothing is given twice or lost. Piece
``k``'s decoder runs through its gate in silence and checks that its state
there is the planned one; piece ``k - 1`` decodes on past cut ``k`` up to the
gate and checks that its own state, there, equals the planned fresh state
(:attr:`Piece.joined`). When both hold, the packets after the gate read and
decode the same in both (same bytes, same reader and decoder state, a code
memory without state), so piece ``k``'s output is the serial output. When
they do not, the piece after a failed join is decoded again serially from
the true state (:func:`fallback_run`: from the start of the piece before,
silent up to where that piece's output ended, on until a later gate where the
states agree again, or to the end of the stream).

A piece is decoded in one of two ways, as the whole run would be. Its packets
(the listing) come one by one from a fresh reader, each decoded before the next
is read (:meth:`Piece.iter_packets`). Its element rows alone (the other
formats) come from the protocol's one read-and-decode loop
(:meth:`Piece.iter_stream_rows`, the cut decoder's ``rows``): the loop reads
the stream from the cut up to the end of the gate packet where the piece ends,
muted up to the gate where it starts, and the states are compared at both
gates as above. Where the end's states differ, the piece's output ends with
the last packet it decoded, and the part after it is decoded again.

Only runs whose code memory has no state of its own (a static memory map:
no event log moving it) are cut, so that the decoder's state is all there is.
Element offsets are capture indices, the same in every piece.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from cstrace.capture.stream import GatheredStream, Stream
from cstrace.decode import SourceRun
from cstrace.elements import Diagnostic, Element
from cstrace.memory.code import NoMemory
from cstrace.memory.image import MemoryMap
from cstrace.protocols import DecodeContext, Packet, ProtocolSpec, get_protocol
from cstrace.protocols.base import CutDecoder, CutPoints
from cstrace.rows import expand
from cstrace.tally import PacketCount
from cstrace.trace import Trace

__all__ = [
    "Cut",
    "Piece",
    "PieceSpec",
    "SplitPlan",
    "WindowStream",
    "cut_in_every_format",
    "fallback_run",
    "find_gate",
    "piece_of",
    "piece_run",
    "plan_split",
    "splittable",
]

SNIPPET = 1 << 16
"""Bytes after a candidate cut the planner decodes to find its gate."""


@dataclass(frozen=True, slots=True)
class Cut:
    """A point where a piece starts: an A-sync, and the packet after which it is settled."""

    offset: int
    """Capture index of the A-sync's first byte: the fresh decode starts there."""
    gate: int
    """Capture index of the gate packet: the piece's output starts after it."""
    gate_size: int
    """Bytes in the gate packet."""
    state: tuple[object, ...]
    """The fresh reader's and decoder's cut state after the gate packet."""


@dataclass(frozen=True, slots=True)
class SplitPlan:
    """Where one run is cut: ``len(cuts) + 1`` pieces."""

    trace_id: int
    cuts: tuple[Cut, ...]
    size: int
    """Bytes in the run's stream."""

    @property
    def pieces(self) -> int:
        """How many pieces the run is cut into."""
        return len(self.cuts) + 1


def splittable(run: SourceRun) -> bool:
    """Whether ``run`` can be cut: its protocol supports it, its code memory has no state."""
    memory = run.context.memory
    return run.protocol.cuts is not None and (
        memory is None or isinstance(memory, (MemoryMap, NoMemory))
    )


def cut_in_every_format(trace: Trace) -> bool:
    """Whether a source of ``trace`` has a protocol whose streams are worth cutting in
    every output format, not only for the listing (``CutPoints.every_format``)."""
    for source in trace.sources:
        spec = get_protocol(source.protocol)
        if spec is not None and spec.cuts is not None and spec.cuts.every_format:
            return True
    return False


def _cuts(run: SourceRun) -> CutPoints:
    cuts = run.protocol.cuts
    assert cuts is not None, f"{run.protocol.name} streams are not cut"
    return cuts


# -- the streams of pieces -----------------------------------------------------------------


def _run_at(block: Stream, index: int) -> tuple[int, int] | None:
    """The run of ``block`` that holds its first byte at capture index ``index`` or
    after, and that byte's position (None: all its bytes are before)."""
    n = len(block.data)
    if not n:
        return None
    pos = block.run_pos
    idx = block.run_idx
    ends = np.append(pos[1:], n)
    last = idx + (ends - pos) - 1  # capture index of each run's last byte
    k = int(np.searchsorted(last, index, side="left"))
    if k >= len(pos):
        return None
    return k, int(pos[k]) + max(0, index - int(idx[k]))


def _from(block: Stream, start: int) -> Stream | None:
    """The part of ``block`` from capture index ``start`` on (None: all of it is before)."""
    at = _run_at(block, start)
    if at is None:
        return None
    k, first = at
    if first == 0:
        return block
    pos = block.run_pos
    idx = block.run_idx
    new_pos = pos[k:] - first
    new_idx = idx[k:].copy()
    new_pos[0] = 0
    new_idx[0] = int(idx[k]) + (first - int(pos[k]))
    return Stream(block.trace_id, block.data[first:], new_pos, new_idx)


def _position(block: Stream, index: int) -> int | None:
    """The position in ``block`` of its first byte at capture index ``index`` or after (None:
    all its bytes are before)."""
    at = _run_at(block, index)
    return None if at is None else at[1]


class WindowStream(GatheredStream):
    """The part of a stream from a capture index on, read block by block as the stream is;
    with ``end`` (a capture index and a number of bytes), up to the end of the packet of
    that many bytes that starts there (its bytes may be in two formatter frames, whose
    capture indices are not consecutive)."""

    __slots__ = ("_end", "_full", "_inner", "_start")

    def __init__(self, inner: Stream, start: int, end: tuple[int, int] | None = None) -> None:
        # Deliberately not calling Stream.__init__: data and runs are gathered on demand.
        self.trace_id = inner.trace_id
        self._inner = inner
        self._start = start
        self._end = end
        self._full: Stream | None = None

    def blocks(self) -> Iterator[Stream]:
        """The inner stream's blocks, the first cut at the start index, those before it
        left (and the last cut at the end, those after it left)."""
        started = False
        left: int | None = None  # bytes still to give, once the end's packet was met
        for block in self._inner.blocks():
            part: Stream | None = block
            if not started:
                part = _from(block, self._start)
                if part is None:
                    continue
                started = True
            assert part is not None
            if self._end is not None:
                if left is None:
                    index, size = self._end
                    at = _position(part, index)
                    if at is not None:
                        left = at + size
                if left is not None:
                    if left <= len(part.data):
                        if left:
                            yield _head(part, left)
                        return
                    left -= len(part.data)
            yield part

    def _gather(self) -> Stream:
        if self._full is None:
            self._full = Stream.from_chunks(
                self.trace_id, [c for b in self.blocks() for c in b.chunks()]
            )
        return self._full

    def __repr__(self) -> str:
        end = "" if self._end is None else f" to {self._end}"
        return f"WindowStream({self._inner!r} from {self._start}{end})"


# -- fresh decoders and the gate --------------------------------------------------------------


def _fresh_context(run: SourceRun, complete: bool) -> DecodeContext:
    """A decode context as a decoder started at a cut has it: nothing kept from before."""
    ctx = run.context
    return DecodeContext(ctx.trace_id, ctx.options, ctx.memory, ctx.reset, complete, {})


def _has_diagnostic(out: list[Any]) -> bool:
    return any(type(x) is Diagnostic for x in out)


def find_gate(run: SourceRun, stream: Stream, limit: int | None = None) -> Cut | None:
    """The cut at the start of ``stream`` (a synchronisation packet), with its gate; None
    when a fresh decode does not settle before ``stream`` ends (or within ``limit``
    packets)."""
    cuts = _cuts(run)
    dec = cuts.decoder(run.config, _fresh_context(run, False))
    start = stream.offset_at(0)
    count = 0
    for pkt in dec.packets(stream, False):
        if count == 0 and (pkt.offset != start or not cuts.opens(pkt)):
            return None
        count += 1
        # (a gate's output must not end on a diagnostic, which a listing glues to the
        # next line: it would be the next piece's)
        if _has_diagnostic(dec.decode(pkt)):
            continue
        if dec.halted:
            return None
        if dec.settled():
            return Cut(start, pkt.offset, len(pkt.raw), dec.cut_state())
        if limit is not None and count >= limit:
            return None
    return None


# -- the plan ---------------------------------------------------------------------------------


def _join(a: Stream | None, b: Stream) -> Stream:
    """``a`` then ``b``: their bytes and runs put end to end (a run of ``a`` that ``b``
    continues stays two runs: a block has a run per formatter frame, too many to walk)."""
    if a is None or not len(a.data):
        return b
    return Stream(
        b.trace_id,
        b"".join((a.data, b.data)),
        np.concatenate((a.run_pos, b.run_pos + len(a.data))),
        np.concatenate((a.run_idx, b.run_idx)),
    )


def _head(s: Stream, size: int) -> Stream:
    """The first ``size`` bytes of ``s``."""
    keep = s.run_pos < size
    return Stream(s.trace_id, s.data[:size], s.run_pos[keep], s.run_idx[keep])


def _tail(s: Stream, keep: int) -> Stream:
    n = len(s.data)
    if n <= keep:
        return s
    part = _from(s, s.offset_at(n - keep))
    return part if part is not None else s


def plan_split(run: SourceRun, pieces: int, min_size: int = 0) -> SplitPlan | None:
    """Where to cut ``run`` into about ``pieces`` pieces of equal capture span.

    One pass over the run's stream, block by block: for each target (``k/pieces``
    of the buffer), the first synchronisation packet at or after it whose fresh decode settles
    within :data:`SNIPPET` bytes. None when the run cannot be cut
    (:func:`splittable`), its stream is shorter than ``min_size`` bytes, or no cut
    was found.
    """
    if pieces < 2 or not splittable(run):
        return None
    span = run.buffer.size()
    if span < min_size:
        return None
    cut_points = _cuts(run)
    sync = cut_points.sync
    start_of = cut_points.start_of
    targets = [span * k // pieces for k in range(1, pieces)]
    cuts: list[Cut] = []
    size = 0
    carry: Stream | None = None
    examined = -1  # capture index up to which candidates were examined

    def scan(buf: Stream, final: bool) -> None:
        nonlocal examined
        data = buf.data
        n = len(data)
        at = data.find(sync)
        while at >= 0 and len(cuts) < len(targets):
            if not final and n - at < SNIPPET:
                return  # examined with the next block
            offset = buf.offset_at(at if start_of is None else start_of(data, at))
            floor = max(targets[len(cuts)], examined + 1, cuts[-1].gate + 1 if cuts else 0)
            if offset >= floor:
                examined = offset
                window = _from(buf, offset)
                assert window is not None
                if not final:
                    window = _head(window, SNIPPET)
                cut = find_gate(run, window)
                if cut is not None:
                    cuts.append(cut)
            at = data.find(sync, at + 1)

    for block in run.stream.blocks():
        size += len(block.data)
        if len(cuts) < len(targets):
            buf = _join(carry, block)
            scan(buf, False)
            carry = _tail(buf, SNIPPET + len(sync))
    if carry is not None and len(cuts) < len(targets):
        scan(carry, True)
    if not cuts or size < min_size:
        return None
    return SplitPlan(run.trace_id, tuple(cuts), size)


# -- pieces -----------------------------------------------------------------------------------


class Piece:
    """The decode of one piece of a run: one reader and one decoder, shared by the two
    functions of its :class:`PieceSpec` (decode its elements, not only its packets: the
    states are compared where the decoder has decoded the gate packet).

    ``start`` says where decoding starts: 0, at the start of the stream with the run's
    own context (as a serial decode); ``k``, at cut ``k - 1`` with a fresh decoder. Only
    packets after capture index ``after`` are given (None: all); the decode ends at the
    gate of the first cut of ``ends`` (``adaptive``: the first whose states agree), or at
    the end of the stream when there is none.
    """

    def __init__(
        self,
        run: SourceRun,
        plan: SplitPlan,
        start: int,
        after: int | None,
        ends: Sequence[int],
        *,
        adaptive: bool = False,
    ) -> None:
        self.plan = plan
        self.start = start
        self.after = after
        self.ends = list(ends)
        self.adaptive = adaptive
        self.context = run.context if start == 0 else _fresh_context(run, run.context.complete)
        self.decoder: CutDecoder = _cuts(run).decoder(run.config, self.context)
        self.start_ok = start == 0
        """Whether the fresh decode had the planned state at its starting gate."""
        self.joined = False
        """Whether the decode ended at a gate where its state was the planned one."""
        self.stopped: int | None = None
        """The cut at whose gate (or just after) the decode ended; None: at the end of the
        stream (or not yet)."""
        self.last: int | None = None
        """Where the decode stopped: it gave every packet up to this capture index."""
        self.at_end = False
        """Whether the decode went to the end of the stream (its end-of-trace elements too)."""
        self._pending: list[Element] = []
        self._pending_for: Packet | None = None
        self._glue = False  # the last element given was a diagnostic

    @property
    def first(self) -> bool:
        """Whether this piece starts the run's output."""
        return self.start == 0 and self.after is None

    def iter_packets(self, stream: Stream, config: Any, complete: bool) -> Iterator[Packet]:
        """The packets of the piece.

        Those up to ``after`` are decoded here, in silence. The others are decoded
        by :meth:`iter_elements` as it takes them: when this generator resumes
        after giving a gate packet, the decoder has decoded it (checked: its
        ``last_idx``), and the states are compared there.
        """
        dec = self.decoder
        cuts = self.plan.cuts
        reader: Iterator[Packet] = dec.packets(stream, complete)
        pkt: Packet | None = None
        if self.after is None:
            pkt = next(reader, None)
        else:
            pkt = self._quiet(reader, self.after)
        self._glue = False
        ends = iter(self.ends)
        end = next(ends, None)
        while pkt is not None:
            if end is None:
                yield pkt
                yield from reader
                pkt = None
                break
            cut = cuts[end]
            gate = cut.gate
            if pkt.offset < gate:
                yield pkt
                for pkt in reader:
                    if pkt.offset >= gate:
                        break
                    yield pkt
                else:
                    pkt = None
                continue
            if pkt.offset > gate:
                # No packet at that gate: the states cannot agree there.
                if self.adaptive:
                    end = next(ends, None)
                    continue
                self.stopped = end
                self.last = gate  # every packet up to the gate was given
                yield from self._unglue(pkt, reader)
                return
            yield pkt
            agree = (
                dec.last_idx == gate
                and len(pkt.raw) == cut.gate_size
                and not self._glue
                and dec.cut_state() == cut.state
            )
            if agree or not self.adaptive:
                self.stopped = end
                self.joined = agree
                self.last = gate
                yield from self._unglue(next(reader, None), reader)
                return
            end = next(ends, None)
            pkt = next(reader, None)
        self._to_end()

    def _quiet(self, reader: Iterator[Packet], after: int) -> Packet | None:
        """Decode, dropping their elements, the packets up to capture index ``after`` (and
        check the start); the first packet after it."""
        dec = self.decoder
        begin = self.plan.cuts[self.start - 1] if self.start else None
        for pkt in reader:
            if pkt.offset > after:
                return pkt
            dec.decode(pkt)
            if begin is not None and pkt.offset == begin.gate:
                self.start_ok = len(pkt.raw) == begin.gate_size and dec.cut_state() == begin.state
            if dec.halted:
                return None
        return None

    def _unglue(self, pkt: Packet | None, reader: Iterator[Packet]) -> Iterator[Packet]:
        """Where the decode stops: after the line a diagnostic waits for, if one does
        (``pkt``: the next packet)."""
        while self._glue and pkt is not None:
            yield pkt
            self.last = pkt.offset
            pkt = next(reader, None)
        if pkt is None:
            self._to_end()

    def _to_end(self) -> None:
        """The decode went to the end of the stream: this piece ends the run."""
        self.stopped = None
        self.joined = False
        self.at_end = True

    def _outputs(self, packets: Iterable[Packet]) -> Iterator[list[Any]]:
        """Per packet, the element rows it completed (diagnostics where the reference logs
        them; :mod:`cstrace.rows`), then the end-of-trace elements if the piece ends the
        run. The list given is emptied before the next packet is decoded. A decoder that
        halts (a fatal error) ends the run there, as the serial decode does."""
        dec = self.decoder
        decode = dec.decode
        for pkt in packets:
            out = decode(pkt)
            if out:
                # (the last element given is a diagnostic: a listing glues it on)
                glue = self._glue = type(out[-1]) is Diagnostic
                yield out
                # (a decoder halts on an error, whose diagnostic ends its output)
                if glue and dec.halted:
                    self.stopped = None
                    self.joined = False
                    return
        if self.at_end:
            yield dec.finish()

    def iter_elements(
        self, packets: Iterable[Packet], config: Any, context: DecodeContext
    ) -> Iterator[Element]:
        """The elements of the piece's packets (diagnostics where the reference logs
        them), then end of trace if the piece ends the run."""
        for out in self._outputs(packets):
            yield from expand(out)

    def iter_rows(
        self, packets: Iterable[Packet], config: Any, context: DecodeContext
    ) -> Iterator[list[Any]]:
        """The same elements as :meth:`iter_elements`, as lists of element rows (the
        loop of :meth:`_outputs`, inlined: it runs once per packet)."""
        acc: list[Any] = []
        dec = self.decoder
        decode = dec.decode
        for pkt in packets:
            out = decode(pkt)
            if out:
                glue = self._glue = type(out[-1]) is Diagnostic
                acc += out
                if glue and dec.halted:
                    self.stopped = None
                    self.joined = False
                    break
                if len(acc) >= 4096:
                    yield acc
                    acc = []
        else:
            if self.at_end:
                acc += dec.finish()
        if acc:
            yield acc

    def iter_stream_rows(
        self, stream: Stream, config: Any, context: DecodeContext, count: PacketCount | None
    ) -> Iterator[list[Any]]:
        """The same elements as :meth:`iter_rows` of the piece's packets, read and decoded
        in the reader's one loop (the protocol's fastest path,
        :meth:`~cstrace.protocols.base.CutDecoder.rows`): the stream read up to the end
        of the gate packet where the piece ends, the packets up to ``after`` decoded in
        silence. Where the piece ends, its state is compared with the plan's as
        :meth:`iter_packets` does; when they differ, the piece's output ends with the last
        packet it decoded (the run's next part is decoded again from there)."""
        dec = self.decoder
        cuts = self.plan.cuts
        end = self.ends[0] if self.ends else None
        stop = None if end is None else (cuts[end].gate, cuts[end].gate_size)
        if stop is not None:
            stream = WindowStream(stream, -1, stop)
        begin = cuts[self.start - 1] if self.start else None

        def at_quiet() -> None:
            if begin is not None:
                self.start_ok = dec.last_idx == begin.gate and dec.cut_state() == begin.state

        quiet_to = -1 if self.after is None else self.after
        complete = context.complete and stop is None
        yield from dec.rows(stream, complete, count, quiet_to, at_quiet, stop is None)
        if dec.halted:
            # (as the serial decode, the run's output ends where the decoder stopped)
            self.stopped = None
            self.joined = False
            self.last = dec.last_idx
            return
        if end is None:
            self._to_end()
            return
        cut = cuts[end]
        self.stopped = end
        self.joined = dec.last_idx == cut.gate and dec.cut_state() == cut.state
        self.last = min(dec.last_idx, cut.gate)


@dataclass(frozen=True)
class PieceSpec(ProtocolSpec):
    """The protocol of a piece run: its packets and elements are those of its :class:`Piece`."""

    piece: Any = None


def _with_piece(run: SourceRun, piece: Piece) -> SourceRun:
    # the protocol's traits (what the loss report counts...) with the piece's functions
    traits = {f.name: getattr(run.protocol, f.name) for f in fields(ProtocolSpec)}
    traits.update(
        iter_packets=piece.iter_packets,
        iter_elements=piece.iter_elements,
        iter_rows=piece.iter_rows,
        iter_row_packets=None,
        iter_stream_rows=None if piece.adaptive else piece.iter_stream_rows,
        idle_zeros=None,
    )
    spec = PieceSpec(**traits, piece=piece)
    cuts = piece.plan.cuts
    stream = (
        run.stream if piece.start == 0 else WindowStream(run.stream, cuts[piece.start - 1].offset)
    )
    return replace(run, protocol=spec, stream=stream, context=piece.context)


def piece_run(run: SourceRun, plan: SplitPlan, k: int) -> SourceRun:
    """Piece ``k`` of ``run`` as a run of its own (:func:`piece_of` gives its :class:`Piece`)."""
    cuts = plan.cuts
    after = cuts[k - 1].gate if k else None
    ends = [k] if k < len(cuts) else []
    return _with_piece(run, Piece(run, plan, k, after, ends))


def fallback_run(run: SourceRun, plan: SplitPlan, start: int, after: int) -> SourceRun:
    """The run's output after capture index ``after``, decoded from the start of piece
    ``start`` (silent up to ``after``) until the gate of a later cut where its state is
    the planned one, or to the end: what follows a piece whose join failed."""
    cuts = plan.cuts
    ends = [i for i, c in enumerate(cuts) if c.gate > after]
    return _with_piece(run, Piece(run, plan, start, after, ends, adaptive=True))


def piece_of(run: SourceRun) -> Piece | None:
    """The :class:`Piece` a run decodes, if it is a piece of a longer run."""
    spec = run.protocol
    return spec.piece if isinstance(spec, PieceSpec) else None
