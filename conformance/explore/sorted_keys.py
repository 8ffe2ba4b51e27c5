"""Set operations on arrays of int64 keys by sorting, on threads where the arrays are large
(numpy lets go of the interpreter lock while it sorts and searches). The liveness graph's keys
(fingerprints, (state, action) pairs) come clustered, and numpy's np.unique, which hashes, is
tens of times slower on them than a sort; a lookup of keys sorted first is several times faster
than one in their own order."""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

THREADED_ABOVE = 1 << 20  # keys: fewer are not worth a thread


def distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The keys once each, ascending, and how many times each occurs."""
    ordered = np.sort(keys, kind="stable")
    if not len(ordered):
        return ordered, np.zeros(0, dtype=np.int64)
    firsts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[firsts], np.diff(np.append(firsts, len(ordered)))


def located(ascending: np.ndarray, queries: np.ndarray, threads: int = 1, order: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Where each query is in `ascending` (any place where it is not), and whether it is there;
    `order`: the queries' argsorted(), if the caller has it."""
    if not len(ascending):
        return np.zeros(len(queries), dtype=np.int64), np.zeros(len(queries), dtype=bool)
    if order is None:
        order = argsorted(queries, threads)
    place = np.empty(len(queries), dtype=np.int64)
    place[order] = np.minimum(np.searchsorted(ascending, queries[order]), len(ascending) - 1)
    return place, ascending[place] == queries


def argsorted(keys: np.ndarray, threads: int = 1) -> np.ndarray:
    """An argsort of the keys (equal keys in any order), its parts sorted on threads: a stable
    sort of the sorted parts put back to back only merges them."""
    if threads <= 1 or len(keys) <= THREADED_ABOVE:
        return np.argsort(keys)
    parts = np.array_split(np.arange(len(keys), dtype=np.int64), threads)
    runs = np.concatenate(on_threads(lambda part: part[np.argsort(keys[part[0] : part[-1] + 1])] if len(part) else part, parts, threads))
    return runs[np.argsort(keys[runs], kind="stable")]


def on_threads(function: Callable[[np.ndarray], object], parts: list[np.ndarray], threads: int) -> list:
    """`function` of each part, in order, on up to `threads` threads."""
    if threads <= 1 or len(parts) <= 1 or sum(map(len, parts)) <= THREADED_ABOVE:
        return [function(part) for part in parts]
    with ThreadPoolExecutor(min(threads, len(parts))) as pool:
        return list(pool.map(function, parts))
