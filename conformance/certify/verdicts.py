"""What certification concludes: a verdict per rule, the run's totals, and the corpus's coverage.

The data every report renders; computed from the replay results and the corpus alone.
"""

import msgspec

from conformance.certify.replay import TraceResult
from conformance.corpus.cells import input_kind
from spec.rules import load_rules
from spec.trace import Trace


class RuleVerdict(msgspec.Struct, frozen=True, kw_only=True):
    rule: str
    verdict: str  # conforms, departs, not exercised
    steps_passed: int
    traces_failed: int


class Certification(msgspec.Struct, frozen=True, kw_only=True):
    adapter: str
    corpus: str
    traces: int
    passed: int
    failed: int
    steps: int
    steps_run: int
    seconds: float
    rules_failed: tuple[str, ...]
    rules: tuple[RuleVerdict, ...]
    results: tuple[TraceResult, ...]
    shortened: dict[str, str]  # failing trace -> its shortened reproducing trace file
    coverage: dict[str, dict[str, int]]  # rule -> input kind -> steps of the corpus exercising it


def verdicts(results: list[TraceResult]) -> tuple[RuleVerdict, ...]:
    passed: dict[str, int] = {}
    failed: dict[str, int] = {}
    for result in results:
        for rule in result.rules_passed:
            passed[rule] = passed.get(rule, 0) + 1
        for rule in result.rules_failed:
            failed[rule] = failed.get(rule, 0) + 1
    found = []
    for rule in load_rules():
        verdict = "departs" if rule.id in failed else ("conforms" if rule.id in passed else "not exercised")
        found.append(RuleVerdict(rule=rule.id, verdict=verdict, steps_passed=passed.get(rule.id, 0), traces_failed=failed.get(rule.id, 0)))
    return tuple(found)


def coverage_matrix(corpus: list[Trace]) -> dict[str, dict[str, int]]:
    matrix: dict[str, dict[str, int]] = {}
    for built in corpus:
        for step in built.steps:
            kind = input_kind(step.input)
            for rule in step.rules:
                row = matrix.setdefault(rule, {})
                row[kind] = row.get(kind, 0) + 1
    return {rule: dict(sorted(row.items())) for rule, row in sorted(matrix.items())}
