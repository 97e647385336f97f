"""cstrace against OpenCSD 1.8.0, every protocol, in the same run: the table of issue 29.

For each case (a snapshot of the reference corpus, tiled until the reference
needs about a second for its element decode), this runs whole processes,
process start included on both sides, one after another in rounds (every
contender once per round, so that all of them see the same machine load), and
prints user+sys CPU and wall seconds (minimum and median over the rounds) and
the ratios of the minima, cstrace over the reference (below 1: cstrace is
faster):

- **elements**: ``cstrace decode SNAP --format null --jobs 1 --before-sync
  wait`` against ``trc_pkt_lister -ss_dir SNAP -decode_only -no_time_print
  -profile -logfilename FILE`` (the reference decodes every element and, muted
  by ``-profile``, formats none). ``--before-sync wait``: the reference waits
  for a synchronisation packet before it decodes STM and ITM; cstrace's element
  formats otherwise decode what comes before it too. The table's checks show it:
  the element count in cstrace's summary equals the reference's.
- **listing**: ``cstrace decode SNAP --format ocsd --jobs 1 -o FILE`` against
  ``trc_pkt_lister -ss_dir SNAP -decode -no_time_print -logfilename FILE``.
- **jobs** (ETMv4 and PTM, one busy trace stream each): ``--jobs 2`` against
  ``--jobs 1``, by wall time, for the listing (``--format ocsd -o FILE``; the
  two files are compared byte for byte) and for the elements (``--format null``;
  the summaries on stderr are compared). The element decode cuts only streams of
  4 MiB or more, so it is measured on the longer tiles of the ``x8`` and
  ``x8192`` cases too (elements only: their listings would take minutes).

The targets of issue 29 are marked met or not met: elements at most 0.5x the
reference and the listing at most 0.8x (by CPU time, the steadier figure on a
shared machine), ``--jobs 2`` at least 1.7x faster than ``--jobs 1`` (by wall
time).

Cases (tile counts are multiplied by ``--scale``, at least one copy):

| case | snapshot | tiled |
|---|---|---|
| ETMv4 | ``bugfix-exact-match`` (1 MiB, one busy stream of six) | 1x |
| ETE | ``tme_test`` (raw ETE, 14 KiB) | 72x |
| PTM | ``Snowball`` (8 KiB ETB) | 512x |
| PTM-1 | ``Snowball``'s trace ID 0x10 only (3 KiB between A-syncs) | 1024x |
| ETMv3+PTM | ``TC2`` (32 KiB ETB: three ETMv3, one PTM, ITM) | 160x |
| ETMv4 x8 | ``bugfix-exact-match``, ``--jobs`` of the elements only | 8x |
| PTM-1 x8192 | ``Snowball``'s trace ID 0x10, ``--jobs`` of the elements only | 8192x |
| STM | ``stm_only`` (32 KiB ETB; 20 KiB repeated) | 1500x |
| ITM | ``itm_only_csformat`` (288 bytes; 142 repeated) | 300000x |

Each takes the reference about a second of CPU for its elements (on the 2-CPU
machine of the project), so that cstrace's process start (about 0.3 s) is not
most of what is compared. While cstrace is many times slower than the
reference on a protocol, its case takes minutes (the whole table with
``--repeat 3``: about an hour at the time of issue 29, most of it ITM and
STM); ``--case`` and ``--scale`` make shorter runs.

Tiling: a formatted buffer of program-flow trace is repeated as it is (frames
are self-contained and the decoders resynchronise after each copy, as the
reference does). STM and ITM are repeated between two synchronisation packets
(the trace stream is taken out of its frames, the part from its first ASYNC to
its last is repeated, and the result framed again): the reference stops at the
first bad packet of a software-trace stream, which the seam of a plain repeat
makes. The checks table shows how many bytes the reference processed, so that
a case where it stopped early is seen.

Which cstrace is measured:

- by default the ``cstrace`` command of the Python running this script (an
  editable checkout's install: the header says whether it runs compiled);
- ``--wheel``: a wheel built from this checkout (``pip wheel --no-deps``, which
  compiles the hot modules with Cython), installed into a temporary virtual
  environment that finds the dependencies in this Python's site-packages
  (a ``.pth`` file: nothing is downloaded), i.e. installed as users install it;
- ``--wheel-file WHEEL``: the same with a wheel already built;
- ``--cstrace COMMAND``: an installed ``cstrace`` command.

The reference is OpenCSD 1.8.0's ``trc_pkt_lister`` from ``--opencsd DIR``
(default ``$CSTRACE_OPENCSD`` or ``../shared/opencsd-1.8.0`` beside the
checkout); it runs in a scratch folder and its exit status is ignored (this
build crashes in its statistics printout after the decode). Nothing here
asserts a time.

    python benchmarks/bench_elements.py --wheel --repeat 3
    python benchmarks/bench_elements.py --case ITM --case STM --scale 0.1 --repeat 1
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_memory import copy_writable, repeated_snapshot  # noqa: E402

# This script imports cstrace only to tile captures: its speed here does not matter.
warnings.filterwarnings("ignore", message="cstrace runs in pure Python", category=RuntimeWarning)

TARGETS = {"elements": 0.5, "listing": 0.8}
"""Issue 29: cstrace's CPU time over the reference's, at most."""
JOBS_TARGET = 1.7
"""Issue 29: ``--jobs 1`` wall time over ``--jobs 2``, at least."""


@dataclass(frozen=True)
class Case:
    """One benchmark input: a corpus snapshot tiled ``times`` times."""

    label: str
    snapshot: str
    times: int
    sync: bytes = b""
    """A regular expression for the end of a synchronisation packet: tile the trace stream
    between two of them (STM, ITM); empty: repeat the whole buffer."""
    keep: int = 0
    """Bytes of the match that the next copy starts with (a whole synchronisation packet)."""
    jobs: bool = False
    """One busy stream: measure ``--jobs 2`` against ``--jobs 1``."""
    trace_id: int | None = None
    """Tile only this trace ID's stream (between synchronisation packets: ``sync``), the
    others left out; None: the snapshot must have one trace ID with data."""
    jobs_only: bool = False
    """Measure only ``--jobs 2`` against ``--jobs 1`` for the element decode (``jobs``
    must be set): a stream long enough for pieces to pay, whose listing would take
    minutes."""


CASES = (
    Case("ETMv4", "bugfix-exact-match", 1, jobs=True),
    Case("ETE", "tme_test", 72),
    Case("PTM", "Snowball", 512),
    # One busy PTM stream: Snowball's trace ID 0x10, tiled between A-syncs (five or more
    # 0x00 bytes, then 0x80), the other stream left out.
    Case("PTM-1", "Snowball", 1024, sync=rb"\x00{5,}\x80", keep=6, jobs=True, trace_id=0x10),
    Case("ETMv3+PTM", "TC2", 160),
    # The same busy streams, longer: the element decode cuts a stream of 4 MiB or more
    # (cstrace.cli._SPLIT_MIN_ELEMENTS), the listing one of 256 KiB or more.
    Case("ETMv4 x8", "bugfix-exact-match", 8, jobs=True, jobs_only=True),
    Case(
        "PTM-1 x8192",
        "Snowball",
        8192,
        sync=rb"\x00{5,}\x80",
        keep=6,
        jobs=True,
        trace_id=0x10,
        jobs_only=True,
    ),
    # STM ASYNC: 21 F nibbles then a 0 nibble; one that ends on a byte boundary ends in
    # ten 0xFF bytes and 0x0F (low nibble first).
    Case("STM", "stm_only", 1500, sync=rb"\xff{10,}\x0f", keep=11),
    # ITM synchronisation: at least 47 zero bits then a one: five 0x00 bytes and 0x80.
    Case("ITM", "itm_only_csformat", 300000, sync=rb"\x00{5,}\x80", keep=6),
)


# ----------------------------------------------------------------------------- inputs


def corpus_dir(given: str | None) -> Path:
    """The corpus folder: ``--corpus``, ``$CSTRACE_CORPUS`` or ``../shared/corpus``."""
    for c in (given, os.environ.get("CSTRACE_CORPUS"), str(ROOT.parent / "shared" / "corpus")):
        if c and (Path(c) / "snapshots").is_dir():
            return Path(c)
    raise SystemExit("error: corpus not found: give --corpus DIR or set CSTRACE_CORPUS")


def opencsd_dir(given: str | None) -> Path:
    """The folder of OpenCSD 1.8.0's lister: ``--opencsd``, ``$CSTRACE_OPENCSD`` or
    ``../shared/opencsd-1.8.0``."""
    default = ROOT.parent / "shared" / "opencsd-1.8.0"
    for c in (given, os.environ.get("CSTRACE_OPENCSD"), str(default)):
        if c and (Path(c) / "trc_pkt_lister").is_file():
            return Path(c)
    raise SystemExit(
        "error: OpenCSD 1.8.0's trc_pkt_lister not found: give --opencsd DIR or set "
        "CSTRACE_OPENCSD (the folder holding trc_pkt_lister and libopencsd.so*)"
    )


def library_folder(opencsd: Path, dest: Path) -> Path:
    """A folder of links to the lister's shared libraries, for ``LD_LIBRARY_PATH``.

    A copy of the folder may hold a library's version link as a small text file naming
    its target (``libopencsd.so.1`` holding ``libopencsd.so.1.8.0``): the link is made here.
    """
    lib = dest / "opencsd-lib"
    lib.mkdir()
    for p in sorted(opencsd.glob("lib*.so*")):
        target = p.resolve()
        if p.is_file() and not p.is_symlink() and p.stat().st_size < 256:
            named = p.read_bytes().strip().decode("utf-8", "replace")
            if "/" not in named and (opencsd / named).is_file():
                target = (opencsd / named).resolve()
        (lib / p.name).symlink_to(target)
    return lib


def buffers_of(snapshot: Path) -> list[tuple[str, str]]:
    """(file, format) of each trace buffer in ``trace.ini``, in its order."""
    ini = configparser.ConfigParser(strict=False)
    snap = configparser.ConfigParser(strict=False)
    snap.read(snapshot / "snapshot.ini")
    name = snap.get("trace", "metadata", fallback="trace.ini")
    ini.read(snapshot / name)
    out = []
    for section in ini.get("trace_buffers", "buffers", fallback="").split(","):
        section = section.strip()
        if section and ini.has_section(section):
            out.append((ini.get(section, "file"), ini.get(section, "format", fallback="")))
    return out


def tiled_between_syncs(snapshot: Path, case: Case, times: int, dest: Path) -> Path:
    """A copy of ``snapshot`` whose one trace stream (``case.trace_id``'s, the others
    left out, when it is given) repeats, ``times`` times, the part from its first
    synchronisation packet to its last (framed again as it was)."""
    from cstrace.capture import demux
    from cstrace.capture.encode import format_frames

    (name, fmt), *others = buffers_of(snapshot)
    if others or fmt != "coresight":
        raise SystemExit(f"error: {snapshot}: expected one coresight-format trace buffer")
    streams = demux((snapshot / name).read_bytes(), fmt).streams
    busy = [
        (tid, bytes(s.data))
        for tid, s in streams.items()
        if tid != 0 and len(s.data) and case.trace_id in (None, tid)
    ]
    if len(busy) != 1:
        raise SystemExit(f"error: {snapshot}: expected one trace ID with data, got {len(busy)}")
    tid, data = busy[0]
    cuts = [m.end() - case.keep for m in re.finditer(case.sync, data)]
    if len(cuts) < 2:
        raise SystemExit(f"error: {snapshot}: fewer than two synchronisation packets to tile")
    first, last = cuts[0], cuts[-1]
    # Each part framed on its own: the last frame of a part is padded with data for the
    # null trace ID 0, which the deformatter drops, so the stream runs on unbroken.
    middle = format_frames([(tid, data[first:last])])
    out = dest / f"{snapshot.name}-x{times}"
    copy_writable(snapshot, out)
    (out / name).unlink()
    with open(out / name, "wb") as f:
        f.write(format_frames([(tid, data[:last])]))
        for _ in range(times - 1):
            f.write(middle)
        f.write(format_frames([(tid, data[last:])]))
    return out


def tiled(case: Case, corpus: Path, times: int, work: Path) -> Path:
    """The case's snapshot, tiled ``times`` times (the corpus folder itself for 1x)."""
    src = corpus / "snapshots" / case.snapshot
    if times == 1:
        return src
    if case.sync:
        return tiled_between_syncs(src, case, times, work)
    return repeated_snapshot(src, times, work)


# ----------------------------------------------------------------------------- cstrace


def _python_of(command: str) -> str | None:
    """The interpreter named in a console script's ``#!`` line."""
    try:
        with open(command, "rb") as f:
            first = f.readline().decode("utf-8", "replace")
    except OSError:
        return None
    if first.startswith("#!"):
        python = first[2:].strip().split()[0]
        if os.path.isfile(python):
            return python
    return None


_PROBE = """
import json, cstrace
try:
    import cstrace._native as n
    m = n.compiled_modules()
except Exception:
    m = {}
print(json.dumps({"file": cstrace.__file__, "compiled": sum(m.values()), "hot": len(m)}))
"""


def probe(python: str | None, env: dict[str, str]) -> dict[str, Any]:
    """Where the measured cstrace is installed and how many of its hot modules run compiled."""
    if python is None:
        return {"file": "?", "compiled": None, "hot": None}
    got = subprocess.run(
        [python, "-c", _PROBE], capture_output=True, text=True, env=env, check=False
    )
    if got.returncode:
        raise SystemExit(f"error: {python} cannot import cstrace: {got.stderr.strip()[-300:]}")
    info: dict[str, Any] = json.loads(got.stdout.strip().splitlines()[-1])
    return info


def build_wheel(dest: Path) -> Path:
    """A wheel of this checkout (``pip wheel --no-deps``; compiles the hot modules)."""
    out = dest / "wheel"
    print(f"# building a wheel of {ROOT} (compiles the hot modules: a few minutes)", flush=True)
    got = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(out.glob("cstrace-*.whl"))
    if got.returncode or not wheels:
        tail = (got.stderr or got.stdout).strip().splitlines()[-5:]
        raise SystemExit("error: pip wheel failed:\n" + "\n".join(tail))
    return wheels[-1]


def install_wheel(wheel: Path, dest: Path) -> str:
    """Install ``wheel`` into a new virtual environment in ``dest``; its ``cstrace`` command.

    The environment gets no copies of the dependencies: a ``.pth`` file adds this Python's
    site-packages after its own, so the wheel's cstrace is found first.
    """
    venv = dest / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    Path(purelib, "_cstrace_bench_deps.pth").write_text("\n".join(ours) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    got = subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if got.returncode:
        raise SystemExit(f"error: installing {wheel.name} failed: {got.stderr.strip()[-500:]}")
    return str(venv / "bin" / "cstrace")


# ----------------------------------------------------------------------------- timing


@dataclass
class Timings:
    """Wall and CPU (user+sys) seconds of each run of one contender, and its last status."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    status: int = 0
    error: str = ""

    def summary(self) -> dict[str, float]:
        """Minimum and median of wall and CPU seconds."""
        return {
            "cpu_min": min(self.cpu),
            "cpu_median": statistics.median(self.cpu),
            "wall_min": min(self.wall),
            "wall_median": statistics.median(self.wall),
        }


@dataclass
class Contender:
    """One command of a case; ``outputs`` are removed before each run (the lister appends)."""

    name: str
    cmd: list[str]
    outputs: list[Path]
    reference: bool = False
    stderr: Path | None = None
    times: Timings = field(default_factory=Timings)


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_once(c: Contender, env: dict[str, str], cwd: Path) -> None:
    """Run ``c`` once and add its wall and CPU seconds (the process and its children)."""
    for p in c.outputs:
        p.unlink(missing_ok=True)
    err = open(c.stderr, "wb") if c.stderr else subprocess.DEVNULL  # noqa: SIM115
    try:
        c0 = _children_cpu()
        t0 = time.perf_counter()
        status = subprocess.run(
            c.cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=cwd, check=False
        ).returncode
        wall = time.perf_counter() - t0
        cpu = _children_cpu() - c0
    finally:
        if c.stderr:
            err.close()  # type: ignore[union-attr]
    c.times.wall.append(wall)
    c.times.cpu.append(cpu)
    if not c.reference and status and not c.times.status:
        c.times.status = status
        if c.stderr and c.stderr.is_file():
            lines = c.stderr.read_text("utf-8", "replace").strip().splitlines()
            c.times.error = lines[-1] if lines else ""


class LoadSampler:
    """The 1-minute load average, sampled every few seconds while the benchmark runs."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[float] = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._every = every
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> str:
        """Stop sampling; the samples' minimum, median and maximum as text."""
        self._stop.set()
        self.samples.append(os.getloadavg()[0])
        s = self.samples
        return f"min {min(s):.2f}, median {statistics.median(s):.2f}, max {max(s):.2f}"


# ----------------------------------------------------------------------------- checks


_ELEMENT = b"OCSD_GEN_TRC_ELEM_"


def _elements_in(path: Path, block: int = 1 << 24) -> int | None:
    """Element lines in a listing (read in blocks: a listing can be gigabytes)."""
    if not path.is_file():
        return None
    count = 0
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(block):
            data = tail + chunk
            count += data.count(_ELEMENT)
            # Keep what could begin a word cut by the block's end, and nothing counted.
            last = data.rfind(_ELEMENT)
            counted = last + len(_ELEMENT) if last >= 0 else 0
            cut = max(0, len(data) - len(_ELEMENT) + 1, counted)
            tail = data[cut:]
    return count


def _reference_log(path: Path) -> tuple[int | None, int | None, str]:
    """Bytes the lister says it processed, its element lines and its library version."""
    if not path.is_file():
        return None, None, "?"
    with open(path, "rb") as f:
        head = f.read(1 << 16)
        f.seek(max(0, path.stat().st_size - (1 << 16)))
        end = f.read()
    done = re.findall(rb"processed (\d+) bytes", end)
    version = re.search(rb"Library Version : ([0-9.]+)", head)
    return (
        sum(int(d) for d in done) if done else None,
        _elements_in(path),
        version.group(1).decode() if version else "?",
    )


def _summary_elements(path: Path | None) -> int | None:
    """The elements counted in cstrace's summary on stderr (``N elements`` per trace ID)."""
    if path is None or not path.is_file():
        return None
    found = re.findall(r"(\d+) elements", path.read_text("utf-8", "replace"))
    return sum(int(n) for n in found) if found else None


def _same(a: Path | None, b: Path | None) -> bool | None:
    """Whether two files have the same bytes (None when either is missing)."""
    if a is None or b is None or not a.is_file() or not b.is_file():
        return None
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


# ----------------------------------------------------------------------------- one case


def bench_case(
    case: Case,
    snap: Path,
    cstrace: list[str],
    lister: Path,
    lib: Path,
    repeat: int,
    work: Path,
    env: dict[str, str],
    keep: bool = False,
) -> dict[str, Any]:
    """Run one case's contenders in alternating rounds; its measures and checks. The
    outputs (listings of up to a few gigabytes) are removed unless ``keep``."""
    out = work / f"out-{case.label}"
    out.mkdir()
    scratch = work / "scratch"
    scratch.mkdir(exist_ok=True)
    buffers = buffers_of(snap)
    size = sum((snap / f).stat().st_size for f, _ in buffers[:1])
    cs = [*cstrace, "decode", str(snap)]
    ref = [str(lister), "-ss_dir", str(snap), "-no_time_print"]

    def path(name: str) -> Path:
        return out / name

    def cstrace_runs(jobs: int) -> tuple[Contender, Contender]:
        """cstrace's element decode and listing with ``--jobs N``."""
        suffix = "" if jobs == 1 else f"_j{jobs}"
        listing = path(f"cs-j{jobs}.ppl")
        return (
            Contender(
                f"cs_elements{suffix}",
                [*cs, "--format", "null", "--jobs", str(jobs), "--before-sync", "wait"],
                [],
                stderr=path(f"cs-null-j{jobs}.err"),
            ),
            Contender(
                f"cs_listing{suffix}",
                [*cs, "--format", "ocsd", "--jobs", str(jobs), "-o", str(listing)],
                [listing],
                stderr=path(f"cs-ocsd-j{jobs}.err"),
            ),
        )

    cs_elements, cs_listing = cstrace_runs(1)
    contenders = [
        cs_elements,
        Contender(
            "ref_elements",
            [*ref, "-decode_only", "-profile", "-logfilename", str(path("ref-elements.log"))],
            [path("ref-elements.log")],
            reference=True,
        ),
        cs_listing,
        Contender(
            "ref_listing",
            [*ref, "-decode", "-logfilename", str(path("ref.ppl"))],
            [path("ref.ppl")],
            reference=True,
        ),
    ]
    if case.jobs:
        contenders += cstrace_runs(2)
    if case.jobs_only:
        contenders = [c for c in contenders if c.name.startswith("cs_elements")]
    load0 = os.getloadavg()[0]
    ref_env = {**env, "LD_LIBRARY_PATH": str(lib)}
    for _ in range(repeat):
        for c in contenders:
            run_once(c, ref_env if c.reference else env, scratch)
    by = {c.name: c for c in contenders}

    processed, _, version = _reference_log(path("ref-elements.log"))
    processed_listing, ref_listed, _ = _reference_log(path("ref.ppl"))
    cs_listed = None if case.jobs_only else _elements_in(path("cs-j1.ppl"))
    result: dict[str, Any] = {
        "case": case.label,
        "snapshot": case.snapshot,
        "times": case.times,
        "bytes": size,
        "load_before": load0,
        "load_after": os.getloadavg()[0],
        "reference_version": version,
        "checks": {
            "reference_processed": processed,
            "reference_processed_listing": processed_listing,
            "reference_elements": ref_listed,
            "cstrace_listing_elements": cs_listed,
            "cstrace_null_elements": _summary_elements(by["cs_elements"].stderr),
        },
        "measures": [],
        "jobs": [],
    }
    for measure in () if case.jobs_only else ("elements", "listing"):
        mine, theirs = by[f"cs_{measure}"].times, by[f"ref_{measure}"].times
        ratio_cpu = min(mine.cpu) / max(min(theirs.cpu), 1e-9)
        ratio_wall = min(mine.wall) / max(min(theirs.wall), 1e-9)
        result["measures"].append(
            {
                "measure": measure,
                "cstrace": mine.summary(),
                "reference": theirs.summary(),
                "ratio_cpu": ratio_cpu,
                "ratio_wall": ratio_wall,
                "target": TARGETS[measure],
                "met": not mine.status and ratio_cpu <= TARGETS[measure],
                "error": f"exit {mine.status}: {mine.error}" if mine.status else "",
            }
        )
    if case.jobs:
        for measure, one, two, same in (
            ("elements", "cs_elements", "cs_elements_j2", ("cs-null-j1.err", "cs-null-j2.err")),
            ("listing", "cs_listing", "cs_listing_j2", ("cs-j1.ppl", "cs-j2.ppl")),
        )[: 1 if case.jobs_only else 2]:
            t1, t2 = by[one].times, by[two].times
            speedup = min(t1.wall) / max(min(t2.wall), 1e-9)
            identical = _same(path(same[0]), path(same[1]))
            failed = t1.status or t2.status
            result["jobs"].append(
                {
                    "measure": measure,
                    "jobs1": t1.summary(),
                    "jobs2": t2.summary(),
                    "speedup_wall": speedup,
                    "identical": identical,
                    "target": JOBS_TARGET,
                    "met": bool(not failed and identical and speedup >= JOBS_TARGET),
                    "error": f"exit {t2.status}: {t2.error}" if t2.status else "",
                }
            )
    if not keep:
        shutil.rmtree(out)
    return result


# ----------------------------------------------------------------------------- table


def _mm(s: dict[str, float], kind: str) -> str:
    return f"{s[kind + '_min']:.2f} / {s[kind + '_median']:.2f}"


def print_tables(results: Sequence[dict[str, Any]]) -> None:
    """The results as Markdown tables: ratios to the reference, --jobs, checks."""
    print("\n## cstrace / OpenCSD 1.8.0 (seconds: min / median; ratios of minima)\n")
    print(
        "| case | capture | measure | cstrace CPU | reference CPU | cstrace wall "
        "| reference wall | ratio CPU | ratio wall | target | met |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        capture = f"{r['snapshot']} x{r['times']} ({r['bytes'] / 1e6:.2f} MB)"
        for m in r["measures"]:
            met = "met" if m["met"] else "not met"
            if m["error"]:
                met = f"not met (cstrace failed, {m['error']})"
            print(
                f"| {r['case']} | {capture} | {m['measure']} | {_mm(m['cstrace'], 'cpu')} "
                f"| {_mm(m['reference'], 'cpu')} | {_mm(m['cstrace'], 'wall')} "
                f"| {_mm(m['reference'], 'wall')} | {m['ratio_cpu']:.2f} | {m['ratio_wall']:.2f} "
                f"| <= {m['target']} | {met} |"
            )
    jobs = [(r, j) for r in results for j in r["jobs"]]
    if jobs:
        print("\n## --jobs 2 against --jobs 1 (wall seconds: min / median)\n")
        print(
            "| case | measure | jobs 1 wall | jobs 2 wall | jobs 1 CPU | jobs 2 CPU "
            "| speed-up | output identical | target | met |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r, j in jobs:
            same = {True: "yes", False: "NO", None: "?"}[j["identical"]]
            met = "met" if j["met"] else "not met"
            if j["error"]:
                met = f"not met (cstrace failed, {j['error']})"
            print(
                f"| {r['case']} | {j['measure']} | {_mm(j['jobs1'], 'wall')} "
                f"| {_mm(j['jobs2'], 'wall')} | {_mm(j['jobs1'], 'cpu')} "
                f"| {_mm(j['jobs2'], 'cpu')} | {j['speedup_wall']:.2f} | {same} "
                f"| >= {j['target']} | {met} |"
            )
    print("\n## Checks (same work on both sides)\n")
    print(
        "| case | buffer bytes | reference processed (elements / listing) "
        "| elements: reference listing | cstrace listing | cstrace null summary "
        "| load before / after |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        c = r["checks"]

        def num(v: int | None) -> str:
            return "?" if v is None else str(v)

        processed = f"{num(c['reference_processed'])} / {num(c['reference_processed_listing'])}"
        if c["reference_processed"] is not None and c["reference_processed"] < r["bytes"]:
            processed += " (stopped early)"
        print(
            f"| {r['case']} | {r['bytes']} | {processed} | {num(c['reference_elements'])} "
            f"| {num(c['cstrace_listing_elements'])} | {num(c['cstrace_null_elements'])} "
            f"| {r['load_before']:.2f} / {r['load_after']:.2f} |"
        )
    print(
        "\ncstrace's null summary also counts its own diagnostic elements (a wait for "
        "synchronisation, say), which neither listing shows."
    )


# ----------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        epilog="\n\n".join(doc.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="rounds of alternating runs (default 5)"
    )
    parser.add_argument(
        "--case",
        action="append",
        type=str.lower,
        choices=[c.label.lower() for c in CASES],
        metavar="CASE",
        help="run only this case (repeatable): " + ", ".join(c.label for c in CASES),
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every tile count (at least one copy); e.g. 0.01 for a quick try",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--wheel",
        action="store_true",
        help="measure a wheel built from this checkout, installed in a temporary venv",
    )
    which.add_argument("--wheel-file", type=Path, metavar="WHEEL", help="measure this wheel")
    which.add_argument(
        "--cstrace",
        metavar="COMMAND",
        help="measure this installed cstrace command (default: the one beside this Python)",
    )
    parser.add_argument("--corpus", help="the corpus folder (default ../shared/corpus)")
    parser.add_argument(
        "--opencsd", help="the folder of OpenCSD 1.8.0's trc_pkt_lister and libraries"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results here")
    parser.add_argument(
        "--work",
        type=Path,
        metavar="DIR",
        help="keep tiled snapshots, outputs, wheel and venv in DIR (default: a temporary "
        "folder, removed)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.scale <= 0:
        parser.error("--scale must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the cases asked for and print their tables."""
    args = parse_args(argv)
    corpus = corpus_dir(args.corpus)
    opencsd = opencsd_dir(args.opencsd)
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="bench-", dir=args.work))
        return _main(args, corpus, opencsd, work)
    with tempfile.TemporaryDirectory(prefix="cstrace-bench-") as tmp:
        return _main(args, corpus, opencsd, Path(tmp))


def _main(args: argparse.Namespace, corpus: Path, opencsd: Path, work: Path) -> int:
    env = dict(os.environ)
    # Byte code is read from (and, for a checkout, written beside) the sources, as users run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    env.pop("CSTRACE_PURE_WARNED", None)  # set by this process's own import of cstrace
    how = "the cstrace command of this Python"
    if args.wheel or args.wheel_file:
        wheel = args.wheel_file or build_wheel(work)
        command = install_wheel(wheel.resolve(), work)
        how = f"wheel {wheel.name}, installed in a temporary venv"
    elif args.cstrace:
        command = shutil.which(args.cstrace) or args.cstrace
        how = f"the installed command {command}"
    else:
        command = str(Path(sys.executable).with_name("cstrace"))
    if not os.access(command, os.X_OK):
        raise SystemExit(f"error: no cstrace command at {command}")
    info = probe(_python_of(command), env)
    mode = (
        "compiled mode unknown"
        if info["hot"] is None
        else f"{info['compiled']} of {info['hot']} hot modules compiled"
    )
    if env.get("CSTRACE_PURE", "") not in ("", "0"):
        mode += " (CSTRACE_PURE is set: pure Python)"
    lib = library_folder(opencsd, work)
    lister = opencsd / "trc_pkt_lister"
    cases = [c for c in CASES if not args.case or c.label.lower() in args.case]
    sampler = LoadSampler()
    print(f"# cstrace: {how}; {info['file']}; {mode}")
    print(f"# reference: {lister}")
    print(
        f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {args.repeat} "
        "alternating rounds of whole processes; CPU = user + sys",
        flush=True,
    )
    results = []
    for case in cases:
        times = max(1, round(case.times * args.scale))
        src = corpus / "snapshots" / case.snapshot
        if not src.is_dir():
            print(f"# {case.label}: {case.snapshot} not in the corpus, skipped", flush=True)
            continue
        snap = tiled(case, corpus, times, work)
        t0 = time.monotonic()
        # Untimed, on the untiled snapshot: byte code written, files in the page cache.
        for fmt in ("null", "ocsd"):
            subprocess.run(
                [command, "decode", str(src), "--format", fmt, "--jobs", "1"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                check=False,
            )
        r = bench_case(
            replace(case, times=times),
            snap,
            [command],
            lister,
            lib,
            args.repeat,
            work,
            env,
            keep=args.work is not None,
        )
        print(
            f"# {case.label}: {case.snapshot} x{times} done in {time.monotonic() - t0:.0f} s "
            f"(load average {r['load_after']:.2f})",
            flush=True,
        )
        results.append(r)
        if snap.parent == work and args.work is None:
            shutil.rmtree(snap)
    load = sampler.stop()
    versions = sorted({r["reference_version"] for r in results})
    print_tables(results)
    print(
        f"\n# OpenCSD library version: {', '.join(versions) or '?'}; load average (1 min) "
        f"during the run: {load}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "cstrace": {"how": how, **info},
                    "load": sampler.samples,
                    "repeat": args.repeat,
                    "results": results,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
