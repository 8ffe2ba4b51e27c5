"""The fingerprint table against a plain Python set and dict: new-ness, smallest parents, growth,
the fingerprint 0, rolling a disk-backed table back to a completed level, and processes sharing one."""

import multiprocessing
import random

import numpy as np
import pytest

from conformance.explore.visited import BOARD, SEGMENTS, Board, Table, Visited

HANG_SECONDS = 600  # a hang guard only: under a loaded machine (the suite runs a test file per core) a worker takes minutes


def levels_of_candidates(seed: int, levels: int, per_level: int, universe: int) -> list[list[tuple[int, int]]]:
    """Random (fingerprint, parent) candidates with many repeats, some of them 0 or negative."""
    rng = random.Random(seed)
    pool = [0, -1, 2**63 - 1, -(2**63)] + [rng.randrange(-(2**63), 2**63) for _ in range(universe)]
    return [[(rng.choice(pool), rng.randrange(-50, 50)) for _ in range(per_level)] for _ in range(levels)]


def reference(levels: list[list[tuple[int, int]]]) -> tuple[list[list[bool]], list[dict[int, int]]]:
    """What the table must answer: per candidate whether it is new; per level each new state's smallest parent."""
    seen: set[int] = set()
    news, parents = [], []
    for candidates in levels:
        level: dict[int, int] = {}
        new = []
        for fp, parent in candidates:
            new.append(fp not in seen)
            if fp not in seen:
                seen.add(fp)
                level[fp] = parent
            elif fp in level:
                level[fp] = min(level[fp], parent)
        news.append(new)
        parents.append(level)
    return news, parents


def offer_all(visited: Visited, candidates: list[tuple[int, int]], batch: int) -> list[bool]:
    new: list[bool] = []
    for start in range(0, len(candidates), batch):
        chunk = candidates[start : start + batch]
        fps = np.array([fp for fp, _ in chunk], dtype=np.int64)
        parents = np.array([p for _, p in chunk], dtype=np.int64)
        new += visited.offer(fps, parents).tolist()
    return new


@pytest.mark.parametrize("on_disk", [False, True])
@pytest.mark.parametrize("batch", [1, 7, 5000])
def test_the_table_answers_as_a_set_does(tmp_path, on_disk: bool, batch: int) -> None:
    levels = levels_of_candidates(seed=batch, levels=5, per_level=4000, universe=6000)
    news, parents = reference(levels)
    visited = Visited(tmp_path, on_disk=on_disk, capacity=4)  # small: every segment grows several times
    for level, candidates in enumerate(levels):
        assert offer_all(visited, candidates, batch) == news[level]
        visited.settle()
    assert len(visited) == len(set(fp for candidates in levels for fp, _ in candidates))
    assert all(len(segment.fps) >= 64 for segment in visited.table.segments)  # grown from 4 slots
    for level in parents:
        for fp, parent in level.items():
            assert visited.parent(fp) == parent
    absent = next(fp for fp in range(1, 10**6) if all(fp not in level for level in parents))
    assert visited.parent(absent) is None


def test_a_disk_backed_table_rolls_back_to_a_completed_level(tmp_path) -> None:
    levels = levels_of_candidates(seed=3, levels=6, per_level=3000, universe=9000)
    news, _ = reference(levels)
    visited = Visited(tmp_path, on_disk=True, capacity=4)
    for candidates in levels[:3]:
        offer_all(visited, candidates, 1000)
        visited.settle()
    count_after_three = len(visited)
    offer_all(visited, levels[3], 1000)  # a level that ended, then one killed half way
    visited.settle()
    offer_all(visited, levels[4][:1500], 1000)
    visited.checkpoint()
    del visited
    resumed = Visited.open(tmp_path, completed=3)
    assert len(resumed) == count_after_three
    assert not list(tmp_path.glob("parents-3.npy"))
    for level in (3, 4, 5):
        assert offer_all(resumed, levels[level], 700) == news[level]
        resumed.settle()


def offer_shared(index: int, count: int, table: Table, directory, levels: list[list[tuple[int, int]]], barrier, connection) -> None:
    """One of `count` processes sharing `table`: every count-th candidate of each level, in small
    batches (they take turns at the segments' locks often); the fingerprints it was told are new,
    and the parent links it wrote."""
    visited = Visited(directory / f"worker-{index}", table=table, first=index * SEGMENTS // count)
    visited.directory.mkdir()
    new_per_level = []
    for candidates in levels:
        mine = candidates[index::count]
        new_per_level.append([fp for (fp, _), new in zip(mine, offer_all(visited, mine, 37)) if new])
        barrier.wait()  # the level ends for both before either labels the next one
        visited.settle()
    links = [{fp: visited.parent(fp) for fp, _ in candidates} for candidates in levels]
    connection.send((new_per_level, links))


@pytest.mark.parametrize("on_disk", [False, True])
@pytest.mark.parametrize("count", [2, 3, 4])
def test_processes_sharing_a_table_find_each_state_new_once_and_its_smallest_parent(tmp_path, on_disk: bool, count: int) -> None:
    """Three or four processes (more than this machine's cores): one maps a segment another grew,
    and a third must then find it wherever the last to touch it said it is."""
    levels = levels_of_candidates(seed=11, levels=4, per_level=6000, universe=8000)
    news, parents = reference(levels)
    context = multiprocessing.get_context("fork")
    table = Table(tmp_path, on_disk=on_disk, capacity=4, board=Board(context))  # small: segments grow, by one process or another
    barrier = context.Barrier(count, timeout=HANG_SECONDS)
    ends = [context.Pipe() for _ in range(count)]
    workers = [context.Process(target=offer_shared, args=(index, count, table, tmp_path, levels, barrier, ends[index][1])) for index in range(count)]
    for worker in workers:
        worker.start()
    try:
        answers = [ends[index][0].recv() if ends[index][0].poll(HANG_SECONDS) else pytest.fail(f"worker {index} did not answer") for index in range(count)]
    finally:
        for worker in workers:
            worker.join(10)
            worker.kill()
    for level, candidates in enumerate(levels):
        found_new = [fp for new_per_level, _links in answers for fp in new_per_level[level]]
        expected_new = [fp for (fp, _), new in zip(candidates, news[level]) if new]
        assert sorted(found_new) == sorted(expected_new)  # each new fingerprint new for one process only
        for fp, parent in parents[level].items():
            known = [links[level][fp] for _new, links in answers if links[level].get(fp) is not None]
            assert min(known) == parent
    assert len(table) == len(set(fp for candidates in levels for fp, _ in candidates))


def test_a_table_joined_by_processes_in_turn_tells_each_fingerprint_its_first_level(tmp_path):
    """What the Spark engine's tasks do with a partition's table: each worker joins it (a board in
    a file says where each segment's table is and how full) and offers to it in turn, one of them
    growing it and the others following. A fingerprint another worker claimed for the next level
    before it was offered for this one is of this one: an owner may select its level after a
    task claimed some of its states for the next."""
    levels = levels_of_candidates(seed=7, levels=4, per_level=3_000, universe=5_000)
    Table(tmp_path, on_disk=True, capacity=16, board=Board.in_file(tmp_path / BOARD))
    workers = [Table.joined(tmp_path) for _ in range(3)]
    first_level: dict[int, int] = {}
    for depth, candidates in enumerate(levels):
        fps = np.array([fp for fp, _ in candidates], dtype=np.int64)
        claims = fps[::7]
        workers[(depth + 1) % 3].offer(claims, depth + 1)
        claimed = {fp for fp in claims.tolist() if fp not in first_level}
        new, ours = workers[depth % 3].offer(fps, depth)
        met: set[int] = set()
        expected_new = []
        for fp in fps.tolist():
            expected_new.append(fp not in first_level and fp not in claimed and fp not in met)
            met.add(fp)
        assert new.tolist() == expected_new
        assert ours.tolist() == [first_level.setdefault(fp, depth) == depth for fp in fps.tolist()]
    queried = list(first_level) + [12345678901, -98765]
    new, ours = Table.joined(tmp_path).offer(np.array(queried, dtype=np.int64), len(levels))
    assert ours.tolist() == new.tolist() == [fp not in first_level for fp in queried]
    assert len(Table.joined(tmp_path)) == len(first_level) + 2
