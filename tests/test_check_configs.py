"""Pinned state counts of the named configurations, for one worker and for two.

A change in any count means the model or the explorer's state space changed: look before
updating the numbers.
"""

import functools

import pytest

from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import explore
from conformance.explore.sharded import explore_sharded

PINNED = {
    # name: (distinct, generated, depth), every outcome the specification allows at each node step
    "smoke": (1_041, 2_246, 21),
    "faults": (2_699_561, 22_610_799, 34),
}
DEFAULT_READING = {
    # name: (distinct, generated, depth), the model's default reading alone (--no-every-choice)
    "smoke": (873, 1_792, 21),
    "faults": (1_537_931, 11_108_947, 31),
    "tlc-kraft-if4": (7_870_118, 40_710_536, 40),
}


def run(name: str, workers: int, every_choice: bool = True):
    config = resolve(name, {"every_choice": every_choice})
    if workers == 1:
        return explore(system_for(config))
    return explore_sharded(functools.partial(system_for, config), workers)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("every_choice, pinned", [(True, PINNED), (False, DEFAULT_READING)])
def test_smoke_counts(workers, every_choice, pinned):
    result = run("smoke", workers, every_choice)
    assert result.complete and not result.counterexamples
    assert (result.distinct, result.generated, result.depth) == pinned["smoke"]


def test_a_sharded_search_accounts_for_each_workers_time():
    """Each worker was busy, or waiting for the slowest to end a level's handover or expansion: all
    of them for equally long, within the search's time. One process has no workers to account for."""
    assert run("smoke", 1).worker_seconds == []
    for workers in (2, 3):
        result = run("smoke", workers)
        assert len(result.worker_seconds) == workers
        assert all(busy > 0 and waiting >= 0 for busy, waiting in result.worker_seconds)
        totals = [busy + waiting for busy, waiting in result.worker_seconds]
        assert max(totals) - min(totals) < 1e-6
        assert max(totals) <= result.seconds


@pytest.mark.parametrize("workers, every_choice, pinned", [(1, False, DEFAULT_READING), (2, True, PINNED), (3, False, DEFAULT_READING), (4, True, PINNED)])
def test_faults_counts(workers, every_choice, pinned):
    """Three and four workers on two cores: every segment of the shared table grows several
    times, each time mapped again by processes that did not grow it."""
    result = run("faults", workers, every_choice)
    assert result.complete and not result.counterexamples
    assert (result.distinct, result.generated, result.depth) == pinned["faults"]


def test_tlc_kraft_if4_is_exhausted_with_all_properties_holding():
    """The public KRaft TLA+ specification's bounds with loss, LeaderChange records and at most 4 messages in flight, exhausted (two workers, as in CI)."""
    result = run("tlc-kraft-if4", 2, every_choice=False)
    assert result.complete and not result.counterexamples
    assert (result.distinct, result.generated, result.depth) == DEFAULT_READING["tlc-kraft-if4"]


@pytest.mark.parametrize("max_in_flight, distinct", [(4, 111_147), (6, 146_552), (8, 146_552), (0, 146_552)])
def test_the_in_flight_bound_stops_binding_under_the_tla_specifications_semantics(max_in_flight, distinct):
    """2 voters, 4 elections, no loss, no LeaderChange record, no choice points branched (as the
    public TLA+ specification has it): the bound binds at 4, and no longer at 6 (the same count at 8 and with no bound at
    all), so this is the matched configuration of the comparison with TLC (docs/measurements/tlc-comparison.md)."""
    config = resolve("tlc-kraft-if4", {"voters": 2, "max_elections": 4, "max_epoch": 4, "loss": False, "profile": "faulty-no-leader-change", "max_in_flight": max_in_flight, "every_choice": False})
    result = explore(system_for(config))
    assert result.complete and not result.counterexamples
    assert (result.distinct, result.depth) == (distinct, 30)


def test_symmetry_switch_changes_only_the_count():
    reduced = explore(system_for(resolve("smoke", {})))
    full = explore(system_for(resolve("smoke", {"symmetry": False})))
    assert full.complete and not full.counterexamples
    assert full.depth == reduced.depth
    assert reduced.distinct < full.distinct <= 2 * reduced.distinct  # two voters: orbits of size 1 or 2
