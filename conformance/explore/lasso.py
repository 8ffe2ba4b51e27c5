"""Fair-cycle judgement: the liveness half of `check` (`check --liveness`), on the state graph the
search recorded (conformance.explore.liveness_search).

A property "always eventually GOAL" is violated by a lasso: a path from an initial state (faults
allowed) into a cycle of fault-free steps on which GOAL never holds and which is fair: every
weakly fair action enabled at every state of the cycle is taken on it. Under weak fairness a
strongly connected component of the non-GOAL, fault-free graph holds a fair cycle exactly when
the walk through all of it is fair, so each component is judged once, as TLC and SPIN do for
weak fairness:

    fair          every action owed throughout the component is taken inside it: a violation
                  (wedged when no step but a fault leaves the component: once the network is
                  fair and timely, the cluster never gets out)
    at bounds     some action owed throughout is taken nowhere inside, and each such action
                  leaves the exploration's bounds (a larger epoch) from some state of the
                  component: the bounded graph cannot tell; counted, never called a violation or a proof
    unfair        such an action leads out of the component from every state: not a violation

Most states lie on no cycle of a property's subgraph: they are peeled off first (a state no
step enters or leaves inside the subgraph is a component of its own; each state taken away
counts down its neighbours' steps, found through the edges grouped by target as well as by
source); rounds of colouring (each passing a colour on only from the states whose colour
changed), then Tarjan's algorithm, split what is left; then every component is
judged at once, in whole-array operations over the actions each state owes and each step takes.
A component of one state is judged the same whatever the property, so those are judged once for
all properties (alone_verdicts); each property then judges only its larger components.
The lasso is the shortest: the prefix to the component's shallowest state, then a short closed
walk inside it that takes every action fairness asks for and passes a state where each other
action it meets is disabled.
"""

from collections import deque
from collections.abc import Callable
from typing import NamedTuple

import msgspec
import numpy as np

from adapters.process_lifetime import forked_map
from conformance.explore.sorted_keys import distinct, located

NO_FAIRNESS, FAULT = -1, -2  # a step's label when it takes no fair action, or is a fault; else its fair action's id (>= 0)
FAIR, AT_BOUNDS, UNFAIR = 0, 1, 2  # a component's verdict


class Graph(msgspec.Struct):
    """The recorded graph, states in any order (where the judgement chooses among several, it
    takes the first by depth, then fingerprint), edges and owed actions per state back to back
    (state i's are [start[i], start[i + 1])); an edge's `to` is -1 where its target was found
    but not expanded (a search stopped by a limit); a fair action is its number."""

    fps: np.ndarray
    depth: np.ndarray
    goals: np.ndarray  # bit i: the state meets goal i
    edge_start: np.ndarray
    edge_to: np.ndarray
    edge_label: np.ndarray
    owed_start: np.ndarray
    owed: np.ndarray
    actions: np.ndarray  # the fair actions' ids, ascending: in edge_label and owed, an action is its place here
    into: np.ndarray  # the edges again, grouped by target: those into state s are into[into_start[rank[s]] : into_start[rank[s] + 1]]
    into_start: np.ndarray
    rank: np.ndarray

    def __len__(self) -> int:
        return len(self.fps)

    def edges(self, state: int) -> list[tuple[int, int]]:
        """(target, label) of each step the state takes."""
        low, high = int(self.edge_start[state]), int(self.edge_start[state + 1])
        return list(zip(self.edge_to[low:high].tolist(), self.edge_label[low:high].tolist()))

    def owed_by(self, state: int) -> frozenset[int]:
        return frozenset(self.owed[self.owed_start[state] : self.owed_start[state + 1]].tolist())


class Walk(NamedTuple):
    """A lasso as state indices: the path to the cycle's first state and the cycle back to it,
    each step (state, label of the step into it; the first prefix step's label is NO_FAIRNESS);
    its component's states, and whether no fault-free step leads out of it (closed: then it is
    wedged unless a step beyond the bounds leaves it, which only the system can tell)."""

    prefix: list[tuple[int, int]]
    cycle: list[tuple[int, int]]
    members: list[int]
    closed: bool


class Judged(NamedTuple):
    """A property's components counted by verdict, and its shortest lassos (those as short as
    the shortest, the shallowest entry first: the system prefers a wedged one)."""

    rule: str
    walks: list[Walk]
    components: int
    at_bounds: int
    unfair: int


def sources(graph: Graph) -> np.ndarray:
    """Each edge's source state."""
    return np.repeat(np.arange(len(graph), dtype=np.int64), np.diff(graph.edge_start))


def peeled(graph: Graph, inside: np.ndarray, source: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fault-free edges between states `inside`, and the states left once those no such edge
    enters or leaves are taken away, again and again (none of them is on a cycle): (alive, edge
    sources, edge targets) among what is left. Each state taken away has its edges' other ends
    counted down, so each edge is looked at once from either end, however long the chains."""
    count = len(graph)
    keep = (graph.edge_label != FAULT) & (graph.edge_to >= 0)
    keep[keep] = inside[source[keep]] & inside[graph.edge_to[keep]]
    tails, heads = source[keep], graph.edge_to[keep]
    entering, leaving = np.bincount(heads, minlength=count), np.bincount(tails, minlength=count)
    alive = inside & (entering > 0) & (leaving > 0)
    taken = np.flatnonzero(inside & ~alive)
    while len(taken):
        out = spans(graph.edge_start, taken)[0]
        out = out[keep[out]]
        into = graph.into[spans(graph.into_start, graph.rank[taken])[0]]
        into = into[keep[into]]
        targets, sources_ = graph.edge_to[out], source[into]
        np.subtract.at(entering, targets, 1)
        np.subtract.at(leaving, sources_, 1)
        touched = np.concatenate((targets, sources_))
        touched = touched[alive[touched]]
        taken = distinct(touched[(entering[touched] == 0) | (leaving[touched] == 0)])[0]
        alive[taken] = False
    both = alive[tails] & alive[heads]
    return alive, tails[both], heads[both]


def strongly_connected(states: np.ndarray, tails: np.ndarray, heads: np.ndarray) -> tuple[np.ndarray, int]:
    """The strongly connected components of the graph on `states` (sorted) with these edges:
    each state's component number, and how many there are. Rounds of colouring (whole-array
    passes) take most of a large graph's components; Tarjan's algorithm, linear whatever the
    graph, takes the rest once colouring slows down."""
    count = len(states)
    local = np.zeros(int(states[-1]) + 1 if count else 0, dtype=np.int64)
    local[states] = np.arange(count, dtype=np.int64)
    tails, heads = local[tails], local[heads]
    by_tail = np.argsort(tails, kind="stable")  # coloured() takes the edges by tail (a search's come so: one run to check)
    tails, heads = tails[by_tail], heads[by_tail]
    component = np.full(count, -1, dtype=np.int64)
    active = np.ones(count, dtype=bool)
    found = 0
    while (before := int(active.sum())) > TARJAN_BELOW:
        found = coloured(tails, heads, active, component, found)
        keep = active[tails] & active[heads]
        tails, heads = tails[keep], heads[keep]
        if before - int(active.sum()) <= before // 10:
            break
    rest = np.flatnonzero(active)
    numbers, more = tarjan(rest, tails, heads)
    component[rest] = found + numbers
    return component, found + more


TARJAN_BELOW = 20_000  # states: fewer are left to Tarjan's algorithm at once


def coloured(tails: np.ndarray, heads: np.ndarray, active: np.ndarray, component: np.ndarray, found: int) -> int:
    """One round of colouring (the edges by tail): each active state takes the largest number of
    a state that reaches it; a state whose own number that is is a root, and its component is
    the states of its colour that reach it back. Those components are numbered from `found` and made inactive;
    returns the next free number."""
    own = np.arange(len(active), dtype=np.int64)
    colour = own.copy()
    start = np.searchsorted(tails, np.arange(len(active) + 1))  # the edges, by tail: state s's are [start[s], start[s + 1])
    changed = np.flatnonzero(active)
    while len(changed):  # only the states whose colour changed pass it on
        at = spans(start, changed)[0]
        raise_ = colour[tails[at]] > colour[heads[at]]
        at = at[raise_]
        np.maximum.at(colour, heads[at], colour[tails[at]])
        changed = distinct(heads[at])[0]
    taken = active & (colour == own)
    roots = np.flatnonzero(taken)
    while True:
        back = taken[heads] & ~taken[tails]
        back[back] = colour[tails[back]] == colour[heads[back]]
        if not back.any():
            break
        taken[tails[back]] = True
    number = np.zeros(len(active), dtype=np.int64)
    number[roots] = found + np.arange(len(roots), dtype=np.int64)
    component[taken] = number[colour[taken]]
    active &= ~taken
    return found + len(roots)


def tarjan(states: np.ndarray, tails: np.ndarray, heads: np.ndarray) -> tuple[np.ndarray, int]:
    """Tarjan's algorithm, without recursion, on `states` (sorted numbers) and the edges between
    them: each state's component number, and how many there are."""
    count = len(states)
    local = np.zeros(int(states[-1]) + 1 if count else 0, dtype=np.int64)
    local[states] = np.arange(count, dtype=np.int64)
    local_tails, local_heads = local[tails], local[heads]
    order = np.argsort(local_tails, kind="stable")
    start = np.searchsorted(local_tails[order], np.arange(count + 1)).tolist()
    successors = local_heads[order].tolist()
    number = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    component_of = [0] * count
    stack: list[int] = []
    found = counter = 0
    for root in range(count):
        if number[root] != -1:
            continue
        work = [(root, start[root])]
        number[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            node, at = work[-1]
            if at < start[node + 1]:
                work[-1] = (node, at + 1)
                successor = successors[at]
                if number[successor] == -1:
                    number[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack[successor] = True
                    work.append((successor, start[successor]))
                elif on_stack[successor]:
                    low[node] = min(low[node], number[successor])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == number[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component_of[member] = found
                    if member == node:
                        break
                found += 1
    return np.array(component_of, dtype=np.int64), found


def spans(start: np.ndarray, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The places of the states' runs in arrays laid out by `start` (their edges, their actions
    owed), back to back, and how long each run is."""
    lengths = start[states + 1] - start[states]
    firsts = np.repeat(start[states] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return firsts + np.arange(int(lengths.sum()), dtype=np.int64), lengths


def alone_verdicts(graph: Graph, source: np.ndarray, threads: int = 1) -> np.ndarray:
    """Every state's verdict as a component of its own, as verdicts() gives it, for all states at
    once, whatever the property (most of a property's components have one state): the actions it
    owes that no fair step of its back to itself takes are missing; unfair if it explores one."""
    width = max(len(graph.actions), 1)
    fair = graph.edge_label >= 0
    loop = fair & (graph.edge_to == source)
    explored = np.sort(source[fair] * width + graph.edge_label[fair], kind="stable")  # by state already: nearly sorted
    taken = np.sort(source[loop] * width + graph.edge_label[loop])
    owed = np.repeat(np.arange(len(graph), dtype=np.int64), np.diff(graph.owed_start)) * width + graph.owed
    missing = owed[~located(taken, owed, threads)[1]]
    verdict = np.full(len(graph), FAIR, dtype=np.int8)
    verdict[missing // width] = AT_BOUNDS
    verdict[missing[located(explored, missing, threads)[1]] // width] = UNFAIR
    return verdict


def verdicts(graph: Graph, members: np.ndarray, component: np.ndarray, count: int) -> np.ndarray:
    """Every component judged at once (FAIR, AT_BOUNDS or UNFAIR, by component number), from
    the states `members` and their component numbers: the actions owed throughout a component
    (owed by as many of its states as it has), those taken on a fault-free step inside it, and,
    for each owed throughout but never taken, how many of its states explore it."""
    size = np.bincount(component, minlength=count)
    home = np.full(len(graph), -1, dtype=np.int64)
    home[members] = component
    owed_at, owed_lengths = spans(graph.owed_start, members)
    width = max(len(graph.actions), 1)
    owed_keys, owed_counts = distinct(np.repeat(component, owed_lengths) * width + graph.owed[owed_at])
    required = owed_keys[owed_counts == size[owed_keys // width]]
    edge_at, degrees = spans(graph.edge_start, members)
    tails, labels, heads = np.repeat(members, degrees), graph.edge_label[edge_at], graph.edge_to[edge_at]
    fair = labels >= 0
    inside = fair & (heads >= 0)
    inside[inside] = home[heads[inside]] == home[tails[inside]]
    taken = distinct(home[tails[inside]] * width + labels[inside])[0]
    missing = required[~located(taken, required)[1]]
    explored = distinct(tails[fair] * width + labels[fair])[0]  # (state, action) once each
    explored_keys, explorers = distinct(home[explored // width] * width + explored % width)
    at, there = located(explored_keys, missing)
    explored_by_all = there & (explorers[at] == size[missing // width]) if len(explored_keys) else there
    verdict = np.full(count, FAIR, dtype=np.int8)
    verdict[missing // width] = AT_BOUNDS
    verdict[missing[explored_by_all] // width] = UNFAIR
    return verdict


class Component:
    """One component's states, its fault-free steps inside it and what each state owes."""

    def __init__(self, graph: Graph, members: list[int]) -> None:
        self.members = members
        inside = set(members)
        self.steps = {s: [(t, label) for t, label in graph.edges(s) if label != FAULT and t in inside] for s in members}
        self.owed = {s: graph.owed_by(s) for s in members}

    def required(self) -> frozenset[int]:
        """The fair actions owed throughout the component: a fair cycle takes each."""
        return frozenset.intersection(*self.owed.values())

    def path(self, start: int, wanted: Callable[[int], bool]) -> list[tuple[int, int]]:
        """The shortest walk inside from `start` to a state `wanted` accepts, as (state, label)
        steps (empty when start is wanted)."""
        if wanted(start):
            return []
        came: dict[int, tuple[int, int]] = {start: (-1, NO_FAIRNESS)}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for successor, label in self.steps[node]:
                if successor in came:
                    continue
                came[successor] = (node, label)
                if wanted(successor):
                    steps = []
                    while successor != start:
                        node, label = came[successor]
                        steps.append((successor, label))
                        successor = node
                    return steps[::-1]
                queue.append(successor)
        raise AssertionError("a strongly connected component is connected")

    def fair_cycle(self, required: frozenset[int]) -> list[tuple[int, int]]:
        """A closed walk from the first state that takes every required action and, for every
        other fair action owed all along it, passes a state where that action is not owed (one
        exists: the action is not required). Empty when the cycle is the first state itself,
        with nothing owed there: the cluster stays."""
        entry = self.members[0]
        visits: list[int] = []
        while True:
            walk = self._closed_walk(entry, required, visits)
            on = {entry} | {state for state, _label in walk}
            taken = {label for _state, label in walk}
            unmet = sorted(frozenset.intersection(*(self.owed[s] for s in on)) - taken)
            if not unmet:
                return walk
            visits.append(next(s for s in self.members if unmet[0] not in self.owed[s]))

    def _closed_walk(self, entry: int, required: frozenset[int], visits: list[int]) -> list[tuple[int, int]]:
        """From `entry`: to each of `visits` in turn, then to the nearest step taking an action
        still owed and along it, until none is, then back to `entry`."""
        walk: list[tuple[int, int]] = []
        at = entry
        for target in visits:
            walk += self.path(at, lambda s, target=target: s == target)
            at = target
        owed = set(required) - {label for _state, label in walk}
        while owed:
            walk += self.path(at, lambda s: any(label in owed for _t, label in self.steps[s]))
            at = walk[-1][0] if walk else at
            step = next(step for step in self.steps[at] if step[1] in owed)
            walk.append(step)
            at = step[0]
            owed -= {label for _state, label in walk}
        if walk and at != entry:
            walk += self.path(at, lambda s: s == entry)
        return walk

    def closed(self, graph: Graph) -> bool:
        """No fault-free step leads out."""
        inside = set(self.members)
        return all(t in inside for s in self.members for t, label in graph.edges(s) if label != FAULT)


def path_to(graph: Graph, state: int, source: np.ndarray) -> list[tuple[int, int]]:
    """A shortest path from an initial state, as (state, label of the step into it): back
    through the state a level up with a step to it that has the smallest fingerprint."""
    path = [(state, NO_FAIRNESS)]
    while graph.depth[path[-1][0]] > 0:
        target = path[-1][0]
        into = np.flatnonzero(graph.edge_to == target)
        up = into[graph.depth[source[into]] == graph.depth[target] - 1]
        edge = int(up[np.argmin(graph.fps[source[up]])])
        path[-1] = (target, int(graph.edge_label[edge]))
        path.append((int(source[edge]), NO_FAIRNESS))
    return path[::-1]


def judge(graph: Graph, place: int, rule: str, source: np.ndarray, alone_verdict: np.ndarray) -> Judged:
    """One property's components counted by verdict, and its shortest lasso if one is fair
    (`source`: sources(graph); `alone_verdict`: alone_verdicts(graph, source))."""
    inside = (graph.goals >> place) & 1 == 0
    alive, tails, heads = peeled(graph, inside, source)
    alone = np.flatnonzero(inside & ~alive)  # each a component of its own, on no cycle
    cycling = np.flatnonzero(alive)
    numbers, found = strongly_connected(cycling, tails, heads)
    members = np.concatenate((alone, cycling))
    component = np.concatenate((np.arange(len(alone), dtype=np.int64), len(alone) + numbers))
    count = len(alone) + found
    single = np.bincount(component, minlength=count)[component] == 1
    verdict = verdicts(graph, members[~single], component[~single], count)
    verdict[component[single]] = alone_verdict[members[single]]
    shortest: list[tuple[int, Component, list]] = []  # (lasso length, component, cycle), the shortest found
    fair = verdict[component] == FAIR
    if fair.any():  # the fair components' states, each component's in (depth, fingerprint) order
        states, numbers = members[fair], component[fair]
        order = np.lexsort((graph.fps[states], graph.depth[states], numbers))
        states, numbers = states[order], numbers[order]
        firsts = np.flatnonzero(np.concatenate(([True], numbers[1:] != numbers[:-1])))
        ends = np.append(firsts[1:], len(states))
        entries = states[firsts]
        for at in np.lexsort((graph.fps[entries], graph.depth[entries])).tolist():  # shallowest first: a lasso is no shorter than its prefix
            entry = int(entries[at])
            if shortest and graph.depth[entry] + 1 > shortest[0][0]:
                break
            candidate = Component(graph, states[firsts[at] : ends[at]].tolist())
            cycle = candidate.fair_cycle(candidate.required())
            length = int(graph.depth[entry]) + 1 + len(cycle)
            if not shortest or length < shortest[0][0]:
                shortest = []
            if not shortest or length == shortest[0][0]:
                shortest.append((length, candidate, cycle))
    walks = [Walk(path_to(graph, found.members[0], source), cycle, found.members, found.closed(graph)) for _length, found, cycle in shortest]
    return Judged(rule, walks, count, int((verdict == AT_BOUNDS).sum()), int((verdict == UNFAIR).sum()))


def judge_all(graph: Graph, rules: tuple[str, ...], workers: int = 1) -> list[Judged]:
    """Every property judged, on `workers` forked processes at once, the one with the most states
    first (the one-state components first, for all, on as many threads): goal i of the graph is rules[i]."""
    source = sources(graph)
    alone_verdict = alone_verdicts(graph, source, workers)
    largest_first = sorted(range(len(rules)), key=lambda place: -int(((graph.goals >> place) & 1 == 0).sum()))
    judged = dict(zip(largest_first, forked_map(lambda place: judge(graph, place, rules[place], source, alone_verdict), largest_first, workers)))
    return [judged[place] for place in range(len(rules))]
