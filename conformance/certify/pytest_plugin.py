"""pytest plugin: the conformance corpus as test items, so an implementation can run it in its own CI.

`pytest --kraftcheck-adapter=ADAPTER [--kraftcheck-corpus=DIR] [--kraftcheck-step-timeout=S]`
adds one item per trace file, named by the file (so `-k` selects traces), that replays the trace
through a fresh adapter and fails with the first divergence or the adapter's failure; a trace
needing a capability the adapter declares it lacks is skipped, as not applicable. Without --kraftcheck-adapter the
plugin does nothing, and kraftcheck itself is imported only when it is given.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest

if TYPE_CHECKING:
    from adapters.contract import Adapter
    from conformance.certify.replay import TraceResult


class _Run(NamedTuple):
    """What the options resolve to: checked once, before collection, so a bad option is a usage error."""

    make_adapter: "Callable[[], Adapter]"
    corpus: Path
    files: list[Path]


_RUN = pytest.StashKey[_Run]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kraftcheck", "kraftcheck conformance traces (KIP-595)")
    group.addoption(
        "--kraftcheck-adapter",
        metavar="ADAPTER",
        help="replay every trace of the corpus through this adapter, one test item per trace file: "
        "reference, mutant:NAME, subprocess:COMMAND or kafka:VERSION (see `kraftcheck adapters list`)",
    )
    group.addoption(
        "--kraftcheck-corpus",
        metavar="DIR",
        help="the trace corpus directory (default: the corpus shipped with kraftcheck, traces/)",
    )
    group.addoption(
        "--kraftcheck-step-timeout",
        metavar="S",
        type=float,
        help="seconds a subprocess adapter may take per reply (default 10)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the options up front: an unknown adapter or a missing corpus stops pytest before it collects."""
    adapter = config.getoption("kraftcheck_adapter")
    if adapter is None:
        return
    from adapters.registry import DEFAULT_STEP_TIMEOUT, AdapterOptionError, adapter_factory
    from conformance.certify.replay import trace_files
    from conformance.corpus.generate import DEFAULT_CORPUS
    from spec.trace import TraceError

    timeout = config.getoption("kraftcheck_step_timeout")
    option = config.getoption("kraftcheck_corpus")
    corpus = (config.invocation_params.dir / option).resolve() if option else DEFAULT_CORPUS
    try:
        make_adapter = adapter_factory(adapter, DEFAULT_STEP_TIMEOUT if timeout is None else timeout)
        files = trace_files(corpus)
    except AdapterOptionError as error:
        raise pytest.UsageError(f"kraftcheck: {error}") from None
    except TraceError as error:
        raise pytest.UsageError(f"kraftcheck: {error}; --kraftcheck-corpus=DIR names the corpus") from None
    config.stash[_RUN] = _Run(make_adapter, corpus, files)
    config.add_cleanup(make_adapter.close)  # idle implementation processes end with the session


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the trace items before the other plugins (-k, -m, --lf) select among the items."""
    run = config.stash.get(_RUN, None)
    if run is None:
        return
    try:
        node_path = run.corpus.relative_to(config.rootpath).as_posix()
    except ValueError:
        node_path = run.corpus.as_posix()
    corpus = Corpus.from_parent(session, name=run.corpus.name, path=run.corpus, nodeid=node_path, run=run)
    items.extend(session.genitems(corpus))


class Corpus(pytest.Collector):
    """The corpus directory (or single trace file): one TraceItem per trace file."""

    def __init__(self, *, run: _Run, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run = run

    def collect(self) -> list[pytest.Item]:
        root = self.run.corpus if self.run.corpus.is_dir() else self.run.corpus.parent
        return [
            TraceItem.from_parent(self, name=path.relative_to(root).as_posix(), path=path, make_adapter=self.run.make_adapter)
            for path in self.run.files
        ]


class TraceFailed(Exception):
    """A trace the adapter did not conform to; carries the replay result for the report."""

    def __init__(self, result: "TraceResult") -> None:
        super().__init__(result.trace)
        self.result = result


class TraceItem(pytest.Item):
    """One trace file replayed through a fresh adapter."""

    def __init__(self, *, make_adapter: "Callable[[], Adapter]", **kwargs) -> None:
        super().__init__(**kwargs)
        self.make_adapter = make_adapter

    def runtest(self) -> None:
        from conformance.certify.replay import NOT_APPLICABLE, replay_file
        from conformance.certify.reports.wording import needs_text

        result = replay_file(self.make_adapter, self.path)
        if result.verdict == NOT_APPLICABLE:
            pytest.skip(needs_text(result))
        if not result.passed:
            raise TraceFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        """The divergence or the adapter's failure, without a Python traceback, which would be the plugin's."""
        if isinstance(excinfo.value, TraceFailed):
            return failure_text(excinfo.value.result)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"kraftcheck trace {self.name}"


def failure_text(result: "TraceResult") -> str:
    """A failed trace as the report shows it: a headline (the summary line), then the details."""
    from conformance.certify.reports.wording import allowed_text

    divergence = result.divergence
    if divergence is None:
        lines = [str(result.failure), f"verdict:  {result.verdict}", f"trace:    {result.trace}"]
    else:
        lines = [
            f"step {divergence.step}: {divergence.field}: expected {divergence.expected}, actual {divergence.actual}",
            f"verdict:  {result.verdict}",
            f"trace:    {result.trace}",
            f"step:     {divergence.step} of {result.steps}",
            f"input:    {divergence.input}",
            f"field:    {divergence.field}",
            f"expected: {divergence.expected}",
            f"actual:   {divergence.actual}",
        ]
        if divergence.allowed:
            lines.append(allowed_text(divergence))
        if divergence.expected_json:
            lines += [f"differing: {', '.join(divergence.differing)}", "expected, as JSON:", divergence.expected_json, "actual, as JSON:", divergence.actual_json]
    if result.rules_failed:
        lines.append(f"rules:    {' '.join(result.rules_failed)}")
    return "\n".join(lines)
