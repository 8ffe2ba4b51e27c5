"""Protocol 2: one implementation process serves trace after trace, with a reset between them
that leaves nothing behind; several adapters replay at once with the same reports."""

import json
import re
import shlex
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

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


def leaving_output(tmp_path: Path, extra: bytes, delay: float | None) -> tuple[str, Path]:
    """The example node, noting each process start in a file, that writes `extra` after its reply
    to the first reset of all its processes: in the same write as the reply (`delay` None), or
    `delay` seconds after it."""
    starts, left = tmp_path / "starts", tmp_path / "left"
    script = tmp_path / "leaving_node.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys, time
            import msgspec
            from adapters import example_node

            open({str(starts)!r}, "a").write(f"{{os.getpid()}}\\n")
            node, out = example_node.Node(), sys.stdout.buffer
            for line in sys.stdin.buffer:
                reply = msgspec.json.encode(node.handle(line)) + b"\\n"
                if b'"reset"' in line and not os.path.exists({str(left)!r}):
                    open({str(left)!r}, "w").close()
                    if {delay!r} is None:
                        reply += {extra!r}
                    else:
                        out.write(reply)
                        out.flush()
                        time.sleep({delay!r})
                        reply = {extra!r}
                out.write(reply)
                out.flush()
            """
        )
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


def test_output_after_the_reply_to_reset_fails_that_trace_not_the_next(tmp_path):
    """A line written with the reply to reset is the trace's that ends: it fails, at its reset, and
    the next trace gets a new process, whose replies are its own."""
    node, starts = leaving_output(tmp_path, b"a line for nobody\n", delay=None)
    with adapter_factory(node) as make:
        first, second = (replay_file(make, path) for path in SHIPPED[:2])
    assert first.verdict == "error" and second.verdict == "conforms"
    assert first.failure.startswith("after the last step: after its reply to 'reset' the process wrote more: 'a line for nobody\\n'")
    assert len(starts.read_text().split()) == 2


def test_a_refused_reset_fails_the_trace_it_ends(tmp_path):
    node, starts = counting_node(tmp_path, fail_on='"command":"reset"')
    with adapter_factory(node) as make:
        results = [replay_file(make, path) for path in SHIPPED[:2]]
    assert [r.verdict for r in results] == ["error", "error"]
    assert all(r.failure == "after the last step: the implementation refused 'reset': refused on purpose" for r in results)
    assert len(starts.read_text().split()) == 2


@pytest.mark.parametrize("extra", [b"a line for nobody\n", b'{"ok":true}\n'], ids=["a log line", "a second reply"])
def test_output_that_comes_late_after_a_reset_is_not_taken_for_the_next_traces(tmp_path, extra):
    """A line that comes after the reset's check is read as the reply to the next trace's start,
    which is no valid start reply: that trace starts again in a new process, and conforms."""
    node, starts = leaving_output(tmp_path, extra, delay=0.3)
    with adapter_factory(node) as make:
        verdicts = [replay_file(make, path).verdict for path in SHIPPED[:3]]
    assert verdicts == ["conforms"] * 3
    # The first process serves the first trace, fails the second's start; a new one serves the second and third.
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
