"""Hostile scenario files and counterexamples: a scenario is data, never a path. Its name is a
plain file name or refused; its numbers and epoch ranges are bounded at parse time with file,
line and column; `scenario record` writes nothing until every file is recorded, then writes
through symlinks and keeps modes; `traces show --as scenario` prints nothing that reads as
other statements. Never a traceback, never a file of the user's lost."""

import errno
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.scenario import parser
from conformance.scenario.parser import ScenarioError, parse

ROOT = Path(__file__).resolve().parents[2]
HEADER = "cluster voters=[1, 2, 3]\nnode 2\n"
STEPS = 'step request from 3: VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=3)\n'
LONG_INPUTS = STEPS + "".join(f"step append {value}\n" for value in range(20))  # records to a much longer file


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


# -- D14, D15: record writes nothing until every file is recorded; through symlinks; modes ----


def scenarios(directory: Path) -> tuple[Path, Path]:
    """Two files of inputs only, the second recorded much longer than the first."""
    directory.mkdir(exist_ok=True)
    short, long = directory / "short.scenario", directory / "long.scenario"
    short.write_text(HEADER + STEPS)
    long.write_text(HEADER + LONG_INPUTS)
    return short, long


def test_record_on_a_full_disk_replaces_no_file(tmp_path):
    short, long = scenarios(tmp_path)
    recorded = {}
    for path in (short, long):
        copy = tmp_path / "measure" / path.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(path.read_bytes())
        assert main(["scenario", "record", str(copy)]) == 0
        recorded[path] = copy.stat().st_size
    limit = (recorded[short] + recorded[long]) // 2  # the first fits, the second does not: a disk that fills up
    before = {path: path.read_bytes() for path in (short, long)}

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "scenario", "record", str(short), str(long)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, preexec_fn=limited,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == f"kraftcheck: {long}: cannot write: File too large; no file was replaced\n"
    assert {path: path.read_bytes() for path in (short, long)} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["long.scenario", "measure", "short.scenario"]


def test_record_on_a_read_only_directory_replaces_no_file(tmp_path, capsys, monkeypatch):
    short, _ = scenarios(tmp_path / "writable")
    _, locked = scenarios(tmp_path / "read-only")
    before = tree(tmp_path)
    mkstemp, open_file = tempfile.mkstemp, os.open

    def refusing(path: object) -> None:  # as on a read-only mount (chmod does not stop root)
        if Path(path) == locked.parent:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", lambda *args, **kwargs: refusing(kwargs["dir"]) or mkstemp(*args, **kwargs))
    monkeypatch.setattr(os, "open", lambda path, *args, **kwargs: refusing(path) or open_file(path, *args, **kwargs))
    refused(capsys, ["scenario", "record", str(short), str(locked)], f"{locked}: cannot write: Read-only file system; no file was replaced")
    assert tree(tmp_path) == before


def test_record_writes_through_a_symlink_and_keeps_the_mode(tmp_path, capsys):
    target, _ = scenarios(tmp_path / "real")
    target.chmod(0o640)
    link = tmp_path / "link.scenario"
    link.symlink_to(Path("real") / target.name)
    assert main(["scenario", "record", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(Path("real") / target.name)
    assert "expect response VoteResponse(" in target.read_text()
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(path.name for path in target.parent.iterdir()) == ["long.scenario", "short.scenario"]


def test_a_record_killed_before_it_replaces_leaves_nothing_beside_the_scenario(tmp_path):
    short, _ = scenarios(tmp_path)
    before = tree(tmp_path)
    killed = subprocess.run(
        [sys.executable, "-c", f"import os; from pathlib import Path; from conformance.outputs import NewFile; NewFile(Path({str(short)!r}), b'half a scenario'); os.kill(os.getpid(), 9)"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert killed.returncode == -9, killed.stderr
    assert tree(tmp_path) == before


def test_record_removes_what_a_killed_record_left_and_keeps_a_running_ones(tmp_path, capsys):
    short, _ = scenarios(tmp_path)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    abandoned = tmp_path / f".kraftcheck-replacing-{gone.stdout.strip()}-x1y2z3"  # as a SIGKILL leaves it
    running = tmp_path / f".kraftcheck-replacing-{os.getpid()}-a1b2c3"
    for leftover in (abandoned, running):
        leftover.write_text("half a scenario")
    assert main(["scenario", "record", str(short)]) == 0
    assert not abandoned.exists() and running.exists()


# -- D16: traces show --as scenario of a hostile counterexample --------------------------------


def counterexample(tmp_path: Path) -> Path:
    assert main(["check", "--config", "faults", "--profile", "faulty-forget-vote", "--workers", "1", "--out", str(tmp_path / "check")]) == 1
    return tmp_path / "check" / "counterexample-faults-SAFE-2.jsonl"


def with_header(path: Path, change) -> Path:
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    change(header)
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return path


@pytest.mark.parametrize(
    "change, error",
    [
        (lambda header: header.update(bounds="faults"), "not a readable counterexample: AttributeError"),
        (lambda header: header.update(property="SAFE-2\nstep crash"), "a counterexample of an unknown property 'SAFE-2\\\\nstep crash'"),
        (lambda header: header.update(property=["SAFE-2"]), "not a readable counterexample: TypeError"),
        (lambda header: header.pop("detail"), "not a readable counterexample: KeyError"),
    ],
    ids=["bounds-a-string", "property-a-statement", "property-a-list", "no-detail"],
)
def test_a_damaged_counterexample_is_an_error_naming_it(tmp_path, capsys, change, error):
    saved = with_header(counterexample(tmp_path), change)
    capsys.readouterr()
    refused(capsys, ["traces", "show", str(saved), "--as", "scenario"], f"{saved}: {error}")


def test_a_deeply_nested_header_is_an_error_naming_the_file(tmp_path, capsys):
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"kind": "kraftcheck-counterexample", "bounds": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    refused(capsys, ["traces", "show", str(deep), "--as", "scenario"], f"{deep}:1: invalid JSON in the header: nested too deeply")


def test_a_detail_with_newlines_prints_as_a_comment_that_parses_back(tmp_path, capsys):
    saved = with_header(counterexample(tmp_path), lambda header: header.update(detail="two votes\nstep crash\r\n\x1b[2Jcleared\u2028"))
    capsys.readouterr()
    assert main(["traces", "show", str(saved), "--as", "scenario"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# SAFE-2 violated: two votes\\nstep crash\\r\\n\\x1b[2Jcleared\\u2028\n# found by kraftcheck check")
    again = parse(Path("printed.scenario"), printed)
    assert again.comments[0][0] == printed.splitlines()[0] and len(again.steps) == printed.count("\ndo ")


def test_a_trace_whose_rules_hold_statements_does_not_print_them(tmp_path, capsys):
    shipped = next((ROOT / "traces").glob("corpus-cell-*.jsonl"))
    lines = shipped.read_text().splitlines()
    step = json.loads(lines[1])
    step["rules"] = ["VOTE-REQ-4\nstep crash"]
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text("\n".join([lines[0], json.dumps(step), *lines[2:]]) + "\n")
    refused(capsys, ["traces", "show", str(hostile), "--as", "scenario"], f"{hostile}: 'VOTE-REQ-4\\nstep crash' cannot be printed in a scenario: expected a rule ID")
