"""Certification: replay a corpus through an adapter and report, rule by rule, where it departs.

The reports (Markdown for people, JSON for tools, JUnit XML for CI) are written atomically
under the output directory, with a shortened reproducing trace for every divergence, and, where
traces depart, the deviations from the corpus's profile that explain them (conformance/certify/deviation.py).
"""

import os
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from adapters.contract import Adapter
from conformance.certify.deviation import DEFAULT_BUDGET as DEVIATION_BUDGET
from conformance.certify.deviation import explain
from conformance.certify.parallel import replay_all
from conformance.certify.playback import Recording
from conformance.certify.replay import TraceResult, of_systems, trace_files
from conformance.certify.spark_replay import collected, coverage_sql, replay_on_spark, totals_sql, write_corpus_tables
from conformance.certify.reports.publish import REPORT_FILES, check_report_directory, divergence_path, write_reports
from conformance.certify.shorten import DEFAULT_BUDGET, shorten
from conformance.certify.replay import CONFORMS, DEPARTS, ERROR
from conformance.certify.verdicts import Certification, coverage_matrix, totals
from conformance.corpus.manifest import generated_profiles
from conformance.text import readable
from conformance.outputs import OutputError
from conformance.spark.session import SparkRun
from model.config import ConfigError
from spec import trace as traces
from spec.trace import Trace


MAX_JOBS = 64  # processes replaying at once, at most


def job_count(requested: int | None) -> int:
    """--jobs as asked for, or one per core; refused outside 1..MAX_JOBS."""
    jobs = (os.cpu_count() or 1) if requested is None else requested
    if not 1 <= jobs <= MAX_JOBS:
        raise ConfigError(f"--jobs must be between 1 and {MAX_JOBS}, got {jobs}")
    return jobs


def certify(
    adapter_name: str,
    make_adapter: Callable[[], Adapter],
    corpus: Path,
    out: Path,
    progress: Callable[[str, int, int, int], None] | None = None,
    systems: tuple[str, ...] | None = None,
    verify: bool = True,
    shorten_budget: int = DEFAULT_BUDGET,
    jobs: int = 1,
    timings: bool = True,
    spark: SparkRun | None = None,
    deviation_budget: int = DEVIATION_BUDGET,
) -> Certification:
    """Replay every trace of the corpus (of the given systems only, if any), shorten each
    divergence within the budget of candidate replays, publish the reports.

    Everything that can be checked before the work is: the output directory, and the corpus
    against its manifest (unless `verify` is off). `progress(stage, done, total, failed)`.
    `jobs` processes replay traces at once (conformance/certify/parallel.py; `make_adapter` then
    comes from adapter_factory); the results, and so the reports, are in corpus order whatever
    `jobs` is. Without `timings`, the reports carry no wall times, so the same corpus and
    implementation give the same bytes. With `spark`, the corpus becomes tables, the traces are
    replayed on its executors and the totals drawn with Spark SQL (conformance/certify/spark_replay.py):
    the same reports. With a `deviation_budget` of trace replays (0: none), a run here records
    the implementation's answers, and where traces depart, searches the deviations from the
    corpus's profile that explain them (not on Spark: the answers stay on its executors).
    """
    start = time.perf_counter()
    check_report_directory(out)
    if corpus.is_dir() and out.resolve().is_relative_to(corpus.resolve()):
        raise OutputError(f"{out}: inside the corpus {corpus}; its shortened traces would join the corpus: choose --out outside it")
    files = of_systems(trace_files(corpus, verify), systems)
    if not files:
        raise traces.TraceError(f"{corpus}: no traces of the system(s) {', '.join(systems or ())}")
    recordings: dict[str, Recording] = {}
    if spark is None:
        results, implementation, recordings = replayed_here(make_adapter, files, verify, jobs, progress, record=deviation_budget > 0)
    else:
        origin = getattr(make_adapter, "origin", None)
        if origin is None:
            raise TypeError("certifying on Spark needs an adapter factory from adapters.registry.adapter_factory")
        tables = write_corpus_tables(spark.session, files, verify, spark.work)
        frame = replay_on_spark(spark.session, origin, tables, spark.partitions)
        results, implementation = collected(frame)
        if progress:
            progress("traces", len(results), len(results), sum(r.verdict in (DEPARTS, ERROR) for r in results))
    read = []
    recorded: dict[str, tuple[Trace, Recording]] = {}  # KRaft traces judged, with their recordings: the deviation search's
    shortened: dict[str, str] = {}  # divergent trace -> where its shortened reproduction is published
    reproductions: dict[str, Trace] = {}  # published path -> the shortened trace
    divergent = sum(r.divergence is not None for r in results)
    for path, result in zip(files, results):
        try:
            built = traces.read(path)
        except traces.TraceError:
            continue
        read.append(built)
        if built.header.system == "kraft" and result.verdict in (CONFORMS, DEPARTS) and str(path) in recordings:
            recorded[str(path)] = built, recordings[str(path)]
        if result.divergence is not None:
            target = str(divergence_path(out, path))
            shortened[str(path)] = target
            reproductions[target], tried = shorten(make_adapter, built, result.divergence.step, shorten_budget)
            shorten_budget -= tried
            if progress:
                progress("shortening", len(reproductions), divergent, shorten_budget)
    if spark is None:
        concluded, coverage = totals(results), coverage_matrix(read)
    else:
        concluded, coverage = totals_sql(spark.session, frame), coverage_sql(spark.session, tables)
    profile = generated_under(corpus, read)
    deviations = None
    if recorded and concluded.departed and profile and ", " not in profile:
        deviations = explain(profile, results, recorded, deviation_budget, progress, jobs)
    if not timings:
        results = [msgspec.structs.replace(result, seconds=None) for result in results]
    report = Certification(
        adapter=adapter_name,
        implementation=readable(implementation),
        corpus=str(corpus),
        profile=profile,
        **msgspec.structs.asdict(concluded),
        seconds=round(time.perf_counter() - start, 3) if timings else None,
        rules_failed=concluded.rules_failed,
        results=tuple(results),
        shortened=shortened,
        coverage=coverage,
        deviations=deviations,
    )
    write_reports(out, report, reproductions)
    return report


def replayed_here(
    make_adapter: Callable[[], Adapter],
    files: list[Path],
    verify: bool,
    jobs: int,
    progress: Callable[[str, int, int, int], None] | None,
    record: bool = False,
) -> tuple[list[TraceResult], str, dict[str, Recording]]:
    """Every trace's result in corpus order, replayed by `jobs` processes here, what the
    implementation said it is, and with `record`, its answers by trace (conformance/certify/playback.py)."""
    results = []
    recordings = {}
    failed = 0
    implementation = ""
    for number, (result, said, recording) in enumerate(replay_all(make_adapter, files, verify, jobs, record), start=1):
        results.append(result)
        if recording is not None:
            recordings[result.trace] = recording
        implementation = said or implementation
        failed += result.verdict in (DEPARTS, ERROR)
        if progress:
            progress("traces", number, len(files), failed)
    return results, implementation, recordings


def generated_under(corpus: Path, built: list[Trace]) -> str:
    """The model profile the corpus was generated under, as its manifest records it (profiles
    joined by ", " if it names several); without a manifest, the profiles its KRaft traces'
    headers name; "" where neither names one (ISR replicas have no profile)."""
    profiles = generated_profiles(corpus)
    if profiles is None:
        profiles = tuple(sorted({trace.header.cluster.profile for trace in built if trace.header.cluster is not None}))
    return ", ".join(profiles)


def summary(report: Certification, out: Path, seconds: float | None = None) -> dict:
    """The object `certify --json` prints; `seconds`, the wall time, where the report leaves it out."""
    return {
        "adapter": report.adapter,
        "implementation": report.implementation,
        "corpus": report.corpus,
        "profile": report.profile,
        "traces": report.traces,
        "passed": report.passed,
        "failed": report.failed,
        "verdicts": {"conforms": report.passed, "departs": report.departed, "not applicable": report.not_applicable, "error": report.errors},
        "lacks": list(report.lacks),
        "readings": report.readings,
        "inconsistent": msgspec.to_builtins(report.inconsistent),
        "steps": report.steps,
        "rules_failed": list(report.rules_failed),
        "rules_conforming": sum(v.verdict == "conforms" for v in report.rules),
        "rules_not_exercised": [v.rule for v in report.rules if v.verdict == "not exercised"],
        "deviations": msgspec.to_builtins(report.deviations),
        "seconds": report.seconds if report.seconds is not None else seconds,
        "reports": {kind: str(out / name) for kind, name in REPORT_FILES.items()},
    }
