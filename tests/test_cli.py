"""The `kraftcheck` command line, run in-process: `rules` and `simulate`; `--version`, and the guide page every command's help names."""

import argparse
import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import pytest

from conformance.cli import build_parser, main, version

RULE_ROW = re.compile(r"^([A-Z][A-Z0-9]*(?:-[A-Z][A-Z0-9]*)*-[0-9]+[A-Z]?)\s")


def listed_rules(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := RULE_ROW.match(line))]


# rules ---------------------------------------------------------------------------------


def test_rules_prints_the_catalogue_and_its_size(capsys):
    assert main(["rules"]) == 0
    out, err = capsys.readouterr()
    lines = out.rstrip("\n").splitlines()
    assert lines[0].split()[:2] == ["rule", "title"]
    ids = listed_rules(out)
    assert "VOTE-REQ-2" in ids and "FETCH-REQ-3A" in ids and "SAFE-9" in ids
    assert len(ids) == len(set(ids))
    assert lines[-1] == f"{len(ids)} rules"
    assert err == ""


def test_rules_group_shows_only_that_group(capsys):
    assert main(["rules", "--group", "vote-req"]) == 0
    out, _ = capsys.readouterr()
    ids = listed_rules(out)
    assert "VOTE-REQ-2" in ids
    assert all(re.fullmatch(r"VOTE-REQ-[0-9]+[A-Z]?", i) for i in ids), ids
    assert out.rstrip("\n").splitlines()[-1] == f"{len(ids)} rules"

    assert main(["rules"]) == 0
    everything = listed_rules(capsys.readouterr().out)
    assert ids == [i for i in everything if re.fullmatch(r"VOTE-REQ-[0-9]+[A-Z]?", i)]


def test_rules_unknown_group_exits_2_and_lists_the_groups(capsys):
    assert main(["rules", "--group", "nosuch"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("kraftcheck: no rules in group 'nosuch'; groups: ")
    groups = err.strip().split("groups: ", 1)[1].split(", ")
    assert "VOTE-REQ" in groups and "SAFE" in groups and groups == sorted(groups)
    assert "Traceback" not in err


# simulate ------------------------------------------------------------------------------


def test_simulate_reports_that_every_property_held(capsys):
    assert main(["simulate", "--runs", "20", "--steps", "200"]) == 0
    out, err = capsys.readouterr()
    rows = dict(line.split(None, 1) for line in out.splitlines() if line and not line.startswith("-") and len(line.split(None, 1)) == 2 and line.split()[0] in {"profile", "voters", "observers", "runs", "steps"})
    assert rows["profile"].strip() == "kip595"
    assert rows["voters"].strip() == "3" and rows["observers"].strip() == "1" and rows["runs"].strip() == "20"
    assert 0 < int(rows["steps"]) <= 20 * 200
    assert out.rstrip("\n").endswith("all safety properties held after every step")
    assert "Traceback" not in err


def test_simulate_json_prints_one_summary_object(capsys):
    assert main(["simulate", "--json", "--runs", "5"]) == 0
    out, _ = capsys.readouterr()
    assert len(out.strip().splitlines()) == 1
    summary = json.loads(out)
    assert set(summary) == {"profile", "voters", "observers", "engine", "runs", "steps", "violations"}
    assert (summary["profile"], summary["voters"], summary["observers"], summary["engine"], summary["runs"]) == ("kip595", 3, 1, "in-process", 5)
    assert 0 < summary["steps"] <= 5 * 400
    assert summary["violations"] == []


def test_simulate_json_with_a_violation(capsys):
    """The JSON summary names each violated rule with the seed and step that broke it."""
    assert main(["simulate", "--json", "--profile", "kip595-literal-diverging", "--runs", "400", "--duplication", "--resign"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["profile"] == "kip595-literal-diverging"
    assert summary["violations"]
    seeds = {v["seed"] for v in summary["violations"]}
    assert len(seeds) == 1 and summary["runs"] == seeds.pop() + 1  # it stops at the first violating seed
    assert {v["rule"] for v in summary["violations"]} <= {"SAFE-6", "SAFE-9"}
    assert all(set(v) == {"rule", "detail", "seed", "step"} for v in summary["violations"])


def test_simulate_keep_going_runs_every_seed_and_keeps_each_propertys_shortest_run(capsys):
    """Seeds 300-399 of the literal reading: every seed runs; per property, the violating run with
    the fewest steps (checked here against each seed's own run)."""
    from conformance.commands.simulate import cluster_config
    from conformance.explore.simulate import run
    from model.cluster import Bounds, Cluster

    argv = ["simulate", "--json", "--profile", "kip595-literal-diverging", "--seed", "300", "--runs", "100", "--duplication", "--resign"]
    assert main([*argv, "--keep-going"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == 100
    cluster = Cluster(cluster_config(build_parser().parse_args(argv)), Bounds(client_values=3, max_crashes=2, loss=True, duplication=True, resign=True))
    results = [run(cluster, seed, 400) for seed in range(300, 400)]
    assert summary["steps"] == sum(r.steps for r in results)
    expected = {}
    for r in results:
        for v in r.violations:
            if v.rule not in expected or (r.steps, r.seed) < expected[v.rule][:2]:
                expected[v.rule] = (r.steps, r.seed, v.detail)
    assert expected, "no seed in 300-399 violates a property: choose another range"
    assert {v["rule"]: (v["step"], v["seed"], v["detail"]) for v in summary["violations"]} == expected


def test_simulate_literal_diverging_epoch_shows_the_violation_and_its_steps(capsys):
    """FETCH-REQ-3A read literally (a follower refusing to truncate below its own high watermark, FETCH-RESP-2, makes the violation rarer): the run stops at the violating seed, names the rule and shows the steps."""
    code = main(["simulate", "--profile", "kip595-literal-diverging", "--runs", "400", "--duplication", "--resign"])
    out, err = capsys.readouterr()
    assert code == 1
    found = re.search(r"^seed (\d+) violates ((?:SAFE-\d)(?:, SAFE-\d)*) after (\d+) steps:$", out, re.MULTILINE)
    assert found, out
    seed, rules, steps = int(found.group(1)), found.group(2).split(", "), int(found.group(3))
    assert set(rules) <= {"SAFE-6", "SAFE-9"}
    for rule in rules:
        assert re.search(rf"^  {rule}: \S", out, re.MULTILINE)
    assert re.search(rf"^runs\s+{seed + 1}$", out, re.MULTILINE)
    header = re.search(r"^\s*step\s+action\s+what changed$", out, re.MULTILINE)
    assert header and header.start() > found.end(), out
    table = out[header.end():]
    numbers = [int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s{2}", table, re.MULTILINE)]
    assert numbers == list(range(steps - 24, steps + 1))  # the last 25 steps (--show default)
    assert "all safety properties held" not in out
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--voters", "0"], "kraftcheck: invalid configuration: --voters must be at least 1, got 0"),
        (["simulate", "--observers", "-1"], "kraftcheck: invalid configuration: --observers must not be negative, got -1"),
        (["simulate", "--profile", "nope"], "kraftcheck: invalid configuration: unknown profile 'nope'; known profiles: "),
    ],
)
def test_simulate_rejects_bad_configuration_without_a_traceback(capsys, argv, message):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(message)
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_unknown_option_value_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["simulate", "--runs", "many"])
    assert exited.value.code == 2
    assert "invalid int value: 'many'" in capsys.readouterr().err


# --version and the guide pages ---------------------------------------------------------


def test_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"kraftcheck {importlib.metadata.version('kraftcheck')}\n"


def test_version_of_a_checkout_that_is_not_installed_is_its_pyproject_tomls(monkeypatch):
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    assert version() == tomllib.loads(pyproject.read_text())["project"]["version"]


def commands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name, sub in action.choices.items()}


def every_command() -> list[list[str]]:
    """Each command and each subcommand, as argv: ["certify"], ["traces", "generate"], ..."""
    found = []
    for name, parser in commands_of(build_parser()).items():
        found += [[name], *([name, sub] for sub in commands_of(parser))]
    return found


@pytest.mark.parametrize("argv", every_command(), ids=" ".join)
def test_every_commands_help_ends_with_its_guide_page(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the line unwrapped
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    page = re.fullmatch(r"guide: docs/guide/([a-z-]+)\.md \(in the repository and the sdist\)", last)
    assert page and page.group(1) in ("model-checking", "certifying", "scenarios", "kafka"), last


@pytest.mark.parametrize(
    ("argv", "page"),
    [(["check"], "model-checking"), (["traces", "generate"], "model-checking"), (["certify"], "certifying"), (["mutants"], "certifying"), (["adapters", "build"], "certifying"), (["scenario", "run"], "scenarios")],
)
def test_a_command_names_the_page_that_explains_it(argv, page, capsys):
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    assert f"docs/guide/{page}.md" in capsys.readouterr().out
