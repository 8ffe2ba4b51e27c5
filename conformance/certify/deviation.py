"""The deviation report: which named readings an implementation that departs from a profile
would need to conform, and what no reading explains.

The implementation's recorded answers (conformance/certify/playback.py) are judged again under
the profile read with deviations from the catalogue (model.config.deviations: an option at
another profile's value, a pinned point at another alternative), so the implementation runs once.
The search is greedy: it adds the deviation under which the most traces conform (ties: the one
letting departing traces run furthest, then name order), while one helps. Where none helps
alone, it tries pairs, one of which changed how some trace departs (Kafka's first Fetch, to
itself, needs both unattached_discovery and discovery_includes_self). Last, it drops each
deviation the others do without. What still does not conform is unexplained: a bug, or a
reading the catalogue does not name.

The model is deterministic, so a trace whose judging under one reading read no option and
consulted no point that another reading sets otherwise judges the same under both: a trace is
judged again only where a candidate may change its verdict (Trial.judges_alike), which leaves
the search's steps, its budget and its outcome as if every trace were judged every time.
"""

import contextlib
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from adapters.process_lifetime import forked_map
from conformance.certify.playback import Playback, Recording
from conformance.certify.replay import CONFORMS, DEPARTS, NOT_APPLICABLE, TraceResult, failure_text, replay
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


class Trial(NamedTuple):
    """Traces judged under a reading, each with the options its judging read and the choice points
    it consulted. The model is deterministic: under another reading that sets none of them
    otherwise, a trace judges the same, so it need not be judged again."""

    reading: frozenset[Deviation]
    results: dict[str, TraceResult]
    touched: dict[str, tuple[frozenset[str], frozenset[str]]]

    def judges_alike(self, path: str, reading: frozenset[Deviation]) -> bool:
        """Whether `path`, judged here, judges the same under `reading`: its judging read no option
        and consulted no point that the two readings set otherwise."""
        options, points = self.touched[path]
        return not any(d.option in options or d.point in points for d in self.reading ^ reading)

    def merged(self, other: "Trial") -> "Trial":
        return Trial(self.reading, self.results | other.results, self.touched | other.touched)


def reused(known: list[Trial], reading: frozenset[Deviation], paths: list[str]) -> tuple[Trial, list[str]]:
    """What trials already made say of `paths` under `reading` (each trace taken from the first
    that judges it alike), and the traces left to judge."""
    results, touched, left = {}, {}, []
    for path in paths:
        source = next((trial for trial in known if path in trial.touched and trial.judges_alike(path, reading)), None)
        if source is None:
            left.append(path)
        else:
            results[path], touched[path] = source.results[path], source.touched[path]
    return Trial(reading, results, touched), left


class Judge:
    """Judges recorded traces under the profile read with some deviations, counting the replays;
    a round's candidates are judged in `jobs` processes at once (forked_map). `reference` is a
    trial of the reading chosen so far, on every trace judged: a trace that judges alike under
    another reading is taken from it instead of judged again, and still counted."""

    def __init__(self, corpus: dict[str, tuple[Trace, Recording]], budget: int, jobs: int = 1) -> None:
        self.corpus = corpus
        self.left = budget
        self.jobs = jobs
        self.reference = Trial(frozenset(), {}, {})

    def __call__(self, chosen: tuple[Deviation, ...], paths: list[str]) -> Trial:
        self.left -= len(paths)
        known, left = reused([self.reference], frozenset(chosen), paths)
        return known.merged(self.trial(chosen, left))

    def trial(self, chosen: tuple[Deviation, ...], paths: list[str]) -> Trial:
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
        return Trial(frozenset(chosen), results, touched)


def settles(result: TraceResult) -> bool:
    """No departure left: the trace conforms, or conforms up to a step the implementation
    declined for want of a capability (not applicable from there: nothing there to explain)."""
    return result.verdict in (CONFORMS, NOT_APPLICABLE)


def conforming(results: dict[str, TraceResult]) -> set[str]:
    return {path for path, result in results.items() if settles(result)}


class Round:
    """One round of the search: the additions to the deviations chosen, each judged on the traces
    not conforming yet and, where it helps them, on those conforming (which it must not break)."""

    def __init__(self, judge: Judge, chosen: tuple[Deviation, ...], now: dict[str, TraceResult], departing: list[str], kept: list[str], progress) -> None:
        self.judge, self.chosen, self.now, self.progress = judge, chosen, now, progress
        self.unsettled = [path for path in departing if not settles(now[path])]
        self.settled = [path for path in departing + kept if settles(now[path])]
        self.best: tuple[Deviation, ...] | None = None
        self.best_score = (0, 0)  # traces conforming more, steps run further in those that do not
        self.best_trial = Trial(frozenset(), {}, {})  # the best addition's, on every trace judged
        self.moving: list[Deviation] = []  # the single additions that changed how some trace departs
        self.singles: dict[Deviation, Trial] = {}  # each single addition's trial on the unsettled traces

    def plan(self, addition: tuple[Deviation, ...]) -> tuple[Trial, list[str]]:
        """What judging an addition takes: a trace judges as under the reading chosen so far, or as
        under one of a pair's deviations alone (judged in the singles), where that judging touched
        nothing the addition sets; the trial those give, and the traces left to judge."""
        known = [self.judge.reference, *(self.singles[d] for d in addition if d in self.singles)]
        return reused(known, frozenset((*self.chosen, *addition)), self.unsettled)

    def try_all(self, additions: list[tuple[Deviation, ...]]) -> bool:
        """Judge each addition, keeping the best; False where the budget ran out first. The
        additions are judged on the unsettled traces ahead, in the judge's processes, and taken
        in order here, so the outcome is the same for any number of them. An addition is judged
        again only on the traces where it may judge otherwise (plan), and counts as judged on all."""
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
                    score = (gained - (len(self.settled) - len(conforming(checked.results))), further)
                    if score > self.best_score:
                        self.best, self.best_score, self.best_trial = addition, score, found.merged(checked)
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
    kept = [r.trace for r in results if settles(r) and r.trace in corpus]
    catalogue = deviations(profile)
    chosen: tuple[Deviation, ...] = ()
    now = {r.trace: r for r in results if r.trace in corpus}
    judge.reference = judge.trial(chosen, departing + kept)
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
        now |= search.best_trial.results
        judge.reference = search.best_trial
    chosen = needed(judge, chosen, [path for path in departing + kept if settles(now[path])])
    judge.reference = judge(chosen, departing + kept)
    final = judge.reference.results
    conform = sorted(conforming(final))
    explained = tuple(
        Explained(deviation=d.name, traces=tuple(sorted(set(conform) - conforming(judge(tuple(c for c in chosen if c != d), conform).results))))
        for d in chosen
    )
    read = [final.get(r.trace, r) for r in results if r.verdict in (CONFORMS, DEPARTS)]
    unexplained = tuple(Unexplained(trace=r.trace, failure=failure_text(r)) for r in read if not settles(r))
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
        if len(conforming(judge(without, conform).results)) == len(conform):
            chosen = without
    return chosen
