"""What keeps a search on disk honest: one run at a time, and nothing read back unverified.

A run holds an OS lock on the directory (a lock file in it, flock) for its whole life, so a second
run on the same directory is refused at once rather than sharing or destroying the files. Each
checkpoint names every file a resume will read, with its size and checksum (blake2b, streamed);
a resume verifies them all before it uses any, and a file that does not verify is Damaged, never
read: a damaged search cannot end in a verdict.
"""

import contextlib
import fcntl
import hashlib
from collections.abc import Iterator
from pathlib import Path

from model.config import ConfigError

LOCK = "lock"
SEARCH_FILE = "check.json"  # what the search is: its configuration (conformance.explore.check.SavedSearch)
CHUNK = 1 << 20  # bytes hashed at a time


class ResumeError(ConfigError):
    """A directory that holds no search to resume, or not as asked (a user's error, like a bad bound)."""


class Damaged(ResumeError):
    """A kept file that is missing or is not what the checkpoint says it was."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"damaged: {path} ({why}); the search kept there cannot be resumed")


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """The directory held by this run (and the workers it forks) until the block ends; a run
    that finds it held is refused at once. The kernel drops the lock of a killed run."""
    with open(Path(directory) / LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResumeError(f"{directory}: in use by another kraftcheck run (it holds {Path(directory) / LOCK}); wait for it to end") from None
        yield


def checksum(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def digest(path: Path, size: int) -> str:
    """checksum() of a file's first `size` bytes (fewer if it is shorter), read a chunk at a time."""
    hashed = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as source:
        while size > 0 and (chunk := source.read(min(CHUNK, size))):
            hashed.update(chunk)
            size -= len(chunk)
    return hashed.hexdigest()


def verify(directory: Path, name: str, size: int, checksum: str, *, growing: bool = False) -> None:
    """The file `name` in `directory` as a checkpoint recorded it; one that is `growing` (appended
    to after the checkpoint) may be longer, its first `size` bytes are checked."""
    path = Path(directory) / name
    try:
        actual = path.stat().st_size
        if actual < size or (actual > size and not growing):
            raise Damaged(path, f"{actual:,} bytes, the checkpoint recorded {size:,}")
        if digest(path, size) != checksum:
            raise Damaged(path, "its checksum is not the one the checkpoint recorded")
    except OSError as error:
        raise Damaged(path, error.strerror or str(error)) from None
