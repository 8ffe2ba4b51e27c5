"""A node's metadata log as its disk holds it (__cluster_metadata-0's segments and snapshots),
read with Kafka's own record classes by kraftcheck's LogDump (adapters/kafka/server/LogDump.java)
into one Batch per record batch: what the history's log checks need (history.py), and kept
beside the node's files (node-N/metadata-log.jsonl)."""

from pathlib import Path

import msgspec

from adapters import kafka_server
from adapters.process_lifetime import run_in_tree

READ_SECONDS = 120
DUMP = "metadata-log.jsonl"


class MetadataLogError(Exception):
    """A node's metadata log cannot be read: for the user, with the file and Kafka's words."""


class Batch(msgspec.Struct, frozen=True, kw_only=True):
    """One record batch of `file`: its offsets, the epoch of the leader that wrote it, its
    checksum; the leader a LeaderChange record in it names; the workload's writes it holds."""

    file: str
    base: int
    last: int
    epoch: int
    control: bool
    crc: int
    leader: int = -1
    writes: tuple[int, ...] = ()


def read(version: str, data: Path, into: Path) -> list[Batch]:
    """The batches of the metadata log under the log directory `data`, in file and offset order
    (none before the node has written one); the dump written to `into` as it is read."""
    directory = data / "__cluster_metadata-0"
    files = sorted(directory.glob("*.log")) + sorted(directory.glob("*.checkpoint"))
    if not files:
        into.write_bytes(b"")
        return []
    try:
        with open(into, "wb") as out:
            code, errors = run_in_tree(kafka_server.program_command(version, "LogDump", *map(str, files)), READ_SECONDS, out)
    except TimeoutError:
        raise MetadataLogError(f"reading the metadata log in {directory} took more than {READ_SECONDS} s") from None
    if code != 0:
        raise MetadataLogError(f"cannot read the metadata log in {directory} (exit {code}): {errors.strip()[-1000:]}")
    return load(into)


def load(dump: Path) -> list[Batch]:
    """The batches of a dump that `read` wrote."""
    decoder = msgspec.json.Decoder(Batch)
    try:
        return [decoder.decode(line) for line in dump.read_bytes().splitlines() if line.strip()]
    except (OSError, msgspec.DecodeError) as error:
        raise MetadataLogError(f"{dump}: not a metadata log's dump ({error})") from None
