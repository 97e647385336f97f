"""Score every corpus listing (or those named) and print one line each, like ocsd_score.py.

python -m tests.golden.score_all [NAME ...] [--skip NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.conftest import corpus_dir
from tests.golden.corpus import expected_names, listing
from tests.golden.scoring import read_listing, score


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--skip", action="append", default=[])
    args = ap.parse_args()
    corpus = corpus_dir()
    if corpus is None:
        print("corpus not found", file=sys.stderr)
        return 2
    names = args.names or expected_names(corpus)
    exact = 0
    for name in names:
        if name in args.skip:
            continue
        t0 = time.perf_counter()
        try:
            actual = listing(corpus, name)
        except Exception as exc:  # report and go on: this is a survey tool
            print(f"{name:<36} ERROR {type(exc).__name__}: {exc}")
            continue
        s = score(read_listing(corpus / "expected" / f"{name}.ppl.xz"), actual)
        exact += s.exact and s.packets_complete
        flag = "EXACT" if s.exact else "DIFF"
        print(f"{name:<36} {s.summary()}  {flag}  ({time.perf_counter() - t0:.1f}s)", flush=True)
    print(f"{exact}/{len(names)} exact with all packets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
