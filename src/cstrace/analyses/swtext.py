"""Software-trace text: the byte writes of a program that spell text, as strings.

Input: the elements of one trace source in stream order; output: the same
elements, with each run of consecutive 8-bit software writes that spell text
replaced by one :class:`TextMessage` holding the string and the elements it
was made of (their raw values and capture indices stay available).

A program that prints through a software-trace channel writes one byte at a
time: an STM channel (``SWTRACE`` with an 8-bit payload), an ITM stimulus port
(``ITMTRACE`` of kind ``SWIT`` with a one-byte payload) or a DCC ASCII debug
message (``SWTRACE`` master 1). The decoders give one element per byte, as
OpenCSD does; people want the line. The rules:

- A run is made of consecutive byte writes of one source to one channel
  (STM/DCC: master and channel; ITM: stimulus port) whose values are text:
  printable ASCII, tab, carriage return or line feed, and a NUL to end it.
- A run ends after a line feed or a NUL, after a write with a marker or a
  timestamp (STM marks the end of a message so), before any other element or
  write, and at :data:`MAX_TEXT` bytes.
- ITM timestamp elements met inside a run do not end it: they are given after
  the message, in their own order (an ITM local timestamp follows the writes it
  dates).
- A run of one byte stays the element it was (a lone byte is more often a
  number than a word).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cstrace.elements import Element, ITMPacketType, ITMTrace, SWTrace

__all__ = ["MAX_TEXT", "TextMessage", "group_text", "is_text_byte", "quote_text"]

MAX_TEXT = 1024
"""The longest string one :class:`TextMessage` holds; a longer run is cut into several."""

_TEXT = frozenset([9, 10, 13, *range(0x20, 0x7F)])
_END = frozenset([0, 10])


def is_text_byte(value: int) -> bool:
    """Whether a byte written by software reads as text (printable ASCII, tab, CR, LF)."""
    return value in _TEXT


class TextMessage:
    """A string a program wrote one byte at a time to one software-trace channel.

    ``elements`` are the ``SWTRACE`` or ``ITMTRACE`` elements it was made of, in
    stream order; ``text`` their bytes as a string, without a closing NUL.
    """

    __slots__ = ("channel", "elements", "master", "text")

    def __init__(
        self, elements: tuple[SWTrace | ITMTrace, ...], text: str, master: int, channel: int
    ) -> None:
        self.elements = elements
        self.text = text
        self.master = master
        """STM/DCC: the master; ITM: 0."""
        self.channel = channel
        """STM/DCC: the channel; ITM: the stimulus port."""

    @property
    def offset(self) -> int:
        """The capture index of the first byte's packet."""
        return self.elements[0].offset

    @property
    def payloads(self) -> list[int]:
        """The byte values written, in order (a closing NUL included)."""
        return [e.payload if isinstance(e, SWTrace) else e.value for e in self.elements]

    @property
    def offsets(self) -> list[int]:
        """The capture index of each byte's packet."""
        return [e.offset for e in self.elements]

    @property
    def last(self) -> SWTrace | ITMTrace:
        """The last element: its marker and timestamp are the message's."""
        return self.elements[-1]

    @property
    def timestamp(self) -> int | None:
        """The timestamp of the last write, when it had one."""
        return self.last.timestamp

    def __repr__(self) -> str:
        return f"TextMessage({self.text!r}, master={self.master}, channel={self.channel})"


def _key(elem: Element) -> tuple[int, int, int] | None:
    """``(value, master, channel)`` of a write that may be part of a text run, else None."""
    if type(elem) is SWTrace:
        if (
            elem.payload_bits == 8
            and elem.id_valid
            and not (elem.global_err or elem.master_err or elem.trigger or elem.frequency)
        ):
            return elem.payload, elem.master, elem.channel
        return None
    if type(elem) is ITMTrace:
        if elem.pkt_type == ITMPacketType.SWIT and elem.payload_size == 1 and not elem.overflow:
            return elem.value, 0, elem.src_id
    return None


def _is_itm_time(elem: Element) -> bool:
    return (
        type(elem) is ITMTrace
        and elem.pkt_type not in (ITMPacketType.SWIT, ITMPacketType.DWT)
        and not elem.overflow
    )


def _ends(elem: Element, value: int) -> bool:
    """Whether a write closes the run it belongs to."""
    if value in _END:
        return True
    return isinstance(elem, SWTrace) and (elem.marker or elem.timestamp is not None)


def group_text(elements: Iterable[Element]) -> Iterator[Element | TextMessage]:
    """The elements of one source with the byte writes that spell text grouped (see above)."""
    run: list[SWTrace | ITMTrace] = []
    held: list[Element] = []
    who: tuple[int, int] = (0, 0)

    def flush() -> Iterator[Element | TextMessage]:
        if len(run) > 1:
            values = [e.payload if isinstance(e, SWTrace) else e.value for e in run]
            if values[-1] == 0:
                values.pop()
            yield TextMessage(tuple(run), bytes(values).decode("ascii"), *who)
            yield from held
        else:
            # One byte: the element as it was, then what was held after it.
            yield from run
            yield from held
        run.clear()
        held.clear()

    for elem in elements:
        key = _key(elem)
        if key is None:
            if run and _is_itm_time(elem):
                held.append(elem)
                continue
            if run:
                yield from flush()
            yield elem
            continue
        value, master, channel = key
        assert isinstance(elem, SWTrace | ITMTrace)
        if run and (master, channel) != who:
            yield from flush()
        if value not in _TEXT and not (value == 0 and run):
            if run:
                yield from flush()
            yield elem
            continue
        if not run:
            who = (master, channel)
        run.append(elem)
        if _ends(elem, value) or len(run) >= MAX_TEXT:
            yield from flush()
    yield from flush()


def quote_text(text: str) -> str:
    """``text`` in double quotes with tab, CR, LF, quotes and backslashes escaped."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'
