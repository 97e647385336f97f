"""Elements and listings, cstrace against the reference, per protocol, in the same run.

Input: snapshots of the reference corpus (``$CSTRACE_CORPUS`` or
``../shared/corpus``), small ones repeated until their buffer is about
1 MiB (formatter frames are self-contained, so the repetition is a valid
capture):

| case | snapshot | repeated |
|---|---|---|
| ETMv4 | ``bugfix-exact-match`` (one busy stream) | 1x |
| ETMv3+PTM | ``TC2`` (three ETMv3, one PTM stream busy) | 32x |
| PTM | ``Snowball`` | 128x |
| STM | ``stm_only`` | 32x |
| ITM | ``itm_only_csformat`` | 3641x |

Output, per case: wall and CPU seconds (minimum and median of alternating
runs, every contender once per round, so that all see the same machine load),
MB/s of cstrace's element decode, and these ratios of minima (cstrace over
the reference: below 1 means cstrace is faster):

- **elements**: ``cstrace decode SNAP --format null --jobs 1 --before-sync wait``
  (waiting for synchronisation, as the reference does) against the
  reference's element-only decode. That is a small C program of ours
  (``ocsd_elements.c``) built here with gcc against Debian's
  ``libopencsd-dev``: it builds the decode tree with OpenCSD's C API from the
  snapshot's register values and memory dumps (the C API has no snapshot
  reader) and counts the generic elements in a callback, making no text.
  Without gcc or the headers, the closest mode of the installed lister is
  used instead and the output says so: ``trc_pkt_lister -decode_only
  -no_time_print`` into ``/dev/null`` (it still prints the elements).
- **listing**: ``cstrace decode SNAP --format ocsd --jobs 1 -o FILE`` against
  ``trc_pkt_lister -ss_dir SNAP -decode -no_time_print -logfilename FILE``.
- **MB/s**: the capture's size over cstrace's element decode; for STM and ITM
  the decode of everything (``--before-sync decode``, the element formats'
  default): waiting for synchronisation, both decoders stop early in the
  repeated capture.
- **jobs** (cases with several busy trace IDs, and ETMv4, whose one busy
  stream the listing cuts at synchronisation points and decodes in pieces:
  :mod:`cstrace.split`): ``--format null --jobs 2`` against ``--jobs 1``, by
  wall time (by default ``null`` does not cut a stream: one job then does the
  work); for ETMv4 also the listing, ``--format ocsd --jobs 2 -o FILE``
  against ``--jobs 1``.

Process start is included for everyone. The reference is whatever OpenCSD is
installed (1.3.3 on Debian bookworm, which has no ITM decoder: that case has
cstrace figures only). Nothing here asserts a time.

    python benchmarks/bench_elements.py [--repeat 5] [--case ETMv4 ...] [--corpus DIR]
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
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.bench_memory import repeated_snapshot  # noqa: E402

_ENV = dict(os.environ)
_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
_ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "cstrace-bench-pycache")


@dataclass(frozen=True)
class Case:
    """One benchmark input: a corpus snapshot repeated ``times`` times."""

    label: str
    snapshot: str
    times: int
    several_ids: bool = False
    split: bool = False
    """Its busy stream is long enough to be cut into pieces with ``--jobs 2``."""


CASES = (
    Case("ETMv4", "bugfix-exact-match", 1, split=True),
    Case("ETMv3+PTM", "TC2", 32, several_ids=True),
    Case("PTM", "Snowball", 128),
    Case("STM", "stm_only", 32),
    Case("ITM", "itm_only_csformat", 3641),
)


@dataclass
class Timings:
    """Wall and CPU seconds of each run of one contender."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)


def corpus_dir(given: str | None) -> Path:
    """The corpus folder: ``--corpus``, ``$CSTRACE_CORPUS`` or ``../shared/corpus``."""
    for c in (given, os.environ.get("CSTRACE_CORPUS"), str(HERE.parents[1] / "shared" / "corpus")):
        if c and (Path(c) / "snapshots").is_dir():
            return Path(c)
    raise SystemExit("corpus not found: give --corpus or set CSTRACE_CORPUS")


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its children) of a command; output discarded."""
    c0 = _child_cpu()
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=_ENV)
    return time.perf_counter() - t0, _child_cpu() - c0


def build_harness(folder: Path) -> tuple[Path | None, str]:
    """Compile ``ocsd_elements.c``; (binary, "") or (None, why not)."""
    if shutil.which("gcc") is None:
        return None, "gcc not found"
    if not Path("/usr/include/opencsd/c_api/opencsd_c_api.h").is_file():
        return None, "OpenCSD headers not found (apt-get install libopencsd-dev)"
    out = folder / "ocsd_elements"
    got = subprocess.run(
        [
            "gcc",
            "-O2",
            "-o",
            str(out),
            str(HERE / "ocsd_elements.c"),
            "-lopencsd_c_api",
            "-lopencsd",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if got.returncode:
        return None, f"gcc failed: {got.stderr.strip().splitlines()[-1:]}"
    return out, ""


def _arch(protocol: str, core: str) -> tuple[int, int]:
    """OpenCSD's architecture version and core profile for a source."""
    arch = 0x0800 if protocol in ("etmv4", "ete") else 0x0700  # ARCH_V8, ARCH_V7
    profile = 3  # profile_CortexA
    if core.startswith("Cortex-M"):
        profile = 1
    elif core.startswith("Cortex-R"):
        profile = 2
    return arch, profile


def harness_spec(snapshot: Path, folder: Path) -> tuple[Path, list[str]]:
    """The spec file of ``ocsd_elements`` for ``snapshot``'s first buffer, and the sources left
    out (protocols the C API build cannot configure here)."""
    import cstrace

    trace = cstrace.open_trace(snapshot)
    buffer = trace.buffers[0]
    data_path = folder / "trace.bin"
    data_path.write_bytes(buffer.read())
    fmt = {"coresight": "frame", "dstream_coresight": "fsync", "tpiu": "hsync"}.get(
        buffer.format, "single"
    )
    lines = [f"trace {data_path}", f"format {fmt}"]
    skipped = []
    for s in trace.sources_for(buffer):
        r = dict(s.registers)
        arch, prof = _arch(s.protocol, s.core)
        if s.protocol == "etmv4":
            names = ["TRCIDR0", "TRCIDR1", "TRCIDR2", "TRCIDR8", "TRCIDR9", "TRCIDR10"]
            names += ["TRCIDR11", "TRCIDR12", "TRCIDR13", "TRCCONFIGR", "TRCTRACEIDR"]
            values = [r.get(n, 0) for n in names]
            lines.append("etmv4 " + " ".join(hex(v) for v in [*values, arch, prof]))
        elif s.protocol in ("etmv3", "ptm"):
            values = [r.get(n, 0) for n in ("ETMIDR", "ETMCR", "ETMCCER", "ETMTRACEIDR")]
            lines.append(f"{s.protocol} " + " ".join(hex(v) for v in [*values, arch, prof]))
        elif s.protocol == "stm":
            # The reference's defaults for registers a snapshot leaves out.
            values = [r.get("STMTCSR", 0), r.get("STMSPFEAT3R", 0x10000)]
            values += [r.get("STMDEVID", 0xFF), r.get("STMSPFEAT1R", 0), r.get("STMHEMASTR", 0)]
            lines.append("stm " + " ".join(hex(v) for v in values))
        else:
            skipped.append(f"{s.name} ({s.protocol})")
    seen = set()
    for n, d in enumerate(trace.dumps):
        key = (d.address, d.file.name, d.offset, d.length)
        if key in seen:
            continue
        seen.add(key)
        data = d.file.read(d.offset, d.length)
        path = folder / f"dump{n}.bin"
        path.write_bytes(data)
        lines.append(f"mem {d.address:#x} {path}")
    spec = folder / "spec.txt"
    spec.write_text("\n".join(lines) + "\n")
    return spec, skipped


def _fmt(values: list[float]) -> str:
    return f"{min(values):7.3f} {statistics.median(values):7.3f}"


def bench_case(
    case: Case, corpus: Path, harness: Path | None, why: str, repeat: int, work: Path
) -> None:
    """Run and print one case."""
    src = corpus / "snapshots" / case.snapshot
    if not src.is_dir():
        print(f"\n## {case.label}: {case.snapshot} not in the corpus, skipped")
        return
    snap = repeated_snapshot(src, case.times, work) if case.times > 1 else src
    folder = work / f"{case.snapshot}-spec"
    folder.mkdir()
    size = sum(p.stat().st_size for p in snap.glob("*.bin") if "dump" not in p.name)
    python = sys.executable
    out = work / "out"
    cs = [python, "-m", "cstrace.cli", "decode", str(snap)]
    # --before-sync wait: as the reference, ITM and STM wait for synchronisation (the
    # default for the listing; the element formats decode what comes before it).
    wait = ["--before-sync", "wait"]
    contenders: dict[str, list[str]] = {
        "cstrace elements (null, jobs 1)": [*cs, "--format", "null", "--jobs", "1", *wait],
        "cstrace listing (ocsd -o FILE, jobs 1)": [
            *cs,
            "--format",
            "ocsd",
            "--jobs",
            "1",
            "-o",
            str(out),
        ],
    }
    if case.several_ids or case.split:
        contenders["cstrace elements (null, jobs 2)"] = [
            *cs,
            "--format",
            "null",
            "--jobs",
            "2",
            *wait,
        ]
    if case.split:
        contenders["cstrace listing (ocsd -o FILE, jobs 2)"] = [
            *cs,
            "--format",
            "ocsd",
            "--jobs",
            "2",
            "-o",
            str(out),
        ]
    everything = "cstrace elements (null, before sync decoded)"
    if case.label in ("STM", "ITM"):
        # Waiting for sync, both decoders stop early in the repeated capture; for MB/s,
        # decode it all (what the element formats do by default).
        contenders[everything] = [*cs, "--format", "null", "--jobs", "1"]
    lister = shutil.which("trc_pkt_lister")
    ref_elements = None
    note = ""
    if case.label == "ITM":
        note = "the installed OpenCSD has no ITM decoder: no reference figures"
    elif harness is not None:
        spec, skipped = harness_spec(snap, folder)
        ref_elements = "reference elements (C API harness)"
        contenders[ref_elements] = [str(harness), str(spec)]
        if skipped:
            note = "harness leaves out " + ", ".join(skipped)
    elif lister is not None:
        ref_elements = "reference elements (lister -decode_only to /dev/null)"
        contenders[ref_elements] = [
            lister,
            "-ss_dir",
            str(snap),
            "-decode_only",
            "-no_time_print",
            "-logstdout",
        ]
        note = f"no C harness ({why}): the lister's closest mode stands in"
    ref_listing = None
    if lister is not None and case.label != "ITM":
        ref_listing = "reference listing (-logfilename FILE)"
        contenders[ref_listing] = [
            lister,
            "-ss_dir",
            str(snap),
            "-decode",
            "-no_time_print",
            "-logfilename",
            str(work / "ref.ppl"),
        ]
    results = {name: Timings() for name in contenders}
    for _ in range(repeat):
        for name, cmd in contenders.items():
            results[name].add(*timed(cmd))
    title = f"{case.label}: {case.snapshot} x{case.times} ({size / 1e6:.2f} MB of capture)"
    print(f"\n## {title}")
    if note:
        print(f"   note: {note}")
    print(f"   {'':44} {'wall min  median':>16}   {'CPU min  median':>16}")
    for name, t in results.items():
        print(f"   {name:44} {_fmt(t.wall)}   {_fmt(t.cpu)}")
    null = results["cstrace elements (null, jobs 1)"]
    rate = results.get(everything, null)
    print(
        f"   cstrace elements: {size / 1e6 / min(rate.wall):.2f} MB/s wall, "
        f"{size / 1e6 / min(rate.cpu):.2f} MB/s CPU"
    )
    listing = results["cstrace listing (ocsd -o FILE, jobs 1)"]
    if ref_elements is not None:
        ref = results[ref_elements]
        print(
            f"   ratio elements cstrace/reference: {min(null.wall) / min(ref.wall):.2f} wall, "
            f"{min(null.cpu) / min(ref.cpu):.2f} CPU"
        )
    if ref_listing is not None:
        ref = results[ref_listing]
        print(
            f"   ratio listing cstrace/reference:  {min(listing.wall) / min(ref.wall):.2f} wall, "
            f"{min(listing.cpu) / min(ref.cpu):.2f} CPU"
        )
    if case.several_ids or case.split:
        two = results["cstrace elements (null, jobs 2)"]
        how = "one busy stream, which null does not cut" if case.split else "trace IDs"
        print(
            f"   speed-up --jobs 2 over --jobs 1:   {min(null.wall) / min(two.wall):.2f} wall "
            f"(CPU {min(two.cpu):.3f} s against {min(null.cpu):.3f} s; {how})"
        )
    if case.split:
        two = results["cstrace listing (ocsd -o FILE, jobs 2)"]
        print(
            f"   listing --jobs 2 over --jobs 1:    {min(listing.wall) / min(two.wall):.2f} wall "
            f"(CPU {min(two.cpu):.3f} s against {min(listing.cpu):.3f} s; one stream cut in two)"
        )


def main() -> None:
    """Run the cases asked for and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds of alternating runs")
    parser.add_argument("--case", action="append", choices=[c.label for c in CASES])
    parser.add_argument("--corpus", help="the corpus folder")
    args = parser.parse_args()
    corpus = corpus_dir(args.corpus)
    with tempfile.TemporaryDirectory(prefix="cstrace-bench-") as tmp:
        work = Path(tmp)
        harness, why = build_harness(work)
        print(
            f"# bench_elements: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
            f"{args.repeat} alternating rounds; ratios are of minima"
        )
        if harness is None:
            print(f"# C harness not built: {why}")
        for case in CASES:
            if args.case and case.label not in args.case:
                continue
            bench_case(case, corpus, harness, why, args.repeat, work)
        print(f"\n# load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
