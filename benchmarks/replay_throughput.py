"""Benchmark: replay throughput (steps/s) of the shipped corpus, in-process and through `subprocess:`.

For the reference adapter in-process, and for the example implementation run as a separate
process (a process per trace, and one process serving every trace with a `reset` between them,
protocol 2), prints traces, steps, wall seconds and
steps per second, and the steps per second counting only the time spent in the adapter's
step and observe calls (for `subprocess:`, the protocol round trips without process start-up).

    .venv/bin/python benchmarks/replay_throughput.py [--corpus DIR] [--sample N] [--repeat N]
"""

import argparse
import contextlib
import sys
import time
from pathlib import Path

from tabulate import tabulate

from adapters.registry import adapter_factory
from conformance.certify.replay import replay, trace_files
from conformance.corpus.generate import DEFAULT_CORPUS
from spec import trace as traces

EXAMPLE = f"subprocess:{sys.executable} -m adapters.example_node"


class Timed:
    """An adapter wrapper adding up the time spent in step and observe."""

    def __init__(self, adapter, clock: list[float]) -> None:
        self.adapter, self.clock, self.name = adapter, clock, adapter.name

    def start(self, header):
        self.adapter.start(header)

    @property
    def lacks(self) -> frozenset[str]:
        return self.adapter.lacks

    def step(self, event):
        start = time.perf_counter()
        try:
            return self.adapter.step(event)
        finally:
            self.clock[0] += time.perf_counter() - start

    def observe(self):
        start = time.perf_counter()
        try:
            return self.adapter.observe()
        finally:
            self.clock[0] += time.perf_counter() - start

    def close(self):
        self.adapter.close()


def run(spec: str, corpus: list, repeat: int, sessions: bool = True) -> tuple[int, float, float]:
    """Steps replayed, the best wall time and the best in-adapter time over `repeat` runs; every
    trace must pass. Without `sessions`, every trace gets a factory (and so a process) of its own."""
    best, best_inside = float("inf"), float("inf")
    for _ in range(repeat):
        clock = [0.0]
        start = time.perf_counter()
        with adapter_factory(spec) as shared:
            for path, trace in corpus:
                with (contextlib.nullcontext(shared) if sessions else adapter_factory(spec)) as make:
                    result = replay(Timed(make(), clock), trace, str(path))
                if not result.passed:
                    raise SystemExit(f"{spec} failed {path}: {result.failure or result.divergence}")
        best = min(best, time.perf_counter() - start)
        best_inside = min(best_inside, clock[0])
    return sum(len(t.steps) for _, t in corpus), best, best_inside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--sample", type=int, default=1, help="replay every Nth trace through subprocess (default 1: all)")
    parser.add_argument("--repeat", type=int, default=3, help="in-process repetitions, the best is kept (default 3)")
    args = parser.parse_args()
    corpus = [(p, traces.read(p)) for p in trace_files(Path(args.corpus))]
    rows = []
    runs = (
        ("reference, in-process", "reference", corpus, args.repeat, True),
        ("example node via subprocess:, a process per trace", EXAMPLE, corpus[:: args.sample], 1, False),
        ("example node via subprocess:, one process, reset between traces", EXAMPLE, corpus[:: args.sample], 1, True),
    )
    for label, spec, chosen, repeat, sessions in runs:
        steps, seconds, inside = run(spec, chosen, repeat, sessions)
        rows.append((label, len(chosen), steps, f"{seconds:.2f}", f"{steps / seconds:,.0f}", f"{steps / inside:,.0f}"))
    print(tabulate(rows, headers=("adapter", "traces", "steps", "wall s", "steps/s", "steps/s in the adapter"), tablefmt="simple"))


if __name__ == "__main__":
    main()
