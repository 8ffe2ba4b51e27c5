"""The subprocess adapter: the example node matches the in-process model, and every way a process can fail is reported."""

import os
import shlex
import subprocess
import sys
import textwrap
import time

import msgspec
import pytest

from adapters.contract import AdapterError, CapabilityLacking
from adapters.model_adapter import ModelAdapter
from adapters.subprocess_adapter import SubprocessAdapter
from conformance.certify.replay import NOT_APPLICABLE, replay
from conformance.corpus.reference import build_trace
from model.events import Answer, AppendResult, ClientAppend, Crash, Request, Resign, Response, Restart, Send, Timer, TimerKind
from model.isr.events import AlterIsr, FetchNext, PowerLoss, ShrinkIsr, Startup
from model.isr.state import LeaderAndIsr
from model.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderChangeMessage,
    LeaderIdAndEpoch,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Record,
    VoteRequest,
    VoteResponse,
)
from spec import errors
from spec.trace import FORMAT_VERSION, KIND, Header, Outputs, Persisted, TraceCluster, TracePartition

EXAMPLE_NODE = f"{shlex.quote(sys.executable)} -m adapters.example_node"
CLUSTER_ID = "kraft-cluster"


def header(node: int, initial: Persisted = Persisted(), observers: tuple[int, ...] = ()) -> Header:
    return Header(
        kind=KIND,
        format_version=FORMAT_VERSION,
        name="scenario",
        cluster=TraceCluster(voters=(1, 2, 3), observers=observers),
        node=node,
        steps=0,
        initial=initial,
    )


def isr_header(node: int, replicas: tuple[int, ...] = (1, 2), initial: Persisted = Persisted()) -> Header:
    return Header(kind=KIND, format_version=FORMAT_VERSION, name="isr-scenario", partition=TracePartition(replicas=replicas), node=node, steps=0, initial=initial)


def fetch(replica: int, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    return FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch)


def fetched(records: tuple[Record, ...], high_watermark: int, error: int = errors.NONE) -> FetchResponse:
    return FetchResponse(
        ErrorCode=error,
        HighWatermark=high_watermark,
        DivergingEpoch=EpochEndOffset(Epoch=-1, EndOffset=-1),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=1),
        Records=records,
    )


LEADER_CHANGE = Record(Offset=0, Epoch=1, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 2)))
VOTE = VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=1, CandidateId=1, LastOffsetEpoch=0, LastOffset=-1)

# Node 1 is elected, serves Fetches with records, takes a client append, refuses a vote,
# resigns, crashes (dropping an append while down), restarts and runs for election again.
ELECTION = (
    header(1),
    [
        Timer(kind=TimerKind.ELECTION_TIMEOUT),
        Response(source=2, message=VoteResponse(LeaderId=-1, LeaderEpoch=1, VoteGranted=True), request=VOTE),
        Request(source=2, message=fetch(2, 1, 0, 0)),
        ClientAppend(value=7),
        Request(source=3, message=fetch(3, 1, 1, 1)),
        Request(source=3, message=VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=1, CandidateId=3, LastOffsetEpoch=1, LastOffset=1)),
        Request(source=2, message=DescribeQuorumRequest()),
        Resign(),
        Crash(),
        ClientAppend(value=8),
        Restart(),
        Timer(kind=TimerKind.ELECTION_TIMEOUT),
    ],
    ["candidate", "leader", "leader", "leader", "leader", "leader", "leader", "resigned", "down", "down", "resigned", "candidate"],
)

# Node 2 restarts from persisted state as a follower, replicates a record, follows a new
# leader, re-sends its Fetch, and shuts down on a cluster-id conflict.
FOLLOWER = (
    header(2, Persisted(epoch=1, leader_id=1, voted_id=1, log=(LEADER_CHANGE,)), observers=(4,)),
    [
        Restart(),
        Response(source=1, message=fetched((Record(Offset=1, Epoch=1, Value=7),), 1), request=fetch(2, 1, 1, 1)),
        Request(source=3, message=BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=3, LeaderEpoch=2)),
        Timer(kind=TimerKind.REQUEST_TIMEOUT),
        Response(source=3, message=fetched((), 0, errors.INCONSISTENT_CLUSTER_ID), request=fetch(2, 2, 2, 1)),
        ClientAppend(value=9),
    ],
    ["follower", "follower", "follower", "follower", "down", "down"],
)


ISR_RECORDS = (Record(Offset=0, Epoch=0, Value=1), Record(Offset=1, Epoch=0, Value=2))
ISR_FETCH = FetchRequest(ReplicaId=2, CurrentLeaderEpoch=0, FetchOffset=0)
ISR_EPOCH_1 = LeaderAndIsr(Leader=1, LeaderEpoch=1, Isr=(1, 2))
ISR_OFFSETS = OffsetsForLeaderEpochRequest(ReplicaId=2, CurrentLeaderEpoch=1, LeaderEpoch=0)

# Replica 2 of partition (1, 2) fetches two records of epoch 0 the high watermark does not
# cover, crashes, starts up under leader 1 of epoch 1, asks it where epoch 0 ends and truncates
# to its answer (KIP-101), then fetches from there.
ISR_FOLLOWER = (
    isr_header(2),
    [
        FetchNext(),
        Response(source=1, message=FetchResponse(HighWatermark=0, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=0), Records=ISR_RECORDS), request=ISR_FETCH),
        Crash(),
        Startup(partition=ISR_EPOCH_1),
        Response(source=1, message=OffsetsForLeaderEpochResponse(LeaderEpoch=0, EndOffset=1), request=ISR_OFFSETS),
        FetchNext(),
    ],
    ["follower", "follower", "down", "follower", "follower", "follower"],
)

# Replica 1 leads partition (1, 2): an append waits for the ISR, which shrinks (AlterIsr) and so
# commits it; replica 2 fetches, catches up and rejoins (AlterIsr), asks where epoch 0 ends; then
# a power loss, a startup and the controller's election of replica 1 in epoch 1.
ISR_LEADER = (
    isr_header(1),
    [
        ClientAppend(value=7),
        ShrinkIsr(replica=2),
        Request(source=2, message=ISR_FETCH),
        Request(source=2, message=FetchRequest(ReplicaId=2, CurrentLeaderEpoch=0, FetchOffset=1)),
        Request(source=2, message=OffsetsForLeaderEpochRequest(ReplicaId=2, CurrentLeaderEpoch=0, LeaderEpoch=0)),
        PowerLoss(keep=0),
        Startup(partition=LeaderAndIsr(Leader=1, LeaderEpoch=0, Isr=(1, 2))),
        LeaderAndIsr(Leader=1, LeaderEpoch=1, Isr=(1,)),
        ClientAppend(value=8),
    ],
    ["leader", "leader", "leader", "leader", "leader", "down", "follower", "leader", "leader"],
)

# Replica 2 starts down from its log and high-watermark checkpoint, and starts up under leader 1.
ISR_CHECKPOINT = (
    isr_header(2, initial=Persisted(log=ISR_RECORDS, high_watermark=2)),
    [Startup(partition=ISR_EPOCH_1), FetchNext()],
    ["follower", "follower"],
)


@pytest.fixture
def make_adapter():
    """Adapters that are closed (their processes stopped and reaped) whatever the test did."""
    made: list[SubprocessAdapter] = []

    def make(command: str, step_timeout: float = 10.0) -> SubprocessAdapter:
        made.append(SubprocessAdapter(command, step_timeout))
        return made[-1]

    yield make
    for adapter in made:
        adapter.close()


def run(adapter, scenario) -> list:
    start, events, _ = scenario
    adapter.start(start)
    try:
        return [(adapter.step(event), adapter.observe()) for event in events]
    finally:
        adapter.close()


@pytest.mark.parametrize(
    "scenario", [ELECTION, FOLLOWER, ISR_FOLLOWER, ISR_LEADER, ISR_CHECKPOINT], ids=["election", "follower", "isr-follower", "isr-leader", "isr-checkpoint"]
)
def test_example_node_answers_as_the_model(make_adapter, scenario):
    expected = run(ModelAdapter("model"), scenario)
    assert [observed.role for _, observed in expected] == scenario[2]  # the scenario does what it says
    assert run(make_adapter(EXAMPLE_NODE), scenario) == expected


def test_the_isr_scenarios_exercise_truncation_and_alter_isr():
    """What the ISR scenarios are for, so that a change to the model cannot quietly make them trivial."""
    follower = run(ModelAdapter("model"), ISR_FOLLOWER)
    assert follower[3][0].sends[0].message == ISR_OFFSETS and follower[4][1].log == ((0, 0),)
    leader = run(ModelAdapter("model"), ISR_LEADER)
    assert [outputs.alter_isr for outputs, _ in leader[1:4]] == [AlterIsr(LeaderEpoch=0, Isr=(1,)), None, AlterIsr(LeaderEpoch=0, Isr=(1, 2))]
    assert leader[1][0].append_result == AppendResult(ErrorCode=0, Offset=0)
    checkpoint = run(ModelAdapter("model"), ISR_CHECKPOINT)
    assert checkpoint[0][1].high_watermark == 2 and checkpoint[0][0].sends[0].message == ISR_OFFSETS


def fake_node(tmp_path, after_start: str) -> str:
    """A command running a script that answers start, reads the next command into `line`, then runs `after_start`."""
    script = tmp_path / "node.py"
    prologue = 'import sys, time\nsys.stdin.readline()\nprint(\'{"ok": true}\', flush=True)\nline = sys.stdin.readline()\n'
    script.write_text(prologue + textwrap.dedent(after_start))
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


ANSWER = '{"ok": true, "response": null, "append_result": null, "shutdown": false}'
ISR_ANSWER = '{"ok": true, "response": null, "append_result": null, "shutdown": false, "alter_isr": null}'
DRAINED = '{"ok": true, "sends": []}'
OBSERVED = '"role": "follower", "epoch": 0, "leader_id": 1, "voted_id": -1, "log_end_offset": 0, "high_watermark": 0, "log": []'
FIRST_STEP = {"kraft": (header(1), Timer(kind=TimerKind.ELECTION_TIMEOUT)), "isr": (isr_header(1), FetchNext())}
"""Each system's start header and a first input, for a fake node to answer."""


def replying(*replies: str) -> str:
    """A fake node's `after_start` that answers the next commands with `replies`, in order."""
    return "".join(f"print({reply!r}, flush=True)\nsys.stdin.readline()\n" for reply in replies)


def failure(adapter: SubprocessAdapter, system: str = "kraft") -> str:
    """The error of the first step (and its observation) of `system` through a fake node."""
    start, event = FIRST_STEP[system]
    adapter.start(start)
    with pytest.raises(AdapterError) as raised:
        adapter.step(event)
        adapter.observe()
    return str(raised.value)


def test_exit_mid_trace_reports_the_exit_code_and_stderr(make_adapter, tmp_path):
    adapter = make_adapter(fake_node(tmp_path, 'sys.stderr.write("fatal: disk on fire\\n")\nsys.exit(3)\n'))
    message = failure(adapter)
    assert "exited with code 3 before replying to 'timer'" in message
    assert "fatal: disk on fire" in message


def test_hang_is_killed_after_the_step_timeout(make_adapter, tmp_path):
    adapter = make_adapter(fake_node(tmp_path, "time.sleep(60)\n"), step_timeout=0.5)
    adapter.start(header(1))
    process = adapter.process
    began = time.monotonic()
    with pytest.raises(AdapterError, match=r"no reply to 'timer' within the step timeout of 0\.5 s; the process was killed"):
        adapter.step(Timer(kind=TimerKind.ELECTION_TIMEOUT))
    assert time.monotonic() - began < 2
    assert process.returncode is not None  # killed and reaped
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("node 1 ready, waiting for votes", "not JSON"),
        ('["ok"]', 'a JSON object with a boolean "ok"'),
        ('{"ok": true, "response": null}', "missing required field `append_result`"),
        ('{"ok": true, "response": null, "append_result": null, "shutdown": "no"}', "Expected `bool`, got `str` - at `$.shutdown`"),
        ('{"ok": true, "response": {"type": "VoteResponse", "ErrorCode": 0}, "append_result": null, "shutdown": false}', "$.response lacks PartitionErrorCode"),
    ],
)
def test_garbage_reply_is_quoted(make_adapter, tmp_path, reply, reason):
    adapter = make_adapter(fake_node(tmp_path, f"print({reply!r}, flush=True)\nsys.stdin.read()\n"))
    message = failure(adapter)
    assert message.startswith("invalid reply to 'timer': ")
    assert reason in message
    assert repr(reply[:200]) in message


def test_unknown_field_in_a_sent_message_is_reported(make_adapter, tmp_path):
    vote = msgspec.json.encode({"destination": 2, "message": msgspec.to_builtins(VOTE) | {"Extra": 1}}).decode()
    drained = '{"ok": true, "sends": [' + vote + "]}"
    adapter = make_adapter(fake_node(tmp_path, replying(ANSWER, drained)))
    assert "$.sends[0].message has unknown fields Extra" in failure(adapter)


def test_answers_to_earlier_requests_are_optional_and_their_omissible_fields_read_alike(make_adapter, tmp_path):
    """A reply may carry `answers` (a held Fetch answered later, FETCH-REQ-7); an omissible field
    (a Fetch's MaxWaitMs, ReplicaEpoch, HighWatermark) written at its default says what leaving
    it out says, in answers and in sends alike; one the message does not know is still refused."""
    held = msgspec.to_builtins(fetch(2, 1, 1, 1)) | {"MaxWaitMs": 500, "ReplicaEpoch": -1}
    answered = msgspec.to_builtins(fetched((), 1))
    answer = ANSWER[:-1] + ', "answers": [' + msgspec.json.encode({"destination": 2, "message": answered, "request": held}).decode() + "]}"
    own = msgspec.json.encode({"destination": 1, "message": msgspec.to_builtins(fetch(3, 1, 1, 1)) | {"MaxWaitMs": 0, "HighWatermark": 9223372036854775807}}).decode()
    drained = '{"ok": true, "sends": [' + own + "]}"
    adapter = make_adapter(fake_node(tmp_path, replying(answer, drained, '{"ok": true, "state": {' + OBSERVED + "}}")))
    adapter.start(header(3))
    outputs = adapter.step(Timer(kind=TimerKind.ELECTION_TIMEOUT))
    assert outputs == Outputs(sends=(Send(destination=1, message=fetch(3, 1, 1, 1)),), answers=(Answer(destination=2, message=fetched((), 1), request=msgspec.structs.replace(fetch(2, 1, 1, 1), MaxWaitMs=500)),))
    assert outputs.sends[0].message.MaxWaitMs is msgspec.UNSET


def test_an_answer_lacking_its_request_is_reported(make_adapter, tmp_path):
    answer = ANSWER[:-1] + ', "answers": [{"destination": 2, "message": ' + msgspec.json.encode(fetched((), 1)).decode() + "}]}"
    adapter = make_adapter(fake_node(tmp_path, replying(answer)))
    assert "Object missing required field `request` - at `$.answers[0]`" in failure(adapter)


def test_a_kraft_reply_needs_no_alter_isr(make_adapter, tmp_path):
    """A KRaft implementation written before ISR replicas existed keeps working unchanged."""
    adapter = make_adapter(fake_node(tmp_path, replying(ANSWER, DRAINED, '{"ok": true, "state": {' + OBSERVED + "}}")))
    adapter.start(header(1))
    assert adapter.step(Timer(kind=TimerKind.ELECTION_TIMEOUT)) == Outputs()


def test_an_isr_reply_reports_alter_isr(make_adapter, tmp_path):
    answer = '{"ok": true, "response": null, "append_result": null, "shutdown": false, "alter_isr": {"LeaderEpoch": 0, "Isr": [1]}}'
    adapter = make_adapter(fake_node(tmp_path, replying(answer, DRAINED, '{"ok": true, "state": {' + OBSERVED + ', "isr": [1]}}')))
    adapter.start(isr_header(1))
    assert adapter.step(ShrinkIsr(replica=2)) == Outputs(alter_isr=AlterIsr(LeaderEpoch=0, Isr=(1,)))


@pytest.mark.parametrize(
    "system, replies, reason",
    [
        ("isr", [ANSWER], "Object missing required field `alter_isr`"),
        ("isr", [ANSWER[:-1] + ', "alter_isr": {"LeaderEpoch": 0}}'], "Object missing required field `Isr` - at `$.alter_isr`"),
        ("isr", [ANSWER[:-1] + ', "alter_isr": {"LeaderEpoch": 0, "Isr": "1,2"}}'], "Expected `array`, got `str` - at `$.alter_isr.Isr`"),
        ("isr", [ANSWER[:-1] + ', "alter_isr": [0, [1, 2]]}'], "Expected `object | null`, got `array` - at `$.alter_isr`"),
        ("kraft", [ISR_ANSWER], "Object contains unknown field `alter_isr`"),
        ("isr", [ISR_ANSWER, DRAINED, '{"ok": true, "state": {' + OBSERVED + "}}"], "$.state lacks isr"),
        ("kraft", [ANSWER, DRAINED, '{"ok": true, "state": {' + OBSERVED + ', "isr": []}}'], "$.state has unknown fields isr"),
    ],
)
def test_each_system_has_its_own_reply_fields(make_adapter, tmp_path, system, replies, reason):
    """alter_isr and isr are required of an ISR replica and unknown to a KRaft node: neither is left to a default."""
    adapter = make_adapter(fake_node(tmp_path, replying(*replies)))
    message = failure(adapter, system)
    assert message.startswith("invalid reply to ")
    assert reason in message
    assert repr(replies[-1][:200]) in message


@pytest.mark.parametrize(
    "start, line",
    [
        (
            header(1),
            b'{"command":"start","cluster":{"voters":[1,2,3],"observers":[],"cluster_id":"kraft-cluster","profile":"kip595","fetch_max_records":0},'
            b'"node":1,"initial":{"epoch":0,"leader_id":-1,"voted_id":-1,"log":[]}}',
        ),
        (
            isr_header(2, (1, 2, 3), Persisted(log=ISR_RECORDS[:1], high_watermark=1)),
            b'{"command":"start","partition":{"replicas":[1,2,3],"min_isr":1,"truncation":"epoch"},"node":2,'
            b'"initial":{"log":[{"type":"Record","Offset":0,"Epoch":0,"Value":1}],"high_watermark":1}}',
        ),
    ],
    ids=["kraft", "isr"],
)
def test_start_carries_every_field_of_its_system(make_adapter, tmp_path, start, line):
    """The trace header leaves defaults out; the start command lists them all, as the protocol does."""
    received = tmp_path / "start.json"
    script = tmp_path / "node.py"
    script.write_text(f"import sys\nopen({str(received)!r}, 'wb').write(sys.stdin.buffer.readline())\nprint('{{\"ok\": true}}', flush=True)\nsys.stdin.read()\n")
    adapter = make_adapter(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    adapter.start(start)
    adapter.close()
    assert received.read_bytes() == line + b"\n"


def test_missing_command_is_reported(make_adapter):
    adapter = make_adapter("/nonexistent/kraft-node --quiet")
    with pytest.raises(AdapterError, match="cannot start '/nonexistent/kraft-node --quiet': No such file or directory"):
        adapter.start(header(1))


def test_refusal_is_reported_with_its_text(make_adapter, tmp_path):
    adapter = make_adapter(fake_node(tmp_path, 'print(\'{"ok": false, "error": "unsupported: timers"}\', flush=True)\nsys.stdin.read()\n'))
    assert failure(adapter) == "the implementation refused 'timer': unsupported: timers"


DECLINED = '{"ok": false, "error": "unsupported: a request in flight times out first", "lacks": "LateRequestTimeout"}'
OBSERVED_REPLY = '{"ok": true, "state": {' + OBSERVED + "}}"


def test_a_refusal_naming_a_capability_declines_the_step_and_leaves_the_process_usable(make_adapter, tmp_path):
    """A node may decline one input for want of a capability it has in some states only (a timer
    its clock cannot fire first): the replies to the step's other commands are still read, so
    the same process answers the next command."""
    adapter = make_adapter(fake_node(tmp_path, replying(DECLINED, DRAINED, OBSERVED_REPLY, OBSERVED_REPLY)))
    adapter.start(header(1))
    with pytest.raises(CapabilityLacking) as declined:
        adapter.step(Timer(kind=TimerKind.ELECTION_TIMEOUT))
    assert declined.value.capability == "LateRequestTimeout"
    assert str(declined.value) == "the implementation refused 'timer': unsupported: a request in flight times out first"
    assert adapter.observe().role == "follower"  # the fourth reply: nothing was left unread


def test_a_declined_step_makes_the_trace_not_applicable_from_there(make_adapter, tmp_path):
    trace = build_trace("declined", TraceCluster(voters=(1, 2, 3)), 1, [Timer(kind=TimerKind.ELECTION_TIMEOUT)], "test")
    adapter = make_adapter(fake_node(tmp_path, replying(DECLINED, DRAINED, OBSERVED_REPLY) + "sys.stdin.read()\n"))
    result = replay(adapter, trace, "declined.jsonl")
    assert (result.verdict, result.lacks) == (NOT_APPLICABLE, ("LateRequestTimeout",))
    assert result.failure == "step 1: the implementation refused 'timer': unsupported: a request in flight times out first"
    assert result.rules_not_applicable == tuple(sorted(trace.steps[0].rules)) and result.steps_run == 0


def test_a_refusal_naming_an_unknown_capability_is_an_invalid_reply(make_adapter, tmp_path):
    adapter = make_adapter(fake_node(tmp_path, replying('{"ok": false, "error": "no", "lacks": "Telepathy"}', DRAINED, OBSERVED_REPLY)))
    assert "invalid reply to 'timer': a refusal for want of 'Telepathy', which is not an optional capability" in failure(adapter)


def test_close_stops_a_process_that_ignores_stop(make_adapter, tmp_path):
    adapter = make_adapter(fake_node(tmp_path, "time.sleep(60)\n"))
    adapter.start(header(1))
    process = adapter.process
    began = time.monotonic()
    adapter.close()
    assert time.monotonic() - began < 3
    assert process.returncode is not None


def test_example_node_refuses_malformed_commands_and_goes_on():
    start = msgspec.json.encode({"command": "start", "cluster": TraceCluster(voters=(1,)), "node": 1, "initial": Persisted()})
    lines = [b"not json", b"[1]", b'{"command": "drain"}', start, b'{"command": "timer", "kind": "soon"}', b'{"command": "fly"}', b'{"command": "stop"}']
    done = subprocess.run([sys.executable, "-m", "adapters.example_node"], input=b"\n".join(lines) + b"\n", capture_output=True, timeout=30)
    replies = [msgspec.json.decode(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0
    assert [reply["ok"] for reply in replies] == [False, False, False, True, False, False, True]
    assert replies[2]["error"] == "'drain' before start"
    assert replies[5]["error"] == "unknown command 'fly'"


def test_example_node_refuses_what_an_isr_replica_does_not_take():
    start = {"command": "start", "partition": TracePartition(replicas=(1, 2)), "initial": {"log": [], "high_watermark": 0}}
    lines = [msgspec.json.encode(start | {"node": 9}), msgspec.json.encode(start | {"node": 2}), b'{"command": "timer", "kind": "fetch_timeout"}', b'{"command": "stop"}']
    done = subprocess.run([sys.executable, "-m", "adapters.example_node"], input=b"\n".join(lines) + b"\n", capture_output=True, timeout=30)
    replies = [msgspec.json.decode(line) for line in done.stdout.splitlines()]
    assert [reply["ok"] for reply in replies] == [False, True, False, True]
    assert replies[0]["error"] == "node 9 is not a replica of the partition [1, 2]"
    assert replies[2]["error"] == "unknown command 'timer'"


def test_a_step_sends_input_drain_and_observe_in_one_write(make_adapter, tmp_path):
    """One round trip per step: the state observed with the step is what observe() returns; the
    fake node answers those three commands and exits, so a fourth command could not be answered."""
    adapter = make_adapter(fake_node(tmp_path, replying(ANSWER, DRAINED, '{"ok": true, "state": {' + OBSERVED + "}}") + "sys.exit(0)\n"))
    adapter.start(header(1))
    assert adapter.step(Timer(kind=TimerKind.ELECTION_TIMEOUT)) == Outputs()
    observed = adapter.observe()
    assert (observed.role, observed.leader_id) == ("follower", 1)
    with pytest.raises(AdapterError, match="exited with code 0 before replying to 'observe'"):
        adapter.observe()  # nothing observed with a step any more: this one goes to the process
