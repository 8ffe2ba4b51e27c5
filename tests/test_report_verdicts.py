"""Every report renders the four trace verdicts and the five rule verdicts, the implementation's
readings at the choice points, the capabilities it lacks, and what else a divergent step
allowed: certifications run through the real pipeline on the shipped corpus."""

import re
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

import pytest

from adapters.registry import adapter_factory
from conformance.certify.certification import certify
from conformance.certify.replay import trace_files
from conformance.certify.reports.terminal import terminal_summary
from conformance.certify.reports.wording import steps_text
from conformance.cli import main
from conformance.corpus.generate import DEFAULT_CORPUS
from model.choices import CHOICE_POINTS
from model.events import Request
from model.messages import OffsetsForLeaderEpochRequest
from spec import trace as traces

pytest_plugins = ["pytester"]

LACKS = "reference:lacks=OffsetsForLeaderEpoch"
NEEDS = "needs OffsetsForLeaderEpoch, which the implementation declares it lacks"
DEPARTS = "mutant:hw-any-epoch"
RANDOM = "reference:random=1"  # takes several alternatives at the choice points
ALLOWING = "mutant:fetch-no-diverging-epoch"  # departs where FETCH-REQ-3 allowed another error code too (and FETCH-REQ-3A another epoch)
ALSO_ALLOWED = "also allowed at this step: FETCH-REQ-3"  # =offset-out-of-range, or with FETCH-REQ-3A's alternatives
SHIPPED = trace_files(DEFAULT_CORPUS)


class Reports:
    """A certification and the report files it published."""

    def __init__(self, adapter: str, out: Path, corpus: Path = DEFAULT_CORPUS) -> None:
        self.report = certify(adapter, adapter_factory(adapter), corpus, out)
        self.out = out
        self.terminal = terminal_summary(self.report, out)
        self.markdown = (out / "report.md").read_text()
        self.html = (out / "report.html").read_text()
        self.junit_text = (out / "junit.xml").read_text()
        self.junit = ElementTree.fromstring(self.junit_text)


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def terminal_readings(text: str) -> dict[str, int]:
    """The terminal summary's choice-point table read back, by its columns: "CHOICE=alternative" -> steps."""
    lines = text.split("\nchoice point", 1)[1].splitlines()
    spans = [m.span() for m in re.finditer(r"-+", lines[1])]
    found: dict[str, int] = {}
    point = ""
    for line in lines[2:]:
        if not line.strip():
            break
        cells = [line[a:b].strip() for a, b in spans]
        point = cells[0] or point
        if cells[1]:
            found[f"{point}={cells[1].removesuffix(' (the default)')}"] = int(cells[2])
    return found


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    """Certify once per adapter and module."""
    done: dict[str, Reports] = {}

    def run(adapter: str) -> Reports:
        if adapter not in done:
            done[adapter] = Reports(adapter, tmp_path_factory.mktemp("certify") / "out")
        return done[adapter]

    return run


def needs_offsets(path: Path) -> bool:
    """A KRaft trace that sends the node an OffsetsForLeaderEpoch request (read here, not by replay)."""
    built = traces.read(path)
    return built.header.cluster is not None and any(type(s.input) is Request and type(s.input.message) is OffsetsForLeaderEpochRequest for s in built.steps)


@pytest.fixture(scope="module")
def needing() -> list[Path]:
    return [path for path in SHIPPED if needs_offsets(path)]


def totals(conform: int, depart: int, inapplicable: int, errors: int) -> str:
    return f"{conform} conform, {depart} depart, {inapplicable} not applicable, {errors} {'error' if errors == 1 else 'errors'}, {conform + depart + inapplicable + errors} in all"


def test_not_applicable_traces_are_totalled_in_every_report(certified, needing):
    run = certified(LACKS)
    expected = totals(len(SHIPPED) - len(needing), 0, len(needing), 0)
    assert needing and run.report.not_applicable == len(needing)
    assert re.search(rf"^traces +{re.escape(expected)}$", run.terminal, re.MULTILINE)
    assert f"Traces: {expected} " in run.markdown
    assert f"<tr><td>traces</td><td>{expected}</td></tr>" in run.html
    assert "failing trace" not in run.terminal and "first divergence" not in run.terminal  # not applicable is not failing
    assert between(run.markdown, "## Divergences and errors", "##").strip() == "None."


def test_the_capability_lacking_is_named_with_its_traces(certified, needing):
    run = certified(LACKS)
    line = f"OffsetsForLeaderEpoch: {len(needing)} traces not applicable"
    assert between(run.markdown, "## Not applicable\n", "## ").count(f"- {line}") == 1
    assert f"<li>{line}</li>" in between(run.html, '<section id="not-applicable">', "</section>")
    assert re.search(rf"^lacks +{line}$", run.terminal, re.MULTILINE)
    traces_table = between(run.html, '<section id="traces">', "</section>")
    for path in needing:
        row = traces_table.split(f'<td class="mono">{path.name}</td>', 1)[1].split("</tr>", 1)[0]
        assert f'<span class="inapplicable">not applicable: {NEEDS}</span>' in row


def test_junit_skips_the_traces_not_applicable(certified, needing):
    junit = certified(LACKS).junit
    assert (junit.get("tests"), junit.get("failures"), junit.get("errors"), junit.get("skipped")) == (str(len(SHIPPED)), "0", "0", str(len(needing)))
    skipped = {case.get("name"): case.find("skipped").get("message") for case in junit if case.find("skipped") is not None}
    assert skipped == {path.name: NEEDS for path in needing}


def test_not_applicable_traces_do_not_fail_the_run(tmp_path, capsys, needing):
    assert main(["certify", "--adapter", LACKS, "--out", str(tmp_path)]) == 0
    assert f"{len(needing)} not applicable" in capsys.readouterr().out


def test_departing_traces_are_failures_listed_as_departing(certified):
    run = certified(DEPARTS)
    departing = [r for r in run.report.results if r.divergence is not None]
    expected = totals(len(SHIPPED) - len(departing), len(departing), 0, 0)
    assert departing and re.search(rf"^traces +{re.escape(expected)}$", run.terminal, re.MULTILINE)
    assert f"Traces: {expected} " in run.markdown and f"<tr><td>traces</td><td>{expected}</td></tr>" in run.html
    assert (run.junit.get("failures"), run.junit.get("errors"), run.junit.get("skipped")) == (str(len(departing)), "0", "0")
    assert len(run.junit.findall("testcase/failure")) == len(departing) and not run.junit.findall("testcase/error")
    listed = [line.split() for line in run.terminal.split("failing trace", 1)[1].splitlines() if line.startswith("corpus-")]
    assert listed and [(row[0], row[1]) for row in listed] == [(Path(r.trace).name, "departs") for r in departing[: len(listed)]]
    assert f"### `{departing[0].trace}` (departs)" in run.markdown


def test_the_rules_row_totals_the_five_rule_verdicts(certified):
    run = certified(DEPARTS)
    counted = Counter(v.verdict for v in run.report.rules)
    expected = f"{counted['conforms']} conform, {counted['departs']} depart, {counted['not applicable']} not applicable, {counted['error']} errors, {counted['not exercised']} not exercised"
    assert counted["departs"] and counted["not exercised"]
    assert re.search(rf"^rules +{re.escape(expected)}$", run.terminal, re.MULTILINE)
    assert f"Rules: {expected}." in run.markdown and f"<tr><td>rules</td><td>{expected}</td></tr>" in run.html
    row = run.html.split('id="rule-HW-1"')[1].split("</tr>")[0]
    assert '<span class="verdict departs">departs</span>' in row


def test_errors_and_not_applicable_traces_in_one_corpus(tmp_path, needing):
    """An unreadable trace errs, one needing OffsetsForLeaderEpoch is not applicable, the rest conform."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    plain = [path for path in SHIPPED if path not in needing][:3]
    for path in [*plain, needing[0]]:
        (corpus / path.name).write_bytes(path.read_bytes())
    (corpus / "zz-broken.jsonl").write_bytes(plain[0].read_bytes()[:-30])
    run = Reports(LACKS, tmp_path / "out", corpus)
    expected = totals(3, 0, 1, 1)
    assert re.search(rf"^traces +{re.escape(expected)}$", run.terminal, re.MULTILINE)
    assert f"Traces: {expected} " in run.markdown and f"<tr><td>traces</td><td>{expected}</td></tr>" in run.html
    assert (run.junit.get("tests"), run.junit.get("failures"), run.junit.get("errors"), run.junit.get("skipped")) == ("5", "0", "1", "1")
    error = run.junit.find("testcase[@name='zz-broken.jsonl']/error")
    assert error is not None and error.get("message").startswith("invalid trace: ")
    assert re.search(r"^zz-broken\.jsonl +error ", run.terminal, re.MULTILINE) and needing[0].name not in run.terminal
    assert "first error, " in run.terminal
    assert f"### `{corpus / 'zz-broken.jsonl'}` (error)" in run.markdown and f"### `{corpus / needing[0].name}`" not in run.markdown
    # A rule only the trace not applicable cites is not applicable, in its CSS class too.
    inapplicable = [v.rule for v in run.report.rules if v.verdict == "not applicable"]
    cited_elsewhere = {rule for path in plain for step in traces.read(path).steps for rule in step.rules}
    cited = {rule for step in traces.read(needing[0]).steps for rule in step.rules} - cited_elsewhere
    assert cited and set(inapplicable) == cited
    for rule in inapplicable:
        row = run.html.split(f'id="rule-{rule}"')[1].split("</tr>")[0]
        assert '<span class="verdict not-applicable">not applicable</span>' in row and "(not applicable)" in row
    assert 'class="na" title=' in run.html  # heat map cells only the trace not applicable reaches


def test_every_reading_is_listed_with_its_question(certified):
    run = certified(RANDOM)
    readings = run.report.readings
    fetch = {key.split("=", 1)[1]: count for key, count in readings.items() if key.startswith("FETCH-REQ-5=")}
    assert set(fetch) == {"epoch-first", "leadership-first"}  # a random implementation takes both
    question = CHOICE_POINTS["FETCH-REQ-5"].question
    markdown_row = next(line for line in run.markdown.splitlines() if line.startswith("| `FETCH-REQ-5`"))
    html_row = run.html.split('id="choice-FETCH-REQ-5"')[1].split("</tr>")[0]
    for row in (markdown_row, html_row):
        assert question in row
        assert f"epoch-first (the default): {fetch['epoch-first']:,} steps" in row and f"leadership-first: {fetch['leadership-first']:,} steps" in row
    assert terminal_readings(run.terminal) == readings
    choices = between(run.markdown, "## Choice points", "## ")
    for key, count in readings.items():
        point, alternative = key.split("=", 1)
        row = next(line for line in choices.splitlines() if line.startswith(f"| `{point}`"))
        assert re.search(rf"{re.escape(alternative)}( \(the default\))?: {count:,} steps?\b", row), key


def test_skipped_steps_are_counted(certified):
    run = certified(RANDOM)
    skipped = sum(r.steps_skipped for r in run.report.results)
    assert skipped > 0  # a node fetching from one voter gets no response from the others
    words = f"{skipped:,} skipped (answers to no request the implementation awaited)"
    assert words in run.terminal and words in run.markdown and words in run.html
    assert steps_text(5, 9, 0) == "5 of 9"  # nothing skipped: nothing said


def test_a_divergence_says_what_else_the_step_allowed(certified):
    run = certified(ALLOWING)
    allowing = [r for r in run.report.results if r.divergence is not None and r.divergence.allowed]
    assert allowing
    assert run.markdown.count(ALSO_ALLOWED) == len(allowing)
    assert between(run.html, '<section id="divergences">', "</section>").count(f'<p class="mono">{ALSO_ALLOWED}') == len(allowing)
    first = next(r for r in run.report.results if r.verdict == "departs")
    assert (f"\n  {ALSO_ALLOWED}" in run.terminal) == bool(first.divergence.allowed)


def test_the_same_certification_gives_the_same_reports(certified):
    """Byte for byte, but for the timings."""
    run = certified(RANDOM)
    again = Reports(RANDOM, run.out)
    timings = {"markdown": r" in [0-9.]+ s;", "html": r"<tr><td>seconds</td><td>[0-9.]+</td></tr>", "junit_text": r' time="[^"]*"'}
    for report, timing in timings.items():
        assert re.sub(timing, "", getattr(run, report)) == re.sub(timing, "", getattr(again, report)), report


def test_the_pytest_plugin_skips_traces_not_applicable_and_shows_what_else_was_allowed(pytester: pytest.Pytester, certified, needing):
    corpus = pytester.path / "corpus"
    corpus.mkdir()
    divergent = next(Path(r.trace) for r in certified(ALLOWING).report.results if r.divergence is not None and r.divergence.allowed)
    for path in (needing[0], divergent):
        (corpus / path.name).write_bytes(path.read_bytes())
    result = pytester.runpytest_subprocess(f"--kraftcheck-adapter={LACKS}", f"--kraftcheck-corpus={corpus}", "-rs", timeout=60)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED *{NEEDS}"])
    result = pytester.runpytest_subprocess(f"--kraftcheck-adapter={ALLOWING}", f"--kraftcheck-corpus={corpus}", "-k", divergent.name, timeout=60)
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["verdict:  departs", f"{ALSO_ALLOWED}*"])
