"""ETE packet text in the reference lister's format.

Input: a packet of :mod:`cstrace.protocols.etmv4.packets` from an ETE source;
output: the text after the raw bytes on the lister's packet line. Same as
:mod:`cstrace.render.ocsd.etmv4` except for the trace info packet, whose
INFO flags include the transactional state (``{ CC.0, TSTATE.0 }``).
"""

from __future__ import annotations

from cstrace.render.ocsd.etmv4 import mnemonic, packet_text_for

__all__ = ["mnemonic", "packet_text"]

packet_text = packet_text_for(True)
