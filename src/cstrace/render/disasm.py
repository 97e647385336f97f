"""Text of ``cstrace disasm``: every executed instruction, symbolised, with the events between.

Input: the steps of one trace source (:mod:`cstrace.analyses.instructions`:
executed instructions and the other elements, in trace order), its
:class:`~cstrace.analyses.symbols.Symbols` and a
:class:`~cstrace.analyses.instructions.Disassembler`. Output: text lines::

    -- PE_CONTEXT       A64  EL0 NS 64-bit ctxtid 0x2a
    0000000000400000  _start                 d2800013   mov x19, #0                  program.s:5
    000000000040000c  _start+0xc             9400000a   bl #0x400034 <square>        program.s:9

an instruction per line (address, ``function+offset``, opcode, capstone's
text, ``file:line``), the other elements as ``-- TYPE details`` lines in their
place (exceptions, trace on and gaps, context changes, timestamps,
software-trace messages); where the input says who ran (a perf.data
recording), a ``-- RUNNING cpu N  pid N  tid N`` line where that changes.
With ``source``, each change of source line is a line of its own
(``file:line  text of the line``) before the instructions it made, which then
leave ``file:line`` out.

Filters (:class:`DisasmOptions`): an address range, a function name, and the
last N instructions only (the post-mortem view). With an address or function
filter, an element other than an instruction is shown when it comes right
after an instruction that was shown (what interrupted the code looked at).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cstrace.analyses.instructions import Disassembler, Executed, Passed, Step
from cstrace.analyses.symbols import SourceLine, Symbols
from cstrace.elements import Isa
from cstrace.render.text import element_details

__all__ = ["DisasmOptions", "disasm_lines", "opcode_text"]

_SYMBOL_WIDTH = 22
_TEXT_WIDTH = 36
_MAX_ROWS = 1 << 18  # instruction lines kept for reuse
# A direct branch (A64, A32, T32: B, BL, BLX, CBZ, CBNZ, TBZ, TBNZ, with a condition and a
# width qualifier) to an immediate address, as capstone writes it.
_CONDS = "eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al"
_DIRECT = re.compile(
    rf"^(?:b|bl|blx|cbz|cbnz|tbz|tbnz)(?:\.?(?:{_CONDS}))?(?:\.[wn])? .*#(0x[0-9a-f]+|\d+)$"
)


@dataclass(frozen=True)
class DisasmOptions:
    """What to show: source lines, an address range ``[start, end)``, a function, the last N."""

    source: bool = False
    start: int | None = None
    end: int | None = None
    function: str | None = None
    last: int | None = None

    @property
    def filtered(self) -> bool:
        """Whether only some instructions are shown (by address or function)."""
        return self.start is not None or self.end is not None or self.function is not None


def opcode_text(isa: Isa, opcode: bytes) -> str:
    """The opcode as the architecture writes it: a 32-bit word (A64, A32), or one or two
    halfwords (T32); ``?`` when the bytes are unknown."""
    if not opcode:
        return "?"
    if isa == Isa.T32:
        return " ".join(
            f"{int.from_bytes(opcode[i : i + 2], 'little'):04x}" for i in range(0, len(opcode), 2)
        )
    return f"{int.from_bytes(opcode, 'little'):0{2 * len(opcode)}x}"


class _Row:
    """One instruction, ready to write: what the filters and the source lines need."""

    __slots__ = ("full", "line", "text", "where")

    def __init__(self, text: str, where: SourceLine | None) -> None:
        self.text = text
        self.where = where
        self.line = ""
        """Without the source line."""
        self.full = ""
        """With ``file:line`` at the end."""


def disasm_lines(
    steps: Iterable[Step],
    symbols: Symbols,
    disassembler: Disassembler,
    options: DisasmOptions | None = None,
) -> Iterator[str]:
    """The lines of one trace source's steps (see the module doc)."""
    opts = options or DisasmOptions()
    rows = _rows(steps, symbols, disassembler, opts)
    if opts.last is None:
        yield from _with_source(rows, symbols, opts)
        return
    # Post-mortem: the last N instructions, and the other elements among them.
    kept: deque[str | _Row] = deque()
    count = 0
    for row in rows:
        kept.append(row)
        if isinstance(row, _Row):
            count += 1
            while count > opts.last:
                gone = kept.popleft()
                if isinstance(gone, _Row):
                    count -= 1
    while kept and not isinstance(kept[0], _Row) and count:
        kept.popleft()  # elements before the first instruction kept belong to earlier ones
    yield from _with_source(kept, symbols, opts)


def _with_source(
    rows: Iterable[str | _Row], symbols: Symbols, opts: DisasmOptions
) -> Iterator[str]:
    last: SourceLine | None = None
    for row in rows:
        if isinstance(row, str):
            yield row
            continue
        if opts.source:
            if row.where is not None and row.where != last:
                text = symbols.source(row.where.file, row.where.line)
                head = f"{row.where.file}:{row.where.line}"
                yield f"{head}  {text.strip()}" if text is not None else head
            last = row.where
            yield row.line.rstrip()
        else:
            yield row.full


def _rows(
    steps: Iterable[Step], symbols: Symbols, disassembler: Disassembler, opts: DisasmOptions
) -> Iterator[str | _Row]:
    text_of = disassembler.text
    made: dict[tuple[int, int | None, bytes, str], _Row] = {}
    start, end, function = opts.start, opts.end, opts.function
    filtered = opts.filtered
    shown = not filtered
    who: tuple[int | None, int | None, int | None] = (None, None, None)
    for step in steps:
        now = (step.cpu, step.pid, step.tid)
        if now != who:
            # Who runs changed (a recording says): a line of its own, where it changed.
            who = now
            if shown:
                yield "-- RUNNING          " + "  ".join(
                    f"{label} {'-' if value is None else value}"
                    for label, value in zip(("cpu", "pid", "tid"), now, strict=True)
                )
        if isinstance(step, Passed):
            if shown:
                elem = step.element
                yield f"-- {elem.TYPE.name:<16} {element_details(elem)}".rstrip()
            continue
        assert isinstance(step, Executed)
        address = step.address
        # Text first, in execution order: T32 IT blocks are followed even when not shown.
        text = text_of(address, step.isa, step.opcode)
        ctx = step.context_id
        if filtered:
            shown = (start is None or address >= start) and (end is None or address < end)
            if shown and function is not None:
                f = symbols.function(address, ctx)
                shown = f is not None and function in (f.name, f.raw_name)
            if not shown:
                continue
        # The same instruction at the same place makes the same line: made once.
        key = (address, ctx, step.opcode, text)
        row = made.get(key)
        if row is None:
            if len(made) >= _MAX_ROWS:
                made.clear()
            row = made[key] = _make_row(step, text, symbols)
        yield row


def _make_row(step: Executed, text: str, symbols: Symbols) -> _Row:
    address, ctx = step.address, step.context_id
    row = _Row(text, symbols.line(address, ctx))
    width = 16 if step.isa == Isa.A64 else 8
    f = symbols.function(address, ctx)
    if f is None:
        name = ""
    else:
        name = f.name if address == f.start else f"{f.name}+{address - f.start:#x}"
    shown = _with_target(text, symbols, ctx)
    row.line = (
        f"{address:0{width}x}  {name:<{_SYMBOL_WIDTH}} "
        f"{opcode_text(step.isa, step.opcode):<10} {shown:<{_TEXT_WIDTH}}"
    )
    where = row.where
    row.full = (row.line + ("" if where is None else f"  {where.file}:{where.line}")).rstrip()
    return row


def _with_target(text: str, symbols: Symbols, context_id: int | None) -> str:
    """``text`` with the function of a direct branch's target after it: ``bl #0x8000 <f>``."""
    m = _DIRECT.match(text)
    if m is None:
        return text
    target = int(m.group(1), 0)
    if symbols.function(target, context_id) is None:
        return text
    return f"{text} <{symbols.name(target, context_id)}>"
