"""Where a search keeps what it has seen, and how it carries on after being killed.

In memory (the default) the fingerprint table and the levels' states are in RAM and only the parent
links go to a temporary directory (scratch_directory: one a search killed before it could remove
it is removed by the next search). With a directory (`check --state-dir`), everything is there: the
table mapped from a file, each level's states in a file, the parts log, and after every level a
checkpoint (search.json) naming the levels completed and vouching for the files a resume reads
(conformance.explore.kept), so `check --resume` continues from the last completed level, once they
all verify. A level's builder offers candidates to the table in batches and keeps the new ones.
"""

import os
import shutil
import tempfile
from array import array
from pathlib import Path

import msgspec
import numpy as np

from conformance.explore.frontier import Level, PartsLog
from conformance.explore.kept import SEARCH_FILE, Damaged, ResumeError, checksum, digest, verify
from conformance.explore.visited import Table, Visited
from spec.trace import write_bytes_atomically

# Candidates a search offers the fingerprint table at a time, all its processes together: large
# enough that numpy's cost per call fades (measured on tlc-kraft-if4: 2**20 2-3 % faster than
# 2**19, 2**16 15 % slower), and shared among workers so that memory a state stays the same.
BATCH = 1 << 20
CHECKPOINT = "search.json"
PARTS = "parts.bin"  # appended to after a checkpoint, by the level under way
SCRATCH_PREFIX = "kraftcheck-search-"  # then the process id of the search, a dash, tempfile's letters


def scratch_directory() -> tempfile.TemporaryDirectory:
    """A temporary directory for a search, named after its process. Those of searches whose process
    is gone (killed, by SIGKILL too, before they could remove theirs) go first: a parent link takes
    16 bytes a state, gigabytes for a large search."""
    for stale in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        pid = stale.name[len(SCRATCH_PREFIX) :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    return tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


class Checkpoint(msgspec.Struct):
    """A search after its last completed level: enough to carry on from there."""

    completed: int  # levels ended; the frontier is the last of them
    distinct: int
    generated: int
    depth: int
    seconds: float  # searching time so far, over every run of it
    findings: list[tuple[int, int, str, str]]  # (depth, fingerprint, property, detail)
    workers: int = 1
    # What a resume reads, as it was then (see Manifest): each file's size and checksum by its
    # path in the directory, and each table segment's digest (Table.digests).
    files: dict[str, tuple[int, str]] = msgspec.field(default_factory=dict)
    seen: list[str] = msgspec.field(default_factory=list)


class Sealed(msgspec.Struct):
    """The checkpoint file: the checkpoint's JSON as written, and its checksum, so that no byte of it is taken on trust."""

    checkpoint: msgspec.Raw
    blake2b: str


class Workspace:
    """A search's (or a shard's) fingerprint table, levels and checkpoints."""

    def __init__(self, system, directory: Path | None = None, *, on_disk: bool | None = None, table: Table | None = None, first: int = 0) -> None:
        """All in `directory` (on_disk defaults to whether one is given); in memory, the parent
        links go to `directory` or, without one, to a temporary directory removed by close().
        A shard's fingerprints go to the search's shared `table` (see Visited), from segment `first` on."""
        self.system, self.table, self.first = system, table, first
        self.on_disk = directory is not None if on_disk is None else on_disk
        self._temporary = None if directory is not None else scratch_directory()
        self.directory = Path(directory) if directory is not None else Path(self._temporary.name)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.parts = PartsLog(self.directory / PARTS, system) if self.on_disk else None
        self.visited: Visited | None = None

    def start(self) -> None:
        self.visited = Visited(self.directory, on_disk=self.on_disk, table=self.table, first=self.first)

    def level(self, depth: int) -> Level:
        """An empty level to build, on disk if the workspace is."""
        return Level(self.system, self._states_path(depth) if self.on_disk else None, self.parts)

    def _states_path(self, depth: int) -> Path:
        return self.directory / f"states-{depth}.bin"

    def builder(self, depth: int, batch: int = BATCH) -> "Builder":
        return Builder(self.system, self.visited, self.level(depth), depth, batch)

    def save(self) -> None:
        """After a completed level: the table's pages on disk, before a checkpoint vouches for them."""
        if self.on_disk:
            self.visited.checkpoint()

    def resume(self, completed: int) -> Level:
        """Back to the moment `completed` levels had ended (its files verified: see verified()):
        the table rolled back, later files gone; the frontier (the last completed level) to expand."""
        self.visited = Visited.open(self.directory, completed, self.table, self.first)
        for path in self.directory.glob("states-*.bin"):
            if int(path.stem.split("-")[1]) >= completed:
                path.unlink()
        return Level.reopen(self.system, self._states_path(completed - 1))

    def close(self) -> None:
        if self.parts is not None:
            self.parts.close()
        if self._temporary is not None:
            self._temporary.cleanup()


class Manifest:
    """The files of a search kept in `directory` that a checkpoint vouches for: in each of its
    places (the directory, or its workers' subdirectories) the parent links of every completed
    level, the frontier's states and the parts log; check.json; the table's segments by digest.
    Checksummed as each level ends; a file that never changes once written only the first time."""

    def __init__(self, directory: Path, places: list[str], known: dict[str, tuple[int, str]]) -> None:
        """`known`: the files of the checkpoint a resume began from, verified."""
        self.directory, self.places, self.files = Path(directory), places, dict(known)

    def seal(self, checkpoint: Checkpoint, table: Table) -> None:
        """Write `checkpoint` (its levels' files complete and durable) with the files it vouches for."""
        completed = checkpoint.completed
        names = [SEARCH_FILE] if (self.directory / SEARCH_FILE).exists() else []
        for place in self.places:
            names += [str(Path(place, f"parents-{level}.npy")) for level in range(completed)]
            names += [str(Path(place, f"states-{completed - 1}.bin")), str(Path(place, PARTS))]
        self.files = {name: self.files[name] if name in self.files and Path(name).name != PARTS else self._entry(name) for name in names}
        sealed = msgspec.structs.replace(checkpoint, files=self.files, seen=table.digests(completed))
        write_checkpoint(self.directory, sealed)

    def _entry(self, name: str) -> tuple[int, str]:
        size = (self.directory / name).stat().st_size
        return size, digest(self.directory / name, size)


def write_checkpoint(directory: Path, checkpoint: Checkpoint) -> None:
    body = msgspec.json.encode(checkpoint)
    write_bytes_atomically(Path(directory) / CHECKPOINT, msgspec.json.encode(Sealed(msgspec.Raw(body), checksum(body))))


def read_checkpoint(directory: Path) -> Checkpoint:
    """The checkpoint as written, else Damaged (the files it vouches for are verified() apart)."""
    path = Path(directory) / CHECKPOINT
    try:
        sealed = msgspec.json.decode(path.read_bytes(), type=Sealed)
    except FileNotFoundError:
        raise ResumeError(f"{directory}: no search to resume (no {CHECKPOINT}: the search never completed its first level there)") from None
    except OSError as error:
        raise Damaged(path, error.strerror or str(error)) from None
    except msgspec.DecodeError as error:
        raise Damaged(path, str(error)) from None
    body = bytes(sealed.checkpoint)
    if checksum(body) != sealed.blake2b:
        raise Damaged(path, "its checksum is not the one written with it")
    return msgspec.json.decode(body, type=Checkpoint)


def verified(directory: Path) -> Checkpoint:
    """The checkpoint of the search kept in `directory`, once every file it vouches for verifies
    (else Damaged), with the parts logs cut back to what it recorded (a level under way when the
    search was killed may have appended to them): what a resume may then read."""
    saved = read_checkpoint(directory)
    for name, (size, recorded) in saved.files.items():
        verify(directory, name, size, recorded, growing=Path(name).name == PARTS)
    Table.verify(directory, saved.completed, saved.seen)
    for name, (size, _recorded) in saved.files.items():
        if Path(name).name == PARTS:
            os.truncate(Path(directory) / name, size)
    return saved


class Builder:
    """The level being built: candidates (fingerprint, parent fingerprint, state) collected, offered
    to the table a batch at a time; the new ones go to the level, with their violations."""

    def __init__(self, system, visited: Visited, level: Level, depth: int, batch: int = BATCH) -> None:
        self.system, self.visited, self.level, self.depth, self.batch = system, visited, level, depth, batch
        self.fps = array("q")  # converted as they come, while their int objects are still in cache
        self.states: list = []
        self.origins: list[int] = []  # per state the candidates came from, its fingerprint and how many
        self.counts: list[int] = []
        self.generated = 0
        self.findings: list[tuple[int, int, object]] = []
        self.thaw = None  # what turns a new candidate into the system's state, if it came as a handle (System.reach)

    def add(self, parent_fp: int, fps: list[int], states: list) -> None:
        """The candidates found from one state: the hot loop's call, once per state expanded."""
        self.fps.extend(fps)
        self.states += states
        self.origins.append(parent_fp)
        self.counts.append(len(states))
        if len(self.states) >= self.batch:
            self.flush()

    def offer(self, fp: int, parent_fp: int | None, state: object) -> None:
        """A candidate (an initial state has no parent: it is its own)."""
        self.add(fp if parent_fp is None else parent_fp, [fp], [state])

    def flush(self) -> None:
        """Offer the collected candidates to the table; the new ones go to the level with their violations."""
        if not self.states:
            return
        fps = np.array(self.fps, dtype=np.int64)
        parents = np.repeat(np.array(self.origins, dtype=np.int64), self.counts)
        candidates = self.states
        self.generated += len(candidates)
        self.fps, self.states, self.origins, self.counts = array("q"), [], [], []
        new = np.flatnonzero(self.visited.offer(fps, parents))
        fps = fps[new]
        states = [candidates[at] for at in new.tolist()]
        if self.thaw is not None:
            states = list(map(self.thaw, states))
        self.level.extend(fps, states)
        violations, depth = self.system.violations, self.depth
        for at, state in enumerate(states):
            found = violations(state)
            if found:
                self.findings.extend((depth, int(fps[at]), v) for v in found)

    def finish(self) -> Level:
        """The level complete: the last candidates offered, the parent links written, the states closed."""
        self.flush()
        self.visited.settle()
        return self.level.close()
