"""Shortening a divergent trace to the steps that still make the adapter depart."""

from collections.abc import Callable

import msgspec

from adapters.contract import Adapter
from conformance.certify.replay import DEPARTS, replay
from conformance.corpus.reference import build_trace
from spec.trace import Trace

PER_TRACE = 200  # candidates tried, at most, to shorten one divergence
DEFAULT_BUDGET = 1000  # candidates tried, at most, in a whole run (each may start an implementation's process)


def shorten(make_adapter: Callable[[], Adapter], original: Trace, divergent_step: int, budget: int = PER_TRACE) -> tuple[Trace, int]:
    """A shorter trace on which the adapter still departs at its last step, and the candidates tried.

    The trace is cut after the divergent step; then earlier steps are dropped one at a time
    (last first), each drop kept if the reference's expectations for the remaining inputs
    still catch the adapter at the last step, while the budget of candidates lasts (a budget
    of 0 just cuts). Responses stay only while the request they answer is among the requests
    the node sent earlier in the shortened trace.
    """
    header = original.header
    inputs = [step.input for step in original.steps[:divergent_step]]
    budget = min(budget, PER_TRACE)
    tried = 0

    def fails_at_end(candidate: list) -> bool:
        built = build_trace(header.name, header.setting, header.node, candidate, header.origin, initial=header.initial)
        if not answers_own_requests(built):
            return False
        result = replay(make_adapter(), built, header.name)
        return result.verdict == DEPARTS and result.divergence.step == len(candidate)

    index = len(inputs) - 2
    while index >= 0 and tried < budget:
        candidate = inputs[:index] + inputs[index + 1 :]
        tried += 1
        if fails_at_end(candidate):
            inputs = candidate
        index -= 1
    name = f"{header.name}-shortened"
    origin = f"shortened from {header.name}: the adapter departs at the last step"
    return build_trace(name, header.setting, header.node, inputs, origin, initial=header.initial), tried


def answers_own_requests(built: Trace) -> bool:
    sent = set()
    for step in built.steps:
        if type(step.input).__name__ == "Response" and msgspec.msgpack.encode(step.input.request) not in sent:
            return False
        sent.update(msgspec.msgpack.encode(s.message) for s in step.expect.sends)
    return True
