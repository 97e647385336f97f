"""The listing loop of :mod:`cstrace.render.ocsd` (a hot module: compiled with the
decoders, it joins packet and element lines without Python frames per line).

Input: a :class:`~cstrace.decode.SourceRun` and its protocol's packet printer;
output: the listing's lines.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from cstrace.bits import hexbytes
from cstrace.elements import Diagnostic
from cstrace.errors import DiagKind
from cstrace.protocols import Packet
from cstrace.render.ocsd.diagnostics import diagnostic_text
from cstrace.render.ocsd.elements import element_text

if TYPE_CHECKING:
    from cstrace.decode import SourceRun

__all__ = ["run_listing"]


def run_listing(
    run: SourceRun, text_of: Callable[[Packet], str], packets: bool = True, chunk: int = 1
) -> Iterator[str]:
    """The listing of one source run: packet lines (unless ``packets`` is False) and elements.

    Each packet's line comes before the elements decoded after the decoder read
    it. Diagnostics are printed in the reference's words after the line of the
    packet being decoded, with no newline (glued to the next line), as
    ``trc_pkt_lister`` does.

    ``chunk``: how many lines each item given holds, joined by newlines (the last may
    hold fewer): a writer that takes thousands of lines at a time spares a Python
    frame per line.
    """
    protocol = run.protocol.name
    prefix = f"ID:{run.packet_id:x}; ["
    elem_prefix = f"; ID:{run.trace_id:x}; "
    pending: deque[Packet] = deque()
    popleft = pending.popleft
    buf: list[str] = []
    put = buf.append
    join = "\n".join

    def tap(source: Iterable[Packet]) -> Iterator[Packet]:
        append = pending.append
        for p in source:
            append(p)
            yield p

    glue = ""
    for elem in run.elements(tap(run.packets())):
        # The packets read since the last element (inlined: this loop is hot).
        while pending:
            p = popleft()
            # The reference's raw-packet monitor skips packets with no bytes
            # (they still reach the decoder, e.g. an empty NOTSYNC).
            if packets and p.raw:
                line = f"Idx:{p.offset}; {prefix}{hexbytes(p.raw)}];\t{text_of(p)}"
                if glue:
                    line = glue + line
                    glue = ""
                put(line)
                if len(buf) >= chunk:
                    yield join(buf)
                    buf.clear()
        if type(elem) is Diagnostic:
            if elem.kind != DiagKind.SYNC_WAIT:  # (a count the reference does not log)
                glue += diagnostic_text(protocol, elem)
            continue
        line = f"Idx:{elem.offset}{elem_prefix}{element_text(elem)}"
        if glue:
            line = glue + line
            glue = ""
        put(line)
        if len(buf) >= chunk:
            yield join(buf)
            buf.clear()
    while pending:
        p = popleft()
        if packets and p.raw:
            line = f"Idx:{p.offset}; {prefix}{hexbytes(p.raw)}];\t{text_of(p)}"
            if glue:
                line = glue + line
                glue = ""
            put(line)
            if len(buf) >= chunk:
                yield join(buf)
                buf.clear()
    if glue:
        put(glue)
    if buf:
        yield join(buf)
