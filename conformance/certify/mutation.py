"""The mutation score: the corpus replayed through every seeded-bug adapter, and where each is caught.

A mutant counts as caught only by traces it departs from that every allowed reading of the
specification conforms to (conformance/certify/precision.py): a trace that failed some allowed
reading too would catch a choice, not a bug.

A corpus of a Kafka profile is scored against that profile's other readings as well
(model.config.other_readings): each option in which it differs from kip595 set back alone
("option NAME flipped"), and each alternative its release does not take at a point it pins
("POINT=ALTERNATIVE"). An implementation of the release that read one of them the other way must
fail the corpus too.
"""

from functools import partial
from pathlib import Path

import msgspec

from adapters.contract import Adapter
from adapters.model_adapter import ModelAdapter
from adapters.mutants import MUTANTS, mutant_adapter
from adapters.node_models import StepFunction
from adapters.process_lifetime import forked_map
from adapters.registry import adapter_factory, reference_options
from conformance.certify.precision import CORPUS_VOTERS, load_corpus, pinned_points, precise_traces, precision_adapters
from conformance.certify.replay import DEPARTS, TraceResult, replay, trace_files
from conformance.certify.verdicts import verdicts
from conformance.corpus.cells import Reading, Touched, readings
from model import node as nodes
from model.choices import allowed_transitions
from model.config import ClusterConfig, NodeConfig, other_readings
from model.events import Event
from model.state import NodeState
from model.transitions import Transition
from spec.trace import Input, Outputs, Trace

MIN_CATCHING_TRACES = 3  # a mutant caught by fewer traces is caught by luck more than by design
BASE_PROFILE = "kip595"  # the KIP's reading: a corpus without KRaft traces is scored as one of it


_SHADOWED = {
    "option discovery_includes_self flipped": "OBS-2 is left open: a fetch to a random voter may go to any voter, the node itself included; "
    "flipped, the pick ranges over the other voters only, each an outcome the profile allows, so every step of it is accepted",
    "FETCH-RESP-3=apply": "with stale_responses_ignored a Fetch response other than the one in flight is dropped before FETCH-RESP-3 is consulted "
    "(fetch.handle_fetch_response), so the pick is never read",
    "FETCH-RESP-3=take-as-answer": "as for apply: the response is dropped before FETCH-RESP-3 is consulted, so the pick is never read",
    "COMMON-4B=invalid-request": "with voter_set_unchecked no request is refused for a leader or successor outside the voter set, so every refusal "
    "by-field is INVALID_REQUEST already: the two readings answer alike",
    "VOTER-ONLY-1=reject": "with voter_set_unchecked an observer's BeginQuorumEpoch is never checked against VOTER-ONLY-1 (begin_epoch), so the pick is never read",
}
# Before KIP-853 (Kafka 3.7 and 3.8), where a voter never looks for the leader:
_BEFORE_KIP_853 = _SHADOWED | {
    "option discovery_includes_self flipped": "only an observer looks for the leader (unattached_voter_waits), and an observer is not one of "
    "the voters, so it picks from the same voters either way",
}
# Kafka 3.7 checks the voter set before anything else reads the leader a request names:
_KAFKA_3_7 = _BEFORE_KIP_853 | {
    "option leader_outside_voters_ignored flipped": "with voter_set_checked_late a BeginQuorumEpoch or EndQuorumEpoch naming a leader outside "
    "the voter set is refused INCONSISTENT_VOTER_SET before the option is read (begin_epoch, end_epoch)",
}
# Besides, under a 4.x profile (pre-votes, no observer fetch timer):
_KAFKA_4 = (
    _SHADOWED
    | {
        "option stalled_fetch_any_voter flipped": "with no observer fetch timer (observer_fetch_timeout off) no node is ever fetch_stalled, so the "
        "option only decides where a follower's timed-out Fetch goes: flipped, to its leader, one of the voters OBS-2 (left open) may pick",
        "option observer_fetch_timeout flipped": "it is read only where an observer's fetch timer fires, and under the profile no observer arms one "
        "(node.armed_timers), so no trace has that input; on every other input the readings step alike",
        "END-REQ-5=after-standing": "with pre_vote the first successor stands as prospective, keeping its epoch and leader, so its answer carries "
        "the same leader and epoch whether built before or after it stands",
    }
)
# The readings of a profile no node-level trace can fail, and why: on every input, the reading's
# outputs are among those the profile allows (tests/test_corpus_power.py replays each through the
# profile's corpus and walks, and checks the reason holds).
UNOBSERVABLE: dict[str, dict[str, str]] = {"kafka-3.7": _KAFKA_3_7, "kafka-3.8": _BEFORE_KIP_853, "kafka-3.9": _SHADOWED, "kafka-4.0": _KAFKA_4, "kafka-4.3": _KAFKA_4}
# The readings of a profile that a trace can fail but the corpus's searches do not reach, and the
# library scenario (traces/scenarios/) that fails them, which tests/test_corpus_power.py replays
# under the reading. A leader's request timer after a voter's diverging Fetch and before any Fetch
# it serves: the searches that reach a diverging Fetch at a leader time no request out.
_DIVERGING_ACK = {"option served_fetch_acknowledges flipped": "kafka-3.8-diverging-fetch-does-not-acknowledge-the-leader"}
UNREACHED: dict[str, dict[str, str]] = {"kafka-3.7": _DIVERGING_ACK, "kafka-3.8": _DIVERGING_ACK}


class MutantScore(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str
    failed: int  # traces the mutant departs from that every allowed reading conforms to
    rule: str  # the rule it breaks most consistently: the largest share of its traces failing
    first: str  # where it is first caught: trace and step
    unobservable: str = ""  # for a mutant or reading no trace of the corpus can fail, why (n/a)


def reading_step(name: str) -> StepFunction:
    """The reference step under one of the node's other readings (model.config.other_readings)."""

    read: dict[NodeConfig, NodeConfig] = {}

    def step(config: NodeConfig, state: NodeState, event: Event) -> Transition:
        if config not in read:
            read[config] = other_readings(config)[name]
        return nodes.step(read[config], state, event)

    return step


def profile_readings(profile_name: str) -> list[tuple[str, str, ModelAdapter]]:
    """A profile's other readings (model.config.other_readings): (row name, what it is, the reference adapter reading it so)."""
    readings = other_readings(ClusterConfig(voters=CORPUS_VOTERS, profile=profile_name).node(CORPUS_VOTERS[0]))
    return [(name, f"{profile_name} read with {name}", ModelAdapter(name, {"kraft": reading_step(name)})) for name in readings]


def corpus_profile(loaded: list[tuple[Path, Trace]]) -> str:
    """The model profile a corpus's KRaft traces were generated under (kip595 if it has none)."""
    profiles = {trace.header.setting.profile for _, trace in loaded if hasattr(trace.header.setting, "profile")}
    return min(profiles) if len(profiles) == 1 else BASE_PROFILE


def mutation_scores(corpus: Path, verify: bool = True, workers: int = 1) -> list[MutantScore]:
    """Replay the corpus through every mutant, and its profile's other readings (no reports):
    which traces catch each, and on which rule. The adapters replay in `workers` processes at
    once (forked_map); the scores are the same for any number. Each adapter replays only the
    traces where it may step otherwise than the reference (TouchedRun): elsewhere it runs as the
    reference does, step for step, and its result is the reference's."""
    loaded = load_corpus(trace_files(corpus, verify))
    profile_name = corpus_profile(loaded)
    systems = {trace.header.system for _, trace in loaded}
    precision = precision_adapters(combinations=2, random_runs=2, pinned=pinned_points(loaded))
    mutants = [mutant for mutant in MUTANTS.values() if mutant.system in systems]
    readings_ = profile_readings(profile_name)
    reference = TouchedRun(loaded)
    runs = [partial(reference.replay_named, name) for name in precision]
    runs += [partial(reference.replay_through, mutant_adapter(mutant.name), f"mutant {mutant.name}") for mutant in mutants]
    runs += [partial(reference.replay_through, adapter, name) for name, _, adapter in readings_]
    results = list(forked_map(lambda run: run(), runs, workers))
    precise = precise_traces(loaded, results[: len(precision)])
    caught = iter(results[len(precision) :])
    unobservable = UNOBSERVABLE.get(profile_name, {}) | {
        name: f"the corpus's searches do not reach it; the scenario {scenario} fails it" for name, scenario in UNREACHED.get(profile_name, {}).items()
    }
    return [
        score(mutant.name, mutant.description, next(caught), precise)
        if mutant.system in systems
        else MutantScore(name=mutant.name, description=mutant.description, failed=0, rule="-", first="-", unobservable=f"it changes {mutant.system} replicas; the corpus has no readable trace of them")
        for mutant in MUTANTS.values()
    ] + [msgspec.structs.replace(score(name, description, next(caught), precise), unobservable=unobservable.get(name, "")) for name, description, _ in readings_]


class TouchingReference(ModelAdapter):
    """The reference, noting at each step what the step depends on as far as a reading can change
    it (conformance.corpus.cells.Touched: its input kind, the choice points it consulted, the
    options it read)."""

    def __init__(self) -> None:
        super().__init__("reference")
        self.touched: list[Touched] = []

    def start(self, header) -> None:
        self.touched = []  # first: a start that fails leaves nothing of the trace before
        super().start(header)

    def step(self, event: Input) -> Outputs:
        consulted = frozenset(allowed_transitions(self.step_function, self.config, self.state, event)[0].consulted)
        self.touched.append(Touched(self.step_function, self.config, self.state, event, consulted))
        return super().step(event)


class TouchedRun:
    """The corpus replayed through the reference once, with what each of its steps touched: an
    adapter that is the reference read otherwise (a seeded bug, another reading of the profile,
    other picks at some choice points) steps as the reference does on every step where it may not
    differ (Reading.may_differ), so on a trace where it may differ nowhere its result is the
    reference's, and the trace is not replayed (the model is deterministic)."""

    def __init__(self, loaded: list[tuple[Path, Trace]]) -> None:
        self.loaded = loaded
        adapter = TouchingReference()
        self.results, self.touched, self.readings = [], [], []
        for path, trace in loaded:
            self.results.append(replay(adapter, trace, str(path)))
            self.touched.append(adapter.touched)
            self.readings.append({reading.name: reading for reading in readings(adapter.model, adapter.config)} if adapter.model else {})

    def replay_through(self, adapter: Adapter, reading: str | Reading | None) -> list[TraceResult]:
        """The corpus through `adapter`, the reference read as `reading` (a name of cells.readings
        at each trace's node, or the Reading itself; None, or a name the node lacks: anything):
        replayed only where it may step otherwise."""
        found = []
        for at, (path, trace) in enumerate(self.loaded):
            where = self.readings[at].get(reading) if isinstance(reading, str) else reading
            differs = where is None or any(where.may_differ(touched) for touched in self.touched[at])
            found.append(replay(adapter, trace, str(path)) if differs else self.results[at])
        return found

    def replay_named(self, name: str) -> list[TraceResult]:
        """The corpus through the adapter of that name (adapters.registry): the reference with
        picks at some choice points differs only where a step consults one; a random or lacking
        one is replayed whole."""
        options = reference_options(name.partition(":")[2])
        picks = options["picks"]
        fixed = options["random_seed"] is None and not options["lacks"] and options["profile"] is None and picks
        with adapter_factory(name) as make:
            return self.replay_through(make(), Reading(name, nodes.step, points=frozenset(point for point, _ in picks)) if fixed else None)


def score(name: str, description: str, results: list[TraceResult], precise: set[str]) -> MutantScore:
    """One adapter's row: the precise traces it departs from, its most consistently broken rule, and its first catch."""
    failing = [r for r in results if r.verdict == DEPARTS and r.trace in precise]
    rule, first = "-", "-"
    if failing:
        departed = [v for v in verdicts(results) if v.verdict == DEPARTS]
        rule = max(departed, key=lambda v: v.traces_failed / (v.traces_failed + v.steps_passed)).rule if departed else "-"
        earliest = min(failing, key=lambda r: (r.divergence.step, r.trace))
        first = f"{Path(earliest.trace).name} step {earliest.divergence.step}"
    return MutantScore(name=name, description=description, failed=len(failing), rule=rule, first=first)
