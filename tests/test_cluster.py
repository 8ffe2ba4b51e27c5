"""`kraftcheck cluster run`: the history's checks on hand-made histories, and a real Kafka
controller quorum on loopback under kills and pauses, leaving no JVM behind however it ends."""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import msgspec
import pytest

from conformance import cli
from conformance.cluster.history import LIVENESS, Fault, Healed, Sample, check, leader_agreed_at, read
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
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if b"kafka.Kafka" in argv and any(arg.startswith(str(out).encode()) for arg in argv):
            found.append(int(cmdline.parent.name))
    return found


@needs_jvm
def test_a_short_run_of_kafka_under_kills_and_pauses_holds_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([*KRAFTCHECK, "cluster", "run", "--time", "20", "--seed", "5", "--out", str(out), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["violations"] == [] and summary["first_leader_seconds"] is not None
    assert summary["faults"] == {"kill": 1, "pause": 2} and summary["epochs"] >= 1  # seed 5: pauses at 2.9 s and 16.7 s, a kill at 14.0 s; the next gap ends past 20 s
    lines = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert {line["type"] for line in lines} == {"fault", "sample", "healed"}
    assert sum(line["type"] == "fault" for line in lines) == 2 * sum(summary["faults"].values())  # each fault and its healing
    assert all((out / f"node-{n}" / "server.log").stat().st_size > 0 for n in (1, 2, 3))
    assert jvms_of(out) == []  # (while it ran, test_no_jvm_outlives_... sees all three)


@needs_jvm
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_no_jvm_outlives_an_interrupted_or_killed_run(tmp_path, how):
    out = tmp_path / "run"
    run = subprocess.Popen([*KRAFTCHECK, "cluster", "run", "--time", "600", "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in run.stderr:
            if "waiting for a leader" in line:
                break
        assert len(jvms_of(out)) == 3
        run.send_signal(how)
        run.wait(timeout=60)
    finally:
        run.kill()
        run.wait()
    deadline = time.monotonic() + 20
    while jvms_of(out) and time.monotonic() < deadline:  # after a SIGKILL the guard kills them: a moment
        time.sleep(0.2)
    assert jvms_of(out) == []
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


def test_partitions_of_releases_that_send_their_leader_s_address_are_refused(tmp_path, capsys):
    assert cli.main(["cluster", "run", "--kafka-version", "3.9.1", "--nemesis", "partition", "--out", str(tmp_path / "run")]) == 2
    assert "partitions of these releases are not supported yet" in capsys.readouterr().err


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
