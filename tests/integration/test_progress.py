"""Progress of a long decode: reported every 256 KiB of a stream, shown on a terminal.

- :meth:`Stream.pieces` cuts a stream with its capture indices intact;
- a run watched for progress (its blocks handed on in small pieces) decodes to
  the same elements as one that is not, for every protocol's example;
- ``cstrace decode`` on a pseudo-terminal shows a bar that moves while a
  capture of one 1 MiB block is decoded (the bar used to wait for the block).
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cstrace import parallel
from cstrace.capture.stream import Stream
from cstrace.decode import Session
from cstrace.inputs import open_input
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"


def test_pieces_keep_every_capture_index() -> None:
    rng = np.random.default_rng(3)
    chunks = []
    at = 100
    for _ in range(40):
        n = int(rng.integers(1, 50))
        chunks.append((at, bytes(rng.integers(0, 256, n, dtype=np.uint8))))
        at += n + int(rng.integers(0, 3)) * 16  # gaps, as an ID byte or another ID makes
    stream = Stream.from_chunks(0x10, chunks)
    whole = stream.offsets().tolist()
    for size in (1, 7, 64, 1000, len(stream.data)):
        pieces = list(stream.pieces(size))
        assert all(0 < len(p.data) <= size for p in pieces)
        assert b"".join(p.data for p in pieces) == stream.data
        assert [i for p in pieces for i in p.offsets().tolist()] == whole


def _elements(path: Path, step: int | None, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    trace = open_input(path)
    session = Session(trace)
    out = []
    if step is not None:
        monkeypatch.setattr(parallel, "PROGRESS_STEP", step)
    for buffer in trace.buffers:
        for run in session.open_buffer(buffer).runs:
            seen: list[int] = []
            if step is not None:
                run = parallel.watch_progress(run, seen.append)
            out.extend(repr(e) for e in run.elements())
            assert seen == sorted(seen)  # forward only
    return out


@pytest.mark.parametrize(
    "example",
    [
        "etm_demo",
        "stm_demo",
        "coverage_demo",
        "classic/etmv1_etb",
        "classic/etmv2_cycles",
        "classic/xscale",
        "classic/dcc",
    ],
)
def test_decoding_in_small_pieces_changes_nothing(
    example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = EXAMPLES / example
    if not path.exists():
        pytest.skip(f"{path} not found")
    plain = _elements(path, None, monkeypatch)
    for step in (5, 16, 333):
        assert _elements(path, step, monkeypatch) == plain, step


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["TC2", "Snowball", "stm_only", "itm_only_csformat", "ete_mem"])
def test_corpus_in_small_pieces_changes_nothing(
    corpus: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = corpus / "snapshots" / name
    plain = _elements(path, None, monkeypatch)
    assert _elements(path, 97, monkeypatch) == plain


def _percentages(raw: bytes) -> list[int]:
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", raw).decode(errors="replace")
    return [int(m) for m in re.findall(r"(\d{1,3})%", text)]


@pytest.mark.corpus
def test_the_bar_moves_on_a_one_block_capture(corpus: Path, tmp_path: Path) -> None:
    """``cstrace decode bugfix-exact-match -o FILE`` on a terminal: the bar goes through
    several values below 100% (the capture is one 1 MiB block)."""
    snap = corpus / "snapshots" / "bugfix-exact-match"
    if not snap.is_dir():
        pytest.skip(f"{snap} not found")
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cstrace.cli", "decode", str(snap), "--jobs", "1",
         "-o", str(tmp_path / "out.txt")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=terminal,
        env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
    )  # fmt: skip
    os.close(terminal)
    raw = b""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                got = os.read(controller, 65536)
            except OSError:
                break  # the process closed the terminal
            if not got:
                break
            raw += got
        elif proc.poll() is not None:
            break
    proc.wait(60)
    os.close(controller)
    assert proc.returncode == 0, raw[-2000:]
    moving = sorted({p for p in _percentages(raw) if 0 < p < 100})
    assert len(moving) >= 3, (moving, raw[-500:])
