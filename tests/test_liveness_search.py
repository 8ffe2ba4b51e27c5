"""The liveness search on the safety engines (conformance.explore.liveness_search): the labels it
records are the model's own (model.liveness), the judgement is the definition's on any graph,
and the verdicts and lassos are the same for any number of workers, in memory or on disk."""

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.explore.configs import resolve
from conformance.explore.kraft_liveness import KraftLiveness
from conformance.explore import lasso, sorted_keys
from conformance.explore.lasso import FAULT, NO_FAIRNESS
from conformance.explore.liveness_search import check_liveness
from model import liveness
from test_liveness import Toy


def reference_labels(live: KraftLiveness, state: tuple, handles: list) -> tuple:
    """labels() and leaves() as model.liveness states them, on the decoded state: each step's
    fairness and fault, the fair actions owed among everything enabled, each goal, and whether
    a step that is no fault leaves the bounds."""
    cluster, decoded = live.cluster, live.decode(state)
    labels = []
    for handle in handles:
        action = live.action(live.key(handle))
        fairness = liveness.fairness_of(action, live.fair_timers)
        labels.append(FAULT if liveness.is_fault(cluster, decoded, action) else (NO_FAIRNESS if fairness is None else fairness))
    enabled = cluster.enabled(decoded)
    owed = set(liveness.owed(cluster, decoded, enabled, live.fair_timers))
    explored = {type(a)(**{f: getattr(a, f) for f in a.__struct_fields__ if f != "picks"}) for a in (live.action(live.key(h)) for h in handles)}
    leaves = any(not liveness.is_fault(cluster, decoded, action) and action not in explored for action in enabled)
    goals = sum(1 << place for place, rule in enumerate(live.goal_ids()) if rule not in liveness.unmet(cluster, decoded))
    return labels, owed, goals, leaves


def reachable(live: KraftLiveness, limit: int) -> list[tuple]:
    seen, order = {live.fingerprint(s) for s in live.initial_states()}, list(live.initial_states())
    for state in order:
        if len(order) >= limit:
            break
        fps, handles = live.expand(state)
        for fp, handle in zip(fps, handles):
            if fp not in seen:
                seen.add(fp)
                order.append(live.reach(handle))
    return order


def test_the_labels_recorded_are_the_models_fairness_faults_and_goals():
    """Every state of smoke, of a partial partition and of a cut-off leader (and of a crash and
    restart, the first 20,000): the cached labels equal model.liveness's, state by state."""
    for name, profile, limit in [("smoke", "kafka-4.3", 50_000), ("live-partition", "kip595", 50_000), ("live-zombie", "kafka-3.9", 50_000), ("faults", "kip595", 20_000)]:
        live = KraftLiveness(resolve(name, {"profile": profile}))
        states = reachable(live, limit)
        assert len(states) > 1_000
        for state in states:
            _fps, handles = live.expand(state)
            labels, owed, goals = live.labels(state, handles)
            assert len(set(owed)) == len(owed)
            fairness = live.fair_actions.values  # each fair action by its number
            labels = [fairness[label] if label >= 0 else label for label in labels]
            assert (labels, {fairness[number] for number in owed}, goals, live.leaves(state, handles)) == reference_labels(live, state, handles), (name, profile, live.decode(state))


def outcome(live: KraftLiveness, result) -> list:
    """The verdicts, each lasso's steps as model actions and cluster states (a state's ids are its process's own)."""

    def steps(walk: list) -> list:
        return [(None if key is None else live.action(key), live.decode(state)) for key, state in walk]

    return [(v.rule, v.components, v.at_bounds, v.unfair, None if v.lasso is None else (steps(v.lasso.prefix), steps(v.lasso.cycle), v.lasso.wedged)) for v in result.verdicts]


def test_the_verdicts_and_lassos_are_the_same_on_any_number_of_workers_in_memory_or_on_disk(tmp_path):
    """More workers than this machine's cores (and as many threads reading the records back), and
    the table and levels on disk: the same graph, so the same counts, the same lassos, the same
    safety verdicts."""
    config = resolve("smoke", {"profile": "faulty-prospective-never-gives-up"})
    systems = [KraftLiveness(config) for _ in range(3)]
    one = check_liveness(systems[0])
    with mock.patch("conformance.explore.sorted_keys.THREADED_ABOVE", 0):  # the graph read back on 3 threads however small
        three = check_liveness(systems[1], workers=3)
    on_disk = check_liveness(systems[2], workers=2, state_dir=tmp_path / "kept")
    assert one.complete and three.complete and on_disk.complete
    assert (one.distinct, one.transitions) == (three.distinct, three.transitions) == (on_disk.distinct, on_disk.transitions) == (64_759, 191_174)
    assert outcome(systems[0], one) == outcome(systems[1], three) == outcome(systems[2], on_disk)
    assert [v.rule for v in one.verdicts if v.lasso is not None] == ["LIVE-2", "LIVE-3", "LIVE-4"]
    assert (tmp_path / "kept" / "liveness").is_dir()


def test_a_search_stopped_by_a_limit_judges_only_what_it_expanded():
    config = resolve("live-zombie", {})
    result = check_liveness(KraftLiveness(config), workers=2, max_states=20_000)
    assert not result.complete and result.stopped == "max-states"
    assert 0 < result.distinct < 139_617


def brute_force(toy: Toy, states: list[int]) -> tuple[int, int, int, bool]:
    """The definition, read literally: components of the goal-less fault-free graph by mutual
    reachability, each judged fair, at the bounds or unfair; (components, at bounds, unfair, any fair)."""
    inside = [s for s in states if s not in toy.goal]
    step = {s: {to for _action, to, _fair, fault in toy.steps.get(s, []) if not fault and to in inside} for s in inside}
    reach = {s: {s} | step[s] for s in inside}
    for _ in inside:
        for s in inside:
            reach[s] = reach[s].union(*(reach[t] for t in list(reach[s])))
    components = {frozenset(t for t in inside if t in reach[s] and s in reach[t]) for s in inside}
    counts = {"fair": 0, "at-bounds": 0, "unfair": 0}
    for members in components:
        required = frozenset.intersection(*(frozenset(toy.fair.get(s, ())) for s in members))
        taken = {fair for s in members for _action, to, fair, fault in toy.steps.get(s, []) if not fault and to in members and fair is not None}
        explored = {s: {fair for _action, _to, fair, fault in toy.steps.get(s, []) if not fault and fair is not None} for s in members}
        missing = required - taken
        if not missing:
            counts["fair"] += 1
        elif all(any(action not in explored[s] for s in members) for action in missing):
            counts["at-bounds"] += 1
        else:
            counts["unfair"] += 1
    return len(components), counts["at-bounds"], counts["unfair"], counts["fair"] > 0


@st.composite
def graphs(draw) -> Toy:
    size = draw(st.integers(2, 9))
    names = ["a", "b", "c"]
    steps, owed = {}, {}
    for s in range(size):
        found = []
        for to in draw(st.lists(st.integers(0, size - 1), max_size=4)):
            fault = draw(st.booleans()) and draw(st.booleans())
            found.append((f"{s}->{to}", to, None if fault else draw(st.sampled_from(names + [None])), fault))
        steps[s] = found
        owed[s] = set(draw(st.lists(st.sampled_from(names), max_size=3)))
    goal = set(draw(st.lists(st.integers(0, size - 1), max_size=3)))
    return Toy(steps, owed, goal, cut=frozenset(s for s in range(size) if draw(st.booleans())))


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_the_judgement_is_the_definitions_on_any_graph(toy):
    result = check_liveness(toy)
    (verdict,) = result.verdicts
    seen = [0]
    for state in seen:
        seen += [to for _a, to, _f, _fault in toy.steps.get(state, []) if to not in seen]
    components, at_bounds, unfair, fair = brute_force(toy, seen)
    assert (verdict.components, verdict.at_bounds, verdict.unfair, verdict.lasso is not None) == (components, at_bounds, unfair, fair)
    if verdict.lasso is not None:
        cycle = [state for _key, state in verdict.lasso.cycle]
        start = verdict.lasso.prefix[-1][1]
        assert not cycle or cycle[-1] == start  # the cycle closes where the prefix ends
        assert all(state not in toy.goal for state in [start, *cycle])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 20), max_size=60), min_size=1, max_size=4), st.integers(1, 4))
def test_the_sorted_key_operations_are_numpys_on_any_number_of_threads(parts, threads):
    arrays = [np.array(part, dtype=np.int64) for part in parts]
    everything = np.concatenate(arrays)
    with mock.patch("conformance.explore.sorted_keys.THREADED_ABOVE", 0):
        keys, counts = sorted_keys.distinct(everything)
        expected_keys, expected_counts = np.unique(everything, return_counts=True)
        assert keys.tolist() == expected_keys.tolist() and counts.tolist() == expected_counts.tolist()
        ascending = np.unique(arrays[0])
        place, there = sorted_keys.located(ascending, everything, threads)
        assert there.tolist() == [value in set(arrays[0].tolist()) for value in everything.tolist()]
        assert (ascending[place[there]] == everything[there]).all()
        order = sorted_keys.argsorted(everything, threads)
        assert sorted(order.tolist()) == list(range(len(everything))) and everything[order].tolist() == sorted(everything.tolist())


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40).flatmap(lambda size: st.tuples(st.just(size), st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, size - 1)), max_size=120))))
def test_colouring_splits_a_graph_into_the_components_tarjan_finds(graph):
    """The colouring rounds, made to run on any graph however small, give Tarjan's partition."""
    size, edges = graph
    states = np.arange(size, dtype=np.int64)
    tails = np.array([a for a, _b in edges], dtype=np.int64)
    heads = np.array([b for _a, b in edges], dtype=np.int64)
    expected, count = lasso.tarjan(states, tails, heads)
    with mock.patch.object(lasso, "TARJAN_BELOW", 0):
        found, also = lasso.strongly_connected(states, tails, heads)
    assert also == count and len(np.unique(np.stack([expected, found]), axis=1).T) == count


def test_the_graph_is_read_and_judged_in_ordinary_pages_and_the_setting_given_back():
    from numpy._core.multiarray import _set_madvise_hugepage

    from conformance.explore.liveness_search import small_pages

    before = _set_madvise_hugepage(True)
    try:
        with small_pages():
            assert _set_madvise_hugepage(False) is False  # off inside
        assert _set_madvise_hugepage(True) is True  # given back as it was
    finally:
        _set_madvise_hugepage(before)
