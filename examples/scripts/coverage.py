"""Instruction coverage of one function (an address range) from program-flow trace.

Input: a snapshot or trace package and the address range ``[START, END)`` of a
function; output: which parts of the range ran, how many instructions of the
trace fell in it, and, for fixed-width code (A64, A32), how many times each
instruction address executed.

    python examples/scripts/coverage.py examples/etm_demo 0xffffffc000080400 0xffffffc000080430

Every ``InstrRange`` element is a run of instructions ``[start, end)`` that
executed one after another, so coverage is the union of the ranges, clipped
to the function. Addresses are virtual: with several processes at the same
address, filter on the ``PEContext`` elements first (see docs/api.md).
"""

from __future__ import annotations

import argparse
from collections import Counter

import cstrace


def merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, non-overlapping union of half-open address spans."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def main() -> None:
    """Print the coverage of ``[START, END)`` in the trace of SNAPSHOT."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot", help="snapshot folder or trace package")
    ap.add_argument("start", type=lambda t: int(t, 0), help="first address of the function")
    ap.add_argument("end", type=lambda t: int(t, 0), help="address after its last byte")
    ap.add_argument("--id", type=lambda t: int(t, 0), help="only this trace ID")
    args = ap.parse_args()
    lo, hi = args.start, args.end

    spans: list[tuple[int, int]] = []
    hits: Counter[int] = Counter()  # executions per instruction address (A64/A32)
    instructions = 0
    for trace_id, elem in cstrace.iter_elements(args.snapshot):
        if args.id is not None and trace_id != args.id:
            continue
        match elem:
            case cstrace.InstrRange(start=start, end=end, num_instr=n, isa=isa):
                if end <= lo or start >= hi:
                    continue
                spans.append((max(start, lo), min(end, hi)))
                if isa in (cstrace.Isa.A64, cstrace.Isa.A32):
                    first = max(start, lo)
                    first += (start - first) % 4  # stay on the range's 4-byte grid
                    for address in range(first, min(end, hi), 4):
                        hits[address] += 1
                        instructions += 1
                elif start >= lo and end <= hi:
                    instructions += n  # T32: only whole ranges can be counted

    covered = merge(spans)
    size = hi - lo
    done = sum(b - a for a, b in covered)
    print(f"function 0x{lo:x}-0x{hi:x}: {size} bytes")
    at = lo
    for a, b in [*covered, (hi, hi)]:
        if a > at:
            print(f"  not executed  0x{at:x}-0x{a:x}  ({a - at} bytes)")
        if b > a:
            print(f"  executed      0x{a:x}-0x{b:x}  ({b - a} bytes)")
        at = b
    print(f"coverage {100.0 * done / size:.1f}% of bytes; {instructions} instructions traced")
    for address in sorted(hits):
        print(f"  0x{address:x}  {hits[address]:>6}x")


if __name__ == "__main__":
    main()
