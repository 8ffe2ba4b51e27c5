"""junit.xml: one test case per trace, for CI systems."""

import html
import re
from pathlib import Path

from conformance.certify.replay import failure_text
from conformance.certify.verdicts import Certification
from conformance.text import readable

_NOT_XML = re.compile(r"[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")  # what XML 1.0 cannot hold


def attribute(text: str) -> str:
    """Text as an XML attribute value: readable, escaped, and nothing XML 1.0 forbids."""
    return _NOT_XML.sub("\ufffd", html.escape(readable(text), quote=True))


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
