"""Timer durations the specification fixes (END-REQ-6's successor backoff): recorded in a trace,
compared with the time left on the node's timer where it reports its timers, computed from the
timeouts it declares (spec/trace-format.md, spec/subprocess-protocol.md)."""

import shlex
import sys
import textwrap

import msgspec
import pytest

from adapters.contract import AdapterError
from adapters.model_adapter import ModelAdapter
from adapters.subprocess_adapter import SubprocessAdapter
from conformance.certify.replay import CONFORMS, DEPARTS, replay
from conformance.corpus.reference import build_trace
from model.config import Timing
from model.events import Request, Restart
from model.messages import BeginQuorumEpochRequest, EndQuorumEpochRequest
from spec.trace import Header, Input, Observed, Outputs, TimerLeft, Trace, TraceCluster, timers_left

CLUSTER_ID = "kraft-cluster"


def resigned_to(profile: str, successors: tuple[int, ...]) -> Trace:
    """Voter 3 starts, follows leader 1, which resigns naming `successors`."""
    inputs = [
        Restart(),
        Request(source=1, message=BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=1, LeaderEpoch=1)),
        Request(source=1, message=EndQuorumEpochRequest(ClusterId=CLUSTER_ID, ReplicaId=1, LeaderId=1, LeaderEpoch=1, PreferredSuccessors=successors)),
    ]
    return build_trace("resigned", TraceCluster(voters=(1, 2, 3), profile=profile), 3, inputs, "test")


class ReportingTimers:
    """The reference node, reporting `timers` (kind -> ms; None: it cannot tell) after every step
    and declaring `timing`: a node whose timers are what the test says."""

    def __init__(self, timers: dict[str, int] | None, timing: Timing | None = None) -> None:
        self.name = "reporting-timers"
        self.lacks = frozenset()
        self.timing = timing
        self.timers = timers
        self.node = ModelAdapter("reference")

    def start(self, header: Header) -> None:
        self.node.start(header)

    def step(self, event: Input) -> Outputs:
        reported = None if self.timers is None else timers_left(self.timers) or ()
        return msgspec.structs.replace(self.node.step(event), timers=reported)

    def observe(self) -> Observed:
        return self.node.observe()

    def close(self) -> None:
        self.node.close()


def test_a_later_successor_s_backoff_is_in_the_trace():
    """Place 1 of 2: the KIP's min(1000, 20 * 2^0) = 20 ms; Kafka's (1000 >> 1) << 0 = 500 ms; a
    voter the resigning leader does not list, under Kafka 3.9, the whole 1,000 ms."""
    assert resigned_to("kip595", (2, 3)).steps[2].expect.timers == (TimerLeft(kind="fetch_timeout", ms=20),)
    assert resigned_to("kafka-3.9", (2, 3)).steps[2].expect.timers == (TimerLeft(kind="fetch_timeout", ms=500),)
    assert resigned_to("kafka-3.9", (2,)).steps[2].expect.timers == (TimerLeft(kind="fetch_timeout", ms=1000),)
    assert resigned_to("kip595", (2, 3)).steps[1].expect.timers is None  # a BeginQuorumEpoch arms no fixed timer


@pytest.mark.parametrize(
    "profile, timers, timing, verdict",
    [
        ("kip595", {"fetch_timeout": 20, "request_timeout": 100}, None, CONFORMS),  # its other timers are its own
        ("kip595", None, None, CONFORMS),  # a node that cannot tell is not compared
        ("kip595", {"fetch_timeout": 2000}, None, DEPARTS),  # the fetch timer not overridden
        ("kip595", {}, None, DEPARTS),  # no fetch timer running at all
        ("kip595", {"fetch_timeout": 10}, Timing(retry_backoff_ms=10), CONFORMS),  # its own quorum.retry.backoff.ms
        ("kip595", {"fetch_timeout": 20}, Timing(retry_backoff_ms=10), DEPARTS),
        ("kafka-3.9", {"fetch_timeout": 500}, None, CONFORMS),
        ("kafka-3.9", {"fetch_timeout": 20}, None, DEPARTS),  # the KIP's backoff where Kafka's is expected
        ("kafka-3.9", {"fetch_timeout": 250}, Timing(election_backoff_max_ms=500), CONFORMS),
    ],
)
def test_the_backoff_is_compared_with_the_time_left_on_the_node_s_timer(profile, timers, timing, verdict):
    result = replay(ReportingTimers(timers, timing), resigned_to(profile, (2, 3)), "resigned.jsonl")
    assert result.verdict == verdict, result.divergence
    if verdict == DEPARTS:
        assert (result.divergence.step, result.divergence.field, result.divergence.rules) == (3, "timers", ("END-REQ-6",))


def test_a_departing_timer_is_shown_as_expected_and_reported():
    result = replay(ReportingTimers({"fetch_timeout": 2000, "request_timeout": 100}), resigned_to("kip595", (2, 3)), "resigned.jsonl")
    assert (result.divergence.expected, result.divergence.actual) == ("fetch_timeout 20 ms left", "fetch_timeout 2,000 ms left")
    result = replay(ReportingTimers({"request_timeout": 100}), resigned_to("kip595", (2, 3)), "resigned.jsonl")
    assert (result.divergence.expected, result.divergence.actual) == ("fetch_timeout 20 ms left", "no fetch_timeout running")


def scripted_node(tmp_path, start_reply: str, observe_reply: str) -> str:
    """A process that answers start with `start_reply`, then every step (input, drain, observe)
    with an empty answer, no sends and `observe_reply`."""
    script = tmp_path / "node.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import sys
            replies = {{"start": {start_reply!r}, "drain": '{{"ok": true, "sends": []}}', "observe": {observe_reply!r}}}
            for line in sys.stdin:
                command = line.split('"command":', 1)[1].split('"')[1]
                default = '{{"ok": true, "response": null, "append_result": null, "shutdown": false}}'
                print(replies.get(command, default), flush=True)
            """
        )
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


STATE = '"state": {"role": "follower", "epoch": 1, "leader_id": 1, "voted_id": -1, "log_end_offset": 0, "high_watermark": 0, "log": []}'


def test_a_subprocess_declares_its_timing_and_reports_its_timers(tmp_path):
    start = '{"ok": true, "timing": {"retry_backoff_ms": 10, "request_timeout_ms": 100}}'
    adapter = SubprocessAdapter(scripted_node(tmp_path, start, '{"ok": true, ' + STATE + ', "timers": {"request_timeout": 100, "fetch_timeout": 10}}'))
    try:
        trace = resigned_to("kip595", (2, 3))
        adapter.start(trace.header)
        assert adapter.timing == Timing(retry_backoff_ms=10, request_timeout_ms=100)
        outputs = adapter.step(trace.steps[2].input)
        assert outputs.timers == (TimerLeft(kind="fetch_timeout", ms=10), TimerLeft(kind="request_timeout", ms=100))
    finally:
        adapter.close()


@pytest.mark.parametrize(
    "start, timers, reason",
    [
        ('{"ok": true, "timing": {"retry_backoff": 10}}', "{}", "invalid reply to 'start': Object contains unknown field `retry_backoff` - at `$.timing`"),
        ('{"ok": true, "timing": {"retry_backoff_ms": -1}}', "{}", "invalid reply to 'start': $.timing: retry_backoff_ms below 0"),
        ('{"ok": true}', '{"fetch_timeout": -5}', "invalid reply to 'observe': $.timers.fetch_timeout: -5; timers are the time left"),
        ('{"ok": true}', '{"heartbeat": 5}', "invalid reply to 'observe': $.timers.heartbeat: 5; timers are the time left"),
        ('{"ok": true}', '{"fetch_timeout": "soon"}', "invalid reply to 'observe': Expected `int`, got `str` - at `$.timers[...]`"),
    ],
)
def test_bad_timings_and_timers_are_invalid_replies(tmp_path, start, timers, reason):
    adapter = SubprocessAdapter(scripted_node(tmp_path, start, '{"ok": true, ' + STATE + ', "timers": ' + timers + "}"))
    trace = resigned_to("kip595", (2, 3))
    try:
        with pytest.raises(AdapterError) as raised:
            adapter.start(trace.header)
            adapter.step(trace.steps[0].input)
        assert str(raised.value).startswith(reason), raised.value
    finally:
        adapter.close()
