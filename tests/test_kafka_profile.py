"""The kafka-3.9 profile: the model options that read KIP-595 as Apache Kafka 3.9 does (each
one checked against KIP-595 as written on the same step), and the profile's own corpus."""

import msgspec
import pytest

from adapters.model_adapter import ModelAdapter
from conformance.certify.replay import replay, trace_files
from conformance.corpus.generate import CORPUS_CONFIGS, DEFAULT_CORPUS, GenerateOptions, generate, write_corpus
from conformance.explore.check import system_for
from conformance.explore.configs import CheckConfig, resolve
from conformance.explore.engine import explore
from model import node as nodes
from model.choices import allowed_transitions
from model.config import ClusterConfig
from model.events import Crash, Request, Resign, Response, Restart, Send, SetTimer, Shutdown, Timer, TimerKind
from model.messages import BeginQuorumEpochRequest, DescribeQuorumRequest, EndQuorumEpochRequest, EndQuorumEpochResponse, EpochEndOffset, FetchRequest, FetchResponse, LeaderChangeMessage, LeaderIdAndEpoch, Record, VoteRequest, VoteResponse
from model.state import NodeState, Role
from spec import errors
from spec import trace as traces



def config(profile: str, node: int = 1):
    return ClusterConfig(voters=(1, 2, 3), profile=profile).node(node)


def sends(transition) -> list[tuple[int, object]]:
    """What a step sends, each Fetch without the wait it asks for (a Kafka fetcher's 500 ms,
    none under kip595): tests/rules/test_held_fetch.py pins that field; these compare the rest."""
    return [(o.destination, msgspec.structs.replace(o.message, MaxWaitMs=msgspec.UNSET) if type(o.message) is FetchRequest else o.message) for o in transition.outputs if type(o) is Send]


def vote_answer(transition) -> VoteResponse:
    return next(message for _, message in sends(transition) if type(message) is VoteResponse)


def fetch(replica: int, epoch: int = 0, offset: int = 0, last_epoch: int = 0) -> FetchRequest:
    return FetchRequest(ClusterId="kraft-cluster", ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch)


def test_a_kafka_node_starts_down_and_its_start_looks_for_the_leader():
    """unattached_discovery: started as from an empty persisted state, a voter fetches to find
    the leader (here from every other voter, the default reading of OBS-2), its high watermark
    unknown; KIP-595 as written starts it unattached and silent."""
    assert nodes.initial_state(config("kip595")) == NodeState(role=Role.UNATTACHED)
    kafka = config("kafka-3.9")
    assert nodes.initial_state(kafka) == NodeState(role=Role.DOWN)
    started = nodes.step(kafka, nodes.initial_state(kafka), Restart())
    assert sends(started) == [(2, fetch(1)), (3, fetch(1))]
    assert (started.state.role, started.state.high_watermark) == (Role.UNATTACHED, -1)


def test_a_kafka_node_may_fetch_from_itself_to_find_the_leader():
    """discovery_includes_self: OBS-2's one-voter alternatives range over every voter, the node
    itself included, as Kafka's bootstrap list does; as written, over the other voters only."""
    for profile, voters in (("kip595", {2, 3}), ("kafka-3.9", {1, 2, 3})):
        chosen = config(profile)
        down = NodeState(role=Role.DOWN)
        outcomes = allowed_transitions(nodes.step, chosen, down, Restart())
        one_voter = {dict(o.picks)["OBS-2"] for o in outcomes} - {"every-voter"}
        assert one_voter == {f"one-voter:{v}" for v in voters}, profile
        if profile == "kafka-3.9":
            itself = next(o for o in outcomes if dict(o.picks)["OBS-2"] == "one-voter:1")
            assert sends(itself.transition) == [(1, fetch(1))]


def test_a_vote_request_carries_the_log_end_offset_under_kafka():
    """vote_last_offset: a candidate with one record sends LastOffset 1 (its end offset) under
    kafka-3.9, 0 (its last record) as written; a voter with that same record grants either way."""
    record = Record(Offset=0, Epoch=1, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 2)))
    for profile, last_offset in (("kip595", 0), ("kafka-3.9", 1)):
        candidate = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=2, log=(record,))
        elected = nodes.on_timer(config(profile), candidate, nodes.TimerKind.FETCH_TIMEOUT)
        request = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=2, CandidateId=1, LastOffsetEpoch=1, LastOffset=last_offset)
        assert sends(elected)[0] == (2, request), profile
        voter = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=2, log=(record,))
        granted = nodes.step(config(profile, 3), voter, Request(source=1, message=request))
        assert vote_answer(granted).VoteGranted, profile
        shorter = msgspec.structs.replace(request, LastOffset=last_offset - 1)
        refused = nodes.step(config(profile, 3), voter, Request(source=1, message=shorter))
        assert not vote_answer(refused).VoteGranted, profile


def test_kafka_3_9_keeps_no_vote_once_the_leader_is_known():
    """vote_kept_with_leader False: a voter that voted for 2 and then learns 2 leads keeps the
    leader alone in its quorum-state file; as written it keeps both."""
    voted = NodeState(role=Role.UNATTACHED, epoch=1, voted_id=2)
    begin = Request(source=2, message=BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=2, LeaderEpoch=1))
    for profile, kept in (("kip595", 2), ("kafka-3.9", -1)):
        following = nodes.step(config(profile), voted, begin).state
        assert (following.role, following.leader_id, following.voted_id) == (Role.FOLLOWER, 2, kept), profile


def test_a_new_kafka_leader_does_not_know_its_high_watermark_until_it_commits():
    """unknown_high_watermark: elected, the leader's high watermark is unknown (-1 in its Fetch
    responses) until a majority holds a record of its epoch; as written it keeps the one it had."""
    candidate = NodeState(role=Role.CANDIDATE, epoch=1, voted_id=1, granted=frozenset({1}), high_watermark=0)
    vote = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=1, LastOffsetEpoch=0, LastOffset=0)
    granted = Response(source=2, message=VoteResponse(LeaderId=-1, LeaderEpoch=1, VoteGranted=True), request=vote)
    for profile, unknown in (("kip595", 0), ("kafka-3.9", -1)):
        leader = nodes.step(config(profile), candidate, granted).state
        assert (leader.role, leader.high_watermark) == (Role.LEADER, unknown), profile
        answered = nodes.step(config(profile), leader, Request(source=2, message=fetch(2, 1)))
        assert sends(answered)[0][1].HighWatermark == unknown, profile
        caught_up = nodes.step(config(profile), leader, Request(source=2, message=fetch(2, 1, 1, 1))).state
        assert caught_up.high_watermark == 1, profile


def test_kafka_answers_a_refused_fetch_without_a_high_watermark():
    """refused_fetch_without_high_watermark: a leader refusing a Fetch of an older epoch sends
    HighWatermark -1 under kafka-3.9, its own high watermark as written; a served Fetch keeps it."""
    for profile, expected in (("kip595", 1), ("kafka-3.9", -1)):
        chosen = config(profile)
        leader = NodeState(role=Role.LEADER, epoch=2, leader_id=1, log=(Record(Offset=0, Epoch=1, Value=1),), high_watermark=1, replica_offsets=(1, -1, -1))
        refused = nodes.step(chosen, leader, Request(source=2, message=fetch(2, epoch=1)))
        (_, answer), = sends(refused)
        assert (answer.PartitionErrorCode, answer.HighWatermark) == (errors.FENCED_LEADER_EPOCH, expected), profile
        served = nodes.step(chosen, leader, Request(source=2, message=fetch(2, epoch=2, offset=1, last_epoch=1)))
        assert sends(served)[0][1].HighWatermark == 1, profile


def test_a_kafka_fetcher_whose_fetch_stalls_asks_any_voter_and_keeps_its_leader():
    """stalled_fetch_any_voter: an observer's fetch timeout and a follower's request timeout keep
    the leader and send the Fetch as in discovery (every other voter by default); as written the
    observer forgets the leader and the follower re-sends to the leader. Kafka's observer whose
    Fetch is still in flight asks no voter until that Fetch times out (findReadyBootstrapServer
    waits for it); with none in flight it asks at once."""
    request = fetch(4, epoch=2)
    every_voter = [(1, request), (2, request), (3, request)]
    waiting = NodeState(role=Role.OBSERVER, epoch=2, leader_id=1, fetching=request)
    idle = NodeState(role=Role.OBSERVER, epoch=2, leader_id=1)
    kip595 = ClusterConfig(voters=(1, 2, 3), observers=(4,), profile="kip595").node(4)
    forgot = nodes.on_timer(kip595, waiting, nodes.TimerKind.FETCH_TIMEOUT)
    assert (forgot.state.role, forgot.state.leader_id, sends(forgot)) == (Role.OBSERVER, -1, every_voter)
    kafka = ClusterConfig(voters=(1, 2, 3), observers=(4,), profile="kafka-3.9").node(4)
    stalled = nodes.on_timer(kafka, waiting, nodes.TimerKind.FETCH_TIMEOUT)
    assert (stalled.state.leader_id, stalled.state.fetch_stalled, sends(stalled)) == (1, True, [])
    asked = nodes.on_timer(kafka, stalled.state, nodes.TimerKind.REQUEST_TIMEOUT)
    assert (asked.state.leader_id, sends(asked)) == (1, every_voter)
    at_once = nodes.on_timer(kafka, idle, nodes.TimerKind.FETCH_TIMEOUT)
    assert (at_once.state.leader_id, at_once.state.fetch_stalled, sends(at_once)) == (1, True, every_voter)
    follower = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=1, fetching=fetch(2, epoch=2))
    assert sends(nodes.on_timer(config("kip595", 2), follower, nodes.TimerKind.REQUEST_TIMEOUT)) == [(1, fetch(2, epoch=2))]
    retried = nodes.on_timer(config("kafka-3.9", 2), follower, nodes.TimerKind.REQUEST_TIMEOUT)
    assert (retried.state.leader_id, sends(retried)) == (1, [(1, fetch(2, epoch=2)), (3, fetch(2, epoch=2))])


def test_kafka_3_8_takes_only_a_fetch_it_serves_as_an_acknowledgement():
    """served_fetch_acknowledges: a Fetch that the leader answers with a DivergingEpoch does not
    acknowledge it (tryCompleteFetchRequest updates the replica's state, hasAcknowledgedLeader
    with it, for a valid offset only), so Kafka 3.8's leader sends that voter its BeginQuorumEpoch
    again when its request times out; as written any Fetch acknowledges the leader. A Fetch it
    serves acknowledges it under both."""
    log = (Record(Offset=0, Epoch=1, Value=1), Record(Offset=1, Epoch=3, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 3))))
    leader = NodeState(role=Role.LEADER, epoch=3, leader_id=1, voted_id=1, log=log, high_watermark=-1, replica_offsets=(2, -1, -1), endorsed=frozenset((1, 3)), fetched=frozenset((1,)))
    diverging = Request(source=2, message=fetch(2, epoch=3, offset=2, last_epoch=2))
    announce = BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=1, LeaderEpoch=3)
    for profile, again in (("kip595", []), ("kafka-3.8", [(2, announce)])):
        chosen = config(profile)
        fetched = nodes.step(chosen, leader, diverging)
        assert sends(fetched)[0][1].DivergingEpoch == EpochEndOffset(Epoch=1, EndOffset=1), profile
        assert sends(nodes.on_timer(chosen, fetched.state, TimerKind.REQUEST_TIMEOUT)) == again, profile
        served = nodes.step(chosen, leader, Request(source=2, message=fetch(2, epoch=3, offset=1, last_epoch=1))).state
        assert 2 in served.endorsed, profile


def test_kafka_restarts_its_check_quorum_count_as_soon_as_a_majority_fetched():
    """check_quorum_resets_on_majority: once voter 2 has fetched, a majority of three, the count
    starts again, so the progress timeout that fires next finds no majority and the leader resigns
    under kafka-3.9; as written the fetch counts for that timeout and the leader stays."""
    log = (Record(Offset=0, Epoch=1, Value=1),)
    leader = NodeState(role=Role.LEADER, epoch=1, leader_id=1, log=log, high_watermark=0, replica_offsets=(1, -1, -1), fetched=frozenset((1,)))
    for profile, role in (("kip595", Role.LEADER), ("kafka-3.9", Role.RESIGNED)):
        chosen = config(profile)
        fetched = nodes.step(chosen, leader, Request(source=2, message=fetch(2, epoch=1, offset=1, last_epoch=1))).state
        assert nodes.on_timer(chosen, fetched, nodes.TimerKind.PROGRESS_TIMEOUT).state.role == role, profile


@pytest.mark.parametrize("profile, workers", [("kafka-3.7", 2), ("kafka-3.8", 3), ("kafka-3.9", 2), ("kafka-4.0", 2), ("kafka-4.3", 3)])
def test_the_shipped_kafka_corpus_is_what_the_generator_writes(profile, workers, tmp_path):
    """`kraftcheck traces generate --profile P`: the KRaft searches under the profile, same bytes,
    with the searches in 2 or 3 processes at once (more than the test machine's cores)."""
    kraft = [name for name in CORPUS_CONFIGS if isinstance(resolve(name, {}), CheckConfig)]
    corpus, manifest = generate([(name, resolve(name, {"profile": profile})) for name in kraft], GenerateOptions(), workers=workers)
    write_corpus(tmp_path / "kafka", corpus, manifest)
    written = sorted(p.name for p in (tmp_path / "kafka").iterdir())
    assert written == sorted(p.name for p in (DEFAULT_CORPUS / profile).iterdir())
    for name in written:
        assert (tmp_path / "kafka" / name).read_bytes() == (DEFAULT_CORPUS / profile / name).read_bytes(), name


def test_the_searches_make_the_same_corpus_one_after_another_or_at_once():
    """`traces generate --workers N`: a later search's traces depend on what earlier ones kept, so
    the searches run in processes at once are taken in order. Two small searches of kafka-4.3, in
    this process and in 3 (the shipped corpora's tests above run 2 or 3)."""
    configs = [(name, resolve(name, {"profile": "kafka-4.3"})) for name in ("corpus-diverge", "corpus-solo")]
    made = [generate(configs, GenerateOptions(walks=2, aimed_walks=2, walk_steps=100), workers=workers) for workers in (1, 3)]
    written = [({name: traces.to_jsonl(trace) for name, trace in corpus.items()}, msgspec.json.encode(manifest)) for corpus, manifest in made]
    assert written[0] == written[1]
    assert {name.split("-cell-")[0].split("-walk-")[0] for name in written[0][0]} == {"corpus-diverge", "corpus-solo"}


@pytest.mark.parametrize("profile", ["kafka-3.7", "kafka-3.8", "kafka-3.9", "kafka-4.0", "kafka-4.3"])
def test_the_reference_passes_every_trace_of_the_kafka_corpus(profile):
    files = trace_files(DEFAULT_CORPUS / profile)
    assert len(files) > 500
    failing = [path.name for path in files if not replay(ModelAdapter("reference"), traces.read(path), str(path)).passed]
    assert failing == []
    assert all(traces.read(path).header.initial == traces.Persisted(down=True) for path in files)  # each starts down, then restarts


def test_the_default_corpus_leaves_the_profile_corpora_out():
    """A directory of traces/ with a manifest of its own is another corpus: certifying traces/ replays KIP-595's only."""
    shipped = trace_files(DEFAULT_CORPUS)
    assert not any(DEFAULT_CORPUS / profile in path.parents for path in shipped for profile in ("kafka-3.9", "kafka-4.0", "kafka-4.3"))
    assert all(traces.read(path).header.setting.__class__.__name__ != "TraceCluster" or traces.read(path).header.cluster.profile == "kip595" for path in shipped[::25])


def test_the_smoke_configuration_under_the_kafka_profile_is_safe():
    """`kraftcheck check --config smoke --profile kafka-3.9`: exhausted, every property holding
    (pinned counts: the profile's nodes start down and fetch to find the leader, so the space
    differs from KIP-595's; 4,952 states before stale_responses_ignored covered BeginQuorumEpoch
    answers to a leadership that is over, which now change nothing; 4,812 with symmetry, before a
    leader resigning on its progress timeout turned it off, and before held Fetches)."""
    result = explore(system_for(resolve("smoke", {"profile": "kafka-3.9", "every_choice": False})))
    assert result.complete and not result.counterexamples
    assert (result.distinct, result.generated, result.depth) == (6035, 15257, 28)


@pytest.mark.parametrize(
    "name, counts",
    [("smoke", (109585, 324722, 49)), ("figure8", (32262, 74157, 69))],
)
def test_kafka_4_3_with_pre_votes_is_safe(name, counts):
    """`kraftcheck check --config NAME --profile kafka-4.3`: exhausted, every property holding.
    Pre-votes add rounds in which nothing is persisted (a prospective asks, loses, asks again),
    so the space is larger than kafka-3.9's."""
    result = explore(system_for(resolve(name, {"profile": "kafka-4.3", "every_choice": False})))
    assert result.complete and not result.counterexamples
    assert (result.distinct, result.generated, result.depth) == counts


def test_kafka_drops_a_response_to_a_request_it_no_longer_awaits():
    """stale_responses_ignored: a candidate gets the answer to the discovery Fetch it sent while
    unattached, naming a newer epoch: Kafka drops it unread; as written the epoch is taken."""
    discovery = fetch(2)
    candidate = NodeState(role=Role.CANDIDATE, epoch=1, voted_id=2, granted=frozenset({2}))
    fenced = FetchResponse(PartitionErrorCode=errors.FENCED_LEADER_EPOCH, HighWatermark=-1, CurrentLeader=LeaderIdAndEpoch(LeaderId=-1, LeaderEpoch=2), Records=())
    late = Response(source=1, message=fenced, request=discovery)
    assert nodes.step(config("kafka-3.9", 2), candidate, late).state == candidate
    taken = nodes.step(config("kip595", 2), candidate, late).state
    assert (taken.role, taken.epoch) == (Role.UNATTACHED, 2)


def test_a_kafka_replica_that_finds_the_leader_appends_what_it_sent():
    """discovery_appends: the answer to a discovery Fetch names the leader of the replica's own
    epoch and carries a record: Kafka follows and appends it, then fetches from its new end; as
    written it follows and fetches from where it was."""
    discovery = fetch(2, 1)
    record = Record(Offset=0, Epoch=1, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 3)))
    looking = NodeState(role=Role.UNATTACHED, epoch=1, voted_id=3, fetching=discovery)
    found = FetchResponse(HighWatermark=1, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=1), Records=(record,))
    answered = Response(source=1, message=found, request=discovery)
    for profile, log, next_fetch in (("kip595", (), fetch(2, 1)), ("kafka-3.9", (record,), fetch(2, 1, 1, 1))):
        step = nodes.step(config(profile, 2), looking, answered)
        assert (step.state.role, step.state.leader_id, step.state.log) == (Role.FOLLOWER, 1, log), profile
        assert sends(step) == [(1, next_fetch)], profile


def test_kafka_4_3_keeps_a_followers_vote_but_not_the_leaders():
    """vote_kept_with_leader with leader_keeps_vote off: a Kafka 4.3 follower's quorum-state file
    keeps the vote it gave beside the leader (ElectionState.withElectedLeader's votedKey); its
    leader writes its leadership alone (LeaderState.election). KIP-595 as written keeps both."""
    candidate = NodeState(role=Role.CANDIDATE, epoch=1, voted_id=1, granted=frozenset({1}))
    won = Response(source=2, message=VoteResponse(LeaderId=-1, LeaderEpoch=1, VoteGranted=True), request=VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=1, LastOffsetEpoch=0, LastOffset=0))
    for profile, voted in (("kip595", 1), ("kafka-4.3", -1)):
        leader = nodes.step(config(profile), candidate, won).state
        assert (leader.role, leader.voted_id) == (Role.LEADER, voted), profile
    voted = NodeState(role=Role.UNATTACHED, epoch=1, voted_id=2)
    begin = Request(source=2, message=BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=2, LeaderEpoch=1))
    for profile, kept in (("kafka-3.9", -1), ("kafka-4.3", 2)):
        follower = nodes.step(config(profile), voted, begin).state
        assert (follower.role, follower.leader_id, follower.voted_id) == (Role.FOLLOWER, 2, kept), profile


def test_kafka_4_3_restarts_a_node_that_voted_for_itself_as_candidate_even_beside_a_leader():
    """restart_candidate_first: the file holds leader 2 and node 1's own vote, epoch 3 (1 stood,
    then followed 2). Kafka 4.3 comes back a candidate of epoch 3 and asks again; KIP-595 as the
    model reads it follows 2."""
    down = NodeState(role=Role.DOWN, epoch=3, leader_id=2, voted_id=1)
    for profile, role, leader in (("kip595", Role.FOLLOWER, 2), ("kafka-4.3", Role.CANDIDATE, -1)):
        after = nodes.step(config(profile), down, Restart())
        assert (after.state.role, after.state.epoch, after.state.leader_id, after.state.voted_id) == (role, 3, leader, 1), profile
    asked = sends(nodes.step(config("kafka-4.3"), down, Restart()))
    assert sorted(d for d, m in asked if type(m) is VoteRequest and not m.PreVote and m.CandidateEpoch == 3) == [2, 3]


def observer_config(profile: str):
    return ClusterConfig(voters=(1, 2, 3), observers=(4,), profile=profile).node(4)


def test_kafka_checks_no_voter_set():
    """voter_set_unchecked (KIP-853): an observer answers a Vote as a voter does and a candidate
    outside the voter set gets a vote; KIP-595 as written refuses both INCONSISTENT_VOTER_SET."""
    ask = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=4, LastOffsetEpoch=0, LastOffset=0)
    for profile, error, granted in (("kip595", errors.INCONSISTENT_VOTER_SET, False), ("kafka-3.9", errors.NONE, True)):
        answer = vote_answer(nodes.step(config(profile), NodeState(), Request(source=4, message=ask)))
        assert (answer.PartitionErrorCode, answer.VoteGranted) == (error, granted), profile
    observer_ask = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=1, LastOffsetEpoch=0, LastOffset=0)
    observed = nodes.step(observer_config("kafka-4.3"), NodeState(role=Role.OBSERVER), Request(source=1, message=observer_ask))
    assert vote_answer(observed).VoteGranted and (observed.state.role, observed.state.epoch, observed.state.voted_id) == (Role.OBSERVER, 1, 1)
    begin = Request(source=4, message=BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=4, LeaderEpoch=1))
    followed = nodes.step(config("kafka-3.9"), NodeState(), begin).state
    assert (followed.role, followed.leader_id, followed.epoch) == (Role.FOLLOWER, 4, 1)


def test_kafka_takes_an_end_quorum_epoch_as_news_of_its_leader():
    """end_epoch_as_news: an unattached voter told by leader 1 of epoch 2 that it resigns follows
    1 in epoch 2 and answers NONE; as second successor it waits its backoff, fetching from 1.
    KIP-595 as written answers UNKNOWN_LEADER_EPOCH and changes nothing."""
    end = Request(source=1, message=EndQuorumEpochRequest(ClusterId="kraft-cluster", ReplicaId=1, LeaderId=1, LeaderEpoch=2, PreferredSuccessors=(3, 2)))
    written = nodes.step(config("kip595", 2), NodeState(epoch=1), end)
    assert written.state == NodeState(epoch=1) and written.outputs[0].message.PartitionErrorCode == errors.UNKNOWN_LEADER_EPOCH
    kafka = nodes.step(config("kafka-3.9", 2), NodeState(epoch=1), end)
    assert (kafka.state.role, kafka.state.epoch, kafka.state.leader_id) == (Role.FOLLOWER, 2, 1)
    answer = kafka.outputs[0].message
    assert (answer.PartitionErrorCode, answer.LeaderId, answer.LeaderEpoch) == (errors.NONE, 1, 2)
    assert (1, fetch(2, epoch=2)) in sends(kafka)
    assert any(type(o) is SetTimer and o.kind == TimerKind.FETCH_TIMEOUT for o in kafka.outputs)


def test_kafka_stops_on_a_leader_that_contradicts_the_one_it_knows():
    """conflicting_leader_fatal (a Kafka bug, class d): a BeginQuorumEpoch naming leader 3 for
    epoch 1, whose leader the follower knows is 2: Kafka throws in maybeTransition and stops;
    KIP-595 refuses it INVALID_QUORUM_STATE."""
    follower = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=2)
    begin = Request(source=3, message=BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=3, LeaderEpoch=1))
    refused = nodes.step(config("kip595"), follower, begin)
    assert refused.state == follower and refused.outputs[0].message.PartitionErrorCode == errors.INVALID_QUORUM_STATE
    stopped = nodes.step(config("kafka-3.9"), follower, begin)
    assert stopped.state.role == Role.DOWN and [type(o) for o in stopped.outputs] == [Shutdown]


def test_a_cluster_id_conflict_does_not_stop_kafka():
    """cluster_id_conflict_fatal off (KAFKA-12465, class d): a BeginQuorumEpoch from another
    cluster is answered INCONSISTENT_CLUSTER_ID and the node goes on; as written it shuts down."""
    begin = Request(source=2, message=BeginQuorumEpochRequest(ClusterId="other-cluster", LeaderId=2, LeaderEpoch=1))
    written = nodes.step(config("kip595"), NodeState(), begin)
    assert written.state.role == Role.DOWN and type(written.outputs[-1]) is Shutdown
    kafka = nodes.step(config("kafka-3.9"), NodeState(), begin)
    assert kafka.state == NodeState() and [o.message.ErrorCode for o in kafka.outputs] == [errors.INCONSISTENT_CLUSTER_ID]


def test_kafka_refuses_a_describe_quorum_with_the_schema_defaults():
    """describe_refusal_defaults (class d): a non-leader's NOT_LEADER_OR_FOLLOWER names leader 0,
    epoch 0 (DescribeQuorumResponse.singletonErrorResponse), not the leader it knows."""
    follower = NodeState(role=Role.FOLLOWER, epoch=3, leader_id=2)
    for profile, leader, epoch in (("kip595", 2, 3), ("kafka-3.9", 0, 0)):
        answer = nodes.step(config(profile), follower, Request(source=-1, message=DescribeQuorumRequest())).outputs[0].message
        assert (answer.PartitionErrorCode, answer.LeaderId, answer.LeaderEpoch) == (errors.NOT_LEADER_OR_FOLLOWER, leader, epoch), profile


def test_a_kafka_4_observer_has_no_fetch_timeout():
    """observer_fetch_timeout off: Kafka 4.x's observer ignores its fetch timer (a stalled Fetch
    is replaced on the request timeout); Kafka 3.9's stalls, and looks for another voter once its
    Fetch times out."""
    observer = NodeState(role=Role.OBSERVER, epoch=1, leader_id=1, fetching=fetch(4, epoch=1))
    assert TimerKind.FETCH_TIMEOUT not in nodes.armed_timers(observer_config("kafka-4.3"), observer)
    assert nodes.on_timer(observer_config("kafka-4.3"), observer, TimerKind.FETCH_TIMEOUT).state == observer
    assert TimerKind.FETCH_TIMEOUT in nodes.armed_timers(observer_config("kafka-3.9"), observer)
    assert nodes.on_timer(observer_config("kafka-3.9"), observer, TimerKind.FETCH_TIMEOUT).state.fetch_stalled


def test_a_resigned_kafka_leader_does_not_know_its_high_watermark():
    """unknown_high_watermark: Kafka's resigned state keeps no high watermark (-1)."""
    cfg = config("kafka-3.9")
    leader = NodeState(role=Role.LEADER, epoch=1, leader_id=1, high_watermark=1, replica_offsets=(1, 1, 1), endorsed=frozenset({1}), fetched=frozenset({1}))
    assert nodes.step(cfg, leader, Resign()).state.high_watermark == -1
    assert nodes.step(config("kip595"), leader, Resign()).state.high_watermark == 1


def test_a_kafka_4_follower_refuses_even_the_candidate_it_voted_for():
    """follower_refuses_votes: node 1 voted for 2 in epoch 1, then followed leader 3 (its vote
    kept, as Kafka 4.x keeps it); 2 asks again: Kafka's follower refuses every standard Vote,
    the model's reading grants the vote it gave."""
    follower = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=3, voted_id=2)
    ask = Request(source=2, message=VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=2, LastOffsetEpoch=0, LastOffset=0))
    assert vote_answer(nodes.step(config("kip595"), follower, ask)).VoteGranted
    assert not vote_answer(nodes.step(config("kafka-4.3"), follower, ask)).VoteGranted


def test_a_kafka_replica_takes_a_diverging_answer_of_the_leader_it_discovers():
    """discovery_appends: the discovery Fetch's answer names leader 3 of the node's epoch with a
    DivergingEpoch: Kafka follows 3 and truncates at once; as written it only follows."""
    records = (Record(Offset=0, Epoch=1, Value=1), Record(Offset=1, Epoch=1, Value=2))
    unattached = NodeState(role=Role.UNATTACHED, epoch=2, log=records, high_watermark=-1, fetching=fetch(1, epoch=2, offset=2, last_epoch=1))
    answer = FetchResponse(HighWatermark=-1, DivergingEpoch=EpochEndOffset(Epoch=1, EndOffset=1), CurrentLeader=LeaderIdAndEpoch(LeaderId=3, LeaderEpoch=2))
    taken = nodes.step(config("kafka-3.9"), unattached, Response(source=2, message=answer, request=unattached.fetching))
    assert (taken.state.role, taken.state.leader_id, len(taken.state.log)) == (Role.FOLLOWER, 3, 1)
    assert (3, fetch(1, epoch=2, offset=1, last_epoch=1)) in sends(taken)


def test_after_a_restart_a_response_may_answer_the_identical_request_sent_before_it():
    """COMMON-3B: a resigned leader restarts resigned and sends its EndQuorumEpoch again; a response
    cannot say which sending it answers, and Kafka, which forgets its requests on restarting, drops
    the answer to the first. Before any restart the same response is handled, and only so."""
    kafka = config("kafka-4.3")
    leader_file = NodeState(role=Role.DOWN, epoch=2, leader_id=1, voted_id=1)
    resigned = nodes.step(kafka, leader_file, Restart()).state
    assert (resigned.role, resigned.returned) == (Role.RESIGNED, True)
    request = EndQuorumEpochRequest(ClusterId="kraft-cluster", ReplicaId=1, LeaderId=1, LeaderEpoch=2, PreferredSuccessors=())
    fenced = Response(source=3, message=EndQuorumEpochResponse(PartitionErrorCode=errors.FENCED_LEADER_EPOCH, LeaderId=2, LeaderEpoch=3), request=request)
    found = {dict(o.picks).get("COMMON-3B"): o.transition for o in allowed_transitions(nodes.step, kafka, resigned, fenced) if dict(o.picks).get("OBS-2", "every-voter") == "every-voter"}
    assert found["earlier"].state == resigned and found["earlier"].outputs == ()
    assert (found["latest"].state.role, found["latest"].state.leader_id) == (Role.FOLLOWER, 2) and [d for d, _ in sends(found["latest"])] == [2]
    first_stay = msgspec.structs.replace(resigned, returned=False)
    assert {dict(o.picks).get("COMMON-3B") for o in allowed_transitions(nodes.step, kafka, first_stay, fenced)} == {None}


def solo(profile: str):
    return ClusterConfig(voters=(1,), profile=profile).node(1)


@pytest.mark.parametrize("profile", ["kafka-3.9", "kafka-4.3"])
def test_the_only_voter_leads_as_it_starts_and_a_restarted_one_leads_the_next_epoch(profile):
    """sole_voter_stands_at_start: Kafka's client stands at once when its node is the only voter
    (3.9 through a candidacy, 4.x through a pre-vote it wins by itself), so the first restart
    leads epoch 1; a leader restarted resigned in epoch 1 leads epoch 2, not 3. As written, the
    only voter waits for its election timer."""
    started = nodes.step(solo(profile), nodes.initial_state(solo(profile)), Restart())
    assert (started.state.role, started.state.epoch, started.state.leader_id) == (Role.LEADER, 1, 1)
    assert [record.Epoch for record in started.state.log] == [1]
    down = nodes.step(solo(profile), started.state, Crash()).state
    again = nodes.step(solo(profile), down, Restart())
    assert (again.state.role, again.state.epoch) == (Role.LEADER, 2)
    assert [record.Epoch for record in again.state.log] == [1, 2]
    waiting = nodes.step(solo("kip595"), NodeState(role=Role.DOWN), Restart())
    assert (waiting.state.role, waiting.state.epoch) == (Role.UNATTACHED, 0)


def test_the_only_voter_restarted_with_its_own_vote_leads_that_epoch():
    """QSTATE-4B "stand" with a majority of one: its own vote elects it in the epoch of its file
    (Kafka's onBecomeCandidate -> maybeTransitionToLeader), under every profile that stands."""
    voted = NodeState(role=Role.DOWN, epoch=3, voted_id=1)
    restarted = nodes.step(solo("kafka-3.9"), voted, Restart())
    assert (restarted.state.role, restarted.state.epoch, restarted.state.leader_id) == (Role.LEADER, 3, 1)


@pytest.mark.parametrize("profile", ["kafka-3.9", "kafka-4.3"])
def test_a_kafka_leader_change_record_lists_the_voters_and_those_that_granted(profile):
    """leader_change_lists_voters: Kafka's LeaderChange record, {Version, LeaderId, Voters,
    GrantingVoters}; the KIP's is {LeaderId, VotedIds}. Candidate 1 granted by 3 of {1, 2, 3}."""
    for name, expected in (
        (profile, LeaderChangeMessage(LeaderId=1, Voters=(1, 2, 3), GrantingVoters=(1, 3))),
        ("kip595", LeaderChangeMessage(LeaderId=1, VotedIds=(1, 3))),
    ):
        candidate = NodeState(role=Role.CANDIDATE, epoch=1, voted_id=1, granted=frozenset((1,)))
        request = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=1, LastOffset=0 if name != "kip595" else -1)
        won = nodes.step(config(name), candidate, Response(source=3, message=VoteResponse(LeaderId=-1, LeaderEpoch=1, VoteGranted=True), request=request))
        assert won.state.role == Role.LEADER, name
        assert won.state.log == (Record(Offset=0, Epoch=1, Value=expected),), name
    assert msgspec.json.encode(LeaderChangeMessage(LeaderId=1, Voters=(1, 2), GrantingVoters=(1,))) == (
        b'{"type":"LeaderChangeMessage","LeaderId":1,"Voters":[1,2],"GrantingVoters":[1]}'
    )


def test_a_kafka_leader_heartbeats_begin_quorum_epoch_to_every_voter():
    """begin_epoch_heartbeat: when its BeginQuorumEpoch timer has fired (BEGIN-RESP-1 "unendorsed"), a
    Kafka leader sends it to every other voter, 2 and 3 both acknowledged; as written, only to
    the voters that have not acknowledged it: none."""
    leader = NodeState(role=Role.LEADER, epoch=1, leader_id=1, endorsed=frozenset((1, 2, 3)), fetched=frozenset((1,)), replica_offsets=(0, -1, -1, -1))
    announce = BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=1, LeaderEpoch=1)
    for profile, expected in (("kafka-3.9", [(2, announce), (3, announce)]), ("kip595", [])):
        outcomes = allowed_transitions(nodes.step, config(profile), leader, Timer(kind=TimerKind.REQUEST_TIMEOUT))
        sent = next(o for o in outcomes if dict(o.picks).get("BEGIN-RESP-1") == "unendorsed")
        assert sends(sent.transition) == expected, profile


def test_a_kafka_follower_answered_an_unexpected_error_fetches_from_a_bootstrap_voter():
    """unexpected_fetch_error_elsewhere: BROKER_NOT_AVAILABLE backs off the leader's connection,
    so the Fetch goes to a voter other than the leader (OBS-2: voter 3, or itself, 2, as Kafka's
    bootstrap list allows); UNKNOWN_LEADER_EPOCH is news of the epoch and the Fetch goes to the
    leader again, as it does for both as written."""
    follower = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=1, high_watermark=-1)
    request = fetch(2, epoch=1)
    follower = msgspec.structs.replace(follower, fetching=request)
    for error, profile, destinations in (
        (errors.code_of("BROKER_NOT_AVAILABLE"), "kafka-3.9", {(2,), (3,)}),
        (errors.UNKNOWN_LEADER_EPOCH, "kafka-3.9", {(1,)}),
        (errors.code_of("BROKER_NOT_AVAILABLE"), "kip595", {(1,)}),
    ):
        answer = FetchResponse(PartitionErrorCode=error, HighWatermark=-1, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=1))
        outcomes = allowed_transitions(nodes.step, config(profile, 2), follower, Response(source=1, message=answer, request=request))
        assert {tuple(d for d, _ in sends(o.transition)) for o in outcomes} == destinations, (error, profile)


# Kafka 3.8, before KIP-853 (profile kafka-3.8), and what every Kafka release truncates.


def observer_config(profile: str):
    return ClusterConfig(voters=(1, 2, 3), observers=(4,), profile=profile).node(4)


def test_a_kafka_3_8_voter_waits_for_its_election_timer_where_kafka_3_9_fetches():
    """unattached_voter_waits: started with nothing persisted, or told of a newer epoch without a
    leader, a 3.8 voter sends nothing and waits for its election timer; an observer still fetches."""
    kafka38 = config("kafka-3.8")
    assert nodes.initial_state(kafka38) == NodeState(role=Role.DOWN)
    started = nodes.step(kafka38, NodeState(role=Role.DOWN), Restart())
    assert (sends(started), started.state.role) == ([], Role.UNATTACHED)
    assert nodes.armed_timers(kafka38, started.state) == (TimerKind.ELECTION_TIMEOUT,)
    assert len(sends(nodes.step(config("kafka-3.9"), NodeState(role=Role.DOWN), Restart()))) == 2
    observer = nodes.step(observer_config("kafka-3.8"), NodeState(role=Role.DOWN), Restart())
    assert {destination for destination, _ in sends(observer)} == {1, 2, 3}
    fenced = FetchResponse(PartitionErrorCode=errors.FENCED_LEADER_EPOCH, CurrentLeader=LeaderIdAndEpoch(LeaderId=-1, LeaderEpoch=2))
    follower = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=2, fetching=fetch(1, epoch=1))
    told = nodes.step(kafka38, follower, Response(source=2, message=fenced, request=fetch(1, epoch=1)))
    assert (told.state.role, told.state.epoch, sends(told)) == (Role.UNATTACHED, 2, [])


def test_kafka_truncates_by_its_own_epochs_where_it_lacks_the_leaders():
    """truncate_by_own_epochs: a follower whose log has no record of DivergingEpoch.Epoch
    truncates to the start of its first epoch above it, not further down to EndOffset
    (ReplicatedLog.truncateToEndOffset); with that epoch in its log, both read the same."""
    log = (Record(Offset=0, Epoch=1, Value=1), Record(Offset=1, Epoch=3, Value=2), Record(Offset=2, Epoch=6, Value=3))
    follower = NodeState(role=Role.FOLLOWER, epoch=7, leader_id=2, log=log, high_watermark=-1, fetching=fetch(1, epoch=7, offset=3, last_epoch=6))
    answer = FetchResponse(DivergingEpoch=EpochEndOffset(Epoch=4, EndOffset=1), CurrentLeader=LeaderIdAndEpoch(LeaderId=2, LeaderEpoch=7), HighWatermark=-1)
    kept = {}
    for profile in ("kip595", "kafka-3.8", "kafka-3.9", "kafka-4.3"):
        chosen = config(profile)
        start = follower if profile != "kip595" else msgspec.structs.replace(follower, high_watermark=0)
        truncated = nodes.step(chosen, start, Response(source=2, message=answer, request=start.fetching)).state
        kept[profile] = len(truncated.log)
    assert kept == {"kip595": 1, "kafka-3.8": 2, "kafka-3.9": 2, "kafka-4.3": 2}
    present = msgspec.structs.replace(answer, DivergingEpoch=EpochEndOffset(Epoch=3, EndOffset=1))
    truncated = nodes.step(config("kafka-3.9"), follower, Response(source=2, message=present, request=follower.fetching)).state
    assert len(truncated.log) == 1


def test_a_kafka_3_8_voter_an_end_quorum_epoch_does_not_list_stands_at_once():
    """end_epoch_unlisted_first: 3.8's endEpochElectionBackoff gives indexOf's -1 no backoff, so
    a voter missing from PreferredSuccessors stands as the first successor does; 3.9 waits the
    longest backoff (a fetch timer one place past the last successor)."""
    follower = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=2, high_watermark=-1, fetching=fetch(1, epoch=1))
    end = EndQuorumEpochRequest(ClusterId="kraft-cluster", ReplicaId=2, LeaderId=2, LeaderEpoch=1, PreferredSuccessors=(3,))
    stood = nodes.step(config("kafka-3.8"), follower, Request(source=2, message=end))
    assert (stood.state.role, stood.state.epoch) == (Role.CANDIDATE, 2)
    waits = nodes.step(config("kafka-3.9"), follower, Request(source=2, message=end))
    assert waits.state.role == Role.FOLLOWER
    assert [o.kind for o in waits.outputs if type(o) is SetTimer] == [TimerKind.FETCH_TIMEOUT]


@pytest.mark.parametrize("message", ["begin", "end"])
def test_a_kafka_3_8_node_takes_a_leader_outside_the_voters_as_no_leader(message):
    """leader_outside_voters_ignored: 3.8 knows endpoints for voters only, so a BeginQuorumEpoch
    or EndQuorumEpoch naming observer 4 as leader gives a newer epoch without a leader, answered
    NONE; in the node's own epoch nothing changes. Kafka 3.9 stops (conflicting_leader_fatal)."""
    def request(epoch: int):
        if message == "begin":
            return BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=4, LeaderEpoch=epoch)
        return EndQuorumEpochRequest(ClusterId="kraft-cluster", ReplicaId=4, LeaderId=4, LeaderEpoch=epoch, PreferredSuccessors=(1,))

    follower = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=2, high_watermark=-1, fetching=fetch(1, epoch=1))
    kafka38 = config("kafka-3.8")
    newer = nodes.step(kafka38, follower, Request(source=4, message=request(2)))
    answer = sends(newer)[0][1]
    assert (newer.state.role, newer.state.epoch, newer.state.leader_id) == (Role.UNATTACHED, 2, -1)
    assert (answer.PartitionErrorCode, answer.LeaderId, answer.LeaderEpoch) == (errors.NONE, -1, 2)
    same = nodes.step(kafka38, follower, Request(source=4, message=request(1)))
    assert same.state == follower and sends(same)[0][1].LeaderId == 2
    assert nodes.step(config("kafka-3.9"), follower, Request(source=4, message=request(1))).state.role == Role.DOWN


@pytest.mark.parametrize("profile, code", [("kafka-3.7", errors.INCONSISTENT_VOTER_SET), ("kafka-3.8", errors.NONE)])
def test_kafka_3_7_refuses_an_observer_a_vote_after_the_epoch_checks(profile, code):
    """voter_set_checked_late: 3.7's observer refuses a Vote INCONSISTENT_VOTER_SET, keeping its
    epoch, but a stale one FENCED_LEADER_EPOCH first; 3.8's answers it as a voter would."""
    observer = observer_config(profile)
    following = NodeState(role=Role.OBSERVER, epoch=1, leader_id=1, high_watermark=-1, fetching=fetch(4, epoch=1))
    vote = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=2, CandidateId=2, LastOffsetEpoch=0, LastOffset=0)
    answered = nodes.step(observer, following, Request(source=2, message=vote))
    assert vote_answer(answered).PartitionErrorCode == code
    assert answered.state.epoch == (1 if code else 2)
    later = msgspec.structs.replace(following, epoch=3)
    assert vote_answer(nodes.step(observer, later, Request(source=2, message=vote))).PartitionErrorCode == errors.FENCED_LEADER_EPOCH


def test_kafka_3_7_refuses_a_leader_outside_the_voters():
    """voter_set_checked_late: a BeginQuorumEpoch naming observer 4 as leader is refused
    INCONSISTENT_VOTER_SET by 3.7; 3.8 takes its epoch without a leader."""
    begin = BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=4, LeaderEpoch=2)
    follower = NodeState(role=Role.FOLLOWER, epoch=1, leader_id=2, high_watermark=-1, fetching=fetch(1, epoch=1))
    refused = nodes.step(config("kafka-3.7"), follower, Request(source=4, message=begin))
    assert (refused.state, sends(refused)[0][1].PartitionErrorCode) == (follower, errors.INCONSISTENT_VOTER_SET)
    assert nodes.step(config("kafka-3.8"), follower, Request(source=4, message=begin)).state.epoch == 2
