"""What certification concludes: a verdict per rule, the run's totals, and the corpus's coverage.

The data every report renders; computed from the replay results and the corpus alone.
"""

from collections import Counter

import msgspec

from conformance.certify.deviation import Deviations
from conformance.certify.replay import CONFORMS, DEPARTS, ERROR, NOT_APPLICABLE, TraceResult
from conformance.corpus.cells import input_kind
from model.choices import CHOICE_POINTS, ONE_WAY, ChoicePoint
from spec.rules import load_rules
from spec.trace import Trace

NOT_EXERCISED = "not exercised"
RULE_VERDICTS = (DEPARTS, ERROR, CONFORMS, NOT_APPLICABLE, NOT_EXERCISED)  # the first that applies is a rule's verdict


class RuleVerdict(msgspec.Struct, frozen=True, kw_only=True):
    rule: str
    verdict: str  # one of RULE_VERDICTS
    steps_passed: int
    traces_failed: int  # traces departing or erring on a step attributed to the rule


class Shown(msgspec.Struct, frozen=True, kw_only=True):
    """An alternative of a choice point, and the first trace (in corpus order) and step that showed the implementation took it."""

    alternative: str
    trace: str
    step: int


class Inconsistency(msgspec.Struct, frozen=True, kw_only=True):
    """A one-way choice point the implementation took more than one alternative of across the
    traces; each trace alone is held to one (replay), so no trace departs for it."""

    point: str
    shown: tuple[Shown, ...]  # each alternative taken, in the point's order


class Certification(msgspec.Struct, frozen=True, kw_only=True):
    adapter: str
    implementation: str  # what the implementation says it is (its reply to start), "" if it says nothing
    corpus: str
    profile: str  # the model profile(s) the corpus was generated under (its manifest says), "" if none is known
    traces: int
    passed: int  # traces that conform
    failed: int  # traces that depart or err
    departed: int
    errors: int
    not_applicable: int
    steps: int
    steps_run: int
    steps_skipped: int  # responses to requests the implementation did not send (it took another alternative)
    seconds: float | None  # wall seconds; None when the run was told to leave timings out (certify --reproducible)
    lacks: tuple[str, ...]  # the optional capabilities the implementation declared it lacks
    readings: dict[str, int]  # "CHOICE=alternative" -> steps where the implementation showed that reading
    rules_failed: tuple[str, ...]
    rules: tuple[RuleVerdict, ...]
    results: tuple[TraceResult, ...]
    shortened: dict[str, str]  # failing trace -> its shortened reproducing trace file
    coverage: dict[str, dict[str, int]]  # rule -> input kind -> steps of the corpus exercising it
    inconsistent: tuple[Inconsistency, ...] = ()  # one-way choice points the implementation resolved more than one way
    deviations: Deviations | None = None  # where traces depart: the deviations from the profile explaining them (None: none sought)


class Totals(msgspec.Struct, frozen=True, kw_only=True):
    """What a run concludes from its results: the counts, and a verdict per rule."""

    traces: int
    passed: int
    failed: int
    departed: int
    errors: int
    not_applicable: int
    steps: int
    steps_run: int
    steps_skipped: int
    lacks: tuple[str, ...]
    readings: dict[str, int]
    inconsistent: tuple[Inconsistency, ...]
    rules: tuple[RuleVerdict, ...]

    @property
    def rules_failed(self) -> tuple[str, ...]:
        return tuple(v.rule for v in self.rules if v.verdict == DEPARTS)


def totals(results: list[TraceResult]) -> Totals:
    """The totals of results held here (conformance.certify.spark_replay draws the same with Spark SQL)."""
    counted = Counter(r.verdict for r in results)
    return Totals(
        traces=len(results),
        passed=sum(r.passed for r in results),
        failed=counted[DEPARTS] + counted[ERROR],
        departed=counted[DEPARTS],
        errors=counted[ERROR],
        not_applicable=counted[NOT_APPLICABLE],
        steps=sum(r.steps for r in results),
        steps_run=sum(r.steps_run for r in results),
        steps_skipped=sum(r.steps_skipped for r in results),
        lacks=tuple(sorted({c for r in results for c in r.lacks})),
        readings=readings(results),
        inconsistent=inconsistencies(first_shown(results)),
        rules=verdicts(results),
    )


def verdicts(results: list[TraceResult]) -> tuple[RuleVerdict, ...]:
    """Per rule: departs if a departing step is attributed to it, else error if an adapter failed
    on a step citing it, else conforms if a step citing it passed, else not applicable if only
    traces that were not applicable cite it, else not exercised."""
    passed: Counter[str] = Counter()
    failed: dict[str, Counter[str]] = {DEPARTS: Counter(), ERROR: Counter()}
    inapplicable: set[str] = set()
    for result in results:
        passed.update(result.rules_passed)
        if result.verdict in failed:
            failed[result.verdict].update(result.rules_failed)
        inapplicable.update(result.rules_not_applicable)
    found = []
    for rule in load_rules():
        rule_id = rule.id
        if failed[DEPARTS][rule_id]:
            verdict = DEPARTS
        elif failed[ERROR][rule_id]:
            verdict = ERROR
        elif passed[rule_id]:
            verdict = CONFORMS
        else:
            verdict = NOT_APPLICABLE if rule_id in inapplicable else NOT_EXERCISED
        traces_failed = failed[DEPARTS][rule_id] + failed[ERROR][rule_id]
        found.append(RuleVerdict(rule=rule_id, verdict=verdict, steps_passed=passed[rule_id], traces_failed=traces_failed))
    return tuple(found)


def readings(results: list[TraceResult]) -> dict[str, int]:
    """The implementation's readings at the choice points, summed over the traces."""
    total: Counter[str] = Counter()
    for result in results:
        total.update(result.readings)
    return dict(sorted(total.items()))


def first_shown(results: list[TraceResult]) -> dict[str, tuple[str, int]]:
    """Each reading, with the first trace (in corpus order) that showed it and the step there."""
    found: dict[str, tuple[str, int]] = {}
    for result in results:
        for reading, step in result.first_shown.items():
            found.setdefault(reading, (result.trace, step))
    return found


def alternative_order(point: ChoicePoint, alternative: str) -> tuple[int, str]:
    """Where an alternative comes among its point's: the catalogue's order, one-voter:N by its family."""
    return point.alternatives.index(alternative.split(":", 1)[0]), alternative


def inconsistencies(shown: dict[str, tuple[str, int]]) -> tuple[Inconsistency, ...]:
    """The one-way points whose readings (reading -> the first trace and step showing it) hold
    more than one alternative, in the catalogue's order: an implementation resolves such a
    point one way throughout, so one that took several is named, though no trace departs for it."""
    found = []
    for point in CHOICE_POINTS.values():
        prefix = f"{point.name}="
        taken = [(key[len(prefix) :], where) for key, where in shown.items() if key.startswith(prefix)]
        if point.scope == ONE_WAY and len(taken) > 1:
            taken.sort(key=lambda item: alternative_order(point, item[0]))
            found.append(Inconsistency(point=point.name, shown=tuple(Shown(alternative=a, trace=trace, step=step) for a, (trace, step) in taken)))
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
