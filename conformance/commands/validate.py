"""`kraftcheck validate`: a Kafka quorum's own logs explained by the model (conformance/validate/)."""

import argparse
import json
import sys
from pathlib import Path

import msgspec
from tabulate import tabulate

from conformance.validate.validation import Validation, ValidationError, validate_logs


def run_validate(args: argparse.Namespace) -> int:
    if not 0 <= args.fill <= 10 or not 0 <= args.slack_ms <= 600_000:
        print("kraftcheck: --fill is 0 to 10 steps, --slack-ms 0 to 600000", file=sys.stderr)
        return 2
    say = (lambda line: print(f"kraftcheck: {line}", file=sys.stderr, flush=True)) if not args.quiet else None
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
        f"{validation.linked:,} messages received matched to their sender's line; "
        f"check-quorum timeout {'not applied: the profile has none' if validation.check_quorum_ms is None else f'{validation.check_quorum_ms:,} ms'}.", "",
    ]  # fmt: skip
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
