"""The seeded liveness bugs (model/config.py FAULTY_PROFILES): each breaks no safety property, and
`check --liveness` catches it with a fair lasso, where the same model with the bug taken out has
none for that property under the same bounds. Lasso lengths are pinned."""

import msgspec
import pytest

from conformance import cli
from conformance.explore.configs import resolve
from conformance.explore.kraft_liveness import KraftLiveness
from conformance.explore.liveness_search import check_liveness
from model import config as model_config
from model.state import Role

MUTANTS = {
    # profile: (configuration, the option that is the bug, the property caught, (prefix steps, cycle steps))
    "faulty-candidate-never-backs-off": ("smoke", "candidate_never_backs_off", "LIVE-1", (2, 6)),
    "faulty-prospective-never-gives-up": ("smoke", "prospective_never_gives_up", "LIVE-3", (9, 3)),
    "faulty-leader-never-resigns": ("live-zombie", "leader_never_resigns", "LIVE-5", (16, 2)),
}


def judged(name: str, profile: str):
    live = KraftLiveness(resolve(name, {"profile": profile}))
    result = check_liveness(live)
    assert result.complete and not result.counterexamples  # exhausted, every safety property holds
    return live, {v.rule: v for v in result.verdicts}


@pytest.mark.parametrize("profile", MUTANTS)
def test_each_liveness_mutant_is_caught_with_its_lasso(profile):
    name, _bug, rule, lengths = MUTANTS[profile]
    _live, verdicts = judged(name, profile)
    lasso = verdicts[rule].lasso
    assert lasso is not None and (len(lasso.prefix) - 1, len(lasso.cycle)) == lengths
    assert lasso.cycle[-1][1] == lasso.prefix[-1][1]  # the cycle closes where the prefix ends


@pytest.mark.parametrize("profile", MUTANTS)
def test_without_its_bug_the_same_bounds_hold_the_property(profile, monkeypatch):
    name, bug, rule, _lengths = MUTANTS[profile]
    fixed = msgspec.structs.replace(model_config.FAULTY_PROFILES[profile], **{bug: False})
    monkeypatch.setitem(model_config.FAULTY_PROFILES, profile, fixed)
    _live, verdicts = judged(name, profile)
    assert verdicts[rule].lasso is None and verdicts[rule].components > 0  # states miss the goal, none for ever


def test_the_candidate_that_never_backs_off_asks_again_in_its_epoch_for_ever():
    """Both voters stand in epoch 1, each votes for itself, and each asks the other again."""
    live, verdicts = judged("smoke", "faulty-candidate-never-backs-off")
    for _key, state in verdicts["LIVE-1"].lasso.cycle:
        nodes = live.decode(state).nodes
        assert [(n.role, n.epoch, n.voted_id) for n in nodes] == [(Role.CANDIDATE, 1, 1), (Role.CANDIDATE, 1, 2)]


def test_the_zombie_leader_leads_epoch_1_while_the_others_move_on():
    """One node leads epoch 1, the links into it cut; the other two go on in epoch 2 without it
    (which node it is, the search does not prefer: the voters are alike)."""
    live, verdicts = judged("live-zombie", "faulty-leader-never-resigns")
    for _key, state in verdicts["LIVE-5"].lasso.cycle:
        decoded = live.decode(state)
        (zombie,) = [at for at, n in enumerate(decoded.nodes) if (n.role, n.epoch) == (Role.LEADER, 1)]
        others = [n for at, n in enumerate(decoded.nodes) if at != zombie]
        assert sorted((n.role, n.epoch) for n in others) == [(Role.FOLLOWER, 2), (Role.LEADER, 2)]
        name = live.cluster.ids[zombie]
        assert decoded.history.cut == frozenset((other, name) for other in live.cluster.ids if other != name)


def test_check_liveness_prints_and_saves_the_mutants_lasso(tmp_path, capsys):
    code = cli.main(["check", "--config", "smoke", "--profile", "faulty-candidate-never-backs-off", "--liveness", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 1
    assert "LIVE-1 A leader is eventually elected: steps 3 to 8 repeat for ever" in printed
    assert (tmp_path / "lasso-smoke-LIVE-1.jsonl").is_file() and (tmp_path / "lasso-smoke-LIVE-1.svg").is_file()


def test_a_saved_lasso_reads_as_a_scenario_that_runs_on_the_model(tmp_path, capsys):
    """`traces show LASSO --as scenario`: the prefix, then the cycle once, marked; running it
    takes the same steps."""
    assert cli.main(["check", "--config", "smoke", "--profile", "faulty-candidate-never-backs-off", "--liveness", "--out", str(tmp_path)]) == 1
    capsys.readouterr()
    assert cli.main(["traces", "show", str(tmp_path / "lasso-smoke-LIVE-1.jsonl"), "--as", "scenario"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    steps = [at for at, line in enumerate(lines) if line.startswith("do ")]
    assert len(steps) == 8 and lines.index("# the cycle: steps 3 to 8 repeat for ever") == steps[1] + 1
    assert sorted(lines[at] for at in steps[:2]) == ["do timer 1 election_timeout", "do timer 2 election_timeout"]
    scenario = tmp_path / "lasso.scenario"
    scenario.write_text(text)
    assert cli.main(["scenario", "run", str(scenario)]) == 0
    assert "passes" in capsys.readouterr().out
