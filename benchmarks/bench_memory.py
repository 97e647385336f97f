"""Peak memory as the trace grows: a capture decoded once and repeated N times.

Input: a snapshot of the reference corpus (by default ``bugfix-exact-match``,
1 MiB of formatted ETMv4 trace from six sources). Output: for each N (1 and 16
by default) the peak resident set size (``ru_maxrss``) and the CPU time of a
fresh process that decodes a temporary copy of the snapshot whose trace buffer
is the capture concatenated N times (formatter frames are self-contained, so
the concatenation is a valid capture), in three modes:

- ``listing``: ``cstrace decode --format ocsd --jobs 1`` written to ``/dev/null``
  (one process: a pool's workers would escape the measure);
- ``elements``: every source's generic elements as objects, nothing rendered;
- ``null``: ``cstrace decode --format null --jobs 1`` (the element rows, the
  way the command takes them; ``CSTRACE_PURE=1`` in the environment measures
  the pure-Python mode).

and the ratio of the largest N to N=1. Issue 3 asks for memory that stays flat:
16 times the trace in no more than 1.5 times the memory.

    python benchmarks/bench_memory.py [--times 1 16] [--mode listing elements null]
                                      [--snapshot PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_DEFAULT = (
    Path(__file__).resolve().parents[2] / "shared" / "corpus" / "snapshots" / "bugfix-exact-match"
)
MODES = ("listing", "elements", "null")


def copy_writable(src: Path, dest: Path) -> None:
    """Copy the folder ``src`` to ``dest``, every copied folder and file writable (the
    corpus is read-only; a copy must be removable)."""
    shutil.copytree(src, dest, copy_function=shutil.copyfile)
    for folder, _, _ in os.walk(dest):
        os.chmod(folder, 0o755)


def repeated_snapshot(snapshot: Path, times: int, dest: Path) -> Path:
    """A copy of ``snapshot`` in ``dest`` whose trace buffer files hold their data ``times`` times.

    Memory dumps, INI files and subfolders are copied unchanged (the snapshot reader
    refuses links that lead outside the folder).
    """
    from cstrace.inputs import read_snapshot

    out = dest / f"{snapshot.name}-x{times}"
    out.mkdir()
    snap = read_snapshot(snapshot)
    buffer_files = {Path(f.name).name for b in snap.buffers for f in b.files}
    for p in snapshot.iterdir():
        if p.is_dir():
            copy_writable(p, out / p.name)  # memory dumps in a subfolder (bindir_64/)
            continue
        if not p.is_file():
            continue
        if p.name in buffer_files:
            data = p.read_bytes()
            with open(out / p.name, "wb") as f:
                for _ in range(times):
                    f.write(data)
        else:
            shutil.copyfile(p, out / p.name)
    return out


def _child(mode: str, snapshot: Path) -> None:
    """Decode ``snapshot`` in this process and print ``peak_kib cpu_seconds count``."""
    c0 = time.process_time()
    count = 0
    if mode == "listing":
        from cstrace.cli import main as cli_main

        status = cli_main(
            ["decode", str(snapshot), "--format", "ocsd", "--jobs", "1", "-o", os.devnull]
        )
        count = status
    elif mode == "null":
        from cstrace.cli import main as cli_main

        count = cli_main(["decode", str(snapshot), "--format", "null", "--jobs", "1"])
    else:
        from cstrace.decode import Session
        from cstrace.inputs import read_snapshot

        snap = read_snapshot(snapshot)
        session = Session(snap)
        for buf in snap.buffers:
            for run in session.open_buffer(buf).runs:
                for _ in run.elements():
                    count += 1
    cpu = time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{peak} {cpu:.3f} {count}")


def measure(mode: str, snapshot: Path) -> tuple[int, float, int]:
    """Peak RSS (KiB), CPU seconds and element count (or exit status) of one fresh process."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--snapshot", str(snapshot)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=True,
    )
    peak, cpu, count = out.stdout.split()
    return int(peak), float(cpu), int(count)


def main() -> None:
    """Measure each mode at each repetition count and print peak memory and its ratio."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--snapshot", type=Path, default=_DEFAULT)
    ap.add_argument("--times", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--mode", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.snapshot)
        return
    if not args.snapshot.is_dir():
        sys.exit(f"snapshot not found: {args.snapshot}")
    with tempfile.TemporaryDirectory() as tmp:
        copies = {n: repeated_snapshot(args.snapshot, n, Path(tmp)) for n in args.times}
        for mode in args.mode:
            peaks: dict[int, int] = {}
            for n in args.times:
                peak, cpu, count = measure(mode, copies[n])
                peaks[n] = peak
                what = "exit status" if mode == "listing" else "elements"
                print(
                    f"{args.snapshot.name} x{n:<3} {mode:<9} peak RSS {peak / 1024:7.1f} MiB"
                    f"  cpu {cpu:7.2f} s  ({what} {count})",
                    flush=True,
                )
            lo, hi = min(args.times), max(args.times)
            if hi != lo:
                print(f"  {mode}: peak x{hi} / x{lo} = {peaks[hi] / peaks[lo]:.2f}", flush=True)


if __name__ == "__main__":
    main()
