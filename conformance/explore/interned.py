"""Values stored once, addressed by a small int, with fingerprints that are the same in every
process: what a cluster state is made of, and what lets the engines move it as 8 bytes a part."""

import hashlib

import msgspec
import numpy as np

_encode = msgspec.msgpack.Encoder(order="deterministic").encode


def stable_fingerprint(value: object) -> int:
    """A 64-bit fingerprint that is the same in every process (unlike hash() of strings)."""
    return int.from_bytes(hashlib.blake2b(_encode(value), digest_size=8).digest(), "little", signed=True)


class Interned:
    """Values stored once, addressed by a small int, with their stable fingerprints."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.values: list = []
        self.ids: dict = {}
        self.fps: list[int] = []
        self.by_fp: dict[int, int] = {}
        self.encodings: dict[int, bytes] = {}
        self._fp_array = np.zeros(0, dtype=np.int64)
        self._by_fp_sorted = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))  # fingerprints sorted, and their ids

    def fp_array(self) -> np.ndarray:
        """The fingerprints by id as an array (grown as values are added): what pack() indexes."""
        if len(self._fp_array) < len(self.fps):
            self._fp_array = np.concatenate((self._fp_array, np.array(self.fps[len(self._fp_array) :], dtype=np.int64)))
        return self._fp_array

    def ids_of(self, fps: np.ndarray) -> np.ndarray:
        """The ids of values by their fingerprints, all at once: what unpack() looks up. The sorted
        index grows by the values added since the last call, merged in."""
        ordered, ids = self._by_fp_sorted
        if len(ids) < len(self.fps):
            added = len(ids) + np.argsort(self.fp_array()[len(ids) :])  # the new ids, by fingerprint
            added_fps = self.fp_array()[added]
            places = np.searchsorted(ordered, added_fps)
            ordered, ids = self._by_fp_sorted = (np.insert(ordered, places, added_fps), np.insert(ids, places, added))
        places = np.minimum(np.searchsorted(ordered, fps), len(ordered) - 1)
        if len(fps) and (not len(ordered) or (ordered[places] != fps).any()):
            raise KeyError(f"a {self.kind.__name__} not learned: its parts must be learned before states are unpacked")
        return ids[places]

    def id(self, value: object) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.values)
            self.values.append(value)
            fp = stable_fingerprint(value)
            self.fps.append(fp)
            self.by_fp[fp] = found
        return found

    def encoded(self, value_id: int) -> bytes:
        """The value's encoding, made once."""
        found = self.encodings.get(value_id)
        if found is None:
            found = self.encodings[value_id] = _encode(self.values[value_id])
        return found

    def learn(self, fp: int, encoded: bytes) -> None:
        """Take in a value another process fingerprinted as `fp`, decoding it only the first time."""
        if fp not in self.by_fp:
            self.id(msgspec.msgpack.decode(encoded, type=self.kind))
