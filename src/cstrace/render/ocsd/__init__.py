"""The OpenCSD listing: packet and element lines in ``trc_pkt_lister`` format.

Input: a :class:`~cstrace.decode.SourceRun`; output: text lines such as::

    Idx:17; ID:20; [0xf0 0x1a 0x00 0x00 0x00 0x30 ];	D32M:32 bit data + marker; Data=0x10000000
    Idx:17; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x41; Ch:0x00) 0x10000000; +Mrk )

Each packet line comes before the elements decoded after the decoder read that
packet, as in the reference output. Packet text comes from
``cstrace.render.ocsd.<protocol module>.packet_text``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from cstrace.protocols import Packet
from cstrace.render.ocsd.elements import element_text
from cstrace.render.ocsd.listing import run_listing

if TYPE_CHECKING:
    from cstrace.decode import SourceRun

__all__ = ["element_text", "listing_lines", "packet_renderer"]


def packet_renderer(protocol: str) -> Callable[[Packet], str]:
    """The packet text function of a protocol (``etmv4``, ``stm``...)."""
    mod = importlib.import_module(f"cstrace.render.ocsd.{protocol}")
    fn: Callable[[Packet], str] = mod.packet_text
    return fn


def listing_lines(run: SourceRun, *, packets: bool = True, chunk: int = 1) -> Iterator[str]:
    """The listing of one source run: packet lines (unless ``packets`` is False) and elements.

    Each packet's line comes before the elements decoded after the decoder read
    it. Diagnostics are printed in the reference's words after the line of the
    packet being decoded, with no newline (glued to the next line), as
    ``trc_pkt_lister`` does. ``chunk``: lines per item given, joined by newlines
    (for a writer; by default one).
    """
    return run_listing(run, packet_renderer(run.protocol.name), packets, chunk)
