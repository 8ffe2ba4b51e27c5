"""Sequence diagrams: what each draws can be followed by eye, long runs stay a screen wide, and
the SVG is well-formed and byte-identical for the same input, whatever text it carries."""

import json
import os
import random
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import msgspec
import pytest

from adapters.mutants import mutant_adapter
from conformance.certify.comparison import compare
from conformance.certify.replay import Divergence, replay
from conformance.cli import main
from conformance.corpus.generate import DEFAULT_CORPUS
from conformance.diagrams.kraft import cluster_svg
from conformance.diagrams.traces import comparison_lines, divergence_svg, trace_svg
from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from model.cluster import Action, Cluster, Deliver, Drop
from model.events import Send
from model.messages import VoteRequest, VoteResponse
from spec import trace as traces
from spec.trace import Outputs

SVG = "{http://www.w3.org/2000/svg}"
FIGURE8 = Path(__file__).parent / "data" / "counterexample-figure8-SAFE-6.jsonl"
SCREEN_WIDTH = 1280


def figure8_counterexample() -> tuple[Cluster, list[Action]]:
    """`kraftcheck check --config figure8 --profile faulty-hw-any-epoch`'s counterexample, as saved
    (tests/test_faulty_variants.py finds it again; regenerate the file with that command)."""
    lines = [json.loads(line) for line in FIGURE8.read_text().splitlines()]
    config = resolve(lines[0]["config"], {"profile": lines[0]["bounds"]["profile"]})
    return system_for(config).cluster, [msgspec.convert(step["encoded_action"], Action) for step in lines[1:]]


def parsed(svg: str) -> ElementTree.Element:
    root = ElementTree.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def groups(root: ElementTree.Element, kind: str) -> list[ElementTree.Element]:
    return [g for g in root.iter(f"{SVG}g") if kind in (g.get("class") or "").split()]


def texts(root: ElementTree.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


@pytest.fixture(scope="module")
def figure8_svg() -> str:
    cluster, actions = figure8_counterexample()
    return cluster_svg(cluster, actions, "figure8: SAFE-6 violated after 28 steps")


def test_figure8_counterexample_shows_three_nodes_their_epochs_and_the_lost_committed_record(figure8_svg):
    cluster, actions = figure8_counterexample()
    root = parsed(figure8_svg)
    shown = texts(root)
    assert len(groups(root, "seq-lifeline")) == 3 and {"n1", "n2", "n3"} <= set(shown)
    assert sum(type(a) is Deliver for a in actions) == len(groups(root, "seq-message")) - len(groups(root, "seq-dropped")) - len(groups(root, "seq-in-flight"))
    assert len(groups(root, "seq-dropped")) == sum(type(a) is Drop for a in actions) == 8
    assert all(g.find(f"{SVG}path") is not None for g in groups(root, "seq-dropped"))  # crossed out where dropped
    assert len([r for r in root.iter(f"{SVG}rect") if r.get("class") == "seq-row"]) == 28
    # Epochs along the lifelines: each leader of the story, in its epoch.
    for epoch in (1, 2, 3, 4):
        assert f"leader e{epoch}" in shown
    # The committed record: committed at step 23, missing from the leader of epoch 4 at the end.
    assert "commits 0:e1" in shown
    assert "lacks committed 0:e1" in shown
    assert any("SAFE-6 Leader Completeness: leader 3 of epoch 4 lacks record 0 (epoch 1) committed in epoch 3" in t for t in shown)
    assert int(root.get("width")) <= SCREEN_WIDTH


def test_the_same_input_gives_the_same_bytes(figure8_svg):
    cluster, actions = figure8_counterexample()
    assert cluster_svg(cluster, actions, "figure8: SAFE-6 violated after 28 steps") == figure8_svg
    trace = traces.read(next(DEFAULT_CORPUS.glob("corpus-deep-walk-0004-node1.jsonl")))
    assert trace_svg(trace) == trace_svg(trace)


def test_the_same_trace_gives_the_same_bytes_in_another_process(tmp_path):
    """No dependence on hash seeds (set order) or time: two processes, two seeds, one file."""
    trace = next(DEFAULT_CORPUS.glob("corpus-deep-walk-0004-node1.jsonl"))
    outputs = []
    for seed in ("1", "2"):
        command = [sys.executable, "-m", "conformance.cli", "traces", "show", str(trace), "--as", "svg"]
        outputs.append(subprocess.run(command, capture_output=True, check=True, env=os.environ | {"PYTHONHASHSEED": seed}, timeout=120).stdout)
    assert outputs[0] == outputs[1] and outputs[0].startswith(b"<svg")


def test_a_long_run_stays_one_screen_wide():
    """100 steps of a seeded random cluster run, and the longest shipped trace: as wide as a short one."""
    cluster = system_for(resolve("faults", {})).cluster
    chooser = random.Random(7)
    state, actions = cluster.initial(), []
    for _ in range(100):
        action = chooser.choice(cluster.enabled(state))
        state, _ = cluster.apply(state, action)
        actions.append(action)
    long, short = parsed(cluster_svg(cluster, actions, "a random run")), parsed(cluster_svg(cluster, actions[:5], "its start"))
    assert long.get("width") == short.get("width") and int(long.get("width")) <= SCREEN_WIDTH
    assert len([r for r in long.iter(f"{SVG}rect") if r.get("class") == "seq-row"]) == 100
    assert int(long.get("height")) < 100 * 40  # compact rows
    longest = max((traces.read(p) for p in DEFAULT_CORPUS.glob("*walk*.jsonl")), key=lambda t: len(t.steps))
    assert len(longest.steps) >= 100
    assert int(parsed(trace_svg(longest)).get("width")) <= SCREEN_WIDTH


def test_a_trace_draws_its_peers_and_every_message_it_carries():
    trace = traces.read(next(DEFAULT_CORPUS.glob("corpus-deep-walk-0004-node1.jsonl")))
    root = parsed(trace_svg(trace))
    cluster = trace.header.cluster
    assert len(groups(root, "seq-lifeline")) == len(cluster.voters) + len(cluster.observers)
    expected = sum(hasattr(s.input, "message") + (s.expect.response is not None) + len(s.expect.sends) for s in trace.steps)
    assert len(groups(root, "seq-message")) == expected
    assert "under test, down e0" in texts(root)  # it starts as the first step


def test_a_divergence_shows_the_expected_and_the_actual_response_side_by_side():
    path = next(DEFAULT_CORPUS.glob("corpus-diverge-cell-*-fetchrequest-leader-same-none-hw-1.jsonl"))
    trace = traces.read(path)
    result = replay(mutant_adapter("hw-any-epoch"), trace, str(path))
    d = result.divergence
    assert d.field == "response.HighWatermark" and d.step > 1
    root = parsed(divergence_svg(trace, d))
    expected, actual = groups(root, "seq-expected"), groups(root, "seq-actual")
    assert len(expected) == len(actual) == 1
    shown = texts(root)
    assert "expected (the specification)" in shown and "actual (the implementation)" in shown
    assert "actual: HighWatermark = 1" in shown and "HighWatermark" in shown
    assert len([r for r in root.iter(f"{SVG}rect") if r.get("class") == "seq-differs"]) == 1
    assert len([r for r in root.iter(f"{SVG}rect") if r.get("class") == "seq-row seq-diverges"]) == 1
    assert len([r for r in root.iter(f"{SVG}rect") if (r.get("class") or "").startswith("seq-row")]) == d.step  # the trace up to the divergence


def test_the_comparison_shows_every_field_of_both_sides_and_flags_each_difference():
    ask = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=2, CandidateId=2, LastOffsetEpoch=0, LastOffset=-1)
    expected = VoteResponse(PartitionErrorCode=74, LeaderId=3, LeaderEpoch=2, VoteGranted=False)
    actual = VoteResponse(PartitionErrorCode=0, LeaderId=3, LeaderEpoch=1, VoteGranted=True)
    departure = Divergence(step=1, input="vote", rules=(), **compare(Outputs(response=expected), None, Outputs(response=actual), None)._asdict())
    lines = {name: (want, got, status) for name, want, got, status in comparison_lines(departure)}
    assert lines == {
        "ErrorCode": ("0 NONE", "0 NONE", "same"),
        "PartitionErrorCode": ("74 FENCED_LEADER_EPOCH", "0 NONE", "differs"),
        "LeaderId": ("3", "3", "same"),
        "LeaderEpoch": ("2", "1", "differs"),
        "VoteGranted": ("false", "true", "differs"),
    }
    expected = Outputs(sends=(Send(destination=1, message=ask), Send(destination=3, message=ask)))
    departure = Divergence(step=1, input="x", rules=(), **compare(expected, None, Outputs(sends=(Send(destination=1, message=ask),)), None)._asdict())
    assert [(name, status) for name, _, got, status in comparison_lines(departure)] == [("[0]", "same"), ("[1]", "differs")]
    cut = msgspec.structs.replace(departure, actual_json=departure.actual_json[:20] + "... (9 more characters)")  # too long to keep whole
    assert comparison_lines(cut) == (("sends", departure.expected, departure.actual, "differs"),)


def test_text_from_a_trace_or_an_implementation_is_escaped():
    trace = traces.read(next(DEFAULT_CORPUS.glob("corpus-cell-0001-*.jsonl")))
    hostile = 'a<b>&"c\'</text><script>x</script>\x00\x07\ud800\uffff\U0001f600'
    step = msgspec.structs.replace(trace.steps[0], note=hostile)
    header = msgspec.structs.replace(trace.header, name=hostile)
    tricky = msgspec.structs.replace(trace, header=header, steps=(step,))
    departure = Divergence(step=1, input=hostile, field="response.PartitionErrorCode", expected=hostile, actual=hostile, rules=(), differing=("response.PartitionErrorCode",), expected_json=json.dumps({"PartitionErrorCode": hostile}), actual_json=json.dumps({"PartitionErrorCode": hostile}))
    for svg in (trace_svg(tricky), divergence_svg(tricky, departure)):
        assert "<script" not in svg
        root = parsed(svg)  # would fail on a character XML 1.0 forbids
        assert any(t.startswith('a<b>&"c\'</text><script>') for t in texts(root))


def test_an_isr_counterexample_gets_a_diagram_with_the_controller(tmp_path, capsys):
    assert main(["check", "--config", "isr-hw", "--out", str(tmp_path)]) == 1
    printed = capsys.readouterr().out
    svg = tmp_path / "counterexample-isr-hw-ISR-SAFE-2.svg"
    assert f"diagram: {svg}" in printed
    root = parsed(svg.read_text())
    assert len(groups(root, "seq-lifeline")) == 3 and {"r1", "r2", "controller"} <= set(texts(root))
    assert "lacks acked 0:0:v1" in texts(root) and "elects r2" in texts(root)


def test_check_saves_the_diagram_beside_the_counterexample(tmp_path, capsys):
    code = main(["check", "--config", "faults", "--profile", "faulty-forget-vote", "--workers", "1", "--out", str(tmp_path), "--json"])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["counterexample_diagrams"] == [str(tmp_path / "counterexample-faults-SAFE-2.svg")]
    root = parsed((tmp_path / "counterexample-faults-SAFE-2.svg").read_text())
    assert groups(root, "seq-crash") and groups(root, "seq-restart")


def test_traces_show_as_svg_to_a_file_or_standard_output(tmp_path, capsys):
    trace = next(DEFAULT_CORPUS.glob("corpus-cell-0001-*.jsonl"))
    assert main(["traces", "show", str(trace), "--as", "svg", "--out", str(tmp_path / "t.svg")]) == 0
    written = (tmp_path / "t.svg").read_text()
    assert main(["traces", "show", str(trace), "--as", "svg"]) == 0
    assert capsys.readouterr().out == written
    parsed(written)
    assert main(["traces", "show", str(trace), "--out", str(tmp_path / "u.svg")]) == 2
    assert "use it with --as svg" in capsys.readouterr().err
