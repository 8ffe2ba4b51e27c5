"""Replay: drive an adapter through traces and find the first step where it departs from them.

Each step's response is compared field by field (error codes by wire number), the requests
the node sends as a multiset, and the node's state wherever the adapter can observe it. An
adapter that fails (crashes, hangs, answers garbage) fails that trace with the reason; the
other traces still run.
"""

import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import msgspec

from adapters.contract import Adapter, AdapterError
from conformance.corpus.manifest import changed_since_generated, verified_files
from conformance.text import message_text, readable
from spec import errors
from spec import trace as traces
from spec.trace import Observed, Outputs, Step, Trace

JSON_LIMIT = 20_000  # characters of each side's JSON a divergence keeps (an implementation may send anything)


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """The first difference between what a trace expects and what the adapter did."""

    step: int
    input: str  # the step's input in words
    field: str  # e.g. response.PartitionErrorCode, sends, state.high_watermark
    expected: str
    actual: str
    rules: tuple[str, ...]
    differing: tuple[str, ...] = ()  # every differing field of the part that differs, `field` first
    expected_json: str = ""  # that part (the response, the sends, the state...) as the protocol's JSON, every field shown
    actual_json: str = ""


class Difference(NamedTuple):
    """Where a step's outputs part from the trace: the first differing field, every differing
    field, and the part they belong to as JSON on both sides."""

    field: str
    expected: str
    actual: str
    differing: tuple[str, ...]
    expected_json: str
    actual_json: str


class TraceResult(msgspec.Struct, frozen=True, kw_only=True):
    trace: str  # the file
    name: str
    node: int
    steps: int  # steps in the trace
    steps_run: int  # steps that matched before the end or the divergence
    passed: bool
    divergence: Divergence | None = None
    failure: str | None = None  # the adapter failed, or the trace could not be read
    rules_passed: tuple[str, ...] = ()  # rule IDs of the steps that matched
    rules_failed: tuple[str, ...] = ()  # rule IDs of the step that diverged or on which the adapter failed
    seconds: float = 0.0


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


def _part(path: str, expected: object, actual: object) -> Difference | None:
    """The difference between one part of the outputs (a response, a result, a state), if any."""
    found = differences(path, msgspec.to_builtins(expected), msgspec.to_builtins(actual))
    if not found:
        return None
    field, want, got = found[0]
    return Difference(field, want, got, tuple(f for f, _, _ in found), _json(expected), _json(actual))


def _message_or_none(message: object) -> str:
    return "no response" if message is None else message_text(message)


def _sends_text(sends: Iterable) -> str:
    return "; ".join(f"to {s.destination}: {message_text(s.message)}" for s in sends) or "none"


def compare(step: Step, actual: Outputs, observed: Observed | None) -> Difference | None:
    """The first difference between a step's expectation and what the adapter reported."""
    expected = step.expect
    if (expected.response is None) != (actual.response is None) or (
        expected.response is not None and type(expected.response) is not type(actual.response)
    ):
        return Difference("response", _message_or_none(expected.response), _message_or_none(actual.response), ("response",), _json(expected.response), _json(actual.response))
    if expected.response is not None and (found := _part("response", expected.response, actual.response)):
        return found
    want = Counter(msgspec.json.encode(s) for s in expected.sends)
    got = Counter(msgspec.json.encode(s) for s in actual.sends)
    if want != got:
        missing = [s for s in expected.sends if want[msgspec.json.encode(s)] > got[msgspec.json.encode(s)]]
        extra = [s for s in actual.sends if got[msgspec.json.encode(s)] > want[msgspec.json.encode(s)]]
        return Difference(
            "sends",
            f"{_sends_text(expected.sends)} (missing: {_sends_text(missing)})",
            f"{_sends_text(actual.sends)} (unexpected: {_sends_text(extra)})",
            ("sends",),
            _json(sorted(expected.sends, key=msgspec.json.encode)),
            _json(sorted(actual.sends, key=msgspec.json.encode)),
        )
    for field in ("append_result", "alter_isr"):
        if found := _part(field, getattr(expected, field), getattr(actual, field)):
            return found
    if expected.shutdown != actual.shutdown:
        return Difference("shutdown", str(expected.shutdown), str(actual.shutdown), ("shutdown",), _json(expected.shutdown), _json(actual.shutdown))
    if step.state is not None and observed is not None:
        return _part("state", step.state, observed)
    return None


def replay(adapter: Adapter, trace: Trace, path: str) -> TraceResult:
    """Run one trace through an adapter; stop at the first divergence or adapter failure."""
    header = trace.header
    start = time.perf_counter()
    passed_rules: set[str] = set()
    run = 0

    def result(**outcome: object) -> TraceResult:
        return TraceResult(
            trace=path,
            name=header.name,
            node=header.node,
            steps=len(trace.steps),
            steps_run=run,
            rules_passed=tuple(sorted(passed_rules)),
            seconds=round(time.perf_counter() - start, 6),
            **outcome,
        )

    try:
        adapter.start(header)
        for step in trace.steps:
            actual = adapter.step(step.input)
            observed = adapter.observe() if step.state is not None else None
            found = compare(step, actual, observed)
            if found:
                divergence = Divergence(
                    step=step.step,
                    input=readable(step.note),
                    field=found.field,
                    expected=readable(found.expected),
                    actual=readable(found.actual),
                    rules=step.rules,
                    differing=found.differing,
                    expected_json=readable(found.expected_json, JSON_LIMIT),
                    actual_json=readable(found.actual_json, JSON_LIMIT),
                )
                return result(passed=False, divergence=divergence, rules_failed=step.rules)
            run += 1
            passed_rules.update(step.rules)
    except Exception as error:  # noqa: BLE001 - an adapter that fails in any way fails this trace alone
        failed_rules = trace.steps[run].rules if run < len(trace.steps) else ()
        reason = str(error) if isinstance(error, AdapterError) else f"the adapter raised {type(error).__name__}: {error}"
        return result(passed=False, failure=readable(f"step {run + 1}: {reason}"), rules_failed=failed_rules)
    finally:
        try:
            adapter.close()
        except Exception:  # noqa: BLE001 - closing a failed adapter must not end the run either
            pass
    return result(passed=True)


def trace_files(corpus: Path, verify: bool = True) -> list[Path]:
    """The trace files of a corpus directory (or the one file given), in name order; a corpus
    with a manifest must match it (unless `verify` is off), so a damaged corpus is not certified."""
    if corpus.is_file():
        return [corpus]
    if not corpus.is_dir():
        raise traces.TraceError(f"{corpus}: no such corpus directory or trace file")
    found = sorted(p for p in corpus.rglob("*") if p.suffix in (".jsonl", ".msgpack") and p.is_file())
    if not found:
        raise traces.TraceError(f"{corpus}: no trace files (*.jsonl, *.msgpack)")
    return verified_files(corpus, found) if verify else found


def of_systems(files: list[Path], systems: tuple[str, ...] | None) -> list[Path]:
    """The files whose trace is of one of `systems` ("kraft", "isr"); all files for None.
    An unreadable file stays, so that it fails as such."""
    if systems is None:
        return files

    def wanted(path: Path) -> bool:
        try:
            return traces.read_header(path).system in systems
        except traces.TraceError:
            return True

    return [path for path in files if wanted(path)]


def replay_file(make_adapter: Callable[[], Adapter], path: Path, verify: bool = True) -> TraceResult:
    """Read and replay one file; an unreadable trace, or (unless `verify` is off) one changed since
    its corpus was generated, fails with its error (the corpus is blamed, not the adapter); the
    run goes on."""
    try:
        trace = traces.read(path)
        if verify and changed_since_generated(path, path.read_bytes()):
            raise traces.TraceError(f"{path}: changed since the corpus was generated (its hash differs from the manifest's)")
    except (traces.TraceError, OSError) as error:
        return TraceResult(trace=str(path), name=path.stem, node=-1, steps=0, steps_run=0, passed=False, failure=readable(f"invalid trace: {error}"))
    return replay(make_adapter(), trace, str(path))

def failure_text(result: TraceResult) -> str:
    if result.failure:
        return result.failure
    d = result.divergence
    return f"step {d.step} ({d.input}): {d.field}: expected {d.expected}, got {d.actual} [rules {' '.join(d.rules) or '-'}]"
