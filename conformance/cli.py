"""The `kraftcheck` command line."""

import argparse
import json
import os
import sys

import msgspec
from tabulate import tabulate

from adapters.registry import UnknownAdapter
from conformance.trace import TraceError

CORPUS_CONFIGS = ("corpus", "corpus-deep", "corpus-diverge", "corpus-isr")  # what the shipped corpus is generated from
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
    return run_check(name, config, keep_going=args.keep_going, as_json=args.json, out=Path(args.out), max_states=args.max_states, workers=workers)


def main_traces_generate(args) -> int:
    from pathlib import Path

    from conformance.check_config import resolve
    from conformance.corpus import GenerateOptions, generate, write_corpus

    names = args.config or list(CORPUS_CONFIGS)
    configs = [(name, resolve(name, {})) for name in names]
    options = GenerateOptions(max_states=args.max_states, walks=args.walks, walk_steps=args.walk_steps, seed=args.seed)
    corpus, manifest = generate(configs, options, progress=lambda line: print(line, file=sys.stderr))
    write_corpus(Path(args.out), corpus, manifest)
    rows = [
        ("configurations", ", ".join(names)),
        ("traces", manifest.traces),
        ("steps", f"{manifest.steps:,}"),
        ("coverage cells", manifest.cells),
        ("rules exercised", len(manifest.rules)),
        ("content hash", manifest.content_hash),
        ("written to", args.out),
    ]
    print(tabulate(rows, tablefmt="simple"))
    return 0


def main_traces_schema(args) -> int:
    from conformance.trace import schema

    print(json.dumps(schema(), indent=1))
    return 0


def main_traces_show(args) -> int:
    from pathlib import Path

    from conformance import trace as traces

    shown = traces.read(Path(args.file))
    header = shown.header
    if header.cluster is not None:
        member = f"node {header.node} of voters {list(header.cluster.voters)} observers {list(header.cluster.observers)}, profile {header.cluster.profile}"
    else:
        partition = header.partition
        member = f"replica {header.node} of ISR partition {list(partition.replicas)}, min.isr {partition.min_isr}, truncation {partition.truncation}"
    print(f"{header.name}: {member}, {header.steps} steps")
    if header.origin:
        print(f"origin: {header.origin}")
    rows = []
    for step in shown.steps:
        state = step.state
        answer = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in step.errors.items()) or "-"
        after = f"{state.role} e{state.epoch} leader {state.leader_id} log {state.log_end_offset} hw {state.high_watermark}" if state else "-"
        rows.append((step.step, step.note, answer, len(step.expect.sends), after, " ".join(step.rules)))
    print(tabulate(rows, headers=("step", "input", "errors", "sends", "state after", "rules"), tablefmt="simple", maxcolwidths=[None, 60, 40, None, 40, 30]))
    return 0


def main_certify(args) -> int:
    from pathlib import Path

    from adapters.registry import adapter_factory
    from conformance import certify
    from conformance.corpus import DEFAULT_CORPUS

    make_adapter = adapter_factory(args.adapter, step_timeout=args.step_timeout)
    out = Path(args.out) if args.out else Path("out") / ("certify-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in args.adapter)[:60])
    live = sys.stderr.isatty() and not args.json
    corpus = Path(args.corpus) if args.corpus else DEFAULT_CORPUS
    systems = tuple(args.system) if args.system else None
    report = certify.certify(args.adapter, make_adapter, corpus, out, progress=certify.print_progress if live else None, systems=systems)
    if args.json:
        print(json.dumps(certify.summary(report, out)))
    else:
        print(certify.terminal_summary(report, out))
    return 0 if not report.failed else 1


def main_mutants(args) -> int:
    from pathlib import Path

    from adapters.mutants import MUTANTS

    if args.score:
        from conformance.certify import mutation_scores
        from conformance.corpus import DEFAULT_CORPUS

        scores = mutation_scores(Path(args.corpus) if args.corpus else DEFAULT_CORPUS)
        caught = sum(s.failed > 0 for s in scores)
        if args.json:
            print(json.dumps({"mutants": len(scores), "caught": caught, "scores": [msgspec.to_builtins(s) for s in scores]}))
        else:
            rows = [(s.name, "yes" if s.failed else "NO", s.failed, s.rule, s.first) for s in scores]
            print(tabulate(rows, headers=("mutant", "caught", "traces failed", "rule it breaks", "first caught at"), tablefmt="simple"))
            print(f"\nmutation score: {caught}/{len(scores)} ({100 * caught / len(scores):.0f}%)")
        return 0 if caught == len(scores) else 1
    if args.json:
        print(json.dumps([{"name": m.name, "description": m.description} for m in MUTANTS.values()]))
    else:
        print(tabulate([(m.name, m.description) for m in MUTANTS.values()], headers=("mutant", "the seeded bug"), tablefmt="simple"))
    return 0


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
    check.add_argument("--replicas", type=int, help="ISR system: replicas of the partition")
    check.add_argument("--min-isr", type=int, help="ISR system: min.isr, fewest ISR members for an acks=all append")
    check.add_argument("--truncation", help="ISR system: hw (to the high watermark, before KIP-101) or epoch (KIP-101)")
    check.add_argument("--unflushed-loss", action=argparse.BooleanOptionalAction, default=None, help="ISR system: a power failure of every replica loses records not yet on disk")
    check.add_argument("--workers", type=int, help="worker processes (default: one per core); counts are identical for any number; ISR configurations run in-process")
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

    trace_commands = commands.add_parser("traces", help="generate, show and describe conformance traces", description="Conformance traces: node-level inputs with the outputs the specification expects.")
    trace_sub = trace_commands.add_subparsers(dest="traces_command", required=True, metavar="SUBCOMMAND")
    gen = trace_sub.add_parser(
        "generate",
        help="generate a coverage-guided corpus from exploration",
        description="Search the named configurations, keep the shortest trace reaching each coverage cell "
        "(input kind x role x epoch relation x outcome x rule), add seeded random walks, and write the traces "
        "with a manifest. The same arguments give the same bytes.",
    )
    gen.add_argument("--config", action="append", help=f"a named configuration to search (repeatable; default: {', '.join(CORPUS_CONFIGS)})")
    gen.add_argument("--out", required=True, help="the corpus directory to write (replaced as a whole)")
    gen.add_argument("--max-states", type=int, default=150_000, help="cluster states each search may visit (default 150000)")
    gen.add_argument("--walks", type=int, default=8, help="seeded random walks per configuration, each projected on every node (default 8)")
    gen.add_argument("--walk-steps", type=int, default=250, help="cluster steps per random walk (default 250)")
    gen.add_argument("--seed", type=int, default=0, help="first random-walk seed (default 0)")
    gen.set_defaults(run=main_traces_generate)
    schema = trace_sub.add_parser("schema", help="print the JSON Schema of the trace format", description="Print the JSON Schema of the JSON Lines trace format (spec/trace.schema.json).")
    schema.set_defaults(run=main_traces_schema)
    show = trace_sub.add_parser("show", help="show a trace as a step table", description="Read a trace file (validating it) and print its steps.")
    show.add_argument("file", help="a trace file (.jsonl or .msgpack)")
    show.set_defaults(run=main_traces_show)

    cert = commands.add_parser(
        "certify",
        help="replay the corpus through an adapter and report conformance rule by rule",
        description="Replay every trace of the corpus through an adapter; write Markdown, JSON and JUnit reports with a verdict "
        "per rule and a shortened reproducing trace per divergence. Exit 0 only if every trace conforms.",
    )
    cert.add_argument("--adapter", required=True, help="reference, mutant:NAME (see `kraftcheck mutants`) or subprocess:COMMAND")
    cert.add_argument("--corpus", help="a corpus directory or one trace file (default: the shipped traces/)")
    cert.add_argument("--out", help="directory for the reports (default out/certify-ADAPTER)")
    cert.add_argument(
        "--system",
        action="append",
        choices=("kraft", "isr"),
        help="replay only the traces of this system: kraft (KIP-595 nodes) or isr (KIP-101 ISR replicas); repeatable (default: all)",
    )
    cert.add_argument("--step-timeout", type=float, default=10.0, help="seconds a subprocess adapter may take per reply (default 10)")
    cert.add_argument("--json", action="store_true", help="print a summary object instead of tables")
    cert.set_defaults(run=main_certify)

    mut = commands.add_parser("mutants", help="list the seeded-bug adapters", description="List the mutant adapters (mutant:NAME), one seeded bug each.")
    mut.add_argument("--score", action="store_true", help="replay the corpus through every mutant: which are caught, on which rule (exit 1 unless all are)")
    mut.add_argument("--corpus", help="corpus for --score (default: the shipped traces/)")
    mut.add_argument("--json", action="store_true", help="print the list (or the scores) as JSON")
    mut.set_defaults(run=main_mutants)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ConfigError as error:
        print(f"kraftcheck: invalid configuration: {error}", file=sys.stderr)
        return 2
    except (TraceError, UnknownAdapter) as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kraftcheck: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
