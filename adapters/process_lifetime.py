"""No process outlives kraftcheck: children that die with it, and process trees killed whole.

Two mechanisms, for two kinds of process (both need Linux; elsewhere they do nothing):

- `die_with_parent`, run in a child first thing (a worker, or `preexec_fn` before an exec),
  asks the kernel for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG), by SIGKILL too.
  Strictly, when the parent's thread that started it ends: start such children from a thread
  that outlives them. The kernel clears the request in the child's own children.
- A `ProcessTree` marks every process started through it with a variable in its environment,
  which fork, exec, setsid() and double forks all keep, so `kill` finds and kills the whole
  tree, an implementation that daemonized (a new session, reparented to init) included; parent
  pids cannot tell, they are lost when a process is reparented. A guard process, started with
  the first tree, holds the read end of a pipe only kraftcheck writes: when kraftcheck ends,
  however (SIGKILL too), the pipe reaches end of file and the guard kills every tree kraftcheck
  left, then exits.
"""

import atexit
import contextlib
import ctypes
import functools
import itertools
import os
import secrets
import signal
import subprocess
import sys
import time

LINUX = sys.platform == "linux"
MARKER = "KRAFTCHECK_PROCESS_TREE"  # the environment variable; its value is "RUN/TREE", a run being one kraftcheck process
KILL_PATIENCE_SECONDS = 2.0  # how long `kill_marked` goes on killing processes that fork meanwhile

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if LINUX else None
_run = f"{os.getpid()}-{secrets.token_hex(6)}"
_trees = itertools.count(1)
_guard: subprocess.Popen | None = None


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


def marked(marker: str) -> list[int]:
    """The live processes whose environment carries `marker`, or a marker below it (`marker/...`)."""
    exact = f"{MARKER}={marker}".encode()
    below = exact + b"/"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                environment = file.read()  # empty for a zombie
        except OSError:  # gone meanwhile, or another user's
            continue
        if any(variable == exact or variable.startswith(below) for variable in environment.split(b"\0")):
            found.append(int(entry))
    return found


def kill_marked(marker: str) -> None:
    """SIGKILL every process carrying `marker`, again until none is left: one may fork meanwhile."""
    deadline = time.monotonic() + KILL_PATIENCE_SECONDS
    while (found := marked(marker)) and time.monotonic() < deadline:
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


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


class ProcessTree:
    """The processes started through `popen` and all their descendants, killed as one by `kill`."""

    def __init__(self) -> None:
        if LINUX and _guard is None:
            _start_guard()
        self.marker = f"{_run}/{next(_trees)}"

    def popen(self, argv: list[str], *, environment: dict[str, str] | None = None, **options: object) -> subprocess.Popen:
        """subprocess.Popen, the process marked as the tree's and dying with kraftcheck; `environment`
        adds to kraftcheck's own."""
        environment = {**os.environ, **(environment or {}), MARKER: self.marker}
        return subprocess.Popen(argv, env=environment, preexec_fn=functools.partial(die_with_parent, os.getpid()), **options)

    def kill(self) -> None:
        """Kill every process of the tree that is still alive, wherever it went."""
        if LINUX:
            kill_marked(self.marker)


if __name__ == "__main__":  # the guard: wait for the end of file that kraftcheck's end brings, then kill what it left
    sys.stdin.buffer.read()
    kill_marked(sys.argv[1])
