"""Benchmark: `check --liveness` against the safety-only search on the same bounds.

For each configuration and profile, and for each seeded liveness bug on its configuration: the
safety-only search as `check` runs it (symmetry as the configuration has it) with 1 and with 2
workers, the same search without symmetry with 2 workers (the states the liveness graph holds),
and `check --liveness` with 1 and with 2 workers (the same engines, each state's steps recorded
as it is expanded, then judged); the ratio of the liveness check's wall time to the safety-only
search's with as many workers, and to the search of the same states; and each liveness
property's verdict. Writes the table to --out as liveness.txt, the same as Markdown as
liveness.md, and each lasso found as lasso-CONFIG-PROFILE-RULE.jsonl and .svg.

    .venv/bin/python benchmarks/liveness.py [--config NAME ...] [--profile NAME ...] [--no-mutants] [--out DIR]
"""

import argparse
import functools
import sys
from pathlib import Path

from tabulate import tabulate

from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import explore
from conformance.explore.kraft_liveness import KraftLiveness
from conformance.explore.liveness_search import check_liveness
from conformance.explore.liveness_summary import lasso_steps, liveness_verdict, save_lasso, summary
from conformance.explore.sharded import explore_sharded

CONFIGS = ("smoke", "live-partition", "live-zombie")
PROFILES = ("kip595", "kafka-3.7", "kafka-3.8", "kafka-3.9", "kafka-4.0", "kafka-4.3")
# The seeded liveness bugs (tests/test_liveness_mutants.py), each on the configuration that shows it.
MUTANTS = (
    ("smoke", "faulty-candidate-never-backs-off"),
    ("smoke", "faulty-prospective-never-gives-up"),
    ("live-zombie", "faulty-leader-never-resigns"),
)


def measured(name: str, profile: str, out: Path) -> tuple:
    """One row: the safety searches, the liveness check, their ratios and its verdicts; each
    lasso saved to `out`."""
    config = resolve(name, {"profile": profile})
    one = explore(system_for(config))
    two = explore_sharded(functools.partial(system_for, config), 2)
    unreduced = explore_sharded(functools.partial(system_for, resolve(name, {"profile": profile, "symmetry": False})), 2)
    system = KraftLiveness(config)
    live_one = check_liveness(system)
    live = check_liveness(KraftLiveness(config), workers=2)
    agree = live.distinct == live_one.distinct == unreduced.distinct and one.distinct == two.distinct
    data = summary(name, config, system, live_one, system.fair_timers)
    for verdict in live_one.verdicts:
        if verdict.lasso is not None:
            save_lasso(out, f"{name}-{profile}", data, system, verdict, lasso_steps(system, verdict.lasso))
    verdicts = "; ".join(f"{v.rule} {liveness_verdict(v, live.complete)}" for v in live.verdicts)
    return (
        name,
        profile,
        f"{one.distinct:,}",
        f"{one.seconds:.1f}",
        f"{two.seconds:.1f}",
        f"{unreduced.distinct:,}",
        f"{unreduced.seconds:.1f}",
        f"{live_one.seconds:.1f}",
        f"{live.seconds:.1f}",
        f"{live_one.seconds / one.seconds:.1f}",
        f"{live.seconds / two.seconds:.1f}",
        f"{live.seconds / unreduced.seconds:.1f}",
        "yes" if agree else "NO",
        verdicts,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", action="append", help=f"a configuration (repeatable; default {', '.join(CONFIGS)})")
    parser.add_argument("--profile", action="append", help=f"a profile (repeatable; default {', '.join(PROFILES)})")
    parser.add_argument("--no-mutants", action="store_true", help="leave out the seeded liveness bugs")
    parser.add_argument("--out", default="out/benchmarks", help="directory for the tables and lassos (default out/benchmarks)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = [(name, profile) for name in args.config or CONFIGS for profile in args.profile or PROFILES]
    runs += [] if args.no_mutants else [run for run in MUTANTS if run not in runs]
    rows = []
    for name, profile in runs:
        print(f"running {name} under {profile} ...", file=sys.stderr, flush=True)
        rows.append(measured(name, profile, out))
    headers = (
        "config",
        "profile",
        "safety states",
        "safety s, 1 worker",
        "2 workers",
        "states without symmetry",
        "their search s, 2 workers",
        "liveness s, 1 worker",
        "2 workers",
        "ratio, 1 worker",
        "2 workers",
        "to the same states, 2 workers",
        "counts agree",
        "verdicts",
    )
    table = tabulate(rows, headers=headers, tablefmt="simple")
    print(table)
    (out / "liveness.txt").write_text(table + "\n")
    (out / "liveness.md").write_text(tabulate(rows, headers=headers, tablefmt="github") + "\n")
    print(f"table: {out / 'liveness.txt'}", file=sys.stderr)
    return 0 if all(row[12] == "yes" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
