"""Deformatter throughput: demultiplex a 64 MiB buffer of CoreSight formatter frames.

Builds a synthetic ETB/ETR-style buffer (aligned 16-byte frames, six trace IDs,
ID changes inside frames with and without the flag bit) and times
``cstrace.capture.demux`` on it. Prints MB/s (the target is 50 MB/s or more).

    python benchmarks/bench_deformat.py [--mib 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from cstrace.capture import demux


def make_buffer(mib: int, seed: int = 7, id_frames: float = 0.3) -> bytes:
    """``mib`` MiB of frames from six sources, shaped like real ETB/ETR captures.

    In the corpus captures 50-87% of frames hold no ID byte at all; here a fraction
    ``id_frames`` of frames carries one to three ID bytes (random slots, random
    flag bits), the rest are pure data.
    """
    rng = np.random.default_rng(seed)
    n = mib * 1024 * 1024 // 16
    frames = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    frames[:, 0:15:2] &= 0xFE  # even bytes are data by default
    with_ids = np.flatnonzero(rng.random(n) < id_frames)
    sources = np.array([0x10, 0x11, 0x12, 0x13, 0x14, 0x15], dtype=np.uint8)
    for _ in range(3):
        rows = with_ids[rng.random(with_ids.size) < 0.6]
        cols = 2 * rng.integers(0, 8, size=rows.size)
        frames[rows, cols] = (rng.choice(sources, size=rows.size) << 1) | 1
    return frames.tobytes()


def main() -> None:
    """Run the benchmark and print the throughput."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--tile",
        metavar="FILE",
        help="instead of synthetic frames, repeat this real formatted capture up to the size",
    )
    args = ap.parse_args()
    if args.tile:
        with open(args.tile, "rb") as f:
            real = f.read()
        real = real[: len(real) // 16 * 16]
        want = args.mib * 1024 * 1024
        data = (real * (want // len(real) + 1))[:want]
    else:
        data = make_buffer(args.mib)
    times = []
    total = 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        result = demux(data, "coresight")
        times.append(time.perf_counter() - t0)
        total = sum(len(s) for s in result.streams.values())
    best = min(times)
    med = statistics.median(times)
    size_mb = len(data) / 1e6
    print(f"deformat {args.mib} MiB ({len(data) // 16} frames, {total} data bytes out)")
    print(f"  best {best:.3f} s = {size_mb / best:.1f} MB/s")
    print(f"  median {med:.3f} s = {size_mb / med:.1f} MB/s")


if __name__ == "__main__":
    main()
