"""The explorer's reductions lose nothing: compared with a naive search over model.cluster.

The interned system collects inert messages, blanks fields no enabled action reads, merges
states equal up to renaming nodes, and (with no bound on messages in flight) does not explore
losses apart. None of that may change which node states and histories are reachable, what the
safety properties say about them, or how long each shortest counterexample is.
"""

import functools

import msgspec
import pytest

from conformance.explore.engine import explore
from conformance.explore.kraft_system import KraftSystem, dead_fields
from model import properties
from model.cluster import Bounds, Cluster, Fire
from model.config import ClusterConfig
from model.events import TimerKind
from model.symmetry import rename_cluster

SCENARIOS = {
    "two-voters-loss": (ClusterConfig(voters=(1, 2)), Bounds(client_values=1, retries=False, progress_timeouts=False), 2, None),
    "three-voters-one-election": (ClusterConfig(voters=(1, 2, 3)), Bounds(client_values=1, retries=False, progress_timeouts=False), 1, 1),
    "two-voters-crash-restart": (
        ClusterConfig(voters=(1, 2)),
        Bounds(client_values=1, max_crashes=1, loss=False, retries=False, progress_timeouts=True),
        1,
        None,
    ),
    # a partial partition: one link cut one way, then maybe healed
    "three-voters-one-cut": (ClusterConfig(voters=(1, 2, 3)), Bounds(client_values=1, retries=False, progress_timeouts=False, max_cuts=1), 1, 1),
}
NO_LIMIT = 64  # a bound that never binds: losses are explored as steps of their own


@functools.cache
def naive_search(config: ClusterConfig, faults: Bounds, max_epoch: int, max_elections: int | None) -> tuple[frozenset, dict[str, int]]:
    """Breadth-first search over ClusterState itself, every loss a step, every allowed outcome of
    a node step a successor: (nodes with dead fields blanked, history) of every reachable state,
    and the depth each property is first violated at. Remembered: a scenario's is compared with
    the reduced search both with and without a bound on messages in flight."""
    cluster = Cluster(config, faults, every_choice=True)
    blank = {f: frozenset() for f in dead_fields(faults)}
    start = cluster.initial()
    seen, frontier, first_violated, depth = {start}, [start], {}, 0
    while frontier:
        for state in frontier:
            for violation in properties.violations(cluster, state):
                first_violated.setdefault(violation.rule, depth)
        following = []
        for state in frontier:
            for action in (chosen for enabled in cluster.enabled(state) for chosen in cluster.alternatives(state, enabled)):
                successor, _ = cluster.apply(state, action)
                history = successor.history
                if any(n.epoch > max_epoch for n in successor.nodes) or (max_elections is not None and history.elections > max_elections):
                    continue
                if successor not in seen:
                    seen.add(successor)
                    following.append(successor)
        frontier, depth = following, depth + 1
    return frozenset((tuple(msgspec.structs.replace(n, **blank) for n in s.nodes), s.history) for s in seen), first_violated


@pytest.fixture(scope="module", autouse=True)
def forget_naive_searches():
    """The remembered naive searches hold every state they reached: freed with this module, so
    that the rest of the session does not carry them."""
    yield
    naive_search.cache_clear()


@pytest.mark.parametrize("max_in_flight", [NO_LIMIT, None], ids=["losses-explored", "no-bound"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_reduced_exploration_reaches_exactly_the_naive_node_states_and_histories(name, max_in_flight):
    config, faults, max_epoch, max_elections = SCENARIOS[name]
    expected, _ = naive_search(config, faults, max_epoch, max_elections)
    system = KraftSystem(config, faults, max_epoch=max_epoch, max_in_flight=max_in_flight, max_elections=max_elections, symmetry=False)
    assert system.drops == (faults.loss and max_in_flight is not None)
    result = explore(system, keep_going=True)
    assert result.complete
    reached = set()
    parents = [system.initial_states()[0]]
    # Walk the reduced system's whole state space again to collect its projections.
    seen = {system.fingerprint(parents[0])}
    while parents:
        following = []
        for state in parents:
            decoded = system.decode(state)
            reached.add((decoded.nodes, decoded.history))
            for _action, successor in system.successors(state):
                fp = system.fingerprint(successor)
                if fp not in seen:
                    seen.add(fp)
                    following.append(successor)
        parents = following
    assert reached == expected
    assert len(seen) == result.distinct


@pytest.mark.parametrize("name", SCENARIOS)
def test_symmetry_counts_orbits(name):
    """With symmetry on, the explorer finds one state per orbit of the unreduced space."""
    config, faults, max_epoch, max_elections = SCENARIOS[name]
    plain = KraftSystem(config, faults, max_epoch=max_epoch, max_in_flight=NO_LIMIT, max_elections=max_elections, symmetry=False)
    reduced = KraftSystem(config, faults, max_epoch=max_epoch, max_in_flight=NO_LIMIT, max_elections=max_elections, symmetry=True)
    orbits = set()
    frontier = plain.initial_states()
    seen = {plain.fingerprint(frontier[0])}
    while frontier:
        following = []
        for state in frontier:
            orbits.add(reduced.fingerprint(reduced.encode(plain.decode(state))))
            for _action, successor in plain.successors(state):
                fp = plain.fingerprint(successor)
                if fp not in seen:
                    seen.add(fp)
                    following.append(successor)
        frontier = following
    assert explore(reduced, keep_going=True).distinct == len(orbits) < len(seen)


DUPLICATING = (ClusterConfig(voters=(1, 2)), Bounds(client_values=1, duplication=True, retries=False, progress_timeouts=False), 1, None)


@pytest.mark.parametrize(
    ("name", "max_in_flight"),
    [(name, bound) for name in SCENARIOS for bound in (NO_LIMIT, None)] + [("two-voters-duplication", 3)],
    ids=lambda v: {NO_LIMIT: "losses-explored", None: "no-bound"}.get(v, str(v)),
)
def test_expand_finds_the_fingerprints_of_the_states_it_reaches(name, max_in_flight):
    """expand() finds a successor's fingerprint from its parent's bag (its sum, less the message
    taken out, plus the move's) and builds the state only on demand: that fingerprint must be the
    one a fresh system computes from the built state alone, in the order successors()
    gives; and each handle's action key must name the step (a delivery, a copy delivered, a loss, a
    node's own event) that model.cluster takes to the same nodes, history and live messages."""
    config, faults, max_epoch, max_elections = SCENARIOS.get(name, DUPLICATING)

    def system() -> KraftSystem:
        return KraftSystem(config, faults, max_epoch=max_epoch, max_in_flight=max_in_flight, max_elections=max_elections)

    explorer, fresh = system(), system()
    frontier = explorer.initial_states()
    seen, checked = {explorer.fingerprint(frontier[0])}, 0
    while frontier:
        following = []
        for state in frontier:
            fps, handles = explorer.expand(state)
            successors = list(explorer.successors(state))
            for fp, handle, (key, successor) in zip(fps, handles, successors, strict=True):
                assert explorer.reach(handle) == successor
                assert fp == fresh.fingerprint(fresh.encode(explorer.decode(successor)))
                applied, _ = explorer.cluster.apply(explorer.decode(state), explorer.action(key))
                stepped = explorer.encode(applied)
                size = explorer.size
                assert stepped[: size + 1] + explorer._live(stepped[size + 1 :], stepped[:size]) == successor
                checked += 1
                if fp not in seen:
                    seen.add(fp)
                    following.append(successor)
        frontier = following
    assert checked > 1000


def _first_step_renaming_does_not_commute_with(profile: str, faults: Bounds, seeds: range, steps: int = 120):
    """Random walks over voters 1-3 and observer 4 under `profile`: the first action whose renamed
    twin, taken in the renamed state, does not reach the renamed successor, or None. Every state
    walked through is checked to be safe as well."""
    import random

    from model.cluster import LINK_ACTIONS, Deliver, Drop, ResignLeader
    from model.symmetry import rename_envelope

    cluster = Cluster(ClusterConfig(voters=(1, 2, 3), observers=(4,), profile=profile), faults)
    names = {1: 2, 2: 3, 3: 1}

    def renamed(action):
        if type(action) in (Deliver, Drop):
            return msgspec.structs.replace(action, envelope=rename_envelope(action.envelope, names))
        if type(action) in LINK_ACTIONS:
            return msgspec.structs.replace(action, source=names.get(action.source, action.source), destination=names.get(action.destination, action.destination))
        return msgspec.structs.replace(action, node=names.get(action.node, action.node))

    for seed in seeds:
        rng = random.Random(seed)
        state = cluster.initial()
        for _ in range(steps):
            action = rng.choice(cluster.enabled(state))
            assert type(action) is not ResignLeader
            after, _ = cluster.apply(state, action)
            mirrored, _ = cluster.apply(rename_cluster(state, cluster.ids, names), renamed(action))
            if rename_cluster(after, cluster.ids, names) != mirrored:
                return action
            assert properties.violations(cluster, after) == ()
            state = after
    return None


@pytest.mark.parametrize(
    ("profile", "progress_timeouts"),
    [("kip595", True), ("kafka-3.7", False), ("kafka-3.9", False), ("kafka-4.3", False)],
)
@pytest.mark.parametrize("cuts", [0, 3], ids=["no-partitions", "partitions"])
def test_renaming_commutes_with_every_transition_but_resignation(profile, progress_timeouts, cuts):
    """Symmetry is sound: renaming nodes then stepping equals stepping then renaming, under
    every profile whose leaders do not resign (the Kafka profiles' leaders resign on their
    progress timeout, so those walks leave it out), links cut and healed included."""
    faults = Bounds(client_values=3, duplication=True, max_crashes=2, progress_timeouts=progress_timeouts, max_cuts=cuts)
    assert _first_step_renaming_does_not_commute_with(profile, faults, range(30)) is None


def test_a_leader_resigning_on_its_progress_timeout_turns_symmetry_off():
    """Under kafka-3.9 a leader resigns on its progress timeout and names its successors with
    ties broken by the smaller id, so renaming does not commute with that step (the first step
    of the walks that does not is one); the explorer therefore searches such a system without symmetry."""
    faults = Bounds(client_values=3, duplication=True, max_crashes=2)
    breaking = _first_step_renaming_does_not_commute_with("kafka-3.9", faults, range(30))
    assert type(breaking) is Fire and breaking.timer == TimerKind.PROGRESS_TIMEOUT
    config = ClusterConfig(voters=(1, 2, 3), profile="kafka-3.9")
    assert not KraftSystem(config, faults, max_epoch=2, max_in_flight=None).symmetry
    assert KraftSystem(config, msgspec.structs.replace(faults, progress_timeouts=False), max_epoch=2, max_in_flight=None).symmetry
    assert KraftSystem(msgspec.structs.replace(config, profile="kip595"), faults, max_epoch=2, max_in_flight=None).symmetry


def test_renaming_a_node_renames_every_node_id_it_holds():
    """What the explorer's symmetry renames (model/symmetry.py rename_node): the voter an
    observer's second Fetch waits on (NodeState.aside, kafka-3.7) and who sent each held Fetch too."""
    from model.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch
    from model.state import HeldFetch, NodeState, Role
    from model.symmetry import rename_node

    fetch = FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=1)
    answer = FetchResponse(CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=1))
    names, position = {1: 2, 2: 3, 3: 1}, {0: 1, 1: 2, 2: 0, 3: 3}
    observer = NodeState(role=Role.OBSERVER, epoch=1, leader_id=1, aside=(3, fetch), fetching=fetch)
    assert rename_node(observer, names, position).aside == (1, fetch)
    leader = NodeState(role=Role.LEADER, epoch=1, leader_id=2, held=(HeldFetch(source=3, request=msgspec.structs.replace(fetch, ReplicaId=3), response=answer),))
    (held,) = rename_node(leader, names, position).held
    assert (held.source, held.request.ReplicaId, held.response.CurrentLeader.LeaderId) == (1, 1, 2)


# Broken model variants whose bugs show under message loss: (cluster, faults, max epoch, max elections).
BROKEN = {
    "faulty-forget-vote": (ClusterConfig(voters=(1, 2), profile="faulty-forget-vote"), Bounds(client_values=0, max_crashes=1, retries=False, progress_timeouts=False), 2, None),
    "faulty-truncate-to-hw": (ClusterConfig(voters=(1, 2), profile="faulty-truncate-to-hw"), Bounds(client_values=1, max_crashes=1, retries=False, progress_timeouts=False), 2, 2),
}


@pytest.mark.parametrize("name", BROKEN)
def test_without_a_bound_every_shortest_counterexample_is_as_short_as_with_losses_explored(name):
    """Each property the naive search (losses as steps) finds violated is found by the reduced
    search (no losses, symmetry) with a counterexample exactly as long, and no other."""
    config, faults, max_epoch, max_elections = BROKEN[name]
    _, first_violated = naive_search(config, faults, max_epoch, max_elections)
    assert first_violated, "the variant must break a property under these bounds"
    system = KraftSystem(config, faults, max_epoch=max_epoch, max_in_flight=None, max_elections=max_elections, symmetry=True)
    assert not system.drops
    result = explore(system, keep_going=True)
    assert result.complete
    assert {c.violation.rule: len(c.path) - 1 for c in result.counterexamples} == first_violated
    assert all(action[0] != "drop" for c in result.counterexamples for action, _ in c.path[1:])
