"""Writing the report files of a certification under its output directory."""

from pathlib import Path

import msgspec

from conformance.certify.reports.junit import junit
from conformance.certify.reports.markdown import markdown
from conformance.certify.verdicts import Certification
from spec import trace as traces

REPORT_FILES = {"markdown": "report.md", "json": "report.json", "junit": "junit.xml"}


def write_reports(out: Path, report: Certification) -> None:
    traces.write_bytes_atomically(out / REPORT_FILES["markdown"], markdown(report).encode())
    traces.write_bytes_atomically(out / REPORT_FILES["json"], msgspec.json.format(msgspec.json.encode(report), indent=1) + b"\n")
    traces.write_bytes_atomically(out / REPORT_FILES["junit"], junit(report).encode())
