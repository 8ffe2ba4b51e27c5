"""The conformance corpus: node-level traces chosen by coverage, generated from exploration.

For each configuration, a KRaft cluster's (conformance/corpus/kraft.py) or an ISR partition's
(conformance/corpus/isr.py), a breadth-first search finds the shortest path to every coverage
cell (conformance/corpus/cells.py) and projects it onto the node that took the step; seeded random
walks add long interleavings, and where a walk reaches a rule and outcome the searches gave fewer
than DEDICATED traces (a search's budget ends before the states deep enough for it), the walk's
inputs to that node up to there are one more. Every trace's expected outputs come from the reference model
stepping the projected inputs, and its last step must cover the cells it was chosen for.
Everything is deterministic: the same configurations and options give the same bytes.
"""

import contextlib
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from types import ModuleType

import msgspec

from conformance.corpus import isr as isr_corpus
from conformance.corpus import kraft as kraft_corpus
from conformance.corpus.cells import CANDIDATES, DEDICATED, Setting, cells_of_last_step, dedicated_cell, walk_cells
from conformance.corpus.manifest import KIND, MANIFEST, CoverageRow, Explored, GenerateOptions, Manifest, listing
from conformance.corpus.reference import build_trace
from conformance.corpus.search import Searched, inputs_of, search
from conformance.corpus.spark_search import search_on_spark
from conformance.explore.configs import CheckConfig, IsrCheckConfig
from conformance.outputs import check_directory
from conformance.spark.session import SparkRun
from spec import trace as traces
from model.config import PROFILES
from adapters.node_models import model_for
from adapters.process_lifetime import forked_map
from model.events import Request, Restart
from model.messages import FetchRequest
from spec.trace import Input, Persisted, Trace, TraceCluster

CORPUS_CONFIGS = ("corpus", "corpus-deep", "corpus-diverge", "corpus-observer", "corpus-partial", "corpus-restart", "corpus-solo", "corpus-truncate", "corpus-isr")  # what the shipped corpus is generated from


def shipped_directory() -> Path:
    """Where the shipped corpora are: conformance/traces in an installed package (the wheel carries
    the repository's traces/ there, see pyproject.toml), the repository's traces/ in a checkout."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "traces"
    return installed if installed.is_dir() else package.parent / "traces"


DEFAULT_CORPUS = shipped_directory()  # the shipped corpus
DEFAULT_PROFILE = "kip595"  # the profile DEFAULT_CORPUS is generated under; another profile P's shipped corpus is DEFAULT_CORPUS / P


def shipped_corpora() -> dict[str, Path]:
    """The corpora shipped with kraftcheck, by the model profile they were generated under:
    kip595's is traces/, another profile P's traces/P/ where it has one (a manifest of its own)."""
    others = {name: DEFAULT_CORPUS / name for name in sorted(PROFILES) if name != DEFAULT_PROFILE and (DEFAULT_CORPUS / name / MANIFEST).is_file()}
    return {DEFAULT_PROFILE: DEFAULT_CORPUS, **others}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def plain(setting: Setting, inputs: list[Input]) -> Setting:
    """A KRaft setting without a Fetch record limit where the node serves no Fetch: the limit
    only shaped the responses it was sent, so the trace needs no FetchRecordLimit capability."""
    if type(setting) is TraceCluster and setting.fetch_max_records and not any(type(e) is Request and type(e.message) is FetchRequest for e in inputs):
        return msgspec.structs.replace(setting, fetch_max_records=0)
    return setting


def started(setting: Setting, node: int, inputs: list[Input]) -> tuple[Persisted, list[Input]]:
    """A KRaft node's trace begins with the node down and its start as the first step, whatever
    the profile: what a node does as it starts (BOOT-1: it looks for the leader) is then a step
    judged like any other, and an implementation that starts as another profile has it is told so
    by name. The model starts a node up, silently, where the profile lets it (a smaller state
    space to explore); its trace starts it down and restarts it with nothing persisted, which is
    that start with its outputs. ISR replicas start as they are."""
    model = model_for(setting)
    if type(setting) is not TraceCluster or model.observe(model.start(model.config(setting, node), Persisted())).role == "down":
        return Persisted(), inputs
    return Persisted(down=True), [Restart(), *inputs]


def slot_order(cell: str) -> tuple[str, int]:
    """Cells in name order, a `rule ID | outcome #n` family in the order its places were met."""
    family, _, number = cell.partition(" #")
    return family, int(number or 0)


def searched_config(config: CheckConfig | IsrCheckConfig) -> CheckConfig | IsrCheckConfig:
    """A KRaft search's paths must be real, not renamed; and follow the model's default reading,
    which a trace records, listing the other outcomes the specification allows beside each step."""
    if isinstance(config, IsrCheckConfig):
        return config
    return msgspec.structs.replace(config, symmetry=False, every_choice=False)


def system_of(config: CheckConfig | IsrCheckConfig) -> ModuleType:
    """The corpus module of the configuration's system: ISR replicas' or KRaft nodes'."""
    return isr_corpus if isinstance(config, IsrCheckConfig) else kraft_corpus


def coverage_maker(config: CheckConfig | IsrCheckConfig) -> Callable[[], object]:
    """What makes a fresh coverage search of the configuration (a KraftCoverage or an IsrCoverage)."""
    return partial(isr_corpus.IsrCoverage if isinstance(config, IsrCheckConfig) else kraft_corpus.KraftCoverage, config)


def corpus_bound(config: CheckConfig | IsrCheckConfig, given: int, name: str) -> int:
    """A bound of the corpus's work as `traces generate` was given it, or the configuration's own
    (`corpus_max_states`, `corpus_aimed_walks`) where that is larger; ISR configurations have none."""
    return max(given, getattr(config, f"corpus_{name}", 0))


def search_budget(config: CheckConfig | IsrCheckConfig, options: GenerateOptions) -> int:
    return corpus_bound(config, options.max_states, "max_states")


def searched_in_processes(configs: list[tuple[str, CheckConfig | IsrCheckConfig]], options: GenerateOptions, workers: int) -> Iterator[Searched]:
    """Each configuration's search, in order, run in `workers` forked processes at once: the
    searches do not depend on each other (only what is kept of them does, in this process). The
    processes die with this one and are stopped when it stops reading, whatever the reason."""
    return forked_map(lambda config: search(coverage_maker(config)(), search_budget(config, options)), [config for _name, config in configs], workers)


def generate(
    configs: list[tuple[str, CheckConfig | IsrCheckConfig]],
    options: GenerateOptions,
    progress: Callable[[str], None] | None = None,
    spark: SparkRun | None = None,
    workers: int = 1,
) -> tuple[dict[str, Trace], Manifest]:
    """The corpus of one or more configurations: traces by file name, and the manifest.

    A cell met by an earlier configuration's search is not sought again in a later one. The
    searches run in this process, in `workers` processes at once (one configuration each), or on
    Spark; the corpus is the same.
    """
    corpus: dict[str, Trace] = {}
    coverage: list[CoverageRow] = []
    explored = []
    configs = [(name, searched_config(config)) for name, config in configs]
    parallel = spark is None and workers > 1 and len(configs) > 1
    with contextlib.closing(searched_in_processes(configs, options, workers)) if parallel else contextlib.nullcontext() as searches:
        for name, config in configs:
            system = system_of(config)
            setting = system.setting(config)
            dedicated: dict[str, set[tuple[int, bytes]]] = {}  # `rule ID | outcome` -> its distinct traces so far
            for row in coverage:
                if row.cell != dedicated_cell(row.cell):
                    dedicated.setdefault(dedicated_cell(row.cell), set()).add((row.trace, b""))
            known = {row.cell for row in coverage} | {f"{family} #{n}" for family, kept in dedicated.items() if len(kept) >= DEDICATED for n in range(1, CANDIDATES + 1)}
            make_coverage = coverage_maker(config)
            searching = make_coverage()
            budget = search_budget(config, options)
            if searches is not None:
                searched = next(searches)
            elif spark is None:
                searched = search(searching, budget)
            else:
                searched = search_on_spark(spark, make_coverage, searching, budget, progress and (lambda line: progress(f"{name}: {line}")))
            paths = inputs_of(searching, searched, known)
            states, met = searched.states, len(searched.first)
            explored.append(Explored(config=name, bounds=config, states=states, complete=searched.complete, cells=met))
            by_inputs: dict[tuple[int, bytes], list[str]] = {}
            chosen: dict[tuple[int, bytes], list[Input]] = {}
            for cell, (node, inputs) in sorted(paths.items(), key=lambda item: slot_order(item[0])):
                identity = (node, msgspec.msgpack.encode(inputs))
                family = dedicated_cell(cell)
                if family != cell:
                    kept = dedicated.setdefault(family, set())
                    if identity not in kept and len(kept) >= DEDICATED:
                        continue  # the rule and outcome have their short traces; a duplicate place would only repeat one
                    kept.add(identity)
                by_inputs.setdefault(identity, []).append(cell)
                chosen[identity] = inputs
            ordered = sorted(by_inputs, key=lambda k: (len(chosen[k]), by_inputs[k][0]))
            for number, identity in enumerate(ordered, start=1):
                covers = tuple(by_inputs[identity])
                file_name = f"{name}-cell-{number:04d}-{slug(covers[0])}.jsonl"
                initial, inputs = started(setting, identity[0], chosen[identity])
                built = build_trace(file_name.removesuffix(".jsonl"), plain(setting, inputs), identity[0], inputs, f"{name}: shortest path to its cells", covers, initial)
                reached = set(cells_of_last_step(built.header.setting, identity[0], built))
                missing = [c for c in covers if dedicated_cell(c) not in reached]
                if missing:
                    raise AssertionError(f"{file_name}: projected trace does not reproduce {missing[0]}")
                corpus[file_name] = built
                coverage.extend(CoverageRow(cell=c, trace=file_name, step=len(built.steps)) for c in covers)
            for index in range(options.walks + corpus_bound(config, options.aimed_walks, "aimed_walks")):
                seed = options.seed + index
                for node, walked in system.walk(config, seed, options.walk_steps).items():
                    if not walked:
                        continue
                    initial, inputs = started(setting, node, walked)
                    if index < options.walks:
                        file_name = f"{name}-walk-{seed:04d}-node{node}.jsonl"
                        origin = f"{name}: random walk, seed {seed}, {options.walk_steps} cluster steps, node {node}'s inputs"
                        corpus[file_name] = build_trace(file_name.removesuffix(".jsonl"), plain(setting, inputs), node, inputs, origin, initial=initial)
                    for at, families in walk_cells(setting, node, inputs, initial):
                        prefix = inputs[: at + 1]
                        identity = (node, msgspec.msgpack.encode(prefix))
                        covers = []
                        for family in families:
                            kept = dedicated.setdefault(family, set())
                            if len(kept) < DEDICATED and identity not in kept:
                                kept.add(identity)
                                covers.append(f"{family} #{len(kept)}")
                        if covers:
                            file_name = f"{name}-walk-{seed:04d}-node{node}-step{at + 1:04d}.jsonl"
                            origin = f"{name}: random walk, seed {seed}, node {node}'s inputs up to a rule and outcome the search gave fewer than {DEDICATED} traces"
                            corpus[file_name] = build_trace(file_name.removesuffix(".jsonl"), plain(setting, prefix), node, prefix, origin, tuple(covers), initial)
                            coverage.extend(CoverageRow(cell=c, trace=file_name, step=at + 1) for c in covers)
            if progress:
                progress(f"{name}: searched {states:,} states, {met:,} coverage cells ({len(ordered)} new traces), {options.walks} walks")
    rules: dict[str, int] = {}
    for built in corpus.values():
        for step in built.steps:
            for rule in step.rules:
                rules[rule] = rules.get(rule, 0) + 1
    files = {file_name: traces.content_hash(traces.to_jsonl(built)) for file_name, built in sorted(corpus.items())}
    manifest = Manifest(
        kind=KIND,
        format_version=traces.FORMAT_VERSION,
        options=options,
        searches=tuple(explored),
        traces=len(corpus),
        steps=sum(len(t.steps) for t in corpus.values()),
        cells=len(coverage),
        rules=dict(sorted(rules.items())),
        coverage=tuple(sorted(coverage, key=lambda row: row.cell)),
        files=files,
        content_hash=traces.content_hash("".join(f"{k} {v}\n" for k, v in files.items()).encode()),
    )
    return corpus, manifest


def check_corpus_directory(out: Path) -> dict[str, str] | None:
    """Before any work: `out` can take a corpus. It is new, empty, or an earlier corpus (its
    manifest lists what kraftcheck wrote there); the earlier manifest's listing, if any."""
    previous = listing(out) if out.is_dir() else None
    check_directory(out, lambda name: previous is not None, "corpus")
    return previous


def write_corpus(out: Path, corpus: dict[str, Trace], manifest: Manifest) -> None:
    """Write the corpus into `out`, touching only the files kraftcheck owns there.

    Each trace is written whole; traces of the earlier corpus that this one lacks are removed;
    the manifest comes last, so an interrupted write leaves a corpus that fails verification
    instead of one that passes it. Other files (a README beside the traces) are left alone.
    """
    previous = check_corpus_directory(out) or {}
    out.mkdir(parents=True, exist_ok=True)
    for file_name, built in corpus.items():
        traces.write_bytes_atomically(out / file_name, traces.to_jsonl(built))
    for stale in sorted(set(previous) - set(corpus)):
        (out / stale).unlink(missing_ok=True)
    traces.write_bytes_atomically(out / MANIFEST, msgspec.json.format(msgspec.json.encode(manifest), indent=1) + b"\n")
