"""report.html: the certification for people, in a browser, as one self-contained file.

The summary; the deviations from the profile that explain the departures; the verdict per rule with its normative sentence and links to the traces that
exercise it; the implementation's readings at the choice points, and the one-way points it
resolved more than one way, with the traces showing each alternative; the capabilities it lacks; a
coverage heat map (rules x input kinds, coloured by the traces passing, failing and not
applicable there); each divergence with its sequence diagram and its shortened reproducing
trace, and each error; every trace. Inline CSS and SVG, no script and no external resource, so it opens from disk
anywhere; the same certification gives the same bytes. The page is report.html.j2 (Jinja2).
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from markupsafe import Markup

from conformance.certify.replay import NOT_APPLICABLE, TraceResult, failure_text
from conformance.certify.reports.wording import (
    DEVIATIONS,
    FAILING,
    INCONSISTENT,
    allowed_text,
    corpus_profile_text,
    deviation_headline,
    deviation_rows,
    headline,
    inconsistent,
    lacking,
    needs_text,
    overall,
    readings,
    rule_totals,
    steps_text,
    taken_text,
    trace_totals,
)
from conformance.certify.verdicts import Certification
from conformance.corpus.cells import input_kind
from conformance.diagrams.labels import message_label
from conformance.diagrams.traces import divergence_svg
from spec.rules import load_rules
from spec.trace import Trace

_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


@dataclass
class Cell:
    """One rule x input kind of the heat map: the traces that pass a step there, those failing
    (departing or erring) on one, and those not applicable with a step there."""

    passing: int = 0
    failing: int = 0
    inapplicable: int = 0

    @property
    def shade(self) -> str:
        """A CSS class: red by failing traces, else green by passing ones, else grey where only
        traces not applicable reach, else empty."""
        if self.failing:
            return f"f{min(self.failing, 3)}"
        if self.passing:
            return "p" + str(1 if self.passing == 1 else 2 if self.passing < 5 else 3 if self.passing < 20 else 4)
        return "na" if self.inapplicable else ""


@dataclass
class TraceEntry:
    anchor: str
    name: str
    path: str
    result: TraceResult
    setting: str  # the node and its cluster or partition, "" when the trace could not be read

    @property
    def rules(self) -> int:
        """How many rules its replayed steps exercise."""
        return len(set(self.result.rules_passed) | set(self.result.rules_failed))

    @property
    def steps(self) -> str:
        """Its steps matched, and skipped, worded as the summary's."""
        return steps_text(self.result.steps_run, self.result.steps, self.result.steps_skipped)

    @property
    def needs(self) -> str:
        """Why it is not applicable; asked of a trace not applicable only."""
        return needs_text(self.result)


@dataclass
class DivergenceEntry:
    trace: TraceEntry
    text: str  # the failure in words
    allowed: str  # the other alternatives the step allowed, "" if none
    diagram: Markup | None  # None: the adapter failed (no divergence), or the trace could not be read
    shortened_link: str | None = None
    shortened_steps: list[tuple[int, str, str, str]] = field(default_factory=list)  # step, input, expected, rules


def html(report: Certification, corpus: dict[str, Trace], reproductions: dict[str, tuple[str, Trace]]) -> str:
    """The page for a certification, given the corpus's traces (by result path, readable ones
    only) and the shortened reproductions (by divergent trace: their link relative to the page,
    and the trace)."""
    entries = _trace_entries(report, corpus)
    by_path = {entry.path: entry for entry in entries}
    catalogue = {rule.id: rule for rule in load_rules()}
    rules = [
        {"verdict": v, "rule": catalogue[v.rule], "anchor": f"rule-{v.rule}", "traces": _exercising(v.rule, entries)}
        for v in report.rules
    ]
    kinds, heat = _heat_map(report, corpus)
    heat_rows = [(rule, catalogue[rule], [heat[rule].get(kind, Cell()) for kind in kinds]) for rule in catalogue if rule in heat]
    divergences = [_divergence(by_path[r.trace], corpus.get(r.trace), reproductions.get(r.trace)) for r in report.results if r.verdict in FAILING]
    return _TEMPLATES.get_template("report.html.j2").render(
        report=report,
        verdict=overall(report),
        headline=headline(report),
        trace_totals=trace_totals(report),
        corpus_profile=corpus_profile_text(report),
        rule_totals=rule_totals(report),
        steps=steps_text(report.steps_run, report.steps, report.steps_skipped),
        readings=[(r.point, taken_text(r)) for r in readings(report)],
        resolved=[(r, by_path[r.trace]) for r in inconsistent(report)],
        inconsistent_text=INCONSISTENT,
        lacking=lacking(report),
        rules=rules,
        kinds=kinds,
        heat_rows=heat_rows,
        divergences=divergences,
        traces=entries,
        deviations=_deviations(report, by_path),
        deviations_text=DEVIATIONS,
    )


def _deviations(report: Certification, by_path: dict[str, TraceEntry]) -> dict | None:
    """The deviations section's content, its traces linked; None without a search."""
    if report.deviations is None:
        return None
    return {
        "headline": deviation_headline(report),
        "rows": [(name, count, by_path.get(first)) for name, count, first in deviation_rows(report)],
        "unexplained": [(by_path[u.trace], u.failure) for u in report.deviations.unexplained],
    }


def _anchor(prefix: str, name: str, taken: set[str]) -> str:
    """A unique id for the page: the prefix and the name's safe characters."""
    base = f"{prefix}-{re.sub(r'[^A-Za-z0-9_-]+', '-', name).strip('-') or 'x'}"
    anchor, number = base, 1
    while anchor in taken:
        number += 1
        anchor = f"{base}-{number}"
    taken.add(anchor)
    return anchor


def _trace_entries(report: Certification, corpus: dict[str, Trace]) -> list[TraceEntry]:
    taken: set[str] = set()
    entries = []
    for result in report.results:
        built = corpus.get(result.trace)
        setting = ""
        if built is not None:
            header = built.header
            setting = f"node {header.node} of KRaft voters {list(header.cluster.voters)}" if header.cluster else f"replica {header.node} of ISR partition {list(header.partition.replicas)}"
        entries.append(TraceEntry(_anchor("trace", Path(result.trace).stem, taken), Path(result.trace).name, result.trace, result, setting))
    return entries


def _exercising(rule: str, entries: list[TraceEntry]) -> list[tuple[TraceEntry, str]]:
    """The traces whose replayed steps exercise a rule, failing ones first, then those passing
    it, then those not applicable that cite it: (entry, its verdict on the rule; "" passing)."""
    failing = [(e, e.result.verdict) for e in entries if rule in e.result.rules_failed]
    passing = [(e, "") for e in entries if rule in e.result.rules_passed and rule not in e.result.rules_failed]
    inapplicable = [(e, NOT_APPLICABLE) for e in entries if rule in e.result.rules_not_applicable]
    return failing + passing + inapplicable


def _heat_map(report: Certification, corpus: dict[str, Trace]) -> tuple[list[str], dict[str, dict[str, Cell]]]:
    """Input kinds, and per rule and kind the traces with a matched step there, those failing on
    one, and those not applicable with a step there."""
    cells: dict[str, dict[str, Cell]] = {}
    kinds: set[str] = set()
    for result in report.results:
        built = corpus.get(result.trace)
        if built is None:
            continue
        passed: set[tuple[str, str]] = set()
        inapplicable: set[tuple[str, str]] = set()
        reached = result.steps_run + result.steps_skipped  # the steps before the failing one, matched or skipped
        matched = set(result.rules_passed)  # a skipped step's rules count only where a matched step passed them
        for index, step in enumerate(built.steps):
            kind = input_kind(step.input)
            kinds.add(kind)
            if result.verdict == NOT_APPLICABLE:
                inapplicable.update((rule, kind) for rule in step.rules)
            elif index < reached:
                passed.update((rule, kind) for rule in step.rules if rule in matched)
            elif index == reached and result.verdict in FAILING:
                for rule in step.rules:
                    cells.setdefault(rule, {}).setdefault(kind, Cell()).failing += 1
        for rule, kind in passed:
            cells.setdefault(rule, {}).setdefault(kind, Cell()).passing += 1
        for rule, kind in inapplicable:
            cells.setdefault(rule, {}).setdefault(kind, Cell()).inapplicable += 1
    return sorted(kinds), cells


def _divergence(entry: TraceEntry, built: Trace | None, reproduction: tuple[str, Trace] | None) -> DivergenceEntry:
    result = entry.result
    diagram = None
    if result.divergence is not None and built is not None:
        diagram = Markup(divergence_svg(built, result.divergence))
    found = DivergenceEntry(entry, failure_text(result), allowed_text(result.divergence) if result.divergence and result.divergence.allowed else "", diagram)
    if reproduction is not None:
        found.shortened_link, short = reproduction
        for step in short.steps:
            outputs = ([message_label(step.expect.response)] if step.expect.response is not None else []) + [f"to {s.destination}: {message_label(s.message)}" for s in step.expect.sends]
            found.shortened_steps.append((step.step, step.note, "; ".join(outputs) or "-", " ".join(step.rules)))
    return found
