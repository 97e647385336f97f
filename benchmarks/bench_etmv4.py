"""ETMv4 listing speed: cstrace against the reference lister on ``bugfix-exact-match``.

Input: the ``bugfix-exact-match`` snapshot of the reference corpus (1 MiB of
formatted trace, six ETMv4 streams, 1.74 million elements). Output: for each
decoder, the time to produce the whole OpenCSD listing (packets and elements of
every source) into ``/dev/null``, wall clock and CPU, the median ratio cstrace /
reference, and the time cstrace takes for the element stream alone (no text).
The runs alternate so that both decoders see the same machine load:

- ``reference``: ``trc_pkt_lister -ss_dir SNAP -decode -no_time_print -logstdout``;
- ``cstrace listing``: ``cstrace decode SNAP --format ocsd`` (process start
  included, as for the reference);
- ``cstrace elements``: in this process, every source's packets decoded into
  generic elements, nothing rendered.

With ``--memory`` it also measures peak memory (maximum resident set) of
``cstrace decode --format ocsd`` on the buffer once and on the buffer repeated
16 times (a temporary copy of the snapshot): memory must stay flat as the trace
grows (the issue asks for at most 1.5x).

    python benchmarks/bench_etmv4.py [--repeat 5] [--memory] [--snapshot PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cstrace.decode import Session
from cstrace.inputs import read_snapshot

_DEFAULT = (
    Path(__file__).resolve().parents[2] / "shared" / "corpus" / "snapshots" / "bugfix-exact-match"
)


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of a command, output to /dev/null."""
    c0 = _child_cpu()
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0, _child_cpu() - c0


def reference_cmd(snapshot: Path) -> list[str]:
    """The reference lister's command line."""
    return ["trc_pkt_lister", "-ss_dir", str(snapshot), "-decode", "-no_time_print", "-logstdout"]


def cstrace_cmd(snapshot: Path) -> list[str]:
    """``cstrace decode --format ocsd`` into /dev/null."""
    exe = Path(sys.executable).with_name("cstrace")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cstrace.cli"]
    return [*cmd, "decode", str(snapshot), "--format", "ocsd", "-o", os.devnull]


def run_elements(snapshot: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds (and count) to decode every source into elements, no text."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    snap = read_snapshot(snapshot)
    session = Session(snap)
    n = 0
    for buf in snap.buffers:
        for run in session.open_buffer(buf).runs:
            for _ in run.elements():
                n += 1
    return time.perf_counter() - t0, time.process_time() - c0, n


def peak_rss_kib(cmd: list[str]) -> int:
    """Maximum resident set size of a command, in KiB (via /usr/bin/time when present)."""
    gnu_time = shutil.which("time") or "/usr/bin/time"
    if os.path.exists(gnu_time):
        out = subprocess.run(
            [gnu_time, "-f", "%M", *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        return int(out.stderr.strip().splitlines()[-1])
    pid = os.fork()  # pragma: no cover - fallback without GNU time
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execvp(cmd[0], cmd)
    _, _, ru = os.wait4(pid, 0)
    return int(ru.ru_maxrss)


def repeated_snapshot(snapshot: Path, times: int, dest: Path) -> Path:
    """A copy of ``snapshot`` whose trace buffer files hold their data ``times`` times."""
    out = dest / f"{snapshot.name}-x{times}"
    out.mkdir()
    snap = read_snapshot(snapshot)
    buffer_files = {Path(f.name).name for b in snap.buffers for f in b.files}
    for p in snapshot.iterdir():
        if p.name in buffer_files:
            data = p.read_bytes()
            with open(out / p.name, "wb") as f:
                for _ in range(times):
                    f.write(data)
        elif p.is_file():
            shutil.copyfile(p, out / p.name)
    return out


def main() -> None:
    """Run the benchmark and print the times and ratios."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--snapshot", type=Path, default=_DEFAULT)
    ap.add_argument("--memory", action="store_true", help="also measure peak memory 1x vs 16x")
    args = ap.parse_args()
    if not args.snapshot.is_dir():
        sys.exit(f"snapshot not found: {args.snapshot}")
    have_ref = shutil.which("trc_pkt_lister") is not None
    ref: list[tuple[float, float]] = []
    cli: list[tuple[float, float]] = []
    elem: list[tuple[float, float]] = []
    count = 0
    for _ in range(args.repeat):
        if have_ref:
            ref.append(_run(reference_cmd(args.snapshot)))
        cli.append(_run(cstrace_cmd(args.snapshot)))
        w, c, count = run_elements(args.snapshot)
        elem.append((w, c))

    def line(name: str, xs: list[tuple[float, float]]) -> str:
        walls = [w for w, _ in xs]
        cpus = [c for _, c in xs]
        return (
            f"  {name:<18} wall median {statistics.median(walls):7.3f} s (min {min(walls):.3f})"
            f"   cpu median {statistics.median(cpus):7.3f} s (min {min(cpus):.3f})"
        )

    print(f"{args.snapshot.name}: {count} elements, {args.repeat} alternating runs")
    if have_ref:
        print(line("reference listing", ref))
    print(line("cstrace listing", cli))
    print(line("cstrace elements", elem))
    if have_ref:
        for name, xs in (("listing", cli), ("elements", elem)):
            rw = statistics.median(c[0] / r[0] for c, r in zip(xs, ref, strict=True))
            rc = statistics.median(c[1] / r[1] for c, r in zip(xs, ref, strict=True))
            print(f"  median ratio cstrace {name} / reference listing: wall {rw:.2f}  cpu {rc:.2f}")
    else:
        print("  trc_pkt_lister not found: no reference times")

    if args.memory:
        with tempfile.TemporaryDirectory() as tmp:
            big = repeated_snapshot(args.snapshot, 16, Path(tmp))
            once = peak_rss_kib(cstrace_cmd(args.snapshot))
            sixteen = peak_rss_kib(cstrace_cmd(big))
        print(
            f"  peak memory: 1x {once / 1024:.1f} MiB, 16x {sixteen / 1024:.1f} MiB "
            f"(ratio {sixteen / once:.2f})"
        )


if __name__ == "__main__":
    main()
