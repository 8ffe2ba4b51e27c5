"""The Kafka adapter drives Apache Kafka's own KafkaRaftClient (3.3 to 4.4) over the
subprocess protocol: exact replies to hand-written sessions, each pinned to what Kafka's source
does (cited), a reset that leaves nothing behind, and the certification of the shipped corpus.

These need a JDK, Maven and Maven Central; they skip only where java, javac or mvn is absent."""

import json
import re
import shutil
import subprocess
from collections import Counter

import msgspec
import pytest

from adapters import kafka_build
from adapters.registry import adapter_factory
from conformance import cli
from conformance.certify.replay import CONFORMS, DEPARTS, replay, replay_file, trace_files
from conformance.corpus.generate import DEFAULT_CORPUS
from conformance.scenario.parser import read
from profile_differences import differences
from spec import errors

MISSING = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"the Kafka adapter is built with a JDK and Maven; missing here: {', '.join(MISSING)}")

CLUSTER = {"voters": [1, 2, 3], "observers": [], "cluster_id": "kraft-cluster", "profile": "kip595", "fetch_max_records": 0}
FRESH = {"epoch": 0, "leader_id": -1, "voted_id": -1, "log": []}
NOTHING = {"ok": True, "response": None, "append_result": None, "shutdown": False}
IMPLEMENTATION = {  # the latest version of each RPC in each release, what two nodes of it speak to each other
    "3.9.1": "Apache Kafka 3.9.1 KafkaRaftClient (static voters, kraft.version 0); RPC versions: Vote v1, BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v17, DescribeQuorum v2",
    "4.3.1": "Apache Kafka 4.3.1 KafkaRaftClient (static voters, kraft.version 0); RPC versions: Vote v2, BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v18, DescribeQuorum v2",
    "4.4.0": "Apache Kafka 4.4.0 KafkaRaftClient (static voters, kraft.version 0); RPC versions: Vote v2, BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v18, DescribeQuorum v2",
}
TIMEOUTS = {  # what the reply to start adds, per kafka:VERSION,timeouts=NAME
    "short": "; timeouts short: request 100 ms, retry backoff 10 ms, election 1,000 ms (+ up to 1,000 ms), fetch 2,000 ms",
    "kafka": "; timeouts kafka: request 2,000 ms, retry backoff 20 ms, election 1,000 ms (+ up to 1,000 ms), fetch 2,000 ms",
    "long": "; timeouts long: request 10,000 ms, retry backoff 20 ms, election 1,000 ms (+ up to 1,000 ms), fetch 2,000 ms",
}


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """Builds into a cache of the test run's own, not the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield


def session(version: str, *commands: dict, timeouts: str = "short", timers: bool = False) -> list[dict]:
    """The replies of one adapter process to `commands`, then stop; without `timers`, the timing
    a start reply declares and the timers an observe reply reports are left out (they are
    test_the_adapter_declares_its_timeouts_and_reports_kafka_s_timers's)."""
    lines = "".join(json.dumps(command) + "\n" for command in (*commands, {"command": "stop"}))
    done = subprocess.run(kafka_build.adapter_command(version, timeouts), input=lines, capture_output=True, text=True, timeout=180)
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert replies[-1] == {"ok": True} and done.returncode == 0, done.stderr[-2000:]
    if not timers:
        for reply in replies:
            reply.pop("timing", None)
            reply.pop("timers", None)
    return replies[:-1]


@pytest.mark.parametrize(
    "timeouts, timing",
    [
        ("short", {"request_timeout_ms": 100, "retry_backoff_ms": 10, "election_timeout_ms": 1000, "election_backoff_max_ms": 1000, "fetch_timeout_ms": 2000}),
        ("kafka", {"request_timeout_ms": 2000, "retry_backoff_ms": 20, "election_timeout_ms": 1000, "election_backoff_max_ms": 1000, "fetch_timeout_ms": 2000}),
        ("long", {"request_timeout_ms": 10000, "retry_backoff_ms": 20, "election_timeout_ms": 1000, "election_backoff_max_ms": 1000, "fetch_timeout_ms": 2000}),
    ],
)
def test_the_adapter_declares_its_timeouts_and_reports_kafka_s_timers(timeouts, timing):
    """The reply to start gives the timeouts in model.config.Timing's names; an observe, the time
    left on each of Kafka's timers: a fresh 3.9 voter runs its election timer (1,000 ms plus a
    random part below 1,000 ms) and, its discovery Fetch in flight, a request timer of the whole
    request timeout (no time has moved)."""
    replies = session("3.9.1", start(), {"command": "drain"}, {"command": "observe"}, timeouts=timeouts, timers=True)
    assert replies[0]["timing"] == timing
    timers = replies[2]["timers"]
    assert sorted(timers) == ["election_timeout", "request_timeout"]
    assert 1000 <= timers["election_timeout"] < 2000 and timers["request_timeout"] == timing["request_timeout_ms"]


def start(node: int = 1, initial: dict = FRESH) -> dict:
    return {"command": "start", "cluster": CLUSTER, "node": node, "initial": initial}


def vote_request(epoch: int, candidate: int, last_epoch: int, last_offset: int, pre_vote: bool = False) -> dict:
    return {"type": "VoteRequest", "ClusterId": "kraft-cluster", "CandidateEpoch": epoch, "CandidateId": candidate, "LastOffsetEpoch": last_epoch, "LastOffset": last_offset, "PreVote": pre_vote}


def fetch_request(replica: int, epoch: int, offset: int, last_epoch: int) -> dict:
    return {"type": "FetchRequest", "ClusterId": "kraft-cluster", "ReplicaId": replica, "CurrentLeaderEpoch": epoch, "FetchOffset": offset, "LastFetchedEpoch": last_epoch}


def sent_fetch(version: str, replica: int, epoch: int, offset: int, last_epoch: int, high_watermark: int = -1) -> dict:
    """A Fetch as Kafka's node sends it: asking to wait 500 ms (MAX_FETCH_WAIT_MS) and, from 4.1
    (KIP-1166), with its high watermark (-1 where it knows none)."""
    sent = dict(fetch_request(replica, epoch, offset, last_epoch), MaxWaitMs=500)
    return sent | ({"HighWatermark": high_watermark} if release(version) >= (4, 1) else {})


def fetch_response(error: int, high_watermark: int, leader: int, epoch: int, records: list) -> dict:
    return {"type": "FetchResponse", "ErrorCode": 0, "PartitionErrorCode": error, "HighWatermark": high_watermark,
            "DivergingEpoch": {"Epoch": -1, "EndOffset": -1}, "CurrentLeader": {"LeaderId": leader, "LeaderEpoch": epoch}, "Records": records}


def state(role: str, epoch: int, leader: int, voted: int, high_watermark: int, log: list) -> dict:
    return {"ok": True, "state": {"role": role, "epoch": epoch, "leader_id": leader, "voted_id": voted, "high_watermark": high_watermark,
                                  "log_end_offset": len(log), "log": log}}


@pytest.mark.parametrize("version", kafka_build.TESTED_VERSIONS)
def test_a_fresh_voter_fetches_from_a_voter_to_find_the_leader_and_answers_fetches_it_cannot_serve(version):
    """KIP-853 (Kafka 3.9 on): an unattached replica sends a Fetch to a bootstrap server, here a
    voter (KafkaRaftClient.pollUnattachedCommon, maybeSendFetchToAnyBootstrap). A Fetch it cannot
    serve gets NOT_LEADER_OR_FOLLOWER with the high watermark unknown, -1."""
    replies = session(version, start(), {"command": "drain"}, {"command": "request", "source": 2, "message": fetch_request(2, 0, 0, 0)})
    assert replies == [
        {"ok": True, "protocol": 2, "implementation": IMPLEMENTATION[version] + TIMEOUTS["short"], "lacks": ["OffsetsForLeaderEpoch", "FetchRecordLimit"]},
        {"ok": True, "sends": [{"destination": 2, "message": sent_fetch(version, 1, 0, 0, 0)}]},
        dict(NOTHING, response=fetch_response(6, -1, -1, 0, [])),
    ]


@pytest.mark.parametrize("version", kafka_build.TESTED_VERSIONS)
def test_a_vote_request_last_offset_is_the_log_end_offset(version):
    """Kafka reads a Vote request's LastOffset as the candidate's log end offset (0 for an empty
    log) and answers INVALID_REQUEST to a negative one (KafkaRaftClient.handleVoteRequest); the
    KIP's schema calls it "the offset of the last record", -1 for an empty log."""
    replies = session(version, start(),
                      {"command": "request", "source": 2, "message": vote_request(1, 2, 0, -1)},
                      {"command": "request", "source": 2, "message": vote_request(1, 2, 0, 0)},
                      {"command": "observe"})
    refused, granted = (dict(NOTHING, response={"type": "VoteResponse", "ErrorCode": 0, "PartitionErrorCode": error, "LeaderId": leader, "LeaderEpoch": epoch, "VoteGranted": grant})
                        for error, leader, epoch, grant in ((42, -1, 0, False), (0, -1, 1, True)))
    assert replies[1:] == [refused, granted, state("voted", 1, -1, 2, -1, [])]


def test_an_exception_of_the_harness_is_an_error_not_the_node_going_down():
    """A Fetch response whose record does not start at the follower's log end: Kafka's MockLog,
    a test class standing in for the log, throws from inside poll. Only an exception thrown by
    Kafka's own code is a fatal error (shutdown); this one, of the harness, fails the command,
    naming where it was thrown, and the node is left as it was."""
    fetch = sent_fetch("4.3.1", 1, 1, 0, 0)
    answer = fetch_response(0, 0, 2, 1, [{"type": "Record", "Offset": 5, "Epoch": 1, "Value": 7}])
    replies = session("4.3.1", start(), {"command": "drain"},
                      {"command": "request", "source": 2, "message": {"type": "BeginQuorumEpochRequest", "ClusterId": "kraft-cluster", "LeaderId": 2, "LeaderEpoch": 1}},
                      {"command": "drain"},
                      {"command": "response", "source": 2, "request": fetch, "message": answer},
                      {"command": "observe"})
    assert replies[3] == {"ok": True, "sends": [{"destination": 2, "message": fetch}]}
    assert replies[4] == {"ok": False, "error": "IllegalStateException: the harness failed, not KafkaRaftClient (thrown in "
                          "org.apache.kafka.raft.MockLog.append(MockLog.java:313)): java.lang.RuntimeException: Illegal append at offset 5 with current end offset of 0"}
    assert replies[5] == state("follower", 1, 2, -1, -1, [])


@pytest.mark.parametrize("timeouts", ["short", "long"])
def test_a_timer_over_a_request_in_flight_that_would_time_out_first_is_declined(timeouts):
    """A fresh 3.9 voter fetches to find the leader, then its election timer fires, that Fetch in
    flight. With a 100 ms request timeout the Fetch would time out, and go again, before the
    election timer can fire: the adapter declines the timer for want of LateRequestTimeout (the
    trace is not applicable from there) and the node is left as it was. With a request timeout
    longer than every other timer the timer fires and the node stands."""
    replies = session("3.9.1", start(), {"command": "drain"}, {"command": "timer", "kind": "election_timeout"}, {"command": "drain"}, {"command": "observe"}, timeouts=timeouts)
    assert [send["message"]["type"] for send in replies[1]["sends"]] == ["FetchRequest"]
    if timeouts == "short":
        assert replies[2]["ok"] is False and replies[2]["lacks"] == "LateRequestTimeout"
        assert replies[2]["error"].startswith("unsupported: a election_timeout over a request in flight: Kafka's request timer expires in 100 ms, by this timer (")
        assert replies[3:] == [{"ok": True, "sends": []}, state("unattached", 0, -1, -1, -1, [])]
    else:
        assert replies[2]["ok"] is True
        assert sorted(replies[3]["sends"], key=lambda send: send["destination"]) == [{"destination": v, "message": vote_request(1, 1, 0, 0)} for v in (2, 3)]
        assert replies[4] == state("candidate", 1, -1, 1, -1, [])


def test_kafka_3_9_elects_a_leader_that_replicates_and_resigns_on_restart():
    """3.9.1, node 1: election timeout, a candidate at epoch 1 asks both voters; one vote makes it
    leader, with Kafka's LeaderChange record (the voter set and the granting voters); a client value
    follows; the high watermark is unknown (-1) until a majority has fetched, then the end of the
    log. A node that has just started does not know its high watermark (-1). The quorum-state
    file keeps no vote once a leader is known (ElectionState
    .withElectedLeader). Restarted from its own leadership, it comes back resigned and sends
    EndQuorumEpoch (QuorumState.initialize)."""
    granted = {"type": "VoteResponse", "ErrorCode": 0, "PartitionErrorCode": 0, "LeaderId": -1, "LeaderEpoch": 1, "VoteGranted": True}
    leader_change = {"type": "Record", "Offset": 0, "Epoch": 1, "Value": {"type": "LeaderChangeMessage", "LeaderId": 1, "Voters": [1, 2, 3], "GrantingVoters": [1, 2]}}
    value = {"type": "Record", "Offset": 1, "Epoch": 1, "Value": 7}
    replies = session("3.9.1", start(), {"command": "drain"}, {"command": "timer", "kind": "election_timeout"}, {"command": "observe"},
                      {"command": "drain"},
                      {"command": "response", "source": 2, "message": granted, "request": vote_request(1, 1, 0, 0)},
                      {"command": "drain"}, {"command": "append", "value": 7},
                      {"command": "request", "source": 2, "message": fetch_request(2, 1, 0, 0)},
                      {"command": "request", "source": 2, "message": fetch_request(2, 1, 2, 1)},
                      {"command": "observe"}, {"command": "crash"}, {"command": "observe"}, {"command": "restart"}, {"command": "observe"},
                      {"command": "drain"}, timeouts="long")  # its election timer fires over its first Fetch, in flight
    begin = {"type": "BeginQuorumEpochRequest", "ClusterId": "kraft-cluster", "LeaderId": 1, "LeaderEpoch": 1}
    end = {"type": "EndQuorumEpochRequest", "ClusterId": "kraft-cluster", "ReplicaId": 1, "LeaderId": 1, "LeaderEpoch": 1, "PreferredSuccessors": []}
    assert replies[2:] == [
        NOTHING,
        state("candidate", 1, -1, 1, -1, []),
        {"ok": True, "sends": [{"destination": 3, "message": vote_request(1, 1, 0, 0)}, {"destination": 2, "message": vote_request(1, 1, 0, 0)}]},
        NOTHING,
        {"ok": True, "sends": [{"destination": 3, "message": begin}, {"destination": 2, "message": begin}]},
        dict(NOTHING, append_result={"ErrorCode": 0, "Offset": 1}),
        dict(NOTHING, response=fetch_response(0, -1, 1, 1, [leader_change, value])),
        dict(NOTHING, response=fetch_response(0, 2, 1, 1, [])),
        state("leader", 1, 1, -1, 2, [[0, 1], [1, 1]]),
        NOTHING,
        state("down", 1, 1, -1, 0, [[0, 1], [1, 1]]),
        NOTHING,
        state("resigned", 1, 1, -1, -1, [[0, 1], [1, 1]]),
        {"ok": True, "sends": [{"destination": 2, "message": end}, {"destination": 3, "message": end}]},
    ]


@pytest.mark.parametrize("version", kafka_build.TESTED_VERSIONS)
def test_a_leader_holds_a_fetch_that_asks_to_wait_and_answers_it_later(version):
    """FETCH-REQ-7 on Kafka itself: a Fetch with MaxWaitMs 500 that finds nothing new gets no
    response at its command (KafkaRaftClient.handleFetchRequest -> fetchPurgatory.await); a client
    append answers every held Fetch afresh, with the record (updateLeaderEndOffsetAndTimestamp ->
    maybeComplete); the fetch_wait timer answers the oldest with the answer it had when it came
    (the REQUEST_TIMED_OUT branch: the original response), and no other timer does; resigning
    answers the rest NOT_LEADER_OR_FOLLOWER without a high watermark (transitionToResigned ->
    completeAllExceptionally). What the model does under Options.held_fetches."""
    granted = {"type": "VoteResponse", "ErrorCode": 0, "PartitionErrorCode": 0, "LeaderId": -1, "LeaderEpoch": 1, "VoteGranted": True}
    pre_granted = dict(granted, LeaderEpoch=0)
    drain = {"command": "drain"}  # a response is delivered to a request drained (sent) before it
    elected = [drain, {"command": "timer", "kind": "election_timeout"}, drain]
    if version.startswith("4."):  # a pre-vote first (KIP-996)
        elected += [{"command": "response", "source": 2, "message": pre_granted, "request": vote_request(0, 1, 0, 0, pre_vote=True)}, drain]
    elected += [{"command": "response", "source": 2, "message": granted, "request": vote_request(1, 1, 0, 0)}, drain]

    def waiting(replica: int, offset: int) -> dict:
        return dict(fetch_request(replica, 1, offset, 1), MaxWaitMs=500)

    replies = session(version, start(), *elected, {"command": "request", "source": 2, "message": fetch_request(2, 1, 0, 0)},
                      {"command": "request", "source": 2, "message": waiting(2, 1)}, {"command": "request", "source": 3, "message": waiting(3, 1)},
                      {"command": "append", "value": 7},
                      {"command": "request", "source": 2, "message": waiting(2, 2)}, {"command": "request", "source": 3, "message": waiting(3, 2)},
                      {"command": "timer", "kind": "fetch_wait"}, {"command": "timer", "kind": "election_timeout"}, {"command": "resign"},
                      timeouts="long")  # its election timer fires over its first Fetch, in flight
    value = {"type": "Record", "Offset": 1, "Epoch": 1, "Value": 7}
    refused = dict(fetch_response(errors.NOT_LEADER_OR_FOLLOWER, -1, 1, 1, []))
    assert replies[len(elected) + 2 :] == [
        NOTHING,
        NOTHING,
        dict(NOTHING, append_result={"ErrorCode": 0, "Offset": 1},
             answers=[{"destination": r, "message": fetch_response(0, 1, 1, 1, [value]), "request": waiting(r, 1)} for r in (2, 3)]),
        NOTHING,
        NOTHING,
        dict(NOTHING, answers=[{"destination": 2, "message": fetch_response(0, 2, 1, 1, []), "request": waiting(2, 2)}]),
        NOTHING,
        dict(NOTHING, answers=[{"destination": 3, "message": refused, "request": waiting(3, 2)}]),
    ]


@pytest.mark.parametrize("version, resigns", [("3.3.2", False), ("3.7.2", True)])
def test_kafka_15489_a_leader_no_majority_fetched_from_resigns_from_3_7_on(version, resigns):
    """KAFKA-15489, a split brain: before 3.7 a leader that no majority of voters fetches from
    stays leader for ever (LeaderState has no check-quorum timer, so its progress_timeout moves no
    time and changes nothing); 3.7.0 added the check (KafkaRaftClient.pollLeader:
    timeUntilCheckQuorumExpires, 1.5 fetch timeouts), and the leader resigns, asking the other
    voters to stand (PROGRESS-1). The same session on both sides of the fix: a voter with nothing
    persisted, as before KIP-853 (3.9), looks for no leader as it starts; it stands on its election
    timeout and one vote makes it leader."""
    granted = {"type": "VoteResponse", "ErrorCode": 0, "PartitionErrorCode": 0, "LeaderId": -1, "LeaderEpoch": 1, "VoteGranted": True}
    replies = session(version, start(), {"command": "drain"}, {"command": "timer", "kind": "election_timeout"}, {"command": "drain"},
                      {"command": "response", "source": 2, "message": granted, "request": vote_request(1, 1, 0, 0)}, {"command": "drain"},
                      {"command": "observe"}, {"command": "timer", "kind": "progress_timeout"}, {"command": "drain"}, {"command": "observe"},
                      timeouts="long")  # its check-quorum timer fires over its BeginQuorumEpochs, in flight
    begin = {"type": "BeginQuorumEpochRequest", "ClusterId": "kraft-cluster", "LeaderId": 1, "LeaderEpoch": 1}
    end = {"type": "EndQuorumEpochRequest", "ClusterId": "kraft-cluster", "ReplicaId": 1, "LeaderId": 1, "LeaderEpoch": 1, "PreferredSuccessors": [2, 3]}
    leading = state("leader", 1, 1, -1, -1, [[0, 1]])
    assert replies[0]["implementation"].startswith(f"Apache Kafka {version} KafkaRaftClient")
    assert replies[1:7] == [
        {"ok": True, "sends": []},
        NOTHING,
        {"ok": True, "sends": [{"destination": 2, "message": vote_request(1, 1, 0, 0)}, {"destination": 3, "message": vote_request(1, 1, 0, 0)}]},
        NOTHING,
        {"ok": True, "sends": [{"destination": 2, "message": begin}, {"destination": 3, "message": begin}]},
        leading,
    ]
    if resigns:
        assert replies[7:] == [NOTHING, {"ok": True, "sends": [{"destination": 2, "message": end}, {"destination": 3, "message": end}]}, state("resigned", 1, 1, -1, -1, [[0, 1]])]
    else:
        assert replies[7:] == [NOTHING, {"ok": True, "sends": []}, leading]


def test_kafka_4_asks_for_pre_votes_before_it_stands():
    """4.3.1 (KIP-996): on election timeout an unattached voter becomes prospective, in its own
    epoch, and sends pre-votes: Vote requests with PreVote true and CandidateEpoch unchanged,
    LastOffset its log end offset."""
    replies = session("4.3.1", start(), {"command": "drain"}, {"command": "timer", "kind": "election_timeout"}, {"command": "observe"}, {"command": "drain"}, timeouts="long")
    assert replies[3] == state("prospective", 0, -1, -1, -1, [])
    pre_vote = vote_request(0, 1, 0, 0, pre_vote=True)
    assert replies[4]["ok"] and sorted(replies[4]["sends"], key=lambda send: send["destination"]) == [
        {"destination": 2, "message": pre_vote},
        {"destination": 3, "message": pre_vote},
    ]


def test_kafka_3_9_cannot_be_sent_a_pre_vote():
    """Kafka 3.9 predates KIP-996: the adapter says so rather than deliver a pre-vote as a vote."""
    pre_vote = vote_request(0, 2, 0, 0, pre_vote=True)
    replies = session("3.9.1", start(), {"command": "request", "source": 2, "message": pre_vote})
    assert replies[1] == {"ok": False, "error": "unsupported: a pre-vote (a Vote request with PreVote true, KIP-996), which Kafka 3.9 predates"}


@pytest.mark.parametrize("version, voted", [("3.9.1", -1), ("4.3.1", 1)])
def test_a_node_restarted_from_persisted_state_follows_the_leader_it_recorded(version, voted):
    """A node whose quorum-state file names a leader starts down, and on restart follows it and
    fetches from the end of its log. The file is one each release writes: 3.9 keeps no vote
    beside a known leader (ElectionState.withElectedLeader), 4.x keeps both, as the KIP's file does."""
    leader_change = {"type": "Record", "Offset": 0, "Epoch": 1, "Value": {"type": "LeaderChangeMessage", "LeaderId": 1, "VotedIds": [1, 2]}}
    persisted = {"epoch": 1, "leader_id": 1, "voted_id": voted, "log": [leader_change]}
    replies = session(version, start(2, persisted), {"command": "observe"}, {"command": "restart"}, {"command": "observe"}, {"command": "drain"})
    assert replies[1:] == [
        state("down", 1, 1, voted, 0, [[0, 1]]),
        NOTHING,
        state("follower", 1, 1, voted, -1, [[0, 1]]),
        {"ok": True, "sends": [{"destination": 1, "message": sent_fetch(version, 2, 1, 1, 1)}]},
    ]


def without_timing(result) -> dict:
    fields = msgspec.to_builtins(result)
    fields.pop("seconds")
    return fields


def test_a_reset_leaves_nothing_of_a_trace_behind():
    """One JVM replays traces one after another: each gives what it gives in a JVM of its own."""
    shipped = trace_files(DEFAULT_CORPUS)
    sample = [path for path in shipped if "isr" not in path.name][::60]
    with adapter_factory("kafka:3.9.1") as shared:
        in_one_process = [replay_file(shared, path) for path in sample]
        again = replay_file(shared, sample[0])
    assert without_timing(again) == without_timing(in_one_process[0])
    for path, result in zip(sample[:4], in_one_process):
        with adapter_factory("kafka:3.9.1") as fresh:
            assert without_timing(replay_file(fresh, path)) == without_timing(result), path.name


@pytest.mark.parametrize("version, named", [("4.3.1", 18)])  # 3.9.1's (16 named, the same path) is in docs/certification/
def test_certifying_kafka_against_kip595_as_written_names_its_deviations(version, named, tmp_path, capsys):
    """The shipped corpus through Kafka: the 68 traces that need OffsetsForLeaderEpoch or a
    Fetch record limit are not applicable; every other trace departs from KIP-595 as written at
    its first step, the node's start (Kafka fetches from one voter, perhaps itself). The
    deviation report explains them by readings of the Kafka profile's own (pinned: a change is
    explained), and leaves none unexplained."""
    assert version in kafka_build.TESTED_VERSIONS
    argv = ["certify", "--adapter", f"kafka:{version}", "--system", "kraft", "--out", str(tmp_path / "out"), "--shorten-budget", "0", "--json"]
    code = cli.main(argv)
    summary = json.loads(capsys.readouterr().out)
    assert code == 1
    assert summary["verdicts"] == {"conforms": 0, "departs": 904, "not applicable": 68, "error": 0}
    assert sorted(summary["rules_failed"]) == ["BOOT-1", "QSTATE-1", "QSTATE-3", "QSTATE-4"]
    found = summary["deviations"]
    assert found["profile"] == "kip595" and found["complete"] and found["departed"] == 904
    names = {explained["deviation"] for explained in found["explained"]}
    assert len(names) == named and names <= differences(kafka_build.VERSION_PROFILES[version])
    assert found["unexplained"] == []  # each trace conforms under them, or up to a step Kafka declines (LateRequestTimeout)


@pytest.mark.parametrize(
    "version, profile, timeouts, verdicts",
    [
        ("3.9.1", "kafka-3.9", "short", {"conforms": 356, "departs": 0, "not applicable": 603, "error": 0}),
        ("4.3.1", "kafka-4.3", "short", {"conforms": 375, "departs": 0, "not applicable": 693, "error": 0}),
        ("3.9.1", "kafka-3.9", "kafka", {"conforms": 583, "departs": 0, "not applicable": 376, "error": 0}),
        ("4.3.1", "kafka-4.3", "kafka", {"conforms": 643, "departs": 0, "not applicable": 425, "error": 0}),
        ("3.9.1", "kafka-3.9", "long", {"conforms": 692, "departs": 0, "not applicable": 267, "error": 0}),
        ("4.3.1", "kafka-4.3", "long", {"conforms": 763, "departs": 0, "not applicable": 305, "error": 0}),
        ("4.4.0", "kafka-4.3", "short", {"conforms": 375, "departs": 0, "not applicable": 693, "error": 0}),
        ("4.4.0", "kafka-4.3", "kafka", {"conforms": 643, "departs": 0, "not applicable": 425, "error": 0}),
        ("4.4.0", "kafka-4.3", "long", {"conforms": 763, "departs": 0, "not applicable": 305, "error": 0}),
    ],
)
def test_certifying_kafka_under_its_own_profile(version, profile, timeouts, verdicts, tmp_path, capsys):
    """traces/PROFILE, the corpus of the model read as that Kafka reads KIP-595
    (adapters/kafka/README.md): every applicable trace conforms, none errs, and certify exits 0,
    with the adapter's short timeouts, Kafka's defaults and a long request timeout; the traces
    that need OffsetsForLeaderEpoch or a Fetch record limit are not applicable, and so are those
    whose order of timers the timeouts cannot give: a timer fired over a request in flight that
    would time out first (LateRequestTimeout, declined at the step: every such trace with the
    short timeouts, none with the long request timeout) and, with Kafka's defaults and the long
    request timeout, a request timing out while an election, fetch or check-quorum timer runs
    (EarlyRequestTimeout) (pinned: a change is explained). The report names the timeouts.
    4.4.0, the newest release, runs on 4.3.1's test jars (Maven Central serves none of its own)
    with the adapter's channel and queue (src/io-4.4), and reads the KIP as 4.3 does."""
    adapter = f"kafka:{version}" + ("" if timeouts == "short" else f",timeouts={timeouts}")
    code = cli.main(["certify", "--adapter", adapter, "--profile", profile, "--system", "kraft", "--out", str(tmp_path / "out"), "--shorten-budget", "0", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["verdicts"] == verdicts
    timers = {"short": ["LateRequestTimeout"], "kafka": ["EarlyRequestTimeout", "LateRequestTimeout"], "long": ["EarlyRequestTimeout"]}[timeouts]
    assert summary["lacks"] == sorted(timers + ["FetchRecordLimit", "OffsetsForLeaderEpoch"])
    assert summary["implementation"] == IMPLEMENTATION[version] + TIMEOUTS[timeouts]
    assert f"Implementation: {IMPLEMENTATION[version] + TIMEOUTS[timeouts]}" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize(
    "version, profile, verdicts, departed_rules, setup",
    [
        ("3.3.2", "kafka-3.7", {"conforms": 595, "departs": 69, "not applicable": 317, "error": 0},
         ["COMMON-2", "LOG-2", "END-SEND-1", "END-SEND-2", "FETCH-REQ-3", "FETCH-REQ-3A", "FETCH-REQ-7", "PROGRESS-1"], "static voters"),
        ("3.7.2", "kafka-3.7", {"conforms": 601, "departs": 0, "not applicable": 380, "error": 0}, [], "static voters"),
        ("3.8.1", "kafka-3.8", {"conforms": 594, "departs": 2, "not applicable": 367, "error": 0}, ["COMMON-2", "QSTATE-2", "VOTE-REQ-4", "VOTE-REQ-4B", "VOTE-LOG-1"], "static voters, kraft.version 0"),
    ],
)
def test_certifying_kafka_before_kip_853_under_its_profile(version, profile, verdicts, departed_rules, setup, tmp_path, capsys):
    """The oldest release line and the two before KIP-853, under the profiles that read the KIP as
    3.7 and 3.8 do: 3.7.2 conforms wherever a trace applies; what departs is a Kafka defect of
    its release (kafka_build.KNOWN_DEFECTS): 3.3.2's leader that no majority fetches from keeps
    leading (KAFKA-15489: PROGRESS-1, no EndQuorumEpoch), and holds a Fetch whose answer diverges,
    answering it when its wait runs out with what it finds then (KAFKA-15100: FETCH-REQ-3 and
    FETCH-REQ-7, 13 traces with the short timeouts), 3.8.1's observer that voted stops
    fetching (KAFKA-17067: the Fetch missing after its grant). The report names the setup: there
    is no kraft.version before 3.8."""
    out = tmp_path / "out"
    code = cli.main(["certify", "--adapter", f"kafka:{version}", "--profile", profile, "--system", "kraft", "--out", str(out), "--shorten-budget", "0", "--no-deviations", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert (code, summary["verdicts"]) == (1 if version in kafka_build.KNOWN_DEFECTS else 0, verdicts)
    assert summary["rules_failed"] == departed_rules
    assert summary["implementation"].startswith(f"Apache Kafka {version} KafkaRaftClient ({setup}); RPC versions: ")
    departed = [result for result in json.loads((out / "report.json").read_text())["results"] if result["verdict"] == "departs"]
    if version == "3.3.2":
        causes = Counter(("PROGRESS-1" if "PROGRESS-1" in d["rules"] else "FETCH-REQ-3" if "FETCH-REQ-3" in d["rules"] else d["rules"][0], d["field"]) for d in (r["divergence"] for r in departed))
        assert causes == {("PROGRESS-1", "sends"): 56, ("FETCH-REQ-3", "response"): 9, ("FETCH-REQ-7", "answers"): 4}
    if version == "3.8.1":
        assert all("voterequest-observer" in result["trace"] and result["divergence"]["field"] == "sends" for result in departed)


@pytest.mark.parametrize("version, passes", [("3.8.1", False), ("3.9.1", True)])
def test_kafka_17067_an_observer_that_voted_goes_on_fetching_from_3_9_on(version, passes, capsys):
    """KAFKA-17067: 3.8.1's observer answers a Vote as a voter does and, granting it, sits in
    VotedState and sends no Fetch; 3.9.1's keeps looking for the leader (the scenario's OBS-2)."""
    scenario = DEFAULT_CORPUS / "scenarios" / "kafka-17067-observer-that-voted-goes-on-fetching.scenario"
    code = cli.main(["scenario", "run", str(scenario), "--adapter", f"kafka:{version}"])
    out = capsys.readouterr().out
    assert code == (0 if passes else 1), out
    if not passes:
        assert "step 2" in out and "sends" in out


@pytest.mark.parametrize("version", ["3.7.2", "3.8.1"])
def test_a_kafka_leader_before_3_9_is_not_acknowledged_by_a_fetch_it_answers_with_a_diverging_epoch(version, capsys):
    """served_fetch_acknowledges: the leader re-sends its BeginQuorumEpoch to the voter whose
    Fetch it answered with a DivergingEpoch, beside the voter that never answered."""
    scenario = SCENARIOS / "kafka-3.8-diverging-fetch-does-not-acknowledge-the-leader.scenario"
    code = cli.main(["scenario", "run", str(scenario), "--adapter", f"kafka:{version}"])
    out = capsys.readouterr().out
    assert code == 0 and f"1 scenarios, 1 pass, 0 fail (adapter kafka:{version})" in out, out


@pytest.mark.parametrize("version, passes", [("3.3.2", False), ("3.5.2", True)])
def test_kafka_15100_a_leader_answers_a_diverging_fetch_at_once_from_3_5_2_on(version, passes, capsys):
    """KAFKA-15100: before 3.5.2 a leader held a Fetch asking to wait whenever its answer had no
    records and no error, a DivergingEpoch answer too, so the follower that must truncate waited
    out MaxWaitMs (handleFetchRequest); 3.5.2 answers it at once (isPartitionDiverged), as
    FETCH-REQ-7 and FETCH-REQ-3 have it. The scenario's last step, on both sides of the fix."""
    scenario = DEFAULT_CORPUS / "scenarios" / "kafka-15100-diverging-fetch-answered-at-once.scenario"
    code = cli.main(["scenario", "run", str(scenario), "--adapter", f"kafka:{version},timeouts=long"])  # its fetch timer fires over a Fetch in flight
    out = capsys.readouterr().out
    assert code == (0 if passes else 1), out
    if not passes:
        assert "step 4" in out and "response: expected FetchResponse" in out and "got no response" in out


def test_kafka_20895_a_follower_told_its_leader_resigns_still_refuses_a_pre_vote(tmp_path, capsys):
    """KAFKA-20895, open: Kafka 4.x's follower refuses every pre-vote once it has fetched from its
    leader, even after that leader's EndQuorumEpoch (FollowerState.canGrantVote), so a graceful
    shutdown's first successor loses its pre-vote in a quorum of five. The scenario as Kafka is
    passes on 4.3.1; the same scenario expecting the fix's answer (the pre-vote granted) departs at
    its last step, the Vote, on the VoteGranted field."""
    scenario = DEFAULT_CORPUS / "scenarios" / "kafka-20895-follower-refuses-pre-vote-after-resignation.scenario"
    assert cli.main(["scenario", "run", str(scenario), "--adapter", "kafka:4.3.1"]) == 0, capsys.readouterr().out
    capsys.readouterr()
    refusal = "expect response VoteResponse(LeaderId=1, LeaderEpoch=2)\n"
    text = scenario.read_text()
    assert text.count(refusal) == 1
    fixed = tmp_path / "kafka-20895-fixed.scenario"
    fixed.write_text(text.replace(refusal, "expect response VoteResponse(LeaderId=1, LeaderEpoch=2, VoteGranted=true)\n"))
    code = cli.main(["scenario", "run", str(fixed), "--adapter", "kafka:4.3.1"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "step 4" in out and "VoteGranted" in out


@pytest.mark.parametrize("timeouts, kip_backoff_ms", [("short", 10), ("kafka", 20)])
def test_kafka_s_successor_backoff_is_compared_on_its_fetch_timer(timeouts, kip_backoff_ms):
    """END-REQ-6: the adapter reports the time left on Kafka's fetch timer, which the resigning
    leader's EndQuorumEpoch overrode with Kafka's backoff, (1000 >> 1) << 0 = 500 ms for the second
    of two successors, and declares its timeouts. Judged with the KIP's backoff instead
    (successor_backoff_strict off), Kafka 4.3.1 departs at that step on the timer, the KIP's
    quorum.retry.backoff.ms * 2^0 computed from the timeouts it runs with (10 ms short, 20 ms Kafka's)."""
    trace = read(SCENARIOS / "kafka-20895-follower-refuses-pre-vote-after-resignation.scenario").trace
    resigned = next(step.step for step in trace.steps if "END-REQ-6" in step.rules)
    adapter = adapter_factory(f"kafka:4.3.1,timeouts={timeouts}")()
    assert replay(adapter, trace, "kafka-20895.jsonl").verdict == CONFORMS
    kip_backoff = replay(adapter, trace, "kafka-20895.jsonl", reading=lambda config: msgspec.structs.replace(config, options=msgspec.structs.replace(config.options, successor_backoff_strict=False)))
    divergence = kip_backoff.divergence
    assert (kip_backoff.verdict, divergence.step, divergence.field, divergence.rules) == (DEPARTS, resigned, "timers", ("END-REQ-6",))
    assert (divergence.expected, divergence.actual) == (f"fetch_timeout {kip_backoff_ms} ms left", "fetch_timeout 500 ms left")


SCENARIOS = DEFAULT_CORPUS / "scenarios"


@pytest.mark.parametrize("version, profile", [("3.9.1", "kafka-3.9"), ("4.3.1", "kafka-4.3"), ("4.4.0", "kafka-4.3")])
def test_the_library_scenarios_of_a_kafka_profile_pass_on_that_kafka(version, profile, capsys):
    """The library's scenarios written under a Kafka profile, hand-written inputs whose
    expectations the model gives: the only voter leading at its start, the LeaderChange record as
    Kafka writes it, the BeginQuorumEpoch heartbeat, a Fetch sent elsewhere after an unexpected
    error, the node stopped by a BeginQuorumEpoch naming it leader (a Kafka defect), a held Fetch
    answered when records come (rule-fetch-req-7, kafka-3.9). Run on Kafka itself, none fails with
    any timeouts, and each passes with the timeouts that give its order of timers (the rest decline
    it: not applicable): every one passes with some."""
    chosen = sorted(path for path in SCENARIOS.glob("*.scenario") if f'profile="{profile}"' in path.read_text())
    assert len(chosen) >= 2
    passing: set[str] = set()
    for timeouts in kafka_build.TIMEOUTS:
        adapter = f"kafka:{version},timeouts={timeouts}"
        code = cli.main(["scenario", "run", *map(str, chosen), "--adapter", adapter])
        out = capsys.readouterr().out
        assert code == 0 and " 0 fail" in out, out
        passing |= {path.name for path in chosen if re.search(rf"{re.escape(path.name)}\s+\d+\s+\d+\s+passes", out)}
    assert passing == {path.name for path in chosen}


def release(version: str) -> tuple[int, ...]:
    return tuple(map(int, version.split(".")))


OLDEST_TESTED, NEWEST = (release(v) for v in kafka_build.TESTED_VERSIONS)
BETWEEN = [version for version in kafka_build.VERSION_PROFILES if OLDEST_TESTED < release(version) < NEWEST]


BETWEEN_VERDICTS = {
    "4.0.2": {"conforms": 381, "departs": 0, "not applicable": 682, "error": 0},
    "4.1.2": {"conforms": 375, "departs": 0, "not applicable": 693, "error": 0},
    "4.2.1": {"conforms": 375, "departs": 0, "not applicable": 693, "error": 0},
}


@pytest.mark.parametrize("version", BETWEEN)
def test_each_release_line_between_the_tested_ones_certifies_under_its_profile(version, tmp_path, capsys):
    """4.0.2, 4.1.2 and 4.2.1, built from the adapter's release sources (src/kafka-4 with
    src/records): every applicable trace of its profile's corpus conforms."""
    profile = kafka_build.VERSION_PROFILES[version]
    code = cli.main(["certify", "--adapter", f"kafka:{version}", "--profile", profile, "--system", "kraft", "--out", str(tmp_path / "out"), "--shorten-budget", "0", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["verdicts"] == BETWEEN_VERDICTS[version]
    assert summary["implementation"].startswith(f"Apache Kafka {version} KafkaRaftClient")


def test_kafka_4_0_under_the_4_3_profile_departs_where_its_candidate_backs_off(tmp_path, capsys):
    """Why 4.0 has a profile of its own: under kafka-4.3 it departs, and the deviation report
    explains every departure of the corpus by no fetch_carries_high_watermark, its Fetch carrying
    no high watermark (KIP-1166 came in 4.1). The other difference, KAFKA-18345, a 4.0 candidate
    that lost backing off a random time (pollCandidate: isBackingOff) where 4.1 on waits its
    election timeout, is the scenario's: 4.0.2 asks for pre-votes again when its request timer
    fires, at the last step; 4.1.2 waits, as the profile has it."""
    code = cli.main(["certify", "--adapter", "kafka:4.0.2", "--profile", "kafka-4.3", "--system", "kraft", "--out", str(tmp_path / "out"), "--shorten-budget", "0", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 1
    assert summary["verdicts"] == {"conforms": 27, "departs": 970, "not applicable": 71, "error": 0}
    found = summary["deviations"]
    assert [explained["deviation"] for explained in found["explained"]] == ["option fetch_carries_high_watermark=False"]
    assert found["unexplained"] == []
    scenario = SCENARIOS / "kafka-18345-candidate-that-lost-waits-its-election-timeout.scenario"
    for version, passes in (("4.0.2", False), ("4.1.2", True)):
        code = cli.main(["scenario", "run", str(scenario), "--adapter", f"kafka:{version}"])
        out = capsys.readouterr().out
        assert code == (0 if passes else 1), out
        assert passes or ("step 4 (request_timeout fires): sends: expected none" in out and "PreVote=True" in out)
