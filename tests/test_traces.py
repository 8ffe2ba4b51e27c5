"""The trace format: both encodings round-trip, and every kind of bad file is named precisely."""

import json
from pathlib import Path

import msgspec
import pytest

from adapters.model_adapter import ModelAdapter
from adapters.mutants import mutant_adapter
from conformance.certify.replay import replay
from conformance.corpus.reference import build_trace
from model.events import Crash, Request, Response, Restart, Send, Timer, TimerKind
from model.isr.events import FetchNext, Startup
from model.isr.state import LeaderAndIsr
from model.messages import (
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Record,
    VoteRequest,
    VoteResponse,
)
from spec import trace as traces
from spec.trace import TraceCluster, TracePartition

CLUSTER = TraceCluster(voters=(1, 2, 3))
PARTITION = TracePartition(replicas=(1, 2), min_isr=1, truncation="epoch")
SPEC = Path(__file__).resolve().parents[1] / "spec"


def election_trace():
    vote = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=1, LastOffsetEpoch=0, LastOffset=-1)
    granted = VoteResponse(LeaderId=-1, LeaderEpoch=1, VoteGranted=True)
    inputs = [Timer(kind=TimerKind.ELECTION_TIMEOUT), Response(source=2, message=granted, request=vote)]
    return build_trace("election", CLUSTER, 1, inputs, "test")


def test_the_reference_expectations_of_an_election():
    trace = election_trace()
    first, second = trace.steps
    assert [s.destination for s in first.expect.sends] == [2, 3]
    assert first.state.role == "candidate" and first.state.voted_id == 1
    assert "ELECT-3" in first.rules
    assert second.state.role == "leader"
    assert second.state.log == ((0, 1),)  # the LeaderChange record of epoch 1
    assert {"VOTE-RESP-2", "VOTE-RESP-3"} <= set(second.rules)


@pytest.mark.parametrize("suffix", [".jsonl", ".msgpack"])
def test_both_encodings_round_trip(tmp_path, suffix):
    trace = election_trace()
    path = tmp_path / f"t{suffix}"
    traces.write(path, trace)
    assert traces.read(path) == trace


def test_jsonl_is_one_header_line_then_one_line_per_step(tmp_path):
    path = tmp_path / "t.jsonl"
    traces.write(path, election_trace())
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    header = json.loads(lines[0])
    assert (header["kind"], header["format_version"], header["steps"], header["node"]) == ("kraftcheck-trace", 1, 2, 1)
    assert json.loads(lines[1])["input"] == {"type": "timer", "kind": "election_timeout"}


def corrupt(tmp_path, edit) -> Path:
    path = tmp_path / "bad.jsonl"
    traces.write(path, election_trace())
    path.write_text(edit(path.read_text()))
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda text: text.replace('"format_version":1', '"format_version":7'), "bad.jsonl:1: unknown trace format version 7"),
        (lambda text: text.replace('"kind":"kraftcheck-trace"', '"kind":"other"'), "bad.jsonl:1: not a kraftcheck trace"),
        (lambda text: text[: len(text) // 2], "does not end in a newline (truncated file?)"),
        (lambda text: "\n".join(text.splitlines()[:2]) + "\n", "the header promises 2 steps, the file has 1 (truncated?)"),
        (lambda text: text.replace('"step":2', '"step":5'), "bad.jsonl:3: step numbered 5, expected 2"),
        (lambda text: text.replace('"kind":"election_timeout"', '"kind":"nap"'), "bad.jsonl:2: invalid step"),
        (lambda text: "{not json\n" + text, "bad.jsonl:1: invalid JSON in the header"),
        (lambda text: text.replace('"node":1', '"node":9'), "bad.jsonl:1: node 9 is not a member of the cluster [1, 2, 3]"),
        (lambda text: "", "bad.jsonl:1: empty file"),
    ],
)
def test_bad_files_are_named_with_their_line(tmp_path, edit, message):
    with pytest.raises(traces.TraceError, match=None) as caught:
        traces.read(corrupt(tmp_path, edit))
    assert message in str(caught.value)


def test_a_truncated_msgpack_file_is_refused(tmp_path):
    path = tmp_path / "t.msgpack"
    traces.write(path, election_trace())
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(traces.TraceError, match="t.msgpack: invalid MessagePack"):
        traces.read(path)


def test_published_schema_is_the_generated_one():
    """spec/trace.schema.json must be regenerated (`kraftcheck traces schema`) when the format changes."""
    assert json.loads((SPEC / "trace.schema.json").read_text()) == json.loads(json.dumps(traces.schema()))


def test_schema_accepts_the_types_it_describes():
    schema = traces.schema()
    assert {"Header", "Step", "Outputs", "Observed", "TraceCluster", "TracePartition", "OffsetsForLeaderEpochRequest"} <= set(schema["$defs"])
    assert schema["$defs"]["Header"]["required"] == ["kind", "format_version", "name", "node", "steps"]


def isr_truncation_trace(partition: TracePartition = PARTITION):
    """Replica 2 fetches two records of epoch 0 (high watermark 0), crashes, and restarts into epoch 1."""
    records = (Record(Offset=0, Epoch=0, Value=1), Record(Offset=1, Epoch=0, Value=2))
    fetch = FetchRequest(ReplicaId=2, CurrentLeaderEpoch=0, FetchOffset=0)
    asked = OffsetsForLeaderEpochRequest(ReplicaId=2, CurrentLeaderEpoch=1, LeaderEpoch=0)
    inputs = [
        FetchNext(),
        Response(source=1, message=FetchResponse(HighWatermark=0, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=0), Records=records), request=fetch),
        Crash(),
        Startup(partition=LeaderAndIsr(Leader=1, LeaderEpoch=1, Isr=(1, 2))),
        Response(source=1, message=OffsetsForLeaderEpochResponse(LeaderEpoch=0, EndOffset=1), request=asked),
    ]
    return build_trace("isr-truncation", partition, 2, inputs, "test")


def test_an_isr_replica_truncates_where_the_leader_says_its_epoch_ends():
    """KIP-101: on restart the follower asks for the end of its last epoch and truncates there, not to its high watermark."""
    steps = isr_truncation_trace().steps
    assert steps[0].expect.sends[0].message == FetchRequest(ReplicaId=2, CurrentLeaderEpoch=0, FetchOffset=0)
    assert steps[1].state.log == ((0, 0), (1, 0)) and steps[1].state.high_watermark == 0
    assert steps[2].state.role == "down"
    restart = steps[3]
    assert [(s.destination, s.message) for s in restart.expect.sends] == [(1, OffsetsForLeaderEpochRequest(ReplicaId=2, CurrentLeaderEpoch=1, LeaderEpoch=0))]
    assert restart.state.log == ((0, 0), (1, 0)) and {"ISR-START-1", "ISR-TRUNC-2"} <= set(restart.rules)
    assert steps[4].state.log == ((0, 0),) and "K101-3" in steps[4].rules


def test_before_kip101_the_same_replica_truncates_to_its_high_watermark():
    restart = isr_truncation_trace(TracePartition(replicas=(1, 2), truncation="hw")).steps[3]
    assert restart.expect.sends == () and restart.state.log == () and "ISR-TRUNC-1" in restart.rules


@pytest.mark.parametrize("suffix", [".jsonl", ".msgpack"])
def test_isr_traces_round_trip_and_replay(tmp_path, suffix):
    trace = isr_truncation_trace()
    path = tmp_path / f"isr{suffix}"
    traces.write(path, trace)
    read = traces.read(path)
    assert read == trace and read.header.system == "isr" and read.header.cluster is None
    assert replay(ModelAdapter("reference"), read, str(path)).passed
    hw_run = replay(mutant_adapter("isr-truncate-to-hw"), read, str(path))
    assert (hw_run.passed, hw_run.divergence.step, hw_run.divergence.field) == (False, 4, "sends")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda header: header | {"cluster": {"voters": [1, 2]}}, "needs exactly one of cluster (KRaft) and partition (ISR)"),
        (lambda header: {k: v for k, v in header.items() if k != "partition"}, "needs exactly one of cluster (KRaft) and partition (ISR)"),
        (lambda header: header | {"node": 3}, "node 3 is not a member of the partition [1, 2]"),
        (lambda header: header | {"partition": {"replicas": [1, 2], "min_isr": 3}}, "invalid partition: min_isr must be between 1 and the number of replicas"),
    ],
)
def test_bad_isr_headers_are_refused(tmp_path, edit, message):
    path = tmp_path / "isr.jsonl"
    traces.write(path, isr_truncation_trace())
    header, *steps = path.read_text().splitlines()
    path.write_text("\n".join([json.dumps(edit(json.loads(header)))] + steps) + "\n")
    with pytest.raises(traces.TraceError) as caught:
        traces.read(path)
    assert message in str(caught.value)


def test_reference_adapter_replays_what_it_generated():
    from conformance.certify.replay import replay

    result = replay(ModelAdapter("reference"), election_trace(), "election")
    assert result.passed and result.steps_run == 2


def test_a_wrong_send_is_reported_field_by_field():
    """A node that sends its first Vote request to the wrong voter departs on `sends`, naming both."""
    from conformance.certify.replay import replay
    from model import node as nodes

    trace = election_trace()
    step = trace.steps[0]

    def misaddressed(config, state, event):
        transition = nodes.step(config, state, event)
        first = next(i for i, o in enumerate(transition.outputs) if type(o) is Send)
        wrong = msgspec.structs.replace(transition.outputs[first], destination=1)
        return transition._replace(outputs=transition.outputs[:first] + (wrong,) + transition.outputs[first + 1 :])

    result = replay(ModelAdapter("misaddressed", {"kraft": misaddressed}), trace, "election")
    assert (result.verdict, result.passed) == ("departs", False)
    assert result.divergence.step == 1
    assert result.divergence.field == "sends"
    assert "unexpected: to 1: VoteRequest" in result.divergence.actual
    assert result.divergence.cited == step.rules == ("ELECT-3", "ELECT-4", "ELECT-6", "QSTATE-2")
    assert result.rules_failed == result.divergence.rules == ("ELECT-3", "ELECT-4", "ELECT-6"), "the rules that decide what is sent, not the quorum-state write"


def test_a_trace_whose_expectations_are_not_the_models_is_refused(tmp_path):
    """Replay judges against the specification's model; a trace recording something else (edited
    by hand, or made by another tool) is an invalid trace, named with its step, not a verdict on the adapter."""
    from conformance.certify.replay import replay_file

    trace = election_trace()
    step = trace.steps[0]
    wrong_send = msgspec.structs.replace(step.expect.sends[0], destination=3)
    changed = msgspec.structs.replace(step, expect=msgspec.structs.replace(step.expect, sends=(wrong_send,) + step.expect.sends[1:]))
    path = tmp_path / "edited.jsonl"
    traces.write(path, msgspec.structs.replace(trace, steps=(changed,) + trace.steps[1:]))
    result = replay_file(lambda: ModelAdapter("reference"), path)
    assert (result.verdict, result.passed) == ("error", False)
    assert result.failure.startswith("invalid trace: step 1: sends is recorded as")


def test_a_missing_alter_isr_is_a_divergence():
    """An ISR leader that shrinks its ISR but does not ask the controller to record it departs on `alter_isr`."""
    from model.isr import replica
    from model.isr.events import ShrinkIsr

    trace = build_trace("shrink", PARTITION, 1, [ShrinkIsr(replica=2)], "test")
    assert trace.steps[0].expect.alter_isr is not None and trace.steps[0].expect.alter_isr.Isr == (1,)

    def silent(config, state, event):
        transition = replica.step(config, state, event)
        return transition._replace(outputs=tuple(o for o in transition.outputs if type(o).__name__ != "AlterIsr"))

    result = replay(ModelAdapter("silent", {"isr": silent}), trace, "shrink")
    assert (result.passed, result.divergence.step, result.divergence.field) == (False, 1, "alter_isr")


def test_a_trace_that_hides_an_allowed_outcome_is_refused(tmp_path):
    """A step's `allowed` is the specification's, as `expect` is: a trace leaving one out (or adding one) is invalid."""
    from conformance.certify.replay import replay_file
    from conformance.corpus.generate import DEFAULT_CORPUS

    path = next(p for p in sorted(Path(DEFAULT_CORPUS).glob("*.jsonl")) if '"allowed"' in p.read_text())
    trace = traces.read(path)
    index = next(i for i, step in enumerate(trace.steps) if step.allowed)
    hidden = msgspec.structs.replace(trace.steps[index], allowed=())
    edited = tmp_path / "edited.jsonl"
    traces.write(edited, msgspec.structs.replace(trace, steps=trace.steps[:index] + (hidden,) + trace.steps[index + 1 :]))
    result = replay_file(lambda: ModelAdapter("reference"), edited)
    assert result.verdict == "error"
    assert result.failure.startswith(f"invalid trace: step {index + 1}: the other allowed outcomes are recorded as none, the specification's model allows ")


REQUEST_TIMEOUT = Timer(kind=TimerKind.REQUEST_TIMEOUT)


@pytest.mark.parametrize(
    "name, node, initial, inputs, needs",
    [
        ("a fresh voter, unattached: its election timer runs", 1, traces.Persisted(), [REQUEST_TIMEOUT], True),
        ("a candidate", 1, traces.Persisted(), [Timer(kind=TimerKind.ELECTION_TIMEOUT), REQUEST_TIMEOUT], True),
        ("a leader restarted, resigned", 1, traces.Persisted(epoch=3, leader_id=1, voted_id=1), [Restart(), REQUEST_TIMEOUT], True),
        ("a node still down", 1, traces.Persisted(epoch=3, leader_id=1, voted_id=1), [REQUEST_TIMEOUT, Restart()], False),
        ("an observer that knows no leader: no timer but the request's", 4, traces.Persisted(), [REQUEST_TIMEOUT], False),
        ("an observer following a leader: its fetch timer runs", 4, traces.Persisted(epoch=1, leader_id=1), [Restart(), REQUEST_TIMEOUT], True),
        ("no request timer at all", 1, traces.Persisted(), [Timer(kind=TimerKind.ELECTION_TIMEOUT)], False),
    ],
)
def test_a_request_timing_out_while_an_election_or_fetch_timer_runs_needs_early_request_timeout(name, node, initial, inputs, needs):
    trace = build_trace(name, TraceCluster(voters=(1, 2, 3), observers=(4,)), node, inputs, "test", initial=initial)
    assert ("EarlyRequestTimeout" in traces.required_capabilities(trace)) is needs


def test_a_resigned_node_re_sends_end_quorum_epoch_on_its_request_timer_only():
    """Kafka's resigned node re-sends EndQuorumEpoch when its request times out; when its
    election timer fires it stands and re-sends nothing, its requests still in flight (a node
    whose request timer would expire first declines that timer: LateRequestTimeout). The request
    timing out while its election timer runs needs EarlyRequestTimeout, and nothing else does."""
    initial = traces.Persisted(epoch=3, leader_id=1, voted_id=1)
    ends = [Restart(), REQUEST_TIMEOUT, Timer(kind=TimerKind.ELECTION_TIMEOUT)]
    trace = build_trace("resigned", TraceCluster(voters=(1, 2, 3), profile="kafka-3.9"), 1, ends, "test", initial=initial)
    sent = [sorted(type(send.message).__name__ for send in step.expect.sends) for step in trace.steps]
    assert [step.state.role for step in trace.steps] == ["resigned", "resigned", "candidate"]
    assert sent == [["EndQuorumEpochRequest"] * 2, ["EndQuorumEpochRequest"] * 2, ["VoteRequest"] * 2]
    assert traces.required_capabilities(trace) == ("EarlyRequestTimeout",)


FETCH_FROM_2 = Request(source=2, message=FetchRequest(ClusterId="kraft-cluster", ReplicaId=2, CurrentLeaderEpoch=1, FetchOffset=0, LastFetchedEpoch=0))


@pytest.mark.parametrize(
    "then, needs",
    [
        ([REQUEST_TIMEOUT], False),  # its check-quorum timer is 1.5 fetch timeouts: a request times out first with any timeouts
        ([REQUEST_TIMEOUT, REQUEST_TIMEOUT], True),  # not twice, unless the request timeout is below half of it
        ([REQUEST_TIMEOUT, FETCH_FROM_2, REQUEST_TIMEOUT], False),  # a majority fetched in between: the timer was reset
    ],
)
def test_a_leader_s_request_timing_out_twice_with_no_majority_fetching_needs_early_request_timeout(then, needs):
    election = election_trace()
    trace = build_trace("leader", CLUSTER, 1, [step.input for step in election.steps] + then, "test")
    assert trace.steps[-1].state.role == "leader"
    assert ("EarlyRequestTimeout" in traces.required_capabilities(trace)) is needs
