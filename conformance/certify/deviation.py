"""The deviation report: which named readings an implementation that departs from a profile
would need to conform, and what no reading explains.

The implementation's recorded answers (conformance/certify/playback.py) are judged again under
the profile read with deviations from the catalogue (model.config.deviations: an option at
another profile's value, a pinned point at another alternative), so the implementation runs once.
The search is greedy: it adds the deviation under which the most traces conform (ties: the one
letting departing traces run furthest, then name order), while one helps. Where none helps
alone, it tries pairs, one of which changed how some trace departs (Kafka's first Fetch, to
itself, needs both unattached_discovery and discovery_includes_self); a pair is not judged
again where one of its deviations, judged alone, read no option and consulted no point the
other sets, since the model is deterministic and the pair then judges as that one. Last, it drops each
deviation the others do without. What still does not conform is unexplained: a bug, or a
reading the catalogue does not name.
"""

import contextlib
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from adapters.process_lifetime import forked_map
from conformance.certify.playback import Playback, Recording
from conformance.certify.replay import CONFORMS, DEPARTS, TraceResult, failure_text, replay
from model.config import Deviation, NodeConfig, Options, OptionsRead, deviations, read_with
from spec.trace import Trace

DEFAULT_BUDGET = 1_000_000  # trace replays the search may spend; past it, it reports what it has found


class Explained(msgspec.Struct, frozen=True, kw_only=True):
    """A deviation found, and the traces that conform with it and not without it."""

    deviation: str
    traces: tuple[str, ...]


class Unexplained(msgspec.Struct, frozen=True, kw_only=True):
    """A trace that does not conform even read with the deviations found, and why, read so."""

    trace: str
    failure: str


class Deviations(msgspec.Struct, frozen=True, kw_only=True):
    profile: str  # the profile the deviations are from
    departed: int  # traces departing under it
    explained: tuple[Explained, ...]  # in name order
    unexplained: tuple[Unexplained, ...]  # in corpus order
    candidates: int  # the deviations of the catalogue tried
    complete: bool  # False: the budget ran out, and the search stopped where it was


class Judge:
    """Judges recorded traces under the profile read with some deviations, counting the replays;
    a round's candidates are judged in `jobs` processes at once (forked_map)."""

    def __init__(self, corpus: dict[str, tuple[Trace, Recording]], budget: int, jobs: int = 1) -> None:
        self.corpus = corpus
        self.left = budget
        self.jobs = jobs

    def __call__(self, chosen: tuple[Deviation, ...], paths: list[str]) -> dict[str, TraceResult]:
        self.left -= len(paths)
        return self.judged(chosen, paths)

    def judged(self, chosen: tuple[Deviation, ...], paths: list[str]) -> dict[str, TraceResult]:
        """The traces judged under the reading, uncounted."""
        return self.trial(chosen, paths).results

    def trial(self, chosen: tuple[Deviation, ...], paths: list[str]) -> "Trial":
        """The traces judged under the reading, uncounted, each with the options its judging read
        and the choice points it consulted."""
        results, touched = {}, {}
        for path in paths:
            trails: list[OptionsRead] = []
            points: set[str] = set()

            def reading(config: NodeConfig) -> NodeConfig:
                read = read_with(config, chosen)
                trails.append(OptionsRead(read.options))
                return msgspec.structs.replace(read, options=trails[-1])

            results[path] = replay(Playback(self.corpus[path][1]), self.corpus[path][0], path, reading=reading, consulted=points)
            touched[path] = (frozenset(name for trail in trails for name in trail.read), frozenset(points))
        return Trial(results, touched)


class Trial(NamedTuple):
    """Traces judged under a reading, and per trace the options read and the points consulted
    judging it: a deviation that sets none of them, added, judges that trace the same."""

    results: dict[str, TraceResult]
    touched: dict[str, tuple[frozenset[str], frozenset[str]]]

    def touching(self, deviation: Deviation) -> list[str]:
        """The traces whose judging read the option the deviation sets, or consulted the point it pins."""
        return [path for path, (options, points) in self.touched.items() if deviation.option in options or deviation.point in points]

    def merged(self, other: "Trial") -> "Trial":
        return Trial(self.results | other.results, self.touched | other.touched)


def conforming(results: dict[str, TraceResult]) -> set[str]:
    return {path for path, result in results.items() if result.verdict == CONFORMS}


class Round:
    """One round of the search: the additions to the deviations chosen, each judged on the traces
    not conforming yet and, where it helps them, on those conforming (which it must not break)."""

    def __init__(self, judge: Judge, chosen: tuple[Deviation, ...], now: dict[str, TraceResult], departing: list[str], kept: list[str], progress) -> None:
        self.judge, self.chosen, self.now, self.progress = judge, chosen, now, progress
        self.unsettled = [path for path in departing if now[path].verdict != CONFORMS]
        self.settled = [path for path in departing + kept if now[path].verdict == CONFORMS]
        self.best: tuple[Deviation, ...] | None = None
        self.best_score = (0, 0)  # traces conforming more, steps run further in those that do not
        self.best_results: dict[str, TraceResult] = {}
        self.moving: list[Deviation] = []  # the single additions that changed how some trace departs
        self.singles: dict[Deviation, Trial] = {}  # each single addition's trial on the unsettled traces

    def plan(self, addition: tuple[Deviation, ...]) -> tuple[Trial, list[str]]:
        """What judging an addition takes: a pair judges as one of its deviations alone (judged
        in the singles) on each trace whose judging did not touch what the other sets, so only
        the rest is judged again; the trial it starts from, and the traces to judge."""
        plans = [(Trial({}, {}), self.unsettled)]
        if len(addition) == 2:
            plans += [(self.singles[alone], self.singles[alone].touching(other)) for alone, other in (addition, addition[::-1]) if alone in self.singles]
        return min(plans, key=lambda plan: len(plan[1]))

    def try_all(self, additions: list[tuple[Deviation, ...]]) -> bool:
        """Judge each addition, keeping the best; False where the budget ran out first. The
        additions are judged on the unsettled traces ahead, in the judge's processes, and taken
        in order here, so the outcome is the same for any number of them. A pair is judged again
        only on the traces where it may judge otherwise than one of its deviations alone (plan),
        and counts as judged on all."""
        plans = [self.plan(addition) for addition in additions]
        judging = [((*self.chosen, *addition), paths) for addition, (_, paths) in zip(additions, plans) if paths]
        judged = forked_map(lambda item: self.judge.trial(*item), judging, self.judge.jobs)
        with contextlib.closing(judged):
            for tried, (addition, (start, paths)) in enumerate(zip(additions, plans), start=1):
                found = start.merged(next(judged)) if paths else start
                if len(addition) == 1:
                    self.singles[addition[0]] = found
                trial = found.results
                if self.judge.left < len(self.unsettled) + len(self.settled):
                    return False
                reading = (*self.chosen, *addition)
                self.judge.left -= len(self.unsettled)
                if len(addition) == 1 and any(trial[path].divergence != self.now[path].divergence for path in self.unsettled):
                    self.moving.append(addition[0])
                gained = len(conforming(trial))
                further = sum(trial[path].steps_run - self.now[path].steps_run for path in self.unsettled)
                if gained or further > 0:
                    checked = self.judge(reading, self.settled)
                    score = (gained - (len(self.settled) - len(conforming(checked))), further)
                    if score > self.best_score:
                        self.best, self.best_score, self.best_results = addition, score, trial | checked
                if self.progress:
                    self.progress("deviations", tried, len(additions), len(self.chosen))
            return True


def explain(
    profile: str,
    results: list[TraceResult],
    corpus: dict[str, tuple[Trace, Recording]],
    budget: int = DEFAULT_BUDGET,
    progress: Callable[[str, int, int, int], None] | None = None,
    jobs: int = 1,
) -> Deviations:
    """The smallest set of deviations from `profile` the search finds under which the departing
    traces conform, given the live results and, for the KRaft traces of the profile, the trace
    and its recording by path; other departing traces are unexplained as they are.
    `progress("deviations", tried, candidates, found)` after each candidate; the candidates
    judged in `jobs` processes at once, with the same outcome for any number."""
    judge = Judge(corpus, budget, jobs)
    departing = [r.trace for r in results if r.verdict == DEPARTS and r.trace in corpus]
    kept = [r.trace for r in results if r.verdict == CONFORMS and r.trace in corpus]
    catalogue = deviations(profile)
    chosen: tuple[Deviation, ...] = ()
    now = {r.trace: r for r in results if r.trace in corpus}
    complete = True
    while complete:
        search = Round(judge, chosen, now, departing, kept, progress)
        singles = [(d,) for d in catalogue if d.key not in {c.key for c in chosen}]
        complete = search.try_all(singles)
        if complete and search.best is None:
            pairs = [(a, *b) for a in search.moving for b in singles if b[0].key != a.key and (b[0] not in search.moving or a.name < b[0].name)]
            complete = search.try_all(pairs)
        if search.best is None:
            break
        chosen = tuple(sorted((*chosen, *search.best)))
        now |= search.best_results
    chosen = needed(judge, chosen, [path for path in departing + kept if now[path].verdict == CONFORMS])
    final = judge(chosen, departing + kept)
    conform = sorted(conforming(final))
    explained = tuple(
        Explained(deviation=d.name, traces=tuple(sorted(set(conform) - conforming(judge(tuple(c for c in chosen if c != d), conform)))))
        for d in chosen
    )
    read = [final.get(r.trace, r) for r in results if r.verdict in (CONFORMS, DEPARTS)]
    unexplained = tuple(Unexplained(trace=r.trace, failure=failure_text(r)) for r in read if r.verdict != CONFORMS)
    return Deviations(
        profile=profile,
        departed=sum(r.verdict == DEPARTS for r in results),
        explained=explained,
        unexplained=unexplained,
        candidates=len(catalogue),
        complete=complete,
    )


def needed(judge: Judge, chosen: tuple[Deviation, ...], conform: list[str]) -> tuple[Deviation, ...]:
    """The deviations chosen, less each the others do without: the traces in `conform` still conform."""
    for deviation in chosen:
        without = tuple(c for c in chosen if c != deviation)
        if len(conforming(judge(without, conform))) == len(conform):
            chosen = without
    return chosen
