"""Benchmark: replay throughput (steps/s) in-process, through `subprocess:` and through Kafka's adapter.

For the reference adapter in-process, the example implementation run as a separate process (a
process per trace, and one process serving every trace with a `reset` between them, protocol 2)
and Apache Kafka's KafkaRaftClient (`kafka:VERSION`: persistent sessions, one JVM per job,
replaying with 1 and with 2 jobs as `certify --jobs` does: traces read, checked against their
manifest and the model, replayed and judged in one process per job), prints traces, steps, wall
seconds and steps per second (the best of --repeat runs), and, with one job, the steps per second
counting only the time spent in the adapter's step and observe calls (for `subprocess:` and
`kafka:`, the protocol round trips without process start-up).

The steps are the steps an adapter replayed: every step of a trace that conforms, up to and
including the departing step of one that departs. Kafka replays, by default, the corpus of its
own model profile (adapters/kafka_build.py VERSION_PROFILES: traces/kafka-3.9/ for 3.9.1), where
most traces conform; against KIP-595 as written every Kafka trace departs at its first step.
The Kafka rows are skipped, saying why, where java, or a build of the adapter and Maven, is missing.

    .venv/bin/python benchmarks/replay_throughput.py [--corpus DIR] [--sample N] [--repeat N]
        [--kafka VERSION|none] [--kafka-corpus DIR] [--kafka-sample N] [--jobs 1,2]
"""

import argparse
import contextlib
import shutil
import sys
import threading
import time
from pathlib import Path

from tabulate import tabulate

from adapters import kafka_build
from adapters.registry import adapter_factory
from conformance.certify.parallel import replay_all
from conformance.certify.replay import CONFORMS, replay_file, trace_files
from conformance.corpus.generate import DEFAULT_CORPUS

EXAMPLE = f"subprocess:{sys.executable} -m adapters.example_node"


class Timed:
    """An adapter wrapper adding up the time spent in step and observe (from any thread)."""

    def __init__(self, adapter, clock: list[float], lock: threading.Lock) -> None:
        self.adapter, self.clock, self.lock, self.name = adapter, clock, lock, adapter.name

    def start(self, header):
        self.adapter.start(header)

    @property
    def lacks(self) -> frozenset[str]:
        return self.adapter.lacks

    def _timed(self, call):
        start = time.perf_counter()
        try:
            return call()
        finally:
            elapsed = time.perf_counter() - start
            with self.lock:
                self.clock[0] += elapsed

    def step(self, event):
        return self._timed(lambda: self.adapter.step(event))

    def observe(self):
        return self._timed(self.adapter.observe)

    def close(self):
        self.adapter.close()


def replayed_steps(result) -> int:
    """The steps the adapter replayed: those that matched, and the one it departed at."""
    return result.steps_run + (result.divergence is not None)


def run(spec: str, files: list[Path], repeat: int, sessions: bool = True, jobs: int = 1, must_pass: bool = True) -> tuple[int, float, float | None, dict[str, int]]:
    """Steps replayed, the best wall time and the best in-adapter time (None with several jobs:
    they run in processes of their own) over `repeat` runs, and the verdicts; with `must_pass`,
    every trace must conform. Without `sessions`, every trace gets a factory (and so a process)
    of its own. Traces are read, checked and replayed as certify does, with `jobs` processes."""
    best, best_inside = float("inf"), float("inf")
    for _ in range(repeat):
        clock, lock = [0.0], threading.Lock()
        start = time.perf_counter()
        with adapter_factory(spec) as shared:

            def replay_one(path):
                with contextlib.nullcontext(shared) if sessions else adapter_factory(spec) as make:
                    return replay_file(lambda: Timed(make(), clock, lock), path)

            results = [replay_one(path) for path in files] if jobs == 1 else [result for result, _, _ in replay_all(shared, files, True, jobs)]
        best = min(best, time.perf_counter() - start)
        best_inside = min(best_inside, clock[0])
        failing = next(((path, r) for path, r in zip(files, results) if r.verdict != CONFORMS), None)
        if must_pass and failing:
            raise SystemExit(f"{spec} failed {failing[0]}: {failing[1].failure or failing[1].divergence}")
    verdicts: dict[str, int] = {}
    for result in results:
        verdicts[result.verdict] = verdicts.get(result.verdict, 0) + 1
    return sum(replayed_steps(r) for r in results), best, best_inside if jobs == 1 else None, verdicts


def kafka_missing(version: str) -> str | None:
    """Why the Kafka adapter cannot run here, or None: java to run it, and to build it javac and Maven."""
    needed = ["java"] if kafka_build.is_built(version) else ["java", "javac", "mvn"]
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if not missing:
        return None
    return f"{', '.join(missing)} not on PATH (scripts/bootstrap installs them: apt-get install openjdk-17-jdk-headless maven)"


def kafka_corpus(version: str, chosen: str | None) -> Path:
    """The corpus Kafka replays: --kafka-corpus, else the shipped corpus of the version's own profile, else traces/."""
    if chosen:
        return Path(chosen)
    profile = kafka_build.VERSION_PROFILES.get(version)
    return DEFAULT_CORPUS / profile if profile and (DEFAULT_CORPUS / profile).is_dir() else DEFAULT_CORPUS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--sample", type=int, default=1, help="replay every Nth trace through subprocess: (default 1: all)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the in-process and Kafka rows, the best is kept (default 3)")
    parser.add_argument(
        "--kafka",
        action="append",
        metavar="VERSION",
        help=f"a Kafka version to replay through kafka:VERSION, repeatable, or none (default: {', '.join(kafka_build.TESTED_VERSIONS)}, "
        "the tested versions)",
    )
    parser.add_argument("--kafka-corpus", metavar="DIR", help="the corpus Kafka replays (default: its version's profile's shipped corpus)")
    parser.add_argument("--kafka-sample", type=int, default=1, metavar="N", help="replay every Nth trace through kafka: (default 1: all)")
    parser.add_argument("--jobs", default="1,2", help="comma-separated numbers of jobs for the Kafka rows (default 1,2)")
    args = parser.parse_args()
    corpus = trace_files(Path(args.corpus))
    rows, notes = [], []
    runs = [
        ("reference, in-process", "reference", corpus, args.repeat, True, 1, True),
        ("example node via subprocess:, a process per trace", EXAMPLE, corpus[:: args.sample], 1, False, 1, True),
        ("example node via subprocess:, one process, reset between traces", EXAMPLE, corpus[:: args.sample], 1, True, 1, True),
    ]
    versions = [] if args.kafka == ["none"] else (args.kafka or list(kafka_build.TESTED_VERSIONS))
    for version in versions:
        missing = kafka_missing(version)
        if missing:
            notes.append(f"kafka:{version} skipped: {missing}")
            continue
        directory = kafka_corpus(version, args.kafka_corpus)
        chosen = trace_files(directory)[:: args.kafka_sample]
        shown = directory.relative_to(DEFAULT_CORPUS.parent) if directory.is_relative_to(DEFAULT_CORPUS.parent) else directory
        for jobs in (int(n) for n in args.jobs.split(",")):
            runs.append((f"kafka:{version} on {shown}/, one JVM per job, reset between traces", f"kafka:{version}", chosen, args.repeat, True, jobs, False))
    for label, spec, chosen, repeat, sessions, jobs, must_pass in runs:
        steps, seconds, inside, verdicts = run(spec, chosen, repeat, sessions, jobs, must_pass)
        rows.append((label, jobs, len(chosen), steps, f"{seconds:.2f}", f"{steps / seconds:,.0f}", "-" if inside is None else f"{steps / inside:,.0f}"))
        if not must_pass:
            notes.append(f"{label}, {jobs} job{'s' if jobs > 1 else ''}: " + ", ".join(f"{n} {verdict}" for verdict, n in sorted(verdicts.items())))
    print(tabulate(rows, headers=("adapter", "jobs", "traces", "steps", "wall s", "steps/s", "steps/s in the adapter"), tablefmt="simple"))
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
