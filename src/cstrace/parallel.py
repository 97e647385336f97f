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

One long run can also be cut at synchronisation points (:mod:`cstrace.split`):
its lane is then replaced by one task per piece, each written to its own
file. The parent reads the pieces back in order and checks each join: a
piece is used when the piece before it ended, at the cut's gate, in the
state the piece started from; otherwise the parent decodes that part again
itself, serially from the true state (:func:`~cstrace.split.fallback_run`),
until a later join holds. The pieces' results are put together by the
``merge`` function given to the pool.

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
from cstrace.split import SplitPlan, fallback_run, piece_of, piece_run, plan_split
from cstrace.trace import Buffer, Trace

__all__ = [
    "ParallelDecode",
    "PieceInfo",
    "RunDone",
    "RunMerge",
    "RunWork",
    "can_fork",
    "lanes_of",
    "read_chunks",
    "split_plans",
    "watch_progress",
]

Progress = Callable[[int], None]
"""Told, now and then, how many bytes of its buffer a run has decoded so far."""

RunWork = Callable[[Session, SourceRun, str, Progress], object]
"""What to do with one run: ``work(session, run, path, progress) -> result``.

It writes the run's output to the file ``path`` and returns a picklable
result (counts, say); ``progress`` may be called with the bytes done.
"""

RunMerge = Callable[[Sequence[object], SplitPlan], object]
"""Puts together the results of the pieces of a run cut by a :class:`SplitPlan`, in order."""

CHUNK = 1 << 20
"""Bytes read at a time from a run's output file."""


@dataclass(frozen=True, slots=True)
class PieceInfo:
    """How the decode of a piece of a run went (:class:`~cstrace.split.Piece`)."""

    number: int
    """The piece's number (for a decode done again: the number of the piece it started as)."""
    start: int
    """Where its decode started (the :class:`~cstrace.split.Piece` ``start``)."""
    start_ok: bool
    stopped: int | None
    """The cut it ended at; None: the end of the run."""
    joined: bool
    """Whether the next piece may follow it."""
    last: int | None
    """It gave every packet up to this capture index (where a decode done again starts)."""


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
    piece: PieceInfo | None = None
    """For a piece of a run, how it went."""


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


def split_plans(
    trace: Trace,
    buffers: Sequence[Buffer],
    options: DecodeOptions,
    pieces: int,
    min_size: int,
    every_format_only: bool = False,
) -> dict[int, SplitPlan]:
    """Where to cut the long runs of a decode into ``pieces`` pieces, by trace ID.

    Only a trace ID with one run in all of ``buffers`` is cut (the runs of one
    trace ID share a decoder's state), when :func:`~cstrace.split.plan_split`
    finds cuts in it: its protocol supports them, its stream holds at least
    ``min_size`` bytes. ``every_format_only``: only runs of protocols whose cuts
    pay in every output format (``CutPoints.every_format``).
    """
    plans: dict[int, SplitPlan] = {}
    if pieces < 2:
        return plans
    session = Session(trace, options)
    seen: dict[int, Buffer | None] = {}
    for buffer in buffers:
        for tid in session.run_ids(buffer):
            seen[tid] = None if tid in seen else buffer
    for buffer in buffers:
        if buffer.size() < min_size:
            continue
        wanted = {tid for tid, b in seen.items() if b is buffer}
        if not wanted:
            continue
        for run in session.open_buffer(buffer).runs:
            cuts = run.protocol.cuts
            if every_format_only and (cuts is None or not cuts.every_format):
                continue
            if run.trace_id in wanted:
                plan = plan_split(run, pieces, min_size)
                if plan is not None:
                    plans[run.trace_id] = plan
    return plans


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
    splits: dict[int, SplitPlan]


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


def _decode_piece(lane: int, number: int, index: int, buffer_name: str) -> int:
    """Worker: decode piece ``number`` of the run of trace ID ``lane`` (run ``index``, in
    buffer ``buffer_name``) into its file."""
    job = _JOB
    assert job is not None, "worker started without a job"
    put = job.queue.put
    try:
        trace = job.trace if job.reopen is None else job.reopen()
        session = Session(trace, job.options)
        plan = job.splits[lane]
        for run in session.open_buffer(trace.buffer(buffer_name)).runs:
            if run.trace_id == lane:
                piece = piece_run(run, plan, number)
                path = os.path.join(job.folder, f"run-{index}-{number}")
                result = job.work(session, piece, path, _progress(put, index, job.interval))
                issues = tuple(session.new_issues())
                info = _piece_info(number, piece)
                put(("piece", lane, RunDone(index, path, issues, result, os.getpid(), info)))
                break
        else:
            raise RuntimeError(f"no run of trace ID {lane:#x} in buffer {buffer_name}")
    except BaseException as exc:
        put(("error", lane, _portable(exc)))
    return lane


def _piece_info(number: int, run: SourceRun) -> PieceInfo:
    piece = piece_of(run)
    assert piece is not None
    return PieceInfo(number, piece.start, piece.start_ok, piece.stopped, piece.joined, piece.last)


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
    processes (at most one per task: a lane, or a piece of a run cut by
    ``splits``, the plans of :func:`split_plans` by trace ID, whose results
    ``merge`` puts together). ``reopen``, when given, opens the trace
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
        splits: dict[int, SplitPlan] | None = None,
        merge: RunMerge | None = None,
    ) -> None:
        self._trace = trace
        self._buffers = list(buffers)
        self._options = options
        self._work = work
        self._reopen = reopen
        self._lanes = list(lanes)
        self._splits = {t: p for t, p in (splits or {}).items() if t in self._lanes}
        self._merge = merge
        # Where each cut run is: its index in the serial order and its buffer.
        self._where: dict[int, tuple[int, str]] = {}
        if self._splits:
            session = Session(trace, options)
            index = 0
            for buffer in self._buffers:
                for tid in session.run_ids(buffer):
                    if tid in self._splits:
                        self._where[tid] = (index, buffer.name)
                    index += 1
        tasks = sum(self._splits[t].pieces if t in self._splits else 1 for t in self._lanes)
        self.jobs = max(1, min(jobs, tasks))
        self._interval = interval
        self._done: dict[int, RunDone] = {}
        self._pieces: dict[tuple[int, int], RunDone] = {}
        self._session: Session | None = None
        """The parent's own session, for the parts of cut runs it decodes again."""
        self._fallbacks = 0
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
            self._splits,
        )
        try:
            pool = self._pool = ProcessPoolExecutor(self.jobs, mp_context=ctx)
            for lane in self._lanes:
                plan = self._splits.get(lane)
                if plan is None:
                    self._futures.append(pool.submit(_decode_lane, lane))
                    continue
                index, name = self._where[lane]
                for number in range(plan.pieces):
                    self._futures.append(pool.submit(_decode_piece, lane, number, index, name))
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
        if lane in self._splits:
            pieces = self._cut_run(index, lane, progress, text=False)
            while True:
                try:
                    next(pieces)
                except StopIteration as end:
                    done: RunDone = end.value
                    return done
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
        if lane in self._splits:
            return (yield from self._cut_run(index, lane, progress, text=True))
        return (yield from self._follow_file(index, lane, f"run-{index}", progress))

    def _follow_file(
        self,
        index: int,
        lane: int,
        name: str,
        progress: Callable[[int, int], None] | None,
        piece: int | None = None,
    ) -> Generator[str, None, RunDone]:
        """The text of file ``name`` of the output folder while a worker writes it; returns
        run ``index`` (or its piece ``piece``) once it is done."""
        assert self._folder is not None, "not started"
        path = os.path.join(self._folder, name)
        key = index if piece is None else (index, piece)
        text: TextIO | None = None
        rest = ""
        try:
            while True:
                finished = self._poll(key, lane, progress, 0.05)
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
        done = self._done.pop(index) if piece is None else self._pieces.pop((index, piece))
        if text is None:  # done before it was seen: read it whole
            yield from read_chunks(done.path)
        elif rest:
            yield rest
        return done

    def _cut_run(
        self,
        index: int,
        lane: int,
        progress: Callable[[int, int], None] | None,
        *,
        text: bool,
    ) -> Generator[str, None, RunDone]:
        """The text (when ``text``) of run ``index``, cut into pieces, its pieces joined in
        order; returns the run, its pieces' results merged.

        The first piece's text comes as it is written; each later piece is read once
        it is done and its start is known to join the piece before it. Where a join
        fails, the parent decodes that part again (:meth:`_decode_again`).
        """
        plan = self._splits[lane]
        used: list[RunDone] = []
        done = yield from self._piece_text(index, lane, 0, progress, text)
        while True:
            used.append(done)
            info = done.piece
            assert info is not None
            if info.stopped is None:
                break
            after = None
            if info.joined:
                number = info.stopped + 1
                while not self._poll((index, number), lane, progress, 0.5):
                    pass
                after = self._pieces.pop((index, number))
                assert after.piece is not None
                if not after.piece.start_ok:
                    os.unlink(after.path)
                    after = None
            if after is None:
                after = self._decode_again(index, lane, plan, info)
            if text:
                yield from read_chunks(after.path)
            done = after
        issues: list[Issue] = []
        for part in used:
            issues.extend(i for i in part.issues if i not in issues)
        for part in used[:-1]:
            os.unlink(part.path)
        results = [part.result for part in used]
        result = self._merge(results, plan) if self._merge is not None else results
        last = used[-1]
        return RunDone(index, last.path, tuple(issues), result, last.worker)

    def _piece_text(
        self,
        index: int,
        lane: int,
        number: int,
        progress: Callable[[int, int], None] | None,
        text: bool,
    ) -> Generator[str, None, RunDone]:
        """The text of piece ``number`` of run ``index`` as it is written (when ``text``)."""
        if text:
            name = f"run-{index}-{number}"
            return (yield from self._follow_file(index, lane, name, progress, number))
        while not self._poll((index, number), lane, progress, 0.5):
            pass
        return self._pieces.pop((index, number))

    def _decode_again(self, index: int, lane: int, plan: SplitPlan, info: PieceInfo) -> RunDone:
        """Decode, here and serially, what follows a piece whose join failed: from where
        that piece started, silent up to its last packet, on to a gate where the states
        agree again (or to the end of the run)."""
        assert self._folder is not None, "not started"
        if self._session is None:
            self._session = Session(self._trace, self._options)
        session = self._session
        _, name = self._where[lane]
        run = next(
            r for r in session.open_buffer(self._trace.buffer(name)).runs if r.trace_id == lane
        )
        assert info.last is not None
        again = fallback_run(run, plan, info.start, info.last)
        self._fallbacks += 1
        path = os.path.join(self._folder, f"again-{index}-{self._fallbacks}")
        result = self._work(session, again, path, lambda done: None)
        issues = tuple(session.new_issues())
        return RunDone(index, path, issues, result, os.getpid(), _piece_info(info.number, again))

    @property
    def decoded_again(self) -> int:
        """How many parts of cut runs the parent decoded again (joins that failed)."""
        return self._fallbacks

    def _poll(
        self,
        index: int | tuple[int, int],
        lane: int,
        progress: Callable[[int, int], None] | None,
        timeout: float,
    ) -> bool:
        """Take the workers' messages for up to ``timeout`` seconds; whether run ``index``
        (or piece ``(index, number)``) is done. Raises the exception of a worker of
        ``lane`` that failed."""
        while index not in (self._done if isinstance(index, int) else self._pieces):
            if lane in self._failed:
                raise self._failed[lane]
            try:
                kind, who, payload = self._queue.get(timeout=timeout)
            except queue.Empty:
                self._check_alive()
                return False
            if kind == "done":
                self._done[payload.index] = payload
            elif kind == "piece":
                self._pieces[payload.index, payload.piece.number] = payload
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


PROGRESS_STEP = 256 * 1024
"""Bytes of a stream between two progress reports (at most): four per 1 MiB block of the
capture layer. (Each piece is a window the reader starts again: at 64 KiB, a PTM
stream of 27 MB took 0.45 s more to decode than read whole, at 1 MiB 0.1 s.)"""


def watch_progress(run: SourceRun, progress: Progress) -> SourceRun:
    """A copy of ``run`` whose stream tells ``progress`` where in its buffer the reader is
    (the capture index after each block it takes)."""
    return replace(run, stream=_ProgressStream(run.stream, progress))


class _ProgressStream(WrappedStream):
    """A stream that reports the capture index reached after each piece a reader takes.

    The capture layer's blocks (1 MiB) are handed on in pieces of at most
    :data:`PROGRESS_STEP` bytes, so that a bar moves on a capture of one block.
    """

    __slots__ = ("_progress",)

    def __init__(self, inner: Stream, progress: Progress) -> None:
        super().__init__(inner)
        self._progress = progress

    def blocks(self) -> Iterator[Stream]:
        """The inner stream's blocks in pieces; after each, the capture index of its end."""
        progress = self._progress
        for block in self._inner.blocks():
            for piece in block.pieces(PROGRESS_STEP):
                yield piece
                n = len(piece.data)
                if n:
                    progress(piece.offset_at(n - 1) + 1)
