"""Publishing a certification's report set: the report files and the shortened divergent traces,
all from one run, swapped in whole (conformance.outputs)."""

from pathlib import Path

import msgspec

from conformance.certify.reports.html import html
from conformance.certify.reports.junit import junit
from conformance.certify.reports.markdown import markdown
from conformance.certify.verdicts import Certification
from conformance.outputs import check_directory, owned_names, publish_directory
from spec import trace as traces
from spec.trace import Trace

REPORT_FILES = {"markdown": "report.md", "json": "report.json", "junit": "junit.xml", "html": "report.html"}
DIVERGENCES = "divergences"  # the shortened reproducing traces, one per divergent trace
REPORT_SET = owned_names([*REPORT_FILES.values(), DIVERGENCES])


def check_report_directory(out: Path) -> None:
    """Before any work: `out` can take a report set (new, empty, or an earlier report set)."""
    check_directory(out, REPORT_SET, "certification reports")


def divergence_path(out: Path, trace: Path) -> Path:
    """Where the shortened reproduction of a divergent trace is published."""
    return out / DIVERGENCES / f"{trace.stem}.jsonl"


def write_reports(out: Path, report: Certification, shortened: dict[str, Trace]) -> None:
    """Publish the report files and the shortened traces (by published path) as one set."""

    def fill(staging: Path) -> None:
        for published, short in shortened.items():
            traces.write(staging / Path(published).relative_to(out), short)
        (staging / REPORT_FILES["markdown"]).write_bytes(markdown(report).encode())
        (staging / REPORT_FILES["json"]).write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=1) + b"\n")
        (staging / REPORT_FILES["junit"]).write_bytes(junit(report).encode())
        reproductions = {original: (Path(published).relative_to(out).as_posix(), shortened[published]) for original, published in report.shortened.items() if published in shortened}
        (staging / REPORT_FILES["html"]).write_bytes(html(report, replayed_traces(report), reproductions).encode())

    publish_directory(out, fill, REPORT_SET)


def replayed_traces(report: Certification) -> dict[str, Trace]:
    """The certified traces that can be read, by path: the HTML report draws and maps them."""
    found = {}
    for result in report.results:
        try:
            found[result.trace] = traces.read(Path(result.trace))
        except traces.TraceError:
            continue
    return found
