"""Inputs to a node (events) and what a node asks of the world (outputs).

Events carry short tags ("request", "timer", ...) because conformance traces store them as
they are (see spec/trace-format.md).

Time does not exist inside the model: timers are events the environment fires, and a node
only says which timer it wants armed and for how long (SetTimer).
"""

import enum

import msgspec

from model.messages import Message


class TimerKind(enum.StrEnum):
    FETCH_TIMEOUT = "fetch_timeout"  # quorum.fetch.timeout.ms: follower -> election (ELECT-1), observer -> rediscover
    ELECTION_TIMEOUT = "election_timeout"  # quorum.election.timeout.ms (+ backoff): new election (ELECT-2/3)
    PROGRESS_TIMEOUT = "progress_timeout"  # leader progress timeout (PROGRESS-1)
    REQUEST_TIMEOUT = "request_timeout"  # quorum.request.timeout.ms: re-send unanswered requests (RETRY-1)
    FETCH_WAIT = "fetch_wait"  # a held Fetch's MaxWaitMs: the oldest is answered as it came (FETCH-REQ-7)


class Request(msgspec.Struct, frozen=True, kw_only=True, tag="request"):
    source: int
    message: Message


class Response(msgspec.Struct, frozen=True, kw_only=True, tag="response"):
    """A response to one of the node's own requests, paired with that request (its correlation)."""

    source: int
    message: Message
    request: Message


class Timer(msgspec.Struct, frozen=True, kw_only=True, tag="timer"):
    kind: TimerKind


class ClientAppend(msgspec.Struct, frozen=True, kw_only=True, tag="append"):
    value: int


class Resign(msgspec.Struct, frozen=True, kw_only=True, tag="resign"):
    """Graceful shutdown of a leader (END-SEND-1)."""


class Crash(msgspec.Struct, frozen=True, kw_only=True, tag="crash"):
    pass


class Restart(msgspec.Struct, frozen=True, kw_only=True, tag="restart"):
    pass


Event = Request | Response | Timer | ClientAppend | Resign | Crash | Restart


class Send(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    destination: int
    message: Message


class Answer(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A response to a request of an earlier step, sent now: a held Fetch answered (FETCH-REQ-7).
    `request` is that request as it came from `destination`."""

    destination: int
    message: Message
    request: Message


class SetTimer(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Arm a timer: it fires after delay_ms plus a random jitter of up to jitter_ms."""

    kind: TimerKind
    delay_ms: int
    jitter_ms: int = 0


class AppendResult(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The leader's answer to a client append: the offset given, or NOT_LEADER_OR_FOLLOWER."""

    ErrorCode: int
    Offset: int


class Committed(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Client appends below HighWatermark are acknowledged (CLIENT-2)."""

    HighWatermark: int


class Shutdown(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The node stops on a fatal error (a cluster-id conflict with an elected leader)."""

    reason: str


Output = Send | Answer | SetTimer | AppendResult | Committed | Shutdown
