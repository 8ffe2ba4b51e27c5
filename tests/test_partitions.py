"""Partial partitions (model.cluster's CutLink and HealLink): a cut link delivers nothing, one
way; what is sent on it is lost, what was in flight on it waits; the liveness goals then ask
progress only of a majority of voters that talk with one another."""

import functools

import msgspec
import pytest

from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import explore
from conformance.explore.sharded import explore_sharded
from model import liveness, network
from model.cluster import Bounds, Cluster, CutLink, Deliver, Drop, Fire, HealLink
from model.config import ClusterConfig
from model.events import TimerKind
from model.messages import FetchRequest
from model.network import Envelope
from model.state import Role

CLUSTER = Cluster(ClusterConfig(voters=(1, 2, 3)), Bounds(max_cuts=2))


def after(state, *actions):
    for action in actions:
        assert action in CLUSTER.enabled(state), action
        state, _ = CLUSTER.apply(state, action)
    return state


def vote_requests(state):
    return [e for e in network.envelopes(state.network) if e.source == 1]


def test_a_message_in_flight_on_a_cut_link_waits_undeliverable_and_may_be_lost():
    standing = after(CLUSTER.initial(), Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    to_2 = next(e for e in vote_requests(standing) if e.destination == 2)
    cut = after(standing, CutLink(source=1, destination=2))
    enabled = CLUSTER.enabled(cut)
    assert Deliver(envelope=to_2) not in enabled and Drop(envelope=to_2) in enabled
    assert to_2 in network.envelopes(cut.network)
    healed = after(cut, HealLink(source=1, destination=2))
    assert Deliver(envelope=to_2) in CLUSTER.enabled(healed)


def test_a_message_sent_on_a_cut_link_is_lost_and_the_other_way_still_works():
    cut = after(CLUSTER.initial(), CutLink(source=1, destination=2))
    standing = after(cut, Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    assert [e.destination for e in vote_requests(standing)] == [3]
    answered = after(standing, Fire(node=2, timer=TimerKind.ELECTION_TIMEOUT))
    assert any(e.source == 2 and e.destination == 1 for e in network.envelopes(answered.network))  # 2 -> 1 is not cut


def test_cuts_are_bounded_and_each_link_is_cut_once_at_a_time():
    one = after(CLUSTER.initial(), CutLink(source=1, destination=2))
    cuts = [a for a in CLUSTER.enabled(one) if type(a) is CutLink]
    assert CutLink(source=1, destination=2) not in cuts and len(cuts) == 5
    two = after(one, CutLink(source=2, destination=1))
    assert [a for a in CLUSTER.enabled(two) if type(a) in (CutLink, HealLink)] == [HealLink(source=1, destination=2), HealLink(source=2, destination=1)]
    assert after(two, HealLink(source=1, destination=2)).history.cuts == 2  # a heal gives no cut back
    assert not [a for a in Cluster(ClusterConfig(voters=(1, 2, 3))).enabled(CLUSTER.initial()) if type(a) in (CutLink, HealLink)]


def test_a_history_never_cut_encodes_as_before_partitions_existed():
    assert b"cut" not in msgspec.msgpack.encode(CLUSTER.initial().history)


def test_the_goals_ask_nothing_where_no_majority_talks_and_nothing_of_a_node_cut_off():
    initial = CLUSTER.initial()
    isolated_1 = after(initial, CutLink(source=1, destination=2), CutLink(source=1, destination=3))
    # 1 cannot reach 2 or 3, but 2 and 3 talk: a majority that owes a leader
    assert "LIVE-1" in liveness.unmet(CLUSTER, isolated_1)
    standing = after(isolated_1, Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    assert standing.nodes[0].role == Role.CANDIDATE and "LIVE-3" not in liveness.unmet(CLUSTER, standing)  # cut off: may stand
    apart = after(initial, CutLink(source=1, destination=2), CutLink(source=2, destination=3))
    apart = msgspec.structs.replace(apart, history=msgspec.structs.replace(apart.history, cut=apart.history.cut | {(3, 1)}))
    assert not liveness.majority_talks(CLUSTER, apart.history.cut)
    assert "LIVE-1" not in liveness.unmet(CLUSTER, apart) and "LIVE-4" not in liveness.unmet(CLUSTER, apart)


def test_a_fetch_waiting_on_a_cut_link_does_not_keep_its_sender_busy():
    """The follower's fetch timeout is owed once its only traffic waits on a cut link."""
    follower = msgspec.structs.replace(CLUSTER.initial().nodes[1], role=Role.FOLLOWER, epoch=1, leader_id=1)
    fetch = Envelope(source=2, destination=1, message=FetchRequest(ClusterId="c", ReplicaId=2, CurrentLeaderEpoch=1))
    state = msgspec.structs.replace(CLUSTER.initial(), nodes=(CLUSTER.initial().nodes[0], follower, CLUSTER.initial().nodes[2]))
    state = msgspec.structs.replace(state, network=network.add(state.network, fetch))
    timeout = Fire(node=2, timer=TimerKind.FETCH_TIMEOUT)
    assert ("fire", 2, TimerKind.FETCH_TIMEOUT) not in liveness.owed(CLUSTER, state, [timeout])
    cut = msgspec.structs.replace(state, history=msgspec.structs.replace(state.history, cut=frozenset({(2, 1)}), cuts=1))
    assert ("fire", 2, TimerKind.FETCH_TIMEOUT) in liveness.owed(CLUSTER, cut, [timeout])


@pytest.mark.parametrize(
    "name, reduced, unreduced",
    [
        # (distinct, generated, depth) with symmetry (1 and 3 workers), then without it: the liveness graph's states
        ("live-partition", (2_581, 8_315, 18), (15_464, 49_765, 18)),
        ("live-zombie", (139_617, 380_782, 29), (139_617, 380_782, 29)),  # no symmetry: OBS-2=one-voter:0 names a voter by its place
    ],
)
def test_the_partition_configurations_counts_with_and_without_symmetry(name, reduced, unreduced):
    config = resolve(name, {})
    one, three = explore(system_for(config)), explore_sharded(functools.partial(system_for, config), 3)
    full = explore(system_for(resolve(name, {"symmetry": False})))
    assert (one.distinct, one.generated, one.depth) == (three.distinct, three.generated, three.depth) == reduced
    assert (full.distinct, full.generated, full.depth) == unreduced
    assert one.complete and full.complete and not one.counterexamples
