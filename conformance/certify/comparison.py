"""How a step's outputs compare with one the specification allows there: the first part that
differs (decided without rendering either side, since most outcomes replay weighs are
alternatives the node did not take), then that difference in words and as the protocol's JSON.
Error codes are compared by wire number and named; sends and answers as multisets; a
LeaderChange record's id lists as sets; the state where the adapter observes it."""

from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

import msgspec

from adapters.node_models import NodeModel, outputs_of
from conformance.text import message_text
from model.choices import Outcome
from model.messages import OMISSIBLE_DEFAULTS
from spec import errors
from spec.trace import Input, Observed, Outputs, TimerLeft


class Difference(NamedTuple):
    """Where a step's outputs part from the trace: the first differing field, every differing
    field, and the part they belong to as JSON on both sides."""

    field: str
    expected: str
    actual: str
    differing: tuple[str, ...]
    expected_json: str
    actual_json: str


def _annotated(field: str, value: object) -> str:
    """A value as text; error codes with their Kafka name."""
    if field.endswith("ErrorCode") and isinstance(value, int):
        return f"{value} {errors.name_of(value)}"
    return repr(value) if not isinstance(value, str) else value


def differences(path: str, expected: object, actual: object) -> list[tuple[str, str, str]]:
    """Every differing field between two builtin-converted values, in field order: (path, expected, actual)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        if expected.get("type") != actual.get("type"):
            return [(f"{path}.type", str(expected.get("type")), str(actual.get("type")))]
        found = []
        for key in list(expected) + [k for k in actual if k not in expected]:
            found += differences(f"{path}.{key}", expected.get(key), actual.get(key))
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        found = [difference for index, (a, b) in enumerate(zip(expected, actual)) for difference in differences(f"{path}[{index}]", a, b)]
        if len(expected) != len(actual):
            found.append((f"{path} length", str(len(expected)), str(len(actual))))
        return found
    if expected != actual:
        field = path.rsplit(".", 1)[-1]
        return [(path, _annotated(field, expected), _annotated(field, actual))]
    return []


def _json(value: object) -> str:
    """A value as the protocol's JSON: every field, indented, so that a default is as visible as any value."""
    return msgspec.json.format(msgspec.json.encode(msgspec.to_builtins(value)), indent=2).decode()


def as_compared(value: object) -> object:
    """A builtin-converted value as replay compares it: a LeaderChange record's id lists are sets
    (VOTE-RESP-3: the KIP gives them no order, Kafka writes a hash set's), so they are compared sorted."""
    if isinstance(value, dict):
        converted = {key: as_compared(item) for key, item in value.items()}
        if converted.get("type") == "LeaderChangeMessage":
            for field in ("VotedIds", "Voters", "GrantingVoters"):
                if isinstance(converted.get(field), list):
                    converted[field] = sorted(converted[field], key=repr)
        return converted
    if isinstance(value, list | tuple):
        return [as_compared(item) for item in value]
    return value


def _same(expected: object, actual: object) -> bool:
    """One part of the outputs (a response, a result, a state) is as expected, as replay compares it."""
    return expected == actual or as_compared(msgspec.to_builtins(expected)) == as_compared(msgspec.to_builtins(actual))


def _part(path: str, expected: object, actual: object) -> Difference:
    """The difference between one part of the outputs that is not as expected."""
    found = differences(path, as_compared(msgspec.to_builtins(expected)), as_compared(msgspec.to_builtins(actual)))
    field, want, got = found[0]
    return Difference(field, want, got, tuple(f for f, _, _ in found), _json(expected), _json(actual))


def _message_or_none(message: object) -> str:
    return "no response" if message is None else message_text(message)


def _sends_text(sends: Iterable) -> str:
    """Sends, or answers (each with the request it answers), in words."""
    return "; ".join(f"to {s.destination}: {message_text(s.message)}" + (f" for {message_text(s.request)}" if hasattr(s, "request") else "") for s in sends) or "none"


_MULTISETS = ("sends", "answers")  # the outputs compared as multisets, in any order


def as_prescribed(expected: tuple, actual: tuple) -> tuple:
    """The node's sends with each omissible field (a Fetch's MaxWaitMs, HighWatermark,
    ReplicaEpoch) left out where the model prescribes none: where no expected message of that
    type carries it, the profile leaves its value open (KIP-595 names MaxWaitMs and says nothing
    of its value), so whatever the node carries there is not compared."""
    carried = {(type(s.message), name) for s in expected for name in OMISSIBLE_DEFAULTS.get(type(s.message), ()) if getattr(s.message, name) is not msgspec.UNSET}
    typed = {type(s.message) for s in expected}

    def prescribed(send):
        message = send.message
        kind = type(message)
        if kind not in typed:
            return send
        open_fields = {name: msgspec.UNSET for name in OMISSIBLE_DEFAULTS.get(kind, ()) if (kind, name) not in carried and getattr(message, name) is not msgspec.UNSET}
        return msgspec.structs.replace(send, message=msgspec.structs.replace(message, **open_fields)) if open_fields else send

    return tuple(map(prescribed, actual))


def differing_part(expected: Outputs, expected_state: Observed | None, actual: Outputs, observed: Observed | None) -> str | None:
    """The first part of a step's outputs (and state) that is not as the specification allows:
    `response`, `sends`, `answers`, `append_result`, `alter_isr`, `shutdown`, `timers` or `state`; the state only where
    both sides have one. Deciding this renders nothing, since most outcomes replay weighs are
    alternatives the node did not take."""
    if expected == actual and (expected_state is None or observed is None or expected_state == observed):
        return None  # the common case, decided without converting either side
    if type(expected.response) is not type(actual.response) or (expected.response is not None and not _same(expected.response, actual.response)):
        return "response"
    for field in _MULTISETS:
        want, got = getattr(expected, field), getattr(actual, field)
        if want != got and Counter(map(msgspec.json.encode, want)) != Counter(map(msgspec.json.encode, as_prescribed(want, got) if field == "sends" else got)):
            return field
    for field in ("append_result", "alter_isr"):
        if not _same(getattr(expected, field), getattr(actual, field)):
            return field
    if expected.shutdown != actual.shutdown:
        return "shutdown"
    if timers_differ(expected.timers, actual.timers):
        return "timers"
    if expected_state is not None and observed is not None and not _same(expected_state, observed):
        return "state"
    return None


def _timers_text(kinds: dict[str, int], left: dict[str, int]) -> str:
    """`fetch_timeout 500 ms left`, per timer kind compared, or that the node runs no such timer."""
    return ", ".join(f"{kind} {left[kind]:,} ms left" if kind in left else f"no {kind} running" for kind in kinds)


def timers_differ(expected: tuple[TimerLeft, ...] | None, reported: tuple[TimerLeft, ...] | None) -> bool:
    """Whether a timer the step arms for a fixed duration shows another time left on the node
    (compared only where the node reports its timers; the others it runs are its own)."""
    return expected is not None and reported is not None and not set(expected) <= set(reported)


def compare(expected: Outputs, expected_state: Observed | None, actual: Outputs, observed: Observed | None) -> Difference | None:
    """The first difference between the outputs (and state) the specification allows at a step
    and what the adapter reported (differing_part), in words and as JSON."""
    part = differing_part(expected, expected_state, actual, observed)
    if part is None:
        return None
    if part == "response" and type(expected.response) is not type(actual.response):
        return Difference("response", _message_or_none(expected.response), _message_or_none(actual.response), ("response",), _json(expected.response), _json(actual.response))
    if part in _MULTISETS:
        expected_items, actual_items = getattr(expected, part), getattr(actual, part)
        if part == "sends":
            actual_items = as_prescribed(expected_items, actual_items)
        want = Counter(msgspec.json.encode(s) for s in expected_items)
        got = Counter(msgspec.json.encode(s) for s in actual_items)
        missing = [s for s in expected_items if want[msgspec.json.encode(s)] > got[msgspec.json.encode(s)]]
        extra = [s for s in actual_items if got[msgspec.json.encode(s)] > want[msgspec.json.encode(s)]]
        return Difference(
            part,
            f"{_sends_text(expected_items)} (missing: {_sends_text(missing)})",
            f"{_sends_text(actual_items)} (unexpected: {_sends_text(extra)})",
            (part,),
            _json(sorted(expected_items, key=msgspec.json.encode)),
            _json(sorted(actual_items, key=msgspec.json.encode)),
        )
    if part == "shutdown":
        return Difference("shutdown", str(expected.shutdown), str(actual.shutdown), ("shutdown",), _json(expected.shutdown), _json(actual.shutdown))
    if part == "state":
        return _part("state", expected_state, observed)
    if part == "timers":
        wanted = {timer.kind: timer.ms for timer in expected.timers}
        reported = {timer.kind: timer.ms for timer in actual.timers if timer.kind in wanted}  # the node's other timers are not compared
        return Difference("timers", _timers_text(wanted, wanted), _timers_text(wanted, reported), ("timers",), _json(wanted), _json(reported))
    return _part(part, getattr(expected, part), getattr(actual, part))


def expected_outputs(model: NodeModel, event: Input, outcome: Outcome, observed: Observed | None) -> tuple[Outputs, Observed | None]:
    """What an allowed outcome of a step outputs, and its state where the adapter's was observed."""
    return outputs_of(event, outcome.transition), (model.observe(outcome.transition.state) if observed is not None else None)


def matches(model: NodeModel, event: Input, outcome: Outcome, actual: Outputs, observed: Observed | None) -> bool:
    """What the adapter reported is this allowed outcome of the step."""
    expected, expected_state = expected_outputs(model, event, outcome, observed)
    return differing_part(expected, expected_state, actual, observed) is None


def difference(model: NodeModel, event: Input, outcome: Outcome, actual: Outputs, observed: Observed | None) -> Difference | None:
    """The first difference between an allowed outcome of a step and what the adapter reported
    (the state compared where the adapter's was observed)."""
    expected, expected_state = expected_outputs(model, event, outcome, observed)
    return compare(expected, expected_state, actual, observed)
