"""Parallel decode across trace IDs on a local process pool, in the serial order.

Input: a :class:`~cstrace.trace.Trace`, the buffers to decode (in order), the
decode options and a :data:`RunWork`, what to do with one run (write its
output to a file, return a small picklable result). Output: for each run, in
the order a serial decode meets them, a :class:`RunDone` naming the file that
holds its output, the issues met while it ran and the work's result.

Trace IDs are independent once demultiplexed, and everything that crosses
from one run to the next is kept per trace ID (the decoder state a session
keeps across buffers, whether a decoder is reset; code memory is a fresh
cursor per run). So the runs of one trace ID over all the buffers make a
*lane*: a worker process opens a :class:`~cstrace.decode.Session` of its own,
opens every buffer in order and decodes only the runs of its lane, each into
a file of a temporary folder. The parent reads the files back in the serial
order; every run's output is then exactly what a serial decode gives, and
memory stays flat (a run's output goes to disk, not to a list).

Workers are forked (POSIX only): they share the parent's opened trace and the
``work`` function as they were when the pool started, so nothing is pickled
on the way in; only each run's :class:`RunDone` comes back through a queue.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TextIO

from cstrace.capture.stream import Stream, WrappedStream
from cstrace.decode import Session, SourceRun
from cstrace.errors import Issue
from cstrace.protocols import DecodeOptions
from cstrace.trace import Buffer, Trace

__all__ = [
    "ParallelDecode",
    "RunDone",
    "RunWork",
    "can_fork",
    "lanes_of",
    "read_chunks",
    "watch_progress",
]

Progress = Callable[[int], None]
"""Told, now and then, how many bytes of its buffer a run has decoded so far."""

RunWork = Callable[[Session, SourceRun, str, Progress], object]
"""What to do with one run: ``work(session, run, path, progress) -> result``.

It writes the run's output to the file ``path`` and returns a picklable
result (counts, say); ``progress`` may be called with the bytes done.
"""

CHUNK = 1 << 20
"""Bytes read at a time from a run's output file."""


@dataclass(frozen=True, slots=True)
class RunDone:
    """One run decoded by a worker."""

    index: int
    """The run's place in the serial order (0: the first run of the first buffer)."""
    path: str
    """The file holding the run's output."""
    issues: tuple[Issue, ...]
    """The issues of code memory the worker's session met up to the end of this run and had
    not reported yet (:meth:`~cstrace.decode.Session.new_issues`)."""
    result: object
    """What the run's work returned."""
    worker: int
    """The process ID of the worker that decoded the run."""


def can_fork() -> bool:
    """Whether this system can fork worker processes (the pool needs it)."""
    return "fork" in multiprocessing.get_all_start_methods()


def lanes_of(trace: Trace, buffers: Sequence[Buffer], options: DecodeOptions) -> list[int] | None:
    """The trace IDs with runs in ``buffers``, in the order they first appear.

    None when one buffer would have two runs of the same trace ID (their
    runs would share a decoder's state, so they are not independent lanes).
    """
    session = Session(trace, options)
    lanes: dict[int, None] = {}
    for buffer in buffers:
        ids = session.run_ids(buffer)
        if len(set(ids)) != len(ids):
            return None
        lanes.update(dict.fromkeys(ids))
    return list(lanes)


@dataclass
class _Job:
    trace: Trace
    buffers: Sequence[Buffer]
    options: DecodeOptions
    work: RunWork
    reopen: Callable[[], Trace] | None
    """Opens the trace again in a worker (one holding an open file must not share it)."""
    folder: str
    queue: Any
    """The multiprocessing queue workers report on."""
    interval: float


_JOB: _Job | None = None
"""The job of the pool being started: forked workers find it here."""


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError with its traceback."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        text = "".join(traceback.format_exception(exc))
        return RuntimeError(f"decode worker failed:\n{text}")
    return exc


def _decode_lane(lane: int) -> int:
    """Worker: decode the runs of trace ID ``lane`` in every buffer, each into its file."""
    job = _JOB
    assert job is not None, "worker started without a job"
    put = job.queue.put
    try:
        trace = job.trace
        buffers = job.buffers
        if job.reopen is not None:
            trace = job.reopen()
            buffers = [trace.buffer(b.name) for b in buffers]
        session = Session(trace, job.options)
        index = 0
        for buffer in buffers:
            for run in session.open_buffer(buffer).runs:
                if run.trace_id == lane:
                    path = os.path.join(job.folder, f"run-{index}")
                    result = job.work(session, run, path, _progress(put, index, job.interval))
                    issues = tuple(session.new_issues())
                    put(("done", lane, RunDone(index, path, issues, result, os.getpid())))
                index += 1
    except BaseException as exc:
        put(("error", lane, _portable(exc)))
    return lane


def _progress(put: Callable[[Any], None], index: int, interval: float) -> Progress:
    """A progress callback that reports at most every ``interval`` seconds."""
    last = [0.0]

    def report(done: int) -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            put(("progress", index, done))

    return report


class ParallelDecode:
    """Runs of a decode shared out by trace ID between worker processes.

    Use as a context manager; :meth:`wait` gives run ``i`` (the serial order)
    once its worker is done with it. ``jobs`` is the number of worker
    processes (at most one per lane). ``reopen``, when given, opens the trace
    again in each worker instead of sharing the parent's (a ZIP package keeps
    its file open, and forked processes would share its file position). The
    folder of output files is removed, and the workers stopped, on exit.
    """

    def __init__(
        self,
        trace: Trace,
        buffers: Sequence[Buffer],
        options: DecodeOptions,
        work: RunWork,
        lanes: Sequence[int],
        jobs: int,
        *,
        reopen: Callable[[], Trace] | None = None,
        interval: float = 0.2,
    ) -> None:
        self._trace = trace
        self._buffers = list(buffers)
        self._options = options
        self._work = work
        self._reopen = reopen
        self._lanes = list(lanes)
        self.jobs = max(1, min(jobs, len(self._lanes)))
        self._interval = interval
        self._done: dict[int, RunDone] = {}
        self._failed: dict[int, BaseException] = {}
        self._futures: list[Future[int]] = []
        self._folder: str | None = None
        self._pool: ProcessPoolExecutor | None = None
        self._queue: Any = None

    def __enter__(self) -> ParallelDecode:
        """Start the workers (forked now, with the trace as it is)."""
        global _JOB
        ctx = multiprocessing.get_context("fork")
        self._folder = tempfile.mkdtemp(prefix="cstrace-jobs-")
        self._queue = ctx.Queue()
        _JOB = _Job(
            self._trace,
            self._buffers,
            self._options,
            self._work,
            self._reopen,
            self._folder,
            self._queue,
            self._interval,
        )
        try:
            self._pool = ProcessPoolExecutor(self.jobs, mp_context=ctx)
            self._futures = [self._pool.submit(_decode_lane, lane) for lane in self._lanes]
        finally:
            _JOB = None
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        """Stop the workers and remove the output files.

        When the decode ends early (an error, the reader of the output gone,
        Ctrl-C), the workers are terminated rather than left to finish.
        """
        if self._pool is not None:
            for f in self._futures:
                f.cancel()
            if kind is not None:
                # The executor has no way to stop running tasks: end its processes.
                processes = getattr(self._pool, "_processes", None) or {}
                for process in list(processes.values()):
                    process.terminate()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._queue is not None:
            self._queue.close()
            self._queue = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def wait(
        self, index: int, lane: int, progress: Callable[[int, int], None] | None = None
    ) -> RunDone:
        """Run ``index`` (of trace ID ``lane``), once decoded; ``progress(index, bytes)`` is told
        how the runs being decoded meanwhile are going.

        A worker's exception is raised here, when the run it stopped is waited for.
        """
        while not self._poll(index, lane, progress, 0.5):
            pass
        return self._done.pop(index)

    def follow(
        self, index: int, lane: int, progress: Callable[[int, int], None] | None = None
    ) -> Generator[str, None, RunDone]:
        """The text of run ``index`` while its worker writes it (as :func:`read_chunks`: pieces
        of whole lines without their last newline); returns the run once it is done.

        The first run's output comes as it is made, not when the run is over.
        """
        assert self._folder is not None, "not started"
        path = os.path.join(self._folder, f"run-{index}")
        text: TextIO | None = None
        rest = ""
        try:
            while True:
                finished = self._poll(index, lane, progress, 0.05)
                if text is None and os.path.exists(path):
                    text = open(path, encoding="utf-8", newline="")  # noqa: SIM115
                if text is not None:
                    while block := text.read(CHUNK):
                        block = rest + block
                        cut = block.rfind("\n")
                        if cut < 0:
                            rest = block
                            continue
                        yield block[:cut]
                        rest = block[cut + 1 :]
                if finished:
                    break
        finally:
            if text is not None:
                text.close()
        done = self._done.pop(index)
        if text is None:  # done before it was seen: read it whole
            yield from read_chunks(done.path)
        elif rest:
            yield rest
        return done

    def _poll(
        self,
        index: int,
        lane: int,
        progress: Callable[[int, int], None] | None,
        timeout: float,
    ) -> bool:
        """Take the workers' messages for up to ``timeout`` seconds; whether run ``index`` is
        done. Raises the exception of a worker of ``lane`` that failed."""
        while index not in self._done:
            if lane in self._failed:
                raise self._failed[lane]
            try:
                kind, who, payload = self._queue.get(timeout=timeout)
            except queue.Empty:
                self._check_alive()
                return False
            if kind == "done":
                self._done[payload.index] = payload
            elif kind == "error":
                self._failed[who] = payload
            elif progress is not None:
                progress(who, payload)
        return True

    def _check_alive(self) -> None:
        """Raise when a worker went away without saying so (killed, out of memory...)."""
        for f in self._futures:
            if f.done() and not f.cancelled() and f.exception() is not None:
                raise RuntimeError(f"a decode worker died: {f.exception()!r}")


def read_chunks(path: str, size: int = CHUNK) -> Iterator[str]:
    """The text of a run's output file (lines ended by newlines) as pieces of whole lines,
    without their last newline: each piece is to be written followed by one."""
    with open(path, encoding="utf-8", newline="") as f:
        rest = ""
        while True:
            block = f.read(size)
            if not block:
                break
            block = rest + block
            cut = block.rfind("\n")
            if cut < 0:
                rest = block
                continue
            yield block[:cut]
            rest = block[cut + 1 :]
        if rest:
            yield rest


def watch_progress(run: SourceRun, progress: Progress) -> SourceRun:
    """A copy of ``run`` whose stream tells ``progress`` where in its buffer the reader is
    (the capture index after each block it takes)."""
    return replace(run, stream=_ProgressStream(run.stream, progress))


class _ProgressStream(WrappedStream):
    """A stream that reports the capture index reached after each block a reader takes."""

    __slots__ = ("_progress",)

    def __init__(self, inner: Stream, progress: Progress) -> None:
        super().__init__(inner)
        self._progress = progress

    def blocks(self) -> Iterator[Stream]:
        """The inner stream's blocks; after each, the capture index of its end is reported."""
        progress = self._progress
        for block in self._inner.blocks():
            yield block
            n = len(block.data)
            if n:
                progress(block.offset_at(n - 1) + 1)
