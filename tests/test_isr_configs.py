"""The ISR configurations: pinned state counts, verdicts, and KIP-101's scenarios as the shortest counterexamples.

A change in a count means the ISR model or its state space changed: look before updating.
The scenario tests read the counterexample paths themselves, so they check what the
counterexample shows, not just its length.
"""

import json

import msgspec
import pytest

from adapters.model_adapter import ModelAdapter
from conformance import cli
from conformance.certify.replay import replay
from conformance.corpus.generate import CORPUS_CONFIGS
from conformance.explore import configs as check_config
from conformance.explore.check import system_for
from conformance.explore.configs import IsrCheckConfig, resolve
from conformance.explore.engine import explore
from conformance.explore.isr_system import IsrSystem
from model.cluster import Append, CrashNode, RestartNode
from model.config import ConfigError
from model.isr.cluster import Elect, PowerFailure
from model.isr import replica
from model.isr.state import Role
from model.messages import Record
from spec import trace as traces

HOLDS, VIOLATED = "holds", "violated"

PINNED = {
    # name: (distinct, generated, depth), {property: shortest counterexample length, or HOLDS}
    "isr-hw": ((7_031, 21_319, 30), {"ISR-SAFE-1": 11, "ISR-SAFE-2": 10, "ISR-SAFE-3": 9}),
    "isr-epoch": ((9_390, 28_527, 30), {"ISR-SAFE-1": HOLDS, "ISR-SAFE-2": HOLDS, "ISR-SAFE-3": 9}),
    "isr-epoch-minisr1": ((24_916, 50_273, 41), {"ISR-SAFE-1": HOLDS, "ISR-SAFE-2": HOLDS, "ISR-SAFE-3": HOLDS}),
    "isr-epoch-minisr2": ((42_115, 85_180, 46), {"ISR-SAFE-1": HOLDS, "ISR-SAFE-2": HOLDS, "ISR-SAFE-3": HOLDS}),
    "isr-epoch-minisr1-powerloss": ((220_969, 626_586, 47), {"ISR-SAFE-1": HOLDS, "ISR-SAFE-2": HOLDS, "ISR-SAFE-3": 9}),
    "isr-epoch-minisr2-powerloss": ((372_055, 1_114_812, 51), {"ISR-SAFE-1": HOLDS, "ISR-SAFE-2": HOLDS, "ISR-SAFE-3": 9}),
}

V1 = Record(Offset=0, Epoch=0, Value=1)


@pytest.fixture(scope="module")
def results():
    """Each ISR configuration explored once (in-process, as `check` does), with the system that explored it."""
    found = {}
    for name in PINNED:
        config = resolve(name, {})
        system = system_for(config)
        found[name] = (system, explore(system, keep_going=config.keep_going))
    return found


def test_every_isr_configuration_is_pinned():
    """All but the corpus's search, which is bounded by states visited (see tests/test_certify.py)."""
    isr = {name for name, config in check_config.named_configs().items() if isinstance(config, IsrCheckConfig) and name not in CORPUS_CONFIGS}
    assert isr == set(PINNED)


@pytest.mark.parametrize("name", PINNED)
def test_counts_verdicts_and_counterexample_lengths(results, name):
    counts, verdicts = PINNED[name]
    system, result = results[name]
    assert isinstance(system, IsrSystem)
    assert result.complete  # keep_going: exhaustive, so an unviolated property holds in every reachable state
    assert (result.distinct, result.generated, result.depth) == counts
    found = {c.violation.rule: len(c.path) - 1 for c in result.counterexamples}
    assert {rule: found.get(rule, HOLDS) for rule in system.property_ids()} == verdicts


def test_the_min_isr_claim_matrix(results):
    """Leader-epoch truncation: no divergence anywhere; acknowledged records lost only after a power
    failure, at min.isr 1 and 2 alike."""
    for name in ("isr-epoch-minisr1", "isr-epoch-minisr2", "isr-epoch-minisr1-powerloss", "isr-epoch-minisr2-powerloss"):
        config = resolve(name, {})
        assert config.truncation == "epoch" and config.min_isr == (2 if "minisr2" in name else 1)
        assert config.unflushed_loss == name.endswith("powerloss")
        violated = [c.violation.rule for c in results[name][1].counterexamples]
        assert violated == (["ISR-SAFE-3"] if config.unflushed_loss else [])


def path_of(results, name: str, rule: str) -> list:
    (counterexample,) = [c for c in results[name][1].counterexamples if c.violation.rule == rule]
    return counterexample.path


def index_of(path: list, action) -> int:
    return next(i for i, (a, _) in enumerate(path) if a == action)


def test_scenario_1_a_follower_truncates_to_its_stale_hw_and_is_elected(results):
    """KIP-101 scenario 1 (ISR-SAFE-2, isr-hw): r2 replicated v1 but had not learnt that it was
    committed; it restarts, truncates v1 away, and becomes leader after r1 fails."""
    path = path_of(results, "isr-hw", "ISR-SAFE-2")
    assert not any(type(a) is PowerFailure for a, _ in path)
    restart = index_of(path, RestartNode(node=2))
    before, after = path[restart - 1][1], path[restart][1]
    assert V1 in before.history.acked  # committed before the restart
    assert before.replicas[1].log == (V1,) and before.replicas[1].high_watermark == 0  # the stale HW
    assert after.replicas[1].log == ()  # truncated to it
    assert index_of(path, CrashNode(node=1)) < index_of(path, Elect(node=2)) and restart < index_of(path, Elect(node=2))
    final = path[-1][1]
    assert (final.controller.Leader, final.controller.LeaderEpoch) == (2, 1)
    assert final.replicas[1].role == Role.LEADER and V1 not in final.replicas[1].log
    assert final.replicas[0].log == (V1,)  # the only copy, on the crashed old leader


def test_scenario_1_in_the_kips_own_order_is_as_short(results):
    """In the KIP the follower restarts before the leader fails; the checker prints an equally short
    order (both crash first). The KIP's order, replayed action by action, violates ISR-SAFE-2 at the
    same length: it is one of the shortest counterexamples."""
    system, result = results["isr-hw"]
    shortest = path_of(results, "isr-hw", "ISR-SAFE-2")
    common = [action for action, _ in shortest[1:7]]  # r2 replicates v1; the leader acknowledges it
    kip_order = common + [CrashNode(node=2), RestartNode(node=2), CrashNode(node=1), Elect(node=2)]
    state = shortest[0][1]
    for step, action in enumerate(kip_order, start=1):
        assert action in system.partition.enabled(state)
        state = system.partition.apply(state, action).state
        assert not system.violations(state) or step == len(kip_order)
    assert [v.rule for v in system.violations(state)] == ["ISR-SAFE-2"]
    assert len(kip_order) == len(shortest) - 1 == 10
    assert state.replicas[1].log == () and V1 in state.history.acked


def test_scenario_2_the_incomplete_replica_comes_back_first_and_the_logs_diverge(results):
    """KIP-101 scenario 2 (ISR-SAFE-1, isr-hw): a power failure takes both replicas; r2 lost the
    unflushed v1, restarts first, is elected and takes a new record at the same offset; r1 comes
    back, truncates to its HW, keeps v1."""
    path = path_of(results, "isr-hw", "ISR-SAFE-1")
    failure = next(i for i, (a, _) in enumerate(path) if type(a) is PowerFailure)
    before, after = path[failure - 1][1], path[failure][1]
    assert before.replicas[1].log == (V1,) and after.replicas[1].log == ()  # r2 lost its unflushed copy
    assert after.replicas[0].log == (V1,)  # r1 kept it
    assert failure < index_of(path, RestartNode(node=2)) < index_of(path, Elect(node=2)) < index_of(path, RestartNode(node=1))
    assert any(type(a) is Append and a.node == 2 for a, _ in path)
    r1, r2 = path[-1][1].replicas
    assert r1.role == Role.FOLLOWER and r2.role == Role.LEADER
    assert r1.log[0] == V1 and r2.log[0] == Record(Offset=0, Epoch=1, Value=2)
    assert min(r1.high_watermark, r2.high_watermark) >= 1


@pytest.mark.parametrize("name", ["isr-hw", "isr-epoch", "isr-epoch-minisr2-powerloss"])
def test_the_loss_that_remains_elects_the_replica_that_lost_the_record(results, name):
    """ISR-SAFE-3: after the power failure r2 has lost v1 and r1 still holds it, yet r2 is elected,
    whatever the truncation and min.isr (leader epochs only decide what r1 then does with its copy)."""
    path = path_of(results, name, "ISR-SAFE-3")
    final = path[-1][1]
    assert type(path[-1][0]) is Elect and final.controller.Leader == 2
    assert V1 in final.history.acked and V1 not in final.replicas[1].log
    assert final.replicas[0].role == Role.DOWN and final.replicas[0].log[:1] == (V1,)


def test_check_isr_hw_prints_the_scenarios_and_saves_them(tmp_path, capsys):
    assert cli.main(["check", "--config", "isr-hw", "--out", str(tmp_path)]) == 1
    printed = capsys.readouterr().out
    for rule, length in PINNED["isr-hw"][1].items():
        assert f"{rule} violated after {length} steps" in printed
    assert "r1" in printed and "r2" in printed and "0:1:v2" in printed
    for rule, length in PINNED["isr-hw"][1].items():
        lines = [json.loads(line) for line in (tmp_path / f"counterexample-isr-hw-{rule}.jsonl").read_text().splitlines()]
        header, steps = lines[0], lines[1:]
        assert header["kind"] == "kraftcheck-counterexample" and header["property"] == rule and header["bounds"]["system"] == "isr"
        assert [s["step"] for s in steps] == list(range(length + 1))
        assert set(steps[-1]["replicas"]) == {"r1", "r2"}


def test_check_isr_epoch_json_runs_in_process_and_names_the_verdicts(tmp_path, capsys):
    assert cli.main(["check", "--config", "isr-epoch", "--json", "--workers", "2", "--out", str(tmp_path)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["workers"] == 1 and data["complete"] is True
    assert data["distinct_states"] == PINNED["isr-epoch"][0][0]
    assert data["properties"] == {"ISR-SAFE-1": HOLDS, "ISR-SAFE-2": HOLDS, "ISR-SAFE-3": VIOLATED}


def test_counterexample_files_are_the_same_on_every_run(tmp_path, capsys):
    written = []
    for run in ("a", "b"):
        assert cli.main(["check", "--config", "isr-hw", "--json", "--out", str(tmp_path / run)]) == 1
        capsys.readouterr()
        written.append({p.relative_to(tmp_path / run): p.read_bytes() for p in (tmp_path / run).rglob("*") if p.is_file()})
    assert written[0] == written[1] and len(written[0]) == 3 * (2 + 2)  # per property: a step table, a diagram and a trace per replica


def test_scenario_1_saved_as_replica_traces_replays_and_shows_where_kip101_differs(tmp_path, capsys):
    """Scenario 1's follower, as a conformance trace: the reference (hw truncation) passes it; a
    KIP-101 replica departs at the restart, where it asks OffsetsForLeaderEpoch instead of cutting its log."""
    assert cli.main(["check", "--config", "isr-hw", "--json", "--out", str(tmp_path)]) == 1
    data = json.loads(capsys.readouterr().out)
    path = tmp_path / "counterexample-isr-hw-ISR-SAFE-2" / "counterexample-isr-hw-ISR-SAFE-2-replica2.jsonl"
    assert str(path) in data["counterexample_traces"]
    follower = traces.read(path)
    assert follower.header.partition.truncation == "hw"
    assert replay(ModelAdapter("reference"), follower, str(path)).passed
    restart = next(step for step in follower.steps if "ISR-TRUNC-1" in step.rules)
    assert restart.state.log == () and restart.expect.sends == ()

    def kip101_replica(config, state, event):  # the same replica, truncating by leader epoch
        return replica.step(msgspec.structs.replace(config, truncation="epoch"), state, event)

    departed = replay(ModelAdapter("kip101", {"isr": kip101_replica}), follower, str(path))
    assert (departed.passed, departed.divergence.step, departed.divergence.field) == (False, restart.step, "sends")
    assert "OffsetsForLeaderEpochRequest" in departed.divergence.actual


def test_isr_keys_alone_select_the_isr_system(tmp_path, capsys):
    """No --config: ISR keys pick the ISR defaults; without keep_going the search stops at the first violation."""
    code = cli.main(["check", "--replicas", "2", "--truncation", "hw", "--client-values", "1", "--no-unflushed-loss", "--out", str(tmp_path)])
    assert code == 1
    assert "ISR-SAFE-2 violated after 10 steps" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config", "isr-hw", "--voters", "3"], "voters cannot be set for an ISR configuration"),
        (["--config", "smoke", "--min-isr", "2"], "min_isr cannot be set for a KRaft configuration"),
        (["--config", "isr-hw", "--truncation", "nope"], "truncation must be one of hw, epoch, got 'nope'"),
        (["--config", "isr-hw", "--min-isr", "3"], "min_isr must be between 1 and the number of replicas (2), got 3"),
        (["--config", "isr-hw", "--replicas", "0"], "replicas must be at least 1, got 0"),
        (["--config", "isr-hw", "--crashes", "-1"], "max_crashes must not be negative, got -1"),
    ],
)
def test_bad_isr_values_exit_2_with_a_clear_message(capsys, argv, message):
    assert cli.main(["check", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_bad_isr_section_names_the_file_and_section(tmp_path, monkeypatch):
    bad = tmp_path / "configs.toml"
    bad.write_text('[ok]\nvoters = 2\n\n[broken]\nsystem = "isr"\nmin_isr = 5\n')
    monkeypatch.setattr(check_config, "CONFIGS_PATH", bad)
    check_config.named_configs.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"configs.toml \[broken\]: min_isr must be between 1 and the number of replicas \(2\), got 5"):
            check_config.named_configs()
        bad.write_text('[odd]\nsystem = "paxos"\n')
        check_config.named_configs.cache_clear()
        with pytest.raises(ConfigError, match=r"\[odd\]: unknown system 'paxos'; known: kraft, isr"):
            check_config.named_configs()
    finally:
        check_config.named_configs.cache_clear()


def test_the_isr_configuration_is_the_whole_bounds_record():
    config = resolve("isr-hw", {"min_isr": 2})
    assert msgspec.to_builtins(config)["min_isr"] == 2
    assert config.description.endswith("(overridden: min_isr)")
    assert system_for(config).partition.config.min_isr == 2
