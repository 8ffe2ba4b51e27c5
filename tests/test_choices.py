"""Choice points: the model enumerates what the specification allows, replay accepts any of it
and follows the implementation's choice, and every reading of the KIP conforms to the corpus."""

import json
import shlex
import sys
from collections import Counter

import msgspec
import pytest

from adapters.model_adapter import ModelAdapter
from adapters.node_models import kraft_start, model_for, outputs_of
from adapters.registry import AdapterOptionError, adapter_factory
from conformance import cli
from conformance.certify.precision import load_corpus, precision_adapters, run_precision
from conformance.certify.replay import ResponseBinder, replay, replay_file, trace_files
from conformance.corpus.generate import DEFAULT_CORPUS, shipped_corpora
from model import node as nodes
from model.choices import CHOICE_POINTS, Choices, alternatives, allowed_transitions, default
from model.config import ClusterConfig
from model.events import Request, Response, Restart, Send
from model.messages import FetchRequest, FetchResponse, OffsetsForLeaderEpochRequest
from model.state import NodeState, Role
from spec import errors
from spec.trace import Trace

CORPUS = load_corpus(trace_files(DEFAULT_CORPUS))
FOLLOWER = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=1)


def node_config(node: int = 2):
    return ClusterConfig(voters=(1, 2, 3)).node(node)


def fetch(epoch: int) -> Request:
    return Request(source=3, message=FetchRequest(ClusterId="kraft-cluster", ReplicaId=3, CurrentLeaderEpoch=epoch, FetchOffset=0, LastFetchedEpoch=0))


def test_a_fetch_of_another_epoch_at_a_non_leader_allows_either_check_first():
    """FETCH-REQ-5 leaves the order open: the epoch check first (the default) or leadership first."""
    outcomes = allowed_transitions(nodes.step, node_config(), FOLLOWER, fetch(1))
    codes = [(o.picks, o.transition.outputs[0].message.PartitionErrorCode) for o in outcomes]
    assert codes == [((("FETCH-REQ-5", "epoch-first"),), errors.FENCED_LEADER_EPOCH), ((("FETCH-REQ-5", "leadership-first"),), errors.NOT_LEADER_OR_FOLLOWER)]


def test_a_fetch_of_the_nodes_own_epoch_leaves_nothing_open():
    outcomes = allowed_transitions(nodes.step, node_config(), FOLLOWER, fetch(2))
    assert [(o.picks, o.transition.outputs[0].message.PartitionErrorCode) for o in outcomes] == [((), errors.NOT_LEADER_OR_FOLLOWER)]


def test_discovery_allows_every_voter_or_any_one_of_them():
    """OBS-2: the KIP's "a random voter" is any one other voter; every voter at once is allowed too."""
    observer = ClusterConfig(voters=(1, 2, 3), observers=(4,)).node(4)
    down = NodeState(role=Role.DOWN)
    outcomes = allowed_transitions(nodes.step, observer, down, Restart())
    assert [sorted(s.destination for s in o.transition.outputs) for o in outcomes] == [[1, 2, 3], [1], [2], [3]]
    assert [o.picks for o in outcomes] == [(("OBS-2", "every-voter"),), (("OBS-2", "one-voter:1"),), (("OBS-2", "one-voter:2"),), (("OBS-2", "one-voter:3"),)]


def test_a_step_is_unchanged_by_every_choice_point_it_does_not_consult():
    """The enumeration is complete: fixing any point a step did not consult, to any alternative,
    changes nothing, over every step of the shipped corpus's KRaft traces."""
    checked = 0
    for _, trace in CORPUS:
        if trace.header.cluster is None:
            continue
        config = trace.header.cluster.config().node(trace.header.node)
        state = kraft_start(config, trace.header.initial)
        for step in trace.steps:
            outcome = allowed_transitions(nodes.step, config, state, step.input)[0]
            for name in set(CHOICE_POINTS) - set(outcome.consulted):
                for pick in alternatives(name, config.voters, config.node_id)[1:]:
                    fixed = msgspec.structs.replace(config, choices=Choices(((name, pick),)))
                    assert nodes.step(fixed, state, step.input) == outcome.transition, (trace.header.name, step.step, name, pick)
                    checked += 1
            state = outcome.transition.state
    assert checked > 50_000


def test_every_reading_of_the_specification_conforms_to_the_whole_corpus():
    """Precision: the reference under every single alternative, sampled combinations and per-step
    random resolutions departs from no trace (and none errs)."""
    adapters = precision_adapters(combinations=4, random_runs=4)
    assert len(adapters) == sum(len(alternatives(n, (1, 2, 3), 0)) - 1 for n in CHOICE_POINTS) + 8
    rows, precise = run_precision(CORPUS, adapters)
    assert [(r.adapter, r.verdicts["conforms"]) for r in rows] == [(a, len(CORPUS)) for a in adapters]
    assert len(precise) == len(CORPUS)


def test_every_alternative_is_told_apart_somewhere_in_the_shipped_corpora():
    """Each alternative of each point is distinguishable from the default at some step of a
    shipped corpus (FETCH-SEND-1 arises only under the Kafka profiles' unattached_discovery): the model, walked along the traces that record other outcomes, gives it an outcome
    of its own there. (A trace records each distinct outcome once, under the first alternative
    that gives it, so an alternative that agrees with another at every step it differs from the
    default, as COMMON-4's offsets-first does, is not named in the traces themselves.)"""
    shown = set()
    for _, trace in [loaded for corpus in shipped_corpora().values() for loaded in load_corpus(trace_files(corpus))]:
        if not any(step.allowed for step in trace.steps):
            continue
        model = model_for(trace.header.setting)
        config = model.config(trace.header.setting, trace.header.node)
        state = model.start(config, trace.header.initial)
        for step in trace.steps:
            default_outcome, *others = allowed_transitions(model.step, config, state, step.input)
            if step.allowed:
                shown |= {
                    (name, pick.split(":")[0])
                    for outcome in others
                    if outputs_of(step.input, outcome.transition) != outputs_of(step.input, default_outcome.transition) or outcome.transition.state != default_outcome.transition.state
                    for name, pick in outcome.picks
                    if pick != default(name)
                }
            state = default_outcome.transition.state
    wanted = {(name, pick) for name, point in CHOICE_POINTS.items() for pick in point.alternatives[1:]}
    assert wanted <= shown, sorted(wanted - shown)


def test_the_report_lists_the_reading_the_implementation_took():
    make = adapter_factory("reference:FETCH-REQ-5=leadership-first")
    readings = Counter()
    for path, trace in CORPUS:
        readings.update(replay(make(), trace, str(path)).readings)
    assert readings["FETCH-REQ-5=leadership-first"] > 50 and readings["FETCH-REQ-5=epoch-first"] == 0
    default_readings = Counter()
    for path, trace in CORPUS:
        default_readings.update(replay(ModelAdapter("reference"), trace, str(path)).readings)
    assert default_readings["FETCH-REQ-5=epoch-first"] == readings["FETCH-REQ-5=leadership-first"]


def test_replay_follows_a_node_that_fetched_from_one_voter():
    """A node that discovers through voter 3 alone is sent the trace's responses as coming from
    voter 3; a response to a request it never sent is skipped, and the trace still conforms."""
    results = [replay(adapter_factory("reference:OBS-2=one-voter:3")(), trace, str(path)) for path, trace in CORPUS]
    assert all(r.verdict == "conforms" for r in results)
    assert sum(r.steps_skipped for r in results) > 0
    assert sum(r.readings.get("OBS-2=one-voter:3", 0) for r in results) > 0


def test_the_binder_readdresses_a_response_and_skips_one_to_nothing_sent():
    binder = ResponseBinder()
    ask = fetch(2).message
    other = fetch(3).message
    binder.note([Send(destination=3, message=ask)])
    answer = FetchResponse()
    assert binder.bind(Response(source=2, message=answer, request=ask)).source == 3
    assert binder.bind(Response(source=3, message=answer, request=ask)) is None  # 3 has answered already: the re-addressed response took its place
    assert binder.bind(Response(source=2, message=answer, request=other)) is None


def test_the_binder_readdresses_to_the_destination_the_node_awaits_now():
    """The same Fetch sent to 1, then (on a timeout) to 3: a response from 1 or 2 answers the one
    to 3, the Fetch the node awaits; with that answered, one from 1 is a late answer, delivered
    as it is, and one from 2 (never asked) finds nothing to answer."""
    binder = ResponseBinder()
    ask = fetch(2).message
    binder.note([Send(destination=1, message=ask)])
    binder.note([Send(destination=3, message=ask)])
    answer = FetchResponse()
    assert binder.bind(Response(source=1, message=answer, request=ask)).source == 3
    assert binder.bind(Response(source=1, message=answer, request=ask)).source == 1
    assert binder.bind(Response(source=2, message=answer, request=ask)) is None
    binder.note([Send(destination=1, message=ask), Send(destination=2, message=ask)])  # sent again, to both: both awaited
    assert binder.bind(Response(source=2, message=answer, request=ask)).source == 2
    assert binder.bind(Response(source=3, message=answer, request=ask)).source == 1


def kraft_needs_offsets(trace: Trace) -> bool:
    return trace.header.cluster is not None and any(type(s.input) is Request and type(s.input.message) is OffsetsForLeaderEpochRequest for s in trace.steps)


def test_a_capability_declared_lacking_makes_its_traces_not_applicable(tmp_path, capsys):
    needing = sum(kraft_needs_offsets(trace) for _, trace in CORPUS)
    assert needing > 10
    assert cli.main(["certify", "--adapter", "reference:lacks=OffsetsForLeaderEpoch", "--out", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["verdicts"] == {"conforms": len(CORPUS) - needing, "departs": 0, "not applicable": needing, "error": 0}
    assert summary["lacks"] == ["OffsetsForLeaderEpoch"]


def test_a_subprocess_node_declares_what_it_lacks_at_start(tmp_path):
    needing = [path for path, trace in CORPUS if kraft_needs_offsets(trace)][:2]
    plain = [path for path, trace in CORPUS if trace.header.cluster is not None and not kraft_needs_offsets(trace)][:1]
    command = f"{shlex.quote(sys.executable)} -m adapters.example_node --lacks OffsetsForLeaderEpoch"
    make = adapter_factory(f"subprocess:{command}")
    assert [replay_file(make, path).verdict for path in needing + plain] == ["not applicable", "not applicable", "conforms"]
    unknown = adapter_factory(f"subprocess:{shlex.quote(sys.executable)} -m adapters.example_node --lacks Teleport")
    failed = replay_file(unknown, plain[0])
    assert failed.verdict == "error" and "unknown capabilities lacking: Teleport" in failed.failure


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("FOO=1", "unknown choice point 'FOO'"),
        ("OBS-2=one-voter", "OBS-2 has no alternative 'one-voter'; it has every-voter, one-voter:N"),
        ("random=x", "the seed is a non-negative integer"),
        ("lacks=Teleport", "unknown capabilities Teleport"),
        ("x", "is not KEY=VALUE"),
        ("profile=kafka-9.9", "profile='kafka-9.9': unknown profile 'kafka-9.9'; known profiles: "),
    ],
)
def test_reference_options_are_checked(option, message):
    with pytest.raises(AdapterOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        adapter_factory(f"reference:{option}")


def test_the_choices_command_lists_every_point_with_its_default_first(capsys):
    assert cli.main(["choices", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [p["choice"] for p in listed] == list(CHOICE_POINTS)
    assert all(p["alternatives"][0] == default(p["choice"]) for p in listed)


def test_the_choices_run_reports_every_reading_conforming(capsys):
    assert cli.main(["choices", "--run", "--combinations", "1", "--random", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["traces"] == report["precise_traces"] == len(CORPUS)
    assert all(run["verdicts"]["departs"] == run["verdicts"]["error"] == 0 for run in report["runs"])
