"""Recording and playback: what an implementation answered through a trace, kept so that it can
be judged again under other readings of the model without running it again.

Replay delivers the trace's own inputs, responses bound to what the node sent
(replay.ResponseBinder): given the same answers, every reading delivers the same inputs. So one
live run, replayed on past its departure (replay's `run_on`), answers every question a judgment
under another reading can ask; playback checks each input it is asked is the one recorded.
"""

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from adapters.contract import Adapter, AdapterError, CapabilityLacking
from conformance.certify.replay import TraceResult, failure_reason, replay_file
from model.config import Timing
from spec.trace import Header, Input, Observed, Outputs

START, STEP, OBSERVE = "start", "step", "observe"


class Call(NamedTuple):
    """One call replay made of the implementation, and its answer or why it failed."""

    kind: str  # START, STEP or OBSERVE
    asked: Header | Input | None  # the header started, the input stepped; None for OBSERVE
    answer: Outputs | Observed | None  # what a STEP or an OBSERVE returned
    failure: str | None = None  # the call failed, so (replay.failure_reason)
    lacking: str | None = None  # the call was declined for want of this capability (CapabilityLacking)


class Recording(NamedTuple):
    """Every call of one trace's live run, in order, the capabilities the node declared it lacks
    and the timeouts it declared it runs with."""

    calls: tuple[Call, ...]
    lacks: frozenset[str]
    timing: Timing | None = None


class Recorder:
    """An adapter that passes every call to the live one and records it."""

    def __init__(self, live: Adapter) -> None:
        self.live = live
        self.name = live.name
        self.calls: list[Call] = []

    @property
    def lacks(self) -> frozenset[str]:
        return self.live.lacks

    @property
    def timing(self) -> Timing | None:
        return getattr(self.live, "timing", None)

    def _record(self, kind: str, asked: Header | Input | None, call: Callable[[], Outputs | Observed | None]) -> Outputs | Observed | None:
        try:
            answer = call()
        except Exception as error:
            self.calls.append(Call(kind, asked, None, failure_reason(error), getattr(error, "capability", None)))
            raise
        self.calls.append(Call(kind, asked, answer))
        return answer

    def start(self, header: Header) -> None:
        self._record(START, header, lambda: self.live.start(header))

    def step(self, event: Input) -> Outputs:
        return self._record(STEP, event, lambda: self.live.step(event))

    def observe(self) -> Observed | None:
        return self._record(OBSERVE, None, self.live.observe)

    def close(self) -> None:
        self.live.close()

    def recording(self) -> Recording:
        return Recording(tuple(self.calls), frozenset(self.lacks), self.timing)


class Playback:
    """An adapter answering as a recording says, failing where the live one failed."""

    def __init__(self, recording: Recording, name: str = "playback") -> None:
        self.recording = recording
        self.name = name
        self.lacks = recording.lacks
        self.timing = recording.timing
        self.at = 0

    def _answer(self, kind: str, asked: Header | Input | None) -> Outputs | Observed | None:
        if self.at == len(self.recording.calls):
            raise AdapterError(f"playback: the implementation was not asked to {kind} here when it was run")
        call = self.recording.calls[self.at]
        self.at += 1
        if call.kind != kind or call.asked != asked:
            raise AdapterError(f"playback: asked to {kind} {asked!r}, where the implementation was asked to {call.kind} {call.asked!r}")
        if call.lacking is not None:
            raise CapabilityLacking(call.lacking, call.failure or "")
        if call.failure is not None:
            raise AdapterError(call.failure)
        return call.answer

    def start(self, header: Header) -> None:
        self.at = 0
        self._answer(START, header)

    def step(self, event: Input) -> Outputs:
        return self._answer(STEP, event)

    def observe(self) -> Observed | None:
        return self._answer(OBSERVE, None)

    def close(self) -> None:
        pass


def replay_recorded(make_adapter: Callable[[], Adapter], path: Path, verify: bool = True) -> tuple[TraceResult, Recording | None]:
    """Replay one file as replay_file does, run on past a departure and recorded: its result, and
    the recording (None for a trace that could not be read, which no adapter saw)."""
    made: list[Recorder] = []

    def recorded() -> Recorder:
        made.append(Recorder(make_adapter()))
        return made[-1]

    result = replay_file(recorded, path, verify, run_on=True)
    return result, made[0].recording() if made else None
