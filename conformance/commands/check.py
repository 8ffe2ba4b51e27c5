"""`kraftcheck check`: explore a configuration exhaustively, print the verdicts, save counterexamples."""

import argparse
import contextlib
import json
import sys
from pathlib import Path

from conformance.corpus.counterexamples import save_replica_traces
from conformance.explore.check import VACUOUS, begin_saved_search, check, kept_search, saved_search, counterexample_steps, counterexample_table, save_counterexample, save_counterexample_diagram, summary, summary_table
from conformance.explore.configs import CheckConfig, IsrCheckConfig, check_bound, resolve, worker_count
from conformance.explore.engine import Progress, SearchInterrupted
from conformance.explore.isr_system import IsrSystem, steps_table
from conformance.explore import liveness_summary
from conformance.explore.kept import ResumeError
from conformance.explore.kraft_liveness import KraftLiveness
from conformance.explore.liveness_search import check_liveness
from conformance.explore.sharded import WorkerFailed
from conformance.outputs import check_directory
from conformance.spark.session import spark_options
from model import liveness
from model.events import TimerKind
from model.config import ConfigError

# Each worker is a process holding its shard of the states; beyond the cores more only cost memory.


def configuration(args: argparse.Namespace) -> tuple[str, CheckConfig | IsrCheckConfig]:
    """The configuration the options name, and what to call it: no option at all runs smoke;
    options without --config override the built-in defaults (see --help)."""
    overrides = {
        "voters": args.voters,
        "observers": args.observers,
        "profile": args.profile,
        "client_values": args.client_values,
        "max_epoch": args.max_epoch,
        "max_in_flight": args.max_in_flight,
        "max_elections": args.max_elections,
        "fetch_max_records": args.fetch_max_records,
        "max_crashes": args.crashes,
        "max_cuts": args.cuts,
        "loss": args.loss,
        "duplication": args.duplication,
        "resign": args.resign,
        "retries": args.retries,
        "symmetry": args.symmetry,
        "every_choice": args.every_choice,
        "replicas": args.replicas,
        "min_isr": args.min_isr,
        "truncation": args.truncation,
        "unflushed_loss": args.unflushed_loss,
    }
    name = args.config or ("custom" if any(v is not None for v in overrides.values()) else "smoke")
    return name, resolve(None if name == "custom" else name, overrides)


def unchanged(args: argparse.Namespace) -> None:
    """--resume: options that would change the kept search are refused rather than ignored."""
    given = [f"--{option.replace('_', '-')}" for option in CONFIGURATION_OPTIONS if getattr(args, option) is not None]
    given += ["--keep-going"] * args.keep_going + ["--state-dir"] * (args.state_dir is not None) + ["--engine spark"] * (args.engine == "spark")
    if given:
        raise ConfigError(f"--resume continues a search as it began: {', '.join(given)} cannot be given with it")


def resumed(args: argparse.Namespace) -> tuple[str, CheckConfig | IsrCheckConfig, int]:
    """--resume: the kept search's name, configuration and workers (its directory held: see kept_search)."""
    saved, config = saved_search(Path(args.resume))
    args.keep_going = saved.keep_going
    return saved.name, config, saved.workers


# The options that fix what a search explores (with --resume, the kept search's own are used).
CONFIGURATION_OPTIONS = (
    "config", "voters", "observers", "profile", "client_values", "max_epoch", "max_in_flight", "max_elections", "fetch_max_records",
    "crashes", "cuts", "loss", "duplication", "resign", "retries", "symmetry", "every_choice", "replicas", "min_isr", "truncation", "unflushed_loss", "workers",
)


def fair_timers(text: str) -> frozenset[TimerKind]:
    """--fair-timers: comma-separated timer kinds, or `none`."""
    if text.strip() == "none":
        return frozenset()
    names = [name.strip() for name in text.split(",")]
    known = {kind.value for kind in TimerKind}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown timer {', '.join(repr(name) for name in unknown)}; the timers are {', '.join(sorted(known))}, or none")
    return frozenset(TimerKind(name) for name in names)


def show_progress(p: Progress) -> None:
    """A search's progress on one terminal line, rewritten as it goes."""
    rate = p.distinct / p.seconds if p.seconds else 0
    print(f"\r  distinct {p.distinct:,}  {rate:,.0f} states/s  depth {p.depth}  queue {p.queue:,}  {p.seconds:.0f}s", end="", file=sys.stderr, flush=True)


def liveness_checked(args: argparse.Namespace, name: str, config: CheckConfig | IsrCheckConfig, out: Path) -> int:
    """--liveness: the fair-cycle search (conformance.explore.liveness_search) on the unreduced
    graph, with the safety search's engine on --workers processes, in memory or in --state-dir;
    every safety property is checked on the same states."""
    refused = [option for option, given in (("--resume", args.resume), ("--engine spark", args.engine == "spark"), ("--keep-going", args.keep_going)) if given]
    if refused:
        raise ConfigError(f"--liveness searches the whole graph, in-process or sharded, and judges it once: {', '.join(refused)} cannot be given with it")
    if isinstance(config, IsrCheckConfig):
        raise ConfigError("--liveness checks KRaft configurations; the ISR system states no liveness property")
    timers = liveness.FAIR_TIMERS if args.fair_timers is None else args.fair_timers
    workers = worker_count(args.workers)
    live = KraftLiveness(config, timers)
    tty = sys.stderr.isatty() and not args.json

    kept = Path(args.state_dir) if args.state_dir is not None else None
    ended = ("\n" if tty else "") + "kraftcheck: {}"
    try:
        with kept_search(kept, new=True) if kept else contextlib.nullcontext():
            result = check_liveness(live, workers=workers, max_states=args.max_states, max_seconds=args.max_seconds, progress=show_progress if tty else None, state_dir=kept)
    except SearchInterrupted:
        print(ended.format("interrupted; a liveness check judges the whole graph, so nothing is reported"), file=sys.stderr)
        return 130
    except (OSError, WorkerFailed) as error:
        print(ended.format(f"the search cannot go on: {error}"), file=sys.stderr)
        return 2
    except ResumeError as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 2
    if tty:
        print(file=sys.stderr)
    data = liveness_summary.summary(name, config, live, result, timers)
    if not args.json:
        print(liveness_summary.summary_table(data))
    unsaved = saved_counterexamples(args, out, name, data, live, result.counterexamples)
    data["lasso_files"], data["lasso_diagrams"] = [], []
    try:
        for verdict in result.verdicts:
            if verdict.lasso is None:
                continue
            steps = liveness_summary.lasso_steps(live, verdict.lasso)
            jsonl, diagram = liveness_summary.save_lasso(out, name, data, live, verdict, steps)
            data["lasso_files"].append(str(jsonl))
            data["lasso_diagrams"].append(str(diagram))
            if not args.json:
                print(f"\n{liveness_summary.how_it_repeats(verdict)}")
                print(counterexample_table(steps) if steps else "(from the initial state)")
                print(f"saved: {jsonl}\ndiagram: {diagram}")
    except OSError as error:
        unsaved = unsaved or f"kraftcheck: cannot save a lasso under {out}: {error.strerror or error}"
    if args.json:
        print(json.dumps(data))
    if unsaved:
        print(unsaved, file=sys.stderr)
        return 2
    return 1 if result.counterexamples or any(v.lasso for v in result.verdicts) else 0


def run(args: argparse.Namespace) -> int:
    """The options checked before any file is touched; a search kept on disk (--state-dir,
    --resume) holds its directory for the whole run. A kept search that does not verify, or a
    worker that dies, ends the run with one line and exit 2: never a verdict."""
    if args.resume is not None:
        unchanged(args)
        name = config = workers = None  # the kept search's, read once its directory is held
    else:
        name, config = configuration(args)
        workers = worker_count(args.workers)
    if args.state_dir is not None and args.engine == "spark":
        raise ConfigError("--state-dir keeps an in-process search on disk; a Spark search keeps its levels under --spark-dir")
    if args.max_states is not None:
        check_bound("--max-states", args.max_states, 1)
    if args.max_seconds is not None and not 0 < args.max_seconds < float("inf"):
        raise ConfigError(f"--max-seconds must be a positive number of seconds, got {args.max_seconds}")
    out = Path(args.out)
    check_directory(out, lambda name: True, "counterexamples")  # before the search, not after it
    if args.liveness:
        return liveness_checked(args, name, config, out)
    if args.fair_timers is not None:
        raise ConfigError("--fair-timers says which timers the fair runs of --liveness let expire: give it with --liveness")
    spark = spark_options(args)
    kept = args.state_dir or args.resume
    try:
        with kept_search(Path(kept), new=args.resume is None) if kept else contextlib.nullcontext():
            if args.resume is not None:
                name, config, workers = resumed(args)
            elif args.state_dir is not None:
                begin_saved_search(Path(args.state_dir), name, config, workers, args.keep_going)
            return searched(args, name, config, workers, spark, out)
    except ResumeError as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 2


def saved_counterexamples(args: argparse.Namespace, out: Path, name: str, data: dict, system, counterexamples: list) -> str | None:
    """Each safety counterexample shown (unless --json) and saved, its files listed in `data`;
    the error that stopped the saving, if one did."""
    isr = isinstance(system, IsrSystem)
    files, diagrams, replica_files = [], [], []
    data["counterexample_files"], data["counterexample_diagrams"] = files, diagrams
    if isr:
        data["counterexample_traces"] = replica_files
    try:
        for counterexample in counterexamples:
            steps = counterexample_steps(system, counterexample.path)
            if not args.json:
                print(f"\n{counterexample.violation.rule} violated after {len(counterexample.path) - 1} steps: {counterexample.violation.detail}")
                print(steps_table(steps) if isr else counterexample_table(steps))
            files.append(str(save_counterexample(out, name, data, counterexample.violation, steps)))
            diagrams.append(str(save_counterexample_diagram(out, name, counterexample.violation, system, counterexample.path)))
            replica_traces = save_replica_traces(out, name, counterexample.violation, system, counterexample.path) if isr else []
            replica_files += [str(trace) for trace in replica_traces]
            if not args.json:
                print(f"saved: {files[-1]}")
                print(f"diagram: {diagrams[-1]}")
                if replica_traces:
                    print(f"as conformance traces, one per replica: {replica_traces[0].parent}/ ({len(replica_traces)} files)")
    except OSError as error:
        return f"kraftcheck: cannot save a counterexample under {out}: {error.strerror or error}"
    return None


def searched(args: argparse.Namespace, name: str, config: CheckConfig | IsrCheckConfig, workers: int, spark, out: Path) -> int:
    """The search run, its summary and counterexamples shown and saved: the exit code."""
    live = sys.stderr.isatty() and not args.json

    def level_done(p: Progress) -> None:
        """On Spark, a line per level: a level takes seconds, and a log of them tells where time went."""
        print(f"  level {p.depth}: {p.distinct:,} states, frontier {p.queue:,}, {p.generated:,} generated, {p.seconds:.1f}s", file=sys.stderr, flush=True)

    shown = level_done if spark else (show_progress if live else None)
    kept = args.state_dir or args.resume
    ended = ("\n" if live else "") + "kraftcheck: {}" + (f"; the search kept in {kept} continues from its last completed level with: kraftcheck check --resume {kept}" if kept else "")
    try:
        system, result, workers = check(
            config,
            keep_going=args.keep_going,
            max_states=args.max_states,
            max_seconds=args.max_seconds,
            workers=workers,
            progress=shown,
            spark=spark,
            state_dir=Path(kept) if kept else None,
            resume=args.resume is not None,
        )
    except OSError as error:  # the search's own files: a full disk, a directory taken away
        print(ended.format(f"the search cannot keep its files: {error}"), file=sys.stderr)
        return 2
    except WorkerFailed as error:  # killed (kill -9, the OOM killer), or a bug: no verdict
        print(ended.format(error), file=sys.stderr)
        return 2
    if live and not spark:
        print(file=sys.stderr)
    data = summary(name, config, system, result, workers=workers, engine=args.engine)
    if not args.json:
        print(summary_table(data))  # first: whatever happens to the files, the verdicts are shown
    unsaved = saved_counterexamples(args, out, name, data, system, result.counterexamples)
    if args.json:
        print(json.dumps(data))
    if unsaved:
        print(unsaved, file=sys.stderr)
        return 2
    if result.interrupted:
        print("kraftcheck: interrupted; the summary covers the states explored so far", file=sys.stderr)
        if kept:
            print(f"kraftcheck: to continue from the last completed level: kraftcheck check --resume {kept}", file=sys.stderr)
        return 130
    if data["vacuous"]:
        print(f"kraftcheck: vacuous check: {VACUOUS} within these bounds, so no property was tested; widen the bounds", file=sys.stderr)
        return 2
    return 1 if result.counterexamples else 0
