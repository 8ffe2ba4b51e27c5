"""The scope of a choice (model/choices.py): replay holds a trace to the alternative it first took
at a one-way point, and lets an each-time point be resolved anew at each occurrence."""

import re

import msgspec

from adapters.model_adapter import ModelAdapter
from conformance.certify.precision import load_corpus
from conformance.certify.replay import CONFORMS, DEPARTS, TraceResult, failure_text, replay, trace_files
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


def test_results_saved_before_first_shown_still_load():
    result = msgspec.json.decode(b'{"trace":"t","name":"t","node":1,"steps":1,"steps_run":1,"verdict":"conforms","passed":true}', type=TraceResult)
    assert result.first_shown == {}
