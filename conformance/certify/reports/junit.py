"""junit.xml: one test case per trace, for CI systems."""

from pathlib import Path

from conformance.certify.replay import failure_text
from conformance.certify.verdicts import Certification
from conformance.text import markup as attribute


def junit(report: Certification) -> str:
    suite = attribute(report.adapter)
    cases = []
    for result in report.results:
        name = attribute(Path(result.trace).name)
        if result.passed:
            cases.append(f'  <testcase classname="kraftcheck.{suite}" name="{name}" time="{result.seconds}"/>')
        else:
            message = attribute(failure_text(result))
            cases.append(f'  <testcase classname="kraftcheck.{suite}" name="{name}" time="{result.seconds}"><failure message="{message}">{message}</failure></testcase>')
    return "\n".join(
        [
            '<?xml version="1.0" encoding="utf-8"?>',
            f'<testsuite name="kraftcheck certify {suite}" tests="{report.traces}" failures="{report.failed}" errors="0" time="{report.seconds}">',
            *cases,
            "</testsuite>",
            "",
        ]
    )
