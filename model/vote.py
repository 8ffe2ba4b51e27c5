"""Vote: the candidate's request (ELECT-4) and its handling at voters and at the candidate."""

from model import log as logs
from model.config import NodeConfig
from model.messages import VoteRequest, VoteResponse
from model.state import NodeState, Role
from model.transitions import (
    awaits,
    lost,
    Transition,
    as_sent,
    become_candidate,
    become_leader,
    become_unattached,
    dropped,
    election_timer,
    late_voter_set_refusal,
    last_record_offset,
    lose_pre_vote,
    observe_leader,
    refused_as_invalid,
    replace,
    shut_down,
    stand,
    standing_rules,
    vote_request,
)
from model.events import Response, Send
from model.validity import ahead_of_epoch_check, vote_refusal
from spec import errors


def cluster_id_conflicts(config: NodeConfig, cluster_id: str | None) -> bool:
    """BOOT-2: only a non-null id that differs from a non-null cached id is a conflict."""
    return cluster_id is not None and config.cluster_id is not None and cluster_id != config.cluster_id


def handle_vote_request(config: NodeConfig, state: NodeState, source: int, request: VoteRequest) -> Transition:
    def answer(s: NodeState, granted: bool, rules: tuple[str, ...], *, error: int = errors.NONE, top_error: int = errors.NONE, extra=()) -> Transition:
        response = VoteResponse(
            ErrorCode=top_error, PartitionErrorCode=error, LeaderId=s.leader_id, LeaderEpoch=s.epoch, VoteGranted=granted
        )
        return Transition(s, extra + (Send(destination=source, message=as_sent(config, response)),), rules + ("COMMON-2",))

    if request.PreVote and not config.options.pre_vote:
        return answer(state, False, ("VOTE-REQ-1",), top_error=errors.UNSUPPORTED_VERSION)  # a version this voter predates (KIP-996)
    observer = not config.is_voter and not config.options.voter_set_unchecked
    if observer:
        reading = config.choices.pick("VOTER-ONLY-1B")
        if reading != "adopt-epoch":
            return answer(state, False, ("VOTER-ONLY-1",), error=errors.INCONSISTENT_VOTER_SET if reading == "reject" else errors.NONE)
    if cluster_id_conflicts(config, request.ClusterId):
        return answer(state, False, ("VOTE-REQ-1",), top_error=errors.INCONSISTENT_CLUSTER_ID)
    refusal = ahead_of_epoch_check(config, vote_refusal(config, request), request.CandidateEpoch, state.epoch)
    if refusal is not None:
        return answer(state, False, ("COMMON-4",), error=refusal)
    if request.CandidateEpoch < state.epoch:
        return answer(state, False, ("VOTE-REQ-2", "COMMON-1"), error=errors.FENCED_LEADER_EPOCH)
    outside = late_voter_set_refusal(config, request.CandidateId, "VOTE-REQ-4A")
    if outside:
        return answer(state, False, outside, error=errors.INCONSISTENT_VOTER_SET)

    rules: tuple[str, ...] = ()
    outputs: tuple = ()
    if request.CandidateEpoch > state.epoch:
        state, outputs = become_unattached(config, state, request.CandidateEpoch)
        rules = ("VOTE-REQ-4",)
    if observer:  # VOTER-ONLY-1B's adopt-epoch: a larger epoch taken (an observer then looks for its leader), never a vote
        return answer(state, False, rules + ("VOTER-ONLY-1",), extra=outputs)
    up_to_date = logs.is_up_to_date(request.LastOffsetEpoch, last_record_offset(config, request), state.log)
    if request.PreVote:
        return answer(state, grants_pre_vote(state, up_to_date), rules + ("VOTE-REQ-4B", "VOTE-LOG-1"), extra=outputs)
    stranger = request.CandidateId not in config.voters and not config.options.voter_set_unchecked
    def refuse_stranger() -> Transition:
        """VOTE-REQ-4A, answered as the VOTE-REQ-4C choice point says: "reject the vote ... accept
        the epoch bump and start a new election itself" names neither a code nor a moment."""
        reading = config.choices.pick("VOTE-REQ-4C")
        code = errors.NONE if reading == "refuse-without-code" else errors.INCONSISTENT_VOTER_SET
        timer = (election_timer(config),) if reading == "refuse-and-wait" else ()
        refused = answer(state, False, rules + ("VOTE-REQ-4A",), error=code, extra=outputs + timer)
        if reading != "stand":
            return refused
        candidate, standing = stand(config, state)
        return Transition(candidate, refused.outputs + standing, refused.rules + standing_rules(candidate))

    if stranger and (state.voted_id != -1 or state.leader_id != -1) and config.choices.pick("VOTE-REQ-4A") == "before-vote-checks":
        return refuse_stranger()
    if state.voted_id != -1:
        again = state.voted_id == request.CandidateId and not (state.role == Role.FOLLOWER and config.options.follower_refuses_votes)
        return answer(state, again, rules + ("VOTE-REQ-3", "ELECT-5"), extra=outputs)
    if state.leader_id != -1 and (stranger or config.choices.pick("VOTE-REQ-3A") == "refuse"):
        return answer(state, False, rules + ("VOTE-REQ-3A",), extra=outputs)
    if stranger:
        return refuse_stranger()
    if not up_to_date and not config.options.vote_without_log_check:
        return answer(state, False, rules + ("VOTE-REQ-4B", "VOTE-LOG-1"), extra=outputs)
    voted = replace(state, voted_id=request.CandidateId)
    if voted.role == Role.PROSPECTIVE:
        # Its own pre-vote starts over, bound by the vote it gave: Kafka replaces the
        # ProspectiveState (QuorumState.prospectiveAddVotedState), which forgets the answers it had,
        # and asks again each voter that answered; a request to the others is still in flight.
        answered = (state.granted | state.refused) - {config.node_id}
        voted = replace(voted, granted=frozenset((config.node_id,)), refused=frozenset())
        again = vote_request(config, voted)
        outputs += (election_timer(config),) + tuple(Send(destination=v, message=again) for v in config.voters if v in answered)
    return answer(voted, True, rules + ("VOTE-REQ-4B", "VOTE-LOG-1", "QSTATE-2"), extra=outputs)


def grants_pre_vote(state: NodeState, up_to_date: bool) -> bool:
    """KIP-996: a pre-vote binds nothing, so any up-to-date log gets it, except from a leader and
    from a follower that has heard from its leader (FollowerState.canGrantVote), even once that
    leader has said it resigns: KAFKA-20895, a Kafka defect open in every 4.x release
    (docs/certification/README.md, "Historical bugs")."""
    if state.role == Role.LEADER or (state.role == Role.FOLLOWER and state.fetched_from_leader):
        return False
    return up_to_date


def handle_vote_response(config: NodeConfig, state: NodeState, event: Response) -> Transition:
    response: VoteResponse = event.message
    request: VoteRequest = event.request
    nominee = state.role == (Role.PROSPECTIVE if request.PreVote else Role.CANDIDATE)
    asked = awaits(state, Role.PROSPECTIVE if request.PreVote else Role.CANDIDATE, request.CandidateEpoch)  # the election (or pre-vote) now running asked this
    if config.options.stale_responses_ignored and dropped(config, state, asked and event.source not in state.granted | state.refused):
        # A voter that has answered this election has no request of it in flight any more (one per voter), so a second answer is dropped too.
        return Transition(state, (), ("COMMON-3",))
    if response.ErrorCode == errors.UNSUPPORTED_VERSION and asked and request.PreVote:
        # A voter that predates pre-votes (KIP-996) cannot answer one: stand without it, as Kafka does.
        candidate, outputs = become_candidate(config, state)
        return Transition(candidate, outputs, standing_rules(candidate))
    if response.ErrorCode == errors.INCONSISTENT_CLUSTER_ID:
        return Transition(state, (), ("BOOT-3", "COMMON-3"))
    observed = observe_leader(config, state, response.LeaderId, response.LeaderEpoch)
    if refused_as_invalid(config, state, response.PartitionErrorCode, response.LeaderEpoch, observed):
        return shut_down(state, f"Vote response from {event.source}: INVALID_REQUEST", ("COMMON-3",))
    if observed is not None and config.choices.pick("COMMON-3") == "candidate-only":
        # The KIP's Vote response handling: ignored once no longer a candidate; a candidate
        # takes a larger epoch, as unattached, and follows no leader named in a Vote response.
        if not nominee or response.LeaderEpoch == state.epoch:
            observed = None
        else:
            observed = become_unattached(config, state, response.LeaderEpoch)
    if observed is not None:
        return Transition(observed[0], observed[1], ("COMMON-3", "VOTE-RESP-1"))
    if not asked or response.LeaderEpoch != state.epoch:
        return Transition(state, (), ("VOTE-RESP-1",))
    if not response.VoteGranted:
        refused = replace(state, refused=state.refused | {event.source})
        if lost(config, refused) and request.PreVote and config.options.prospective_never_gives_up:
            return Transition(refused, (), ("VOTE-RESP-2",))  # the faulty variant waits to ask again
        if lost(config, refused) and request.PreVote:
            after, outputs = lose_pre_vote(config, refused)
            return Transition(after, outputs, ("VOTE-RESP-2",))
        if lost(config, refused) and config.choices.pick("ELECT-6") == "at-once":
            again, outputs = stand(config, refused)
            return Transition(again, outputs, ("VOTE-RESP-2",) + standing_rules(again))
        return Transition(refused, (), ("VOTE-RESP-2",))
    candidate = replace(state, granted=state.granted | {event.source})
    if len(candidate.granted) < config.majority:
        return Transition(candidate, (), ("VOTE-RESP-2",))
    if request.PreVote:
        standing, outputs = become_candidate(config, candidate)
        return Transition(standing, outputs, ("VOTE-RESP-2",) + standing_rules(standing))
    leader, outputs = become_leader(config, candidate)
    return Transition(leader, outputs, ("VOTE-RESP-2", "VOTE-RESP-3", "QSTATE-2"))
