"""Where an ETMv4/ETE stream may be cut for decoding in pieces (:mod:`cstrace.split`).

Input: the configuration and a decode context; output: :data:`CUTS`, the
:class:`~cstrace.protocols.base.CutPoints` of the protocol's ``ProtocolSpec``.

A cut starts at an A-sync packet (eleven 0x00 bytes, then 0x80: IHI 0064
§6.4.2), after which the trace unit outputs a trace info and the address and
context a decoder needs to start. The state compared at a cut is the reader's
(address history, context, timestamp:
:meth:`~cstrace.protocols.etmv4.reader.ReaderState.cut_state`) and the
decoder's (:meth:`~cstrace.protocols.etmv4.decoder.Etmv4Decoder.cut_state`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cstrace.capture.stream import Stream
from cstrace.protocols.base import CutPoints, DecodeContext, Packet
from cstrace.protocols.etmv4.decoder import Etmv4Decoder, merge_log, sink_rows
from cstrace.protocols.etmv4.reader import ReaderState, iter_packets
from cstrace.tally import PacketCount

__all__ = ["A_SYNC", "CUTS", "Etmv4Cut"]

A_SYNC = b"\x00" * 11 + b"\x80"
"""An ETMv4/ETE alignment synchronisation packet."""


class Etmv4Cut:
    """An ETMv4/ETE reader and decoder as :mod:`cstrace.split` drives them
    (:class:`~cstrace.protocols.base.CutDecoder`)."""

    __slots__ = ("config", "context", "decoder", "out", "reader")

    def __init__(self, config: Any, context: DecodeContext) -> None:
        self.config = config
        self.context = context
        self.reader = ReaderState(config)
        self.decoder = Etmv4Decoder(config, context)
        self.out: list[Any] = []
        self.decoder.out = self.out

    @property
    def last_idx(self) -> int:
        """The capture index of the last packet decoded."""
        return int(self.decoder.last_idx)

    @property
    def halted(self) -> bool:
        """Never: the ETMv4 decoder goes on after every error."""
        return False

    def packets(self, stream: Stream, complete: bool) -> Iterator[Packet]:
        """The packets of ``stream`` (atoms not grouped), read with this reader state."""
        return iter_packets(stream, self.config, complete, self.reader)

    def decode(self, pkt: Packet) -> list[Any]:
        """The element rows of ``pkt``, diagnostics where the reference logs them."""
        out = self.out
        out.clear()
        dec = self.decoder
        dec.decode(pkt)
        if dec.log:
            merge_log(out, 0, dec.log)
        return out

    def finish(self) -> list[Any]:
        """The element rows of the end of the trace."""
        out = self.out
        out.clear()
        self.decoder.finish()
        return out

    def rows(
        self,
        stream: Stream,
        complete: bool,
        count: PacketCount | None,
        quiet_to: int,
        at_quiet: Callable[[], None] | None,
        finish: bool,
        size: int = 4096,
    ) -> Iterator[list[Any]]:
        """The element rows of ``stream``, read and decoded in the reader's one loop with
        this cut's reader state, by a fresh decoder (which becomes :attr:`decoder`):
        :func:`~cstrace.protocols.etmv4.decoder.sink_rows`, whose ``quiet_to``,
        ``at_quiet`` and ``finish`` these are."""
        dec = self.decoder = Etmv4Decoder(self.config, self.context)
        return sink_rows(
            dec,
            stream,
            self.config,
            complete,
            count,
            size,
            state=self.reader,
            quiet_to=quiet_to,
            at_quiet=at_quiet,
            finish=finish,
        )

    def settled(self) -> bool:
        """Synchronised, address and context given, nothing stacked, and the reader's
        whole address history given since the cut (an entry of none has no bits)."""
        return bool(self.decoder.settled() and all(entry[2] for entry in self.reader.hist))

    def cut_state(self) -> tuple[object, ...]:
        """The reader's and the decoder's cut states."""
        return (self.reader.cut_state(), self.decoder.cut_state())


def _opens(pkt: Packet) -> bool:
    return pkt.raw == A_SYNC


CUTS = CutPoints(sync=A_SYNC, decoder=Etmv4Cut, opens=_opens, every_format=True)
"""How an ETMv4/ETE stream is cut: at A-sync packets, in every output format (a piece of
the listing reads and decodes packet objects; a piece of the other formats runs the
reader's one loop, :meth:`Etmv4Cut.rows`)."""
