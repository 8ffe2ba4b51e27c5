"""`kraftcheck mutants`: list the seeded-bug adapters, or score the corpus against all of them."""

import argparse
import json
from pathlib import Path

import msgspec
from tabulate import tabulate

from adapters.mutants import MUTANTS
from conformance.certify.certification import job_count
from conformance.certify.mutation import MIN_CATCHING_TRACES, mutation_scores
from conformance.corpus.generate import DEFAULT_CORPUS


def run(args: argparse.Namespace) -> int:
    if args.score:
        corpus = Path(args.corpus) if args.corpus else DEFAULT_CORPUS
        every = mutation_scores(corpus, verify=args.verify, workers=job_count(args.jobs))
        scores = [s for s in every if s.name in MUTANTS and not s.unobservable]  # an ISR mutant cannot touch a KRaft-only corpus
        readings = [s for s in every if s.name not in MUTANTS]
        caught = sum(s.failed > 0 for s in scores)
        well_caught = sum(s.failed >= MIN_CATCHING_TRACES for s in scores)
        observable = [s for s in readings if not s.unobservable]
        readings_caught = sum(s.failed >= MIN_CATCHING_TRACES for s in observable)
        if args.json:
            print(json.dumps({"mutants": len(scores), "caught": caught, "caught_by_3_or_more": well_caught, "scores": [msgspec.to_builtins(s) for s in every]}))
        else:
            rows = [(s.name, "n/a" if s.unobservable else ("yes" if s.failed else "NO"), s.failed, s.rule, s.first) for s in every]
            print(tabulate(rows, headers=("mutant or profile reading", "caught", "traces failed", "rule it breaks", "first caught at"), tablefmt="simple"))
            share = f" ({100 * caught / len(scores):.0f}%)" if scores else " (the corpus has no readable trace)"
            print(f"\nmutation score: {caught}/{len(scores)}{share}; caught by at least {MIN_CATCHING_TRACES} traces: {well_caught}/{len(scores)}")
            if len(scores) < len(MUTANTS):
                print(f"(n/a: {len(MUTANTS) - len(scores)} mutants change a system the corpus has no readable trace of)")
            if readings:
                print(
                    f"the profile's other readings (an option flipped, a pinned point's other alternative) caught by at least {MIN_CATCHING_TRACES} traces: "
                    f"{readings_caught}/{len(observable)}; no trace can fail {len(readings) - len(observable)} (n/a: conformance.certify.mutation.UNOBSERVABLE says why)"
                )
            print("(a trace counts only if every allowed reading of the specification conforms to it: `kraftcheck choices --run`)")
        return 0 if scores and caught == len(scores) else 1
    if args.json:
        print(json.dumps([{"name": m.name, "description": m.description} for m in MUTANTS.values()]))
    else:
        print(tabulate([(m.name, m.description) for m in MUTANTS.values()], headers=("mutant", "the seeded bug"), tablefmt="simple"))
    return 0
