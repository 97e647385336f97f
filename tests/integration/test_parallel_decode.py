"""``cstrace decode --jobs N``: trace IDs decoded on a process pool give exactly the serial output.

Judged by the serial decode itself: every format (listing, text, JSON Lines,
Parquet), stdout and stderr (warnings, the loss summary), on corpus snapshots
with several busy trace IDs, one with two buffers, a ZIP package, and a
perf.data recording (who ran each element, images not found). Also: the
parallel path really runs in worker processes.
"""

from __future__ import annotations

import io
import os
from collections.abc import Generator
from pathlib import Path

import pytest

from cstrace.cli import main
from cstrace.parallel import can_fork, read_chunks

pytestmark = pytest.mark.skipif(not can_fork(), reason="the process pool forks its workers")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``cstrace`` with ``argv``."""
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def same_both_ways(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv`` with --jobs 1 and --jobs 2; assert equal status, stdout, stderr."""
    serial = run([*argv, "--jobs", "1"], capsys)
    parallel = run([*argv, "--jobs", "2"], capsys)
    assert serial[0] == parallel[0]
    assert serial[2] == parallel[2], "stderr differs"
    assert serial[1] == parallel[1], "stdout differs"
    return serial[1]


@pytest.mark.parametrize("fmt", ["ocsd", "text", "jsonl"])
@pytest.mark.parametrize("name", ["TC2", "juno_r1_1"])
def test_formats_identical(
    corpus: Path, capsys: pytest.CaptureFixture[str], name: str, fmt: str
) -> None:
    out = same_both_ways(["decode", str(corpus / "snapshots" / name), "--format", fmt], capsys)
    assert out.count("\n") > 1000  # several sources decoded, not an empty run


def test_two_buffers_keep_state(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace ID decoded in two buffers: its second run is reset, in its worker too."""
    out = same_both_ways(
        [
            "decode",
            str(corpus / "snapshots" / "juno_r1_1"),
            "-f",
            "ocsd",
            "-b",
            "ETB_0",
            "-b",
            "ETB_0",
        ],
        capsys,
    )
    assert out.count("Using ETB_0 as trace source") == 2
    assert "reset-decoder" in out or "RESET" in out.upper()


def test_null_writes_nothing(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = str(corpus / "snapshots" / "TC2")
    status, out, err = run(["decode", snap, "--format", "null", "--jobs", "2"], capsys)
    assert status == 0
    assert out == ""
    assert "trace ID 0x10 (ETM_0, etmv3)" in err  # the summary counts what was decoded
    # The counts are those of a serial decode of the listing.
    _, _, listed = run(["decode", snap, "--format", "text", "--jobs", "1"], capsys)
    assert err == listed


def test_zip_package(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A package keeps its ZIP open: each worker opens its own."""
    package = tmp_path / "tc2.zip"
    assert main(["package", str(corpus / "snapshots" / "TC2"), str(package)]) == 0
    capsys.readouterr()
    same_both_ways(["decode", str(package), "-f", "ocsd"], capsys)


def test_recording(perfdata: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Who ran each element and the images not found, merged from the workers."""
    same_both_ways(["decode", str(perfdata / "perf_etm.data"), "-f", "text"], capsys)


def test_workers_do_the_decoding(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs are decoded in other processes: the parent waits for each and reads it back."""
    import cstrace.parallel as parallel

    done: list[parallel.RunDone] = []
    real = parallel.ParallelDecode.follow

    def follow(
        self: parallel.ParallelDecode, index: int, lane: int, progress: object = None
    ) -> Generator[str, None, parallel.RunDone]:
        got = yield from real(self, index, lane)
        done.append(got)
        return got

    monkeypatch.setattr(parallel.ParallelDecode, "follow", follow)
    out = tmp_path / "tc2.ppl"
    argv = ["decode", str(corpus / "snapshots" / "TC2"), "-f", "ocsd", "-o", str(out)]
    assert main([*argv, "--jobs", "2", "--no-summary"]) == 0
    assert [d.index for d in done] == list(range(6))  # every run, in the serial order
    workers = {d.worker for d in done}
    assert os.getpid() not in workers
    assert not any(Path(d.path).exists() for d in done)  # read back, then removed
    assert out.read_text().count("END OF TRACE DATA") == 6


def test_read_chunks(tmp_path: Path) -> None:
    """A run's file comes back as pieces of whole lines that rebuild it exactly."""
    text = "".join(f"line {i} " + "x" * (i % 37) + "\n" for i in range(5000))
    path = tmp_path / "run"
    path.write_text(text)
    pieces = list(read_chunks(str(path), size=1000))
    assert len(pieces) > 10
    assert "".join(p + "\n" for p in pieces) == text
    buf = io.StringIO()
    for p in pieces:
        assert not p.endswith("\n")
        buf.write(p + "\n")
    assert buf.getvalue() == text
