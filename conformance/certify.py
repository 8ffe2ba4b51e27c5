"""Certification: replay a corpus through an adapter and report, rule by rule, where it departs.

The reports (Markdown for people, JSON for tools, JUnit XML for CI) are written atomically
under the output directory, with a shortened reproducing trace for every divergence.
"""

import html
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
from tabulate import tabulate

from adapters.contract import Adapter
from conformance import trace as traces
from conformance.cells import build_trace, input_kind
from conformance.replay import TraceResult, of_systems, replay, replay_file, trace_files
from conformance.trace import Trace
from spec.rules import load_rules

SHORTEN_BUDGET = 200  # replays spent shortening one divergence


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


def shorten(make_adapter: Callable[[], Adapter], original: Trace, divergent_step: int) -> Trace:
    """A shorter trace on which the adapter still departs at its last step.

    The trace is cut after the divergent step; then earlier steps are dropped one at a time
    (last first), each drop kept if the reference's expectations for the remaining inputs
    still catch the adapter at the last step. Responses stay only while the request they
    answer is among the requests the node sent earlier in the shortened trace.
    """
    header = original.header
    inputs = [step.input for step in original.steps[:divergent_step]]
    budget = SHORTEN_BUDGET

    def fails_at_end(candidate: list) -> bool:
        built = build_trace(header.name, header.setting, header.node, candidate, header.origin)
        if not answers_own_requests(built):
            return False
        result = replay(make_adapter(), built, header.name)
        return not result.passed and result.steps_run == len(candidate) - 1

    index = len(inputs) - 2
    while index >= 0 and budget > 0:
        candidate = inputs[:index] + inputs[index + 1 :]
        budget -= 1
        if fails_at_end(candidate):
            inputs = candidate
        index -= 1
    name = f"{header.name}-shortened"
    return build_trace(name, header.setting, header.node, inputs, f"shortened from {header.name}: the adapter departs at the last step")


def answers_own_requests(built: Trace) -> bool:
    sent = set()
    for step in built.steps:
        if type(step.input).__name__ == "Response" and msgspec.msgpack.encode(step.input.request) not in sent:
            return False
        sent.update(msgspec.msgpack.encode(s.message) for s in step.expect.sends)
    return True


def certify(
    adapter_name: str,
    make_adapter: Callable[[], Adapter],
    corpus: Path,
    out: Path,
    progress: Callable[[int, int, int], None] | None = None,
    systems: tuple[str, ...] | None = None,
) -> Certification:
    """Replay every trace of the corpus (of the given systems only, if any), shorten each
    divergence, write the reports."""
    start = time.perf_counter()
    files = of_systems(trace_files(corpus), systems)
    if not files:
        raise traces.TraceError(f"{corpus}: no traces of the system(s) {', '.join(systems or ())}")
    results = []
    failed = 0
    for number, path in enumerate(files, start=1):
        result = replay_file(make_adapter, path)
        results.append(result)
        failed += not result.passed
        if progress:
            progress(number, len(files), failed)
    read = []
    shortened: dict[str, str] = {}
    for path, result in zip(files, results):
        try:
            built = traces.read(path)
        except traces.TraceError:
            continue
        read.append(built)
        if result.divergence is not None:
            short = shorten(make_adapter, built, result.divergence.step)
            target = out / "divergences" / f"{path.stem}.jsonl"
            traces.write(target, short)
            shortened[str(path)] = str(target)
    rules = verdicts(results)
    report = Certification(
        adapter=adapter_name,
        corpus=str(corpus),
        traces=len(results),
        passed=len(results) - failed,
        failed=failed,
        steps=sum(r.steps for r in results),
        steps_run=sum(r.steps_run for r in results),
        seconds=round(time.perf_counter() - start, 3),
        rules_failed=tuple(v.rule for v in rules if v.verdict == "departs"),
        rules=rules,
        results=tuple(results),
        shortened=shortened,
        coverage=coverage_matrix(read),
    )
    write_reports(out, report)
    return report


def summary(report: Certification, out: Path) -> dict:
    """The object `certify --json` prints."""
    return {
        "adapter": report.adapter,
        "corpus": report.corpus,
        "traces": report.traces,
        "passed": report.passed,
        "failed": report.failed,
        "steps": report.steps,
        "rules_failed": list(report.rules_failed),
        "rules_conforming": sum(v.verdict == "conforms" for v in report.rules),
        "rules_not_exercised": [v.rule for v in report.rules if v.verdict == "not exercised"],
        "seconds": report.seconds,
        "reports": {kind: str(out / name) for kind, name in REPORT_FILES.items()},
    }


REPORT_FILES = {"markdown": "report.md", "json": "report.json", "junit": "junit.xml"}


def failure_text(result: TraceResult) -> str:
    if result.failure:
        return result.failure
    d = result.divergence
    return f"step {d.step} ({d.input}): {d.field}: expected {d.expected}, got {d.actual} [rules {' '.join(d.rules) or '-'}]"


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
        if result.trace in report.shortened:
            lines += [f"Shortened reproducing trace: `{report.shortened[result.trace]}`", ""]
    kinds = sorted({kind for row in report.coverage.values() for kind in row})
    lines += ["## Coverage matrix (corpus steps per rule and input kind)", ""]
    rows = [[rule] + [report.coverage[rule].get(kind, "") for kind in kinds] for rule in report.coverage]
    lines += [tabulate(rows, headers=["rule"] + kinds, tablefmt="github"), ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def junit(report: Certification) -> str:
    cases = []
    for result in report.results:
        name = html.escape(Path(result.trace).name, quote=True)
        if result.passed:
            cases.append(f'  <testcase classname="kraftcheck.{html.escape(report.adapter, quote=True)}" name="{name}" time="{result.seconds}"/>')
        else:
            message = html.escape(failure_text(result), quote=True)
            cases.append(
                f'  <testcase classname="kraftcheck.{html.escape(report.adapter, quote=True)}" name="{name}" time="{result.seconds}">'
                f'<failure message="{message}">{message}</failure></testcase>'
            )
    return "\n".join(
        [
            '<?xml version="1.0" encoding="utf-8"?>',
            f'<testsuite name="kraftcheck certify {html.escape(report.adapter, quote=True)}" tests="{report.traces}" failures="{report.failed}" errors="0" time="{report.seconds}">',
            *cases,
            "</testsuite>",
            "",
        ]
    )


def write_reports(out: Path, report: Certification) -> None:
    traces.write_bytes_atomically(out / REPORT_FILES["markdown"], markdown(report).encode())
    traces.write_bytes_atomically(out / REPORT_FILES["json"], msgspec.json.format(msgspec.json.encode(report), indent=1) + b"\n")
    traces.write_bytes_atomically(out / REPORT_FILES["junit"], junit(report).encode())


class MutantScore(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str
    failed: int  # traces the mutant fails
    rule: str  # the rule it breaks most consistently: the largest share of its traces failing
    first: str  # where it is first caught: trace and step


def mutation_scores(corpus: Path) -> list[MutantScore]:
    """Replay the corpus through every mutant (no reports): which traces catch it, and on which rule."""
    from adapters.mutants import MUTANTS, mutant_adapter

    files = trace_files(corpus)
    scores = []
    for mutant in MUTANTS.values():
        results = [replay_file(lambda: mutant_adapter(mutant.name), path) for path in files]
        failing = [r for r in results if not r.passed]
        rule, first = "-", "-"
        if failing:
            departed = [v for v in verdicts(results) if v.verdict == "departs"]
            rule = max(departed, key=lambda v: v.traces_failed / (v.traces_failed + v.steps_passed)).rule
            earliest = min(failing, key=lambda r: (r.divergence.step if r.divergence else r.steps_run + 1, r.trace))
            first = f"{Path(earliest.trace).name} step {earliest.divergence.step if earliest.divergence else earliest.steps_run + 1}"
        scores.append(MutantScore(name=mutant.name, description=mutant.description, failed=len(failing), rule=rule, first=first))
    return scores


def terminal_summary(report: Certification, out: Path, show: int = 15) -> str:
    counts = {verdict: sum(v.verdict == verdict for v in report.rules) for verdict in ("conforms", "departs", "not exercised")}
    rows = [
        ("adapter", report.adapter),
        ("traces", f"{report.passed} passed, {report.failed} failed, {report.traces} in all"),
        ("steps matched", f"{report.steps_run:,} of {report.steps:,}"),
        ("rules", f"{counts['conforms']} conform, {counts['departs']} depart, {counts['not exercised']} not exercised"),
        ("seconds", f"{report.seconds:.1f}"),
        ("reports", ", ".join(str(out / name) for name in REPORT_FILES.values())),
    ]
    text = tabulate(rows, tablefmt="simple")
    failing = [r for r in report.results if not r.passed]
    if failing:
        table = [(Path(r.trace).name, r.divergence.step if r.divergence else "-", r.divergence.field if r.divergence else "adapter failed", " ".join(r.rules_failed) or "-") for r in failing[:show]]
        text += "\n\n" + tabulate(table, headers=("failing trace", "step", "field", "rules"), tablefmt="simple", maxcolwidths=[None, None, 40, 40])
        if len(failing) > show:
            text += f"\n... and {len(failing) - show} more (see {out / REPORT_FILES['markdown']})"
        first = failing[0]
        text += f"\n\nfirst divergence, {first.trace}:\n  {failure_text(first)}"
    if report.rules_failed:
        text += f"\n\nrules departed from: {' '.join(report.rules_failed)}"
    return text


def print_progress(number: int, total: int, failed: int) -> None:
    print(f"\r  traces {number}/{total}  failed {failed}", end="" if number < total else "\n", file=sys.stderr, flush=True)
