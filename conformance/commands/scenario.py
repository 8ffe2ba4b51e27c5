"""`kraftcheck scenario run | record | compile`: replay scenario files through an adapter; fill in
their expectations from the model; write them as node-level traces."""

import argparse
from pathlib import Path

from adapters.registry import adapter_factory
from conformance.certify.replay import NOT_APPLICABLE, failure_text
from conformance.certify.reports.terminal import side_by_side
from conformance.certify.reports.wording import FAILING, allowed_text
from conformance.outputs import check_directory, publish_directory, replace_files
from conformance.scenario import parser
from conformance.scenario.cluster_run import compiled_nodes, model_run, recorded_cluster, run_cluster_scenario
from conformance.scenario.parser import Scenario, ScenarioError
from conformance.scenario.run import compiled, recorded, run_scenario
from conformance.text import readable, wrapped_table
from spec import trace as traces
from spec.trace import Trace

FAILURE_CELL = 240  # characters of a failure in the table; the first failure is shown whole below it


def run(args: argparse.Namespace) -> int:
    scenarios = [(Path(name), parser.read(Path(name))) for name in args.files]  # every file readable before any runs
    with adapter_factory(args.adapter, step_timeout=args.step_timeout) as make_adapter:
        results = []
        for path, scenario in scenarios:
            if type(scenario) is Scenario:
                results.append(run_scenario(make_adapter, path, scenario))
                continue
            on_model = model_run(path, scenario)
            for view in on_model.views:
                print(view + "\n")
            results.append(run_cluster_scenario(make_adapter, path, scenario, on_model))
    rows = [(r.trace, r.node if r.node >= 0 else "all", r.steps, "passes" if r.passed else r.verdict, "-" if r.passed else readable(failure_text(r), FAILURE_CELL)) for r in results]
    print(wrapped_table(rows, ("scenario", "node", "steps", "verdict", "first failure"), [None, None, None, None, 70]))
    failing = [r for r in results if r.verdict in FAILING]
    inapplicable = sum(r.verdict == NOT_APPLICABLE for r in results)
    also = f", {inapplicable} not applicable" if inapplicable else ""
    print(f"\n{len(results)} scenarios, {len(results) - len(failing) - inapplicable} pass, {len(failing)} fail{also} (adapter {args.adapter})")
    if failing:
        first = failing[0]
        print(f"\nfirst failure, {first.trace}:\n  {failure_text(first)}")
        if first.divergence and first.divergence.allowed:
            print(f"  {allowed_text(first.divergence)}")
        if first.divergence and first.divergence.expected_json:
            print(side_by_side(first.divergence.differing, first.divergence.expected_json, first.divergence.actual_json))
    return 1 if failing else 0


def record(args: argparse.Namespace) -> int:
    """Every file parsed and recorded before any is written, then all replaced or none."""
    contents: dict[Path, bytes] = {}
    for name in args.files:
        path = Path(name)
        scenario = parser.read(path)
        text = recorded(path, scenario) if type(scenario) is Scenario else recorded_cluster(path, scenario)
        try:
            parser.parse(path, text)  # the model may take a number beyond what a scenario holds
        except ScenarioError as error:
            raise ScenarioError(f"{path}: recorded, it would not read back: {error}") from None
        contents[path] = text.encode("utf-8")
    replace_files(contents)
    for path in contents:
        print(f"recorded {path}")
    return 0


def _compiled_trace(name: str) -> bool:
    return name.endswith(".jsonl")


def compile_scenarios(args: argparse.Namespace) -> int:
    """Every scenario as node-level traces in a directory, written whole: a corpus for certify."""
    out = Path(args.out)
    check_directory(out, _compiled_trace, "compiled traces")
    built: dict[str, Trace] = {}
    for name in args.files:
        path = Path(name)
        scenario = parser.read(path)
        for trace in [compiled(path, scenario)] if type(scenario) is Scenario else compiled_nodes(path, scenario):
            file_name = f"{trace.header.name}.jsonl"
            if file_name in built:
                raise ScenarioError(f"{path}: a second trace named {trace.header.name!r}; scenario names must differ")
            built[file_name] = trace
    publish_directory(out, lambda directory: [traces.write(directory / file_name, trace) for file_name, trace in built.items()], _compiled_trace)
    print(f"{len(built)} traces from {len(args.files)} scenarios written to {out}")
    return 0
