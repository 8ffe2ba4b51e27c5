"""Fair-cycle search: the liveness half of `check` (`check --liveness`).

A property "always eventually GOAL" is violated by a lasso: a path from an initial state (faults
allowed) into a cycle of fault-free steps on which GOAL never holds and which is fair: every
weakly fair action enabled at every state of the cycle is taken on it. Under weak fairness a
strongly connected component of the non-GOAL, fault-free graph holds a fair cycle exactly when
the walk through all of it is fair, so each component is judged once (Tarjan's algorithm), as
TLC and SPIN do for weak fairness:

    fair          every action enabled throughout the component is taken inside it: a violation
                  (wedged when no step but a fault leaves the component: once the network is
                  fair and timely, the cluster never gets out)
    at the bounds some action enabled throughout is taken nowhere inside, and from some state
                  of the component that action leaves the exploration's bounds (a larger epoch):
                  the bounded graph cannot tell; counted, never called a violation or a proof
    unfair        such an action leads out of the component from every state: not a violation

The graph is built in memory by a breadth-first search, so the shortest prefix to a component is
known (and every safety property is checked on each state as it is added: the shallowest
violation of each is kept, as the safety search keeps it); the cycle is a short closed walk inside it that takes every action fairness asks for and
passes a state where each other action it meets is disabled.
"""

import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import NamedTuple, Protocol

import msgspec

from conformance.explore.engine import Counterexample


class LivenessSystem(Protocol):
    """What the fair-cycle search needs of a system (conformance.explore.kraft_system.KraftLiveness)."""

    def initial_states(self) -> list: ...

    def fingerprint(self, state) -> int: ...

    def expand(self, state) -> tuple[Iterable[tuple[object, object, Hashable | None, bool]], frozenset, bool]:
        """Every explored step, as (action key, successor, its fingerprint, the fair action it
        takes or None, whether it is a fault); the fair actions the state enables, those whose steps leave the
        bounds included; and whether any step it enables (fair or not, no fault) leaves them."""

    def goal_ids(self) -> tuple[str, ...]: ...

    def goals(self, state) -> tuple[bool, ...]: ...

    def violations(self, state) -> tuple:
        """The safety properties the state violates (conformance.explore.engine.Violation)."""

    def property_ids(self) -> tuple[str, ...]: ...


class Lasso(NamedTuple):
    """A violation: the path to the cycle's first state (its (action key, state) steps, the first
    with key None) and the cycle's steps from there back to that state."""

    prefix: list[tuple[object, object]]
    cycle: list[tuple[object, object]]
    wedged: bool


class Verdict(msgspec.Struct):
    """One property's outcome: its lasso if violated, and how many components were fair but for
    actions that leave the bounds (at_bounds) or unfair."""

    rule: str
    lasso: Lasso | None
    components: int
    at_bounds: int
    unfair: int


class LivenessResult(msgspec.Struct):
    distinct: int
    transitions: int
    seconds: float
    complete: bool
    stopped: str | None  # the limit that stopped the search: "max-states" or "max-seconds"
    verdicts: list[Verdict]
    counterexamples: list  # the safety properties' (Counterexample), shallowest first found, in property order


class Graph:
    """The explored state graph: states by index in breadth-first order (so a smaller index is
    no deeper), their successors, the fair actions each enabled and each step took."""

    def __init__(self) -> None:
        self.states: list = []
        self.index: dict[int, int] = {}
        self.parent: list[tuple[int, object]] = []  # (parent index, action key); the initial states' own index
        self.edges: list[list[tuple[int, int, object]]] = []  # per state: (successor, fair action id or -1 for none, -2 for a fault; key)
        self.enabled: list[frozenset[int]] = []
        self.explored_fair: list[frozenset[int]] = []
        self.cut: list[bool] = []  # whether a step the state enables leaves the bounds
        self.goals: list[tuple[bool, ...]] = []
        self.fair_ids: dict[Hashable, int] = {}
        self.transitions = 0
        self.violated: dict[str, tuple[object, int]] = {}  # per safety rule: its violation and the first state showing it

    def fair_id(self, action: Hashable) -> int:
        return self.fair_ids.setdefault(action, len(self.fair_ids))


def explore_graph(
    system: LivenessSystem, max_states: int | None = None, max_seconds: float | None = None, progress: Callable[[int, int, float], None] | None = None
) -> tuple[Graph, str | None]:
    """The reachable graph, breadth-first, and the limit that stopped it ("max-states",
    "max-seconds") or None: complete. `progress` hears (expanded, found, seconds) now and then."""
    graph = Graph()
    start = time.perf_counter()

    def add(state, fp: int, parent: int | None, key: object) -> int:
        at = graph.index.get(fp)
        if at is None:
            at = graph.index[fp] = len(graph.states)
            graph.states.append(state)
            graph.parent.append((at if parent is None else parent, key))
            for violation in system.violations(state):
                graph.violated.setdefault(violation.rule, (violation, at))
        return at

    for state in system.initial_states():
        add(state, system.fingerprint(state), None, None)
    done, stopped = 0, None
    while done < len(graph.states):
        if max_states is not None and len(graph.states) >= max_states:
            stopped = "max-states"
            break
        if max_seconds is not None and done % 1_000 == 0 and time.perf_counter() - start > max_seconds:
            stopped = "max-seconds"
            break
        state = graph.states[done]
        edges, taken = [], set()
        steps, fair_enabled, cut = system.expand(state)
        for key, successor, fp, fair, fault in steps:
            label = -2 if fault else (-1 if fair is None else graph.fair_id(fair))
            edges.append((add(successor, fp, done, key), label, key))
            if label >= 0:
                taken.add(label)
        graph.edges.append(edges)
        graph.transitions += len(edges)
        graph.enabled.append(frozenset(graph.fair_id(a) for a in fair_enabled))
        graph.cut.append(cut)
        graph.explored_fair.append(frozenset(taken))
        graph.goals.append(system.goals(state))
        done += 1
        if progress and done % 20_000 == 0:
            progress(done, len(graph.states), time.perf_counter() - start)
    return graph, stopped  # states found but not expanded are not judged (see components)


def components(graph: Graph, inside: Callable[[int], bool]) -> list[list[int]]:
    """The strongly connected components of the fault-free steps between states `inside` accepts
    (Tarjan's algorithm, without recursion), each as its states' indices."""
    count = len(graph.edges)
    number = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    stack: list[int] = []
    found: list[list[int]] = []
    counter = 0
    for root in range(count):
        if number[root] != -1 or not inside(root):
            continue
        work = [(root, 0)]
        number[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            node, at = work[-1]
            edges = graph.edges[node]
            if at < len(edges):
                work[-1] = (node, at + 1)
                successor, label, _key = edges[at]
                if label == -2 or successor >= count or not inside(successor):
                    continue
                if number[successor] == -1:
                    number[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack[successor] = True
                    work.append((successor, 0))
                elif on_stack[successor]:
                    low[node] = min(low[node], number[successor])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == number[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def judged(graph: Graph, members: list[int]) -> tuple[str, set[int]]:
    """A component's verdict (fair, at-bounds or unfair) and the fair actions a fair cycle in it must take."""
    inside = set(members)
    required = frozenset.intersection(*(graph.enabled[s] for s in members))
    taken = {label for s in members for successor, label, _key in graph.edges[s] if label >= 0 and successor in inside}
    missing = required - taken
    if not missing:
        return "fair", set(required)
    if all(any(action not in graph.explored_fair[s] for s in members) for action in missing):
        return "at-bounds", set()
    return "unfair", set()


def _path_inside(graph: Graph, inside: set[int], start: int, wanted: Callable[[int], bool]) -> list[tuple[int, int, object]]:
    """The shortest fault-free walk inside a component from `start` to a state `wanted` accepts,
    as (state, fair label, key) steps (empty when start is wanted)."""
    if wanted(start):
        return []
    came: dict[int, tuple[int, int, object]] = {start: (-1, -1, None)}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor, label, key in graph.edges[node]:
            if label == -2 or successor not in inside or successor in came:
                continue
            came[successor] = (node, label, key)
            if wanted(successor):
                steps = []
                while successor != start:
                    node, label, key = came[successor]
                    steps.append((successor, label, key))
                    successor = node
                return steps[::-1]
            queue.append(successor)
    raise AssertionError("a strongly connected component is connected")


def fair_cycle(graph: Graph, members: list[int], required: set[int]) -> list[tuple[int, int, object]]:
    """A closed walk from the component's first state that takes every required action and, for
    every other fair action enabled all along it, passes a state where that action is disabled
    (one exists: the action is not required). Empty when the cycle is the first state itself,
    with nothing fair enabled there: the cluster stays."""
    inside, entry = set(members), members[0]
    visits: list[int] = []
    while True:
        walk = _closed_walk(graph, inside, entry, required, visits)
        on = {entry} | {step[0] for step in walk}
        taken = {step[1] for step in walk}
        enabled_all_along = frozenset.intersection(*(graph.enabled[s] for s in on))
        unmet = sorted(enabled_all_along - taken)
        if not unmet:
            return walk
        visits.append(next(s for s in members if unmet[0] not in graph.enabled[s]))


def _closed_walk(graph: Graph, inside: set[int], entry: int, required: set[int], visits: list[int]) -> list[tuple[int, int, object]]:
    """From `entry`: to each of `visits` in turn, then to the nearest step taking an action still
    owed and along it, until none is, then back to `entry`."""
    walk: list[tuple[int, int, object]] = []
    at = entry
    for target in visits:
        walk += _path_inside(graph, inside, at, lambda s, target=target: s == target)
        at = target
    owed = set(required) - {step[1] for step in walk}
    while owed:
        walk += _path_inside(graph, inside, at, lambda s: any(label in owed and successor in inside for successor, label, _key in graph.edges[s]))
        at = walk[-1][0] if walk else at
        step = next(edge for edge in graph.edges[at] if edge[1] in owed and edge[0] in inside)
        walk.append(step)
        at = step[0]
        owed -= {step[1] for step in walk}
    if walk and at != entry:
        walk += _path_inside(graph, inside, at, lambda s: s == entry)
    return walk


def path_to(graph: Graph, index: int) -> list[tuple[object, object]]:
    """The breadth-first path from an initial state to a state, as (action key, state) steps (the first with key None)."""
    chain = [index]
    while graph.parent[chain[-1]][0] != chain[-1]:
        chain.append(graph.parent[chain[-1]][0])
    chain.reverse()
    return [(None, graph.states[chain[0]])] + [(graph.parent[s][1], graph.states[s]) for s in chain[1:]]


def lasso_of(graph: Graph, members: list[int], required: set[int], wedged: bool) -> Lasso:
    """The component's lasso: the breadth-first path to its first state (no deeper than any
    other of its states), then its fair cycle."""
    prefix = path_to(graph, members[0])
    cycle = [(key, graph.states[s]) for s, _label, key in fair_cycle(graph, members, required)]
    return Lasso(prefix, cycle, wedged)


def verdicts(graph: Graph, rules: tuple[str, ...]) -> list[Verdict]:
    """Per property, its shortest lasso (prefix and cycle steps together) and the components
    judged at the bounds and unfair."""
    found = []
    for place, rule in enumerate(rules):
        goals = graph.goals
        lassos, counts = [], {"fair": 0, "at-bounds": 0, "unfair": 0}
        for members in components(graph, lambda s: not goals[s][place]):
            verdict, required = judged(graph, members)
            counts[verdict] += 1
            if verdict == "fair":
                inside = set(members)
                wedged = not any(graph.cut[s] for s in members) and all(successor in inside for s in members for successor, label, _key in graph.edges[s] if label != -2)
                lassos.append(lasso_of(graph, members, required, wedged))
        best = min(lassos, key=lambda lasso: (len(lasso.prefix) + len(lasso.cycle), not lasso.wedged), default=None)
        found.append(Verdict(rule, best, sum(counts.values()), counts["at-bounds"], counts["unfair"]))
    return found


def check_liveness(
    system: LivenessSystem, max_states: int | None = None, max_seconds: float | None = None, progress: Callable[[int, int, float], None] | None = None
) -> LivenessResult:
    """Every liveness property of the system judged on its reachable graph, and every safety
    property on each of its states."""
    start = time.perf_counter()
    graph, stopped = explore_graph(system, max_states, max_seconds, progress)
    found = verdicts(graph, system.goal_ids())
    order = {rule: place for place, rule in enumerate(system.property_ids())}
    safety = [Counterexample(violation, path_to(graph, at)) for violation, at in sorted(graph.violated.values(), key=lambda v: order[v[0].rule])]
    return LivenessResult(len(graph.states), graph.transitions, time.perf_counter() - start, stopped is None, stopped, found, safety)
