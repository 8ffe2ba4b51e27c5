"""kraftcheck validate: Kafka's own logs read into observations and explained by the model.

The logs under tests/data/validate/ are three real `kraftcheck cluster run`s, their transition
and KafkaRaftClient TRACE lines kept: Kafka 4.3.1 and 3.7.2 under kills and partitions, and
3.6.2 with its leader isolated for 14 s (KAFKA-15489: it never resigns). Each edit below changes
one line the way a bug would show in a log, and the validation must name that very line."""

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import msgspec

from adapters.mutants import MUTANTS
from conformance.validate import links
from conformance.validate.java_text import JavaTextError, read_value
from conformance.validate.observations import Answered, Received, RecordsSeen, Replied, Sent, Started, read
from conformance.validate.validation import ValidationError, validate_logs
from kafka_logs import walk
from model.config import PINS, ClusterConfig, Pin
from model.messages import EndQuorumEpochRequest, EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch, VoteRequest, VoteResponse

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "validate"
KAFKA_43 = DATA / "kafka-4.3.1-faults"
KAFKA_37 = DATA / "kafka-3.7.2-faults"
KAFKA_362 = DATA / "kafka-3.6.2-isolated-leader"
READ_KINDS = ("Completed transition to", "Received inbound message", "Sent response", "Sent outbound request", "Leader appended records", "Follower end offset updated")
PREFIX = "2026-12-02T11:31:37.380+0000 [kafka-1-raft-io-thread] TRACE org.apache.kafka.raft.KafkaRaftClient - [RaftManager id=1] "


def test_java_to_string_is_read_back_into_objects_lists_and_strings():
    text = ("VoteRequestData(clusterId='a b,c', voterId=1, empty=Empty(), ids=[1, 2], topics=[TopicData(topicName='__cluster_metadata', "
            "partitions=[PartitionData(partitionIndex=0, preVote=true, id=-Jd84N8Ju_uiGBZ)])]), createdTimeMs=1, destination=127.0.0.1:1 (id: 2 rack: null))")  # fmt: skip
    assert read_value(text) == {
        "_type": "VoteRequestData", "clusterId": "a b,c", "voterId": "1", "empty": {"_type": "Empty"}, "ids": ["1", "2"],
        "topics": [{"_type": "TopicData", "topicName": "__cluster_metadata", "partitions": [{"_type": "PartitionData", "partitionIndex": "0", "preVote": "true", "id": "-Jd84N8Ju_uiGBZ"}]}],
    }  # fmt: skip
    records = read_value("MemoryRecords(size=106, buffer=java.nio.HeapByteBuffer[pos=0 lim=106 cap=120])")
    assert records == {"_type": "MemoryRecords", "size": "106", "buffer": "_"}
    with pytest.raises(JavaTextError):
        read_value("VoteRequestData(clusterId='c', topics=[")


def observation(text: str):
    return read(1, [PREFIX + text]).observations[0]


def test_each_release_s_message_lines_become_the_model_s_messages():
    # 3.7: candidateEpoch/candidateId, sourceId; 3.9 on: replicaEpoch/replicaId, source=host:port (id: N ...)
    vote_37 = observation(
        "Received inbound message InboundRequest(correlationId=0, data=VoteRequestData(clusterId='c', topics=[TopicData(topicName='__cluster_metadata', "
        "partitions=[PartitionData(partitionIndex=0, candidateEpoch=1, candidateId=2, lastOffsetEpoch=0, lastOffset=0)])]), createdTimeMs=1)"
    )
    assert vote_37 == Received(line=1, wall=vote_37.wall, source=2, correlation=0, message=VoteRequest(ClusterId="c", CandidateEpoch=1, CandidateId=2, LastOffsetEpoch=0, LastOffset=0))
    vote_43 = observation(
        "Sent outbound request: OutboundRequest(correlationId=7, data=VoteRequestData(clusterId='c', voterId=3, topics=[TopicData(topicName='__cluster_metadata', "
        "partitions=[PartitionData(partitionIndex=0, replicaEpoch=2, replicaId=1, replicaDirectoryId=x, voterDirectoryId=y, lastOffsetEpoch=1, lastOffset=116, "
        "preVote=true)])]), createdTimeMs=1, destination=127.0.0.1:1 (id: 3 rack: null isFenced: false))"
    )
    assert vote_43 == Sent(line=1, wall=vote_43.wall, destination=3, correlation=7,
                           message=VoteRequest(ClusterId="c", CandidateEpoch=2, CandidateId=1, LastOffsetEpoch=1, LastOffset=116, PreVote=True))  # fmt: skip
    fetch = observation(
        "Received inbound message InboundResponse(correlationId=0, data=FetchResponseData(throttleTimeMs=0, errorCode=0, sessionId=0, responses=[FetchableTopicResponse("
        "topic='', topicId=AAAAAAAAAAAAAAAAAAAAAQ, partitions=[PartitionData(partitionIndex=0, errorCode=0, highWatermark=-1, lastStableOffset=-1, logStartOffset=0, "
        "divergingEpoch=EpochEndOffset(epoch=-1, endOffset=-1), currentLeader=LeaderIdAndEpoch(leaderId=2, leaderEpoch=1), snapshotId=SnapshotId(endOffset=-1, epoch=-1), "
        "abortedTransactions=[], preferredReadReplica=-1, records=MemoryRecords(size=106, buffer=java.nio.HeapByteBuffer[pos=0 lim=106 cap=120]))])], nodeEndpoints=[]), sourceId=2)"
    )
    expected = FetchResponse(HighWatermark=-1, DivergingEpoch=EpochEndOffset(Epoch=-1, EndOffset=-1), CurrentLeader=LeaderIdAndEpoch(LeaderId=2, LeaderEpoch=1), Records=RecordsSeen(size=106))
    assert fetch == Replied(line=1, wall=fetch.wall, source=2, correlation=0, message=expected, wire=False)
    # a response the sender's own network client made up (BROKER_NOT_AVAILABLE), with no partition: Kafka's defaults
    lost = observation("Received inbound message InboundResponse(correlationId=4, data=VoteResponseData(errorCode=8, topics=[]), source=127.0.0.1:2 (id: 2 rack: null))")
    assert lost == Replied(line=1, wall=lost.wall, source=2, correlation=4, message=VoteResponse(ErrorCode=8), wire=True)


def test_a_fetch_from_a_kip_903_replica_state_and_an_answer_to_it_name_the_fetcher():
    request = ("InboundRequest(correlationId=13, data=FetchRequestData(clusterId='c', replicaId=-1, replicaState=ReplicaState(replicaId=3, replicaEpoch=-1), maxWaitMs=500, "
               "topics=[FetchTopic(topic='', partitions=[FetchPartition(partition=0, currentLeaderEpoch=2, fetchOffset=10, lastFetchedEpoch=1, highWatermark=9)])]))")  # fmt: skip
    answered = observation(
        "Sent response OutboundResponse(correlationId=13, data=FetchResponseData(errorCode=0, responses=[FetchableTopicResponse(topic='__cluster_metadata', "
        "partitions=[PartitionData(partitionIndex=0, errorCode=0, highWatermark=10, divergingEpoch=EpochEndOffset(epoch=-1, endOffset=-1), "
        "currentLeader=LeaderIdAndEpoch(leaderId=1, leaderEpoch=2), records=MemoryRecords(size=0, buffer=java.nio.HeapByteBuffer[pos=0 lim=0 cap=0]))])])) "
        "to inbound request " + request
    )
    fetch = FetchRequest(ClusterId="c", ReplicaId=3, MaxWaitMs=500, CurrentLeaderEpoch=2, FetchOffset=10, LastFetchedEpoch=1, HighWatermark=9)
    assert answered == Answered(line=1, wall=answered.wall, destination=3, correlation=13, request=fetch,
                                message=FetchResponse(HighWatermark=10, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=2), Records=()))  # fmt: skip
    end = observation(
        "Sent outbound request: OutboundRequest(correlationId=3, data=EndQuorumEpochRequestData(clusterId='c', topics=[TopicData(topicName='__cluster_metadata', "
        "partitions=[PartitionData(partitionIndex=0, leaderId=1, leaderEpoch=4, preferredCandidates=[ReplicaInfo(candidateId=3, candidateDirectoryId=x), "
        "ReplicaInfo(candidateId=2, candidateDirectoryId=y)])])], leaderEndpoints=[]), destination=127.0.0.1:3 (id: 2 rack: null))"
    )
    assert end.message == EndQuorumEpochRequest(ClusterId="c", ReplicaId=1, LeaderId=1, LeaderEpoch=4, PreferredSuccessors=(3, 2))


def test_a_line_of_a_kind_read_that_cannot_be_read_is_counted_not_dropped():
    log = read(1, [PREFIX + "Sent outbound request: OutboundRequest(correlationId=3, data=VoteRequestData(clusterId='c', topics=[", PREFIX + "Leader appended nothing"])
    assert [u.line for u in log.unreadable] == [1] and log.observations == ()


def raft_lines(directory: Path) -> int:
    """The lines of the kinds validate reads, counted here by their text alone."""
    count = 0
    for log in directory.glob("node-*/server.log.gz"):
        with gzip.open(log, "rt") as lines:
            count += sum(1 for line in lines if any(kind in line for kind in READ_KINDS))
    return count


@pytest.mark.parametrize("run, profile", [(KAFKA_43, "kafka-4.3"), (KAFKA_37, "kafka-3.7")])
def test_real_runs_of_current_releases_under_faults_validate_with_nothing_unexplained(run, profile):
    validation = validate_logs([run], profile)
    assert validation.observations == raft_lines(run)
    assert validation.first is None and validation.unlinked == () and validation.unreadable == ()
    assert validation.explained + validation.outside == validation.observations
    assert validation.valid


def test_the_leader_that_never_resigns_before_kafka_3_7_is_caught_by_its_check_quorum_deadline():
    """KAFKA-15489 on Kafka 3.6.2: node 2 led epoch 1 when it was cut off; it kept appending as
    leader. Without the timer's deadline every line would be explained by a timer that never fires."""
    validation = validate_logs([KAFKA_362], "kafka-3.7")
    first = validation.first
    assert (first.node, first.why.split(":")[0]) == (2, "PROGRESS-1")
    assert "still leader of epoch 1" in first.why and first.possible
    assert validate_logs([KAFKA_362], "kafka-3.7", slack_ms=60_000).valid  # a minute of slack and the 14 s cut fits


def edited(tmp_path: Path, run: Path, node: int, pattern: str, change, nth: int = 0) -> tuple[Path, int]:
    """The run copied with the `nth` line of node `node` matching `pattern` changed; that line's number."""
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    path = copy / f"node-{node}" / "server.log.gz"
    with gzip.open(path, "rt") as text:
        lines = text.read().splitlines(keepends=True)
    matching = [index for index, line in enumerate(lines) if re.search(pattern, line)]
    index = matching[nth]
    changed = change(lines[index])
    assert changed != lines[index]
    lines[index] = changed
    with gzip.open(path, "wt") as text:
        text.write("".join(lines))
    return copy, index + 1


def bump(field: str):
    return lambda line: re.sub(rf"\b{field}=(\d+)", lambda m: f"{field}={int(m[1]) + 1}", line, count=1)


EDITS = {
    "a vote refused that was granted": (1, r"Sent response .*voteGranted=true", lambda line: line.replace("voteGranted=true", "voteGranted=false"), 0),
    "a pre-vote granted by a follower that hears from its leader": (1, r"Sent response .*voteGranted=false", lambda line: line.replace("voteGranted=false", "voteGranted=true"), 0),
    "an epoch bumped in a transition": (2, r"Completed transition to FollowerState", bump("epoch"), 1),
    "a fetch offset off by one": (3, r"Sent outbound request: .*FetchRequestData", bump("fetchOffset"), 39),
    "a leader's append in another epoch": (2, r"Leader appended records", lambda line: re.sub(r"epoch=\d+\]", "epoch=7]", line), 9),
    "a follower's log end off by one": (1, r"Follower end offset updated", bump("offset"), 20),
    "a high watermark ahead in a fetch answer": (2, r"Sent response .*FetchResponseData.*highWatermark=\d+", bump("highWatermark"), 50),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_a_log_with_one_line_edited_does_not_validate_and_the_report_names_the_line(name, tmp_path):
    node, pattern, change, nth = EDITS[name]
    copy, line = edited(tmp_path, KAFKA_43, node, pattern, change, nth)
    validation = validate_logs([copy], "kafka-4.3")
    assert not validation.valid
    assert (validation.first.node, validation.first.line) == (node, line)
    assert validation.first.possible  # the states that were still possible, each with what it would have logged


def test_a_second_vote_granted_in_one_epoch_does_not_validate(tmp_path):
    """After granting candidate X its vote of an epoch, the voter logs a request of another
    candidate of that epoch, and grants that too (two lines put in after the first grant)."""
    copy = tmp_path / KAFKA_43.name
    shutil.copytree(KAFKA_43, copy)
    path = copy / "node-1" / "server.log.gz"
    with gzip.open(path, "rt") as text:
        lines = text.read().splitlines(keepends=True)
    grant = next(i for i, line in enumerate(lines) if re.search(r"Sent response .*voteGranted=true.*preVote=false", line))
    candidate = int(re.search(r"replicaId=(\d+)", lines[grant])[1])
    other = next(v for v in (2, 3) if v != candidate)
    correlation = re.search(r"to inbound request InboundRequest\(.*?correlationId=(\d+)", lines[grant])[1]
    asked = next(i for i in range(grant, -1, -1) if "Received inbound message InboundRequest" in lines[i] and f"correlationId={correlation}," in lines[i])
    lines[grant + 1 : grant + 1] = [line.replace(f"replicaId={candidate},", f"replicaId={other},") for line in (lines[asked], lines[grant])]
    with gzip.open(path, "wt") as text:
        text.write("".join(lines))
    validation = validate_logs([copy], "kafka-4.3")
    assert (validation.first.node, validation.first.line) == (1, grant + 3)
    assert "VoteGranted=False" in validation.first.possible[0].instead


def test_a_response_edited_on_the_receiving_side_only_is_received_but_never_sent(tmp_path):
    """A refused vote the candidate says it got (the model takes either answer): its voter never sent it."""
    copy, line = edited(tmp_path, KAFKA_43, 2, r"Received inbound message InboundResponse.*VoteResponseData.*voteGranted=true",
                        lambda text: text.replace("voteGranted=true", "voteGranted=false"))  # fmt: skip
    validation = validate_logs([copy], "kafka-4.3")
    assert [(u.node, u.line) for u in validation.unlinked] == [(2, line)]
    assert not validation.valid


KRAFTCHECK = [sys.executable, "-m", "conformance.cli"]


def test_the_command_exits_0_1_2_and_prints_json(tmp_path):
    done = subprocess.run([*KRAFTCHECK, "validate", str(KAFKA_43), "--profile", "kafka-4.3", "--json", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["valid"] is True and report["profile"] == "kafka-4.3" and report["voters"] == [1, 2, 3]
    failed = subprocess.run([*KRAFTCHECK, "validate", str(KAFKA_362), "--profile", "kafka-3.7", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert failed.returncode == 1 and "## Not explained: node 2, line" in failed.stdout and "PROGRESS-1" in failed.stdout
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.log").write_text("nothing of Kafka's here\n")
    for arguments, says in [
        ([str(tmp_path / "missing")], "no such file or directory"),
        ([str(tmp_path / "empty")], "no node-N/server.log"),
        ([str(tmp_path / "other.log"), "--profile", "kafka-4.3"], "no line of Kafka's raft client"),
        ([str(KAFKA_43)], "no --profile given"),
        ([str(KAFKA_43), "--profile", "kafka-9.9"], "unknown profile"),
        ([str(KAFKA_43), "--profile", "kafka-4.3", "--fill", "11"], "--fill is 0 to 10"),
    ]:
        done = subprocess.run([*KRAFTCHECK, "validate", *arguments, "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert (done.returncode, done.stdout) == (2, ""), arguments
        assert says in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_node_logs_given_as_files_are_told_apart_by_their_own_lines(tmp_path):
    for node in (1, 2, 3):
        shutil.copy(KAFKA_37 / f"node-{node}" / "server.log.gz", tmp_path / f"controller-{node}.log.gz")
    validation = validate_logs(sorted(tmp_path.iterdir()), "kafka-3.7")
    assert sorted(validation.logs) == [1, 2, 3] and validation.valid
    with pytest.raises(ValidationError, match="a second log of node 1"):
        validate_logs([tmp_path / "controller-1.log.gz", tmp_path / "controller-1.log.gz"], "kafka-3.7")


def test_links_match_messages_by_their_fields_not_their_correlation_ids():
    logs = {node: read(node, gzip.open(KAFKA_37 / f"node-{node}" / "server.log.gz", "rt")) for node in (1, 2, 3)}
    matched = links.links(logs)
    received = [o for log in logs.values() for o in log.observations if isinstance(o, Received) or (isinstance(o, Replied) and not o.wire)]
    from_clients = [o for o in received if o.source == -1]  # DescribeQuorum from kraftcheck's admin client: nobody's log to match
    assert from_clients and all(type(o.message).__name__ == "DescribeQuorumRequest" for o in from_clients)
    assert (matched.linked, matched.unlinked, matched.sent_at_kill) == (len(received) - len(from_clients), (), ())


def test_a_run_killed_between_sending_and_logging_may_leave_one_message_unlogged_and_no_more():
    """Kafka logs "Sent ..." after handing the message to its network thread: node 1, killed in
    the 4.3.1 run, may have sent its last message without logging it. Its log without that line
    links, the message named as sent at the kill; without its last two lines (to nodes 2 and 3), only one is excused;
    without a line from the middle of the run, the message is received but never sent."""
    logs = {node: read(node, gzip.open(KAFKA_43 / f"node-{node}" / "server.log.gz", "rt")) for node in (1, 2, 3)}
    assert links.links(logs).unlinked == ()
    observations = logs[1].observations
    restart = [index for index, o in enumerate(observations) if isinstance(o, Started)][1]
    sends = [index for index in range(restart) if isinstance(observations[index], (Sent, Answered))]

    def without(*indexes: int) -> links.Links:
        kept = tuple(o for index, o in enumerate(observations) if index not in indexes)
        return links.links({**logs, 1: msgspec.structs.replace(logs[1], observations=kept)})

    last, before_last = observations[sends[-1]], observations[sends[-2]]
    one = without(sends[-1])
    assert one.unlinked == () and [(u.node, u.peer, u.what) for u in one.sent_at_kill] == [(last.destination, 1, f"response {type(last.message).__name__}")]
    two = without(sends[-1], sends[-2])
    assert len(two.sent_at_kill) == len(two.unlinked) == 1 and {(u.node, u.peer) for u in two.sent_at_kill + two.unlinked} == {(last.destination, 1), (before_last.destination, 1)}
    middle = without(sends[len(sends) // 2])
    assert middle.sent_at_kill == () and [(u.node, u.peer) for u in middle.unlinked] == [(observations[sends[len(sends) // 2]].destination, 1)]


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH: Spark cannot start (scripts/bootstrap installs it)")
def test_many_runs_get_a_verdict_each_and_spark_gives_the_same_with_a_task_per_run(tmp_path):
    """--runs: the 3.7.2 run validates, the 3.6.2 one does not (its leader past its deadline), a
    directory without logs cannot be read (exit 2). On Spark, local[2] and three runs, more tasks
    than cores: the same verdicts, the same figures, but for the time each took."""
    (tmp_path / "nothing").mkdir()
    runs = [str(KAFKA_37), str(KAFKA_362), str(tmp_path / "nothing")]
    base = [*KRAFTCHECK, "validate", "--runs", *runs, "--profile", "kafka-3.7", "--json", "--quiet"]
    here = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert here.returncode == 2, here.stderr
    verdicts = json.loads(here.stdout)
    assert [(v["run"], v["valid"], v["error"] is None) for v in verdicts] == [(runs[0], True, True), (runs[1], False, True), (runs[2], False, False)]
    assert verdicts[1]["validation"]["nodes"][1]["unexplained"]["why"].startswith("PROGRESS-1")
    on_spark = subprocess.run([*base, "--engine", "spark", "--spark-master", "local[2]"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert on_spark.returncode == 2, on_spark.stderr

    def timeless(found: list) -> list:
        return [v | {"validation": v["validation"] and {k: x for k, x in v["validation"].items() if k != "seconds"}} for v in found]

    assert timeless(json.loads(on_spark.stdout)) == timeless(verdicts)
    table = subprocess.run([*KRAFTCHECK, "validate", "--runs", runs[0], runs[1], "--profile", "kafka-3.7", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert table.returncode == 1 and "1 of 2 validated." in table.stdout and "(PROGRESS-1)" in table.stdout
    refused = subprocess.run([*KRAFTCHECK, "validate", str(KAFKA_37), "--spark-master", "local[2]", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert (refused.returncode, refused.stdout) == (2, "") and "--spark-master needs --engine spark" in refused.stderr


@pytest.mark.parametrize("profile", ["kip595", "kafka-3.7", "kafka-3.9", "kafka-4.3"])
def test_every_model_walk_logged_as_kafka_logs_validates(profile, tmp_path):
    """Soundness: random walks of the cluster model (a kill and a restart, client appends, lost
    messages), each node's steps written as Kafka 4.3 logs them (tests/kafka_logs.py): the
    validation explains every line of every one."""
    for seed in range(12):
        run = tmp_path / str(seed)
        walked = walk(ClusterConfig(voters=(1, 2, 3), profile=profile), run, seed, 250)
        validation = validate_logs([run], profile)
        assert validation.valid, (seed, walked, validation.first, validation.unlinked[:3])
        assert validation.explained > 100


def test_a_mutant_node_s_logs_do_not_validate_from_the_step_it_departs_at(tmp_path):
    """Power: node N of a walk steps with a mutant (adapters/mutants.py, the seeded bugs), the
    others with the model. Wherever the mutant takes a step no outcome of the model's matches,
    the validation fails, on that node, at that step's lines or after (a departure that changes
    the state alone shows when the state is next seen)."""
    departed = {}
    for name, mutant in MUTANTS.items():
        if mutant.system != "kraft":
            continue
        for seed, node in ((seed, node) for seed in range(12) for node in (1, 2, 3)):
            run = tmp_path / f"{name}-{seed}-{node}"
            walked = walk(ClusterConfig(voters=(1, 2, 3)), run, seed, 200, odd=(node, mutant.step))
            if walked.departed_at is None:
                shutil.rmtree(run)
                continue
            validation = validate_logs([run], "kip595")
            assert not validation.valid, (name, seed, node, walked)
            first = validation.first
            assert first is not None and first.node == node and first.line >= walked.line, (name, seed, node, walked, first)
            departed[name] = (seed, node)
            break
    assert len(departed) >= 12, sorted(departed)


def node_lines(run: Path, node: int) -> list[str]:
    with gzip.open(run / f"node-{node}" / "server.log.gz", "rt") as text:
        return text.read().splitlines()


def first_leaderless_prospective_timeout(lines: list[str]) -> int:
    """The line number of the transition that follows the first "Election timed out" of a
    prospective that knew no leader, read from the text alone."""
    leaderless = False
    for number, line in enumerate(lines, 1):
        if "Completed transition to ProspectiveState(" in line:
            leaderless = "leaderId=OptionalInt.empty" in line.split(" from ")[0]
        if "Election timed out before receiving sufficient vote responses" in line and leaderless:
            return next(n for n, later in enumerate(lines[number:], number + 1) if "Completed transition to UnattachedState(" in later)
    raise AssertionError("no leaderless prospective timed out")


def test_two_runs_of_kafka_4_3_1_that_showed_the_profile_wrong_validate_and_each_reading_it_had_departs_at_its_line(monkeypatch):
    """Two places where validating real runs showed the kafka-4.3 profile reading otherwise than
    Kafka 4.3.1, now open choice points: a prospective whose election times out with no leader
    known goes unattached first (ELECT-2B unattached-first: prospectiveTransitionAfterElectionLoss),
    and a Fetch whose last epoch is below every epoch of the leader's log gets that epoch back
    with offset 0 (FETCH-REQ-3A last-fetched-epoch: LeaderEpochFileCache.endOffsetFor). Both runs
    validate; pinned to the profile's old reading, each fails at the line that showed it."""
    timeout, diverging = DATA / "kafka-4.3.1-prospective-timeout", DATA / "kafka-4.3.1-diverging-below-earliest"
    assert validate_logs([timeout], "kafka-4.3").valid and validate_logs([diverging], "kafka-4.3").valid

    def pinned_to(point: str, alternative: str) -> None:
        monkeypatch.setitem(PINS, "kafka-4.3", PINS["kafka-4.3"] | {point: Pin(alternative, "the reading the profile had")})

    pinned_to("ELECT-2B", "ask-again")
    first = validate_logs([timeout], "kafka-4.3").first
    assert (first.node, first.line) == (1, first_leaderless_prospective_timeout(node_lines(timeout, 1)))
    assert first.observation.startswith("entered unattached") and all(p.state.startswith("prospective") for p in first.possible)
    pinned_to("FETCH-REQ-3A", "zero")
    first = validate_logs([diverging], "kafka-4.3").first
    answered = next(n for n, line in enumerate(node_lines(diverging, 2), 1) if "Sent response" in line and "divergingEpoch=EpochEndOffset(epoch=1, endOffset=0)" in line)
    assert (first.node, first.line) == (2, answered)
    assert "DivergingEpoch=EpochEndOffset(Epoch=0, EndOffset=0)" in first.possible[0].instead
