"""The states a search has seen, kept as TLC keeps them: fingerprints, not states.

A fingerprint table (open addressing in numpy arrays: the 64-bit fingerprint and the level it
was first seen at, 10 bytes a slot, at most 70 % full: 14 to 29 bytes a state) answers "seen
before?" for a whole batch of candidates at once. It is cut into SEGMENTS by the fingerprint's
top bits, each growing on its own, so growing never needs the whole table twice over. Each
level's parent links (fingerprint, the smallest parent's fingerprint) go to a file when the
level ends, 16 bytes a state on disk, read back only to rebuild a counterexample. With `on_disk`
the segments are files mapped into memory, so the search is bounded by disk rather than RAM, and
a killed search can be taken back to any completed level: every slot carries the level that filled it.
Their blocks are allocated before they are mapped (a full disk is an OSError, not a SIGBUS), and a
segment's digest (its keys and their levels, wherever they lie) lets a resume verify it.

The workers of a sharded search share one table (a Board: each segment's lock, and where its
current table is): in memory its segments are memfd files, which a process that grows one replaces
and the others map again; on disk they are the same files. Processes not forked from one another
(the Spark engine's tasks) join a table on disk through a board kept in a file beside it, each
holding a lock of its own on the whole table while it uses it.
"""

import io
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from conformance.explore.kept import Damaged

EMPTY = 0  # a free slot; the fingerprint 0 is stored as ZERO instead (a 2**-64 chance to merge the two)
ZERO = -0x61C8864680B583EB
MAX_LOAD = 0.7
SEGMENT_BITS = 4
SEGMENTS = 1 << SEGMENT_BITS
FIRST_CAPACITY = 1 << 12  # slots of a segment at first
MAX_LEVELS = np.iinfo(np.uint16).max  # levels are stored as uint16
WINDOW = 1 << 18  # slots of an old segment re-inserted at a time when it is rebuilt
REDUCE_AT = 1 << 20  # parent candidates buffered in a level before keeping only each state's smallest
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: spreads any fingerprint's bits over the slots
SLOT_BYTES = 10  # a fingerprint (int64) and a level (uint16)
BOARD = "board"  # a table's board in its directory, for processes that join it (Table.joined)


class TooDeep(RuntimeError):
    """A search deeper than the table can label."""


def hashes_of(keys: np.ndarray) -> np.ndarray:
    return keys.view(np.uint64) * _MULTIPLIER


def smallest_parents(fps: np.ndarray, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidates (fingerprint, parent's) reduced to one a fingerprint: the fingerprints sorted,
    each one's smallest parent, and a position among the candidates where each was found."""
    order = np.argsort(fps)  # then the smallest parent of each run of equal fingerprints: 4x faster than lexsort
    fps, parents = fps[order], parents[order]
    first = np.ones(len(fps), dtype=bool)
    first[1:] = fps[1:] != fps[:-1]
    starts = np.flatnonzero(first)
    return fps[starts], np.minimum.reduceat(parents, starts) if len(starts) else parents, order[starts]


class Board:
    """What the processes sharing a table (forked after it was made) agree on, in memory they all
    map: per segment its table's capacity and count and, in memory, the process and memfd holding
    it; and a lock held while a process reads or writes the segment."""

    CAPACITY, COUNT, PID, FD = range(4)

    def __init__(self, context) -> None:
        """`context`: the multiprocessing context the sharing processes are started with."""
        self.header = np.frombuffer(mmap.mmap(-1, SEGMENTS * 4 * 8), dtype=np.int64).reshape(SEGMENTS, 4)
        self.locks: list | None = [context.Lock() for _ in range(SEGMENTS)]

    @classmethod
    def in_file(cls, path: Path) -> "Board":
        """A board kept in a file (made empty if absent), for processes that share a table on disk
        without being forked from one another, each holding a lock of its own on the whole table
        while it uses it (the Spark engine's tasks): the board then takes no lock."""
        if not path.exists():
            path.write_bytes(bytes(SEGMENTS * 4 * 8))
        board = cls.__new__(cls)
        board.header = np.memmap(path, dtype=np.int64, mode="r+", shape=(SEGMENTS, 4))
        board.locks = None
        return board

    def each_held(self, segments: list[int]) -> Iterator[int]:
        """The segments, each while holding its lock: a free one first, so that processes seldom wait."""
        if self.locks is None:
            yield from segments
            return
        pending = list(segments)
        while pending:
            index = next((s for s in pending if self.locks[s].acquire(False)), None)
            if index is None:
                index = pending[0]
                self.locks[index].acquire()
            pending.remove(index)
            try:
                yield index
            finally:
                self.locks[index].release()


def _header(dtype: type, capacity: int) -> bytes:
    """The .npy header of a table file: the same bytes for every file of this dtype and capacity."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (capacity,)})
    return out.getvalue()


def _created(path: Path, dtype: type, capacity: int) -> np.memmap:
    """A new table file (.npy), its blocks allocated before it is mapped: a full disk is then an
    OSError here, not a SIGBUS when a page of the mapping is first written."""
    header = _header(dtype, capacity)
    with open(path, "wb") as out:
        out.write(header)
        out.flush()
        os.posix_fallocate(out.fileno(), 0, len(header) + capacity * np.dtype(dtype).itemsize)
    return np.memmap(path, dtype=dtype, mode="r+", offset=len(header), shape=(capacity,))


def _opened(path: Path, dtype: type, capacity: int, mode: str) -> np.memmap:
    """A table file mapped, once its header and size are those its name says: else Damaged."""
    header = _header(dtype, capacity)
    try:
        with open(path, "rb") as source:
            whole = source.read(len(header)) == header and os.fstat(source.fileno()).st_size == len(header) + capacity * np.dtype(dtype).itemsize
    except OSError as error:
        raise Damaged(path, error.strerror or str(error)) from None
    if not whole:
        raise Damaged(path, f"not a table of {capacity:,} slots")
    return np.memmap(path, dtype=dtype, mode=mode, offset=len(header), shape=(capacity,))


def _mixed(keys: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: each bit of a key spread over every bit of the result."""
    keys = keys ^ (keys >> np.uint64(30))
    keys = keys * np.uint64(0xBF58476D1CE4E5B9)
    keys = keys ^ (keys >> np.uint64(27))
    keys = keys * np.uint64(0x94D049BB133111EB)
    return keys ^ (keys >> np.uint64(31))


def _mapped(fd: int, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """A table's two arrays in a shared mapping of a memfd (fingerprints, then levels)."""
    memory = mmap.mmap(fd, capacity * SLOT_BYTES)
    return np.frombuffer(memory, dtype=np.int64, count=capacity), np.frombuffer(memory, dtype=np.uint16, count=capacity, offset=capacity * 8)


class Segment:
    """One open-addressing table: the keys whose hash has these top bits."""

    def __init__(self, directory: Path, index: int, on_disk: bool, capacity: int = FIRST_CAPACITY, board: Board | None = None) -> None:
        self.directory, self.index, self.on_disk, self.board = directory, index, on_disk, board
        self.count = 0
        self.fd: int | None = None  # shared in memory: this process's descriptor of the segment's current table
        self.fps, self.levels = self._new_table(capacity)
        self._publish()
        self.share()

    def _paths(self, capacity: int) -> tuple[Path, Path]:
        name = f"seen-{self.index:02d}-{capacity}"
        return self.directory / f"{name}.fps.npy", self.directory / f"{name}.levels.npy"

    def _new_table(self, capacity: int) -> tuple[np.ndarray, np.ndarray]:
        if not self.on_disk and self.board is None:
            return np.zeros(capacity, dtype=np.int64), np.zeros(capacity, dtype=np.uint16)
        if not self.on_disk:
            fd = os.memfd_create(f"kraftcheck-seen-{self.index:02d}")
            os.ftruncate(fd, capacity * SLOT_BYTES)
            self._drop_fd()
            self.fd = fd
            return _mapped(fd, capacity)
        fps_path, levels_path = self._paths(capacity)
        return _created(fps_path.with_suffix(".partial"), np.int64, capacity), _created(levels_path.with_suffix(".partial"), np.uint16, capacity)

    def _load(self, capacity: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
        fps_path, levels_path = self._paths(capacity)
        return _opened(fps_path, np.int64, capacity, mode), _opened(levels_path, np.uint16, capacity, mode)

    def _publish(self) -> None:
        """A table written in full takes its final names; then this segment's smaller ones go (see open())."""
        if not self.on_disk:
            return
        self.flush()
        for array, final in zip((self.fps, self.levels), self._paths(len(self.fps))):
            os.replace(array.filename, final)
        for capacity in self.capacities_on_disk(self.directory, self.index):
            if capacity < len(self.fps):
                for old in self._paths(capacity):
                    old.unlink(missing_ok=True)

    def _drop_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def share(self) -> None:
        """Tell the processes sharing the table where this segment's table is and how full."""
        if self.board is not None:
            self.board.header[self.index] = (len(self.fps), self.count, os.getpid(), -1 if self.fd is None else self.fd)

    def sync(self) -> None:
        """Take up the segment as the last process to change it left it (its lock held): its
        count, and its table if another process has replaced it with a larger one."""
        if self.board is None:
            return
        capacity, self.count, pid, fd = self.board.header[self.index].tolist()
        if capacity == len(self.fps):
            return
        if self.on_disk:
            self.fps, self.levels = self._load(capacity, "r+")
            return
        shared = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR)
        self._drop_fd()  # the table this process held is gone
        self.fd = shared  # kept: this process may be the next to publish where the table is
        self.fps, self.levels = _mapped(shared, capacity)

    @staticmethod
    def capacities_on_disk(directory: Path, index: int) -> list[int]:
        return [int(p.name.split(".")[0].split("-")[2]) for p in directory.glob(f"seen-{index:02d}-*.fps.npy")]

    def flush(self) -> None:
        if self.on_disk:
            self.fps.flush()
            self.levels.flush()

    def insert(self, keys: np.ndarray, hashes: np.ndarray, levels: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """Put keys in the table by linear probing, a round per probe step for the whole batch.

        Returns (new, slot): which keys were absent (only a key's first occurrence in the batch
        counts as new) and the slot each key ends in.
        """
        table, mask = self.fps, len(self.fps) - 1
        levels = np.broadcast_to(levels, keys.shape)
        new = np.zeros(len(keys), dtype=bool)
        final = np.empty(len(keys), dtype=np.int64)
        bits = np.uint64(len(self.fps).bit_length() - 1)
        slot = ((hashes << np.uint64(SEGMENT_BITS)) >> (np.uint64(64) - bits)).astype(np.int64)  # the bits below the segment's
        pending, wanted = np.arange(len(keys)), keys  # the keys still looking: their places in the batch (in order), their values
        while len(pending):
            held = table[slot]
            found = held == wanted
            final[pending[found]] = slot[found]
            free = held == EMPTY
            claims = np.flatnonzero(free)
            if len(claims):
                taken, first = np.unique(slot[claims], return_index=True)  # the earliest claimant of a free slot wins it
                winners = claims[first]
                self.levels[taken] = levels[pending[winners]]  # the level first: a process killed between the two leaves a free slot, not a key of level 0
                table[taken] = wanted[winners]
                new[pending[winners]] = True
                final[pending[winners]] = taken
                found[winners] = True
            again = ~found
            slot = np.where(free, slot, (slot + 1) & mask)[again]  # a claimant that lost looks at the same slot again
            pending, wanted = pending[again], wanted[again]
        self.count += int(new.sum())
        return new, final

    def make_room(self, adding: int) -> None:
        if self.count + adding <= MAX_LOAD * len(self.fps):
            return
        capacity = len(self.fps)
        while self.count + adding > MAX_LOAD * capacity:
            capacity *= 2
        self.rebuild(capacity, keep_below=MAX_LEVELS)

    def rebuild(self, capacity: int, keep_below: int) -> None:
        """A new table of `capacity` slots with the keys of levels below `keep_below`, put in a
        window of the old table at a time (bounded memory on a segment of any size)."""
        old_fps, old_levels = self.fps, self.levels
        self.fps, self.levels = self._new_table(capacity)
        self.count = 0
        for start in range(0, len(old_fps), WINDOW):
            fps, levels = np.asarray(old_fps[start : start + WINDOW]), np.asarray(old_levels[start : start + WINDOW])
            kept = (fps != EMPTY) & (levels < keep_below)
            self.insert(fps[kept], hashes_of(fps[kept]), levels[kept])
        self._publish()

    def digest(self, keep_below: int) -> str:
        """The keys of levels below `keep_below` with their levels, as a count and a sum of their
        hashes: the same wherever they lie (a table grown, or rolled back, holds them elsewhere)."""
        count, total = 0, 0
        for start in range(0, len(self.fps), WINDOW):
            fps, levels = np.asarray(self.fps[start : start + WINDOW]), np.asarray(self.levels[start : start + WINDOW])
            kept = (fps != EMPTY) & (levels < keep_below)
            hashes = _mixed(_mixed(fps[kept].view(np.uint64)) + levels[kept].astype(np.uint64))
            count += int(kept.sum())
            total = (total + int(hashes.sum(dtype=np.uint64))) % (1 << 64)
        return f"{count}:{total:016x}"

    @classmethod
    def joined(cls, directory: Path, index: int, board: Board) -> "Segment":
        """A segment on disk as a board in a file says it is, mapped when first offered to (sync)."""
        segment = cls.__new__(cls)
        segment.directory, segment.index, segment.on_disk, segment.board, segment.fd = directory, index, True, board, None
        segment.count, segment.fps, segment.levels = 0, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint16)
        return segment

    @classmethod
    def load(cls, directory: Path, index: int, board: Board | None = None) -> "Segment":
        """The segment's largest whole table on disk, read only, as it is: after a kill, the levels
        it holds may go beyond the last completed one."""
        segment = cls.__new__(cls)
        segment.directory, segment.index, segment.on_disk, segment.board, segment.fd = directory, index, True, board, None
        complete = [c for c in cls.capacities_on_disk(directory, index) if all(p.exists() for p in segment._paths(c))]
        if not complete:
            raise Damaged(directory / f"seen-{index:02d}-*.fps.npy", "no whole pair of .fps.npy and .levels.npy")
        segment.fps, segment.levels = segment._load(max(complete), "r")
        return segment

    @classmethod
    def open(cls, directory: Path, index: int, completed: int, board: Board | None = None) -> "Segment":
        """A segment on disk as it was when `completed` levels had ended: rebuilt from the keys of
        those levels (the slots later ones filled may lie on the probe paths of earlier keys)."""
        segment = cls.load(directory, index, board)
        segment.rebuild(len(segment.fps), keep_below=completed)  # into new files, renamed over the old ones once written
        segment.share()
        return segment


class Table:
    """The fingerprints seen, and the level each was first seen at: SEGMENTS segments, shared
    through `board` by the processes forked after it was made, if given."""

    def __init__(self, directory: Path | None, *, on_disk: bool = False, capacity: int = FIRST_CAPACITY, board: Board | None = None) -> None:
        """`directory`: where a table on disk is kept; `capacity`: each segment's slots at first (a power of two)."""
        self.board = board
        self.segments = [Segment(Path(directory or "."), index, on_disk, capacity, board) for index in range(SEGMENTS)]

    def offer(self, fps: np.ndarray, level: int, first: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Put fingerprints in the table, labelled `level` where new, or where labelled with a
        later level (the Spark engine's tasks claim the next level's states while an owner may
        still be selecting this one). Returns which are new (the first of equal ones) and which
        are now labelled `level` (new now, or labelled this level or a later one before). Segments
        are taken from `first` on (sharing processes start apart, to meet less)."""
        keys, hashes, order, bounds = self._by_segment(fps)
        new, ours = np.empty(len(keys), dtype=bool), np.empty(len(keys), dtype=bool)
        wanted = [index for index in (*range(first, SEGMENTS), *range(first)) if bounds[index] < bounds[index + 1]]
        for index in self.board.each_held(wanted) if self.board is not None else wanted:
            table, low, high = self.segments[index], bounds[index], bounds[index + 1]
            table.sync()
            chosen = order[low:high]
            table.make_room(high - low)
            new[chosen], slot = table.insert(keys[chosen], hashes[chosen], level)
            held = table.levels[slot]
            ours[chosen] = held >= level
            later = held > level
            if later.any():
                table.levels[slot[later]] = level
            table.share()
        return new, ours

    def _by_segment(self, fps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Fingerprints as keys, their hashes, and their places grouped by segment: (keys, hashes,
        order, bounds), segment i's keys at order[bounds[i]:bounds[i + 1]], in the batch's order."""
        keys = np.where(fps == EMPTY, ZERO, fps)
        hashes = hashes_of(keys)
        segment = (hashes >> np.uint64(64 - SEGMENT_BITS)).astype(np.uint8)
        order = np.argsort(segment, kind="stable")  # a radix sort (4x faster than on intp); within a segment, the batch's order: the first of equal keys wins
        return keys, hashes, order, np.searchsorted(segment[order], np.arange(SEGMENTS + 1))

    @classmethod
    def joined(cls, directory: Path) -> "Table":
        """A table on disk that processes not forked from one another fill in turn, each holding a
        lock on the whole table while it offers (Board.in_file: where each segment's table is)."""
        table = cls.__new__(cls)
        table.board = Board.in_file(Path(directory) / BOARD)
        table.segments = [Segment.joined(Path(directory), index, table.board) for index in range(SEGMENTS)]
        return table

    def __len__(self) -> int:
        if self.board is not None:
            return int(self.board.header[:, Board.COUNT].sum())
        return sum(table.count for table in self.segments)

    def checkpoint(self) -> None:
        """Make what the completed levels wrote durable: the mapped tables' pages on disk."""
        for table in self.segments:
            table.flush()

    def digests(self, completed: int) -> list[str]:
        """Each segment's digest after `completed` levels (its current table: another process may have grown it)."""
        for table in self.segments:
            table.sync()
        return [table.digest(completed) for table in self.segments]

    @staticmethod
    def verify(directory: Path, completed: int, digests: list[str]) -> None:
        """The table on disk holds the keys it held when `completed` levels had ended, as `digests` (digests()) say: else Damaged."""
        for index, expected in enumerate(digests):
            segment = Segment.load(Path(directory), index)
            if segment.digest(completed) != expected:
                fps, levels = Path(segment.fps.filename), Path(segment.levels.filename)
                raise Damaged(fps, f"it, or {levels.name} beside it, holds fingerprints or levels other than those the checkpoint recorded")

    @classmethod
    def open(cls, directory: Path, completed: int, board: Board | None = None) -> "Table":
        """A table on disk as it was when `completed` levels had ended."""
        table = cls.__new__(cls)
        table.board = board
        for partial in Path(directory).glob("seen-*.partial"):
            partial.unlink()
        table.segments = [Segment.open(Path(directory), index, completed, board) for index in range(SEGMENTS)]
        return table


class Visited:
    """Fingerprints seen, by level (a Table, this search's or shared); parent links per completed
    level in `directory`, of the states this process offered."""

    def __init__(self, directory: Path, *, on_disk: bool = False, capacity: int = FIRST_CAPACITY, table: Table | None = None, first: int = 0) -> None:
        """A table of its own in `directory` (`capacity`: each segment's slots at first, a power of
        two), or `table`, shared, taken from segment `first` on."""
        self.directory = Path(directory)
        self.level = 0  # the level being built
        self.table = table if table is not None else Table(self.directory, on_disk=on_disk, capacity=capacity)
        self.first = first
        self._pairs: list[tuple[np.ndarray, np.ndarray]] = []  # the level's (fingerprint, parent) candidates
        self._buffered, self._reduce_at = 0, REDUCE_AT

    # -- the search's view -------------------------------------------------------------------------
    def offer(self, fps: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """Candidates for the level being built, with the fingerprint of the state each came from
        (an initial state: its own). Returns which are new: seen for the first time, the first of
        equal ones in the batch. Each candidate of this level keeps its smallest parent."""
        new, ours = self.table.offer(fps, self.level, self.first)
        self._pairs.append((fps[ours], parents[ours]))
        self._buffered += int(ours.sum())
        if self._buffered > self._reduce_at:
            self._pairs = [self._smallest_parents()]
            self._buffered = len(self._pairs[0][0])
            self._reduce_at = max(REDUCE_AT, 2 * self._buffered)
        return new

    def _smallest_parents(self) -> tuple[np.ndarray, np.ndarray]:
        """The level's candidates reduced to one a state, with its smallest parent; sorted by fingerprint."""
        if not self._pairs:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        fps, parents, _first = smallest_parents(np.concatenate([f for f, _ in self._pairs]), np.concatenate([p for _, p in self._pairs]))
        return fps, parents

    def settle(self) -> None:
        """End the level: its parent links to a file, written whole before it takes its name."""
        fps, parents = self._smallest_parents()
        target = self.directory / f"parents-{self.level}.npy"
        partial = target.with_suffix(".partial")
        with open(partial, "wb") as out:
            np.save(out, np.stack((fps, parents)))
        os.replace(partial, target)
        self._pairs, self._buffered, self._reduce_at = [], 0, REDUCE_AT
        if self.level + 1 >= MAX_LEVELS:
            raise TooDeep(f"a search deeper than {MAX_LEVELS - 1:,} levels is beyond the fingerprint table's level labels")
        self.level += 1

    def parent(self, fp: int) -> int | None:
        """The parent link of a state of a completed level (an initial state's is itself)."""
        for level in range(self.level - 1, -1, -1):
            links = np.load(self.directory / f"parents-{level}.npy", mmap_mode="r")
            at = int(np.searchsorted(links[0], fp))
            if at < links.shape[1] and links[0, at] == fp:
                return int(links[1, at])
        return None

    def __len__(self) -> int:
        return len(self.table)

    # -- checkpoints (on disk only) ----------------------------------------------------------------
    def checkpoint(self) -> None:
        self.table.checkpoint()

    @classmethod
    def open(cls, directory: Path, completed: int, table: Table | None = None, first: int = 0) -> "Visited":
        """A disk-backed search's fingerprints as they were when `completed` levels had ended (its
        own table, or `table` rolled back already), with their parent links."""
        visited = cls.__new__(cls)
        visited.directory = Path(directory)
        for partial in visited.directory.glob("parents-*.partial"):
            partial.unlink()
        visited.table = table if table is not None else Table.open(visited.directory, completed)
        visited.first = first
        visited.level = completed
        visited._pairs, visited._buffered, visited._reduce_at = [], 0, REDUCE_AT
        for stale in visited.directory.glob("parents-*.npy"):
            if int(stale.stem.split("-")[1]) >= completed:
                stale.unlink()
        return visited
