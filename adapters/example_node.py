"""An implementation behind the subprocess protocol: the kraftcheck model as a separate process.

`python -m adapters.example_node` reads commands on stdin and writes one reply per command on
stdout, one JSON object per line, as spec/subprocess-protocol.md says; kraftcheck drives it as
`subprocess:python -m adapters.example_node`. It uses the protocol and, of kraftcheck, only the
model, so it is also a template: a node in another language keeps this loop and puts its own
node where `step` is.
"""

import sys
import typing

import msgspec

from model.config import ClusterConfig, ConfigError, NodeConfig
from model.events import AppendResult, Event, Send, Shutdown
from model.messages import REQUEST_TYPES, Record
from model.node import initial_state, step
from model.state import NodeState, Role

INPUTS: dict[str, type] = {event.__struct_config__.tag: event for event in typing.get_args(Event)}
"""The input commands by name ("request", "timer", ...): each is the model event of that tag."""


class CommandError(Exception):
    """A command this node cannot carry out: it is answered with {"ok": false}, and the node goes on."""


class Persisted(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    log: tuple[Record, ...] = ()


class Start(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    cluster: ClusterConfig
    node: int
    initial: Persisted


class Node:
    """The node's state, and the requests it has sent since the last drain."""

    def __init__(self) -> None:
        self.config: NodeConfig | None = None
        self.state: NodeState | None = None
        self.sent: list[Send] = []
        self.stopped = False

    def handle(self, line: bytes) -> dict:
        """The reply to one command line."""
        fields = msgspec.json.decode(line)
        if not isinstance(fields, dict) or not isinstance(fields.get("command"), str):
            raise CommandError('a command is a JSON object with a string "command"')
        command = fields.pop("command")
        if command == "start":
            return self.start(msgspec.convert(fields, Start))
        if command == "stop":
            self.stopped = True
            return {"ok": True}
        if self.state is None:
            raise CommandError(f"{command!r} before start")
        if command in INPUTS:
            return self.deliver(msgspec.convert(fields, INPUTS[command]))
        if command == "drain":
            sends, self.sent = self.sent, []
            return {"ok": True, "sends": [{"destination": s.destination, "message": s.message} for s in sends]}
        if command == "observe":
            return {"ok": True, "state": self.observed()}
        raise CommandError(f"unknown command {command!r}")

    def start(self, command: Start) -> dict:
        """A fresh node for an empty persisted state; otherwise a down one, holding it until "restart"."""
        if self.state is not None:
            raise CommandError("already started: one node per process")
        self.config = command.cluster.node(command.node)
        initial = command.initial
        if initial == Persisted():
            self.state = initial_state(self.config)
        else:
            self.state = NodeState(role=Role.DOWN, epoch=initial.epoch, leader_id=initial.leader_id, voted_id=initial.voted_id, log=initial.log)
        return {"ok": True}

    def deliver(self, event: Event) -> dict:
        """Step the node; its requests wait for "drain", timers and commit notices are not reported."""
        transition = step(self.config, self.state, event)
        self.state = transition.state
        reply = {"ok": True, "response": None, "append_result": None, "shutdown": False}
        for output in transition.outputs:
            if isinstance(output, Send):
                if isinstance(output.message, REQUEST_TYPES):
                    self.sent.append(output)
                else:
                    reply["response"] = output.message
            elif isinstance(output, AppendResult):
                reply["append_result"] = {"ErrorCode": output.ErrorCode, "Offset": output.Offset}
            elif isinstance(output, Shutdown):
                reply["shutdown"] = True
        return reply

    def observed(self) -> dict:
        state = self.state
        return {
            "role": state.role_name,
            "epoch": state.epoch,
            "leader_id": state.leader_id,
            "voted_id": state.voted_id,
            "log_end_offset": len(state.log),
            "high_watermark": state.high_watermark,
            "log": [[record.Offset, record.Epoch] for record in state.log],
        }


def main() -> None:
    encoder = msgspec.json.Encoder()
    out = sys.stdout.buffer
    node = Node()
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
