"""The scenario language (spec/scenario-format.md): traces printed as scenarios and compiled back,
byte for byte; errors that name file, line and column; `traces show --as scenario`."""

import re
import tomllib
from pathlib import Path

import msgspec
import pytest

from conformance.cli import main
from conformance.corpus.generate import shipped_corpora
from conformance.scenario.parser import Scenario, ScenarioError, parse
from conformance.scenario.printer import cluster_scenario_text, scenario_text
from spec import trace as traces

ROOT = Path(__file__).resolve().parents[1]
CELL_15 = ROOT / "traces" / "corpus-cell-0015-fetchrequest-observer-newer-unknown-leader-epoch-common-1.jsonl"

CELL_15_SCENARIO = """\
scenario "corpus-cell-0015-fetchrequest-observer-newer-unknown-leader-epoch-common-1"
origin "corpus: shortest path to its cells"
covers "FetchRequest | observer | newer | UNKNOWN_LEADER_EPOCH = | COMMON-1"
covers "FetchRequest | observer | newer | UNKNOWN_LEADER_EPOCH = | COMMON-2"
covers "FetchRequest | observer | newer | UNKNOWN_LEADER_EPOCH = | FETCH-REQ-2B"
covers "choice FETCH-REQ-5=epoch-first | FetchRequest | observer"
covers "choice FETCH-REQ-5=leadership-first | FetchRequest | observer"
covers "rule COMMON-2 | UNKNOWN_LEADER_EPOCH #1"
covers "rule COMMON-2 | UNKNOWN_LEADER_EPOCH #8"
covers "rule FETCH-REQ-2B | UNKNOWN_LEADER_EPOCH #1"
covers "rule FETCH-REQ-2B | UNKNOWN_LEADER_EPOCH #8"
cluster voters=[1, 2, 3] observers=[4]
node 4
initial down=true

step restart
  expect send to 1: FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=0, LastFetchedEpoch=0)
  expect send to 2: FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=0, LastFetchedEpoch=0)
  expect send to 3: FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=0, LastFetchedEpoch=0)
  expect state observer epoch=0
  rules QSTATE-1 QSTATE-3 QSTATE-4 BOOT-1
  allowed OBS-2=one-voter:1
    expect send to 1: FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=0, LastFetchedEpoch=0)
    expect state observer epoch=0
  allowed OBS-2=one-voter:2
    expect send to 2: FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=0, LastFetchedEpoch=0)
    expect state observer epoch=0
  allowed OBS-2=one-voter:3
    expect send to 3: FetchRequest(ClusterId="kraft-cluster", ReplicaId=4, CurrentLeaderEpoch=0, LastFetchedEpoch=0)
    expect state observer epoch=0

step request from 2: FetchRequest(ClusterId="kraft-cluster", ReplicaId=2, CurrentLeaderEpoch=1, LastFetchedEpoch=0)
  expect response FetchResponse(PartitionErrorCode=UNKNOWN_LEADER_EPOCH, CurrentLeader=LeaderIdAndEpoch(LeaderEpoch=0), Records=[])
  expect state observer epoch=0
  rules FETCH-REQ-2B COMMON-1 COMMON-2
  allowed FETCH-REQ-5=leadership-first
    expect response FetchResponse(PartitionErrorCode=NOT_LEADER_OR_FOLLOWER, CurrentLeader=LeaderIdAndEpoch(LeaderEpoch=0), Records=[])
    expect state observer epoch=0
"""

HEADER = """\
cluster voters=[1, 2, 3]
node 2
"""


def corpus_files() -> list[Path]:
    return [path for corpus in shipped_corpora().values() for path in sorted(corpus.glob("*.jsonl"))]


def test_the_shipped_corpora_are_all_there():
    assert {path.parent.name for path in corpus_files()} == {"traces", "kafka-3.7", "kafka-3.8", "kafka-3.9", "kafka-4.0", "kafka-4.3"}
    assert len(corpus_files()) > 2000


@pytest.mark.parametrize("corpus", sorted(shipped_corpora()))
def test_every_shipped_trace_is_its_scenario_compiled(corpus):
    """trace -> scenario -> trace is the identity, to the byte, over every shipped corpus."""
    for path in sorted(shipped_corpora()[corpus].glob("*.jsonl")):
        data = path.read_bytes()
        scenario = parse(Path("x.scenario"), scenario_text(traces.parse(path, data)))
        assert traces.to_jsonl(scenario.trace) == data, path


def test_a_trace_prints_readably():
    assert scenario_text(traces.read(CELL_15)) == CELL_15_SCENARIO


def test_traces_show_as_scenario(capsys):
    assert main(["traces", "show", str(CELL_15), "--as", "scenario"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (CELL_15_SCENARIO, "")


def test_an_answer_to_an_earlier_request_reads_and_prints_as_it_is_written():
    """`expect answer to N: RESPONSE for REQUEST` (a held Fetch answered later, FETCH-REQ-7), with
    the Fetch's omissible MaxWaitMs; written at its default, a field reads as left out."""
    held = 'FetchRequest(ClusterId="kraft-cluster", ReplicaId=3, MaxWaitMs=500, CurrentLeaderEpoch=1, FetchOffset=1, LastFetchedEpoch=1)'
    answer = "FetchResponse(HighWatermark=1, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=1))"
    step = f"step timer fetch_wait\n  expect answer to 3: {answer} for {held}\n"
    scenario = parse(Path("s.scenario"), HEADER + step)
    (only,) = scenario.trace.steps
    (answered,) = only.expect.answers
    assert (answered.destination, answered.request.MaxWaitMs, answered.message.HighWatermark) == (3, 500, 1)
    assert f"  expect answer to 3: {answer} for {held}" in scenario_text(scenario.trace).splitlines()
    at_default = parse(Path("s.scenario"), HEADER + step.replace("MaxWaitMs=500", "MaxWaitMs=0"))
    assert at_default.trace.steps[0].expect.answers[0].request == msgspec.structs.replace(answered.request, MaxWaitMs=msgspec.UNSET)
    with pytest.raises(ScenarioError, match="expected the response to a FetchRequest message: FetchResponse, got 'VoteResponse'"):
        parse(Path("s.scenario"), HEADER + step.replace(answer, "VoteResponse(LeaderEpoch=1)"))


def test_a_hand_written_scenario_compiles_to_the_trace_it_means():
    text = HEADER + """\
initial epoch=3 leader_id=1 log=e1[0..1]{LeaderChangeMessage(LeaderId=1), 7} e3[2..2]{8}  # a comment
# before step 1
step request from 1: VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=4, CandidateId=3)
  expect response VoteResponse(ErrorCode=NONE, LeaderEpoch=4, VoteGranted=true)
  expect state voted epoch=4 voted_id=3 log=e1[0..1] e3[2..2]
step timer election_timeout
"""
    scenario = parse(Path("s.scenario"), text)
    header, (first, second) = scenario.trace.header, scenario.trace.steps
    assert (header.name, header.node, header.cluster.voters, header.cluster.observers, header.cluster.cluster_id) == ("s", 2, (1, 2, 3), (), "kraft-cluster")
    assert [(r.Offset, r.Epoch) for r in header.initial.log] == [(0, 1), (1, 1), (2, 3)]
    assert [r.Value for r in header.initial.log][1:] == [7, 8]
    assert header.initial.log[0].Value.LeaderId == 1
    assert (header.initial.epoch, header.initial.leader_id, header.initial.voted_id) == (3, 1, -1)
    assert first.input.source == 1 and first.input.message.CandidateEpoch == 4
    assert (first.expect.response.ErrorCode, first.expect.response.VoteGranted) == (0, True)
    assert first.errors == {"response.ErrorCode": "NONE", "response.PartitionErrorCode": "NONE"}
    assert first.note == "request from 1: VoteRequest(ClusterId='kraft-cluster', CandidateEpoch=4, CandidateId=3)"
    assert first.state.log == ((0, 1), (1, 1), (2, 3)) and first.state.log_end_offset == 3 and first.state.leader_id == -1
    assert (second.step, second.input.kind.value, second.expect, second.state) == (2, "election_timeout", traces.Outputs(), None)
    assert scenario.step_lines == (5, 8)
    assert scenario.comments == {1: ["# a comment", "# before step 1"]}  # after the first statement: before the step that follows


@pytest.mark.parametrize(
    "text, error",
    [
        (HEADER + "step request from 1: VoteRequest(CandidateEpoch=1,)\n", '3:51: unexpected \')\'; expected a name'),
        (HEADER + "step request form 1", "3:14: unexpected 'form'; expected \"from\""),
        (HEADER + "step request from 1: VoteRequest(Epoch=1)\n", "3:34: VoteRequest has no field 'Epoch'; expected one of ClusterId, CandidateEpoch, CandidateId, LastOffsetEpoch, LastOffset, PreVote"),
        (HEADER + "step request from 7: VoteRequest()\n", "3:19: unknown node 7; expected one of 1, 2, 3 or -1 (an admin client)"),
        (HEADER + "step request from 1: VoteResponse()\n", "3:22: expected a request message: one of"),
        (HEADER + "step request from 1: VoteRequest()\n  expect response VoteResponse(ErrorCode=NO_SUCH_ERROR)\n", "4:42: unknown error code 'NO_SUCH_ERROR'"),
        (HEADER + "step request from 1: VoteRequest()\n  expect response FetchResponse()\n", "4:19: expected the response to a VoteRequest message: VoteResponse, got 'FetchResponse'"),
        (HEADER + "step timer lunch\n", "3:12: unknown timer 'lunch'; expected one of fetch_timeout, election_timeout, progress_timeout, request_timeout"),
        (HEADER + "initial log=e1[0..2]{1, 2}\n", "3:13: epoch range e1[0..2] holds 3 records and gives 2 values; expected one value per offset"),
        (HEADER + "initial epoch=x\n", "3:15: unexpected name 'x'"),
        (HEADER + "step crash\nnode 3\n", "4:1: the node statement belongs before the first step"),
        ("cluster voters=[1, 2, 3]\nnode 4\nstep crash\n", "2:1: node 4 is not a member of the cluster: expected one of 1, 2, 3"),
        ("cluster voters=[]\nnode 1\n", "1:1: impossible cluster:"),
        ("node 1\nstep crash\n", "1:1: expected exactly one of a cluster statement"),
        (HEADER + "step crash\n  expect send to 9: FetchRequest()\n", "4:18: unknown node 9; expected one of 1, 2, 3"),
        (HEADER + "initial voted_id=7\n", "3:1: impossible initial state: voted_id 7 is not a voter; expected -1 or one of 1, 2, 3"),
        ("cluster voters=[1, 2] observers=[3]\nnode 2\ninitial epoch=1 voted_id=3\n", "3:1: impossible initial state: voted_id 3 is not a voter; expected -1 or one of 1, 2"),
        (HEADER + "initial epoch=2 log=e2[0..0]{1} e1[1..1]{2}\n", "3:1: impossible initial state: the epoch of the log goes down at offset 1 (2 then 1)"),
        (HEADER + "initial epoch=2 log=e1[0..0]{1} e2[3..3]{2}\n", "3:1: impossible initial state: the log's record 1 has offset 3; expected offsets 0, 1, ... in order"),
        (HEADER + "initial epoch=1 log=e2[0..0]{1}\n", "3:1: impossible initial state: the log holds epoch 2, beyond the node's epoch 1"),
        (HEADER + "step crash\n  expect state sleeping epoch=0\n", "4:16: unknown role 'sleeping'; expected one of unattached,"),
        (HEADER + "node 3\n", "3:1: a second node statement; the first is at line 2"),
        (HEADER + "step crash\n  expect state voted\n", "4:3: not a valid Observed: Object missing required field `epoch`"),
    ],
)
def test_errors_name_file_line_column_and_what_was_expected(text, error):
    with pytest.raises(ScenarioError) as raised:
        parse(Path("bad.scenario"), text)
    assert str(raised.value).startswith(f"bad.scenario:{error}"), str(raised.value)


# scenario run / record -------------------------------------------------------------------

LIBRARY = sorted((ROOT / "traces" / "scenarios").glob("*.scenario"))

VOTE_INPUTS = """\
# A voter grants its vote to a candidate with an up-to-date log.
cluster voters=[1, 2, 3]
node 2

step request from 3: VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=3)
# the leader of a later epoch begins it
step request from 1: BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=1, LeaderEpoch=2)
"""

VOTE_RECORDED = """\
# A voter grants its vote to a candidate with an up-to-date log.
scenario "vote"
cluster voters=[1, 2, 3]
node 2

step request from 3: VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=3)
  expect response VoteResponse(LeaderId=-1, LeaderEpoch=1, VoteGranted=true)
  expect state voted epoch=1 voted_id=3
  rules VOTE-REQ-4 VOTE-REQ-4B VOTE-LOG-1 QSTATE-2 COMMON-2

# the leader of a later epoch begins it
step request from 1: BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=1, LeaderEpoch=2)
  expect response BeginQuorumEpochResponse(LeaderId=1, LeaderEpoch=2)
  expect send to 1: FetchRequest(ClusterId="kraft-cluster", ReplicaId=2, CurrentLeaderEpoch=2, LastFetchedEpoch=0)
  expect state follower epoch=2 leader_id=1
  rules BEGIN-REQ-4 QSTATE-2 COMMON-2
"""


def test_the_library_passes_on_the_reference(capsys):
    assert len(LIBRARY) >= 10
    assert main(["scenario", "run", *map(str, LIBRARY)]) == 0
    out, err = capsys.readouterr()
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in ([str(path)] for path in LIBRARY)]
    assert [(row[0], row[3]) for row in rows] == [(str(path), "passes") for path in LIBRARY]
    assert f"{len(LIBRARY)} scenarios, {len(LIBRARY)} pass, 0 fail (adapter reference)" in out
    assert err == ""


@pytest.mark.parametrize(
    "mutant, scenario, failure",
    [
        (
            "hw-any-epoch",
            "figure8-leader-commits-own-epoch-only",
            "step 4 (request from 2: FetchRequest(ClusterId='kraft-cluster', ReplicaId=2, CurrentLeaderEpoch=3, FetchOffset=2, LastFetchedEpoch=2)): "
            "response.HighWatermark: expected 0, got 2 [rules FETCH-REQ-4 HW-1]",
        ),
        (
            "vote-foreign-cluster",
            "cluster-id-mismatch-vote",
            "step 1 (request from 3: VoteRequest(ClusterId='other-cluster', CandidateEpoch=1, CandidateId=3)): "
            "response.ErrorCode: expected 104 INCONSISTENT_CLUSTER_ID, got 0 NONE [rules VOTE-REQ-1 COMMON-2]",
        ),
        (
            "end-successor-waits",
            "end-quorum-preferred-successor",
            "step 2 (request from 1: EndQuorumEpochRequest(ClusterId='kraft-cluster', ReplicaId=1, LeaderId=1, LeaderEpoch=1, PreferredSuccessors=(2, 3))): "
            "response.LeaderId: expected -1, got 1 [rules COMMON-2 END-REQ-5 ELECT-4 QSTATE-2]",
        ),
        (
            "truncate-by-offset-only",
            "diverging-epoch-truncation",
            "step 2 (response from 1: FetchResponse(DivergingEpoch=EpochEndOffset(Epoch=1, EndOffset=2), CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=4), Records=())): "
            "sends: expected to 1: FetchRequest(ClusterId='kraft-cluster', ReplicaId=3, CurrentLeaderEpoch=4, FetchOffset=1, LastFetchedEpoch=1) "
            "(missing: to 1: FetchRequest(ClusterId='kraft-cluster', ReplicaId=3, CurrentLeaderEpoch=4, FetchOffset=1, LastFetchedEpoch=1)), "
            "got to 1: FetchRequest(ClusterId='kraft-cluster', ReplicaId=3, CurrentLeaderEpoch=4, FetchOffset=2, LastFetchedEpoch=2) "
            "(unexpected: to 1: FetchRequest(ClusterId='kraft-cluster', ReplicaId=3, CurrentLeaderEpoch=4, FetchOffset=2, LastFetchedEpoch=2)) "
            "[rules FETCH-RESP-2 K101-3 FETCH-SEND-2 FETCH-SEND-1]",
        ),
    ],
)
def test_the_library_fails_on_mutants_with_a_readable_first_failure(capsys, mutant, scenario, failure):
    path = ROOT / "traces" / "scenarios" / f"{scenario}.scenario"
    assert main(["scenario", "run", *map(str, LIBRARY), "--adapter", f"mutant:{mutant}"]) == 1
    out, _ = capsys.readouterr()
    assert str(path) in [line.split()[0] for line in out.splitlines() if " departs " in line]
    assert main(["scenario", "run", str(path), "--adapter", f"mutant:{mutant}"]) == 1
    out, _ = capsys.readouterr()
    assert f"\nfirst failure, {path}:\n  {failure}\n" in out
    assert f"1 scenarios, 0 pass, 1 fail (adapter mutant:{mutant})" in out


def test_record_fills_in_the_expectations_and_keeps_the_comments(tmp_path, capsys):
    scenario = tmp_path / "vote.scenario"
    scenario.write_text(VOTE_INPUTS)
    assert main(["scenario", "run", str(scenario)]) == 1  # no expectations: the model's response is missing
    out, _ = capsys.readouterr()
    assert f"{scenario}:5: step 1: response is recorded as no response, the specification's model gives VoteResponse(LeaderId=-1, LeaderEpoch=1, VoteGranted=True)" in out
    assert main(["scenario", "record", str(scenario)]) == 0
    assert scenario.read_text() == VOTE_RECORDED
    assert main(["scenario", "run", str(scenario)]) == 0


def test_a_wrong_expectation_fails_at_its_line(tmp_path, capsys):
    scenario = tmp_path / "wrong.scenario"
    scenario.write_text(VOTE_RECORDED.replace("VoteGranted=true)", "VoteGranted=false)"))
    assert main(["scenario", "run", str(scenario)]) == 1
    out, _ = capsys.readouterr()
    assert f"\nfirst failure, {scenario}:\n  {scenario}:6: step 1: response.VoteGranted is recorded as False, the specification's model gives True\n" in out


def test_unreadable_scenarios_end_the_command_with_their_place_and_write_nothing(tmp_path, capsys):
    good, bad = tmp_path / "good.scenario", tmp_path / "bad.scenario"
    good.write_text(VOTE_INPUTS)
    bad.write_text(HEADER + "step request from 1: VoteRequest(Epoch=1)\n")
    assert main(["scenario", "record", str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert (out, good.read_text()) == ("", VOTE_INPUTS)
    assert err.startswith(f"kraftcheck: {bad}:3:34: VoteRequest has no field 'Epoch'") and "Traceback" not in err
    assert main(["scenario", "run", str(good), str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"kraftcheck: {bad}:3:34: ")
    assert main(["scenario", "run", str(tmp_path / "missing.scenario")]) == 2
    assert capsys.readouterr().err == f"kraftcheck: {tmp_path / 'missing.scenario'}: cannot read: No such file or directory\n"


# scenarios of the whole cluster, counterexamples --------------------------------------------

FORGET_VOTE = """\
# SAFE-2 violated: voter 1 voted for 1 and 2 in epoch 1
# found by kraftcheck check, configuration faults (2 voters, 1 client value, at most 2 elections, a crash and restart, duplication, loss, leader progress timeouts (overridden: profile))
scenario "counterexample-faults-SAFE-2"
cluster voters=[1, 2] profile="faulty-forget-vote"
do timer 1 election_timeout
do timer 2 election_timeout
do crash 1
do restart 1
do deliver from 2 to 1: VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=2, LastOffset=-1)
  expect violated SAFE-2
"""


def counterexample(tmp_path: Path, profile: str, prop: str) -> Path:
    assert main(["check", "--config", "faults", "--profile", profile, "--workers", "1", "--out", str(tmp_path)]) == 1
    return tmp_path / f"counterexample-faults-{prop}.jsonl"


def test_a_counterexample_shows_as_a_cluster_scenario(tmp_path, capsys):
    saved = counterexample(tmp_path, "faulty-forget-vote", "SAFE-2")
    capsys.readouterr()
    assert main(["traces", "show", str(saved), "--as", "scenario"]) == 0
    assert capsys.readouterr().out == FORGET_VOTE


@pytest.mark.parametrize("profile, prop", [("faulty-forget-vote", "SAFE-2"), ("faulty-truncate-to-hw", "SAFE-9")])
def test_running_a_counterexample_scenario_reproduces_the_violation(tmp_path, capsys, profile, prop):
    saved = counterexample(tmp_path, profile, prop)
    capsys.readouterr()
    assert main(["traces", "show", str(saved), "--as", "scenario"]) == 0
    scenario = tmp_path / "counterexample.scenario"
    scenario.write_text(capsys.readouterr().out)
    assert main(["scenario", "run", str(scenario)]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[1:4] == ["all", str(len(saved.read_text().splitlines()) - 1), "passes"]
    # under the correct model the same actions break nothing: the expectation fails at the last step
    scenario.write_text(scenario.read_text().replace(f'profile="{profile}"', 'profile="kip595"'))
    assert main(["scenario", "run", str(scenario)]) == 1
    assert f"expected {prop} violated, it holds" in capsys.readouterr().out


def test_a_cluster_scenario_checks_properties_and_node_states(tmp_path, capsys):
    scenario = tmp_path / "run.scenario"
    scenario.write_text(FORGET_VOTE.replace("  expect violated SAFE-2\n", "  expect violated SAFE-2\n  expect holds SAFE-1 SAFE-3\n  expect node 1 state voted epoch=1 voted_id=1\n"))
    assert main(["scenario", "run", str(scenario)]) == 1
    out, _ = capsys.readouterr()
    assert f"  {scenario}:9: step 5 (deliver from 2 to 1: VoteRequest(ClusterId=\"kraft-cluster\", CandidateEpoch=1, CandidateId=2, LastOffset=-1)): node 1: expected state voted epoch=1 voted_id=1, got state voted epoch=1 voted_id=2\n" in out
    scenario.write_text(FORGET_VOTE.replace("do timer 2 election_timeout\n", "do deliver from 1 to 2: VoteRequest(ClusterId=\"kraft-cluster\", CandidateEpoch=2, CandidateId=1)\n"))
    assert main(["scenario", "run", str(scenario)]) == 1
    out, _ = capsys.readouterr()
    assert f"  {scenario}:6: step 2 (deliver from 1 to 2: VoteRequest(ClusterId=\"kraft-cluster\", CandidateEpoch=2, CandidateId=1)): no such message in flight; in flight: from 1 to 2: VoteRequest(ClusterId=\"kraft-cluster\", CandidateEpoch=1, CandidateId=1, LastOffset=-1)\n" in out


@pytest.mark.parametrize(
    "text, error",
    [
        ("cluster voters=[1, 2]\ndo timer 3 election_timeout\n", "2:10: unknown node 3; expected one of 1, 2"),
        ("cluster voters=[1, 2]\ndo crash 1\n  expect violated SAFE-99\n", "3:19: unknown safety property 'SAFE-99'; expected one of SAFE-1,"),
        ("cluster voters=[1, 2]\ndo crash 1\nstep crash\n", "3:1: expected a do statement: a scenario is of one node (step) or of the whole cluster (do)"),
        ("cluster voters=[1, 2]\nnode 1\ndo crash 1\n", "2:1: a node statement in a scenario of the whole cluster (do)"),
        ("cluster voters=[1, 2]\ndo deliver from 1 to 2: VoteResponse()\n", "2:25: expected a request (a response names the request it answers: RESPONSE for REQUEST) message"),
        ("cluster voters=[1, 2]\ndo elect 2\n", "2:4: elect is an ISR partition's action; expected one of deliver, duplicate, drop, timer, append, resign, crash, restart, run until quiet"),
        ("partition replicas=[1, 2]\ndo timer 1 election_timeout\n", "2:4: timer is a KRaft cluster's action; expected one of deliver, append, fetch_next, shrink_isr, elect, crash, restart, power_failure, run until quiet"),
        ("partition replicas=[1, 2]\ndo elect 2\n  describe\n", "3:3: describe shows a KRaft quorum; an ISR partition has none"),
        ("partition replicas=[1, 2]\ndo elect 2\n  expect violated SAFE-1\n", "3:19: unknown safety property 'SAFE-1'; expected one of ISR-SAFE-1,"),
    ],
)
def test_cluster_scenario_errors_name_their_place(text, error):
    with pytest.raises(ScenarioError) as raised:
        parse(Path("bad.scenario"), text)
    assert str(raised.value).startswith(f"bad.scenario:{error}"), str(raised.value)


def test_a_cluster_scenario_prints_as_it_parses():
    scenario = parse(Path("x.scenario"), FORGET_VOTE)
    assert cluster_scenario_text(scenario) == FORGET_VOTE


QUORUM_VIEWS = """\
ClusterId:         kraft-cluster
LeaderId:          1
LeaderEpoch:       1
HighWatermark:     2
MaxFollowerLag:    2
CurrentVoters:     [1,2,3]
CurrentObservers:  []

ReplicaId    LogEndOffset    Lag    Status
1            2               0      Leader
2            2               0      Follower
3            -1              2      Follower
"""


def test_describe_prints_the_quorum_views_as_kafka_metadata_quorum_does(capsys):
    scenario = ROOT / "traces" / "scenarios" / "quorum-views.scenario"
    assert main(["scenario", "run", str(scenario)]) == 0
    out, _ = capsys.readouterr()
    views = out.split("\n\n")
    assert views[0].endswith(": step 6 (deliver from 2 to 1: FetchRequest(ClusterId=\"kraft-cluster\", ReplicaId=2, CurrentLeaderEpoch=1, LastFetchedEpoch=0)): describe\n"
                             "ClusterId:         kraft-cluster\nLeaderId:          1\nLeaderEpoch:       1\nHighWatermark:     0\nMaxFollowerLag:    2\n"
                             "CurrentVoters:     [1,2,3]\nCurrentObservers:  []")
    assert views[1] == "ReplicaId    LogEndOffset    Lag    Status\n1            2               0      Leader\n2            0               2      Follower\n3            -1              2      Follower"
    assert f"{scenario}:14: step 8 (" in views[2] and views[2].endswith("): describe\n" + QUORUM_VIEWS.split("\n\n")[0])
    assert views[3] + "\n" == QUORUM_VIEWS.split("\n\n")[1]


@pytest.mark.parametrize("saved", ["counterexample-figure8-SAFE-6.jsonl", "counterexample-tlc-kraft-if4-SAFE-6.jsonl", "counterexample-figure8-no-leader-change-SAFE-6.jsonl"])
def test_saved_counterexamples_of_the_faulty_variants_reproduce_as_scenarios(tmp_path, capsys, saved):
    """faulty-hw-any-epoch (figure8), faulty-vote-no-log-check (tlc-kraft-if4) and
    faulty-no-leader-change-hw-any-epoch (figure8 --fetch-max-records 0 --client-values 2), saved by
    check (minutes of search each); faulty-forget-vote and faulty-truncate-to-hw are searched above."""
    path = ROOT / "tests" / "data" / saved
    assert main(["traces", "show", str(path), "--as", "scenario"]) == 0
    scenario = tmp_path / "counterexample.scenario"
    scenario.write_text(capsys.readouterr().out)
    assert scenario.read_text().splitlines()[-1] == "  expect violated SAFE-6"
    assert main(["scenario", "run", str(scenario)]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[1:4] == ["all", str(len(path.read_text().splitlines()) - 1), "passes"]


KIP101_SCENARIO_1 = """\
# ISR-SAFE-2 violated: acknowledged record 0:0:v1 is not in the log of leader 2 (epoch 1: -); replicas [1] still hold it
# found by kraftcheck check, configuration isr-hw (KIP-101's scenarios 1 and 2: 2 replicas, min.isr 1, truncation to the high watermark, 2 producer records, 2 crashes, 1 election, a power failure losing unflushed records)
scenario "counterexample-isr-hw-ISR-SAFE-2"
partition replicas=[1, 2] truncation="hw"
do fetch_next 2
do append 1 1
do deliver from 2 to 1: FetchRequest(ReplicaId=2, CurrentLeaderEpoch=0)
do deliver from 1 to 2: FetchResponse(CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=0), Records=e0[0..0]{1}) for FetchRequest(ReplicaId=2, CurrentLeaderEpoch=0)
do fetch_next 2
do deliver from 2 to 1: FetchRequest(ReplicaId=2, CurrentLeaderEpoch=0, FetchOffset=1)
do crash 2
do crash 1
do restart 2
do elect 2
  expect violated ISR-SAFE-2
"""


def test_isr_counterexamples_reproduce_as_partition_scenarios(tmp_path, capsys):
    """isr-hw's three counterexamples (KIP-101's scenarios 1 and 2) as scenarios of the whole
    partition; with leader-epoch truncation the same runs break nothing, but for the power failure
    that loses an unflushed record (ISR-SAFE-3: KIP-101 leaves that loss). Their replicas' traces
    print as node scenarios that compile back."""
    assert main(["check", "--config", "isr-hw", "--out", str(tmp_path)]) == 1
    capsys.readouterr()
    saved = sorted(tmp_path.glob("counterexample-isr-hw-*.jsonl"))
    assert [path.name for path in saved] == [f"counterexample-isr-hw-ISR-SAFE-{n}.jsonl" for n in (1, 2, 3)]
    for path in saved:
        assert main(["traces", "show", str(path), "--as", "scenario"]) == 0
        scenario = path.with_suffix(".scenario")
        scenario.write_text(capsys.readouterr().out)
        assert main(["scenario", "run", str(scenario)]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == "1 scenarios, 1 pass, 0 fail (adapter reference)"
        scenario.write_text(scenario.read_text().replace('partition replicas=[1, 2] truncation="hw"', "partition replicas=[1, 2]"))
        assert main(["scenario", "run", str(scenario)]) == (0 if path.name.endswith("SAFE-3.jsonl") else 1)
        capsys.readouterr()
    assert tmp_path.joinpath("counterexample-isr-hw-ISR-SAFE-2.scenario").read_text() != KIP101_SCENARIO_1  # rewritten above
    assert main(["traces", "show", str(saved[1]), "--as", "scenario"]) == 0
    assert capsys.readouterr().out == KIP101_SCENARIO_1
    replicas = sorted(tmp_path.glob("counterexample-isr-hw-*/*.jsonl"))
    assert len(replicas) >= 4
    for trace in replicas:
        assert main(["traces", "show", str(trace), "--as", "scenario"]) == 0
        assert traces.to_jsonl(parse(trace, capsys.readouterr().out).trace) == trace.read_bytes()


def test_an_expected_message_in_flight_is_checked(tmp_path, capsys):
    scenario = tmp_path / "in-flight.scenario"
    scenario.write_text(
        'cluster voters=[1, 2]\ndo timer 1 election_timeout\n'
        '  expect in flight from 1 to 2: VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=1, LastOffset=-1)\n'
        '  expect in flight from 1 to 2: VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=2, CandidateId=1, LastOffset=-1)\n'
    )
    assert main(["scenario", "run", str(scenario)]) == 1
    assert (
        f"  {scenario}:2: step 1 (timer 1 election_timeout): expected in flight from 1 to 2: VoteRequest(ClusterId=\"kraft-cluster\", CandidateEpoch=2, CandidateId=1, LastOffset=-1); "
        "in flight: from 1 to 2: VoteRequest(ClusterId=\"kraft-cluster\", CandidateEpoch=1, CandidateId=1, LastOffset=-1)\n"
    ) in capsys.readouterr().out


@pytest.mark.parametrize("path", LIBRARY, ids=lambda path: path.stem)
def test_every_library_scenario_prints_as_it_parses(path):
    """Printing a parsed scenario and parsing it again gives the same scenario (comments kept)."""
    first = parse(path, path.read_text())
    printed = scenario_text(first.trace, first.comments) if type(first) is Scenario else cluster_scenario_text(first)
    again = parse(path, printed)
    if type(first) is Scenario:
        assert (traces.to_jsonl(again.trace), again.comments) == (traces.to_jsonl(first.trace), first.comments)
    else:
        assert (again.name, again.setting, again.steps) == (first.name, first.setting, first.steps)
        assert sorted(line for lines in again.comments.values() for line in lines) == sorted(line for lines in first.comments.values() for line in lines)


def test_describe_a_trace_step(capsys):
    """Walk 0's node 1 is elected in epoch 6 at step 27 (its trace's state: leader, log end 1, high
    watermark 0); the other voters have not fetched yet."""
    walk = ROOT / "traces" / "corpus-walk-0000-node1.jsonl"
    assert main(["describe", str(walk), "--step", "28"]) == 0
    assert capsys.readouterr().out == (
        "ClusterId:         kraft-cluster\nLeaderId:          1\nLeaderEpoch:       6\nHighWatermark:     0\nMaxFollowerLag:    1\n"
        "CurrentVoters:     [1,2,3]\nCurrentObservers:  []\n\n"
        "ReplicaId    LogEndOffset    Lag    Status\n1            1               0      Leader\n2            -1              1      Follower\n3            -1              1      Follower\n"
    )
    assert main(["describe", str(walk)]) == 0
    assert capsys.readouterr().out == "node 1 is candidate after step 55, not the leader: DescribeQuorum answers NOT_LEADER_OR_FOLLOWER\n"
    assert main(["describe", str(walk), "--step", "56"]) == 2
    assert capsys.readouterr().err == "kraftcheck: corpus-walk-0000-node1: no step 56; expected 0 to 55\n"


def test_the_library_compiles_to_a_corpus_that_certify_replays(tmp_path, capsys):
    out = tmp_path / "corpus"
    assert main(["scenario", "compile", *map(str, LIBRARY), "--out", str(out)]) == 0
    names = sorted(path.name for path in out.iterdir())
    assert "zombie-leader-node3.jsonl" in names and "vote-log-check.jsonl" in names
    assert all(traces.read(out / name).header.name == name.removesuffix(".jsonl") for name in names)
    assert capsys.readouterr().out == f"{len(names)} traces from {len(LIBRARY)} scenarios written to {out}\n"
    assert main(["certify", "--corpus", str(out), "--no-verify", "--adapter", "reference", "--jobs", "1", "--out", str(tmp_path / "reference")]) == 0
    assert main(["certify", "--corpus", str(out), "--no-verify", "--adapter", "mutant:hw-any-epoch", "--jobs", "1", "--out", str(tmp_path / "mutant")]) == 1
    assert "rules departed from: FETCH-REQ-4 HW-1" in capsys.readouterr().out


def test_compile_refuses_a_scenario_whose_expectations_are_not_the_models(tmp_path, capsys):
    wrong = tmp_path / "wrong.scenario"
    wrong.write_text(VOTE_RECORDED.replace("VoteGranted=true)", "VoteGranted=false)"))
    assert main(["scenario", "compile", str(wrong), "--out", str(tmp_path / "corpus")]) == 2
    assert capsys.readouterr().err == f"kraftcheck: {wrong}:6: step 1: response.VoteGranted is recorded as False, the specification's model gives True\n"
    assert not (tmp_path / "corpus").exists()


def test_a_cluster_scenario_sets_up_nodes_from_persisted_states(capsys):
    scenario = parse(Path("x.scenario"), (ROOT / "traces" / "scenarios" / "cluster-diverging-epoch-catch-up.scenario").read_text())
    assert [(node, initial.epoch, [(r.Offset, r.Epoch) for r in initial.log]) for node, initial in scenario.initial] == [
        (1, 3, [(0, 1), (1, 3), (2, 3)]),
        (2, 2, [(0, 1), (1, 2), (2, 2), (3, 2)]),
        (3, 3, [(0, 1), (1, 3), (2, 3)]),
    ]
    with pytest.raises(ScenarioError) as raised:
        parse(Path("bad.scenario"), "cluster voters=[1, 2]\ninitial node 3 epoch=1\ndo restart 1\n")
    assert str(raised.value) == "bad.scenario:2:14: unknown node 3; expected one of 1, 2"
    with pytest.raises(ScenarioError) as raised:
        parse(Path("bad.scenario"), "cluster voters=[1, 2]\nnode 1\ninitial node 2 epoch=1\nstep crash\n")
    assert str(raised.value).startswith("bad.scenario:3:1: an initial node N statement in a scenario of one node (step)")


def test_record_fills_in_a_cluster_scenarios_last_expectations(tmp_path):
    scenario = tmp_path / "quiet.scenario"
    scenario.write_text("# one election, one append\ncluster voters=[1, 2, 3] observers=[4]\ndo timer 1 election_timeout\ndo run until quiet\ndo append 1 7\ndo run until quiet\n  describe\n")
    assert main(["scenario", "record", str(scenario)]) == 0
    assert scenario.read_text() == """\
# one election, one append
scenario "quiet"
cluster voters=[1, 2, 3] observers=[4]
do timer 1 election_timeout
do run until quiet
do append 1 7
do run until quiet
  expect holds SAFE-1 SAFE-2 SAFE-3 SAFE-4 SAFE-5 SAFE-6 SAFE-7 SAFE-8 SAFE-9
  expect node 1 state leader epoch=1 leader_id=1 voted_id=1 high_watermark=2 log=e1[0..1]
  expect node 2 state follower epoch=1 leader_id=1 voted_id=1 high_watermark=2 log=e1[0..1]
  expect node 3 state follower epoch=1 leader_id=1 voted_id=1 high_watermark=2 log=e1[0..1]
  expect node 4 state observer epoch=0
  describe
"""
    assert main(["scenario", "run", str(scenario)]) == 0


def test_every_request_and_response_handling_rule_has_a_scenario():
    """traces/scenarios/rule-RULE.scenario for every VOTE-, BEGIN-, END-, FETCH- and DESCRIBE-
    handling rule a node applies (DESCRIBE-RESP-* are the admin client's), its last step citing it."""
    catalogue = tomllib.loads((ROOT / "spec" / "rules.toml").read_text())["rule"]
    handling = [rule["id"] for rule in catalogue if re.fullmatch(r"(VOTE|BEGIN|END|FETCH)-(REQ|RESP)-.*|DESCRIBE-REQ-.*", rule["id"])]
    assert len(handling) == 41
    for rule in handling:
        scenario = parse(Path("x.scenario"), (ROOT / "traces" / "scenarios" / f"rule-{rule.lower()}.scenario").read_text())
        assert rule in scenario.trace.steps[-1].rules, rule


def test_values_nested_too_deeply_are_an_error_not_a_crash():
    with pytest.raises(ScenarioError) as raised:
        parse(Path("deep.scenario"), "cluster voters=[1]\nnode 1\ninitial log=" + "[" * 20000 + "]" * 20000 + "\n")
    assert str(raised.value) == "deep.scenario: values nested too deeply"
