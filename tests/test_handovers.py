"""How the sharded engine evens out its workers' frontiers when a level begins (handovers)."""

from hypothesis import given
from hypothesis import strategies as st

from conformance.explore.sharded import handovers

FRONTIERS = st.lists(st.integers(0, 10**7), min_size=1, max_size=8)


def after(sizes: list[int], moves: list[tuple[int, int, int]]) -> list[int]:
    sizes = list(sizes)
    for giver, taker, moved in moves:
        assert moved > 0 and giver != taker
        sizes[giver] -= moved
        sizes[taker] += moved
    return sizes


@given(st.tuples(st.integers(0, 10**7), st.integers(0, 10**7)))
def test_two_workers_alike_end_with_frontiers_within_one_state_of_each_other(sizes):
    balanced = after(list(sizes), handovers(list(sizes), [1.0, 1.0]))
    assert sum(balanced) == sum(sizes) and max(balanced) - min(balanced) <= 1


@given(FRONTIERS)
def test_more_workers_alike_end_within_a_state_a_worker_of_the_mean(sizes):
    """Each giver rounds its shares as they add up: a worker's frontier is off the mean by less
    than a state for each worker that gives it, or takes from it."""
    balanced = after(sizes, handovers(sizes, [1.0] * len(sizes)))
    assert sum(balanced) == sum(sizes) and min(balanced) >= 0
    mean = sum(sizes) / len(sizes)
    assert all(abs(size - mean) < len(sizes) for size in balanced)


@given(FRONTIERS.flatmap(lambda sizes: st.tuples(st.just(sizes), st.lists(st.floats(1e-6, 1e-3), min_size=len(sizes), max_size=len(sizes)))))
def test_a_worker_whose_states_cost_more_keeps_fewer(frontiers):
    """Loads (states times their giver's seconds a state) end within a state's cost of the mean;
    a giver hands over only what it has, and no worker both gives and takes."""
    sizes, costs = frontiers
    moves = handovers(sizes, costs)
    remaining = after(sizes, [(giver, taker, moved) for giver, taker, moved in moves])
    assert min(remaining) >= 0
    loads = [size * cost for size, cost in zip(sizes, costs)]
    for giver, taker, moved in moves:
        loads[giver] -= moved * costs[giver]
        loads[taker] += moved * costs[giver]
    mean = sum(loads) / len(loads)
    assert all(load <= mean + max(costs) * (len(sizes)) + 1e-9 for load in loads)
    assert not {giver for giver, _, _ in moves} & {taker for _, taker, _ in moves}


def test_two_workers_one_twice_as_dear():
    assert handovers([100, 100], [2.0, 1.0]) == [(0, 1, 25)]  # 75 * 2 = 100 + 25 * 2
    assert handovers([5, 2], [1.0, 1.0]) == [(0, 1, 2)]  # 1.5 states, rounded half up
    assert handovers([4, 4], [1.0, 1.0]) == []
