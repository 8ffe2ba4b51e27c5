"""Replay: drive an adapter through traces and find the first step where it departs from what
the specification allows.

At each step the node's response is compared field by field (error codes by wire number), the
requests it sends as a multiset, and its state wherever the adapter can observe it, against
every outcome the specification allows there (model/choices.py): the trace records the
model's default, and where the node took another alternative, replay follows it. Each trace
gets one of four verdicts: conforms; departs (an output the specification forbids); not
applicable (it needs a capability the adapter declared it lacks); error (the adapter failed:
crashed, hung, answered garbage, or the trace could not be read). The other traces still run.
"""

import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from adapters.contract import Adapter, AdapterError, CapabilityLacking
from adapters.node_models import model_for
from conformance.certify.comparison import compare, difference, matches
from conformance.corpus.manifest import changed_since_generated, verified_files
from conformance.corpus.reference import build_trace, event_text
from conformance.text import readable
from model.choices import CHOICE_POINTS, ONE_WAY, Outcome, allowed_transitions, rule_of
from model.config import Timing
from model.events import Response
from spec.attribution import attributed_rules
from spec import trace as traces
from spec.trace import Input, Step, Trace

JSON_LIMIT = 20_000  # characters of each side's JSON a divergence keeps (an implementation may send anything)
MAX_FOLLOWED = 64  # model states (with their bound choices) followed at once where several allowed outcomes match what the node did

CONFORMS, DEPARTS, NOT_APPLICABLE, ERROR = "conforms", "departs", "not applicable", "error"
VERDICTS = (CONFORMS, DEPARTS, NOT_APPLICABLE, ERROR)


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """The first difference between what a trace expects and what the adapter did."""

    step: int
    input: str  # the step's input in words
    field: str  # e.g. response.PartitionErrorCode, sends, state.high_watermark
    expected: str
    actual: str
    rules: tuple[str, ...]  # the rules the step cites that decide a differing field (spec/attribution.py)
    differing: tuple[str, ...] = ()  # every differing field of the part that differs, `field` first
    expected_json: str = ""  # that part (the response, the sends, the state...) as the protocol's JSON, every field shown
    actual_json: str = ""
    allowed: tuple[str, ...] = ()  # the other alternatives the step allowed (choice point=alternative,...), none matching either
    cited: tuple[str, ...] = ()  # every rule the step cites


class TraceResult(msgspec.Struct, frozen=True, kw_only=True):
    trace: str  # the file
    name: str
    node: int
    steps: int  # steps in the trace
    steps_run: int  # steps that matched before the end or the divergence
    verdict: str  # one of VERDICTS
    passed: bool  # the verdict is "conforms"
    steps_skipped: int = 0  # responses to requests the node did not send (it took another alternative)
    divergence: Divergence | None = None
    failure: str | None = None  # the adapter failed, or the trace could not be read
    lacks: tuple[str, ...] = ()  # the capabilities the trace needs that the adapter declared it lacks
    readings: dict[str, int] = {}  # "CHOICE=alternative" -> steps where the node showed it took that alternative
    first_shown: dict[str, int] = {}  # "CHOICE=alternative" -> the first step that showed it
    rules_passed: tuple[str, ...] = ()  # rule IDs of the steps that matched
    rules_failed: tuple[str, ...] = ()  # rule IDs of the step that diverged or on which the adapter failed
    rules_not_applicable: tuple[str, ...] = ()  # a trace not applicable: the rule IDs its steps cite
    seconds: float | None = 0.0  # wall seconds; None in a report that leaves timings out (certify --reproducible)


class ResponseBinder:
    """Binds a trace's responses to the requests the node actually sent.

    A trace's response answers a request the reference sent. Where the node took another
    alternative (it fetched from voter 3 alone, where the reference asked every voter), a
    response from a voter the node's latest sending of that request did not go to is delivered
    as coming from a destination the node awaits: one that sending went to (a step that sends a
    request again supersedes where it went before, as a node that re-sends on a timeout gives
    up on the earlier ones) and that has not answered since. A re-addressed response takes the
    place of the trace's own from that destination: a destination given one answers no more
    often than the node sent it the request, so no voter answers one sending twice. Any other
    response from a voter the node sent the request to is delivered as it is (late, or
    duplicated as a network may); one to a request the node never sent is skipped: no network
    could deliver it.
    """

    def __init__(self) -> None:
        self.sent: dict[bytes, Counter[int]] = {}  # request -> how often the node sent it to each destination
        self.answered: dict[bytes, Counter[int]] = {}  # request -> how many responses were delivered from each destination
        self.readdressed: dict[bytes, set[int]] = {}  # request -> the destinations a re-addressed response was delivered from
        self.latest: dict[bytes, list[int]] = {}  # request -> where its latest sending went
        self.waiting: dict[bytes, list[int]] = {}  # request -> where its latest sending went, not answered since

    def note(self, sends: Iterable) -> None:
        latest: dict[bytes, list[int]] = {}
        for send in sends:
            key = msgspec.msgpack.encode(send.message)
            self.sent.setdefault(key, Counter())[send.destination] += 1
            latest.setdefault(key, []).append(send.destination)
        self.latest.update(latest)
        self.waiting.update((key, list(destinations)) for key, destinations in latest.items())

    def bind(self, event: Input) -> Input | None:
        if type(event) is not Response:
            return event
        key = msgspec.msgpack.encode(event.request)
        waiting = self.waiting.get(key, [])
        answered = self.answered.setdefault(key, Counter())
        if waiting and event.source not in self.latest[key]:  # the node asked others: one of them answers
            self.readdressed.setdefault(key, set()).add(waiting[-1])
            event = msgspec.structs.replace(event, source=waiting[-1])
        elif event.source not in waiting:
            sent = self.sent.get(key, Counter())[event.source]
            if not sent or (event.source in self.readdressed.get(key, ()) and answered[event.source] >= sent):
                return None  # never asked, or a re-addressed response took the place of this answer
        if event.source in waiting:
            waiting.remove(event.source)
        answered[event.source] += 1
        return event


def _alternatives_text(step: Step) -> str:
    return "; ".join(",".join(f"{name}={pick}" for name, pick in alternative.choices.items()) for alternative in step.allowed) or "none"


def check_follows_model(trace: Trace) -> None:
    """A trace's expectations must be the model's along its own inputs (every choice point at its
    default), or replay would judge against something else; TraceError names the step."""
    header = trace.header
    try:
        made = build_trace(header.name, header.setting, header.node, [step.input for step in trace.steps], header.origin, initial=header.initial)
    except Exception as error:  # noqa: BLE001 - a trace no node could be given
        raise traces.TraceError(f"the specification's model cannot take its inputs ({type(error).__name__}: {error})") from None
    for recorded, model_step in zip(trace.steps, made.steps):
        found = compare(model_step.expect, model_step.state if recorded.state is not None else None, recorded.expect, recorded.state)
        if found:
            raise traces.TraceError(f"step {recorded.step}: {found.field} is recorded as {found.actual}, the specification's model gives {found.expected}")
        if recorded.rules != model_step.rules:
            raise traces.TraceError(f"step {recorded.step}: the rules are recorded as {' '.join(recorded.rules)}, the specification's model cites {' '.join(model_step.rules)}")
        if recorded.allowed != model_step.allowed:
            raise traces.TraceError(
                f"step {recorded.step}: the other allowed outcomes are recorded as {_alternatives_text(recorded)}, "
                f"the specification's model allows {_alternatives_text(model_step)} (compared with their outputs and states)"
            )


def _readings(outcomes: list[Outcome], matching: list[Outcome]) -> list[str]:
    """The alternatives a step shows the node took: a choice point where every matching outcome
    took one alternative and some outcome that did not match took another."""
    found = []
    for name in dict.fromkeys(name for outcome in matching for name in outcome.consulted):
        taken = {dict(outcome.picks).get(name) for outcome in matching}
        others = {dict(outcome.picks).get(name) for outcome in outcomes if outcome not in matching}
        if len(taken) == 1 and others - taken:
            found.append(f"{name}={taken.pop()}")
    return found


class Followed(NamedTuple):
    """A model state replay follows, with the one-way choice points bound on the way to it: an
    implementation resolves such a point one way throughout (model/choices.py, ONE_WAY), so a
    trace is held to the alternative it took at the point's first use."""

    state: Any
    bound: dict[str, tuple[str, int]]  # point -> (alternative, the step that bound it)

    def key(self) -> tuple:
        """What makes two followed states the same: the state and the alternatives bound (not where)."""
        return self.state, tuple(sorted((name, alternative) for name, (alternative, _) in self.bound.items()))


def conflict(followed: Followed, outcome: Outcome) -> tuple[str, str, int, str] | None:
    """The first point the outcome resolves otherwise than `followed` bound it: (point, the bound
    alternative, the step that bound it, the outcome's alternative); None for a consistent outcome."""
    for name, pick in outcome.picks:
        held = followed.bound.get(name)
        if held is not None and held[0] != pick:
            return name, held[0], held[1], pick
    return None


def bind(followed: Followed, outcome: Outcome, step: int) -> Followed:
    """The outcome's state, with the one-way points it consulted bound where they were not yet:
    each-time points are never bound."""
    new = {name: (pick, step) for name, pick in outcome.picks if CHOICE_POINTS[name].scope == ONE_WAY and name not in followed.bound}
    return Followed(outcome.transition.state, followed.bound | new)


def choice_divergence(step: int, said: str, followed: Followed, outcome: Outcome) -> Divergence:
    """A step whose outputs the specification allows only under another alternative of a one-way
    point than the one the trace took at an earlier step: both steps named, the point's rule blamed."""
    name, held, bound_at, pick = conflict(followed, outcome)
    field = f"choice {name}"
    return Divergence(
        step=step,
        input=said,
        field=field,
        expected=f"{held} (as at step {bound_at})",
        actual=f"{pick} (at step {step}; {name} is resolved one way throughout)",
        rules=(rule_of(name),),
        cited=outcome.transition.rules,
        differing=(field,),
    )


def replay(adapter: Adapter, trace: Trace, path: str, reading: Callable[[Any], Any] | None = None, run_on: bool = False, consulted: set[str] | None = None) -> TraceResult:
    """Run one trace through an adapter, judging each step against every outcome the
    specification allows (model/choices.py) and following the node's choice, held to the
    alternative it first took at each one-way point; stop judging at the first departure or
    adapter failure. A trace that needs a capability the adapter declares it lacks is not applicable.

    `reading` maps the node's configuration (its trace's profile) to the one it is judged under
    (conformance/certify/deviation.py judges recorded answers under other readings). With
    `run_on`, a departing trace's remaining inputs are still delivered, unjudged, so that a
    recording adapter holds the implementation's answers to the whole trace: every input is the
    trace's, bound to what the node sent (ResponseBinder), whatever the reading. `consulted`
    collects the choice points the judged steps consulted (the deviation search skips pinning
    one that none did)."""
    header = trace.header
    start = time.perf_counter()
    passed_rules: set[str] = set()
    readings: Counter[str] = Counter()
    first_shown: dict[str, int] = {}
    run = skipped = 0
    model = model_for(header.setting)
    config = model.config(header.setting, header.node)
    if reading is not None:
        config = reading(config)
    binder = ResponseBinder()

    def result(verdict: str, **outcome: object) -> TraceResult:
        return TraceResult(
            trace=path,
            name=header.name,
            node=header.node,
            steps=len(trace.steps),
            steps_run=run,
            steps_skipped=skipped,
            verdict=verdict,
            passed=verdict == CONFORMS,
            rules_passed=tuple(sorted(passed_rules)),
            readings=dict(sorted(readings.items())),
            first_shown=dict(sorted(first_shown.items())),
            seconds=round(time.perf_counter() - start, 6),
            **outcome,
        )

    try:
        adapter.start(header)
        lacking = tuple(c for c in traces.required_capabilities(trace) if c in adapter.lacks)
        if lacking:
            return result(NOT_APPLICABLE, lacks=lacking, rules_not_applicable=tuple(sorted({r for step in trace.steps for r in step.rules})))
        config = with_timing(config, getattr(adapter, "timing", None))
        followed = [Followed(model.start(config, header.initial), {})]
        for index, step in enumerate(trace.steps):
            event = binder.bind(step.input)
            if event is None:
                skipped += 1
                continue
            actual = adapter.step(event)
            binder.note(actual.sends)
            observed = adapter.observe() if step.state is not None else None
            said = readable(step.note if event is step.input else event_text(event))
            judged: dict[Any, list[tuple[Outcome, bool]]] = {}  # followed state -> its outcomes, and whether each matches the node's
            for pair in followed:
                if pair.state not in judged:
                    judged[pair.state] = [
                        (outcome, matches(model, event, outcome, actual, observed))
                        for outcome in allowed_transitions(model.step, config, pair.state, event)
                    ]
            matching = [(pair, outcome) for pair in followed for outcome, matches in judged[pair.state] if matches]
            consistent = [(pair, outcome) for pair, outcome in matching if conflict(pair, outcome) is None]
            outcomes = [outcome for found in judged.values() for outcome, _ in found]
            if consulted is not None:
                consulted.update(name for outcome in outcomes for name in outcome.consulted)
            if matching and not consistent:
                divergence = choice_divergence(step.step, said, *matching[0])
                if run_on:
                    deliver(adapter, binder, trace.steps[index + 1 :])
                return result(DEPARTS, divergence=divergence, rules_failed=divergence.rules)
            if not matching:
                expected = outcomes[0]
                found = difference(model, event, expected, actual, observed)
                broken = attributed_rules(expected.transition.rules, found.differing)
                divergence = Divergence(
                    step=step.step,
                    input=said,
                    field=found.field,
                    expected=readable(found.expected),
                    actual=readable(found.actual),
                    rules=broken,
                    cited=expected.transition.rules,
                    differing=found.differing,
                    expected_json=readable(found.expected_json, JSON_LIMIT),
                    actual_json=readable(found.actual_json, JSON_LIMIT),
                    allowed=tuple(",".join(f"{n}={a}" for n, a in outcome.picks) for outcome in outcomes[1:]),
                )
                if run_on:
                    deliver(adapter, binder, trace.steps[index + 1 :])
                return result(DEPARTS, divergence=divergence, rules_failed=broken)
            for reading in _readings(outcomes, [outcome for _, outcome in matching]):
                readings[reading] += 1
                first_shown.setdefault(reading, step.step)
            following = {}
            for pair, outcome in consistent:
                bound = bind(pair, outcome, step.step)
                following.setdefault(bound.key(), bound)
            followed = list(following.values())[:MAX_FOLLOWED]
            run += 1
            passed_rules.update(consistent[0][1].transition.rules)
        adapter.close()  # the end of a trace that conformed so far is part of it: a subprocess's reset may fail it
    except CapabilityLacking as lacking:  # declined at this step: the steps from here are not applicable
        failing = run + skipped
        inapplicable = tuple(sorted({r for step in trace.steps[failing:] for r in step.rules}))
        return result(NOT_APPLICABLE, lacks=(lacking.capability,), failure=readable(f"step {failing + 1}: {lacking}"), rules_not_applicable=inapplicable)
    except Exception as error:  # noqa: BLE001 - an adapter that fails in any way fails this trace alone
        failing = run + skipped
        where, failed_rules = (f"step {failing + 1}", trace.steps[failing].rules) if failing < len(trace.steps) else ("after the last step", ())
        return result(ERROR, failure=readable(f"{where}: {failure_reason(error)}"), rules_failed=failed_rules)
    finally:
        try:
            adapter.close()
        except Exception:  # noqa: BLE001 - closing a failed adapter must not end the run either
            pass
    return result(CONFORMS)


def with_timing(config: Any, timing: Timing | None) -> Any:
    """The node's configuration with the timeouts its adapter declared it runs with (the model's
    defaults where it declared none), so that a duration the specification fixes is computed
    from them: a timer the node reports is then compared with what its own timeouts give."""
    return msgspec.structs.replace(config, timing=timing) if timing is not None and hasattr(config, "timing") else config


def deliver(adapter: Adapter, binder: ResponseBinder, steps: Iterable[Step]) -> None:
    """Deliver the steps' inputs unjudged (replay's `run_on`), until the end or the adapter fails:
    the trace has its verdict already."""
    try:
        for step in steps:
            event = binder.bind(step.input)
            if event is None:
                continue
            binder.note(adapter.step(event).sends)
            if step.state is not None:
                adapter.observe()
    except Exception:  # noqa: BLE001 - a failure past the departure changes no verdict
        pass


def failure_reason(error: Exception) -> str:
    """Why an adapter failed, in words: its own for an AdapterError, else what it raised."""
    return str(error) if isinstance(error, AdapterError) else f"the adapter raised {type(error).__name__}: {error}"


def trace_files(corpus: Path, verify: bool = True) -> list[Path]:
    """The trace files of a corpus directory (or the one file given), in name order; a corpus
    with a manifest must match it (unless `verify` is off), so a damaged corpus is not certified."""
    if corpus.is_file():
        return [corpus]
    if not corpus.is_dir():
        raise traces.TraceError(f"{corpus}: no such corpus directory or trace file")
    nested = {manifest.parent for manifest in corpus.rglob("manifest.json") if manifest.parent != corpus}  # other corpora, of other profiles
    found = sorted(p for p in corpus.rglob("*") if p.suffix in (".jsonl", ".msgpack") and p.is_file() and nested.isdisjoint(p.parents))
    if not found:
        raise traces.TraceError(f"{corpus}: no trace files (*.jsonl, *.msgpack)")
    return verified_files(corpus, found) if verify else found


def of_systems(files: list[Path], systems: tuple[str, ...] | None) -> list[Path]:
    """The files whose trace is of one of `systems` ("kraft", "isr"); all files for None.
    An unreadable file stays, so that it fails as such."""
    if systems is None:
        return files

    def wanted(path: Path) -> bool:
        try:
            return traces.read_header(path).system in systems
        except traces.TraceError:
            return True

    return [path for path in files if wanted(path)]


def replay_file(make_adapter: Callable[[], Adapter], path: Path, verify: bool = True, run_on: bool = False) -> TraceResult:
    """Read and replay one file (see replay_data)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        return invalid(path, traces.TraceError(f"{path}: cannot read: {error.strerror}"))
    return replay_data(make_adapter, path, data, changed=verify and changed_since_generated(path, data), run_on=run_on)


def replay_data(make_adapter: Callable[[], Adapter], path: Path, data: bytes, changed: bool, run_on: bool = False) -> TraceResult:
    """Replay a trace file's bytes; an unreadable trace, or one `changed` since its corpus was
    generated (its hash differs from the manifest's), fails with its error (the corpus is blamed,
    not the adapter); the run goes on."""
    try:
        trace = traces.parse(path, data)
        if changed:
            raise traces.TraceError(f"{path}: changed since the corpus was generated (its hash differs from the manifest's)")
        check_follows_model(trace)
    except traces.TraceError as error:
        return invalid(path, error)
    return replay(make_adapter(), trace, str(path), run_on=run_on)


def invalid(path: Path, error: Exception) -> TraceResult:
    return TraceResult(trace=str(path), name=path.stem, node=-1, steps=0, steps_run=0, verdict=ERROR, passed=False, failure=readable(f"invalid trace: {error}"))


def failure_text(result: TraceResult) -> str:
    """Why a trace did not conform, in one line."""
    if result.failure:
        return result.failure
    if result.divergence is None:
        return result.verdict  # conforms, or not applicable (reports say what it needs)
    d = result.divergence
    return f"step {d.step} ({d.input}): {d.field}: expected {d.expected}, got {d.actual} [rules {' '.join(d.rules) or '-'}]"
