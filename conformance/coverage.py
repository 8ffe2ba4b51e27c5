"""Rule coverage measured, not declared: which rule IDs each test's model calls actually cited.

A pytest plugin wraps the model's citing entry points (node steps, the admin client's
decision, the safety properties) for the length of each test and records the rule IDs they
return. `kraftcheck rules --coverage` runs the rule tests with it and prints the result.
"""

import json
from collections import defaultdict
from pathlib import Path

import pytest

from model import describe, node, properties


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
        original_step = node.step
        original_admin = describe.admin_next_step
        original_violations = properties.violations

        def step(*args, **kwargs):
            transition = original_step(*args, **kwargs)
            self._note(transition.rules)
            return transition

        def admin_next_step(*args, **kwargs):
            decision = original_admin(*args, **kwargs)
            self._note(decision.rules)
            return decision

        def violations(*args, **kwargs):
            found = original_violations(*args, **kwargs)
            self._note(v.rule for v in found)
            return found

        node.step = step
        describe.admin_next_step = admin_next_step
        properties.violations = violations

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
