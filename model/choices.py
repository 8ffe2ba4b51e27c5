"""Choice points: where KIP-595 allows more than one behaviour, and the alternatives it allows.

A handler never hides such a choice: it asks `config.choices.pick(NAME)` and acts on the
alternative it gets. `Choices` answers with fixed picks (the first alternative of each point,
the model's reading, unless told otherwise); `allowed_transitions` re-runs a step under every
alternative of every point the step consulted, so the model can say what the specification
allows at any step. Exploration takes the defaults; replay accepts any allowed outcome.
"""

import functools
import random
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import msgspec


ONE_WAY = "one way"  # an implementation resolves the point one way throughout (an order of checks, an error code, a policy)
EACH_TIME = "each time"  # it may resolve it anew at each occurrence (a random draw, a timer that has or has not fired)


class ChoicePoint(NamedTuple):
    name: str  # the rule ID the choice belongs to
    question: str  # what is left open, in words
    alternatives: tuple[str, ...]  # the first is the model's default reading
    why: str  # where the specification leaves it open
    scope: str = ONE_WAY  # ONE_WAY or EACH_TIME: replay holds a trace to the first alternative it shows of a one-way point
    rule: str = ""  # the catalogue's rule the point belongs to, where its name is not one (COMMON-4B: COMMON-4)


ONE_VOTER = "one-voter"  # OBS-2's alternative family: "one-voter:N" sends the Fetch to voter N only

CHOICE_POINTS: dict[str, ChoicePoint] = {
    point.name: point
    for point in (
        ChoicePoint(
            "FETCH-REQ-5",
            "a non-leader receiving a Fetch of another epoch: which check comes first",
            ("epoch-first", "leadership-first"),
            "the KIP does not order NOT_LEADER_OR_FOLLOWER against the epoch checks (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH); "
            "the same order applies to OffsetsForLeaderEpoch (K101-4)",
        ),
        ChoicePoint(
            "FETCH-REQ-3",
            "the error code of a Fetch answered with DivergingEpoch",
            ("none", "offset-out-of-range"),
            "step 3 of Fetch handling sets only DivergingEpoch; the common error list gives OFFSET_OUT_OF_RANGE to a fetcher that must truncate. "
            "A fetcher truncates on DivergingEpoch under either code",
        ),
        ChoicePoint(
            "FETCH-REQ-3A",
            "a Fetch whose LastFetchedEpoch is below every epoch of the leader's log: the Epoch of its DivergingEpoch",
            ("zero", "last-fetched-epoch"),
            "step 3 sets DivergingEpoch to the largest epoch below LastFetchedEpoch, and the leader has none; either names offset 0, the "
            "start of the leader's first epoch, so the fetcher truncates its whole log: Epoch 0, or LastFetchedEpoch itself, as Kafka's "
            "server log answers an epoch below its first (LeaderEpochFileCache.endOffsetFor)",
        ),
        ChoicePoint(
            "VOTER-ONLY-1",
            "an observer receiving BeginQuorumEpoch",
            ("reject", "follow"),
            "the KIP says only voters receive BeginQuorumEpoch, not how an observer answers one: refuse it "
            "(INCONSISTENT_VOTER_SET) or take the announced leader as its own",
        ),
        ChoicePoint(
            "END-REQ-3",
            "EndQuorumEpoch naming another leader than the one the voter knows for that epoch",
            ("unknown-leader-epoch", "invalid-quorum-state", "accept"),
            "the KIP refuses an EndQuorumEpoch only \"if the leader id for this epoch is unknown\", without naming a code; INVALID_QUORUM_STATE "
            "fits a different known leader as well, and a voter that knows a leader for the epoch may, by the letter, go on to the successors",
        ),
        ChoicePoint(
            "END-REQ-3B",
            "an EndQuorumEpoch with LeaderId -1",
            ("impossible", "unknown-leader"),
            "the KIP sends EndQuorumEpoch from a shutting-down leader \"or a candidate if there is an election in progress\", whose LeaderId "
            "can only be -1: refused as impossible (COMMON-4), or handled as a request whose leader the voter does not know (END-REQ-3)",
            ONE_WAY,
            "END-REQ-3",
        ),
        ChoicePoint(
            "COMMON-4",
            "a request with an impossible field and a stale epoch: which refusal it gets",
            ("fields-first", "epoch-first", "offsets-first"),
            "the KIP has no rule for impossible field values, so nothing orders their refusal (INVALID_REQUEST, INCONSISTENT_VOTER_SET) "
            "against the stale epoch's FENCED_LEADER_EPOCH (COMMON-1); offsets-first checks the offsets and last epochs a request "
            "carries before its epoch, the ids and epoch it names after",
        ),
        ChoicePoint(
            "COMMON-4B",
            "the code a request no correct sender can produce is refused with (its state unchanged)",
            ("by-field", "invalid-request", "inconsistent-voter-set", "fenced-leader-epoch", "unknown-leader-epoch", "invalid-quorum-state"),
            "the KIP never names INVALID_REQUEST and has no rule for impossible field values; any refusal it defines fits. by-field: "
            "INVALID_REQUEST for an impossible value, INCONSISTENT_VOTER_SET for a leader or successor outside the voter set. "
            "The code may follow the field, so a node may answer each case its own way",
            EACH_TIME,
            "COMMON-4",
        ),
        ChoicePoint(
            "END-REQ-5",
            "the leader and epoch in the answer of the first preferred successor, which stands at once",
            ("after-standing", "before-standing"),
            "the KIP says the first successor becomes a candidate immediately, not whether its EndQuorumEpoch response is built before or after",
        ),
        ChoicePoint(
            "ELECT-6",
            "a candidate refused by a majority: when it stands again",
            ("after-backoff", "at-once", "on-request-timer"),
            "the KIP's backoff before the next election is random, up to quorum.election.backoff.max.ms; a draw of 0 stands again at once, "
            "one shorter than the request timeout when the request timer fires",
            EACH_TIME,
        ),
        ChoicePoint(
            "ELECT-2B",
            "a prospective (Options.pre_vote) that knows no leader, out of time before a majority answered: what it does",
            ("ask-again", "unattached-first"),
            "KIP-996's prospective gives up on its election timeout; without a leader to go back to it may ask again at once, or wait "
            "unattached in its epoch, its vote kept, and stand again on its election timer (Kafka: transitionToUnattached with the "
            "timer already run out, so the next poll stands again, after any message already queued)",
            EACH_TIME,
            "ELECT-2",
        ),
        ChoicePoint(
            "VOTE-REQ-3A",
            "a Vote in the voter's own epoch, not voted in, while it knows that epoch's leader",
            ("refuse", "grant-if-up-to-date"),
            "the KIP's steps cover an epoch already voted in and a larger epoch only; Raft grants whenever the vote is free and the log up to date",
        ),
        ChoicePoint(
            "VOTE-REQ-4A",
            "where the check that the candidate is a voter comes",
            ("after-vote-checks", "before-vote-checks"),
            "the KIP places it under a larger epoch (step 4.1); an implementation may check membership before looking at its vote",
        ),
        ChoicePoint(
            "VOTE-REQ-4C",
            "a Vote refused because its candidate is not a voter: the answer, and when the voter stands",
            ("refuse-and-wait", "refuse", "refuse-without-code", "stand"),
            "step 4.1 says \"reject the vote ... accept the epoch bump and start a new election itself\", with neither a code nor a moment; "
            "in the voter's own epoch no step applies. refuse-and-wait answers INCONSISTENT_VOTER_SET and stands when its election timer "
            "expires, refuse leaves its timers alone, refuse-without-code answers NONE, stand answers and stands at once",
            EACH_TIME,
            "VOTE-REQ-4A",
        ),
        ChoicePoint(
            "VOTER-ONLY-1B",
            "an observer receiving a Vote",
            ("reject", "refuse", "adopt-epoch"),
            "the KIP says observers may not vote, not how one answers a Vote: INCONSISTENT_VOTER_SET, a refusal with no error, "
            "or the Vote's handling up to the vote (a larger epoch taken, its leader then looked for) and a refusal",
            ONE_WAY,
            "VOTER-ONLY-1",
        ),
        ChoicePoint(
            "QSTATE-4B",
            "a voter restarting with its own vote in its quorum-state file and no leader",
            ("stand", "look-for-leader"),
            "the KIP's start-up sends Fetch to the voters first (BOOT-1) and stands when the election timer expires; "
            "a node that was a candidate may as well resume its candidacy (Raft)",
            ONE_WAY,
            "QSTATE-4",
        ),
        ChoicePoint(
            "COMMON-3",
            "a Vote response naming a leader or a larger epoch",
            ("follow", "candidate-only"),
            "the KIP's Vote response handling ignores a response once the node is no longer a candidate, and does not follow a leader "
            "named in it; following it is the Raft summary's rule for any response",
        ),
        ChoicePoint(
            "COMMON-3B",
            "a node that drops responses it no longer awaits (Options.stale_responses_ignored), answered after a restart or a change of "
            "role in its epoch: which of two identical requests the response answers",
            ("latest", "earlier"),
            "a request sent again after a restart or a change of role can be identical to one sent before it, and a response carries no "
            "more than the request it answers; an implementation that forgets its requests on every change of state (Kafka: "
            "RequestManager.resetAll) drops the answer to the earlier one",
            EACH_TIME,
            "COMMON-3",
        ),
        ChoicePoint(
            "FETCH-RESP-3",
            "a Fetch response of the node's epoch that answers another Fetch than the one in flight",
            ("ignore", "apply", "take-as-answer"),
            "the KIP has no notion of a stale answer: a node may drop it, apply a late error-free one from its leader "
            "(records that start at its log end, the high watermark) and keep waiting for the Fetch in flight, or handle it "
            "as the answer it awaits (from its leader, or from a voter while it knows none)",
        ),
        ChoicePoint(
            "OBS-2",
            "where a node that knows no leader sends its Fetch (discovery, BOOT-1, FETCH-RESP-1)",
            ("every-voter", ONE_VOTER),
            "the KIP says a random voter; sending to every voter covers every random choice at once",
            EACH_TIME,
        ),
        ChoicePoint(
            "BOOT-1B",
            "a voter looking for the leader since it started (BOOT-1): when it sends its Fetch again",
            ("wait", "re-send"),
            "the KIP's voter \"keeps retrying Fetch to random voters until the election timeout expires\" without saying when: "
            "on an answer that names no leader, on its request timer, or not before it stands",
            EACH_TIME,
            "BOOT-1",
        ),
        ChoicePoint(
            "FETCH-SEND-1",
            "a voter that looks for the leader whenever it knows none (Options.unattached_discovery), told of a new epoch without one: when its Fetch goes out",
            ("at-once", "on-request-timer"),
            "the KIP has a voter look for the leader only on starting (BOOT-1); where it looks whenever it knows none, nothing says the Fetch "
            "is sent in the same step rather than when a connection is ready (Kafka: RequestManager.isReady), at the latest on its request timer",
            EACH_TIME,
        ),
        ChoicePoint(
            "RETRY-1",
            "what the request timer re-sends at a candidate (or prospective)",
            ("votes", "nothing"),
            "the KIP re-sends Vote requests without saying on which timer; an implementation may re-send on a backoff of its own",
        ),
        ChoicePoint(
            "BEGIN-RESP-1",
            "what the request timer re-sends at a leader",
            ("unendorsed", "nothing"),
            "the KIP re-sends BeginQuorumEpoch to the voters that have not endorsed the leader without saying on which timer; "
            "one of the leader's own (Kafka's: half the fetch timeout) may or may not have fired when the request timer does; "
            "where it has, Kafka's goes to every other voter, endorsed or not (Options.begin_epoch_heartbeat)",
            EACH_TIME,
        ),
    )
}


def alternatives(name: str, voters: tuple[int, ...], node_id: int) -> tuple[str, ...]:
    """The alternatives of a choice point for one node; OBS-2's one-voter family has one per other voter."""
    found: list[str] = []
    for alternative in CHOICE_POINTS[name].alternatives:
        if alternative == ONE_VOTER:
            found += [f"{ONE_VOTER}:{v}" for v in voters if v != node_id]
        else:
            found.append(alternative)
    return tuple(found)


def rule_of(name: str) -> str:
    """The rule ID of the catalogue (spec/rules.toml) a choice point belongs to."""
    return CHOICE_POINTS[name].rule or name


def default(name: str) -> str:
    return CHOICE_POINTS[name].alternatives[0]


Picks = tuple[tuple[str, str], ...]
"""Alternatives fixed by name, sorted: what a step or a run took where it was not the default."""


class Choices(msgspec.Struct, frozen=True):
    """Fixed picks; every other point takes its default (the model's reading)."""

    picks: Picks = ()

    def pick(self, name: str) -> str:
        for fixed, alternative in self.picks:
            if fixed == name:
                return alternative
        return default(name)


def parse_picks(text: str, voters: tuple[int, ...] | None = None) -> Picks:
    """'FETCH-REQ-5=leadership-first,OBS-2=one-voter:2' as picks; ValueError naming what is wrong."""
    picks = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, alternative = item.partition("=")
        if name not in CHOICE_POINTS:
            raise ValueError(f"unknown choice point {name!r}; known: {', '.join(CHOICE_POINTS)}")
        allowed = CHOICE_POINTS[name].alternatives
        family = alternative.split(":", 1)[0] if alternative.startswith(f"{ONE_VOTER}:") else alternative
        if family not in allowed or (family == ONE_VOTER and not alternative[len(ONE_VOTER) + 1 :].isdigit()):
            shown = ", ".join(f"{a}:N" if a == ONE_VOTER else a for a in allowed)
            raise ValueError(f"{name} has no alternative {alternative!r}; it has {shown}")
        picks[name] = alternative
    return tuple(sorted(picks.items()))


class _Trail:
    """Choices that note every point a step consults (used only to enumerate a step's outcomes)."""

    def __init__(self, picks: dict[str, str]) -> None:
        self.picks = picks
        self.consulted: list[str] = []

    def pick(self, name: str) -> str:
        self.consulted.append(name)
        return self.picks.get(name) or default(name)


class RandomChoices:
    """Choices drawn at random, for precision tests: a seeded implementation that resolves each
    one-way point its own way throughout, and draws each each-time point anew at each step
    (`next_step`), as an implementation may."""

    def __init__(self, seed: int, voters: tuple[int, ...], node_id: int, fixed: Picks = ()) -> None:
        """`fixed`: points not drawn (a profile's pins)."""
        self.random = random.Random(seed)
        self.voters = voters
        self.node_id = node_id
        self.fixed = dict(fixed)
        self.drawn: dict[str, str] = dict(fixed)

    def pick(self, name: str) -> str:
        if name not in self.drawn:
            self.drawn[name] = self.random.choice(alternatives(name, self.voters, self.node_id))
        return self.drawn[name]

    def next_step(self) -> None:
        """Forget the each-time draws: the next step draws them anew."""
        self.drawn = {name: pick for name, pick in self.drawn.items() if name in self.fixed or CHOICE_POINTS[name].scope == ONE_WAY}


class Outcome(NamedTuple):
    picks: Picks  # the alternatives taken at the points the step consulted
    transition: Any  # the step's Transition
    consulted: tuple[str, ...]  # the points it consulted, in order


def outcomes(step: Callable[[Any, Any, Any], Any], config: Any, state: Any, event: Any) -> tuple[Outcome, ...]:
    """Every outcome the specification allows for one step: the default first, then each
    combination of alternatives at the points the step consults (a point consulted only under
    some alternative is branched too); points the configuration's choices fix (a profile's pins)
    are not branched. A configuration without choices has one outcome."""
    if not hasattr(config, "choices"):
        return (Outcome((), step(config, state, event), ()),)
    base = dict(config.choices.picks)
    found: list[Outcome] = []
    seen: set[Picks] = set()
    pending: list[dict[str, str]] = [{}]
    while pending:
        fixed = pending.pop(0)
        key = tuple(sorted(fixed.items()))
        if key in seen:
            continue
        seen.add(key)
        trail = _Trail(base | fixed)
        transition = step(msgspec.structs.replace(config, choices=trail), state, event)
        consulted = tuple(dict.fromkeys(trail.consulted))
        taken = tuple(sorted((name, trail.picks.get(name) or default(name)) for name in consulted))
        found.append(Outcome(taken, transition, consulted))
        for name in consulted:
            if name not in fixed and name not in base:
                excluded = -1 if config.options.discovery_includes_self else config.node_id  # OBS-2's voters: Options.discovery_includes_self
                pending += [fixed | {name: a} for a in alternatives(name, config.voters, excluded)[1:]]
    return tuple(found)


@functools.lru_cache(maxsize=1024)
def allowed_transitions(step: Callable[[Any, Any, Any], Any], config: Any, state: Any, event: Any) -> tuple[Outcome, ...]:
    """outcomes(), remembered for recent steps: replay asks again for the steps its check of the
    trace just asked for (the model is pure, its states and events immutable)."""
    return outcomes(step, config, state, event)


def taken(outcome: Outcome, choices: Choices) -> Picks:
    """The alternatives an outcome took where `choices` (a node's own, its profile's pins) would not have."""
    return tuple((name, pick) for name, pick in outcome.picks if pick != choices.pick(name))


def with_picks(choices: Choices, picks: Picks) -> Choices:
    """`choices` with `picks` fixed as well (a pick of the same point replaces the earlier one)."""
    return Choices(tuple(sorted((dict(choices.picks) | dict(picks)).items()))) if picks else choices


def each_single_alternative(voters: tuple[int, ...] = (1, 2, 3), node_id: int = 1) -> Iterator[Picks]:
    """Every non-default alternative of every point, one at a time (the others at their default)."""
    for name in CHOICE_POINTS:
        for alternative in alternatives(name, voters, node_id)[1:]:
            yield ((name, alternative),)
