"""junit.xml: one test case per trace, for CI systems: a departing trace a failure, one the
adapter failed on an error, a trace needing a capability the implementation lacks skipped."""

from pathlib import Path

from conformance.certify.replay import CONFORMS, DEPARTS, NOT_APPLICABLE, TraceResult, failure_text
from conformance.certify.reports.wording import deviation_headline, deviation_rows, needs_text
from conformance.certify.verdicts import Certification
from conformance.text import markup as attribute


def junit(report: Certification) -> str:
    suite = attribute(report.adapter)
    cases = [f'  <testcase classname="kraftcheck.{suite}" name="{attribute(Path(r.trace).name)}"{_time(r.seconds)}{_outcome(r)}' for r in report.results]
    return "\n".join(
        [
            '<?xml version="1.0" encoding="utf-8"?>',
            f'<testsuite name="kraftcheck certify {suite}" tests="{report.traces}" failures="{report.departed}" errors="{report.errors}" '
            f'skipped="{report.not_applicable}"{_time(report.seconds)}>',
            "  <properties>",
            f'    <property name="corpus" value="{attribute(report.corpus)}"/>',
            f'    <property name="profile" value="{attribute(report.profile)}"/>',
            *_deviations(report),
            "  </properties>",
            *cases,
            "</testsuite>",
            "",
        ]
    )


def _deviations(report: Certification) -> list[str]:
    """The deviations from the profile as properties: the headline, then one per deviation with the traces it explains."""
    if report.deviations is None:
        return []
    rows = [f'    <property name="deviation" value="{attribute(name)}: {count} traces"/>' for name, count, _ in deviation_rows(report)]
    return [f'    <property name="deviations" value="{attribute(deviation_headline(report))}"/>', *rows]


def _time(seconds: float | None) -> str:
    """The time attribute: left out of a report without timings (JUnit makes it optional)."""
    return "" if seconds is None else f' time="{seconds}"'


def _outcome(result: TraceResult) -> str:
    """The end of a test case's element: empty for a trace that conforms, else its failure, error or skip."""
    if result.verdict == CONFORMS:
        return "/>"
    if result.verdict == NOT_APPLICABLE:
        return f'><skipped message="{attribute(needs_text(result))}"/></testcase>'
    element = "failure" if result.verdict == DEPARTS else "error"
    message = attribute(failure_text(result))
    return f'><{element} message="{message}">{message}</{element}></testcase>'
