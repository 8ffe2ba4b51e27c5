"""`kraftcheck rules`: the rule catalogue as a table, and its measured test coverage."""

import argparse
import json
import sys

from tabulate import tabulate

from conformance.coverage.measure import CoverageError, coverage_report, measure_coverage
from spec.rules import Rule, load_rules


def rules_table(rules: tuple[Rule, ...]) -> str:
    rows = [(r.id, r.title, r.section) for r in rules]
    return tabulate(rows, headers=("rule", "title", "source section"), tablefmt="simple")


def run(args: argparse.Namespace) -> int:
    rules = load_rules()
    if args.group:
        rules = tuple(r for r in rules if r.group == args.group.upper())
        if not rules:
            groups = sorted({r.group for r in load_rules()})
            print(f"kraftcheck: no rules in group {args.group!r}; groups: {', '.join(groups)}", file=sys.stderr)
            return 2
    if not args.coverage:
        if args.json:
            print(json.dumps([{"id": r.id, "title": r.title, "text": r.text, "source": r.source, "section": r.section, "note": r.note} for r in rules], indent=1))
        else:
            print(rules_table(rules))
            print(f"{len(rules)} rules")
        return 0
    try:
        by_rule = measure_coverage()
    except CoverageError as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 2
    table, covered = coverage_report(rules, by_rule)
    print(table)
    print(f"rules covered: {covered}/{len(rules)}")
    return 0 if covered == len(rules) else 1
