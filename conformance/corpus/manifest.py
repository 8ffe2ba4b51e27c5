"""The corpus manifest: how a corpus was made, what it covers, and the hash of every file.

It is also the corpus's proof of ownership and integrity: kraftcheck writes only into a
directory whose manifest lists what it wrote, and replays only a corpus whose files are
exactly those the manifest lists, with the hashes it gives.
"""

import functools
from pathlib import Path

import msgspec

from conformance.explore.configs import CheckConfig, IsrCheckConfig, check_bound
from spec import trace as traces

MANIFEST = "manifest.json"
KIND = "kraftcheck-corpus"


class GenerateOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What fixes a corpus besides the configuration."""

    max_states: int = 150_000  # cluster states the search may visit
    walks: int = 8  # seeded random walks per configuration
    aimed_walks: int = 32  # further walks per configuration, kept only up to the rules and outcomes they give dedicated traces
    walk_steps: int = 250
    seed: int = 0

    def __post_init__(self) -> None:
        """Refuse bounds that make an empty corpus look like a generated one (--max-states 0, --walk-steps 0)."""
        largest = 2**63 - 1  # what a trace's header can hold
        check_bound("--max-states", self.max_states, 1, largest)
        for name, value in (("--walks", self.walks), ("--aimed-walks", self.aimed_walks), ("--seed", self.seed)):
            check_bound(name, value, 0, largest)
        check_bound("--walk-steps", self.walk_steps, 1, largest)


class CoverageRow(msgspec.Struct, frozen=True, kw_only=True):
    cell: str
    trace: str
    step: int


class Explored(msgspec.Struct, frozen=True, kw_only=True):
    """One configuration's search: how far it went and how many cells it met."""

    config: str
    bounds: CheckConfig | IsrCheckConfig
    states: int
    complete: bool  # the bounded state space was exhausted within max_states
    cells: int


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    format_version: int
    options: GenerateOptions
    searches: tuple[Explored, ...]
    traces: int
    steps: int
    cells: int
    rules: dict[str, int]  # rule ID -> steps exercising it
    coverage: tuple[CoverageRow, ...]  # each cell and the trace chosen for it
    files: dict[str, str]  # file name -> sha256
    content_hash: str  # sha256 over the files' names and hashes


class _Listing(msgspec.Struct, kw_only=True):
    """The part of a manifest that says what the corpus holds (read leniently: it is untrusted)."""

    kind: str
    files: dict[str, str]


class _Search(msgspec.Struct, kw_only=True):
    bounds: dict


class _Generation(msgspec.Struct, kw_only=True):
    """The part of a manifest that says how the corpus was generated (read leniently: it is untrusted)."""

    kind: str
    searches: tuple[_Search, ...] = ()
    files: dict[str, str] = {}


def generated_profiles(corpus: Path) -> tuple[str, ...] | None:
    """The model profiles the corpus's KRaft traces were generated under, from its manifest's
    searches, in the order they were searched (ISR searches have no profile); None where no
    manifest says: a directory without one, a trace file its directory's manifest does not list,
    or a manifest that cannot be read."""
    directory = corpus if corpus.is_dir() else corpus.parent
    try:
        found = msgspec.json.decode((directory / MANIFEST).read_bytes(), type=_Generation)
    except (OSError, ValueError, RecursionError):
        return None
    if found.kind != KIND or (directory != corpus and corpus.name not in found.files):
        return None
    kraft = [search.bounds for search in found.searches if "voters" in search.bounds]  # a KRaft search (CheckConfig)
    return tuple(dict.fromkeys(str(bounds.get("profile", CheckConfig().profile)) for bounds in kraft))


def listing(corpus: Path) -> dict[str, str] | None:
    """File name -> sha256 from the corpus's manifest; None if the directory has no manifest."""
    path = corpus / MANIFEST
    if not path.exists():
        return None
    try:
        found = msgspec.json.decode(path.read_bytes(), type=_Listing)
    except (OSError, ValueError, RecursionError) as error:
        raise traces.TraceError(f"{path}: not a readable corpus manifest: {error}") from None
    if found.kind != KIND or any("/" in name or name.startswith(".") for name in found.files):
        raise traces.TraceError(f"{path}: not a kraftcheck corpus manifest")
    return found.files


def verified_files(corpus: Path, found: list[Path]) -> list[Path]:
    """The corpus's trace files, checked against its manifest: none missing, none added (a changed
    one fails alone when it is replayed: `changed_since_generated`).

    `found` are the trace files present; without a manifest they are returned as they are.
    """
    listed = listing(corpus)
    if listed is None:
        return found
    problems = []
    missing = [name for name in listed if not (corpus / name).is_file()]
    if missing:
        problems.append(f"{len(missing)} of {len(listed)} listed traces are missing (first: {missing[0]})")
    added = [str(p.relative_to(corpus)) for p in found if str(p.relative_to(corpus)) not in listed]
    if added:
        problems.append(f"{len(added)} trace files are not listed (first: {added[0]})")
    if problems:
        raise traces.TraceError(f"{corpus}: the corpus does not match its manifest: {'; '.join(problems)}. Regenerate it, or pass --no-verify to replay the files as they are")
    return [corpus / name for name in sorted(listed)]


def changed_since_generated(path: Path, data: bytes) -> bool:
    """Whether a trace file's bytes differ from the hash its corpus's manifest gives for it
    (False for a file that no manifest beside it lists)."""
    listed = _cached_listing(path.parent, *_stamp(path.parent / MANIFEST))
    return listed is not None and path.name in listed and traces.content_hash(data) != listed[path.name]


def _stamp(manifest: Path) -> tuple[int, int]:
    try:
        found = manifest.stat()
    except OSError:
        return (0, 0)
    return (found.st_mtime_ns, found.st_size)


@functools.lru_cache(maxsize=8)
def _cached_listing(corpus: Path, mtime_ns: int, size: int) -> dict[str, str] | None:
    """`listing`, read once per version of the manifest (a corpus has hundreds of traces)."""
    try:
        return listing(corpus)
    except traces.TraceError:
        return None  # certification refuses such a corpus before replaying; a lone replay just skips the check
