"""`kraftcheck check`: explore a configuration exhaustively, print the verdicts, save counterexamples."""

import argparse
import json
import os
import sys
from pathlib import Path

from conformance.corpus.counterexamples import save_replica_traces
from conformance.explore.check import check, counterexample_steps, counterexample_table, save_counterexample, summary, summary_table
from conformance.explore.configs import resolve
from conformance.explore.engine import Progress
from conformance.explore.isr_system import IsrSystem, steps_table
from model.config import ConfigError


def run(args: argparse.Namespace) -> int:
    overrides = {
        "voters": args.voters,
        "observers": args.observers,
        "profile": args.profile,
        "client_values": args.client_values,
        "max_epoch": args.max_epoch,
        "max_in_flight": args.max_in_flight,
        "max_elections": args.max_elections,
        "fetch_max_records": args.fetch_max_records,
        "max_crashes": args.crashes,
        "loss": args.loss,
        "duplication": args.duplication,
        "resign": args.resign,
        "retries": args.retries,
        "symmetry": args.symmetry,
        "replicas": args.replicas,
        "min_isr": args.min_isr,
        "truncation": args.truncation,
        "unflushed_loss": args.unflushed_loss,
    }
    name = args.config or ("custom" if any(v is not None for v in overrides.values()) else "smoke")
    config = resolve(args.config if args.config else (None if name == "custom" else "smoke"), overrides)
    workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    live = sys.stderr.isatty() and not args.json

    def progress(p: Progress) -> None:
        rate = p.distinct / p.seconds if p.seconds else 0
        line = f"\r  distinct {p.distinct:,}  {rate:,.0f} states/s  depth {p.depth}  queue {p.queue:,}  {p.seconds:.0f}s"
        print(line, end="", file=sys.stderr, flush=True)

    system, result, workers = check(config, keep_going=args.keep_going, max_states=args.max_states, workers=workers, progress=progress if live else None)
    if live:
        print(file=sys.stderr)
    isr = isinstance(system, IsrSystem)
    out = Path(args.out)
    data = summary(name, config, system, result, workers=workers)
    saved = []
    for counterexample in result.counterexamples:
        steps = counterexample_steps(system, counterexample.path)
        path = save_counterexample(out, name, data, counterexample.violation, steps)
        replica_traces = save_replica_traces(out, name, counterexample.violation, system, counterexample.path) if isr else []
        saved.append((counterexample, steps, path, replica_traces))
    if args.json:
        data["counterexample_files"] = [str(path) for _, _, path, _ in saved]
        if isr:
            data["counterexample_traces"] = [str(trace) for _, _, _, replica_traces in saved for trace in replica_traces]
        print(json.dumps(data))
    else:
        print(summary_table(data))
        for counterexample, steps, path, replica_traces in saved:
            print(f"\n{counterexample.violation.rule} violated after {len(counterexample.path) - 1} steps: {counterexample.violation.detail}")
            print(steps_table(steps) if isr else counterexample_table(steps))
            print(f"saved: {path}")
            if replica_traces:
                print(f"as conformance traces, one per replica: {replica_traces[0].parent}/ ({len(replica_traces)} files)")
    return 1 if result.counterexamples else 0
