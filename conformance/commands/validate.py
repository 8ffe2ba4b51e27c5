"""`kraftcheck validate`: a Kafka quorum's own logs explained by the model (conformance/validate/)."""

import argparse
import contextlib
import json
import sys
from pathlib import Path

import msgspec
from tabulate import tabulate

from conformance.spark.session import SparkUnavailable, spark_options, spark_session
from conformance.validate.search import MAX_STATES
from conformance.validate.validation import RunVerdict, Validation, ValidationError, validate_logs, validate_runs
from model.config import ConfigError


def run_validate(args: argparse.Namespace) -> int:
    if not 0 <= args.fill <= 10 or not 0 <= args.slack_ms <= 600_000:
        print("kraftcheck: --fill is 0 to 10 steps, --slack-ms 0 to 600000", file=sys.stderr)
        return 2
    say = (lambda line: print(f"kraftcheck: {line}", file=sys.stderr, flush=True)) if not args.quiet else None
    try:
        spark = spark_options(args)
    except ConfigError as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 2
    if args.runs or spark:
        return run_many(args, spark, say)
    try:
        validation = validate_logs([Path(p) for p in args.paths], args.profile, args.fill, args.slack_ms, say)
    except (ValidationError, OSError) as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(msgspec.to_builtins(validation) | {"valid": validation.valid, "first": msgspec.to_builtins(validation.first)}, indent=2))
    else:
        print(report(validation), end="")
    return 0 if validation.valid else 1


def run_many(args: argparse.Namespace, spark, say) -> int:
    """--runs: each PATH a run directory of its own, one verdict each (one Spark task each)."""
    runs = [Path(p) for p in args.paths]
    if missing := [str(p) for p in runs if not p.is_dir()]:
        print(f"kraftcheck: --runs takes run directories; not one: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        with spark_session(spark, app="kraftcheck validate") if spark else contextlib.nullcontext() as on_spark:
            verdicts = validate_runs(runs, args.profile, args.fill, args.slack_ms, on_spark, say)
    except SparkUnavailable as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([msgspec.to_builtins(v) | {"valid": bool(v.validation and v.validation.valid)} for v in verdicts], indent=2))
    else:
        print(runs_report(verdicts), end="")
    if any(v.error for v in verdicts):
        return 2
    return 0 if all(v.validation.valid for v in verdicts) else 1


def runs_report(verdicts: list[RunVerdict]) -> str:
    """A line per run: its verdict and figures, the first unexplained line where there is one."""
    rows = []
    for verdict in verdicts:
        v = verdict.validation
        if v is None:
            rows.append((verdict.run, "-", "-", "cannot be read: " + (verdict.error or "")))
            continue
        first = v.first
        rule = first.why.split(":")[0] if first and first.why[:1].isupper() and ":" in first.why else ""
        said = "validated" if v.valid else f"node {first.node}, line {first.line}: {first.observation}{f' ({rule})' if rule else ''}" if first else f"{len(v.unlinked)} received but never sent"
        rows.append((verdict.run, v.profile, f"{v.observations:,}", said))
    valid = sum(1 for v in verdicts if v.validation and v.validation.valid)
    table = tabulate(rows, headers=("run", "profile", "observations", "verdict"), tablefmt="github")
    return f"# Validation of {len(verdicts)} runs\n\n{table}\n\n{valid} of {len(verdicts)} validated.\n"


def report(validation: Validation) -> str:
    """The verdict in words, the figures in a table, the first unexplained event with the states before it."""
    rate = validation.observations / validation.seconds if validation.seconds else 0.0
    rows = [
        (r.node, validation.logs[r.node], f"{r.observations:,}", f"{r.explained:,}", f"{r.filled:,}", f"{r.outside:,}", r.most_states,
         "-" if r.unexplained is None else f"line {r.unexplained.line}")
        for r in validation.nodes
    ]  # fmt: skip
    lines = [
        f"# Validation of {len(validation.nodes)} node logs under {validation.profile}", "",
        tabulate(rows, headers=("node", "log", "observations", "explained", "unlogged steps", "outside the model", "most states", "unexplained"), tablefmt="github"), "",
        f"{validation.observations:,} observations in {validation.seconds:.2f} s ({rate:,.0f} a second on one core); "
        f"{validation.linked:,} messages received matched to their sender's line"
        f"{f' ({len(validation.sent_at_kill)} more sent as their sender was killed, before it could log them)' if validation.sent_at_kill else ''}; "
        f"check-quorum timeout {'not applied: the profile has none' if validation.check_quorum_ms is None else f'{validation.check_quorum_ms:,} ms'}.", "",
    ]  # fmt: skip
    crowded = [r.node for r in validation.nodes if r.most_states > MAX_STATES]
    if crowded:
        lines += [f"Nodes {', '.join(map(str, crowded))} had more than {MAX_STATES} model states at once; the search kept the first {MAX_STATES}, "
                  "so an unexplained line there may be one a state it dropped would explain.", ""]  # fmt: skip
    first = validation.first
    if first is None and not validation.unlinked:
        lines += ["Validated: every logged event of every node is explained by an execution of the model, and every message one node says it received, its sender logged.", ""]
    if first is not None:
        lines += [
            f"## Not explained: node {first.node}, line {first.line}", "", f"    {first.observation}", "", first.why, "",
            f"The model states still possible just before ({len(first.possible)}), and what each would have logged instead:", "",
            *(f"{n}. {p.state}\n   instead: {p.instead}" for n, p in enumerate(first.possible, 1)), "",
        ]  # fmt: skip
        later = [r.unexplained for r in validation.nodes if r.unexplained and r.unexplained is not first]
        if later:
            lines += ["Met after it (perhaps its consequences: a follower takes its records from its leader's state):", "",
                      *(f"- node {u.node}, line {u.line}: {u.observation}: {u.why}" for u in later), ""]  # fmt: skip
    if validation.unlinked:
        lines += [f"## Received but never sent ({len(validation.unlinked)})", "",
                  *(f"- node {u.node}, line {u.line}: a {u.what} from node {u.peer}, which node {u.peer}'s log never shows sending" for u in validation.unlinked[:20]), ""]  # fmt: skip
    if validation.unreadable:
        lines += [f"## Lines kraftcheck cannot read ({len(validation.unreadable)})", "",
                  *(f"- line {u.line} ({u.why}): {u.text[:200]}" for u in validation.unreadable[:20]), ""]  # fmt: skip
    return "\n".join(lines)
