"""N Kafka controllers of one release as real JVM processes on 127.0.0.1, each with its own
directory (its server.properties, its metadata log, its log file), formatted with Kafka's storage
tool and started, killed, paused and resumed under kraftcheck's control. Each node reaches each
other through a relay kraftcheck can cut (relays.py): its configuration names the relay's port as
the other's address. Each node runs in a process tree of its own (adapters/process_lifetime.py),
so no JVM outlives kraftcheck, however it ends."""

import base64
import os
import random
import signal
import socket
import subprocess
from pathlib import Path

import msgspec

from adapters import kafka_server
from adapters.process_lifetime import ProcessTree
from conformance.cluster.relays import Links

FORMAT_SECONDS = 120  # a storage format is a JVM start and a few files: seconds


class QuorumError(Exception):
    """The quorum cannot be set up (a node's storage will not format, a directory cannot be written): for the user."""


class QuorumStateFile(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of Kafka's quorum-state file (`__cluster_metadata-0/quorum-state`) the history
    needs; every release from 3.3 writes them (QSTATE-1), whatever else it writes beside."""

    leaderId: int = -1
    leaderEpoch: int = 0
    votedId: int = -1


class Node:
    """One controller: its id, its port, its directory and, while it runs, its process."""

    def __init__(self, node_id: int, port: int, directory: Path) -> None:
        self.id = node_id
        self.port = port
        self.directory = directory
        self.process: subprocess.Popen | None = None
        self.tree: ProcessTree | None = None
        self.paused = False

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 now (bound and let go at once)."""
    sockets = []
    try:
        for _ in range(count):
            listening = socket.socket()
            listening.bind(("127.0.0.1", 0))
            sockets.append(listening)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def cluster_id(seed: int) -> str:
    """A Kafka cluster id (a Uuid in URL-safe base64, 22 characters) drawn from the seed."""
    draw = random.Random(seed)
    while True:
        text = base64.urlsafe_b64encode(draw.randbytes(16)).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka never makes one that could read as a command-line option
            return text


class ControllerQuorum:
    """N controllers of Kafka `version` on 127.0.0.1, static voters (controller.quorum.voters),
    under `directory` (node-1/, node-2/, ...). A context manager: leaving it stops every node."""

    def __init__(self, version: str, controllers: int, directory: Path, seed: int) -> None:
        self.version = version
        self.directory = directory
        self.cluster_id = cluster_id(seed)
        ports = free_ports(controllers)
        self.nodes = {i: Node(i, port, directory / f"node-{i}") for i, port in enumerate(ports, start=1)}
        self.links = Links({node.id: node.port for node in self.nodes.values()})

    def __enter__(self) -> "ControllerQuorum":
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def voters(self, seen_from: int) -> str:
        """controller.quorum.voters as node `seen_from` has it: the others at their relays."""
        return ",".join(f"{node.id}@127.0.0.1:{node.port if node.id == seen_from else self.links.port(seen_from, node.id)}" for node in self.nodes.values())

    def write_configuration(self) -> None:
        """Each node's server.properties: a controller alone, listening on its loopback port."""
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            node.properties.write_text(
                "\n".join(
                    (
                        "process.roles=controller",
                        f"node.id={node.id}",
                        f"controller.quorum.voters={self.voters(node.id)}",
                        f"listeners=CONTROLLER://127.0.0.1:{node.port}",
                        "controller.listener.names=CONTROLLER",
                        "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
                        f"log.dirs={node.data}",
                    )
                )
                + "\n"
            )

    def format(self) -> None:
        """Format every node's storage with Kafka's storage tool, all for one cluster id."""
        self.write_configuration()
        for node in self.nodes.values():
            self.format_node(node.id)

    def format_node(self, node_id: int) -> None:
        node = self.nodes[node_id]
        tree = ProcessTree()
        try:
            process = tree.popen(kafka_server.format_command(self.version, node.properties, self.cluster_id), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            output, _ = process.communicate(timeout=FORMAT_SECONDS)
        except subprocess.TimeoutExpired:
            raise QuorumError(f"node {node_id}: Kafka's storage tool did not finish formatting {node.data} within {FORMAT_SECONDS} s") from None
        finally:
            tree.kill()
        if process.returncode != 0:
            raise QuorumError(f"node {node_id}: Kafka's storage tool could not format {node.data} (exit {process.returncode}):\n{output.strip()[-2000:]}")

    def start(self, node_id: int) -> None:
        """Start a node that is not running, from what its directory holds."""
        node = self.nodes[node_id]
        if node.running:
            return
        node.tree = ProcessTree()
        with open(node.directory / "stdout.txt", "ab") as out:
            node.process = node.tree.popen(kafka_server.server_command(self.version, node.properties, node.log_file), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        node.paused = False

    def kill(self, node_id: int) -> None:
        """SIGKILL the node (and whatever it started): a crash; its directory stays as it was."""
        node = self.nodes[node_id]
        if node.tree is not None:
            node.tree.kill()
        if node.process is not None:
            node.process.wait()
        node.process, node.tree, node.paused = None, None, False

    def pause(self, node_id: int) -> None:
        """SIGSTOP the node's process group: it stops in its tracks, its sockets open."""
        node = self.nodes[node_id]
        if node.running and not node.paused:
            os.killpg(node.process.pid, signal.SIGSTOP)
            node.paused = True

    def resume(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.running and node.paused:
            os.killpg(node.process.pid, signal.SIGCONT)
            node.paused = False

    def stop(self) -> None:
        """Kill every node that runs, and close the links: nothing of the quorum outlives this."""
        for node_id in self.nodes:
            self.kill(node_id)
        self.links.close()

    def quorum_state(self, node_id: int) -> QuorumStateFile | None:
        """The node's quorum-state file as it is on disk now (Kafka writes it whole and renames
        it in place), None before the node has written one."""
        try:
            return msgspec.json.decode((self.nodes[node_id].data / "__cluster_metadata-0" / "quorum-state").read_bytes(), type=QuorumStateFile)
        except (OSError, msgspec.DecodeError):
            return None
