"""Precision: the reference model, reading the specification every allowed way, must conform.

A certification is precise when it never fails an implementation for a choice the
specification leaves open. The reference resolving its choice points otherwise than the
model's default (model/choices.py) is such an implementation: one alternative at a time,
sampled combinations of alternatives, and seeded random resolutions (a one-way point drawn once
per trace, an each-time point anew at each step: model.choices.RandomChoices).
Each replays the corpus; any departure or error is a precision bug of kraftcheck.
"""

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import msgspec

from adapters.registry import adapter_factory
from conformance.certify.replay import CONFORMS, VERDICTS, TraceResult, replay
from model.choices import CHOICE_POINTS, alternatives
from model.config import PINS
from spec import trace as traces
from spec.trace import Trace

CORPUS_VOTERS = (1, 2, 3)  # the node ids the one-voter alternatives name (others fall back to the first other voter)


class PrecisionRun(msgspec.Struct, frozen=True, kw_only=True):
    adapter: str  # reference:... as `certify --adapter` takes it
    verdicts: dict[str, int]  # verdict -> traces
    first_failure: str = ""  # the first trace that did not conform, and why


def precision_adapters(combinations: int = 4, random_runs: int = 4, seed: int = 0, pinned: frozenset[str] = frozenset()) -> list[str]:
    """Every single alternative, `combinations` sampled combinations of one alternative per
    point, and `random_runs` random resolutions; as adapter names. Points in `pinned`
    (the corpus's profile resolves them one way) are no reading of it: left to the profile."""
    points = [name for name in CHOICE_POINTS if name not in pinned]
    singles = [f"reference:{name}={pick}" for name in points for pick in alternatives(name, CORPUS_VOTERS, 0)[1:]]
    draw = random.Random(seed)
    combined = [
        "reference:" + ",".join(f"{name}={draw.choice(alternatives(name, CORPUS_VOTERS, 0))}" for name in points) for _ in range(combinations)
    ]
    return singles + combined + [f"reference:random={n}" for n in range(seed, seed + random_runs)]


def pinned_points(corpus: list[tuple[Path, Trace]]) -> frozenset[str]:
    """The choice points the corpus's profiles pin (model.config.PINS)."""
    profiles = {trace.header.setting.profile for _, trace in corpus if hasattr(trace.header.setting, "profile")}
    return frozenset(name for profile in profiles for name in PINS.get(profile, {}))


def load_corpus(files: list[Path]) -> list[tuple[Path, Trace]]:
    """The readable traces (an unreadable one is certify's to report)."""
    loaded = []
    for path in files:
        try:
            loaded.append((path, traces.read(path)))
        except traces.TraceError:
            continue
    return loaded


def run_precision(corpus: list[tuple[Path, Trace]], adapters: list[str], progress: Callable[[int, int], None] | None = None) -> tuple[list[PrecisionRun], set[str]]:
    """Replay the corpus through each adapter: a row per adapter, and the traces every one conformed to."""
    rows = []
    replayed = []
    for number, name in enumerate(adapters, start=1):
        with adapter_factory(name) as make:
            results: list[TraceResult] = [replay(make(), trace, str(path)) for path, trace in corpus]
        counted = Counter(r.verdict for r in results)
        failing = next((r for r in results if r.verdict != CONFORMS), None)
        why = "" if failing is None else f"{Path(failing.trace).name}: {failing.failure or failing.divergence.field}"
        rows.append(PrecisionRun(adapter=name, verdicts={v: counted[v] for v in VERDICTS}, first_failure=why))
        replayed.append(results)
        if progress:
            progress(number, len(adapters))
    return rows, precise_traces(corpus, replayed)


def precise_traces(corpus: list[tuple[Path, Trace]], replayed: list[list[TraceResult]]) -> set[str]:
    """The traces of the corpus every adapter's replay conformed to."""
    precise = {str(path) for path, _ in corpus}
    for results in replayed:
        precise &= {r.trace for r in results if r.verdict == CONFORMS}
    return precise
