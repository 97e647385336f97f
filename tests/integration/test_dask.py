"""``--dask ADDRESS``: each input a task on a Dask distributed cluster (a LocalCluster here).

Judged by the local decode: each input's output file equals the listing of a
plain ``cstrace decode`` of that input, and the summed profile equals the
profile of ``cstrace profile`` run here. The tasks are seen to run on the
cluster's workers (each input's note names one of them, and the worker
counts the tasks it ran).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cstrace.cli import main

distributed = pytest.importorskip("distributed", reason="--dask needs dask[distributed]")

INPUTS = ("TC2", "juno_r1_1", "stm_only")


@pytest.fixture(scope="module")
def cluster() -> object:
    """A LocalCluster of two workers, in this process (threads: quick on 2 CPUs)."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as c:
        yield c


def worker_addresses(cluster: object) -> set[str]:
    return {str(w.address) for w in cluster.workers.values()}  # type: ignore[attr-defined]


def executed(cluster: object) -> int:
    """Tasks the workers have run so far."""
    return sum(
        int(w.state.executed_count)  # type: ignore[attr-defined]
        for w in cluster.workers.values()  # type: ignore[attr-defined]
    )


def test_decode_on_the_cluster(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster: object
) -> None:
    snaps = [str(corpus / "snapshots" / name) for name in INPUTS]
    out = tmp_path / "out"
    before = executed(cluster)
    address = cluster.scheduler_address  # type: ignore[attr-defined]
    status = main(["decode", *snaps, "-f", "ocsd", "--dask", address, "-o", str(out)])
    err = capsys.readouterr().err
    assert status == 0
    assert executed(cluster) - before == len(INPUTS)
    notes = dict(re.findall(r"cstrace: note: (\S+): decoded on (\S+)", err))
    assert set(notes) == set(snaps)
    assert set(notes.values()) <= worker_addresses(cluster)
    for name, snap in zip(INPUTS, snaps, strict=True):
        local = tmp_path / f"{name}.local"
        assert main(["decode", snap, "-f", "ocsd", "--jobs", "1", "-o", str(local)]) == 0
        capsys.readouterr()
        assert (out / f"{name}.ppl").read_text() == local.read_text()


def test_profile_summed_on_the_cluster(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster: object
) -> None:
    snaps = [str(corpus / "snapshots" / name) for name in ("TC2", "juno_r1_1", "TC2")]
    address = cluster.scheduler_address  # type: ignore[attr-defined]
    remote, local = tmp_path / "remote.txt", tmp_path / "local.txt"
    assert main(["profile", *snaps, "-f", "bolt", "--dask", address, "-o", str(remote)]) in (0, 2)
    err = capsys.readouterr().err
    assert err.count("counted on") == 3
    assert main(["profile", *snaps, "-f", "bolt", "-o", str(local)]) in (0, 2)
    capsys.readouterr()
    assert remote.read_text() == local.read_text()
    assert remote.read_text().strip()  # something was counted


def test_unreachable_scheduler(
    corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("cstrace.fleet.CONNECT_TIMEOUT", 2.0)
    snap = str(corpus / "snapshots" / "TC2")
    status = main(["decode", snap, "--dask", "tcp://127.0.0.1:9", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("cstrace: error: --dask tcp://127.0.0.1:9") and err.count("\n") == 1
