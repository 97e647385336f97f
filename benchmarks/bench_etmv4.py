"""ETMv4 listing and element-stream speed: cstrace against the reference and another cstrace.

Input: the ``bugfix-exact-match`` snapshot of the reference corpus (1 MiB of
formatted trace, six ETMv4 streams, 1.74 million elements), or ``--snapshot``.
Output: for each contender, wall and CPU time (medians of alternating runs, so
all see the same machine load) and the ratios between them:

- ``reference``: ``trc_pkt_lister -ss_dir SNAP -decode -no_time_print -logstdout``
  into ``/dev/null`` (when the lister is installed);
- ``cstrace listing``: ``cstrace decode SNAP --format ocsd`` into ``/dev/null``
  (process start included, as for the reference);
- ``cstrace elements``: every source's packets decoded into generic elements,
  nothing rendered (in a fresh process, the time of the decode only);
- with ``--baseline DIR``, the same two for the cstrace checkout in ``DIR``
  (its ``.venv``), e.g. the commit before a change: the "before and after in
  the same run" an issue asks for.

With ``--memory`` it also measures peak memory (maximum resident set) of the
listing on the buffer once and on the buffer repeated 16 times (a temporary
copy of the snapshot): memory must stay flat as the trace grows.

    python benchmarks/bench_etmv4.py [--repeat 5] [--memory] [--snapshot PATH] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_DEFAULT = (
    Path(__file__).resolve().parents[2] / "shared" / "corpus" / "snapshots" / "bugfix-exact-match"
)

# Runs in the Python of the cstrace under test: old checkouts have cstrace.snapshot.
_ELEMENTS = """
import json, sys, time
try:
    from cstrace.inputs import read_snapshot
except ImportError:
    from cstrace.snapshot import read_snapshot
from cstrace.decode import Session
t0 = time.perf_counter(); c0 = time.process_time()
snap = read_snapshot(sys.argv[1])
session = Session(snap)
n = 0
for buf in snap.buffers:
    for run in session.open_buffer(buf).runs:
        for _ in run.elements():
            n += 1
print(json.dumps([time.perf_counter() - t0, time.process_time() - c0, n]))
"""


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


_ENV = dict(os.environ)
# Where PYTHONDONTWRITEBYTECODE is set, every run would compile cstrace from source:
# keep the bytecode in a cache of our own so that runs time the decoding, not the compiler.
_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
_ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "cstrace-bench-pycache")


def _run(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of a command, output to /dev/null."""
    c0 = _child_cpu()
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=_ENV)
    return time.perf_counter() - t0, _child_cpu() - c0


def reference_cmd(snapshot: Path) -> list[str]:
    """The reference lister's command line."""
    return ["trc_pkt_lister", "-ss_dir", str(snapshot), "-decode", "-no_time_print", "-logstdout"]


def cstrace_cmd(python: str, snapshot: Path) -> list[str]:
    """``cstrace decode --format ocsd`` into /dev/null, with the given Python."""
    return [
        python,
        "-m",
        "cstrace.cli",
        "decode",
        str(snapshot),
        "--format",
        "ocsd",
        "-o",
        os.devnull,
    ]


def run_elements(python: str, snapshot: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds (and count) to decode every source into elements, no text."""
    out = subprocess.run(
        [python, "-c", _ELEMENTS, str(snapshot)],
        capture_output=True,
        text=True,
        check=True,
        env=_ENV,
    )
    wall, cpu, n = json.loads(out.stdout.strip().splitlines()[-1])
    return float(wall), float(cpu), int(n)


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
    from cstrace.inputs import read_snapshot

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


def _line(name: str, xs: list[tuple[float, float]]) -> str:
    walls = [w for w, _ in xs]
    cpus = [c for _, c in xs]
    return (
        f"  {name:<24} wall median {statistics.median(walls):7.3f} s (min {min(walls):.3f})"
        f"   cpu median {statistics.median(cpus):7.3f} s (min {min(cpus):.3f})"
    )


def _ratio(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> str:
    rw = statistics.median(x[0] / y[0] for x, y in zip(a, b, strict=True))
    rc = statistics.median(x[1] / y[1] for x, y in zip(a, b, strict=True))
    return f"wall {rw:.2f}  cpu {rc:.2f}"


def main() -> None:
    """Run the benchmark and print the times and ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--snapshot", type=Path, default=_DEFAULT)
    ap.add_argument("--memory", action="store_true", help="also measure peak memory 1x vs 16x")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another cstrace checkout (with its .venv) to measure in the same run",
    )
    args = ap.parse_args()
    if not args.snapshot.is_dir():
        sys.exit(f"snapshot not found: {args.snapshot}")
    contenders = {"": sys.executable}
    if args.baseline is not None:
        python = args.baseline / ".venv" / "bin" / "python"
        if not python.exists():
            sys.exit(f"no {python}: create the baseline's venv first")
        contenders["baseline "] = str(python)
    have_ref = shutil.which("trc_pkt_lister") is not None
    ref: list[tuple[float, float]] = []
    cli: dict[str, list[tuple[float, float]]] = {k: [] for k in contenders}
    elem: dict[str, list[tuple[float, float]]] = {k: [] for k in contenders}
    count = 0
    for _ in range(args.repeat):
        if have_ref:
            ref.append(_run(reference_cmd(args.snapshot)))
        for label, python in contenders.items():
            cli[label].append(_run(cstrace_cmd(python, args.snapshot)))
            w, c, count = run_elements(python, args.snapshot)
            elem[label].append((w, c))

    print(f"{args.snapshot.name}: {count} elements, {args.repeat} alternating runs")
    if have_ref:
        print(_line("reference listing", ref))
    for label in contenders:
        print(_line(f"{label}cstrace listing", cli[label]))
        print(_line(f"{label}cstrace elements", elem[label]))
    if have_ref:
        for label in contenders:
            for name, xs in (("listing", cli[label]), ("elements", elem[label])):
                print(f"  ratio {label}cstrace {name} / reference listing: {_ratio(xs, ref)}")
    else:
        print("  trc_pkt_lister not found: no reference times")
    if args.baseline is not None:
        for name, d in (("listing", cli), ("elements", elem)):
            print(f"  ratio cstrace {name} / baseline: {_ratio(d[''], d['baseline '])}")

    if args.memory:
        with tempfile.TemporaryDirectory() as tmp:
            big = repeated_snapshot(args.snapshot, 16, Path(tmp))
            for label, python in contenders.items():
                once = peak_rss_kib(cstrace_cmd(python, args.snapshot))
                sixteen = peak_rss_kib(cstrace_cmd(python, big))
                print(
                    f"  {label}peak memory: 1x {once / 1024:.1f} MiB, 16x {sixteen / 1024:.1f} MiB "
                    f"(ratio {sixteen / once:.2f})"
                )


if __name__ == "__main__":
    main()
