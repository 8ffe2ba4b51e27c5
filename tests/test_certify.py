"""The shipped corpus, replay and certification: the reference conforms, every mutant is caught."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from adapters.model_adapter import ModelAdapter
from adapters.mutants import MUTANTS, mutant_adapter
from conformance.certify.certification import certify
from conformance.certify.comparison import differing_part
from conformance.certify.replay import replay, trace_files
from conformance.cli import main
from conformance.corpus.generate import CORPUS_CONFIGS, DEFAULT_CORPUS, MANIFEST, GenerateOptions, generate, write_corpus
from conformance.explore.configs import resolve
from model.events import Send
from model.messages import FetchRequest
from spec import trace as traces
from spec.rules import load_rules
from spec.trace import Outputs

SHIPPED = trace_files(DEFAULT_CORPUS)


@pytest.fixture(scope="module")
def shipped():
    return {path: traces.read(path) for path in SHIPPED}


def test_the_shipped_corpus_is_what_the_generator_writes(tmp_path):
    """Same configurations and options, same bytes: the shipped corpus is up to date and reproducible
    (its searches run in 2 processes at once; the Kafka corpora's test runs them one at a time too)."""
    corpus, manifest = generate([(name, resolve(name, {})) for name in CORPUS_CONFIGS], GenerateOptions(), workers=2)
    write_corpus(tmp_path / "traces", corpus, manifest)
    written = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert written == sorted(p.name for p in DEFAULT_CORPUS.iterdir() if p.suffix in (".jsonl", ".json"))
    for name in written:
        assert (tmp_path / "traces" / name).read_bytes() == (DEFAULT_CORPUS / name).read_bytes(), name


def test_manifest_hashes_match_the_files():
    manifest = json.loads((DEFAULT_CORPUS / MANIFEST).read_text())
    assert manifest["traces"] == len(SHIPPED) == len(manifest["files"])
    for path in SHIPPED:
        assert manifest["files"][path.name] == traces.content_hash(path.read_bytes())
    assert {row["trace"] for row in manifest["coverage"]} <= set(manifest["files"])


def test_every_node_rule_is_exercised_by_the_corpus():
    """All but the safety and liveness properties (cluster-wide), the admin client's DESCRIBE-RESP rules, the ISR
    controller's rules (ISR-ELECT-1, ISR-ALTER-1: not a replica's) and ISR-TRUNC-1, the truncation
    before KIP-101 that the corpus, written for KIP-101 replicas, expects them not to do, and
    FETCH-REQ-7, a held Fetch, which KIP-595 as the model reads it never does (Options.held_fetches)."""
    manifest = json.loads((DEFAULT_CORPUS / MANIFEST).read_text())
    missing = sorted(r.id for r in load_rules() if r.id not in manifest["rules"])
    safety = [f"ISR-SAFE-{n}" for n in range(1, 4)] + [f"SAFE-{n}" for n in range(1, 10)] + [f"LIVE-{n}" for n in range(1, 6)]
    assert missing == sorted(["DESCRIBE-RESP-1", "DESCRIBE-RESP-2", "DESCRIBE-RESP-3", "FETCH-REQ-7", "ISR-ALTER-1", "ISR-ELECT-1", "ISR-TRUNC-1"] + safety)


def test_the_corpus_has_isr_replica_traces_with_every_offsets_for_leader_epoch_error(shipped):
    """KIP-101's OffsetsForLeaderEpoch, asked and answered by ISR replicas, with each error code it may carry."""
    isr = [t for t in shipped.values() if t.header.system == "isr"]
    assert len(isr) >= 50
    answered = set()
    for built in isr:
        for step in built.steps:
            message = getattr(step.input, "message", None)
            if type(message).__name__ == "OffsetsForLeaderEpochRequest" and step.expect.response is not None:
                answered.add(step.errors["response.ErrorCode"])
    assert answered == {"NONE", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER"}


def test_the_reference_passes_every_shipped_trace(shipped):
    failing = [str(path) for path, trace in shipped.items() if not replay(ModelAdapter("reference"), trace, str(path)).passed]
    assert failing == []


@pytest.mark.parametrize("name", list(MUTANTS))
def test_every_mutant_fails_some_shipped_trace(shipped, name):
    caught = next((r for r in (replay(mutant_adapter(name), t, str(p)) for p, t in shipped.items()) if not r.passed), None)
    assert caught is not None, f"mutant {name} passes the whole corpus"
    assert caught.divergence is not None and caught.rules_failed


def test_there_are_at_least_fifteen_mutants():
    assert len(MUTANTS) >= 15


def test_certify_reports_a_mutant_rule_by_rule_with_a_shortened_trace(tmp_path):
    name = "offsets-end-offset-plus-one"
    report = certify(f"mutant:{name}", lambda: mutant_adapter(name), DEFAULT_CORPUS, tmp_path)
    assert report.failed >= 1 and report.passed == report.traces - report.failed
    assert "K101-2" in report.rules_failed
    verdicts = {v.rule: v.verdict for v in report.rules}
    assert verdicts["K101-2"] == "departs" and verdicts["VOTE-REQ-4"] == "conforms" and verdicts["SAFE-1"] == "not exercised"
    for original, short in report.shortened.items():
        shortened = traces.read(Path(short))
        result = replay(mutant_adapter(name), shortened, short)
        assert not result.passed and result.divergence.step == len(shortened.steps)
        assert len(shortened.steps) <= traces.read(Path(original)).header.steps
        assert replay(ModelAdapter("reference"), shortened, short).passed
    junit = ElementTree.parse(tmp_path / "junit.xml").getroot()
    assert int(junit.get("tests")) == report.traces and int(junit.get("failures")) == report.failed
    assert json.loads((tmp_path / "report.json").read_text())["failed"] == report.failed
    assert "K101-2" in (tmp_path / "report.md").read_text()


def run_cli(*args: str) -> tuple[int, str, str]:
    result = subprocess.run([sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout, result.stderr


def test_certify_reference_exits_0_with_the_summary_object(tmp_path):
    code, out, _ = run_cli("certify", "--adapter", "reference", "--out", str(tmp_path), "--json")
    summary = json.loads(out)
    assert code == 0
    assert summary["adapter"] == "reference" and summary["traces"] == len(SHIPPED) == summary["passed"]
    assert summary["failed"] == 0 and summary["rules_failed"] == []


def test_certify_a_mutant_exits_1(tmp_path):
    code, out, _ = run_cli("certify", "--adapter", "mutant:vote-grant-twice", "--out", str(tmp_path), "--no-deviations")
    assert code == 1
    assert "VOTE-REQ-3" in out and "first divergence" in out


def test_unknown_adapters_are_refused_with_exit_2(tmp_path):
    code, _, err = run_cli("certify", "--adapter", "telepathy", "--out", str(tmp_path))
    assert code == 2 and "unknown adapter 'telepathy'" in err
    code, _, err = run_cli("certify", "--adapter", "mutant:nope", "--out", str(tmp_path))
    assert code == 2 and "unknown mutant 'nope'" in err


def test_a_malformed_trace_fails_alone_and_is_named(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in SHIPPED[:3]:
        (corpus / path.name).write_bytes(path.read_bytes())
    broken = corpus / "zz-broken.jsonl"
    broken.write_bytes(SHIPPED[0].read_bytes()[:-30])
    code, out, _ = run_cli("certify", "--adapter", "reference", "--corpus", str(corpus), "--out", str(tmp_path / "out"), "--json")
    summary = json.loads(out)
    assert code == 1 and (summary["passed"], summary["failed"]) == (3, 1)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    failure = next(r["failure"] for r in report["results"] if r["trace"].endswith("zz-broken.jsonl"))
    assert "invalid trace" in failure and "zz-broken.jsonl:" in failure


def test_a_missing_corpus_is_refused(tmp_path):
    code, _, err = run_cli("certify", "--adapter", "reference", "--corpus", str(tmp_path / "nowhere"), "--out", str(tmp_path))
    assert code == 2 and "no such corpus directory" in err


def test_the_example_subprocess_node_passes_a_sample_of_the_corpus(tmp_path):
    """The whole corpus is the README's command; every tenth trace keeps this test short."""
    corpus = tmp_path / "sample"
    corpus.mkdir()
    for path in SHIPPED[::10]:
        (corpus / path.name).write_bytes(path.read_bytes())
    code, out, _ = run_cli("certify", "--adapter", f"subprocess:{sys.executable} -m adapters.example_node", "--corpus", str(corpus), "--out", str(tmp_path / "out"), "--json")
    summary = json.loads(out)
    assert code == 0 and summary["passed"] == len(SHIPPED[::10])


def test_mutants_command_lists_every_mutant():
    code, out, _ = run_cli("mutants", "--json")
    assert code == 0 and [m["name"] for m in json.loads(out)] == list(MUTANTS)


def test_traces_generate_writes_a_corpus_and_show_reads_it(tmp_path):
    out = tmp_path / "small"
    assert main(["traces", "generate", "--config", "smoke", "--out", str(out), "--max-states", "3000", "--walks", "1", "--walk-steps", "40"]) == 0
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["searches"][0]["complete"] is True and manifest["searches"][0]["states"] == 1739
    first = trace_files(out)[0]
    code, text, _ = run_cli("traces", "show", str(first))
    assert code == 0 and "step" in text


def test_certify_one_system_replays_only_its_traces(tmp_path):
    isr_count = sum(traces.read_header(p).system == "isr" for p in SHIPPED)
    code, out, _ = run_cli("certify", "--adapter", "mutant:isr-truncate-to-hw", "--system", "kraft", "--out", str(tmp_path / "kraft"), "--json")
    assert code == 0 and json.loads(out)["traces"] == len(SHIPPED) - isr_count  # an ISR bug is invisible to KRaft traces
    code, out, _ = run_cli("certify", "--adapter", "mutant:isr-truncate-to-hw", "--system", "isr", "--out", str(tmp_path / "isr"), "--json")
    summary = json.loads(out)
    assert code == 1 and summary["traces"] == isr_count and "ISR-START-1" in summary["rules_failed"]


def test_traces_generate_writes_an_isr_corpus(tmp_path):
    out = tmp_path / "isr"
    assert main(["traces", "generate", "--config", "isr-epoch", "--out", str(out), "--max-states", "2000", "--walks", "1", "--walk-steps", "40"]) == 0
    written = [traces.read(p) for p in trace_files(out)]
    assert written and all(t.header.partition == traces.TracePartition(replicas=(1, 2), min_isr=1, truncation="epoch") for t in written)
    code, text, _ = run_cli("traces", "show", str(trace_files(out)[0]))
    assert code == 0 and "of ISR partition [1, 2], min.isr 1, truncation epoch" in text


def test_a_trace_starting_from_persisted_state_shortens_from_that_state():
    """A node that comes back from its quorum-state file: the shortened trace keeps the file it started from."""
    from conformance.certify.shorten import shorten
    from conformance.corpus.reference import build_trace
    from model.events import Restart, Timer, TimerKind
    from spec.trace import Persisted, TraceCluster

    initial = Persisted(epoch=3, leader_id=1, voted_id=1)
    inputs = [Restart(), Timer(kind=TimerKind.ELECTION_TIMEOUT), Timer(kind=TimerKind.REQUEST_TIMEOUT)]
    trace = build_trace("restarted-leader", TraceCluster(voters=(1, 2, 3)), 1, inputs, "test", initial=initial)
    assert trace.header.initial == initial and trace.steps[0].state.role == "resigned"
    result = replay(mutant_adapter("restart-resumes-leadership"), trace, "restarted-leader")
    assert (result.verdict, result.divergence.step) == ("departs", 1)
    shortened, _ = shorten(lambda: mutant_adapter("restart-resumes-leadership"), trace, result.divergence.step)
    assert shortened.header.initial == initial and [s.input for s in shortened.steps] == [Restart()]


def test_a_fetch_field_the_profile_leaves_open_is_not_compared_and_one_it_pins_is():
    """KIP-595 names a Fetch's MaxWaitMs and says nothing of its value: where the model sends none
    (kip595), a node that asks to wait 500 ms does what the specification allows; where the
    profile pins it (Kafka's 500), a node that asks for another wait, or none, departs."""
    def sends(**fields) -> Outputs:
        fetch = FetchRequest(ClusterId="kraft-cluster", ReplicaId=2, CurrentLeaderEpoch=1, FetchOffset=1, LastFetchedEpoch=1, **fields)
        return Outputs(sends=(Send(destination=1, message=fetch),))

    assert differing_part(sends(), None, sends(MaxWaitMs=500), None) is None
    assert differing_part(sends(), None, sends(MaxWaitMs=500, HighWatermark=3), None) is None
    assert differing_part(sends(MaxWaitMs=500), None, sends(MaxWaitMs=500), None) is None
    assert differing_part(sends(MaxWaitMs=500), None, sends(), None) == "sends"
    assert differing_part(sends(MaxWaitMs=500), None, sends(MaxWaitMs=100), None) == "sends"
    assert differing_part(sends(HighWatermark=-1), None, sends(HighWatermark=2), None) == "sends"
