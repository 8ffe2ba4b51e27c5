"""`kraftcheck check --liveness`: the fair-cycle search's summary, its lassos shown and saved."""

import json
from pathlib import Path

import msgspec
from tabulate import tabulate

from conformance.diagrams.kraft import cluster_svg
from conformance.explore.check import STOPPED_BY, counterexample_steps
from conformance.explore.configs import CheckConfig
from conformance.explore.kraft_liveness import KraftLiveness
from conformance.explore.liveness_search import Lasso, LivenessResult, Verdict
from model.events import TimerKind
from spec.rules import rule
from spec.trace import write_bytes_atomically


def liveness_verdict(verdict: Verdict, complete: bool) -> str:
    """A property's verdict in words: a cycle cut by the bounds is counted, never called a proof."""
    if verdict.lasso is not None:
        return "violated (wedged)" if verdict.lasso.wedged else "violated"
    if not complete:
        return "not violated so far"
    if verdict.at_bounds:
        return f"holds inside the bounds ({verdict.at_bounds:,} cycles end at them)"
    return "holds"


def summary(name: str, config: CheckConfig, live: KraftLiveness, result: LivenessResult, timers: frozenset[TimerKind]) -> dict:
    """The run as one JSON-ready object (`check --liveness --json`)."""
    violated = {c.violation.rule for c in result.counterexamples}
    safety_verdict = "holds" if result.complete else "not violated so far"
    properties = {rule_id: ("violated" if rule_id in violated else safety_verdict) for rule_id in live.property_ids()}
    properties |= {v.rule: liveness_verdict(v, result.complete) for v in result.verdicts}
    return {
        "config": name,
        "bounds": msgspec.to_builtins(config),
        "liveness": True,
        "fair_timers": sorted(kind.value for kind in timers),
        "symmetry": False,
        "complete": result.complete,
        "stopped_by": result.stopped,
        "distinct_states": result.distinct,
        "transitions": result.transitions,
        "wall_s": round(result.seconds, 3),
        "search_s": round(result.search_seconds, 3),
        "engine": "in-process" if result.workers == 1 else "sharded",
        "workers": result.workers,
        "distinct_per_s": round(result.distinct / result.seconds) if result.seconds else 0,
        "properties": properties,
        "cycles": [
            {
                "property": v.rule,
                "non_goal_components": v.components,
                "at_bounds": v.at_bounds,
                "unfair": v.unfair,
                "lasso": None if v.lasso is None else {"prefix_steps": len(v.lasso.prefix) - 1, "cycle_steps": len(v.lasso.cycle), "wedged": v.lasso.wedged},
            }
            for v in result.verdicts
        ],
        "violations": [{"property": c.violation.rule, "detail": c.violation.detail, "length": len(c.path) - 1} for c in result.counterexamples],
    }


def summary_table(data: dict) -> str:
    rows = [
        ("configuration", data["config"]),
        ("exhaustive", "yes" if data["complete"] else f"no (stopped early{STOPPED_BY.get(data['stopped_by'], '')})"),
        ("distinct states", f"{data['distinct_states']:,}"),
        ("transitions", f"{data['transitions']:,}"),
        ("wall seconds", f"{data['wall_s']:.1f} (the search {data['search_s']:.1f}, then the cycles judged)"),
        ("engine", f"{data['engine']}, {data['workers']} worker{'s' if data['workers'] > 1 else ''}"),
        ("distinct states/s", f"{data['distinct_per_s']:,}"),
        ("symmetry reduction", "off (fairness is per node and per message)"),
        ("fair timers", ", ".join(data["fair_timers"]) or "none"),
        ("node choices", "every allowed outcome" if data["bounds"]["every_choice"] else "the model's default reading"),
    ]
    cycles = [
        (c["property"], data["properties"][c["property"]], f"{c['non_goal_components']:,}", f"{c['at_bounds']:,}", f"{c['unfair']:,}")
        for c in data["cycles"]
    ]
    safety = [(rule_id, verdict) for rule_id, verdict in data["properties"].items() if not rule_id.startswith("LIVE-")]
    return "\n\n".join(
        (
            tabulate(rows, tablefmt="simple"),
            tabulate(safety, headers=("property", "verdict"), tablefmt="simple"),
            tabulate(cycles, headers=("liveness", "verdict", "cycles without the goal", "at the bounds", "unfair"), tablefmt="simple"),
        )
    )


def lasso_steps(live: KraftLiveness, lasso: Lasso) -> list[dict]:
    """The lasso's steps (conformance.explore.check.counterexample_steps), each marked whether it is on the cycle."""
    steps = counterexample_steps(live, lasso.prefix + lasso.cycle)
    for step in steps:
        step["cycle"] = step["step"] >= len(lasso.prefix)
    return steps


def how_it_repeats(verdict: Verdict) -> str:
    lasso = verdict.lasso
    title = rule(verdict.rule).title
    if not lasso.cycle:
        return f"{verdict.rule} {title}: the run stays after step {len(lasso.prefix) - 1}, nothing fair enabled"
    first, last = len(lasso.prefix), len(lasso.prefix) + len(lasso.cycle) - 1
    wedged = "; no step but a fault leads out" if lasso.wedged else ""
    return f"{verdict.rule} {title}: steps {first} to {last} repeat for ever, every fair action taken{wedged}"


def save_lasso(directory: Path, name: str, data: dict, live: KraftLiveness, verdict: Verdict, steps: list[dict]) -> tuple[Path, Path]:
    """The lasso as JSON Lines (a header naming where the cycle starts, then the steps) and as
    a sequence diagram (SVG) whose cycle steps are numbered with a ↻."""
    lasso = verdict.lasso
    stem = f"lasso-{name}-{verdict.rule}"
    header = {
        "kind": "kraftcheck-lasso",
        "format_version": 1,
        "config": name,
        "bounds": data["bounds"],
        "fair_timers": data["fair_timers"],
        "property": verdict.rule,
        "cycle_from_step": len(lasso.prefix),
        "cycle_steps": len(lasso.cycle),
        "wedged": lasso.wedged,
        "detail": how_it_repeats(verdict),
    }
    lines = [json.dumps(header)] + [json.dumps(step) for step in steps]
    jsonl = directory / f"{stem}.jsonl"
    write_bytes_atomically(jsonl, "".join(line + "\n" for line in lines).encode())
    actions = [live.action(key) for key, _state in (lasso.prefix + lasso.cycle)[1:]]
    title = f"{name}: {verdict.rule} violated by a lasso of {len(lasso.prefix) - 1} + {len(lasso.cycle)} steps"
    svg = cluster_svg(live.cluster, actions, title, cycle_from=len(lasso.prefix) - 1, verdicts=[how_it_repeats(verdict)])
    diagram = directory / f"{stem}.svg"
    write_bytes_atomically(diagram, svg.encode())
    return jsonl, diagram
