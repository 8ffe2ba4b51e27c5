"""`kraftcheck cluster run`: a real Kafka controller quorum on loopback under a seeded nemesis,
its history checked (conformance/cluster/)."""

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
from tabulate import tabulate

from adapters.kafka_build import check_version
from adapters.registry import AdapterBuildError
from conformance.cluster.metadata_log import MetadataLogError
from conformance.cluster.network import NetworkUnavailable
from conformance.cluster.quorum import QuorumError
from conformance.cluster import history
from conformance.cluster.run import DEFAULT_NEMESES, FAULT_SECONDS, HISTORY, NEMESES, SHAPES, SUMMARY, TIMELINE, RunOptions, RunSummary, prepare, run
from conformance.cluster.timeline import timeline_svg

MAX_CONTROLLERS = 5


def names_of(known: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    """An argument type: a comma-separated list of some of `known`, each once."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
        if not names or any(name not in known for name in names):
            raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of {', '.join(known)}")
        return names

    return parse


nemesis_kinds = names_of(NEMESES)
shapes = names_of(SHAPES)


def seconds_range(text: str) -> tuple[float, float]:
    low, dash, high = text.partition("-")
    try:
        bounds = (float(low), float(high if dash else low))
    except ValueError:
        bounds = (-1.0, -1.0)
    if not 0.1 <= bounds[0] <= bounds[1] <= 3_600:
        raise argparse.ArgumentTypeError(f"{text!r}: LOW-HIGH seconds, 0.1 <= LOW <= HIGH <= 3600 (or one number)")
    return bounds


def run_cluster(args: argparse.Namespace) -> int:
    check_version(args.kafka_version)
    nemesis = args.nemesis or DEFAULT_NEMESES
    if not 1 <= args.controllers <= MAX_CONTROLLERS:
        print(f"kraftcheck: --controllers {args.controllers}: 1 to {MAX_CONTROLLERS}", file=sys.stderr)
        return 2
    if not 0 <= args.time <= 86_400 or not 1 <= args.leader_bound <= 3_600:
        print("kraftcheck: --time is 0 to 86400 seconds, --leader-bound 1 to 3600", file=sys.stderr)
        return 2
    out = Path(args.out)
    prepare(out)
    options = RunOptions(
        version=args.kafka_version, controllers=args.controllers, nemesis=nemesis, seconds=args.time, seed=args.seed, leader_bound_seconds=args.leader_bound,
        fault_seconds=args.fault_time or FAULT_SECONDS, shapes=args.partitions or SHAPES, writes=args.writes,
    )
    try:
        summary = run(options, out, lambda line: print(f"kraftcheck: {line}", file=sys.stderr, flush=True))
    except (AdapterBuildError, QuorumError, MetadataLogError, NetworkUnavailable) as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 1
    (out / SUMMARY).write_bytes(msgspec.json.format(msgspec.json.encode(summary)) + b"\n")
    events = history.read((out / HISTORY).read_bytes())
    title = f"Kafka {summary.version}, {summary.controllers} controllers, {', '.join(summary.nemesis)}, seed {summary.seed}"
    (out / TIMELINE).write_text(timeline_svg(events, tuple(range(1, summary.controllers + 1)), summary.violations, title))
    (out / "report.md").write_text(report(summary, out))
    if args.json:
        print(json.dumps(msgspec.to_builtins(summary), indent=2))
    else:
        print(report(summary, out), end="")
    return 1 if summary.violations else 0


def report(summary: RunSummary, out: Path) -> str:
    """The run in words: what it injected, what it saw, what it found."""
    rows = [
        ("Kafka", summary.version),
        ("controllers", summary.controllers),
        ("seed", summary.seed),
        ("faults", ", ".join(f"{count} {kind}" for kind, count in summary.faults.items()) or "none"),
        ("faulting", f"{summary.seconds:g} s"),
        ("writes", "none (bootstrap.controllers needs Kafka 3.7)" if summary.writes is None else ", ".join(f"{count:,} {outcome}" for outcome, count in summary.writes.items())),
        ("high watermarks read", summary.readings),
        ("metadata log batches at the end", ", ".join(f"node {node}: {count:,}" for node, count in summary.batches.items())),
        ("quorum-state changes seen", summary.samples),
        ("transitions in the nodes' logs", f"{summary.transitions:,}" + (f" ({len(summary.unreadable)} unreadable)" if summary.unreadable else "")),
        ("epochs with a leader", summary.epochs),
        ("first leader after", "-" if summary.first_leader_seconds is None else f"{summary.first_leader_seconds:.1f} s"),
        ("leader after the faults healed", "none" if summary.leader_after_healing_seconds is None else f"{summary.leader_after_healing_seconds:.1f} s"),
        ("violations", len(summary.violations)),
    ]
    lines = [f"# Kafka {summary.version} controller quorum under {', '.join(summary.nemesis)}", "", tabulate(rows, tablefmt="github", headers=("", "")), ""]
    if summary.violations:
        lines += ["## Violations", "", tabulate([(v.rule, f"{v.t:.3f} s", v.detail) for v in summary.violations], headers=("rule", "at", "what shows it"), tablefmt="github"), ""]
    else:
        lines += [
            "No violation: at most one leader per epoch (SAFE-1), one vote per node per epoch (SAFE-2), epochs that never decrease (SAFE-3), "
            "as every node's quorum-state file and its own log showed them; a cut-off leader stepping down (PROGRESS-1); logs that match (SAFE-4), every acknowledged "
            "write in the last leader's log (SAFE-6), committed prefixes that agree (SAFE-7), as every node's metadata log showed them at the end; "
            "a high watermark that never went back (HW-MONOTONE); and a leader within the bound once the faults healed.",
            "",
        ]
    if summary.unreadable:
        lines += ["## Transition lines kraftcheck cannot read", "", *(f"    {line}" for line in summary.unreadable[:20]), ""]
        lines += [f"(and {len(summary.unreadable) - 20} more)", ""] if len(summary.unreadable) > 20 else []
    lines += [
        f"The history, every fault, write, reading and quorum-state change: {out / HISTORY}; drawn: {out / TIMELINE}; "
        f"each node's log: {out}/node-N/server.log, its metadata log: {out}/node-N/metadata-log.jsonl.",
        "",
    ]
    return "\n".join(lines)
