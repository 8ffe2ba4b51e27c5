"""A scenario file parsed (spec/scenario.lark) and compiled to the trace it stands for.

Every problem, of syntax or of meaning (an unknown message or field, a node outside the
cluster, an impossible initial state), is a ScenarioError naming file, line and column and
what was expected there.
"""

import json
import re
from pathlib import Path

import lark
import msgspec

from conformance.corpus.reference import error_names, event_text
from conformance.scenario.notation import ERROR_CODES, KEYWORD_STRUCTS, STATE_DEFAULTS, STRUCTS, is_error_field, log_end
from model.cluster import Action, Append, CrashNode, Deliver, Drop, Fire, ResignLeader, RestartNode
from model.choices import parse_picks
from model.config import ConfigError
from model.events import Answer, ClientAppend, Crash, Request, Resign, Response, Restart, Send, Timer, TimerKind
from model.isr.events import FetchNext, PowerLoss, ShrinkIsr, Startup
from model.messages import REQUEST_TYPES, RESPONSE_FOR, as_carried
from model.network import Envelope
from model.properties import PROPERTIES
from model.isr.cluster import Action as IsrAction
from model.isr.cluster import Elect, Shrink, StartFetch
from model.isr.properties import PROPERTIES as ISR_PROPERTIES
from spec import trace as traces
from spec.trace import Alternative, Header, Observed, Outputs, Persisted, Step, Trace, TraceCluster, TracePartition

GRAMMAR = Path(traces.__file__).with_name("scenario.lark")
_BARE = {"resign": Resign, "crash": Crash, "restart": Restart, "fetch_next": FetchNext}
TERMINALS = {
    "NAME": "a name",
    "INT": "a number",
    "STRING": 'a "string"',
    "RULE": "a rule ID",
    "CHOICE": "a CHOICE=alternative",
    "RANGE": "an epoch range eE[FIRST..LAST]",
    "BARE": "resign, crash, restart or fetch_next",
    "DELIVER": "deliver or duplicate",
    "VERDICT": "violated or holds",
    "$END": "the end of the file",
}
"""The grammar's terminals in words, for errors."""
_LITERALS = {"true": True, "false": False, "null": None}
_KRAFT_ONLY = ("timer", "resign", "drop", "duplicate")  # cluster actions only a KRaft cluster takes (ISR messages are neither lost nor duplicated)
_ISR_ONLY = ("fetch_next", "shrink_isr", "elect", "power_failure")  # and only an ISR partition
_KRAFT_ACTIONS = ("deliver", "duplicate", "drop", "timer", "append", "resign", "crash", "restart", "run until quiet")
_ISR_ACTIONS = ("deliver", "append", "fetch_next", "shrink_isr", "elect", "crash", "restart", "power_failure", "run until quiet")
_RESPONSES = tuple(RESPONSE_FOR.values())
MAX_RANGE_RECORDS = 100_000
"""The records the epoch ranges of one file expand to, all together, at most: far more than any
scenario's logs (a shipped trace's hold a few hundred), and no typo (e1[0..100000000]) exhausts memory."""
NAME_LENGTH = 200
_SAFE_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_LENGTH - 1}}}")
_ROLES = ("unattached", "voted", "follower", "prospective", "candidate", "leader", "resigned", "observer", "down")  # KRaft's; an ISR replica's are among them


class ScenarioError(traces.TraceError):
    """A scenario that cannot be read; the message names file, line and column."""


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed scenario: the trace it compiles to, the line of each step, and its comments by
    the step they come before (0: the header; one past the last step: the end)."""

    trace: Trace
    step_lines: tuple[int, ...]
    comments: dict[int, list[str]]


class UntilQuiet(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Deliver the messages in flight, round after round, until none is left or the cluster comes
    back to a state it was in (followers fetching from an idle leader); no timer fires."""


class ClusterStep(msgspec.Struct, frozen=True, kw_only=True):
    """One action on the whole cluster (or a run until quiet) and what must hold after it."""

    action: Action | IsrAction | UntilQuiet
    violated: tuple[str, ...] = ()  # safety properties (SAFE-*) violated after the action
    holds: tuple[str, ...] = ()  # and those that hold
    states: tuple[tuple[int, Observed], ...] = ()  # node -> its observable state after the action
    in_flight: tuple[Envelope, ...] = ()  # messages in flight after the action
    describe: bool = False  # print the quorum views after the action


class ClusterScenario(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed scenario of the whole cluster: a fresh KRaft cluster (some nodes with a persisted
    state, shut down until restarted) or ISR partition, the actions taken on it."""

    name: str
    setting: TraceCluster | TracePartition  # a KRaft cluster or an ISR partition
    initial: tuple[tuple[int, Persisted], ...] = ()  # node -> its persisted state, for the nodes that start from one (shut down)
    steps: tuple[ClusterStep, ...]
    step_lines: tuple[int, ...]
    comments: dict[int, list[str]]


_comments: list[lark.Token] = []
_PARSER = lark.Lark(
    GRAMMAR.read_text(encoding="utf-8"), parser="lalr", propagate_positions=True, maybe_placeholders=False, lexer_callbacks={"COMMENT": _comments.append}
)


def read(path: Path) -> Scenario | ClusterScenario:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioError(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None
    return parse(path, text)


def parse(path: Path, text: str) -> Scenario | ClusterScenario:
    _comments.clear()
    try:
        tree = _PARSER.parse(text)
        comments = [(token.line, str(token)) for token in _comments]
        return _Compiler(path).scenario(tree, comments)
    except lark.UnexpectedInput as error:
        raise ScenarioError(f"{path}:{error.line}:{error.column}: {_syntax(error)}") from None
    except RecursionError:
        raise ScenarioError(f"{path}: values nested too deeply") from None


def _syntax(error: lark.UnexpectedInput) -> str:
    if isinstance(error, lark.UnexpectedCharacters):
        found, expected = f"unexpected character {error.char!r}", error.allowed
    elif isinstance(error, lark.UnexpectedToken):
        found, expected = ("unexpected end of file" if error.token.type == "$END" else f"unexpected {str(error.token)!r}"), error.expected
    else:
        found, expected = "unexpected end of file", getattr(error, "expected", ())
    return f"{found}; expected {_one_of(sorted({_terminal(name) for name in expected}))}"


def reads_as(terminal: str, text: str) -> bool:
    """The text is one token of the grammar's `terminal`, whole."""
    return re.fullmatch(_PARSER.get_terminal(terminal).pattern.to_regexp(), text) is not None


def _terminal(name: str) -> str:
    if name in TERMINALS:
        return TERMINALS[name]
    pattern = _PARSER.get_terminal(name).pattern
    return json.dumps(pattern.value) if isinstance(pattern, lark.lexer.PatternStr) else name


def _one_of(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "one of " + ", ".join(options)


class _Compiler:
    """The parse tree to a trace, checking what the grammar cannot."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.range_records = 0  # the records the file's epoch ranges expand to so far

    def error(self, where: lark.Tree | lark.Token, message: str) -> ScenarioError:
        line, column = (where.line, where.column) if isinstance(where, lark.Token) else (where.meta.line, where.meta.column)
        return ScenarioError(f"{self.path}:{line}:{column}: {message}")

    def scenario(self, tree: lark.Tree, comments: list[tuple[int, str]]) -> Scenario | ClusterScenario:
        header: dict[str, object] = {"covers": []}
        seen: dict[str, lark.Tree] = {}
        steps: list = []
        lines: list[int] = []
        mode = "step"
        for statement in tree.children:
            kind = statement.data
            if kind in ("step", "do"):
                if steps and kind != mode:
                    raise self.error(statement, f"expected a {'step' if kind == 'do' else 'do'} statement: a scenario is of one node (step) or of the whole cluster (do)")
                if not steps:
                    self.check_header(tree, header, seen, run=kind == "do")
                    mode = kind
                steps.append(self.step(statement, len(steps) + 1, header) if kind == "step" else self.action_step(statement, header))
                lines.append(statement.meta.line)
                continue
            if steps:
                raise self.error(statement, f"the {kind} statement belongs before the first step")
            if kind in seen and kind not in ("covers", "initial_node"):
                raise self.error(statement, f"a second {kind} statement; the first is at line {seen[kind].meta.line}")
            seen.setdefault(kind, statement)
            self.header_statement(statement, header)
        if not steps:
            self.check_header(tree, header, seen, run="node" not in header and "cluster" in header)
        first = tree.children[0].meta.line if tree.children else 1
        name = header.get("scenario", self.path.stem.removesuffix(".scenario"))
        self.check_name(name, seen.get("scenario"))
        placed = _placed(comments, first, lines)
        if "node" not in header:
            return ClusterScenario(name=name, setting=header.get("cluster", header.get("partition")), initial=header["initials"], steps=tuple(steps), step_lines=tuple(lines), comments=placed)
        made = Header(
            kind=traces.KIND,
            format_version=traces.FORMAT_VERSION,
            name=name,
            steps=len(steps),
            covers=tuple(header["covers"]),
            initial=header.get("initial", Persisted()),  # stated, as the traces kraftcheck makes state it
            **{name: header[name] for name in ("origin", "cluster", "partition", "node") if name in header},
        )
        return Scenario(trace=Trace(header=made, steps=tuple(steps)), step_lines=tuple(lines), comments=placed)

    def check_name(self, name: str, statement: lark.Tree | None) -> None:
        """The name is a plain file name: compile writes NAME.jsonl, which must stay in its directory."""
        if _SAFE_NAME.fullmatch(name):
            return
        problem = f"the scenario's name {_shortened(json.dumps(name))} is not a plain file name; expected letters, digits, '.', '_' and '-', starting with a letter or digit, at most {NAME_LENGTH} characters"
        if statement is None:
            raise ScenarioError(f"{self.path}: {problem} (the name comes from the file's: give one with a scenario \"NAME\" statement)")
        raise self.error(statement, problem)

    def header_statement(self, statement: lark.Tree, header: dict[str, object]) -> None:
        kind, children = statement.data, statement.children
        if kind in ("scenario", "origin"):
            header[kind] = self.string(children[0])
        elif kind == "covers":
            header["covers"].append(self.string(children[0]))
        elif kind == "node":
            header["node"] = self.number(children[0])
        elif kind == "initial_node":
            kwargs = [child for child in children[1:] if isinstance(child, lark.Tree)]
            header.setdefault("initial_nodes", []).append((statement, self.number(children[0]), self.typed(statement, Persisted, self.kwargs(Persisted, kwargs))))
        else:
            header[kind] = self.keyword_struct(kind, statement)

    def check_header(self, tree: lark.Tree, header: dict[str, object], seen: dict[str, lark.Tree], run: bool) -> None:
        """The header must say where the node is and who it is before the first step; a cluster
        scenario (`run`) names a KRaft cluster or an ISR partition and no node."""
        where = tree.children[0] if tree.children else lark.Token("NAME", "", line=1, column=1)
        if run:
            for kind in ("node", "initial"):
                if kind in seen:
                    raise self.error(seen[kind], f"a {kind} statement in a scenario of the whole cluster (do): expected a cluster or partition, initial node N ... and actions")
            if "partition" in seen and "initial_node" in seen:
                raise self.error(seen["initial_node"], "an initial node N statement in an ISR partition's scenario: its replicas start fresh")
        elif "initial_node" in seen:
            raise self.error(seen["initial_node"], "an initial node N statement in a scenario of one node (step): expected initial field=value ...")
        if ("cluster" in header) == ("partition" in header):
            place = seen.get("partition", where) if "cluster" in header else where
            raise self.error(place, "expected exactly one of a cluster statement (a KRaft node) and a partition statement (an ISR replica)")
        if "node" not in header and not run:
            raise self.error(where, "expected a node statement: the node under test")
        setting = header.get("cluster", header.get("partition"))
        place = seen["cluster" if "cluster" in header else "partition"]
        try:
            members = setting.config().nodes if "cluster" in header else setting.config().replicas
        except ConfigError as error:
            raise self.error(place, f"impossible {place.data}: {error}") from None
        if not run and header["node"] not in members:
            raise self.error(seen["node"], f"node {header['node']} is not a member of the {place.data}: expected one of {', '.join(map(str, members))}")
        header["members"] = members
        kraft = "cluster" in header
        voters = setting.config().voters if kraft else members
        if "initial" in header:
            self.check_initial(seen["initial"], header["initial"], members, voters, kraft)
        initials: dict[int, Persisted] = {}
        for statement, node, initial in header.get("initial_nodes", []):
            if node not in members:
                raise self.error(statement.children[0], f"unknown node {node}; expected one of {', '.join(map(str, members))}")
            if node in initials:
                raise self.error(statement, f"a second initial state for node {node}")
            self.check_initial(statement, initial, members, voters, kraft)
            initials[node] = initial
        header["initials"] = tuple(sorted(initials.items()))

    def check_initial(self, statement: lark.Tree, initial: Persisted, members: tuple[int, ...], voters: tuple[int, ...], kraft: bool) -> None:
        """A persisted state a node could have written: known nodes, a log of consecutive offsets
        from 0 whose epochs never decrease nor (a KRaft node's) pass its epoch."""
        if initial.leader_id not in (-1, *members):
            raise self.error(statement, f"impossible initial state: leader_id {initial.leader_id} is not a member; expected -1 or one of {', '.join(map(str, members))}")
        if initial.voted_id not in (-1, *voters):
            raise self.error(statement, f"impossible initial state: voted_id {initial.voted_id} is not a voter; expected -1 or one of {', '.join(map(str, voters))}")
        for offset, record in enumerate(initial.log):
            if record.Offset != offset:
                raise self.error(statement, f"impossible initial state: the log's record {offset} has offset {record.Offset}; expected offsets 0, 1, ... in order")
            if offset and record.Epoch < initial.log[offset - 1].Epoch:
                raise self.error(statement, f"impossible initial state: the epoch of the log goes down at offset {offset} ({initial.log[offset - 1].Epoch} then {record.Epoch})")
        if kraft and initial.log and initial.log[-1].Epoch > initial.epoch:
            raise self.error(statement, f"impossible initial state: the log holds epoch {initial.log[-1].Epoch}, beyond the node's epoch {initial.epoch}")
        if not 0 <= initial.high_watermark <= len(initial.log):
            raise self.error(statement, f"impossible initial state: high_watermark {initial.high_watermark} is beyond the log's end {len(initial.log)}")

    def step(self, statement: lark.Tree, number: int, header: dict[str, object]) -> Step:
        source, *clauses = statement.children
        event = self.event(source, header)
        expect, state = self.outcome(event, header, [clause for clause in clauses if clause.data.startswith("expect_")])
        rules, note, errors, allowed = (), event_text(event), error_names(expect), []
        for clause in clauses:
            if clause.data == "rules":
                rules = tuple(str(rule) for rule in clause.children)
            elif clause.data == "note":
                note = self.string(clause.children[0])
            elif clause.data == "errors":
                errors = {self.string(pair.children[0]): str(pair.children[1]) for pair in clause.children}
            elif clause.data == "alternative":
                allowed.append(self.alternative(event, header, clause))
        return Step(step=number, input=event, expect=expect, errors=errors, state=state, rules=rules, note=note, allowed=tuple(allowed))

    def alternative(self, event: object, header: dict[str, object], clause: lark.Tree) -> Alternative:
        choices = [child for child in clause.children if isinstance(child, lark.Token)]
        expect, state = self.outcome(event, header, [child for child in clause.children if isinstance(child, lark.Tree)])
        return Alternative(choices=dict(str(choice).split("=", 1) for choice in choices), expect=expect, state=state)

    def action_step(self, statement: lark.Tree, header: dict[str, object]) -> ClusterStep:
        source, *clauses = statement.children
        action = self.action(source, header)
        if clauses and clauses[0].data == "choosing":
            action = self.chosen(action, clauses.pop(0), header)
        violated, holds, states, in_flight = [], [], [], []
        for clause in clauses:
            if clause.data == "describe":
                if "partition" in header:
                    raise self.error(clause, "describe shows a KRaft quorum; an ISR partition has none")
                continue
            if clause.data == "expect_in_flight":
                in_flight.append(self.envelope(clause.children, header))
            elif clause.data == "expect_property":
                verdict, *rules = clause.children
                known = ISR_PROPERTIES if "partition" in header else PROPERTIES
                for rule in rules:
                    if str(rule) not in known:
                        raise self.error(rule, f"unknown safety property {str(rule)!r}; expected one of {', '.join(known)}")
                (violated if str(verdict) == "violated" else holds).extend(str(rule) for rule in rules)
            else:
                node, role, *kwargs = clause.children
                state = self.state(lark.Tree("expect_state", [role, *kwargs], clause.meta))
                states.append((self.node_id(node, header), state))
        describe = any(clause.data == "describe" for clause in clauses)
        return ClusterStep(action=action, violated=tuple(violated), holds=tuple(holds), states=tuple(states), in_flight=tuple(in_flight), describe=describe)

    def chosen(self, action: Action | IsrAction | UntilQuiet, clause: lark.Tree, header: dict[str, object]) -> Action:
        """`choosing POINT=ALTERNATIVE ...`: the alternatives the stepped node takes (model/choices.py)."""
        if "partition" in header or type(action) in (UntilQuiet, Drop):
            raise self.error(clause, "choosing belongs to an action that steps a KRaft node")
        try:
            picks = parse_picks(",".join(str(choice) for choice in clause.children))
        except ValueError as error:
            raise self.error(clause, str(error)) from None
        return msgspec.structs.replace(action, picks=picks)

    def envelope(self, parts: list, header: dict[str, object]) -> Envelope:
        """`from S to D: REQUEST`, or `from S to D: RESPONSE for REQUEST`: a message in flight."""
        sender, receiver, message, *answered = parts
        if answered:
            request = self.message(answered[0], REQUEST_TYPES, "a request")
            sent = self.message(message, (RESPONSE_FOR[type(request)],), f"the response to a {type(request).__name__}")
        else:
            request, sent = None, self.message(message, REQUEST_TYPES, "a request (a response names the request it answers: RESPONSE for REQUEST)")
        return Envelope(source=self.node_id(sender, header), destination=self.node_id(receiver, header), message=sent, request=request)

    def action(self, source: lark.Tree, header: dict[str, object]) -> Action | IsrAction | UntilQuiet:
        kind, children = source.data, source.children
        isr = "partition" in header
        word = str(children[0]) if kind in ("node_action", "deliver") else {"fire": "timer", "drop": "drop", "shrink_at": "shrink_isr", "elect": "elect", "power_failure": "power_failure"}.get(kind)
        if word in (_ISR_ONLY if not isr else _KRAFT_ONLY):
            raise self.error(source, f"{word} is {'an ISR partition' if word in _ISR_ONLY else 'a KRaft cluster'}'s action; expected one of {', '.join(_KRAFT_ACTIONS if not isr else _ISR_ACTIONS)}")
        if kind == "quiet":
            return UntilQuiet()
        if kind == "power_failure":
            return self.keyword_struct(kind, source)
        if kind in ("deliver", "drop"):
            envelope = self.envelope(children[1:] if kind == "deliver" else children, header)
            return Deliver(envelope=envelope, duplicate=str(children[0]) == "duplicate") if kind == "deliver" else Drop(envelope=envelope)
        node = self.node_id(children[1] if kind == "node_action" else children[0], header)
        if kind == "fire":
            return Fire(node=node, timer=self.event(lark.Tree("timer", [children[1]], source.meta), header).kind)
        if kind == "append_at":
            return Append(node=node, value=self.number(children[1]))
        if kind == "shrink_at":
            return Shrink(node=node, replica=self.node_id(children[1], header))
        if kind == "elect":
            return Elect(node=node)
        return {"resign": ResignLeader, "crash": CrashNode, "restart": RestartNode, "fetch_next": StartFetch}[str(children[0])](node=node)

    def event(self, source: lark.Tree, header: dict[str, object]) -> object:
        kind, children = source.data, source.children
        if kind == "request":
            message = self.message(children[1], REQUEST_TYPES, "a request")
            return Request(source=self.node_id(children[0], header, admin=True), message=message)
        if kind == "response":
            request = self.message(children[2], REQUEST_TYPES, "a request")
            message = self.message(children[1], (RESPONSE_FOR[type(request)],), f"the response to a {type(request).__name__}")
            return Response(source=self.node_id(children[0], header), message=message, request=request)
        if kind == "timer":
            kinds = [timer.value for timer in TimerKind]
            if str(children[0]) not in kinds:
                raise self.error(children[0], f"unknown timer {str(children[0])!r}; expected {_one_of(kinds)}")
            return Timer(kind=TimerKind(str(children[0])))
        if kind == "append":
            return ClientAppend(value=self.number(children[0]))
        if kind == "bare":
            return _BARE[str(children[0])]()
        if kind == "shrink_isr":
            return ShrinkIsr(replica=self.node_id(children[0], header))
        if kind == "power_loss":
            return PowerLoss(keep=self.number(children[0]))
        partition = self.keyword_struct(kind, source)
        return Startup(partition=partition) if kind == "startup" else partition

    def node_id(self, token: lark.Token, header: dict[str, object], admin: bool = False) -> int:
        """A node the scenario names: a member of the cluster (or -1, an admin client, for a request)."""
        node = self.number(token)
        members = header["members"]
        if node not in members and not (admin and node == -1):
            raise self.error(token, f"unknown node {node}; expected one of {', '.join(map(str, members))}{' or -1 (an admin client)' if admin else ''}")
        return node

    def message(self, tree: lark.Tree, kinds: tuple[type, ...], what: str) -> msgspec.Struct:
        name = tree.children[0]
        if STRUCTS.get(str(name)) not in kinds:
            raise self.error(name, f"expected {what} message: {_one_of([kind.__name__ for kind in kinds])}, got {str(name)!r}")
        return as_carried(self.typed(tree, STRUCTS[str(name)], self.value(tree)))

    def outcome(self, event: object, header: dict[str, object], clauses: list[lark.Tree]) -> tuple[Outputs, Observed | None]:
        """What a step (or one of its alternatives) expects; a response answers the step's request."""
        answers = (RESPONSE_FOR[type(event.message)],) if type(event) is Request else _RESPONSES
        what = f"the response to a {type(event.message).__name__}" if type(event) is Request else "a response"
        found: dict[str, object] = {}
        sends = []
        held = []  # answers to earlier steps' requests
        timers: dict[str, int] = {}
        state = None
        for clause in clauses:
            kind = clause.data.removeprefix("expect_")
            if kind in found or (kind == "state" and state is not None):
                raise self.error(clause, f"a second expect {kind} for this outcome")
            if kind == "timer":
                name, ms = clause.children
                kinds = [timer.value for timer in TimerKind]
                if str(name) not in kinds:
                    raise self.error(name, f"unknown timer {str(name)!r}; expected {_one_of(kinds)}")
                if str(name) in timers:
                    raise self.error(clause, f"a second expect timer {name} for this outcome")
                timers[str(name)] = self.number(ms)
            elif kind == "response":
                found["response"] = self.message(clause.children[0], answers, what)
            elif kind == "send":
                destination, message = clause.children
                sends.append(Send(destination=self.node_id(destination, header), message=self.message(message, REQUEST_TYPES, "a request")))
            elif kind == "answer":
                destination, message, request = clause.children
                asked = self.message(request, REQUEST_TYPES, "a request")
                given = self.message(message, (RESPONSE_FOR[type(asked)],), f"the response to a {type(asked).__name__}")
                held.append(Answer(destination=self.node_id(destination, header), message=given, request=asked))
            elif kind == "shutdown":
                found["shutdown"] = True
            elif kind == "state":
                state = self.state(clause)
            else:
                found[kind] = self.keyword_struct(kind, clause)
        return Outputs(sends=tuple(sends), answers=tuple(held), timers=traces.timers_left(timers), **found), state

    def state(self, clause: lark.Tree) -> Observed:
        role, *kwargs = clause.children
        if str(role) not in _ROLES:
            raise self.error(role, f"unknown role {str(role)!r}; expected one of {', '.join(_ROLES)}")
        fields = {"role": str(role)} | STATE_DEFAULTS | self.kwargs(Observed, kwargs, skip=("role",))
        fields.setdefault("log_end_offset", log_end(tuple(tuple(entry) for entry in fields["log"])))
        return self.typed(clause, Observed, fields)

    def keyword_struct(self, keyword: str, statement: lark.Tree) -> msgspec.Struct:
        kind = KEYWORD_STRUCTS[keyword]
        return self.typed(statement, kind, self.kwargs(kind, [child for child in statement.children if isinstance(child, lark.Tree)]))

    def kwargs(self, kind: type, kwargs: list[lark.Tree], skip: tuple[str, ...] = ()) -> dict[str, object]:
        fields = [name for name in kind.__struct_fields__ if name not in skip]
        found: dict[str, object] = {}
        for kwarg in kwargs:
            name, value = kwarg.children
            if str(name) not in fields:
                raise self.error(name, f"{kind.__name__} has no field {str(name)!r}; expected one of {', '.join(fields)}")
            if str(name) in found:
                raise self.error(name, f"field {str(name)!r} given twice")
            found[str(name)] = self.value(value, str(name))
        return found

    def value(self, tree: lark.Tree | lark.Token, field: str = "") -> object:
        """A value as plain data, structs as tagged dicts, for msgspec to convert to its type."""
        kind = tree.data
        children = tree.children
        if kind == "int":
            return self.number(children[0])
        if kind == "string":
            return self.string(children[0])
        if kind == "name":
            return self.name(children[0], field)
        if kind == "list":
            return [self.value(item) for item in children]
        if kind == "log":
            return [entry for part in children for entry in self.entries(part)]
        name = str(children[0])
        if name not in STRUCTS:
            raise self.error(children[0], f"unknown message or struct {name!r}; expected one of {', '.join(sorted(STRUCTS))}")
        struct = STRUCTS[name]
        tag = struct.__struct_config__.tag
        return ({"type": tag} if tag is not None else {}) | self.kwargs(struct, children[1:])

    def name(self, token: lark.Token, field: str) -> object:
        if is_error_field(field):
            if str(token) not in ERROR_CODES:
                raise self.error(token, f"unknown error code {str(token)!r}; expected a number or a Kafka error name (spec/errors.toml)")
            return ERROR_CODES[str(token)]
        if str(token) not in _LITERALS:
            raise self.error(token, f"unexpected name {str(token)!r}; expected a number, a string, true, false, null, a list, Struct(...) or an epoch range")
        return _LITERALS[str(token)]

    def entries(self, part: lark.Tree) -> list[object]:
        """An epoch range: (offset, epoch) pairs, or with values in braces, records."""
        head, *values = part.children
        epoch, bounds = str(head)[1:].split("[", 1)
        epoch, first, last = (self.number(head, text) for text in (epoch, *bounds.rstrip("]").split("..")))
        if last < first:
            raise self.error(head, f"epoch range {_shortened(head)} ends before it starts; expected eEPOCH[FIRST..LAST] with FIRST <= LAST")
        offsets = range(first, last + 1)
        self.range_records += last - first + 1  # len() of a range beyond 2**63 raises
        if self.range_records > MAX_RANGE_RECORDS:
            raise self.error(head, f"epoch range {_shortened(head)} takes the file's logs beyond {MAX_RANGE_RECORDS:,} records, the most a scenario file holds")
        if not values:
            return [[offset, epoch] for offset in offsets]
        if len(values) != len(offsets):
            raise self.error(head, f"epoch range {head} holds {len(offsets)} records and gives {len(values)} values; expected one value per offset")
        return [{"type": "Record", "Offset": offset, "Epoch": epoch, "Value": self.value(value)} for offset, value in zip(offsets, values)]

    def number(self, where: lark.Token, text: str | None = None) -> int:
        """`text` (the token's own by default) as an integer a trace can hold; its digits are
        counted before it is converted, as Python refuses to convert thousands of them."""
        text = str(where) if text is None else text
        if len(text.lstrip("-").lstrip("0")) <= 20 and int(text) in traces.INTEGERS:
            return int(text)
        raise self.error(where, f"the number {_shortened(text)} is out of range; expected {traces.INTEGERS.start} to {traces.INTEGERS.stop - 1} (64 bits, as a trace holds)")

    def string(self, token: lark.Token) -> str:
        """A quoted string; one holding a lone surrogate (`\\ud800`) UTF-8 cannot encode, nor a trace hold."""
        text = json.loads(str(token))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise self.error(token, "a string holding a lone surrogate (\\ud800 to \\udfff without its pair); expected text UTF-8 can encode") from None
        return text

    def typed(self, where: lark.Tree, kind: type, data: object) -> msgspec.Struct:
        try:
            return msgspec.convert(data, kind)
        except msgspec.ValidationError as error:
            raise self.error(where, f"not a valid {kind.__name__}: {error}") from None


def _shortened(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _placed(comments: list[tuple[int, str]], first: int, step_lines: list[int]) -> dict[int, list[str]]:
    """Each comment by the step it comes before (0: the header; one past the last step: the end)."""
    placed: dict[int, list[str]] = {}
    for line, text in comments:
        number = next((index for index, start in enumerate(step_lines, start=1) if start > line), len(step_lines) + 1)
        placed.setdefault(0 if line < first else number, []).append(text)
    return placed
