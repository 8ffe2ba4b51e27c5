"""Benchmark: exhaustive model checking of `tlc-kraft-if4` with 1 and with all workers.

Prints, for each run: whether the state space was exhausted, distinct and generated states,
depth, wall seconds, and distinct states per second per core; then whether every run
reported the same counts. (How `tlc-kraft-if4`'s bounds relate to the public KRaft TLA+
specification's, and how kraftcheck compares with TLC on matched bounds:
docs/measurements/tlc-comparison.md; benchmarks/in_flight_growth.py shows how the in-flight
bound binds: docs/measurements/model-checking.md.)

Writes the same table and a plot of the exploration's throughput (distinct states over time,
one line per engine and worker count) under --out: check-CONFIG.txt and
check-CONFIG-throughput.png (.svg with --plot-format svg). `--config faults` makes a quicker
plot (about a minute and a half on a 2-core machine) than the flagship's four minutes.

    .venv/bin/python benchmarks/check_tlc_kraft.py [--config NAME] [--repeat N] [--out DIR]
"""

import argparse
import functools
import os
import sys
from pathlib import Path

from matplotlib import rc_context
from matplotlib.figure import Figure  # drawn straight to a file: no display, no pyplot state
from matplotlib.ticker import StrMethodFormatter
from tabulate import tabulate

from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import Progress, Result, explore
from conformance.explore.sharded import explore_sharded

SAMPLE_EVERY = 0.25  # seconds between the in-process engine's progress samples (the sharded one reports per level)


def measure(name: str, workers: int) -> tuple[Result, list[tuple[float, int]]]:
    """A run, and its (seconds, distinct states) samples from the start to the end. Under the
    model's default reading (no choice points branched), as the TLA+ specification it is compared
    with has none and as the figures of docs/measurements/ were measured."""
    config = resolve(name, {"every_choice": False})
    samples = [(0.0, 0)]

    def sample(p: Progress) -> None:
        samples.append((p.seconds, p.distinct))

    if workers == 1:
        result = explore(system_for(config), progress=sample, progress_every=SAMPLE_EVERY)
    else:
        result = explore_sharded(functools.partial(system_for, config), workers, progress=sample)
    return result, samples + [(result.seconds, result.distinct)]


def engine_name(workers: int) -> str:
    return "in-process, 1 worker" if workers == 1 else f"sharded, {workers} workers"


def plot(series: dict[str, list[tuple[float, int]]], title: str, path: Path) -> None:
    """Distinct states over wall seconds, one line per run."""
    figure = Figure(figsize=(9, 5), dpi=110)
    axes = figure.subplots()
    for label, samples in series.items():
        axes.plot([s for s, _ in samples], [d for _, d in samples], marker=".", markersize=3, linewidth=1.6, label=label)
    axes.set_title(title)
    axes.set_xlabel("wall seconds")
    axes.set_ylabel("distinct states")
    axes.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    axes.grid(True, alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with rc_context({"svg.fonttype": "none"}):  # an SVG keeps its words as text
        figure.savefig(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tlc-kraft-if4")
    parser.add_argument("--repeat", type=int, default=1, help="runs per worker count (default 1)")
    parser.add_argument("--out", default="out/benchmarks", help="directory for the table and the plot (default out/benchmarks)")
    parser.add_argument("--plot-format", choices=("png", "svg"), default="png", help="the plot's format (default png)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    rows, counts, series = [], set(), {}
    for workers in sorted({1, cores}):
        for run in range(args.repeat):
            print(f"running {args.config} with {workers} worker(s), run {run + 1} ...", file=sys.stderr, flush=True)
            r, samples = measure(args.config, workers)
            counts.add((r.distinct, r.generated, r.depth))
            series[engine_name(workers) + (f", run {run + 1}" if args.repeat > 1 else "")] = samples
            rows.append(
                (workers, run + 1, "yes" if r.complete else "NO", f"{r.distinct:,}", f"{r.generated:,}", r.depth, f"{r.seconds:.1f}", f"{r.distinct / r.seconds / workers:,.0f}")
            )
    table = tabulate(rows, headers=("workers", "run", "exhausted", "distinct", "generated", "depth", "wall s", "distinct/s/core"), tablefmt="simple")
    agreement = f"identical counts across runs: {'yes' if len(counts) == 1 else 'NO: ' + repr(counts)}"
    print(table)
    print(agreement)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"check-{args.config}.txt").write_text(f"{table}\n{agreement}\n")
    figure = out / f"check-{args.config}-throughput.{args.plot_format}"
    plot(series, f"check --config {args.config}: distinct states over time ({cores} cores)", figure)
    print(f"table: {out / f'check-{args.config}.txt'}\nplot: {figure}", file=sys.stderr)
    return 0 if len(counts) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
