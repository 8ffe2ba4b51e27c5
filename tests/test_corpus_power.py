"""Every shipped corpus has measured power: each seeded bug that applies to it (a KRaft mutant to
a KRaft corpus, an ISR one to a corpus with ISR traces), and under a Kafka profile each of the
profile's other readings (an option set back to the KIP's, a pinned point's other alternative),
departs on at least MIN_CATCHING_TRACES of its traces that every allowed reading of the
specification conforms to; a reading no trace can fail is named, with why, and checked.

No corpus falls short: a mutant or reading caught by fewer traces fails this test and is looked
at (raise the search budget that starves the corpus, or aim a search or its walks at the cell)."""

import json
import shutil
from functools import cache
from pathlib import Path

import pytest

from adapters.model_adapter import ModelAdapter
from adapters.mutants import MUTANTS
from conformance import cli
from conformance.certify import mutation
from conformance.certify.mutation import MIN_CATCHING_TRACES, UNOBSERVABLE, UNREACHED, MutantScore, mutation_scores, profile_readings
from conformance.certify.replay import CONFORMS, DEPARTS, NOT_APPLICABLE, replay
from conformance.certify.precision import load_corpus
from conformance.corpus.generate import DEFAULT_CORPUS, shipped_corpora
from conformance.corpus.manifest import MANIFEST
from model.config import PROFILES
from model.events import Restart
from spec import trace as traces

# The shipped corpora, by profile. The last shortfalls were under 4.x: Kafka truncates by its
# own epochs (truncate_by_own_epochs) differently from the KIP only where its log lacks the
# leader's DivergingEpoch.Epoch and holds records past EndOffset below its first later epoch,
# four elections deep; corpus-truncate's aimed walks, with fewer deliveries, reach it three times
# in each Kafka 4 corpus. A truncation that tells the leader's DivergingEpoch.EndOffset from the
# follower's own offset (truncate-by-offset-only) is in every corpus since corpus-diverge looks
# for the leader at one voter (OBS-2=one-voter:0).
CORPORA = ("kafka-3.7", "kafka-3.8", "kafka-3.9", "kafka-4.0", "kafka-4.3", "kip595")


def coverage(profile: str) -> list[dict]:
    """The manifest's coverage rows: each cell and the trace chosen for it."""
    return json.loads((shipped_corpora()[profile] / MANIFEST).read_text())["coverage"]


@cache
def scores(profile: str) -> dict[str, MutantScore]:
    return {score.name: score for score in mutation_scores(shipped_corpora()[profile], workers=3)}  # more processes than the test machine's cores


@pytest.mark.parametrize("profile", CORPORA)
def test_every_applicable_mutant_and_reading_is_caught_by_at_least_three_traces(profile):
    corpus = shipped_corpora()[profile]
    systems = {traces.read_header(path).system for path in corpus.glob("*.jsonl")}
    applicable = {name for name, mutant in MUTANTS.items() if mutant.system in systems}
    applicable |= {name for name, _, _ in profile_readings(profile) if name not in UNOBSERVABLE.get(profile, {}) | UNREACHED.get(profile, {})}
    found = scores(profile)
    short = {name for name in applicable if found[name].failed < MIN_CATCHING_TRACES}
    assert not short, {name: found[name].failed for name in short}


@pytest.mark.parametrize("profile", sorted(UNOBSERVABLE))
def test_an_unobservable_reading_conforms_to_every_trace_and_departs_nowhere_the_corpus_looked(profile):
    """Replayed, it conforms to every trace of the corpus; and no step of the corpus's searches or
    walks, where each reading was tried (conformance/corpus/cells.py), found it departing."""
    corpus = shipped_corpora()[profile]
    loaded = load_corpus(sorted(corpus.glob("*.jsonl")))
    cells = {row["cell"].split(" #")[0] for row in coverage(profile)}
    adapters = {name: adapter for name, _, adapter in profile_readings(profile)}
    for name in UNOBSERVABLE[profile]:
        verdicts = {replay(adapters[name], trace, str(path)).verdict for path, trace in loaded}
        assert verdicts <= {CONFORMS, NOT_APPLICABLE}, name
        assert f"reading {name} departs" not in cells


@pytest.mark.parametrize("profile", sorted(UNREACHED))
def test_a_reading_the_corpus_does_not_reach_departs_on_its_scenario(profile, tmp_path):
    """Each reading named unreached: the corpus catches it nowhere (else it need not be named),
    and its library scenario, which the profile's own reading passes, departs under it."""
    adapters = {name: adapter for name, _, adapter in profile_readings(profile)}
    for name, scenario in UNREACHED[profile].items():
        assert scores(profile)[name].failed == 0, name
        (_, trace), = load_corpus([scenario_trace(scenario, tmp_path / scenario)])
        assert replay(ModelAdapter("reference"), trace, scenario).verdict == CONFORMS
        assert replay(adapters[name], trace, scenario).verdict == DEPARTS, name


def scenario_trace(name: str, out: Path) -> Path:
    """The library scenario `name`, compiled to its trace in `out`."""
    assert cli.main(["scenario", "compile", str(DEFAULT_CORPUS / "scenarios" / f"{name}.scenario"), "--out", str(out)]) == 0
    (path,) = sorted(out.glob("*.jsonl"))
    return path


def test_what_makes_a_reading_unobservable_holds_in_its_profile():
    """The options each reason in UNOBSERVABLE rests on."""
    for name in ("kafka-3.7", "kafka-3.8", "kafka-3.9", "kafka-4.0", "kafka-4.3"):
        options = PROFILES[name]
        assert options.stale_responses_ignored and options.voter_set_unchecked  # FETCH-RESP-3=apply and take-as-answer, VOTER-ONLY-1=reject, COMMON-4B=invalid-request
        assert options.discovery_includes_self and (options.unattached_discovery or options.unattached_voter_waits)  # OBS-2's voters: every voter, or only observers look
    assert PROFILES["kafka-3.7"].voter_set_checked_late and not PROFILES["kafka-3.8"].voter_set_checked_late  # leader_outside_voters_ignored
    for later in (PROFILES["kafka-4.0"], PROFILES["kafka-4.3"]):
        assert not later.observer_fetch_timeout  # stalled_fetch_any_voter, observer_fetch_timeout
        assert later.pre_vote  # END-REQ-5=after-standing


@pytest.mark.parametrize("profile", CORPORA)
def test_truncation_restarts_with_a_vote_and_a_stale_leader_have_dedicated_traces(profile):
    families: dict[str, set[str]] = {}
    for row in coverage(profile):
        if " #" in row["cell"]:
            families.setdefault(row["cell"].split(" #")[0], set()).add(row["trace"])
    wanted = [f for f in families if f.startswith(("rule K101-3 | NONE:diverging", "rule FETCH-RESP-2 | NONE:diverging"))]
    wanted += [f for f in families if f.startswith("rule QSTATE-4 | file:") and "vote" in f]
    wanted += ["rule FETCH-REQ-2B | UNKNOWN_LEADER_EPOCH | stale leader"]
    assert len(wanted) >= 4
    assert {f: len(families.get(f, ())) for f in wanted if len(families.get(f, ())) < 3} == {}


@pytest.mark.parametrize("profile", CORPORA)
def test_every_kraft_node_of_a_corpus_is_seen_starting(profile):
    """No KRaft trace starts its node up: what a node sends as it starts is a step of its own.
    Under kip595 (BOOT-1) that start looks for the leader with a Fetch to every other voter (the
    only voter of its quorum has none to ask)."""
    starts = []
    for path in sorted(shipped_corpora()[profile].glob("*.jsonl")):
        trace = traces.read(path)
        if trace.header.cluster is None:
            continue
        assert not trace.header.initial.empty, path.name
        if trace.header.initial.down and trace.steps[0].input == Restart():
            starts.append((trace.header, trace.steps[0]))
    assert len(starts) >= 100
    if profile == "kip595":
        for header, step in starts:
            others = set(header.cluster.voters) - {header.node}
            assert "BOOT-1" in step.rules and {type(send.message).__name__ for send in step.expect.sends} == ({"FetchRequest"} if others else set())
            assert {send.destination for send in step.expect.sends} == others


def test_the_scores_are_the_same_for_any_number_of_jobs(tmp_path, capsys):
    """`mutants --score --jobs N`: the adapters replay in N processes at once, with the same scores.
    A slice of the kafka-4.3 corpus, so that its profile's readings are scored too."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in sorted(shipped_corpora()["kafka-4.3"].glob("*.jsonl"))[::40]:
        shutil.copy(path, corpus)
    printed = []
    for jobs in ("1", "3"):
        assert cli.main(["mutants", "--score", "--no-verify", "--corpus", str(corpus), "--jobs", jobs, "--json"]) in (0, 1)
        printed.append(json.loads(capsys.readouterr().out))
    assert printed[0] == printed[1]
    names = [row["name"] for row in printed[0]["scores"]]
    assert set(MUTANTS) < set(names) and any(name.startswith("option ") for name in names)
    assert any(row["failed"] > 0 for row in printed[0]["scores"])


@pytest.mark.parametrize("profile", ["kip595", "kafka-4.3"])
def test_replaying_only_where_an_adapter_may_step_otherwise_scores_as_replaying_every_trace(profile, monkeypatch):
    """A mutant, a reading or picks at some choice points replay only the traces where some step
    of the reference touched what they change (its input kind, an option it read, a point it
    consulted): the scores equal replaying every trace through every adapter, and most traces are
    skipped. A slice of each corpus: ISR traces and mutants under kip595, readings under kafka-4.3."""
    loaded = load_corpus(sorted(shipped_corpora()[profile].glob("*.jsonl"))[::12])
    corpus = shipped_corpora()[profile]
    monkeypatch.setattr(mutation, "load_corpus", lambda files: loaded)
    replayed = []
    shortened = mutation.TouchedRun.replay_through

    def counted(self, adapter, reading):
        found = shortened(self, adapter, reading)
        replayed.append(sum(result is not kept for result, kept in zip(found, self.results)))
        return found

    monkeypatch.setattr(mutation.TouchedRun, "replay_through", counted)
    found = mutation_scores(corpus, verify=False)
    assert 0 < sum(replayed) < len(replayed) * len(loaded) / 2
    monkeypatch.setattr(mutation.TouchedRun, "replay_through", lambda self, adapter, reading: [replay(adapter, trace, str(path)) for path, trace in self.loaded])
    assert mutation_scores(corpus, verify=False) == found
