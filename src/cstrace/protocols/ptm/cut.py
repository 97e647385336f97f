"""Where a PTM stream may be cut for decoding in pieces (:mod:`cstrace.split`).

Input: the configuration and a decode context; output: :data:`CUTS`, the
:class:`~cstrace.protocols.base.CutPoints` of the protocol's ``ProtocolSpec``.

A cut starts at an A-sync packet (five or more 0x00 bytes, then 0x80: IHI
0035B §4.5.1), which the trace unit follows with an I-sync giving the whole
address, instruction set, security state and context ID (§4.5.2). A decoder
started there is settled once it decoded that I-sync (and, when timestamps are
traced, a whole timestamp). The state compared at a cut is the reader's
(:meth:`~cstrace.protocols.ptm.reader.ReaderState.cut_state`: address and
timestamp compression, instruction set) and the decoder's
(:meth:`~cstrace.protocols.ptm.decoder.PtmDecoder.cut_state`).
"""

from __future__ import annotations

from cstrace.protocols.base import CutPoints, DecodeContext, Packet
from cstrace.protocols.kit import KitCut
from cstrace.protocols.ptm.config import PtmConfig
from cstrace.protocols.ptm.decoder import PtmDecoder
from cstrace.protocols.ptm.packets import ASync
from cstrace.protocols.ptm.reader import ReaderState, read

__all__ = ["A_SYNC_END", "CUTS", "PtmCut"]

A_SYNC_END = b"\x00" * 5 + b"\x80"
"""The end of every A-sync packet: the fewest zeros it may have, then 0x80."""

_MAX_ZEROS = 15
"""The most 0x00 bytes an A-sync read after synchronisation may have (16 make a bad
sequence: :func:`~cstrace.protocols.ptm.reader.read_async`)."""


class PtmCut(KitCut):
    """A PTM reader and decoder as :mod:`cstrace.split` drives them
    (:class:`~cstrace.protocols.base.CutDecoder`): packet objects from a tap on the
    reader (with this cut's reader state), decoded one at a time."""

    __slots__ = ()

    def __init__(self, config: PtmConfig, context: DecodeContext) -> None:
        super().__init__(config, context, PtmDecoder, ReaderState(config), read)

    def settled(self) -> bool:
        """An I-sync decoded (address, ISA and context known) and, when timestamps are
        traced, a whole timestamp read."""
        return bool(self.decoder.settled() and self.reader.settled(self.config.timestamps))


def _opens(pkt: Packet) -> bool:
    return type(pkt) is ASync


def _start_of(data: bytes, at: int) -> int:
    """The first 0x00 of the A-sync that ends with the bytes at ``at`` (up to
    :data:`_MAX_ZEROS` of them)."""
    first = at
    least = max(at + len(A_SYNC_END) - 1 - _MAX_ZEROS, 0)
    while first > least and data[first - 1] == 0:
        first -= 1
    return first


CUTS = CutPoints(
    sync=A_SYNC_END, decoder=PtmCut, opens=_opens, start_of=_start_of, every_format=True
)
"""How a PTM stream is cut: at A-sync packets, in every output format (a piece of the
listing reads and decodes packet objects, as the listing does; a piece of the other
formats runs the reader's one loop, :meth:`~cstrace.protocols.kit.KitCut.rows`)."""
