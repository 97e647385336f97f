"""The test environment is the same on every machine: no home, cache or config of the user."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import conftest


def test_home_caches_and_perf_cache_are_empty_temporary_folders() -> None:
    home = Path(os.environ["HOME"])
    assert home == conftest.TEST_HOME
    assert home not in conftest.REAL_HOMES
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "PERF_BUILDID_DIR"):
        assert Path(os.environ[name]).is_relative_to(home), name
    assert not any(Path(os.environ["PERF_BUILDID_DIR"]).iterdir())
    assert "CSTRACE_SPLIT_MIN" not in os.environ


def test_perf_build_id_cache_default_is_the_test_home() -> None:
    from cstrace.inputs.symbols import default_buildid_dir

    found = default_buildid_dir()
    assert found is not None and found.is_relative_to(conftest.TEST_HOME)


def test_reading_the_real_home_is_caught() -> None:
    """The guard works: opening a file under the real home is recorded (and would fail the
    test that did it). The file need not exist: the open is seen before it fails."""
    if not conftest.REAL_HOMES:
        pytest.skip("no home folder on this machine")
    probe = conftest.REAL_HOMES[0] / ".cstrace-hermetic-probe-that-does-not-exist"
    if conftest._under(str(probe), conftest._ALLOWED):
        pytest.skip(f"{probe} is inside the checkout or the interpreter's folders")
    with pytest.raises(OSError):
        probe.open("rb")
    assert any(str(probe) in r for r in conftest.home_reads)
    conftest.home_reads.clear()
