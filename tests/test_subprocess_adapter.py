"""The subprocess adapter: the example node matches the in-process model, and every way a process can fail is reported."""

import os
import shlex
import subprocess
import sys
import textwrap
import time

import msgspec
import pytest

from adapters.contract import AdapterError
from adapters.model_adapter import ModelAdapter
from adapters.subprocess_adapter import SubprocessAdapter
from conformance.trace import FORMAT_VERSION, KIND, Header, Persisted, TraceCluster
from model.events import ClientAppend, Crash, Request, Resign, Response, Restart, Timer, TimerKind
from model.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderChangeMessage,
    LeaderIdAndEpoch,
    Record,
    VoteRequest,
    VoteResponse,
)
from spec import errors

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


@pytest.mark.parametrize("scenario", [ELECTION, FOLLOWER], ids=["election", "follower"])
def test_example_node_answers_as_the_model(make_adapter, scenario):
    expected = run(ModelAdapter("model"), scenario)
    assert [observed.role for _, observed in expected] == scenario[2]  # the scenario does what it says
    assert run(make_adapter(EXAMPLE_NODE), scenario) == expected


def fake_node(tmp_path, after_start: str) -> str:
    """A command running a script that answers start, reads the next command into `line`, then runs `after_start`."""
    script = tmp_path / "node.py"
    prologue = 'import sys, time\nsys.stdin.readline()\nprint(\'{"ok": true}\', flush=True)\nline = sys.stdin.readline()\n'
    script.write_text(prologue + textwrap.dedent(after_start))
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def failure(adapter: SubprocessAdapter) -> str:
    adapter.start(header(1))
    with pytest.raises(AdapterError) as raised:
        adapter.step(Timer(kind=TimerKind.ELECTION_TIMEOUT))
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
    answer = '{"ok": true, "response": null, "append_result": null, "shutdown": false}'
    drained = '{"ok": true, "sends": [' + vote + "]}"
    adapter = make_adapter(fake_node(tmp_path, f"print({answer!r}, flush=True)\nsys.stdin.readline()\nprint({drained!r}, flush=True)\nsys.stdin.read()\n"))
    assert "$.sends[0].message has unknown fields Extra" in failure(adapter)


def test_missing_command_is_reported(make_adapter):
    adapter = make_adapter("/nonexistent/kraft-node --quiet")
    with pytest.raises(AdapterError, match="cannot start '/nonexistent/kraft-node --quiet': No such file or directory"):
        adapter.start(header(1))


def test_refusal_is_reported_with_its_text(make_adapter, tmp_path):
    adapter = make_adapter(fake_node(tmp_path, 'print(\'{"ok": false, "error": "unsupported: timers"}\', flush=True)\nsys.stdin.read()\n'))
    assert failure(adapter) == "the implementation refused 'timer': unsupported: timers"


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
