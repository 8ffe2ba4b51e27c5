"""The corpus's coverage-guided search, defined once for every engine and both systems.

A breadth-first search of a configuration's states notes, for every node step it meets and
every probe it delivers, the coverage cells covered there (conformance/corpus/cells.py). The
first place a cell is met, in scan order, is kept: a state's place in that order is its path,
the successor indices leading to it from the initial state (the smallest, which is the one a
sequential scan finds first), and inside a state the places come in the order `Coverage.places`
gives them. So "first" is a property of the state space alone, not of how the search ran: the
in-process scan here and the Spark search (conformance/corpus/spark_search.py) keep the same
places and make the same corpus.

A probe is delivered where its key (a node's state at a position, with a message in flight)
is first met, and a place is rebuilt into a node's inputs by replaying its path.
"""

from collections.abc import Callable, Iterator
from itertools import islice
from typing import Protocol

import msgspec

from conformance.corpus.cells import note_cells
from conformance.corpus.reference import NodeInputs
from conformance.explore.engine import System

Place = tuple[bytes, tuple]  # a state's path (2 big-endian bytes per successor index) and the place inside the state
ProbeKey = int  # a node's state at a position, with a message in flight or not: see probe_key()


class Coverage(Protocol):
    """What a corpus search needs of a system beyond exploring it."""

    system: System

    def probe_keys(self, state: object) -> list[tuple[ProbeKey, int, int]]:
        """The state's probe keys with their position and message index (-1: the node's own
        probes), in the order its probes are delivered."""
        ...

    def places(self, state: object, handles: list, fresh: Callable[[ProbeKey], bool]) -> Iterator[tuple[tuple, tuple[str, ...]]]:
        """The places inside a state with the cells met there, each place once and in increasing
        order (the scan order): the probes whose keys are `fresh` here, then the steps to its
        successors (`handles`, as the system's expand() gives them). `fresh` is asked about every
        probe key of the state, in order (a search notes there the keys it has met)."""
        ...

    def node_inputs(self, keys: list, state: object, within: tuple) -> NodeInputs:
        """The node stepped at a place, and its inputs along the path (`keys`, ending in `state`) and there."""
        ...


class Searched(msgspec.Struct, frozen=True):
    """A search's outcome: the first place of each cell, the states visited, and whether the
    bounded state space was exhausted."""

    first: dict[str, Place]
    states: int
    complete: bool


def probe_key(position: int, *parts: int) -> ProbeKey:
    """A probe's key from a position and the stable fingerprints of its parts (a node's state, a
    message): a signed 64-bit int, the same in every process, so keys travel as arrays."""
    key = position
    for part in parts:
        key = ((key * 0x9E3779B97F4A7C15) ^ part) & 0xFFFFFFFFFFFFFFFF
    return key - (1 << 64) if key >> 63 else key


def extend(path: bytes, index: int) -> bytes:
    """A successor's path: its parent's and its index among the parent's successors."""
    return path + index.to_bytes(2, "big")


def search(coverage: Coverage, max_states: int) -> Searched:
    """Breadth-first in scan order, noting the first place of each cell; a level is searched
    whole once started, and no level starts at `max_states` states or more."""
    system = coverage.system
    first: dict[str, Place] = {}
    probed: set[ProbeKey] = set()

    def fresh(key: ProbeKey) -> bool:
        if key in probed:
            return False
        probed.add(key)
        return True

    noted: set[tuple[str, ...]] = set()  # cells whose places are all kept: met again, nothing to note
    visited: set[int] = set()
    frontier = []
    for state in system.initial_states():
        fp = system.fingerprint(state)
        if fp not in visited:
            visited.add(fp)
            frontier.append((b"", state))
    while frontier and len(visited) < max_states:
        level = []
        for path, state in frontier:
            fps, handles = system.expand(state)
            for within, found in coverage.places(state, handles, fresh):
                if found not in noted and note_cells(first, found, (path, within)):
                    noted.add(found)
            for index, fp in enumerate(fps):
                if fp not in visited:
                    visited.add(fp)
                    level.append((extend(path, index), system.reach(handles[index])))
        frontier = level
    return Searched(first, len(visited), not frontier)


def successor(system: System, state: object, index: int) -> tuple[object, object]:
    """A state's successor of that index, with its key."""
    return next(islice(system.successors(state), index, None))


def replay(system: System, path: bytes) -> tuple[list, object]:
    """The keys along a path and the state it ends in."""
    state = system.initial_states()[0]
    keys = []
    for at in range(0, len(path), 2):
        key, state = successor(system, state, int.from_bytes(path[at : at + 2], "big"))
        keys.append(key)
    return keys, state


def inputs_of(coverage: Coverage, searched: Searched, known: set[str]) -> dict[str, NodeInputs]:
    """Each cell not in `known` with the inputs of the node stepped at its first place."""
    chosen = {}
    for cell in sorted(set(searched.first) - known):
        path, within = searched.first[cell]
        keys, state = replay(coverage.system, path)
        chosen[cell] = coverage.node_inputs(keys, state, within)
    return chosen


def distinct_events(probes: list[tuple[tuple, object]]) -> Iterator[tuple[tuple, object]]:
    """(place, event) pairs, each event only the first time it occurs: one place per distinct event."""
    seen = set()
    for within, event in probes:
        encoded = msgspec.msgpack.encode(event)
        if encoded not in seen:
            seen.add(encoded)
            yield within, event
