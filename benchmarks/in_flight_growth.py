"""Benchmark: how a configuration's state space grows with the bound on messages in flight,
and what exploring it costs with 1 and 2 workers, in memory and kept on disk.

The public KRaft TLA+ specification bounds no such thing; bound 0 runs without one (as the
`tlc-kraft` configuration does), and a bounded run is like for like only where the bound no
longer binds: the same counts at N and N + 2, both exhausted. For each bound and each run (`--runs`: a worker count, with `:disk` for
`check --state-dir`, the disk-backed mode) this runs `kraftcheck check --json` in a child
process and prints: exhausted or not, distinct states, depth, wall seconds, distinct states
per second per core, the peak memory of the whole process tree (its proportional set size,
sampled: pages the workers share are counted once) and that peak per distinct state, and for
disk runs the size of the state directory at the end; then the
smallest bound from which the counts stop growing, if the runs show one.

    .venv/bin/python benchmarks/in_flight_growth.py [--config NAME] [--bounds 4 5 6 0]
        [--runs 1 2 2:disk] [--max-states N] [-- extra check options, e.g. --no-loss]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_SECONDS = 0.5  # reading a process's page counts takes milliseconds on gigabytes: sampled


def tree_pss(root: int) -> int:
    """Proportional set size of a process and all its descendants, read from /proc: pages several
    of them map (the workers' shared fingerprint table) are counted once, not once per process."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            total += int(next(line for line in rollup.splitlines() if line.startswith("Pss:")).split()[1]) * 1024
        except (OSError, StopIteration):
            pass
        pending += children.get(pid, [])
    return total


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measured_check(arguments: list[str], on_disk: bool) -> tuple[dict, int, int | None]:
    """A `check --json` run's summary, the peak memory of its process tree, and (on disk) the
    bytes its state directory holds at the end."""
    with tempfile.TemporaryDirectory() as out:
        kept = Path(out) / "search"
        if on_disk:
            arguments = [*arguments, "--state-dir", str(kept)]
        command = [sys.executable, "-m", "conformance.cli", "check", *arguments, "--json", "--out", out]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        peak = [0]

        def sample() -> None:
            while process.poll() is None:
                peak[0] = max(peak[0], tree_pss(process.pid))
                time.sleep(SAMPLE_SECONDS)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            out_text, err_text = process.communicate()
        finally:
            process.kill()
        sampler.join()
        if process.returncode not in (0, 1):
            raise SystemExit(f"in_flight_growth: check {' '.join(arguments)} failed (exit {process.returncode}):\n{err_text[-2000:]}")
        return json.loads(out_text), peak[0], directory_bytes(kept) if on_disk else None


def run_spec(text: str) -> tuple[int, bool]:
    """`N` or `N:disk`: the worker count, and whether the search is kept on disk."""
    workers, _, mode = text.partition(":")
    if not workers.isdigit() or int(workers) < 1 or mode not in ("", "disk"):
        raise argparse.ArgumentTypeError(f"a run is a worker count, optionally with :disk (e.g. 2 or 2:disk), got {text!r}")
    return int(workers), mode == "disk"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="tlc-kraft-if4", help="the named configuration whose in-flight bound varies (default tlc-kraft-if4)")
    parser.add_argument("--bounds", type=int, nargs="+", default=[4, 5, 6], help="the bounds on messages in flight to run, 0 for none (default 4 5 6)")
    parser.add_argument("--runs", type=run_spec, nargs="+", default=[(1, False), (2, False), (2, True)], help="runs per bound: a worker count, with :disk for the disk-backed mode (default 1 2 2:disk)")
    parser.add_argument("--max-states", type=int, help="stop a run at this many distinct states (it is then not exhausted)")
    parser.add_argument("extra", nargs="*", help="more `check` options after --, such as --no-loss or --profile NAME")
    args = parser.parse_args()
    rows, exhausted = [], {}
    for bound in args.bounds:
        for workers, on_disk in args.runs:
            arguments = ["--config", args.config, "--max-in-flight", str(bound), "--workers", str(workers), *args.extra]
            if args.max_states:
                arguments += ["--max-states", str(args.max_states)]
            print(f"running check {' '.join(arguments)}{' (on disk)' if on_disk else ''} ...", file=sys.stderr, flush=True)
            summary, peak, disk = measured_check(arguments, on_disk)
            if summary["complete"]:
                exhausted.setdefault(bound, set()).add(summary["distinct_states"])
            rows.append(
                (
                    bound or "none",
                    workers,
                    "disk" if on_disk else "memory",
                    "yes" if summary["complete"] else "NO",
                    f"{summary['distinct_states']:,}",
                    summary["depth"],
                    f"{summary['wall_s']:.1f}",
                    f"{summary['distinct_per_s_per_core']:,}",
                    f"{peak / 2**20:,.0f}",
                    f"{peak / max(summary['distinct_states'], 1):,.0f}",
                    "-" if disk is None else f"{disk / 2**20:,.0f}",
                )
            )
            print(rows[-1], file=sys.stderr, flush=True)
    headers = ("in flight", "workers", "kept in", "exhausted", "distinct", "depth", "wall s", "distinct/s/core", "peak MiB", "bytes/state", "disk MiB")
    aligned = ("right", "right", "left", "left", *["right"] * 7)
    print(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True, colalign=aligned))  # as formatted: 40.0 s stays 40.0
    if any(len(counts) > 1 for counts in exhausted.values()):
        print(f"runs of one bound disagree: {exhausted}")
        return 1
    exhausted = {bound: counts.pop() for bound, counts in exhausted.items()}
    settled = [n for n in sorted(exhausted) if n and exhausted.get(n + 2) == exhausted[n]]
    print(f"counts equal at N and N + 2 (the bound no longer binds) from: {settled[0] if settled else 'not shown by these runs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
