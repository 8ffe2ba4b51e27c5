"""Seeded random walks for the corpus, projected onto each node: long interleavings that a
bounded breadth-first search does not reach."""

import random
from collections.abc import Callable, Iterable

from spec.trace import Input


def random_walk(
    initial: object, enabled: Callable[[object], list], apply: Callable[[object, object], tuple[object, Iterable[tuple[int, Input]]]],
    nodes: Iterable[int], seed: int, steps: int, is_delivery: Callable[[object], bool], deliver_bias: float = 0.7,
) -> dict[int, list[Input]]:
    """A seeded random run, projected onto each node: its inputs, by node.

    Deliveries are favoured (as in `kraftcheck simulate`), `deliver_bias` of the steps where a
    message is in flight, so that runs make progress and reach deep states: elections won,
    records replicated, logs diverging and truncated.
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
