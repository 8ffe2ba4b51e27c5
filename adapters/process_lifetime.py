"""No process outlives kraftcheck: children that die with it, and process trees killed whole.

Two mechanisms, for two kinds of process (both need Linux; elsewhere they do nothing):

- `die_with_parent`, run in a child first thing (a worker, or `preexec_fn` before an exec),
  asks the kernel for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG), by SIGKILL too.
  Strictly, when the parent's thread that started it ends: start such children from a thread
  that outlives them. The kernel clears the request in the child's own children.
- A `ProcessTree` starts each of its roots in a session of its own and marks it with a variable
  in its environment. Its members are the processes that carry the mark (fork, exec, setsid()
  and double forks all keep it: a daemon in a session of its own, reparented to init), those in
  a root's session or process group (a child started with an empty environment, `env -i`), and
  the descendants of both; `kill` kills them all. Parent pids alone cannot tell, they are lost
  when a process is reparented. Linux reuses no pid while it is a live process's session or
  group id, so a session names the tree's processes as long as any of them lives; once `kill`
  has left none, the tree forgets its sessions. A guard process, started with the first tree,
  holds the read end of a pipe only kraftcheck writes: each root its session before its command
  runs, each killed tree its sessions to forget. When kraftcheck ends, however (SIGKILL too),
  the pipe reaches end of file and the guard kills every member of the trees kraftcheck left,
  then exits.
"""

import atexit
import collections
import contextlib
import ctypes
import functools
import itertools
import multiprocessing
import os
import secrets
import signal
import subprocess
import sys
import time
import typing
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TypeVar

LINUX = sys.platform == "linux"
MARKER = "KRAFTCHECK_PROCESS_TREE"  # the environment variable; its value is "RUN/TREE", a run being one kraftcheck process
KILL_PATIENCE_SECONDS = 2.0  # how long `kill_members` goes on killing processes that fork meanwhile

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if LINUX else None
_run = f"{os.getpid()}-{secrets.token_hex(6)}"
_trees = itertools.count(1)
_guard: subprocess.Popen | None = None
T = TypeVar("T")
R = TypeVar("R")


def _new_run() -> None:
    """A forked child (a replay job) is a run of its own: the trees it starts must not carry its
    parent's markers, nor share numbers with its siblings'; it starts its own guard when it needs one."""
    global _run, _trees, _guard
    _run = f"{os.getpid()}-{secrets.token_hex(6)}"
    _trees = itertools.count(1)
    _guard = None


os.register_at_fork(after_in_child=_new_run)


def die_with_parent(parent: int) -> None:
    """Be killed when `parent` (its pid, read before the fork) dies; call it in the child."""
    if not LINUX:
        return
    if _libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died before the request was made
        os.kill(os.getpid(), signal.SIGKILL)


def become_worker(parent: int) -> None:
    """Make a forked worker of `parent` (its pid, read before the fork) quiet to stop: it dies
    with its parent; a terminal's Ctrl-C, which reaches the whole process group, is the parent's
    to act on; SIGTERM (how the parent stops it) ends it at once, with no traceback."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


_forked: tuple[Callable, Sequence] = (lambda item: item, ())  # in a worker of forked_map: what it maps, inherited by the fork


def _adopt(parent: int, function: Callable, items: Sequence) -> None:
    global _forked
    become_worker(parent)
    _forked = (function, items)


def _call_forked(index: int) -> object:
    function, items = _forked
    return function(items[index])


def forked_map(function: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[R]:
    """`function` over `items`, in order, in `workers` forked processes at once (become_worker):
    the function and the items reach the processes by the fork, so they need not pickle (closures,
    loaded corpora); only indices go out and results come back. One worker: in this process."""
    if workers <= 1 or len(items) <= 1:
        yield from map(function, items)
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(min(workers, len(items)), initializer=_adopt, initargs=(os.getpid(), function, items)) as pool:
        yield from pool.imap(_call_forked, range(len(items)))


def _stat(pid: str) -> tuple[str, int, int, int] | None:
    """A process's state, parent pid, process group and session (/proc/PID/stat: the fields after
    its command name, which may hold any character), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])


def _carries(pid: str, marker: str) -> bool:
    """Whether the process's environment carries `marker`, or a marker below it (`marker/...`)."""
    exact = f"{MARKER}={marker}".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environment = file.read()
    except OSError:  # gone meanwhile, or another user's
        return False
    return any(variable == exact or variable.startswith(exact + b"/") for variable in environment.split(b"\0"))


def members(marker: str, sessions: Collection[int]) -> set[int]:
    """The live processes that carry `marker` (or a marker below it) or belong to one of
    `sessions` (as their session or process group), and all their descendants."""
    found: set[int] = set()
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (fields := _stat(entry)) is None:
            continue
        state, parent, group, session = fields
        if state == "Z":  # ended: only its exit status is left
            continue
        children[parent].append(int(entry))
        if group in sessions or session in sessions or _carries(entry, marker):
            found.add(int(entry))
    pending = list(found)
    while pending:
        for child in children[pending.pop()]:
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def kill_members(marker: str, sessions: Collection[int]) -> bool:
    """SIGKILL every member (see `members`), again until none is left (one may fork meanwhile) or
    patience runs out; whether none is left."""
    deadline = time.monotonic() + KILL_PATIENCE_SECONDS
    while found := members(marker, sessions):
        if time.monotonic() > deadline:
            return False
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    return True


def _start_guard() -> None:
    """Start the guard, in a session of its own so that a Ctrl-C or a kill of kraftcheck's process
    group does not end it first; at a normal exit, end its pipe and reap it."""
    global _guard
    _guard = subprocess.Popen(
        [sys.executable, "-I", __file__, _run], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    atexit.register(_stop_guard, _guard)


def _stop_guard(guard: subprocess.Popen) -> None:
    guard.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):  # it ends by itself once its last kills are done
        guard.wait(timeout=KILL_PATIENCE_SECONDS + 1)


def _guard_pipe() -> int | None:
    """The write end of the guard's pipe; None without a guard, or once kraftcheck, exiting, has closed it."""
    return _guard.stdin.fileno() if _guard is not None and not _guard.stdin.closed else None


def _tell_guard(pipe: int | None, sessions: list[int]) -> None:
    """Write session ids to the guard, a line each: a new root's, or minus a killed tree's (its ids
    are free for other processes now). A few bytes: one atomic write, whoever else writes; a guard
    someone killed is no reason to fail."""
    if pipe is not None and sessions:
        with contextlib.suppress(BrokenPipeError):
            os.write(pipe, "".join(f"{session}\n" for session in sessions).encode())


def _enter_tree(parent: int, guard: int | None) -> None:
    """Run in a tree's root before its command: die with kraftcheck, and tell the guard the root's
    session before anything in it runs."""
    die_with_parent(parent)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # Popen has set it to the default for the command: a write to a gone guard would kill the root
    _tell_guard(guard, [os.getpid()])
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)


class ProcessTree:
    """The processes started through `popen` and all that they start, killed as one by `kill`."""

    def __init__(self) -> None:
        if LINUX and _guard is None:
            _start_guard()
        self.marker = f"{_run}/{next(_trees)}"
        self.sessions: list[int] = []  # the roots' sessions, one per `popen`, until `kill` has emptied them

    def popen(self, argv: list[str], *, environment: dict[str, str] | None = None, **options: object) -> subprocess.Popen:
        """subprocess.Popen, the process a root of the tree: in a session of its own (so that a kill
        of its group reaches what it starts, a wrapper script's JVM), marked, known to the guard
        and dying with kraftcheck; `environment` adds to kraftcheck's own."""
        environment = {**os.environ, **(environment or {}), MARKER: self.marker}
        process = subprocess.Popen(
            argv, env=environment, start_new_session=True, preexec_fn=functools.partial(_enter_tree, os.getpid(), _guard_pipe()), **options
        )
        self.sessions.append(process.pid)
        return process

    def kill(self) -> None:
        """Kill every process of the tree that is still alive, wherever it went. Once none is left,
        its sessions are forgotten, here and by the guard: their ids may name others' processes."""
        if LINUX and kill_members(self.marker, self.sessions):
            _tell_guard(_guard_pipe(), [-session for session in self.sessions])
            self.sessions = []


def run_in_tree(argv: list[str], seconds: float, stdout: typing.IO[bytes] | None = None) -> tuple[int, str]:
    """Run `argv` to its end in a process tree of its own, killed whatever happens: its exit code
    and what it printed (its errors alone where `stdout` takes its output); TimeoutError past
    `seconds`."""
    tree = ProcessTree()
    try:
        process = tree.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if stdout is None else stdout, stderr=subprocess.STDOUT if stdout is None else subprocess.PIPE)
        output, errors = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{argv[0]} did not finish within {seconds:g} s") from None
    finally:
        tree.kill()
    return process.returncode, (output if stdout is None else errors).decode(errors="replace")


if __name__ == "__main__":  # the guard: follow the trees' sessions up to the end of file that kraftcheck's end brings, then kill what it left
    live: set[int] = set()
    for line in sys.stdin.buffer:
        session = int(line)
        if session > 0:
            live.add(session)
        else:
            live.discard(-session)
    kill_members(sys.argv[1], live)
