"""`kraftcheck certify`: replay the corpus through an adapter and write the reports."""

import argparse
import json
import sys
from pathlib import Path

from adapters.registry import adapter_factory
from conformance.certify.certification import certify, summary
from conformance.certify.reports.terminal import print_progress, terminal_summary
from conformance.corpus.generate import DEFAULT_CORPUS


def run(args: argparse.Namespace) -> int:
    make_adapter = adapter_factory(args.adapter, step_timeout=args.step_timeout)
    out = Path(args.out) if args.out else Path("out") / ("certify-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in args.adapter)[:60])
    live = sys.stderr.isatty() and not args.json
    corpus = Path(args.corpus) if args.corpus else DEFAULT_CORPUS
    systems = tuple(args.system) if args.system else None
    report = certify(args.adapter, make_adapter, corpus, out, progress=print_progress if live else None, systems=systems)
    if args.json:
        print(json.dumps(summary(report, out)))
    else:
        print(terminal_summary(report, out))
    return 0 if not report.failed else 1
