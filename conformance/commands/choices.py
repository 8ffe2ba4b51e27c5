"""`kraftcheck choices`: the specification's choice points, or the reference run under every alternative."""

import argparse
import json
import sys
from pathlib import Path

import msgspec

from conformance.certify.precision import load_corpus, pinned_points, precision_adapters, run_precision
from conformance.certify.replay import DEPARTS, ERROR, VERDICTS, trace_files
from conformance.corpus.generate import DEFAULT_CORPUS
from conformance.text import wrapped_table
from model.choices import CHOICE_POINTS, ONE_VOTER
from model.config import PINS, ConfigError, profile


def run(args: argparse.Namespace) -> int:
    if args.profile is not None:
        return show_pins(args.profile, args.json)
    if not args.run_readings:
        points = [
            {"choice": p.name, "question": p.question, "alternatives": alternatives_shown(p.name), "scope": p.scope, "why": p.why}
            for p in CHOICE_POINTS.values()
        ]
        if args.json:
            print(json.dumps(points))
        else:
            rows = [(p["choice"], p["question"], " | ".join(p["alternatives"]), p["scope"], p["why"]) for p in points]
            print(wrapped_table(rows, ("choice point", "what is left open", "alternatives (default first)", "resolved", "why"), [None, 36, 26, 9, 54]))
            print("\nAn adapter may be any alternative: `certify --adapter reference:FETCH-REQ-5=leadership-first` runs the reference so.")
        return 0
    for name, value in (("--combinations", args.combinations), ("--random", args.random)):
        if not 0 <= value <= 1000:
            raise ConfigError(f"{name} must be between 0 and 1000, got {value}")
    corpus = load_corpus(trace_files(Path(args.corpus) if args.corpus else DEFAULT_CORPUS, args.verify))
    adapters = precision_adapters(args.combinations, args.random, args.seed, pinned_points(corpus))
    live = sys.stderr.isatty() and not args.json

    def progress(done: int, total: int) -> None:
        print(f"\r{done}/{total} readings replayed", end="" if done < total else "\n", file=sys.stderr, flush=True)

    rows, precise = run_precision(corpus, adapters, progress if live else None)
    clean = all(row.verdicts[DEPARTS] == row.verdicts[ERROR] == 0 for row in rows)
    if args.json:
        print(json.dumps({"traces": len(corpus), "precise_traces": len(precise), "runs": [msgspec.to_builtins(r) for r in rows]}))
    else:
        table = [(r.adapter, *(r.verdicts[v] for v in VERDICTS), r.first_failure or "-") for r in rows]
        print(wrapped_table(table, ("reading", *VERDICTS, "first failure"), [60, None, None, None, None, 50]))
        print(f"\n{len(rows)} readings of the specification, {len(corpus)} traces: "
              + ("every reading conforms to every trace" if clean else "SOME READING DEPARTS: kraftcheck is imprecise there"))
    return 0 if clean else 1


def show_pins(name: str, as_json: bool) -> int:
    """Per choice point, what the profile pins (and the release's code that makes it so) or that it stays open."""
    profile(name)  # a ConfigError naming the known profiles
    pins = PINS.get(name, {})
    points = [
        {"choice": p.name, "pinned": pins[p.name].alternative if p.name in pins else None, "why": pins[p.name].why if p.name in pins else p.why}
        for p in CHOICE_POINTS.values()
    ]
    if as_json:
        print(json.dumps({"profile": name, "points": points}))
        return 0
    rows = [(p["choice"], p["pinned"] or "open: " + " | ".join(alternatives_shown(p["choice"])), p["why"]) for p in points]
    print(wrapped_table(rows, ("choice point", f"under {name}", "why (the code a pin follows; else where the specification leaves it open)"), [None, 40, 80]))
    print(f"\n{sum(p['pinned'] is not None for p in points)} pinned, {sum(p['pinned'] is None for p in points)} open: check explores every open alternative, certify accepts them")
    return 0


def alternatives_shown(name: str) -> list[str]:
    return [f"{a}:N" if a == ONE_VOTER else a for a in CHOICE_POINTS[name].alternatives]
