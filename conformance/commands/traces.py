"""`kraftcheck traces generate | schema | show`: make the corpus, print the format's schema, read a trace."""

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tabulate import tabulate

from conformance.corpus.generate import CORPUS_CONFIGS, GenerateOptions, check_corpus_directory, generate, write_corpus
from conformance.diagrams.traces import trace_svg
from conformance.explore.configs import CheckConfig, resolve, worker_count
from conformance.outputs import OutputError
from conformance.scenario.counterexamples import counterexample_scenario, is_counterexample
from conformance.scenario.describe import trace_views
from conformance.scenario.printer import cluster_scenario_text, scenario_text
from conformance.spark.session import spark_options, spark_session
from conformance.text import wrapped_table
from model.config import ConfigError
from spec import trace as traces


def generate_corpus(args: argparse.Namespace) -> int:
    names = args.config or list(CORPUS_CONFIGS)
    if args.profile:  # a profile's corpus: its KRaft searches under that profile (ISR replicas have none)
        named = [(name, resolve(name, {})) for name in names]
        names = [name for name, config in named if isinstance(config, CheckConfig)]
        if not names:
            raise ConfigError(f"--profile {args.profile}: none of the configurations is a KRaft one")
    configs = [(name, resolve(name, {"profile": args.profile})) for name in names]
    spark = spark_options(args)
    check_corpus_directory(Path(args.out))
    options = GenerateOptions(max_states=args.max_states, walks=args.walks, aimed_walks=args.aimed_walks, walk_steps=args.walk_steps, seed=args.seed)
    workers = worker_count(args.workers)
    with spark_session(spark) if spark else contextlib.nullcontext() as on_spark:
        corpus, manifest = generate(configs, options, progress=lambda line: print(line, file=sys.stderr, flush=True), spark=on_spark, workers=workers)
    if not manifest.traces:  # an empty corpus certifies anything
        raise ConfigError(f"these bounds give no trace (--max-states {options.max_states}, --walks {options.walks}, --aimed-walks {options.aimed_walks}): nothing written")
    write_corpus(Path(args.out), corpus, manifest)
    rows = [
        ("configurations", ", ".join(names)),
        ("traces", manifest.traces),
        ("steps", f"{manifest.steps:,}"),
        ("coverage cells", manifest.cells),
        ("rules exercised", len(manifest.rules)),
        ("content hash", manifest.content_hash),
        ("written to", args.out),
    ]
    print(tabulate(rows, tablefmt="simple"))
    return 0


def print_schema(args: argparse.Namespace) -> int:
    print(json.dumps(traces.schema(), indent=1))
    return 0


def show(args: argparse.Namespace) -> int:
    if args.format == "scenario" and is_counterexample(Path(args.file)):
        return print_scenario(Path(args.file), cluster_scenario_text, counterexample_scenario(Path(args.file)))
    shown = traces.read(Path(args.file))
    if args.format == "svg":
        return show_svg(shown, args.out)
    if args.out:
        raise OutputError("--out writes a diagram: use it with --as svg")
    if args.format == "scenario":
        return print_scenario(Path(args.file), scenario_text, shown)
    header = shown.header
    if header.cluster is not None:
        member = f"node {header.node} of voters {list(header.cluster.voters)} observers {list(header.cluster.observers)}, profile {header.cluster.profile}"
    else:
        partition = header.partition
        member = f"replica {header.node} of ISR partition {list(partition.replicas)}, min.isr {partition.min_isr}, truncation {partition.truncation}"
    print(f"{header.name}: {member}, {header.steps} steps")
    if header.origin:
        print(f"origin: {header.origin}")
    rows = []
    for step in shown.steps:
        state = step.state
        answer = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in step.errors.items()) or "-"
        after = f"{state.role} e{state.epoch} leader {state.leader_id} log {state.log_end_offset} hw {state.high_watermark}" if state else "-"
        rows.append((step.step, step.note, answer, len(step.expect.sends), after, " ".join(step.rules)))
    print(wrapped_table(rows, ("step", "input", "errors", "sends", "state after", "rules"), [None, 60, 40, None, 40, 30]))
    return 0


def print_scenario(path: Path, printer: Callable[[Any], str], shown: Any) -> int:
    """A trace or counterexample printed whole as a scenario, or refused naming its file (a text
    in it that would read as other statements)."""
    try:
        text = printer(shown)
    except traces.TraceError as error:
        raise traces.TraceError(f"{path}: {error}") from None
    sys.stdout.write(text)
    return 0


def describe(args: argparse.Namespace) -> int:
    """The quorum views (`kafka-metadata-quorum.sh describe --status`, `--replication`) of a
    trace's node after a step."""
    shown = traces.read(Path(args.file))
    print(trace_views(shown, len(shown.steps) if args.step is None else args.step))
    return 0


def show_svg(shown: traces.Trace, out: str | None) -> int:
    """The trace as a sequence diagram, to a file (written whole) or to standard output."""
    svg = trace_svg(shown)
    if out is None:
        sys.stdout.write(svg)
        return 0
    try:
        traces.write_bytes_atomically(Path(out), svg.encode())
    except OSError as error:
        raise OutputError(f"{out}: cannot write the diagram: {error.strerror or error}") from None
    print(f"diagram: {out}", file=sys.stderr)
    return 0
