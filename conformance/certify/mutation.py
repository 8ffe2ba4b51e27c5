"""The mutation score: the corpus replayed through every seeded-bug adapter, and where each is caught."""

from pathlib import Path

import msgspec

from adapters.mutants import MUTANTS, mutant_adapter
from conformance.certify.replay import replay, trace_files
from conformance.certify.verdicts import verdicts
from spec import trace as traces


class MutantScore(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str
    failed: int  # traces the mutant fails
    rule: str  # the rule it breaks most consistently: the largest share of its traces failing
    first: str  # where it is first caught: trace and step


def mutation_scores(corpus: Path, verify: bool = True) -> list[MutantScore]:
    """Replay the corpus through every mutant (no reports): which traces catch it, and on which rule."""
    loaded = []
    for path in trace_files(corpus, verify):
        try:
            loaded.append((path, traces.read(path)))
        except traces.TraceError:
            continue  # an unreadable trace catches no mutant (certify names it)
    scores = []
    for mutant in MUTANTS.values():
        results = [replay(mutant_adapter(mutant.name), trace, str(path)) for path, trace in loaded]
        failing = [r for r in results if not r.passed]
        rule, first = "-", "-"
        if failing:
            departed = [v for v in verdicts(results) if v.verdict == "departs"]
            rule = max(departed, key=lambda v: v.traces_failed / (v.traces_failed + v.steps_passed)).rule if departed else "-"
            earliest = min(failing, key=lambda r: (r.divergence.step if r.divergence else r.steps_run + 1, r.trace))
            first = f"{Path(earliest.trace).name} step {earliest.divergence.step if earliest.divergence else earliest.steps_run + 1}"
        scores.append(MutantScore(name=mutant.name, description=mutant.description, failed=len(failing), rule=rule, first=first))
    return scores
