"""The scope of a choice (model/choices.py): replay holds a trace to the alternative it first took
at a one-way point, and lets an each-time point be resolved anew at each occurrence; a run whose
traces took several alternatives of a one-way point names it in every report."""

import json
import re

import msgspec
import pytest

from adapters.model_adapter import ModelAdapter
from conformance import cli
from conformance.certify.certification import certify
from conformance.certify.precision import load_corpus
from conformance.certify.replay import CONFORMS, DEPARTS, TraceResult, failure_text, replay, trace_files
from conformance.certify.reports.terminal import terminal_summary
from conformance.corpus.generate import DEFAULT_CORPUS
from model.choices import CHOICE_POINTS, EACH_TIME, ONE_WAY, default
from spec.trace import Header, Input, Outputs

CORPUS = load_corpus(trace_files(DEFAULT_CORPUS))


class SwitchingChoices:
    """Takes `first` at a choice point until a step has used it, `then` ever after: an
    implementation that resolves the point both ways. Every other point takes its default."""

    def __init__(self, point: str, first: str, then: str) -> None:
        self.point, self.current, self.then = point, first, then
        self.used = False

    def pick(self, name: str) -> str:
        if name != self.point:
            return default(name)
        self.used = True
        return self.current

    def step_done(self) -> None:
        if self.used:
            self.current = self.then


class Switching(ModelAdapter):
    """The reference, its choices switching alternative at one point after its first use."""

    def __init__(self, point: str, first: str, then: str) -> None:
        super().__init__(f"switching {point}")
        self.switch = (point, first, then)

    def start(self, header: Header) -> None:
        super().start(header)
        self.choices = SwitchingChoices(*self.switch)
        if hasattr(self.config, "choices"):
            self.config = msgspec.structs.replace(self.config, choices=self.choices)

    def step(self, event: Input) -> Outputs:
        outputs = super().step(event)
        self.choices.step_done()
        return outputs


class ByTrace(ModelAdapter):
    """The reference, taking `picks` in the trace named `named` only: an implementation that
    resolves a point one way in one trace and another way in the others."""

    def __init__(self, named: str, picks: tuple[tuple[str, str], ...]) -> None:
        super().__init__("by-trace")
        self.named, self.chosen = named, picks

    def start(self, header: Header) -> None:
        self.picks = self.chosen if header.name == self.named else ()
        super().start(header)


def test_the_scopes_of_the_points_used_here():
    assert CHOICE_POINTS["FETCH-REQ-5"].scope == ONE_WAY
    assert CHOICE_POINTS["OBS-2"].scope == EACH_TIME


def test_a_one_way_point_taken_both_ways_departs_naming_both_steps():
    """FETCH-REQ-5 leadership-first at its first use, epoch-first after: each step alone is
    allowed, the trace is not."""
    results = [replay(Switching("FETCH-REQ-5", "leadership-first", "epoch-first"), trace, str(path)) for path, trace in CORPUS]
    departing = [r for r in results if r.verdict != CONFORMS]
    assert departing
    for result in departing:
        d = result.divergence
        assert result.verdict == DEPARTS and d.field == "choice FETCH-REQ-5", failure_text(result)
        bound = int(re.fullmatch(r"leadership-first \(as at step (\d+)\)", d.expected).group(1))
        assert bound < d.step
        assert d.actual == f"epoch-first (at step {d.step}; FETCH-REQ-5 is resolved one way throughout)"
        assert d.rules == result.rules_failed == ("FETCH-REQ-5",)
        text = failure_text(result)
        assert text.startswith(f"step {d.step} (") and f"expected leadership-first (as at step {bound})" in text
    assert {r.verdict for r in results} == {CONFORMS, DEPARTS}


def test_an_each_time_point_may_be_taken_both_ways_in_one_trace():
    """OBS-2 to one voter at its first use, to every voter after: a random voter each time, as the KIP says."""
    results = [replay(Switching("OBS-2", "one-voter:2", "every-voter"), trace, str(path)) for path, trace in CORPUS]
    assert all(r.verdict == CONFORMS for r in results), next(failure_text(r) for r in results if r.verdict != CONFORMS)
    both = [r for r in results if {"OBS-2=one-voter:2", "OBS-2=every-voter"} <= set(r.readings)]
    assert both
    for result in both:
        assert result.first_shown["OBS-2=one-voter:2"] < result.first_shown["OBS-2=every-voter"]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple:
    """Two traces showing FETCH-REQ-5, the first replayed at its default, the second leadership-first."""
    showing = [path for path, trace in CORPUS if "FETCH-REQ-5=epoch-first" in replay(ModelAdapter("reference"), trace, str(path)).readings][:2]
    corpus = tmp_path_factory.mktemp("corpus")
    for path in showing:
        (corpus / path.name).write_bytes(path.read_bytes())
    out = tmp_path_factory.mktemp("out")
    second = dict(CORPUS)[showing[1]].header.name
    report = certify("by-trace", lambda: ByTrace(second, (("FETCH-REQ-5", "leadership-first"),)), corpus, out, timings=False)
    return report, out, [corpus / path.name for path in showing]


def test_a_run_that_took_both_alternatives_of_a_one_way_point_names_it(mixed):
    report, out, (first, second) = mixed
    assert report.passed == report.traces == 2 and report.failed == 0  # each trace alone kept to one alternative
    by_trace = {r.trace: r for r in report.results}
    assert (found := report.inconsistent) and [i.point for i in found] == ["FETCH-REQ-5"]
    shown = [(s.alternative, s.trace, s.step) for s in found[0].shown]
    assert shown == [
        ("epoch-first", str(first), by_trace[str(first)].first_shown["FETCH-REQ-5=epoch-first"]),
        ("leadership-first", str(second), by_trace[str(second)].first_shown["FETCH-REQ-5=leadership-first"]),
    ]
    (_, _, step_one), (_, _, step_two) = shown
    terminal = terminal_summary(report, out)
    assert "One-way choice points the implementation resolved more than one way" in terminal
    assert re.search(rf"^FETCH-REQ-5 +epoch-first \(the default\) +{re.escape(first.name)} +{step_one}$", terminal, re.MULTILINE)
    assert re.search(rf"^ +leadership-first +{re.escape(second.name)} +{step_two}$", terminal, re.MULTILINE)
    markdown = (out / "report.md").read_text()
    section = markdown.split("### Resolved more than one way", 1)[1].split("\n## ", 1)[0]
    assert re.search(rf"\| `FETCH-REQ-5` +\| epoch-first \(the default\) +\| `{re.escape(str(first))}` +\| +{step_one} \|", section)
    assert re.search(rf"\| `FETCH-REQ-5` +\| leadership-first +\| `{re.escape(str(second))}` +\| +{step_two} \|", section)
    html = (out / "report.html").read_text()
    table = html.split('<h3 id="inconsistent">', 1)[1].split("</table>", 1)[0]
    assert table.count("<code>FETCH-REQ-5</code>") == 2
    assert f">{first.name}</a></td><td>{step_one}</td>" in table and f">{second.name}</a></td><td>{step_two}</td>" in table
    assert '<a href="#inconsistent">FETCH-REQ-5</a>' in html  # named in the summary too
    saved = json.loads((out / "report.json").read_text())
    assert saved["inconsistent"] == [{"point": "FETCH-REQ-5", "shown": [{"alternative": a, "trace": t, "step": s} for a, t, s in shown]}]


def test_a_run_that_kept_to_one_alternative_names_no_point(tmp_path):
    path, _ = CORPUS[0]
    report = certify("reference", lambda: ModelAdapter("reference"), path, tmp_path / "out", timings=False)
    assert report.inconsistent == ()
    assert "resolved more than one way" not in (tmp_path / "out" / "report.md").read_text()


def test_results_saved_before_first_shown_still_load():
    result = msgspec.json.decode(b'{"trace":"t","name":"t","node":1,"steps":1,"steps_run":1,"verdict":"conforms","passed":true}', type=TraceResult)
    assert result.first_shown == {}


def test_the_section_is_the_same_bytes_for_any_jobs(tmp_path, capsys):
    """A random reference resolves one-way points once per trace, differently across traces: the
    points it resolved more than one way are named alike whatever the number of jobs."""
    reports = []
    for jobs in ("1", "2"):
        out = tmp_path / jobs
        assert cli.main(["certify", "--adapter", "reference:random=1", "--jobs", jobs, "--reproducible", "--json", "--out", str(out)]) == 0
        assert json.loads(capsys.readouterr().out)["inconsistent"]
        reports.append([(out / name).read_bytes() for name in ("report.md", "report.json", "report.html")])
    assert reports[0] == reports[1] and b"### Resolved more than one way" in reports[0][0]
