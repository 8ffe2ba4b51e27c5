"""Replaying a corpus with several jobs: each job a process of its own that makes its own adapters
from the adapter's name, so that reading, replaying and judging traces (Python, bound to one
core per process) run on every core, next to the implementations' own processes.

Results come back in corpus order whatever the number of jobs, so reports are the same bytes;
with `record`, each with the implementation's answers (conformance/certify/playback.py).
"""

import functools
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from multiprocessing import util
from pathlib import Path

from adapters.contract import Adapter
from adapters.process_lifetime import die_with_parent
from adapters.registry import adapter_factory
from conformance.certify.playback import Recording, replay_recorded
from conformance.certify.replay import TraceResult, replay_file

TRACES_PER_JOB = 16  # a job replays at least this many traces: fewer jobs for a small corpus
CHUNK = 4  # traces handed to a job at a time: fewer round trips between the processes, in order all the same
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # Ctrl-C, and how kill, a CI timeout and pool.terminate() stop a process

_factory = None  # a job's adapter factory, made once by _open_adapters
_failure: BaseException | None = None  # why a job could not make it (raised by every replay, never by the initializer)


def replay_all(
    make_adapter: Callable[[], Adapter], files: list[Path], verify: bool, jobs: int, record: bool = False
) -> Iterator[tuple[TraceResult, str, Recording | None]]:
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
    # Forked: a job starts in milliseconds, everything imported (process_lifetime gives it a run of its own).
    # A job is forked with kraftcheck's handlers, which turn SIGINT and SIGTERM into a KeyboardInterrupt
    # and a traceback per job: both signals wait, blocked, until the job has set its own. The pool's
    # threads, which fork the jobs that replace any that die, keep them blocked.
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_open_adapters, initargs=(origin, os.getpid()))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    try:
        yield from pool.imap(functools.partial(_replay, verify=verify, record=record), files, chunksize=CHUNK)
    except BaseException:
        pool.terminate()  # an interrupt, a consumer that stopped early: the jobs' processes are killed, theirs die with them
        raise
    else:
        pool.close()  # the jobs end once idle, stopping their implementations' processes (their finalizer)
    finally:
        pool.join()


def _open_adapters(origin: tuple[str, float], parent: int) -> None:
    """A job's start: die with kraftcheck, leave Ctrl-C to it, end quietly on SIGTERM, make the
    adapter factory; then take the signals that came meanwhile."""
    global _factory, _failure
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_quietly)
    try:
        _factory = adapter_factory(*origin)
    except BaseException as error:  # noqa: BLE001 - an initializer that raises is restarted forever: report it per trace instead
        _failure = error
    else:
        util.Finalize(_factory, _factory.close, exitpriority=1)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _exit_quietly(signum: int, frame: object) -> None:
    """A job's SIGTERM (pool.terminate(), or one to the process group): unwind, which releases the
    locks the job holds on the pool's queues (a job killed holding one hangs pool.terminate())
    and stops its implementations' processes, and exit, with no traceback: multiprocessing
    prints none for SystemExit."""
    raise SystemExit(128 + signum)


def _replayed(make_adapter: Callable[[], Adapter], path: Path, verify: bool, record: bool) -> tuple[TraceResult, Recording | None]:
    return replay_recorded(make_adapter, path, verify) if record else (replay_file(make_adapter, path, verify), None)


def _replay(path: Path, verify: bool, record: bool) -> tuple[TraceResult, str, Recording | None]:
    if _failure is not None:
        raise _failure
    result, recording = _replayed(_factory, path, verify, record)
    return result, _factory.implementation, recording
