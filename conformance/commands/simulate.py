"""`kraftcheck simulate`: seeded random cluster runs, every safety property checked after every step."""

import argparse
import json
import sys

from tabulate import tabulate

from conformance import text
from conformance.explore.configs import MAX_NODES, check_bound
from conformance.explore.simulate import RunResult, simulate
from conformance.explore.simulate import run as run_seed
from conformance.explore.swarm import Progress, swarm, swarm_spark
from conformance.spark.session import SparkOptions, spark_options, spark_session
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
    spark = spark_options(args)
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
    if spark or args.keep_going:
        runs, steps, violating = swarm_runs(args, config, bounds, spark, live)
    else:
        runs, steps, violating = first_violation(args, cluster, live)
    summary = {
        "profile": args.profile,
        "voters": len(config.voters),
        "observers": len(config.observers),
        "engine": args.engine,
        "runs": runs,
        "steps": steps,
        "violations": [{"rule": v.rule, "detail": v.detail, "seed": r.seed, "step": r.steps} for r, v in violating],
    }
    if args.json:
        print(json.dumps(summary))
        return 1 if violating else 0
    print(tabulate([(k, v) for k, v in summary.items() if k != "violations"], tablefmt="simple"))
    if not violating:
        print("\nall safety properties held after every step")
        return 0
    shown = []
    for result, _violation in violating:
        if result.seed not in shown:
            shown.append(result.seed)
            show_run(cluster, result, args.show)
    return 1


def first_violation(args: argparse.Namespace, cluster: Cluster, live: bool) -> tuple[int, int, list]:
    """Seeds in order until one violates a property: runs, steps, and (run, violation) pairs."""

    def progress(done: int, steps: int, seconds: float) -> None:
        if live:
            print(f"\r  runs {done}/{args.runs}  steps {steps}  {steps / max(seconds, 1e-9):,.0f} steps/s", end="", file=sys.stderr, flush=True)

    results = simulate(cluster, args.runs, args.steps, args.seed, progress)
    if live:
        print(file=sys.stderr)
    violating = next((r for r in results if r.violations), None)
    pairs = [(violating, v) for v in violating.violations] if violating else []
    return len(results), sum(r.steps for r in results), pairs


def swarm_runs(args: argparse.Namespace, config: ClusterConfig, bounds: Bounds, spark: SparkOptions | None, live: bool) -> tuple[int, int, list]:
    """Every seed: runs, steps, and per violated property its shortest run (re-run here to show it)."""

    def progress(p: Progress) -> None:
        line = f"  runs {p.runs:,}/{args.runs:,}  steps {p.steps:,}  violating runs {p.violating:,}  {p.seconds:.1f}s"
        if spark:
            print(line, file=sys.stderr, flush=True)
        elif live:
            print("\r" + line, end="", file=sys.stderr, flush=True)

    if spark:
        with spark_session(spark) as session:
            result = swarm_spark(session.session, config, bounds, args.seed, args.runs, args.steps, session.partitions, progress)
    else:
        result = swarm(config, bounds, args.seed, args.runs, args.steps, progress)
        if live:
            print(file=sys.stderr)
    cluster = Cluster(config, bounds)
    pairs = []
    for rule, summary in result.shortest.items():
        replayed = run_seed(cluster, summary.seed, args.steps)
        pairs.append((replayed, next(v for v in replayed.violations if v.rule == rule)))
    return result.runs, result.steps, pairs


def show_run(cluster: Cluster, violating: RunResult, show: int) -> None:
    """A violating run: its seed, the properties it broke, its last `show` steps."""
    print(f"\nseed {violating.seed} violates {', '.join(v.rule for v in violating.violations)} after {violating.steps} steps:")
    for v in violating.violations:
        print(f"  {v.rule}: {v.detail}")
    rows = []
    for number, step in enumerate(violating.history[-show:], start=max(1, violating.steps - show + 1)):
        rows.append((number, text.action_text(step.action)[:110], text.changes(cluster.ids, step.before, step.after)))
    print(text.wrapped_table(rows, ("step", "action", "what changed"), [None, 60, 80]))
