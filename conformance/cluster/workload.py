"""The workload on a running quorum: kraftcheck's Workload program (adapters/kafka/server/
Workload.java) writing through Kafka's own admin client, straight to the controllers
(bootstrap.controllers, KIP-919: Kafka 3.7 on), and reading the quorum every second. Each line
it prints becomes a history event (Write, Reading) stamped with the run's clock as it arrives;
a line that is not the program's goes to workload.log with the program's errors."""

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec

from adapters import kafka_server
from adapters.process_lifetime import ProcessTree
from conformance.cluster.history import Event, Reading, Write

SINCE = (3, 7)  # bootstrap.controllers (KIP-919)
PAUSE_MS = 50  # between one write's outcome and the next write
READY_SECONDS = 60.0  # a JVM starting on a loaded machine, and its first write answered
LOG = "workload.log"


class _Quorum(msgspec.Struct, frozen=True):
    leader: int
    epoch: int
    hw: int


class _Line(msgspec.Struct, frozen=True):
    """What Workload.java prints: a write invoked or done, or a reading (null: none answered)."""

    write: int = 0
    invoked: bool = False
    outcome: str = ""
    error: str = ""
    quorum: _Quorum | None = None


def supported(version: str) -> bool:
    return tuple(map(int, version.split(".")[:2])) >= SINCE


class Workload:
    """The program running against the quorum at `bootstrap` until `stop`; `add` takes each
    event, `now` stamps it."""

    def __init__(self, version: str, bootstrap: str, directory: Path, add: Callable[[Event], None], now: Callable[[], float]) -> None:
        self.add, self.now = add, now
        self.tree = ProcessTree()
        self.log = open(directory / LOG, "ab")
        self.process = self.tree.popen(
            kafka_server.program_command(version, "Workload", bootstrap, str(PAUSE_MS)), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log
        )
        self.answered = threading.Event()  # a first write has its outcome: the workload runs
        self.thread = threading.Thread(target=self._follow, name="kraftcheck-workload", daemon=True)
        self.thread.start()

    def wait_until_writing(self) -> bool:
        """Whether a first write has its outcome within READY_SECONDS: faults wait for it, so
        that each finds writes going on."""
        return self.answered.wait(READY_SECONDS)

    def stop(self) -> None:
        self.tree.kill()
        self.process.wait()
        self.thread.join(timeout=5)
        self.log.close()

    def _follow(self) -> None:
        decoder = msgspec.json.Decoder(_Line)
        for raw in self.process.stdout:
            try:
                line = decoder.decode(raw)
            except msgspec.DecodeError:
                self.log.write(b"not the workload's: " + raw)
                continue
            t = self.now()
            if line.write and line.invoked:
                self.add(Write(t=t, n=line.write, outcome="invoked"))
            elif line.write:
                self.add(Write(t=t, n=line.write, outcome=line.outcome, error=line.error))
                self.answered.set()
            elif line.quorum is not None:
                self.add(Reading(t=t, leader=line.quorum.leader, epoch=line.quorum.epoch, hw=line.quorum.hw))
