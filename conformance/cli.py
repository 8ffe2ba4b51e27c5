"""The `kraftcheck` command line."""

import argparse
import json
import os
import sys

from tabulate import tabulate

from model.config import FAULTY_PROFILES, PROFILES, ClusterConfig, ConfigError


def cluster_config(args) -> ClusterConfig:
    """Voters are numbered 1..N, observers N+1..N+M."""
    if args.voters < 1:
        raise ConfigError(f"--voters must be at least 1, got {args.voters}")
    if args.observers < 0:
        raise ConfigError(f"--observers must not be negative, got {args.observers}")
    voters = tuple(range(1, args.voters + 1))
    observers = tuple(range(args.voters + 1, args.voters + args.observers + 1))
    return ClusterConfig(voters=voters, observers=observers, profile=args.profile)


def main_simulate(args) -> int:
    from conformance import describe_steps
    from conformance.simulate import simulate
    from model.cluster import Bounds, Cluster

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
                rows.append((number, describe_steps.action_text(step.action)[:110], describe_steps.changes(cluster.ids, step.before, step.after)))
            print(tabulate(rows, headers=("step", "action", "what changed"), tablefmt="simple", maxcolwidths=[None, 60, 80]))
        else:
            print("\nall safety properties held after every step")
    return 1 if violating else 0


def main_check(args) -> int:
    from pathlib import Path

    from conformance.check import run_check
    from conformance.check_config import resolve

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
    }
    name = args.config or ("custom" if any(v is not None for v in overrides.values()) else "smoke")
    config = resolve(args.config if args.config else (None if name == "custom" else "smoke"), overrides)
    workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    return run_check(name, config, keep_going=args.keep_going, as_json=args.json, out=Path(args.out), max_states=args.max_states, workers=workers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraftcheck", description="Specification and conformance testing for KRaft (KIP-595) and KIP-101 truncation.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rules = commands.add_parser("rules", help="list the rule catalogue", description="List the normative rules of the specification.")
    rules.add_argument("--coverage", action="store_true", help="run the rule tests and show, per rule, the tests that exercise it")
    rules.add_argument("--group", help="only the rules of one group, e.g. VOTE-REQ")
    rules.add_argument("--json", action="store_true", help="print the catalogue as JSON")
    rules.set_defaults(run=lambda args: __import__("conformance.catalogue_view", fromlist=["main_rules"]).main_rules(args))

    profiles_help = ", ".join(sorted(PROFILES)) + "; faulty variants: " + ", ".join(sorted(FAULTY_PROFILES))

    check = commands.add_parser(
        "check",
        help="model-check a configuration exhaustively",
        description="Explore every reachable state of a small cluster within bounds, checking every safety property. "
        "Exit 0 if all hold, 1 on a violation (its shortest counterexample is printed and saved).",
    )
    check.add_argument("--config", help="a named configuration: smoke (default), tlc-kraft, faults")
    check.add_argument("--voters", type=int, help="number of voters")
    check.add_argument("--observers", type=int, help="number of observers")
    check.add_argument("--profile", help=f"model profile ({profiles_help})")
    check.add_argument("--client-values", type=int, help="client appends allowed")
    check.add_argument("--max-epoch", type=int, help="largest epoch any node may reach")
    check.add_argument("--max-in-flight", type=int, help="most messages in flight at once")
    check.add_argument("--crashes", type=int, help="crashes allowed (each crashed node may restart)")
    check.add_argument("--max-elections", type=int, help="candidacies allowed in a whole run")
    check.add_argument("--fetch-max-records", type=int, help="most records per Fetch response (0 = all)")
    check.add_argument("--loss", action=argparse.BooleanOptionalAction, default=None, help="allow message loss")
    check.add_argument("--duplication", action=argparse.BooleanOptionalAction, default=None, help="allow duplicated deliveries")
    check.add_argument("--resign", action=argparse.BooleanOptionalAction, default=None, help="allow leaders to resign")
    check.add_argument("--retries", action=argparse.BooleanOptionalAction, default=None, help="allow request timeouts to re-send")
    check.add_argument("--symmetry", action=argparse.BooleanOptionalAction, default=None, help="symmetry reduction over node ids (default on)")
    check.add_argument("--workers", type=int, help="worker processes (default: one per core); counts are identical for any number")
    check.add_argument("--keep-going", action="store_true", help="collect a counterexample for every violated property")
    check.add_argument("--max-states", type=int, help="stop after this many distinct states")
    check.add_argument("--out", default="out", help="directory for counterexample traces (default ./out)")
    check.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    check.set_defaults(run=main_check)
    sim = commands.add_parser("simulate", help="seeded random cluster runs checking every safety property", description="Random walks of a cluster, every safety property checked after every step. Exit 1 on a violation.")
    sim.add_argument("--voters", type=int, default=3, help="number of voters (default 3)")
    sim.add_argument("--observers", type=int, default=1, help="number of observers (default 1)")
    sim.add_argument("--profile", default="kip595", help=f"model profile ({profiles_help})")
    sim.add_argument("--runs", type=int, default=500, help="number of seeded runs (default 500)")
    sim.add_argument("--steps", type=int, default=400, help="steps per run (default 400)")
    sim.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    sim.add_argument("--client-values", type=int, default=3, help="client appends per run (default 3)")
    sim.add_argument("--crashes", type=int, default=2, help="crashes per run (default 2)")
    sim.add_argument("--no-loss", action="store_true", help="never lose messages")
    sim.add_argument("--duplication", action="store_true", help="allow duplicated deliveries")
    sim.add_argument("--resign", action="store_true", help="allow leaders to resign (EndQuorumEpoch)")
    sim.add_argument("--show", type=int, default=25, help="steps of a counterexample to show (default 25)")
    sim.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    sim.set_defaults(run=main_simulate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ConfigError as error:
        print(f"kraftcheck: invalid configuration: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kraftcheck: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
