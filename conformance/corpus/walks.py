"""Paths for the corpus searches: the actions leading to a state, and seeded random walks
projected onto each node."""

import random
from collections.abc import Callable, Iterable

from spec.trace import Input


def path_to(parents: dict[int, tuple[int, object]], fp: int) -> list:
    """The actions from the initial state to the state `fp`, given each state's (parent, action);
    the initial state is its own parent."""
    actions = []
    while parents[fp][0] != fp:
        fp, action = parents[fp]
        actions.append(action)
    actions.reverse()
    return actions


def random_walk(
    initial: object, enabled: Callable[[object], list], apply: Callable[[object, object], tuple[object, Iterable[tuple[int, Input]]]],
    nodes: Iterable[int], seed: int, steps: int, is_delivery: Callable[[object], bool], deliver_bias: float = 0.7,
) -> dict[int, list[Input]]:
    """A seeded random run, projected onto each node: its inputs, by node.

    Deliveries are favoured (as in `kraftcheck simulate`) so that runs make progress and reach
    deep states: elections won, records replicated, logs diverging and truncated.
    """
    rng = random.Random(seed)
    state = initial
    inputs: dict[int, list[Input]] = {n: [] for n in nodes}
    for _ in range(steps):
        actions = enabled(state)
        if not actions:
            break
        deliveries = [a for a in actions if is_delivery(a)]
        action = rng.choice(deliveries) if deliveries and rng.random() < deliver_bias else rng.choice(actions)
        state, stepped = apply(state, action)
        for node, event in stepped:
            inputs[node].append(event)
    return inputs
