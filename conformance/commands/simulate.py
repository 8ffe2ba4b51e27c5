"""`kraftcheck simulate`: seeded random cluster runs, every safety property checked after every step."""

import argparse
import json
import sys

from tabulate import tabulate

from conformance import text
from conformance.explore.configs import MAX_NODES, check_bound
from conformance.explore.simulate import simulate
from model.cluster import Bounds, Cluster
from model.config import ClusterConfig


def check_arguments(args: argparse.Namespace) -> None:
    """Every bound in its range before any run: out of it, runs are empty yet "all held" (--steps 0, --runs 0)."""
    check_bound("--voters", args.voters, 1, MAX_NODES)
    check_bound("--observers", args.observers, 0, MAX_NODES)
    for option, value in (("--runs", args.runs), ("--steps", args.steps), ("--show", args.show)):
        check_bound(option, value, 1)
    for option, value in (("--client-values", args.client_values), ("--crashes", args.crashes)):
        check_bound(option, value, 0)


def cluster_config(args: argparse.Namespace) -> ClusterConfig:
    """Voters are numbered 1..N, observers N+1..N+M."""
    voters = tuple(range(1, args.voters + 1))
    observers = tuple(range(args.voters + 1, args.voters + args.observers + 1))
    return ClusterConfig(voters=voters, observers=observers, profile=args.profile)


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    config = cluster_config(args)
    bounds = Bounds(
        client_values=args.client_values,
        max_crashes=args.crashes,
        loss=not args.no_loss,
        duplication=args.duplication,
        resign=args.resign,
    )
    cluster = Cluster(config, bounds)
    live = sys.stderr.isatty() and not args.json

    def progress(done: int, steps: int, seconds: float) -> None:
        if live:
            print(f"\r  runs {done}/{args.runs}  steps {steps}  {steps / max(seconds, 1e-9):,.0f} steps/s", end="", file=sys.stderr, flush=True)

    results = simulate(cluster, args.runs, args.steps, args.seed, progress)
    if live:
        print(file=sys.stderr)
    violating = next((r for r in results if r.violations), None)
    steps = sum(r.steps for r in results)
    summary = {
        "profile": args.profile,
        "voters": len(config.voters),
        "observers": len(config.observers),
        "runs": len(results),
        "steps": steps,
        "violations": [{"rule": v.rule, "detail": v.detail, "seed": violating.seed, "step": violating.steps} for v in violating.violations] if violating else [],
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(tabulate([(k, v) for k, v in summary.items() if k != "violations"], tablefmt="simple"))
        if violating:
            print(f"\nseed {violating.seed} violates {', '.join(v.rule for v in violating.violations)} after {violating.steps} steps:")
            for v in violating.violations:
                print(f"  {v.rule}: {v.detail}")
            rows = []
            for number, step in enumerate(violating.history[-args.show :], start=max(1, violating.steps - args.show + 1)):
                rows.append((number, text.action_text(step.action)[:110], text.changes(cluster.ids, step.before, step.after)))
            print(text.wrapped_table(rows, ("step", "action", "what changed"), [None, 60, 80]))
        else:
            print("\nall safety properties held after every step")
    return 1 if violating else 0
