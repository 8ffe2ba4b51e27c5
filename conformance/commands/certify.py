"""`kraftcheck certify`: replay the corpus through an adapter and write the reports."""

import argparse
import os
import hashlib
import json
import re
import sys
from pathlib import Path

from adapters.registry import adapter_factory
from conformance.certify.certification import MAX_JOBS, certify, summary
from conformance.certify.reports.terminal import print_progress, terminal_summary
from conformance.corpus.generate import DEFAULT_CORPUS
from model.config import ConfigError


def default_out(adapter: str) -> Path:
    """out/certify-ADAPTER: readable, and distinct for distinct commands however long or alike."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", adapter)
    if len(readable) > 60 or adapter.startswith("subprocess:"):
        readable = f"{readable[:50]}-{hashlib.sha256(adapter.encode()).hexdigest()[:8]}"
    return Path("out") / f"certify-{readable}"


def run(args: argparse.Namespace) -> int:
    if args.shorten_budget < 0:
        raise ConfigError(f"--shorten-budget must not be negative, got {args.shorten_budget}")
    jobs = (os.cpu_count() or 1) if args.jobs is None else args.jobs
    if not 1 <= jobs <= MAX_JOBS:
        raise ConfigError(f"--jobs must be between 1 and {MAX_JOBS}, got {jobs}")
    out = Path(args.out) if args.out else default_out(args.adapter)
    live = sys.stderr.isatty() and not args.json
    corpus = Path(args.corpus) if args.corpus else DEFAULT_CORPUS
    systems = tuple(args.system) if args.system else None
    with adapter_factory(args.adapter, step_timeout=args.step_timeout) as make_adapter:
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
        )
    if args.json:
        print(json.dumps(summary(report, out)))
    else:
        print(terminal_summary(report, out))
    return 0 if not report.failed else 1
