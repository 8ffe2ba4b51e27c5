"""Divergences read as the protocol: expected and actual as JSON with every field, the differing ones named."""

import json

from adapters.model_adapter import ModelAdapter
from adapters.mutants import mutant_adapter
from conformance.certify.certification import certify
from conformance.certify.comparison import compare
from conformance.certify.replay import replay
from conformance.certify.reports.terminal import terminal_summary
from conformance.corpus.generate import DEFAULT_CORPUS
from model.events import Send
from model.messages import VoteRequest, VoteResponse
from spec import trace as traces
from spec.trace import Outputs

ASK = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=2, LastOffsetEpoch=0, LastOffset=-1)


def test_a_default_valued_field_is_as_visible_as_any_other():
    expected = VoteResponse(LeaderId=-1, LeaderEpoch=1, VoteGranted=True)
    actual = VoteResponse(LeaderId=0, LeaderEpoch=1, VoteGranted=True)
    found = compare(Outputs(response=expected), None, Outputs(response=actual), None)
    assert (found.field, found.expected, found.actual) == ("response.LeaderId", "-1", "0")
    assert json.loads(found.expected_json) == {"type": "VoteResponse", "ErrorCode": 0, "PartitionErrorCode": 0, "LeaderId": -1, "LeaderEpoch": 1, "VoteGranted": True}
    assert json.loads(found.actual_json)["LeaderId"] == 0


def test_every_differing_field_is_named_in_field_order():
    expected = VoteResponse(PartitionErrorCode=74, LeaderId=3, LeaderEpoch=2, VoteGranted=False)
    actual = VoteResponse(PartitionErrorCode=0, LeaderId=3, LeaderEpoch=1, VoteGranted=True)
    found = compare(Outputs(response=expected), None, Outputs(response=actual), None)
    assert found.differing == ("response.PartitionErrorCode", "response.LeaderEpoch", "response.VoteGranted")
    assert found.expected == "74 FENCED_LEADER_EPOCH" and found.actual == "0 NONE"


def test_sends_are_shown_whole_as_json():
    fetch_to = lambda n: Send(destination=n, message=ASK)  # noqa: E731 - any message will do
    found = compare(Outputs(sends=(fetch_to(2), fetch_to(3))), None, Outputs(sends=(fetch_to(2),)), None)
    assert found.field == "sends"
    assert [s["destination"] for s in json.loads(found.expected_json)] == [2, 3]
    assert [s["destination"] for s in json.loads(found.actual_json)] == [2]
    assert json.loads(found.expected_json)[0]["message"]["LastOffset"] == -1


def test_reports_show_the_json_of_both_sides(tmp_path):
    report = certify("mutant:hw-any-epoch", lambda: mutant_adapter("hw-any-epoch"), DEFAULT_CORPUS, tmp_path)
    first = next(r for r in report.results if r.divergence)
    assert first.divergence.differing[0] == first.divergence.field == "response.HighWatermark"
    assert json.loads(first.divergence.expected_json)["HighWatermark"] != json.loads(first.divergence.actual_json)["HighWatermark"]
    markdown = (tmp_path / "report.md").read_text()
    assert "Differing fields: `response.HighWatermark`." in markdown and '~~~~json\n{\n  "type": "FetchResponse",' in markdown
    stored = json.loads((tmp_path / "report.json").read_text())
    assert any(r["divergence"] and r["divergence"]["expected_json"] for r in stored["results"])
    summary = terminal_summary(report, tmp_path)
    assert "differing: response.HighWatermark" in summary
    marked = [line for line in summary.splitlines() if "<>" in line]
    assert marked and all('"HighWatermark"' in line for line in marked)


def test_a_passing_replay_has_no_divergence():
    path = sorted(DEFAULT_CORPUS.glob("*.jsonl"))[0]
    assert replay(ModelAdapter("reference"), traces.read(path), str(path)).divergence is None


def test_leader_change_voters_are_compared_as_a_set():
    """VOTE-RESP-3: VotedIds have no order; a node listing them otherwise than the model conforms,
    one listing other voters departs."""
    from model.messages import FetchResponse, LeaderChangeMessage, Record

    def answer(voted: tuple[int, ...]) -> Outputs:
        record = Record(Offset=0, Epoch=1, Value=LeaderChangeMessage(LeaderId=1, VotedIds=voted))
        return Outputs(response=FetchResponse(HighWatermark=1, Records=(record,)))

    assert compare(answer((1, 2)), None, answer((2, 1)), None) is None
    found = compare(answer((1, 2)), None, answer((1, 3)), None)
    assert found.field == "response.Records[0].Value.VotedIds[1]" and (found.expected, found.actual) == ("2", "3")
