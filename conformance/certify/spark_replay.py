"""Certification on Spark (`certify --engine spark`): the corpus as tables, replay on the executors,
the conclusions in Spark SQL.

The driver reads the corpus (and checks each file against its manifest, so an executor needs no
access to it) into two Parquet tables: `traces` (one row per file: its bytes, system, node) and
`steps` (one row per step: its input kind and the rules it cites). Spark reads `traces` back and
replays it partition by partition, one adapter factory per partition (a Kafka JVM, a subprocess
pool: made and closed there); the results come back as a DataFrame, from which Spark SQL draws
the run's totals and a verdict per rule. The report rendered from them is the bytes the
in-process run writes.
"""

from collections.abc import Iterator
from pathlib import Path

import msgspec

from adapters.registry import adapter_factory
from conformance.certify.replay import DEPARTS, ERROR, NOT_APPLICABLE, TraceResult, invalid, replay_data
from conformance.certify.verdicts import CONFORMS, NOT_EXERCISED, RuleVerdict, Totals, inconsistencies
from conformance.corpus.cells import input_kind
from conformance.corpus.manifest import changed_since_generated
from spec import trace as traces
from spec.rules import load_rules

TRACES_SCHEMA = "number int, path string, data binary, problem string, changed boolean, system string, node int"
STEPS_SCHEMA = "path string, step int, kind string, rules array<string>"
RESULTS_SCHEMA = (
    "number int, trace string, verdict string, passed boolean, steps int, steps_run int, steps_skipped int, "
    "rules_passed array<string>, rules_failed array<string>, rules_not_applicable array<string>, lacks array<string>, "
    "readings map<string, int>, first_shown map<string, int>, implementation string, result binary"
)
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(TraceResult).decode


def write_corpus_tables(session, files: list[Path], verify: bool, work: str) -> str:
    """The corpus as Parquet under `work`/corpus: the tables `traces` and `steps`; where they are."""
    trace_rows, step_rows = [], []
    for number, path in enumerate(files):
        problem = None
        try:
            data = path.read_bytes()
        except OSError as error:  # replayed as such: an unreadable trace is an error of the corpus
            data, problem = None, f"{path}: cannot read: {error.strerror}"
        header_system, node = "", -1
        if data is not None:
            try:
                built = traces.parse(path, data)
            except traces.TraceError:
                built = None
            if built is not None:
                header_system, node = built.header.system, built.header.node
                step_rows += [(str(path), index, input_kind(step.input), list(step.rules)) for index, step in enumerate(built.steps, start=1)]
        changed = bool(data is not None and verify and changed_since_generated(path, data))
        trace_rows.append((number, str(path), data, problem, changed, header_system, node))
    where = f"{work}/corpus"
    session.createDataFrame(trace_rows, TRACES_SCHEMA).write.parquet(f"{where}/traces")
    session.createDataFrame(step_rows, STEPS_SCHEMA).write.parquet(f"{where}/steps")
    return where


def _replay_partition(origin: tuple[str, float], rows: Iterator) -> Iterator[tuple]:
    """A partition's traces through one adapter factory, made and closed here."""
    with adapter_factory(*origin) as make_adapter:
        for row in rows:
            path = Path(row.path)
            if row.problem is not None:
                result = invalid(path, traces.TraceError(row.problem))
            else:
                result = replay_data(make_adapter, path, bytes(row.data), changed=row.changed)
            yield (
                row.number,
                result.trace,
                result.verdict,
                result.passed,
                result.steps,
                result.steps_run,
                result.steps_skipped,
                list(result.rules_passed),
                list(result.rules_failed),
                list(result.rules_not_applicable),
                list(result.lacks),
                dict(result.readings),
                dict(result.first_shown),
                make_adapter.implementation,
                _encode(result),
            )


def replay_on_spark(session, origin: tuple[str, float], corpus_tables: str, partitions: int):
    """The results DataFrame: one row per trace, replayed on the executors, cached."""
    table = session.read.parquet(f"{corpus_tables}/traces").repartition(partitions, "number")
    rows = table.rdd.mapPartitions(lambda part: _replay_partition(origin, part))
    return session.createDataFrame(rows, RESULTS_SCHEMA).cache()


def collected(results) -> tuple[list[TraceResult], str]:
    """The results in corpus order, and what the implementation said it is."""
    rows = results.select("number", "result", "implementation").orderBy("number").collect()
    said = next((row.implementation for row in reversed(rows) if row.implementation), "")
    return [_decode(bytes(row.result)) for row in rows], said


def totals_sql(session, results) -> Totals:
    """The run's totals and the verdict per rule, drawn from the results with Spark SQL."""
    results.createOrReplaceTempView("results")
    counts = session.sql(
        f"""SELECT count(*) AS traces, count_if(passed) AS passed,
                   count_if(verdict IN ('{DEPARTS}', '{ERROR}')) AS failed, count_if(verdict = '{DEPARTS}') AS departed,
                   count_if(verdict = '{ERROR}') AS errors, count_if(verdict = '{NOT_APPLICABLE}') AS not_applicable,
                   coalesce(sum(steps), 0) AS steps, coalesce(sum(steps_run), 0) AS steps_run, coalesce(sum(steps_skipped), 0) AS steps_skipped
            FROM results"""
    ).first()
    lacks = tuple(row[0] for row in session.sql("SELECT DISTINCT explode(lacks) FROM results ORDER BY 1").collect())
    readings = {row[0]: row[1] for row in session.sql("SELECT key, sum(value) FROM (SELECT explode(readings) FROM results) GROUP BY key ORDER BY key").collect()}
    shown = {
        row[0]: (row[1], row[2])
        for row in session.sql("SELECT key, min_by(trace, number), min_by(value, number) FROM (SELECT number, trace, explode(first_shown) FROM results) GROUP BY key").collect()
    }
    passed = dict(session.sql("SELECT rule, count(*) FROM (SELECT explode(rules_passed) AS rule FROM results) GROUP BY rule").collect())
    failed = {
        (row[0], row[1]): row[2]
        for row in session.sql(
            f"""SELECT verdict, rule, count(*) FROM (SELECT verdict, explode(rules_failed) AS rule FROM results
                WHERE verdict IN ('{DEPARTS}', '{ERROR}')) GROUP BY verdict, rule"""
        ).collect()
    }
    inapplicable = {row[0] for row in session.sql("SELECT DISTINCT explode(rules_not_applicable) FROM results").collect()}
    rules = []
    for rule in load_rules():
        departs, errs, ok = failed.get((DEPARTS, rule.id), 0), failed.get((ERROR, rule.id), 0), passed.get(rule.id, 0)
        verdict = DEPARTS if departs else ERROR if errs else CONFORMS if ok else NOT_APPLICABLE if rule.id in inapplicable else NOT_EXERCISED
        rules.append(RuleVerdict(rule=rule.id, verdict=verdict, steps_passed=ok, traces_failed=departs + errs))
    return Totals(**counts.asDict(), lacks=lacks, readings=readings, inconsistent=inconsistencies(shown), rules=tuple(rules))


def coverage_sql(session, corpus_tables: str) -> dict[str, dict[str, int]]:
    """Per rule, per input kind, the corpus's steps citing it: from the steps table."""
    session.read.parquet(f"{corpus_tables}/steps").createOrReplaceTempView("steps")
    matrix: dict[str, dict[str, int]] = {}
    for rule, kind, count in session.sql("SELECT rule, kind, count(*) FROM (SELECT explode(rules) AS rule, kind FROM steps) GROUP BY rule, kind ORDER BY rule, kind").collect():
        matrix.setdefault(rule, {})[kind] = count
    return matrix
