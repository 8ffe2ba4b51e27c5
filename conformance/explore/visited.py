"""The states a search has seen, kept as TLC keeps them: fingerprints, not states.

A fingerprint table (open addressing in numpy arrays: the 64-bit fingerprint and the level it
was first seen at, 10 bytes a slot, at most 70 % full: 14 to 29 bytes a state) answers "seen
before?" for a whole batch of candidates at once. It is cut into SEGMENTS by the fingerprint's
top bits, each growing on its own, so growing never needs the whole table twice over. Each
level's parent links (fingerprint, the smallest parent's fingerprint) go to a file when the
level ends, 16 bytes a state on disk, read back only to rebuild a counterexample. With `on_disk`
the segments are files mapped into memory, so the search is bounded by disk rather than RAM, and
a killed search can be taken back to any completed level: every slot carries the level that filled it.
"""

import os
from pathlib import Path

import numpy as np

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


class Segment:
    """One open-addressing table: the keys whose hash has these top bits."""

    def __init__(self, directory: Path, index: int, on_disk: bool, capacity: int = FIRST_CAPACITY) -> None:
        self.directory, self.index, self.on_disk = directory, index, on_disk
        self.count = 0
        self.fps, self.levels = self._new_table(capacity)
        self._publish()

    def _paths(self, capacity: int) -> tuple[Path, Path]:
        name = f"seen-{self.index:02d}-{capacity}"
        return self.directory / f"{name}.fps.npy", self.directory / f"{name}.levels.npy"

    def _new_table(self, capacity: int) -> tuple[np.ndarray, np.ndarray]:
        if not self.on_disk:
            return np.zeros(capacity, dtype=np.int64), np.zeros(capacity, dtype=np.uint16)
        fps_path, levels_path = self._paths(capacity)
        fps = np.lib.format.open_memmap(fps_path.with_suffix(".partial"), mode="w+", dtype=np.int64, shape=(capacity,))
        levels = np.lib.format.open_memmap(levels_path.with_suffix(".partial"), mode="w+", dtype=np.uint16, shape=(capacity,))
        return fps, levels

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
                table[taken] = wanted[winners]
                self.levels[taken] = levels[pending[winners]]
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

    @classmethod
    def open(cls, directory: Path, index: int, completed: int) -> "Segment":
        """A segment on disk as it was when `completed` levels had ended: rebuilt from the keys of
        those levels (the slots later ones filled may lie on the probe paths of earlier keys)."""
        segment = cls.__new__(cls)
        segment.directory, segment.index, segment.on_disk = directory, index, True
        complete = [c for c in cls.capacities_on_disk(directory, index) if all(p.exists() for p in segment._paths(c))]
        if not complete:
            raise ValueError(f"{directory}: no whole seen-{index:02d}-*.fps.npy and .levels.npy pair")
        capacity = max(complete)
        fps_path, levels_path = segment._paths(capacity)
        segment.fps, segment.levels = np.load(fps_path, mmap_mode="r"), np.load(levels_path, mmap_mode="r")
        segment.rebuild(capacity, keep_below=completed)  # into new files, renamed over the old ones once written
        return segment


class Visited:
    """Fingerprints seen, by level; parent links per completed level in `directory`."""

    def __init__(self, directory: Path, *, on_disk: bool = False, capacity: int = FIRST_CAPACITY) -> None:
        """`capacity`: each segment's slots at first (a power of two)."""
        self.directory = Path(directory)
        self.level = 0  # the level being built
        self.segments = [Segment(self.directory, index, on_disk, capacity) for index in range(SEGMENTS)]
        self._pairs: list[tuple[np.ndarray, np.ndarray]] = []  # the level's (fingerprint, parent) candidates
        self._buffered, self._reduce_at = 0, REDUCE_AT

    # -- the search's view -------------------------------------------------------------------------
    def offer(self, fps: np.ndarray, parents: np.ndarray) -> np.ndarray:
        """Candidates for the level being built, with the fingerprint of the state each came from
        (an initial state: its own). Returns which are new: seen for the first time, the first of
        equal ones in the batch. Each candidate of this level keeps its smallest parent."""
        keys = np.where(fps == EMPTY, ZERO, fps)
        hashes = hashes_of(keys)
        segment = (hashes >> np.uint64(64 - SEGMENT_BITS)).astype(np.uint8)
        order = np.argsort(segment, kind="stable")  # a radix sort (4x faster than on intp); within a segment, the batch's order: the first of equal keys wins
        bounds = np.searchsorted(segment[order], np.arange(SEGMENTS + 1))
        new, ours = np.empty(len(keys), dtype=bool), np.empty(len(keys), dtype=bool)
        for table, low, high in zip(self.segments, bounds[:-1], bounds[1:]):
            if low < high:
                chosen = order[low:high]
                table.make_room(high - low)
                new[chosen], slot = table.insert(keys[chosen], hashes[chosen], self.level)
                ours[chosen] = table.levels[slot] == self.level
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
        return sum(table.count for table in self.segments)

    # -- checkpoints (on disk only) ----------------------------------------------------------------
    def checkpoint(self) -> None:
        """Make what the completed levels wrote durable: the mapped tables' pages on disk."""
        for table in self.segments:
            table.flush()

    @classmethod
    def open(cls, directory: Path, completed: int) -> "Visited":
        """A disk-backed table as it was when `completed` levels had ended, with their parent links."""
        visited = cls.__new__(cls)
        visited.directory = Path(directory)
        for partial in visited.directory.glob("*.partial"):
            partial.unlink()
        visited.segments = [Segment.open(visited.directory, index, completed) for index in range(SEGMENTS)]
        visited.level = completed
        visited._pairs, visited._buffered, visited._reduce_at = [], 0, REDUCE_AT
        for stale in visited.directory.glob("parents-*.npy"):
            if int(stale.stem.split("-")[1]) >= completed:
                stale.unlink()
        return visited
