"""Validation by search: every logged event of every node explained by a model execution.

Each node's log records every input it took (each message received, its restarts, its
leader's appends) and everything it did (each message sent, each transition, its log end after
each append). So the search runs per node: it keeps every model state of the node, under the
release's profile and every alternative the profile leaves open, that is consistent with the
node's observations so far, in the order the node logged them. An input steps each state (the
model's `step`); an output must be one the state still owes (a response, a request); a
transition or a log end must be the state's own. What a log does not show (a timer expiring) is
filled in, at most `fill` steps, only where nothing else explains the next observation. The
messages link the nodes: a follower takes the records its leader's model state holds, and each
message a node received must be one its sender logged sending (checked in links.py). The nodes'
clocks order nothing but which node's line is taken next.

Verdict: every observation explained, or the first one that no state explains, with the states
still possible just before it and what each would have logged instead.
"""

import heapq
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from conformance.cluster.server_log import Transition as View
from conformance.validate.observations import (
    Answered,
    Appended,
    Entered,
    NodeLog,
    Observation,
    Outside,
    Received,
    RecordsSeen,
    Replicated,
    Replied,
    Sent,
    Started,
)
from model import log as logs
from model.choices import outcomes
from model.config import ClusterConfig, NodeConfig, profile as profile_options
from model.events import Answer, ClientAppend, Crash, Request, Response, Restart, Send, Timer, TimerKind
from model.messages import REQUEST_TYPES, FetchRequest, FetchResponse, as_carried, carried
from model.node import armed_timers, initial_state, step
from model.state import NodeState, Role

DEFAULT_SLACK_MS = 1_000  # how late a timer may be seen to fire (a busy poll loop, a JVM pause)
DEFAULT_FILL = 3  # unlogged steps (timers) tried before an observation nothing else explains
MAX_STATES = 64  # model states kept per node; beyond, the search says so
INPUTS = (Started, Received, Replied, Appended)
ROLE_NAMES = {Role.UNATTACHED: "unattached", Role.FOLLOWER: "follower", Role.CANDIDATE: "candidate", Role.LEADER: "leader",
              Role.RESIGNED: "resigned", Role.OBSERVER: "observer", Role.DOWN: "down", Role.PROSPECTIVE: "prospective"}  # fmt: skip


class Hypothesis(NamedTuple):
    """A model state of the node consistent with its log so far, the outputs it owes (sent but
    not yet logged), and whether its last change of role or epoch is still to be logged."""

    state: NodeState
    owed: tuple[Send | Answer, ...]
    unlogged: bool


class Possible(msgspec.Struct, frozen=True, kw_only=True):
    """A model state still possible before the unexplained observation, and what it would have logged."""

    state: str
    instead: str


class Unexplained(msgspec.Struct, frozen=True, kw_only=True):
    node: int
    line: int
    observation: str
    why: str
    possible: tuple[Possible, ...]


class NodeResult(msgspec.Struct, frozen=True, kw_only=True):
    node: int
    observations: int
    explained: int
    filled: int  # unlogged steps the search put in
    outside: int  # observations of RPCs the model does not have
    most_states: int  # the most model states held at once
    unexplained: Unexplained | None
    order: int  # when the search met it, among every node's observations: the smallest is the first

def view_of(config: NodeConfig, state: NodeState) -> tuple[str, int, int, int]:
    """What a logged transition says of a state: role (a voted voter is unattached), epoch, leader, vote."""
    role = state.role
    leader = config.node_id if role in (Role.LEADER, Role.RESIGNED) else state.leader_id
    voted = config.node_id if role == Role.CANDIDATE else state.voted_id
    return ROLE_NAMES[role], state.epoch, leader, voted


def agrees(config: NodeConfig, state: NodeState, view: View) -> bool:
    role, epoch, leader, voted = view_of(config, state)
    logged_role = "unattached" if view.role == "voted" else view.role
    if (role, epoch, leader) != (logged_role, view.epoch, view.leader):
        return False
    # A vote is compared where the state's toString carries one: a leader's and a resigned
    # leader's never do; a follower's only from 3.9 (an unlogged one, -1, says nothing).
    if logged_role in ("leader", "resigned") or (logged_role == "follower" and view.voted == -1):
        return True
    return voted == view.voted


def same_message(expected: object, logged: object) -> bool:
    """A model message and a logged one agree: every field, omissible ones at their defaults
    alike; a Fetch answer's records only in whether there are any (the log gives their size)."""
    if type(expected) is not type(logged):
        return False
    if isinstance(logged, FetchResponse):
        seen = isinstance(logged.Records, RecordsSeen)
        if bool(expected.Records) != seen:
            return False
        expected, logged = msgspec.structs.replace(expected, Records=()), msgspec.structs.replace(logged, Records=())
    return as_carried(expected) == as_carried(logged)


def describe(config: NodeConfig, hypothesis: Hypothesis) -> str:
    state = hypothesis.state
    role, epoch, leader, voted = view_of(config, state)
    owed = ", ".join(f"{type(o.message).__name__} to {o.destination}" for o in hypothesis.owed) or "nothing"
    return (
        f"{role} of epoch {epoch}, leader {leader}, voted {voted}, log end {len(state.log)} (last epoch {logs.last_epoch(state.log)}), "
        f"high watermark {state.high_watermark}; owes {owed}"
    )


class NodeSearch:
    """The model states one node may be in, stepped by its observations one at a time."""

    def __init__(self, config: NodeConfig, log: NodeLog, leader_logs: dict[tuple[int, int], logs.Log], fill: int, deadline: "CheckQuorum | None") -> None:
        self.config = config
        self.deadline = deadline
        self.log = log
        self.leader_logs = leader_logs  # (leader, epoch) -> the leader's log as its model state holds it
        self.fill = fill
        self.states = [Hypothesis(initial_state(config), (), False)]
        self.requests: dict[tuple[int, int], object] = {}  # (run, correlation) -> request sent
        self.unanswered: Counter = Counter()  # (source, request) received and not yet answered
        self.received_at: dict[tuple[int, object], float] = {}  # (source, request) -> when it last came
        self.run = 0
        self.position = 0
        self.explained = self.filled = self.outside = 0
        self.most_states = 1
        self.unexplained: Unexplained | None = None
        self.order = 0

    @property
    def done(self) -> bool:
        return self.unexplained is not None or self.position >= len(self.log.observations)

    def next_observation(self) -> Observation:
        return self.log.observations[self.position]

    def result(self) -> NodeResult:
        return NodeResult(node=self.config.node_id, observations=len(self.log.observations), explained=self.explained, filled=self.filled,
                          outside=self.outside, most_states=self.most_states, unexplained=self.unexplained, order=self.order)  # fmt: skip

    def take(self, order: int) -> None:
        """Explain the next observation, filling in unlogged steps where nothing explains it."""
        observation = self.next_observation()
        self.position += 1
        self.order = order
        overdue = self.deadline.overdue(self.config, self.states[0].state, observation) if self.deadline else None
        if overdue:
            resigned = f"resigned of epoch {self.states[0].state.epoch} by then (its check-quorum timer fired: KafkaRaftClient.pollLeader)"
            self.unexplained = self.failure(observation, overdue, resigned)
            return
        if isinstance(observation, Outside):
            self.outside += 1
            return
        if isinstance(observation, Started):
            self.run += 1
            self.unanswered.clear()
        if isinstance(observation, Received):
            self.unanswered[(observation.source, observation.message)] += 1
            self.received_at[(observation.source, observation.message)] = observation.wall
        if isinstance(observation, Answered):
            asked = (observation.destination, observation.request)
            if not self.unanswered[asked]:
                self.unexplained = self.failure(observation, "it answers a request the node never logged receiving (or answered already)")
                return
            self.unanswered[asked] -= 1
        explain = self.explainer(observation)
        frontier = self.states
        for depth in range(self.fill + 1):
            found = _unique(h for hypothesis in frontier for h in explain(hypothesis))
            if found:
                self.filled += depth
                break
            if depth < self.fill:
                frontier = _unique(h for hypothesis in frontier for h in self.unlogged_steps(hypothesis))
        if not found:
            self.unexplained = self.failure(observation)
            return
        self.states = found[:MAX_STATES]
        self.most_states = max(self.most_states, len(found))
        self.explained += 1
        if isinstance(observation, Sent):
            self.requests[(self.run, observation.correlation)] = observation.message
        leading = self.states[0].state
        if leading.role == Role.LEADER:
            self.leader_logs[(self.config.node_id, leading.epoch)] = leading.log

    def unlogged_steps(self, hypothesis: Hypothesis) -> list[Hypothesis]:
        """Every state one timer later (what no log line shows)."""
        state = hypothesis.state
        return [h for kind in armed_timers(self.config, state) for h in self.stepped(hypothesis, Timer(kind=kind))]

    def stepped(self, hypothesis: Hypothesis, event: object) -> list[Hypothesis]:
        """The hypothesis after `event`, under every alternative the profile leaves open."""
        found = []
        before = view_of(self.config, hypothesis.state)
        # outcomes(), not the remembering allowed_transitions(): remembering a step hashes the
        # state's whole log, thousands of records in a long run, at every step.
        for outcome in outcomes(step, self.config, hypothesis.state, event):
            after = outcome.transition.state
            seen = view_of(self.config, after)
            changed = seen[:2] != before[:2]
            owed = hypothesis.owed
            if changed:  # a request of the role it left will not be sent any more
                owed = tuple(o for o in owed if type(o) is Answer or type(o.message) not in REQUEST_TYPES)
            # A request owed already is owed once (sent again, it is the same request); every answer is owed.
            owed += tuple(o for o in outcome.transition.outputs if type(o) is Answer or (type(o) is Send and (type(o.message) not in REQUEST_TYPES or o not in owed)))
            found.append(Hypothesis(after, owed, hypothesis.unlogged or seen != before))
        return found

    def explainer(self, observation: Observation) -> Callable[[Hypothesis], list[Hypothesis]]:
        if isinstance(observation, INPUTS):
            explain = self.input_explainer(observation)
            return lambda h: [found for before in self.waits_run_out(h, observation.wall) for found in explain(before)]
        return self.output_explainer(observation)

    def waits_run_out(self, hypothesis: Hypothesis, now: float) -> list[Hypothesis]:
        """The hypothesis, and as well each one in which held Fetches whose wait has run out by
        `now` were answered first, oldest first (their FETCH_WAIT timer). Kafka's expiration thread
        answers them while the raft thread goes on, so the answer may be logged after the next
        input though it was decided before it; the node's own clock says which waits are over."""
        found = [hypothesis]
        current = hypothesis
        for held in hypothesis.state.held or ():
            came = self.received_at.get((held.source, held.request))
            if came is None or came + carried(held.request, "MaxWaitMs") / 1000 > now:
                break
            current = next(iter(self.stepped(current, Timer(kind=TimerKind.FETCH_WAIT))), None)
            if current is None:
                break
            found.append(current)
        return found

    def input_explainer(self, observation: Observation) -> Callable[[Hypothesis], list[Hypothesis]]:
        """An input steps each state that owes no transition line (Kafka logs its transitions as it takes them)."""
        config = self.config
        if isinstance(observation, Started):
            def started(h: Hypothesis) -> list[Hypothesis]:
                down = [Hypothesis(c.state, (), False) for c in self.stepped(h, Crash())]  # a kill or a stop: what it owed is gone
                return [s._replace(unlogged=False) for d in down for s in self.stepped(d, Restart()) if agrees(config, s.state, observation.view)]
            return started
        if isinstance(observation, Received):
            return lambda h: [] if h.unlogged else self.stepped(h, Request(source=observation.source, message=observation.message))
        if isinstance(observation, Replied):
            request = self.requests.get((self.run, observation.correlation))
            if request is None:
                return lambda h: []
            message = self.with_records(observation, request)
            return lambda h: [] if h.unlogged else self.stepped(h, Response(source=observation.source, message=message, request=request))

        def appended(h: Hypothesis) -> list[Hypothesis]:
            end = len(h.state.log)
            if observation.end <= observation.base or h.unlogged or not observation.base <= end <= observation.end or h.state.role != Role.LEADER or h.state.epoch != observation.epoch:
                return []
            found = [h]
            for value in range(end, observation.end):  # a batch of records: one client append each
                found = [s for f in found for s in self.stepped(f, ClientAppend(value=value))]
            return found

        return appended

    def output_explainer(self, observation: Observation) -> Callable[[Hypothesis], list[Hypothesis]]:
        """An output, a transition or a log end must be the state's own."""
        config = self.config
        if isinstance(observation, Entered):
            def entered(h: Hypothesis) -> list[Hypothesis]:
                if agrees(config, h.state, observation.view):
                    return [h._replace(unlogged=False)]
                # Kafka may log a step through two roles (unattached in a newer epoch, then following) where the model takes one.
                return [h] if h.unlogged and observation.view.epoch <= h.state.epoch else []
            return entered
        if isinstance(observation, (Answered, Sent)):
            def owed(h: Hypothesis) -> list[Hypothesis]:
                for index, output in enumerate(h.owed):
                    if output.destination == observation.destination and same_message(output.message, observation.message):
                        if type(output) is Answer and output.request != observation.request:
                            continue
                        return [h._replace(owed=h.owed[:index] + h.owed[index + 1 :])]
                return []
            return owed
        if isinstance(observation, Replicated):
            return lambda h: [h] if len(h.state.log) == observation.end and logs.last_epoch(h.state.log) == observation.epoch else []
        raise TypeError(f"no explanation for {type(observation).__name__}")

    def with_records(self, observation: Replied, request: object) -> object:
        """A Fetch answer with the records it brought: the leader's, as far as the follower's log
        end after appending them (its next Replicated line, before its next input)."""
        response = observation.message
        if not (isinstance(response, FetchResponse) and isinstance(response.Records, RecordsSeen) and isinstance(request, FetchRequest)):
            return response
        leader_log = self.leader_logs.get((observation.source, response.CurrentLeader.LeaderEpoch), ())
        end = len(leader_log)
        observations = self.log.observations
        for later in (observations[index] for index in range(self.position, len(observations))):
            if isinstance(later, Replicated):
                end = later.end
                break
            if isinstance(later, INPUTS):
                break
        start = request.FetchOffset
        return msgspec.structs.replace(response, Records=leader_log[start : max(end, start + 1)])

    def failure(self, observation: Observation, reason: str = "", instead: str = "") -> Unexplained:
        """The observation no state explains: why, and each state with what it would have logged
        instead (`instead`, where one thing holds for all)."""
        why = reason or {
            Started: "no state restarts into the state it logged",
            Entered: "no state is in the role, epoch, leader and vote it logged",
            Received: "no state takes this request without owing a transition it did not log",
            Replied: "no state takes this response (or it answers no request the node logged sending)",
            Answered: "no state owes this response",
            Sent: "no state owes this request",
            Appended: "no state leads this epoch with its log ending within the batch",
            Replicated: "no state's log ends at this offset and epoch",
        }[type(observation)]
        possible = tuple(Possible(state=describe(self.config, h), instead=instead or self.instead(h, observation)) for h in self.states)
        return Unexplained(node=self.config.node_id, line=observation.line, observation=summary(observation), why=why, possible=possible)

    def instead(self, hypothesis: Hypothesis, observation: Observation) -> str:
        """What a state would have logged where the log has `observation`."""
        if isinstance(observation, (Answered, Sent)):
            owed = [f"{_short(o.message)} to {o.destination}" for o in hypothesis.owed]
            return "owes " + ("; ".join(owed) if owed else "nothing")
        if isinstance(observation, (Entered, Started)):
            role, epoch, leader, voted = view_of(self.config, hypothesis.state)
            return f"{'its change to ' if hypothesis.unlogged else ''}{role} of epoch {epoch}, leader {leader}, voted {voted}"
        if isinstance(observation, Replicated):
            return f"log end {len(hypothesis.state.log)}, last epoch {logs.last_epoch(hypothesis.state.log)}"
        if hypothesis.unlogged:
            return "a transition line first, to " + ", ".join(map(str, view_of(self.config, hypothesis.state)))
        return "nothing it could take it from"


def _unique(hypotheses) -> list[Hypothesis]:
    """The hypotheses without repeats. Hashing a state hashes its whole log and the answers it
    holds, thousands of records in a long run: they are bucketed by a few small fields and
    compared in full only within a bucket."""
    buckets: dict[tuple, list[Hypothesis]] = {}
    kept = []
    for hypothesis in hypotheses:
        state = hypothesis.state
        log = state.log
        key = (state.role, state.epoch, state.leader_id, state.voted_id, state.high_watermark, len(log), log[-1] if log else None,
               len(hypothesis.owed), len(state.held or ()), hypothesis.unlogged)  # fmt: skip
        bucket = buckets.setdefault(key, [])
        if all(hypothesis != other for other in bucket):
            bucket.append(hypothesis)
            kept.append(hypothesis)
    return kept


def _short(message: object) -> str:
    fields = msgspec.structs.asdict(as_carried(message)) if hasattr(message, "__struct_fields__") else {}
    fields.pop("Records", None)
    shown = ", ".join(f"{k}={v}" for k, v in fields.items() if k != "ClusterId")
    return f"{type(message).__name__}({shown})"


def summary(observation: Observation) -> str:
    """One line for a report."""
    if isinstance(observation, (Started, Entered)):
        v = observation.view
        return f"{'started as' if isinstance(observation, Started) else 'entered'} {v.role} of epoch {v.epoch}, leader {v.leader}, voted {v.voted}"
    if isinstance(observation, Received):
        return f"received {_short(observation.message)} from {observation.source}"
    if isinstance(observation, Replied):
        return f"received {_short(observation.message)} from {observation.source} (answering its request {observation.correlation})"
    if isinstance(observation, Answered):
        return f"answered {_short(observation.message)} to {observation.destination}"
    if isinstance(observation, Sent):
        return f"sent {_short(observation.message)} to {observation.destination}"
    if isinstance(observation, Appended):
        return f"appended offsets {observation.base} to {observation.end - 1} in epoch {observation.epoch}"
    if isinstance(observation, Replicated):
        return f"log end {observation.end}, last epoch {observation.epoch} after appending"
    return observation.what


class CheckQuorum:
    """PROGRESS-1 in time: a leader that hears from no majority within its check-quorum timeout
    resigns (Kafka 3.7 on: LeaderState's checkQuorumTimer, 1.5 times quorum.fetch.timeout.ms, reset
    once a majority of voters, itself included, has fetched since the last reset). The model has
    no clock, so a timer that never fires explains anything; this puts the clock back for this one
    timer. Sound by construction: a leader still leading at t must have reset its timer within
    the last timeout, and each reset needs a majority's Fetches within the timeout before it, so
    fewer voters fetching in the last two timeouts (plus slack) than a majority needs cannot be.
    A node's own clock only is read, never compared with another's."""

    def __init__(self, timeout_ms: float, slack_ms: float) -> None:
        self.timeout = timeout_ms / 1000
        self.slack = slack_ms / 1000
        self.leading: dict[int, tuple[int, float]] = {}  # node -> (epoch, since)
        self.fetched: dict[int, dict[int, float]] = {}  # node -> voter -> last Fetch in that epoch

    def overdue(self, config: NodeConfig, state: NodeState, observation: Observation) -> str | None:
        node = config.node_id
        if state.role != Role.LEADER:
            self.leading.pop(node, None)
            return None
        epoch, since = self.leading.setdefault(node, (state.epoch, observation.wall))
        if epoch != state.epoch:
            self.leading[node] = (epoch, since) = (state.epoch, observation.wall)
            self.fetched[node] = {}
        fetched = self.fetched.setdefault(node, {})
        if isinstance(observation, Received) and isinstance(observation.message, FetchRequest) and observation.message.CurrentLeaderEpoch == epoch:
            if observation.source in config.voters and observation.source != node:
                fetched[observation.source] = observation.wall
        # A Fetch answered is no sign of leading: a held one is answered when its wait runs out by
        # the expiration thread (KafkaRaftClient's purgatory), before the poll loop checks the quorum.
        answer = isinstance(observation, Answered) and isinstance(observation.message, FetchResponse)
        if answer or isinstance(observation, (Started, Entered)) or observation.wall <= since + self.timeout + self.slack:
            return None
        window = max(since, observation.wall - 2 * self.timeout - self.slack)
        heard = sorted(voter for voter, wall in fetched.items() if wall > window)
        if len(heard) + 1 >= config.majority:
            return None
        who = f"only voter{'s' if len(heard) > 1 else ''} {', '.join(map(str, heard))}" if heard else "no other voter"
        return (
            f"PROGRESS-1: still leader of epoch {epoch} {observation.wall - since:.1f} s after it began, yet {who} fetched in the "
            f"{observation.wall - window:.1f} s before: its check-quorum timer ({self.timeout * 1000:.0f} ms) ran out without a "
            f"majority's Fetches, and it did not resign"
        )


def check_quorum_timeout_ms(profile: str, fetch_timeout_ms: int) -> int | None:
    """The profile's check-quorum timeout: Kafka's 1.5 times the fetch timeout
    (LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR), None where the profile's leader never resigns on it."""
    return int(fetch_timeout_ms * 1.5) if profile_options(profile).progress_timeout_resigns else None


def validate(
    cluster: ClusterConfig, node_logs: dict[int, NodeLog], fill: int = DEFAULT_FILL, check_quorum_ms: int | None = None,
    slack_ms: int = DEFAULT_SLACK_MS, progress: Callable[[int], None] | None = None,
) -> tuple[NodeResult, ...]:
    """Every node's observations explained, or each node's first unexplained one. Nodes are
    interleaved by their lines' wall clocks only so that a follower finds the records its
    leader's state holds; within a node, its log's order is kept."""
    leader_logs: dict[tuple[int, int], logs.Log] = {}
    deadline = CheckQuorum(check_quorum_ms, slack_ms) if check_quorum_ms else None
    searches = {node: NodeSearch(cluster.node(node), node_logs[node], leader_logs, fill, deadline) for node in sorted(node_logs)}
    heads = [(_key(search), node) for node, search in searches.items() if not search.done]
    heapq.heapify(heads)
    taken = 0
    while heads:
        _, node = heapq.heappop(heads)
        search = searches[node]
        taken += 1
        search.take(taken)
        if progress and taken % 10_000 == 0:
            progress(taken)
        if not search.done:
            heapq.heappush(heads, (_key(search), node))
    return tuple(search.result() for search in searches.values())


def _key(search: NodeSearch) -> tuple[float, int]:
    """Which node goes next: the earliest line; at one millisecond, what a node did (sent,
    appended) before what another received."""
    observation = search.next_observation()
    return (observation.wall, 1 if isinstance(observation, (Received, Replied)) else 0)
