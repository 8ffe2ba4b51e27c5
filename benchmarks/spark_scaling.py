"""Benchmark: the Spark engine against the in-process one, on configurations (default `faults`,
2,699,561 states, and `tlc-kraft-if4`, 34 million).

Runs each search in-process (one core), sharded (two workers), on Spark local[1] and local[2], and on a standalone
cluster of two one-core workers started on loopback, each run in a process of its own pinned
to as many CPUs as it has cores (sched_setaffinity, inherited by Spark's JVMs and Python
workers): unpinned, local[1]'s JVM would work on the second core for free. Prints per run the distinct and generated
states, depth, wall seconds of the search (the session's start-up apart), distinct states/s
and per core, then the two figures the engine is held to: the local[2] / local[1] speed-up
(target 1.7 or more) and Spark's per-core throughput as a share of the in-process engine's
(target a half or more), and whether every run gave the same counts. Writes each table to
--out as spark-CONFIG.txt.

    .venv/bin/python benchmarks/spark_scaling.py [--config NAME ...] [--runs in-process,sharded,local[1],local[2],cluster] [--out DIR]
"""

import argparse
import functools
import multiprocessing
import os
import sys
import traceback
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from conformance.explore.check import system_for
from conformance.explore.configs import resolve
from conformance.explore.engine import Result, explore
from conformance.explore.sharded import explore_sharded
from conformance.explore.spark_engine import explore_spark
from conformance.spark.session import SparkOptions, spark_session
from conformance.spark.standalone import StandaloneCluster
from model.config import ConfigError

RUNS = ("in-process", "sharded", "local[1]", "local[2]", "cluster")
CONFIGS = ("faults", "tlc-kraft-if4")
CLUSTER_WORKERS = 2


def on_spark(name: str, master: str, partitions: int | None) -> tuple[Result, float, int]:
    """A search on Spark: its result, the session's start-up seconds, the cores it had."""
    config = resolve(name, {})
    started = time.perf_counter()
    with spark_session(SparkOptions(master, partitions)) as run:
        startup = time.perf_counter() - started
        cores = run.session.sparkContext.defaultParallelism
        result = explore_spark(run.session, functools.partial(system_for, config), run.work, partitions=run.partitions)
    return result, startup, cores


def measure(name: str, run: str, partitions: int | None) -> tuple[Result, float, int]:
    """A run in a child process pinned to its cores' worth of CPUs."""
    print(f"running {name}: {run} ...", file=sys.stderr, flush=True)
    cpus = sorted(os.sched_getaffinity(0))[: 1 if run in ("in-process", "local[1]") else 2]
    reader, writer = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_pinned, args=(writer, cpus, name, run, partitions))
    child.start()
    writer.close()
    try:
        outcome = reader.recv()
    except EOFError:
        child.join()
        raise SystemExit(f"the {run} run died (exit code {child.exitcode})") from None
    child.join()
    if isinstance(outcome, str):
        raise SystemExit(f"the {run} run failed:\n{outcome}")
    return outcome


def _pinned(writer, cpus: list[int], name: str, run: str, partitions: int | None) -> None:
    os.sched_setaffinity(0, cpus)
    try:
        writer.send(_run(name, run, partitions))
    except BaseException:  # noqa: BLE001 - reported by the parent
        writer.send(traceback.format_exc())


def _run(name: str, run: str, partitions: int | None) -> tuple[Result, float, int]:
    if run == "in-process":
        return explore(system_for(resolve(name, {}))), 0.0, 1
    if run == "sharded":
        return explore_sharded(functools.partial(system_for, resolve(name, {})), 2), 0.0, 2
    if run == "cluster":
        with tempfile.TemporaryDirectory(prefix="kraftcheck-cluster-") as directory, StandaloneCluster(Path(directory), workers=CLUSTER_WORKERS, cores=1) as cluster:
            return on_spark(name, cluster.url, partitions)
    return on_spark(name, run, partitions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", action="append", help=f"a configuration to measure (repeatable; default {', '.join(CONFIGS)})")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"which runs, comma-separated, of {', '.join(RUNS)} (default all)")
    parser.add_argument("--partitions", type=int, help="Spark partitions (default: the engine's, see check --spark-partitions)")
    parser.add_argument("--out", default="out/benchmarks", help="directory for the table (default out/benchmarks)")
    args = parser.parse_args()
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = sorted(set(runs) - set(RUNS))
    if unknown:
        parser.error(f"unknown runs {', '.join(unknown)}; choose among {', '.join(RUNS)}")
    configs = args.config or CONFIGS
    for config in configs:
        try:
            resolve(config, {})
        except ConfigError as error:
            parser.error(str(error))
    same = True
    for config in configs:
        text = measured(config, runs, args.partitions)
        same = same and "identical counts across runs: yes" in text
        print(text, end="", flush=True)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"spark-{config}.txt").write_text(text)
        print(f"table: {out / f'spark-{config}.txt'}", file=sys.stderr)
    return 0 if same else 1


def measured(config: str, runs: list[str], partitions: int | None) -> str:
    """One configuration's table and the figures the engine is held to."""
    rows, counts, rate = [], set(), {}
    for run in runs:
        result, startup, cores = measure(config, run, partitions)
        counts.add((result.distinct, result.generated, result.depth))
        rate[run] = result.distinct / result.seconds
        label = f"standalone, {CLUSTER_WORKERS} workers x 1 core" if run == "cluster" else (run if run in ("in-process", "sharded") else "Spark " + run)
        rows.append(
            (label, cores, f"{result.distinct:,}", f"{result.generated:,}", result.depth, f"{startup:.1f}", f"{result.seconds:.1f}", f"{rate[run]:,.0f}", f"{rate[run] / cores:,.0f}")
        )
    table = tabulate(rows, headers=("run", "cores", "distinct", "generated", "depth", "start-up s", "search s", "distinct/s", "distinct/s/core"), tablefmt="simple")
    lines = [f"{config}:", table, f"identical counts across runs: {'yes' if len(counts) == 1 else 'NO: ' + repr(counts)}"]
    if {"local[1]", "local[2]"} <= rate.keys():
        lines.append(f"local[2] / local[1] speed-up: {rate['local[2]'] / rate['local[1]']:.2f} (target 1.7 or more)")
    if {"in-process", "local[1]"} <= rate.keys():
        lines.append(f"Spark per core / in-process: {rate['local[1]'] / rate['in-process']:.2f} (target 0.5 or more)")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
