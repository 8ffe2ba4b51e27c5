"""The fair-cycle search (conformance.explore.lasso): a cycle is a violation only when it is fair,
on small graphs whose answer is known by hand, and on the KRaft model."""

import json

import pytest

from conformance import cli
from conformance.diagrams.kraft import cluster_diagram, cluster_svg
from conformance.explore.configs import resolve
from conformance.explore.engine import explore
from conformance.explore.kraft_liveness import KraftLiveness
from conformance.explore.kraft_system import KraftSystem
from conformance.explore.lasso import FAULT, NO_FAIRNESS
from conformance.explore.liveness_search import check_liveness
from model.cluster import Fire
from model.events import TimerKind
from model.state import Role


class Toy:
    """A graph given by hand: per state, its steps (action, successor, fair action or None,
    fault), the fair actions it owes, whether a step leaves the bounds, and whether it meets the
    goal. A state is its own fingerprint, a step its own handle."""

    def __init__(self, steps: dict, enabled: dict, goal: set, cut: frozenset = frozenset()) -> None:
        self.steps, self.fair, self.goal, self.cuts = steps, enabled, goal, cut
        self.ids: dict[str, int] = {}

    def fair_id(self, action: str) -> int:
        return self.ids.setdefault(action, len(self.ids))

    def action_ids(self) -> list[int]:
        return list(range(len(self.ids)))  # a number is its own id: one process numbers them

    def initial_states(self) -> list:
        return [0]

    def fingerprint(self, state: int) -> int:
        return state

    def expand(self, state: int) -> tuple[list[int], list[tuple]]:
        found = self.steps.get(state, [])
        return [to for _action, to, _fair, _fault in found], list(found)

    def reach(self, handle: tuple) -> int:
        return handle[1]

    def key(self, handle: tuple) -> str:
        return handle[0]

    def successors(self, state: int) -> list:
        return [(action, to) for action, to, _fair, _fault in self.steps.get(state, [])]

    def labels(self, state: int, handles: list) -> tuple:
        labels = [FAULT if fault else (NO_FAIRNESS if fair is None else self.fair_id(fair)) for _action, _to, fair, fault in handles]
        return labels, sorted(self.fair_id(a) for a in self.fair.get(state, ())), int(state in self.goal)

    def leaves(self, state: int, handles: list) -> bool:
        return state in self.cuts

    def goal_ids(self) -> tuple[str, ...]:
        return ("GOAL",)

    def violations(self, state: int) -> tuple:
        return ()

    def property_ids(self) -> tuple[str, ...]:
        return ()


def step(action: str, to: int, fault: bool = False) -> tuple:
    return (action, to, None if fault else action, fault)


def verdict(toy: Toy):
    result = check_liveness(toy)
    assert result.complete
    (found,) = result.verdicts
    return found


def test_a_cycle_that_never_delivers_a_message_always_in_flight_is_not_a_violation():
    # 0 and 1 tick back and forth; message m is in flight in both and delivering it reaches the goal
    toy = Toy({0: [step("tick", 1), step("deliver m", 2)], 1: [step("tock", 0), step("deliver m", 2)], 2: []}, {0: {"tick", "deliver m"}, 1: {"tock", "deliver m"}}, goal={2})
    found = verdict(toy)
    assert found.lasso is None
    assert (found.components, found.unfair, found.at_bounds) == (1, 1, 0)


def test_the_same_cycle_is_a_violation_once_the_message_is_not_always_in_flight():
    toy = Toy({0: [step("tick", 1), step("deliver m", 2)], 1: [step("tock", 0)], 2: []}, {0: {"tick", "deliver m"}, 1: {"tock"}}, goal={2})
    found = verdict(toy)
    assert found.lasso is not None
    assert [state for _key, state in found.lasso.prefix] == [0]
    assert [(key, state) for key, state in found.lasso.cycle] == [("tick", 1), ("tock", 0)]
    assert not found.lasso.wedged  # delivering m leads out


def test_an_action_owed_that_leaves_the_bounds_makes_the_component_inconclusive():
    # delivering m is enabled throughout but its step is beyond the bounds (not explored)
    toy = Toy({0: [step("tick", 1)], 1: [step("tock", 0)]}, {0: {"tick", "deliver m"}, 1: {"tock", "deliver m"}}, goal=set(), cut=frozenset({0, 1}))
    found = verdict(toy)
    assert found.lasso is None
    assert (found.components, found.at_bounds, found.unfair) == (1, 1, 0)


def test_faults_lead_into_a_cycle_but_are_never_on_it():
    # a loss (fault) takes 0 to 1; 1 and 3 then cycle with nothing else enabled: wedged. 0 and 4
    # form a cycle only through faults, so none; each has a fair step to the goal, owed.
    toy = Toy(
        {0: [step("lose m", 1, fault=True), step("dup", 4, fault=True), step("go", 9)], 1: [step("ping", 3)], 3: [step("pong", 1)], 4: [step("lose", 0, fault=True), step("go", 9)], 9: []},
        {0: {"go"}, 1: {"ping"}, 3: {"pong"}, 4: {"go"}},
        goal={9},
    )
    found = verdict(toy)
    assert found.lasso is not None and found.lasso.wedged
    assert [key for key, _state in found.lasso.prefix] == [None, "lose m"]
    assert [key for key, _state in found.lasso.cycle] == ["ping", "pong"]
    assert (found.components, found.unfair) == (3, 2)  # {1, 3}; 0 and 4 alone


def test_a_state_with_nothing_fair_enabled_is_a_violation_where_the_run_stays():
    toy = Toy({0: [("append", 1, None, False)], 1: []}, {0: set()}, goal={1})  # a step no fairness forces (a client append)
    found = verdict(toy)
    assert found.lasso is not None
    assert [state for _key, state in found.lasso.prefix] == [0] and found.lasso.cycle == []


def test_the_cycle_passes_where_each_action_enabled_on_its_way_is_disabled():
    # component {0, 1, 2}: 0 -> 1 -> 0 and 0 -> 2 -> 0; x is enabled at 0 and 1 (never taken) but not
    # at 2, so the cycle 0 -> 1 -> 0 is unfair to x and the fair one must pass 2
    toy = Toy(
        {0: [step("a", 1), step("b", 2), step("x", 5)], 1: [step("c", 0), step("x", 5)], 2: [step("d", 0)], 5: []},
        {0: {"a", "b", "x"}, 1: {"c", "x"}, 2: {"d"}},
        goal={5},
    )
    found = verdict(toy)
    assert found.lasso is not None
    visited = {state for _key, state in found.lasso.cycle}
    assert 2 in visited and found.lasso.cycle[-1][1] == 0


def test_kraft_liveness_explores_the_states_the_safety_search_does_without_symmetry():
    config = resolve("smoke", {"symmetry": False})
    safety = explore(KraftSystem(config.cluster(), config.faults(), max_epoch=config.max_epoch, max_in_flight=config.max_in_flight or None, symmetry=False))
    result = check_liveness(KraftLiveness(config))
    assert result.complete and safety.complete
    assert result.distinct == safety.distinct == 2075
    assert [(v.rule, v.lasso is None) for v in result.verdicts] == [("LIVE-1", True), ("LIVE-2", True), ("LIVE-3", True), ("LIVE-4", True)]


def test_without_fair_timers_a_cluster_may_never_elect_anyone():
    result = check_liveness(KraftLiveness(resolve("smoke", {}), fair_timers=frozenset()))
    live1 = result.verdicts[0]
    assert live1.rule == "LIVE-1" and live1.lasso is not None
    assert len(live1.lasso.prefix) == 1 and live1.lasso.cycle == []  # the initial state, nobody's timer ever fires
    assert not live1.lasso.wedged


def test_check_liveness_holds_on_smoke_and_says_which_cycles_end_at_the_bounds(tmp_path, capsys):
    assert cli.main(["check", "--liveness", "--json", "--out", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["complete"] and data["distinct_states"] == 2075 and not data["symmetry"]
    assert all(data["properties"][f"SAFE-{n}"] == "holds" for n in range(1, 10))
    # epochs stop at 2: a split vote there is owed an election it cannot hold (LIVE-1, -3, -4); LIVE-2 holds outright
    assert data["properties"]["LIVE-2"] == "holds"
    assert all(data["properties"][rule].startswith("holds inside the bounds") for rule in ("LIVE-1", "LIVE-3", "LIVE-4"))
    assert data["lasso_files"] == [] and list(tmp_path.iterdir()) == []


def test_check_liveness_saves_each_lasso_and_its_diagram(tmp_path, capsys):
    assert cli.main(["check", "--liveness", "--fair-timers", "none", "--out", str(tmp_path)]) == 1
    printed = capsys.readouterr().out
    assert "LIVE-1 A leader is eventually elected: the run stays after step 0, nothing fair enabled" in printed
    lines = [json.loads(line) for line in (tmp_path / "lasso-smoke-LIVE-1.jsonl").read_text().splitlines()]
    assert lines == [lines[0]] and lines[0]["kind"] == "kraftcheck-lasso" and lines[0]["property"] == "LIVE-1"
    assert (lines[0]["cycle_from_step"], lines[0]["cycle_steps"], lines[0]["fair_timers"]) == (1, 0, [])
    # LIVE-3: two candidates of epoch 1, each refused by the other, with no timer owed to fire
    standing = [json.loads(line) for line in (tmp_path / "lasso-smoke-LIVE-3.jsonl").read_text().splitlines()]
    assert sorted(step["action"].split(" ")[0:3] for step in standing[1:3]) == [["node", "1:", "election_timeout"], ["node", "2:", "election_timeout"]]
    assert "<svg" in (tmp_path / "lasso-smoke-LIVE-3.svg").read_text()


def test_check_liveness_checks_safety_on_the_same_states():
    """The liveness graph finds the faulty variant's SAFE-2 at the length the safety search does
    (tests/test_faulty_variants.py: 5 steps)."""
    result = check_liveness(KraftLiveness(resolve("faults", {"profile": "faulty-forget-vote"})), max_states=30_000)
    assert not result.complete and result.stopped == "max-states"
    assert [(c.violation.rule, len(c.path) - 1) for c in result.counterexamples] == [("SAFE-2", 5)]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--resume", "somewhere"], "--resume cannot be given with it"),
        (["--keep-going"], "--liveness searches the whole graph, in-process or sharded, and judges it once: --keep-going cannot be given with it"),
        (["--engine", "spark"], "--engine spark cannot be given with it"),
        (["--config", "isr-epoch"], "--liveness checks KRaft configurations"),
    ],
)
def test_check_liveness_refuses_what_it_cannot_do(argv, message, tmp_path, capsys):
    assert cli.main(["check", "--liveness", "--out", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err


def test_fair_timers_needs_liveness_and_known_timers(tmp_path, capsys):
    assert cli.main(["check", "--fair-timers", "none", "--out", str(tmp_path)]) == 2
    assert "give it with --liveness" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["check", "--liveness", "--fair-timers", "lunch"])
    assert exit_.value.code == 2 and "unknown timer 'lunch'" in capsys.readouterr().err


def test_a_lassos_diagram_numbers_its_cycle_steps_apart_and_says_how_it_repeats():
    cluster = KraftLiveness(resolve("smoke", {})).cluster
    actions = [Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT), Fire(node=2, timer=TimerKind.ELECTION_TIMEOUT)]
    diagram = cluster_diagram(cluster, actions, "a lasso", cycle_from=1, verdicts=["LIVE-3 steps 2 to 2 repeat for ever"])
    assert [row.step for row in diagram.rows] == ["1", "↻2"]
    assert diagram.verdicts[-1] == "LIVE-3 steps 2 to 2 repeat for ever"
    assert "↻2" in cluster_svg(cluster, actions, "a lasso", cycle_from=1)


def test_a_leader_without_its_leader_change_record_never_commits_an_earlier_epochs_record():
    """faulty-no-leader-change breaks no safety property (tests/test_faulty_variants.py), but the
    KIP adds the record so that the high watermark can advance: node 2 leads epoch 2 holding
    epoch 1's v1, and the fetch loop between it and node 1 commits nothing, for ever (LIVE-2)."""
    live = KraftLiveness(resolve("smoke", {"profile": "faulty-no-leader-change"}))
    result = check_liveness(live)
    assert result.complete and not result.counterexamples
    verdicts = {v.rule: v for v in result.verdicts}
    assert all(verdicts[rule].lasso is None for rule in ("LIVE-1", "LIVE-3", "LIVE-4"))
    lasso = verdicts["LIVE-2"].lasso
    assert (len(lasso.prefix) - 1, len(lasso.cycle), lasso.wedged) == (14, 2, True)  # only a fetch timeout beating its Fetch leaves it
    cycle = [type(live.action(key)).__name__ for key, _state in lasso.cycle]
    assert cycle == ["Deliver", "Deliver"] and lasso.cycle[-1][1] == lasso.prefix[-1][1]  # a Fetch and its response, back where it began
    leader = live.decode(lasso.prefix[-1][1]).nodes[1]
    assert (leader.role, leader.epoch, [r.Epoch for r in leader.log], leader.high_watermark) == (Role.LEADER, 2, [1], 0)
