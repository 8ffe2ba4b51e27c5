"""A level's states in the order they were found: a list in memory, or a file of packed chunks.

On disk a level is a run of frames (an 8-byte length, then msgpack): each frame holds a chunk of
states as the system packs them (System.pack), with the shared parts those states refer to
appended once each to a parts log beside it, so that another process (a resumed search) can
learn the parts and read the level back. A level file is complete once closed (flushed and synced).
"""

import os
import struct
from array import array
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from conformance.explore.packed import Packed

if TYPE_CHECKING:  # the engine imports this module
    from conformance.explore.engine import System

CHUNK = 4096  # states a frame
_decode_frame = msgspec.msgpack.Decoder(tuple[bytes, Packed]).decode  # a frame: fingerprints (int64 bytes), states packed
FRAME_LENGTH = struct.Struct("<Q")  # a frame's length, before its payload


def write_frame(out, value: object) -> None:
    payload = msgspec.msgpack.encode(value)
    out.write(FRAME_LENGTH.pack(len(payload)) + payload)


def read_frames(path: Path, *, torn_end: bool = False) -> Iterator[tuple[int, bytes]]:
    """A file's frames, each with the offset where it ends. A torn last frame (the writer was
    killed) ends the file if `torn_end`, else the file is damaged: ValueError."""
    with open(path, "rb") as source:
        end = 0
        while header := source.read(FRAME_LENGTH.size):
            length = FRAME_LENGTH.unpack(header)[0] if len(header) == FRAME_LENGTH.size else None
            payload = source.read(length) if length is not None else b""
            if length is None or len(payload) < length:
                if torn_end:
                    return
                raise ValueError(f"{path}: cut short after byte {end}")
            end += FRAME_LENGTH.size + len(payload)
            yield end, payload


class PartsLog:
    """The shared parts of every state written to disk, each once: what unpacking needs."""

    def __init__(self, path: Path, system: "System") -> None:
        """A new log, or an existing one learned by `system` (a torn last frame cut off)."""
        self.path, self.system = path, system
        self.written: set[tuple[int, int]] = set()
        end = 0
        if path.exists():
            for end, payload in read_frames(path, torn_end=True):
                for fp, kind, encoded in msgspec.msgpack.decode(payload):
                    system.learn(fp, kind, encoded)
                    self.written.add((kind, fp))
        self.out = open(path, "ab")
        self.out.truncate(end)

    def note(self, packed: Packed) -> None:
        fresh = self.system.parts(packed, self.written)
        if fresh:
            write_frame(self.out, fresh)

    def sync(self) -> None:
        self.out.flush()
        os.fsync(self.out.fileno())

    def close(self) -> None:
        self.out.close()


class Level:
    """One level's (fingerprint, state) pairs, kept in memory, or on disk when `path` is given.

    In memory a level is read once, and what has been read is freed: the level being expanded
    shrinks as the next one grows, so the two together hold little more than the larger.
    """

    def __init__(self, system: "System", path: Path | None = None, parts: PartsLog | None = None) -> None:
        self.system, self.path, self.parts = system, path, parts
        self.runs: deque[tuple[np.ndarray, list]] = deque()  # in memory: (fingerprints, states) as they were added
        self.fps = array("q")  # on disk: the chunk being filled (8 bytes a state, not an int object's 32)
        self.states: list = []
        self.count = 0
        self.out = open(path, "wb") if path is not None else None

    def extend(self, fps: np.ndarray, states: list) -> None:
        self.count += len(states)
        if self.out is None:
            self.runs.append((fps, states))
            return
        self.fps.frombytes(fps.astype("<i8", copy=False).tobytes())
        self.states += states
        if len(self.states) >= CHUNK:
            self._spill()

    def _spill(self) -> None:
        packed = self.system.pack(self.states)
        self.parts.note(packed)
        write_frame(self.out, (self.fps.tobytes(), packed))
        self.fps, self.states = array("q"), []

    def close(self) -> "Level":
        """The level complete: on disk, every state written and synced."""
        if self.out is not None:
            if self.states:
                self._spill()
            self.parts.sync()
            self.out.flush()
            os.fsync(self.out.fileno())
            self.out.close()
            self.out = None
        return self

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[tuple[int, object]]:
        if self.path is None:
            while self.runs:
                fps, states = self.runs.popleft()
                yield from zip(fps.tolist(), states)
            return
        for _end, payload in read_frames(self.path):
            fps, packed = _decode_frame(payload)
            yield from zip(array("q", fps), self.system.unpack(packed))

    def discard(self) -> None:
        """Free the level: its memory, or its file."""
        self.runs.clear()
        self.fps, self.states = array("q"), []
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    @classmethod
    def reopen(cls, system: "System", path: Path) -> "Level":
        """A level closed before, by this process or another (whose parts log it has learned)."""
        level = cls(system)
        level.path = path
        level.count = 0
        for _end, payload in read_frames(path):  # every frame decoded once: a damaged one is found now, not midway
            fps, packed = _decode_frame(payload)
            if len(fps) != 8 * len(packed):
                raise ValueError(f"{path}: a frame of {len(packed)} states with {len(fps) // 8} fingerprints")
            level.count += len(packed)
        return level
