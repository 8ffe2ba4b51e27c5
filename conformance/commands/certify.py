"""`kraftcheck certify`: replay the corpus through an adapter and write the reports."""

import argparse
import contextlib
import os
import hashlib
import json
import re
import sys
import time
from pathlib import Path

from adapters.registry import adapter_factory
from conformance.certify.certification import certify, job_count, summary
from conformance.certify.deviation import DEFAULT_BUDGET as DEVIATION_BUDGET
from conformance.certify.reports.terminal import print_progress, terminal_summary
from conformance.corpus.generate import DEFAULT_PROFILE, shipped_corpora
from conformance.spark.session import spark_options, spark_session
from model.config import FAULTY_PROFILES, PROFILES, ConfigError


def default_out(adapter: str) -> Path:
    """out/certify-ADAPTER: readable, and distinct for distinct commands however long or alike."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", adapter)
    if len(readable) > 60 or adapter.startswith("subprocess:"):
        readable = f"{readable[:50]}-{hashlib.sha256(adapter.encode()).hexdigest()[:8]}"
    return Path("out") / f"certify-{readable}"


def as_given(path: Path) -> Path:
    """A shipped corpus as the user would type it: relative to the current directory if it lies
    inside it (so reports name `traces/kafka-3.9`, the same on every machine), else absolute."""
    here = Path.cwd()
    return Path(os.path.relpath(path, here)) if path.is_relative_to(here) else path


def selected_corpus(args: argparse.Namespace) -> Path:
    """--corpus as given, the shipped corpus of --profile, or the shipped traces/."""
    if args.corpus:
        return Path(args.corpus)
    shipped = shipped_corpora()
    if args.profile is None:
        return as_given(shipped[DEFAULT_PROFILE])
    if args.profile not in shipped:
        known = "; ".join(f"{name} ({as_given(path)})" for name, path in shipped.items())
        if args.profile in PROFILES or args.profile in FAULTY_PROFILES:
            reason = f"profile {args.profile!r} has no shipped corpus (make one with `kraftcheck traces generate --profile {args.profile} --out DIR`, then pass --corpus DIR)"
        else:
            reason = f"unknown profile {args.profile!r}"
        raise ConfigError(f"--profile: {reason}; the profiles with a shipped corpus are: {known}")
    return as_given(shipped[args.profile])


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if args.shorten_budget < 0:
        raise ConfigError(f"--shorten-budget must not be negative, got {args.shorten_budget}")
    jobs = job_count(args.jobs)
    out = Path(args.out) if args.out else default_out(args.adapter)
    live = sys.stderr.isatty() and not args.json
    corpus = selected_corpus(args)
    systems = tuple(args.system) if args.system else None
    spark = spark_options(args)
    with adapter_factory(args.adapter, step_timeout=args.step_timeout) as make_adapter, spark_session(spark) if spark else contextlib.nullcontext() as on_spark:
        report = certify(
            args.adapter,
            make_adapter,
            corpus,
            out,
            progress=print_progress if live else None,
            systems=systems,
            verify=args.verify,
            shorten_budget=args.shorten_budget,
            jobs=jobs,
            timings=not args.reproducible,
            spark=on_spark,
            deviation_budget=DEVIATION_BUDGET if args.deviations else 0,
        )
    seconds = round(time.perf_counter() - started, 3)  # for the summary, where the reports leave it out
    if args.json:
        print(json.dumps(summary(report, out, seconds)))
    else:
        print(terminal_summary(report, out, seconds=seconds))
    return 0 if not report.failed else 1
