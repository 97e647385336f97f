"""Shared test fixtures: a machine-independent environment, where the reference corpus is.

**Hermetic runs.** Before any test module is imported, the environment the code
(and the tools the tests start: perf, chromium, genhtml...) could read settings or
caches from is pointed at empty temporary folders: ``HOME``, the XDG folders, perf's
build-ID cache (``PERF_BUILDID_DIR``), and cstrace's own tuning variables are
cleared. A test suite run on a machine whose ``~/.debug`` holds the recordings'
build IDs then sees what it sees on any other. An audit hook watches the files and
folders opened during each test: opening one under the real home folder (other than
the interpreter's own files and this checkout) fails that test.

What a run is told on purpose stays: ``CSTRACE_PURE`` (pure-Python run),
``CSTRACE_CORPUS``, ``CSTRACE_PERFDATA`` (where the shared data is) and
``CSTRACE_VIEWER_SCREENSHOTS``.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# --- a hermetic environment -------------------------------------------------------------------

_TUNING = ("CSTRACE_SPLIT_MIN", "CSTRACE_PURE_WARNED")
"""cstrace's environment variables that change what it does and that a test does not set."""


def _real_homes() -> list[Path]:
    homes = {Path(pwd.getpwuid(os.getuid()).pw_dir)}
    # The run's own home, as the first process found it (xdist workers see the test home).
    home = os.environ.get("CSTRACE_REAL_HOME") or os.environ.get("HOME")
    if home and home != os.environ.get("CSTRACE_TEST_HOME"):
        homes.add(Path(home))
    return [h.resolve() for h in homes if str(h) not in ("", "/")]


REAL_HOMES = _real_homes()
"""The user's home folder(s), as the run found them (``$HOME`` and the password entry)."""


def _test_home() -> Path:
    """The folder made for this run, or the one a parent process made (pytest-xdist's workers
    inherit the environment of the process that started them)."""
    given = os.environ.get("CSTRACE_TEST_HOME")
    if given and Path(given).is_dir():
        return Path(given)
    made = Path(tempfile.mkdtemp(prefix="cstrace-test-home-"))
    atexit.register(shutil.rmtree, made, ignore_errors=True)
    return made


TEST_HOME = _test_home()
"""The empty folder that stands for the home folder during the tests."""


def _isolate() -> None:
    """Point every home, cache and config location at empty folders under :data:`TEST_HOME`."""
    if os.environ.get("CSTRACE_TEST_HOME") == str(TEST_HOME) and os.environ.get("HOME") == str(
        TEST_HOME
    ):
        return  # a pytest-xdist worker: its parent did this
    env = {
        "HOME": TEST_HOME,
        "XDG_CACHE_HOME": TEST_HOME / ".cache",
        "XDG_CONFIG_HOME": TEST_HOME / ".config",
        "XDG_DATA_HOME": TEST_HOME / ".local" / "share",
        "XDG_STATE_HOME": TEST_HOME / ".local" / "state",
        "PERF_BUILDID_DIR": TEST_HOME / ".debug",
    }
    os.environ.setdefault("CSTRACE_REAL_HOME", os.environ.get("HOME", ""))
    for name, path in env.items():
        path.mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(path)
    os.environ["CSTRACE_TEST_HOME"] = str(TEST_HOME)
    for name in _TUNING:
        os.environ.pop(name, None)


_isolate()

_ALLOWED: list[str] = sorted(
    {
        str(Path(p).resolve())
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, ROOT, ROOT.parent / "shared",
                  TEST_HOME, tempfile.gettempdir(), *[q for q in sys.path if q])
        if p
    }
)  # fmt: skip
"""Paths under the real home that the tests may open: the interpreter, its packages, this
checkout, the shared data beside it, and the temporary folders."""

home_reads: list[str] = []
"""Paths under the real home opened since the current test began."""


def _under(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def _watch(event: str, args: tuple[object, ...]) -> None:
    if event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    target = args[0]
    if not isinstance(target, (str, bytes, os.PathLike)):
        return  # a file descriptor
    try:
        path = os.path.abspath(os.fsdecode(target))
    except (TypeError, ValueError):
        return
    homes = [str(h) for h in REAL_HOMES]
    if _under(path, homes) and not _under(path, _ALLOWED):
        home_reads.append(f"{event} {path}")


if REAL_HOMES and not _under(str(TEST_HOME), [str(h) for h in REAL_HOMES]):
    sys.addaudithook(_watch)


@pytest.fixture(autouse=True)
def _no_home_reads() -> Iterator[None]:
    """Fails a test that opened a file or folder under the real home folder."""
    home_reads.clear()
    yield
    found = list(home_reads)
    home_reads.clear()
    if found:
        pytest.fail(
            "the test read the user's home folder (tests must be hermetic): " + "; ".join(found[:5])
        )


# --- the shared data --------------------------------------------------------------------------


def corpus_dir() -> Path | None:
    """The reference corpus: ``$CSTRACE_CORPUS`` or ``../shared/corpus`` beside the checkout."""
    env = os.environ.get("CSTRACE_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "corpus")
    for c in candidates:
        if (c / "snapshots").is_dir() and (c / "expected").is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus folder; skips the test when it is absent."""
    c = corpus_dir()
    if c is None:
        pytest.skip(
            "reference corpus not found: set CSTRACE_CORPUS or place it at ../shared/corpus"
        )
    return c


def perfdata_dir() -> Path | None:
    """The real perf.data recordings: ``$CSTRACE_PERFDATA``, ``../shared/perfdata`` beside the
    checkout, or ``perfdata`` beside the corpus."""
    env = os.environ.get("CSTRACE_PERFDATA")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "perfdata")
    c = corpus_dir()
    if c is not None:
        candidates.append(c.parent / "perfdata")
    for d in candidates:
        if (d / "perf_etm.data").is_file():
            return d
    return None


@pytest.fixture(scope="session")
def perfdata() -> Path:
    """The folder of the real perf.data recordings; skips the test when it is absent."""
    d = perfdata_dir()
    if d is None:
        pytest.skip(
            "perf.data recordings not found: set CSTRACE_PERFDATA or place them at "
            "../shared/perfdata"
        )
    return d


# -- Hypothesis (issue 26) ---------------------------------------------------------------------
# Every test that draws random examples runs them from a fixed, derandomised profile: the same
# examples on every run (a random one once hung a test in CI), and no example database written
# beside the checkout. HYPOTHESIS_PROFILE=explore draws fresh examples when looking for bugs.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, database=None, deadline=None)
_hypothesis_settings.register_profile("explore", derandomize=False, database=None, deadline=None)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
