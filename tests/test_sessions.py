"""Protocol 2: one implementation process serves trace after trace, with a reset between them
that leaves nothing behind; several adapters replay at once with the same reports."""

import json
import re
import shlex
import sys
from pathlib import Path

import msgspec

from adapters.registry import adapter_factory
from conformance import cli
from conformance.certify.replay import replay_file, trace_files
from conformance.corpus.generate import DEFAULT_CORPUS

SHIPPED = trace_files(DEFAULT_CORPUS)
EXAMPLE = f"subprocess:{shlex.quote(sys.executable)} -m adapters.example_node"


def counting_node(tmp_path: Path, protocol: int | None = 2, fail_on: str = "") -> tuple[str, Path]:
    """The example node, noting each process start in a file; with `protocol` None its start reply
    names no protocol (an implementation written before protocol 2); it refuses `fail_on` commands."""
    starts = tmp_path / "starts"
    script = tmp_path / "counting_node.py"
    script.write_text(
        "import os\nfrom adapters import example_node\n"
        f"open({str(starts)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "started, handle = example_node.Node.started, example_node.Node.handle\n"
        f"def versioned(node):\n    reply = started(node)\n    reply.pop('protocol')\n    return reply if {protocol!r} is None else dict(reply, protocol={protocol!r})\n"
        f"def refusing(node, line):\n    if {fail_on!r} and {fail_on!r}.encode() in line:\n        return {{'ok': False, 'error': 'refused on purpose'}}\n    return handle(node, line)\n"
        "example_node.Node.started, example_node.Node.handle = versioned, refusing\nexample_node.main()\n"
    )
    return f"subprocess:{shlex.quote(sys.executable)} {shlex.quote(str(script))}", starts


def without_timing(result) -> dict:
    fields = msgspec.to_builtins(result)
    fields.pop("seconds")
    return fields


def test_one_process_serves_every_trace_and_the_reset_leaves_nothing_behind(tmp_path):
    """Each trace replayed after the others in one process gives exactly what it gives in a fresh process."""
    node, starts = counting_node(tmp_path)
    sample = SHIPPED[::40]
    with adapter_factory(node) as shared:
        in_one_process = [replay_file(shared, path) for path in sample]
    assert len(starts.read_text().split()) == 1
    for path, result in zip(sample, in_one_process):
        with adapter_factory(EXAMPLE) as fresh:
            alone = replay_file(fresh, path)
        assert without_timing(result) == without_timing(alone), path.name
    assert all(r.verdict == "conforms" for r in in_one_process)


def test_the_same_trace_after_a_different_one_gives_identical_results(tmp_path):
    node, _ = counting_node(tmp_path)
    first, second = SHIPPED[0], next(p for p in SHIPPED if "walk" in p.name)
    with adapter_factory(node) as shared:
        before = replay_file(shared, first)
        replay_file(shared, second)
        after = replay_file(shared, first)
    assert without_timing(before) == without_timing(after)


def test_an_implementation_without_protocol_2_gets_a_process_per_trace(tmp_path):
    node, starts = counting_node(tmp_path, protocol=None)
    sample = SHIPPED[::100]
    with adapter_factory(node) as make:
        assert all(replay_file(make, path).verdict == "conforms" for path in sample)
    assert len(starts.read_text().split()) == len(sample)


def test_a_process_that_failed_serves_no_other_trace(tmp_path):
    """An error leaves the process in a state nobody knows: it is stopped, the next trace gets a new one."""
    node, starts = counting_node(tmp_path, fail_on='"command":"timer"')
    with_timer = [p for p in SHIPPED if '"type":"timer"' in p.read_text()][:2]
    without = [p for p in SHIPPED if '"type":"timer"' not in p.read_text()][:2]
    with adapter_factory(node) as make:
        verdicts = [replay_file(make, path).verdict for path in [without[0], with_timer[0], without[1], with_timer[1]]]
    assert verdicts == ["conforms", "error", "conforms", "error"]
    # The first process serves a trace and then errs; a second one serves the third trace and errs on the fourth.
    assert len(starts.read_text().split()) == 2


def test_reports_are_the_same_for_any_number_of_jobs(tmp_path, capsys):
    timings = {"report.md": r" in [0-9.]+ s;", "report.html": r"<tr><td>seconds</td><td>[0-9.]+</td></tr>", "junit.xml": r' time="[^"]*"'}
    published = {}
    out = tmp_path / "out"  # the same place each time: reports name their own files
    for jobs in (1, 3):
        assert cli.main(["certify", "--adapter", "mutant:hw-any-epoch", "--jobs", str(jobs), "--out", str(out), "--json"]) == 1
        capsys.readouterr()
        stored = json.loads((out / "report.json").read_text())
        stored.pop("seconds")
        for result in stored["results"]:
            result.pop("seconds")
        published[jobs] = [stored] + [re.sub(timing, "", (out / name).read_text()) for name, timing in timings.items()]
        published[jobs].append(sorted((p.name, p.read_bytes()) for p in (out / "divergences").iterdir()))
    assert published[1] == published[3]


def test_what_an_implementation_says_it_is_is_in_the_report(tmp_path, capsys):
    """The optional `implementation` of the reply to start reaches the reports, made printable."""
    script = tmp_path / "described_node.py"
    script.write_text(
        "from adapters import example_node\n"
        "started = example_node.Node.started\n"
        "example_node.Node.started = lambda node: dict(started(node), implementation='Example 1.0\\x1b[31m; RPC versions: Vote v0')\n"
        "example_node.main()\n"
    )
    node = f"subprocess:{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    code = cli.main(["certify", "--adapter", node, "--corpus", str(SHIPPED[0]), "--out", str(tmp_path / "out"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["implementation"] == "Example 1.0\\x1b[31m; RPC versions: Vote v0"
    assert "Implementation: Example 1.0\\\\x1b\\[31m; RPC versions: Vote v0" in (tmp_path / "out" / "report.md").read_text()
