"""The words every report uses for the same facts, so that Markdown, HTML, JUnit XML, the
terminal and the pytest plugin say them alike: the verdict totals, the readings at the choice
points and the one-way points resolved more than one way, the capabilities an implementation
lacks, the alternatives a divergence also allowed."""

from collections import Counter
from typing import NamedTuple

from conformance.certify.replay import CONFORMS, DEPARTS, ERROR, NOT_APPLICABLE, VERDICTS, Divergence, TraceResult
from conformance.certify.verdicts import NOT_EXERCISED, Certification, alternative_order
from model.choices import CHOICE_POINTS, ChoicePoint

FAILING = (DEPARTS, ERROR)  # the trace verdicts a report lists as failing, and the exit code counts
_TOTAL = {CONFORMS: "conform", DEPARTS: "depart", NOT_APPLICABLE: "not applicable", ERROR: "errors", NOT_EXERCISED: "not exercised"}
_HEADLINE = {
    DEPARTS: "departs from the specification",
    ERROR: "not judged: the adapter failed or traces could not be read",
    CONFORMS: "conforms",
    NOT_APPLICABLE: "not applicable: every trace needs a capability the implementation lacks",
}


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _totals(counts: Counter[str], order: tuple[str, ...]) -> str:
    return ", ".join(f"{counts[verdict]} {'error' if verdict == ERROR and counts[verdict] == 1 else _TOTAL[verdict]}" for verdict in order)


def trace_totals(report: Certification) -> str:
    """E.g. "520 conform, 2 depart, 3 not applicable, 0 errors, 525 in all"."""
    counts = Counter({CONFORMS: report.passed, DEPARTS: report.departed, NOT_APPLICABLE: report.not_applicable, ERROR: report.errors})
    return f"{_totals(counts, VERDICTS)}, {report.traces} in all"


def corpus_profile_text(report: Certification) -> str:
    """E.g. "generated under the model profile kafka-3.9"."""
    if not report.profile:
        return "generated under no model profile (ISR replicas only)"
    return f"generated under the model profile{'s' if ', ' in report.profile else ''} {report.profile}"


def rule_totals(report: Certification) -> str:
    """E.g. "130 conform, 2 depart, 5 not applicable, 0 errors, 20 not exercised"."""
    return _totals(Counter(v.verdict for v in report.rules), (*VERDICTS, NOT_EXERCISED))


def overall(report: Certification) -> str:
    """The run's verdict: a departure outweighs an error (the adapter failing proves nothing
    either way), which outweighs conformance, as for a rule."""
    counts = {DEPARTS: report.departed, ERROR: report.errors, CONFORMS: report.passed, NOT_APPLICABLE: report.not_applicable}
    return next((verdict for verdict, count in counts.items() if count), CONFORMS)


def headline(report: Certification) -> str:
    return _HEADLINE[overall(report)]


def steps_text(run: int, steps: int, skipped: int) -> str:
    """Steps matched, and those skipped: a response to a request the implementation did not send
    (it took another allowed alternative), or from a voter whose answer an earlier response took
    the place of (replay.ResponseBinder), cannot be delivered, nor judged."""
    text = f"{run:,} of {steps:,}"
    return f"{text}, {skipped:,} skipped (answers to no request the implementation awaited)" if skipped else text


def needs_text(result: TraceResult) -> str:
    """Why a trace is not applicable, e.g. "needs OffsetsForLeaderEpoch, which the implementation declares it lacks"."""
    return f"needs {' and '.join(result.lacks)}, which the implementation declares it lacks"


def lacking(report: Certification) -> list[str]:
    """Each capability the implementation declares it lacks, and the traces not applicable for
    want of it, e.g. "OffsetsForLeaderEpoch: 38 traces not applicable"."""
    counts = Counter(capability for result in report.results for capability in result.lacks)
    return [f"{capability}: {_count(counts[capability], 'trace')} not applicable" for capability in report.lacks]


def allowed_text(divergence: Divergence) -> str:
    """The other alternatives the specification allowed at a divergent step (for one that
    allowed some): the implementation matched none of them either."""
    return f"also allowed at this step: {'; '.join(divergence.allowed)}"


class Reading(NamedTuple):
    """A choice point, and the alternatives the implementation showed it took there with the steps showing each."""

    point: ChoicePoint
    taken: list[tuple[str, int]]  # in the point's order; the default first


def readings(report: Certification) -> list[Reading]:
    """The choice points the implementation showed a reading at, in the catalogue's order."""
    found = []
    for point in CHOICE_POINTS.values():
        prefix = f"{point.name}="
        taken = [(key[len(prefix) :], count) for key, count in report.readings.items() if key.startswith(prefix)]
        if taken:
            found.append(Reading(point, sorted(taken, key=lambda item: alternative_order(point, item[0]))))
    return found


def alternative_text(point: ChoicePoint, alternative: str) -> str:
    """An alternative, marked if it is the model's default reading."""
    return f"{alternative} (the default)" if alternative == point.alternatives[0] else alternative


def taken_text(reading: Reading) -> str:
    """E.g. "epoch-first (the default): 296 steps; leadership-first: 272 steps"."""
    return "; ".join(f"{alternative_text(reading.point, alternative)}: {_count(count, 'step')}" for alternative, count in reading.taken)


INCONSISTENT = (
    "One-way choice points the implementation resolved more than one way: an implementation resolves each of them one way "
    "throughout (model/choices.py). Each trace is held to the alternative it first took, so none departs for this, but across "
    "the traces the implementation took every alternative below, first at the trace and step named."
)


class Resolved(NamedTuple):
    """An alternative of a one-way point resolved more than one way, and where it was first shown."""

    point: ChoicePoint
    alternative: str  # marked if it is the default
    trace: str
    step: int


def inconsistent(report: Certification) -> list[Resolved]:
    """Each alternative of each one-way point the implementation resolved more than one way, in the catalogue's order."""
    return [
        Resolved(CHOICE_POINTS[found.point], alternative_text(CHOICE_POINTS[found.point], shown.alternative), shown.trace, shown.step)
        for found in report.inconsistent
        for shown in found.shown
    ]


DEVIATIONS = (
    "The deviations from the profile under which the departing traces conform, as few as the search found: an option of the model "
    "at a value another profile gives it, or a choice point the profile pins at another alternative (kraftcheck choices lists them). The "
    "implementation's recorded answers were judged again under each reading, without running it again. Each deviation is listed with "
    "the traces that conform with it and not without it; a trace that conforms under none is unexplained: a bug, or a reading the "
    "catalogue does not name."
)


def deviation_headline(report: Certification) -> str:
    """E.g. "Apache Kafka 4.3.1 = kip595 + 12 named deviations; 3 traces unexplained"; asked of a report with deviations."""
    found = report.deviations
    text = f"{report.implementation or report.adapter} = {found.profile} + {_count(len(found.explained), 'named deviation')}; {_count(len(found.unexplained), 'trace')} unexplained"
    return text if found.complete else f"{text} (the search stopped at its budget of replays)"


def deviation_rows(report: Certification) -> list[tuple[str, int, str]]:
    """Each deviation found, the traces it explains, and the first of them."""
    return [(found.deviation, len(found.traces), found.traces[0] if found.traces else "-") for found in report.deviations.explained]
