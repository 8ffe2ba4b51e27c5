"""States packed side by side (conformance.explore.packed) and the systems' batch pack/unpack."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.packed import Packed, joined

rows = st.lists(st.binary(max_size=40), max_size=30)
words = st.lists(st.binary(max_size=5).map(lambda b: b * 8), max_size=30)  # rows of whole 8-byte words, as a cluster state's


@given(st.one_of(rows, words), st.data())
def test_taking_rows_gives_those_rows_in_that_order(given_rows, data):
    packed = Packed.of(given_rows)
    assert packed.rows() == given_rows and len(packed) == len(given_rows)
    at = data.draw(st.lists(st.integers(0, len(given_rows) - 1), max_size=40)) if given_rows else []
    assert packed.take(np.array(at, dtype=np.int64)).rows() == [given_rows[i] for i in at]


def test_rows_taken_a_few_at_a_time_are_those_taken_at_once(monkeypatch):
    """Packed.take moves rows of whole words ROWS_AT_ONCE at a time (its indices bounded): with
    3 at a time, 10 rows of 1 to 4 words come out as row by row."""
    from conformance.explore import packed as packed_module

    monkeypatch.setattr(packed_module, "ROWS_AT_ONCE", 3)
    given_rows = [bytes([i]) * 8 * (1 + i % 4) for i in range(10)]
    at = [9, 0, 4, 4, 7, 1, 2, 8, 3]
    assert Packed.of(given_rows).take(np.array(at, dtype=np.int64)).rows() == [given_rows[i] for i in at]


@given(st.lists(rows, max_size=5))
def test_joined_packs_hold_their_rows_one_after_the_other(many):
    assert joined([Packed.of(r) for r in many]).rows() == [row for r in many for row in r]


def _reachable(system, count: int) -> list:
    """The first states a breadth-first walk meets (repeats and all), in `system`'s ids."""
    states, frontier = [], system.initial_states()
    while frontier and len(states) < count:
        states += frontier
        frontier = [system.reach(handle) for state in frontier for handle in system.expand(state)[1]]
    return states[:count]


def test_cluster_states_unpack_in_another_process_as_they_were_packed():
    """What one process packs, a fresh system that learned the parts unpacks to the same states
    (its own ids), and packs again to the same bytes."""
    sender = system_for(resolve("smoke", {}))
    sender_states = _reachable(sender, 300)
    packed = sender.pack(sender_states)
    receiver = system_for(resolve("smoke", {}))
    known: set = set()
    first = sender.parts(sender.pack(sender_states[:150]), known)  # as the first batch of a file
    rest = sender.parts(packed, known)  # a later batch: the parts the first one carried left out
    assert first and rest and not {(kind, fp) for fp, kind, _e in first} & {(kind, fp) for fp, kind, _e in rest}
    assert sender.parts(packed, known) == []
    for part in first + rest:
        receiver.learn(*part)
    unpacked = receiver.unpack(packed)
    assert len(unpacked) == len(sender_states)
    assert [receiver.fingerprint(s) for s in unpacked] == [sender.fingerprint(s) for s in sender_states]
    assert receiver.pack(unpacked) == packed
    assert len(sender.pack([])) == 0
    assert receiver.unpack(sender.pack([])) == []


def test_isr_states_pack_and_unpack():
    system = system_for(resolve("isr-hw", {}))
    states = _reachable(system, 200)
    assert system.unpack(system.pack(states)) == states and system.unpack(system.pack([])) == []
