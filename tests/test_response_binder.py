"""Replay binds a trace's responses to the requests the node sent, and never has one voter
answer one sending of a request twice: a response re-addressed to the voter the node asked
takes the place of that voter's own response in the trace (spec/subprocess-protocol.md)."""

from collections import Counter
from pathlib import Path

import msgspec
import pytest

from adapters.registry import adapter_factory
from conformance.certify.precision import load_corpus
from conformance.certify.replay import ResponseBinder, replay, replay_file, trace_files
from conformance.corpus.generate import DEFAULT_CORPUS
from conformance.corpus.reference import build_trace
from model.events import Response, Restart, Send, Timer
from model.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch
from spec import trace as traces
from spec.trace import Trace

ASK = FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=0, FetchOffset=0, LastFetchedEpoch=0)
OTHER = FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=1, FetchOffset=0, LastFetchedEpoch=0)

# Observer 3 of voters [1, 2] starts, fetching from both, fetches from both again on its fetch timer; the
# trace then answers from 1 (naming leader 1), then from 2.
DISCOVERY = next(DEFAULT_CORPUS.glob("corpus-observer-cell-*-fetchresponse-observer-same-fenced-leader-epoch.jsonl"))  # by its cell, whatever its number
# Candidate 1 asks 2 and 3 for votes; 3 grants, and its grant is delivered again (VOTE-RESP-1) while 2 is still awaited.
DUPLICATE = next(DEFAULT_CORPUS.glob("corpus-cell-*-rule-vote-resp-1-none-granted-5.jsonl"))


def answer(leader: int) -> FetchResponse:
    return FetchResponse(PartitionErrorCode=74, CurrentLeader=LeaderIdAndEpoch(LeaderId=leader, LeaderEpoch=1))


def response(source: int, leader: int = -1, request: FetchRequest = ASK) -> Response:
    return Response(source=source, message=answer(leader), request=request)


def sent(binder: ResponseBinder, *destinations: int, request: FetchRequest = ASK) -> None:
    binder.note([Send(destination=d, message=request) for d in destinations])


def test_a_readdressed_response_takes_the_place_of_the_voters_own():
    """OBS-2=one-voter:3: the reference asked 2 and 3, the node 3 alone. 2's answer comes as 3's;
    3's own answer, and any duplicate of it, is then a second answer from 3 and is skipped."""
    binder = ResponseBinder()
    sent(binder, 3)
    assert binder.bind(response(2)).source == 3
    assert binder.bind(response(3)) is None
    assert binder.bind(response(3)) is None
    assert binder.bind(response(2)) is None  # 2 was never asked, and 3 has answered


def test_the_voters_own_response_comes_first_when_the_trace_has_it_first():
    binder = ResponseBinder()
    sent(binder, 3)
    assert binder.bind(response(3)).source == 3
    assert binder.bind(response(2)) is None


def test_a_fresh_sending_awaits_an_answer_again():
    binder = ResponseBinder()
    sent(binder, 3)
    assert binder.bind(response(2)).source == 3
    assert binder.bind(response(3)) is None
    sent(binder, 3)  # sent again (a timeout): 3 answers this sending
    assert binder.bind(response(3)).source == 3
    assert binder.bind(response(3)) is None
    sent(binder, 3)
    assert binder.bind(response(2)).source == 3  # re-addressed again, to the new sending
    assert binder.bind(response(3)) is None


def test_a_late_answer_to_an_earlier_sending_is_still_delivered():
    """Sent to 3 twice: with the latest sending answered by 2's response, 3's own answers the
    earlier sending; a third answer from 3 has no sending left to answer."""
    binder = ResponseBinder()
    sent(binder, 2, 3)
    sent(binder, 3)  # re-sent to 3 alone: 2 is given up on
    assert binder.bind(response(2)).source == 3
    assert binder.bind(response(3)).source == 3
    assert binder.bind(response(3)) is None


def test_a_real_duplicate_is_delivered_as_it_is():
    """The node asked 2 and 3 as the reference did: a duplicated answer from 2 is delivered as
    from 2 (the network duplicated it), not re-addressed to 3, which still answers itself."""
    binder = ResponseBinder()
    sent(binder, 2, 3)
    assert binder.bind(response(2)).source == 2
    assert binder.bind(response(2)).source == 2
    assert binder.bind(response(3)).source == 3
    assert binder.bind(response(3)).source == 3


def test_the_mark_is_per_request():
    binder = ResponseBinder()
    sent(binder, 3)
    sent(binder, 2, 3, request=OTHER)
    assert binder.bind(response(2)).source == 3
    assert binder.bind(response(3, request=OTHER)).source == 3  # another request: 3 has not answered it
    assert binder.bind(response(3)) is None
    assert binder.bind(response(1, request=OTHER)).source == 2
    assert binder.bind(response(1)) is None  # never asked


class Recording:
    """An adapter that records what it is sent and what it sends."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.sends: Counter[tuple[bytes, int]] = Counter()  # (request, destination) -> times sent
        self.responses: list[Response] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def step(self, event):
        if type(event) is Response:
            self.responses.append(event)
        outputs = self.inner.step(event)
        self.sends.update((msgspec.msgpack.encode(send.message), send.destination) for send in outputs.sends)
        return outputs


def answers_beyond_sendings(recording: Recording, trace: Trace) -> list[tuple[int, str]]:
    """(voter, message) the node got from a voter beyond the times it sent that voter the
    request, where the voter did not give that answer in the trace either: a second answer to
    one sending (answers the trace itself repeats, as a network may, are the voter's own)."""
    own: dict[tuple[bytes, int], Counter[bytes]] = {}
    for step in trace.steps:
        if type(step.input) is Response:
            own.setdefault((msgspec.msgpack.encode(step.input.request), step.input.source), Counter())[msgspec.json.encode(step.input.message)] += 1
    got: dict[tuple[bytes, int], Counter[bytes]] = {}
    for event in recording.responses:
        got.setdefault((msgspec.msgpack.encode(event.request), event.source), Counter())[msgspec.json.encode(event.message)] += 1
    return [
        (key[1], message.decode())
        for key, messages in got.items()
        if messages.total() > recording.sends[key]
        for message in messages - own.get(key, Counter())
    ]


def discovering_once(directory: Path) -> Path:
    """DISCOVERY without its fetch timer: the observer fetches from both voters once, as it starts."""
    trace = traces.read(DISCOVERY)
    header = trace.header
    inputs = [step.input for step in trace.steps if type(step.input) is not Timer]
    assert len(inputs) == 3 and type(inputs[0]) is Restart
    path = directory / DISCOVERY.name
    traces.write(path, build_trace(header.name, header.setting, header.node, inputs, header.origin, initial=header.initial))
    return path


def test_a_node_that_discovers_through_one_voter_gets_one_answer_from_it(tmp_path):
    """End to end: the reference fetched from voters 1 and 2; a node that takes
    OBS-2=one-voter:2 gets voter 1's answer as voter 2's, and not voter 2's own after it."""
    recording = Recording(adapter_factory("reference:OBS-2=one-voter:2")())
    result = replay_file(lambda: recording, discovering_once(tmp_path), verify=False)
    assert [(r.source, r.message.CurrentLeader.LeaderId) for r in recording.responses] == [(2, 1)]  # voter 1's answer, from 2
    assert result.verdict == "conforms", result.failure or result.divergence
    assert result.readings.get("OBS-2=one-voter:2")
    assert (result.steps, result.steps_run, result.steps_skipped) == (3, 2, 1)
    assert recording.sends[(msgspec.msgpack.encode(recording.responses[0].request), 2)] == 1


@pytest.mark.parametrize("adapter", ["reference", "reference:OBS-2=one-voter:1", "reference:OBS-2=one-voter:2", "reference:OBS-2=one-voter:3"])
def test_no_voter_answers_one_sending_twice_over_the_corpus(adapter):
    """Every trace of the shipped corpus still conforms, and no voter answers the node more
    often than the node asked it, but with the answers the trace itself has it give."""
    make = adapter_factory(adapter)
    doubled = []
    for path, trace in load_corpus(trace_files(DEFAULT_CORPUS)):
        recording = Recording(make())
        result = replay(recording, trace, str(path))
        assert result.verdict == "conforms", (path.name, result.failure or result.divergence)
        if found := answers_beyond_sendings(recording, trace):
            doubled.append((path.name, found[0]))
    assert doubled == []


def test_a_duplicated_answer_in_a_trace_reaches_the_node_as_it_is():
    """End to end: the trace duplicates voter 3's grant, and the node asked 3: the duplicate
    comes from 3 (not re-addressed to 2, which would make it a vote from 2)."""
    recording = Recording(adapter_factory("reference")())
    result = replay_file(lambda: recording, DUPLICATE)
    assert result.verdict == "conforms", result.failure or result.divergence
    assert result.steps_skipped == 0
    assert [r.source for r in recording.responses] == [3, 3]
