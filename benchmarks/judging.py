"""Benchmark: judging again only where a reading may step otherwise, against judging everything.

Two searches judge a corpus many times over under other readings of the model: the deviation
search of `certify` (each candidate reading on the traces still departing, the recorded answers
played back) and `mutants --score` (every mutant, profile reading and pick replayed through the
corpus). Both skip a trace where the reading cannot change it: the deviation search where the
trace's judging read no option and consulted no point the candidate sets otherwise
(conformance/certify/deviation.py), the scoring where no step of the reference's run touched what
the adapter changes (conformance/certify/mutation.py TouchedRun). This prints, for each, the wall
seconds with the shortcut and with every trace judged (the shortcut switched off), and whether
both found the same.

The deviation search is measured on `reference:profile=PROFILE` (kafka-4.3 by default) as the
implementation, certified against kip595's corpus (`traces/`, every STEP-th trace): it
departs as Kafka does, at the start of nearly every trace. The scoring is measured on the
profile's own corpus, `traces/PROFILE/`, likewise sampled.

    .venv/bin/python benchmarks/judging.py [--profile kafka-4.3] [--step 4] [--jobs 1]
"""

import argparse
import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
from tabulate import tabulate

from adapters.registry import adapter_factory
from conformance.certify import deviation, mutation
from conformance.certify.certification import certify
from conformance.certify.replay import replay, trace_files
from conformance.corpus.generate import DEFAULT_CORPUS, shipped_corpora


@contextlib.contextmanager
def judging_everything() -> Iterator[None]:
    """Both shortcuts off: every candidate judged on every trace, every adapter through every trace."""
    reused, replay_through = deviation.reused, mutation.TouchedRun.replay_through
    deviation.reused = lambda known, reading, paths: (deviation.Trial(reading, {}, {}), list(paths))
    mutation.TouchedRun.replay_through = lambda self, adapter, reading: [replay(adapter, trace, str(path)) for path, trace in self.loaded]
    try:
        yield
    finally:
        deviation.reused, mutation.TouchedRun.replay_through = reused, replay_through


def timed(work: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    found = work()
    return time.perf_counter() - start, found


def sample(files: list[Path], step: int, directory: Path) -> Path:
    directory.mkdir(parents=True)
    for path in files[::step]:
        shutil.copy(path, directory / path.name)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="kafka-4.3", help="the implementation's profile, and the corpus scored (default kafka-4.3)")
    parser.add_argument("--step", type=int, default=4, help="every STEP-th trace of each corpus (default 4; 1: all of it)")
    parser.add_argument("--jobs", type=int, default=1, help="processes judging at once (default 1)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="kraftcheck-judging-") as temporary:
        work = Path(temporary)
        kip595 = sample(trace_files(DEFAULT_CORPUS), args.step, work / "kip595")
        scored = sample(trace_files(shipped_corpora()[args.profile]), args.step, work / args.profile)

        def search(run: str):
            with adapter_factory(f"reference:profile={args.profile}") as make:
                report = certify(f"reference:profile={args.profile}", make, kip595, work / run, shorten_budget=0, timings=False, jobs=args.jobs)
            return msgspec.structs.replace(report.deviations, explained=tuple(msgspec.structs.replace(e, traces=tuple(Path(t).name for t in e.traces)) for e in report.deviations.explained))

        def scores(_run: str):  # the run's name serves the search's output directory only
            return mutation.mutation_scores(scored, workers=args.jobs)

        for name, traces, work_once in (
            (f"deviation search: reference under {args.profile} vs kip595", len(trace_files(kip595)), search),
            (f"mutants --score: traces/{args.profile}", len(trace_files(scored)), scores),
        ):
            fast, found = timed(lambda: work_once("fast"))
            with judging_everything():
                slow, again = timed(lambda: work_once("slow"))
            rows.append((name, traces, f"{fast:.1f}", f"{slow:.1f}", f"{slow / fast:.1f}x", "yes" if found == again else "NO"))
    print(tabulate(rows, headers=("search", "traces", "judged where it may differ (s)", "everything judged (s)", "speed-up", "same result"), colalign=("left", "right", "right", "right", "right", "left")))


if __name__ == "__main__":
    main()
