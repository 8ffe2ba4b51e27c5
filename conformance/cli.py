"""The `kraftcheck` command line: the argument parser, and dispatch to conformance.commands.

Each command's body lives in its own module under conformance/commands/ and is imported only
when that command runs, so `kraftcheck --help` stays quick.
"""

import argparse
import importlib
import importlib.metadata
import os
import signal
import sys
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path

from adapters.kafka_build import DEFAULT_VERSION as KAFKA_DEFAULT_VERSION
from adapters.kafka_build import TESTED_VERSIONS as KAFKA_TESTED_VERSIONS
from adapters.registry import AdapterOptionError
from conformance.certify.shorten import DEFAULT_BUDGET as DEFAULT_SHORTEN_BUDGET
from conformance.certify.shorten import PER_TRACE
from conformance.corpus.generate import CORPUS_CONFIGS, DEFAULT_CORPUS, shipped_corpora
from conformance.outputs import OutputError
from conformance.spark.session import SparkUnavailable, spark_error
from model.config import FAULTY_PROFILES, PROFILES, ConfigError
from spec.trace import TraceError


GUIDE_PAGES = {
    "rules": "model-checking",
    "check": "model-checking",
    "simulate": "model-checking",
    "traces": "model-checking",
    "describe": "model-checking",
    "choices": "model-checking",
    "certify": "certifying",
    "mutants": "certifying",
    "adapters": "certifying",
    "scenario": "scenarios",
    "cluster": "kafka",
    "validate": "kafka",
}
"""The page of docs/guide/ that explains each command; its help ends by naming it."""


def version() -> str:
    """The installed distribution's version; in a checkout that is not installed, its pyproject.toml's."""
    try:
        return importlib.metadata.version("kraftcheck")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        if not pyproject.is_file():
            return "unknown (not installed)"
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]


class PrintVersion(argparse.Action):
    """--version, looked up only when asked for, so that every other invocation stays quick."""

    def __init__(self, option_strings: list[str], dest: str) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print kraftcheck's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option_string: str | None = None) -> None:
        print(f"kraftcheck {version()}")
        parser.exit()


def point_at_guides(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """End the help of every command, and of each of its subcommands, with its guide page."""
    for name, parser in commands.choices.items():
        nested = [sub for action in parser._actions if isinstance(action, argparse._SubParsersAction) for sub in action.choices.values()]
        for each in (parser, *nested):
            each.epilog = f"guide: docs/guide/{GUIDE_PAGES[name]}.md (in the repository and the sdist)"


def command(module: str, function: str = "run") -> Callable[[argparse.Namespace], int]:
    """The body of a command, `conformance.commands.MODULE.FUNCTION`, imported when it runs."""

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"conformance.commands.{module}"), function)(args)

    return run


def command_module_type(module: str, function: str) -> Callable[[str], object]:
    """An argument type from a command's module, imported when an argument is parsed."""

    def convert(text: str) -> object:
        return getattr(importlib.import_module(f"conformance.commands.{module}"), function)(text)

    return convert


def add_engine_options(parser: argparse.ArgumentParser, what: str) -> None:
    """--engine and the Spark options, the same on every command that can run on Spark."""
    parser.add_argument(
        "--engine",
        choices=("in-process", "spark"),
        default="in-process",
        help=f"where {what} runs: in-process (default) or spark, on Apache Spark through PySpark; the results are the same",
    )
    parser.add_argument(
        "--spark-master",
        default="local[*]",
        metavar="URL",
        help="with --engine spark: the master, local[N], spark://HOST:PORT (HA: spark://HOST:PORT,HOST:PORT), yarn, k8s://... (default local[*]); "
        "a spark:// master must accept a connection before Spark starts; under spark-submit the running session is used",
    )
    parser.add_argument("--spark-partitions", type=int, metavar="N", help="with --engine spark: partitions of the keyed data, 1 to 100000 (default: one per core of the cluster)")
    parser.add_argument(
        "--spark-dir",
        metavar="DIR",
        help="with --engine spark: a directory every executor can reach, for the search's fingerprint tables and the states it sends "
        "between partitions (check, traces generate: a mount every executor shares, a path or file: URL; removed when the search ends) and "
        "certify's tables (HDFS too); a run writes a new subdirectory there and leaves it (default: a temporary directory on this machine, "
        "removed afterwards). A local path must be a writable directory or one that can be created, checked before Spark starts; another "
        "file system's URL (hdfs://...) is refused by check and traces generate, and is Spark's to reach for certify",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraftcheck", description="Specification and conformance testing for KRaft (KIP-595) and KIP-101 truncation.")
    parser.add_argument("--version", action=PrintVersion)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rules = commands.add_parser("rules", help="list the rule catalogue", description="List the normative rules of the specification.")
    rules.add_argument("--coverage", action="store_true", help="run the rule tests and show, per rule, the tests that exercise it")
    rules.add_argument("--group", help="only the rules of one group, e.g. VOTE-REQ")
    rules.add_argument("--json", action="store_true", help="print the catalogue as JSON")
    rules.set_defaults(run=command("rules"))

    profiles_help = ", ".join(sorted(PROFILES)) + "; faulty variants: " + ", ".join(sorted(FAULTY_PROFILES))

    check = commands.add_parser(
        "check",
        help="model-check a configuration exhaustively",
        description="Explore every reachable state of a small cluster within bounds, checking every safety property. "
        "Exit 0 if all hold, 1 on a violation (its shortest counterexample is printed and saved as JSON Lines and as an SVG "
        "sequence diagram), 2 on an invalid "
        "configuration or a vacuous check (no action leads out of the initial state).",
    )
    check.add_argument(
        "--config",
        help="a named configuration of conformance/explore/configs.toml: smoke, faults, tlc-kraft-if4, figure8, isr-hw, isr-epoch, ... "
        "With no option at all: smoke. Options given without --config override the built-in defaults, not smoke's: "
        "3 voters, no observers, 1 client value, max epoch 2, no election bound, 4 messages in flight, loss and leader "
        "progress timeouts on, no crashes, duplication, resignation or re-sends; with an ISR option (--replicas, --min-isr, "
        "--truncation, --unflushed-loss): 2 replicas, min.isr 1, epoch truncation, no power failure, 2 client values, "
        "2 crashes, 1 election",
    )
    check.add_argument("--voters", type=int, help="number of voters, 1 to 16")
    check.add_argument("--observers", type=int, help="number of observers, 0 to 16")
    check.add_argument("--profile", help=f"model profile ({profiles_help})")
    check.add_argument("--client-values", type=int, help="client appends allowed, 0 or more")
    check.add_argument("--max-epoch", type=int, help="largest epoch any node may reach, at least 1")
    check.add_argument("--max-in-flight", type=int, help="most messages in flight at once: 0 for no bound (then a lost message is one never delivered, and losses are not explored apart; duplication and re-sends must be off), else at least 1 and at least voters - 1 (a candidate sends a Vote to every other voter at once)")
    check.add_argument("--crashes", type=int, help="crashes allowed (each crashed node may restart), 0 or more")
    check.add_argument("--cuts", type=int, help="links a run may cut, one way each (partial partitions: a message sent on a cut link is lost, one in flight waits until it heals), 0 or more")
    check.add_argument("--max-elections", type=int, help="candidacies allowed in a whole run, at least 1 (built-in default: unbounded); ISR system: leader elections, 0 or more")
    check.add_argument("--fetch-max-records", type=int, help="most records per Fetch response, 0 or more (0 = all)")
    check.add_argument("--loss", action=argparse.BooleanOptionalAction, default=None, help="allow message loss")
    check.add_argument("--duplication", action=argparse.BooleanOptionalAction, default=None, help="allow duplicated deliveries")
    check.add_argument("--resign", action=argparse.BooleanOptionalAction, default=None, help="allow leaders to resign")
    check.add_argument("--retries", action=argparse.BooleanOptionalAction, default=None, help="allow request timeouts to re-send")
    check.add_argument("--symmetry", action=argparse.BooleanOptionalAction, default=None, help="symmetry reduction over node ids (default on); for at most 6 nodes, voters and observers together")
    check.add_argument(
        "--every-choice",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a node's step takes every outcome the specification allows, each alternative of every choice point it consults "
        "that the profile leaves open (default on, so what certify accepts is what is checked); --no-every-choice keeps the model's default reading alone",
    )
    check.add_argument("--replicas", type=int, help="ISR system: replicas of the partition, 1 to 16")
    check.add_argument("--min-isr", type=int, help="ISR system: min.isr, fewest ISR members for an acks=all append")
    check.add_argument("--truncation", help="ISR system: hw (to the high watermark, before KIP-101) or epoch (KIP-101)")
    check.add_argument("--unflushed-loss", action=argparse.BooleanOptionalAction, default=None, help="ISR system: a power failure of every replica loses records not yet on disk")
    check.add_argument("--workers", type=int, help="worker processes, 1 to 64 (default: one per core, at most 64); counts are identical for any number; ISR configurations run in-process")
    check.add_argument("--keep-going", action="store_true", help="collect a counterexample for every violated property")
    check.add_argument(
        "--liveness",
        action="store_true",
        help="also check the liveness properties LIVE-1 to LIVE-5 (LIVE-5 where leaders may time out) under fairness: faults only in a finite prefix, then every "
        "message delivered and every fair timer fired while it stays enabled. A violation is a fair cycle that never meets the "
        "property's goal, printed and saved as a lasso (prefix, then the cycle). Explores the graph without symmetry reduction, "
        "with the safety search's engine (--workers processes, --state-dir on disk; no --resume or Spark), each state's steps recorded "
        "as it is expanded, then judged; every safety property is checked on the same states",
    )
    check.add_argument(
        "--fair-timers",
        type=command_module_type("check", "fair_timers"),
        metavar="KINDS",
        help="with --liveness: the timers a fair run must let expire while they stay armed, comma-separated, or none "
        "(default: all five; fetch_timeout and progress_timeout, which traffic resets, are owed only once their node is quiet: no Fetch of the follower or to the leader in flight or held, no answer or BeginQuorumEpoch on its way to the follower)",
    )
    check.add_argument("--max-states", type=int, help="stop after this many distinct states, at least 1: before the next level, once that many are found")
    check.add_argument(
        "--max-seconds",
        type=float,
        help="a time budget: no level starts after this many seconds, and the summary covers the levels completed (every state up to that depth); the level under way is finished first",
    )
    check.add_argument(
        "--state-dir",
        metavar="DIR",
        help="keep the search on disk in DIR, a new or empty directory: the fingerprint table mapped from a file, each level's "
        "states, the parent links; memory then holds caches and a batch, so disk bounds the run, not RAM. A checkpoint is "
        "written after every level: a run that is killed continues with --resume DIR",
    )
    check.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the search kept in DIR (begun with --state-dir) from its last completed level, with the configuration "
        "and worker count it began with; --max-seconds and --max-states count the whole search",
    )
    check.add_argument("--out", default="out", help="directory for counterexamples: JSON Lines and SVG diagrams (default ./out)")
    check.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_engine_options(check, "the search")
    check.set_defaults(run=command("check"))
    sim = commands.add_parser(
        "simulate",
        help="seeded random cluster runs checking every safety property",
        description="Random walks of a cluster, every safety property checked after every step. Stops at the first violating seed, "
        "unless --keep-going or --engine spark: then every seed runs (on Spark, spread over the executors) and each violated property "
        "is reported with its shortest run. Exit 1 on a violation.",
    )
    sim.add_argument("--voters", type=int, default=3, help="number of voters, 1 to 16 (default 3)")
    sim.add_argument("--observers", type=int, default=1, help="number of observers, 0 to 16 (default 1)")
    sim.add_argument("--profile", default="kip595", help=f"model profile ({profiles_help})")
    sim.add_argument("--runs", type=int, default=500, help="number of seeded runs, at least 1 (default 500)")
    sim.add_argument("--steps", type=int, default=400, help="steps per run, at least 1 (default 400)")
    sim.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    sim.add_argument("--client-values", type=int, default=3, help="client appends per run, 0 or more (default 3)")
    sim.add_argument("--crashes", type=int, default=2, help="crashes per run, 0 or more (default 2)")
    sim.add_argument("--no-loss", action="store_true", help="never lose messages")
    sim.add_argument("--duplication", action="store_true", help="allow duplicated deliveries")
    sim.add_argument("--resign", action="store_true", help="allow leaders to resign (EndQuorumEpoch)")
    sim.add_argument("--show", type=int, default=25, help="steps of a counterexample to show, at least 1 (default 25)")
    sim.add_argument(
        "--keep-going",
        action="store_true",
        help="run every seed and report each violated property with its shortest run (the fewest steps), as --engine spark always does",
    )
    sim.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_engine_options(sim, "the runs")
    sim.set_defaults(run=command("simulate"))

    trace_commands = commands.add_parser("traces", help="generate, show and describe conformance traces", description="Conformance traces: node-level inputs with the outputs the specification expects.")
    trace_sub = trace_commands.add_subparsers(dest="traces_command", required=True, metavar="SUBCOMMAND")
    gen = trace_sub.add_parser(
        "generate",
        help="generate a coverage-guided corpus from exploration",
        description="Search the named configurations, keep the shortest trace reaching each coverage cell "
        "(input kind x role x epoch relation x outcome x rule), add seeded random walks, and write the traces "
        "with a manifest. The same arguments give the same bytes.",
    )
    gen.add_argument("--config", action="append", help=f"a named configuration to search (repeatable; default: {', '.join(CORPUS_CONFIGS)})")
    gen.add_argument("--out", required=True, help="the corpus directory to write: new, empty, or an earlier corpus (only the files its manifest lists are replaced)")
    gen.add_argument("--max-states", type=int, default=150_000, help="cluster states each search may visit (default 150000)")
    gen.add_argument("--walks", type=int, default=8, help="seeded random walks per configuration, each projected on every node (default 8)")
    gen.add_argument(
        "--aimed-walks", type=int, default=32, help="further walks per configuration, kept only up to where they reach a rule and outcome with fewer than 3 traces (default 32)"
    )
    gen.add_argument("--walk-steps", type=int, default=250, help="cluster steps per random walk (default 250)")
    gen.add_argument("--seed", type=int, default=0, help="first random-walk seed (default 0)")
    gen.add_argument("--workers", type=int, help="configurations searched at once, each in a process of its own, 1 to 64 (default: one per core, at most 64); the corpus is the same for any number")
    gen.add_argument("--profile", help=f"generate the corpus of another model profile ({', '.join(sorted(PROFILES))}): the KRaft searches only, under it")
    add_engine_options(gen, "the searches")
    gen.set_defaults(run=command("traces", "generate_corpus"))
    schema = trace_sub.add_parser("schema", help="print the JSON Schema of the trace format", description="Print the JSON Schema of the JSON Lines trace format (spec/trace.schema.json).")
    schema.set_defaults(run=command("traces", "print_schema"))
    show = trace_sub.add_parser(
        "show",
        help="show a trace as a step table or a sequence diagram",
        description="Read a trace file (validating it) and print its steps as a table, or draw it as a message-sequence diagram "
        "(--as svg): one lifeline for the node under test and one per peer, an arrow per message, its state where it changes.",
    )
    show.add_argument("file", help="a trace file (.jsonl or .msgpack)")
    show.add_argument(
        "--as",
        dest="format",
        choices=("table", "svg", "scenario"),
        default="table",
        help="table (default), svg: a self-contained SVG diagram, or scenario: the trace in the scenario language (spec/scenario-format.md), exact",
    )
    show.add_argument("--out", metavar="FILE", help="with --as svg: write the diagram to FILE (default: standard output)")
    show.set_defaults(run=command("traces", "show"))

    cert = commands.add_parser(
        "certify",
        help="replay the corpus through an adapter and report conformance rule by rule",
        description="Replay every trace of the corpus through an adapter; write Markdown, JSON, JUnit and HTML reports with a verdict "
        "per rule and a shortened reproducing trace per divergence (report.html: the verdicts with each rule's sentence, a coverage "
        "heat map, each divergence as a sequence diagram; self-contained, open it from disk). Each step is judged against every outcome the "
        "specification allows there, following the implementation's choices (listed as its readings, see `kraftcheck choices`). A trace "
        "conforms, departs, is not applicable (it needs a capability the implementation declares it lacks) or errs (the adapter failed). "
        "The corpus is the shipped traces/ (KIP-595 as written, profile kip595), another profile's shipped corpus (--profile) or "
        "any corpus (--corpus); the reports say which profile it was generated under. "
        "Exit 0 when nothing departs and nothing errs, 2 on unusable input (a corpus, an adapter, an output directory).",
    )
    cert.add_argument(
        "--adapter",
        required=True,
        help="reference; reference:OPTIONS, comma-separated CHOICE=ALTERNATIVE (see `kraftcheck choices`), random=SEED, "
        "lacks=CAPABILITY[+CAPABILITY]; mutant:NAME (see `kraftcheck mutants`); subprocess:COMMAND; or kafka[:VERSION[,timeouts=kafka|long]], Apache "
        f"Kafka's KafkaRaftClient (default version {KAFKA_DEFAULT_VERSION}; with the adapter's short timeouts, Kafka's default ones, or a long request timeout), "
        "built with Maven on first use (see `kraftcheck adapters list`)",
    )
    shipped_help = ", ".join(f"{name} ({path.relative_to(DEFAULT_CORPUS.parent).as_posix()}/)" for name, path in shipped_corpora().items())
    corpus = cert.add_mutually_exclusive_group()
    corpus.add_argument("--corpus", help="a corpus directory or one trace file (default: the shipped traces/, profile kip595's)")
    corpus.add_argument(
        "--profile",
        metavar="PROFILE",
        help=f"replay the corpus shipped for a model profile, generated under it: {shipped_help}; not with --corpus. Whatever "
        "the corpus, the reports name the profile it was generated under, as its manifest records it",
    )
    cert.add_argument(
        "--out",
        help="directory for the reports, replaced as a whole by this run's set; it must be new, empty or an earlier report set "
        "(default out/certify-ADAPTER)",
    )
    cert.add_argument(
        "--system",
        action="append",
        choices=("kraft", "isr"),
        help="replay only the traces of this system: kraft (KIP-595 nodes) or isr (KIP-101 ISR replicas); repeatable (default: all)",
    )
    cert.add_argument("--step-timeout", type=float, default=10.0, help="seconds a subprocess adapter may take per reply (default 10, at most 3600)")
    cert.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="traces replayed at once, each through an adapter (a process) of its own, and deviations judged at once by the deviation search, 1 to 64 (default: one per core); the reports are the same for any N",
    )
    cert.add_argument(
        "--shorten-budget",
        type=int,
        default=DEFAULT_SHORTEN_BUDGET,
        metavar="N",
        help=f"candidate replays spent shortening divergent traces in the whole run, at most {PER_TRACE} per trace; 0 only cuts "
        f"each after its divergent step (default {DEFAULT_SHORTEN_BUDGET})",
    )
    cert.add_argument("--no-verify", dest="verify", action="store_false", help="replay the corpus's files as they are, without checking them against its manifest")
    cert.add_argument(
        "--no-deviations",
        dest="deviations",
        action="store_false",
        help="where traces depart, do not search the deviations from the corpus's profile that explain them (named options and "
        "choice-point readings, judged on the implementation's recorded answers; on by default, not with --engine spark)",
    )
    cert.add_argument(
        "--reproducible",
        action="store_true",
        help="leave wall times out of the reports, so that the same corpus, implementation and command line give the same "
        "bytes (paths are written as given: run from the same directory with relative paths)",
    )
    cert.add_argument("--json", action="store_true", help="print a summary object instead of tables")
    add_engine_options(cert, "the replay")
    cert.set_defaults(run=command("certify"))

    describe = commands.add_parser(
        "describe",
        help="the quorum views of a trace's node after a step, as kafka-metadata-quorum.sh prints them",
        description="Run the reference model along a KRaft trace's inputs up to a step and print, if the node leads then, its "
        "DescribeQuorum answer as `kafka-metadata-quorum.sh describe --status` (ClusterId, LeaderId, LeaderEpoch, HighWatermark, "
        "MaxFollowerLag, CurrentVoters, CurrentObservers) and `--replication` (ReplicaId, LogEndOffset, Lag, Status) print it.",
    )
    describe.add_argument("file", help="a trace file (.jsonl or .msgpack)")
    describe.add_argument("--step", type=int, metavar="N", help="after step N (0: before the first; default: the last)")
    describe.set_defaults(run=command("traces", "describe"))

    scenario_commands = commands.add_parser(
        "scenario",
        help="run hand-written scenarios through an adapter, or record their expectations",
        description="Scenarios are conformance traces written for people (spec/scenario-format.md).",
    )
    scenario_sub = scenario_commands.add_subparsers(dest="scenario_command", required=True, metavar="SUBCOMMAND")
    scenario_run = scenario_sub.add_parser(
        "run",
        help="replay scenario files through an adapter: a pass/fail table and the first failure",
        description="Replay each scenario through an adapter as certify replays a trace (every outcome the specification allows "
        "accepted); a scenario whose expectations are not the reference model's fails at its step's line. Steps that name no "
        "rules take the model's. Exit 0 when every scenario passes, 1 when one fails, 2 on unusable input (a scenario that "
        "cannot be read, named with its line and column; an adapter).",
    )
    scenario_run.add_argument("files", nargs="+", metavar="FILE", help="scenario files")
    scenario_run.add_argument("--adapter", default="reference", help="as for certify (default reference): reference[:OPTIONS], mutant:NAME, subprocess:COMMAND, kafka[:VERSION]")
    scenario_run.add_argument("--step-timeout", type=float, default=10.0, help="seconds a subprocess adapter may take per reply (default 10, at most 3600)")
    scenario_run.set_defaults(run=command("scenario"))
    scenario_record = scenario_sub.add_parser(
        "record",
        help="fill in the scenarios' expectations from the reference model, in place",
        description="Rewrite each scenario file with every expectation, rule and allowed outcome the reference model gives for "
        "its inputs, keeping its comments: writing a case means writing its inputs. Every file is read and recorded before any "
        "is written, then all are replaced or none (through a symlink, keeping each file's mode); exit 2, nothing written, when "
        "one cannot be read or written.",
    )
    scenario_record.add_argument("files", nargs="+", metavar="FILE", help="scenario files")
    scenario_record.set_defaults(run=command("scenario", "record"))
    scenario_compile = scenario_sub.add_parser(
        "compile",
        help="compile scenarios to node-level traces: a corpus for certify --corpus",
        description="Write each scenario as the node-level traces it stands for (a cluster scenario: one per node that takes a "
        "step), with the reference model's rules and allowed outcomes, into a directory written whole; then "
        "`certify --corpus DIR --no-verify` certifies an adapter against them. A scenario whose expectations are not the model's "
        "is refused with its line.",
    )
    scenario_compile.add_argument("files", nargs="+", metavar="FILE", help="scenario files")
    scenario_compile.add_argument("--out", required=True, metavar="DIR", help="a new or empty directory, or one of earlier compiled traces")
    scenario_compile.set_defaults(run=command("scenario", "compile_scenarios"))

    choose = commands.add_parser(
        "choices",
        help="list where the specification allows several behaviours, or check that every reading conforms",
        description="List the choice points: where KIP-595 allows more than one behaviour, the alternatives it allows (the model's "
        "default first) and why. Replay accepts any allowed alternative and follows the implementation's choice. With --run, replay "
        "the corpus through the reference model under every single alternative, sampled combinations and random "
        "resolutions: every reading must conform (exit 1 if one departs).",
    )
    choose.add_argument(
        "--profile",
        help=f"show what a profile pins: the choice points its release resolves one way, with the code that makes it so, and what stays open ({', '.join(sorted(PROFILES))})",
    )
    choose.add_argument("--run", dest="run_readings", action="store_true", help="replay the corpus through the reference under every alternative")
    choose.add_argument("--corpus", help="corpus for --run (default: the shipped traces/)")
    choose.add_argument("--combinations", type=int, default=4, metavar="N", help="with --run: sampled combinations of alternatives (default 4)")
    choose.add_argument("--random", type=int, default=4, metavar="N", help="with --run: runs resolving every choice at random, a one-way point once per trace, an each-time point at each step (default 4)")
    choose.add_argument("--seed", type=int, default=0, help="with --run: first seed of the samples and random runs (default 0)")
    choose.add_argument("--no-verify", dest="verify", action="store_false", help="with --run: do not check the corpus against its manifest")
    choose.add_argument("--json", action="store_true", help="print the list (or the runs) as JSON")
    choose.set_defaults(run=command("choices"))

    mut = commands.add_parser("mutants", help="list the seeded-bug adapters", description="List the mutant adapters (mutant:NAME), one seeded bug each.")
    mut.add_argument("--score", action="store_true", help="replay the corpus through every mutant: which are caught, on which rule (exit 1 unless all are)")
    mut.add_argument("--corpus", help="corpus for --score (default: the shipped traces/)")
    mut.add_argument("--no-verify", dest="verify", action="store_false", help="with --score: do not check the corpus against its manifest")
    mut.add_argument("--jobs", type=int, metavar="N", help="with --score: adapters replaying the corpus at once, each in a process of its own, 1 to 64 (default: one per core); the scores are the same for any N")
    mut.add_argument("--json", action="store_true", help="print the list (or the scores) as JSON")
    mut.set_defaults(run=command("mutants"))

    adapter_commands = commands.add_parser(
        "adapters",
        help="list the adapter forms; build the Kafka adapter",
        description="The adapters `certify --adapter` takes, and the build of those that need one: the Kafka adapter, Apache "
        "Kafka's own KafkaRaftClient, is built per Kafka version with Maven (JDK 17, Kafka's jars from Maven Central) into "
        "$XDG_CACHE_HOME/kraftcheck/kafka/VERSION (default ~/.cache/...), on first use or by `adapters build kafka`.",
    )
    adapter_sub = adapter_commands.add_subparsers(dest="adapters_command", required=True, metavar="SUBCOMMAND")
    listing = adapter_sub.add_parser(
        "list",
        help="list the adapter forms and which Kafka versions are built",
        description="List the adapter forms `certify --adapter` takes and, for kafka, the tested Kafka versions and where each is built.",
    )
    listing.set_defaults(run=command("adapters", "list_adapters"))
    build = adapter_sub.add_parser(
        "build",
        help="build the Kafka adapter now (otherwise built on first use)",
        description="Build the Kafka adapter for one Kafka version with Maven, unless an up-to-date build is cached; print where "
        "it is and the command that runs it. Exit 0 when built or already built, 1 when the build fails (the reason on standard error), 2 on "
        "bad arguments.",
    )
    build.add_argument("name", metavar="ADAPTER", help="the adapter to build: kafka, the only one that needs building")
    build.add_argument(
        "--kafka-version",
        default=KAFKA_DEFAULT_VERSION,
        metavar="VERSION",
        help=f"the Kafka version, MAJOR.MINOR.PATCH, 3.3.0 or later (default {KAFKA_DEFAULT_VERSION}; tested: {', '.join(KAFKA_TESTED_VERSIONS)})",
    )
    build.add_argument("--force", action="store_true", help="build again even if an up-to-date build is cached")
    build.set_defaults(run=command("adapters", "build_adapter"))
    cluster_commands = commands.add_parser(
        "cluster",
        help="run a real Kafka controller quorum on loopback under faults and check its history",
        description="Apache Kafka's own server from Maven Central, N controllers as JVMs bound to 127.0.0.1, under a seeded "
        "nemesis; each node's quorum-state file watched and checked against the model's safety properties.",
    )
    cluster_sub = cluster_commands.add_subparsers(dest="cluster_command", required=True, metavar="SUBCOMMAND")
    cluster_run = cluster_sub.add_parser(
        "run",
        help="start a quorum, inject faults for --time seconds, heal it, check the history",
        description="Resolve Kafka's server with Maven (cached in $XDG_CACHE_HOME/kraftcheck/kafka-server/VERSION), format and "
        "start the controllers on free loopback ports under --out, each in a network namespace of its own reaching the others through "
        "relays kraftcheck controls (without namespaces, on the host's loopback, and then no partitions), wait for a leader, start "
        "writing (a cluster config change per write through Kafka's admin client, Kafka 3.7 on), then for --time seconds kill (SIGKILL, then restart) "
        "or pause (SIGSTOP, then SIGCONT) one node, or partition the quorum (a node or the leader isolated, a follower cut from the "
        "leader alone, the leader deaf to the others, a bridge between two sides), or wipe a node's disk (asked for only: the operator's error that loses "
        "acknowledged writes), one fault at a time, drawn from --seed; heal everything, wait for a leader, stop and read every node's "
        "metadata log. Every quorum-state change, fault, write and reading goes to OUT/history.jsonl as it happens. Exit 0 when the "
        "history holds SAFE-1 to SAFE-3 (quorum-state files), SAFE-4, SAFE-6, SAFE-7 (metadata logs: no acknowledged write lost), "
        "HW-MONOTONE, PROGRESS-1 and a leader came within --leader-bound seconds of the healing, 1 when not (or the quorum could not "
        "be set up), 2 on bad arguments; no JVM outlives the run, Ctrl-C and a kill included.",
    )
    cluster_run.add_argument("--kafka-version", default=KAFKA_DEFAULT_VERSION, metavar="VERSION", help=f"the Kafka release, 3.3.0 or later (default {KAFKA_DEFAULT_VERSION})")
    cluster_run.add_argument("--controllers", type=int, default=3, metavar="N", help="controllers, the quorum's voters (default 3, at most 5)")
    cluster_run.add_argument(
        "--nemesis", type=command_module_type("cluster", "nemesis_kinds"), metavar="KINDS",
        help="faults to draw from: kill, pause, partition, wipe (default kill,pause,partition)",
    )
    cluster_run.add_argument("--partitions", type=command_module_type("cluster", "shapes"), metavar="SHAPES",
                             help="the partitions to draw from: isolate (a node, both ways), isolate-leader, partial (a follower cut from the leader alone), leader-deaf (nothing reaches the leader), "
                             "bridge (a follower reaching two sides that do not reach each other) (default all)")
    cluster_run.add_argument("--fault-time", type=command_module_type("cluster", "seconds_range"), metavar="LOW-HIGH", help="how long each fault lasts, drawn between LOW and HIGH seconds (default 1-8)")
    cluster_run.add_argument("--time", type=float, default=60.0, metavar="SECONDS", help="how long to inject faults (default 60)")
    cluster_run.add_argument("--seed", type=int, default=0, help="the nemesis's seed: which fault, which node, how long (default 0)")
    cluster_run.add_argument("--leader-bound", type=float, default=30.0, metavar="SECONDS", help="the liveness bound: a leader within this of the faults healing (default 30)")
    cluster_run.add_argument("--out", default="cluster-run", metavar="DIR", help="a new or empty directory, or an earlier run's (default cluster-run)")
    cluster_run.add_argument("--no-writes", dest="writes", action="store_false", help="run no workload: the quorum's own records only")
    cluster_run.add_argument("--json", action="store_true", help="print the summary as JSON")
    cluster_run.set_defaults(run=command("cluster", "run_cluster"))
    validate = commands.add_parser(
        "validate",
        help="explain every logged Raft event of a real Kafka quorum by a model execution",
        description="Read each voter's own log (a `kraftcheck cluster run` directory's node-N/server.log, or log files, one per node, "
        "from any deployment logging org.apache.kafka.raft.QuorumState at INFO and KafkaRaftClient at TRACE) into observations: "
        "transitions, every message received and sent, the leader's appends, the follower's log end after each. Then search, node "
        "by node in the order its log has them, for model executions under the release's profile that log exactly these, filling in "
        "up to --fill unlogged steps (timers) where nothing else explains the next line; a leader's check-quorum timer is held to "
        "its timeout. Exit 0 when every observation is explained and every message received was logged by its sender, 1 with the "
        "first observation no model state explains, the states still possible just before it and what each would have logged "
        "instead, 2 on bad input.",
    )
    validate.add_argument("paths", nargs="+", metavar="PATH", help="a `kraftcheck cluster run` directory, or node log files")
    validate.add_argument("--profile", metavar="NAME", help="the model profile to judge by (default: the release's, from the run's summary.json)")
    validate.add_argument("--fill", type=int, default=3, metavar="N", help="unlogged steps tried before an observation nothing else explains (default 3)")
    validate.add_argument("--slack-ms", type=int, default=1000, metavar="MS", help="how late a leader's check-quorum timer may fire (default 1000)")
    validate.add_argument("--runs", action="store_true", help="each PATH is a run directory of its own: a verdict per run (with --engine spark, one task per run)")
    validate.add_argument("--json", action="store_true", help="print the validation as JSON")
    validate.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_engine_options(validate, "the validation of many runs (--runs)")
    validate.set_defaults(run=command("validate", "run_validate"))
    point_at_guides(commands)
    return parser


def interrupt_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so every clean-up runs."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    in_main_thread = threading.current_thread() is threading.main_thread()  # only there can signals be handled
    previous = signal.signal(signal.SIGTERM, interrupt_on_sigterm) if in_main_thread else None
    try:
        return args.run(args)
    except ConfigError as error:
        print(f"kraftcheck: invalid configuration: {error}", file=sys.stderr)
        return 2
    except (TraceError, AdapterOptionError, OutputError, SparkUnavailable) as error:
        print(f"kraftcheck: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kraftcheck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`kraftcheck ... | head`): stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as error:
        cause = spark_error(error)
        if cause is None:
            raise
        print(f"kraftcheck: Spark failed: {cause}", file=sys.stderr)
        return 2
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
