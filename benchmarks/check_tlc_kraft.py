"""Benchmark: exhaustive model checking of `tlc-kraft` with 1 and with all workers.

Prints, for each run: whether the state space was exhausted, distinct and generated states,
depth, wall seconds, and distinct states per second per core; then whether every run
reported the same counts. Reference (TLC on the public KRaft TLA+ specification, same bounds,
a 2-core machine of this kind): 1.3k-2.9k distinct states/s per core, unfinished after 9 min.

    .venv/bin/python benchmarks/check_tlc_kraft.py [--config NAME] [--repeat N]
"""

import argparse
import functools
import os
import sys

from tabulate import tabulate

from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import explore
from conformance.explore.sharded import explore_sharded


def measure(name: str, workers: int):
    config = resolve(name, {})
    if workers == 1:
        return explore(system_for(config))
    return explore_sharded(functools.partial(system_for, config), workers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tlc-kraft")
    parser.add_argument("--repeat", type=int, default=1, help="runs per worker count (default 1)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    rows, counts = [], set()
    for workers in sorted({1, cores}):
        for run in range(args.repeat):
            print(f"running {args.config} with {workers} worker(s), run {run + 1} ...", file=sys.stderr, flush=True)
            r = measure(args.config, workers)
            counts.add((r.distinct, r.generated, r.depth))
            rows.append(
                (workers, run + 1, "yes" if r.complete else "NO", f"{r.distinct:,}", f"{r.generated:,}", r.depth, f"{r.seconds:.1f}", f"{r.distinct / r.seconds / workers:,.0f}")
            )
    print(tabulate(rows, headers=("workers", "run", "exhausted", "distinct", "generated", "depth", "wall s", "distinct/s/core"), tablefmt="simple"))
    print(f"identical counts across runs: {'yes' if len(counts) == 1 else 'NO: ' + repr(counts)}")
    return 0 if len(counts) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
