"""Every shipped corpus has measured power: each seeded bug that applies to it (a KRaft mutant to
a KRaft corpus, an ISR one to a corpus with ISR traces) departs on at least
MIN_CATCHING_TRACES of its traces that every allowed reading of the specification conforms to.

Where a corpus still falls short, the shortfall is named here, so that closing it, or a new one
opening, fails this test and is looked at."""

import pytest

from adapters.mutants import MUTANTS
from conformance.certify.mutation import MIN_CATCHING_TRACES, mutation_scores
from conformance.corpus.generate import shipped_corpora
from spec import trace as traces

# Known shortfalls, by corpus profile: kafka-4.3's searches reach no diverging logs (pre-votes make
# the path to a second leader of a later epoch longer than the corpus-diverge search's budget),
# so its truncation mutants are caught by fewer than three traces.
SHORT = {
    "kip595": set(),
    "kafka-3.9": set(),
    "kafka-4.3": {"fetch-no-diverging-epoch", "fetch-diverging-below", "truncate-by-offset-only"},
}


@pytest.mark.parametrize("profile", sorted(SHORT))
def test_every_applicable_mutant_is_caught_by_at_least_three_traces(profile):
    corpus = shipped_corpora()[profile]
    systems = {traces.read_header(path).system for path in corpus.glob("*.jsonl")}
    scores = {score.name: score.failed for score in mutation_scores(corpus)}
    applicable = {name for name, mutant in MUTANTS.items() if mutant.system in systems}
    short = {name for name in applicable if scores[name] < MIN_CATCHING_TRACES}
    assert short == SHORT[profile], {name: scores[name] for name in short ^ SHORT[profile]}
