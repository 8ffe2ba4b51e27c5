"""The `subprocess:COMMAND` adapter: a node in any language, driven over JSON lines on stdin/stdout.

spec/subprocess-protocol.md is the protocol. A process serves one trace, or (protocol 2,
which the implementation declares in its reply to `start`) one trace after another with a
`reset` between them, kept idle in a SessionPool; after any failure a process is never reused.
The reset is the trace's last command, and a trace is judged on its own replies only: output
already there when kraftcheck has read the reply to `reset` (a line written with it) fails
the trace at its reset; output that comes later is read by the next trace as the reply to its
`start`, and unless it is itself a valid start reply naming protocol 2, that start fails and
the next trace begins again in a new process (as after any failed start of a reused process:
a reset that left the process unable to start is no fault of that trace either).
Replies are decoded into typed Structs, and messages are checked to carry exactly their
schema's fields, so an implementation that omits or misspells a field is told so instead of
being compared against a default. The trace's system decides the session's schemas: an ISR
replica's replies carry `alter_isr` and its observed state `isr`, a KRaft node's carry
neither, so KRaft implementations written before ISR keep working unchanged. Every read and
write is bounded by the step timeout with poll() on the pipes, so a hung or deaf process
cannot hang kraftcheck; stderr goes to a temporary file (a pipe nobody reads could fill up and
block the process), whose tail is quoted in errors.
"""

import os
import select
import shlex
import signal
import subprocess
import tempfile
import threading
import time
import typing

import msgspec

from adapters.contract import AdapterError, CapabilityLacking
from adapters.process_lifetime import ProcessTree
from model.config import Timing
from model.events import Answer, AppendResult, Send, TimerKind
from model.isr.events import AlterIsr
from model.messages import LATER_FIELDS, Message, as_carried
from spec.trace import CAPABILITIES, Header, Input, Observed, Outputs, timers_left

STOP_GRACE_SECONDS = 1.0  # how long close() lets the process exit after "stop" before killing it
QUOTE_CHARS = 200  # how much of an invalid reply an error quotes
STDERR_TAIL_LINES = 10
_STDERR_TAIL_BYTES = 4096


PROTOCOL = 2  # the newest protocol version kraftcheck speaks: 2 adds `reset`, one process for many traces
DRAIN = b'{"command":"drain"}\n'
RESET = b'{"command":"reset"}\n'
OBSERVE = b'{"command":"observe"}\n'
_TIMER_KINDS = tuple(kind.value for kind in TimerKind)


class _Timing(Timing, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The timeouts a node declares it runs with: model.config.Timing's fields, any left out at the model's default."""


class _Reply(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The reply to start: optionally the optional capabilities the node lacks
    (spec.trace.CAPABILITIES), the protocol version the implementation speaks, what it is, and
    the timeouts it runs with."""

    ok: bool
    lacks: tuple[str, ...] = ()
    protocol: int = 1
    implementation: str = ""
    timing: _Timing | None = None


class _ResetReply(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    ok: bool


class _InputReply(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The reply to an input command: what the node did in answer to it, sends aside."""

    ok: bool
    response: Message | None
    append_result: AppendResult | None
    shutdown: bool
    answers: tuple[Answer, ...] = ()  # optional: responses to earlier steps' requests (held Fetches)


class _IsrInputReply(_InputReply, kw_only=True, forbid_unknown_fields=True):
    """An ISR replica's reply to an input command: `alter_isr` is required, so a replica that forgets it is told so."""

    alter_isr: AlterIsr | None


class _DrainReply(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    ok: bool
    sends: tuple[Send, ...]


class _ObserveReply(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The node's state, and optionally the time left on each timer it runs, in ms, by kind."""

    ok: bool
    state: Observed | None
    timers: dict[str, int] | None = None


class _Invalid(Exception):
    """A reply line that is not a valid reply; the adapter turns it into an AdapterError quoting the line."""


def _field_difference(path: str, raw: object, typed: object) -> str | None:
    """Where a decoded message's JSON lacks a field of its type (other than one a later version
    added) or has one the type does not know."""
    if isinstance(typed, dict):
        later = LATER_FIELDS.get(raw.get("type"), frozenset())  # a node may predate the version that added them
        missing = [key for key in typed if key not in raw and key not in later]
        if missing:
            return f"{path} lacks {', '.join(missing)}"
        unknown = [key for key in raw if key not in typed and key not in later]
        if unknown:
            return f"{path} has unknown fields {', '.join(unknown)}"
        for key in raw.keys() & typed.keys():  # an omissible field written at its default is not carried
            found = _field_difference(f"{path}.{key}", raw[key], typed[key])
            if found:
                return found
    elif isinstance(typed, list):
        for index, (raw_item, typed_item) in enumerate(zip(raw, typed)):
            found = _field_difference(f"{path}[{index}]", raw_item, typed_item)
            if found:
                return found
    return None


def _check_complete(path: str, raw: object, message: object) -> None:
    """Every field present, none unknown: msgspec alone would default a missing field silently."""
    if message is not None:
        found = _field_difference(path, raw, msgspec.to_builtins(message))
        if found:
            raise _Invalid(found)


def _start_fields(header: Header) -> dict:
    """The start command's fields, every one the protocol lists (the trace header leaves defaults
    out): a KRaft node's quorum-state file and log, or an ISR replica's log and high-watermark
    checkpoint; `down` only where a trace starts a node down with nothing persisted."""
    initial = header.initial
    if header.system == "kraft":
        persisted = {"epoch": initial.epoch, "leader_id": initial.leader_id, "voted_id": initial.voted_id, "log": initial.log}
        if initial.down:
            persisted["down"] = True
        return {"cluster": header.cluster, "node": header.node, "initial": persisted}
    return {"partition": header.partition, "node": header.node, "initial": {"log": initial.log, "high_watermark": initial.high_watermark}}


def _command_line(command: str, fields: dict) -> bytes:
    return msgspec.json.encode({"command": command, **fields}) + b"\n"


def _exit_text(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def _kill(process: subprocess.Popen) -> None:
    """Kill the process's whole session and reap it (its pid and group stay ours until reaped)."""
    if process.returncode is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


class _Idle(typing.NamedTuple):
    """A running process between traces: it answered `reset`. `owner` is the thread that started
    it: the process dies with that thread (process_lifetime.die_with_parent), so it serves no
    trace once the thread has ended."""

    process: subprocess.Popen
    tree: ProcessTree
    stderr: typing.IO[bytes]
    owner: threading.Thread


def _stop(process: subprocess.Popen, tree: ProcessTree, stderr: typing.IO[bytes]) -> None:
    """Ask the process to stop, give it a moment, then kill it; reap it either way. Then kill
    whatever it left behind, daemons included."""
    if process.returncode is None:
        try:
            os.write(process.stdin.fileno(), b'{"command":"stop"}\n')
        except OSError:
            pass  # gone already, or not reading: the kill below ends it
        try:
            process.stdin.close()
            process.wait(timeout=STOP_GRACE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            _kill(process)
    tree.kill()
    process.stdout.close()
    stderr.close()


class SessionPool:
    """The processes of one command's adapters in a run, shared from any thread: the idle ones,
    each ready for its next trace (protocol 2), and the busy ones. `close` stops the idle ones
    and kills the busy ones (a run interrupted while traces replay in other threads), so that a
    thread waiting on a reply wakes up and no process outlives the run."""

    def __init__(self) -> None:
        self._idle: list[_Idle] = []
        self._busy: dict[subprocess.Popen, ProcessTree] = {}
        self._closed = False  # after close, a process given back is stopped and one set busy is killed
        self._lock = threading.Lock()
        self.implementation = ""  # what the implementation says it is in its reply to start (the last one)

    def take(self) -> _Idle | None:
        """An idle process that can serve a trace, if there is one. A process whose starting thread
        has ended (a replay thread of an earlier stage: certify shortens divergences in its main
        thread) is killed by the kernel, or about to be: it is stopped and reaped, never handed out."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                idle = self._idle.pop()
            if idle.owner.is_alive() and idle.process.poll() is None:
                return idle
            _stop(idle.process, idle.tree, idle.stderr)

    def give(self, idle: _Idle) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(idle)
                return
        _stop(idle.process, idle.tree, idle.stderr)

    def busy(self, process: subprocess.Popen, tree: ProcessTree, running: bool) -> None:
        with self._lock:
            if running:
                self._busy[process] = tree
            else:
                self._busy.pop(process, None)
            late = running and self._closed
        if late:
            _kill(process)
            tree.kill()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy, self._busy = self._busy, {}
        for process, tree in busy.items():  # its whole tree: a daemon holding its stdout would keep a reader waiting
            _kill(process)
            tree.kill()
        for waiting in idle:
            _stop(waiting.process, waiting.tree, waiting.stderr)


class SubprocessAdapter:
    """One node of an implementation run as a process, speaking spec/subprocess-protocol.md: a
    process per trace, or from `pool` when the implementation speaks protocol 2."""

    def __init__(self, command: str, step_timeout: float = 10.0, pool: SessionPool | None = None) -> None:
        self.name = f"subprocess:{command}"
        self.command = command
        self.step_timeout = step_timeout
        self.pool = pool
        self.process: subprocess.Popen | None = None
        self._tree: ProcessTree | None = None  # the process and everything it starts
        self._stderr: typing.IO[bytes] | None = None
        self._stderr_from = 0  # where this trace's part of the process's stderr begins
        self._owner: threading.Thread | None = None  # the thread that started the process: it dies with it
        self._buffer = bytearray()
        self._isr = False  # whether the node under test is an ISR replica (else a KRaft node)
        self._reusable = False  # the process speaks protocol 2 and nothing has gone wrong in this trace
        self.lacks: frozenset[str] = frozenset()
        self.timing: Timing | None = None  # the timeouts the node declared at start, if it did
        self._observed: _ObserveReply | None = None  # the state observed with the last step, not yet asked for

    def start(self, header: Header) -> None:
        """An idle process from the pool, if there is one, else a new process. A reused process
        whose start fails is stopped and the trace starts again in a new one: what it read may
        be output left from before (see the module's docstring), no fault of this trace."""
        self.close()
        self._isr = header.system == "isr"
        idle = self.pool.take() if self.pool else None
        if idle is not None:
            self.process, self._tree, self._stderr, self._owner = idle
            self._stderr_from = os.fstat(self._stderr.fileno()).st_size
            try:
                self._start(header, reused=True)
                return
            except AdapterError:
                self.close()
        self._spawn()
        self._start(header, reused=False)

    def _start(self, header: Header, reused: bool) -> None:
        """Send `start`; a reused process must name protocol 2 again (an `{"ok": true}` left over
        from before names none)."""
        self._reusable = False
        if self.pool:
            self.pool.busy(self.process, self._tree, True)
        self._buffer.clear()
        started = self._call("start", _command_line("start", _start_fields(header)), _Reply)
        unknown = sorted(set(started.lacks) - set(CAPABILITIES))
        if unknown:
            raise AdapterError(f"start: the reply declares unknown capabilities lacking: {', '.join(unknown)} (optional ones are {', '.join(CAPABILITIES)})")
        if started.protocol < 1:
            raise AdapterError(f"start: the reply names protocol {started.protocol}; versions are 1 and {PROTOCOL}")
        if reused and started.protocol < 2:
            raise AdapterError(f"start: the reply names protocol {started.protocol}, after this process had named protocol 2")
        self.lacks = frozenset(started.lacks)
        self.timing = None if started.timing is None else Timing(**msgspec.structs.asdict(started.timing))
        self._reusable = started.protocol >= 2 and self.pool is not None
        if self.pool is not None and started.implementation:
            self.pool.implementation = started.implementation

    def _spawn(self) -> None:
        try:
            argv = shlex.split(self.command)
        except ValueError as error:
            raise AdapterError(f"cannot parse the command {self.command!r}: {error}") from None
        if not argv:
            raise AdapterError("the subprocess command is empty")
        self._stderr = tempfile.TemporaryFile()
        self._tree = ProcessTree()
        self._owner = threading.current_thread()
        try:
            # A process tree's root, in a session of its own: close() kills the session and whatever escapes it (a daemon).
            self.process = self._tree.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, bufsize=0)
        except OSError as error:
            self._stderr.close()
            raise AdapterError(f"cannot start {self.command!r}: {error.strerror or error}: {argv[0]}") from None
        os.set_blocking(self.process.stdin.fileno(), False)
        self._stderr_from = 0

    def step(self, event: Input) -> Outputs:
        fields = msgspec.to_builtins(event)
        command = fields.pop("type")  # an input command is the event: its tag, its fields
        # The drain and the observe go with the input, in one write: one round trip per step, not three.
        self._observed = None
        answer, drained, self._observed = self._calls(
            (command, _command_line(command, fields), _IsrInputReply if self._isr else _InputReply), ("drain", DRAIN, _DrainReply), ("observe", OBSERVE, _ObserveReply)
        )
        alter_isr = answer.alter_isr if self._isr else None
        timers = None if self._observed is None or self._observed.timers is None else timers_left(self._observed.timers) or ()
        return Outputs(
            response=answer.response, sends=drained.sends, answers=answer.answers, append_result=answer.append_result, shutdown=answer.shutdown, alter_isr=alter_isr, timers=timers
        )

    def observe(self) -> Observed | None:
        observed, self._observed = self._observed, None
        return (observed or self._call("observe", OBSERVE, _ObserveReply)).state

    def close(self) -> None:
        """End the trace: a process that speaks protocol 2 and did nothing wrong is reset and goes
        back to the pool; any other is stopped, with whatever it started. No process outlives
        its trace unless it is idle in the pool, which its owner closes. Raises AdapterError if
        the reset fails, the process stopped: the reset is the trace's last command."""
        process, self.process = self.process, None
        if process is None:
            return
        if self.pool:
            self.pool.busy(process, self._tree, False)
        if not (self._reusable and process.returncode is None):
            _stop(process, self._tree, self._stderr)
            return
        self.process = process
        try:
            self._call("reset", RESET, _ResetReply)
            self._check_quiet()
        except AdapterError:
            _stop(process, self._tree, self._stderr)
            raise
        finally:
            self.process = None
        self.pool.give(_Idle(process, self._tree, self._stderr, self._owner))

    def _check_quiet(self) -> None:
        """After its reply to `reset` the process writes nothing until the next command: what it
        has written by now (read with the reply, or waiting in the pipe) would be read as the next
        trace's replies, so it fails this trace."""
        fd = self.process.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not self._buffer and not poller.poll(0):  # waiting would cost every trace that time
            return
        more = bytes(self._buffer) or os.read(fd, QUOTE_CHARS)
        what = f"wrote more: {more[:QUOTE_CHARS].decode(errors='replace')!r}" if more else "closed its stdout"
        raise AdapterError(f"after its reply to 'reset' the process {what}; it must wait for the next trace's start{self._stderr_tail()}")

    def _call(self, command: str, line: bytes, reply_type: type) -> msgspec.Struct:
        """Send one command and read its reply."""
        return self._calls((command, line, reply_type))[0]

    def _calls(self, *commands: tuple[str, bytes, type]) -> list[msgspec.Struct]:
        """Send commands (name, line, reply type) in one write and read their replies, strictly
        in order; each reply within the step timeout. A command declined for want of a capability
        is raised once every reply is read: the process is then as usable as before."""
        first = commands[0][0]
        if self.process is None:
            raise AdapterError(f"{first!r} without a running process: start() first")
        declined: CapabilityLacking | None = None
        try:
            self._write(first, b"".join(line for _, line, _ in commands), time.monotonic() + self.step_timeout)
            replies = []
            for command, _, reply_type in commands:
                reply = self._read_line(command, time.monotonic() + self.step_timeout)
                try:
                    replies.append(self._decode(command, reply, reply_type))
                except CapabilityLacking as lacking:
                    declined = declined or lacking
                    replies.append(None)
                except _Invalid as error:
                    quoted = reply[:QUOTE_CHARS].decode(errors="replace")
                    raise AdapterError(f"invalid reply to {command!r}: {error}; the reply was: {quoted!r}{self._stderr_tail()}") from None
        except BaseException:
            self._reusable = False  # whatever state it is in now, it serves no other trace
            raise
        if declined is not None:
            raise declined
        return replies

    def _decode(self, command: str, line: bytes, reply_type: type) -> msgspec.Struct:
        """The one boundary where the implementation's bytes become values: whatever goes wrong in
        here (invalid UTF-8, nesting too deep, a wrong type anywhere) is an invalid reply."""
        try:
            return self._decode_reply(command, line, reply_type)
        except (AdapterError, _Invalid):
            raise
        except RecursionError:
            raise _Invalid("nested too deeply") from None
        except Exception as error:  # noqa: BLE001 - untrusted bytes may fail in any way; none may end the run
            raise _Invalid(f"undecodable ({type(error).__name__}: {error})") from None

    def _decode_reply(self, command: str, line: bytes, reply_type: type) -> msgspec.Struct:
        try:
            raw = msgspec.json.decode(line)
        except msgspec.DecodeError as error:
            raise _Invalid(f"not JSON ({error})") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("ok"), bool):
            raise _Invalid('not a reply: a reply is a JSON object with a boolean "ok"')
        if not raw["ok"]:
            refusal = f"the implementation refused {command!r}: {raw.get('error', '(no error text)')}"
            lacking = raw.get("lacks")
            if lacking is None:
                raise AdapterError(refusal)
            if lacking not in CAPABILITIES:
                raise _Invalid(f"a refusal for want of {lacking!r}, which is not an optional capability ({', '.join(CAPABILITIES)})")
            raise CapabilityLacking(lacking, refusal)
        try:
            reply = msgspec.convert(raw, reply_type)
        except msgspec.ValidationError as error:
            raise _Invalid(str(error)) from None
        if isinstance(reply, _InputReply):
            _check_complete("$.response", raw["response"], reply.response)
            for index, answer in enumerate(reply.answers):
                _check_complete(f"$.answers[{index}].message", raw["answers"][index]["message"], answer.message)
                _check_complete(f"$.answers[{index}].request", raw["answers"][index]["request"], answer.request)
            response = None if reply.response is None else as_carried(reply.response)
            answers = tuple(msgspec.structs.replace(a, message=as_carried(a.message), request=as_carried(a.request)) for a in reply.answers)
            return msgspec.structs.replace(reply, response=response, answers=answers)
        if reply_type is _DrainReply:
            for index, send in enumerate(reply.sends):
                _check_complete(f"$.sends[{index}].message", raw["sends"][index]["message"], send.message)
            return msgspec.structs.replace(reply, sends=tuple(msgspec.structs.replace(s, message=as_carried(s.message)) for s in reply.sends))
        if reply_type is _ObserveReply:
            if reply.state is not None:
                self._check_isr_field(raw["state"], reply.state)
            for kind, ms in (reply.timers or {}).items():
                if kind not in _TIMER_KINDS or ms < 0:
                    raise _Invalid(f"$.timers.{kind}: {ms!r}; timers are the time left, in ms (>= 0), on timers named {', '.join(_TIMER_KINDS)}")
        if reply_type is _Reply and reply.timing is not None:
            negative = [name for name, ms in msgspec.structs.asdict(reply.timing).items() if ms < 0]
            if negative:
                raise _Invalid(f"$.timing: {', '.join(negative)} below 0")
        return reply

    def _check_isr_field(self, raw: dict, state: Observed) -> None:
        """An ISR replica's state must carry its ISR and a KRaft node's must not (Observed has a default for KRaft)."""
        if self._isr and state.isr is None:
            raise _Invalid("$.state lacks isr (an array of replica ids, [] for a follower)")
        if not self._isr and "isr" in raw:
            raise _Invalid("$.state has unknown fields isr")

    def _write(self, command: str, line: bytes, deadline: float) -> None:
        """Write without blocking: a process that stops reading stdin times out instead of hanging us."""
        fd = self.process.stdin.fileno()
        pending = memoryview(line)
        while pending:
            try:
                pending = pending[os.write(fd, pending) :]
            except BlockingIOError:
                self._wait_for(fd, select.POLLOUT, command, deadline)
            except BrokenPipeError:
                raise self._exited(command) from None

    def _read_line(self, command: str, deadline: float) -> bytes:
        fd = self.process.stdout.fileno()
        while (end := self._buffer.find(b"\n")) < 0:
            self._wait_for(fd, select.POLLIN, command, deadline)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise self._exited(command)
            self._buffer += chunk
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line

    def _wait_for(self, fd: int, event: int, command: str, deadline: float) -> None:
        poller = select.poll()
        poller.register(fd, event)
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not poller.poll(remaining * 1000):
            _kill(self.process)
            raise AdapterError(f"no reply to {command!r} within the step timeout of {self.step_timeout:g} s; the process was killed{self._stderr_tail()}")

    def _exited(self, command: str) -> AdapterError:
        """The process closed its end of a pipe: it is exiting; report how."""
        try:
            code = self.process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            _kill(self.process)
            return AdapterError(f"the process closed its stdin or stdout before replying to {command!r} and was killed{self._stderr_tail()}")
        return AdapterError(f"the process {_exit_text(code)} before replying to {command!r}{self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        """The last lines the process wrote to stderr, read without moving the file offset it shares."""
        fd = self._stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(self._stderr_from, size - _STDERR_TAIL_BYTES)
        data = os.pread(fd, size - start, start)
        lines = data.decode(errors="replace").splitlines()[-STDERR_TAIL_LINES:]
        if not lines:
            return "; its stderr is empty"
        return "; its stderr ends with:\n" + "\n".join(f"  {line}" for line in lines)
