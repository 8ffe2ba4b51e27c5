"""No process outlives kraftcheck: the sharded engine's workers and an adapter's processes, an
implementation that daemonizes included, end with it however it ends (SIGTERM, SIGKILL), and an
interrupted check still prints what it explored. Real processes; the process table (/proc) is
the witness. Every wait is bounded, and whatever a test starts is killed when it ends."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.process_lifetime import ProcessTree

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; the mechanisms are Linux's")

ROOT = Path(__file__).resolve().parents[2]
TRACE = sorted((ROOT / "traces").glob("*.jsonl"))[0]
WAIT_SECONDS = 10.0
FAULTS_DISTINCT = 2_699_561  # the faults configuration's states, pinned in tests/test_check_configs.py

# A node that first leaves processes behind, and records their pids and its own: a daemon (double
# fork, setsid(): a session and a parent of its own), and two strays with an empty environment
# (`env -i`), so without the tree's mark, in the node's session: a child in a process group of its
# own, and a grandchild of a double fork. Then it hangs (--hang) or refuses every command but stop.
DAEMONIZING_NODE = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    from pathlib import Path

    here = Path(__file__).parent
    sleeping = [sys.executable, "-c", "import time; time.sleep(60)", f"{here}/"]  # named by the test's directory
    ready, up = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            (here / f"daemon-{os.getpid()}").touch()
            os.write(up, b"up")
            time.sleep(60)
        os._exit(0)
    os.read(ready, 2)
    stray = subprocess.Popen(sleeping, env={}, process_group=0)  # returns once it runs the command
    (here / f"stray-{stray.pid}").touch()
    execed, exec_closes = os.pipe()  # close-on-exec: its end of file tells that the grandchild runs the command
    if os.fork() == 0:
        if os.fork() == 0:
            (here / f"stray-{os.getpid()}").touch()
            os.execve(sys.executable, sleeping, {})
        os._exit(0)
    os.close(exec_closes)
    os.read(execed, 1)
    (here / f"node-{os.getpid()}").touch()
    if "--hang" in sys.argv:
        time.sleep(60)
    for line in sys.stdin:
        if json.loads(line)["command"] == "stop":
            print(json.dumps({"ok": True}), flush=True)
            break
        print(json.dumps({"ok": False, "error": "this node only daemonizes"}), flush=True)
    """
)


def stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, then the parent pid), None once gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].decode().split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """Running or sleeping: a zombie has ended, only its exit status is left."""
    fields = stat(pid)
    return fields is not None and fields[0] != "Z"


def pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def children(parent: int) -> list[int]:
    return [pid for pid in pids() if (fields := stat(pid)) and int(fields[1]) == parent and fields[0] != "Z"]


def cpu_seconds(pid: int) -> float:
    fields = stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def argv(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def mentioning(text: str) -> list[int]:
    """The live processes whose command line contains `text`."""
    return [pid for pid in pids() if text in argv(pid) and alive(pid)]


def wait_for(condition: Callable[[], object], what: str) -> object:
    """Poll until `condition()` is true (and return it), for at most WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting after {WAIT_SECONDS:g} s for {what}")
        time.sleep(0.05)
    return value


def recorded(directory: Path, kind: str) -> list[int]:
    """The pids the daemonizing node wrote down, `node`, `daemon` or `stray`."""
    return [int(path.name.split("-")[1]) for path in directory.glob(f"{kind}-*")]


class Started:
    """What a test starts: kraftcheck processes, and everything whose command line names the
    test's directory (workers, the node, its daemon). All of it is killed when the test ends."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.marker = f"{directory}/"
        self.processes: list[subprocess.Popen] = []
        self.guards: list[int] = []

    def kraftcheck(self, *args: str) -> subprocess.Popen:
        # SIGINT as a terminal delivers it, even if the test runner was started with it ignored; in a
        # session of its own, a process group a test can signal as a terminal does. Its temporary
        # files go to the test's directory: a killed coordinator cannot remove its own.
        process = subprocess.Popen(
            [sys.executable, "-m", "conformance.cli", *args],
            cwd=ROOT,
            env={**os.environ, "TMPDIR": str(self.directory)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.processes.append(process)
        return process

    def cleanup(self) -> None:
        """Kill it all first: a stray holding kraftcheck's stdout would block reading it to the end."""
        for process in self.processes:
            process.kill()
        for pid in mentioning(self.marker) + [pid for pid in self.guards if "process_lifetime" in argv(pid)]:
            os.kill(pid, signal.SIGKILL)
        for process in self.processes:
            process.communicate(timeout=WAIT_SECONDS)


@pytest.fixture
def started(tmp_path):
    started = Started(tmp_path)
    yield started
    started.cleanup()


def exploring_workers(check: subprocess.Popen) -> list[int] | None:
    """The two workers of a command (a sharded check's, certify's jobs), once both have spent CPU time at work."""
    workers = children(check.pid)
    return workers if len(workers) == 2 and all(cpu_seconds(pid) >= 0.3 for pid in workers) else None


def test_sigterm_stops_a_sharded_check_with_a_partial_summary_and_reaps_its_workers(started, tmp_path):
    check = started.kraftcheck("check", "--config", "faults", "--workers", "2", "--json", "--out", str(tmp_path / "out"))
    workers = wait_for(lambda: exploring_workers(check), "two workers exploring")
    check.send_signal(signal.SIGTERM)
    out, err = check.communicate(timeout=WAIT_SECONDS)
    assert check.returncode == 130, err
    assert not [pid for pid in workers if alive(pid)], "the coordinator exited before its workers"
    data = json.loads(out)
    assert data["interrupted"] is True and data["complete"] is False
    assert 0 < data["distinct_states"] < FAULTS_DISTINCT and data["depth"] > 0 and data["workers"] == 2
    assert set(data["properties"].values()) == {"unknown (interrupted)"} and data["violations"] == []
    assert "interrupted" in err and "Traceback" not in err


def test_sigkill_of_a_sharded_check_takes_its_workers_with_it(started, tmp_path):
    check = started.kraftcheck("check", "--config", "faults", "--workers", "2", "--out", str(tmp_path / "out"))
    workers = wait_for(lambda: exploring_workers(check), "two workers exploring")
    check.kill()
    check.wait(timeout=WAIT_SECONDS)
    wait_for(lambda: not [pid for pid in workers if alive(pid)], "the workers to die with their coordinator")
    # What it could not remove (its parent links), the next search does.
    left = list(tmp_path.glob(f"kraftcheck-search-{check.pid}-*"))
    assert len(left) == 1 and list(left[0].rglob("parents-*.npy"))
    following = started.kraftcheck("check", "--config", "smoke", "--workers", "1", "--out", str(tmp_path / "out"))
    assert following.wait(timeout=WAIT_SECONDS) == 0
    assert not left[0].exists()


def test_ctrl_c_during_an_in_process_check_prints_the_partial_summary(started, tmp_path):
    check = started.kraftcheck("check", "--config", "faults", "--workers", "1", "--out", str(tmp_path / "out"))
    wait_for(lambda: cpu_seconds(check.pid) >= 2.0, "the check to be exploring")  # well past its imports
    check.send_signal(signal.SIGINT)
    out, err = check.communicate(timeout=WAIT_SECONDS)
    assert check.returncode == 130, err
    assert re.search(r"exhaustive\s+no \(interrupted\)", out), out
    distinct = int(re.search(r"distinct states\s+([\d,]+)", out).group(1).replace(",", ""))
    assert 0 < distinct < FAULTS_DISTINCT
    assert "SAFE-1" in out and "unknown (interrupted)" in out and "holds" not in out
    assert "interrupted" in err and "Traceback" not in err


def write_node(directory: Path) -> Path:
    script = directory / "daemonizing_node.py"
    script.write_text(DAEMONIZING_NODE)
    return script


def test_certify_kills_a_daemonizing_implementation_when_it_ends(started, tmp_path):
    node = write_node(tmp_path)
    certify = started.kraftcheck("certify", "--adapter", f"subprocess:{sys.executable} {node}", "--corpus", str(TRACE), "--out", str(tmp_path / "out"), "--json")
    out, err = certify.communicate(timeout=WAIT_SECONDS)
    assert certify.returncode == 1, err
    assert json.loads(out)["failed"] == 1  # the trace went through the node, which refused it
    daemons, nodes, strays = recorded(tmp_path, "daemon"), recorded(tmp_path, "node"), recorded(tmp_path, "stray")
    assert len(daemons) == 1 and len(nodes) == 1 and len(strays) == 2
    assert not [pid for pid in daemons + nodes + strays if alive(pid)]
    assert mentioning(str(tmp_path)) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_certify_leaves_no_implementation_process(started, tmp_path, signum):
    node = write_node(tmp_path)
    adapter = f"subprocess:{sys.executable} {node} --hang"
    certify = started.kraftcheck("certify", "--adapter", adapter, "--step-timeout", "60", "--corpus", str(TRACE), "--out", str(tmp_path / "out"))
    wait_for(lambda: recorded(tmp_path, "node"), "the node and what it leaves behind to start")
    left = recorded(tmp_path, "daemon") + recorded(tmp_path, "node") + recorded(tmp_path, "stray")
    guards = [pid for pid in children(certify.pid) if "process_lifetime" in argv(pid)]
    started.guards.extend(guards)
    assert len(guards) == 1 and len(left) == 4 and all(alive(pid) for pid in left)
    certify.send_signal(signum)
    certify.communicate(timeout=WAIT_SECONDS)
    assert certify.returncode == (130 if signum == signal.SIGTERM else -signal.SIGKILL)
    wait_for(lambda: not [pid for pid in left + guards if alive(pid)], "the node, what it left behind and the guard to end")
    assert mentioning(str(tmp_path)) == []


def test_a_process_tree_kills_its_processes_without_its_mark(started, tmp_path):
    """Strays with an empty environment are the tree's by their session (or an ancestor in it)."""
    tree = ProcessTree()
    node = tree.popen([sys.executable, str(write_node(tmp_path)), "--hang"])
    started.processes.append(node)
    wait_for(lambda: recorded(tmp_path, "node"), "the node and what it leaves behind to start")
    strays = recorded(tmp_path, "stray")
    assert len(strays) == 2 and all(alive(pid) and os.getsid(pid) == node.pid for pid in strays)
    assert all(b"KRAFTCHECK_PROCESS_TREE" not in Path(f"/proc/{pid}/environ").read_bytes() for pid in strays)
    tree.kill()
    node.wait(timeout=WAIT_SECONDS)
    assert not [pid for pid in recorded(tmp_path, "daemon") + strays if alive(pid)]


def doubled_corpus(directory: Path) -> Path:
    """The shipped traces twice over, linked: a corpus that takes two jobs several seconds."""
    corpus = directory / "corpus"
    corpus.mkdir()
    for trace in sorted(TRACE.parent.glob("*.jsonl")):
        for copy in ("a", "b"):
            (corpus / f"{copy}-{trace.name}").symlink_to(trace)
    return corpus


@pytest.mark.parametrize(
    "signum, group",
    [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["Ctrl-C to the process group", "SIGTERM to kraftcheck", "SIGTERM to the process group"],
)
def test_an_interrupted_certify_with_jobs_prints_one_line_and_no_traceback(started, tmp_path, signum, group):
    corpus = doubled_corpus(tmp_path)
    certify = started.kraftcheck("certify", "--adapter", "reference", "--jobs", "2", "--corpus", str(corpus), "--out", str(tmp_path / "out"))
    jobs = wait_for(lambda: exploring_workers(certify), "two jobs replaying")
    (os.killpg if group else os.kill)(certify.pid, signum)
    _, err = certify.communicate(timeout=WAIT_SECONDS)
    assert certify.returncode == 130, err
    assert err == "kraftcheck: interrupted\n"
    wait_for(lambda: not [pid for pid in jobs if alive(pid)], "the jobs to end")


@pytest.mark.parametrize(
    "signum, group",
    [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGKILL, False)],
    ids=["Ctrl-C to the process group", "SIGTERM to kraftcheck", "SIGKILL to kraftcheck"],
)
def test_an_interrupted_corpus_generation_with_workers_leaves_no_process_and_writes_nothing(started, tmp_path, signum, group):
    """`traces generate --workers 2`: each search in a worker of its own. Stopped, kraftcheck says
    one line (killed, nothing), its workers end with it, and no corpus is written."""
    out = tmp_path / "corpus"
    generate = started.kraftcheck("traces", "generate", "--profile", "kafka-4.3", "--workers", "2", "--out", str(out))
    workers = wait_for(lambda: exploring_workers(generate), "two searches running")
    (os.killpg if group else os.kill)(generate.pid, signum)
    _, err = generate.communicate(timeout=WAIT_SECONDS)
    if signum == signal.SIGKILL:
        assert generate.returncode == -signal.SIGKILL
    else:
        assert generate.returncode == 130 and err == "kraftcheck: interrupted\n", err
    wait_for(lambda: not [pid for pid in workers if alive(pid)], "the workers to end")
    assert not out.exists()


def test_a_certify_job_killed_costs_the_trace_it_replayed_and_another_job_replays_the_rest(started, tmp_path):
    """A job has a pipe of its own: its death leaves nothing half-sent in another's way."""
    corpus = doubled_corpus(tmp_path)
    out = tmp_path / "out"
    certify = started.kraftcheck("certify", "--adapter", "reference", "--jobs", "2", "--json", "--corpus", str(corpus), "--out", str(out))
    killed = wait_for(lambda: exploring_workers(certify), "two jobs replaying")[0]
    os.kill(killed, signal.SIGKILL)
    stdout, err = certify.communicate(timeout=300)
    assert certify.returncode == 1, err
    summary = json.loads(stdout)
    traces = len(list(corpus.iterdir()))
    assert summary["traces"] == traces and summary["verdicts"] == {"conforms": traces - 1, "departs": 0, "not applicable": 0, "error": 1}
    [errored] = [result for result in json.loads((out / "report.json").read_text())["results"] if result["verdict"] == "error"]
    assert errored["failure"].startswith(f"the job replaying this trace (pid {killed}) was killed by SIGKILL")


@pytest.mark.parametrize("forgotten", [False, True], ids=["a live tree's session", "a killed tree's session"])
def test_the_guard_kills_the_sessions_it_was_told_of_and_not_yet_told_to_forget(started, tmp_path, forgotten):
    """A killed tree's session id may name another's processes later: the guard must forget it."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"{tmp_path}/"], env={}, start_new_session=True)
    started.processes.append(sleeper)
    lines = f"{sleeper.pid}\n-{sleeper.pid}\n" if forgotten else f"{sleeper.pid}\n"
    guard = subprocess.run(
        [sys.executable, "-I", str(ROOT / "adapters" / "process_lifetime.py"), "no-such-run"], input=lines.encode(), timeout=WAIT_SECONDS
    )
    assert guard.returncode == 0
    assert alive(sleeper.pid) == forgotten
