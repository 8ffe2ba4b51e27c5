"""What `kraftcheck certify` prints: live progress and the closing summary."""

import itertools
import sys
import textwrap
from pathlib import Path

from tabulate import tabulate

from conformance.certify.replay import failure_text
from conformance.certify.reports.publish import REPORT_FILES
from conformance.certify.reports.wording import (
    FAILING,
    INCONSISTENT,
    allowed_text,
    alternative_text,
    corpus_profile_text,
    deviation_headline,
    deviation_rows,
    inconsistent,
    lacking,
    readings,
    rule_totals,
    steps_text,
    trace_totals,
)
from conformance.certify.verdicts import Certification
from conformance.text import wrapped_table


def terminal_summary(report: Certification, out: Path, show: int = 15, seconds: float | None = None) -> str:
    """The closing summary; `seconds`, the wall time, where the report leaves it out."""
    wall = report.seconds if report.seconds is not None else seconds
    rows = [
        ("adapter", report.adapter),
        *([("implementation", report.implementation)] if report.implementation else []),
        ("corpus", f"{report.corpus}, {corpus_profile_text(report)}"),
        ("traces", trace_totals(report)),
        ("steps matched", steps_text(report.steps_run, report.steps, report.steps_skipped)),
        ("rules", rule_totals(report)),
        *([("lacks", "; ".join(lacking(report)))] if report.lacks else []),
        *([("seconds", f"{wall:.1f}")] if wall is not None else []),
        ("reports", ", ".join(str(out / name) for name in REPORT_FILES.values())),
    ]
    text = tabulate(rows, tablefmt="simple")
    taken = [(r.point.name if i == 0 else "", alternative_text(r.point, alternative), steps, r.point.question if i == 0 else "") for r in readings(report) for i, (alternative, steps) in enumerate(r.taken)]
    if taken:
        text += "\n\n" + wrapped_table(taken, ("choice point", "alternative taken", "steps", "question"), [None, None, None, 60])
    resolved = inconsistent(report)
    if resolved:
        rows = [(r.point.name if i == 0 or resolved[i - 1].point != r.point else "", r.alternative, Path(r.trace).name, r.step) for i, r in enumerate(resolved)]
        text += "\n\n" + textwrap.fill(INCONSISTENT, 100) + "\n" + wrapped_table(rows, ("choice point", "alternative", "first shown by trace", "at step"), [None, None, None, None])
    failing = [r for r in report.results if r.verdict in FAILING]
    if failing:
        table = [(Path(r.trace).name, r.verdict, r.divergence.step if r.divergence else "-", r.divergence.field if r.divergence else r.failure, " ".join(r.rules_failed) or "-") for r in failing[:show]]
        text += "\n\n" + wrapped_table(table, ("failing trace", "verdict", "step", "field", "rules"), [None, None, None, 40, 40])
        if len(failing) > show:
            text += f"\n... and {len(failing) - show} more (see {out / REPORT_FILES['markdown']})"
        first = failing[0]
        text += f"\n\nfirst {'divergence' if first.divergence else 'error'}, {first.trace}:\n  {failure_text(first)}"
        if first.divergence and first.divergence.allowed:
            text += f"\n  {allowed_text(first.divergence)}"
        if first.divergence and first.divergence.expected_json:
            text += "\n" + side_by_side(first.divergence.differing, first.divergence.expected_json, first.divergence.actual_json)
    if report.rules_failed:
        text += f"\n\nrules departed from: {' '.join(report.rules_failed)}"
    if report.deviations is not None:
        text += f"\n\ndeviations from {report.deviations.profile}: {deviation_headline(report)}"
        rows = [(name, count, Path(first).name) for name, count, first in deviation_rows(report)]
        if rows:
            text += "\n" + wrapped_table(rows, ("deviation", "traces it explains", "first of them"), [None, None, None])
        if report.deviations.unexplained:
            first = report.deviations.unexplained[0]
            text += f"\nfirst unexplained, {first.trace}:\n  {first.failure}"
    return text


def print_progress(stage: str, done: int, total: int, count: int) -> None:
    """One live line: traces replayed (and failed so far), divergences shortened (and candidate replays
    left), then deviations tried in each round of the search (and found so far)."""
    tail = {"traces": f"failed {count}", "shortening": f"replays left {count}", "deviations": f"found {count}"}[stage]
    print(f"\r  {stage} {done}/{total}  {tail}  ", end="" if done < total else "\n", file=sys.stderr, flush=True)


def side_by_side(differing: tuple[str, ...], expected_json: str, actual_json: str, most: int = 60) -> str:
    """The differing part as JSON, expected beside actual (`<>` marks a line that differs), its
    differing fields named."""
    width = min(most, max(len(line) for line in expected_json.splitlines()))
    rows = itertools.zip_longest(expected_json.splitlines(), actual_json.splitlines(), fillvalue="")
    lines = [f"  differing: {', '.join(differing)}", f"  {'expected':<{width}}      actual"]
    for want, got in rows:
        cut = want if len(want) <= width else want[: width - 3] + "..."
        lines.append(f"  {cut:<{width}}  {'<>' if want != got else '  '}  {got}")
    return "\n".join(lines)
