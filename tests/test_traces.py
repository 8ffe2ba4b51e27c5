"""The trace format: both encodings round-trip, and every kind of bad file is named precisely."""

import json
from pathlib import Path

import msgspec
import pytest

from adapters.model_adapter import ModelAdapter
from conformance import trace as traces
from conformance.corpus import build_trace
from conformance.trace import TraceCluster
from model.events import Request, Response, Timer, TimerKind
from model.messages import VoteRequest, VoteResponse

CLUSTER = TraceCluster(voters=(1, 2, 3))
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
    assert {"Header", "Step", "Outputs", "Observed", "TraceCluster"} <= set(schema["$defs"])
    assert schema["$defs"]["Header"]["required"] == ["kind", "format_version", "name", "cluster", "node", "steps"]


def test_reference_adapter_replays_what_it_generated():
    from conformance.replay import replay

    result = replay(ModelAdapter("reference"), election_trace(), "election")
    assert result.passed and result.steps_run == 2


def test_a_wrong_expectation_is_reported_field_by_field():
    from conformance.replay import replay

    trace = election_trace()
    step = trace.steps[0]
    wrong_send = msgspec.structs.replace(step.expect.sends[0], destination=3)
    changed = msgspec.structs.replace(step, expect=msgspec.structs.replace(step.expect, sends=(wrong_send,) + step.expect.sends[1:]))
    trace = msgspec.structs.replace(trace, steps=(changed,) + trace.steps[1:])
    result = replay(ModelAdapter("reference"), trace, "election")
    assert not result.passed
    assert result.divergence.step == 1
    assert result.divergence.field == "sends"
    assert "unexpected: to 2: VoteRequest" in result.divergence.actual
    assert result.rules_failed == step.rules
