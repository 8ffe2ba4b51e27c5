"""`kraftcheck cluster run`: the history's checks on hand-made histories, and a real Kafka
controller quorum on loopback under kills and pauses, leaving no JVM behind however it ends."""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import msgspec
import pytest

from conformance import cli
from conformance.cluster.history import HW_MONOTONE, LIVENESS, Began, Fault, Healed, Reading, Sample, Write, check, leader_agreed_at, read
from conformance.cluster.metadata_log import Batch
from conformance.cluster.network import Network, NetworkUnavailable
from conformance.cluster.server_log import Transition
from conformance.cluster.quorum import free_ports
from conformance.cluster.run import elected_among, partition
from conformance.cluster.timeline import timeline_svg

ROOT = Path(__file__).resolve().parents[1]
KRAFTCHECK = [sys.executable, "-m", "conformance.cli"]
needs_jvm = pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None, reason="no JDK or Maven on PATH: a real Kafka quorum cannot run")


def sample(t: float, node: int, epoch: int, leader: int = -1, voted: int = -1) -> Sample:
    return Sample(t=t, node=node, epoch=epoch, leader=leader, voted=voted)


ELECTED = [sample(1.0, 1, 1, 1, 1), sample(1.1, 2, 1, 1), sample(1.2, 3, 1, 1)]  # node 1 leads epoch 1, followed by 2 and 3


def test_a_clean_history_holds():
    assert check([*ELECTED, Fault(t=2.0, kind="kill", node=3), Fault(t=3.0, kind="restart", node=3), Healed(t=3.0)], 3, 10.0) == []


@pytest.mark.parametrize(
    "events, rule, detail",
    [
        ([*ELECTED, sample(2.0, 3, 1, 3, 3), Healed(t=2.5)], "SAFE-1", "epoch 1: node 1 named leader 1 at 1.000 s, node 3 leader 3"),
        ([sample(0.5, 2, 1, voted=1), sample(0.6, 2, 1, voted=3), *ELECTED, Healed(t=2.0)], "SAFE-2", "node 2 voted for 1 (at 0.500 s) and 3 in epoch 1"),
        ([*ELECTED, sample(2.0, 2, 2, 2, 2), sample(3.0, 2, 1, 1), Healed(t=3.5)], "SAFE-3", "node 2 is at epoch 1 after epoch 2 at 2.000 s"),
    ],
)
def test_each_safety_property_is_broken_by_its_history(events, rule, detail):
    found = check(events, 3, 10.0)
    assert [(v.rule, v.detail) for v in found] == [(rule, detail)]


def test_a_cut_off_leader_that_never_steps_down_breaks_progress_1():
    """KAFKA-15489's shape: node 1 leads epoch 1, nodes 2 and 3 elect node 2 in epoch 2 at 5 s,
    node 1's file says it leads epoch 1 until the partition heals at 20 s."""
    events = [*ELECTED, sample(5.0, 2, 2, 2, 2), sample(5.1, 3, 2, 2), Healed(t=20.0), sample(20.3, 1, 2, 2)]
    assert [(v.rule, v.t, v.detail) for v in check(events, 3, 10.0)] == [
        ("PROGRESS-1", 5.1, "node 1 still leads epoch 1 14.900 s after a majority followed leader 2 of epoch 2 (bound 8 s)")
    ]


def test_a_cut_off_leader_that_steps_down_in_time_holds():
    events = [*ELECTED, sample(5.0, 2, 2, 2, 2), sample(5.1, 3, 2, 2), sample(8.0, 1, 2, voted=1), Healed(t=20.0), sample(20.3, 1, 2, 2)]
    assert check(events, 3, 10.0) == []


def test_no_leader_after_healing_breaks_liveness():
    events = [sample(1.0, 1, 1, voted=1), sample(1.0, 2, 1, voted=1), Healed(t=2.0)]
    assert [(v.rule, v.t) for v in check(events, 3, 5.0)] == [(LIVENESS, 2.0)]


def test_a_leader_too_late_breaks_liveness_and_one_in_time_does_not():
    late = [Healed(t=1.0), *[msgspec.structs.replace(s, t=s.t + 20.0) for s in ELECTED]]
    assert leader_agreed_at(late, 3, 1.0) == 21.1  # the second follower makes the majority
    assert [v.detail for v in check(late, 3, 5.0)] == ["a leader followed by a majority only 20.100 s after the faults healed at 1.000 s (bound 5 s)"]
    assert check(late, 3, 30.0) == []


def test_a_leader_agreed_before_healing_still_counts():
    assert leader_agreed_at([*ELECTED, Healed(t=5.0)], 3, 5.0) == 5.0


def test_a_leader_needs_its_own_file_to_agree():
    """Two followers naming node 1 are not a leader if node 1's own file does not say so."""
    events = [sample(1.0, 1, 0), sample(1.1, 2, 1, 1), sample(1.2, 3, 1, 1), Healed(t=2.0)]
    assert leader_agreed_at(events, 3, 2.0) is None


def batch(base: int, epoch: int, crc: int, *writes: int) -> Batch:
    return Batch(file="00000000000000000000.log", base=base, last=base, epoch=epoch, control=False, crc=crc, writes=writes)


LOG = [batch(0, 1, 10), batch(1, 1, 11, 1), batch(2, 1, 12, 2)]  # a LeaderChange's place, then writes 1 and 2
WRITTEN = [Write(t=1.5, n=1, outcome="ack"), Write(t=1.6, n=2, outcome="ack"), Write(t=1.7, n=3, outcome="unknown"), Reading(t=1.8, leader=1, epoch=1, hw=3), Healed(t=2.0)]


def test_logs_that_agree_and_keep_every_acknowledged_write_hold():
    """Node 3 lags (it lacks the last batch), write 3's outcome is unknown and it is nowhere: no violation."""
    assert check([*ELECTED, *WRITTEN], 3, 10.0, logs={1: LOG, 2: LOG, 3: LOG[:2]}) == []


def test_acknowledged_writes_missing_from_the_last_leader_s_log_are_lost_in_runs():
    written = [Write(t=1.5 + n / 10, n=n, outcome="ack") for n in (1, 2, 3, 4)]
    short = [batch(0, 1, 10), batch(1, 1, 11, 1), batch(2, 1, 13, 4)]  # writes 2 and 3 gone, 4 kept
    found = check([*ELECTED, *written, Healed(t=2.0)], 3, 10.0, logs={1: short, 2: short, 3: short})
    assert [(v.rule, v.t, v.detail) for v in found] == [("SAFE-6", 1.7, "2 writes, 2 to 3, acknowledged from 1.700 s to 1.800 s, are not in the log of node 1, the last leader: lost")]


def test_logs_that_differ_before_a_batch_they_share_break_log_matching():
    other = [batch(0, 1, 10), batch(1, 1, 99), batch(2, 1, 12, 2)]
    found = check([*ELECTED, Healed(t=2.0)], 3, 10.0, logs={1: LOG, 2: other, 3: LOG[:1]})
    assert [(v.rule, v.detail) for v in found] == [("SAFE-4", "nodes 1 and 2 hold the same batch of epoch 1 at offset 2, but differ before it, at offset 1")]


def test_logs_that_differ_below_the_high_watermark_break_committed_prefixes():
    diverged = [batch(0, 1, 10), batch(1, 2, 21), batch(2, 2, 22)]  # another epoch's batches from offset 1: nothing shared after offset 0
    found = check([*ELECTED, Reading(t=1.8, leader=1, epoch=1, hw=3), Healed(t=2.0)], 3, 10.0, logs={1: LOG, 2: diverged, 3: LOG[:1]})
    assert [(v.rule, v.detail) for v in found] == [("SAFE-7", "nodes 1 and 2 differ below the high watermark 3, from offset 1")]


def test_a_leader_change_record_naming_another_leader_of_an_epoch_breaks_election_safety():
    """The files name node 1 leader of epoch 1; node 2's log has a LeaderChange to node 2 in epoch 1."""
    claimed = [Batch(file="00000000000000000000.log", base=0, last=0, epoch=1, control=True, crc=7, leader=2)]
    agreeing = [msgspec.structs.replace(claimed[0], leader=1)]
    found = check([*ELECTED, Healed(t=2.0)], 3, 10.0, logs={1: agreeing, 2: claimed, 3: agreeing})
    assert [(v.rule, v.detail) for v in found] == [("SAFE-1", "epoch 1: node 2's log has a LeaderChange to leader 2 at offset 0, node 1 named leader 1")]


def test_the_nodes_logs_show_what_the_files_read_too_late_missed():
    """Node 3's log tells that it led epoch 1 for a moment, between two reads of its file: SAFE-1,
    from the logs alone, at the moment its log says, in the history's time."""
    began = Began(t=0.0, wall=1_000.0)
    told = {
        1: (Transition(wall=1_000.5, node=1, role="leader", epoch=1, leader=1, voted=-1),),
        3: (Transition(wall=1_000.7, node=3, role="leader", epoch=1, leader=3, voted=-1), Transition(wall=1_000.72, node=3, role="follower", epoch=1, leader=1, voted=-1)),
    }
    found = check([began, *ELECTED, Healed(t=2.0)], 3, 10.0, transitions=told)
    assert [(v.rule, v.t, v.detail) for v in found] == [("SAFE-1", 0.7, "epoch 1: node 1 named leader 1 at 0.500 s, node 3 leader 3, as the nodes' logs tell")]
    assert check([*ELECTED, Healed(t=2.0)], 3, 10.0, transitions=told) == []  # a history without its start's wall time: the logs cannot be placed


def test_a_high_watermark_that_goes_back_is_reported():
    readings = [Reading(t=2.0, leader=1, epoch=1, hw=5), Reading(t=3.0, leader=2, epoch=2, hw=-1), Reading(t=4.0, leader=2, epoch=2, hw=4)]
    found = check([*ELECTED, *readings, Healed(t=5.0)], 3, 10.0)
    assert [(v.rule, v.t, v.detail) for v in found] == [(HW_MONOTONE, 4.0, "leader 2 of epoch 2 reports high watermark 4 after leader 1 of epoch 1 reported 5 at 2.000 s")]


@pytest.mark.parametrize(
    "shape, around, node, links",
    [
        ("isolate", 3, 3, [(1, 3), (2, 3), (3, 1), (3, 2), (3, 4), (3, 5), (4, 3), (5, 3)]),
        ("isolate-leader", 3, 1, [(1, 2), (1, 3), (1, 4), (1, 5), (2, 1), (3, 1), (4, 1), (5, 1)]),
        ("partial", 1, 2, [(1, 2), (2, 1)]),  # around the leader: the first other node
        ("leader-deaf", 4, 1, [(2, 1), (3, 1), (4, 1), (5, 1)]),
        ("bridge", 3, 3, [(1, 4), (1, 5), (2, 4), (2, 5), (4, 1), (4, 2), (5, 1), (5, 2)]),  # 3 reaches all; {1, 2} and {4, 5} do not meet
    ],
)
def test_each_partition_shape_cuts_its_links(shape, around, node, links):
    """Five nodes, node 1 the leader a majority's files name."""
    quorum = SimpleNamespace(nodes=dict.fromkeys(range(1, 6)))
    recorder = SimpleNamespace(last={n: sample(1.0, n, 1, 1) for n in range(1, 6)}, now=lambda: 2.0)
    fault = partition(quorum, recorder, around, shape)
    assert (fault.node, list(fault.links)) == (node, links)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--controllers", "9"], "--controllers 9: 1 to 5"),
        (["--nemesis", "flood"], "'flood': a comma-separated list of kill, pause, partition"),
        (["--kafka-version", "2.8.0"], "Kafka 2.8.0 is too old"),
        (["--time", "-1"], "--time is 0 to 86400 seconds"),
    ],
)
def test_bad_arguments_exit_2(arguments, message, tmp_path, capsys):
    assert exit_code(["cluster", "run", "--out", str(tmp_path / "run"), *arguments]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def exit_code(argv: list[str]) -> int:
    """The command's exit code, argparse's refusals (SystemExit) included."""
    try:
        return cli.main(argv)
    except SystemExit as exited:
        return exited.code


def test_a_directory_holding_other_files_is_refused_and_left_alone(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert cli.main(["cluster", "run", "--out", str(out)]) == 2
    assert "holds files kraftcheck did not write (notes.txt)" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "keep me"


def jvms_of(out: Path) -> list[int]:
    """The process ids of running Kafka servers whose configuration lies under `out`."""
    return [pid for pid, argv in processes() if b"kafka.Kafka" in argv and any(arg.startswith(str(out).encode()) for arg in argv)]


def helpers_of(out: Path) -> list[int]:
    """The process ids of the network helper and the workload of the run under `out`: each names
    node 1's port among its arguments (the helper in its JSON, the workload in its controllers)."""
    port = next(line for line in (out / "node-1" / "server.properties").read_text().splitlines() if line.startswith("listeners=")).rsplit(":", 1)[1]
    return [
        pid for pid, argv in processes()
        if (b"conformance.cluster.network" in argv or b"Workload" in argv) and any(port.encode() in arg for arg in argv)
    ]  # fmt: skip


def processes() -> list[tuple[int, list[bytes]]]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            found.append((int(cmdline.parent.name), cmdline.read_bytes().split(b"\0")))
        except OSError:  # gone meanwhile
            continue
    return found


def dumped_writes(out: Path, node: int) -> set[int]:
    """The writes node `node`'s metadata log held at the end, as its dump lists them."""
    return {n for line in (out / f"node-{node}" / "metadata-log.jsonl").read_text().splitlines() for n in json.loads(line)["writes"]}


@needs_jvm
def test_a_short_run_of_kafka_under_partitions_kills_and_pauses_holds_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([*KRAFTCHECK, "cluster", "run", "--time", "20", "--seed", "28", "--out", str(out), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["violations"] == [] and summary["first_leader_seconds"] is not None
    # seed 28: node 3 killed at 1.3 s for 5.2 s, the leader isolated at 8.2 s for 6.3 s, a pause at 16.2 s; the next gap ends past 20 s
    assert summary["faults"] == {"kill": 1, "pause": 1, "partition": 1} and summary["epochs"] >= 1
    lines = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert {line["type"] for line in lines} == {"began", "fault", "sample", "healed", "write", "reading"}
    assert sum(line["type"] == "fault" for line in lines) == 2 * sum(summary["faults"].values())  # each fault and its healing
    acknowledged = {line["n"] for line in lines if line["type"] == "write" and line["outcome"] == "ack"}
    assert summary["writes"]["ack"] == len(acknowledged) > 0
    leader = max((line for line in lines if line["type"] == "sample" and line["leader"] != -1), key=lambda sample: (sample["epoch"], sample["t"]))["leader"]
    assert acknowledged <= dumped_writes(out, leader)
    killed = next(line["node"] for line in lines if line["type"] == "fault" and line["kind"] == "kill")
    starts = {n: (out / f"node-{n}" / "server.log").read_text().count("Kafka version: ") for n in (1, 2, 3)}
    assert starts == {n: 2 if n == killed else 1 for n in (1, 2, 3)}  # a restarted node's log keeps its first run's lines
    assert jvms_of(out) == []  # (while it ran, test_nothing_outlives_... sees all three)
    # The nodes' own logs, read by kraftcheck validate: every line read, every message linked to
    # its sender's line. (Whether every line is explained: tests/test_validate.py, on runs kept;
    # a fresh run may reach a place where the kafka-4.3 profile departs from the release.)
    validated = subprocess.run([*KRAFTCHECK, "validate", str(out), "--json", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = json.loads(validated.stdout)
    assert validated.returncode in (0, 1) and report["profile"] == "kafka-4.3", validated.stderr
    assert report["observations"] > 1_000 and report["unreadable"] == [] and report["unlinked"] == [] and report["linked"] > 500
    assert len(report["sent_at_kill"]) <= 4  # at most one a run: node 3's first, and each node's last, all ended by SIGKILL


def test_a_wipe_waits_for_a_leader_the_restarted_majority_elects():
    """WIPE keeps the old leader down until then: files that still name it (stale, their nodes
    down), or a leader elected outside the restarted nodes, are not that leader."""
    def files(*named):
        return SimpleNamespace(last={node: Sample(t=1.0, node=node, epoch=epoch, leader=leader, voted=-1) for node, epoch, leader in named})

    restarted = [1, 3]  # the wiped node 1 and the lagging node 3; node 2 led epoch 1
    assert not elected_among(files((1, 1, 2), (2, 1, 2), (3, 1, 2)), 3, restarted, 1)  # every file as it was before the wipe
    assert not elected_among(files((1, 0, -1), (2, 1, 2), (3, 2, -1)), 3, restarted, 1)  # an election under way
    assert not elected_among(files((1, 2, 3), (2, 1, 2), (3, 1, 2)), 3, restarted, 1)  # node 3's own file does not name it yet
    assert not elected_among(files((1, 2, 2), (2, 2, 2), (3, 1, 2)), 3, restarted, 1)  # the old leader back, leading anew
    assert elected_among(files((1, 2, 3), (2, 1, 2), (3, 2, 3)), 3, restarted, 1)


@needs_jvm
def test_a_wiped_disk_loses_acknowledged_writes_and_the_history_shows_it(tmp_path):
    """WIPE (run.py) with seed 1: a follower killed first, writes acknowledged by the other two,
    then the other follower's disk wiped and the leader killed; the first two elect without those
    writes. The last leader is the one of the largest epoch sampled: a node's last sample may be
    older (the old leader, restarted, may follow without a sample in between)."""
    out = tmp_path / "wipe"
    argv = [*KRAFTCHECK, "cluster", "run", "--nemesis", "wipe", "--time", "10", "--fault-time", "8", "--seed", "1", "--out", str(out), "--json"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["faults"] == {"wipe": 1}
    lines = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    leader = max((line for line in lines if line["type"] == "sample" and line["leader"] != -1), key=lambda sample: (sample["epoch"], sample["t"]))["leader"]
    lost = {line["n"] for line in lines if line["type"] == "write" and line["outcome"] == "ack"} - dumped_writes(out, leader)
    assert lost, "the wipe lost no acknowledged write"
    said = [v for v in summary["violations"] if v["rule"] == "SAFE-6"]
    assert said and sum(int(v["detail"].split()[0]) if "writes," in v["detail"] else 1 for v in said) == len(lost)
    assert "SAFE-6" in (out / "timeline.svg").read_text() and jvms_of(out) == []


@needs_jvm
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_nothing_outlives_an_interrupted_or_killed_run(tmp_path, how):
    """Neither the three JVMs, nor the network's helper, nor the workload's JVM."""
    out = tmp_path / "run"
    run = subprocess.Popen(
        [*KRAFTCHECK, "cluster", "run", "--time", "600", "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal: a pytest-xdist worker ignores SIGINT, and a child would inherit that
    )
    try:
        for line in run.stderr:
            if "faults for" in line:  # the leader elected, the workload started
                break
        time.sleep(1)
        assert len(jvms_of(out)) == 3 and len(helpers_of(out)) == 2
        run.send_signal(how)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:  # say where it hangs: each thread's kernel wait channel, and what it printed
            channels = {task.name: (task / "wchan").read_text() for task in Path(f"/proc/{run.pid}/task").iterdir()}
            run.kill()
            pytest.fail(f"the run did not end within 60 s of {how!r}: threads waiting in {channels}; it printed:\n{run.stderr.read()[-3000:]}")
    finally:
        run.kill()
        run.wait()
    deadline = time.monotonic() + 20
    while (jvms_of(out) or helpers_of(out)) and time.monotonic() < deadline:  # after a SIGKILL the guard kills them: a moment
        time.sleep(0.2)
    assert jvms_of(out) == [] and helpers_of(out) == []
    assert (out / "history.jsonl").exists()


@needs_jvm
@pytest.mark.parametrize("version, departs", [("3.6.2", True), ("3.7.2", False)])
def test_kafka_15489_on_the_real_server_a_cut_off_leader_keeps_leading_until_3_7(version, departs, tmp_path):
    """KAFKA-15489 (fixed in 3.7.0): a leader no majority fetches from never steps down. The
    leader isolated for 14 s: Kafka 3.6.2's file still names it leader of its old epoch long
    after the other two elected a new leader (PROGRESS-1, exit 1); 3.7.2's resigns and stands."""
    out = tmp_path / version
    argv = [*KRAFTCHECK, "cluster", "run", "--kafka-version", version, "--nemesis", "partition", "--partitions", "isolate-leader", "--fault-time", "14", "--time", "10", "--seed", "1", "--out", str(out), "--json"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    summary = json.loads(done.stdout)
    assert summary["faults"] == {"partition": 1}
    rules = [violation["rule"] for violation in summary["violations"]]
    assert (done.returncode, rules) == ((1, ["PROGRESS-1"]) if departs else (0, [])), done.stderr
    assert jvms_of(out) == []
    # Its logs under the check-quorum profile: 3.6.2's leader is caught leading past its timer's deadline
    validated = subprocess.run([*KRAFTCHECK, "validate", str(out), "--json", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = json.loads(validated.stdout)
    failures = [node["unexplained"]["why"].split(":")[0] for node in report["nodes"] if node["unexplained"]]
    assert (validated.returncode, failures) == ((1, ["PROGRESS-1"]) if departs else (0, [])), validated.stdout[-3000:]


ECHO = """
import socket, sys
listening = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print("listening", flush=True)
while True:
    connection, _ = listening.accept()
    connection.sendall(b"node 2 heard " + connection.recv(100))
    connection.close()
"""
ASK = """
import socket, sys
try:
    connection = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    connection.settimeout(2)
    connection.sendall(sys.argv[2].encode())
    print(connection.recv(100).decode())
except OSError as error:
    print(type(error).__name__)
"""


def test_each_node_s_namespace_reaches_another_only_through_its_link(tmp_path):
    """Node 2 listens on its port inside its own namespace: node 1 reaches it there through the
    link (1, 2) until it is cut (its requests then go unanswered), and again once it is healed;
    kraftcheck reaches it from the host; node 1's own port in node 1's namespace is nobody's."""
    port_1, port_2 = free_ports(2)
    try:
        network = Network({1: port_1, 2: port_2})
    except NetworkUnavailable as why:
        pytest.skip(f"no network namespaces on this machine: {why}")
    with network:
        server = subprocess.Popen([*network.enter(2), sys.executable, "-c", ECHO, str(port_2)], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout.readline() == "listening\n"

            def ask(node: int, port: int, what: str) -> str:
                prefix = network.enter(node) if node else []
                return subprocess.run([*prefix, sys.executable, "-c", ASK, str(port), what], capture_output=True, text=True, timeout=30).stdout.strip()

            assert ask(1, port_2, "1") == "node 2 heard 1"
            network.cut(1, 2)
            assert ask(1, port_2, "2") == "TimeoutError"  # held open, never forwarded
            network.heal(1, 2)
            assert ask(1, port_2, "3") == "node 2 heard 3"
            assert ask(0, port_2, "4") == "node 2 heard 4"  # kraftcheck's own link, from the host
            assert ask(1, port_1, "5") == "ConnectionRefusedError"
        finally:
            server.kill()
            server.wait()


def test_the_timeline_draws_lanes_faults_and_violations():
    """A history drawn: a lane per node, a band per fault on the lanes it hits (a partition on
    both ends of every cut link), the PROGRESS-1 violation as a red line; valid XML, the same
    bytes every time, and the history read back from its lines as written."""
    events = [
        *ELECTED,
        Fault(t=2.0, kind="partition", node=1, shape="isolate-leader", links=((1, 2), (1, 3), (2, 1), (3, 1))),
        sample(4.0, 2, 2, 2, 2),
        sample(4.1, 3, 2, 2),
        Fault(t=16.0, kind="heal", node=1, shape="isolate-leader", links=((1, 2), (1, 3), (2, 1), (3, 1))),
        Healed(t=16.0),
        sample(16.3, 1, 2, 2),
    ]
    assert read(b"".join(msgspec.json.encode(event) + b"\n" for event in events)) == events
    violations = tuple(check(events, 3, 10.0))
    assert [v.rule for v in violations] == ["PROGRESS-1"]
    drawn = timeline_svg(events, (1, 2, 3), violations, "isolated")
    assert drawn == timeline_svg(events, (1, 2, 3), violations, "isolated")
    root = ElementTree.fromstring(drawn)
    titles = [element.text for element in root.iter("{http://www.w3.org/2000/svg}title")]
    assert sum(t.startswith("partition node 1 (isolate-leader: cut 1->2, 1->3, 2->1, 3->1), 2.0 s to 16.0 s") for t in titles) == 3  # on lanes 1, 2 and 3
    assert "node 2 from 4.00 s: epoch 2, leader 2, voted 2" in titles
    assert any(t.startswith("PROGRESS-1 at 4.100 s: node 1 still leads epoch 1") for t in titles)
    assert "faults healed at 16.0 s" in titles
