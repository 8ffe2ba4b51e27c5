"""Rule coverage measured from the rule tests: run them with the recording plugin, tabulate per rule."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

from spec.rules import Rule

RULE_TESTS = Path(__file__).resolve().parents[2] / "tests" / "rules"


class CoverageError(RuntimeError):
    """The rule tests could not be run to measure coverage."""


def measure_coverage(test_dir: Path = RULE_TESTS) -> dict[str, list[str]]:
    """Run the rule tests with the recording plugin; {rule id: passing tests that cited it}."""
    if not test_dir.is_dir():
        raise CoverageError(f"no rule tests at {test_dir} (coverage is measured from a source checkout)")
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "coverage.json"
        command = [sys.executable, "-m", "pytest", str(test_dir), "-q", "-p", "conformance.coverage.recorder", "--rule-coverage", str(report), "-p", "no:cacheprovider"]
        env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(command, capture_output=True, text=True, cwd=test_dir.parent.parent, env=env)
        if not report.exists():
            raise CoverageError(f"the rule tests did not run (pytest exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        cited: dict[str, list[str]] = json.loads(report.read_text())
    by_rule: dict[str, list[str]] = {}
    for test, rule_ids in cited.items():
        for rule_id in rule_ids:
            by_rule.setdefault(rule_id, []).append(test.split("::", 1)[-1] if "::" in test else test)
    return by_rule


def coverage_report(rules: tuple[Rule, ...], by_rule: dict[str, list[str]]) -> tuple[str, int]:
    """The per-rule table and the number of rules with at least one passing test."""
    rows = []
    for r in rules:
        tests = sorted(by_rule.get(r.id, []))
        shown = ", ".join(tests[:3]) + (f" (+{len(tests) - 3} more)" if len(tests) > 3 else "")
        rows.append((r.id, len(tests), shown or "NOT COVERED"))
    covered = sum(1 for r in rules if by_rule.get(r.id))
    return tabulate(rows, headers=("rule", "tests", "exercised by"), tablefmt="simple"), covered
