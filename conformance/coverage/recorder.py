"""Rule coverage measured, not declared: which rule IDs each test's model calls actually cited.

A pytest plugin wraps the model's citing entry points (node steps, the admin client's
decision, the safety properties, the liveness goals a state misses; the ISR model's replica
steps, partition actions and safety properties) for the length of each test and records the
rule IDs they return.
`kraftcheck rules --coverage` runs the rule tests with it and prints the result.
"""

import json
from collections import defaultdict
from pathlib import Path

import pytest

from model import describe, liveness, node, properties
from model.isr import cluster as isr_cluster
from model.isr import properties as isr_properties
from model.isr import replica as isr_replica


class RuleRecorder:
    """Collects {test id: rule IDs cited while it ran}."""

    def __init__(self, report_path: Path | None) -> None:
        self.report_path = report_path
        self.cited: dict[str, set[str]] = defaultdict(set)
        self.current: str | None = None

    def _note(self, rules) -> None:
        if self.current is not None:
            self.cited[self.current].update(rules)

    def install(self) -> None:
        """Wrap the citing functions; modules call them through their module, so all calls are seen."""
        for owner, name in ((node, "step"), (describe, "admin_next_step"), (isr_replica, "step"), (isr_cluster.Partition, "apply")):
            self._wrap(owner, name, lambda result: result.rules)
        for owner in (properties, isr_properties):
            self._wrap(owner, "violations", lambda found: (v.rule for v in found))
        self._wrap(liveness, "unmet", lambda missed: missed)

    def _wrap(self, owner, name: str, rules_of) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            self._note(rules_of(result))
            return result

        setattr(owner, name, wrapper)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        self.current = item.nodeid
        try:
            yield
        finally:
            self.current = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when == "call" and not report.passed:
            self.cited.pop(item.nodeid, None)  # a failing test proves nothing

    def pytest_sessionfinish(self, session) -> None:
        if self.report_path is not None:
            data = {test: sorted(rules) for test, rules in sorted(self.cited.items())}
            self.report_path.write_text(json.dumps(data, indent=1))


def pytest_addoption(parser) -> None:
    parser.addoption("--rule-coverage", metavar="FILE", help="write the rule IDs each passing test cited to FILE (JSON)")


def pytest_configure(config) -> None:
    path = config.getoption("--rule-coverage")
    recorder = RuleRecorder(Path(path) if path else None)
    recorder.install()
    config.pluginmanager.register(recorder, "kraftcheck-rule-recorder")
