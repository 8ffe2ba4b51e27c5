"""N Kafka controllers of one release as real JVM processes on 127.0.0.1, each with its own
directory (its server.properties, its metadata log, its log file), formatted with Kafka's storage
tool and started, killed, paused and resumed under kraftcheck's control. Where the machine lets
kraftcheck make network namespaces, each node runs in one of its own and reaches the others only
through relays kraftcheck can cut (network.py); elsewhere all run on the host's loopback, and
cannot be partitioned. Each node runs in a process tree of its own (adapters/process_lifetime.py),
so no JVM outlives kraftcheck, however it ends."""

import base64
import os
import random
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import msgspec

from adapters import kafka_server
from adapters.process_lifetime import ProcessTree, run_in_tree
from conformance.cluster.network import Network, NetworkUnavailable

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
    under `directory` (node-1/, node-2/, ...), in a network of their own where the machine allows
    one (`partitionable`; QuorumError without one where `partitions` need it). A context manager:
    leaving it stops every node."""

    def __init__(self, version: str, controllers: int, directory: Path, seed: int, partitions: bool = False) -> None:
        self.version = version
        self.directory = directory
        self.cluster_id = cluster_id(seed)
        ports = free_ports(controllers)
        self.nodes = {i: Node(i, port, directory / f"node-{i}") for i, port in enumerate(ports, start=1)}
        self.network: Network | None = None
        self.no_network_because = ""
        try:
            self.network = Network({node.id: node.port for node in self.nodes.values()})
        except NetworkUnavailable as why:
            if partitions:
                raise QuorumError(f"partitions need a network of the run's own: {why}") from None
            self.no_network_because = str(why)

    @property
    def partitionable(self) -> bool:
        return self.network is not None

    def __enter__(self) -> "ControllerQuorum":
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def voters(self) -> str:
        """controller.quorum.voters: every node at its own port (in a node's namespace, another's port is the relay to it)."""
        return ",".join(f"{node.id}@127.0.0.1:{node.port}" for node in self.nodes.values())

    def write_configuration(self) -> None:
        """Each node's server.properties: a controller alone, listening on its loopback port."""
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            node.properties.write_text(
                "\n".join(
                    (
                        "process.roles=controller",
                        f"node.id={node.id}",
                        f"controller.quorum.voters={self.voters}",
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
        try:
            code, output = run_in_tree(kafka_server.format_command(self.version, node.properties, self.cluster_id), FORMAT_SECONDS)
        except TimeoutError:
            raise QuorumError(f"node {node_id}: Kafka's storage tool did not finish formatting {node.data} within {FORMAT_SECONDS} s") from None
        if code != 0:
            raise QuorumError(f"node {node_id}: Kafka's storage tool could not format {node.data} (exit {code}):\n{output.strip()[-2000:]}")

    def start(self, node_id: int) -> None:
        """Start a node that is not running, from what its directory holds."""
        node = self.nodes[node_id]
        if node.running:
            return
        node.tree = ProcessTree()
        with open(node.log_file, "ab") as out:  # every run of the node, one after the other
            entering = self.network.enter(node_id) if self.network is not None else []
            node.process = node.tree.popen(entering + kafka_server.server_command(self.version, node.properties), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        node.paused = False

    def kill(self, node_id: int) -> None:
        """SIGKILL the node (and whatever it started): a crash; its directory stays as it was."""
        node = self.nodes[node_id]
        if node.tree is not None:
            node.tree.kill()
        if node.process is not None:
            node.process.wait()
        node.process, node.tree, node.paused = None, None, False

    def wipe(self, node_id: int) -> None:
        """Kill the node and lose its disk: its log directory deleted and formatted anew, as an
        operator replacing a disk would (the error Raft cannot survive: its votes and log gone)."""
        self.kill(node_id)
        shutil.rmtree(self.nodes[node_id].data, ignore_errors=True)
        self.format_node(node_id)

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

    def cut(self, source: int, target: int) -> None:
        """Nothing from `source` reaches `target` any more (relays.py)."""
        self.network.cut(source, target)

    def heal(self, source: int, target: int) -> None:
        self.network.heal(source, target)

    def stop(self) -> None:
        """Kill every node that runs, and end the network: nothing of the quorum outlives this."""
        for node_id in self.nodes:
            self.kill(node_id)
        if self.network is not None:
            self.network.close()

    @property
    def bootstrap(self) -> str:
        """Where kraftcheck's clients reach the controllers (host:port,...), from the host."""
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes.values())

    def quorum_state(self, node_id: int) -> QuorumStateFile | None:
        """The node's quorum-state file as it is on disk now (Kafka writes it whole and renames
        it in place), None before the node has written one."""
        try:
            return msgspec.json.decode((self.nodes[node_id].data / "__cluster_metadata-0" / "quorum-state").read_bytes(), type=QuorumStateFile)
        except (OSError, msgspec.DecodeError):
            return None
