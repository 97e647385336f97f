"""Deformatter throughput: demultiplex 64 MiB buffers of CoreSight formatter frames.

Times ``cstrace.capture.demux`` (every trace ID split out) on a synthetic
ETB/ETR-style buffer (aligned 16-byte frames, six trace IDs, ID changes inside
frames with and without the flag bit), on the same frames as a DSTREAM capture
(an FSYNC before every frame: 80 MiB in all) and, when the reference corpus is present,
on real captures of the corpus repeated up to the same size. Prints MB/s by wall
clock and by CPU time (the target is 50 MB/s or more); CPU time is the steadier
figure on a shared machine.

    python benchmarks/bench_deformat.py [--mib 64] [--repeat 3] [--tile FILE ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

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


def dstream(frames: bytes) -> bytes:
    """``frames`` as a DSTREAM capture: an FSYNC before every frame, as Juno's DSTREAM writes."""
    fsync = b"\xff\xff\xff\x7f"
    arr = np.frombuffer(frames, dtype=np.uint8).reshape(-1, 16)
    out = np.empty((arr.shape[0], 20), dtype=np.uint8)
    out[:, :4] = np.frombuffer(fsync, dtype=np.uint8)
    out[:, 4:] = arr
    return out.tobytes()


def _corpus_captures() -> list[tuple[str, bytes]]:
    """Real ETB/ETR captures of the reference corpus, when it is present."""
    root = Path(
        os.environ.get("CSTRACE_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus")
    )
    out = []
    for name, rel in (
        ("bugfix-exact-match (1 ETMv4 stream)", "bugfix-exact-match/cstrace.bin"),
        ("juno_r1_1 (6 ETMv4 streams)", "juno_r1_1/cstrace.bin"),
        ("TC2 (3 ETMv3 + 2 PTM, busy ID changes)", "TC2/cstrace.bin"),
    ):
        path = root / "snapshots" / rel
        if path.is_file():
            out.append((name, path.read_bytes()))
    return out


def _tile(real: bytes, size: int) -> bytes:
    real = real[: len(real) // 16 * 16]
    return (real * (size // len(real) + 1))[:size]


def measure(name: str, data: bytes, repeat: int, fmt: str = "coresight") -> None:
    """Time ``demux`` on ``data`` and print MB/s (wall and CPU time, best of ``repeat``)."""
    wall = []
    cpu = []
    total = 0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = demux(data, fmt)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        total = sum(len(s) for s in result.streams.values())
    mb = len(data) / 1e6
    print(
        f"  {name:<42} {mb / min(wall):6.1f} MB/s wall  {mb / min(cpu):6.1f} MB/s cpu  "
        f"(median {mb / statistics.median(wall):.1f} wall; {total} data bytes out)"
    )


def main() -> None:
    """Run the benchmark and print the throughput."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--tile",
        metavar="FILE",
        action="append",
        help="also repeat this real formatted capture up to the size (repeatable)",
    )
    args = ap.parse_args()
    size = args.mib * 1024 * 1024
    print(f"deformat {args.mib} MiB of formatter frames (target: 50 MB/s or more)")
    synthetic = make_buffer(args.mib)
    measure("synthetic, 6 IDs, 30% of frames with IDs", synthetic, args.repeat)
    measure(
        "same frames as DSTREAM (FSYNC every frame)",
        dstream(synthetic),
        args.repeat,
        "dstream_coresight",
    )
    captures = _corpus_captures()
    for path in args.tile or []:
        captures.append((Path(path).name, Path(path).read_bytes()))
    for name, real in captures:
        measure(f"tiled {name}", _tile(real, size), args.repeat)
    if not captures:
        print("  (reference corpus not found: only the synthetic buffer was measured)")


if __name__ == "__main__":
    main()
