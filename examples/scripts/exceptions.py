"""A histogram of the exceptions in a trace, per trace source.

Input: a snapshot or trace package; output: for every trace source that took
exceptions, each exception number with its name (for the protocols whose
numbering is known here), how often it was taken, and a bar.

    python examples/scripts/exceptions.py examples/etm_demo

It walks the trace the long way (``Session`` → buffers → ``SourceRun``) to know
which protocol each source speaks: exception numbers are protocol-specific.
"""

from __future__ import annotations

import argparse
from collections import Counter

import cstrace

# ETMv4 and ETE, A and R profile: the exception type of an Exception packet (IHI0064).
ETMV4_NAMES = {
    0x0: "PE reset",
    0x1: "debug halt",
    0x2: "call (SVC...)",
    0x3: "trap",
    0x4: "system error",
    0x6: "instruction debug",
    0x7: "data debug",
    0xA: "alignment",
    0xB: "instruction fault",
    0xC: "data fault",
    0xE: "IRQ",
    0xF: "FIQ",
}
# PTM and ETMv3, A and R profile: the exception field of a branch packet (IHI0035B, IHI0014Q).
V7_NAMES = {
    0x1: "debug halt",
    0x2: "SMC",
    0x3: "Hyp",
    0x4: "asynchronous data abort",
    0x5: "Jazelle",
    0x8: "reset",
    0x9: "undefined instruction",
    0xA: "SVC",
    0xB: "prefetch abort",
    0xC: "data abort",
    0xD: "generic",
    0xE: "IRQ",
    0xF: "FIQ",
}
NAMES = {"etmv4": ETMV4_NAMES, "ete": ETMV4_NAMES, "ptm": V7_NAMES, "etmv3": V7_NAMES}


def main() -> None:
    """Print the exception histogram of every source of SNAPSHOT."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot", help="snapshot folder or trace package")
    args = ap.parse_args()

    snapshot = cstrace.open_trace(args.snapshot)
    session = cstrace.Session(snapshot)
    for buffer in snapshot.buffers:
        for run in session.open_buffer(buffer).runs:
            counts = Counter(e.number for e in run.elements() if isinstance(e, cstrace.Exception_))
            if not counts:
                continue
            name = run.source.name
            proto = run.protocol.name
            print(f"{buffer.name} {name} ({proto}, trace ID {run.trace_id:#x})")
            names = NAMES.get(proto, {})
            widest = max(counts.values())
            for number, count in sorted(counts.items()):
                bar = "#" * max(1, round(40 * count / widest))
                label = names.get(number, "")
                print(f"  0x{number:03x} {label:<24} {count:>8}  {bar}")


if __name__ == "__main__":
    main()
