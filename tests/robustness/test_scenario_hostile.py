"""Hostile scenario files and counterexamples: a scenario is data, never a path. Its name is a
plain file name or refused; its numbers and epoch ranges are bounded at parse time with file,
line and column; `scenario record` writes nothing until every file is recorded, then writes
through symlinks and keeps modes; `traces show --as scenario` prints nothing that reads as
other statements. Never a traceback, never a file of the user's lost."""

import time
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.scenario import parser
from conformance.scenario.parser import ScenarioError, parse

HEADER = "cluster voters=[1, 2, 3]\nnode 2\n"
STEPS = 'step request from 3: VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=3)\n'


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root, with its contents."""
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def refused(capsys, argv: list[str], place: str) -> str:
    """The command ends with exit 2 and a one-line error that starts at `place`."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kraftcheck: {place}") and err.count("\n") == 1, err
    return err


# -- D9, D10: a scenario's name is a plain file name, or the scenario is refused -------------


@pytest.mark.parametrize(
    "name",
    ["../../x", "a/b", "", ".hidden", "/etc/x", "a\\u0000b", "\\ud800", "a" * 300, "..", "-rf", "a b"],
    ids=["parent", "subdirectory", "empty", "hidden", "absolute", "nul", "lone-surrogate", "300-characters", "dot-dot", "dash", "space"],
)
@pytest.mark.parametrize("command", ["compile", "run", "record"])
def test_a_name_that_is_not_a_plain_file_name_is_refused_and_nothing_is_written(tmp_path, capsys, name, command):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    scenario = work / "s.scenario"
    scenario.write_text(f'scenario "{name}"\n{HEADER}{STEPS}')
    before = tree(tmp_path)
    argv = ["scenario", command, str(scenario)] + (["--out", str(work / "out")] if command == "compile" else [])
    err = refused(capsys, argv, f"{scenario}:1:")
    assert "is not a plain file name; expected letters, digits" in err or "lone surrogate" in err
    assert tree(tmp_path) == before and not (work / "out").exists()


def test_a_name_from_the_file_name_is_checked_too(tmp_path, capsys):
    scenario = tmp_path / ".hidden.scenario"
    scenario.write_text(HEADER + STEPS)
    err = refused(capsys, ["scenario", "compile", str(scenario), "--out", str(tmp_path / "out")], f"{scenario}: the scenario's name \".hidden\"")
    assert 'give one with a scenario "NAME" statement' in err and not (tmp_path / "out").exists()


def test_the_longest_name_compiles(tmp_path, capsys):
    scenario = tmp_path / "long.scenario"
    scenario.write_text(f'scenario "{"n" * parser.NAME_LENGTH}"\n{HEADER}{STEPS}')
    assert main(["scenario", "record", str(scenario)]) == 0
    assert main(["scenario", "compile", str(scenario), "--out", str(tmp_path / "out")]) == 0
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["n" * parser.NAME_LENGTH + ".jsonl"]


# -- D11, D12, D13: numbers and epoch ranges bounded at parse time ----------------------------


@pytest.mark.parametrize(
    "initial, column, error",
    [
        ("log=e1[0..100000000]", 13, "epoch range e1[0..100000000] takes the file's logs beyond 100,000 records"),
        ("log=e1[0..60000] e1[60001..120000]", 26, "epoch range e1[60001..120000] takes the file's logs beyond 100,000 records"),
        ("log=e1[0..18446744073709551616]", 13, "the number 18446744073709551616 is out of range"),
        ("epoch=" + "1" * 5000, 15, "the number 1111111111111111111111111111111111111... is out of range"),
        ("epoch=18446744073709551616", 15, "the number 18446744073709551616 is out of range; expected -9223372036854775808 to 18446744073709551615"),
        ("epoch=-9223372036854775809", 15, "the number -9223372036854775809 is out of range"),
        ("log=e" + "9" * 5000 + "[0..0]{1}", 13, "the number 9999999999999999999999999999999999999... is out of range"),
    ],
    ids=["huge-range", "ranges-together", "range-beyond-64-bits", "5000-digits", "2**64", "below-2**63", "5000-digit-epoch"],
)
def test_numbers_and_ranges_beyond_the_bounds_are_refused_at_their_place(initial, column, error):
    started = time.monotonic()
    with pytest.raises(ScenarioError) as raised:
        parse(Path("bad.scenario"), f"{HEADER}initial {initial}\n{STEPS}")
    assert str(raised.value).startswith(f"bad.scenario:3:{column}: {error}"), str(raised.value)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("command", ["run", "record", "compile"])
def test_a_5000_digit_number_ends_every_command_with_its_place(tmp_path, capsys, command):
    scenario = tmp_path / "big.scenario"
    scenario.write_text(HEADER + "step append " + "7" * 5000 + "\n")
    argv = ["scenario", command, str(scenario)] + (["--out", str(tmp_path / "out")] if command == "compile" else [])
    refused(capsys, argv, f"{scenario}:3:13: the number 7777")
    assert scenario.read_text().endswith("7" * 5000 + "\n") and not (tmp_path / "out").exists()


def test_the_64_bit_limits_themselves_parse():
    text = f"{HEADER}step append 18446744073709551615\nstep append -9223372036854775808\n"
    assert [step.input.value for step in parse(Path("edge.scenario"), text).trace.steps] == [2**64 - 1, -(2**63)]


@pytest.mark.parametrize(
    "text",
    [
        "cluster voters=[1, 2, 3]\nnode 2\ninitial epoch=18446744073709551615\nstep restart\nstep timer election_timeout\n",
        "cluster voters=[1, 2, 3]\ninitial node 2 epoch=18446744073709551615\ndo restart 2\ndo timer 2 election_timeout\n",
        "cluster voters=[1]\ninitial node 1 epoch=18446744073709551615\ndo restart 1\ndo timer 1 election_timeout\n",
    ],
    ids=["node", "cluster", "single-voter"],
)
def test_a_number_the_model_takes_beyond_64_bits_is_refused_and_nothing_is_written(tmp_path, capsys, text):
    scenario = tmp_path / "limit.scenario"
    scenario.write_text(text)
    for argv in (["scenario", "record", str(scenario)], ["scenario", "compile", str(scenario), "--out", str(tmp_path / "out")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"kraftcheck: {scenario}") and "64 bits" in err, err
    assert scenario.read_text() == text and not (tmp_path / "out").exists()


def test_a_trace_compiled_at_the_limit_reads_back(tmp_path, capsys):
    scenario = tmp_path / "edge.scenario"
    scenario.write_text(f"{HEADER}step append 18446744073709551615\n")
    assert main(["scenario", "record", str(scenario)]) == 0
    assert main(["scenario", "compile", str(scenario), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert main(["traces", "show", str(tmp_path / "out" / "edge.jsonl")]) == 0
