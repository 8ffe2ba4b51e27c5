"""The pytest plugin, run as an implementer would run it: `pytest --kraftcheck-adapter=...` in a subprocess."""

from pathlib import Path

import pytest

from adapters.registry import adapter_factory
from conformance.certify.replay import replay_file, trace_files
from conformance.corpus.generate import GenerateOptions, generate, write_corpus
from conformance.explore.configs import resolve

pytest_plugins = ["pytester"]

MUTANT = "describe-hw-last-offset"  # a seeded bug the small corpus below catches
SUBPROCESS_TIMEOUT = 60  # seconds; a run takes about one


@pytest.fixture(scope="module")
def small_corpus() -> tuple:
    return generate([("smoke", resolve("smoke", {}))], GenerateOptions(max_states=2000, walks=1, walk_steps=50))


@pytest.fixture
def corpus_dir(tmp_path: Path, small_corpus: tuple) -> Path:
    out = tmp_path / "corpus"
    write_corpus(out, *small_corpus)
    return out


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*args, timeout=SUBPROCESS_TIMEOUT)


def test_reference_passes_one_item_per_trace(pytester: pytest.Pytester, corpus_dir: Path) -> None:
    result = run(pytester, "--kraftcheck-adapter=reference", f"--kraftcheck-corpus={corpus_dir}")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=len(trace_files(corpus_dir)))


def test_items_are_named_by_trace_file(pytester: pytest.Pytester, corpus_dir: Path) -> None:
    chosen = trace_files(corpus_dir)[0].name
    result = run(pytester, "--kraftcheck-adapter=reference", f"--kraftcheck-corpus={corpus_dir}", "-k", chosen, "-v")
    result.assert_outcomes(passed=1, deselected=len(trace_files(corpus_dir)) - 1)
    result.stdout.fnmatch_lines([f"*::{chosen} PASSED*"])


def test_mutant_failure_shows_the_divergence(pytester: pytest.Pytester, corpus_dir: Path) -> None:
    make_adapter = adapter_factory(f"mutant:{MUTANT}")
    failed = [r for r in (replay_file(make_adapter, path) for path in trace_files(corpus_dir)) if not r.passed]
    assert failed and all(r.divergence for r in failed), f"the small corpus no longer catches mutant:{MUTANT}"

    result = run(pytester, f"--kraftcheck-adapter=mutant:{MUTANT}", f"--kraftcheck-corpus={corpus_dir}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=len(failed), passed=len(trace_files(corpus_dir)) - len(failed))
    output = result.stdout.str()
    for trace in failed:
        divergence = trace.divergence
        assert f"trace:    {trace.trace}" in output
        assert f"step:     {divergence.step} of {trace.steps}" in output
        assert f"input:    {divergence.input}" in output
        assert f"field:    {divergence.field}" in output
        assert f"expected: {divergence.expected}" in output
        assert f"actual:   {divergence.actual}" in output
        assert f"rules:    {' '.join(divergence.rules)}" in output
    assert "Traceback" not in output and "pytest_plugin.py" not in output


def test_truncated_trace_fails_alone(pytester: pytest.Pytester, corpus_dir: Path) -> None:
    files = trace_files(corpus_dir)
    broken = files[len(files) // 2]
    data = broken.read_bytes()
    broken.write_bytes(data[:-10])  # the last line loses its end and its newline
    last_line = data.count(b"\n")
    result = run(pytester, "--kraftcheck-adapter=reference", f"--kraftcheck-corpus={corpus_dir}")
    result.assert_outcomes(failed=1, passed=len(files) - 1)
    result.stdout.fnmatch_lines([f"invalid trace: {broken}:{last_line}: the last line does not end in a newline*"])
    assert "Traceback" not in result.stdout.str()


def test_unknown_adapter_is_a_usage_error(pytester: pytest.Pytester, corpus_dir: Path) -> None:
    result = run(pytester, "--kraftcheck-adapter=no-such-adapter", f"--kraftcheck-corpus={corpus_dir}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: kraftcheck: unknown adapter 'no-such-adapter'*"])
    assert "Traceback" not in result.stderr.str()


def test_missing_corpus_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    missing = tmp_path / "no-corpus"
    result = run(pytester, "--kraftcheck-adapter=reference", f"--kraftcheck-corpus={missing}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: kraftcheck: {missing}: no such corpus directory*"])


def test_without_the_option_the_plugin_adds_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_own(): pass")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["plugins:*kraftcheck*"])  # loaded, and idle
