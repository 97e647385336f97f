"""Where an ETMv3 stream may be cut for decoding in pieces (:mod:`cstrace.split`).

Input: the configuration and a decode context; output: :data:`CUTS`, the
:class:`~cstrace.protocols.base.CutPoints` of the protocol's ``ProtocolSpec``.

A cut starts at an A-sync packet (five 0x00 bytes, then 0x80: IHI 0014Q
§7.4.1; once synchronised, more zeros make a bad sequence), which the trace
unit follows with an I-sync giving the whole address, instruction set,
security state and context ID (§7.4.2). A decoder started there is settled
once it decoded that I-sync, a P-header (whose format the reader keeps), a
whole timestamp when timestamps are traced, and an instruction range in every
record of its output ring (the reference's ring of element records, some of
whose leftover fields later elements read:
:meth:`~cstrace.protocols.etmv3.decoder.Etmv3Decoder.settled`). The state
compared at a cut is the reader's
(:meth:`~cstrace.protocols.etmv3.reader.ReaderState.cut_state`) and the
decoder's (:meth:`~cstrace.protocols.etmv3.decoder.Etmv3Decoder.cut_state`).
"""

from __future__ import annotations

from cstrace.protocols.base import CutPoints, DecodeContext, Packet
from cstrace.protocols.etmv3.config import Etmv3Config
from cstrace.protocols.etmv3.decoder import Etmv3Decoder
from cstrace.protocols.etmv3.packets import ASync
from cstrace.protocols.etmv3.reader import ReaderState, read
from cstrace.protocols.kit import KitCut

__all__ = ["A_SYNC", "CUTS", "Etmv3Cut"]

A_SYNC = b"\x00" * 5 + b"\x80"
"""An A-sync packet as the reader reads it once synchronised."""


class Etmv3Cut(KitCut):
    """An ETMv3 reader and decoder as :mod:`cstrace.split` drives them
    (:class:`~cstrace.protocols.base.CutDecoder`)."""

    __slots__ = ()

    def __init__(self, config: Etmv3Config, context: DecodeContext) -> None:
        super().__init__(config, context, Etmv3Decoder, ReaderState(config), read)

    def settled(self) -> bool:
        """An I-sync decoded, the output ring renewed and, when timestamps are traced, a
        whole timestamp read."""
        return bool(self.decoder.settled() and self.reader.settled(self.config.ts_enabled))


def _opens(pkt: Packet) -> bool:
    return type(pkt) is ASync


CUTS = CutPoints(sync=A_SYNC, decoder=Etmv3Cut, opens=_opens, every_format=True)
"""How an ETMv3 stream is cut: at A-sync packets, in every output format (a piece of the
listing reads and decodes packet objects, as the listing does; a piece of the other
formats runs the reader's one loop, :meth:`~cstrace.protocols.kit.KitCut.rows`)."""
