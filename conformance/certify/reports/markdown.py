"""report.md: the certification for people, as GitHub-flavoured Markdown."""

from tabulate import tabulate

from conformance.certify.replay import failure_text
from conformance.certify.verdicts import Certification


def markdown(report: Certification) -> str:
    lines = [
        f"# kraftcheck certification: `{report.adapter}`",
        "",
        f"Verdict: **{'conforms' if not report.failed else 'departs from the specification'}**. "
        f"{report.passed} of {report.traces} traces passed ({report.steps_run:,} of {report.steps:,} steps matched) "
        f"in {report.seconds:.1f} s; corpus `{report.corpus}`.",
        "",
        "## Verdict per rule",
        "",
        tabulate([(v.rule, v.verdict, v.steps_passed, v.traces_failed) for v in report.rules], headers=("rule", "verdict", "traces passing it", "traces failing on it"), tablefmt="github"),
        "",
        "## Divergences",
        "",
    ]
    failing = [r for r in report.results if not r.passed]
    if not failing:
        lines.append("None.")
    for result in failing:
        lines += [f"### `{result.trace}`", "", failure_text(result), ""]
        if result.divergence:
            d = result.divergence
            lines += ["| | |", "|---|---|", f"| step | {d.step} |", f"| input | {_cell(d.input)} |", f"| field | `{d.field}` |", f"| expected | {_cell(d.expected)} |", f"| actual | {_cell(d.actual)} |", f"| rules | {' '.join(d.rules)} |", ""]
            lines += json_diff(d.differing, d.expected_json, d.actual_json)
        if result.trace in report.shortened:
            lines += [f"Shortened reproducing trace: `{report.shortened[result.trace]}`", ""]
    kinds = sorted({kind for row in report.coverage.values() for kind in row})
    lines += ["## Coverage matrix (corpus steps per rule and input kind)", ""]
    rows = [[rule] + [report.coverage[rule].get(kind, "") for kind in kinds] for rule in report.coverage]
    lines += [tabulate(rows, headers=["rule"] + kinds, tablefmt="github"), ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def json_diff(differing: tuple[str, ...], expected_json: str, actual_json: str) -> list[str]:
    """Expected and actual as the protocol's JSON, every field shown, the differing fields named:
    a default value (LastOffset 0 against -1) is as visible as any other."""
    if not expected_json:
        return []
    named = ", ".join(f"`{field}`" for field in differing)
    fence = "~~~~"  # a JSON string may hold backticks
    return [f"Differing fields: {named}.", "", "Expected:", "", f"{fence}json", expected_json, fence, "", "Actual:", "", f"{fence}json", actual_json, fence, ""]
