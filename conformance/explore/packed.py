"""States packed side by side, as the engines move them between processes and to disk.

A state packs to a row of bytes (System.pack); rows of many states are one Packed: their bytes
back to back and where each ends. A whole batch is packed, sliced and unpacked in a few array
operations instead of an object per state, which is most of what crossing costs.
"""

import msgspec
import numpy as np

ROWS_AT_ONCE = 1 << 16  # rows Packed.take moves in one array operation


class Packed(msgspec.Struct, array_like=True):
    """Rows side by side: row i is data[ends[i - 1]:ends[i]]; `ends` int64 bytes."""

    data: bytes = b""
    ends: bytes = b""

    @classmethod
    def of(cls, rows: list[bytes]) -> "Packed":
        return cls(b"".join(rows), np.cumsum([len(row) for row in rows], dtype=np.int64).tobytes())

    def __len__(self) -> int:
        return len(self.ends) // 8

    def offsets(self) -> np.ndarray:
        """Where each row ends."""
        return np.frombuffer(self.ends, dtype=np.int64)

    def rows(self) -> list[bytes]:
        data, ends = self.data, self.offsets().tolist()
        return [data[start:end] for start, end in zip([0, *ends[:-1]], ends)]

    def take(self, at: np.ndarray) -> "Packed":
        """The rows at these places, in this order."""
        ends = self.offsets()
        if not len(ends) or not len(at):
            return Packed()
        if (ends % 8).any():  # rows of any length: sliced one by one
            rows = self.rows()
            return Packed.of([rows[place] for place in at.tolist()])
        # rows of whole 8-byte words (a cluster state's): moved a word at a time, ROWS_AT_ONCE rows
        # at a time (the indices cost 3 words a word: all at once, they outgrow the rows)
        words = ends // 8
        starts = np.concatenate(([0], words[:-1]))[at]
        lengths = words[at] - starts
        new_ends = np.cumsum(lengths)
        data, out = np.frombuffer(self.data, dtype=np.int64), np.empty(int(new_ends[-1]), dtype=np.int64)
        for low in range(0, len(at), ROWS_AT_ONCE):
            high = min(low + ROWS_AT_ONCE, len(at))
            first, last = int(new_ends[low] - lengths[low]), int(new_ends[high - 1])
            moved = lengths[low:high]
            out[first:last] = data[np.repeat(starts[low:high] - (new_ends[low:high] - moved), moved) + np.arange(first, last)]
        return Packed(out.tobytes(), (new_ends * 8).tobytes())


def joined(packs: list[Packed]) -> Packed:
    """The rows of several, one after the other."""
    if len(packs) == 1:
        return packs[0]
    bases = np.cumsum([0] + [len(p.data) for p in packs[:-1]], dtype=np.int64)
    ends = [p.offsets() + base for p, base in zip(packs, bases.tolist())]
    return Packed(b"".join(p.data for p in packs), np.concatenate(ends).tobytes() if ends else b"")
