"""Replaying a corpus with several jobs: each job a process of its own that makes its own adapters
from the adapter's name, so that reading, replaying and judging traces (Python, bound to one
core per process) run on every core, next to the implementations' own processes.

Results come back in corpus order whatever the number of jobs, so reports are the same bytes;
with `record`, each with the implementation's answers (conformance/certify/playback.py).

Each job has a pipe of its own, shared with no one: a job killed at any point (by a signal to the
process group, by the kernel) can leave no lock held and no half-written message in another's
way, so an interrupt always ends the run at once, and a job that dies costs the one trace it was
replaying (an error verdict) and is replaced.
"""

import collections
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

from adapters.contract import Adapter
from adapters.process_lifetime import die_with_parent
from adapters.registry import adapter_factory
from conformance.certify.playback import Recording, replay_recorded
from conformance.certify.replay import ERROR, TraceResult, replay_file

TRACES_PER_JOB = 16  # a job replays at least this many traces: fewer jobs for a small corpus
CHUNK = 4  # traces handed to a job at a time; a job holds at most two chunks, so it never waits for the next
STOP_GRACE_SECONDS = 2.0  # how long stopping jobs may take to stop their implementations' processes before they are killed
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # Ctrl-C, and how kill and a CI timeout stop a process

Replayed = tuple[TraceResult, str, Recording | None]  # a trace's result, what the implementation said it is, its answers


def replay_all(
    make_adapter: Callable[[], Adapter], files: list[Path], verify: bool, jobs: int, record: bool = False
) -> Iterator[Replayed]:
    """Every trace's result, in the order of `files`, with what the implementation said it is
    ("" if nothing) and, with `record`, its recorded answers (else None). With more than one
    job, `make_adapter` must come from adapters.registry.adapter_factory: its `origin` is how
    the jobs make the same adapters."""
    jobs = max(1, min(jobs, len(files) // TRACES_PER_JOB))
    if jobs == 1:
        for path in files:
            result, recording = _replayed(make_adapter, path, verify, record)
            yield result, getattr(make_adapter, "implementation", ""), recording
        return
    origin = getattr(make_adapter, "origin", None)
    if origin is None:
        raise TypeError("replaying with several jobs needs an adapter factory from adapters.registry.adapter_factory")
    team = Jobs(origin, verify, record)
    try:
        yield from team.replay(files, jobs)
    except BaseException:
        team.stop(at_once=True)  # an interrupt, a consumer that stopped early, a job's failure
        raise
    team.stop(at_once=False)


class Job:
    """A job's process and the parent's end of its pipe, with the traces handed to it and not yet answered."""

    def __init__(self, process: multiprocessing.Process, connection: multiprocessing.connection.Connection) -> None:
        self.process = process
        self.connection = connection
        self.pending: collections.deque[tuple[int, Path]] = collections.deque()


class Jobs:
    def __init__(self, origin: tuple[str, float], verify: bool, record: bool) -> None:
        self.origin = origin
        self.verify = verify
        self.record = record
        self.jobs: list[Job] = []

    def start(self) -> Job:
        """Fork a job. It is forked with kraftcheck's handlers, which turn SIGINT and SIGTERM into a
        KeyboardInterrupt and a traceback per job: both signals wait, blocked, until it has set its own."""
        context = multiprocessing.get_context("fork")  # a job starts in milliseconds, everything imported
        mine, theirs = context.Pipe()
        foreign = [job.connection for job in self.jobs] + [mine]
        process = context.Process(target=_job_main, args=(self.origin, self.verify, self.record, theirs, os.getpid(), foreign), daemon=True)
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        theirs.close()  # the job's alone: when it dies, the parent reads end of file
        job = Job(process, mine)
        self.jobs.append(job)
        return job

    def replay(self, files: list[Path], count: int) -> Iterator[Replayed]:
        waiting = collections.deque(enumerate(files))  # not yet handed to a job
        answered: dict[int, Replayed] = {}
        for _ in range(count):
            self.start()
        following = 0
        while following < len(files):
            for job in self.jobs:
                while waiting and len(job.pending) < CHUNK:
                    chunk = [waiting.popleft() for _ in range(min(CHUNK, len(waiting)))]
                    job.pending.extend(chunk)
                    with contextlib.suppress(OSError):  # a job that died: its end of file is read below
                        job.connection.send(chunk)
            ready = multiprocessing.connection.wait([job.connection for job in self.jobs if job.pending])
            for connection in ready:
                job = next(job for job in self.jobs if job.connection is connection)
                try:
                    message = connection.recv()
                except (EOFError, OSError):  # died, perhaps in the middle of a message
                    index, path = job.pending.popleft()
                    answered[index] = (self.died(job, path), "", None)
                    waiting.extendleft(reversed(job.pending))
                    self.jobs.remove(job)
                    self.start()
                    continue
                if isinstance(message, BaseException):
                    raise message
                index, replayed = message
                job.pending.popleft()
                answered[index] = replayed
            while following in answered:
                yield answered.pop(following)
                following += 1

    def died(self, job: Job, path: Path) -> TraceResult:
        """The trace a job was replaying when it died: an error, with what ended the job."""
        job.connection.close()
        job.process.join(STOP_GRACE_SECONDS)
        code = job.process.exitcode
        how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited unexpectedly (exit code {code})"
        failure = f"the job replaying this trace (pid {job.process.pid}) {how}; the other traces were replayed by another job"
        return TraceResult(trace=str(path), name=path.stem, node=-1, steps=0, steps_run=0, verdict=ERROR, passed=False, failure=failure)

    def stop(self, at_once: bool) -> None:
        """Close the pipes, which ends idle jobs once they have stopped their implementations'
        processes; after an interrupt or a failure, tell busy ones to stop too (SIGTERM). Kill
        those still there when the grace is over; reap them all."""
        for job in self.jobs:
            job.connection.close()
            if at_once and job.process.is_alive():
                job.process.terminate()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for job in self.jobs:
            job.process.join(max(0.0, deadline - time.monotonic()))
            if job.process.is_alive():
                job.process.kill()
                job.process.join()


def _job_main(
    origin: tuple[str, float], verify: bool, record: bool, connection: multiprocessing.connection.Connection, parent: int, foreign: list
) -> None:
    """A job: die with kraftcheck, leave Ctrl-C to it, unwind on SIGTERM (which stops its
    implementations' processes), then replay the traces it is handed until its pipe closes.
    `foreign` are the parent's pipe ends the fork copied: closed, so that only the parent holds them."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_quietly)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    for end in foreign:
        end.close()
    try:
        factory, failure = adapter_factory(*origin), None
    except Exception as error:  # noqa: BLE001 - e.g. an adapter's options refused: the parent raises it as it is
        factory, failure = None, error
    try:
        while (chunk := _received(connection)) is not None:
            for index, path in chunk:
                try:
                    if failure is not None:
                        raise failure
                    result, recording = _replayed(factory, path, verify, record)
                    message = (index, (result, factory.implementation, recording))
                except Exception as error:  # noqa: BLE001 - a fault in kraftcheck itself, or no adapters: the parent raises it
                    message = _crossing(error)
                if not _sent(connection, message):
                    return
    finally:
        if factory is not None:
            factory.close()


def _received(connection: multiprocessing.connection.Connection) -> list[tuple[int, Path]] | None:
    """The next chunk of traces, or None once the parent has closed the pipe (done, or gone)."""
    try:
        return connection.recv()
    except (EOFError, OSError):
        return None


def _sent(connection: multiprocessing.connection.Connection, message: object) -> bool:
    """Whether the parent could be told: False if it has closed the pipe (interrupted, or gone)."""
    try:
        connection.send(message)
    except OSError:
        return False
    return True


def _crossing(error: BaseException) -> BaseException:
    """An exception for the parent to raise: itself if it can cross the pipe, else its traceback."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - an exception that cannot be pickled, or not rebuilt
        return RuntimeError("".join(traceback.format_exception(error)))
    return error


def _exit_quietly(signum: int, frame: object) -> None:
    """A job's SIGTERM (from stop(), or one to the process group): unwind, which stops its
    implementations' processes, and exit, with no traceback: multiprocessing prints none for SystemExit."""
    raise SystemExit(128 + signum)


def _replayed(make_adapter: Callable[[], Adapter], path: Path, verify: bool, record: bool) -> tuple[TraceResult, Recording | None]:
    return replay_recorded(make_adapter, path, verify) if record else (replay_file(make_adapter, path, verify), None)
