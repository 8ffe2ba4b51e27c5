"""The Spark engine (`check --engine spark`) gives the in-process engine's counts, verdicts and
counterexample files: on local[2] for any number of partitions, and on a standalone cluster of
two workers, one of them killed in the middle of the search.

Spark needs Java; without it these tests skip and say so.
"""

import contextlib
import functools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conformance import cli
from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import SearchInterrupted, explore
from conformance.explore.spark_engine import explore_spark
from conformance.spark.session import SparkOptions, SparkUnavailable, _check_executors, _failures_explained, _py4j_quiet, spark_session
from conformance.spark.standalone import StandaloneCluster

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH: Spark cannot start (scripts/bootstrap installs it)")

SMOKE = (1_041, 2_246, 21)  # distinct, generated, depth: the in-process engine's, pinned in tests/test_check_configs.py


@pytest.fixture(scope="module")
def spark():
    """One local[2] session for the module; kraftcheck's own commands run in it (as under spark-submit)."""
    with spark_session(SparkOptions("local[2]")) as run:
        yield run


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_counts_equal_the_in_process_engine_for_any_partitioning(spark, partitions):
    config = resolve("smoke", {})
    expected = explore(system_for(config))
    result = explore_spark(spark.session, functools.partial(system_for, config), spark.work, partitions=partitions)
    assert (result.distinct, result.generated, result.depth, result.complete) == (expected.distinct, expected.generated, expected.depth, True)
    assert (result.distinct, result.generated, result.depth) == SMOKE


def test_a_bounded_search_stops_where_the_in_process_one_does(spark):
    config = resolve("faults", {})
    expected = explore(system_for(config), max_states=5_000)
    result = explore_spark(spark.session, functools.partial(system_for, config), spark.work, partitions=2, max_states=5_000)
    assert (result.distinct, result.generated, result.depth, result.complete) == (expected.distinct, expected.generated, expected.depth, False)


def test_a_time_budget_on_spark_ends_at_a_level_boundary(spark):
    config = resolve("faults", {})
    timed = explore_spark(spark.session, functools.partial(system_for, config), spark.work, partitions=2, max_seconds=3.0)
    assert timed.stopped == "max-seconds" and not timed.complete and timed.depth >= 2
    expected = explore(system_for(config), max_states=timed.distinct)
    assert (timed.distinct, timed.generated, timed.depth) == (expected.distinct, expected.generated, expected.depth)


def within_two_steps(system) -> int:
    """The distinct states at most two steps from an initial one, by fingerprint."""
    level = {system.fingerprint(state): state for state in system.initial_states()}
    seen = set(level)
    for _ in range(2):
        level = {system.fingerprint(after): after for state in level.values() for _event, after in system.successors(state)}
        level = {fp: state for fp, state in level.items() if fp not in seen}
        seen |= set(level)
    return len(seen)


def test_an_interrupt_the_gateway_fails_around_still_ends_with_what_was_explored(spark, monkeypatch):
    """PySpark's SIGINT handler cancels the jobs itself; the gateway, cut short, may then fail the
    engine's own cancel, or the call the interrupt cut ("Gateway must be connected to send cancel
    cmd."): the search still ends interrupted, with its counts, for the summary."""
    from py4j.protocol import Py4JError

    def gateway_gone():
        raise Py4JError("Gateway must be connected to send cancel cmd.")

    def interrupted_at_level_2(progress):
        if progress.depth == 2:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                gateway_gone()

    monkeypatch.setattr(spark.session.sparkContext, "cancelAllJobs", gateway_gone)
    config = resolve("faults", {})
    with pytest.raises(SearchInterrupted) as interrupted:
        explore_spark(spark.session, functools.partial(system_for, config), spark.work, partitions=2, progress=interrupted_at_level_2)
    assert (interrupted.value.result.distinct, interrupted.value.result.depth, interrupted.value.result.interrupted) == (within_two_steps(system_for(config)), 2, True)


def run_check(tmp_path, name, *options):
    out = tmp_path / name
    code = cli.main(["check", *options, "--out", str(out), "--json"])
    return code, out


@pytest.mark.parametrize(
    "options",
    [
        ("--config", "isr-hw"),  # three ISR properties, each with its counterexample, replica traces beside them
        ("--config", "faults", "--profile", "faulty-forget-vote"),  # a KRaft counterexample under symmetry
    ],
)
def test_counterexample_files_are_byte_identical_across_engines(spark, tmp_path, capsys, options):
    code, in_process = run_check(tmp_path, "in-process", *options)
    expected = json.loads(capsys.readouterr().out)
    spark_code, on_spark = run_check(tmp_path, "spark", *options, "--engine", "spark", "--spark-partitions", "3")
    summary = json.loads(capsys.readouterr().out)
    assert code == spark_code == 1
    assert summary["engine"] == "spark"
    for key in ("distinct_states", "generated_states", "depth", "properties", "violations"):
        assert summary[key] == expected[key], key
    files = sorted(p.relative_to(in_process) for p in in_process.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(on_spark) for p in on_spark.rglob("*") if p.is_file())
    for name in files:
        assert (on_spark / name).read_bytes() == (in_process / name).read_bytes(), name


def test_spark_options_need_the_spark_engine(capsys):
    assert cli.main(["check", "--config", "smoke", "--spark-partitions", "4"]) == 2
    assert "--spark-partitions needs --engine spark" in capsys.readouterr().err
    assert cli.main(["check", "--config", "smoke", "--engine", "spark", "--spark-partitions", "0"]) == 2
    assert "between 1 and 100000" in capsys.readouterr().err


def test_standalone_cluster_losing_a_worker_mid_search_changes_no_result(tmp_path):
    """Two workers on loopback; worker 1 (and its executor) is killed while level 6 runs. Its tasks
    run again on the other worker, from the files the tables and candidates are kept in, and the
    counts stay."""
    with StandaloneCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g") as cluster:
        command = [sys.executable, "-m", "conformance.cli", "check", "--config", "smoke", "--engine", "spark", "--spark-master", cluster.url, "--json", "--out", str(tmp_path / "out")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            levels = []
            for line in process.stderr:
                if line.strip().startswith("level "):
                    levels.append(line)
                if line.strip().startswith("level 5:"):
                    threading.Timer(0.3, cluster.kill_worker, (1,)).start()  # within level 6's jobs
            out, _ = process.communicate(timeout=300)
        finally:
            process.kill()
        assert process.returncode == 0, levels
        summary = json.loads(out)
        assert (summary["distinct_states"], summary["generated_states"], summary["depth"]) == SMOKE
        assert summary["engine"] == "spark" and summary["workers"] == 2
        assert "Telling app of lost executor" in (tmp_path / "cluster" / "master.log").read_text()


def test_swarm_simulation_on_spark_reports_what_the_in_process_swarm_does(spark, capsys):
    """Every seed runs on the executors; per violated property, the same shortest run and seed."""
    argv = ["simulate", "--json", "--profile", "kip595-literal-diverging", "--seed", "300", "--runs", "100", "--duplication", "--resign"]
    assert cli.main([*argv, "--keep-going"]) == 1
    expected = json.loads(capsys.readouterr().out)
    assert cli.main([*argv, "--engine", "spark", "--spark-partitions", "3"]) == 1
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary.pop("engine") == "spark" and expected.pop("engine") == "in-process"
    assert summary == expected and summary["violations"]
    assert "runs 100/100" in captured.err  # a progress line per wave


@pytest.mark.parametrize("adapter", ["reference", "reference:random=1", "mutant:vote-grant-twice", "mutant:fetch-no-diverging-epoch"])
def test_certification_on_spark_writes_the_in_process_report_files(spark, tmp_path, capsys, adapter):
    """The corpus as tables, replayed on the executors, totals by Spark SQL: the same report bytes
    (written to the same place, which the reports name) as a run here without the deviation
    search, which Spark does not run (the answers it would judge stay on the executors)."""
    out = tmp_path / "report"
    code = cli.main(["certify", "--adapter", adapter, "--reproducible", "--json", "--out", str(out), "--no-deviations"])
    out.rename(tmp_path / "in-process")
    on_spark = cli.main(["certify", "--adapter", adapter, "--reproducible", "--json", "--out", str(out), "--engine", "spark", "--spark-partitions", "3"])
    out.rename(tmp_path / "spark")
    capsys.readouterr()
    assert code == on_spark == (0 if adapter.startswith("reference") else 1)
    files = sorted(p.relative_to(tmp_path / "in-process") for p in (tmp_path / "in-process").rglob("*") if p.is_file())
    assert len(files) >= 4 and files == sorted(p.relative_to(tmp_path / "spark") for p in (tmp_path / "spark").rglob("*") if p.is_file())
    for name in files:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "in-process" / name).read_bytes(), name


@pytest.mark.parametrize("partitions", ["1", "3"])
def test_a_corpus_generated_on_spark_is_byte_identical(spark, tmp_path, capsys, partitions):
    """The same places, hence the same traces and manifest, whatever the partitioning: a KRaft
    search stopped by its bound, an ISR one, and a later search that skips the cells of earlier ones."""
    argv = ["traces", "generate", "--config", "corpus-observer", "--config", "corpus-isr", "--config", "corpus-diverge", "--max-states", "4000", "--walks", "1"]
    assert cli.main([*argv, "--out", str(tmp_path / "in-process")]) == 0
    assert cli.main([*argv, "--out", str(tmp_path / "spark"), "--engine", "spark", "--spark-partitions", partitions]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^corpus-isr: level 3: [\d,]+ states, [\d,]+ cells", err, re.MULTILINE), err  # a progress line per level
    files = sorted(p.name for p in (tmp_path / "in-process").iterdir())
    assert len(files) > 50 and files == sorted(p.name for p in (tmp_path / "spark").iterdir())
    for name in files:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "in-process" / name).read_bytes(), name
    searches = json.loads((tmp_path / "spark" / "manifest.json").read_text())["searches"]
    assert [(s["config"], s["complete"]) for s in searches] == [("corpus-observer", False), ("corpus-isr", False), ("corpus-diverge", False)]


def test_executors_that_cannot_run_kraftcheck_are_a_clear_error(tmp_path):
    command = [sys.executable, "-m", "conformance.cli", "check", "--config", "smoke", "--engine", "spark", "--spark-master", "local[1]", "--out", str(tmp_path / "out")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.base_prefix + "/bin/python3"})
    assert done.returncode == 2, done.stderr
    assert "kraftcheck: the executors' Python cannot run kraftcheck" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


class StoppedContext:
    """A SparkContext that Spark stopped when its masters did not answer: a job names only that."""

    defaultParallelism = 1

    def setJobGroup(self, *_: str) -> None:
        pass

    def parallelize(self, *_: object) -> None:
        from py4j.protocol import Py4JError

        raise Py4JError("java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.")


def test_an_application_no_master_registered_is_reported_with_the_reason_spark_logged(tmp_path):
    """A master that accepts connections but never registers the application (Spark waits a
    minute): the reason Spark logged, not the stopped context it left."""
    log = tmp_path / "spark.log"
    log.write_text("26/11/26 11:49:23 ERROR StandaloneSchedulerBackend: Application has been killed. Reason: All masters are unresponsive! Giving up.\n")
    with pytest.raises(SparkUnavailable, match=r"^Spark could not run a job at spark://127\.0\.0\.1:7077: All masters are unresponsive! Giving up\.\n"):
        _check_executors(StoppedContext(), "spark://127.0.0.1:7077", log)


def test_a_spark_dir_spark_cannot_write_in_is_a_clear_error(spark, tmp_path, capsys):
    """A URL is Spark's to reach (checked only when Spark uses it): its refusal in one line."""
    assert cli.main(["check", "--config", "smoke", "--engine", "spark", "--spark-dir", "nosuch://host/kraftcheck", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(r'kraftcheck: Spark cannot create nosuch://host/kraftcheck/kraftcheck-\d+-[0-9a-f]{8}/checkpoints: .*No FileSystem for scheme "nosuch"\n', err), err


def test_a_spark_error_outside_a_job_is_one_line(monkeypatch, capsys):
    """The command line's last resort: a Py4J or Spark error anywhere ends in one line, exit 2."""
    from py4j.protocol import Py4JError

    def fails(args):
        raise Py4JError("An error occurred while calling o42.stop")

    monkeypatch.setattr("conformance.commands.rules.run", fails)
    assert cli.main(["rules"]) == 2
    assert capsys.readouterr().err == "kraftcheck: Spark failed: An error occurred while calling o42.stop\n"


def spark_processes(marker: str) -> set[int]:
    """The live Spark JVMs and Python worker daemons that inherited `marker` in their environment:
    this test's own, whatever else runs on the machine (another test's session, in parallel)."""
    found = set()
    for pid in subprocess.run(["pgrep", "-f", "pyspark"], capture_output=True, text=True).stdout.split():
        try:
            if marker.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.add(int(pid))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return found


def test_py4j_logs_nothing_while_a_session_lives_its_stop_included(caplog):
    """An interrupt that cuts the gateway's shutdown short makes Py4J log a traceback on its own
    logger ("Exception occurred while shutting down connection") and on the root logger: while a
    session lives, and as it stops, neither reaches the user; afterwards Py4J logs as before."""
    caplog.set_level(logging.DEBUG)
    raising = os.sep.join(("", "site-packages", "py4j", "clientserver.py"))
    py4j = logging.getLogger("py4j")
    outside = py4j.level  # this module's own session, when open, quiets Py4J already
    py4j.setLevel(logging.NOTSET)
    try:
        with _py4j_quiet():
            logging.getLogger("py4j.clientserver").error("Exception occurred while shutting down connection")
            logging.getLogger().handle(logging.makeLogRecord({"msg": "An error occurred while trying to connect", "levelno": logging.ERROR, "pathname": raising}))
        assert caplog.records == []
        logging.getLogger("py4j.clientserver").error("after the session")
        assert [record.getMessage() for record in caplog.records] == ["after the session"]
    finally:
        py4j.setLevel(outside)


def test_an_interrupted_search_on_spark_prints_what_it_explored_and_leaves_no_process(tmp_path):
    marker = f"KRAFTCHECK_TEST_RUN={tmp_path}"  # inherited by the JVM and its Python workers
    running: set[int] = set()
    command = [sys.executable, "-m", "conformance.cli", "check", "--config", "faults", "--engine", "spark", "--spark-master", "local[2]", "--out", str(tmp_path / "out")]
    environment = {**os.environ, **dict([marker.split("=", 1)])}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    try:
        seen = []
        for line in process.stderr:
            seen.append(line)
            if line.strip().startswith("level 5:"):
                running = spark_processes(marker)
                process.send_signal(signal.SIGINT)
                break
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    err = "".join(seen) + err
    assert process.returncode == 130, err
    assert re.search(r"^exhaustive\s+no \(interrupted\)$", out, re.MULTILINE), out
    assert "kraftcheck: interrupted; the summary covers the states explored so far" in err
    assert "Traceback" not in err and "ERROR" not in err, err
    assert running, "no Spark process carried the test's marker: the check below would see nothing"
    deadline = time.monotonic() + 15  # a JVM takes a moment to see its end of the pipe
    while spark_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not spark_processes(marker)


def test_py4j_failing_while_it_cleans_up_after_an_interrupt_is_the_interrupt():
    """Py4J, closing its sockets after an interrupt cut a call short, may raise an error of its own
    (seen: "Gateway must be connected to send cancel cmd."): the user interrupted, nothing failed."""
    from py4j.protocol import Py4JError

    with pytest.raises(KeyboardInterrupt):
        with _failures_explained(None):
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                raise Py4JError("Gateway must be connected to send cancel cmd.")  # as Py4J does, in its handler
    with pytest.raises(SparkUnavailable, match="a Spark job failed: the JVM refused"):
        with _failures_explained(None):
            raise Py4JError("the JVM refused")


def test_a_failing_task_is_reported_with_what_its_python_raised():
    """Spark's own first line only says that an executor's Python raised; the report says what."""
    from py4j.protocol import Py4JError

    worker = 'An exception was thrown from the Python worker:\nTraceback (most recent call last):\n  File "spark_engine.py", line 9, in _level\n    sorted(states)\nTypeError: \'<\' not supported\n'
    with pytest.raises(SparkUnavailable, match="^a Spark job failed: An exception was thrown from the Python worker: TypeError: '<' not supported$"):
        with _failures_explained(None):
            raise Py4JError(worker)


def _seeded_search(tmp_path, partitions: int = 1) -> tuple:
    """A search of `smoke` whose tasks are run by hand: its recipe and its files, the initial
    state sent for level 0."""
    from conformance.explore import spark_engine

    making = spark_engine.recipe(functools.partial(system_for, resolve("smoke", {})))
    files = spark_engine.Files(str(tmp_path / "search"), partitions)
    files.create()
    system = spark_engine.built(making)
    (state,) = system.initial_states()
    fp = system.fingerprint(state)
    with files.sending(0, "initial") as send:
        send(fp % partitions, spark_engine.batch_of(system, np.array([fp], dtype=np.int64), [fp], [state], set()))
    return making, files


def _task(making, files, depth: int, partition: int, attempt: int = 0, select: bool = True, expand: bool = True) -> tuple:
    """One task of a level, run by hand: (new, findings, generated, sent whole, watched)."""
    from conformance.explore import spark_engine

    return next(spark_engine._level(making, spark_engine.ByParent, files, depth, partition, attempt, True, None, select, expand))


def _offers_sent(files, depth: int) -> int:
    """How many states the tasks offered (orders only) for level `depth`."""
    from conformance.explore import spark_engine

    batches = [spark_engine._decode_batch(raw) for owner in range(files.partitions) for raw in files.received(depth, owner)]
    return sum(len(batch.fps) // 8 for batch in batches if spark_engine.offered(batch))


def test_a_state_several_tasks_find_crosses_whole_once(tmp_path):
    """Tasks claim the next level's states in their owners' tables as they find them: the first
    to claim a state sends it whole, the others only its order. With each level selected before
    it is expanded (no task claiming while another selects), the states sent whole for a level
    are exactly its new states, though several tasks find many of them."""
    making, files = _seeded_search(tmp_path, partitions=3)
    levels, offers = [], 0  # (new, generated, sent whole) per level
    while not levels or levels[-1][0]:
        depth = len(levels)
        new = sum(_task(making, files, depth, partition, expand=False)[0] for partition in range(3))
        results = [_task(making, files, depth, partition, select=False) for partition in range(3)]
        levels.append((new, sum(r[2] for r in results), sum(r[3] for r in results)))
        offers += _offers_sent(files, depth + 1)
    assert [sent for _new, _generated, sent in levels[:-1]] == [new for new, _generated, _sent in levels[1:]]
    assert (sum(new for new, _g, _s in levels), 1 + sum(g for _n, g, _s in levels), len(levels) - 2) == SMOKE
    assert offers > 0  # some states were found by several tasks


@pytest.mark.parametrize("again", [True, False])
def test_a_task_run_again_after_a_lost_attempt_sends_whole_what_it_claimed(tmp_path, again):
    """A task whose attempt was lost (its files never written) after it had claimed states, and
    after another task offered orders for them, runs again: the select finds the same level, and
    the expansion, knowing it is an attempt after another, sends whole every state it claims,
    even those claimed before (by the lost attempt), so the counts stay the in-process engine's.
    Run again as if first (`again` False), it would leave the others' offers without a state:
    the owner's select says so."""
    making, files = _seeded_search(tmp_path, partitions=2)
    outcomes = []
    with contextlib.nullcontext() if again else pytest.raises(RuntimeError, match="states offered that no task sent whole"):
        while not outcomes or outcomes[-1][0]:
            depth = len(outcomes)
            first = [_task(making, files, depth, partition) for partition in range(2)]
            for lost in files.inbox(depth + 1, 0).parent.glob("*/0.0.batches"):
                lost.unlink()  # partition 0's attempt, lost after partition 1 ran
            rerun = _task(making, files, depth, 0, attempt=1 if again else 0)
            assert rerun[:3] == first[0][:3]
            outcomes.append((first[0][0] + first[1][0], first[0][2] + first[1][2]))
        assert (sum(new for new, _g in outcomes), 1 + sum(g for _n, g in outcomes), len(outcomes) - 2) == SMOKE


def test_a_successor_met_in_several_chunks_of_a_task_crosses_once(tmp_path, monkeypatch):
    """A task expands its level a chunk at a time, in the order of its successors' parents: a
    successor met again in a later chunk (at a larger parent) is not sent again. With one
    partition, the candidates sent for each level are then exactly its new states, however
    small the chunks; the counts stay the in-process engine's."""
    from conformance.explore import spark_engine

    monkeypatch.setattr(spark_engine, "CHUNK", 8)
    making, files = _seeded_search(tmp_path)
    levels = []  # (new, generated, sent) per level
    while not levels or levels[-1][0]:
        new, _findings, generated, sent, _watched = _task(making, files, len(levels), 0)
        levels.append((new, generated, sent))
    assert [sent for _new, _generated, sent in levels[:-1]] == [new for new, _generated, _sent in levels[1:]]
    assert (sum(new for new, _g, _s in levels), 1 + sum(g for _n, g, _s in levels), len(levels) - 2) == SMOKE
