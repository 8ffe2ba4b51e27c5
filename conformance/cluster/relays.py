"""The links between a quorum's nodes, one TCP relay per ordered pair, so that kraftcheck can
cut them: node i reaches node j only through the relay (i, j), which listens where i looks for j
and connects to where j listens (network.py puts each node in a network namespace of its own and
the relay (i, j) on j's port inside i's). A cut link drops what is in flight on it (its
connections are closed) and then holds every new connection open without forwarding a byte, as a
network that loses every packet does: the sender's requests time out. A healed link forwards
again. Cutting (i, j) alone is a one-way partition: i's requests to j go nowhere, while j still
reaches i. Nothing here listens beyond loopback or connects anywhere but to a node's own port."""

import selectors
import socket
import threading
from collections.abc import Callable

CHUNK = 65536


class Relay:
    """One link: accepts on `listener`, forwards each connection to a new one from `connect`."""

    def __init__(self, listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
        self.listener = listener
        self.listener.setblocking(False)
        self.connect = connect
        self.cut = False
        self.pairs: dict[socket.socket, socket.socket] = {}  # each forwarding socket -> its other end
        self.held: list[socket.socket] = []  # connections accepted while cut: open, never forwarded


class Links:
    """Every relay of a quorum, served by one thread; a context manager that closes them all."""

    def __init__(self, relays: dict[tuple[int, int], Relay]) -> None:
        self.relays = relays
        self.selector = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.stopping = False
        for relay in self.relays.values():
            self.selector.register(relay.listener, selectors.EVENT_READ, ("accept", relay))
        self.thread = threading.Thread(target=self._serve, name="kraftcheck-links", daemon=True)
        self.thread.start()

    def __enter__(self) -> "Links":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def cut(self, source: int, target: int) -> None:
        """Nothing from `source` reaches `target` from now on (nor the answers to it)."""
        with self.lock:
            relay = self.relays[(source, target)]
            relay.cut = True
            for end in list(relay.pairs):
                self._drop(relay, end)

    def heal(self, source: int, target: int) -> None:
        with self.lock:
            relay = self.relays[(source, target)]
            relay.cut = False
            for held in relay.held:
                held.close()  # the sender opens a new connection, which is forwarded
            relay.held.clear()

    def close(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.thread.join(timeout=5)
        with self.lock:
            for relay in self.relays.values():
                for end in list(relay.pairs):
                    self._drop(relay, end)
                for held in relay.held:
                    held.close()
                relay.listener.close()
        self.selector.close()

    def _serve(self) -> None:
        while not self.stopping:
            for key, _ in self.selector.select(timeout=0.1):
                with self.lock:
                    kind, relay = key.data
                    if kind == "accept":
                        self._accept(relay)
                    elif key.fileobj in relay.pairs:
                        self._forward(relay, key.fileobj)

    def _accept(self, relay: Relay) -> None:
        try:
            incoming, _ = relay.listener.accept()
        except BlockingIOError:
            return
        if relay.cut:
            relay.held.append(incoming)
            return
        try:
            outgoing = relay.connect()
        except OSError:  # the node is down: so is the connection to it
            incoming.close()
            return
        for end in (incoming, outgoing):
            end.setblocking(False)
        relay.pairs[incoming], relay.pairs[outgoing] = outgoing, incoming
        self.selector.register(incoming, selectors.EVENT_READ, ("data", relay))
        self.selector.register(outgoing, selectors.EVENT_READ, ("data", relay))

    def _forward(self, relay: Relay, end: socket.socket) -> None:
        try:
            data = end.recv(CHUNK)
            if data:
                relay.pairs[end].setblocking(True)  # loopback drains fast; a full buffer waits here, briefly
                relay.pairs[end].sendall(data)
                relay.pairs[end].setblocking(False)
                return
        except OSError:
            pass
        self._drop(relay, end)

    def _drop(self, relay: Relay, end: socket.socket) -> None:
        """Close a forwarding connection of `relay`, both its ends (nothing if it is closed already)."""
        if end not in relay.pairs:
            return
        other = relay.pairs.pop(end)
        relay.pairs.pop(other, None)
        for sock in (end, other):
            try:
                self.selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()
