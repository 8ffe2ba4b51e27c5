"""Benchmark: a real Kafka controller quorum under faults, longer than the test suite's run.

Runs `kraftcheck cluster run` (conformance/cluster/run.py) for --time seconds of faults, then
checks its history again and again for about two seconds. Prints the faults injected, the
writes acknowledged (and per second of faults), the high watermarks read, the epochs, the
violations, the run's wall time; and the checker's speed: histories checked per second, and
history events (faults, samples, writes, readings), metadata log batches and the nodes' logged
transitions per second.

    .venv/bin/python benchmarks/cluster_faults.py [--kafka-version V] [--time SECONDS] [--nemesis KINDS] [--seed N] [--out DIR]
"""

import argparse
import sys
import time
from pathlib import Path

from tabulate import tabulate

from conformance.cluster import history, metadata_log, server_log
from conformance.cluster.run import DEFAULT_NEMESES, RunOptions, prepare, run
from conformance.commands.cluster import nemesis_kinds

CHECK_SECONDS = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafka-version", default="4.3.1")
    parser.add_argument("--time", type=float, default=300.0, help="seconds of faults (default 300)")
    parser.add_argument("--nemesis", type=nemesis_kinds, default=DEFAULT_NEMESES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/bench-cluster")
    args = parser.parse_args()
    out = Path(args.out)
    prepare(out)
    options = RunOptions(version=args.kafka_version, nemesis=args.nemesis, seconds=args.time, seed=args.seed)
    started = time.monotonic()
    summary = run(options, out, lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    wall = time.monotonic() - started
    events = history.read((out / "history.jsonl").read_bytes())
    nodes = range(1, summary.controllers + 1)
    logs = {node: metadata_log.load(out / f"node-{node}" / metadata_log.DUMP) for node in nodes}
    transitions = {node: server_log.read((out / f"node-{node}" / "server.log").read_text(errors="replace")).transitions for node in nodes}
    batches = sum(len(batches) for batches in logs.values())
    checks, check_started = 0, time.monotonic()
    while time.monotonic() - check_started < CHECK_SECONDS:
        assert tuple(history.check(events, summary.controllers, options.leader_bound_seconds, logs=logs, transitions=transitions)) == summary.violations
        checks += 1
    per_check = (time.monotonic() - check_started) / checks
    acknowledged = (summary.writes or {}).get("ack", 0)
    rows = [
        ("Kafka", summary.version),
        ("faults injected", f"{sum(summary.faults.values())} ({', '.join(f'{count} {kind}' for kind, count in summary.faults.items() if count)})"),
        ("writes acknowledged", f"{acknowledged:,} ({acknowledged / summary.seconds:.1f} a second of faults)" if summary.seconds else f"{acknowledged:,}"),
        ("writes failed / unknown", "-" if summary.writes is None else f"{summary.writes['failed']:,} / {summary.writes['unknown']:,}"),
        ("high watermarks read", f"{summary.readings:,}"),
        ("epochs with a leader", summary.epochs),
        ("violations", len(summary.violations)),
        ("run, wall", f"{wall:.1f} s"),
        ("history events / log batches / transitions", f"{len(events):,} / {batches:,} / {summary.transitions:,}"),
        ("histories checked a second", f"{1 / per_check:,.1f}"),
        ("events, batches and transitions checked a second", f"{(len(events) + batches + summary.transitions) / per_check:,.0f}"),
    ]
    print(tabulate(rows, tablefmt="github", headers=("", "")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
