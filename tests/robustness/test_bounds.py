"""Bounds a hostile user may pass to `check` and `simulate`: each is refused with exit 2 and a
message naming the option and its limit, before any search; a search that never leaves its
initial state is reported as vacuous (exit 2), never as a proof."""

import json
import time

import msgspec
import pytest

from conformance import cli
from conformance.explore.configs import MAX_WORKERS
from conformance.explore.check import VACUOUS
from conformance.explore.configs import MAX_NODES, CheckConfig, IsrCheckConfig
from conformance.explore.kraft_system import MAX_SYMMETRIC_NODES

SYMMETRY_LIMIT = "symmetry reduction supports at most 6 nodes (voters and observers), got {}; use --no-symmetry for a larger cluster"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # records never sent: a smaller space than smoke's, read as a proof
        (["check", "--fetch-max-records", "-1"], "fetch_max_records must not be negative, got -1"),
        # no election at all: one state
        (["check", "--max-elections", "-1"], "max_elections must be at least 1, got -1"),
        (["check", "--max-elections", "0"], "max_elections must be at least 1, got 0"),
        # an election needs a Vote request to every other voter in flight at once
        (["check", "--voters", "6"], "max_in_flight must be at least 5 for 6 voters, so that an election fits, got 4"),
        (["check", "--voters", "7", "--no-symmetry"], "max_in_flight must be at least 6 for 7 voters, so that an election fits, got 4"),
        (["check", "--voters", "8", "--no-symmetry", "--max-in-flight", "6"], "max_in_flight must be at least 7 for 8 voters, so that an election fits, got 6"),
        (["check", "--voters", "10", "--no-symmetry", "--max-states", "1000", "--workers", "1"], "max_in_flight must be at least 9 for 10 voters, so that an election fits, got 4"),
        (["check", "--max-in-flight", "-1"], "max_in_flight must not be negative, got -1"),
        (["check", "--max-in-flight", "0", "--duplication"], "max_in_flight 0 (no bound) needs duplication and retries off: each duplicate delivery or re-send adds a message in flight"),
        (["check", "--max-in-flight", "0", "--retries"], "max_in_flight 0 (no bound) needs duplication and retries off: each duplicate delivery or re-send adds a message in flight"),
        (["check", "--max-epoch", "0"], "max_epoch must be at least 1, got 0"),
        (["check", "--client-values", "-1"], "client_values must not be negative, got -1"),
        (["check", "--crashes", "-1"], "max_crashes must not be negative, got -1"),
        (["check", "--voters", "1000"], "voters must be at most 16, got 1000"),
        (["check", "--voters", "17", "--no-symmetry"], "voters must be at most 16, got 17"),
        (["check", "--observers", "17", "--no-symmetry"], "observers must be at most 16, got 17"),
        (["check", "--observers", "-1"], "observers must not be negative, got -1"),
        (["check", "--voters", "12"], SYMMETRY_LIMIT.format(12)),
        (["check", "--voters", "4", "--observers", "3", "--max-in-flight", "4"], SYMMETRY_LIMIT.format(7)),
        (["check", "--max-states", "-5"], "--max-states must be at least 1, got -5"),
        (["check", "--max-states", "0"], "--max-states must be at least 1, got 0"),
        (["check", "--workers", "0"], "--workers must be at least 1, got 0"),
        (["check", "--workers", "65"], "--workers must be at most 64, got 65"),
        # the ISR system's bounds
        (["check", "--replicas", "17"], "replicas must be at most 16, got 17"),
        (["check", "--config", "isr-hw", "--max-elections", "-1"], "max_elections must not be negative, got -1"),
        (["check", "--config", "isr-hw", "--client-values", "-2"], "client_values must not be negative, got -2"),
        (["check", "--config", "isr-hw", "--min-isr", "0"], "min_isr must be between 1 and the number of replicas (2), got 0"),
        (["check", "--config", "isr-hw", "--truncation", "none"], "truncation must be one of hw, epoch, got 'none'"),
        # simulate: no runs or no steps would print "all safety properties held"
        (["simulate", "--steps", "-1"], "--steps must be at least 1, got -1"),
        (["simulate", "--steps", "0"], "--steps must be at least 1, got 0"),
        (["simulate", "--runs", "0"], "--runs must be at least 1, got 0"),
        (["simulate", "--runs", "-3"], "--runs must be at least 1, got -3"),
        (["simulate", "--client-values", "-1"], "--client-values must not be negative, got -1"),
        (["simulate", "--crashes", "-1"], "--crashes must not be negative, got -1"),
        (["simulate", "--show", "-1"], "--show must be at least 1, got -1"),
        (["simulate", "--show", "0"], "--show must be at least 1, got 0"),  # history[-0:] would show the whole run
        (["simulate", "--voters", "17"], "--voters must be at most 16, got 17"),
        (["simulate", "--observers", "17"], "--observers must be at most 16, got 17"),
        # certify and choices: no adapter at all would replay nothing and pass
        (["certify", "--adapter", "reference", "--jobs", "0"], "--jobs must be between 1 and 64, got 0"),
        (["certify", "--adapter", "reference", "--jobs", "65"], "--jobs must be between 1 and 64, got 65"),
        (["choices", "--run", "--random", "-1"], "--random must be between 0 and 1000, got -1"),
        (["choices", "--run", "--combinations", "1001"], "--combinations must be between 0 and 1000, got 1001"),
        # traces generate: an empty corpus, exit 0, would certify anything
        (["traces", "generate", "--config", "smoke", "--max-states", "-1", "--out", "never-written"], "--max-states must be at least 1, got -1"),
        (["traces", "generate", "--config", "smoke", "--max-states", "0", "--out", "never-written"], "--max-states must be at least 1, got 0"),
        (["traces", "generate", "--config", "smoke", "--walks", "-1", "--out", "never-written"], "--walks must not be negative, got -1"),
        (["traces", "generate", "--config", "smoke", "--aimed-walks", "-1", "--out", "never-written"], "--aimed-walks must not be negative, got -1"),
        (["traces", "generate", "--config", "smoke", "--walk-steps", "0", "--out", "never-written"], "--walk-steps must be at least 1, got 0"),
        (["traces", "generate", "--config", "smoke", "--workers", "0", "--out", "never-written"], "--workers must be at least 1, got 0"),
        (["traces", "generate", "--config", "smoke", "--workers", "65", "--out", "never-written"], "--workers must be at most 64, got 65"),
        (["traces", "generate", "--config", "smoke", "--seed", str(2**64), "--out", "never-written"], f"--seed must be at most {2**63 - 1}, got {2**64}"),
    ],
)
def test_a_bound_out_of_range_exits_2_naming_the_option_and_its_limit(capsys, argv, message):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"kraftcheck: invalid configuration: {message}\n")


def test_generate_refuses_bounds_that_give_no_trace_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "corpus"
    argv = ["traces", "generate", "--config", "smoke", "--max-states", "1", "--walks", "0", "--aimed-walks", "0", "--out", str(out)]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.endswith(
        "kraftcheck: invalid configuration: these bounds give no trace (--max-states 1, --walks 0, --aimed-walks 0): nothing written\n"
    )
    assert not out.exists()


def test_ten_voters_with_symmetry_are_refused_at_once(capsys):
    """10! renamings per state: the search never started, used gigabytes and ignored Ctrl-C."""
    started = time.perf_counter()
    assert cli.main(["check", "--voters", "10", "--max-in-flight", "9", "--max-states", "1000"]) == 2
    assert time.perf_counter() - started < 5
    assert capsys.readouterr().err == f"kraftcheck: invalid configuration: {SYMMETRY_LIMIT.format(10)}\n"


def test_ten_voters_run_without_symmetry(capsys):
    assert cli.main(["check", "--voters", "10", "--no-symmetry", "--max-in-flight", "9", "--max-states", "1000", "--workers", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["complete"], data["symmetry"], data["vacuous"]) == (False, False, False)
    assert (data["distinct_states"], data["depth"]) == (1_811, 3)  # stops after the level that passes 1000
    assert set(data["properties"].values()) == {"not violated so far"}


@pytest.mark.parametrize(
    ("argv", "symmetry"),
    [
        (["--voters", "6", "--max-in-flight", "5"], True),  # the limit itself
        (["--voters", "10", "--max-in-flight", "9", "--resign"], False),  # resignation turns symmetry off, so no limit
    ],
)
def test_the_symmetry_limit_applies_only_above_it_and_only_with_symmetry(capsys, argv, symmetry):
    assert cli.main(["check", *argv, "--max-states", "100", "--workers", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["symmetry"], data["complete"]) == (symmetry, False)
    assert data["distinct_states"] >= 100


VACUOUS_ISR = ["check", "--replicas", "1", "--client-values", "0", "--crashes", "0", "--max-elections", "0", "--no-unflushed-loss"]
VACUOUS_MESSAGE = "kraftcheck: vacuous check: no action leads out of the initial state within these bounds, so no property was tested; widen the bounds\n"


def test_a_space_without_a_step_is_vacuous_not_a_proof(capsys):
    """Valid bounds, but a lone ISR replica with nothing to append, no crash and no election has nothing to do."""
    assert cli.main([*VACUOUS_ISR, "--json"]) == 2
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert (data["complete"], data["distinct_states"], data["depth"], data["vacuous"]) == (True, 1, 0, True)
    assert data["properties"] == {rule: f"vacuous: {VACUOUS}" for rule in ("ISR-SAFE-1", "ISR-SAFE-2", "ISR-SAFE-3")}
    assert err == VACUOUS_MESSAGE


def test_the_vacuous_table_never_says_holds(capsys):
    assert cli.main(VACUOUS_ISR) == 2
    out, err = capsys.readouterr()
    assert "ISR-SAFE-1  vacuous: no action leads out of the initial state" in out
    assert "holds" not in out
    assert err == VACUOUS_MESSAGE


def test_a_search_stopped_before_its_first_step_is_not_called_vacuous(capsys):
    """Stopped by --max-states, the space is not known to be empty: "not violated so far", exit 0."""
    assert cli.main(["check", "--config", "smoke", "--max-states", "1", "--workers", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["complete"], data["depth"], data["vacuous"]) == (False, 0, False)
    assert set(data["properties"].values()) == {"not violated so far"}


def test_no_option_runs_smoke_and_options_without_config_override_the_built_in_defaults(capsys):
    assert cli.main(["check", "--workers", "1", "--json"]) == 0  # --workers fixes no state space
    smoke = json.loads(capsys.readouterr().out)
    assert (smoke["config"], smoke["distinct_states"]) == ("smoke", 1_041)
    assert cli.main(["check", "--voters", "2", "--max-states", "1", "--workers", "1", "--json"]) == 0
    custom = json.loads(capsys.readouterr().out)
    assert custom["config"] == "custom"
    assert custom["bounds"] == msgspec.to_builtins(CheckConfig(voters=2))  # not smoke's bounds with 2 voters
    assert custom["bounds"] != smoke["bounds"]


def test_check_help_states_the_defaults_and_the_limits(capsys, monkeypatch):
    """The help is static text: it must follow the defaults and limits the code enforces."""
    monkeypatch.setenv("COLUMNS", "10000")  # one line per option, no hyphenation
    with pytest.raises(SystemExit) as exited:
        cli.main(["check", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    kraft, isr = CheckConfig(), IsrCheckConfig()
    assert "With no option at all: smoke. Options given without --config override the built-in defaults, not smoke's: " in text
    defaults = (
        f"{kraft.voters} voters, no observers, {kraft.client_values} client value, max epoch {kraft.max_epoch}, no election bound, "
        f"{kraft.max_in_flight} messages in flight, loss and leader progress timeouts on, no crashes, duplication, resignation or re-sends;"
    )
    assert (kraft.observers, kraft.max_elections, kraft.loss, kraft.progress_timeouts, kraft.max_crashes) == (0, None, True, True, 0)
    assert (kraft.duplication, kraft.resign, kraft.retries) == (False, False, False)
    assert defaults in text
    isr_defaults = (
        f"{isr.replicas} replicas, min.isr {isr.min_isr}, {isr.truncation} truncation, no power failure, "
        f"{isr.client_values} client values, {isr.max_crashes} crashes, {isr.max_elections} election"
    )
    assert isr.unflushed_loss is False and isr_defaults in text
    assert f"number of voters, 1 to {MAX_NODES}\n" in text
    assert f"number of observers, 0 to {MAX_NODES}\n" in text
    assert f"ISR system: replicas of the partition, 1 to {MAX_NODES}\n" in text
    assert f"for at most {MAX_SYMMETRIC_NODES} nodes, voters and observers together" in text
    assert f"worker processes, 1 to {MAX_WORKERS} (default: one per core, at most {MAX_WORKERS})" in text
