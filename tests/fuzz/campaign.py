"""A long fuzz campaign over every input kind, within a time budget (issue 26).

Usage (from the repository's root)::

    python -m tests.fuzz.campaign --minutes 30                 # every target, in turn
    python -m tests.fuzz.campaign --minutes 5 --target zip --target ini
    python -m tests.fuzz.campaign --corpus ../shared/corpus    # real snapshots as seeds too
    python -m tests.fuzz.campaign --replay trace-ptm 1234      # make one run's input again

Each run is a mutated input given to the command line in a fork of this process,
classified as clean, clean error, traceback, timeout, memory or crash
(:mod:`tests.fuzz.harness`). The counts per target and class are printed every
``--every`` seconds and at the end; the runs that are bugs are printed as they
come, with the ``(target, seed)`` that makes them again, and written to ``--log``
as JSON lines. Set ``CSTRACE_PURE=1`` to fuzz the pure-Python modules. The exit
status is 1 when a run was a bug, else 0.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fuzz.harness import (
    BAD,
    TARGETS,
    Limits,
    Outcome,
    Run,
    campaign,
    corpus_seeds,
    make_seeds,
)


def table(counts: dict[str, Counter[Outcome]], elapsed: float) -> str:
    """Counts per target and class, as a text table."""
    classes = list(Outcome)
    width = max([len(t) for t in counts] + [6])
    head = f"{'target':<{width}} " + " ".join(f"{c.value:>11}" for c in classes) + "      runs"
    lines = [f"after {elapsed / 60:.1f} min:", head]
    total: Counter[Outcome] = Counter()
    for target, c in counts.items():
        total.update(c)
        cells = " ".join(f"{c[k]:>11}" for k in classes)
        lines.append(f"{target:<{width}} {cells} {sum(c.values()):>9}")
    cells = " ".join(f"{total[k]:>11}" for k in classes)
    lines.append(f"{'all':<{width}} {cells} {sum(total.values()):>9}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; the exit status is 1 when a run was a bug."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--minutes", type=float, default=30.0, help="time budget (default 30)")
    p.add_argument("--target", action="append", choices=sorted(TARGETS), help="(repeatable)")
    p.add_argument("--corpus", type=Path, help="a reference corpus: its snapshots as seeds too")
    p.add_argument("--seed", type=int, default=0, help="first seed number (default 0)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a run may take")
    p.add_argument("--memory", type=int, default=4096, help="MiB of address space a run may use")
    p.add_argument("--peak", type=int, default=1024, help="MiB of resident memory counted bad")
    p.add_argument("--every", type=float, default=300.0, help="seconds between count tables")
    p.add_argument("--log", type=Path, help="write the bad runs here (JSON lines)")
    p.add_argument("--work", type=Path, help="folder for seeds and runs (default: a temporary one)")
    p.add_argument("--replay", nargs=2, metavar=("TARGET", "SEED"), help="make one run's input")
    args = p.parse_args(argv)

    import cstrace.cli  # noqa: F401  (imported once, before the forks)
    from cstrace import compiled

    work = args.work or Path(tempfile.mkdtemp(prefix="cstrace-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    seeds = make_seeds(work / "seeds")
    if args.corpus is not None:
        for target, more in corpus_seeds(args.corpus, work / "seeds").items():
            seeds.setdefault(target, []).extend(more)
    if args.replay:
        target, seed = args.replay[0], int(args.replay[1])
        kind, make = TARGETS[target]
        run_dir = work / f"replay-{target}-{seed}"
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir()
        made, what = make(random.Random(f"{target}:{seed}"), seeds[kind], run_dir)
        print(f"{what}\ncd {run_dir} && cstrace {' '.join(made)}")
        return 0

    limits = Limits(args.timeout, args.memory << 20, args.peak << 20)
    targets = args.target or list(TARGETS)
    mode = "compiled" if compiled() else "pure Python"
    print(f"fuzzing {', '.join(targets)} ({mode}) for {args.minutes} min in {work}", flush=True)
    counts: dict[str, Counter[Outcome]] = {t: Counter() for t in targets}
    log = open(args.log, "a", encoding="utf-8") if args.log else None  # noqa: SIM115
    start = last = time.monotonic()
    bad = 0
    slowest: list[Run] = []
    try:
        for run in campaign(
            targets, seeds, work, limits, first_seed=args.seed, budget=args.minutes * 60
        ):
            counts[run.target][run.outcome] += 1
            slowest = sorted([*slowest, run], key=lambda r: -r.cpu)[:5]
            if run.outcome in BAD:
                bad += 1
                print(f"BAD {run.line()}\n    " + run.detail.replace("\n", "\n    "), flush=True)
                if log is not None:
                    record = {
                        "target": run.target,
                        "seed": run.seed,
                        "outcome": run.outcome.value,
                        "seconds": round(run.seconds, 2),
                        "what": run.what,
                        "argv": run.argv,
                        "detail": run.detail,
                    }
                    log.write(json.dumps(record) + "\n")
                    log.flush()
            now = time.monotonic()
            if now - last > args.every:
                last = now
                print(table(counts, now - start), flush=True)
    finally:
        if log is not None:
            log.close()
        print(table(counts, time.monotonic() - start))
        print("slowest runs (CPU time):")
        for run in slowest:
            print(f"  {run.line()}")
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
