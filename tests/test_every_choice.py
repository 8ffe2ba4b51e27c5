"""check explores every outcome the specification allows at a node's step (model/choices.py), so
what certify accepts is what check has proven safe; a profile's pins take alternatives out of
that set, and without the right pin a release's profile is unsafe."""

import json

import pytest

from conformance import cli
from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import explore
from model import config as model_config
from model.cluster import Deliver

# Kafka 3.9's profile on a 3-voter cluster with one epoch and two candidacies: the smallest
# space where two candidates of one epoch can both win.
TWO_CANDIDATES = {"profile": "kafka-3.9", "max_epoch": 1, "client_values": 0, "loss": False}


@pytest.fixture
def vote_req_3a_open(monkeypatch):
    """Kafka 3.9's pins without VOTE-REQ-3A: a voter that knows its epoch's leader may grant a vote in it."""
    pins = {name: pin for name, pin in model_config.PINS["kafka-3.9"].items() if name != "VOTE-REQ-3A"}
    monkeypatch.setitem(model_config.PINS, "kafka-3.9", pins)


def test_kafka_39_with_vote_req_3a_open_elects_two_leaders_in_one_epoch(vote_req_3a_open):
    """Its follower's quorum-state file forgets the vote once it knows the leader
    (vote_kept_with_leader False), so granting in that epoch grants a second vote: check finds
    the double vote and then the two leaders of epoch 1, each by its shortest run."""
    system = system_for(resolve("tlc-kraft-if4", TWO_CANDIDATES))
    result = explore(system, keep_going=True)
    found = {c.violation.rule: c for c in result.counterexamples}
    assert (found["SAFE-1"].violation.detail, len(found["SAFE-1"].path) - 1) == ("epoch 1 elected both 1 and 2", 15)
    assert (found["SAFE-2"].violation.detail, len(found["SAFE-2"].path) - 1) == ("voter 3 voted for 1 and 2 in epoch 1", 13)
    second_vote = system.action(found["SAFE-2"].path[-1][0])
    assert type(second_vote) is Deliver and second_vote.picks == (("VOTE-REQ-3A", "grant-if-up-to-date"),)
    # node 2 wins on that vote, reading the grant's LeaderId=1 as a candidate only (COMMON-3)
    second_win = system.action(found["SAFE-1"].path[-1][0])
    assert type(second_win) is Deliver and second_win.picks == (("COMMON-3", "candidate-only"),)
    assert [system.action(key).picks for key, _ in found["SAFE-1"].path[1:]].count((("VOTE-REQ-3A", "grant-if-up-to-date"),)) == 1


def test_kafka_39_as_pinned_holds_on_the_same_space():
    result = explore(system_for(resolve("tlc-kraft-if4", TWO_CANDIDATES)))
    assert result.complete and not result.counterexamples
    pinned = explore(system_for(resolve("tlc-kraft-if4", TWO_CANDIDATES | {"every_choice": False})))
    assert pinned.distinct < result.distinct  # the open points (OBS-2, COMMON-3, ...) add states


def test_the_counterexample_names_the_alternative_and_replays_as_a_scenario(vote_req_3a_open, tmp_path, capsys):
    """The step table shows the alternative a node took; the saved counterexample, printed as a
    scenario (`choosing ...`), runs to the same violation."""
    options = ["--config", "tlc-kraft-if4", "--profile", "kafka-3.9", "--max-epoch", "1", "--client-values", "0", "--no-loss", "--workers", "1"]
    assert cli.main(["check", *options, "--out", str(tmp_path)]) == 1
    capsys.readouterr()
    saved = tmp_path / "counterexample-tlc-kraft-if4-SAFE-2.jsonl"
    last = json.loads(saved.read_text().splitlines()[-1])
    assert last["action"].endswith(" [VOTE-REQ-3A=grant-if-up-to-date]")  # as the step table shows it
    assert cli.main(["traces", "show", str(saved), "--as", "scenario"]) == 0
    scenario = capsys.readouterr().out
    assert "choosing VOTE-REQ-3A=grant-if-up-to-date" in scenario
    path = tmp_path / "double-vote.scenario"
    path.write_text(scenario)
    assert cli.main(["scenario", "run", str(path)]) == 0


def test_without_every_choice_the_default_reading_misses_it(vote_req_3a_open):
    result = explore(system_for(resolve("tlc-kraft-if4", TWO_CANDIDATES | {"every_choice": False})))
    assert result.complete and not result.counterexamples
