"""junit.xml: one test case per trace, for CI systems."""

import html
from pathlib import Path

from conformance.certify.replay import failure_text
from conformance.certify.verdicts import Certification


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
