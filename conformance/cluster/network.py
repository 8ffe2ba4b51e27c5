"""The run's own network: each node in a network namespace of its own, with a loopback of its
own, and kraftcheck's relays (relays.py) the only way between them. In node i's namespace the
relay (i, j) listens on 127.0.0.1 at node j's own port and connects, inside j's namespace, to
127.0.0.1 at that port; so every node reaches every other at the address that node listens on,
the one a Kafka 3.9 leader sends its followers (KIP-853), and cannot get past a cut link. The
relay (0, j) listens on the host's loopback at j's port: kraftcheck's own clients reach node j
there, and it is never cut.

The namespaces need no privilege: a helper process (this module run as a program) enters a user
namespace of its own (util-linux `unshare --user --map-root-user`), in which it may make network
namespaces; a thread of it lives in each, making that namespace's sockets, while the helper stays
on the host's network. Each node's JVM joins its namespace through `nsenter` (`enter`). Nothing
is sent beyond the loopback of the host or of a namespace; the namespaces end with the helper,
which ends when kraftcheck closes its input, or dies.
"""

import ctypes
import fcntl
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from adapters.process_lifetime import ProcessTree
from conformance.cluster.relays import Links, Relay

LOOPBACK = "127.0.0.1"
CLIENT = 0  # the relays' source for kraftcheck's own clients, on the host
READY_SECONDS = 30.0
CONNECT_SECONDS = 1.0
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


class NetworkUnavailable(Exception):
    """The machine will not let kraftcheck make network namespaces: for the user, with the reason."""


class Network:
    """The namespaces and relays of one quorum (`ports`: node id -> its port), in a helper
    process; a context manager that ends it."""

    def __init__(self, ports: dict[int, int]) -> None:
        missing = [tool for tool in ("unshare", "nsenter") if shutil.which(tool) is None]
        if missing:
            raise NetworkUnavailable(f"{' and '.join(missing)} (util-linux) not on PATH")
        self.tree = ProcessTree()
        self.helper = self.tree.popen(
            ["unshare", "--user", "--map-root-user", sys.executable, "-m", "conformance.cluster.network", json.dumps(ports)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        ready = self._reply()
        if ready is None or "net" not in ready:
            self.close()
            why = (self.helper.stderr.read().strip().splitlines() or ["no answer"])[-1]
            raise NetworkUnavailable(f"cannot make network namespaces here ({why}): unprivileged user namespaces may be disabled")
        self.user = ready["user"]
        self.net = {int(node): path for node, path in ready["net"].items()}

    def __enter__(self) -> "Network":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def enter(self, node_id: int) -> list[str]:
        """The command prefix that runs a program in node `node_id`'s namespace."""
        return ["nsenter", "--preserve-credentials", f"--user={self.user}", f"--net={self.net[node_id]}", "--"]

    def cut(self, source: int, target: int) -> None:
        self._ask("cut", source, target)

    def heal(self, source: int, target: int) -> None:
        self._ask("heal", source, target)

    def close(self) -> None:
        if self.helper.poll() is None:
            try:
                self.helper.stdin.close()  # the helper's end of input: it closes its relays and exits
                self.helper.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.tree.kill()

    def _ask(self, command: str, source: int, target: int) -> None:
        try:
            self.helper.stdin.write(json.dumps([command, source, target]) + "\n")
            self.helper.stdin.flush()
        except OSError:
            raise NetworkUnavailable("the network helper has gone") from None
        if self._reply() != {"ok": True}:
            raise NetworkUnavailable(f"the network helper did not {command} the link {source} -> {target}")

    def _reply(self) -> dict | None:
        readable, _, _ = select.select([self.helper.stdout], [], [], READY_SECONDS)
        line = self.helper.stdout.readline() if readable else ""
        try:
            return json.loads(line) if line else None
        except ValueError:
            return None


class Namespace:
    """A network namespace and the thread that lives in it: a socket is made in the namespace of
    the thread that makes it, and keeps it wherever it is used. Without `new`, the host's."""

    def __init__(self, new: bool) -> None:
        self.thread = ThreadPoolExecutor(max_workers=1)
        self.path = self.thread.submit(self._enter if new else lambda: "").result()

    def new_socket(self) -> socket.socket:
        return self.thread.submit(socket.socket, socket.AF_INET, socket.SOCK_STREAM).result()

    def listening(self, port: int) -> socket.socket:
        listener = self.new_socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, port))
        listener.listen(64)
        return listener

    def connected(self, port: int) -> socket.socket:
        connection = self.new_socket()
        connection.settimeout(CONNECT_SECONDS)
        try:
            connection.connect((LOOPBACK, port))
        except OSError:
            connection.close()
            raise
        return connection

    @staticmethod
    def _enter() -> str:
        """In the thread: a new network namespace, its loopback up; a path that names it."""
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
        with socket.socket() as handle:
            flags = struct.unpack_from("16sH", fcntl.ioctl(handle, _SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0) + bytes(22)))[1]
            fcntl.ioctl(handle, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP) + bytes(22))
        return f"/proc/{os.getpid()}/fd/{os.open('/proc/thread-self/ns/net', os.O_RDONLY)}"


def serve(ports: dict[int, int]) -> None:
    """The helper: make the namespaces and relays, say where they are, then cut and heal links
    as told, one JSON line in, one out, until the end of input."""
    host = Namespace(new=False)
    spaces = {node: Namespace(new=True) for node in ports}
    sources = {CLIENT: host, **spaces}

    def relay(source: int, target: int) -> Relay:
        return Relay(sources[source].listening(ports[target]), lambda: spaces[target].connected(ports[target]))

    relays = {(source, target): relay(source, target) for source in sources for target in ports if source != target}
    with Links(relays) as links:
        print(json.dumps({"user": f"/proc/{os.getpid()}/ns/user", "net": {node: space.path for node, space in spaces.items()}}), flush=True)
        for line in sys.stdin:
            command, source, target = json.loads(line)
            (links.cut if command == "cut" else links.heal)(source, target)
            print(json.dumps({"ok": True}), flush=True)


if __name__ == "__main__":
    serve({int(node): port for node, port in json.loads(sys.argv[1]).items()})
