"""The fuzz harness: mutated inputs of every kind run through the command line, each run classified.

Input: a target (one per input kind: the trace bytes of each protocol, ``.ini``
metadata, a package ZIP, a perf.data recording, an ELF image given with
``--image``), a seed number and limits (time, memory). Output: a :class:`Run`
per mutated input, classified as

- ``clean``: exit status 0;
- ``clean error``: exit status 2 with a one-line ``cstrace: error: ...``;
- ``traceback``: anything else the command line let escape (an exception, exit 1);
- ``timeout``: not finished within the time limit;
- ``memory``: ``MemoryError`` under the memory limit, or a peak beyond it;
- ``crash``: killed by a signal (a fault in compiled code).

Each run is a fork of this process (cstrace imported once, so a run costs
milliseconds, not an interpreter start) that calls :func:`cstrace.cli.main`
with an address-space limit (``RLIMIT_AS``) and :mod:`faulthandler` armed to
print where it was and exit when the time is up; the parent kills it if even
that does not come. Seeds are small inputs made here from the project's own
encoders and examples (nothing is read from outside the repository), so the
harness is hermetic; :func:`corpus_seeds` adds real snapshots when a corpus is
at hand (the long campaign, ``tests/fuzz/campaign.py``).

Everything is decided by the seed number: a run can be made again with
:func:`make_run` and the same ``(target, seed)``.
"""

from __future__ import annotations

import faulthandler
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


class Outcome(Enum):
    """How a run ended."""

    CLEAN = "clean"
    CLEAN_ERROR = "clean error"
    TRACEBACK = "traceback"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASH = "crash"


WALL = 10
"""How many times its CPU time a run may take on the clock (a busy machine, a niced run)."""

BAD = frozenset((Outcome.TRACEBACK, Outcome.TIMEOUT, Outcome.MEMORY, Outcome.CRASH))
"""The outcomes that are bugs."""


@dataclass(frozen=True)
class Limits:
    """What a run may take."""

    seconds: float = 20.0
    """CPU time of a run (``RLIMIT_CPU``: a shared machine does not make a run look slow);
    on the clock it may take :data:`WALL` times as long (to catch a run blocked on I/O)."""
    memory: int = 3 << 30
    """Address space of the run (``RLIMIT_AS``), bytes."""
    peak: int = 1 << 30
    """A run whose resident memory peaked above this counts as ``memory`` too."""


@dataclass
class Run:
    """One mutated input and how the command line took it."""

    target: str
    seed: int
    argv: list[str]
    what: str
    """The mutation, in words."""
    outcome: Outcome = Outcome.CLEAN
    seconds: float = 0.0
    peak: int = 0
    """Peak resident memory, bytes."""
    cpu: float = 0.0
    """CPU time of the run, seconds."""
    detail: str = ""
    """The end of what the run printed on stderr (for the bad outcomes)."""

    def line(self) -> str:
        """A one-line account."""
        return (
            f"{self.target} seed {self.seed}: {self.outcome.value} in {self.seconds:.2f} s "
            f"({self.cpu:.2f} s CPU), "
            f"{self.peak >> 20} MiB ({self.what}; cstrace {' '.join(self.argv)})"
        )


# -- running -----------------------------------------------------------------------------------


def _child(argv: list[str], cwd: Path, err_path: Path, limits: Limits) -> None:
    """In the forked child: run the command line and exit (never returns)."""
    code = 1
    try:
        os.chdir(cwd)
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
        null = os.open(os.devnull, os.O_WRONLY)
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        sys.stdin = open(os.devnull)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        cpu = max(1, int(limits.seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
        # out of CPU time: say where it was (SIGXCPU), killed 2 s later; blocked: the same
        faulthandler.register(signal.SIGXCPU, file=sys.stderr)
        faulthandler.dump_traceback_later(WALL * limits.seconds, exit=True, file=sys.stderr)
        from cstrace import cli

        code = cli.main(argv)
    except SystemExit as exc:  # argparse: a usage error is exit status 2
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def classify(status: int, stderr: str, peak: int, limits: Limits) -> Outcome:
    """The outcome of a finished child from its wait status, stderr and peak memory."""
    if "Timeout (" in stderr and ("Thread 0x" in stderr or "Current thread" in stderr):
        return Outcome.TIMEOUT
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGKILL, signal.SIGXCPU):
        return Outcome.TIMEOUT
    if "MemoryError" in stderr:
        return Outcome.MEMORY
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return Outcome.TIMEOUT if sig == signal.SIGKILL else Outcome.CRASH
    if "Traceback (most recent call last)" in stderr:
        return Outcome.TRACEBACK
    if peak > limits.peak:
        return Outcome.MEMORY
    code = os.WEXITSTATUS(status)
    if code == 0:
        return Outcome.CLEAN
    if code == 2:
        errors = [x for x in stderr.splitlines() if x.startswith("cstrace: error:")]
        return Outcome.CLEAN_ERROR if errors else Outcome.TRACEBACK
    return Outcome.TRACEBACK


def run_cli(argv: list[str], cwd: Path, limits: Limits) -> tuple[Outcome, float, int, str, float]:
    """Run ``cstrace ARGV`` in a fork with the limits; (outcome, seconds, peak bytes, stderr,
    CPU seconds)."""
    fd, name = tempfile.mkstemp(prefix="stderr-", dir=cwd)
    os.close(fd)
    err_path = Path(name)
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        _child(argv, cwd, err_path, limits)
    deadline = start + WALL * limits.seconds + 10
    status = 0
    usage = None
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.005)
    seconds = time.monotonic() - start
    peak = usage.ru_maxrss * 1024 if usage is not None else 0
    cpu = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
    with open(err_path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        # the head (where an error line is) and the tail (where a traceback ends)
        f.seek(0)
        head = f.read(8192)
        f.seek(max(8192, size - 8192))
        stderr = (head + f.read()).decode("utf-8", "replace")
    err_path.unlink()
    return classify(status, stderr, peak, limits), seconds, peak, stderr, cpu


# -- mutations ---------------------------------------------------------------------------------

_INTERESTING = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x40, 0x20, 0x10, 0x08, 0x04, 0x02)
_WIDE = (
    0,
    1,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    1 << 32,
    0x7FFFFFFFFFFFFFFF,
    0x8000000000000000,
    0xFFFFFFFFFFFFFFFF,
)


def mutate_bytes(rng: random.Random, data: bytes, *, ops: int | None = None) -> tuple[bytes, str]:
    """A few random edits of ``data``: bit flips, set bytes, inserts, deletions, copies,
    runs of zeros or of one byte, little-endian integers set to edge values, truncation."""
    out = bytearray(data)
    did: list[str] = []
    for _ in range(ops if ops is not None else rng.choice((1, 1, 1, 2, 3, 5, 8))):
        n = len(out)
        k = rng.randrange(11)
        at = rng.randrange(n) if n else 0
        if k <= 2 and n:
            out[at] ^= 1 << rng.randrange(8)
            did.append(f"flip@{at}")
        elif k == 3 and n:
            out[at] = rng.choice(_INTERESTING)
            did.append(f"set@{at}")
        elif k == 4:
            count = rng.choice((1, 2, 4, 16, 64))
            out[at:at] = bytes(rng.randrange(256) for _ in range(count))
            did.append(f"insert{count}@{at}")
        elif k == 5 and n:
            count = rng.choice((1, 2, 4, 16, 64))
            del out[at : at + count]
            did.append(f"delete{count}@{at}")
        elif k == 6 and n:
            src = rng.randrange(n)
            count = rng.choice((4, 16, 64, 256))
            out[at:at] = out[src : src + count]
            did.append(f"copy{count}:{src}@{at}")
        elif k == 7:
            count = rng.choice((12, 100, 4096, 65536))
            fill = rng.choice((0x00, 0x00, 0xFF, 0x7F, rng.randrange(256)))
            out[at:at] = bytes((fill,)) * count
            did.append(f"run{count}x{fill:#x}@{at}")
        elif k == 8 and n:
            src = rng.randrange(n)
            count = rng.choice((1, 2, 3, 8))
            piece = bytes(out[src : src + count])
            times = rng.choice((100, 1000, 20000))
            out[at:at] = piece * times
            did.append(f"repeat{len(piece)}x{times}@{at}")
        elif k == 9 and n >= 8:
            width = rng.choice((2, 4, 8))
            at = rng.randrange(max(1, n - width)) & ~(width - 1)
            value = rng.choice(_WIDE) & ((1 << (8 * width)) - 1)
            out[at : at + width] = value.to_bytes(width, "little")
            did.append(f"int{width}={value:#x}@{at}")
        elif k == 10 and n:
            del out[at:]
            did.append(f"cut@{at}")
    return bytes(out[: 1 << 20]), " ".join(did) or "unchanged"


_VALUES = (
    "0x80000000",
    "0xFFFFFFFF",
    "0x8000000000000000",
    "0xFFFFFFFFFFFFFFFF",
    "0x1" + "0" * 20,
    "99999999999999999999999",
    "-1",
    "",
    "0",
    "a" * 256,
    "x" * 5000,
    "../../../../../../etc/passwd",
    "/etc/passwd",
    "/dev/zero",
    "fifo",
    "link_out",
    "..",
    ".",
    "a/../../b",
    "C:\\x\\y",
    "bogus",
    "coresight",
    "source_data",
    "tpiu",
    "dstream_coresight",
    "etm_port",
    "ETM4",
    "ETE",
    "PTM1.1",
    "ETM3.5",
    "STM",
    "ITM",
    "trace_source",
    "core",
    "0x7F",
    "0x0",
    "nan",
    "é\u202e",
)


def mutate_ini(rng: random.Random, text: str) -> tuple[str, str]:
    """One or two edits of an ``.ini`` file: a value replaced (by a hostile one or another
    line's), a line deleted, repeated or garbled, a key or section renamed."""
    lines = text.splitlines()
    did: list[str] = []
    for _ in range(rng.choice((1, 1, 2))):
        if not lines:
            lines = ["[x]"]
        i = rng.randrange(len(lines))
        line = lines[i]
        k = rng.randrange(8)
        if k <= 2 and "=" in line:
            key = line.split("=", 1)[0]
            value = rng.choice(_VALUES)
            lines[i] = f"{key}={value}"
            did.append(f"line {i + 1} value {value[:20]!r}")
        elif k == 3:
            del lines[i]
            did.append(f"line {i + 1} deleted")
        elif k == 4:
            lines.insert(i, lines[rng.randrange(len(lines))])
            did.append(f"line {i + 1} repeated")
        elif k == 5:
            mutated, how = mutate_bytes(rng, line.encode(), ops=1)
            lines[i] = mutated.decode("latin-1")
            did.append(f"line {i + 1} bytes {how}")
        elif k == 6 and line.startswith("["):
            lines[i] = "[" + rng.choice(_VALUES)[:30] + "]"
            did.append(f"line {i + 1} section renamed")
        else:
            j = rng.randrange(len(lines))
            if "=" in line and "=" in lines[j]:
                lines[i] = line.split("=", 1)[0] + "=" + lines[j].split("=", 1)[1]
                did.append(f"line {i + 1} value from line {j + 1}")
    return "\n".join(lines) + "\n", "; ".join(did) or "unchanged"


# -- seeds -------------------------------------------------------------------------------------


@dataclass
class Seed:
    """A valid input to mutate: a snapshot folder, or one file (a package, a recording)."""

    name: str
    path: Path
    trace_files: list[str] = field(default_factory=list)
    """Trace buffer files of a snapshot, relative to it."""
    format: str = "coresight"
    trace_id: int | None = None
    """The trace ID whose stream the trace targets mutate (None: the buffer's bytes)."""


def _copy_example(name: str, dest: Path) -> Path:
    out = dest / name
    shutil.copytree(EXAMPLES / name, out)
    return out


def _protocol_streams() -> dict[str, tuple[str, dict[str, int], int, bytes, str]]:
    """Per protocol: device type, registers, trace ID, a valid stream and the core type."""
    from cstrace.protocols import get_protocol
    from tests.fuzz import (
        test_etmv3_fuzz,
        test_etmv4_fuzz,
        test_itm_fuzz,
        test_ptm_fuzz,
        test_stm_fuzz,
    )

    ptm_regs = {"ETMCR": 0x10001000, "ETMIDR": 0x411CF312, "ETMCCER": 0x34C01AC2,
                "ETMTRACEIDR": 0x13}  # fmt: skip
    ptm = get_protocol("ptm")
    assert ptm is not None
    ptm_cfg = ptm.from_registers(ptm_regs, "Cortex-A15", "")
    etm3_regs = {"ETMCR": 0x10001860, "ETMIDR": 0x410CF250, "ETMCCER": 0x344008F2,
                 "ETMTRACEIDR": 0x10}  # fmt: skip
    ete_regs = {"TRCCONFIGR": 0x8001, "TRCTRACEIDR": 0x1, "TRCIDR0": 0x28C1CEA1,
                "TRCIDR1": 0x4100FFF0, "TRCIDR2": 0xD0001088, "TRCDEVARCH": 0x47735A13,
                "TRCIDR8": 0x10}  # fmt: skip
    rng = random.Random(26)
    ete_stream = b"".join(test_etmv4_fuzz._valid_stream(rng) for _ in range(4))
    ptm_stream = b"".join(test_ptm_fuzz.valid_stream(rng, ptm_cfg) for _ in range(4))
    etm3_stream = b"".join(test_etmv3_fuzz._valid_stream(s) for s in (1, 2, 3))
    return {
        "ete": ("ETE", ete_regs, 0x1, ete_stream, "ARM-AA64"),
        "ptm": ("PTM1.1", ptm_regs, 0x13, ptm_stream, "Cortex-A15"),
        "etmv3": ("ETM3.5", etm3_regs, 0x10, etm3_stream, "Cortex-A7"),
        "itm": ("ITM", {"ITMTCR": 0x00200310}, 0x20, test_itm_fuzz._VALID * 4, ""),
        "stm": ("STM", {"STMTCSR": 0x00200000}, 0x20, test_stm_fuzz._VALID * 4, ""),
    }


def make_seeds(dest: Path) -> dict[str, list[Seed]]:
    """The seeds of every target, written under ``dest``: target name -> seeds."""
    from cstrace.capture.encode import format_frames
    from cstrace.inputs import read_snapshot, write_package
    from tests.perfdata_writer import write_perf_data
    from tests.snapshots import Buffer, Core, Source, make_snapshot

    dest.mkdir(parents=True, exist_ok=True)
    seeds: dict[str, list[Seed]] = {}
    demo = _copy_example("etm_demo", dest)
    seeds["trace-etmv4"] = [Seed("etm_demo", demo, ["etb_0.bin"], "coresight", 0x10)]
    seeds["trace-stm"] = [Seed("etm_demo-stm", demo, ["etb_0.bin"], "coresight", 0x20)]
    code = bytes(random.Random(7).randrange(256) for _ in range(0x400)) + bytes([0, 0xBF] * 64)
    for proto, (dtype, regs, tid, stream, core) in _protocol_streams().items():
        cores = [Core("cpu_0", core, [("code.bin", 0x8000, code, "")])] if core else []
        src = Source("src_0", dtype, dict(regs), "cpu_0" if core else None)
        for fmt in ("coresight", "source_data"):
            data = format_frames([(tid, stream)]) if fmt == "coresight" else stream
            path = make_snapshot(
                dest / f"{proto}-{fmt}", [src], [Buffer("buf", data, ["src_0"], fmt)], cores
            )
            seeds.setdefault(f"trace-{proto}", []).append(
                Seed(f"{proto}-{fmt}", path, ["buf.bin"], fmt, tid if fmt == "coresight" else None)
            )
    seeds["ini"] = [s for k, v in seeds.items() for s in v if s.format == "coresight"]
    zips = dest / "zips"
    zips.mkdir()
    pkg = zips / "etm_demo.zip"
    write_package(read_snapshot(demo), pkg)
    cov = zips / "coverage_demo.zip"
    with zipfile.ZipFile(cov, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted((EXAMPLES / "coverage_demo").rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(EXAMPLES / "coverage_demo").as_posix())
    seeds["zip"] = [Seed("etm_demo.zip", pkg), Seed("coverage_demo.zip", cov)]
    perf = dest / "perf"
    perf.mkdir()
    rec = perf / "etm_demo.data"
    write_perf_data(read_snapshot(demo), rec)
    seeds["perfdata"] = [Seed("etm_demo.data", rec)]
    seeds["elf"] = [Seed("program.elf", demo / "program.elf")]
    return seeds


def corpus_seeds(corpus: Path, dest: Path) -> dict[str, list[Seed]]:
    """More seeds for the trace and metadata targets: the snapshots of a reference corpus
    (``corpus/snapshots``), copied under ``dest`` (at most 4 MiB of files each)."""
    from cstrace.inputs import read_snapshot
    from cstrace.inputs.metadata import trace_id_of

    out: dict[str, list[Seed]] = {}
    family = {"etmv4": "etmv4", "ete": "ete", "ptm": "ptm", "etmv3": "etmv3", "stm": "stm",
              "itm": "itm"}  # fmt: skip
    for snap in sorted((corpus / "snapshots").iterdir()):
        size = sum(p.stat().st_size for p in snap.rglob("*") if p.is_file())
        if size > 4 << 20:
            continue
        try:
            trace = read_snapshot(snap)
        except Exception:
            continue
        copy = dest / "corpus" / snap.name
        shutil.copytree(snap, copy)
        for p in copy.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        for buf in trace.buffers:
            files = [f.name.rsplit("/", 1)[-1] for f in buf.files]
            for src in trace.sources:
                if buf.name not in src.buffers:
                    continue
                name = family.get(src.protocol)
                if name is None:
                    continue
                tid = trace_id_of(src) if buf.format == "coresight" else None
                out.setdefault(f"trace-{name}", []).append(
                    Seed(snap.name, copy, files, buf.format, tid)
                )
        out.setdefault("ini", []).append(Seed(snap.name, copy))
    return out


# -- targets -----------------------------------------------------------------------------------


def _pick_seed(rng: random.Random, seeds: Sequence[Seed]) -> Seed:
    return seeds[rng.randrange(len(seeds))]


def _stream_mutation(rng: random.Random, data: bytes, trace_id: int) -> tuple[bytes, str]:
    """Mutate the stream of one trace ID inside CoreSight frames, keeping the frames sound."""
    from cstrace.capture import demux
    from cstrace.capture.encode import format_frames

    streams = demux(data, "coresight").streams
    own = streams.get(trace_id)
    if own is None:
        return mutate_bytes(rng, data)
    mutated, what = mutate_bytes(rng, own.data)
    pieces = [(trace_id, mutated)]
    pieces += [(t, s.data) for t, s in streams.items() if t != trace_id and 0 < t < 0x70]
    return format_frames(pieces), f"stream {trace_id:#x}: {what}"


def _sandbox(run_dir: Path) -> None:
    """What hostile metadata may point at inside the run's folder: a FIFO and a link out."""
    fifo = run_dir / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    link = run_dir / "link_out"
    if not link.is_symlink():
        link.symlink_to("/etc/passwd")


def _trace_argv(rng: random.Random, path: str, size: int) -> list[str]:
    """A command for a mutated snapshot: listings and element text only for small traces
    (their output takes the time then, not the decode)."""
    r = rng.random()
    if size > 64 << 10 and 0.5 <= r < 0.85:
        r = 0.0
    if r < 0.5:
        return ["decode", path, "--format", "null", "--jobs", "1"]
    if r < 0.7:
        return ["decode", path, "--format", "ocsd", "--jobs", "1"]
    if r < 0.8:
        return ["decode", path, "--format", "jsonl", "--jobs", "1"]
    if r < 0.85:
        return ["decode", path, "--format", "text", "--jobs", "1", "--before-sync", "wait"]
    return ["info", path]


def make_trace_input(
    rng: random.Random, seeds: Sequence[Seed], run_dir: Path
) -> tuple[list[str], str]:
    """A snapshot whose trace bytes are mutated (the frames, or one trace ID's stream)."""
    seed = _pick_seed(rng, seeds)
    snap = run_dir / "snap"
    shutil.copytree(seed.path, snap)
    name = rng.choice(seed.trace_files)
    data = (snap / name).read_bytes()
    if seed.trace_id is not None and seed.format == "coresight" and rng.random() < 0.7:
        data, what = _stream_mutation(rng, data, seed.trace_id)
    else:
        data, what = mutate_bytes(rng, data)
    (snap / name).write_bytes(data)
    return _trace_argv(rng, "snap", len(data)), f"{seed.name}/{name}: {what}"


def make_ini_input(
    rng: random.Random, seeds: Sequence[Seed], run_dir: Path
) -> tuple[list[str], str]:
    """A snapshot with one of its ``.ini`` files mutated."""
    seed = _pick_seed(rng, seeds)
    snap = run_dir / "snap"
    shutil.copytree(seed.path, snap)
    _sandbox(snap)
    inis = sorted(p.name for p in snap.glob("*.ini"))
    name = rng.choice(inis)
    text, what = mutate_ini(rng, (snap / name).read_text(encoding="latin-1"))
    (snap / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    r = rng.random()
    if r < 0.6:
        argv = ["decode", "snap", "--format", "null", "--jobs", "1"]
    elif r < 0.8:
        argv = ["info", "snap"]
    else:
        argv = ["package", "snap", "out.zip"]
    return argv, f"{seed.name}/{name}: {what}"


def _zip_mutation(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Bytes, or a field of a central directory entry (version, sizes, offsets, name)."""
    r = rng.random()
    at = data.find(b"PK\x01\x02", rng.randrange(max(1, len(data) // 2)))
    if at < 0:
        at = data.find(b"PK\x01\x02")
    if r < 0.5 or at < 0:
        return mutate_bytes(rng, data)
    out = bytearray(data)
    field_at, width, name = rng.choice(
        (
            (6, 2, "version needed"),
            (8, 2, "flags"),
            (10, 2, "method"),
            (20, 4, "compressed size"),
            (24, 4, "size"),
            (28, 2, "name length"),
            (30, 2, "extra length"),
            (38, 4, "attributes"),
            (42, 4, "header offset"),
        )
    )
    value = rng.choice((0, 1, 20, 45, 63, 84, 99, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF))
    value &= (1 << (8 * width)) - 1
    out[at + field_at : at + field_at + width] = value.to_bytes(width, "little")
    return bytes(out), f"central directory {name} = {value:#x}"


def make_zip_input(
    rng: random.Random, seeds: Sequence[Seed], run_dir: Path
) -> tuple[list[str], str]:
    """A package ZIP, mutated."""
    seed = _pick_seed(rng, seeds)
    data, what = _zip_mutation(rng, seed.path.read_bytes())
    (run_dir / "in.zip").write_bytes(data)
    r = rng.random()
    if r < 0.6:
        argv = ["decode", "in.zip", "--format", "null", "--jobs", "1"]
    elif r < 0.8:
        argv = ["info", "in.zip"]
    else:
        argv = ["package", "in.zip", "out.zip"]
    return argv, f"{seed.name}: {what}"


def make_perf_input(
    rng: random.Random, seeds: Sequence[Seed], run_dir: Path
) -> tuple[list[str], str]:
    """A perf.data recording, mutated, decoded with a --symfs and a build-ID folder."""
    seed = _pick_seed(rng, seeds)
    data, what = mutate_bytes(rng, seed.path.read_bytes())
    (run_dir / "perf.data").write_bytes(data)
    for d in ("sym", "cache"):
        (run_dir / d).mkdir(exist_ok=True)
    if rng.random() < 0.8:
        argv = ["decode", "perf.data", "--format", "null", "--jobs", "1", "--symfs", "sym",
                "--buildid-dir", "cache"]  # fmt: skip
    else:
        argv = ["info", "perf.data", "--symfs", "sym", "--buildid-dir", "cache"]
    return argv, f"{seed.name}: {what}"


def make_elf_input(
    rng: random.Random, seeds: Sequence[Seed], run_dir: Path
) -> tuple[list[str], str]:
    """The example's ELF program image, mutated, given with --image to its snapshot."""
    seed = _pick_seed(rng, seeds)
    data, what = mutate_bytes(rng, seed.path.read_bytes())
    (run_dir / "image.elf").write_bytes(data)
    snap = seed.path.parent
    argv = ["decode", str(snap), "--format", "null", "--jobs", "1", "--image"]
    argv.append("image.elf" if rng.random() < 0.7 else f"image.elf@{rng.choice(_WIDE):#x}")
    return argv, f"{seed.name}: {what}"


MakeInput = Callable[[random.Random, Sequence[Seed], Path], tuple[list[str], str]]

TARGETS: dict[str, tuple[str, MakeInput]] = {
    "trace-etmv4": ("trace-etmv4", make_trace_input),
    "trace-ete": ("trace-ete", make_trace_input),
    "trace-ptm": ("trace-ptm", make_trace_input),
    "trace-etmv3": ("trace-etmv3", make_trace_input),
    "trace-stm": ("trace-stm", make_trace_input),
    "trace-itm": ("trace-itm", make_trace_input),
    "ini": ("ini", make_ini_input),
    "zip": ("zip", make_zip_input),
    "perfdata": ("perfdata", make_perf_input),
    "elf": ("elf", make_elf_input),
}
"""Target name -> (the seeds it takes, how it makes an input)."""


def make_run(
    target: str, seed: int, seeds: dict[str, list[Seed]], work: Path, limits: Limits
) -> Run:
    """Make the input of ``(target, seed)`` in a fresh folder under ``work``; run, classify."""
    kind, make = TARGETS[target]
    run_dir = Path(tempfile.mkdtemp(prefix=f"{target}-{seed}-", dir=work))
    try:
        rng = random.Random(f"{target}:{seed}")
        argv, what = make(rng, seeds[kind], run_dir)
        outcome, seconds, peak, stderr, cpu = run_cli(argv, run_dir, limits)
        detail = "\n".join(stderr.strip().splitlines()[-12:]) if outcome in BAD else ""
        return Run(target, seed, argv, what, outcome, seconds, peak, cpu=cpu, detail=detail)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def campaign(
    targets: Sequence[str],
    seeds: dict[str, list[Seed]],
    work: Path,
    limits: Limits,
    *,
    first_seed: int = 0,
    budget: float | None = None,
    runs: int | None = None,
) -> Iterator[Run]:
    """Runs over ``targets`` in turn, seed after seed, until ``budget`` seconds or ``runs``
    runs per target are used up."""
    start = time.monotonic()
    seed = first_seed
    while True:
        for target in targets:
            if budget is not None and time.monotonic() - start > budget:
                return
            yield make_run(target, seed, seeds, work, limits)
        seed += 1
        if runs is not None and seed - first_seed >= runs:
            return
