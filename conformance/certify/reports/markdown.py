"""report.md: the certification for people, as GitHub-flavoured Markdown."""

from tabulate import tabulate

from conformance.certify.replay import failure_text
from conformance.certify.reports.wording import (
    FAILING,
    DEVIATIONS,
    INCONSISTENT,
    allowed_text,
    corpus_profile_text,
    deviation_headline,
    deviation_rows,
    headline,
    inconsistent,
    lacking,
    readings,
    rule_totals,
    steps_text,
    taken_text,
    trace_totals,
)
from conformance.certify.verdicts import Certification
from conformance.text import markdown_block, markdown_code, markdown_text


def markdown(report: Certification) -> str:
    lines = [
        f"# kraftcheck certification: {markdown_code(report.adapter)}",
        "",
        *([f"Implementation: {markdown_text(report.implementation)}", ""] if report.implementation else []),
        f"Verdict: **{headline(report)}**. Traces: {trace_totals(report)} (steps matched: {steps_text(report.steps_run, report.steps, report.steps_skipped)})"
        f"{'' if report.seconds is None else f' in {report.seconds:.1f} s'}; corpus {markdown_code(report.corpus)}, {corpus_profile_text(report)}. Rules: {rule_totals(report)}.",
        "",
        *deviations(report),
        "## Verdict per rule",
        "",
        tabulate([(v.rule, v.verdict, v.steps_passed, v.traces_failed) for v in report.rules], headers=("rule", "verdict", "traces passing it", "traces failing on it"), tablefmt="github"),
        "",
        "## Choice points",
        "",
    ]
    taken = readings(report)
    if taken:
        lines += [
            "Where the specification allows more than one behaviour, the alternatives the implementation showed it took, and at how many steps.",
            "",
            tabulate([(f"`{r.point.name}`", r.point.question, taken_text(r)) for r in taken], headers=("choice point", "question", "alternatives taken"), tablefmt="github"),
            "",
        ]
    else:
        lines += ["No step showed which alternative the implementation takes.", ""]
    resolved = inconsistent(report)
    if resolved:
        rows = [(f"`{r.point.name}`", r.alternative, markdown_code(r.trace, in_table=True), r.step) for r in resolved]
        lines += ["### Resolved more than one way", "", INCONSISTENT, "", tabulate(rows, headers=("choice point", "alternative", "first shown by trace", "at step"), tablefmt="github"), ""]
    lines += ["## Not applicable", ""]
    if report.lacks:
        lines += ["The optional capabilities the implementation declares it lacks, and the traces that need them:", ""]
        lines += [f"- {markdown_text(line)}" for line in lacking(report)] + [""]
    else:
        lines += ["None: no trace needs a capability the implementation declares it lacks.", ""]
    lines += ["## Divergences and errors", ""]
    failing = [r for r in report.results if r.verdict in FAILING]
    if not failing:
        lines.append("None.")
    for result in failing:
        lines += [f"### {markdown_code(result.trace)} ({result.verdict})", "", markdown_text(failure_text(result)), ""]
        if result.divergence:
            d = result.divergence
            rows = [("step", str(d.step)), ("input", markdown_text(d.input)), ("field", markdown_code(d.field, in_table=True)), ("expected", markdown_text(d.expected)), ("actual", markdown_text(d.actual)), ("rules", " ".join(d.rules))]
            lines += ["| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows), ""]
            if d.allowed:
                lines += [markdown_text(allowed_text(d)), ""]
            lines += json_diff(d.differing, d.expected_json, d.actual_json)
        if result.trace in report.shortened:
            lines += [f"Shortened reproducing trace: {markdown_code(report.shortened[result.trace])}", ""]
    kinds = sorted({kind for row in report.coverage.values() for kind in row})
    lines += ["## Coverage matrix (corpus steps per rule and input kind)", ""]
    rows = [[rule] + [report.coverage[rule].get(kind, "") for kind in kinds] for rule in report.coverage]
    lines += [tabulate(rows, headers=["rule"] + kinds, tablefmt="github"), ""]
    return "\n".join(lines)


def deviations(report: Certification) -> list[str]:
    """The section naming the deviations from the profile that explain the departures; none without a search."""
    if report.deviations is None:
        return []
    lines = [f"## Deviations from {markdown_text(report.deviations.profile)}", "", f"**{markdown_text(deviation_headline(report))}**.", "", DEVIATIONS, ""]
    rows = [(markdown_code(name, in_table=True), count, markdown_code(first, in_table=True)) for name, count, first in deviation_rows(report)]
    if rows:
        lines += [tabulate(rows, headers=("deviation", "traces it explains", "first of them"), tablefmt="github"), ""]
    if report.deviations.unexplained:
        rows = [(markdown_code(u.trace, in_table=True), markdown_text(u.failure)) for u in report.deviations.unexplained]
        lines += ["Unexplained traces, with their first divergence read with the deviations:", "", tabulate(rows, headers=("trace", "first divergence"), tablefmt="github"), ""]
    return lines


def json_diff(differing: tuple[str, ...], expected_json: str, actual_json: str) -> list[str]:
    """Expected and actual as the protocol's JSON, every field shown, the differing fields named:
    a default value (LastOffset 0 against -1) is as visible as any other."""
    if not expected_json:
        return []
    named = ", ".join(markdown_code(field) for field in differing)
    return [f"Differing fields: {named}.", "", "Expected:", "", *markdown_block(expected_json, "json"), "", "Actual:", "", *markdown_block(actual_json, "json"), ""]
