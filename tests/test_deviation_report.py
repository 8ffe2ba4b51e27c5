"""The deviation report: certifying an implementation of one profile against another's corpus names
the options and pinned readings it takes, and leaves a plain bug unexplained; the implementation's
answers, recorded once, judge alike when played back."""

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from adapters.model_adapter import ModelAdapter
from adapters.mutants import mutant_adapter
from conformance.certify.certification import certify
from conformance import cli
from conformance.certify import deviation
from conformance.certify.deviation import Deviations, Trial, explain
from conformance.certify.playback import Playback, replay_recorded
from conformance.certify.replay import replay, trace_files
from conformance.certify.reports.terminal import terminal_summary
from conformance.corpus.generate import DEFAULT_CORPUS
from model.config import read_with
from spec import trace as traces
from profile_differences import differences
from spec.trace import Header

SHIPPED = trace_files(DEFAULT_CORPUS)
SAMPLE = SHIPPED[::8]  # about 130 traces of every kind: the whole corpus takes a minute
KAFKA = "kafka-3.9"


class FailingAt(ModelAdapter):
    """The reference, crashing at its third step."""

    def start(self, header: Header) -> None:
        super().start(header)
        self.taken = 0

    def step(self, event):
        self.taken += 1
        if self.taken == 3:
            raise RuntimeError("crashed")
        return super().step(event)


def corpus_of(files: list[Path], directory: Path) -> Path:
    directory.mkdir()
    for path in files:
        shutil.copy(path, directory / path.name)
    return directory


def without_timing(result):
    return msgspec.structs.replace(result, seconds=None)


def test_an_implementation_of_kafka_3_9_is_kip595_plus_kafka_3_9s_readings(tmp_path):
    corpus = corpus_of(SAMPLE, tmp_path / "corpus")
    report = certify("reference-kafka-3.9", lambda: ModelAdapter("reference-kafka-3.9", profile=KAFKA), corpus, tmp_path / "out", shorten_budget=0, timings=False)
    assert report.departed > 50
    found = report.deviations
    assert found.profile == "kip595" and found.complete and found.departed == report.departed
    assert found.unexplained == ()
    named = {explained.deviation for explained in found.explained}
    assert named <= differences(KAFKA)
    assert "option unattached_discovery=True" in named  # the reason nearly every trace departs at its first step
    assert all(explained.traces for explained in found.explained)
    departing = {r.trace for r in report.results if r.verdict == "departs"}
    assert set().union(*(explained.traces for explained in found.explained)) <= departing

    headline = f"reference-kafka-3.9 = kip595 + {len(named)} named deviations; 0 traces unexplained"
    out = tmp_path / "out"
    assert f"**{headline}**" in (out / "report.md").read_text()
    assert headline in (out / "report.html").read_text()
    assert headline in (out / "junit.xml").read_text()
    assert headline in terminal_summary(report, out)
    assert msgspec.convert(json.loads((out / "report.json").read_text())["deviations"], Deviations) == found

    first = {name: (out / name).read_bytes() for name in ("report.md", "report.json", "junit.xml", "report.html")}
    certify("reference-kafka-3.9", lambda: ModelAdapter("reference-kafka-3.9", profile=KAFKA), corpus, out, shorten_budget=0, timings=False)
    assert {name: (out / name).read_bytes() for name in first} == first


def test_the_reference_read_under_a_kafka_profile_is_an_implementation_of_it(tmp_path, capsys):
    """`certify --adapter reference:profile=kafka-3.9` against kip595's corpus: the model read as
    Kafka 3.9 reads KIP-595, with no JVM; it departs, and the deviation report names kafka-3.9's
    readings and leaves nothing unexplained."""
    corpus = corpus_of(SAMPLE[::4], tmp_path / "corpus")
    argv = ["certify", "--adapter", "reference:profile=kafka-3.9", "--corpus", str(corpus), "--out", str(tmp_path / "out"), "--shorten-budget", "0", "--json"]
    assert cli.main(argv) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["verdicts"]["departs"] > 10 and summary["verdicts"]["error"] == 0
    found = summary["deviations"]
    assert found["unexplained"] == [] and "option unattached_discovery=True" in {explained["deviation"] for explained in found["explained"]}


def test_a_plain_bug_is_no_named_deviation(tmp_path):
    corpus = corpus_of([path for path in SHIPPED if "-walk-" in path.name], tmp_path / "corpus")
    report = certify("mutant:hw-any-epoch", lambda: mutant_adapter("hw-any-epoch"), corpus, tmp_path / "out", shorten_budget=0, timings=False)
    assert report.departed
    assert report.deviations.explained == ()
    assert [u.trace for u in report.deviations.unexplained] == [r.trace for r in report.results if r.verdict == "departs"]
    assert all("HW-1" in u.failure for u in report.deviations.unexplained)


def test_no_search_where_nothing_departs_or_none_is_asked(tmp_path):
    corpus = corpus_of(SAMPLE[:20], tmp_path / "corpus")
    assert certify("reference", lambda: ModelAdapter("reference"), corpus, tmp_path / "a", shorten_budget=0).deviations is None
    bug = lambda: mutant_adapter("hw-any-epoch")  # noqa: E731
    assert certify("mutant", bug, corpus, tmp_path / "b", shorten_budget=0, deviation_budget=0).deviations is None


@pytest.mark.parametrize("make", [lambda: ModelAdapter("reference-kafka-3.9", profile=KAFKA), lambda: mutant_adapter("hw-any-epoch"), lambda: FailingAt("failing")], ids=["kafka-3.9", "bug", "crash"])
def test_playback_judges_as_the_live_run(make):
    for path in SAMPLE:
        live, recording = replay_recorded(make, path)
        trace = traces.read(path)
        played = replay(Playback(recording), trace, str(path))
        assert without_timing(played) == without_timing(live), path.name
        if trace.header.system == "kraft":  # the search reads KRaft traces only: ISR replicas have no profile
            assert without_timing(replay(Playback(recording), trace, str(path), reading=lambda config: read_with(config, ()))) == without_timing(live)


def recorded_sample(profile: str, count: int) -> tuple[list, dict]:
    """The first traces of the sample certified on the reference under a Kafka profile, and the
    KRaft ones' recordings: what explain() takes."""
    results, recorded = [], {}
    for path in SAMPLE[:count]:
        result, recording = replay_recorded(lambda: ModelAdapter(f"reference under {profile}", profile=profile), path)
        trace = traces.read(path)
        results.append(result)
        if trace.header.system == "kraft":
            recorded[str(path)] = trace, recording
    return results, recorded


def test_the_search_finds_the_same_with_any_number_of_jobs():
    """The candidates of a round are judged in several processes at once (more than the test
    machine's cores), and taken in order: the same deviations, the same unexplained traces."""
    results, recorded = recorded_sample(KAFKA, 40)
    found = [explain("kip595", results, recorded, jobs=jobs) for jobs in (1, 3)]
    assert found[0] == found[1]
    assert found[0].explained and found[0].complete


def test_a_trace_judged_again_only_where_a_candidate_may_judge_it_otherwise_finds_the_same(monkeypatch):
    """A trace is judged again under a candidate reading only where its judging under the reading
    chosen so far (or, for a pair, under one of its deviations alone) read the option or consulted
    the point the candidate sets otherwise: the search finds what judging every candidate on every
    trace finds. Under kafka-4.3 the whole sample needs pairs tried."""
    results, recorded = recorded_sample("kafka-4.3", len(SAMPLE))
    reuse = deviation.reused
    taken, judged = [], []

    def counted(known, reading, paths):
        trial, left = reuse(known, reading, paths)
        taken.append(len(trial.results))
        judged.append(len(left))
        return trial, left

    monkeypatch.setattr(deviation, "reused", counted)
    found = explain("kip595", results, recorded)
    assert sum(taken) > sum(judged) > 0  # most judging is saved, and some is still done
    monkeypatch.setattr(deviation, "reused", lambda known, reading, paths: (Trial(reading, {}, {}), list(paths)))
    assert explain("kip595", results, recorded) == found
