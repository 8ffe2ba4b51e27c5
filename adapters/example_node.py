"""An implementation behind the subprocess protocol: the kraftcheck model as a separate process.

`python -m adapters.example_node` reads commands on stdin and writes one reply per command on
stdout, one JSON object per line, as spec/subprocess-protocol.md says; kraftcheck drives it as
`subprocess:python -m adapters.example_node`. It is a KRaft node or an ISR replica, whichever
`start` names (a `cluster` or a `partition`). It uses the protocol and, of kraftcheck, only the
model, so it is also a template: a node in another language keeps this loop and puts its own
node where `step` is.
"""

import sys
import typing

import msgspec

from model import node as kraft
from model.config import ClusterConfig, ConfigError
from model.events import Answer, AppendResult, ClientAppend, Crash, Event, Request, Response, Send, Shutdown
from model.isr import replica
from model.isr.config import PartitionConfig
from model.isr.events import AlterIsr, IsrEvent
from model.isr.state import ReplicaState
from model.isr.state import Role as IsrRole
from model.messages import REQUEST_TYPES, Record
from model.state import NodeState, Role


def by_tag(events: typing.Iterable[type]) -> dict[str, type]:
    return {event.__struct_config__.tag: event for event in events}


INPUTS: dict[str, dict[str, type]] = {
    "kraft": by_tag(typing.get_args(Event)),
    "isr": by_tag((Request, Response, ClientAppend, Crash, *typing.get_args(IsrEvent))),
}
"""Each system's input commands by name ("request", "timer", "fetch_next", ...): each is the model event of that tag."""

STEPS = {"kraft": kraft.step, "isr": replica.step}


class CommandError(Exception):
    """A command this node cannot carry out: it is answered with {"ok": false}, and the node goes on."""


class Persisted(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A KRaft node's persisted state: the quorum-state file and the log."""

    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    log: tuple[Record, ...] = ()
    down: bool = False  # down with nothing persisted: the trace's first input starts it (spec/subprocess-protocol.md)


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An ISR replica's persisted state: the log and the high-watermark checkpoint."""

    log: tuple[Record, ...] = ()
    high_watermark: int = 0


class KraftStart(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    cluster: ClusterConfig
    node: int
    initial: Persisted


class IsrStart(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    partition: PartitionConfig
    node: int
    initial: Checkpoint


class Node:
    """The node's system, configuration and state, and the requests it has sent since the last drain."""

    def __init__(self, lacks: tuple[str, ...] = ()) -> None:
        self.lacks = lacks  # optional capabilities declared lacking at start (--lacks)
        self.reset()

    def reset(self) -> None:
        """Everything a trace set, forgotten: the process is as new for the next trace (protocol 2)."""
        self.system: str | None = None  # "kraft" or "isr", from start
        self.config = None  # a model.config.NodeConfig or a model.isr.config.ReplicaConfig
        self.state: NodeState | ReplicaState | None = None
        self.sent: list[Send] = []
        self.stopped = False

    def handle(self, line: bytes) -> dict:
        """The reply to one command line."""
        fields = msgspec.json.decode(line)
        if not isinstance(fields, dict) or not isinstance(fields.get("command"), str):
            raise CommandError('a command is a JSON object with a string "command"')
        command = fields.pop("command")
        if command == "start":
            if self.state is not None:
                raise CommandError("already started: one node per process")
            if "partition" in fields:
                return self.start_isr(msgspec.convert(fields, IsrStart))
            return self.start_kraft(msgspec.convert(fields, KraftStart))
        if command == "stop":
            self.stopped = True
            return {"ok": True}
        if command == "reset":  # protocol 2: the next command is a start
            self.reset()
            return {"ok": True}
        if self.state is None:
            raise CommandError(f"{command!r} before start")
        if command in INPUTS[self.system]:
            return self.deliver(msgspec.convert(fields, INPUTS[self.system][command]))
        if command == "drain":
            sends, self.sent = self.sent, []
            return {"ok": True, "sends": [{"destination": s.destination, "message": s.message} for s in sends]}
        if command == "observe":
            return {"ok": True, "state": self.observed()}
        raise CommandError(f"unknown command {command!r}")

    def start_kraft(self, command: KraftStart) -> dict:
        """A fresh node for an empty persisted state; otherwise a down one, holding it (or nothing: `down`) until "restart"."""
        self.system, self.config = "kraft", command.cluster.node(command.node)
        initial = command.initial
        if initial == Persisted():
            self.state = kraft.initial_state(self.config)
        else:
            self.state = NodeState(role=Role.DOWN, epoch=initial.epoch, leader_id=initial.leader_id, voted_id=initial.voted_id, log=initial.log)
        return self.started()

    def start_isr(self, command: IsrStart) -> dict:
        """A replica of a new partition for an empty persisted state; otherwise a down one, holding it until "startup"."""
        if command.node not in command.partition.replicas:
            raise CommandError(f"node {command.node} is not a replica of the partition {list(command.partition.replicas)}")
        self.system, self.config = "isr", command.partition.replica(command.node)
        initial = command.initial
        if initial == Checkpoint():
            self.state = replica.initial_state(self.config)
        else:
            self.state = ReplicaState(role=IsrRole.DOWN, log=initial.log, high_watermark=initial.high_watermark)
        return self.started()

    def started(self) -> dict:
        """The reply to start: protocol 2 (this process serves trace after trace, `reset` between
        them) and the capabilities declared lacking, if any."""
        return {"ok": True, "protocol": 2, "lacks": list(self.lacks)} if self.lacks else {"ok": True, "protocol": 2}

    def deliver(self, event: Event | IsrEvent) -> dict:
        """Step the node; its requests wait for "drain", timers and commit notices are not reported."""
        transition = STEPS[self.system](self.config, self.state, event)
        self.state = transition.state
        reply = {"ok": True, "response": None, "append_result": None, "shutdown": False}
        if self.system == "isr":
            reply["alter_isr"] = None  # only an ISR reply has this field
        for output in transition.outputs:
            if isinstance(output, Send):
                if isinstance(output.message, REQUEST_TYPES):
                    self.sent.append(output)
                else:
                    reply["response"] = output.message
            elif isinstance(output, Answer):  # a held Fetch answered: optional in the reply, so only where there is one
                reply.setdefault("answers", []).append({"destination": output.destination, "message": output.message, "request": output.request})
            elif isinstance(output, AppendResult):
                reply["append_result"] = {"ErrorCode": output.ErrorCode, "Offset": output.Offset}
            elif isinstance(output, Shutdown):
                reply["shutdown"] = True
            elif isinstance(output, AlterIsr):
                reply["alter_isr"] = {"LeaderEpoch": output.LeaderEpoch, "Isr": output.Isr}
        return reply

    def observed(self) -> dict:
        state = self.state
        log = [[record.Offset, record.Epoch] for record in state.log]
        if self.system == "isr":
            return {
                "role": state.role.name.lower(),
                "epoch": state.epoch,
                "leader_id": state.leader,
                "voted_id": -1,
                "log_end_offset": len(log),
                "high_watermark": state.high_watermark,
                "log": log,
                "isr": state.isr,
            }
        return {
            "role": state.role_name,
            "epoch": state.epoch,
            "leader_id": state.leader_id,
            "voted_id": state.voted_id,
            "log_end_offset": len(log),
            "high_watermark": state.high_watermark,
            "log": log,
        }


def main() -> None:
    """`--lacks A,B` declares optional capabilities lacking (spec/subprocess-protocol.md), as a
    node without OffsetsForLeaderEpoch would; the node still answers whatever it is sent."""
    encoder = msgspec.json.Encoder()
    out = sys.stdout.buffer
    arguments = sys.argv[1:]
    if arguments and (len(arguments) != 2 or arguments[0] != "--lacks"):
        sys.exit("usage: python -m adapters.example_node [--lacks CAPABILITY[,CAPABILITY...]]")
    node = Node(tuple(arguments[1].split(",")) if arguments else ())
    for line in sys.stdin.buffer:
        try:
            reply = node.handle(line)
        except (msgspec.DecodeError, msgspec.ValidationError, ConfigError, CommandError) as error:
            reply = {"ok": False, "error": str(error)}
        out.write(encoder.encode(reply) + b"\n")
        out.flush()
        if node.stopped:
            return


if __name__ == "__main__":
    main()
