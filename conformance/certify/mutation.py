"""The mutation score: the corpus replayed through every seeded-bug adapter, and where each is caught.

A mutant counts as caught only by traces it departs from that every allowed reading of the
specification conforms to (conformance/certify/precision.py): a trace that failed some allowed
reading too would catch a choice, not a bug.
"""

from pathlib import Path

import msgspec

from adapters.mutants import MUTANTS, mutant_adapter
from conformance.certify.precision import load_corpus, pinned_points, precision_adapters, run_precision
from conformance.certify.replay import DEPARTS, replay, trace_files
from conformance.certify.verdicts import verdicts

MIN_CATCHING_TRACES = 3  # a mutant caught by fewer traces is caught by luck more than by design


class MutantScore(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str
    failed: int  # traces the mutant departs from that every allowed reading conforms to
    rule: str  # the rule it breaks most consistently: the largest share of its traces failing
    first: str  # where it is first caught: trace and step


def mutation_scores(corpus: Path, verify: bool = True) -> list[MutantScore]:
    """Replay the corpus through every mutant (no reports): which traces catch it, and on which rule."""
    loaded = load_corpus(trace_files(corpus, verify))
    _, precise = run_precision(loaded, precision_adapters(combinations=2, random_runs=2, pinned=pinned_points(loaded)))
    scores = []
    for mutant in MUTANTS.values():
        results = [replay(mutant_adapter(mutant.name), trace, str(path)) for path, trace in loaded]
        failing = [r for r in results if r.verdict == DEPARTS and r.trace in precise]
        rule, first = "-", "-"
        if failing:
            departed = [v for v in verdicts(results) if v.verdict == DEPARTS]
            rule = max(departed, key=lambda v: v.traces_failed / (v.traces_failed + v.steps_passed)).rule if departed else "-"
            earliest = min(failing, key=lambda r: (r.divergence.step, r.trace))
            first = f"{Path(earliest.trace).name} step {earliest.divergence.step}"
        scores.append(MutantScore(name=mutant.name, description=mutant.description, failed=len(failing), rule=rule, first=first))
    return scores
