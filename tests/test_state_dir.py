"""A search kept on disk (check --state-dir) finds what the in-memory one finds, and a search
killed outright (SIGKILL, workers and all) resumes from its last completed level (check --resume)
to the same counts and counterexamples."""

import functools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conformance import cli
from conformance.explore.check import counterexample_steps, system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import explore
from conformance.explore.sharded import explore_sharded
from conformance.explore.kept import ResumeError, locked
from conformance.explore.workspace import read_checkpoint

# 2 voters, 4 elections, no loss: exhausted at 146,552 states, depth 30 (tests/test_check_configs.py).
MATCHED_TLC = ["--config", "tlc-kraft-if4", "--voters", "2", "--max-elections", "4", "--max-epoch", "4", "--no-loss", "--profile", "faulty-no-leader-change", "--max-in-flight", "6", "--no-every-choice"]
MATCHED_TLC_COUNTS = (146_552, 30)
VIOLATED = resolve("faults", {"profile": "faulty-truncate-to-hw"})  # SAFE-9 after 9 steps


def search(config, workers: int, **kept):
    if workers == 1:
        return explore(system_for(config), **kept)
    return explore_sharded(functools.partial(system_for, config), workers, **kept)


def summary(result) -> tuple:
    paths = [(c.violation.rule, [action for action, _ in c.path]) for c in result.counterexamples]
    return result.distinct, result.generated, result.depth, result.complete, paths


@pytest.mark.parametrize("workers", [1, 2])
def test_a_search_kept_on_disk_finds_what_the_one_in_memory_finds(tmp_path, workers):
    in_memory = search(VIOLATED, workers)
    on_disk = search(VIOLATED, workers, state_dir=tmp_path / "kept")
    assert in_memory.counterexamples and in_memory.counterexamples[0].violation.rule == "SAFE-9"
    assert summary(on_disk) == summary(in_memory)
    assert read_checkpoint(tmp_path / "kept").distinct == on_disk.distinct


def kraftcheck(*args: str) -> subprocess.Popen:
    """The command line in its own process group, so that a kill takes its workers too."""
    command = [sys.executable, "-m", "conformance.cli", "check", *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def kill_after_level(process: subprocess.Popen, state_dir, level: int, timeout: float = 120.0) -> int:
    """SIGKILL the whole run once its checkpoint names `level` completed levels; the levels completed then."""
    checkpoint = state_dir / "search.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if checkpoint.exists() and json.loads(checkpoint.read_bytes())["checkpoint"]["completed"] >= level:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            wait_unlocked(state_dir)
            return read_checkpoint(state_dir).completed
        time.sleep(0.005)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    pytest.fail(f"the run ended before its checkpoint reached level {level}: {process.stderr.read().decode()[-500:]}")


def wait_unlocked(state_dir, timeout: float = 10.0) -> None:
    """Until the killed run's lock is gone with the last of its processes (its workers die a moment after it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with locked(state_dir):
                return
        except ResumeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_killed_search_resumes_from_its_last_completed_level(tmp_path, capsys, workers):
    kept = tmp_path / "kept"
    process = kraftcheck(*MATCHED_TLC, "--workers", workers, "--state-dir", str(kept), "--json", "--out", str(tmp_path))
    completed = kill_after_level(process, kept, level=12)
    assert 12 <= completed < MATCHED_TLC_COUNTS[1]  # killed mid-way
    assert cli.main(["check", "--resume", str(kept), "--json", "--out", str(tmp_path)]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["complete"] and resumed["workers"] == int(workers)
    assert (resumed["distinct_states"], resumed["depth"]) == MATCHED_TLC_COUNTS
    assert set(resumed["properties"].values()) == {"holds"}


def test_a_stopped_search_with_a_violation_resumes_to_the_same_counterexample(tmp_path, capsys):
    """Stopped between levels by --max-states (a kill's timing would race this short search), then resumed."""
    system = system_for(VIOLATED)
    expected = explore(system)
    steps = json.loads(json.dumps(counterexample_steps(system, expected.counterexamples[0].path)))
    kept = tmp_path / "kept"
    first = ["check", "--config", "faults", "--profile", "faulty-truncate-to-hw", "--workers", "1", "--max-states", "100"]
    assert cli.main([*first, "--state-dir", str(kept), "--out", str(tmp_path)]) == 0
    assert 2 <= read_checkpoint(kept).completed < expected.depth
    capsys.readouterr()
    assert cli.main(["check", "--resume", str(kept), "--json", "--out", str(tmp_path)]) == 1
    resumed = json.loads(capsys.readouterr().out)
    assert (resumed["distinct_states"], resumed["generated_states"], resumed["depth"]) == (expected.distinct, expected.generated, expected.depth)
    saved = [json.loads(line) for line in (tmp_path / "counterexample-faults-SAFE-9.jsonl").read_text().splitlines()]
    assert saved[1:] == steps


@pytest.mark.parametrize(
    "args, message",
    [
        (["--config", "smoke", "--state-dir", "{kept}"], "not a new or empty directory"),
        (["--resume", "{empty}"], "no search kept there"),
        (["--resume", "{kept}", "--voters", "3"], "--voters cannot be given with it"),
        (["--resume", "{kept}", "--workers", "2"], "--workers cannot be given with it"),
        (["--config", "smoke", "--state-dir", "{fresh}", "--engine", "spark"], "--state-dir keeps an in-process search on disk"),
        (["--config", "smoke", "--state-dir", "{file}"], "not a new or empty directory"),
        (["--resume", "{begun}"], "no search to resume (no search.json"),
    ],
)
def test_state_directories_that_cannot_be_used_are_refused(tmp_path, capsys, args, message):
    kept, empty, begun = tmp_path / "kept", tmp_path / "empty", tmp_path / "begun"
    assert cli.main(["check", "--config", "smoke", "--state-dir", str(kept), "--out", str(tmp_path)]) == 0
    empty.mkdir()
    begun.mkdir()  # killed before its first level ended
    (begun / "check.json").write_bytes((kept / "check.json").read_bytes())
    (tmp_path / "file").write_text("mine")
    capsys.readouterr()
    places = {"kept": kept, "empty": empty, "begun": begun, "fresh": tmp_path / "fresh", "file": tmp_path / "file"}
    given = [a.format(**places) for a in args]
    assert cli.main(["check", *given, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / "file").read_text() == "mine"
    assert not (tmp_path / "fresh").exists()


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("damage", ["a table segment gone", "the frontier cut short"])
def test_a_damaged_state_directory_is_refused_with_the_file_named(tmp_path, capsys, workers, damage):
    kept = tmp_path / "kept"
    process = kraftcheck(*MATCHED_TLC, "--workers", workers, "--state-dir", str(kept), "--out", str(tmp_path))
    completed = kill_after_level(process, kept, level=8)
    if damage == "a table segment gone":  # the table: the search's, its workers' alike
        victim = next(kept.glob("seen-03-*.fps.npy"))
        victim.unlink()
    else:
        victim = (kept / "worker-1" if workers == "2" else kept) / f"states-{completed - 1}.bin"
        victim.write_bytes(victim.read_bytes()[:-5])
    capsys.readouterr()
    assert cli.main(["check", "--resume", str(kept), "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kraftcheck: damaged: ") and "Traceback" not in error
    assert (victim.name if damage == "the frontier cut short" else "seen-03-") in error


def test_a_search_removes_the_temporary_directories_of_searches_whose_process_is_gone(tmp_path, monkeypatch):
    """Only those named after a process that no longer runs: a running search's, and directories
    named otherwise, stay."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"kraftcheck-search-{gone.pid}-abc"
    running = tmp_path / f"kraftcheck-search-{os.getppid()}-abc"
    other = tmp_path / "kraftcheck-search-notapid"
    for directory in (stale, running, other):
        directory.mkdir()
        (directory / "parents-0.npy").write_bytes(b"links")
    explore(system_for(resolve("smoke", {})))
    assert not stale.exists() and running.exists() and other.exists()
    assert not list(tmp_path.glob(f"kraftcheck-search-{os.getpid()}-*"))  # its own, removed at its end
