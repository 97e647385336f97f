"""TC2 listing speed: cstrace against the reference lister, measured in the same run.

Input: the ``TC2`` snapshot of the reference corpus (ETMv3, PTM and ITM trace in
one ETB buffer). Output: the time each decoder takes to write the whole OpenCSD
listing (packets and elements of every source) to ``/dev/null``, and the median
ratio cstrace / reference. The runs alternate so that both see the same machine
load:

- ``reference``: ``trc_pkt_lister -ss_dir TC2 -decode -no_time_print -logstdout``;
- ``cstrace cli``: ``cstrace decode TC2 --format ocsd`` (process start included,
  as for the reference);
- ``cstrace lib``: the same listing produced in this process (no start-up).

    python benchmarks/bench_tc2.py [--repeat 5] [--snapshot PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from cstrace.decode import Session
from cstrace.inputs import read_snapshot
from cstrace.render.ocsd import listing_lines

_DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "snapshots" / "TC2"


def run_reference(snapshot: Path) -> float:
    """Seconds the reference lister takes to list the snapshot."""
    t0 = time.perf_counter()
    subprocess.run(
        ["trc_pkt_lister", "-ss_dir", str(snapshot), "-decode", "-no_time_print", "-logstdout"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - t0


def run_cli(snapshot: Path) -> float:
    """Seconds ``cstrace decode --format ocsd`` takes, process start included."""
    exe = Path(sys.executable).with_name("cstrace")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cstrace.cli"]
    t0 = time.perf_counter()
    subprocess.run(
        [*cmd, "decode", str(snapshot), "--format", "ocsd", "-o", os.devnull],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - t0


def run_library(snapshot: Path) -> tuple[float, int]:
    """Seconds (and lines) to produce the listing of every buffer in this process."""
    t0 = time.perf_counter()
    snap = read_snapshot(snapshot)
    session = Session(snap)
    lines = 0
    with open(os.devnull, "w") as out:
        for buf in snap.buffers:
            decoded = session.open_buffer(buf)
            for run in decoded.runs:
                for line in listing_lines(run):
                    out.write(line)
                    out.write("\n")
                    lines += 1
    return time.perf_counter() - t0, lines


def main() -> None:
    """Run the benchmark and print the times and ratios."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--snapshot", type=Path, default=_DEFAULT)
    args = ap.parse_args()
    if not args.snapshot.is_dir():
        sys.exit(f"snapshot not found: {args.snapshot}")
    have_ref = shutil.which("trc_pkt_lister") is not None
    ref: list[float] = []
    cli: list[float] = []
    lib: list[float] = []
    lines = 0
    for _ in range(args.repeat):
        if have_ref:
            ref.append(run_reference(args.snapshot))
        cli.append(run_cli(args.snapshot))
        t, lines = run_library(args.snapshot)
        lib.append(t)
    name = args.snapshot.name
    print(f"{name} listing ({lines} lines from cstrace), {args.repeat} alternating runs")
    if have_ref:
        print(f"  reference    median {statistics.median(ref):.3f} s  (min {min(ref):.3f})")
    print(f"  cstrace cli  median {statistics.median(cli):.3f} s  (min {min(cli):.3f})")
    print(f"  cstrace lib  median {statistics.median(lib):.3f} s  (min {min(lib):.3f})")
    if have_ref:
        r_cli = statistics.median(c / r for c, r in zip(cli, ref, strict=True))
        r_lib = statistics.median(c / r for c, r in zip(lib, ref, strict=True))
        print(f"  median ratio cstrace cli / reference = {r_cli:.2f}")
        print(f"  median ratio cstrace lib / reference = {r_lib:.2f}")
    else:
        print("  trc_pkt_lister not found: no reference times")


if __name__ == "__main__":
    main()
